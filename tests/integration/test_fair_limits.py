"""Fair limits a key holder cannot break (issue 16, point 3; src/net/server_peers.c).

A node (a peer address: the attackers here connect from 127.0.0.66 and 127.0.0.67, which loopback
routes like 127.0.0.1) that holds the key and opens hundreds of connections, each sending the
header of a frame with a large body or bulk and never the rest, holds only its own share of the
server's memory: everyone else is served as usual, the OSS heartbeats keep coming, and the frames
that stopped are dropped after the frame timeout. A node may keep --max-conns-per-peer
connections, and a server full of busy nodes keeps its last descriptors for nodes with few
(an OSS coming back, the admin tool): a connection past either cap is refused with EUSERS.
"""

import errno
import os
import resource
import statistics
import time

import pytest

import loomwire as w
from loomutil import MiB, closed_now, mds_by_hand, nofile_at_least, parse_any_getstripe, read, wait_until

ATTACKERS = ("127.0.0.66", "127.0.0.67")
OP = {name: row["value"] for name, row in w.read_ops_def().items()}
GETATTR_ROOT = w.cred() + w.ino_req(w.ROOT_INO)
TGT_INACTIVE = 0x4                      # LW_TGT_INACTIVE: the MDS has not heard from the OST


def getattr_seconds(c, n=50):
    """The seconds each of n MDS_GETATTRs of the root took on connection c."""
    took = []
    for _ in range(n):
        t0 = time.monotonic()
        h, body, _ = c.call(OP["MDS_GETATTR"], GETATTR_ROOT)
        took.append(time.monotonic() - t0)
        assert h.status == 0 and w.parse_attr(body)["ino"] == w.ROOT_INO, h
    return took


def stalled_headers(host, port, n, opcode, body_len, bulk_len=0):
    """n authenticated connections from the attackers' addresses (in turn), each sending only the
    header of a frame that claims body_len bytes of body and bulk_len of bulk."""
    out = []
    try:
        for i in range(n):
            c = w.Conn(host, port, timeout=30, source=ATTACKERS[i % len(ATTACKERS)])
            out.append(c)
            c.send_raw(w.pack_header(opcode, req_id=100 + i, body_len=body_len, bulk_len=bulk_len,
                                     bulk_crc=0))
    except BaseException:
        for c in out:
            c.close()
        raise
    return out


def latency_line(what, took):
    return "%s: median %.2f ms, max %.2f ms over %d calls" % (
        what, statistics.median(took) * 1e3, max(took) * 1e3, len(took))


def test_300_stalled_1mib_frames_do_not_freeze_the_mds(cluster):
    timeout = 6
    with nofile_at_least(1024), mds_by_hand(cluster, "--frame-timeout", str(timeout)) as mds:
        host, port = cluster.mds_host, cluster.mds_port
        with w.Conn(host, port, timeout=30) as normal:
            before = getattr_seconds(normal)
            # More than the MDS's whole budget (256 MiB) claimed, from two addresses, then smaller
            # and smaller frames to fill what a budget shared by all would have left.
            socks = stalled_headers(host, port, 300, OP["MDS_SETXATTR"], MiB)
            for k in range(1, 21):
                socks += stalled_headers(host, port, 2, OP["MDS_SETXATTR"], MiB >> k)
            try:
                time.sleep(0.5)   # every header is in, and the MDS has charged what it takes
                dropped = sum(closed_now(c.sock) for c in socks)
                assert not dropped, "%d stalled connections closed at once:\n%s" % (dropped, read(mds.log_path)[-2000:])
                during = getattr_seconds(normal)
                # New clients still authenticate and are served, the admin tool too.
                with w.Conn(host, port, timeout=30) as newcomer:
                    during += getattr_seconds(newcomer, 10)
                cluster.loom("df")
                print(latency_line("before the attack", before))
                print(latency_line("with 300 stalled 1 MiB frames", during))
                # Served before the stalled frames' own timeout: nothing waited for them.
                assert max(during) < timeout, latency_line("during", during)
                # The frames that stopped are dropped, all of them in time: those the attacker's
                # share took first, then those that waited for it.
                left = wait_until(lambda: all(closed_now(c.sock) for c in socks), 8 * timeout + 30, 0.2)
                assert left, "%d of %d stalled connections still open" % (len(socks), sum(
                    not closed_now(c.sock) for c in socks))
            finally:
                for c in socks:
                    c.close()
            # The OSTs stayed active through it (heartbeats are 2 s apart; 10 s of silence marks
            # an OST inactive, and the attack lasted longer).
            gen, table = w.ost_table_on(normal)
            assert table and all(not (e["state"] & TGT_INACTIVE) for e in table.values()), table
            assert normal.ping() == 0
        text = read(mds.log_path)
        stalled = [ln for ln in text.splitlines() if "a frame stopped coming" in ln]
        assert stalled, "no line about the stalled frames:\n" + text[-3000:]
        assert len(stalled) <= 60, "%d lines for 300 stalled frames: not rate-limited" % len(stalled)
        assert "MDS_SETXATTR" in text


def test_80_stalled_16mib_writes_do_not_freeze_an_oss(cluster):
    mnt = cluster.mount()
    cluster.loom("setstripe", "-c", "1", "-i", "0", "/")
    data = os.urandom(8 * MiB + 5)
    idx = 0
    host, port = cluster.oss_addr(cluster.oss_name(idx))
    # More than the OSS's whole budget (1 GiB) claimed, from two addresses.
    socks = stalled_headers(host, port, 80, OP["OST_WRITE"], w.OST_IO.size, 16 * MiB)
    for k in range(1, 25):
        socks += stalled_headers(host, port, 2, OP["OST_WRITE"], w.OST_IO.size, (16 * MiB) >> k)
    try:
        time.sleep(0.5)
        t0 = time.monotonic()
        with open(os.path.join(mnt, "f"), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        took = time.monotonic() - t0
        with open(os.path.join(mnt, "f"), "rb") as f:
            assert f.read() == data
        print("8 MiB written and synced past 80 stalled 16 MiB writes in %.2f s" % took)
        layout = parse_any_getstripe(cluster.loom("getstripe", "/f").stdout)
        assert [i for i, _ in layout.objects] == [idx], layout.objects
        assert not any(closed_now(c.sock) for c in socks), "stalled writes dropped before the timeout"
    finally:
        for c in socks:
            c.close()


def test_one_address_keeps_at_most_its_cap_of_connections(cluster):
    with mds_by_hand(cluster, "--max-conns-per-peer", "8") as mds:
        host, port = cluster.mds_host, cluster.mds_port
        mine = [w.Conn(host, port, source="127.0.0.77") for _ in range(8)]
        try:
            with pytest.raises(w.AuthError) as refused:
                w.Conn(host, port, source="127.0.0.77")
            assert refused.value.status == -errno.EUSERS, refused.value
            # Another address, and the admin tool, are not counted with it.
            with w.Conn(host, port, source="127.0.0.78") as other:
                assert other.ping() == 0
            cluster.loom("ls", "/")
            assert all(c.ping() == 0 for c in mine)
            # One leaves: the address may connect again.
            mine.pop().close()

            def again():
                try:
                    mine.append(w.Conn(host, port, source="127.0.0.77"))
                    return True
                except w.AuthError:
                    return False
            assert wait_until(again, 10, 0.1), "the address was not let in after one of its connections left"
        finally:
            for c in mine:
                c.close()
        text = read(mds.log_path)
        assert "refusing connection" in text and "(--max-conns-per-peer)" in text, text[-3000:]


def test_a_full_server_keeps_room_for_addresses_with_few_connections(cluster):
    with mds_by_hand(cluster) as mds:
        host, port = cluster.mds_host, cluster.mds_port
        cap = len(os.listdir("/proc/%d/fd" % mds.pid)) + 300
        resource.prlimit(mds.pid, resource.RLIMIT_NOFILE, (cap, cap))
        busy = []
        try:
            refused = None
            for k in range(1, 60):              # busy nodes of 24 connections each, until full
                for _ in range(24):
                    try:
                        busy.append(w.Conn(host, port, timeout=10, source="127.0.1.%d" % k))
                    except w.AuthError as e:
                        refused = e
                        break
                if refused:
                    break
            assert refused is not None and refused.status == -errno.EUSERS, \
                "%d connections from busy addresses, none refused" % len(busy)
            print("full after %d connections from busy addresses (fd limit %d)" % (len(busy), cap))
            assert len(busy) < cap - 16
            # Room kept: new addresses get in, the admin tool works, the OSTs stay in touch.
            quiet = [w.Conn(host, port, timeout=10, source="127.0.2.%d" % k) for k in range(1, 11)]
            try:
                assert all(c.ping() == 0 for c in quiet)
                cluster.loom("df")
                gen, table = w.ost_table_on(quiet[0])
                assert table and all(not (e["state"] & TGT_INACTIVE) for e in table.values()), table
            finally:
                for c in quiet:
                    c.close()
            # A busy address is let in again once the busy hold fewer than the cap: here when the
            # first of them leaves altogether.
            last = busy[-1].sock.getsockname()[0]
            first = busy[0].sock.getsockname()[0]
            for c in [c for c in busy if c.sock.getsockname()[0] == first]:
                busy.remove(c)
                c.close()

            def again():
                try:
                    busy.append(w.Conn(host, port, timeout=10, source=last))
                    return True
                except w.AuthError:
                    return False
            assert wait_until(again, 10, 0.1)
            assert all(c.ping() == 0 for c in busy)
        finally:
            for c in busy:
                c.close()
        text = read(mds.log_path)
        assert "the server is full" in text or "descriptors left are kept" in text, text[-3000:]

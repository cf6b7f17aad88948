"""Failover pairs on shared storage (issue 21), part 1: multi-mount protection. An MDT that two
hosts can reach is served by one MDS at a time: the one serving keeps a heartbeat in the MDT; a
second start is refused while that heartbeat moves, and a server whose heartbeat another host
replaced (it hung while its pair took over) stops at once.

The second host is played by this test writing a heartbeat of its own into the MDT, as another
host's MDS would on the shared disk (on one host, the MDT's flock alone would refuse it)."""

import os
import socket
import struct
import subprocess

import pytest

import loomutil
import loomwire
from loomutil import MDS_BIN, OSS_BIN, wait_until

MMP_FMT = "<IIQQQII64s64s"
MMP_MAGIC = 0x504D4D4C
SEQ_CLEAN = (1 << 64) - 1


def read_mmp(mdt):
    """The heartbeat in a target, or None before its first one is written."""
    try:
        with open(os.path.join(mdt, "mmp"), "rb") as f:
            raw = f.read(struct.calcsize(MMP_FMT))
    except FileNotFoundError:
        return None
    if len(raw) < struct.calcsize(MMP_FMT):
        return None
    magic, version, seq, ident, t, interval, crc, node, server = struct.unpack(MMP_FMT, raw)
    zeroed = struct.pack(MMP_FMT, magic, version, seq, ident, t, interval, 0, node, server)
    assert magic == MMP_MAGIC and version == 1 and crc == loomwire.crc32c(zeroed), raw[:64]
    return {"seq": seq, "id": ident, "interval": interval, "node": node.rstrip(b"\0").decode(),
            "server": server.rstrip(b"\0").decode()}


def write_foreign_mmp(mdt, node, server, seq=1, interval=200):
    fields = [MMP_MAGIC, 1, seq, 0x1234567890ABCDEF, 0, interval, 0, node.encode(), server.encode()]
    fields[6] = loomwire.crc32c(struct.pack(MMP_FMT, *fields))
    block = struct.pack(MMP_FMT, *fields).ljust(4096, b"\0")
    fd = os.open(os.path.join(mdt, "mmp"), os.O_WRONLY)
    try:
        os.pwrite(fd, block, 0)
        os.fsync(fd)
    finally:
        os.close(fd)


@pytest.mark.allow_log(r"ERROR: MDT .*: multi-mount protection lost: host-b \(loom-mds pid 4242\) took the target")
def test_mmp_refuses_a_second_mds_and_stops_one_whose_target_was_taken(cluster_factory):
    c = loomutil.configured(cluster_factory, "mmp-interval = 300\n")
    mdt = os.path.join(c.dir, "mdt")
    mds_pid = c.pid("mds")
    first = read_mmp(mdt)
    assert first["server"] == "loom-mds pid %d" % mds_pid and first["node"] == socket.gethostname()
    assert first["interval"] == 300 and first["seq"] != SEQ_CLEAN
    assert wait_until(lambda: read_mmp(mdt)["seq"] > first["seq"] + 2, 10, 0.1), "the heartbeat does not move"
    # A second MDS on the same MDT (another host's, in a failover pair): refused, saying who holds it.
    p = subprocess.run([MDS_BIN, "--mdt", mdt, "--listen", "127.0.0.1:0", "--mmp-interval", "300",
                        "--key", c.key], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert ("the MDT in %s is in use by loom-mds pid %d on %s: its multi-mount protection heartbeat is "
            "alive" % (mdt, mds_pid, socket.gethostname())) in p.stderr, p.stderr
    assert c.alive("mds") and read_mmp(mdt)["id"] == first["id"]
    # Another host takes the MDT (its heartbeat replaces this one's, as after a failover while this
    # MDS hung): the MDS stops at once, within an interval or two.
    write_foreign_mmp(mdt, "host-b", "loom-mds pid 4242")
    assert wait_until(lambda: not c.alive("mds"), 10, 0.05), "the deposed MDS goes on serving"
    assert "multi-mount protection lost: host-b (loom-mds pid 4242) took the target" in c.read_log("mds")
    assert read_mmp(mdt)["node"] == "host-b", "the deposed MDS wrote its heartbeat again"
    # host-b's heartbeat stops moving (that server is gone too): an MDS takes the MDT after its
    # silence, and a clean stop leaves the heartbeat clean.
    c.restart()
    held = read_mmp(mdt)
    assert held["server"] == "loom-mds pid %d" % c.pid("mds"), held
    c.down()
    assert read_mmp(mdt)["seq"] == SEQ_CLEAN
    c.up()


def test_mmp_refuses_a_second_oss_on_an_ost_another_serves(cluster_factory):
    """The same for an OST: an OSS serving it with multi-mount protection keeps a heartbeat there,
    and another OSS (the pair's other host) may not start on it."""
    c = loomutil.configured(cluster_factory, "")
    ost = c.ost_dir(0)
    oss = c.oss_name(0)
    c.kill9(oss)
    p = subprocess.Popen([OSS_BIN, "--ost", ost, "--mds", c.addr, "--listen", "127.0.0.1:0", "--key", c.key,
                          "--mmp-interval", "300"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Its heartbeat moves once its own start's check is over (two servers starting at once:
        # the later heartbeat wins, the earlier server sees it and gives up).
        def beating():
            h = read_mmp(ost)
            return h and h["server"] == "loom-oss pid %d" % p.pid and h["seq"] > 2
        assert wait_until(beating, 10, 0.05), read_mmp(ost)
        q = subprocess.run([OSS_BIN, "--ost", ost, "--mds", c.addr, "--listen", "127.0.0.1:0", "--key", c.key,
                            "--mmp-interval", "300"], capture_output=True, text=True, timeout=60)
        assert q.returncode == 1, q.stderr
        assert ("the OST in %s is in use by loom-oss pid %d on %s: its multi-mount protection heartbeat is "
                "alive" % (ost, p.pid, socket.gethostname())) in q.stderr, q.stderr
        assert p.poll() is None
    finally:
        p.terminate()
        p.wait(timeout=30)
    # A clean stop (SIGTERM) leaves it clean; the cluster's own OSS (no protection) serves it again.
    assert read_mmp(ost)["seq"] == SEQ_CLEAN
    c.restart()

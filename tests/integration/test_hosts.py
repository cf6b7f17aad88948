"""The multi-host test bed (tests/hosts/): hosts as network namespaces on one bridge, Loom's
servers and mounts spread over them, links shaped with tc, and nothing left behind."""

import json
import mmap
import os
import subprocess
import sys
import threading

import pytest

from loomutil import BUILD

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hosts"))
import hostbed  # noqa: E402
import loombed  # noqa: E402

MiB = 1 << 20

pytestmark = pytest.mark.skipif(not hostbed.available(), reason="needs root, ip, tc and nsenter")

ECHO_SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7000)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); c.sendall(c.recv(100)[::-1]); c.close()
"""
ECHO_CLIENT = """
import socket, sys
c = socket.create_connection((sys.argv[1], 7000), timeout=10); c.sendall(b"hello"); print(c.recv(100).decode())
"""


def root_links():
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def test_hosts_reach_each_other_and_nothing_outlives_the_bed():
    before = root_links()
    with hostbed.HostBed() as bed:
        a, b = bed.add_host("a"), bed.add_host("b")
        assert a.addr != b.addr
        server = bed.popen(b, [sys.executable, "-c", ECHO_SERVER, b.addr], stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "ready"
        p = bed.run(a, [sys.executable, "-c", ECHO_CLIENT, b.addr])
        assert p.returncode == 0 and p.stdout.strip() == "olleh", p.stderr
        server.wait(10)
        # The bed made no interface in the machine's own namespace.
        assert root_links() == before
        names = [bed.switch, a.netns, b.netns]
        assert all(n in hostbed.leftover_namespaces(bed.prefix) for n in names)
    assert hostbed.leftover_namespaces(bed.prefix) == []


def test_bed_is_taken_down_when_the_body_fails():
    with pytest.raises(ZeroDivisionError):
        with hostbed.HostBed() as bed:
            h = bed.add_host("x")
            bed.popen(h, ["sleep", "600"])
            1 / 0
    assert hostbed.leftover_namespaces(bed.prefix) == []
    assert all(p.poll() is not None for p in bed.procs)


def test_loom_over_hosts_two_clients_share_striped_files():
    with loombed.LoomBed(BUILD, osts=2) as lb:
        c0, c1 = lb.add_client(), lb.add_client()
        m0, m1 = lb.mount(c0), lb.mount(c1)
        os.mkdir(os.path.join(m0, "d"))
        lb.loom(c0, "setstripe", "-E", "-1", "-c", "2", "-S", "1M", "/d")
        data = os.urandom(6 * MiB + 123)
        with open(os.path.join(m0, "d", "f"), "wb") as f:
            f.write(data)
        with open(os.path.join(m1, "d", "f"), "rb") as f:
            assert f.read() == data
        layout = lb.loom(c1, "getstripe", "/d/f").stdout
        assert "lmm_stripe_count:  2" in layout or "lmm_stripe_count: 2" in layout, layout
        # Both clients spoke to both OSSs, from their own hosts' addresses.
        for k in range(2):
            with open(os.path.join(lb.dir, "oss%d.log" % k), errors="replace") as f:
                log = f.read()
            for c in (c0, c1):
                assert "from %s:" % c.addr in log, "oss%d never heard from %s" % (k, c.name)


def test_shaped_link_carries_the_data_at_its_rate_setting():
    with loombed.LoomBed(BUILD, osts=1, oss_rate_mib=40) as lb:
        c = lb.add_client()
        mnt = lb.mount(c)
        data = os.urandom(4 * MiB)
        with open(os.path.join(mnt, "f"), "wb") as f:
            f.write(data)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        with open(os.path.join(mnt, "f"), "rb") as f:
            assert f.read() == data
        oss = lb.oss[0]
        for ns, dev in ((oss.netns, "eth0"), (lb.switch, oss.veth + "p")):
            out = subprocess.run(["ip", "netns", "exec", ns, "tc", "-s", "qdisc", "show", "dev", dev],
                                 capture_output=True, text=True, check=True).stdout
            assert "tbf" in out and "rate 335544Kbit" in out, out       # 40 MiB/s
            sent = int(out.split("Sent ")[1].split()[0])
            # Each direction carried one copy of the file (writes in, reads out), at least.
            assert sent >= len(data), (dev, sent)


@pytest.mark.slow  # the plain pass only: under ASan it adds minutes of CPU and nothing new
def test_scale_bench_runs_small(tmp_path):
    # make bench-scale at toy sizes: every row is there and the JSON says what ran. The figures
    # themselves are the bench's business (this machine is shared; nothing here is timed).
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "bench", "scale.py")
    p = subprocess.run([sys.executable, script, "--build", BUILD, "--osts", "2", "--size", "8", "--files", "4",
                        "--rate", "40", "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(tmp_path / "scale.json") as f:
        result = json.load(f)
    assert [r["stripes"] for r in result["stripes"]] == [1, 2]
    assert [(r["layout"], r["clients"]) for r in result["clients"]] == \
        [("spread", 1), ("spread", 2), ("spread", 4), ("single", 1), ("single", 2), ("single", 4)]
    assert all(r["mib_s"] > 0 and r["linear"] == 40 * (r.get("stripes") or r.get("clients"))
               for r in result["stripes"] + result["clients"])


def test_oss_added_on_a_new_host_while_a_client_reads():
    with loombed.LoomBed(BUILD, osts=2) as lb:
        c = lb.add_client()
        mnt = lb.mount(c)
        data = os.urandom(3 * MiB)
        with open(os.path.join(mnt, "old"), "wb") as f:
            f.write(data)
        stop, errors, reads = [False], [], [0]

        def reader():
            while not stop[0]:
                fd = os.open(os.path.join(mnt, "old"), os.O_RDONLY | os.O_DIRECT)
                try:
                    buf = mmap.mmap(-1, len(data) + 4096)
                    n = os.preadv(fd, [buf], 0)
                    if buf[:n] != data:
                        errors.append("read %d bytes, not the file" % n)
                        return
                    reads[0] += 1
                except OSError as e:
                    errors.append(repr(e))
                    return
                finally:
                    os.close(fd)

        t = threading.Thread(target=reader)
        t.start()
        try:
            lb.add_oss()
            lb.wait_osts(3)
            os.mkdir(os.path.join(mnt, "wide"))
            lb.loom(c, "setstripe", "-E", "-1", "-c", "-1", "/wide")
            with open(os.path.join(mnt, "wide", "new"), "wb") as f:
                f.write(data)
            with open(os.path.join(mnt, "wide", "new"), "rb") as f:
                assert f.read() == data
        finally:
            stop[0] = True
            t.join()
        assert not errors, errors
        assert reads[0] > 0
        out = lb.loom(c, "getstripe", "/wide/new").stdout
        obdidx = [int(line.split()[0]) for line in out.splitlines()
                  if line.strip() and line.split()[0].isdigit() and len(line.split()) >= 3]
        assert sorted(obdidx) == [0, 1, 2], out

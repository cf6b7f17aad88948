"""`loom cluster up|down|status` manage exactly the daemons of their own directory."""

import re

from loomutil import pid_alive


def status_pids(out):
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^  (\S+) +running \(pid (\d+)\)$", out, re.M)}


def test_status_exits_0_when_everything_runs(cluster):
    p = cluster.cluster_cmd("status")
    assert p.returncode == 0
    pids = status_pids(p.stdout)
    assert pids == {name: cluster.pid(name) for name in cluster.daemon_names()}, p.stdout
    assert "127.0.0.1:%d" % cluster.mds_port in p.stdout


def test_status_exits_3_when_a_daemon_is_killed(cluster):
    cluster.kill9("oss1")
    p = cluster.cluster_cmd("status", check=False)
    assert p.returncode == 3, "status exited %d with oss1 dead:\n%s" % (p.returncode, p.stdout)
    assert re.search(r"^  oss1 +stopped$", p.stdout, re.M), p.stdout
    assert set(status_pids(p.stdout)) == {"mds", "oss0", "oss2", "oss3"}, p.stdout
    cluster.restart()
    assert cluster.cluster_cmd("status").returncode == 0


def test_status_exits_3_when_the_mds_is_killed(cluster):
    cluster.kill9("mds")
    p = cluster.cluster_cmd("status", check=False)
    assert p.returncode == 3 and re.search(r"^  mds +stopped$", p.stdout, re.M), p.stdout


def test_down_stops_exactly_its_own_daemons(cluster_factory):
    a = cluster_factory()
    b = cluster_factory()
    assert a.mds_port != b.mds_port
    b.loom("put", "-", "/in-b", input="b's data")
    pids_a = {n: a.pid(n) for n in a.daemon_names()}
    pids_b = {n: b.pid(n) for n in b.daemon_names()}
    assert not set(pids_a.values()) & set(pids_b.values())

    p = a.down()
    assert "stopped 5 Loom processes" in p.stdout, p.stdout
    still = {n: pid for n, pid in pids_a.items() if pid_alive(pid)}
    assert not still, "`loom cluster down` left these running: %r" % still
    gone = {n: pid for n, pid in pids_b.items() if not pid_alive(pid)}
    assert not gone, "`loom cluster down` of another directory stopped these: %r" % gone
    assert a.cluster_cmd("status", check=False).returncode == 3
    assert b.cluster_cmd("status").returncode == 0
    assert b.loom("get", "/in-b", "-").stdout == "b's data"
    assert a.loom("ls", "/", check=False).returncode != 0, "the stopped file system still answers"


def test_up_after_down_restarts_with_data(cluster):
    cluster.loom("mkdir", "/d")
    cluster.loom("setstripe", "-c", "4", "-S", "64k", "/d")
    data = "0123456789" * 100000
    cluster.loom("put", "-", "/d/f", input=data)
    port = cluster.mds_port
    cluster.down()
    cluster.up()
    assert cluster.mds_port == port, "the MDS came back on another port"
    assert cluster.loom("get", "/d/f", "-").stdout == data
    assert cluster.loom("getstripe", "-c", "/d/f").stdout == "4\n"


def test_up_while_running_starts_nothing_new(cluster):
    pids = {n: cluster.pid(n) for n in cluster.daemon_names()}
    cluster.up()
    assert {n: cluster.pid(n) for n in cluster.daemon_names()} == pids

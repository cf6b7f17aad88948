"""A replicated MDT on the host bed (issue 21 part 2): hosts as network namespaces on one bridge;
etcd alone on a host, MDS hosts mds (active first) and mds2 each with an MDT of its own, default
settings (a 10 s etcd lease, 5 s for a standby's acknowledgement, the clients' 20 s timeout).

- The active's host dies (every process killed, its link down) while two client hosts create,
  write and fsync: mds2 takes over; no application error; every fsynced file intact; the time
  the clients saw is printed (docs/operations.md keeps it). The old host back follows mds2.
- The link between the active and etcd fails: the active stops a second before its lease could
  lapse, mds2 takes over, and two clients claiming the same names never both get one.
- The link between the active and the standby fails: the active strikes the standby after 5 s
  and goes on alone (the standby may not take over), names are still claimed once each; the
  link back, the standby catches up and counts again.
"""

import os
import sys
import time

import pytest

from loomutil import BUILD, read, wait_until
from test_failover_mds import check_files, logged, writers
from test_replicated_mdt import CLAIMER, log_time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hosts"))
import hostbed  # noqa: E402
import loombed  # noqa: E402

pytestmark = [pytest.mark.skipif(not hostbed.available(), reason="needs root, ip, tc and nsenter"),
              pytest.mark.slow]  # the plain pass only: test_replicated_mdt.py takes the code through ASan

SYNC = "/loom/%s/sync" % loombed.FSNAME
LEADER = "/loom/%s/leader" % loombed.FSNAME


def name_of(h):
    return "%s:%d" % (h.addr, loombed.MDS_PORT)


def replicated_bed():
    lb = loombed.LoomBed(BUILD, osts=2, replicated=True)
    try:
        both = name_of(lb.mds) + "," + name_of(lb.mds2)
        assert wait_until(lambda: lb.etcd_get(SYNC) == both, 60, 0.2), lb.logs()
    except BaseException:
        lb.close()
        raise
    return lb


def mds_log(lb, h):
    return read(os.path.join(lb.dir, "mds-%s.log" % h.name))


class Claimers:
    """Two client hosts claiming the same names (test_replicated_mdt.CLAIMER)."""

    def __init__(self, lb, workdir):
        import subprocess
        self.mounts = [lb.mount(lb.add_client()) for _ in range(2)]
        os.mkdir(os.path.join(self.mounts[0], "claims"))
        self.stop = os.path.join(workdir, "stop")
        self.logs = [os.path.join(workdir, "claims%d.log" % k) for k in range(2)]
        self.procs = [subprocess.Popen([sys.executable, "-c", CLAIMER, os.path.join(m, "claims"), "client%d" % k,
                                        self.logs[k], self.stop], stderr=subprocess.PIPE, text=True)
                      for k, m in enumerate(self.mounts)]

    def outcomes(self):
        return [read(p).split("\n")[:-1] if os.path.exists(p) else [] for p in self.logs]

    def wait_more(self, n, timeout=180):
        base = [len(o) for o in self.outcomes()]
        return wait_until(lambda: all(len(o) >= k + n for o, k in zip(self.outcomes(), base)) or
                          any(p.poll() is not None for p in self.procs), timeout, 0.2)

    def finish_and_check(self, lb):
        """Stops them; each name was claimed by one client at most, and holds its id."""
        open(self.stop, "w").close()
        for p in self.procs:
            assert p.wait(timeout=120) == 0, p.stderr.read()
        owners = {}
        for k, o in enumerate(self.outcomes()):
            for ln in o:
                name, how = ln.split()
                if how == "ok":
                    assert name not in owners, "%s claimed by client%d and client%d" % (name, owners[name], k)
                    owners[name] = k
        fresh = lb.mount(lb.add_client())
        for name, k in owners.items():
            with open(os.path.join(fresh, "claims", name)) as f:
                assert f.read() == "client%d" % k, name
        return len(owners)


def test_active_host_dies_and_the_standby_takes_over_while_two_client_hosts_write(workdir):
    with replicated_bed() as lb:
        mounts = [lb.mount(lb.add_client()) for _ in range(2)]
        with writers(mounts, workdir) as (procs, logs):
            assert wait_until(lambda: all(len(logged(p)) >= 5 for _, p in logs) or
                              any(p.poll() is not None for p in procs), 120, 0.1), lb.logs()
            before = [len(logged(p)) for _, p in logs]
            lb.kill_host(lb.mds)
            killed = time.time()
            assert wait_until(lambda: all(len(logged(p)) >= n + 3 for (_, p), n in zip(logs, before)) or
                              any(p.poll() is not None for p in procs), 240, 0.2), lb.logs()
            for p in procs:
                assert p.poll() is None, "a writer failed through the takeover: " + p.stderr.read()
            took = [min(float(t) for _, _, t in logged(p)[n:] if float(t) > killed) - killed
                    for (_, p), n in zip(logs, before)]
            print("replicated MDT on the host bed (default settings: 10 s etcd lease): the active's host "
                  "died; the clients' first fsync returned after %.1f s and %.1f s" % (took[0], took[1]))
            assert lb.etcd_get(LEADER) == "2 " + name_of(lb.mds2)
        for p in procs:
            assert p.returncode == 0, p.stderr.read()
        fresh = lb.mount(lb.add_client())
        assert check_files(fresh, logs) >= 16
        # The old host is back: its MDS follows mds2, and counts once it caught up.
        lb.revive_host(lb.mds)
        lb.start_mds(lb.mds)
        assert wait_until(lambda: lb.etcd_get(SYNC) == name_of(lb.mds2) + "," + name_of(lb.mds), 120, 0.2), \
            lb.logs()


@pytest.mark.allow_log(r"ERROR: coordinator: etcd did not renew its lease in time")
def test_active_cut_off_from_etcd_stops_before_the_standby_serves(workdir):
    with replicated_bed() as lb:
        cl = Claimers(lb, workdir)
        assert cl.wait_more(20), lb.logs()
        lb.cut(lb.mds, lb.etcd)
        assert wait_until(lambda: lb.etcd_get(LEADER) == "2 " + name_of(lb.mds2), 120, 0.2), lb.logs()
        assert cl.wait_more(20), lb.logs()
        assert all(p.poll() is None for p in cl.procs), [p.stderr.read() for p in cl.procs if p.poll() is not None]
        stopped = [ln for ln in mds_log(lb, lb.mds).splitlines() if "etcd did not renew its lease" in ln]
        active = [ln for ln in mds_log(lb, lb.mds2).splitlines() if "this MDS is active now" in ln]
        assert stopped and active and log_time(stopped[0]) < log_time(active[0]), lb.logs()
        assert cl.finish_and_check(lb) >= 40


def test_active_cut_off_from_the_standby_goes_on_alone(workdir):
    with replicated_bed() as lb:
        cl = Claimers(lb, workdir)
        assert cl.wait_more(20), lb.logs()
        lb.cut(lb.mds, lb.mds2)
        # The next commit waits 5 s for mds2, then mds1 strikes it and goes on alone.
        assert wait_until(lambda: lb.etcd_get(SYNC) == name_of(lb.mds), 60, 0.2), lb.logs()
        assert cl.wait_more(20), lb.logs()
        assert lb.etcd_get(LEADER) == "1 " + name_of(lb.mds)
        assert "this MDS is active now" not in mds_log(lb, lb.mds2)
        # The link back: mds2 catches up and counts again.
        lb.heal(lb.mds, lb.mds2)
        assert wait_until(lambda: lb.etcd_get(SYNC) == name_of(lb.mds) + "," + name_of(lb.mds2), 120, 0.2), \
            lb.logs()
        assert cl.finish_and_check(lb) >= 40

"""A replicated MDT without shared storage (issue 21, part 2).

Two MDSs, each with an MDT of its own directory: A on 127.0.0.1 and B on 127.0.0.2, both naming
one real etcd (Debian's etcd-server, started here on 127.0.0.1). etcd's leader key decides which
serves; the other follows its commits. Two clients (two mounts listing both addresses) create,
write and fsync files through A; A dies (kill -9); B takes over once A's etcd lease has expired,
and the clients carry on there: no application error, every file whose fsync returned intact, the
takeover time measured. A, back, follows B as its standby.
"""

import errno
import os
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest

import loomwire as w
from loomutil import MDS_BIN, OSS_BIN, pings, read, second_mount, wait_until
from test_failover_mds import check_files, logged, writers

ETCD = "/usr/bin/etcd"
LEASE_S = 3  # --etcd-lease: short, to keep the test quick (docs give the default's figure)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    """A single-member etcd on 127.0.0.1, its data in dir."""

    def __init__(self, d):
        assert os.path.exists(ETCD), "etcd is missing: scripts/deps.sh test installs etcd-server"
        self.dir = d
        self.client, peer = free_port(), free_port()
        self.url = "http://127.0.0.1:%d" % self.client
        self.log = open(os.path.join(d, "etcd.log"), "a")
        self.proc = subprocess.Popen(
            [ETCD, "--name", "loomtest", "--data-dir", os.path.join(d, "etcd"),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
             "--initial-cluster", "loomtest=http://127.0.0.1:%d" % peer],
            stdout=self.log, stderr=self.log)
        assert wait_until(self.healthy, 60, 0.1), read(os.path.join(d, "etcd.log"))[-3000:]

    def healthy(self):
        return self.ctl("endpoint", "health").returncode == 0

    def ctl(self, *args):
        return subprocess.run(["etcdctl", "--endpoints", self.url] + list(args), capture_output=True,
                              text=True, env=dict(os.environ, ETCDCTL_API="3"), timeout=30)

    def get(self, key):
        p = self.ctl("get", "--print-value-only", key)
        return p.stdout.strip() if p.returncode == 0 else None

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.log.close()


class ReplPair:
    def __init__(self, c, etcd):
        self.c, self.etcd = c, etcd
        self.port = c.mds_port
        self.addrs = ("127.0.0.1", "127.0.0.2")
        self.mdts = (os.path.join(c.dir, "mdt"), os.path.join(c.dir, "mdt-b"))
        self.spec = ",".join("%s:%d" % (h, self.port) for h in self.addrs)
        self.procs = {}

    def name(self, side):
        return "%s:%d" % (self.addrs[side], self.port)

    def start(self, side):
        log = open(self.log_path(side), "a")
        self.procs[side] = subprocess.Popen(
            [MDS_BIN, "--mdt", self.mdts[side], "--listen", self.name(side), "--key", self.c.key,
             "--fsname", "loom", "--etcd", self.etcd.url, "--etcd-lease", str(LEASE_S)],
            stdout=log, stderr=log)
        log.close()
        return self.procs[side]

    def log_path(self, side):
        return os.path.join(self.c.dir, "log", "mds-repl-%d.log" % side)

    def log(self, side):
        return read(self.log_path(side))

    def restart_osss(self):
        """The cluster's OSSs again, listing both MDS addresses."""
        c, osss = self.c, []
        for k in range(c.osts):
            c.kill9("oss%d" % k)
            log = open(os.path.join(c.dir, "log", "oss-repl-%d.log" % k), "a")
            osss.append(subprocess.Popen([OSS_BIN, "--ost", os.path.join(c.dir, "ost%d" % k), "--mds", self.spec,
                                          "--listen", "127.0.0.1:0", "--key", c.key], stdout=log, stderr=log))
            log.close()
        return osss

    def leader(self):
        v = self.etcd.get("/loom/loom/leader")
        return v.split(" ", 1) if v else None

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


@pytest.fixture
def repl_pair(cluster_factory, workdir):
    """The cluster's MDT served by A (etcd's leader), B following it into an MDT of its own; the
    OSSs list both addresses."""
    c = cluster_factory(osts=2)
    etcd = Etcd(workdir)
    pair = ReplPair(c, etcd)
    osss = []
    try:
        c.kill9("mds")
        pair.start(0)
        assert wait_until(lambda: pings("127.0.0.1", pair.port), 60, 0.1), pair.log(0)
        pair.start(1)
        assert wait_until(lambda: "standby: copy in place" in pair.log(1), 60, 0.1), pair.log(1)
        osss = pair.restart_osss()
        assert wait_until(lambda: pair.log(0).count("registered:") >= c.osts, 60, 0.1), pair.log(0)
        # B counts once it has caught up: etcd lists it among the MDSs that hold every commit.
        assert wait_until(lambda: etcd.get("/loom/loom/sync") == pair.name(0) + "," + pair.name(1), 60, 0.1), \
            pair.log(0)[-2000:]
        yield pair
    finally:
        for p in osss:
            p.terminate()
            p.wait(timeout=60)
        pair.stop_all()
        etcd.stop()


@pytest.mark.allow_log(r"WARN: (lost the MDS|cannot reach the MDS|connection to MDS)")
def test_standby_takes_over_while_two_clients_create_write_and_fsync(repl_pair, workdir):
    pair, c = repl_pair, repl_pair.c
    assert pair.leader() == ["1", pair.name(0)]
    with second_mount(c, source=pair.spec + ":/loom") as m0, second_mount(c, source=pair.spec + ":/loom") as m1:
        with writers([m0, m1], workdir) as (procs, logs):
            assert wait_until(lambda: all(len(logged(p)) >= 5 for _, p in logs) or
                              any(p.poll() is not None for p in procs), 120, 0.1)
            assert all(p.poll() is None for p in procs), [p.stderr.read() for p in procs if p.poll() is not None]
            before = [len(logged(p)) for _, p in logs]
            # A's host dies: nobody tells B; etcd's lease on A's leader key runs out.
            pair.procs[0].kill()
            pair.procs[0].wait()
            killed = time.time()
            assert wait_until(lambda: all(len(logged(p)) >= n + 3 for (_, p), n in zip(logs, before)) or
                              any(p.poll() is not None for p in procs), 180, 0.1), pair.log(1)[-3000:]
            for p in procs:
                assert p.poll() is None, "a writer failed through the takeover: " + p.stderr.read()
            took = [min(float(t) for _, _, t in logged(p)[n:] if float(t) > killed) - killed
                    for (_, p), n in zip(logs, before)]
            print("replicated MDT takeover (%d s etcd lease): first fsync after the kill %.2f s and %.2f s"
                  % (LEASE_S, took[0], took[1]))
            assert pair.leader() == ["2", pair.name(1)]
            assert "this MDS is active now, epoch 2" in pair.log(1)
        for p in procs:
            assert p.returncode == 0, p.stderr.read()
        with second_mount(c, source=pair.spec + ":/loom") as fresh:
            assert check_files(fresh, logs) >= 16
    # A comes back: B leads, so A follows it (from where its MDT is, or from a copy).
    pair.start(0)
    assert wait_until(lambda: "standby: following %s" % pair.name(1) in pair.log(0), 60, 0.1), pair.log(0)
    assert wait_until(lambda: pair.etcd.get("/loom/loom/sync") == pair.name(1) + "," + pair.name(0), 60, 0.1), \
        pair.log(1)[-2000:]


@pytest.mark.allow_log(r"WARN: (lost the MDS|cannot reach the MDS|connection to MDS)")
def test_a_standby_that_stops_answering_is_struck_and_may_not_take_over(repl_pair, workdir):
    # B hangs (SIGSTOP): A's next commit waits --repl-timeout for it, then A strikes B from the
    # MDSs that hold every commit (etcd's sync key) and goes on alone. A dies afterwards: B, awake,
    # lacks what A committed alone, so it may not take over, and nobody serves. A's restart
    # takes over again (epoch 2), and B catches up from where its MDT is.
    pair, c = repl_pair, repl_pair.c
    spec = pair.spec + ":/loom"
    with second_mount(c, source=spec) as m0:
        with writers([m0], workdir) as (procs, logs):
            assert wait_until(lambda: len(logged(logs[0][1])) >= 3 or procs[0].poll() is not None, 60, 0.1)
            pair.procs[1].send_signal(signal.SIGSTOP)
            n = len(logged(logs[0][1]))
            assert wait_until(lambda: pair.etcd.get("/loom/loom/sync") == pair.name(0), 60, 0.1), pair.log(0)[-2000:]
            assert wait_until(lambda: len(logged(logs[0][1])) >= n + 5 or procs[0].poll() is not None, 60, 0.1)
            assert procs[0].poll() is None, procs[0].stderr.read()
        assert procs[0].returncode == 0, procs[0].stderr.read()
        assert "did not acknowledge commit" in pair.log(0)
        # A dies with the client still mounted (it reconnects and replays wherever an MDS serves).
        pair.procs[0].kill()
        pair.procs[0].wait()
        pair.procs[1].send_signal(signal.SIGCONT)
        assert wait_until(lambda: "this one may not take over" in pair.log(1), 60, 0.1), pair.log(1)[-2000:]
        time.sleep(LEASE_S)
        assert pair.leader() is None and pair.procs[1].poll() is None
        assert not pings("127.0.0.2", pair.port, timeout=1)
        # A is back: it holds every commit, so it serves again; B follows it and counts again.
        pair.start(0)
        assert wait_until(lambda: pair.leader() == ["2", pair.name(0)], 60, 0.1), pair.log(0)[-2000:]
        assert wait_until(lambda: pair.etcd.get("/loom/loom/sync") == pair.name(0) + "," + pair.name(1), 60, 0.1), \
            pair.log(0)[-2000:]
        # (B's MDT is a copy of A's history: what A committed alone it fetches, from A's commit
        # log, or from a copy where A's restart left the log without those commits.)
        assert "never made" not in pair.log(1)
        assert check_files(m0, logs) >= 8
    with second_mount(c, source=spec) as fresh:
        assert check_files(fresh, logs) >= 8


class LinkProxy:
    """A TCP relay on 127.0.0.1 to target: a link that cut() breaks the way a dead switch port
    does (nothing goes through any more, and nobody is told: connections stay open, silent)."""

    def __init__(self, target_port):
        import threading
        self.target = target_port
        self.cut_now = False
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        import threading
        while True:
            try:
                a, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(a)
            if self.cut_now:
                continue
            try:
                b = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                a.close()
                continue
            self.held.append(b)
            for x, y in ((a, b), (b, a)):
                threading.Thread(target=self.pump, args=(x, y), daemon=True).start()

    def pump(self, src, dst):
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                return
            if not data:
                if not self.cut_now:
                    dst.shutdown(socket.SHUT_WR)
                return
            if self.cut_now:
                continue  # dropped on the floor
            try:
                dst.sendall(data)
            except OSError:
                return

    def cut(self):
        self.cut_now = True

    def close(self):
        self.sock.close()
        for s in self.held:
            s.close()


# A client claiming names in a shared directory: O_CREAT|O_EXCL, its id written and fsynced; each
# outcome logged once known ("ok" or "exists"). Two MDSs acknowledging at once would let two
# clients both claim a name.
CLAIMER = r"""
import errno, os, sys
d, me, log_path, stop = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
os.makedirs(d, exist_ok=True)
with open(log_path, "w", buffering=1) as log:
    i = 0
    while not os.path.exists(stop):
        name = "n%05d" % i
        try:
            fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            log.write("%s exists\n" % name)
        else:
            os.write(fd, me.encode())
            os.fsync(fd)
            os.close(fd)
            log.write("%s ok\n" % name)
        i += 1
"""


def log_time(line):
    """The wall-clock time of a log line (2026-12-07T15:14:09.585Z ...)."""
    import datetime
    stamp = line.split()[0].rstrip("Z")
    return datetime.datetime.fromisoformat(stamp).replace(tzinfo=datetime.timezone.utc).timestamp()


@pytest.mark.allow_log(r"WARN: (lost the MDS|cannot reach the MDS|connection to MDS)",
                       r"ERROR: coordinator: etcd did not renew its lease in time")
def test_an_active_cut_off_from_etcd_stops_before_the_standby_serves(cluster_factory, workdir):
    # A reaches etcd through a link this test cuts; B and the clients reach everything. A's lease
    # runs out: A stops answering a second before etcd can hand the leader key on, B takes over,
    # and the clients, which claim the same names in one directory, never both get a name.
    c = cluster_factory(osts=2)
    etcd = Etcd(workdir)
    link = LinkProxy(etcd.client)
    pair = ReplPair(c, etcd)
    osss, procs = [], []
    stop = os.path.join(workdir, "stop")
    try:
        c.kill9("mds")
        real_url = etcd.url
        etcd.url = "http://127.0.0.1:%d" % link.port
        pair.start(0)
        etcd.url = real_url
        assert wait_until(lambda: pings("127.0.0.1", pair.port), 60, 0.1), pair.log(0)
        pair.start(1)
        osss = pair.restart_osss()
        assert wait_until(lambda: etcd.get("/loom/loom/sync") == pair.name(0) + "," + pair.name(1), 60, 0.1), \
            pair.log(0)[-2000:] + pair.log(1)[-2000:]
        spec = pair.spec + ":/loom"
        with second_mount(c, source=spec) as m0, second_mount(c, source=spec) as m1:
            os.mkdir(os.path.join(m0, "claims"))
            logs = [os.path.join(workdir, "claims%d.log" % k) for k in range(2)]
            for k, mnt in enumerate((m0, m1)):
                procs.append(subprocess.Popen([sys.executable, "-c", CLAIMER, os.path.join(mnt, "claims"),
                                               "client%d" % k, logs[k], stop], stderr=subprocess.PIPE, text=True))

            def outcomes():
                return [read(p).split("\n")[:-1] if os.path.exists(p) else [] for p in logs]
            assert wait_until(lambda: all(len(o) >= 20 for o in outcomes()), 120, 0.1)
            link.cut()
            assert pair.procs[0].wait(timeout=60) == 3, pair.log(0)[-2000:]
            n = [len(o) for o in outcomes()]
            assert wait_until(lambda: all(len(o) >= k + 20 for o, k in zip(outcomes(), n)) or
                              any(p.poll() is not None for p in procs), 120, 0.1), pair.log(1)[-2000:]
            open(stop, "w").close()
            for p in procs:
                assert p.wait(timeout=120) == 0, p.stderr.read()
            # The servers' side: A's last word came before B's first as the active.
            stopped = [ln for ln in pair.log(0).splitlines() if "etcd did not renew its lease" in ln]
            active = [ln for ln in pair.log(1).splitlines() if "this MDS is active now" in ln]
            assert stopped and active and log_time(stopped[0]) < log_time(active[0])
            # The clients' side: every name claimed once, by the client whose id it holds.
            owners = {}
            for k, o in enumerate(outcomes()):
                for ln in o:
                    name, how = ln.split()
                    if how == "ok":
                        assert name not in owners, "%s claimed by client%d and client%d" % (name, owners[name], k)
                        owners[name] = k
            with second_mount(c, source=spec) as fresh:
                for name, k in owners.items():
                    with open(os.path.join(fresh, "claims", name)) as f:
                        assert f.read() == "client%d" % k, name
            assert len(owners) >= 40
    finally:
        open(stop, "w").close()
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in osss:
            p.terminate()
            p.wait(timeout=60)
        pair.stop_all()
        link.close()
        etcd.stop()


@pytest.mark.allow_log(r"WARN: (lost the MDS|cannot reach the MDS|connection to MDS)")
def test_a_clean_stop_under_load_hands_over_at_once(repl_pair, workdir):
    # systemctl stop of the active while two clients write: its last commits reach the standby
    # before it stops serving, it gives the leader key up, and the standby takes over at once
    # (well before the lease would have lapsed); nothing waits for an acknowledgement that
    # cannot come.
    pair, c = repl_pair, repl_pair.c
    spec = pair.spec + ":/loom"
    with second_mount(c, source=spec) as m0, second_mount(c, source=spec) as m1:
        with writers([m0, m1], workdir) as (procs, logs):
            assert wait_until(lambda: all(len(logged(p)) >= 5 for _, p in logs), 120, 0.1)
            n = [len(logged(p)) for _, p in logs]
            pair.procs[0].terminate()
            assert pair.procs[0].wait(timeout=60) == 0, pair.log(0)[-2000:]
            assert wait_until(lambda: pair.leader() == ["2", pair.name(1)], 60, 0.05), pair.log(1)[-2000:]
            assert wait_until(lambda: all(len(logged(p)) >= k + 3 for (_, p), k in zip(logs, n)) or
                              any(p.poll() is not None for p in procs), 120, 0.1), pair.log(1)[-2000:]
            for p in procs:
                assert p.poll() is None, "a writer failed through the switchover: " + p.stderr.read()
        for p in procs:
            assert p.returncode == 0, p.stderr.read()
        stopped = [ln for ln in pair.log(0).splitlines() if "gave up the leader key" in ln]
        active = [ln for ln in pair.log(1).splitlines() if "this MDS is active now" in ln]
        assert stopped and active and log_time(stopped[0]) <= log_time(active[0])
        assert "did not acknowledge" not in pair.log(0)
        assert "may not take over" not in pair.log(1)
        with second_mount(c, source=spec) as fresh:
            assert check_files(fresh, logs) >= 16


def pull(conn, name, applied_seq=0, applied_epoch=0, uuid=bytes(16), from_seq=None, max_bytes=1 << 20, wait_ms=0):
    body = struct.pack("<QQQIIII16s64s", applied_seq + 1 if from_seq is None else from_seq, applied_seq,
                       applied_epoch, 0, max_bytes, wait_ms, 1, uuid, name.encode())
    h, _, _ = conn.call(0x012D, body)  # MDS_REPL_PULL
    return h.status


@pytest.mark.allow_log(r"ERROR: replication: a standby calls itself .*, this MDS's name")
def test_the_active_refuses_pulls_it_cannot_trust(repl_pair):
    # What a standby says of itself is checked: a name that cannot sit in etcd's list, this
    # MDS's own name (two MDSs under one name), a position without an MDT, another file system's
    # MDT, an empty standby (it starts from a copy), a malformed request.
    pair = repl_pair
    with w.Conn("127.0.0.1", pair.port) as conn:
        assert pull(conn, "a,b") == -errno.EPROTO
        assert pull(conn, "a b") == -errno.EPROTO
        assert pull(conn, pair.name(1), applied_seq=5) == -errno.EPROTO
        assert pull(conn, pair.name(0)) == -errno.EADDRINUSE
        assert pull(conn, "127.0.0.9:1", applied_seq=1, uuid=b"x" * 16) == -errno.EXDEV
        assert pull(conn, "127.0.0.9:1") == -errno.ERANGE
        assert pull(conn, "127.0.0.9:1", max_bytes=0) == -errno.EPROTO
        assert pull(conn, "127.0.0.9:1", wait_ms=10001) == -errno.EPROTO
        assert pull(conn, "127.0.0.9:1", from_seq=0) == -errno.EPROTO
    # B still counts, and A still serves.
    assert pair.etcd.get("/loom/loom/sync") == pair.name(0) + "," + pair.name(1)
    assert pings("127.0.0.1", pair.port)

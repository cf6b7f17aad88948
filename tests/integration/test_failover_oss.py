"""Failover pairs on shared storage (issue 21), part 1: an OST served by either of two OSSs.

The OST's directory is the shared disk; server A serves it on 127.0.0.1, server B on 127.0.0.2,
each naming the other with --failover and keeping multi-mount protection. A registers with the
MDS (and says B is its partner); A dies; B starts on the same OST, takes it once A's heartbeat
has stopped, registers, and the clients' I/O goes on there: what was fsynced reads back whole,
through both mounts, and nobody saw an error."""

import errno
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

import loomwire as w
from loomutil import MDS_BIN, MiB, OSS_BIN, is_mounted, read, second_mount, wait_until

PAIR_IDX = 1
MMP_MS = 300

# A writer through the mount: files of 1..3 MiB written over (O_TRUNC) in turn, each fsynced,
# logged with its digest once fsync returned; stops when the stop file appears. Any error ends it
# with the traceback on stderr. (The files exist already, their objects on the pair's OST: a new
# file made while that OST is down would go to another.)
FILES = 8
WRITER = r"""
import hashlib, os, random, sys, time
d, log_path, stop = sys.argv[1], sys.argv[2], sys.argv[3]
rng = random.Random(7)
with open(log_path, "w", buffering=1) as log:
    i = 0
    while not os.path.exists(stop):
        data = rng.randbytes(rng.randrange(1 << 20, 3 << 20))
        p = os.path.join(d, "f%d" % (i % 8))
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        v = memoryview(data)
        while v:
            v = v[os.write(fd, v[:1 << 20]):]
        os.fsync(fd)
        os.close(fd)
        log.write("%s %s %.3f\n" % (p, hashlib.sha256(data).hexdigest(), time.time()))
        i += 1
"""

# A reader through the mount: one file read whole, again and again, each pass checked.
READER = r"""
import hashlib, os, sys, time
p, want, log_path, stop = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
with open(log_path, "w", buffering=1) as log:
    while not os.path.exists(stop):
        fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
        h = hashlib.sha256()
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            h.update(b)
        os.close(fd)
        if h.hexdigest() != want:
            sys.exit("pass read %s, not %s" % (h.hexdigest(), want))
        log.write("%.3f\n" % time.time())
"""


def free_port(host):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Pair:
    """The two OSSs of a failover pair on one OST directory."""

    def __init__(self, c, ost):
        self.c, self.ost = c, ost
        self.addr = {"a": ("127.0.0.1", free_port("127.0.0.1")), "b": ("127.0.0.2", free_port("127.0.0.2"))}
        self.procs = {}

    def start(self, side, hostname=None, boot_id=None):
        """Starts side's OSS; with hostname, as a server on another host sees itself: in UTS and
        mount namespaces of its own, with that host name and another kernel boot id (which the
        OST's record of its last server tells apart)."""
        other = "b" if side == "a" else "a"
        host, port = self.addr[side]
        log = open(os.path.join(self.c.dir, "log", "oss-pair-%s.log" % side), "a")
        cmd = [OSS_BIN, "--ost", self.ost, "--mds", self.c.addr, "--key", self.c.key,
               "--listen", "%s:%d" % (host, port), "--advertise", host,
               "--failover", "%s:%d" % self.addr[other], "--mmp-interval", str(MMP_MS)]
        if hostname:
            # Another host: its own name, and its own kernel boot id (a page cache of its own).
            self.boot_id = boot_id or str(uuid.uuid4())
            cmd = ["unshare", "--uts", "--mount", "sh", "-c",
                   'hostname "$0" && f=$(mktemp) && echo "$1" > "$f" && '
                   'mount --bind "$f" /proc/sys/kernel/random/boot_id && rm -f "$f" && shift && exec "$@"',
                   hostname, self.boot_id] + cmd
        self.procs[side] = subprocess.Popen(cmd, stdout=log, stderr=log)
        log.close()
        return self.procs[side]

    def log(self, side):
        return read(os.path.join(self.c.dir, "log", "oss-pair-%s.log" % side))

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=60)


def served_at(c, host, port):
    """Whether the MDS's table has the pair's OST active at host:port (False while no MDS answers)."""
    try:
        with w.Client(c.mds_host, c.mds_port, os.urandom(16)) as cl:
            e = w.ost_table_on(cl.conn)[1].get(PAIR_IDX)
    except OSError:
        return False
    return bool(e) and (e["host"], e["port"]) == (host, port) and not e["state"] & w.TGT_INACTIVE


def failovers(c):
    with w.Client(c.mds_host, c.mds_port, os.urandom(16)) as cl:
        return w.ost_failovers_on(cl.conn)


@pytest.fixture
def pair(cluster_factory):
    c = cluster_factory(osts=2)
    c.mount()   # first: `loom cluster up --mount` would start the cluster's own OSS of the OST again
    ost = c.ost_dir(PAIR_IDX)
    c.kill9(c.oss_name(PAIR_IDX))   # from now on the pair serves it
    p = Pair(c, ost)
    try:
        yield p
    finally:
        p.stop_all()


def lines(path):
    try:
        with open(path) as f:
            return [ln.split() for ln in f.read().splitlines() if ln.endswith(tuple("0123456789"))]
    except FileNotFoundError:
        return []


@pytest.mark.allow_log(r"lost the MDS|OST0001.*(Connection refused|recover|reconnect|away)",
                       r"ERROR: the OST in .* is in use by loom-oss pid \d+ .*heartbeat is alive")
def test_ost_pair_fails_over_while_clients_read_and_write(pair, workdir):
    c = pair.c
    pair.start("a")
    assert wait_until(lambda: served_at(c, *pair.addr["a"]), 30, 0.1), pair.log("a")
    assert wait_until(lambda: failovers(c).get(PAIR_IDX) == pair.addr["b"], 10, 0.1), failovers(c)
    mnt = os.path.join(c.dir, "mnt")
    c.loom("mkdir", "/pair")
    c.loom("setstripe", "-c", "1", "-i", str(PAIR_IDX), "/pair")
    big = os.urandom(24 * MiB + 5)
    with open(os.path.join(mnt, "pair", "big"), "wb") as f:
        f.write(big)
    want = hashlib.sha256(big).hexdigest()
    for k in range(FILES):
        open(os.path.join(mnt, "pair", "f%d" % k), "wb").close()
        assert c.loom("getstripe", "-i", "/pair/f%d" % k).stdout.strip() == str(PAIR_IDX)

    stop = os.path.join(workdir, "stop")
    wlog, rlog = os.path.join(workdir, "writer.log"), os.path.join(workdir, "reader.log")
    with second_mount(c) as view:
        writer = subprocess.Popen([sys.executable, "-c", WRITER, os.path.join(mnt, "pair"), wlog, stop],
                                  stderr=subprocess.PIPE, text=True)
        reader = subprocess.Popen([sys.executable, "-c", READER, os.path.join(view, "pair", "big"), want, rlog, stop],
                                  stderr=subprocess.PIPE, text=True)
        try:
            assert wait_until(lambda: len(lines(wlog)) >= FILES and len(lines(rlog)) >= 2, 120, 0.1), \
                (writer.poll(), reader.poll())
            # Server A's host dies; B takes the OST once A's heartbeat has stopped.
            pair.procs["a"].kill()
            pair.procs["a"].wait()
            killed = time.time()
            n_w, n_r = len(lines(wlog)), len(lines(rlog))
            pair.start("b")
            assert wait_until(lambda: served_at(c, *pair.addr["b"]), 60, 0.1), pair.log("b")
            assert wait_until(lambda: failovers(c).get(PAIR_IDX) == pair.addr["a"], 10, 0.1), failovers(c)
            assert wait_until(lambda: len(lines(wlog)) >= n_w + 3 and len(lines(rlog)) >= n_r + 2
                              or writer.poll() is not None or reader.poll() is not None, 120, 0.1)
            assert writer.poll() is None, "the writer failed: " + writer.stderr.read()
            assert reader.poll() is None, "the reader failed: " + reader.stderr.read()
            # What the applications felt: the longest wait between two fsynced files, and between
            # two read passes, across the failover.
            wt = [float(t) for _, _, t in lines(wlog)]
            rt = [float(t[0]) for t in lines(rlog)]
            print("OST pair failover: B took over; the longest wait between fsynced files %.2f s, between "
                  "read passes %.2f s (server A killed at %.2f s into the writer's log)" % (
                      max(b - a for a, b in zip(wt, wt[1:])), max(b - a for a, b in zip(rt, rt[1:])),
                      killed - wt[0]))
        finally:
            open(stop, "w").close()
            for p in (writer, reader):
                p.wait(timeout=120)
        assert writer.returncode == 0, writer.stderr.read()
        assert reader.returncode == 0, reader.stderr.read()
        assert "multi-mount protection" in pair.log("b") or "OST" in pair.log("b")
        # What each file's last fsync returned is there, whole, through both mounts.
        last = {path: digest for path, digest, _ in lines(wlog)}
        assert len(last) == FILES
        for path, digest in last.items():
            for root in (mnt, view):
                with open(os.path.join(root, os.path.relpath(path, mnt)), "rb") as f:
                    assert hashlib.sha256(f.read()).hexdigest() == digest, path
    assert is_mounted(mnt)
    # The cluster's own OSS of that OST, started without --mmp-interval, keeps the protection the
    # OST has: refused while B serves it.
    c.cluster_cmd("up", "--osts", str(c.osts), check=False)
    name = c.oss_name(PAIR_IDX)
    assert wait_until(lambda: "multi-mount protection heartbeat is alive" in c.read_log(name), 30, 0.1), \
        c.read_log(name)[-2000:]
    assert ("the OST in %s is in use by loom-oss pid %d" % (pair.ost, pair.procs["b"].pid)) in c.read_log(name)
    assert pair.procs["b"].poll() is None and served_at(c, *pair.addr["b"])


# A process on the native path (the Python package) holds a file open for reading and another
# for writing on the pair's OST, and goes on when told (a line on stdin): reads the first whole,
# writes the second's next part; it reports each step's digest or error.
NATIVE = r"""
import hashlib, os, sys
import loom
fs = loom.connect(sys.argv[1], key_file=sys.argv[2])
r = fs.open("/pair/big", "rb")
wf = fs.open("/pair/out", "wb")
rng_parts = [bytes([k]) * (3 << 20) for k in range(1, 4)]
for line in sys.stdin:
    step = line.strip()
    try:
        if step == "read":
            r.seek(0)
            print("read", hashlib.sha256(r.read()).hexdigest(), flush=True)
        elif step.startswith("write"):
            wf.write(rng_parts[int(step[5:])])
            wf.flush()
            print("written", flush=True)
        elif step == "close":
            wf.close()
            r.close()
            fs.close()
            print("closed", flush=True)
            break
    except OSError as e:
        print("error", e, flush=True)
"""


@pytest.mark.pylib
@pytest.mark.allow_log(r"lost the MDS|cannot reach the MDS|OST0001|MDS.*(recover|away|reconnect)")
def test_ost_pair_fails_over_while_the_mds_is_down_too(pair, workdir):
    # Clients learnt the partner's address from the MDS: when the OST's server dies while the MDS
    # is away as well, they find the partner by themselves.
    import pyloom
    c = pair.c
    pair.start("a")
    assert wait_until(lambda: served_at(c, *pair.addr["a"]), 30, 0.1), pair.log("a")
    assert wait_until(lambda: failovers(c).get(PAIR_IDX) == pair.addr["b"], 10, 0.1)
    c.loom("mkdir", "/pair")
    c.loom("setstripe", "-c", "1", "-i", str(PAIR_IDX), "/pair")
    big = os.urandom(12 * MiB + 7)
    with open(os.path.join(c.dir, "mnt", "pair", "big"), "wb") as f:
        f.write(big)
    p = subprocess.Popen([sys.executable, "-c", NATIVE, c.addr, c.key], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=pyloom.child_env(c))

    def step(what):
        p.stdin.write(what + "\n")
        p.stdin.flush()
        return p.stdout.readline().split()

    try:
        want = hashlib.sha256(big).hexdigest()
        assert step("read") == ["read", want]
        assert step("write0") == ["written"]
        c.kill9("mds")
        pair.procs["a"].kill()
        pair.procs["a"].wait()
        pair.start("b")   # it cannot register (no MDS), and serves all the same
        assert step("read") == ["read", want]
        assert step("write1") == ["written"]
        assert wait_until(lambda: "serving 1 OST(s) on 127.0.0.2" in pair.log("b"), 30, 0.1)
        assert "registered with the MDS" not in pair.log("b")
        # The MDS back (by hand: `loom cluster up` would start the OST's first OSS too): B
        # registers, and the file is closed and whole.
        with open(os.path.join(c.dir, "log", "mds-by-hand.log"), "a") as log:
            mds = subprocess.Popen([MDS_BIN, "--mdt", os.path.join(c.dir, "mdt"), "--listen", c.addr,
                                    "--key", c.key], stdout=log, stderr=log)
        try:
            assert wait_until(lambda: served_at(c, *pair.addr["b"]), 60, 0.1), pair.log("b")
            assert step("write2") == ["written"]
            assert step("close") == ["closed"]
            p.wait(timeout=60)
            assert p.returncode == 0, p.stderr.read()
            with open(os.path.join(c.dir, "mnt", "pair", "out"), "rb") as f:
                assert f.read() == b"".join(bytes([k]) * (3 << 20) for k in range(1, 4))
        finally:
            mds.terminate()
            mds.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


# An application on the mount, driven line by line: "open NAME", "write NAME N BYTE", "fsync NAME",
# "flush NAME", "close NAME"; each answers "ok" or "err ERRNO". (In a process of its own: a file descriptor of
# the mount open in the test's process would be closed in every child it starts, and that close
# waits for the writes behind it, to an OST that is down.)
APP = r"""
import os, sys
d, fds = sys.argv[1], {}
for line in sys.stdin:
    cmd, name, *rest = line.split()
    try:
        if cmd == "open":
            fds[name] = os.open(os.path.join(d, name), os.O_RDWR | os.O_CREAT, 0o644)
        elif cmd == "write":
            os.write(fds[name], rest[1].encode() * int(rest[0]))
        elif cmd == "fsync":
            os.fsync(fds[name])
        elif cmd == "flush":   # a close of a copy: what went behind is answered, nothing synced
            os.close(os.dup(fds[name]))
        elif cmd == "close":
            os.close(fds.pop(name))
        print("ok", flush=True)
    except OSError as e:
        print("err", e.errno, flush=True)
"""


class App:
    def __init__(self, d):
        self.p = subprocess.Popen([sys.executable, "-c", APP, d], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)

    def __call__(self, *words):
        self.p.stdin.write(" ".join(str(x) for x in words) + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def end(self):
        self.p.stdin.close()
        self.p.wait(timeout=120)


@pytest.mark.allow_log(r"WARN: OST .*: the last server \(on \S+\) did not stop cleanly, under another kernel",
                       r"WARN: OST0001 is served by another instance",
                       r"WARN: inode \S+: OST0001's server changed since the file was written",
                       r"OST0001.*(Connection refused|recover|reconnect|away)")
def test_writes_a_dead_host_may_have_lost_are_the_next_fsyncs_error(pair):
    # An OSS acknowledges a write once it is in its page cache. When its host dies, a partner on
    # another host serves the OST without what that cache held: a file written since its last
    # fsync must hear so at its next fsync (EIO, once), as a local file system reports a lost
    # writeback. Files fsynced before, or written only after the failover, are fine.
    c = pair.c
    pair.start("a")
    assert wait_until(lambda: served_at(c, *pair.addr["a"]), 30, 0.1), pair.log("a")
    c.loom("mkdir", "/pair")
    c.loom("setstripe", "-c", "1", "-i", str(PAIR_IDX), "/pair")
    app = App(os.path.join(c.dir, "mnt", "pair"))
    try:
        for name in ("synced", "unsynced", "later", "closed"):
            assert app("open", name) == "ok"
        assert app("write", "synced", MiB, "s") == "ok"
        assert app("fsync", "synced") == "ok"
        assert app("write", "unsynced", MiB, "u") == "ok"
        assert app("flush", "unsynced") == "ok"   # A acknowledged it
        # Written and closed without fsync: an fsync through a later open hears of it too (a
        # checkpointer's way).
        assert app("write", "closed", MiB, "c") == "ok"
        assert app("close", "closed") == "ok"
        pair.procs["a"].kill()
        pair.procs["a"].wait()
        pair.start("b", hostname="oss-b-host")
        assert wait_until(lambda: served_at(c, *pair.addr["b"]), 60, 0.1), pair.log("b")
        assert "the last server (on %s) did not stop cleanly, under another kernel" % socket.gethostname() in pair.log("b")
        assert app("write", "later", MiB, "l") == "ok"
        assert app("fsync", "later") == "ok"
        assert app("fsync", "synced") == "ok"
        assert app("fsync", "unsynced") == "err %d" % errno.EIO
        assert app("fsync", "unsynced") == "ok"   # reported once
        assert app("open", "closed") == "ok"
        assert app("fsync", "closed") == "err %d" % errno.EIO
        # A partner under the same kernel (the OST's pages were the kernel's all along, whatever
        # its container's host name): nothing to tell.
        assert app("write", "later", MiB, "m") == "ok"
        pair.procs["b"].kill()
        pair.procs["b"].wait()
        pair.start("a", hostname="another-name", boot_id=pair.boot_id)
        assert wait_until(lambda: served_at(c, *pair.addr["a"]), 60, 0.1), pair.log("a")
        assert app("fsync", "later") == "ok"
        for name in ("synced", "unsynced", "later", "closed"):
            assert app("close", name) == "ok"
    finally:
        app.end()

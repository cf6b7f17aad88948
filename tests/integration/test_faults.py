"""Faults while applications run (issue 4, "Survive"): servers killed with SIGKILL or stopped with
SIGSTOP at random moments under a workload on a FUSE mount, a client killed mid-write, the
recovery window, and a file unlinked while open across an MDS restart.

What every test asserts is what a user would see: the application got no error, and everything it
was told had happened (a write followed by fsync or close, a rename, an unlink, a mkdir) is there
afterwards, read back through a client that did not write it.

The random fault schedules print their seed ("seed=N"); LOOM_FAULT_SEED=N runs one again.
"""

import errno
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from loomutil import (KiB, MiB, is_mounted, make_random_file, mount_daemon_pids, parse_any_getstripe,
                      pid_alive, second_mount, sha256_file, wait_until)

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.environ.get("LOOM_BUILD") or os.path.join(HERE, "..", "..", "build"))
LOOM = os.path.join(BUILD, "src", "tools", "loom")   # as conftest.py finds it

WORKLOAD_TIMEOUT = 90     # seconds a workload may take to stop once asked before we call it hung


# ---- helpers ----------------------------------------------------------------------------------


def seeded_rng(test_name):
    seed = int(os.environ.get("LOOM_FAULT_SEED") or random.SystemRandom().randrange(1 << 32))
    print("%s: seed=%d (LOOM_FAULT_SEED=%d reproduces the fault schedule)" % (test_name, seed, seed))
    return random.Random(seed), seed


_our_mounts = []


@pytest.fixture(autouse=True)
def _no_mount_left_behind():
    """Set up before the cluster, so torn down after it: a mount of this test that `cluster down`
    left behind is detached (and the test fails)."""
    del _our_mounts[:]
    yield
    left = [m for m in _our_mounts if is_mounted(m)]
    for m in left:
        subprocess.run(["umount", "-l", m], capture_output=True, timeout=60)
    assert not left, "`loom cluster down` left %s mounted" % left


def mount_cluster(cluster):
    """Mounts the cluster with `loom cluster up --mount`; returns the mount point. From then on
    every `up` (cluster.restart()) names the mount too, as `up` without --mount forgets it and
    the teardown's `cluster down` would then leave it mounted."""
    mnt = os.path.join(cluster.dir, "mnt")

    class MountedCluster(type(cluster)):
        def cluster_cmd(self, verb, *extra, check=True):
            if verb == "up":
                extra = extra + ("--mount", mnt)
            return super().cluster_cmd(verb, *extra, check=check)

    cluster.__class__ = MountedCluster
    _our_mounts.append(mnt)
    cluster.up()
    assert is_mounted(mnt), "`loom cluster up --mount %s` did not mount it" % mnt
    return mnt


def drop_caches():
    """Empties the page cache (the mount's and the OSSs' backing files'), so that the next read
    goes to the servers and their disks. Ignored where not allowed."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


def proc_io(pid):
    """/proc/PID/io as a dict (rchar, wchar: bytes passed to read and write calls)."""
    out = {}
    try:
        with open("/proc/%d/io" % pid) as f:
            for line in f:
                k, v = line.split(":")
                out[k] = int(v)
    except (FileNotFoundError, ProcessLookupError):
        pass
    return out


def kernel_stack(pid):
    try:
        with open("/proc/%d/stack" % pid) as f:
            return "pid %d:\n%s" % (pid, f.read())
    except OSError as e:
        return "pid %d: %s" % (pid, e)


def tree_of(root):
    """({relative dir}, {relative file: sha256}) of everything under root."""
    dirs, files = set(), {}
    for d, subdirs, names in os.walk(root):
        rel = os.path.relpath(d, root)
        for s in subdirs:
            dirs.add(os.path.normpath(os.path.join(rel, s)))
        for n in names:
            files[os.path.normpath(os.path.join(rel, n))] = sha256_file(os.path.join(d, n))
    return dirs, files


def object_files(cluster):
    """Every object file (not checksum sidecars) on every OST of the cluster."""
    out = set()
    for k in range(cluster.osts):
        base = os.path.join(cluster.dir, "ost%d" % k, "O")
        for d, _, names in os.walk(base):
            out.update(os.path.join(d, n) for n in names if not n.endswith(".crc") and not n.startswith("."))
    return out


def df_all_active(cluster):
    out = cluster.loom("df").stdout
    lines = [x for x in out.splitlines() if "OST" in x]
    return (len(lines) == cluster.osts and "inactive" not in out
            and all(re.match(r"^loom-OST%04x_UUID\s+\d+" % i, x) for i, x in enumerate(lines))), out


# ---- 1. a workload on the mount while servers are killed ------------------------------------

# The application: loops create + write + fsync + close + rename (sometimes over an existing
# file) + unlink + mkdir, and journals each step once the system call returned (one JSON line,
# flushed, on a local disk). It stops at the first error (journaled) or when the stop file exists.
WORKLOAD = r"""
import hashlib, json, os, random, sys
root, journal, stop, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = random.Random(seed)
j = open(journal, "a", buffering=1)
def log(*rec):
    j.write(json.dumps(rec) + "\n")
    j.flush()
live = []
i = 0
cur = None
op = "mkdir " + root
try:
    os.mkdir(root)
    log("mkdir", root)
    while not os.path.exists(stop):
        if i % 8 == 0:
            op = "mkdir"
            cur = os.path.join(root, "d%04d" % (i // 8))
            os.mkdir(cur)
            log("mkdir", cur)
        size = rng.choice([0, 1, 4096, rng.randrange(1, 256 << 10), rng.randrange(1, 256 << 10),
                           rng.randrange(1, 3 << 20)])
        data = rng.randbytes(size)
        tmp = os.path.join(cur, ".tmp%05d" % i)
        op = "create " + tmp
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        op = "write " + tmp
        v = memoryview(data)
        while v:
            v = v[os.write(fd, v):]
        op = "fsync " + tmp
        os.fsync(fd)
        op = "close " + tmp
        os.close(fd)
        if live and rng.random() < 0.2:
            final = rng.choice(live)          # replaces an existing file
        else:
            final = os.path.join(cur, "f%05d" % i)
            live.append(final)
        op = "rename %s %s" % (tmp, final)
        os.rename(tmp, final)
        log("put", final, hashlib.sha256(data).hexdigest())
        if len(live) > 3 and rng.random() < 0.3:
            victim = live.pop(rng.randrange(len(live)))
            op = "unlink " + victim
            os.unlink(victim)
            log("unlink", victim)
        i += 1
except OSError as e:
    log("error", op, e.errno, str(e))
    sys.exit(3)
log("done", i)
"""


class Workload:
    """nworkers WORKLOAD processes at once, each in a directory of its own under root (so that
    several requests are in flight when a server dies)."""

    def __init__(self, root, workdir, seed, nworkers=3):
        self.root = root
        self.journals = [os.path.join(workdir, "journal%d" % k) for k in range(nworkers)]
        self.stopfile = os.path.join(workdir, "stop")
        self.errpath = os.path.join(workdir, "workload.err")
        self.errfile = open(self.errpath, "w")
        self.procs = [subprocess.Popen([sys.executable, "-c", WORKLOAD, os.path.join(root, "w%d" % k),
                                        self.journals[k], self.stopfile, str(seed + k)],
                                       stdout=subprocess.DEVNULL, stderr=self.errfile, start_new_session=True)
                      for k in range(nworkers)]

    def records_of(self, journal):
        try:
            with open(journal) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for x in lines:
            try:
                out.append(json.loads(x))
            except ValueError:
                break       # a line being written
        return out

    def records(self):
        return [r for j in self.journals for r in self.records_of(j)]

    def puts(self):
        return sum(1 for r in self.records() if r[0] == "put")

    def errors(self):
        return [r for r in self.records() if r[0] == "error"]

    def running(self):
        return all(p.poll() is None for p in self.procs)

    def exit_codes(self):
        return [p.returncode for p in self.procs]

    def stop(self):
        """Asks them to stop; returns their exit statuses (None for one that hung and was killed)."""
        open(self.stopfile, "w").close()
        deadline = time.monotonic() + WORKLOAD_TIMEOUT
        out = []
        for p in self.procs:
            try:
                out.append(p.wait(timeout=max(1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                out.append(None)
        self.kill()
        return out

    def kill(self):
        """SIGKILLs what still runs; returns the pids of workers that would not die (stuck in a
        request of the mount that is never answered)."""
        stuck = []
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    stuck.append(p.pid)
        return stuck

    def stderr(self):
        # Through an open of our own: seeking the workers' would move their offset too.
        with open(self.errpath) as f:
            return f.read()[-3000:]

    def ended_cleanly(self):
        return all(self.records_of(j) and self.records_of(j)[-1][0] == "done" for j in self.journals)

    def expected(self):
        """({dir}, {file: sha256}) relative to root that the acknowledged steps leave."""
        dirs, files = set(), {}
        for r in self.records():
            if r[0] == "mkdir":
                dirs.add(os.path.relpath(r[1], self.root))
            elif r[0] == "put":
                files[os.path.relpath(r[1], self.root)] = r[2]
            elif r[0] == "unlink":
                del files[os.path.relpath(r[1], self.root)]
        return dirs, files


def run_workload_under_kills(cluster, workdir, test_name, kills, pick_victim, max_down=1.0):
    """Runs WORKLOAD on a mount while `kills` times, at random moments 0.5-3 s apart, the daemon
    pick_victim(rng) names is killed with SIGKILL and started again after a random 0-max_down s.
    Then checks that the application saw no error and that everything it was told is there, read
    through a second mount."""
    rng, seed = seeded_rng(test_name)
    mnt = mount_cluster(cluster)
    cluster.loom("mkdir", "/work")
    # Every file of more than 192 KiB has data on every OST.
    cluster.loom("setstripe", "-c", "-1", "-S", "64k", "/work")
    root = os.path.join(mnt, "work")
    wl = Workload(root, workdir, seed)
    killed = []
    t0 = time.monotonic()
    try:
        assert wait_until(lambda: wl.puts() >= 5 or not wl.running(), 60), \
            "the workload did not get going: %s" % wl.stderr()
        for k in range(kills):
            time.sleep(rng.uniform(0.5, 3.0))       # the random moment of the fault
            assert wl.running(), "the workload ended early (%s): %r\n%s" % (
                wl.exit_codes(), wl.errors(), wl.stderr())
            victim = pick_victim(rng)
            before = wl.puts()
            cluster.kill9(victim)
            killed.append((round(time.monotonic() - t0, 2), victim, before))
            print("%.2f s: killed %s (after %d files)" % (time.monotonic() - t0, victim, before), flush=True)
            time.sleep(rng.uniform(0, max_down))    # how long it stays down
            cluster.restart()
            # The application goes on once the server is back (within its recovery).
            assert wait_until(lambda: wl.puts() > before or not wl.running(), 120), \
                "the workload made no progress within 120 s of restarting %s" % victim
        codes = wl.stop()
    finally:
        stuck = wl.kill()
        if stuck:
            print("workload processes %r cannot be killed: stuck on the mount (seed %d); stacks:\n%s" % (
                stuck, seed, "\n".join(kernel_stack(pid) for pid in stuck)))
    print("kills (time s, daemon, files written before): %r" % killed)
    print("workload: %d files written, exit %r, %.1f s" % (wl.puts(), wl.exit_codes(), time.monotonic() - t0))
    assert not stuck, "workload processes hung on the mount (seed %d)" % seed
    errors = wl.errors()
    assert not errors, "the application saw errors (seed %d): %r\nkills: %r" % (seed, errors, killed)
    assert codes == [0] * len(codes), "the workload hung or failed (exit %r, seed %d): %s" % (
        codes, seed, wl.stderr())
    assert wl.ended_cleanly(), "a workload journal does not end cleanly"

    want_dirs, want_files = wl.expected()
    # What the application's own mount shows.
    got_dirs, got_files = tree_of(root)
    assert got_dirs == want_dirs, "directories on the mount differ: missing %r, extra %r" % (
        sorted(want_dirs - got_dirs), sorted(got_dirs - want_dirs))
    assert set(got_files) == set(want_files), "files on the mount differ: missing %r, extra %r" % (
        sorted(set(want_files) - set(got_files))[:20], sorted(set(got_files) - set(want_files))[:20])
    # What another client reads from the servers.
    drop_caches()
    with second_mount(cluster) as view:
        v_dirs, v_files = tree_of(os.path.join(view, "work"))
    assert v_dirs == want_dirs, "directories lost or left over (seed %d): missing %r, extra %r" % (
        seed, sorted(want_dirs - v_dirs), sorted(v_dirs - want_dirs))
    missing = sorted(set(want_files) - set(v_files))
    extra = sorted(set(v_files) - set(want_files))
    assert not missing, "acknowledged files lost (seed %d): %r" % (seed, missing[:20])
    assert not extra, "unlinked or temporary files are back (seed %d): %r" % (seed, extra[:20])
    wrong = sorted(p for p in want_files if v_files[p] != want_files[p])
    assert not wrong, "acknowledged files with wrong content (seed %d): %r" % (seed, wrong[:20])
    assert len(want_files) > kills, "too little was written to mean anything: %d files" % len(want_files)


def kill_mds(rng):
    return "mds"


def kill_random_oss(cluster):
    return lambda rng: "oss%d" % rng.randrange(cluster.osts)


def kill_anything(cluster):
    return lambda rng: rng.choice(["mds"] + ["oss%d" % k for k in range(cluster.osts)])


def test_mount_workload_survives_mds_kill9(cluster, workdir):
    run_workload_under_kills(cluster, workdir, "mds_kill9", 3, kill_mds)


def test_mount_workload_survives_oss_kill9(cluster, workdir):
    run_workload_under_kills(cluster, workdir, "oss_kill9", 3, kill_random_oss(cluster))


@pytest.mark.soak  # make soak: the single kills above take the same paths in the suite (CI's 30 minutes)
def test_mount_workload_survives_many_mds_kill9(cluster, workdir):
    run_workload_under_kills(cluster, workdir, "many_mds_kill9", 6, kill_mds, max_down=2.0)


@pytest.mark.soak  # make soak: the single kills above take the same paths in the suite (CI's 30 minutes)
def test_mount_workload_survives_many_oss_kill9(cluster, workdir):
    run_workload_under_kills(cluster, workdir, "many_oss_kill9", 6, kill_random_oss(cluster), max_down=2.0)


@pytest.mark.soak  # make soak: the single kills above take the same paths in the suite (CI's 30 minutes)
def test_mount_workload_survives_kill9_of_any_server(cluster, workdir):
    run_workload_under_kills(cluster, workdir, "any_kill9", 8, kill_anything(cluster), max_down=2.0)


# ---- 2. a large write or read while an OSS is stopped or killed ------------------------------

BIG = 256 * MiB
STOP_SECONDS = 12   # a stall the application waits through (test_hang.py has those past the timeout)

COPY_IN = r"""
import os, sys
src, dst = sys.argv[1], sys.argv[2]
fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
with open(src, "rb", buffering=0) as f:
    while True:
        b = f.read(1 << 20)
        if not b:
            break
        v = memoryview(b)
        while v:
            v = v[os.write(fd, v):]
os.fsync(fd)
os.close(fd)
print("written")
"""

READ_SHA = r"""
import hashlib, os, sys
h = hashlib.sha256()
fd = os.open(sys.argv[1], os.O_RDONLY)
while True:
    b = os.read(fd, 1 << 20)
    if not b:
        break
    h.update(b)
os.close(fd)
print(h.hexdigest())
"""


def big_setup(cluster, workdir):
    mnt = mount_cluster(cluster)
    cluster.loom("mkdir", "/big")
    cluster.loom("setstripe", "-c", "-1", "-S", "1M", "/big")
    src = os.path.join(workdir, "src")
    digest = make_random_file(src, BIG)
    return mnt, src, digest


def fault_midway(cluster, p, counter, name, fault):
    """Waits until the child p has moved a quarter of BIG bytes (counter: "rchar" or "wchar" of
    /proc/PID/io), then runs fault(name). The child must still be at work then."""
    assert wait_until(lambda: proc_io(p.pid).get(counter, 0) >= BIG // 4 or p.poll() is not None, 120, 0.002), \
        "the transfer did not get going"
    done = proc_io(p.pid).get(counter, 0)
    assert p.poll() is None, "the transfer ended (%r) before the fault: %s" % (p.returncode, p.communicate())
    print("fault on %s after %d MiB" % (name, done // MiB))
    fault(name)


def sigstop_for(cluster, p, seconds):
    def fault(name):
        pid = cluster.pid(name)
        os.kill(pid, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + seconds
            # The application waits: no error, no early end.
            while time.monotonic() < deadline:
                assert p.poll() is None, "the transfer ended while %s was stopped: exit %r %r" % (
                    name, p.returncode, p.communicate())
                time.sleep(0.2)
        finally:
            os.kill(pid, signal.SIGCONT)
    return fault


def kill9_restart(cluster):
    def fault(name):
        cluster.kill9(name)
        cluster.restart()
    return fault


def finish(p, what, timeout=180):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError("%s hung after the OSS came back: %s" % (what, err))
    assert p.returncode == 0, "%s failed (exit %d): %s" % (what, p.returncode, err)
    return out


def big_write_with_fault(cluster, workdir, test_name, make_fault):
    rng, _ = seeded_rng(test_name)
    mnt, src, digest = big_setup(cluster, workdir)
    victim = "oss%d" % rng.randrange(cluster.osts)
    p = subprocess.Popen([sys.executable, "-c", COPY_IN, src, os.path.join(mnt, "big", "f")], text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        fault_midway(cluster, p, "wchar", victim, make_fault(p))
        out = finish(p, "the write")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert out.strip() == "written"
    # Read back by another client, from the servers.
    got = os.path.join(workdir, "got")
    cluster.loom("get", "/big/f", got)
    assert os.path.getsize(got) == BIG, "the file's size is %d, not %d" % (os.path.getsize(got), BIG)
    assert sha256_file(got) == digest, "the data written across the fault on %s differs" % victim
    layout = parse_any_getstripe(cluster.loom("getstripe", "/big/f").stdout)
    assert layout.stripe_count == cluster.osts


def big_read_with_fault(cluster, workdir, test_name, make_fault):
    rng, _ = seeded_rng(test_name)
    mnt, src, digest = big_setup(cluster, workdir)
    victim = "oss%d" % rng.randrange(cluster.osts)
    cluster.loom("put", src, "/big/f")
    drop_caches()
    p = subprocess.Popen([sys.executable, "-c", READ_SHA, os.path.join(mnt, "big", "f")], text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        fault_midway(cluster, p, "rchar", victim, make_fault(p))
        out = finish(p, "the read")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert out.strip() == digest, "the data read across the fault on %s differs" % victim


@pytest.mark.slow
def test_large_write_survives_oss_sigstop(cluster, workdir):
    big_write_with_fault(cluster, workdir, "write_sigstop", lambda p: sigstop_for(cluster, p, STOP_SECONDS))


@pytest.mark.slow
def test_large_cold_read_survives_oss_sigstop(cluster, workdir):
    big_read_with_fault(cluster, workdir, "read_sigstop", lambda p: sigstop_for(cluster, p, STOP_SECONDS))


def test_large_write_survives_oss_kill9_and_restart(cluster, workdir):
    big_write_with_fault(cluster, workdir, "write_kill9", lambda p: kill9_restart(cluster))


def test_large_cold_read_survives_oss_kill9_and_restart(cluster, workdir):
    big_read_with_fault(cluster, workdir, "read_kill9", lambda p: kill9_restart(cluster))


# ---- 3. a client killed mid-write -----------------------------------------------------------


def snapshot(cluster, skip):
    """{path: `loom stat` output without atime} of everything except the subtree skip."""
    out = {}
    todo = ["/"]
    while todo:
        d = todo.pop()
        longs = [x for x in cluster.loom("ls", "-l", d).stdout.splitlines() if x]
        names = [x for x in cluster.loom("ls", d).stdout.splitlines() if x]
        assert len(names) == len(longs), "ls and ls -l of %s disagree" % d
        for name, line in zip(names, longs):
            p = d.rstrip("/") + "/" + name
            if p == skip:
                continue
            st = cluster.loom("stat", p).stdout
            out[p] = "\n".join(x for x in st.splitlines() if not x.startswith("Access:"))
            if line.startswith("d"):
                todo.append(p)
    return out


def test_client_killed_mid_write_harms_no_one_else(cluster, workdir):
    sums = {}
    cluster.loom("mkdir", "-p", "/keep/sub", "/partial")
    cluster.loom("setstripe", "-c", "-1", "-S", "1M", "/partial")
    for path, size in (("/keep/a", 3 * MiB + 17), ("/keep/sub/b", 64 * KiB), ("/keep/c", 1), ("/d", 9 * MiB)):
        src = os.path.join(workdir, path.strip("/").replace("/", "_"))
        sums[path] = make_random_file(src, size)
        cluster.loom("put", src, path)
    before = snapshot(cluster, "/partial")

    big = os.path.join(workdir, "big")
    size = 256 * MiB
    make_random_file(big, size)
    env = dict(cluster.env, LOOM_FS=cluster.addr)
    old_objects = object_files(cluster)

    def on_osts():
        return sum(os.path.getsize(f) for f in object_files(cluster) - old_objects if os.path.exists(f))

    p = subprocess.Popen([LOOM, "put", big, "/partial/f"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # Killed once a quarter of the file is on the OSTs.
        assert wait_until(lambda: on_osts() >= size // 4 or p.poll() is not None, 120, 0.002)
        assert p.poll() is None, "`loom put` finished before it could be killed: %r" % (p.communicate(),)
        p.kill()          # SIGKILL: no close, no size report
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    print("`loom put` killed with %d MiB on the OSTs" % (on_osts() // MiB))

    # The half-written file reads without error: some prefix of what was being written, where
    # unwritten parts are zeros.
    r = cluster.loom("get", "/partial/f", "-", text=False)
    got = r.stdout
    assert len(got) <= size, "the killed writer's file is longer (%d) than what it wrote" % len(got)
    with open(big, "rb") as f:
        want = f.read(len(got))
    if got != want:
        for off in range(0, len(got), 64 * KiB):
            a, b = got[off:off + 64 * KiB], want[off:off + 64 * KiB]
            if a != b:
                assert all(x == y or x == 0 for x, y in zip(a, b)), \
                    "the killed writer's file holds bytes it never wrote near offset %d" % off
    print("the killed writer's file reads %d bytes" % len(got))
    assert cluster.loom("ls", "/partial").stdout.split() == ["f"]

    # Everything else is as it was.
    assert snapshot(cluster, "/partial") == before, "the namespace changed when a client died"
    for path, digest in sums.items():
        out = os.path.join(workdir, "out")
        cluster.loom("get", path, out)
        assert sha256_file(out) == digest, "%s changed when another client died mid-write" % path
    ok, df = df_all_active(cluster)
    assert ok, "`loom df` after a client died:\n%s" % df
    data0 = os.urandom(3 * MiB + 1)
    cluster.loom("put", "-", "/partial/g", input=data0, text=False)
    assert cluster.loom("get", "/partial/g", "-", text=False).stdout == data0

    # fsck agrees: at most the dead writer's file has a size below its data (it never reported
    # one), which is what a writer that died before close leaves; nothing else.
    cluster.down()
    fsck = subprocess.run([LOOM, "fsck", "--dir", cluster.dir], capture_output=True, text=True, timeout=120)
    print(fsck.stdout)
    problems = [x for x in fsck.stdout.splitlines() if ": " in x and not re.match(r"^\d+ (inodes|problems)", x)]
    assert fsck.returncode in (0, 1), "fsck could not check (%d): %s%s" % (fsck.returncode, fsck.stdout, fsck.stderr)
    assert all(x.startswith("wrong size: /partial/f ") for x in problems), \
        "fsck finds more than the dead writer's unreported size:\n%s" % fsck.stdout
    assert (fsck.returncode == 0) == (not problems), fsck.stdout
    cluster.up()

    # New writes work, also over the half-written file.
    data = os.urandom(5 * MiB + 3)
    cluster.loom("put", "-", "/new", input=data, text=False)
    assert cluster.loom("get", "/new", "-", text=False).stdout == data
    cluster.loom("put", "-", "/partial/f", input=data, text=False)
    assert cluster.loom("get", "/partial/f", "-", text=False).stdout == data
    assert cluster.loom("get", "/partial/g", "-", text=False).stdout == data0
    for path, digest in sums.items():
        out = os.path.join(workdir, "out")
        cluster.loom("get", path, out)
        assert sha256_file(out) == digest


# ---- 6. the recovery window ----------------------------------------------------------------


def file_on_every_ost(cluster, workdir, path, size=5 * MiB + 3):
    cluster.loom("mkdir", "-p", os.path.dirname(path))
    cluster.loom("setstripe", "-c", "-1", "-S", "1M", os.path.dirname(path))
    data = os.urandom(size)
    cluster.loom("put", "-", path, input=data, text=False)
    layout = parse_any_getstripe(cluster.loom("getstripe", path).stdout)
    assert sorted(i for i, _ in layout.objects) == list(range(cluster.osts)), layout
    return data


def test_read_from_a_dead_oss_fails_with_eio_after_the_recovery_window(cluster, workdir):
    data = file_on_every_ost(cluster, workdir, "/w/f")
    cluster.kill9("oss2")
    cluster.env["LOOM_RECOVERY_SECONDS"] = "3"
    t0 = time.monotonic()
    p = cluster.loom("get", "/w/f", "-", check=False, text=False, timeout=120)
    took = time.monotonic() - t0
    del cluster.env["LOOM_RECOVERY_SECONDS"]
    err = p.stderr.decode(errors="replace")
    print("`loom get` failed after %.1f s: %s" % (took, err.strip()))
    assert p.returncode != 0, "a read of a file on a dead OSS succeeded"
    assert "Input/output error" in err, "not EIO: %r" % err
    assert data.startswith(p.stdout) and len(p.stdout) < len(data), "wrong bytes came out of a failed read"
    cluster.restart()
    assert cluster.loom("get", "/w/f", "-", text=False).stdout == data


def test_read_started_while_an_oss_is_down_completes_when_it_returns(cluster, workdir):
    data = file_on_every_ost(cluster, workdir, "/w/f")
    cluster.kill9("oss1")
    env = dict(cluster.env, LOOM_FS=cluster.addr)
    env.pop("LOOM_RECOVERY_SECONDS", None)      # the default window, 100 s
    p = subprocess.Popen([LOOM, "get", "/w/f", "-"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # It waits for the OSS (saying so), without failing.
        time.sleep(5)                     # the OSS stays down this long: the point of the test
        assert p.poll() is None, "`loom get` gave up while the OSS was down: %r" % (p.communicate(),)
        cluster.restart()
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, "`loom get` failed after the OSS came back: %s" % err.decode(errors="replace")
    assert out == data, "`loom get` across an OSS restart returned wrong data"


# ---- 7. a file unlinked while open, across an MDS restart ----------------------------------


def test_unlinked_open_file_keeps_working_across_mds_kill9(cluster, workdir):
    mnt = mount_cluster(cluster)
    cluster.loom("setstripe", "-c", "-1", "-S", "64k", "/")
    baseline = object_files(cluster)
    path = os.path.join(mnt, "scratch")
    first = os.urandom(3 * MiB + 5)
    second = os.urandom(2 * MiB + 7)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        assert os.write(fd, first) == len(first)
        os.fsync(fd)
        os.unlink(path)
        assert not os.path.exists(path)
        assert wait_until(lambda: len(object_files(cluster) - baseline) >= cluster.osts, 30), \
            "the open file's objects never appeared on the OSTs"

        print("the unlinked open file has %d objects" % len(object_files(cluster) - baseline))
        cluster.kill9("mds")
        cluster.restart()

        # The fd keeps working: reads, writes past the end and over the old data, fsync.
        assert os.pread(fd, 1000, 12345) == first[12345:13345]
        assert os.pwrite(fd, second, len(first)) == len(second)
        assert os.pwrite(fd, b"overwritten", 100) == 11
        os.fsync(fd)
        want = bytearray(first + second)
        want[100:111] = b"overwritten"
        st = os.fstat(fd)
        assert st.st_size == len(want) and st.st_nlink == 0, (st.st_size, st.st_nlink)
        drop_caches()     # read from the OSTs, not from the mount's cache
        got = os.pread(fd, len(want) + 100, 0)
        assert got == bytes(want), "an unlinked open file's data is wrong after the MDS restart"
        # Another restart of the MDS while it is still open.
        cluster.kill9("mds")
        cluster.restart()
        drop_caches()
        assert os.pread(fd, len(want) + 100, 0) == bytes(want)
    finally:
        os.close(fd)
    assert os.listdir(mnt) == []
    # Its last close frees it: the objects are destroyed.
    assert wait_until(lambda: object_files(cluster) <= baseline, 60, 0.2), \
        "the objects of the unlinked file outlived its last close: %r" % sorted(object_files(cluster) - baseline)
    assert cluster.loom("ls", "/").stdout == ""


def start_mds_by_hand(cluster, *extra):
    """Starts the cluster's MDS as `loom cluster up` does (same command line, log and pid file),
    with extra options; `loom cluster down` stops it as its own."""
    import loomwire
    mds_bin = os.path.join(BUILD, "src", "mds", "loom-mds")
    argv = [mds_bin, "--mdt", os.path.join(cluster.dir, "mdt"), "--listen", cluster.addr,
            "--port-file", os.path.join(cluster.dir, "run", "mds.addr"), "--key", cluster.key] + list(extra)
    with open(cluster.log_path("mds"), "a") as log:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    with open(os.path.join(cluster.dir, "run", "mds.pid"), "w") as f:
        f.write("%d\n" % p.pid)
    cluster.expected.add("mds")

    def serving():
        # Refused, or reset while the killed MDS's last threads are still going away: not yet.
        try:
            with loomwire.Conn(cluster.mds_host, cluster.mds_port, timeout=5) as c:
                return c.ping() == 0
        except (OSError, loomwire.ConnectionClosed):
            return False

    assert wait_until(serving, 30), "the MDS started by hand does not serve:\n%s" % cluster.read_log("mds")[-2000:]
    return p


def objects_of(cluster, path):
    """The object files of a file's layout (`loom getstripe`)."""
    from loomutil import object_path
    layout = parse_any_getstripe(cluster.loom("getstripe", path).stdout)
    return {object_path(cluster.ost_dir(idx), objid) for idx, objid in layout.objects}


def test_unlinked_open_file_outlives_the_mds_recovery_window_after_a_restart(cluster, workdir):
    # The MDS restarts with a 3 s recovery window: the orphans of clients that did not come back
    # are released then, and those a client opened again are kept until their last close.
    mnt = mount_cluster(cluster)
    cluster.loom("setstripe", "-c", "-1", "-S", "64k", "/")
    ours = os.path.join(mnt, "ours")
    data = os.urandom(MiB + 123)
    fd = os.open(ours, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    other_dir = tempfile.mkdtemp(prefix="loom-faults-b-")
    other_fd = None
    try:
        os.write(fd, data)
        os.fsync(fd)
        our_objects = objects_of(cluster, "/ours")
        os.unlink(ours)

        # A second client with a file unlinked while open; it dies and never comes back.
        subprocess.run(["mount", "-t", "loom", "-o", "key=" + cluster.key, "%s:/loom" % cluster.addr, other_dir],
                       check=True, timeout=60)
        theirs = os.path.join(other_dir, "theirs")
        other_fd = os.open(theirs, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(other_fd, os.urandom(MiB))
        os.fsync(other_fd)
        their_objects = objects_of(cluster, "/theirs")
        os.unlink(theirs)
        # The unlink made durable (fsync of the directory): this client dies with the MDS, and
        # nobody could replay it.
        dfd = os.open(other_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        assert all(os.path.exists(o) for o in our_objects | their_objects)
        for pid in mount_daemon_pids(other_dir):
            os.kill(pid, signal.SIGKILL)

        cluster.kill9("mds")
        start_mds_by_hand(cluster, "--recovery-window", "3")
        assert wait_until(lambda: "released 1 inodes left unlinked but open by the previous run"
                          in cluster.read_log("mds"), 60, 0.2), \
            "the restarted MDS did not release the orphan nobody opened again:\n%s" % cluster.read_log("mds")[-3000:]
        assert wait_until(lambda: not any(os.path.exists(o) for o in their_objects), 60, 0.2), \
            "the objects of the released orphan were not destroyed"

        # Ours was opened again by its client: its objects and data are there.
        assert all(os.path.exists(o) for o in our_objects), "objects of an open file were destroyed"
        drop_caches()
        assert os.pread(fd, len(data) + 10, 0) == data
        more = os.urandom(100 * KiB)
        os.pwrite(fd, more, len(data))
        os.fsync(fd)
        drop_caches()
        assert os.pread(fd, len(data) + len(more) + 10, 0) == data + more
    finally:
        os.close(fd)
        if other_fd is not None:
            try:
                os.close(other_fd)
            except OSError:
                pass
        if is_mounted(other_dir):
            subprocess.run(["umount", "-l", other_dir], timeout=60)
        os.rmdir(other_dir)
    assert wait_until(lambda: not any(os.path.exists(o) for o in our_objects), 60, 0.2), \
        "the objects of the unlinked file outlived its last close"
    assert os.listdir(mnt) == []

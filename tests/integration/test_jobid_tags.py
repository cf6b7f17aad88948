"""Job ids on the wire (protocol 10, Lustre's jobstats): every request a client sends carries the
job id of the process it is for, and work done later carries the job of the process that caused
it, not of whoever's thread does it.

What the servers count (`loom jobstats`) is not read here: a relay in front of the MDS and one in
front of the only OSS (which is restarted by hand on 127.0.0.2 and advertises 127.0.0.1, where
the relay listens, as in test_frame_auth.py) records each request as it goes by. Frames are
authenticated, not encrypted, so a request's header and job id are in the clear; the tests count
bytes and requests per job on the wire itself:
  - the mount (-o jobid_var=SLURM_JOB_ID): two processes of two jobs, each writing and reading
    its own files at once, and making names; the job the mount gives a caller (its ioctl);
    Data-on-MDT bytes one job wrote and another job's process closed;
  - libloom from Python: the mount's settings taken (and $LOOM_JOBID_VAR over them), a forked
    child's own %p, a prefetcher's reads, writes behind;
  - a mount's door: the session's writes and the daemon's prefetcher for it.
"""

import json
import os
import socket
import subprocess
import sys
import threading
from collections import Counter

import pytest

import loomwire as w
from loomutil import BUILD, OSS_BIN, OST_REGISTERED_AT, recv_exact, second_mount, wait_until

MiB = 1 << 20
MOUNT_BIN = os.path.join(BUILD, "src", "fuse", "loom-mount")
OST_OPS = {w.OP["OST_READ"]: "read", w.OP["OST_WRITE"]: "write"}
# _IOWR('L', 0xA5, struct loom_ioc_jobid): var[64], name[64], job[32] (src/common/mount_ioctl.h)
IOC_JOBID_SIZE = 160
LOOM_IOC_JOBID = (3 << 30) | (IOC_JOBID_SIZE << 16) | (ord("L") << 8) | 0xA5


class Request:
    """One request as it crossed a relay toward its server."""

    def __init__(self, h, body, bulk_len):
        self.opcode = h.opcode
        self.tagged = bool(h.flags & w.F_JOBID)
        self.job = body[:w.JOBID_LEN].split(b"\0", 1)[0].decode() if self.tagged else None
        self.body = body[w.JOBID_LEN:] if self.tagged else body
        self.bulk_len = bulk_len

    def ost_io(self):
        """(ino, length) of an OST request's struct lw_ost_io."""
        _, _, _, _, length, ino, _, _, _, _ = w.OST_IO.unpack_from(self.body)
        return ino, length


class Recorder:
    """A TCP relay that keeps every request it carries to the server (the replies go by)."""

    def __init__(self, listen_host, listen_port, up_host, up_port):
        self.up = (up_host, up_port)
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((listen_host, listen_port))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.addr = "%s:%d" % (listen_host, self.port)
        self.lock = threading.Lock()
        self.requests = []
        self.socks = []
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopping:
            try:
                down, _ = self.lsock.accept()
                up = socket.create_connection(self.up, timeout=10)
            except OSError:
                continue
            up.settimeout(None)
            with self.lock:
                self.socks += [down, up]
            sealed = {"c2s": False, "s2c": False}
            for d, src, dst in (("c2s", down, up), ("s2c", up, down)):
                threading.Thread(target=self._pump, args=(d, src, dst, sealed), daemon=True).start()

    def _pump(self, direction, src, dst, sealed):
        try:
            while True:
                raw = recv_exact(src, w.HDR.size)
                h = w.Header(raw)
                body = recv_exact(src, h.body_len) if h.body_len else b""
                bulk = recv_exact(src, h.bulk_len) if h.bulk_len else b""
                tag = recv_exact(src, w.TAG_LEN) if sealed[direction] else b""
                if direction == "c2s" and not h.flags & w.F_REPLY:
                    with self.lock:
                        self.requests.append(Request(h, body, len(bulk)))
                dst.sendall(raw + body + bulk + tag)
                if h.opcode == w.OP["AUTH_PROVE"] and h.status == 0:
                    sealed[direction] = True  # every later frame this way is sealed
        except (EOFError, OSError):
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def mark(self):
        """Where the requests recorded from now on begin."""
        with self.lock:
            return len(self.requests)

    def since(self, mark=0):
        with self.lock:
            return list(self.requests[mark:])

    def stop(self):
        self.stopping = True
        self.lsock.close()
        with self.lock:
            socks = list(self.socks)
        for s in socks:
            try:
                s.close()
            except OSError:
                pass


class Relayed:
    def __init__(self, cluster, mds, oss, oss_proc, oss_log):
        self.cluster, self.mds, self.oss, self.oss_proc, self.oss_log = cluster, mds, oss, oss_proc, oss_log

    def source(self):
        return "%s:/loom" % self.mds.addr

    def ost_by_job(self, ino, op, mark=0):
        """{job: bytes} of the OST_READ or OST_WRITE requests of inode ino (a read counts what it
        asked for, a write what it carried)."""
        out = Counter()
        for r in self.oss.since(mark):
            if OST_OPS.get(r.opcode) != op:
                continue
            r_ino, length = r.ost_io()
            if r_ino == ino:
                out[r.job] += r.bulk_len if op == "write" else length
        return dict(out)

    def mds_jobs_carrying(self, data, mark=0):
        """The jobs of the MDS requests whose body holds data."""
        return [r.job for r in self.mds.since(mark) if data in r.body]


@pytest.fixture
def relayed(cluster_factory):
    """A 1-OST cluster whose MDS and OSS are reached through recording relays."""
    cluster = cluster_factory(osts=1)
    cluster.kill9("oss0")
    pf = os.path.join(cluster.dir, "run", "oss0-relayed.addr")
    log_path = os.path.join(cluster.dir, "log", "oss0-relayed.log")
    before = len(OST_REGISTERED_AT.findall(cluster.read_log("mds")))
    # The relay's port first, on 127.0.0.1; the OSS then listens on the same port of 127.0.0.2
    # (its bind, retried, is the one that may find the port taken).
    for _ in range(10):
        oss_relay = Recorder("127.0.0.1", 0, "127.0.0.2", 0)
        oss_relay.up = ("127.0.0.2", oss_relay.port)
        argv = [OSS_BIN, "--ost", os.path.join(cluster.dir, "ost0"), "--mds", cluster.addr,
                "--listen", "127.0.0.2:%d" % oss_relay.port, "--advertise", "127.0.0.1",
                "--port-file", pf, "--key", cluster.key]
        with open(log_path, "a") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=log)
        assert wait_until(lambda: os.path.exists(pf) or proc.poll() is not None, 30), \
            "the OSS started by hand wrote no port file"
        if os.path.exists(pf):
            break
        oss_relay.stop()
    else:
        pytest.fail("the OSS started by hand found no free port:\n" + open(log_path).read()[-2000:])
    mds_relay = Recorder("127.0.0.1", 0, cluster.mds_host, cluster.mds_port)
    r = Relayed(cluster, mds_relay, oss_relay, proc, log_path)
    try:
        assert wait_until(lambda: len(OST_REGISTERED_AT.findall(cluster.read_log("mds"))) > before, 60, 0.1), \
            "the OSS started by hand did not register:\n" + open(log_path).read()[-2000:]
        yield r
        assert proc.poll() is None, "the OSS died:\n" + open(log_path).read()[-3000:]
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=60)
        mds_relay.stop()
        oss_relay.stop()


def run_py(code, env, *args, timeout=180):
    """Runs a Python program; returns what it printed last, as JSON."""
    p = subprocess.run([sys.executable, "-c", code] + [str(a) for a in args], env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, "the program failed (%d):\n%s\n%s" % (p.returncode, p.stdout, p.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


def env_of(base, job=None, **extra):
    env = {k: v for k, v in base.items() if not k.startswith(("SLURM_", "LOOM_JOBID"))}
    if job is not None:
        env["SLURM_JOB_ID"] = job
    env.update(extra)
    return env


# A process of a job, through the mount: its job as the mount says (ioctl), then writes its file
# in 1 MiB writes (each sent behind), makes a directory, and reads a file written elsewhere.
MOUNT_WORKER = r"""
import fcntl, json, os, sys
mnt, name, size, read_path, ioc = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
fd = os.open(mnt, os.O_RDONLY)
buf = bytearray(160)
fcntl.ioctl(fd, ioc, buf, True)
os.close(fd)
field = lambda b: bytes(b).split(b"\0", 1)[0].decode()
out = {"var": field(buf[:64]), "name": field(buf[64:128]), "job": field(buf[128:])}
chunk = os.urandom(1 << 20)
fd = os.open(os.path.join(mnt, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for off in range(0, size, len(chunk)):
    os.write(fd, chunk[: size - off])
os.close(fd)
os.mkdir(os.path.join(mnt, "dir-of-" + name))
with open(read_path, "rb") as f:
    out["read"] = len(f.read())
out["ino"] = os.stat(os.path.join(mnt, name)).st_ino
print(json.dumps(out))
"""

# Data-on-MDT bytes written by this process (job 1111) and reported at a close by another process
# of another job (3333) that shares the descriptor: the report is the writer's.
DOM_HANDOFF = r"""
import json, os, subprocess, sys
path, marker = sys.argv[1], sys.argv[2].encode()
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
closer = subprocess.Popen([sys.executable, "-c",
                           "import os, sys; sys.stdin.readline(); os.close(int(sys.argv[1]))", str(fd)],
                          pass_fds=[fd], stdin=subprocess.PIPE,
                          env=dict(os.environ, SLURM_JOB_ID="3333"))
os.write(fd, marker)
closer.stdin.write(b"close\n")
closer.stdin.close()
assert closer.wait() == 0
os.close(fd)
print(json.dumps({"closer": closer.pid}))
"""


def test_bad_jobid_options_fail_the_mount(workdir):
    """A value jobid_conf_set refuses ends loom-mount at once, saying what is taken (before it
    connects: nothing listens at the address)."""
    mnt = os.path.join(workdir, "mnt")
    os.mkdir(mnt)
    for opt, says in (("jobid_var=SLURM-JOB", "jobid_var=SLURM-JOB: disable, procname_uid, nodelocal, or"),
                      ("jobid_var=" + "V" * 64, "the name of an environment variable"),
                      ("jobid_name=" + "x" * 64, "a pattern of 1 to 63 printable ASCII characters"),
                      ("jobid_name=", "a pattern of 1 to 63")):
        p = subprocess.run([MOUNT_BIN, "127.0.0.1:1:/loom", mnt, "-f", "-o", opt], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 1, (opt, p.returncode, p.stderr)
        assert says in p.stderr, (opt, p.stderr)


def test_the_mount_tags_each_request_with_its_callers_job(relayed, workdir):
    r = relayed
    cluster = r.cluster
    # Files to read, written by the tool (its own job), so that no page of them is cached in
    # the mount's kernel: their reads reach the OSS.
    for k, size in ((1, 3 * MiB + 4321), (2, 5 * MiB)):
        src = os.path.join(workdir, "r%d" % k)
        with open(src, "wb") as f:
            f.write(os.urandom(size))
        cluster.loom("put", src, "/r%d" % k)
    base = dict(cluster.env)
    with second_mount(cluster, source=r.source(), opts="jobid_var=SLURM_JOB_ID") as mnt:
        r1, r2 = os.stat(os.path.join(mnt, "r1")), os.stat(os.path.join(mnt, "r2"))
        mark_oss, mark_mds = r.oss.mark(), r.mds.mark()
        # Two processes of two jobs, side by side, through the one mount.
        procs = [subprocess.Popen([sys.executable, "-c", MOUNT_WORKER, mnt, name, str(size),
                                   os.path.join(mnt, rname), str(LOOM_IOC_JOBID)],
                                  env=env_of(base, job), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
                 for job, name, size, rname in (("1111", "a", 6 * MiB + 100, "r1"),
                                                ("2222", "b", 4 * MiB, "r2"))]
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            outs.append(json.loads(out.strip().splitlines()[-1]))
        a, b = outs
        assert (a["var"], a["name"]) == ("SLURM_JOB_ID", "%e.%u"), a
        assert (a["job"], b["job"]) == ("1111", "2222"), "the mount's job for each caller: %s" % outs
        assert (a["read"], b["read"]) == (r1.st_size, r2.st_size)

        # Every byte written went to the OSS under its writer's job: the file less its first
        # 64 KiB, which went to the MDS (Data-on-MDT) with the size at close.
        dom = 64 << 10
        assert r.ost_by_job(a["ino"], "write", mark_oss) == {"1111": 6 * MiB + 100 - dom}
        assert r.ost_by_job(b["ino"], "write", mark_oss) == {"2222": 4 * MiB - dom}
        # Every read (the kernel's read-ahead too) under its reader's.
        for ino, job, size in ((r1.st_ino, "1111", r1.st_size), (r2.st_ino, "2222", r2.st_size)):
            got = r.ost_by_job(ino, "read", mark_oss)
            assert set(got) == {job} and got[job] >= size - dom, (ino, got)
        # The names each made, under its own job.
        for name, job in (("a", "1111"), ("b", "2222")):
            jobs = r.mds_jobs_carrying(b"dir-of-" + name.encode(), mark_mds)
            assert jobs and set(jobs) == {job}, (name, jobs)
        # The caller of nothing: the mount's own requests (none here but its release of files).
        untagged = [q for q in r.oss.since(mark_oss) if q.opcode in OST_OPS and not q.tagged]
        assert not untagged, "OST requests without a job id: %d" % len(untagged)

        # Data-on-MDT bytes written by job 1111 and sent at a close by a process of job 3333.
        marker = "dom-marker-%s" % os.urandom(8).hex()
        mark_mds = r.mds.mark()
        closer = run_py(DOM_HANDOFF, env_of(base, "1111"), os.path.join(mnt, "small"), marker)
        jobs = r.mds_jobs_carrying(marker.encode(), mark_mds)
        assert jobs, "no MDS request carried the Data-on-MDT bytes"
        assert set(jobs) == {"1111"}, "the report of job 1111's bytes, sent at the close of %s: %s" % (
            closer, jobs)
        with open(os.path.join(mnt, "small"), "rb") as f:
            assert f.read() == marker.encode()


# libloom in a Python process: its job id, writes behind, a prefetcher, and a forked child.
LIBLOOM_WORKER = r"""
import json, os, sys
import loom
mnt, key, name, read_name, fork_name = sys.argv[1:6]
fs = loom.connect(mnt, key_file=key, door=False)
out = {"job": fs.jobid, "pid": os.getpid(), "comm": open("/proc/self/comm").read().strip()}
chunk = os.urandom(1 << 20)
with fs.open("/" + name, "wb", buffering=0) as f:
    for _ in range(3):
        f.write(chunk)
with fs.prefetch(["/" + read_name]) as pf:
    out["read"] = len(pf.take(0))
rd, wr = os.pipe()
child = os.fork()
if child == 0:
    os.close(rd)
    n = len(fs.read_bytes("/" + fork_name))
    os.write(wr, json.dumps({"job": fs.jobid, "read": n}).encode())
    os._exit(0)
os.close(wr)
got = b""
while True:
    b = os.read(rd, 4096)
    if not b:
        break
    got += b
os.waitpid(child, 0)
out["child"] = dict(json.loads(got), pid=child)
print(json.dumps(out))
"""

# Through the mount's door: the mount does the session's requests, in its caller's job.
DOOR_WORKER = r"""
import json, os, sys
import loom
mnt, name, read_name = sys.argv[1:4]
fs = loom.connect(mnt, door=True)
assert fs.via_door
with fs.open("/" + name, "wb", buffering=0) as f:
    f.write(os.urandom(3 << 20))
with fs.prefetch(["/" + read_name]) as pf:
    n = len(pf.take(0))
print(json.dumps({"job": fs.jobid, "read": n}))
"""


@pytest.mark.pylib
def test_libloom_and_the_door_tag_requests_with_the_process_job(relayed, workdir):
    from pyloom import child_env
    r = relayed
    cluster = r.cluster
    sizes = {"p1": 2 * MiB + 5, "p2": 3 * MiB, "p3": 4 * MiB}
    for name, size in sizes.items():
        src = os.path.join(workdir, name)
        with open(src, "wb") as f:
            f.write(os.urandom(size))
        cluster.loom("put", src, "/" + name)
    base = child_env(cluster)
    dom = 64 << 10
    with second_mount(cluster, source=r.source(), opts="jobid_var=SLURM_JOB_ID,jobid_name=%e.%p") as mnt:
        ino = {n: os.stat(os.path.join(mnt, n)).st_ino for n in sizes}

        # A keyed connection found from the mount takes its settings: SLURM_JOB_ID when set ...
        mark = r.oss.mark()
        out = run_py(LIBLOOM_WORKER, env_of(base, "4444"), mnt, cluster.key, "w1", "p1", "p2")
        assert out["job"] == "4444" and out["child"]["job"] == "4444", out
        written = os.stat(os.path.join(mnt, "w1")).st_ino
        assert r.ost_by_job(written, "write", mark) == {"4444": 3 * MiB - dom}
        for n in ("p1", "p2"):   # the prefetcher's threads, and the forked child's connection
            got = r.ost_by_job(ino[n], "read", mark)
            assert set(got) == {"4444"} and got["4444"] >= sizes[n] - dom, (n, got)

        # ... else its pattern, %e.%p: the forked child (a DataLoader worker) is a job of its own.
        mark = r.oss.mark()
        out = run_py(LIBLOOM_WORKER, env_of(base), mnt, cluster.key, "w2", "p2", "p3")
        parent = "%s.%d" % (out["comm"], out["pid"])
        child = "%s.%d" % (out["comm"], out["child"]["pid"])
        assert (out["job"], out["child"]["job"]) == (parent, child), out
        assert set(r.ost_by_job(ino["p2"], "read", mark)) == {parent}
        assert set(r.ost_by_job(ino["p3"], "read", mark)) == {child}
        assert set(r.ost_by_job(os.stat(os.path.join(mnt, "w2")).st_ino, "write", mark)) == {parent}

        # $LOOM_JOBID_VAR wins over the mount's settings.
        mark = r.oss.mark()
        out = run_py(LIBLOOM_WORKER, env_of(base, "4444", LOOM_JOBID_VAR="MY_JOB", MY_JOB="mine"),
                     mnt, cluster.key, "w3", "p1", "p3")
        assert out["job"] == "mine" and out["child"]["job"] == "mine", out
        assert set(r.ost_by_job(os.stat(os.path.join(mnt, "w3")).st_ino, "write", mark)) == {"mine"}
        assert set(r.ost_by_job(ino["p1"], "read", mark)) == {"mine"}

        # Through the door (no key), the mount tags the session's requests, and its prefetcher's
        # reads, with the caller's job, as it reads the caller's environment.
        mark = r.oss.mark()
        door_env = env_of(base, "5555")
        door_env.pop("LOOM_KEY_FILE", None)
        out = run_py(DOOR_WORKER, door_env, mnt, "d1", "p3")
        assert out == {"job": "5555", "read": sizes["p3"]}, out
        assert r.ost_by_job(os.stat(os.path.join(mnt, "d1")).st_ino, "write", mark) == {"5555": 3 * MiB - dom}
        got = r.ost_by_job(ino["p3"], "read", mark)
        assert set(got) == {"5555"} and got["5555"] >= sizes["p3"] - dom, got

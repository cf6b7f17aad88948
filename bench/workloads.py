"""The workloads of bench/run.py, each run once on one side (the Loom mount, the local folder or,
for some, a MooseFS mount).

A workload is a function taking a Side and returning {metric key: figure}; METRICS describes
every key (its label, unit and the issue's target floors for loom/local and loom/moosefs, if it
has them). Every workload works in its own directory under the side's root and removes it
before returning, so that at most one workload's files are on the disk at a time.
"""
import dataclasses
import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

MiB = 1 << 20


@dataclasses.dataclass
class Sizes:
    small_files: int = 1000      # tokenized examples, np.save'd int32 arrays of 512-4,096 tokens
    images: int = 500            # image files ...
    image_mib: int = 8           # ... of this size
    checkpoints: int = 8         # checkpoint files ...
    checkpoint_mib: int = 256    # ... of this size
    model_mib: int = 2048        # the model file
    meta_files: int = 10000      # empty files in one directory
    mdtest_files: int = 5000     # empty files per mdtest process
    fio_mib: int = 2048          # fio's file
    fio_runtime: int = 20        # seconds of fio's 4 KiB random reads


FULL = Sizes()
QUICK = Sizes(small_files=200, images=50, checkpoints=2, checkpoint_mib=64, model_mib=256,
              meta_files=1000, mdtest_files=500, fio_mib=256, fio_runtime=5)


@dataclasses.dataclass
class Metric:
    key: str
    label: str
    unit: str
    floor: float = None          # the target for loom/local
    peer_floor: float = None     # the target for loom/moosefs (4.0: four times MooseFS)


METRICS = {
    "small": [
        Metric("small_save", "small files: np.save", "files/s", 0.50),
        Metric("small_load_1", "small files: np.load shuffled, 1 thread", "files/s", 0.30),
        Metric("small_load_8", "small files: np.load shuffled, 8 threads", "files/s"),
        Metric("small_load_3rd", "small files: np.load shuffled, 1 thread, 3rd epoch", "files/s"),
    ],
    "images": [
        Metric("images_write", "images: write", "MiB/s"),
        Metric("images_epoch", "images: shuffled epoch, 4 threads", "MiB/s", 0.40),
    ],
    "checkpoint": [
        Metric("ckpt_write", "checkpoints: write+fsync+rename", "MiB/s", 0.60),
    ],
    "model": [
        Metric("model_read_1", "model: cold sequential read, 1 reader", "MiB/s", 0.40),
        Metric("model_read_4", "model: whole file by 4 readers (aggr.)", "MiB/s", 0.40),
    ],
    "metadata": [
        Metric("meta_create", "metadata: create", "ops/s", 0.40, 4.0),
        Metric("meta_stat", "metadata: stat (cold)", "ops/s", 0.25),
        Metric("meta_open", "metadata: open+close", "ops/s", None, 10.0),
        Metric("meta_open_3rd", "metadata: open+close, 3rd time", "ops/s"),
        Metric("meta_ls", "metadata: ls -l (cold)", "entries/s"),
        Metric("meta_unlink", "metadata: unlink", "ops/s", 0.10, 4.0),
    ],
    "mdtest": [
        Metric("mdtest_create", "mdtest: create, 2 processes", "ops/s", 0.50),
        Metric("mdtest_stat", "mdtest: stat (cold), 2 processes", "ops/s", 0.50),
        Metric("mdtest_remove", "mdtest: remove, 2 processes", "ops/s", None, 4.0),
    ],
    "fio": [
        Metric("fio_write", "fio: sequential write 1 MiB (+fsync)", "MiB/s"),
        Metric("fio_read", "fio: sequential read 1 MiB (cold)", "MiB/s"),
        Metric("fio_randread", "fio: random read 4 KiB (cold)", "IOPS"),
    ],
}


@dataclasses.dataclass
class Side:
    """Where one side's workloads run, and how to prepare their directories and caches."""
    name: str                    # "local", "loom" or "moosefs"
    root: str
    sizes: Sizes
    drop_caches: callable        # sync, then drop the page cache
    setstripe: callable = None   # (dir, count) on the mount; None on the local folder

    def workdir(self, name, stripe=None):
        path = os.path.join(self.root, name)
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        if stripe is not None and self.setstripe:
            self.setstripe(path, stripe)
        return path


def check(cond, what):
    """A sanity check of the workload itself (never of the figures)."""
    if not cond:
        raise RuntimeError(what)


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def read_whole(path, bufsize=8 * MiB, buf=None):
    """Reads a file start to end with unbuffered readinto; returns the bytes read."""
    buf = buf if buf is not None else bytearray(bufsize)
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            k = f.readinto(buf)
            if not k:
                return n
            n += k


def write_file(path, size, block, fsync=True):
    """Writes size bytes of block (repeated) to path."""
    with open(path, "wb") as f:
        left = size
        while left > 0:
            k = min(left, len(block))
            f.write(block[:k])
            left -= k
        f.flush()
        if fsync:
            os.fsync(f.fileno())


# ---- 1. small files ----

def small_files(side):
    n = side.sizes.small_files
    d = side.workdir("small", stripe=1)        # one OST per example, as one would set it up
    try:
        rng = np.random.default_rng(7)
        arrays = [rng.integers(0, 50000, size=int(rng.integers(512, 4097)), dtype=np.int32)
                  for _ in range(n)]
        names = [os.path.join(d, "example_%05d.npy" % i) for i in range(n)]
        dt, _ = timed(lambda: [np.save(p, a) for p, a in zip(names, arrays)])
        out = {"small_save": n / dt}
        order = list(names)
        random.Random(11).shuffle(order)
        for threads in (1, 8):
            side.drop_caches()
            dt, tokens = timed(load_all, order, threads)
            check(tokens == sum(a.shape[0] for a in arrays), "short np.load")
            out["small_load_%d" % threads] = n / dt
        # A third epoch: files read twice before (Loom's inode leases: the open asks nothing).
        side.drop_caches()
        dt, tokens = timed(load_all, order, 1)
        check(tokens == sum(a.shape[0] for a in arrays), "short np.load")
        out["small_load_3rd"] = n / dt
        return out
    finally:
        shutil.rmtree(d, ignore_errors=True)


def load_all(names, threads):
    if threads == 1:
        return sum(np.load(p).shape[0] for p in names)
    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(lambda p: np.load(p).shape[0], names))


# ---- 2. images ----

def images(side):
    n, size = side.sizes.images, side.sizes.image_mib * MiB
    d = side.workdir("images")                 # the file system's default layout
    try:
        block = os.urandom(size)
        names = [os.path.join(d, "img_%05d.jpg" % i) for i in range(n)]
        side.drop_caches()
        dt, _ = timed(lambda: [write_file(p, size, block, fsync=False) for p in names])
        out = {"images_write": n * size / MiB / dt}
        random.Random(13).shuffle(names)
        side.drop_caches()
        local = threading.local()

        def read_one(p):
            if not hasattr(local, "buf"):
                local.buf = bytearray(size)
            return read_whole(p, buf=local.buf)

        with ThreadPoolExecutor(4) as pool:
            dt, total = timed(lambda: sum(pool.map(read_one, names)))
        check(total == n * size, "short read")
        out["images_epoch"] = total / MiB / dt
        return out
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- 3. checkpoints ----

def checkpoints(side):
    n, size = side.sizes.checkpoints, side.sizes.checkpoint_mib * MiB
    d = side.workdir("ckpt", stripe=-1)        # big files: striped over every OST
    try:
        src = memoryview(os.urandom(8 * MiB))
        rng = random.Random(5)
        side.drop_caches()                     # start with nothing dirty
        t0 = time.perf_counter()
        for i in range(n):
            final = os.path.join(d, "step_%03d.pt" % i)
            tmp = final + ".tmp"
            with open(tmp, "wb") as f:
                left = size
                while left > 0:                # 1-8 MiB at a time, as torch.save's zip writer
                    k = min(left, rng.randint(1 * MiB, 8 * MiB))
                    f.write(src[:k])
                    left -= k
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, final)
        dt = time.perf_counter() - t0
        return {"ckpt_write": n * size / MiB / dt}
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- 4. model ----

def _reader(path, barrier, results, i):
    barrier.wait()
    results[i] = read_whole(path)


def model(side):
    size = side.sizes.model_mib * MiB
    d = side.workdir("model", stripe=-1)
    path = os.path.join(d, "model.safetensors")
    try:
        write_file(path, size, os.urandom(16 * MiB))
        side.drop_caches()
        dt, n = timed(read_whole, path)
        check(n == size, "short read")
        out = {"model_read_1": size / MiB / dt}
        side.drop_caches()
        out["model_read_4"] = parallel_readers(path, 4) / MiB
        return out
    finally:
        shutil.rmtree(d, ignore_errors=True)


def parallel_readers(path, k):
    """k processes read the whole file at once; returns their aggregate bytes/s."""
    mp = multiprocessing.get_context("fork")
    barrier = mp.Barrier(k + 1)
    results = mp.Array("q", k)
    procs = [mp.Process(target=_reader, args=(path, barrier, results, i)) for i in range(k)]
    try:
        for p in procs:
            p.start()
        barrier.wait()
        t0 = time.perf_counter()
        for p in procs:
            p.join()
        dt = time.perf_counter() - t0
        if any(p.exitcode for p in procs):
            raise RuntimeError("a reader process failed")
        return sum(results) / dt
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join()


# ---- 5. metadata ----

def metadata(side):
    n = side.sizes.meta_files
    d = side.workdir("meta")
    names = [os.path.join(d, "f%06d" % i) for i in range(n)]
    out = {}
    try:
        side.drop_caches()
        out["meta_create"] = n / timed(lambda: [os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                                                 for p in names])[0]
        side.drop_caches()
        out["meta_stat"] = n / timed(lambda: [os.stat(p) for p in names])[0]
        out["meta_open"] = n / timed(lambda: [os.close(os.open(p, os.O_RDONLY)) for p in names])[0]
        for p in names:
            os.close(os.open(p, os.O_RDONLY))
        out["meta_open_3rd"] = n / timed(lambda: [os.close(os.open(p, os.O_RDONLY)) for p in names])[0]
        side.drop_caches()
        env = dict(os.environ, LC_ALL="C")
        dt, _ = timed(lambda: subprocess.run(["ls", "-l", "--color=never", d],
                                             stdout=subprocess.DEVNULL, check=True, env=env))
        out["meta_ls"] = n / dt
        out["meta_ls_seconds"] = dt
        out["meta_unlink"] = n / timed(lambda: [os.unlink(p) for p in names])[0]
        return out
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- 6. mdtest ----

MDTEST_PROCS = 2
MDTEST_TIMEOUT = 1800            # seconds a phase may take before the run is called hung


def _mdtest_create(path):
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))


MDTEST_PHASES = (("mdtest_create", _mdtest_create), ("mdtest_stat", os.stat),
                 ("mdtest_remove", os.unlink))


def _mdtest_proc(d, n, start, done):
    """One mdtest process: each phase over its n files, between the two barriers the parent
    times. A failure breaks the barriers, so that nobody waits for it."""
    # Ctrl-C is the parent's to handle, and its SIGTERM (run.py's handler, inherited) only ends us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    names = [os.path.join(d, "f%06d" % i) for i in range(n)]
    try:
        for _, op in MDTEST_PHASES:
            start.wait(MDTEST_TIMEOUT)
            for p in names:
                op(p)
            done.wait(MDTEST_TIMEOUT)
    except BaseException:
        start.abort()
        done.abort()
        raise


def mdtest(side):
    """mdtest -u's three file phases by MDTEST_PROCS processes at once, each in a directory of
    its own: create (open O_CREAT|O_EXCL + close), stat (page cache dropped first), remove.
    Each figure is the operations of all processes over the time from when they start the phase
    together to when the last one ends it."""
    n, k = side.sizes.mdtest_files, MDTEST_PROCS
    d = side.workdir("mdtest")
    dirs = [os.path.join(d, "proc%d" % i) for i in range(k)]
    mp = multiprocessing.get_context("fork")
    start, done = mp.Barrier(k + 1), mp.Barrier(k + 1)
    procs = [mp.Process(target=_mdtest_proc, args=(x, n, start, done)) for x in dirs]
    out = {}
    try:
        for x in dirs:
            os.mkdir(x)
        for p in procs:
            p.start()
        for key, _ in MDTEST_PHASES:
            if key != "mdtest_remove":         # nothing dirty before create; stat cold
                side.drop_caches()
            start.wait(MDTEST_TIMEOUT)
            t0 = time.perf_counter()
            done.wait(MDTEST_TIMEOUT)
            out[key] = k * n / (time.perf_counter() - t0)
        for p in procs:
            p.join(60)
        check(all(p.exitcode == 0 for p in procs), "an mdtest process failed")
        check(not any(os.listdir(x) for x in dirs), "files left after the remove phase")
        return out
    except threading.BrokenBarrierError:
        raise RuntimeError("an mdtest process failed (its traceback is above)") from None
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join()
        shutil.rmtree(d, ignore_errors=True)


# ---- 7. fio ----

def run_fio(args):
    p = subprocess.run(["fio", "--output-format=json"] + args, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError("fio failed: " + (p.stderr or p.stdout).strip()[-500:])
    out = p.stdout
    return json.loads(out[out.index("{"):])["jobs"][0]


def fio(side):
    s = side.sizes
    d = side.workdir("fio", stripe=-1)
    common = ["--filename=" + os.path.join(d, "fio.dat"), "--size=%dM" % s.fio_mib,
              "--ioengine=psync", "--direct=0", "--invalidate=1"]
    try:
        side.drop_caches()
        w = run_fio(common + ["--name=seqwrite", "--rw=write", "--bs=1M", "--end_fsync=1"])
        side.drop_caches()
        r = run_fio(common + ["--name=seqread", "--rw=read", "--bs=1M"])
        side.drop_caches()
        rr = run_fio(common + ["--name=randread", "--rw=randread", "--bs=4k",
                               "--runtime=%d" % s.fio_runtime, "--time_based"])
        return {"fio_write": w["write"]["bw_bytes"] / MiB,
                "fio_read": r["read"]["bw_bytes"] / MiB,
                "fio_randread": rr["read"]["iops"],
                "fio_randread_mib": rr["read"]["bw_bytes"] / MiB}
    finally:
        shutil.rmtree(d, ignore_errors=True)


WORKLOADS = {
    "small": small_files,
    "images": images,
    "checkpoint": checkpoints,
    "model": model,
    "metadata": metadata,
    "mdtest": mdtest,
    "fio": fio,
}

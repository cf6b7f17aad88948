#!/usr/bin/env python3
"""What the counters cost (issue 22): the same workloads against servers and a mount that count every
request (statistics, job statistics, the mount's own: the default) and servers started with
--no-stats under a mount with -o nostats, in the same run, taking turns. Through a mount whose requests carry job ids (two jobs at once): sequential
write and read of one file (dd), and small files made, stat'ed and removed (the metadata path,
where a request is cheapest and a counter weighs most). Prints each figure per mode, the median of
--runs, and counting against not counting.

    python3 bench/stats_cost.py [--build build] [--size 1G] [--files 2000] [--runs 3] [--osts 4]

The MDT and OSTs in --tmp (default /dev/shm). Runs as root (it mounts).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seal_cost  # noqa: E402  (its cluster started by hand, and dd)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("--no-stats", "counting")

SMALL = r"""
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d)
t = time.monotonic()
for i in range(n):
    with open(os.path.join(d, "f%d" % i), "wb") as f:
        f.write(b"x" * 4096)
for i in range(n):
    os.stat(os.path.join(d, "f%d" % i))
for i in range(n):
    os.unlink(os.path.join(d, "f%d" % i))
print(3 * n / (time.monotonic() - t))
"""


class Cluster(seal_cost.Cluster):
    """A keyed cluster whose servers count (or not: --no-stats)."""

    def __init__(self, build, tmp, osts, mode):
        self.extra = ["--no-stats"] if mode == "--no-stats" else []
        self.mount_opts = ",nostats" if mode == "--no-stats" else ""
        super().__init__(build, tmp, osts, "authenticated")

    def spawn(self, name, argv):
        super().spawn(name, argv + self.extra)

    def mount(self):
        subprocess.run([os.path.join(self.build, "src/fuse/loom-mount"), self.addr + ":/bench", self.mnt,
                        "-o", "key=%s,jobid_var=BENCH_JOB%s" % (self.key, self.mount_opts)], check=True, env=self.env,
                       capture_output=True)


def small_files(c, tag, n):
    """Two jobs at once, each making, stat'ing and removing n files: their operations per second."""
    procs = [subprocess.Popen([sys.executable, "-c", SMALL, os.path.join(c.mnt, "%s-%d" % (tag, k)), str(n)],
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ, BENCH_JOB="job%d" % k))
             for k in range(2)]
    rates = [float(p.communicate()[0]) for p in procs]
    for p in procs:
        if p.returncode:
            sys.exit("the small-file workload failed")
    return sum(rates)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--size", default="1G")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--osts", type=int, default=4)
    ap.add_argument("--tmp", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    a = ap.parse_args()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    size = int(a.size[:-1]) * mult[a.size[-1].upper()] if a.size[-1].isalpha() else int(a.size)
    mib, build = size / (1 << 20), os.path.abspath(a.build)
    keys = ("mount write MiB/s", "mount read MiB/s", "small files ops/s")
    res = {(m, k): [] for m in MODES for k in keys}
    tmp = tempfile.mkdtemp(prefix="loom-stats-bench-", dir=a.tmp)
    clusters = {}
    try:
        for m in MODES:
            os.makedirs(os.path.join(tmp, m.strip("-")), exist_ok=True)
            clusters[m] = Cluster(build, os.path.join(tmp, m.strip("-")), a.osts, m)
        for run in range(a.runs):
            for m in (MODES if run % 2 == 0 else MODES[::-1]):
                c = clusters[m]
                c.mount()
                f = os.path.join(c.mnt, "f%d" % run)
                res[(m, keys[0])].append(mib / seal_cost.dd_seconds(
                    ["if=/dev/zero", "of=" + f, "bs=4M", "count=%d" % (size >> 22), "conv=fsync"]))
                c.umount()
                c.mount()
                res[(m, keys[1])].append(mib / seal_cost.dd_seconds(["if=" + f, "of=/dev/null", "bs=4M"]))
                os.unlink(f)
                res[(m, keys[2])].append(small_files(c, "r%d" % run, a.files))
                c.umount()
    finally:
        for c in clusters.values():
            if c:
                c.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("counters: %s sequential and 2 x %d small files, %d OSTs, median of %d (counting vs --no-stats)"
          % (a.size, a.files, a.osts, a.runs))
    print("%-20s" % "" + "".join("%22s" % m for m in MODES))
    for k in keys:
        base = statistics.median(res[("--no-stats", k)])
        row = "%-20s" % k
        for m in MODES:
            v = statistics.median(res[(m, k)])
            row += "%14.0f (%5.2f)" % (v, v / base)
        print(row)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What the bench's metadata workloads can reach through FUSE on this machine at all, beside a
local folder and a Loom mount, in the same run.

loom-nullfs (bench/nullfs.c) holds its files in memory and answers every request at once,
facing the kernel as loom-mount does (the same capabilities, 1 s entry and attribute timeouts,
no negative entries, direct I/O for write-only opens). Its figure over the local folder's is the
ceiling of loom/local for a workload: the FUSE requests alone, with a daemon that does no work.
A second loom-nullfs, "cached", gives the kernel an hour for entries, negative entries and
attributes: what a file system that never checks with a server could ask for. The workloads are
bench/workloads.py's own (np.save and np.load of small arrays, metadata, mdtest), so the figures
are those of `make bench`. docs/performance.md, "What FUSE allows".

    python3 bench/fuse_floor.py [--build build] [--only small,metadata,mdtest] [--runs 3] [--quick]

Needs root (mounts, the page cache). Starts a Loom cluster (bench/run.py's Bench).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402
import workloads  # noqa: E402

WORKLOADS = ("small", "metadata", "mdtest")


class NullFS:
    """loom-nullfs mounted on a directory of its own."""

    def __init__(self, build, cache=None):
        self.mnt = tempfile.mkdtemp(prefix="loom-nullfs-")
        argv = [os.path.join(build, "bench", "loom-nullfs"), self.mnt]
        if cache is not None:
            argv += ["--cache", str(cache)]
        self.proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
        for _ in range(200):
            if os.path.ismount(self.mnt):
                return
            if self.proc.poll() is not None:
                raise RuntimeError("loom-nullfs: " + self.proc.stderr.read().decode())
            time.sleep(0.05)
        self.down()
        raise RuntimeError("loom-nullfs did not mount")

    def down(self):
        subprocess.run(["fusermount3", "-u", self.mnt], check=False, capture_output=True)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if not os.path.ismount(self.mnt):
            os.rmdir(self.mnt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(run.ROOT, "build"))
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--runs", type=int, default=3, help="runs of each workload; the median is shown")
    ap.add_argument("--quick", action="store_true", help="bench's small sizes")
    a = ap.parse_args()
    only = a.only.split(",")
    if any(n not in WORKLOADS for n in only) or a.runs < 1:
        ap.error("--only takes %s; --runs at least 1" % ",".join(WORKLOADS))
    sizes = workloads.QUICK if a.quick else workloads.FULL
    build = os.path.abspath(a.build)
    bench = run.Bench(build, keep=False)
    nulls = []
    raw = {}
    try:
        bench.up()
        nulls = [NullFS(build), NullFS(build, cache=3600)]
        sides = [workloads.Side("local", bench.local, sizes, bench.drop_caches),
                 workloads.Side("null", nulls[0].mnt, sizes, bench.drop_caches),
                 workloads.Side("cached", nulls[1].mnt, sizes, bench.drop_caches),
                 workloads.Side("loom", bench.mnt, sizes, bench.drop_caches, bench.setstripe)]
        for name in only:
            for r in range(a.runs):
                for side in sides:
                    print("  %-9s run %d/%d on %-7s" % (name, r + 1, a.runs, side.name), flush=True)
                    for key, v in workloads.WORKLOADS[name](side).items():
                        raw.setdefault(key, {}).setdefault(side.name, []).append(v)
    finally:
        for n in nulls:
            n.down()
        bench.down()
    metrics = {m.key: m for ms in workloads.METRICS.values() for m in ms}
    print("\nmedian of %d, %d CPUs; per second; null = loom-nullfs with loom-mount's kernel settings,"
          " cached = with an hour's" % (a.runs, os.cpu_count()))
    print("%-46s %9s %9s %9s %9s | %11s %11s %9s | %s" % (
        "workload", "local", "null", "cached", "loom", "null/local", "cached/loc", "loom/null",
        "floor (loom/local)"))
    for key, by in raw.items():
        m = metrics.get(key)
        if m is None or set(by) != {"local", "null", "cached", "loom"}:
            continue
        med = {s: statistics.median(v) for s, v in by.items()}
        floor = ""
        if m.floor is not None:
            floor = "%.2f: %s" % (m.floor, "beyond FUSE here" if med["null"] / med["local"] < m.floor
                                  else "within FUSE's reach")
        print("%-46s %9.0f %9.0f %9.0f %9.0f | %11.2f %11.2f %9.2f | %s" % (
            m.label, med["local"], med["null"], med["cached"], med["loom"], med["null"] / med["local"],
            med["cached"] / med["local"], med["loom"] / med["null"], floor))


if __name__ == "__main__":
    main()

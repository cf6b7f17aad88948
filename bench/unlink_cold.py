#!/usr/bin/env python3
"""An unlink loop over files made a while before, beside a local folder: the bench's metadata
workload unlinks right after `ls -l`, whose entries the kernel still holds, so its unlinks never
look a name up; here the kernel's entries have expired (1 s), as in a clean-up of what a job
wrote, and every unlink looks its name up first. docs/performance.md, "What FUSE allows".

    python3 bench/unlink_cold.py [--build build] [--files 5000] [--runs 3]

Needs root (mount). Starts a Loom cluster (bench/run.py's Bench).
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402


def unlink_rate(root, n, pause):
    """Unlinks per second over n empty files made pause seconds before."""
    d = os.path.join(root, "unlink-cold")
    os.makedirs(d)
    names = [os.path.join(d, "f%06d" % i) for i in range(n)]
    for p in names:
        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    time.sleep(pause)
    t0 = time.perf_counter()
    for p in names:
        os.unlink(p)
    dt = time.perf_counter() - t0
    os.rmdir(d)
    return n / dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(run.ROOT, "build"))
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pause", type=float, default=1.5, help="seconds between the creates and the unlinks")
    a = ap.parse_args()
    b = run.Bench(os.path.abspath(a.build), keep=False)
    res = {"local": [], "loom": []}
    try:
        b.up()
        for _ in range(a.runs):
            for side, root in (("local", b.local), ("loom", b.mnt)):
                res[side].append(unlink_rate(root, a.files, a.pause))
    finally:
        b.down()
    loc, loom = statistics.median(res["local"]), statistics.median(res["loom"])
    print("unlink of %d files made %.1f s before, median of %d: local %.0f/s, loom %.0f/s (%.3f of local)"
          % (a.files, a.pause, a.runs, loc, loom, loom / loc))


if __name__ == "__main__":
    main()

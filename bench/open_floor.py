#!/usr/bin/env python3
"""What an open and close of an existing file can cost through FUSE on this machine, with and
without FUSE's no-open support, beside a local folder and a Loom mount.

loom-openfloor (bench/openfloor.c) serves empty files from memory and answers every request at
once: its open+close is the FUSE round trips alone (OPEN, FLUSH, RELEASE). With --no-open the
kernel stops sending OPEN and RELEASE; with --no-flush too, FLUSH: the open and close never reach
the daemon. The issue's floor for open+close is ten times MooseFS's; this shows which of those
ways of answering could reach it at all. docs/performance.md, "What an open costs".

    python3 bench/open_floor.py [--build build] [--files 10000] [--passes 3]

Needs root (mounts). Starts a Loom cluster (bench/run.py's Bench) for the Loom column.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402


def open_close_us(names, passes):
    """The best of passes over names (each pass opens and closes every file once)."""
    best = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter()
        for p in names:
            os.close(os.open(p, os.O_RDONLY))
        best = min(best, (time.perf_counter() - t0) / len(names) * 1e6)
    return best


def floor_side(build, n, passes, flags):
    mnt = tempfile.mkdtemp(prefix="loom-openfloor-")
    p = subprocess.Popen([os.path.join(build, "bench", "loom-openfloor"), mnt, str(n)] + flags,
                         stderr=subprocess.PIPE)
    try:
        for _ in range(100):
            if os.path.ismount(mnt):
                break
            if p.poll() is not None:
                raise RuntimeError("loom-openfloor: " + p.stderr.read().decode())
            time.sleep(0.05)
        names = [os.path.join(mnt, "f%06d" % i) for i in range(n)]
        for q in names:                      # every name looked up once: dentries cached
            os.stat(q)
        return open_close_us(names, passes)
    finally:
        subprocess.run(["fusermount3", "-u", mnt], check=False)
        p.wait(timeout=30)
        os.rmdir(mnt)


def tree_side(root, n, passes):
    d = os.path.join(root, "open-floor")
    os.makedirs(d)
    names = [os.path.join(d, "f%06d" % i) for i in range(n)]
    try:
        for q in names:
            os.close(os.open(q, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        open_close_us(names, 1)              # the first open of each (Loom: its inode lease)
        return open_close_us(names, passes)
    finally:
        for q in names:
            os.unlink(q)
        os.rmdir(d)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(run.ROOT, "build"))
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--passes", type=int, default=3)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    rows = [("FUSE, every request answered at once", floor_side(build, a.files, a.passes, [])),
            ("FUSE, no-open (FLUSH only)", floor_side(build, a.files, a.passes, ["--no-open"])),
            ("FUSE, no-open and no-flush", floor_side(build, a.files, a.passes,
                                                      ["--no-open", "--no-flush"]))]
    b = run.Bench(build, keep=False)
    try:
        b.up()
        rows.insert(0, ("local folder", tree_side(b.local, a.files, a.passes)))
        rows.append(("Loom mount, leased (3rd open+close)", tree_side(b.mnt, a.files, a.passes)))
    finally:
        b.down()
    print("open+close of an existing file, %d files, best of %d passes, one thread, %d CPUs"
          % (a.files, a.passes, os.cpu_count()))
    print("%-40s %10s %12s" % ("", "us", "per second"))
    for name, us in rows:
        print("%-40s %10.1f %12.0f" % (name, us, 1e6 / us))


if __name__ == "__main__":
    main()

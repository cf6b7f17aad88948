#!/usr/bin/env python3
"""Small-file reads while another process creates files: does an open wait behind the MDS's commits?

Starts a Loom cluster (bench/run.py's Bench), writes 1,000 files of 4,000 bytes, then reads them
twice over (open, read, close: what np.load does), one after another, while a second process
creates empty files in another directory as fast as it can (each create is a commit with an
fdatasync on the MDS). Prints the microseconds per file read. Opens for reading are answered on
the MDS's network thread, so they do not queue behind those commits.

    python3 bench/open_beside_creates.py [--build build]

Needs root (mount).
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402

CREATOR = """
import os, sys
i = 0
while True:
    os.close(os.open(os.path.join(sys.argv[1], "c%d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
    i += 1
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(run.ROOT, "build"))
    ap.add_argument("--files", type=int, default=1000)
    a = ap.parse_args()
    b = run.Bench(os.path.abspath(a.build), keep=False)
    try:
        b.up()
        readdir, createdir = os.path.join(b.mnt, "read"), os.path.join(b.mnt, "create")
        os.makedirs(readdir)
        os.makedirs(createdir)
        names = [os.path.join(readdir, "f%d" % i) for i in range(a.files)]
        for p in names:
            with open(p, "wb") as f:
                f.write(b"x" * 4000)
        creator = subprocess.Popen([sys.executable, "-c", CREATOR, createdir])
        try:
            time.sleep(0.5)
            t0 = time.perf_counter()
            for _ in range(2):
                for p in names:
                    with open(p, "rb") as f:
                        f.read()
            dt = time.perf_counter() - t0
        finally:
            creator.kill()
            creator.wait()
    finally:
        b.down()
    print("open+read+close beside a creating process: %.0f us per file" % (dt / (2 * a.files) * 1e6))


if __name__ == "__main__":
    main()

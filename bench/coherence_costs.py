#!/usr/bin/env python3
"""What the coherence across mounts (issue 14) costs where caches got stricter, on one mount
beside a local folder on the same disk, in the same run.

    python3 bench/coherence_costs.py [--build build] [--files 2000] [--runs 3]

- stat of names that do not exist, in a directory just listed: statahead no longer answers a
  name it did not list as missing, the MDS does;
- open + read + close of a 4 KiB (Data-on-MDT) file whose pages the kernel has: every open is
  checked against the file's data version, and the pages kept only while it matches;
- an O_TRUNC rewrite of a 1 MiB file striped over 4 OSTs: the MDS cuts the objects in a new
  truncation epoch before it answers the open.

Prints the median of --runs for each side and loom/local. Run it with each build to compare two
versions (docs/performance.md has the figures). Needs root (mount, drop_caches).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time


def drop_caches():
    subprocess.run(["sync"])
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def stat_missing(d, n):
    os.listdir(d)
    t0 = time.perf_counter()
    for i in range(n):
        try:
            os.stat("%s/missing%05d" % (d, i))
        except FileNotFoundError:
            pass
        else:
            raise SystemExit("%s/missing%05d exists" % (d, i))
    return n / (time.perf_counter() - t0)


def open_read_cached(d, n):
    for i in range(n):  # the pages in the kernel's cache
        with open("%s/f%05d" % (d, i), "rb") as f:
            f.read()
    t0 = time.perf_counter()
    for i in range(n):
        with open("%s/f%05d" % (d, i), "rb") as f:
            if len(f.read()) != 4096:
                raise SystemExit("short read of %s/f%05d" % (d, i))
    return n / (time.perf_counter() - t0)


def rewrite_trunc(d, n):
    buf = os.urandom(1 << 20)
    path = os.path.join(d, "big")
    with open(path, "wb") as f:
        f.write(buf)
    t0 = time.perf_counter()
    for _ in range(n):
        with open(path, "wb") as f:
            f.write(buf)
    return n / (time.perf_counter() - t0)


CASES = [
    ("stat of a missing name, listed directory", "ops/s", lambda d, n: stat_missing(d + "/small", n)),
    ("open+read+close 4 KiB, pages cached", "ops/s", lambda d, n: open_read_cached(d + "/small", n)),
    ("O_TRUNC rewrite of 1 MiB, 4 stripes", "files/s", lambda d, n: rewrite_trunc(d + "/wide", n // 10)),
]


def prepare(root, n, loom=None):
    os.makedirs(root + "/small")
    os.makedirs(root + "/wide")
    if loom:
        subprocess.run([loom, "setstripe", "-c", "1", root + "/small"], check=True, capture_output=True)
        subprocess.run([loom, "setstripe", "-c", "4", "-S", "1M", root + "/wide"], check=True,
                       capture_output=True)
    for i in range(n):
        with open("%s/small/f%05d" % (root, i), "wb") as f:
            f.write(b"x" * 4096)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (mount, drop_caches)")
    loom = os.path.join(os.path.abspath(a.build), "src", "tools", "loom")
    tmp = tempfile.mkdtemp(prefix="loom-cohbench-")
    cdir, mnt, local = tmp + "/cluster", tmp + "/mnt", tmp + "/local"
    os.makedirs(mnt)
    p = subprocess.run([loom, "cluster", "up", "--dir", cdir, "--osts", "4", "--mount", mnt],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        sys.exit("loom cluster up: " + p.stdout + p.stderr)
    try:
        os.environ["LOOM_KEY_FILE"] = os.path.join(cdir, "fs.key")   # for loom setstripe
        prepare(local, a.files)
        prepare(mnt, a.files, loom)
        print("%-42s %-8s %9s %9s %6s" % ("case", "unit", "local", "loom", "ratio"))
        for name, unit, fn in CASES:
            got = {"local": [], "loom": []}
            for _ in range(a.runs):
                for side, root in (("local", local), ("loom", mnt)):
                    drop_caches()
                    got[side].append(fn(root, a.files))
            med = {s: sorted(v)[len(v) // 2] for s, v in got.items()}
            print("%-42s %-8s %9.0f %9.0f %6.2f" % (name, unit, med["local"], med["loom"],
                                                    med["loom"] / med["local"]))
    finally:
        p = subprocess.run([loom, "cluster", "down", "--dir", cdir], capture_output=True, text=True)
        if p.returncode != 0:
            print("warning: loom cluster down: " + p.stdout + p.stderr, file=sys.stderr)
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()

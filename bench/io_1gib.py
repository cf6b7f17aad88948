#!/usr/bin/env python3
"""Single-client write and read of a 1 GiB file: Loom (stripe_count 1 and 4, 4 OSTs on one
machine) beside dd on a plain local folder, in the same run. Prints MiB/s and the ratio.

    python3 bench/io_1gib.py [--build build] [--size 1G] [--runs 3]

Each figure is the median of --runs runs. Before every read the page cache is dropped when
this process may (root), so reads come from disk on both sides; otherwise the table says so.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def drop_caches():
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def dd(args):
    out = subprocess.run(["dd"] + args, capture_output=True, text=True, check=True).stderr
    m = re.search(r"copied, ([0-9.]+) s", out)
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--size", default="1G")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    size = int(a.size[:-1]) * mult[a.size[-1].upper()] if a.size[-1].isalpha() else int(a.size)
    mib = size / (1 << 20)
    loom = os.path.join(a.build, "src/tools/loom")
    iobench = os.path.join(a.build, "bench/loom-iobench")

    with tempfile.TemporaryDirectory(prefix="loom-bench-") as tmp:
        cdir, local = os.path.join(tmp, "cluster"), os.path.join(tmp, "local")
        os.makedirs(local)
        up = subprocess.run([loom, "cluster", "up", "--dir", cdir, "--osts", "4"],
                            capture_output=True, text=True, check=True).stdout
        addr = re.search(r"LOOM_FS=(\S+)", up).group(1)
        os.environ["LOOM_KEY_FILE"] = os.path.join(cdir, "fs.key")   # loom-iobench's key
        cold = True
        results = {}
        try:
            def run(name, fn):
                results[name] = statistics.median(fn() for _ in range(a.runs))

            def dd_write():
                return mib / dd(["if=/dev/zero", "of=" + os.path.join(local, "f"), "bs=64M",
                                 "count=%d" % (size >> 26), "conv=fsync"])

            def dd_read():
                nonlocal cold
                cold &= drop_caches()
                return mib / dd(["if=" + os.path.join(local, "f"), "of=/dev/null", "bs=64M"])

            def loom_write(count):
                out = subprocess.run([iobench, "--fs", addr, "write", "/f%d" % count, str(size),
                                      "--stripe-count", str(count), "--fsync"],
                                     capture_output=True, text=True, check=True).stdout
                return float(out.split()[3])

            def loom_read(count):
                nonlocal cold
                cold &= drop_caches()
                out = subprocess.run([iobench, "--fs", addr, "read", "/f%d" % count],
                                     capture_output=True, text=True, check=True).stdout
                return float(out.split()[3])

            run("local write", dd_write)
            run("local read", dd_read)
            for c in (1, 4):
                run("loom c=%d write" % c, lambda: loom_write(c))
                run("loom c=%d read" % c, lambda: loom_read(c))
        finally:
            subprocess.run([loom, "cluster", "down", "--dir", cdir], capture_output=True)

    print("1 GiB single client, write+fsync and %s read, median of %d (MiB/s)" %
          ("cold" if cold else "warm (cannot drop caches)", a.runs))
    print("%-18s %10s %10s" % ("", "MiB/s", "vs local"))
    for op in ("write", "read"):
        base = results["local " + op]
        print("%-18s %10.1f %10s" % ("local dd " + op, base, "1.00"))
        for c in (1, 4):
            v = results["loom c=%d %s" % (c, op)]
            print("%-18s %10.1f %10.2f" % ("loom c=%d %s" % (c, op), v, v / base))
    return 0


if __name__ == "__main__":
    sys.exit(main())

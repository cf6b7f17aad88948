#!/usr/bin/env python3
"""The redundancy workload (issue 20): what a mirrored layout costs and gives, against a plain
RAID-0 layout of the same stripes, in the same run, on a local file system of four OSSs.

    python3 bench/redundancy.py [--build build] [--size 1G] [--runs 3] [--out bench/results]

One client (the Python package, natively) writes a file of --size in 8 MiB blocks and fsyncs it,
then reads it whole with the page cache dropped first, for:

  plain     2 stripes, one copy (-E -1 -c 2)
  mirror    2 stripes, 2 copies (-N 2 -E -1 -c 2): every write goes to both copies at once
  degraded  the mirrored file read again with the OSS of one of its copies killed

and prints MiB/s and the ratios the issue sets floors for: mirror write / plain write (>= 0.45:
the same bytes cross loopback twice), mirror read / plain read (>= 1.0), degraded read / healthy
read (>= 0.5). Each figure is the median of --runs runs. Writes the figures as JSON to --out.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = 8 << 20
FLOORS = {"mirror_write/plain_write": 0.45, "mirror_read/plain_read": 1.0,
          "degraded_read/mirror_read": 0.5}


def drop_caches():
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].isalpha() else int(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--size", default="1G")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()
    size = parse_size(a.size)
    mib = size / (1 << 20)
    loom_tool = os.path.join(a.build, "src", "tools", "loom")
    os.environ["LOOM_LIBRARY"] = os.path.join(a.build, "src", "client", "libloom.so")
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import loom  # noqa: E402

    block = memoryview(os.urandom(BLOCK))
    cold = True
    results = {}
    with tempfile.TemporaryDirectory(prefix="loom-bench-redundancy-") as tmp:
        cdir = os.path.join(tmp, "cluster")
        up = subprocess.run([loom_tool, "cluster", "up", "--dir", cdir, "--osts", "4"],
                            capture_output=True, text=True, check=True).stdout
        addr = re.search(r"LOOM_FS=(\S+)", up).group(1)
        key = os.path.join(cdir, "fs.key")
        env = dict(os.environ, LOOM_FS=addr, LOOM_KEY_FILE=key)

        def tool(*args):
            subprocess.run([loom_tool] + list(args), env=env, check=True, capture_output=True)

        try:
            fs = loom.connect(addr, key_file=key)
            tool("mkdir", "/plain", "/mirror")
            tool("setstripe", "-E", "-1", "-c", "2", "-S", "4M", "/plain")
            tool("setstripe", "-N", "2", "-E", "-1", "-c", "2", "-S", "4M", "/mirror")

            def write(path):
                t0 = time.perf_counter()
                with fs.open(path, "wb") as f:
                    left = size
                    while left > 0:
                        n = min(left, BLOCK)
                        f.write(block[:n])
                        left -= n
                    f.flush()
                    f.fsync()
                return mib / (time.perf_counter() - t0)

            def read(path):
                nonlocal cold
                cold &= drop_caches()
                buf = bytearray(BLOCK)
                t0 = time.perf_counter()
                with fs.open(path, "rb") as f:
                    while f.readinto(buf):
                        pass
                return mib / (time.perf_counter() - t0)

            def median(fn, *args):
                return statistics.median(fn(*args) for _ in range(a.runs))

            results["plain_write"] = median(write, "/plain/f")
            results["plain_read"] = median(read, "/plain/f")
            results["mirror_write"] = median(write, "/mirror/f")
            results["mirror_read"] = median(read, "/mirror/f")
            lay = fs.getstripe("/mirror/f")
            assert lay.mirror_count == 2 and not lay.stale, lay
            # Kill the OSS under copy 2's first stripe: its stripe is read from copy 1.
            victim = lay.objects[lay.stripe_count][0]
            with open(os.path.join(cdir, "ost%d" % victim, "ost.conf")) as f:
                assert re.search(r"^index=%d$" % victim, f.read(), re.M), "OST dirs not by index"
            pids = subprocess.run(["pgrep", "-f", "loom-oss --ost %s " % os.path.join(cdir, "ost%d" % victim)],
                                  capture_output=True, text=True).stdout.split()
            for p in pids:
                os.kill(int(p), 9)
            time.sleep(1)
            results["degraded_read"] = median(read, "/mirror/f")
        finally:
            subprocess.run([loom_tool, "cluster", "down", "--dir", cdir], capture_output=True)

    ratios = {"mirror_write/plain_write": results["mirror_write"] / results["plain_write"],
              "mirror_read/plain_read": results["mirror_read"] / results["plain_read"],
              "degraded_read/mirror_read": results["degraded_read"] / results["mirror_read"]}
    print("redundancy: %s file, %d runs each (median), 4 OSTs on one machine%s" %
          (a.size, a.runs, "" if cold else "; page cache NOT dropped (not root)"))
    print("%-16s %10s" % ("", "MiB/s"))
    for k in ("plain_write", "plain_read", "mirror_write", "mirror_read", "degraded_read"):
        print("%-16s %10.0f" % (k, results[k]))
    print()
    print("%-28s %7s %7s" % ("ratio", "value", "floor"))
    for k, v in ratios.items():
        print("%-28s %7.2f %7.2f %s" % (k, v, FLOORS[k], "ok" if v >= FLOORS[k] else "BELOW"))
    os.makedirs(a.out, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    with open(os.path.join(a.out, "redundancy-%s.json" % stamp), "w") as f:
        json.dump({"size": size, "runs": a.runs, "cold": cold, "mib_s": results, "ratios": ratios,
                   "floors": FLOORS}, f, indent=2)


if __name__ == "__main__":
    main()

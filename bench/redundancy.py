#!/usr/bin/env python3
"""The redundancy workload (issue 20): what a mirrored or erasure-coded layout costs and gives,
against a plain RAID-0 layout of the same data stripes, in the same run, on local file systems of
four OSSs (mirrors) and six (erasure coding).

    python3 bench/redundancy.py [--build build] [--size 1G] [--runs 3] [--out bench/results]

One client (the Python package, natively) writes a file of --size in 8 MiB blocks and fsyncs it,
then reads it whole with the page cache dropped first, for:

  plain     2 stripes, one copy (-E -1 -c 2)
  mirror    2 stripes, 2 copies (-N 2 -E -1 -c 2): every write goes to both copies at once
  degraded  the mirrored file read again with the OSS of one of its copies killed
  plain4    4 stripes of 1 MiB, one copy (-E -1 -c 4 -S 1M), on the six-OSS file system
  ec        erasure-coded 4+2 (--ec 4+2 -E -1 -S 1M): 4 data stripes and 2 parity objects
  ec_degraded  the erasure-coded file read again with the OSS of a data object killed

and prints MiB/s and the ratios the issue sets floors for: mirror write / plain write (>= 0.45:
the same bytes cross loopback twice), mirror read / plain read (>= 1.0), degraded read / healthy
read (>= 0.5); EC 4+2 write / RAID-0 write (>= 0.5), EC degraded read / healthy read (>= 0.5).
Each figure is the median of --runs runs. Writes the figures as JSON to --out.
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
          "degraded_read/mirror_read": 0.5, "ec_write/plain4_write": 0.5,
          "ec_degraded_read/ec_read": 0.5}


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

    def cluster(osts, body):
        with tempfile.TemporaryDirectory(prefix="loom-bench-redundancy-") as tmp:
            cdir = os.path.join(tmp, "cluster")
            up = subprocess.run([loom_tool, "cluster", "up", "--dir", cdir, "--osts", str(osts)],
                                capture_output=True, text=True, check=True).stdout
            addr = re.search(r"LOOM_FS=(\S+)", up).group(1)
            key = os.path.join(cdir, "fs.key")
            env = dict(os.environ, LOOM_FS=addr, LOOM_KEY_FILE=key)
            try:
                body(cdir, env, loom.connect(addr, key_file=key))
            finally:
                subprocess.run([loom_tool, "cluster", "down", "--dir", cdir], capture_output=True)

    def tool(env, *args):
        subprocess.run([loom_tool] + list(args), env=env, check=True, capture_output=True)

    def write(fs, path):
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

    def read(fs, path):
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

    def kill_ost(cdir, victim):
        with open(os.path.join(cdir, "ost%d" % victim, "ost.conf")) as f:
            assert re.search(r"^index=%d$" % victim, f.read(), re.M), "OST dirs not by index"
        pids = subprocess.run(["pgrep", "-f", "loom-oss --ost %s " % os.path.join(cdir, "ost%d" % victim)],
                              capture_output=True, text=True).stdout.split()
        for p in pids:
            os.kill(int(p), 9)
        time.sleep(1)

    def mirrors(cdir, env, fs):
        tool(env, "mkdir", "/plain", "/mirror")
        tool(env, "setstripe", "-E", "-1", "-c", "2", "-S", "4M", "/plain")
        tool(env, "setstripe", "-N", "2", "-E", "-1", "-c", "2", "-S", "4M", "/mirror")
        results["plain_write"] = median(write, fs, "/plain/f")
        results["plain_read"] = median(read, fs, "/plain/f")
        results["mirror_write"] = median(write, fs, "/mirror/f")
        results["mirror_read"] = median(read, fs, "/mirror/f")
        lay = fs.getstripe("/mirror/f")
        assert lay.mirror_count == 2 and not lay.stale, lay
        # Kill the OSS under copy 2's first stripe: its stripe is read from copy 1.
        kill_ost(cdir, lay.objects[lay.stripe_count][0])
        results["degraded_read"] = median(read, fs, "/mirror/f")

    def erasure(cdir, env, fs):
        tool(env, "mkdir", "/plain4", "/ec")
        tool(env, "setstripe", "-E", "-1", "-c", "4", "-S", "1M", "/plain4")
        tool(env, "setstripe", "--ec", "4+2", "-E", "-1", "-S", "1M", "/ec")
        results["plain4_write"] = median(write, fs, "/plain4/f")
        results["plain4_read"] = median(read, fs, "/plain4/f")
        results["ec_write"] = median(write, fs, "/ec/f")
        results["ec_read"] = median(read, fs, "/ec/f")
        lay = fs.getstripe("/ec/f")
        assert lay.ec_parity == 2 and not lay.stale, lay
        # Kill the OSS under data object 0: every row is decoded from the other five.
        kill_ost(cdir, lay.objects[0][0])
        results["ec_degraded_read"] = median(read, fs, "/ec/f")

    cluster(4, mirrors)
    cluster(6, erasure)

    ratios = {"mirror_write/plain_write": results["mirror_write"] / results["plain_write"],
              "mirror_read/plain_read": results["mirror_read"] / results["plain_read"],
              "degraded_read/mirror_read": results["degraded_read"] / results["mirror_read"],
              "ec_write/plain4_write": results["ec_write"] / results["plain4_write"],
              "ec_degraded_read/ec_read": results["ec_degraded_read"] / results["ec_read"]}
    print("redundancy: %s file, %d runs each (median), 4 and 6 OSTs on one machine%s" %
          (a.size, a.runs, "" if cold else "; page cache NOT dropped (not root)"))
    print("%-16s %10s" % ("", "MiB/s"))
    for k in ("plain_write", "plain_read", "mirror_write", "mirror_read", "degraded_read",
              "plain4_write", "plain4_read", "ec_write", "ec_read", "ec_degraded_read"):
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

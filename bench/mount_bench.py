#!/usr/bin/env python3
"""Loom through the mount beside a plain local folder, in the same run:

  small files  the seeds' tokenized examples: 1,000 .npy files of 2-16 KiB (int32 arrays of
               512-4,096 tokens), written with np.save, then loaded in shuffled order with
               np.load, cold (page cache dropped) and warm; files/s
  sequential   one 2 GiB file read start to end with the page cache dropped first; MiB/s

    python3 bench/mount_bench.py [--build build] [--files 1000] [--big 2G] [--runs 3]

Each figure is the median of --runs runs. Dropping the page cache needs root; without it the
"cold" figures are warm and the table says so.
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def drop_caches():
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].isalpha() else int(s)


def write_examples(root, n, seed=7):
    rng = np.random.default_rng(seed)
    os.makedirs(root, exist_ok=True)
    names = []
    for i in range(n):
        tokens = rng.integers(0, 50000, size=int(rng.integers(512, 4097)), dtype=np.int32)
        name = os.path.join(root, "example_%05d.npy" % i)
        np.save(name, tokens)
        names.append(name)
    return names


def load_shuffled(names, cold):
    order = list(names)
    random.Random(11).shuffle(order)
    if cold:
        drop_caches()
    t0 = time.monotonic()
    total = 0
    for name in order:
        total += int(np.load(name).shape[0])
    dt = time.monotonic() - t0
    assert total > 0
    return len(order) / dt


def write_big(path, size):
    block = os.urandom(1 << 20) * 16  # 16 MiB
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
        f.flush()
        os.fsync(f.fileno())


def read_seq(path):
    drop_caches()
    t0 = time.monotonic()
    n = 0
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(4 << 20)
        while True:
            k = f.readinto(buf)
            if not k:
                break
            n += k
    return n / (1 << 20) / (time.monotonic() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--big", default="2G")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", help="write the results here as JSON")
    a = ap.parse_args()
    loom = os.path.join(a.build, "src/tools/loom")
    big = size_arg(a.big)
    cold = drop_caches()
    res = {}

    with tempfile.TemporaryDirectory(prefix="loom-mbench-") as tmp:
        cdir, mnt, local = (os.path.join(tmp, d) for d in ("cluster", "mnt", "local"))
        os.makedirs(local)
        subprocess.run([loom, "cluster", "up", "--dir", cdir, "--osts", "4", "--mount", mnt],
                       check=True, capture_output=True)
        try:
            # As the seeds advise: small examples on one OST, the big file over every OST.
            os.makedirs(os.path.join(mnt, "data"))
            os.makedirs(os.path.join(mnt, "models"))
            subprocess.run([loom, "setstripe", "-c", "1", os.path.join(mnt, "data")], check=True)
            subprocess.run([loom, "setstripe", "-c", "-1", os.path.join(mnt, "models")], check=True)
            for where, root in (("local", local), ("loom", mnt)):
                names = write_examples(os.path.join(root, "data", "tok"), a.files)
                res[where + " small cold"] = statistics.median(load_shuffled(names, True) for _ in range(a.runs))
                res[where + " small warm"] = statistics.median(load_shuffled(names, False) for _ in range(a.runs))
                path = os.path.join(root, "models", "model.bin")
                os.makedirs(os.path.dirname(path), exist_ok=True)
                write_big(path, big)
                res[where + " seq read"] = statistics.median(read_seq(path) for _ in range(a.runs))
        finally:
            subprocess.run([loom, "cluster", "down", "--dir", cdir], capture_output=True)

    print("Loom mount vs local folder, median of %d runs%s" % (a.runs, "" if cold else " (page cache could not be dropped: all warm)"))
    print("%-34s %12s %12s %8s" % ("", "local", "loom", "ratio"))
    rows = [("small-file np.load, cold (files/s)", "small cold"),
            ("small-file np.load, warm (files/s)", "small warm"),
            ("%s sequential read, cold (MiB/s)" % a.big, "seq read")]
    for label, key in rows:
        l, m = res["local " + key], res["loom " + key]
        print("%-34s %12.1f %12.1f %8.2f" % (label, l, m, m / l))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

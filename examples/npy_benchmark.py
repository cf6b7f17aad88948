#!/usr/bin/env python3
"""How fast small .npy files load: a local folder against Loom, through the mount and without.

The benchmark of "cloud training: Lustre storage to speed up DeepSeek IO" (section 5.4,
benchmark_io: np.load of example_{i}.npy, one after the other), run four ways on the same files:

  local           np.load of each file in a local folder (--local; by default a new folder in /tmp)
  loom mount      np.load of each file on Loom, through the mount (the article's code, unchanged)
  loom native     loom.torch.FileDataset(ROOT, native=True, prefetch=False): libloom, no kernel
  loom prefetch   the same with prefetch=True, told the order first (dataset.plan(order)), so that
                  libloom reads the files ahead, many at once

Every run reads the --files token windows (int32, --min-tokens to --max-tokens each: a few hundred
bytes to a few KiB) in the same shuffled order, as a training epoch would; every array read is
compared with the one written. When run as root the page cache is dropped before each run
(sync; echo 3 > /proc/sys/vm/drop_caches), so that no run reads what an earlier one left in
memory. It prints files/s and the ratio to the local folder, and with --json FILE writes them.

    export LOOM_KEY_FILE=/tmp/fs/fs.key
    python3 examples/npy_benchmark.py --root /mnt/loom/npy
"""

import argparse
import glob
import json
import os
import random
import shutil
import sys
import tempfile
import time

try:
    import loom
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import loom
import loom.torch

import numpy as np


def make_windows(n, lo, hi, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 50000, int(rng.integers(lo, hi + 1)), dtype=np.int32) for _ in range(n)]


def write_files(folder, windows):
    os.makedirs(folder, exist_ok=True)
    for old in glob.glob(os.path.join(folder, "example_*.npy")):
        os.remove(old)
    t0 = time.time()
    for i, w in enumerate(windows):
        np.save(os.path.join(folder, f"example_{i}.npy"), w)
    return time.time() - t0


def drop_caches():
    """True if the page cache was dropped (needs root)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def load_files(folder, order):
    """The article's benchmark_io, in the given order."""
    return [np.load(os.path.join(folder, f"example_{i}.npy")) for i in order]


def load_dataset(root, order, fs, prefetch):
    ds = loom.torch.FileDataset(root, "example_*.npy", decode=loom.torch.decode_npy, native=True, fs=fs,
                                prefetch=prefetch)
    where = {int(os.path.basename(p)[len("example_"):-len(".npy")]): k for k, p in enumerate(ds.files)}
    indices = [where[i] for i in order]
    if prefetch:
        ds.plan(indices)
    out = [ds[k] for k in indices]
    load_dataset.stats = ds.prefetch_stats() if prefetch else None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="a directory on a Loom mount (made if missing)")
    ap.add_argument("--local", help="a local folder to compare with (default: a new one in /tmp, removed after)")
    ap.add_argument("--files", type=int, default=1000, help="files (default 1000)")
    ap.add_argument("--min-tokens", type=int, default=64, help="int32 tokens in the smallest file (default 64)")
    ap.add_argument("--max-tokens", type=int, default=1024, help="int32 tokens in the largest file (default 1024)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each kind; the best counts (default 1)")
    ap.add_argument("--no-drop-caches", action="store_true", help="leave the page cache alone between runs")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    if loom.mount_of(root) is None:
        sys.exit("%s is not on a Loom mount" % root)
    made_local = args.local is None
    local = args.local or tempfile.mkdtemp(prefix="loom-npy-bench-", dir="/tmp")
    if loom.mount_of(local) is not None:
        sys.exit("--local %s is on a Loom mount; give a local folder" % local)

    fs = loom.connect(root)
    windows = make_windows(args.files, args.min_tokens, args.max_tokens, args.seed)
    total = sum(w.nbytes + 128 for w in windows)   # np.save's header is 128 bytes here
    print("Loom file system %r (MDS %s)" % (fs.fsname, fs.mds))
    print("%d .npy files of %d to %d int32 tokens (%.1f MiB in all), written with np.save:"
          % (args.files, args.min_tokens, args.max_tokens, total / 2**20))
    for name, folder in (("local", local), ("loom", root)):
        secs = write_files(folder, windows)
        print("  %-5s %s: %.2f s (%.0f files/s)" % (name, folder, secs, args.files / secs))

    order = list(range(args.files))
    random.Random(args.seed).shuffle(order)
    runs = [
        ("local", "np.load, local folder", lambda: load_files(local, order)),
        ("loom mount", "np.load, Loom mount", lambda: load_files(root, order)),
        ("loom native", "FileDataset(native=True, prefetch=False)", lambda: load_dataset(root, order, fs, False)),
        ("loom prefetch", "FileDataset(prefetch=True) + plan(order)", lambda: load_dataset(root, order, fs, True)),
    ]
    dropping = not args.no_drop_caches
    if dropping and not drop_caches():
        print("(cannot drop the page cache here: not root; runs after the first may read from memory)")
        dropping = False
    print("reading them all in a shuffled order%s:" % (", page cache dropped before each run" if dropping else ""))
    results, failures = [], []
    for key, how, fn in runs:
        best = None
        for _ in range(args.repeat):
            if dropping:
                drop_caches()
            t0 = time.perf_counter()
            arrays = fn()
            secs = time.perf_counter() - t0
            best = secs if best is None else min(best, secs)
            wrong = sum(1 for i, a in zip(order, arrays) if not np.array_equal(a, windows[i]))
            if len(arrays) != args.files or wrong:
                failures.append("%s: %d arrays read, %d of them not as written" % (key, len(arrays), wrong))
        r = {"name": key, "how": how, "seconds": best, "files_per_s": args.files / best,
             "mib_per_s": total / 2**20 / best}
        if key == "loom prefetch" and load_dataset.stats:
            r["prefetch_stats"] = load_dataset.stats
        results.append(r)
    local_rate = results[0]["files_per_s"]
    print("  %-14s %-42s %9s %10s %8s" % ("run", "how", "seconds", "files/s", "vs local"))
    for r in results:
        r["ratio_to_local"] = r["files_per_s"] / local_rate
        print("  %-14s %-42s %9.3f %10.0f %7.2fx" % (r["name"], r["how"], r["seconds"], r["files_per_s"],
                                                    r["ratio_to_local"]))
    st = results[-1].get("prefetch_stats")
    if st:
        print("  prefetch: %d files fetched ahead, %d were ready when asked for, %d waited, %d read directly"
              % (st["fetched"], st["ready"], st["waited"], st["direct"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"files": args.files, "bytes": total, "min_tokens": args.min_tokens,
                       "max_tokens": args.max_tokens, "page_cache_dropped": dropping, "local": local,
                       "root": root, "runs": results}, f, indent=2)
        print("figures written to %s" % args.json)
    if made_local:
        shutil.rmtree(local, ignore_errors=True)
    if failures:
        for f in failures:
            print("FAIL: " + f)
        return 1
    print("OK: every file read back as written, in every run")
    return 0


if __name__ == "__main__":
    sys.exit(main())

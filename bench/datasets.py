#!/usr/bin/env python3
"""Samples/s of loom.torch's datasets: a local folder, Loom through the mount, and Loom through the
native path without and with epoch-aware prefetch, and with prefetch through the mount's door (the
path of a user without the key), in one run.

Starts a Loom cluster (bench/run.py's Bench: 1 MDS, 4 OSS, mounted) beside a local folder on the
same disk, writes the same tokenized samples to both (a .npy file each, as the seeds' tokenizing
script does, and the same as record shards) and 8 MiB images (the seeds' LoRA training set),
and reads one shuffled epoch of each
(DistributedSampler, as the seeds' training loop) through loom.torch.DataLoader (torch's, which
tells Loom's datasets the order) with 0, 2 and 4 workers,
with the page cache dropped before each epoch. Prints samples/s and the ratio to the local
folder; writes bench/results/datasets.json.

    python3 bench/datasets.py [--build build] [--files 4000] [--tokens 1024] [--images 64] [--runs 2] [--workers 0,2,4]

Needs root (mount, drop_caches).
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
import run  # noqa: E402


def write_samples(b, n, tokens, fs):
    from loom.shard import ShardWriter
    rng = np.random.default_rng(0)
    for side in (b.local, b.mnt):
        os.makedirs(os.path.join(side, "tok"))
    with ShardWriter(os.path.join(b.local, "shards"), native=False) as wl, \
            ShardWriter(os.path.join(b.mnt, "shards"), fs=fs) as wn:
        for i in range(n):
            a = rng.integers(0, 50000, size=tokens, dtype=np.int32)
            for side in (b.local, b.mnt):
                np.save(os.path.join(side, "tok", "example_%05d.npy" % i), a)
            wl.write(a)
            wn.write(a)


def write_images(b, n, size):
    """n images of size bytes each (uint8 .npy), the seeds' LoRA training set."""
    rng = np.random.default_rng(1)
    for side in (b.local, b.mnt):
        os.makedirs(os.path.join(side, "img"))
    for i in range(n):
        a = rng.integers(0, 256, size=size, dtype=np.uint8)
        for side in (b.local, b.mnt):
            np.save(os.path.join(side, "img", "img_%04d.npy" % i), a)


def epoch(ds_factory, workers, batch, drop):
    """Samples/s of one shuffled epoch (DistributedSampler) through loom.torch.DataLoader, which
    is torch's DataLoader for the local folder and tells Loom's datasets the epoch's order."""
    import torch
    from torch.utils.data import DistributedSampler
    import loom.torch as lt
    ds = ds_factory()
    sampler = DistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=0)
    sampler.set_epoch(1)
    loader = lt.DataLoader(ds, batch_size=batch, sampler=sampler, num_workers=workers)
    drop()
    t0 = time.perf_counter()
    n = 0
    for x in loader:
        n += x.shape[0]
        torch.sum(x)
    dt = time.perf_counter() - t0
    if n != len(ds):
        raise RuntimeError("an epoch gave %d samples of %d" % (n, len(ds)))
    return n / dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(run.ROOT, "build"))
    ap.add_argument("--files", type=int, default=4000)
    ap.add_argument("--tokens", type=int, default=1024, help="int32 tokens per sample")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=2, help="epochs per case; the best is kept")
    ap.add_argument("--images", type=int, default=64, help="8 MiB images (0: none)")
    ap.add_argument("--image-mib", type=int, default=8)
    ap.add_argument("--workers", default="0,2,4", help="DataLoader workers, comma-separated")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "datasets.json"))
    a = ap.parse_args()
    a.workers = [int(w) for w in a.workers.split(",")]
    os.environ["LOOM_LIBRARY"] = os.path.join(os.path.abspath(a.build), "src", "client", "libloom.so")

    b = run.Bench(os.path.abspath(a.build), keep=False)
    rows = []
    try:
        b.up()
        import loom
        import loom.torch as lt
        fs = loom.connect(b.mnt)
        door = loom.connect(b.mnt, door=True)
        write_samples(b, a.files, a.tokens, fs)
        npy = lt.decode_npy
        if a.images:
            write_images(b, a.images, a.image_mib << 20)

        def cases(kind, sub, pattern):
            cls = lt.ShardDataset if kind == "shards" else lt.FileDataset
            args = (pattern,) if pattern else ()
            return [
                (kind, "local folder", lambda: cls(os.path.join(b.local, sub), *args, decode=npy)),
                (kind, "loom mount", lambda: cls(os.path.join(b.mnt, sub), *args, decode=npy, native=False)),
                (kind, "loom native", lambda: cls(os.path.join(b.mnt, sub), *args, decode=npy, fs=fs,
                                                  prefetch=False)),
                (kind, "loom native + prefetch", lambda: cls(os.path.join(b.mnt, sub), *args, decode=npy,
                                                             fs=fs)),
                # A user without the key: the same, through the mount's door.
                (kind, "loom door + prefetch", lambda: cls(os.path.join(b.mnt, sub), *args, decode=npy,
                                                           fs=door)),
            ]
        all_cases = cases("files", "tok", "*.npy") + cases("shards", "shards", None)
        if a.images:
            all_cases += cases("images", "img", "*.npy")
        for workers in a.workers:
            local = {}
            for kind, path, factory in all_cases:
                batch = 4 if kind == "images" else a.batch
                best = max(epoch(factory, workers, batch, b.drop_caches) for _ in range(a.runs))
                if path == "local folder":
                    local[kind] = best
                rows.append({"samples": kind, "path": path, "workers": workers, "samples_per_s": round(best, 1),
                             "vs_local": round(best / local[kind], 3)})
                extra = " (%.0f MiB/s)" % (best * a.image_mib) if kind == "images" else ""
                print("%-7s %-24s workers=%d  %8.0f samples/s%s  %5.2f x local" %
                      (kind, path, workers, best, extra, best / local[kind]), flush=True)
        fs.close()
        door.close()
    finally:
        b.down()
    out = {"files": a.files, "tokens": a.tokens, "batch": a.batch, "images": a.images,
           "image_mib": a.image_mib, "cold": b.cold, "rows": rows}
    run.write_results(a.json, out)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Loading one large model file, as every node of a job does at its start: a .safetensors file
striped over every OST, read by loom.torch.load_safetensors natively (parallel ranged reads),
beside the same file in a local folder on the same disk read the way a program reads it there
(one sequential read of the whole file into memory, as safetensors' own loader ends up doing,
and load_safetensors with its parallel reads), with the page cache dropped before each load.
Prints GiB/s and the ratio to the local folder; writes bench/results/model_load.json.

    python3 bench/model_load.py [--build build] [--gib 2] [--runs 2] [--threads 16]

Needs root (mount, drop_caches).
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
import run  # noqa: E402


def write_model(path, gib, fs=None):
    """A model of 256 MiB tensors (and a few small ones), gib GiB in all."""
    import torch
    import loom.torch as lt
    tensors = {"embed.weight": torch.randn(1024, 64)}
    n = (gib << 30) // (256 << 20)
    for k in range(n):
        tensors["layers.%d.weight" % k] = torch.full((64 << 20,), float(k), dtype=torch.float32)
    lt.save_safetensors(tensors, path, {"format": "pt"}, fs=fs)
    return os.path.getsize(path)


def read_whole(path):
    with open(path, "rb", buffering=0) as f:
        return len(f.readall())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(run.ROOT, "build"))
    ap.add_argument("--gib", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2, help="the best run of each is kept")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--json", default=os.path.join(HERE, "results", "model_load.json"))
    a = ap.parse_args()
    os.environ["LOOM_LIBRARY"] = os.path.join(os.path.abspath(a.build), "src", "client", "libloom.so")
    b = run.Bench(os.path.abspath(a.build), keep=False)
    rows = []
    try:
        b.up()
        import loom
        import loom.torch as lt
        fs = loom.connect(b.mnt)
        fs.setstripe(b.mnt, stripe_count=-1, stripe_size=4 << 20)   # over every OST
        local = os.path.join(b.local, "model.safetensors")
        striped = os.path.join(b.mnt, "model.safetensors")
        size = write_model(local, a.gib)
        write_model(striped, a.gib, fs=fs)
        osts = len(fs.getstripe(striped).osts())
        cases = [
            ("local folder, one read of the file", lambda: read_whole(local)),
            ("local folder, load_safetensors", lambda: lt.load_safetensors(local, threads=a.threads)),
            ("loom native, load_safetensors (%d OSTs)" % osts,
             lambda: lt.load_safetensors(striped, fs=fs, threads=a.threads)),
            ("loom mount, load_safetensors",
             lambda: lt.load_safetensors(striped, native=False, threads=a.threads)),
        ]
        best_local = None
        for name, load in cases:
            best = None
            for _ in range(a.runs):
                b.drop_caches()
                t = time.perf_counter()
                out = load()
                took = time.perf_counter() - t
                del out
                best = took if best is None else min(best, took)
            gibs = size / (1 << 30) / best
            if name.startswith("local"):
                best_local = max(best_local or 0, gibs)
            rows.append({"case": name, "seconds": round(best, 3), "gib_per_s": round(gibs, 3),
                         "vs_local": round(gibs / best_local, 3)})
            print("%-44s %6.2f s  %6.2f GiB/s  %5.2f x local" % (name, best, gibs, gibs / best_local),
                  flush=True)
        fs.close()
    finally:
        b.down()
    out = {"gib": a.gib, "threads": a.threads, "cold": b.cold, "rows": rows}
    run.write_results(a.json, out)


if __name__ == "__main__":
    main()

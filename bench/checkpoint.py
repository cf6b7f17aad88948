#!/usr/bin/env python3
"""What checkpoint saves cost a training loop: a small model trained on the CPU that saves its
state every N steps, with torch.save to a local folder, torch.save through the Loom mount, and
loom.torch.save natively, in the foreground and in the background (background=True), in one
run beside a loop that saves nothing. Prints, per way of saving, the time the loop spent inside
save() per checkpoint (the stall), what the whole loop lost per checkpoint against the loop that
saves nothing (the stall plus the background work's share of the CPU), and the checkpoint's
MiB/s where the save is in the foreground. Writes bench/results/checkpoint.json.

    python3 bench/checkpoint.py [--build build] [--mib 128] [--steps 20] [--every 5] [--runs 2]

Needs root (mount). The machine is shared and noisy: compare the rows of one run.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
import run  # noqa: E402


def make_model(mib):
    import torch
    width = 1024
    layers = max(1, (mib << 20) // (width * width * 4))
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods)


def torch_save(path, fsync):
    import torch

    def save(state, step):
        p = path % step
        with open(p, "wb") as f:
            torch.save(state, f)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
    return save


def loom_save(path, background, fs=None):
    import loom.torch as lt

    def save(state, step):
        lt.save(state, path % step, background=background, fs=fs)
    return save


def train(model, steps, every, save):
    """(seconds the loop took, [seconds inside each save()])"""
    import torch
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(8, 1024)
    stalls = []
    start = time.perf_counter()
    for step in range(1, steps + 1):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        if save is not None and step % every == 0:
            t = time.perf_counter()
            save({"model": model.state_dict(), "step": step}, step)
            stalls.append(time.perf_counter() - t)
    if save is not None:
        import loom.torch as lt
        lt.wait()   # a background save's write is part of what the run cost
    return time.perf_counter() - start, stalls


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(run.ROOT, "build"))
    ap.add_argument("--mib", type=int, default=128, help="the model's size (its checkpoint's)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--every", type=int, default=5, help="steps between checkpoints")
    ap.add_argument("--runs", type=int, default=2, help="the best run of each way is kept")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "checkpoint.json"))
    a = ap.parse_args()
    os.environ["LOOM_LIBRARY"] = os.path.join(os.path.abspath(a.build), "src", "client", "libloom.so")
    import torch
    torch.set_num_threads(1)   # the loop on one core, the other left to a save (2-core VM)
    torch.set_flush_denormal(True)   # deep ReLU stacks reach denormals, 100x slower on x86

    b = run.Bench(os.path.abspath(a.build), keep=False)
    rows = []
    try:
        b.up()
        import loom
        fs = loom.connect(b.mnt)
        model = make_model(a.mib)
        size = sum(p.numel() * 4 for p in model.parameters())
        loc, mnt = os.path.join(b.local, "ck-%d.pt"), os.path.join(b.mnt, "ck-%d.pt")
        ways = [
            ("no checkpoint", None),
            ("torch.save, local folder", torch_save(loc, False)),
            ("torch.save + fsync, local folder", torch_save(loc, True)),
            ("torch.save + fsync, loom mount", torch_save(mnt, True)),
            ("loom.torch.save, loom native", loom_save(mnt, False, fs)),
            ("loom.torch.save background, loom native", loom_save(mnt, True, fs)),
            ("loom.torch.save background, local folder", loom_save(loc, True)),
        ]
        base = None
        for name, save in ways:
            best = None
            for _ in range(a.runs):
                total, stalls = train(model, a.steps, a.every, save)
                if best is None or total < best[0]:
                    best = (total, stalls)
            total, stalls = best
            if base is None:
                base = total
            n = len(stalls)
            row = {"way": name, "loop_s": round(total, 3)}
            if n:
                stall = statistics.median(stalls)
                row.update(checkpoints=n, stall_ms=round(stall * 1e3, 1),
                           lost_per_checkpoint_ms=round((total - base) / n * 1e3, 1))
                if "background" not in name:
                    row["mib_per_s"] = round(size / (1 << 20) / stall, 1)
            rows.append(row)
            print("%-42s loop %6.2f s" % (name, total) + (
                "  stall %7.1f ms  lost %7.1f ms/checkpoint%s" % (
                    row["stall_ms"], row["lost_per_checkpoint_ms"],
                    "  %6.0f MiB/s" % row["mib_per_s"] if "mib_per_s" in row else "")
                if n else ""), flush=True)
        fs.close()
    finally:
        b.down()
    out = {"mib": a.mib, "steps": a.steps, "every": a.every, "rows": rows}
    run.write_results(a.json, out)


if __name__ == "__main__":
    main()

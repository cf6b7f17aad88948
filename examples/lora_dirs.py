#!/usr/bin/env python3
"""LoRA fine-tuning with data/, models/ and output/ on Loom, laid out as the article advises.

The workflow of "Lustre speeds up lora-scripts' large-scale IO":

1. ROOT/data (training images), ROOT/models (the shared base model) and ROOT/output (checkpoints);
   models/ striped over every OST (`loom setstripe -c -1`: a big file is read from every server
   at once), data/ on one OST per file (`loom setstripe -c 1`: small files, one server each);
2. a base model (an MLP's state_dict, --model-mib) saved with torch.save to models/base.pt, and
   --images random uint8 "images" saved with np.save to data/;
3. the base model loaded by --loaders processes at once, each with torch.load from the mount (as
   several GPU nodes share one copy of the model), and once through libloom without the mount:
   all must get the same tensors;
4. LoRA adapters (low-rank A and B beside the frozen fc2 and fc3 of the base model) trained for
   --steps steps on the images, with a checkpoint every --ckpt-every steps saved the safe way:
   torch.save to output/run/ckpt-STEP.pt.tmp, fsync, then os.replace to ckpt-STEP.pt (an atomic
   rename, so a reader never sees half a checkpoint); only the last --keep are kept;
5. the last checkpoint loaded back and compared with the adapters in memory.

It exits 1 if a check fails.

    export LOOM_KEY_FILE=/tmp/fs/fs.key
    python3 examples/lora_dirs.py --root /mnt/loom/lora
"""

import argparse
import glob
import hashlib
import math
import os
import re
import shutil
import subprocess
import sys
import time

try:
    import loom
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import loom

import numpy as np
import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

FEATURES = 1024        # an image is pooled to 4 x 16 x 16 values, the model's input and output
IMAGE_WIDTH = 512      # an image is ROWS x 512 pixels x 4 channels (RGBA), uint8


class BaseMLP(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, FEATURES)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def hidden_for(mib):
    """The hidden width that makes BaseMLP's float32 parameters about mib MiB."""
    params = mib * (1 << 20) / 4
    b = 2 * FEATURES + 2
    h = (-b + math.sqrt(b * b + 4 * (params - FEATURES))) / 2
    return max(16, int(round(h / 16)) * 16)


class LoRALinear(nn.Module):
    """A frozen nn.Linear plus a trainable low-rank update: W x + (alpha / r) B A x."""

    def __init__(self, base, rank, alpha):
        super().__init__()
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.A = nn.Parameter(torch.randn(rank, base.in_features) / math.sqrt(base.in_features))
        self.B = nn.Parameter(torch.zeros(base.out_features, rank))
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + (x @ self.A.t() @ self.B.t()) * self.scale


def checksum(state_dict):
    h = hashlib.sha256()
    for k in sorted(state_dict):
        h.update(k.encode())
        h.update(state_dict[k].detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def lora_state(model):
    return {k: v.detach().clone() for k, v in model.named_parameters() if v.requires_grad}


def load_one(k, path, barrier, results):
    """One of the loader processes: torch.load from the mount, when all are ready."""
    torch.set_num_threads(1)
    barrier.wait()
    t0 = time.time()
    sd = torch.load(path, map_location="cpu")
    seconds = time.time() - t0
    results.put((k, os.getpid(), seconds, checksum(sd), sum(t.numel() * t.element_size() for t in sd.values())))


class Images(Dataset):
    """The images of a folder, each as FEATURES values: pooled, then standardized."""

    def __init__(self, folder):
        self.files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".npy"))

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        img = torch.from_numpy(np.load(self.files[i])).float().permute(2, 0, 1)  # 4 x rows x 512
        x = F.adaptive_avg_pool2d(img, (16, 16)).reshape(-1)
        return (x - x.mean()) / (x.std() + 1e-6)


def loom_tool():
    """The `loom` command: on PATH, else in the build tree beside this one."""
    found = shutil.which("loom")
    if found:
        return found
    built = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "src", "tools", "loom")
    return os.path.abspath(built) if os.access(built, os.X_OK) else None


def show_layout(fs, path, tool, *flags):
    lay = fs.getstripe(path)
    if lay.is_default:
        print("   %s: new files get stripe_count %d%s" % (path, lay.stripe_count, " (every OST)" if lay.stripe_count == -1 else ""))
    else:
        dom = " after its first %d KiB on the MDT" % (lay.dom_size // 1024) if 0 < lay.dom_size < 0xFFFFFFFF else ""
        print("   %s: stripe_count %d, stripe_size %d%s, OSTs %s"
              % (path, lay.stripe_count, lay.stripe_size, dom, lay.osts()))
    if tool:
        p = subprocess.run([tool, "getstripe"] + list(flags) + [path], capture_output=True, text=True)
        out = (p.stdout + p.stderr).strip()
        print("     $ loom getstripe %s%s\n%s" % (" ".join(flags) + " " if flags else "", path,
                                                  "\n".join("     " + line for line in out.splitlines())))
    return lay


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="a directory on a Loom mount (made if missing)")
    ap.add_argument("--model-mib", type=float, default=16, help="size of the base model (default 16 MiB)")
    ap.add_argument("--images", type=int, default=8, help="training images (default 8)")
    ap.add_argument("--image-kib", type=int, default=1024, help="size of each image (default 1024 KiB)")
    ap.add_argument("--loaders", type=int, default=3, help="processes loading the base model at once (default 3)")
    ap.add_argument("--steps", type=int, default=60, help="training steps (default 60)")
    ap.add_argument("--ckpt-every", type=int, default=10, help="steps between checkpoints (default 10)")
    ap.add_argument("--keep", type=int, default=2, help="checkpoints kept (default 2)")
    ap.add_argument("--rank", type=int, default=4, help="LoRA rank (default 4)")
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    if loom.mount_of(root) is None:
        sys.exit("%s is not on a Loom mount" % root)
    torch.manual_seed(args.seed)
    failures = []

    # 1. The three folders, and their layouts.
    data, models, output = (os.path.join(root, d) for d in ("data", "models", "output"))
    run = os.path.join(output, "run")
    for d in (data, models, output):
        os.makedirs(d, exist_ok=True)
    fs = loom.connect(root)
    print("Loom file system %r (MDS %s), working in %s" % (fs.fsname, fs.mds, root))
    tool = loom_tool()
    fs.setstripe(models, stripe_count=-1)
    fs.setstripe(data, stripe_count=1)
    print("1. layouts set with the package: fs.setstripe(models, stripe_count=-1), fs.setstripe(data, stripe_count=1)")
    print("   the same from a shell:  loom setstripe -c -1 %s ;  loom setstripe -c 1 %s" % (models, data))
    lm = show_layout(fs, models, tool, "-d")
    ld = show_layout(fs, data, tool, "-d")
    if lm.stripe_count != -1 or ld.stripe_count != 1:
        failures.append("the layouts did not take: models %d, data %d" % (lm.stripe_count, ld.stripe_count))

    # 2. The base model and the images.
    hidden = hidden_for(args.model_mib)
    base = BaseMLP(hidden)
    base_path = os.path.join(models, "base.pt")
    t0 = time.time()
    torch.save(base.state_dict(), base_path)
    secs = time.time() - t0
    size = os.path.getsize(base_path)
    want = checksum(base.state_dict())
    print("2. base model: MLP %d-%d-%d-%d, %.1f MiB, torch.save to %s in %.2f s (%.0f MiB/s)"
          % (FEATURES, hidden, hidden, FEATURES, size / 2**20, base_path, secs, size / 2**20 / max(secs, 1e-9)))
    lb = show_layout(fs, base_path, None)
    rng = np.random.default_rng(args.seed)
    rows = max(1, args.image_kib * 1024 // (IMAGE_WIDTH * 4))
    for f in glob.glob(os.path.join(data, "*.npy")):
        os.remove(f)
    t0 = time.time()
    for i in range(args.images):
        np.save(os.path.join(data, "img_%04d.npy" % i), rng.integers(0, 256, (rows, IMAGE_WIDTH, 4), dtype=np.uint8))
    secs = time.time() - t0
    print("   %d images of %dx%dx4 uint8 (%d KiB) saved with np.save to %s in %.2f s"
          % (args.images, rows, IMAGE_WIDTH, rows * IMAGE_WIDTH * 4 // 1024, data, secs))
    li = show_layout(fs, os.path.join(data, "img_0000.npy"), None)
    n_osts = len(fs.getstripe(base_path).objects)
    if len(li.objects) > 1:
        failures.append("an image is striped over %d OSTs, data/ asks for 1" % len(li.objects))
    if lb.objects and n_osts < 2 and size > lb.dom_size + lb.stripe_size:
        failures.append("the base model is on %d OST(s), models/ asks for all" % n_osts)

    # 3. The base model loaded by several processes at once, and through libloom.
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(args.loaders), ctx.SimpleQueue()
    procs = [ctx.Process(target=load_one, args=(k, base_path, barrier, results)) for k in range(args.loaders)]
    t0 = time.time()
    for p in procs:
        p.start()
    got = [results.get() for _ in procs]
    for p in procs:
        p.join()
    print("3. %d processes loaded %s at once with torch.load through the mount:" % (args.loaders, base_path))
    for k, pid, secs, digest, nbytes in sorted(got):
        ok = digest == want
        print("   process %d (pid %d): %.1f MiB in %.2f s (%.0f MiB/s), sha256 %s... %s"
              % (k, pid, nbytes / 2**20, secs, nbytes / 2**20 / max(secs, 1e-9), digest[:16],
                 "= saved" if ok else "DIFFERS from what was saved"))
        if not ok:
            failures.append("process %d loaded different tensors" % k)
    t0 = time.time()
    with fs.open(base_path, "rb") as f:
        sd = torch.load(f, map_location="cpu")
    secs = time.time() - t0
    ok = checksum(sd) == want
    print("   and through libloom (torch.load(fs.open(path, 'rb'))): %.2f s, %s"
          % (secs, "same tensors" if ok else "DIFFERENT tensors"))
    if not ok:
        failures.append("the load through libloom gave different tensors")

    # 4. LoRA training with atomic checkpoints.
    model = BaseMLP(hidden)
    model.load_state_dict(sd)
    model.requires_grad_(False)                       # the base model stays as it is
    model.fc2 = LoRALinear(model.fc2, args.rank, alpha=2 * args.rank)
    model.fc3 = LoRALinear(model.fc3, args.rank, alpha=2 * args.rank)
    trainable = [p for p in model.parameters() if p.requires_grad]
    n_train = sum(p.numel() for p in trainable)
    n_all = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(trainable, lr=args.lr)
    images = Images(data)
    loader = DataLoader(images, batch_size=args.batch_size, shuffle=True, drop_last=False)
    shutil.rmtree(run, ignore_errors=True)
    os.makedirs(run)
    print("4. LoRA rank %d on fc2 and fc3: %d trainable parameters (%.2f%% of %d), %d steps on %d images, "
          "a checkpoint every %d steps in %s (keeping %d)"
          % (args.rank, n_train, 100.0 * n_train / n_all, n_all, args.steps, len(images), args.ckpt_every,
             run, args.keep))
    step, losses, load_secs, saves = 0, [], 0.0, []
    while step < args.steps:
        t0 = time.time()
        for x in loader:
            load_secs += time.time() - t0
            loss = F.mse_loss(model(x), x)    # the adapters learn to reconstruct the images
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            losses.append(float(loss))
            if step % args.ckpt_every == 0 or step == args.steps:
                final = os.path.join(run, "ckpt-%d.pt" % step)
                tmp = final + ".tmp"
                t1 = time.time()
                with open(tmp, "wb") as f:
                    torch.save({"step": step, "lora": lora_state(model), "optimizer": opt.state_dict(),
                                "base": base_path, "base_sha256": want}, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, final)
                saves.append(time.time() - t1)
                kept = sorted(glob.glob(os.path.join(run, "ckpt-*.pt")),
                              key=lambda p: int(re.search(r"ckpt-(\d+)\.pt$", p).group(1)))
                for old in kept[:-args.keep]:
                    os.remove(old)
                print("   step %3d  loss %.4f  saved %s (%.1f KiB) in %.3f s, kept %s"
                      % (step, losses[-1], os.path.basename(final), os.path.getsize(final) / 1024, saves[-1],
                         [os.path.basename(p) for p in kept[-args.keep:]]))
            if step >= args.steps:
                break
            t0 = time.time()
    print("   images read in %.2f s in all; checkpoints saved in %.3f s on average"
          % (load_secs, sum(saves) / max(len(saves), 1)))

    # 5. The last checkpoint, back from the file system.
    names = sorted(os.listdir(run))
    expect = ["ckpt-%d.pt" % s for s in sorted({s for s in range(args.ckpt_every, args.steps + 1, args.ckpt_every)}
                                               | {args.steps})][-args.keep:]
    last = os.path.join(run, "ckpt-%d.pt" % args.steps)
    ck = torch.load(last, map_location="cpu")
    mem = lora_state(model)
    same = ck["step"] == args.steps and set(ck["lora"]) == set(mem) and all(torch.equal(ck["lora"][k], mem[k]) for k in mem)
    print("5. %s holds step %d and %d adapter tensors: %s the ones in memory"
          % (last, ck["step"], len(ck["lora"]), "identical to" if same else "DIFFERENT from"))
    show_layout(fs, last, tool)
    print("   %s holds %s" % (run, names))
    if not same:
        failures.append("the last checkpoint does not hold the adapters in memory")
    if sorted(names) != sorted(expect):
        failures.append("%s holds %s, expected %s" % (run, names, expect))
    if not all(math.isfinite(x) for x in losses):
        failures.append("the loss is not finite")
    print("   loss %.4f at the first step, %.4f at the last" % (losses[0], losses[-1]))
    if failures:
        for f in failures:
            print("FAIL: " + f)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())

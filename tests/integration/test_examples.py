"""The example programs (examples/), each run at small sizes against a fresh mounted cluster, as a
user would run them, then what they left on the file system looked at from outside."""

import glob
import json
import os
import re
import signal
import subprocess

import numpy as np

from pyloom import EXAMPLES, child_env, connect, pylib

pytestmark = pylib

PYTHON = "/usr/bin/python3"


def run_example(cluster, name, *args, timeout=120):
    # A run that hangs is made to say where: every Python process of it (the DDP ranks and their
    # DataLoader workers too) dumps its threads' stacks on SIGABRT (faulthandler), and the
    # failure shows what it printed.
    p = subprocess.Popen([PYTHON, os.path.join(EXAMPLES, name)] + [str(a) for a in args],
                         env=child_env(cluster, PYTHONFAULTHANDLER=1), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGABRT)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        raise AssertionError("%s did not finish in %d s\nstdout:\n%s\nstderr (stacks):\n%s"
                             % (name, timeout, out, err[-20000:]))
    assert p.returncode == 0, "%s exited %d\nstdout:\n%s\nstderr:\n%s" % (name, p.returncode, out, err)
    return out


def test_jsonl_to_training(cluster):
    mnt = cluster.mount()
    root = os.path.join(mnt, "demo")
    out = run_example(cluster, "jsonl_to_training.py", "--root", root, "--lines", 200, "--merges", 100,
                      "--batch-size", 8, "--shard-records", 100, "--log-every", 5)
    assert "OK" in out.splitlines()[-1]
    n = int(re.search(r"^3\. (\d+) windows of 64 tokens", out, re.M).group(1))
    assert n >= 200
    for kind in ("files", "shards"):
        assert re.search(r"\(%s\): every one of the %d windows read, \d+ padding repeats, all as saved: yes"
                         % (kind, n), out), out
    first, last = map(float, re.search(r"loss: ([\d.]+) over the first \d+ steps, ([\d.]+) over", out).groups())
    assert first > 0 and last > 0

    # The corpus, the per-example files and the shards are all there for any program to read.
    with open(os.path.join(root, "data.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    assert len(lines) == 200 and all(isinstance(x["text"], str) and x["text"] for x in lines)
    files = glob.glob(os.path.join(root, "tokenized", "example_*.npy"))
    assert len(files) == n
    last_window = np.load(os.path.join(root, "tokenized", "example_%d.npy" % (n - 1)))
    assert last_window.dtype == np.int32 and last_window.shape == (64,)
    shards = sorted(os.listdir(os.path.join(root, "shards")))
    assert shards and all(s.endswith(".loomshard") for s in shards)      # no .tmp left behind

    import loom.torch
    fs = connect(cluster, mnt)
    ds = loom.torch.ShardDataset(os.path.join(root, "shards"), fs=fs, decode=loom.torch.decode_npy, prefetch=False)
    assert len(ds) == n
    assert np.array_equal(ds[n - 1], last_window)


def test_lora_dirs(cluster):
    mnt = cluster.mount()
    root = os.path.join(mnt, "lora")
    out = run_example(cluster, "lora_dirs.py", "--root", root, "--model-mib", 2, "--images", 4,
                      "--image-kib", 128, "--loaders", 2, "--steps", 6, "--ckpt-every", 2)
    assert out.splitlines()[-1] == "OK"
    assert "loom setstripe -c -1 %s/models" % root in out
    assert len(re.findall(r"process \d \(pid \d+\): .* = saved", out)) == 2
    assert "identical to the ones in memory" in out

    # The directories' defaults, as the tool shows them.
    models = cluster.loom("getstripe", "-d", os.path.join(root, "models")).stdout
    data = cluster.loom("getstripe", "-d", os.path.join(root, "data")).stdout
    assert re.search(r"stripe_count:\s+-1\b", models), models
    assert re.search(r"stripe_count:\s+1\b", data), data
    base = cluster.loom("getstripe", os.path.join(root, "models", "base.pt")).stdout
    assert len(re.findall(r"l_ost_idx: \d+", base)) == 4, base      # 2 MiB over all 4 OSTs
    assert len(glob.glob(os.path.join(root, "data", "img_*.npy"))) == 4

    # The last two checkpoints, and nothing else, are in output/run.
    run = os.path.join(root, "output", "run")
    assert sorted(os.listdir(run)) == ["ckpt-4.pt", "ckpt-6.pt"]
    ck = cluster.loom("getstripe", os.path.join(run, "ckpt-6.pt")).stdout
    assert re.search(r"stripe_count:\s+\d+", ck), ck
    import torch
    state = torch.load(os.path.join(run, "ckpt-6.pt"))
    assert state["step"] == 6 and len(state["lora"]) == 4


def test_npy_benchmark(cluster, tmp_path):
    mnt = cluster.mount()
    root = os.path.join(mnt, "npy")
    local = tmp_path / "local"
    figures = tmp_path / "figures.json"
    out = run_example(cluster, "npy_benchmark.py", "--root", root, "--local", local, "--files", 100,
                      "--json", figures)
    assert out.splitlines()[-1].startswith("OK")
    for name in ("local", "loom mount", "loom native", "loom prefetch"):
        assert re.search(r"^  %s\s+.*\s[\d.]+x$" % name, out, re.M), out
    with open(figures) as f:
        res = json.load(f)
    assert res["files"] == 100
    assert [r["name"] for r in res["runs"]] == ["local", "loom mount", "loom native", "loom prefetch"]
    assert all(r["files_per_s"] > 0 for r in res["runs"])
    st = res["runs"][-1]["prefetch_stats"]
    # Each file read once: by the prefetcher, or by the loop when it got there first.
    assert st["fetched"] + st["direct"] == 100 and st["fetched"] > 0, st

    # The same files on both sides, loadable by anyone.
    assert len(glob.glob(os.path.join(root, "example_*.npy"))) == 100
    assert len(glob.glob(os.path.join(local, "example_*.npy"))) == 100
    a, b = np.load(os.path.join(root, "example_42.npy")), np.load(os.path.join(local, "example_42.npy"))
    assert a.dtype == np.int32 and 64 <= a.size <= 1024 and np.array_equal(a, b)

"""The seeds' PyTorch pattern on the mount: a directory of tokenized examples (.npy files) read by
two ranks, each on its own mount, through DistributedSampler and a multi-worker DataLoader; and
checkpoints written with torch.save to a temporary name and os.replace'd into place, then loaded
on the other node."""

import hashlib
import json
import os
import subprocess

import pytest

np = pytest.importorskip("numpy")

HERE = os.path.dirname(os.path.abspath(__file__))
N_EXAMPLES = 500
RANK_TIMEOUT = 180      # seconds a rank may take: the DataLoader itself gives up after 60 s per batch


def write_examples(d, n=N_EXAMPLES, seed=2024):
    """example_<i>.npy, int32 token ids of 512..4096 tokens. Returns {name: (length, sha256)}."""
    rng = np.random.default_rng(seed)
    os.mkdir(d)
    manifest = {}
    for i in range(n):
        tokens = rng.integers(0, 50257, size=int(rng.integers(512, 4097)), dtype=np.int32)
        name = "example_%d.npy" % i
        np.save(os.path.join(d, name), tokens)
        manifest[name] = (len(tokens), hashlib.sha256(tokens.tobytes()).hexdigest())
    return manifest


def run_ranks(dirs, workdir):
    """Starts one rank per data directory (rank k reads dirs[k]), all at once; returns their
    reports."""
    procs = []
    for rank, d in enumerate(dirs):
        out = os.path.join(workdir, "rank%d.json" % rank)
        log = open(os.path.join(workdir, "rank%d.log" % rank), "w+")
        p = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "torch_rank.py"), d, str(rank),
                              str(len(dirs)), out], stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        procs.append((p, out, log))
    reports, failures = [], []
    for rank, (p, out, log) in enumerate(procs):
        try:
            p.wait(RANK_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            failures.append("rank %d hung: killed after %ds" % (rank, RANK_TIMEOUT))
        else:
            if p.returncode != 0:
                failures.append("rank %d exited %d" % (rank, p.returncode))
        log.seek(0)
        text = log.read()
        log.close()
        if failures and failures[-1].startswith("rank %d " % rank):
            failures[-1] += ":\n" + text[-3000:]
        elif os.path.exists(out):
            with open(out) as f:
                reports.append(json.load(f))
    assert not failures, "\n".join(failures)
    return reports


def test_distributed_sampler_dataloader_over_two_mounts(mounted, second_mount, workdir):
    manifest = write_examples(mounted.p("tokenized_data"))
    # Rank 0 on node A, rank 1 on node B, both at once.
    reports = run_ranks([mounted.p("tokenized_data"), second_mount.p("tokenized_data")], workdir)

    problems = []
    for r in reports:
        if r["files"] != N_EXAMPLES:
            problems.append("rank %d's Dataset lists %d files, expected %d" % (r["rank"], r["files"], N_EXAMPLES))
        if len(r["seen"]) != N_EXAMPLES // 2:
            problems.append("rank %d loaded %d examples, expected %d" % (r["rank"], len(r["seen"]), N_EXAMPLES // 2))
        problems += ["rank %d: %s" % (r["rank"], x) for x in r["problems"][:10]]
    count = {}
    for r in reports:
        for name, n, digest in r["seen"]:
            count[name] = count.get(name, 0) + 1
            if name not in manifest:
                problems.append("rank %d loaded %s, which was never written" % (r["rank"], name))
            elif manifest[name] != (n, digest):
                problems.append("rank %d: %s holds %d tokens (sha256 %s...), saved %d (%s...)"
                                % (r["rank"], name, n, digest[:12], manifest[name][0], manifest[name][1][:12]))
    twice = sorted(k for k, v in count.items() if v > 1)
    never = sorted(set(manifest) - set(count))
    if twice:
        problems.append("%d examples loaded by both ranks (e.g. %s)" % (len(twice), twice[:5]))
    if never:
        problems.append("%d examples loaded by no rank (e.g. %s)" % (len(never), never[:5]))
    assert not problems, "\n".join(problems[:40])


# ---- checkpoints --------------------------------------------------------------------------

def make_state(step):
    import torch
    torch.manual_seed(step)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        loss = model(torch.randn(16, 64)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {"step": step, "model": model.state_dict(), "optimizer": opt.state_dict(),
            "rng": torch.get_rng_state()}


def save_checkpoint(state, path):
    """The usual pattern: write to a temporary name, then os.replace it into place, so that a
    reader finds either the old checkpoint or the new one, never a partial file."""
    import torch
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def same_state(a, b):
    import torch

    def eq(x, y):
        if isinstance(x, torch.Tensor):
            return isinstance(y, torch.Tensor) and x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
        if isinstance(x, dict):
            return isinstance(y, dict) and x.keys() == y.keys() and all(eq(x[k], y[k]) for k in x)
        if isinstance(x, (list, tuple)):
            return type(x) == type(y) and len(x) == len(y) and all(eq(p, q) for p, q in zip(x, y))
        return x == y
    return eq(a, b)


class Evaluator:
    """A process of its own (torch_eval.py) that torch.loads checkpoints on request: another
    node's evaluator, watching for new checkpoints."""

    def __init__(self, timeout=120):
        self.timeout = timeout
        self.proc = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "torch_eval.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)

    def load(self, path):
        """What it finds at path: 'STEP True|False' (whether the state is make_state(STEP)) or
        'ERROR ...'."""
        import selectors
        self.proc.stdin.write(path + "\n")
        self.proc.stdin.flush()
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(self.timeout):
            self.close()
            raise AssertionError("the evaluator did not load %s within %ds" % (path, self.timeout))
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("the evaluator died loading %s:\n%s" % (path, self.proc.stderr.read()[-3000:]))
        r = json.loads(line)
        return "ERROR " + r["error"] if "error" in r else "%d %s" % (r["step"], r["same"])

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()


@pytest.fixture
def evaluator():
    e = Evaluator()
    yield e
    e.close()


def test_torch_save_load_and_checkpoint_replace(mounted, second_mount, evaluator):
    torch = pytest.importorskip("torch")
    d = mounted.p("ckpt")
    os.mkdir(d)

    # Plain torch.save / torch.load of a state dict, on one mount and through the other.
    state = make_state(1)
    torch.save(state["model"], os.path.join(d, "model.pt"))
    assert same_state(state["model"], torch.load(os.path.join(d, "model.pt"))), "torch.load gives another state dict"
    assert same_state(state["model"], torch.load(second_mount.p("ckpt", "model.pt"))), \
        "torch.load through mount B gives another state dict"

    # Checkpoints every "step", each replacing the last; after each, the trainer (mount A) and
    # an evaluator on another node (mount B, a process that keeps running) load the newest.
    path = os.path.join(d, "last.pt")
    problems = []
    for step in (1, 2, 3):
        save_checkpoint(make_state(step), path)
        got = torch.load(path)
        if got["step"] != step or not same_state(got, make_state(step)):
            problems.append("after saving step %d, torch.load on mount A gives step %s%s"
                            % (step, got["step"], "" if got["step"] != step else " with other tensors"))
        other = evaluator.load(second_mount.p("ckpt", "last.pt"))
        if other != "%d True" % step:
            problems.append("after saving step %d on mount A, torch.load of last.pt on mount B gives: %s"
                            % (step, other))
    names = sorted(os.listdir(d))
    if names != ["last.pt", "model.pt"]:
        problems.append("the checkpoint directory holds %s" % names)
    if sorted(os.listdir(second_mount.p("ckpt"))) != ["last.pt", "model.pt"]:
        problems.append("through mount B the checkpoint directory holds %s" % sorted(os.listdir(second_mount.p("ckpt"))))
    assert not problems, "\n".join(problems)

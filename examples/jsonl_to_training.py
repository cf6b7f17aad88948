#!/usr/bin/env python3
"""From a JSONL corpus to a distributed training run, with the data on Loom.

The workflow of "cloud training: Lustre storage to speed up DeepSeek IO" (sections 5.2 and 5.3):

1. a JSONL corpus of {"text": ...} lines (--jsonl FILE, or a synthetic English-like one written
   to ROOT/data.jsonl);
2. a tokenizer that needs no download: a small byte-level BPE trained here, in pure Python;
3. every line encoded, cut into fixed-length windows (the last one padded), and saved
   - as one file per window, ROOT/tokenized/example_{i}.npy, with np.save through the mount
     (exactly the article's preprocessing script), and
   - as record shards, ROOT/shards/*.loomshard, written through libloom (loom.shard.ShardWriter);
4. a tiny next-token model (embedding, 1-layer GRU, linear) trained with torch.distributed (gloo,
   2 processes on this machine), each rank reading its share with DistributedSampler and
   DataLoader(num_workers=2): even epochs from the .npy files (loom.torch.FileDataset), odd
   epochs from the shards (loom.torch.ShardDataset), both read ahead by libloom in the order the
   sampler will ask for.

It checks that every window was read exactly once per epoch across the ranks (DistributedSampler
repeats a few to give each rank as many), that each one held the tokens that were saved, and that
the loss is finite; it exits 1 if a check fails.

    export LOOM_KEY_FILE=/tmp/fs/fs.key
    python3 examples/jsonl_to_training.py --root /mnt/loom/demo
"""

import argparse
import collections
import json
import math
import os
import random
import re
import shutil
import sys
import tempfile
import time

try:
    import loom
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import loom
import loom.shard
import loom.torch

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler


# ---------------------------------------------------------------------------------------------
# 1. A synthetic corpus, the same on every run.

SUBJECTS = ["the model", "a researcher", "the cluster", "our team", "the scheduler", "every node",
            "the optimizer", "a student", "the storage server", "the tokenizer", "each worker",
            "the training job", "a small network", "the data loader", "the metadata server"]
VERBS = ["reads", "writes", "loads", "shuffles", "trains on", "checks", "stripes", "caches",
         "compresses", "evaluates", "streams", "saves", "splits", "samples", "restores"]
ADJECTIVES = ["large", "small", "parallel", "shared", "random", "sorted", "compressed", "fresh",
              "noisy", "clean", "distributed", "local", "remote", "tokenized", "striped"]
OBJECTS = ["files", "checkpoints", "batches", "shards", "gradients", "weights", "samples",
           "records", "images", "documents", "objects", "stripes", "tensors", "epochs", "logs"]
ENDINGS = ["every hour", "in parallel", "before the next step", "without waiting", "at night",
           "on every node", "from the object servers", "as fast as it can", "twice a day",
           "after each epoch", "with little memory", "in a fixed order"]
CONNECTORS = ["Then", "Meanwhile", "Later", "Afterwards", "Still", "Because of that", "Today"]


def synthetic_line(rng):
    sentences = []
    for k in range(rng.randint(2, 4)):
        s = "%s %s %d %s %s %s." % (rng.choice(SUBJECTS), rng.choice(VERBS), rng.randint(2, 512),
                                    rng.choice(ADJECTIVES), rng.choice(OBJECTS), rng.choice(ENDINGS))
        if k > 0 and rng.random() < 0.5:
            s = rng.choice(CONNECTORS) + ", " + s
        sentences.append(s[0].upper() + s[1:])
    return " ".join(sentences)


def write_corpus(path, lines, seed):
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(lines):
            f.write(json.dumps({"text": synthetic_line(rng)}) + "\n")


def read_corpus(path, limit=None):
    texts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            texts.append(json.loads(line)["text"])
            if limit and len(texts) >= limit:
                break
    return texts


# ---------------------------------------------------------------------------------------------
# 2. A byte-level BPE tokenizer: 256 byte tokens, then one token per merge learned, in order.

WORD = re.compile(r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+")


class ByteBPE:
    def __init__(self, merges):
        self.merges = merges                          # [(a, b)]: token 256 + k is a + b
        self.rank = {pair: k for k, pair in enumerate(merges)}
        self.vocab = [bytes([b]) for b in range(256)]
        for a, b in merges:
            self.vocab.append(self.vocab[a] + self.vocab[b])
        self.pad = len(self.vocab)                    # one more id, for padding
        self._cache = {}

    @property
    def size(self):
        return len(self.vocab) + 1

    @classmethod
    def train(cls, texts, num_merges, max_words=5000):
        """Learns num_merges merges from the most frequent max_words distinct words of texts."""
        freq = collections.Counter()
        for t in texts:
            freq.update(WORD.findall(t))
        words = [(list(w.encode("utf-8")), n) for w, n in freq.most_common(max_words)]
        merges = []
        for k in range(num_merges):
            pairs = collections.Counter()
            for toks, n in words:
                for pair in zip(toks, toks[1:]):
                    pairs[pair] += n
            if not pairs:
                break
            best = max(pairs.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]))
            if best[1] < 2:
                break
            (a, b), new = best[0], 256 + k
            merges.append((a, b))
            for toks, _ in words:
                i = 0
                while i < len(toks) - 1:
                    if toks[i] == a and toks[i + 1] == b:
                        toks[i:i + 2] = [new]
                    i += 1
        return cls(merges)

    def _encode_word(self, word):
        toks = self._cache.get(word)
        if toks is None:
            toks = list(word.encode("utf-8"))
            while len(toks) > 1:
                ranked = [(self.rank.get(p, len(self.rank)), i) for i, p in enumerate(zip(toks, toks[1:]))]
                r, i = min(ranked)
                if r == len(self.rank):
                    break
                toks[i:i + 2] = [256 + r]
            self._cache[word] = toks
        return toks

    def encode(self, text):
        out = []
        for w in WORD.findall(text):
            out.extend(self._encode_word(w))
        return out

    def decode(self, ids):
        return b"".join(self.vocab[i] for i in ids if i < len(self.vocab)).decode("utf-8", "replace")


def windows_of(ids, length, pad):
    """ids cut into windows of length tokens, the last one padded with pad."""
    out = []
    for start in range(0, len(ids), length):
        w = ids[start:start + length]
        out.append(w + [pad] * (length - len(w)))
    return out


# ---------------------------------------------------------------------------------------------
# 4. Training: a tiny language model, in 2 processes.

class TinyLM(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, vocab)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


class Numbered(Dataset):
    """A dataset's samples with the number of the window each one is (to check coverage)."""

    def __init__(self, ds, numbers):
        self.ds, self.numbers = ds, numbers

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        return self.numbers[i], self.ds[i]


def example_number(path):
    return int(re.search(r"example_(\d+)\.npy$", path).group(1))


def rendezvous():
    """Where the ranks meet: a file (torch's FileStore), not a TCP port picked in advance, which
    another program may take before rank 0 binds it."""
    return "file://" + os.path.join(tempfile.mkdtemp(prefix="loom-rendezvous-"), "store")


def run_rank(rank, world, init_method, args, vocab, pad, windows, results):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    torch.manual_seed(args.seed)
    tokenized, shards = os.path.join(args.root, "tokenized"), os.path.join(args.root, "shards")
    n = len(windows)
    B = args.batch_size

    # The samplers are made first, so that each dataset knows the order it will be read in.
    # DistributedSampler needs only the number of samples (we wrote n windows).
    file_sampler = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    shard_sampler = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    files = loom.torch.FileDataset(tokenized, "*.npy", decode=loom.torch.decode_npy,
                                   sampler=file_sampler, batch_size=B)
    records = loom.torch.ShardDataset(shards, decode=loom.torch.decode_npy,
                                      sampler=shard_sampler, batch_size=B)
    if len(files) != n or len(records) != n:
        raise RuntimeError("rank %d: %d files and %d records, expected %d each" % (rank, len(files), len(records), n))
    sources = {
        "files": (Numbered(files, [example_number(p) for p in files.files]), file_sampler),
        "shards": (Numbered(records, list(range(n))), shard_sampler),  # written in window order
    }

    model = nn.parallel.DistributedDataParallel(TinyLM(vocab, args.dim))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    lossf = nn.CrossEntropyLoss(ignore_index=pad)
    reference = torch.from_numpy(windows)
    losses, report = [], []
    for epoch in range(args.epochs):
        kind = "files" if epoch % 2 == 0 else "shards"
        ds, sampler = sources[kind]
        sampler.set_epoch(epoch)
        loader = DataLoader(ds, batch_size=B, sampler=sampler, num_workers=2, timeout=120)
        seen, bad, t0, steps = [], 0, time.time(), 0
        for ids, batch in loader:
            batch = batch.long()
            bad += int((batch != reference[ids].long()).any(dim=1).sum())
            seen.extend(ids.tolist())
            logits = model(batch[:, :-1])
            loss = lossf(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            mean = float(mean) / world
            losses.append(mean)
            steps += 1
            if rank == 0 and (steps % args.log_every == 0 or steps == 1):
                print("  epoch %d (%s) step %3d  loss %.3f" % (epoch, kind, steps, mean), flush=True)
        seconds = time.time() - t0
        everyone = [None] * world
        dist.all_gather_object(everyone, {"seen": seen, "bad": bad})
        if rank == 0:
            all_seen = [i for r in everyone for i in r["seen"]]
            report.append({"epoch": epoch, "source": kind, "steps": steps, "seconds": seconds,
                           "seen": len(all_seen), "distinct": len(set(all_seen)),
                           "missing": sorted(set(range(n)) - set(all_seen))[:10],
                           "unexpected": sorted(set(all_seen) - set(range(n)))[:10],
                           "expected_total": len(sampler) * world,
                           "wrong_content": sum(r["bad"] for r in everyone),
                           "prefetch": files.prefetch if kind == "files" else records.prefetch})
            print("  epoch %d (%s): %d steps in %.1f s, %d samples read by %d ranks (%d distinct of %d)"
                  % (epoch, kind, steps, seconds, len(all_seen), world, len(set(all_seen)), n), flush=True)
    if rank == 0:
        results.put({"losses": losses, "epochs": report})
    dist.barrier()
    dist.destroy_process_group()
    # The rank's work is done and its results are handed over. Leave without tearing down the
    # gloo process group DDP still holds: torch 1.13 (Debian 12's) can deadlock there, its
    # destructor joining a gloo thread that waits for the interpreter lock the destructor's
    # caller holds (a tensor with a Python object freed on that thread); seen about once in ten
    # runs on a loaded machine. Nothing is lost: nothing of this process is left to write.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ---------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="a directory on a Loom mount (made if missing)")
    ap.add_argument("--jsonl", help="a JSONL corpus of {\"text\": ...} lines (default: a synthetic one)")
    ap.add_argument("--lines", type=int, default=2000, help="lines of the synthetic corpus (default 2000)")
    ap.add_argument("--merges", type=int, default=300, help="BPE merges (default 300)")
    ap.add_argument("--window", type=int, default=64, help="tokens per training window (default 64)")
    ap.add_argument("--batch-size", type=int, default=16, help="per rank (default 16)")
    ap.add_argument("--epochs", type=int, default=2, help="even ones read the .npy files, odd ones the shards (default 2)")
    ap.add_argument("--shard-records", type=int, default=1000, help="windows per shard (default 1000)")
    ap.add_argument("--dim", type=int, default=32, help="model width (default 32)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--world", type=int, default=2, help="training processes (default 2)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    args.root = os.path.abspath(args.root)

    if loom.mount_of(args.root) is None:
        sys.exit("%s is not on a Loom mount" % args.root)
    os.makedirs(args.root, exist_ok=True)
    fs = loom.connect(args.root)
    print("Loom file system %r (MDS %s), working in %s" % (fs.fsname, fs.mds, args.root))

    # 1. The corpus.
    t0 = time.time()
    if args.jsonl:
        corpus = args.jsonl
    else:
        corpus = os.path.join(args.root, "data.jsonl")
        write_corpus(corpus, args.lines, args.seed)
    texts = read_corpus(corpus)
    print("1. corpus %s: %d lines, %d bytes (%.2f s)"
          % (corpus, len(texts), os.path.getsize(corpus), time.time() - t0))
    print("   e.g. %r" % texts[0][:100])

    # 2. The tokenizer.
    t0 = time.time()
    bpe = ByteBPE.train(texts, args.merges)
    encoded = [bpe.encode(t) for t in texts]
    n_tokens = sum(len(e) for e in encoded)
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    print("2. byte-level BPE: %d merges learned, vocabulary %d (+1 pad), %d tokens (%.2f bytes/token) (%.2f s)"
          % (len(bpe.merges), len(bpe.vocab), n_tokens, n_bytes / max(n_tokens, 1), time.time() - t0))
    print("   e.g. %s" % " | ".join(repr(bpe.decode([i])) for i in encoded[0][:12]))
    if bpe.decode(encoded[0]) != texts[0]:
        print("FAIL: the tokenizer does not give back the text it encoded")
        return 1

    # 3. Windows, saved two ways.
    windows = np.array([w for e in encoded for w in windows_of(e, args.window, bpe.pad)], dtype=np.int32)
    n = len(windows)
    tokenized = os.path.join(args.root, "tokenized")
    shards = os.path.join(args.root, "shards")
    for d in (tokenized, shards):
        shutil.rmtree(d, ignore_errors=True)
    t0 = time.time()
    os.makedirs(tokenized)
    for i, w in enumerate(windows):
        np.save(os.path.join(tokenized, f"example_{i}.npy"), w)
    t_files = time.time() - t0
    t0 = time.time()
    with loom.shard.ShardWriter(shards, prefix="tokens", max_records=args.shard_records, fs=fs) as w:
        for win in windows:
            w.write(win)
    t_shards = time.time() - t0
    print("3. %d windows of %d tokens:" % (n, args.window))
    print("   %s/example_{0..%d}.npy with np.save through the mount: %.2f s (%.0f files/s)"
          % (tokenized, n - 1, t_files, n / t_files))
    print("   %s: %d shards with loom.shard.ShardWriter through libloom: %.2f s"
          % (shards, len(w.paths), t_shards))
    back = np.load(os.path.join(tokenized, "example_%d.npy" % (n - 1)))
    if not np.array_equal(back, windows[-1]):
        print("FAIL: example_%d.npy does not hold what was saved" % (n - 1))
        return 1

    # 4. Training.
    per_rank = math.ceil(n / args.world)
    print("4. training a %d-dim GRU language model (vocabulary %d) in %d processes (gloo), "
          "batch %d per rank, %d steps per epoch, %d epochs"
          % (args.dim, bpe.size, args.world, args.batch_size, math.ceil(per_rank / args.batch_size), args.epochs))
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    t0 = time.time()
    init_method = rendezvous()
    try:
        mp.spawn(run_rank, args=(args.world, init_method, args, bpe.size, bpe.pad, windows, results),
                 nprocs=args.world, join=True)
    finally:
        shutil.rmtree(os.path.dirname(init_method[len("file://"):]), ignore_errors=True)
    res = results.get()
    print("   trained in %.1f s" % (time.time() - t0))

    # Checks.
    failures = []
    for e in res["epochs"]:
        if e["missing"] or e["unexpected"]:
            failures.append("epoch %d (%s): windows missing %s, unexpected %s"
                            % (e["epoch"], e["source"], e["missing"], e["unexpected"]))
        if e["seen"] != e["expected_total"]:
            failures.append("epoch %d (%s): %d samples read, the samplers give %d"
                            % (e["epoch"], e["source"], e["seen"], e["expected_total"]))
        if e["wrong_content"]:
            failures.append("epoch %d (%s): %d samples did not hold the tokens saved"
                            % (e["epoch"], e["source"], e["wrong_content"]))
    losses = res["losses"]
    if not losses or not all(math.isfinite(x) for x in losses):
        failures.append("the loss is not finite: %s" % losses[-5:])
    k = max(1, min(5, len(losses) // 4))
    first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
    print("checks:")
    for e in res["epochs"]:
        print("  epoch %d (%s): every one of the %d windows read, %d padding repeats, all as saved: %s"
              % (e["epoch"], e["source"], n, e["seen"] - e["distinct"],
                 "yes" if not (e["missing"] or e["unexpected"] or e["wrong_content"]) else "NO"))
    print("  loss: %.3f over the first %d steps, %.3f over the last %d (%s); finite: %s"
          % (first, k, last, k, "went down" if last < first else "did not go down",
             "yes" if all(math.isfinite(x) for x in losses) else "NO"))
    if failures:
        for f in failures:
            print("FAIL: " + f)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())

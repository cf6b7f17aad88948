"""One rank of the seeds' data-loading pattern, run as its own process (as on its own node):

    python3 torch_rank.py DATA_DIR RANK WORLD OUT_JSON

The Dataset is the seeds' TokenizedDataset (os.listdir of the directory, np.load per example); a
DistributedSampler(num_replicas=WORLD, rank=RANK) picks this rank's share (no process group:
both are passed explicitly); DataLoader(num_workers=2, batch_size=8, collate_fn=pad) loads it.
Writes to OUT_JSON, per example, its file name, length and the sha256 of its tokens as the
padded batch holds them, plus what it checked on each batch."""

import hashlib
import json
import os
import sys

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

PAD = 0


class TokenizedDataset(Dataset):
    def __init__(self, data_dir):
        self.files = [os.path.join(data_dir, f) for f in os.listdir(data_dir)]

    def __len__(self):
        return len(self.files)

    def __getitem__(self, idx):
        path = self.files[idx]
        return os.path.basename(path), np.load(path)


def pad(batch):
    names = [name for name, _ in batch]
    lengths = torch.tensor([len(a) for _, a in batch])
    out = torch.full((len(batch), int(lengths.max())), PAD, dtype=torch.int32)
    for k, (_, a) in enumerate(batch):
        out[k, :len(a)] = torch.from_numpy(a)
    return names, lengths, out


def main():
    data_dir, rank, world, out_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    torch.manual_seed(0)
    ds = TokenizedDataset(data_dir)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=1234)
    sampler.set_epoch(0)
    loader = DataLoader(ds, batch_size=8, sampler=sampler, num_workers=2, collate_fn=pad,
                        timeout=60, persistent_workers=False)
    seen, problems = [], []
    for names, lengths, batch in loader:
        if batch.dtype != torch.int32 or batch.dim() != 2 or batch.shape[0] != len(names) or len(names) > 8:
            problems.append("batch of shape %s, dtype %s for %d names" % (tuple(batch.shape), batch.dtype, len(names)))
        for k, name in enumerate(names):
            n = int(lengths[k])
            row = batch[k]
            if bool((row[n:] != PAD).any()):
                problems.append("%s: padding after its %d tokens is not all %d" % (name, n, PAD))
            seen.append([name, n, hashlib.sha256(row[:n].numpy().tobytes()).hexdigest()])
    with open(out_path, "w") as f:
        json.dump({"rank": rank, "files": len(ds), "sampler_len": len(sampler), "seen": seen,
                   "problems": problems}, f)


if __name__ == "__main__":
    main()

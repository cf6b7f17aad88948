"""Reads a dataset of samples that name themselves (sample i is np.full(16, i)) in 2 ranks of
torch.distributed (gloo) for 2 epochs, each with DistributedSampler and DataLoader workers, and
prints one JSON line per rank and epoch: the samples seen, and each worker's prefetch figures.

    ddp_read.py KIND ROOT WORKERS PREFETCH_BYTES [persistent]    (KIND: files or shards)
"""

import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, DistributedSampler

import loom.torch as lt

BATCH = 4


def make_dataset(kind, root, prefetch_bytes):
    if kind == "files":
        cls, args = lt.FileDataset, (root, "*.npy")
    else:
        cls, args = lt.ShardDataset, (root,)
    return cls(*args, decode=lt.decode_npy, prefetch_bytes=prefetch_bytes, prefetch_threads=4)


class Probe(torch.utils.data.Dataset):
    """The dataset's sample with this worker's prefetch figures beside it."""

    def __init__(self, inner):
        self.inner = inner

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, i):
        x = self.inner[i]
        st = self.inner.prefetch_stats() or {}
        info = torch.utils.data.get_worker_info()
        return (x, info.id if info else -1, st.get("peak_bytes", 0), st.get("hits", 0), st.get("misses", 0),
                st.get("planned", 0))


def rank_main(rank, kind, root, workers, prefetch_bytes, persistent, init_method):
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=2)
    ds = make_dataset(kind, root, prefetch_bytes)
    sampler = DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True, seed=7)
    ds.set_sampler(sampler, BATCH)
    loader = DataLoader(Probe(ds), batch_size=BATCH, sampler=sampler, num_workers=workers,
                        persistent_workers=persistent)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        seen, per_worker = [], {}
        for x, wid, peak, hits, misses, planned in loader:
            ids = x[:, 0].tolist()
            assert all((row == row[0]).all() for row in x), "a sample holds another's bytes"
            seen.extend(ids)
            for k in range(len(ids)):
                w = int(wid[k])
                cur = per_worker.setdefault(w, {"peak": 0, "hits": 0, "misses": 0, "planned": 0})
                cur["peak"] = max(cur["peak"], int(peak[k]))
                cur["hits"] = max(cur["hits"], int(hits[k]))
                cur["misses"] = max(cur["misses"], int(misses[k]))
                cur["planned"] = max(cur["planned"], int(planned[k]))
        print(json.dumps({"rank": rank, "epoch": epoch, "seen": seen, "expected": list(sampler),
                          "workers": per_worker}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def rendezvous():
    """Where the ranks meet: a file (torch's FileStore), not a TCP port picked in advance, which
    another program may take before rank 0 binds it."""
    return "file://" + os.path.join(tempfile.mkdtemp(prefix="loom-rendezvous-"), "store")


if __name__ == "__main__":
    kind, root, workers, prefetch_bytes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    persistent = len(sys.argv) > 5 and sys.argv[5] == "persistent"
    init_method = rendezvous()
    try:
        mp.spawn(rank_main, args=(kind, root, workers, prefetch_bytes, persistent, init_method), nprocs=2,
                 join=True)
    finally:
        shutil.rmtree(os.path.dirname(init_method[len("file://"):]), ignore_errors=True)

"""Reads a FileDataset of samples that name themselves (sample i is np.full(16, i)) for 2 epochs
through a DataLoader as training code builds one, and prints a JSON line per epoch: the samples
in the order the loop got them, and each worker's prefetch figures (hits, misses, planned, peak).

    loader_read.py ROOT LOADER WORKERS SAMPLER [persistent] [prefetch_bytes=N]
    LOADER: loom (loom.torch.DataLoader) or torch (torch.utils.data.DataLoader)
    SAMPLER: shuffle (shuffle=True), seeded (shuffle=True with a seeded generator), distributed
    (DistributedSampler, 2 replicas, this is rank 0, set_epoch through loader.sampler),
    batches (a BatchSampler over a RandomSampler, given as batch_sampler=), sequential (none)
"""

import json
import sys
import warnings

import torch
import torch.utils.data as tud

import loom.torch as lt

BATCH = 4


class Probed(lt.FileDataset):
    """The sample, with this worker's prefetch figures beside it."""

    def __getitem__(self, i):
        x = super().__getitem__(i)
        st = self.prefetch_stats() or {}
        info = tud.get_worker_info()
        return (x, info.id if info else -1, st.get("hits", 0), st.get("misses", 0),
                st.get("planned", 0), st.get("peak_bytes", 0))


def main():
    root, which, workers, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    extra = sys.argv[5:]
    persistent = "persistent" in extra
    pbytes = next((int(a.split("=")[1]) for a in extra if a.startswith("prefetch_bytes=")), 256 << 20)
    warnings.simplefilter("always")
    ds = Probed(root, "*.npy", decode=lt.decode_npy, prefetch_bytes=pbytes, prefetch_threads=4)
    Loader = lt.DataLoader if which == "loom" else tud.DataLoader
    kw = dict(num_workers=workers, persistent_workers=persistent and workers > 0)
    if kind == "shuffle":
        loader = Loader(ds, batch_size=BATCH, shuffle=True, **kw)
    elif kind == "seeded":
        loader = Loader(ds, batch_size=BATCH, shuffle=True, generator=torch.Generator().manual_seed(5), **kw)
    elif kind == "distributed":
        loader = Loader(ds, batch_size=BATCH, sampler=tud.DistributedSampler(ds, 2, 0, seed=3), **kw)
    elif kind == "batches":
        bs = tud.BatchSampler(tud.RandomSampler(ds), BATCH, drop_last=True)
        loader = Loader(ds, batch_sampler=bs, **kw)
    else:
        loader = Loader(ds, batch_size=BATCH, **kw)
    for epoch in range(2):
        if kind == "distributed":
            loader.sampler.set_epoch(epoch)
        seen, per_worker = [], {}
        for x, wid, hits, misses, planned, peak in loader:
            ids = x[:, 0].tolist()
            assert all((row == row[0]).all() for row in x), "a sample holds another's bytes"
            seen.extend(ids)
            for k in range(len(ids)):
                cur = per_worker.setdefault(int(wid[k]), {"hits": 0, "misses": 0, "planned": 0, "peak": 0})
                for name, v in (("hits", hits), ("misses", misses), ("planned", planned), ("peak", peak)):
                    cur[name] = max(cur[name], int(v[k]))
        print(json.dumps({"epoch": epoch, "seen": seen, "workers": per_worker}), flush=True)


if __name__ == "__main__":
    main()

"""PyTorch datasets over Loom: FileDataset (a file per sample) and ShardDataset (record shards).

Both read through libloom when their root is on a Loom mount (or fs= is given), and through the
kernel otherwise (native=False forces that), so the same code runs on a local folder. Both work
with DistributedSampler and DataLoader(num_workers>0): each worker connects on its own.

Epoch-aware prefetch (native only, on by default): the dataset knows the order it will be asked
for samples in, and has libloom read them ahead, many at once from every server, in bounded
memory (prefetch_bytes per process). The order comes from, in turn:
- dataset.plan(indices), called before the epoch's DataLoader iterator starts;
- the sampler given as sampler=, if it gives the same order each time it is iterated in an
  epoch (DistributedSampler, SequentialSampler; call its set_epoch as usual);
- else 0..len-1 (DataLoader's default SequentialSampler).
In a DataLoader worker, the dataset reads ahead only the batches that worker is given (batch i
goes to worker i mod num_workers, as DataLoader hands them out), so batch_size= must be the
DataLoader's. A sample asked for out of that order is read at once, without prefetch; the
prefetcher then goes on after it. With persistent_workers=True a worker never sees set_epoch
(it keeps the sampler it started with), so when its plan is used up it plans the next epoch
itself (epoch + 1), which is right when set_epoch is called once per epoch, in order.

A sampler made from the dataset (DistributedSampler(dataset)) is given after it with
dataset.set_sampler(sampler, batch_size).
"""

import bisect
import io
import os

import torch
import torch.utils.data as tud

from ._storage import storage_for
from .shard import ShardSet

__all__ = ["FileDataset", "ShardDataset", "decode_npy", "decode_torch"]


def decode_npy(data):
    """The numpy array in an .npy file's bytes (np.load)."""
    import numpy as np
    return np.load(io.BytesIO(data), allow_pickle=False)


def decode_torch(data):
    """The object torch.save wrote."""
    return torch.load(io.BytesIO(data))


class _ProcessPlan:
    """One process's read-ahead: the positions of its plan, and the prefetcher reading them."""

    def __init__(self, order, prefetcher, epoch):
        self.order = order
        self.pf = prefetcher
        self.epoch = epoch
        self.cursor = 0
        self.hits = 0            # samples found in the plan
        self.misses = 0          # samples asked for out of it
        self.misses_in_row = 0
        self.positions = {}
        for pos, idx in enumerate(order):
            self.positions.setdefault(idx, []).append(pos)

    def find(self, idx):
        """The first position of idx at or after the cursor, or None."""
        where = self.positions.get(idx)
        if not where:
            return None
        k = bisect.bisect_left(where, self.cursor)
        return where[k] if k < len(where) else None

    def close(self):
        if self.pf is not None:
            self.pf.close()
            self.pf = None


class _PlannedDataset(tud.Dataset):
    def __init__(self, storage, decode, prefetch, prefetch_bytes, prefetch_threads, sampler,
                 batch_size):
        self.storage = storage
        self.decode = decode
        self.prefetch = storage.native if prefetch is None else bool(prefetch)
        if self.prefetch and not storage.native:
            raise ValueError("prefetch needs the native path (a root on a Loom mount, or fs=)")
        self.prefetch_bytes = prefetch_bytes
        self.prefetch_threads = prefetch_threads
        self.sampler = sampler
        self.batch_size = max(1, int(batch_size))
        self._order = None
        self._plan = None
        self._plan_pid = None

    # What a subclass says about item i: what to prefetch, and how to read it without.
    def _item(self, i):
        raise NotImplementedError

    def _read_direct(self, i):
        raise NotImplementedError

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_plan"] = None
        state["_plan_pid"] = None
        return state

    def set_sampler(self, sampler, batch_size=None):
        """The sampler (and DataLoader batch size) whose order prefetch follows, for a sampler
        made from the dataset (DistributedSampler(dataset)) after it."""
        self.sampler = sampler
        if batch_size is not None:
            self.batch_size = max(1, int(batch_size))
        self._drop_plan()

    def plan(self, indices):
        """Tells the dataset the order the next epoch reads in (before iterating it)."""
        self._order = [int(i) for i in indices]
        self._drop_plan()

    def _drop_plan(self):
        if self._plan is not None and self._plan_pid == os.getpid():
            self._plan.close()
        self._plan = None

    def _epoch_order(self):
        if self._order is not None:
            return self._order
        if self.sampler is not None and (isinstance(self.sampler, (tud.DistributedSampler, tud.SequentialSampler))
                                         or hasattr(self.sampler, "set_epoch")):
            return [int(i) for i in self.sampler]
        return list(range(len(self)))

    def _this_worker(self, order):
        info = tud.get_worker_info()
        if info is None or info.num_workers <= 1:
            return order
        mine, step = [], self.batch_size * info.num_workers
        for start in range(info.id * self.batch_size, len(order), step):
            mine.extend(order[start:start + self.batch_size])
        return mine

    def _current_plan(self, replan=False):
        if self._plan_pid != os.getpid():
            self._plan, self._plan_pid = None, os.getpid()  # a forked worker: the parent's is not ours
        epoch = getattr(self.sampler, "epoch", None)
        if (replan and self._order is None and tud.get_worker_info() is not None and epoch is not None
                and self._plan is not None and epoch == self._plan.epoch and hasattr(self.sampler, "set_epoch")):
            # A persistent worker's sampler is the copy it got when it started, which set_epoch in
            # the main process never reaches: its next epoch is taken to be the one after.
            self.sampler.set_epoch(epoch + 1)
            epoch += 1
        if self._plan is not None and (replan or epoch != self._plan.epoch):
            self._drop_plan()
        if self._plan is None:
            order = self._this_worker(self._epoch_order())
            pf = None
            if order:
                pf = self.storage.prefetch([self._item(i) for i in order], max_bytes=self.prefetch_bytes,
                                           threads=self.prefetch_threads)
            self._plan = _ProcessPlan(order, pf, epoch)
        return self._plan

    def prefetch_stats(self):
        """This process's prefetcher's figures (see loom.Prefetcher.stats), with the samples
        found in the plan (hits) and asked for out of it (misses)."""
        p = self._plan if self._plan_pid == os.getpid() else None
        if p is None or p.pf is None:
            return None if p is None else {"hits": p.hits, "misses": p.misses, "planned": len(p.order)}
        st = p.pf.stats()
        st.update(max_bytes=self.prefetch_bytes, planned=len(p.order), hits=p.hits, misses=p.misses)
        return st

    def _read(self, i):
        if not self.prefetch:
            return self._read_direct(i)
        plan = self._current_plan()
        pos = plan.find(i)
        if pos is None and plan.cursor >= len(plan.order):
            plan = self._current_plan(replan=True)  # the next epoch, in the same process
            pos = plan.find(i)
        if pos is None or plan.pf is None:
            plan.misses += 1
            plan.misses_in_row += 1
            if plan.misses_in_row > 64:
                plan.close()  # this order is not the one being read: stop reading ahead
            return self._read_direct(i)
        plan.hits += 1
        plan.misses_in_row = 0
        plan.cursor = pos + 1
        return plan.pf.take(pos)

    def __getitem__(self, i):
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("sample %d of %d" % (i, len(self)))
        data = self._read(i)
        return self.decode(data) if self.decode is not None else data


class FileDataset(_PlannedDataset):
    """A sample per file: the files under root whose path relative to root matches pattern
    (sorted), each given to decode as bytes (decode_npy for .npy files).

    native: None reads through libloom when root is on a Loom mount, False through the kernel.
    prefetch: read ahead in the epoch's order (native only; on by default there).
    """

    def __init__(self, root, pattern="*", decode=None, *, recursive=False, native=None, fs=None,
                 prefetch=None, prefetch_bytes=256 << 20, prefetch_threads=16, sampler=None,
                 batch_size=1):
        storage = storage_for(root, native=native, fs=fs)
        super().__init__(storage, decode, prefetch, prefetch_bytes, prefetch_threads, sampler,
                         batch_size)
        self.root = os.fspath(root)
        self.files = storage.glob(self.root, pattern, recursive)

    def __len__(self):
        return len(self.files)

    def _item(self, i):
        return self.files[i]

    def _read_direct(self, i):
        return self.storage.read_file(self.files[i])


class ShardDataset(_PlannedDataset):
    """A sample per record of the shards (loom.shard) under root matching pattern, or of the
    shard paths given as a list, numbered across the shards in order."""

    def __init__(self, shards, pattern="*.loomshard", decode=None, *, native=None, fs=None,
                 prefetch=None, prefetch_bytes=256 << 20, prefetch_threads=16, sampler=None,
                 batch_size=1):
        if isinstance(shards, (str, bytes, os.PathLike)):
            root = os.fspath(shards)
            storage = storage_for(root, native=native, fs=fs)
            paths = storage.glob(root, pattern)
        else:
            paths = [os.fspath(p) for p in shards]
            storage = storage_for(paths[0] if paths else ".", native=native, fs=fs)
        super().__init__(storage, decode, prefetch, prefetch_bytes, prefetch_threads, sampler,
                         batch_size)
        self.shards = ShardSet(paths, storage)

    def __len__(self):
        return len(self.shards)

    def _item(self, i):
        return self.shards.locate(i)

    def _read_direct(self, i):
        return self.shards.read(i)

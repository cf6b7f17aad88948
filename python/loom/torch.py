"""PyTorch datasets over Loom: FileDataset (a file per sample) and ShardDataset (record shards),
and DataLoader, torch's with the same arguments, which tells them each epoch's order.

Both read through libloom when their root is on a Loom mount (or fs= is given), and through the
kernel otherwise (native=False forces that), so the same code runs on a local folder. Both work
with DistributedSampler and DataLoader(num_workers>0): each worker connects on its own.

Epoch-aware prefetch (native only, on by default): the dataset knows the order it will be asked
for samples in, and has libloom read them ahead, many at once from every server, in bounded
memory (prefetch_bytes per process). The order comes from, in turn:
- loom.torch.DataLoader: at each epoch it draws the batches from the sampler the user gave (or
  shuffle=True's RandomSampler, a BatchSampler, a seeded generator: anything torch takes) before
  handing them out, and publishes them in shared memory, where every worker (forked or spawned,
  persistent or not) finds the batches it will be given: batch i goes to worker i mod
  num_workers, as torch hands them out;
- dataset.plan(indices), called before the epoch's iterator starts;
- the sampler given as sampler= (or set_sampler), if it gives the same order each time it is
  iterated in an epoch (DistributedSampler, SequentialSampler; call its set_epoch as usual);
  in a worker, the batches that worker is given (batch_size= must be the DataLoader's);
- else none: after 4 samples read in a row in 0..len-1's order (for this worker), the rest of
  that order is read ahead. A single ds[i] never starts an epoch's prefetch.
A sample asked for out of the order is read at once, without prefetch; the prefetcher then goes
on after it. A process whose prefetch misses more than half of 32 or more samples says so once
(a warning naming the fix). With persistent_workers=True and a sampler= given to the dataset, a
worker never sees set_epoch (it keeps the sampler it started with), so when its plan is used up
it plans the next epoch itself (epoch + 1); loom.torch.DataLoader needs none of that.
"""

import bisect
import errno
import io
import os
import warnings

import torch
import torch.utils.data as tud

from ._checkpoint import PendingSave, save, wait  # noqa: F401
from ._safetensors import load_safetensors, save_safetensors  # noqa: F401
from ._storage import storage_for
from .shard import ShardSet
from .tarshard import CHUNK as TAR_CHUNK, decode_sample, shard_paths, stream_samples

__all__ = ["DataLoader", "FileDataset", "PendingSave", "ShardDataset", "TarShardDataset",
           "decode_npy", "decode_sample",
           "decode_torch", "load_safetensors", "save", "save_safetensors", "wait"]

SEQUENTIAL_RUN = 4     # samples read in order before prefetch starts without a known order
WARN_AFTER = 32        # samples looked up before a low hit rate is worth a warning
MISSES_TO_STOP = 64    # misses in a row after which a plan is given up


def decode_npy(data):
    """The numpy array in an .npy file's bytes, as np.load gives it (allow_pickle=False); each
    distinct header is parsed once (loom._npy)."""
    from ._npy import load_npy_bytes
    return load_npy_bytes(data)


def decode_torch(data):
    """The object torch.save wrote."""
    return torch.load(io.BytesIO(data))


class _ProcessPlan:
    """One process's read-ahead: the positions of its plan, and the prefetcher reading them."""

    def __init__(self, order, prefetcher, epoch, armed=True):
        self.order = order
        self.pf = prefetcher
        self.base = 0            # the prefetcher's item 0 is order[base]
        self.epoch = epoch       # what the plan was made for: a sampler's epoch, or a loader's
        self.armed = armed       # False: no order is known; prefetch starts after a run in order
        self.seq = None          # what learns the order while not armed (_Sequence)
        self.cursor = 0
        self.hits = 0            # samples found in the plan
        self.misses = 0          # samples asked for out of it
        self.misses_in_row = 0
        self.no_room = False     # a prefetcher could not be had: read as asked, no misses counted
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


class _Sequence:
    """Learns, without being told, that a process reads 0..len-1 in torch's order for it: in the
    main process consecutive samples; in worker w of N, batches of B consecutive samples, each
    N * B after the one before (B learnt at the first jump). After SEQUENTIAL_RUN samples that
    fit, it predicts what follows."""

    def __init__(self):
        self.last = None
        self.batch = None   # B, once learnt
        self.run = 0        # samples read in the current batch (or run)
        self.count = 0      # samples that fit, in a row

    def see(self, i, n, workers):
        """Records sample i; the order that follows it if the reads so far fit, else None.
        False when i broke the pattern (a miss)."""
        last, b = self.last, self.batch
        if last is not None and i == last + 1 and (b is None or self.run < b):
            self.run += 1
        elif last is not None and workers > 1 and b is None and i == last + 1 + (workers - 1) * self.run:
            self.batch, self.run = self.run, 1
        elif last is not None and b is not None and self.run == b and i == last + 1 + (workers - 1) * b:
            self.run = 1
        else:
            self.last, self.batch, self.run, self.count = i, None, 1, 1
            return False
        self.last = i
        self.count += 1
        if self.count < SEQUENTIAL_RUN or (workers > 1 and self.batch is None):
            return None
        if workers <= 1:
            return list(range(i + 1, n))
        b = self.batch
        start = i - (self.run - 1)
        order = list(range(i + 1, min(start + b, n)))
        for s in range(start + workers * b, n, workers * b):
            order.extend(range(s, min(s + b, n)))
        return order


class _LoaderPlan:
    """Each epoch's batches as loom.torch.DataLoader drew them in the main process, in shared
    memory that its workers read: [generation, warned, batches, indices, offsets[batches + 1],
    indices...]. The main process writes it before it hands out the epoch's first batch; a
    worker rereads it when the generation changed."""

    GEN, WARNED, NBATCH, NIDX, HEADER = 0, 1, 2, 3, 4

    def __init__(self, capacity):
        self.t = torch.zeros(self.HEADER + capacity, dtype=torch.int64).share_memory_()

    def publish(self, batches):
        """False when the epoch does not fit (no prefetch then)."""
        t, h = self.t, self.HEADER
        flat = [i for b in batches for i in b]
        nb = len(batches)
        fits = nb + 1 + len(flat) <= len(t) - h
        if fits:
            offsets = torch.zeros(nb + 1, dtype=torch.int64)
            if nb:
                offsets[1:] = torch.cumsum(torch.tensor([len(b) for b in batches]), 0)
            t[h:h + nb + 1] = offsets
            t[h + nb + 1:h + nb + 1 + len(flat)] = torch.tensor(flat, dtype=torch.int64)
        t[self.NBATCH], t[self.NIDX] = (nb, len(flat)) if fits else (-1, 0)
        t[self.GEN] += 1   # last: a worker that sees it sees the rest
        return fits

    def generation(self):
        return int(self.t[self.GEN])

    def order_for(self, worker, workers):
        """The samples of the batches worker is given, in order (None: not published)."""
        t, h = self.t, self.HEADER
        nb = int(t[self.NBATCH])
        if nb < 0:
            return None
        offsets = t[h:h + nb + 1].tolist()
        idx = t[h + nb + 1:h + nb + 1 + int(t[self.NIDX])].tolist()
        mine = []
        for b in range(worker, nb, workers):
            mine.extend(idx[offsets[b]:offsets[b + 1]])
        return mine

    def claim_warning(self):
        """True for the first process that asks (one warning per loader, not per worker)."""
        if int(self.t[self.WARNED]):
            return False
        self.t[self.WARNED] = 1
        return True


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
        self._loader_plan = None  # a loom.torch.DataLoader's (_LoaderPlan)
        self._warned = False

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
        """The order this epoch reads in, as the dataset was told it; None if it was not."""
        if self._order is not None:
            return self._order
        if self.sampler is not None and (isinstance(self.sampler, (tud.DistributedSampler, tud.SequentialSampler))
                                         or hasattr(self.sampler, "set_epoch")):
            return [int(i) for i in self.sampler]
        return None

    def _this_worker(self, order):
        info = tud.get_worker_info()
        if info is None or info.num_workers <= 1:
            return order
        mine, step = [], self.batch_size * info.num_workers
        for start in range(info.id * self.batch_size, len(order), step):
            mine.extend(order[start:start + self.batch_size])
        return mine

    def _start(self, plan, at):
        """Has the prefetcher read plan.order from position at on."""
        rest = plan.order[at:]
        if rest:
            try:
                plan.pf = self.storage.prefetch([self._item(i) for i in rest],
                                                max_bytes=self.prefetch_bytes,
                                                threads=self.prefetch_threads)
            except OSError as e:
                if e.errno not in (errno.ENOMEM, errno.EMFILE, errno.EAGAIN):
                    raise
                # No room for a prefetcher (through a mount's door, the user's share of the
                # daemon's memory is taken): the samples are read as asked, which is correct.
                warnings.warn("loom.torch: no prefetch in this process: %s" % e, RuntimeWarning,
                              stacklevel=4)
                plan.pf, plan.no_room = None, True
            plan.base = at
        plan.armed = True

    def _new_plan(self, order, epoch):
        """A plan for order; with None (no order told), one that learns it (_Sequence)."""
        plan = _ProcessPlan(order if order is not None else [], None, epoch, order is not None)
        if order is not None:
            self._start(plan, 0)
        else:
            plan.seq = _Sequence()
        return plan

    def _current_plan(self, replan=False):
        if self._plan_pid != os.getpid():
            self._plan, self._plan_pid = None, os.getpid()  # a forked worker: the parent's is not ours
        lp = self._loader_plan
        if lp is not None and self._order is None and lp.generation() > 0:
            key = ("loader", lp.generation())
            if self._plan is None or self._plan.epoch != key:
                self._drop_plan()
                info = tud.get_worker_info()
                order = lp.order_for(info.id, info.num_workers) if info else lp.order_for(0, 1)
                self._plan = self._new_plan(order or [], key)
            return self._plan
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
            order = self._epoch_order()
            self._plan = self._new_plan(None if order is None else self._this_worker(order), epoch)
        return self._plan

    def _warn_if_missing(self, plan):
        total = plan.hits + plan.misses
        if self._warned or total < WARN_AFTER or plan.hits * 2 >= total:
            return
        self._warned = True
        if self._loader_plan is not None and not self._loader_plan.claim_warning():
            return
        warnings.warn(
            "loom.torch: %s's prefetch had only %d of the %d samples it was asked for in this "
            "process: they are read in an order it was not told. Read it with "
            "loom.torch.DataLoader (torch's DataLoader, same arguments), or tell it the sampler "
            "with dataset.set_sampler(sampler, batch_size) or the order with "
            "dataset.plan(indices), or turn it off with prefetch=False (docs/python.md, "
            "\"Epoch-aware prefetch\")"
            % (type(self).__name__, plan.hits, total), RuntimeWarning, stacklevel=4)

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
        # A plan used up is followed by the next epoch's, but a loader's (keyed by a tuple) is
        # replaced only when the loader publishes the next.
        if (pos is None and plan.armed and plan.cursor >= len(plan.order)
                and not isinstance(plan.epoch, tuple)):
            plan = self._current_plan(replan=True)  # the next epoch, in the same process
            pos = plan.find(i)
        if not plan.armed:
            # No order was told: reads that fit torch's order for this process start reading
            # ahead what follows; a read that breaks it counts as a miss (for the warning).
            info = tud.get_worker_info()
            ahead = plan.seq.see(i, len(self), info.num_workers if info else 1)
            if ahead is False:
                plan.misses += 1
                self._warn_if_missing(plan)
            elif ahead:
                learnt = _ProcessPlan(ahead, None, plan.epoch)
                learnt.hits, learnt.misses = plan.hits, plan.misses
                self._plan = learnt
                self._start(learnt, 0)
            return self._read_direct(i)
        if plan.no_room:
            return self._read_direct(i)
        if pos is None or plan.pf is None or pos < plan.base:
            plan.misses += 1
            plan.misses_in_row += 1
            if plan.misses_in_row > MISSES_TO_STOP:
                plan.close()  # this order is not the one being read: stop reading ahead
            self._warn_if_missing(plan)
            return self._read_direct(i)
        plan.hits += 1
        plan.misses_in_row = 0
        plan.cursor = pos + 1
        return plan.pf.take(pos - plan.base)

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


class _Replay(tud.Sampler):
    """The sampler (or batch sampler) the user gave, drawn whole when torch starts an epoch's
    iteration of it (at the moment torch itself would, so a seeded generator gives torch's own
    order), published to the workers, then replayed to torch exactly: the batches the workers
    read ahead are the batches they are given. Other attributes are the user's sampler's
    (loader.sampler.set_epoch(epoch) reaches a DistributedSampler)."""

    def __init__(self, source, batched, batch_size=None, drop_last=False):
        self.source = source
        self.batched = batched
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.plan = None      # the loader's _LoaderPlan

    def __iter__(self):
        if self.batched:
            drawn = batches = [[int(i) for i in b] for b in self.source]
        else:
            drawn = [int(i) for i in self.source]
            bs = self.batch_size
            if bs is None:
                batches = [[i] for i in drawn]
            else:
                batches = [drawn[k:k + bs] for k in range(0, len(drawn), bs)]
                if self.drop_last and batches and len(batches[-1]) < bs:
                    batches.pop()
        if self.plan is not None and not self.plan.publish(batches):
            warnings.warn("loom.torch.DataLoader: this epoch's order is longer than the room kept "
                          "for it (%d): no prefetch this epoch"
                          % (len(self.plan.t) - _LoaderPlan.HEADER), RuntimeWarning, stacklevel=2)
        return iter(drawn)

    def __len__(self):
        return len(self.source)

    def __getattr__(self, name):
        if name == "source" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.source, name)


class DataLoader(tud.DataLoader):
    """torch.utils.data.DataLoader, with the same arguments and behaviour, that tells a loom.torch
    dataset each epoch's order before its workers read: with shuffle=True, any sampler= (a
    RandomSampler with or without a seeded generator, DistributedSampler, your own) or
    batch_sampler=, each worker reads ahead exactly the batches it will be given. For any other
    dataset it is torch's DataLoader."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 drop_last=False, generator=None, **kwargs):
        self._replay = None
        if not (isinstance(dataset, _PlannedDataset) and dataset.prefetch):
            super().__init__(dataset, batch_size=batch_size, shuffle=shuffle, sampler=sampler,
                             batch_sampler=batch_sampler, drop_last=drop_last, generator=generator,
                             **kwargs)
            return
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            replay = _Replay(batch_sampler, batched=True)
            super().__init__(dataset, batch_sampler=replay, generator=generator, **kwargs)
        else:
            if sampler is not None and shuffle:
                raise ValueError("sampler option is mutually exclusive with shuffle")
            if sampler is None:
                sampler = (tud.RandomSampler(dataset, generator=generator) if shuffle
                           else tud.SequentialSampler(dataset))
            replay = _Replay(sampler, batched=False, batch_size=batch_size, drop_last=drop_last)
            super().__init__(dataset, batch_size=batch_size, sampler=replay, drop_last=drop_last,
                             generator=generator, **kwargs)
        samples = 0   # a batch sampler's batches are its own: the room is sized by the dataset
        if batch_sampler is None:
            try:
                samples = len(sampler)
            except TypeError:
                pass
        capacity = 2 * max(len(dataset), samples) + 2
        self._replay = replay
        replay.plan = _LoaderPlan(capacity)
        dataset._loader_plan = replay.plan
        dataset._drop_plan()


class TarShardDataset(tud.IterableDataset):
    """webdataset's tar shards (loom.tarshard) as an IterableDataset: each sample a dict of its
    fields, decoded by extension (decode_sample, as webdataset's .decode(); decode=None keeps
    bytes). shards: a directory (its files matching pattern, sorted), a brace pattern
    ("shard-{000000..000099}.tar") or a list. The shards are split between the ranks of
    torch.distributed and the DataLoader's workers (rank r, worker w of W take every
    (r * W + w)-th); shuffle_shards shuffles them each epoch (set_epoch; a persistent worker,
    which never sees it, takes each iteration for the next epoch) with seed. Each shard is
    read whole, in chunk-byte ranged reads: natively, libloom's prefetcher reads the chunks
    ahead (prefetch_bytes at most held per process)."""

    def __init__(self, shards, pattern="*.tar", decode=decode_sample, *, shuffle_shards=False,
                 seed=0, native=None, fs=None, prefetch=None, prefetch_bytes=256 << 20,
                 prefetch_threads=8, chunk=TAR_CHUNK):
        first = shards if isinstance(shards, (str, bytes, os.PathLike)) else (
            shards[0] if shards else ".")
        root = os.fsdecode(os.fspath(first))
        if "{" in root:
            root = os.path.dirname(root)
        self.storage = storage_for(root, native=native, fs=fs)
        self.paths = shard_paths(shards, pattern, self.storage)
        self.decode = decode
        self.shuffle_shards, self.seed, self.epoch = shuffle_shards, seed, 0
        self._last = None    # (self.epoch, the epoch this process last read) in this process
        self.prefetch = self.storage.native if prefetch is None else bool(prefetch)
        if self.prefetch and not self.storage.native:
            raise ValueError("prefetch needs the native path (a root on a Loom mount, or fs=)")
        self.prefetch_bytes, self.prefetch_threads, self.chunk = prefetch_bytes, prefetch_threads, chunk

    def set_epoch(self, epoch):
        self.epoch = epoch

    def _next_epoch(self):
        """The epoch this iteration reads: set_epoch's, or, when set_epoch was not called since
        this process's last iteration (a persistent worker never sees it), the one after."""
        epoch = self.epoch
        if self._last is not None and self._last[0] == self.epoch:
            epoch = self._last[1] + 1
        self._last = (self.epoch, epoch)
        return epoch

    def my_shards(self, epoch=None):
        """This process's shards for an epoch (set_epoch's by default)."""
        import random
        import torch.distributed as dist
        paths = list(self.paths)
        if self.shuffle_shards:
            random.Random(self.seed + (self.epoch if epoch is None else epoch)).shuffle(paths)
        rank, world = 0, 1
        if dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(), dist.get_world_size()
        info = tud.get_worker_info()
        w, nw = (info.id, info.num_workers) if info else (0, 1)
        return paths[rank * nw + w::world * nw]

    def __iter__(self):
        for sample in stream_samples(self.storage, self.my_shards(self._next_epoch()), self.chunk,
                                     self.prefetch_bytes if self.prefetch else 0,
                                     self.prefetch_threads):
            yield self.decode(sample) if self.decode is not None else sample

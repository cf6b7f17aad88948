"""loom.torch's datasets with PyTorch as training code uses them: DistributedSampler over 2 ranks
(gloo), DataLoader workers, epoch-aware prefetch within its memory bound, and the same samples
whichever way they are read (native, native with prefetch, through the mount, local folder)."""

import json
import os
import subprocess

import numpy as np
import pytest

from pyloom import child_env, connect, pylib

pytestmark = pylib

HERE = os.path.dirname(os.path.abspath(__file__))
DDP_READ = os.path.join(HERE, "pyprograms", "ddp_read.py")
N = 50


def make_files(d, n=N):
    os.makedirs(d, exist_ok=True)
    for i in range(n):
        np.save(os.path.join(d, "example_%03d.npy" % i), np.full(16, i, dtype=np.int64))


def run_ddp(cluster, kind, root, workers, prefetch_bytes, persistent=False):
    p = subprocess.run(["/usr/bin/python3", DDP_READ, kind, root, str(workers), str(prefetch_bytes)]
                       + (["persistent"] if persistent else []),
                       capture_output=True, text=True, env=child_env(cluster), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def check_epochs(results, n, prefetch_bytes=None):
    assert len(results) == 4, results  # 2 ranks x 2 epochs
    orders = {}
    for epoch in (0, 1):
        rows = [r for r in results if r["epoch"] == epoch]
        assert sorted(r["rank"] for r in rows) == [0, 1]
        seen = set()
        for r in rows:
            # Each rank got exactly the samples its sampler named, whichever worker read them.
            assert sorted(r["seen"]) == sorted(r["expected"])
            seen |= set(r["seen"])
            orders[(epoch, r["rank"])] = r["expected"]
            if prefetch_bytes is not None:
                assert set(r["workers"]) == {"0", "1"}  # JSON keys
                for w, st in r["workers"].items():
                    assert st["misses"] == 0, (epoch, r["rank"], w, st)  # the plan was the order read
                    assert st["hits"] > 0 and st["planned"] > 0, st
                    assert 0 < st["peak"] <= prefetch_bytes, st
        assert seen == set(range(n))
    assert orders[(0, 0)] != orders[(1, 0)], "set_epoch did not reshuffle"


def test_file_dataset_in_two_ranks_with_workers_and_prefetch(cluster):
    mnt = cluster.mount()
    make_files(os.path.join(mnt, "tok"))
    sample = os.path.getsize(os.path.join(mnt, "tok", "example_000.npy"))
    bound = 3 * sample  # room for three samples ahead per worker
    check_epochs(run_ddp(cluster, "files", os.path.join(mnt, "tok"), 2, bound), N, bound)


def test_shard_dataset_in_two_ranks_with_workers_and_prefetch(cluster):
    from loom.shard import ShardWriter
    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    with ShardWriter(os.path.join(mnt, "shards"), max_records=16, fs=fs) as w:
        for i in range(N):
            w.write(np.full(16, i, dtype=np.int64))
    assert len(w.paths) == 4
    # Persistent workers never see set_epoch: each plans the next epoch itself.
    check_epochs(run_ddp(cluster, "shards", os.path.join(mnt, "shards"), 2, 1024, persistent=True), N, 1024)


def test_every_path_gives_the_same_samples(cluster, tmp_path, monkeypatch):
    import loom.torch as lt
    from torch.utils.data import DistributedSampler
    mnt = cluster.mount()
    monkeypatch.setenv("LOOM_KEY_FILE", cluster.key)  # for the connection found from the mount
    make_files(os.path.join(mnt, "tok"))
    make_files(str(tmp_path))
    fs = connect(cluster, mnt)
    root = os.path.join(mnt, "tok")
    local = lt.FileDataset(str(tmp_path), "*.npy", lt.decode_npy)
    mount = lt.FileDataset(root, "*.npy", lt.decode_npy, native=False)
    native = lt.FileDataset(root, "*.npy", lt.decode_npy, fs=fs, prefetch=False)
    assert not local.storage.native and not mount.storage.native and native.storage.native
    sampler = DistributedSampler(range(N), num_replicas=1, rank=0, shuffle=True, seed=1)
    ahead = lt.FileDataset(root, "*.npy", lt.decode_npy, sampler=sampler, prefetch_bytes=4096)
    assert ahead.storage.native and ahead.prefetch  # found from the mount, prefetching by default
    assert len(local) == len(mount) == len(native) == len(ahead) == N
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        for i in sampler:
            expect = np.full(16, i, dtype=np.int64)
            for ds in (local, mount, native, ahead):
                assert np.array_equal(ds[i], expect)
        st = ahead.prefetch_stats()
        # In one process (num_workers=0): the new epoch was planned again after set_epoch.
        assert st["misses"] == 0 and st["hits"] == N, st
        assert st["peak_bytes"] <= 4096, st
    # An order the dataset was told with plan(), read out of it: right bytes, then misses.
    ahead.plan([5, 4, 3])
    assert [int(ahead[i][0]) for i in (5, 4, 3, 9)] == [5, 4, 3, 9]
    assert ahead.prefetch_stats()["misses"] == 1
    with pytest.raises(IndexError):
        ahead[N]
    assert int(ahead[-1][0]) == N - 1


def test_native_needs_loom_and_prefetch_needs_native(cluster, tmp_path):
    import loom.torch as lt
    make_files(str(tmp_path), 3)
    with pytest.raises(OSError):
        lt.FileDataset(str(tmp_path), "*.npy", native=True)
    with pytest.raises(ValueError):
        lt.FileDataset(str(tmp_path), "*.npy", prefetch=True)
    assert lt.FileDataset(str(tmp_path), "*.npy")[2] == open(os.path.join(tmp_path, "example_002.npy"), "rb").read()


# ---- the DataLoader training code already has ---------------------------------------------

LOADER_READ = os.path.join(HERE, "pyprograms", "loader_read.py")


def run_loader(cluster, root, *args):
    p = subprocess.run(["/usr/bin/python3", LOADER_READ, root, *map(str, args)],
                       capture_output=True, text=True, env=child_env(cluster), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")], p.stderr


@pytest.mark.parametrize("workers,sampler,extra", [
    (2, "shuffle", ""), (3, "shuffle", "persistent"), (2, "seeded", ""),
    (2, "distributed", "persistent"), (0, "batches", ""), (2, "batches", "")])
def test_loom_dataloader_reads_ahead_the_true_order_of_any_sampler(cluster, workers, sampler, extra):
    mnt = cluster.mount()
    root = os.path.join(mnt, "tok")
    make_files(root)
    bound = 3 * os.path.getsize(os.path.join(root, "example_000.npy"))
    epochs, _ = run_loader(cluster, root, "loom", workers, sampler, extra, "prefetch_bytes=%d" % bound)
    assert [e["epoch"] for e in epochs] == [0, 1]
    n = 25 if sampler == "distributed" else 48 if sampler == "batches" else N
    for e in epochs:
        assert len(e["seen"]) == n and len(set(e["seen"])) == n, e["seen"]
        assert set(e["workers"]) == ({"-1"} if workers == 0 else {str(w) for w in range(workers)})
        for w, st in e["workers"].items():
            # Each worker read ahead exactly the samples it was given: every one a hit.
            assert st["misses"] == 0 and st["hits"] == st["planned"] > 0, (e["epoch"], w, st)
            assert 0 < st["peak"] <= bound, st
        assert sum(st["planned"] for st in e["workers"].values()) == n
    assert epochs[0]["seen"] != epochs[1]["seen"], "the second epoch was not shuffled again"
    if sampler == "seeded":   # the order torch's own DataLoader gives with the same generator
        theirs, _ = run_loader(cluster, root, "torch", workers, sampler)
        assert [e["seen"] for e in theirs] == [e["seen"] for e in epochs]


def test_torch_dataloader_in_order_is_learnt_and_shuffled_is_warned_about(cluster):
    mnt = cluster.mount()
    root = os.path.join(mnt, "tok")
    make_files(root, 150)
    # torch's DataLoader, no sampler: each worker learns its batches (B=4 of N=2) and reads ahead.
    epochs, _ = run_loader(cluster, root, "torch", 2, "sequential")
    for e in epochs:
        assert e["seen"] == list(range(150))
        for w, st in e["workers"].items():
            assert st["misses"] == 1 and st["hits"] >= 70 - 6, (w, st)  # learnt in its first batch
    # torch's DataLoader with shuffle=True: nothing to learn, nothing read ahead, and a warning
    # that names the fix (once per process: each worker and the main process are one).
    epochs, err = run_loader(cluster, root, "torch", 0, "shuffle")
    assert all(st["hits"] == 0 and st["planned"] == 0 for e in epochs for st in e["workers"].values())
    assert err.count("RuntimeWarning: loom.torch: Probed's prefetch had only 0 of the 32 samples it was "
                     "asked for in this process") == 1, err
    assert "Read it with loom.torch.DataLoader (torch's DataLoader, same arguments)" in err


def test_a_single_sample_starts_no_prefetch_and_a_run_in_order_does(cluster, monkeypatch):
    import warnings
    import loom.torch as lt
    mnt = cluster.mount()
    monkeypatch.setenv("LOOM_KEY_FILE", cluster.key)
    root = os.path.join(mnt, "tok")
    make_files(root)
    ds = lt.FileDataset(root, "*.npy", lt.decode_npy)
    assert ds.prefetch
    assert int(ds[7][0]) == 7
    assert ds.prefetch_stats() == {"hits": 0, "misses": 1, "planned": 0}   # nothing read ahead
    for i in (20, 21, 22, 23):          # four in a row: the rest of the epoch is read ahead
        assert int(ds[i][0]) == i
    assert [int(ds[i][0]) for i in range(24, N)] == list(range(24, N))
    st = ds.prefetch_stats()
    assert (st["planned"], st["hits"], st["misses"]) == (N - 24, N - 24, 2), st
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds2 = lt.FileDataset(root, "*.npy", lt.decode_npy)
        for i in np.random.default_rng(3).permutation(N)[:40]:
            assert int(ds2[int(i)][0]) == i
    assert [str(w.message)[:60] for w in caught] == [
        "loom.torch: FileDataset's prefetch had only 0 of the 32 samp"]


def test_decode_npy_gives_what_np_load_gives_and_refuses_what_it_refuses():
    """decode_npy parses each distinct header once (loom._npy): the arrays, their flags and the
    errors must be np.load's, for every layout and version, the second time as the first."""
    import io
    import loom.torch as lt

    def npy(a, version=None):
        b = io.BytesIO()
        np.lib.format.write_array(b, a, version=version, allow_pickle=True)
        return b.getvalue()

    cases = [np.arange(12, dtype="<i4").reshape(3, 4), np.asfortranarray(np.arange(12.).reshape(3, 4)),
             np.array(3.5), np.zeros((0, 5), ">f8"), np.array([True, False]),
             np.zeros(3, dtype=[("a", "<i2"), ("b", "f4")]), np.arange(5, dtype=np.uint8)]
    for a in cases:
        for version in (None, (2, 0)):
            data = npy(a, version)
            for _ in range(2):
                x, y = lt.decode_npy(data), np.load(io.BytesIO(data), allow_pickle=False)
                assert (x.dtype, x.shape) == (y.dtype, y.shape) and np.array_equal(x, y)
                assert x.flags.writeable
                assert (x.flags.c_contiguous, x.flags.f_contiguous) == (y.flags.c_contiguous, y.flags.f_contiguous)
    for bad in (npy(np.array([1, "x"], dtype=object)), npy(np.arange(10))[:-8],
                b"\x93NUMPY\x01\x00\xff\xffjunk", b"not an npy file"):
        said = []
        for load in (lt.decode_npy, lambda d: np.load(io.BytesIO(d), allow_pickle=False)):
            try:
                load(bad)
                said.append(None)
            except Exception as e:  # noqa: BLE001 - the two must fail alike, whatever the error
                said.append((type(e).__name__, str(e)))
        assert said[0] == said[1] and said[0] is not None

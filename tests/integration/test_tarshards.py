"""webdataset's tar shards (loom.tarshard, loom.torch.TarShardDataset): written by
TarShardWriter as webdataset's ShardWriter writes them, read back sample for sample natively
(with libloom's prefetcher), through the mount and from a local folder, split between workers,
and a damaged shard named in the error."""

import io
import json
import os
import tarfile

import numpy as np
import pytest

from pyloom import pylib

pytestmark = pylib

torch = pytest.importorskip("torch")
import loom.torch as lt  # noqa: E402
from loom.tarshard import TarShardWriter, TarShardError, expand_braces, key_and_field  # noqa: E402

N = 30


def sample(i):
    return {"__key__": "s%05d" % i, "npy": np.full(40 + i, i, dtype=np.int32), "cls": i % 7,
            "json": {"i": i, "name": "n%d" % i}, "txt": "caption %d" % i,
            "seg.bin": bytes([i]) * (1000 * i)}


def write_shards(directory, **kw):
    with TarShardWriter(directory, maxcount=8, **kw) as w:
        for i in range(N):
            w.write(sample(i))
    return w.paths


def check(got, ids):
    assert [s["__key__"] for s in got] == ["s%05d" % i for i in ids]
    for s, i in zip(got, ids):
        assert np.array_equal(s["npy"], np.full(40 + i, i, dtype=np.int32))
        assert (s["cls"], s["json"], s["txt"]) == (i % 7, {"i": i, "name": "n%d" % i}, "caption %d" % i)
        assert s["seg.bin"] == bytes([i]) * (1000 * i)


def test_the_writer_writes_what_tarfile_and_webdataset_read(cluster, monkeypatch):
    monkeypatch.setenv("LOOM_KEY_FILE", cluster.key)
    mnt = cluster.mount()
    paths = write_shards(os.path.join(mnt, "wds"))
    assert [os.path.basename(p) for p in paths] == ["shard-%06d.tar" % k for k in range(4)]
    assert sorted(os.listdir(os.path.join(mnt, "wds"))) == [os.path.basename(p) for p in paths]
    with tarfile.open(paths[0]) as t:      # a plain tar: members KEY.FIELD in key order
        names = t.getnames()
        assert names[:5] == ["s00000.cls", "s00000.json", "s00000.npy", "s00000.seg.bin", "s00000.txt"]
        assert len(names) == 8 * 5
        assert t.extractfile("s00003.cls").read() == b"3"
        assert json.loads(t.extractfile("s00003.json").read()) == {"i": 3, "name": "n3"}
        assert np.array_equal(np.load(io.BytesIO(t.extractfile("s00003.npy").read())), np.full(43, 3, np.int32))
    assert key_and_field("a/b.c/s1.seg.bin") == ("a/b.c/s1", "seg.bin")
    assert expand_braces("/x/shard-{000001..000003}.tar") == ["/x/shard-00000%d.tar" % k for k in (1, 2, 3)]


@pytest.mark.parametrize("way", ["native", "mount", "local"])
def test_samples_read_back_whole_in_order(cluster, monkeypatch, tmp_path, way):
    monkeypatch.setenv("LOOM_KEY_FILE", cluster.key)
    mnt = cluster.mount()
    root = str(tmp_path / "wds") if way == "local" else os.path.join(mnt, "wds")
    write_shards(root, native=False if way != "native" else None)
    kw = {"native": False} if way == "mount" else {}
    # chunks smaller than a sample: samples cross chunk boundaries, and the prefetcher holds few
    ds = lt.TarShardDataset(root, chunk=4096, prefetch_bytes=16384, **kw)
    assert ds.prefetch == (way == "native")
    check(list(ds), range(N))
    brace = lt.TarShardDataset(os.path.join(root, "shard-{000001..000002}.tar"), **kw)
    check(list(brace), range(8, 24))
    raw = next(iter(lt.TarShardDataset(root, decode=None, **kw)))
    assert raw["cls"] == b"0" and raw["__url__"] == os.path.join(root, "shard-000000.tar")


def test_workers_split_the_shards_and_see_every_sample_once(cluster, monkeypatch):
    monkeypatch.setenv("LOOM_KEY_FILE", cluster.key)
    mnt = cluster.mount()
    root = os.path.join(mnt, "wds")
    write_shards(root)
    ds = lt.TarShardDataset(root, shuffle_shards=True, seed=1)
    for persistent in (False, True):
        seen = []
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                             persistent_workers=persistent)
        for epoch in (0, 1, 2):
            ds.set_epoch(epoch)   # a persistent worker never sees it: it counts epochs itself
            keys = [s["__key__"] for s in loader]
            assert sorted(keys) == ["s%05d" % i for i in range(N)]
            seen.append(keys)
        assert seen[0] != seen[1] != seen[2]   # the shards came in another order each epoch
        if persistent:
            assert seen == orders, "persistent workers read the epochs the others read"
        orders = seen


def test_a_damaged_shard_is_named_in_the_error(cluster, monkeypatch):
    monkeypatch.setenv("LOOM_KEY_FILE", cluster.key)
    mnt = cluster.mount()
    root = os.path.join(mnt, "wds")
    paths = write_shards(root)
    with open(paths[1], "r+b") as f:
        f.truncate(3000)           # cut inside a member's data
    got = []
    with pytest.raises(TarShardError, match="%s: not a whole tar shard" % paths[1]):
        for s in lt.TarShardDataset(root):
            got.append(s["__key__"])
    assert got[:8] == ["s%05d" % i for i in range(8)]

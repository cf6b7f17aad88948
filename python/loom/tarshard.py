"""webdataset's tar shards: `shard-%06d.tar`, each sample a group of consecutive files sharing a
key (`000017.npy`, `000017.cls`, `000017.json`: key "000017", fields "npy", "cls", "json").

TarShardWriter writes them as webdataset's ShardWriter does (the same encoders by extension,
a shard closed at maxcount samples or maxsize bytes), each shard whole or not at all (a
temporary name, then a rename). TarShardDataset (loom.torch) reads them sequentially with large
ranged reads: natively, libloom's prefetcher reads the shards' chunks ahead, many at once from
every OSS, in bounded memory; through the kernel, one chunk after the other.
"""

import io
import json
import os
import pickle
import tarfile
import time

from ._storage import storage_for

CHUNK = 8 << 20


def key_and_field(name):
    """webdataset's split of a member's name: the key up to the first dot of the base name (with
    its directory), the field after it ("a/b.seg.npy" -> ("a/b", "seg.npy"))."""
    slash = name.rfind("/")
    dot = name.find(".", slash + 1)
    if dot < 0:
        return name, ""
    return name[:dot], name[dot + 1:]


def encode_field(field, value):
    """bytes for one field, by its extension, as webdataset's default encoders."""
    ext = field.rsplit(".", 1)[-1].lower()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if ext in ("txt", "text", "transcript"):
        return str(value).encode("utf-8")
    if ext in ("cls", "cls2", "class", "count", "index", "inx", "id"):
        return str(int(value)).encode("ascii")
    if ext in ("json", "jsn"):
        return json.dumps(value).encode("utf-8")
    if ext == "npy":
        import numpy as np
        buf = io.BytesIO()
        np.save(buf, np.asarray(value), allow_pickle=False)
        return buf.getvalue()
    if ext in ("pth", "pt"):
        import torch
        buf = io.BytesIO()
        torch.save(value, buf)
        return buf.getvalue()
    if ext in ("pyd", "pickle"):
        return pickle.dumps(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise ValueError("no encoder for field %r (%s): give bytes" % (field, type(value).__name__))


def decode_sample(sample):
    """A sample's fields decoded by extension, as webdataset's .decode() does for the formats
    that need no image library: npy, json, txt, cls (and their aliases), pth; others stay bytes.
    Pickled fields (pyd, pickle) stay bytes: unpickling runs code from the shard."""
    out = {}
    for field, value in sample.items():
        if field.startswith("__"):
            out[field] = value
            continue
        ext = field.rsplit(".", 1)[-1].lower()
        if ext == "npy":
            from ._npy import load_npy_bytes
            value = load_npy_bytes(value)
        elif ext in ("json", "jsn"):
            value = json.loads(value)
        elif ext in ("txt", "text", "transcript"):
            value = value.decode("utf-8")
        elif ext in ("cls", "cls2", "class", "count", "index", "inx", "id"):
            value = int(value)
        elif ext in ("pth", "pt"):
            import torch
            value = torch.load(io.BytesIO(value))
        out[field] = value
    return out


class TarShardWriter:
    """Writes samples ({"__key__": KEY, FIELD: value, ...}) into DIRECTORY/shard-000000.tar, ...
    (pattern), a shard holding at most maxcount samples or about maxsize bytes."""

    def __init__(self, directory, pattern="shard-%06d.tar", maxcount=100000, maxsize=3 << 30,
                 fs=None, native=None):
        self.directory = os.fspath(directory)
        self.pattern = pattern
        self.maxcount, self.maxsize = maxcount, maxsize
        self._storage = storage_for(self.directory, native=native, fs=fs)
        self._storage.makedirs(self.directory)
        self.paths = []
        self._f = self._tar = None
        self._count = self._size = 0
        self._keys = set()

    def _open(self):
        self._path = os.path.join(self.directory, self.pattern % len(self.paths))
        self._f = self._storage.open(self._path + ".tmp", "wb")
        self._tar = tarfile.open(fileobj=self._f, mode="w|", format=tarfile.USTAR_FORMAT)
        self._count = self._size = 0
        self._keys = set()

    def _finish(self):
        self._tar.close()
        self._f.close()
        self._storage.rename(self._path + ".tmp", self._path)
        self.paths.append(self._path)
        self._f = self._tar = None

    def write(self, sample):
        key = sample.get("__key__")
        if not isinstance(key, str) or not key or "." in key.rsplit("/", 1)[-1]:
            raise ValueError("a sample needs a __key__ without a dot in its base name: %r" % (key,))
        if self._tar is not None and (self._count >= self.maxcount or self._size >= self.maxsize):
            self._finish()
        if self._tar is None:
            self._open()
        if key in self._keys:
            raise ValueError("key %r is already in %s" % (key, self._path))
        now = time.time()
        for field in sorted(f for f in sample if not f.startswith("__")):
            data = encode_field(field, sample[field])
            info = tarfile.TarInfo("%s.%s" % (key, field))
            info.size, info.mtime, info.mode = len(data), now, 0o444
            info.uname = info.gname = "bigdata"
            self._tar.addfile(info, io.BytesIO(data))
            self._size += 512 + len(data) + (-len(data) % 512)
        self._keys.add(key)
        self._count += 1

    def close(self):
        if self._tar is not None:
            self._finish()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *rest):
        if exc_type is None:
            self.close()
        elif self._tar is not None:
            self._f.close()
            self._storage.remove(self._path + ".tmp")
            self._f = self._tar = None


class _ChunkStream(io.RawIOBase):
    """A file object over a shard's chunks, as they come (from the prefetcher, or read in turn)."""

    def __init__(self, chunks):
        self._chunks = iter(chunks)
        self._buf = memoryview(b"")

    def readable(self):
        return True

    def readinto(self, b):
        while not self._buf:
            nxt = next(self._chunks, None)
            if nxt is None:
                return 0
            self._buf = memoryview(nxt)
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def samples_of(stream, url):
    """The samples of one tar stream: consecutive members sharing a key, as dicts of bytes."""
    tar = tarfile.open(fileobj=io.BufferedReader(stream, CHUNK), mode="r|")
    current = None
    for member in tar:
        if not member.isfile():
            continue
        key, field = key_and_field(member.name)
        if not field:
            continue
        if current is not None and key != current["__key__"]:
            yield current
            current = None
        if current is None:
            current = {"__key__": key, "__url__": url}
        current[field] = tar.extractfile(member).read()
    if current is not None:
        yield current


def expand_braces(pattern):
    """webdataset's shard lists: "shard-{000000..000009}.tar" is ten paths (the width kept)."""
    start = pattern.find("{")
    end = pattern.find("}", start)
    if start < 0 or end < 0 or ".." not in pattern[start:end]:
        return [pattern]
    lo, hi = pattern[start + 1:end].split("..", 1)
    width = len(lo)
    return [p for k in range(int(lo), int(hi) + 1)
            for p in expand_braces(pattern[:start] + str(k).zfill(width) + pattern[end + 1:])]


def shard_paths(shards, pattern, storage):
    """The shard paths: a directory's files matching pattern (sorted), a brace pattern, or a list."""
    if isinstance(shards, (str, bytes, os.PathLike)):
        s = os.fsdecode(os.fspath(shards))
        if "{" in s:
            return expand_braces(s)
        return storage.glob(s, pattern)
    return [os.fsdecode(os.fspath(p)) for p in shards]


class TarShardError(ValueError):
    pass


def stream_samples(storage, paths, chunk, prefetch_bytes=0, prefetch_threads=8):
    """The samples of the shards in paths, in order: each shard read whole, in chunks (ahead by
    libloom's prefetcher when prefetch_bytes and the storage is Loom's)."""
    plan = [(p, off, min(chunk, size - off)) for p in paths
            for size in [storage.size(p)] for off in range(0, size, chunk)]
    pf = None
    if prefetch_bytes and storage.native and plan:
        pf = storage.prefetch(plan, max_bytes=prefetch_bytes, threads=prefetch_threads)
    try:
        k = 0
        for path in paths:
            mine = []
            while k < len(plan) and plan[k][0] == path:
                mine.append(k)
                k += 1

            def chunks(mine=mine):
                for j in mine:
                    yield pf.take(j) if pf is not None else storage.read_range(*plan[j])
            try:
                yield from samples_of(_ChunkStream(chunks()), path)
            except tarfile.TarError as e:
                raise TarShardError("%s: not a whole tar shard (%s)" % (path, e)) from None
    finally:
        if pf is not None:
            pf.close()

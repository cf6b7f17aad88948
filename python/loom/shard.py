"""Record shards: many samples in one file, so that a million samples need not be a million files.

A shard file (`NAME.loomshard`) is its records back to back, then an index, then a footer:

    record 0 | record 1 | ... | record n-1 | index | footer

- index: n+1 little-endian u64 offsets; record i is the bytes [off[i], off[i+1]); off[0] is 0.
- footer, 32 bytes: the magic b"LOOMSHD1", u64 n, u64 the index's offset, u32 zlib.crc32 of the
  index, 4 zero bytes.

A reader needs the footer and the index (two reads), then one read per record: one round trip to
the OSS that holds it, where a file per sample costs an open and a close at the MDS too. A writer
writes NAME.loomshard.tmp and renames it when the shard is whole, so readers never see half of
one. docs/python.md has the reasons.
"""

import bisect
import io
import os
import struct
import zlib

from ._storage import storage_for

MAGIC = b"LOOMSHD1"
FOOTER = struct.Struct("<8sQQI4x")
EXT = ".loomshard"


def encode_record(record):
    """bytes for a record: bytes-like as is, a numpy array as np.save writes it."""
    if isinstance(record, (bytes, bytearray, memoryview)):
        return bytes(record)
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if np is not None and isinstance(record, np.ndarray):
        buf = io.BytesIO()
        np.save(buf, record, allow_pickle=False)
        return buf.getvalue()
    raise TypeError("a shard record is bytes or a numpy array, not %s" % type(record).__name__)


class ShardWriter:
    """Writes records into shards DIRECTORY/PREFIX-00000.loomshard, -00001, ... each holding at
    most max_records records or about max_bytes bytes. fs (a loom.FileSystem) writes through
    libloom; without it, through the kernel (a local folder or a mount)."""

    def __init__(self, directory, prefix="shard", max_records=None, max_bytes=256 << 20, fs=None,
                 native=None):
        self.directory = os.fspath(directory)
        self.prefix = prefix
        self.max_records = max_records
        self.max_bytes = max_bytes
        self._storage = storage_for(self.directory, native=native, fs=fs)
        self._storage.makedirs(self.directory)
        self.paths = []
        self.records = 0
        self._f = None

    def _start(self):
        path = os.path.join(self.directory, "%s-%05d%s" % (self.prefix, len(self.paths), EXT))
        self._path = path
        self._f = self._storage.open(path + ".tmp", "wb")
        self._offsets = [0]

    def write(self, record):
        """Appends one record (bytes, or a numpy array); returns its number across all shards."""
        data = encode_record(record)
        if self._f is None:
            self._start()
        self._f.write(data)
        self._offsets.append(self._offsets[-1] + len(data))
        n = self.records
        self.records += 1
        if ((self.max_records and len(self._offsets) - 1 >= self.max_records)
                or self._offsets[-1] >= self.max_bytes):
            self._finish()
        return n

    def _finish(self):
        index = struct.pack("<%dQ" % len(self._offsets), *self._offsets)
        self._f.write(index)
        self._f.write(FOOTER.pack(MAGIC, len(self._offsets) - 1, self._offsets[-1], zlib.crc32(index)))
        self._f.close()
        self._f = None
        self._storage.rename(self._path + ".tmp", self._path)
        self.paths.append(self._path)

    def close(self):
        """Finishes the last shard; returns the paths of every shard written."""
        if self._f is not None:
            self._finish()
        return self.paths

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *rest):
        if exc_type is None:
            self.close()
        elif self._f is not None:
            self._f.close()
            self._storage.remove(self._path + ".tmp")
            self._f = None


class ShardError(ValueError):
    pass


def read_index(storage, path):
    """The offsets (n+1) of a shard's records."""
    size = storage.size(path)
    if size < FOOTER.size:
        raise ShardError("%s: too short to be a shard" % path)
    magic, count, index_off, crc = FOOTER.unpack(storage.read_range(path, size - FOOTER.size, FOOTER.size))
    index_len = (count + 1) * 8
    if magic != MAGIC or index_off + index_len + FOOTER.size != size:
        raise ShardError("%s: not a Loom shard (bad footer)" % path)
    index = storage.read_range(path, index_off, index_len)
    if zlib.crc32(index) != crc:
        raise ShardError("%s: the index does not match its checksum" % path)
    offsets = struct.unpack("<%dQ" % (count + 1), index)
    if offsets[0] != 0 or offsets[-1] != index_off or any(a > b for a, b in zip(offsets, offsets[1:])):
        raise ShardError("%s: the index is not in order" % path)
    return offsets


class ShardSet:
    """Records of several shards, numbered across them in order."""

    def __init__(self, paths, storage):
        self.paths = list(paths)
        self.storage = storage
        self._offsets = []
        self._first = []       # per shard: its first record's number
        self._count = 0
        for p in self.paths:
            offs = read_index(storage, p)
            self._first.append(self._count)
            self._offsets.append(offs)
            self._count += len(offs) - 1

    def __len__(self):
        return self._count

    def locate(self, i):
        """(path, offset, length) of record i."""
        if not 0 <= i < self._count:
            raise IndexError("record %d of %d" % (i, self._count))
        k = bisect.bisect_right(self._first, i) - 1  # the last shard starting at or before i
        j = i - self._first[k]
        offs = self._offsets[k]
        return self.paths[k], offs[j], offs[j + 1] - offs[j]

    def read(self, i):
        return self.storage.read_range(*self.locate(i))

"""Model files in the safetensors format, read with parallel ranged reads over every stripe.

The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length
N, N bytes of JSON ({name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
{str: str}}), then the tensors' bytes, offsets counted from the end of the header. Every tensor
is read into one buffer (pinned when asked and CUDA is there) by `threads` reads at once, each of
`chunk` bytes, so that every OSS holding a stripe of the file sends at the same time; the
tensors are views of that buffer. A header that does not describe the file is refused with a
ValueError that says what is wrong, before anything is allocated for the data.
"""

import ctypes
import json
import math
import os
import struct
import threading
from concurrent.futures import ThreadPoolExecutor

import torch

from ._storage import storage_for

HEADER_MAX = 100 << 20          # the format's own limit on the JSON header
CHUNK = 4 << 20

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
          "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32, "I16": torch.int16,
          "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}


def _size_of(dtype):
    return torch.empty(0, dtype=dtype).element_size()


def parse_header(raw_len, header_bytes, file_size, path):
    """[(name, dtype, shape, begin, end)] in file order, and the metadata, from the header;
    ValueError for anything the file cannot be."""
    def bad(why):
        return ValueError("%s is not a safetensors file: %s" % (path, why))
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise bad("its header is not JSON (%s)" % e) from None
    if not isinstance(header, dict):
        raise bad("its header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in meta.items()):
        raise bad("__metadata__ is not a map of strings to strings")
    data_len = file_size - 8 - raw_len
    entries = []
    for name, d in header.items():
        if not isinstance(d, dict) or set(d) != {"dtype", "shape", "data_offsets"}:
            raise bad("tensor %r is not {dtype, shape, data_offsets}" % name)
        dtype = DTYPES.get(d["dtype"])
        if dtype is None:
            raise bad("tensor %r has dtype %r, which this reader does not know" % (name, d["dtype"]))
        shape, offs = d["shape"], d["data_offsets"]
        if not (isinstance(shape, list) and all(isinstance(x, int) and x >= 0 for x in shape)):
            raise bad("tensor %r has shape %r" % (name, shape))
        if not (isinstance(offs, list) and len(offs) == 2 and all(isinstance(x, int) for x in offs)
                and 0 <= offs[0] <= offs[1] <= data_len):
            raise bad("tensor %r has data_offsets %r outside the %d bytes of data"
                      % (name, offs, data_len))
        if offs[1] - offs[0] != math.prod(shape) * _size_of(dtype):
            raise bad("tensor %r: shape %r of %s needs %d bytes, its offsets hold %d"
                      % (name, shape, d["dtype"], math.prod(shape) * _size_of(dtype),
                         offs[1] - offs[0]))
        entries.append((name, dtype, shape, offs[0], offs[1]))
    entries.sort(key=lambda e: (e[3], e[4]))
    end = 0
    for name, _, _, begin, stop in entries:
        if begin != end:
            raise bad("tensor %r starts at %d, where %s" % (
                name, begin, "the one before ends at %d" % end if begin > end else
                "it overlaps the one before (ending at %d)" % end))
        end = stop
    if end != data_len:
        raise bad("its tensors hold %d bytes, the file %d after the header" % (end, data_len))
    return entries, meta


class _Reader:
    """pread into memory from threads: a handle per thread (a loom.File is one thread's)."""

    def __init__(self, storage, path):
        self.storage, self.path = storage, path
        self.local = threading.local()
        self.opened = []
        self.lock = threading.Lock()

    def _file(self):
        f = getattr(self.local, "f", None)
        if f is None:
            f = self.storage.open(self.path, "rb") if self.storage.native else \
                open(self.path, "rb", buffering=0)
            self.local.f = f
            with self.lock:
                self.opened.append(f)
        return f

    def read_into(self, address, length, offset):
        f = self._file()
        if self.storage.native:
            got = f._pread_into(address, length, offset)
        else:
            view = (ctypes.c_char * length).from_address(address)
            got, fd = 0, f.fileno()
            while got < length:
                n = os.preadv(fd, [memoryview(view)[got:]], offset + got)
                if n == 0:
                    break
                got += n
        if got != length:
            raise OSError(5, "%s ended at %d, before the %d bytes its header gives"
                          % (self.path, offset + got, offset + length))

    def read(self, length, offset):
        buf = ctypes.create_string_buffer(length)
        self.read_into(ctypes.addressof(buf), length, offset)
        return buf.raw

    def close(self):
        for f in self.opened:
            f.close()


def load_safetensors(path, *, device="cpu", pin_memory=False, fs=None, native=None,
                     threads=16, chunk=CHUNK, with_metadata=False):
    """{name: tensor} of a .safetensors file (and its metadata, with_metadata=True), read with
    `threads` ranged reads of `chunk` bytes at once, into one buffer, pinned when pin_memory
    and CUDA is there."""
    path = os.fspath(path)
    storage = storage_for(os.path.dirname(os.path.abspath(path)), native=native, fs=fs)
    reader = _Reader(storage, path)
    try:
        size = storage.size(path)
        if size < 8:
            raise ValueError("%s is not a safetensors file: %d bytes" % (path, size))
        (n,) = struct.unpack("<Q", reader.read(8, 0))
        if n > HEADER_MAX or 8 + n > size:
            raise ValueError("%s is not a safetensors file: a header of %d bytes in a file of %d"
                             % (path, n, size))
        entries, meta = parse_header(n, reader.read(n, 8), size, path)
        data_len, base = size - 8 - n, 8 + n
        pin = pin_memory and torch.cuda.is_available()
        buf = torch.empty(data_len, dtype=torch.uint8, pin_memory=pin)
        address = buf.data_ptr()
        pieces = [(off, min(chunk, data_len - off)) for off in range(0, data_len, chunk)]
        if pieces:
            with ThreadPoolExecutor(max_workers=max(1, min(threads, len(pieces)))) as pool:
                for done in [pool.submit(reader.read_into, address + off, ln, base + off)
                             for off, ln in pieces]:
                    done.result()
    finally:
        reader.close()
    out = {}
    for name, dtype, shape, begin, end in entries:
        raw = buf[begin:end]
        if begin % _size_of(dtype):
            raw = raw.clone()                 # a view of another dtype needs it aligned
        t = raw.view(dtype).reshape(shape)
        out[name] = t if device == "cpu" else t.to(device, non_blocking=pin)
    return (out, meta) if with_metadata else out


def save_safetensors(tensors, path, metadata=None, *, fs=None, native=None):
    """Writes {name: tensor} as a .safetensors file (in the order given, the header padded to 8
    bytes), whole or not at all (a temporary name, fsync, rename)."""
    from ._checkpoint import put_in_place
    header, offset, parts = {}, 0, []
    for name, t in tensors.items():
        if t.dtype not in NAMES:
            raise ValueError("tensor %r: safetensors has no dtype for %s" % (name, t.dtype))
        data = t.detach().to("cpu").contiguous().view(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        parts.append(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path = os.fspath(path)
    storage = storage_for(os.path.dirname(os.path.abspath(path)), native=native, fs=fs)

    def write(f):
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for data in parts:
            f.write(data)
    put_in_place(storage, path, write)

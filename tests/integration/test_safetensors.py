"""loom.torch.load_safetensors: a .safetensors file's tensors read with parallel ranged reads over
its stripes, byte for byte what the format says, natively and through the mount; a header that
does not describe the file is refused with a clear error; save_safetensors writes the format."""

import json
import os
import struct

import numpy as np
import pytest

from pyloom import pylib

pytestmark = pylib

torch = pytest.importorskip("torch")
import loom.torch as lt  # noqa: E402


def safetensors_bytes(arrays, metadata=None, pad=True):
    """The format written by hand from numpy arrays (name -> (dtype name, array)), in order."""
    header, blobs, off = {}, [], 0
    for name, (dt, a) in arrays.items():
        raw = a.tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def model_arrays(rng):
    return {
        "embed": ("F32", rng.standard_normal((300, 257)).astype(np.float32)),
        "odd": ("I8", rng.integers(-128, 127, 3, dtype=np.int8)),      # leaves the next misaligned
        "bias": ("F64", rng.standard_normal(33)),
        "half": ("F16", rng.standard_normal((7, 9)).astype(np.float16)),
        "ids": ("I64", np.arange(1000, dtype=np.int64)),
        "mask": ("BOOL", rng.integers(0, 2, 17).astype(np.bool_)),
        "empty": ("F32", np.zeros((0, 4), dtype=np.float32)),
        "big": ("F32", rng.standard_normal(600_000).astype(np.float32)),  # many 64 KiB stripes
    }


@pytest.mark.parametrize("native", [None, False])
def test_tensors_read_over_every_stripe_equal_what_the_file_holds(cluster, monkeypatch, native):
    monkeypatch.setenv("LOOM_KEY_FILE", cluster.key)
    mnt = cluster.mount()
    cluster.loom("setstripe", "-c", "-1", "-S", "64K", "/")
    arrays = model_arrays(np.random.default_rng(4))
    path = os.path.join(mnt, "model.safetensors")
    with open(path, "wb") as f:
        f.write(safetensors_bytes(arrays, {"format": "pt", "step": "100"}))
    got, meta = lt.load_safetensors(path, native=native, chunk=64 << 10, threads=8,
                                    with_metadata=True)
    assert meta == {"format": "pt", "step": "100"}
    assert list(got) == list(arrays)
    for name, (_, a) in arrays.items():
        t = got[name]
        assert tuple(t.shape) == a.shape, name
        assert t.numpy().tobytes() == a.tobytes(), name
    assert got["bias"].dtype == torch.float64 and got["mask"].dtype == torch.bool


def test_save_safetensors_writes_the_format_and_loads_back(cluster, monkeypatch):
    monkeypatch.setenv("LOOM_KEY_FILE", cluster.key)
    mnt = cluster.mount()
    tensors = {"w": torch.randn(64, 33), "b": torch.arange(5, dtype=torch.int32),
               "h": torch.ones(3, dtype=torch.bfloat16)}
    path = os.path.join(mnt, "out.safetensors")
    lt.save_safetensors(tensors, path, {"note": "x"})
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0
    header = json.loads(raw[8:8 + n])
    assert header["__metadata__"] == {"note": "x"}
    assert header["w"] == {"dtype": "F32", "shape": [64, 33], "data_offsets": [0, 64 * 33 * 4]}
    assert raw[8 + n:8 + n + 64 * 33 * 4] == tensors["w"].numpy().tobytes()
    got = lt.load_safetensors(path)
    assert all(torch.equal(got[k], v) for k, v in tensors.items())
    assert os.listdir(mnt) == ["out.safetensors"]


BAD = [
    (b"\x01\x02", "is not a safetensors file: 2 bytes"),
    (struct.pack("<Q", 1 << 40) + b"{}", "a header of 1099511627776 bytes in a file of 10"),
    (struct.pack("<Q", 4) + b"{x:1", "its header is not JSON"),
    (struct.pack("<Q", 2) + b"[]", "its header is not a JSON object"),
    (safetensors_bytes({"a": ("F99", np.zeros(2, np.float32))}), "dtype 'F99', which this reader does not know"),
    (safetensors_bytes({"a": ("F32", np.zeros(4, np.float32))})[:-1],
     "tensor 'a' has data_offsets [0, 16] outside the 15 bytes of data"),
    (safetensors_bytes({"a": ("F32", np.zeros(4, np.float32))}) + b"junk",
     "its tensors hold 16 bytes, the file 20 after the header"),
    (safetensors_bytes({"a": ("F64", np.zeros(2, np.float32))}),
     "tensor 'a': shape [2] of F64 needs 16 bytes, its offsets hold 8"),
    (safetensors_bytes({"a": ("F32", np.zeros(2, np.float32))}, {"k": 1}),
     "__metadata__ is not a map of strings to strings"),
]


@pytest.mark.parametrize("raw,why", BAD, ids=[w[:30] for _, w in BAD])
def test_a_header_that_does_not_describe_the_file_is_refused(cluster, monkeypatch, raw, why):
    monkeypatch.setenv("LOOM_KEY_FILE", cluster.key)
    mnt = cluster.mount()
    path = os.path.join(mnt, "bad.safetensors")
    with open(path, "wb") as f:
        f.write(raw)
    with pytest.raises(ValueError) as e:
        lt.load_safetensors(path)
    assert why in str(e.value) and path in str(e.value), str(e.value)


def test_overlapping_or_gapped_tensors_are_refused(cluster, monkeypatch):
    monkeypatch.setenv("LOOM_KEY_FILE", cluster.key)
    mnt = cluster.mount()
    for offsets, why in (([[0, 8], [4, 12]], "starts at 4, where it overlaps the one before (ending at 8)"),
                         ([[0, 8], [12, 20]], "starts at 12, where the one before ends at 8")):
        header = {"a": {"dtype": "F32", "shape": [2], "data_offsets": offsets[0]},
                  "b": {"dtype": "F32", "shape": [2], "data_offsets": offsets[1]}}
        h = json.dumps(header).encode()
        path = os.path.join(mnt, "gap.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + bytes(offsets[1][1]))
        with pytest.raises(ValueError) as e:
            lt.load_safetensors(path)
        assert "tensor 'b' " + why in str(e.value), str(e.value)

"""numpy on the mount: np.save / np.load round trips of int32 and float32 arrays of every size
class (empty, tiny, a page, several stripes), memory-mapped loads, and .npz archives; and what
one mount saves, the other loads."""

import os

import pytest

np = pytest.importorskip("numpy")

# Element counts: empty, one, odd, just over a page, 1 MiB of int32, and > 8 MiB (several 4 MiB
# stripe units).
COUNTS = [0, 1, 7, 1025, 262144, 3 * 1024 * 1024 + 17]
DTYPES = [np.int32, np.float32]


def make_array(dtype, n, seed):
    rng = np.random.default_rng(seed)
    if dtype == np.int32:
        return rng.integers(-2**31, 2**31 - 1, size=n, dtype=np.int32)
    return rng.standard_normal(n, dtype=np.float32)


def arrays():
    out = {}
    for d in DTYPES:
        for k, n in enumerate(COUNTS):
            out["%s_%d" % (np.dtype(d).name, n)] = make_array(d, n, k)
    out["int32_2d_C"] = make_array(np.int32, 640 * 480, 99).reshape(640, 480)
    out["float32_3d_F"] = np.asfortranarray(make_array(np.float32, 64 * 32 * 16, 98).reshape(64, 32, 16))
    return out


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


def test_np_save_load_round_trip(mounted, second_mount):
    d = mounted.p("arrays")
    os.mkdir(d)
    want = arrays()
    for name, a in want.items():
        np.save(os.path.join(d, name + ".npy"), a)
    bad = []

    def check(what, load):
        try:
            got = load()
            if not same(a, np.asarray(got)):
                bad.append("%s: %s gives %s %s, saved %s %s%s" % (
                    name, what, got.dtype, got.shape, a.dtype, a.shape,
                    "" if got.shape != a.shape else " (other values)"))
        except Exception as e:  # noqa: BLE001 - what the user would see
            bad.append("%s: %s raises %s: %s (the file is %d bytes)" % (name, what, type(e).__name__, e, size))

    for name, a in want.items():
        path = os.path.join(d, name + ".npy")
        other = os.path.join(second_mount.p("arrays"), name + ".npy")
        size = os.path.getsize(path)
        check("np.load", lambda: np.load(path))
        check("np.load(mmap_mode='r')", lambda: np.load(path, mmap_mode="r"))
        # The other mount loads the same.
        check("np.load through mount B", lambda: np.load(other))
        check("np.load(mmap_mode='r') through mount B", lambda: np.load(other, mmap_mode="r"))
        # The file is exactly an .npy header (a multiple of 64 bytes) plus the data.
        if not (size > a.nbytes and (size - a.nbytes) % 64 == 0 and size - a.nbytes <= 4096):
            bad.append("%s.npy is %d bytes for %d bytes of data" % (name, size, a.nbytes))
    assert not bad, "\n".join(bad)


def test_np_memmap_write_then_load(mounted):
    """np.load(mmap_mode='r+'): pages changed through a shared mapping reach the file once flushed."""
    path = mounted.p("mm.npy")
    a = make_array(np.float32, 2 * 1024 * 1024 + 3, 7)
    np.save(path, a)
    m = np.load(path, mmap_mode="r+")
    m[::4096] = -1.0
    m[-1] = 42.0
    m.flush()
    del m
    a[::4096] = -1.0
    a[-1] = 42.0
    got = np.load(path)
    assert same(a, got), "after writing through a memory map, np.load gives other data"


def test_np_savez_round_trip(mounted, second_mount):
    """.npz is a zip archive (written with seeks back to its headers)."""
    want = {k: v for k, v in arrays().items() if v.size <= 262144}
    np.savez(mounted.p("plain.npz"), **want)
    np.savez_compressed(mounted.p("compressed.npz"), **want)
    for name in ("plain.npz", "compressed.npz"):
        for root in (mounted, second_mount):
            with np.load(root.p(name)) as z:
                assert sorted(z.files) == sorted(want), "%s lists %s" % (root.p(name), z.files)
                for k, v in want.items():
                    assert same(v, z[k]), "%s: %s differs" % (root.p(name), k)

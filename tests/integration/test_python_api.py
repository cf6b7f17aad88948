"""The Python package loom's file API (python/loom) against a real cluster, checked against what
the same operations give through the FUSE mount: bytes, numpy and torch files, text modes,
names and attributes, errors, layouts, fork, connecting, record shards and prefetch."""

import errno
import io
import os
import pathlib
import re
import stat
import time

import numpy as np
import pytest

from pyloom import connect, loom, pylib

import loom.shard as shard
from loom._storage import LocalStorage, LoomStorage

pytestmark = pylib

KiB = 1 << 10
MiB = 1 << 20

# The Data-on-MDT boundary (64 KiB) and around it, a stripe and a bit, several stripes.
SIZES = [0, 1, 65535, 65536, 65537, 4 * MiB + 3, 9 * MiB]


def rand(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def mount_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_mount(path, data):
    with open(path, "wb") as f:
        f.write(data)


# ---- bytes ----------------------------------------------------------------------------------


def test_native_writes_read_back_through_the_mount(cluster):
    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    written = {}
    for k, size in enumerate(SIZES):
        data = rand(size, k)
        p = os.path.join(mnt, "n%d.bin" % size)
        with fs.open(p, "wb") as f:
            if size < MiB:
                assert f.write(data) == size
            else:
                # Uneven pieces: some gathered into the write buffer, some larger than it.
                pos, step = 0, 0
                steps = [1, 4095, MiB + 7, 100, 3 * MiB, 65536]
                while pos < size:
                    n = steps[step % len(steps)]
                    assert f.write(memoryview(data)[pos:pos + n]) == len(data[pos:pos + n])
                    pos += n
                    step += 1
            assert f.tell() == size
        written[p] = data
    # The file system's own path names the same file as the mount path; a pathlib.Path works.
    with fs.open("/big-fs-path.bin", "wb") as f:
        f.write(rand(65537, 99))
    written[os.path.join(mnt, "big-fs-path.bin")] = rand(65537, 99)
    with fs.open(pathlib.Path(mnt) / "pathlib.bin", "wb") as f:
        f.write(bytearray(rand(70000, 98)))
    written[os.path.join(mnt, "pathlib.bin")] = rand(70000, 98)

    for p, data in written.items():
        got = mount_bytes(p)
        assert len(got) == len(data), p
        assert got == data, p
        assert os.stat(p).st_size == len(data)
        assert fs.stat(p).st_size == len(data)
        assert fs.getsize(p) == len(data)
        assert fs.read_bytes(p) == data


def test_mount_writes_read_natively_with_read_readinto_seek(cluster):
    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    for k, size in enumerate(SIZES):
        data = rand(size, 100 + k)
        p = os.path.join(mnt, "m%d.bin" % size)
        write_mount(p, data)

        with fs.open(p, "rb") as f:
            assert f.read() == data
            assert f.read() == b""          # at EOF
            assert f.read(10) == b""
            assert f.tell() == size

        # read(n) in pieces of uneven sizes, some below the 1 MiB read buffer, some above.
        with fs.open(p, "rb") as f:
            parts, sizes, j = [], [1, 7, 65536, MiB, 3 * MiB + 1, 1000], 0
            while True:
                chunk = f.read(sizes[j % len(sizes)])
                j += 1
                if not chunk:
                    break
                parts.append(chunk)
                assert f.tell() == sum(map(len, parts))
            assert b"".join(parts) == data

        # readinto: a bytearray in pieces, then one numpy array of the whole file.
        with fs.open(p, "rb") as f:
            out, buf = bytearray(), bytearray(100000)
            while True:
                n = f.readinto(buf)
                if n == 0:
                    break
                out += buf[:n]
            assert bytes(out) == data
            f.seek(0)
            arr = np.zeros(size + 10, dtype=np.uint8)
            assert f.readinto(arr) == size
            assert arr[:size].tobytes() == data and not arr[size:].any()
            assert f.readinto(bytearray(5)) == 0

        # seek / tell with SEEK_SET, SEEK_CUR and SEEK_END, against the builtin file.
        with fs.open(p, "rb") as f, open(p, "rb") as ref:
            for off, whence, n in [(10, os.SEEK_SET, 10), (5, os.SEEK_CUR, 20), (-3, os.SEEK_END, 10),
                                   (0, os.SEEK_SET, 65540), (-8, os.SEEK_CUR, 16), (0, os.SEEK_END, 4),
                                   (size + 100, os.SEEK_SET, 5), (-size, os.SEEK_END, 2 * MiB)]:
                if whence == os.SEEK_END and size + off < 0 or whence == os.SEEK_CUR and ref.tell() + off < 0:
                    continue
                assert f.seek(off, whence) == ref.seek(off, whence), (size, off, whence)
                assert f.tell() == ref.tell()
                assert f.read(n) == ref.read(n), (size, off, whence, n)
                assert f.tell() == ref.tell()
            with pytest.raises(OSError) as ei:
                f.seek(-1, os.SEEK_SET)
            assert ei.value.errno == errno.EINVAL
            assert f.seekable() and f.readable() and not f.writable()
            assert f.stat().st_size == size


# ---- numpy and torch --------------------------------------------------------------------------


def test_numpy_and_torch_files_through_loom_file_objects(cluster):
    import torch

    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    rng = np.random.default_rng(7)
    arrays = {
        "f32": rng.standard_normal((300, 77)).astype(np.float32),
        "i64": np.arange(-5000, 5000, dtype=np.int64),
        "fortran": np.asfortranarray(rng.standard_normal((64, 33))),
        "rec": np.array([(1, 2.5, b"ab"), (3, -1.0, b"cd")], dtype=[("a", "<i4"), ("b", "<f8"), ("c", "S2")]),
        "big": rng.integers(0, 1 << 30, 2 * MiB, dtype=np.int32),   # 8 MiB: several stripes
        "empty": np.zeros((0, 3), dtype=np.uint8),
    }
    for name, a in arrays.items():
        pn = os.path.join(mnt, name + ".native.npy")
        pm = os.path.join(mnt, name + ".mount.npy")
        with fs.open(pn, "wb") as f:
            np.save(f, a)
        with open(pm, "wb") as f:
            np.save(f, a)
        assert mount_bytes(pn) == mount_bytes(pm), name       # the same bytes, however written
        for p in (pn, pm):
            with fs.open(p, "rb") as f:
                b = np.load(f)
            assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(b, a), (name, p)
            assert b.flags.f_contiguous == a.flags.f_contiguous
            assert np.array_equal(np.load(p), a)

    # np.savez is a zip: np.load reads it back with seek/tell through the file object.
    pz = os.path.join(mnt, "all.npz")
    with fs.open(pz, "wb") as f:
        np.savez(f, **{k: v for k, v in arrays.items() if k != "big"})
    with fs.open(pz, "rb") as f, np.load(f) as z:
        assert sorted(z.files) == sorted(k for k in arrays if k != "big")
        for k in z.files:
            assert np.array_equal(z[k], arrays[k]), k
    with np.load(pz) as z:
        assert np.array_equal(z["f32"], arrays["f32"])

    obj = {"w": torch.arange(300000, dtype=torch.float32).reshape(300, 1000),
           "b": torch.tensor([1, 2, 3], dtype=torch.int64), "step": 12, "name": "layer"}
    tn, tm = os.path.join(mnt, "m.native.pt"), os.path.join(mnt, "m.mount.pt")
    with fs.open(tn, "wb") as f:
        torch.save(obj, f)
    with open(tm, "wb") as f:
        torch.save(obj, f)
    assert mount_bytes(tn) == mount_bytes(tm)
    def load_native(p):
        with fs.open(p, "rb") as f:
            return torch.load(f)
    for loaded in (torch.load(tn), load_native(tm), load_native(tn)):
        assert set(loaded) == set(obj)
        assert torch.equal(loaded["w"], obj["w"]) and torch.equal(loaded["b"], obj["b"])
        assert loaded["step"] == 12 and loaded["name"] == "layer"


def write_safetensors(f, tensors):
    """The safetensors layout: u64 header length, a JSON header of dtype, shape and data
    offsets, then the tensors' bytes."""
    import json
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        data = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": {"float32": "F32", "int64": "I64"}[a.dtype.name], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    h = json.dumps(header).encode()
    f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def read_safetensors_lazily(f, name):
    """One tensor, as safetensors' safe_open reads it: the header, then a seek to its bytes."""
    import json
    n = int.from_bytes(f.read(8), "little")
    meta = json.loads(f.read(n))[name]
    start, end = meta["data_offsets"]
    f.seek(8 + n + start)
    dtype = {"F32": np.float32, "I64": np.int64}[meta["dtype"]]
    return np.frombuffer(f.read(end - start), dtype=dtype).reshape(meta["shape"])


def test_safetensors_style_header_and_seek(cluster):
    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    rng = np.random.default_rng(3)
    tensors = {"embed": rng.standard_normal((1000, 512)).astype(np.float32),   # 2 MiB
               "lm_head": rng.standard_normal((512, 3000)).astype(np.float32),  # 6 MiB: stripes
               "step": np.array([1234], dtype=np.int64)}
    with fs.open(os.path.join(mnt, "model.safetensors"), "wb") as f:
        write_safetensors(f, tensors)
    with open(os.path.join(mnt, "model2.safetensors"), "wb") as f:
        write_safetensors(f, tensors)
    assert mount_bytes(os.path.join(mnt, "model.safetensors")) == mount_bytes(os.path.join(mnt, "model2.safetensors"))
    for name in ("lm_head", "step", "embed"):  # out of file order
        with fs.open("/model2.safetensors", "rb") as f:
            assert np.array_equal(read_safetensors_lazily(f, name), tensors[name])


# ---- text ------------------------------------------------------------------------------------


def test_text_modes_match_the_mount(cluster):
    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    lines = ["héllo wörld\n", "second ✓ line\n", "\n", "x" * 5000 + "\n", "no newline at end"]
    text = "".join(lines)
    pn, pm = os.path.join(mnt, "n.txt"), os.path.join(mnt, "m.txt")
    with fs.open(pn, "w", encoding="utf-8") as f:
        for ln in lines:
            f.write(ln)
    with open(pm, "w", encoding="utf-8") as f:
        f.write(text)
    assert mount_bytes(pn) == mount_bytes(pm) == text.encode("utf-8")

    for p in (pn, pm):
        with fs.open(p, "r", encoding="utf-8") as f:
            assert f.read() == text
        with fs.open(p, encoding="utf-8") as f, open(p, encoding="utf-8") as ref:
            assert f.readline() == ref.readline() == lines[0]
            assert f.tell() == ref.tell()
            assert f.readlines() == ref.readlines() == lines[1:]
        with fs.open(p, encoding="utf-8") as f:
            assert list(f) == lines
            f.seek(0)
            assert [ln for ln in f] == lines
        with fs.open(p, "rb") as f:
            assert list(f) == [ln.encode() for ln in lines]
        with fs.open(p, "r", encoding="latin-1") as f, open(p, encoding="latin-1") as ref:
            assert f.read() == ref.read()

    # "a": appends, as the builtin does on the mount.
    with fs.open(pn, "a", encoding="utf-8") as f:
        f.write("\nappended ✓\n")
    with open(pm, "a", encoding="utf-8") as f:
        f.write("\nappended ✓\n")
    assert mount_bytes(pn) == mount_bytes(pm)
    with fs.open(pn, encoding="utf-8") as f:
        assert f.read().endswith("no newline at end\nappended ✓\n")

    # Other encodings and newline translation.
    for enc, newline in [("utf-16", None), ("latin-1", None), ("utf-8", "\r\n"), ("utf-8", "")]:
        t = "a\r\nb\nc\rd é\n" if enc != "latin-1" else "caf\xe9\n\xff\n"
        pn2, pm2 = os.path.join(mnt, "enc.native"), os.path.join(mnt, "enc.mount")
        with fs.open(pn2, "w", encoding=enc, newline=newline) as f:
            f.write(t)
        with open(pm2, "w", encoding=enc, newline=newline) as f:
            f.write(t)
        assert mount_bytes(pn2) == mount_bytes(pm2), (enc, newline)
        for nl in (None, ""):
            with fs.open(pm2, encoding=enc, newline=nl) as f, open(pm2, encoding=enc, newline=nl) as ref:
                assert f.read() == ref.read(), (enc, newline, nl)
        with fs.open(pn2, encoding=enc, newline="") as f, open(pm2, encoding=enc, newline="") as ref:
            assert f.readlines() == ref.readlines()


# ---- r+b, x, a, truncate ---------------------------------------------------------------------


def test_read_modify_write_exclusive_append_truncate(cluster):
    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    p = os.path.join(mnt, "rmw.bin")
    data = bytearray(rand(5 * MiB + 17, 1))
    write_mount(p, data)

    # r+b: read at an offset, write there, read around it.
    with fs.open(p, "r+b") as f:
        assert f.readable() and f.writable()
        f.seek(4 * MiB - 3)
        assert f.read(6) == data[4 * MiB - 3:4 * MiB + 3]
        f.seek(-6, os.SEEK_CUR)
        assert f.write(b"ABCDEF") == 6
        data[4 * MiB - 3:4 * MiB + 3] = b"ABCDEF"
        assert f.tell() == 4 * MiB + 3
        f.seek(4 * MiB - 10)
        assert f.read(20) == data[4 * MiB - 10:4 * MiB + 10]     # sees its own write
        f.seek(100)
        f.write(b"xyz")
        data[100:103] = b"xyz"
        f.seek(0)
        assert f.read(200) == data[:200]
        f.seek(0, os.SEEK_END)
        assert f.write(b"tail") == 4
        data += b"tail"
        assert f.seek(0, os.SEEK_END) == len(data)
    assert mount_bytes(p) == bytes(data)

    # w+b: write then read back through the same object.
    pw = os.path.join(mnt, "wplus.bin")
    with fs.open(pw, "w+b") as f:
        f.write(b"hello world")
        f.seek(0)
        assert f.read() == b"hello world"
        f.seek(6)
        assert f.read(5) == b"world"
    assert mount_bytes(pw) == b"hello world"

    # x: creates, and refuses an existing file (through either name).
    px = os.path.join(mnt, "excl.bin")
    with fs.open(px, "xb") as f:
        f.write(b"new")
    assert mount_bytes(px) == b"new"
    for name in (px, "/excl.bin"):
        with pytest.raises(FileExistsError) as ei:
            fs.open(name, "xb")
        assert ei.value.errno == errno.EEXIST and ei.value.filename == name
    with pytest.raises(FileExistsError):
        fs.open(px, "x")
    assert mount_bytes(px) == b"new"

    # a: every write lands at the end, whatever the position.
    pa = os.path.join(mnt, "app.bin")
    write_mount(pa, b"0123456789")
    with fs.open(pa, "ab") as f:
        f.write(b"abc")
        f.write(b"def")
    assert mount_bytes(pa) == b"0123456789abcdef"

    # truncate: shorter and longer (zeros), on a File and by path, as the mount shows.
    with fs.open(p, "r+b") as f:
        f.seek(10)
        assert f.truncate(1000) == 1000
        assert f.tell() == 10                 # the position does not move
        assert f.seek(0, os.SEEK_END) == 1000
    assert mount_bytes(p) == bytes(data[:1000])
    fs.truncate(p, 70000)
    assert fs.stat(p).st_size == 70000
    eventually(lambda: os.stat(p).st_size == 70000)   # the mount may trust its attributes 1 s
    assert mount_bytes(p) == bytes(data[:1000]) + bytes(69000)
    fs.truncate("/rmw.bin", 3)
    assert fs.read_bytes(p) == bytes(data[:3]) == mount_bytes(p)
    with fs.open(p, "wb") as f:   # "w" empties an existing file
        pass
    assert fs.stat(p).st_size == 0 and mount_bytes(p) == b""

    # a+b: the write goes to the end; a seek after it, then a read, reads from where the seek
    # said (as a builtin file in "a+b" mode does).
    write_mount(pa, b"start")
    with open(pa, "a+b") as ref:
        ref.seek(0)
        ref.write(b"END")
        ref.seek(0)
        assert ref.read() == b"startEND"
    write_mount(pa, b"start")
    with fs.open(pa, "a+b") as f:
        f.seek(0)
        f.write(b"END")
        f.seek(0)
        got = f.read()
    assert mount_bytes(pa) == b"startEND"
    problems = []
    if got != b"startEND":
        problems.append("a+b: read() after write(), seek(0) gave %r, not b'startEND'" % got)

    # tell() after a write in append mode is the end of the file, as a builtin file says.
    write_mount(pa, b"0123456789")
    with open(pa, "ab") as ref:
        ref.write(b"abcde")
        ref_tell = ref.tell()
    assert ref_tell == 15
    with fs.open(pa, "ab") as f:
        assert f.tell() == 15
        f.write(b"abcde")
        if f.tell() != 20:
            problems.append("ab: tell() after writing 5 bytes at 15 is %d, not 20" % f.tell())
    assert mount_bytes(pa) == b"0123456789abcdeabcde"
    assert not problems, "\n".join(problems)


# ---- names and attributes --------------------------------------------------------------------


def eventually(check, timeout=10):
    """check()'s value once it is true and raises no AssertionError, within timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = check()
            if v:
                return v
            if time.monotonic() > deadline:
                raise AssertionError("still false after %ds: %r" % (timeout, check))
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def same_stat(a, b):
    keys = ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size")
    return {k: getattr(a, k) for k in keys} == {k: getattr(b, k) for k in keys}


def test_namespace_calls_match_os_on_the_mount(cluster):
    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    top = os.path.join(mnt, "top")
    fs.makedirs(os.path.join(top, "a", "b", "c"))
    assert os.path.isdir(os.path.join(top, "a", "b", "c"))
    fs.makedirs(os.path.join(top, "a", "b"), exist_ok=True)
    with pytest.raises(FileExistsError):
        fs.makedirs(os.path.join(top, "a", "b"))
    os.makedirs(os.path.join(top, "m1", "m2"))            # made through the mount
    fs.mkdir(os.path.join(top, "plain"))
    write_mount(os.path.join(top, "f_mount"), b"m" * 70000)
    fs.write_bytes(os.path.join(top, "f_native"), b"n" * 10)
    fs.write_bytes("/top/empty", b"")
    fs.symlink("f_native", os.path.join(top, "ln_native"))
    os.symlink("a/b", os.path.join(top, "ln_mount"))
    fs.symlink("does-not-exist", os.path.join(top, "dangling"))

    def compare_dir(d):
        names = set(os.listdir(d))
        assert set(fs.listdir(d)) == names
        assert len(fs.listdir(d)) == len(names)
        ents = {e.name: e for e in fs.scandir(d)}
        assert set(ents) == names
        with os.scandir(d) as it:
            for e in it:
                n = ents[e.name]
                assert n.path == os.path.join(d, e.name)
                assert n.inode() == e.inode(), e.name
                assert (n.is_dir(), n.is_file(), n.is_symlink()) == \
                    (e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False), e.is_symlink()), e.name
                assert same_stat(fs.lstat(e.path), os.lstat(e.path)), e.name
                if fs.exists(e.path):   # not a dangling symlink
                    assert same_stat(fs.stat(e.path), os.stat(e.path)), e.name
                    s1, s2 = fs.stat(e.path), os.stat(e.path)
                    assert s1.st_mtime_ns == s2.st_mtime_ns and int(s1.st_mtime) == int(s2.st_mtime), e.name
                for fn, ref in ((fs.exists, os.path.exists), (fs.isdir, os.path.isdir),
                                (fs.isfile, os.path.isfile)):
                    assert fn(e.path) == ref(e.path), (fn.__name__, e.name)
        return names

    assert compare_dir(top) == {"a", "m1", "plain", "f_mount", "f_native", "empty", "ln_native",
                                "ln_mount", "dangling"}
    compare_dir(mnt)
    compare_dir(os.path.join(top, "a"))
    assert set(fs.listdir("/top")) == set(os.listdir(top))    # the file system's own path
    assert set(fs.listdir("/")) == set(os.listdir(mnt)) == set(fs.listdir(mnt))

    # symlinks both ways
    assert fs.readlink(os.path.join(top, "ln_native")) == os.readlink(os.path.join(top, "ln_native")) == "f_native"
    assert fs.readlink(os.path.join(top, "ln_mount")) == "a/b"
    assert stat.S_ISLNK(fs.lstat(os.path.join(top, "ln_native")).st_mode)
    assert fs.lstat(os.path.join(top, "ln_native")).st_size == len("f_native")
    assert fs.stat(os.path.join(top, "ln_native")).st_ino == os.stat(os.path.join(top, "f_native")).st_ino
    assert fs.isdir(os.path.join(top, "ln_mount")) and fs.isfile(os.path.join(top, "ln_native"))
    assert not fs.exists(os.path.join(top, "dangling"))
    assert fs.read_bytes(os.path.join(top, "ln_native")) == b"n" * 10

    # rename: a file, a file over an existing one, a directory. The mount's kernel may trust a
    # name it looked up for its entry_timeout (1 s), so what it shows of a change made natively
    # is checked once that has passed.
    fs.rename(os.path.join(top, "f_native"), os.path.join(top, "renamed"))
    assert not fs.exists(os.path.join(top, "f_native"))
    assert "f_native" not in os.listdir(top) and "renamed" in os.listdir(top)
    assert mount_bytes(os.path.join(top, "renamed")) == b"n" * 10
    fs.rename(os.path.join(top, "renamed"), os.path.join(top, "f_mount"))   # replaces
    assert fs.read_bytes(os.path.join(top, "f_mount")) == b"n" * 10
    fs.rename("/top/m1", "/top/plain/m1moved")
    assert os.listdir(os.path.join(top, "plain", "m1moved")) == ["m2"]
    eventually(lambda: compare_dir(top))
    eventually(lambda: mount_bytes(os.path.join(top, "f_mount")) == b"n" * 10)

    # remove and rmdir
    fs.remove(os.path.join(top, "f_mount"))
    fs.unlink(os.path.join(top, "dangling"))
    fs.rmdir(os.path.join(top, "plain", "m1moved", "m2"))
    assert not fs.exists(os.path.join(top, "f_mount")) and not fs.exists(os.path.join(top, "dangling"))
    assert os.listdir(os.path.join(top, "plain", "m1moved")) == []
    assert eventually(lambda: compare_dir(top)) == {"a", "plain", "empty", "ln_native", "ln_mount"}
    eventually(lambda: not os.path.exists(os.path.join(top, "f_mount")))
    eventually(lambda: not os.path.lexists(os.path.join(top, "dangling")))

    # missing paths, and a file used as a directory: False, as os.path gives
    for p in (os.path.join(top, "nope"), os.path.join(top, "empty", "x"), "/nope/x"):
        assert not fs.exists(p) and not fs.isdir(p) and not fs.isfile(p)
    assert fs.isdir(mnt) and fs.isdir("/") and fs.exists(mnt)

    # A name too long to exist does not exist: os.path.exists says False rather than raising.
    long_name = os.path.join(top, "n" * 256)
    wrong = []
    for fn, ref in ((fs.exists, os.path.exists), (fs.isdir, os.path.isdir), (fs.isfile, os.path.isfile)):
        assert ref(long_name) is False
        try:
            got = fn(long_name)
        except OSError as e:
            got = e
        if got is not False:
            wrong.append("fs.%s(a 256-byte name) gave %r where os.path.%s gives False"
                         % (fn.__name__, got, ref.__name__))

    # walk "as os.walk": a symlink to a directory is among the dirnames (not descended into);
    # glob gives the files LocalStorage.glob gives for the same tree through the mount.
    def walked(it):
        return sorted((d, sorted(ds), sorted(fs_)) for d, ds, fs_ in it)
    if walked(fs.walk(top)) != walked(os.walk(top)):
        wrong.append("fs.walk(top) = %r\n  os.walk(top) = %r" % (walked(fs.walk(top)), walked(os.walk(top))))
    for rec in (False, True):
        got, ref = fs.glob(top, "*", recursive=rec), LocalStorage().glob(top, "*", recursive=rec)
        if got != ref:
            wrong.append("fs.glob(top, recursive=%s) = %r, LocalStorage().glob = %r" % (rec, got, ref))
    assert not wrong, "\n".join(wrong)


# ---- errors ----------------------------------------------------------------------------------


def test_errors_are_the_oserror_subclasses_python_raises(cluster):
    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    d = os.path.join(mnt, "d")
    os.makedirs(os.path.join(d, "sub"))
    f = os.path.join(mnt, "file")
    write_mount(f, b"x")
    missing = os.path.join(mnt, "missing")
    long_name = os.path.join(mnt, "L" * 256)

    # (what, native call, the same through the mount, class, errno, filename)
    cases = [
        ("open missing", lambda: fs.open(missing, "rb"), lambda: open(missing, "rb"),
         FileNotFoundError, errno.ENOENT, missing),
        ("open missing text", lambda: fs.open(missing), lambda: open(missing),
         FileNotFoundError, errno.ENOENT, missing),
        ("create in a missing dir", lambda: fs.open(missing + "/x", "wb"), lambda: open(missing + "/x", "wb"),
         FileNotFoundError, errno.ENOENT, missing + "/x"),
        ("stat missing", lambda: fs.stat(missing), lambda: os.stat(missing),
         FileNotFoundError, errno.ENOENT, missing),
        ("remove missing", lambda: fs.remove(missing), lambda: os.remove(missing),
         FileNotFoundError, errno.ENOENT, missing),
        ("listdir missing", lambda: fs.listdir(missing), lambda: os.listdir(missing),
         FileNotFoundError, errno.ENOENT, missing),
        ("mkdir existing", lambda: fs.mkdir(d), lambda: os.mkdir(d),
         FileExistsError, errno.EEXIST, d),
        ("mkdir over a file", lambda: fs.mkdir(f), lambda: os.mkdir(f),
         FileExistsError, errno.EEXIST, f),
        ("open file/x", lambda: fs.open(f + "/x", "rb"), lambda: open(f + "/x", "rb"),
         NotADirectoryError, errno.ENOTDIR, f + "/x"),
        ("stat file/x", lambda: fs.stat(f + "/x"), lambda: os.stat(f + "/x"),
         NotADirectoryError, errno.ENOTDIR, f + "/x"),
        ("listdir a file", lambda: fs.listdir(f), lambda: os.listdir(f),
         NotADirectoryError, errno.ENOTDIR, f),
        ("rmdir a file", lambda: fs.rmdir(f), lambda: os.rmdir(f),
         NotADirectoryError, errno.ENOTDIR, f),
        ("open a dir wb", lambda: fs.open(d, "wb"), lambda: open(d, "wb"),
         IsADirectoryError, errno.EISDIR, d),
        ("open a dir w", lambda: fs.open(d, "w"), lambda: open(d, "w"),
         IsADirectoryError, errno.EISDIR, d),
        ("open a dir r+b", lambda: fs.open(d, "r+b"), lambda: open(d, "r+b"),
         IsADirectoryError, errno.EISDIR, d),
        ("remove a dir", lambda: fs.remove(d), lambda: os.remove(d),
         IsADirectoryError, errno.EISDIR, d),
        ("rmdir non-empty", lambda: fs.rmdir(d), lambda: os.rmdir(d),
         OSError, errno.ENOTEMPTY, d),
        ("create a long name", lambda: fs.open(long_name, "wb"), lambda: open(long_name, "wb"),
         OSError, errno.ENAMETOOLONG, long_name),
        ("stat a long name", lambda: fs.stat(long_name), lambda: os.stat(long_name),
         OSError, errno.ENAMETOOLONG, long_name),
        ("mkdir a long name", lambda: fs.mkdir(long_name), lambda: os.mkdir(long_name),
         OSError, errno.ENAMETOOLONG, long_name),
        ("x on an existing file", lambda: fs.open(f, "xb"), lambda: open(f, "xb"),
         FileExistsError, errno.EEXIST, f),
        ("readlink a file", lambda: fs.readlink(f), lambda: os.readlink(f),
         OSError, errno.EINVAL, f),
        ("rename missing", lambda: fs.rename(missing, f + "2"), lambda: os.rename(missing, f + "2"),
         FileNotFoundError, errno.ENOENT, missing),
        ("makedirs existing", lambda: fs.makedirs(d), lambda: os.makedirs(d),
         FileExistsError, errno.EEXIST, d),
    ]
    problems = []
    for what, native, mounted, cls, eno, filename in cases:
        with pytest.raises(OSError) as ref:
            mounted()
        assert type(ref.value) is cls and ref.value.errno == eno, (what, ref.value)  # the reference
        try:
            native()
        except OSError as e:
            if type(e) is not cls or e.errno != eno:
                problems.append("%s: %s (errno %s), expected %s (errno %d)"
                                % (what, type(e).__name__, e.errno, cls.__name__, eno))
            if e.filename != filename:
                problems.append("%s: filename %r, expected %r" % (what, e.filename, filename))
            if what == "rename missing" and e.filename2 != f + "2":
                problems.append("%s: filename2 %r" % (what, e.filename2))
        else:
            problems.append("%s: no error" % what)

    # A 255-byte name is fine.
    ok = os.path.join(mnt, "k" * 255)
    fs.write_bytes(ok, b"ok")
    assert mount_bytes(ok) == b"ok"

    # Invalid modes: ValueError, as the builtin open() raises.
    for mode in ("rz", "rw", "", "b", "rbt", "wa", "r++", "rbb", "U"):
        with pytest.raises(ValueError):
            open(f, mode)
        try:
            fs.open(f, mode).close()
        except ValueError:
            pass
        except Exception as e:  # noqa: BLE001 - reported below
            problems.append("mode %r: %r instead of ValueError" % (mode, e))
        else:
            problems.append("mode %r: accepted" % mode)
    assert mount_bytes(f) == b"x"

    assert not problems, "\n".join(problems)


def test_closed_files_raise_valueerror(cluster):
    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    p = os.path.join(mnt, "c.bin")
    data = rand(300000, 3)
    write_mount(p, data)

    r = fs.open(p, "rb")
    assert r.read(10) == data[:10]                # fills the read buffer
    r.close()
    assert r.closed
    r.close()                                     # a second close is fine, as for builtin files
    w = fs.open(os.path.join(mnt, "w.bin"), "wb")
    w.write(b"before")
    w.close()
    assert w.closed
    t = fs.open(p, "r", encoding="latin-1")
    t.readline()
    t.close()

    ops = [
        ("read(n)", lambda: r.read(10)), ("read()", lambda: r.read()),
        ("readinto", lambda: r.readinto(bytearray(10))), ("readline", lambda: r.readline()),
        ("iteration", lambda: next(iter(r))), ("seek", lambda: r.seek(0)), ("tell", lambda: r.tell()),
        ("write", lambda: w.write(b"after")), ("flush", lambda: w.flush()),
        ("truncate", lambda: w.truncate(0)), ("text read", lambda: t.read()),
        ("text readline", lambda: t.readline()),
    ]
    wrong = []
    for name, op in ops:
        try:
            got = op()
        except ValueError:
            continue
        except Exception as e:  # noqa: BLE001 - reported below
            wrong.append("%s raised %r" % (name, e))
        else:
            wrong.append("%s returned %r" % (name, got if not isinstance(got, bytes) else got[:16]))
    assert mount_bytes(os.path.join(mnt, "w.bin")) == b"before"
    with pytest.raises(ValueError):
        with r:
            pass
    assert not wrong, "operations on a closed loom.File that did not raise ValueError:\n" + "\n".join(wrong)


# ---- layouts ---------------------------------------------------------------------------------

OBJ_RE = re.compile(r"l_ost_idx: (\d+), l_fid: \[0x[0-9a-f]+:0x([0-9a-f]+):0x[0-9a-f]+\]")


def cli_layout(cluster, path):
    """(stripe_count, stripe_size, first OST, [(ost_idx, objid)]) from `loom getstripe`."""
    c = int(cluster.loom("getstripe", "-c", path).stdout)
    s = int(cluster.loom("getstripe", "-S", path).stdout)
    i = int(cluster.loom("getstripe", "-i", path).stdout)
    full = cluster.loom("getstripe", path).stdout
    objs = [(int(a), int(b, 16)) for a, b in OBJ_RE.findall(full)]
    if not objs:   # the plain lfs form: object rows "\tidx\tobjid\t0x..\tgroup"
        objs = [(int(a), int(b)) for a, b in re.findall(r"^\s+(\d+)\s+(\d+)\s+0x[0-9a-f]+\s+\d+$", full, re.M)]
    return c, s, i, objs


def test_setstripe_getstripe_and_open_layouts(cluster):
    mnt = cluster.mount()
    fs = connect(cluster, mnt)

    wide = os.path.join(mnt, "wide")
    fs.mkdir(wide)
    fs.setstripe(wide, stripe_count=-1)
    d = fs.getstripe(wide)
    assert d.is_default and not d.inherited and d.stripe_count == -1 and d.objects == []
    assert cluster.loom("getstripe", "-d", "-c", wide).stdout.strip() == "-1"
    pw = os.path.join(wide, "f.bin")
    data = rand(5 * MiB, 11)
    with fs.open(pw, "wb") as f:
        f.write(data)
    lay = fs.getstripe(pw)
    assert not lay.is_default
    assert lay.stripe_count == 4 and len(lay.objects) == 4
    all_osts = sorted(cluster.ost_index_of_dir(k) for k in range(4))
    assert sorted(lay.osts()) == all_osts, lay               # four distinct OSTs
    assert cli_layout(cluster, pw) == (4, lay.stripe_size, lay.osts()[0], lay.objects)
    assert fs.getstripe("/wide/f.bin") == lay                  # by its file system path too
    assert mount_bytes(pw) == data

    narrow = os.path.join(mnt, "narrow")
    os.mkdir(narrow)
    fs.setstripe(narrow, stripe_count=1, stripe_size=2 * MiB)
    assert (fs.getstripe(narrow).stripe_count, fs.getstripe(narrow).stripe_size) == (1, 2 * MiB)
    pn = os.path.join(narrow, "f.bin")
    write_mount(pn, data)                                     # a file made through the mount
    lay = fs.getstripe(pn)
    assert (lay.stripe_count, lay.stripe_size, len(lay.objects)) == (1, 2 * MiB, 1)
    assert cli_layout(cluster, pn) == (1, 2 * MiB, lay.osts()[0], lay.objects)

    # layout= to open() for the file it creates (in a directory whose default is 4 stripes)
    pl = os.path.join(wide, "two.bin")
    with fs.open(pl, "wb", layout={"stripe_count": 2, "stripe_size": 1 << 20}) as f:
        f.write(data[:3 * MiB + 5])
    lay = fs.getstripe(pl)
    assert (lay.stripe_count, lay.stripe_size) == (2, MiB)
    assert len(set(lay.osts())) == 2
    assert cli_layout(cluster, pl) == (2, MiB, lay.osts()[0], lay.objects)
    assert mount_bytes(pl) == data[:3 * MiB + 5]
    # ... with a chosen first OST, in "x" mode
    px = os.path.join(mnt, "at3.bin")
    last = all_osts[-1]
    with fs.open(px, "xb", layout={"stripe_count": 1, "stripe_offset": last}) as f:
        f.write(b"z" * 100000)
    assert fs.getstripe(px).osts() == [last]
    assert cli_layout(cluster, px)[2:] == (last, fs.getstripe(px).objects)

    # setstripe on a path that does not exist: an empty file with that layout (lfs setstripe FILE)
    pe = os.path.join(mnt, "pre.bin")
    fs.setstripe(pe, stripe_count=3, stripe_size=MiB)
    assert os.path.isfile(pe) and os.stat(pe).st_size == 0
    lay = fs.getstripe(pe)
    assert (lay.stripe_count, lay.stripe_size, len(set(lay.osts()))) == (3, MiB, 3)
    assert cli_layout(cluster, pe)[:2] == (3, MiB)

    # delstripe: the directory inherits again
    fs.delstripe(narrow)
    assert fs.getstripe(narrow).inherited
    # a stripe size that is not a multiple of 64 KiB
    with pytest.raises(OSError) as ei:
        fs.setstripe(wide, stripe_size=1000)
    assert ei.value.errno == errno.EINVAL and ei.value.filename == wide
    with pytest.raises(FileNotFoundError):
        fs.getstripe(os.path.join(mnt, "nope"))


# ---- fork ------------------------------------------------------------------------------------


def wait_child(pid, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child did not finish within %ds" % timeout)


def test_forked_child_reconnects_and_parent_keeps_working(cluster):
    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    p = os.path.join(mnt, "shared.bin")
    data = rand(5 * MiB + 1, 5)
    fs.write_bytes(p, data)
    parent_file = fs.open(p, "rb")
    assert parent_file.read(4) == data[:4]

    pid = os.fork()
    if pid == 0:   # the child: plain exit codes only, never back into pytest
        code = 99
        try:
            code = 10
            if fs.read_bytes(p) != data:
                os._exit(11)
            code = 20
            with fs.open("/from_child.bin", "wb") as f:
                f.write(b"child %d" % os.getpid())
            code = 30
            if set(fs.listdir(mnt)) != {"shared.bin", "from_child.bin"}:
                os._exit(31)
            code = 40
            try:   # a File opened before the fork belongs to the parent
                parent_file.seek(0)
                parent_file.read(1)
                os._exit(41)
            except OSError as e:
                if e.errno != errno.EBADF:
                    os._exit(42)
            code = 0
        finally:
            os._exit(code)

    assert wait_child(pid) == 0
    # The parent's connection and open file still work, and it sees the child's file.
    assert parent_file.read(100) == data[4:104]
    parent_file.close()
    assert fs.read_bytes(p) == data
    assert fs.read_bytes(os.path.join(mnt, "from_child.bin")).startswith(b"child ")
    assert mount_bytes(os.path.join(mnt, "from_child.bin")) == fs.read_bytes("/from_child.bin")

    # Again through multiprocessing's fork context, with a FileSystem made before it.
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    proc = ctx.Process(target=_child_sizes, args=(fs, [p, "/from_child.bin"], q))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    assert q.get(timeout=5) == [len(data), os.stat(os.path.join(mnt, "from_child.bin")).st_size]
    assert fs.stat(p).st_size == len(data)


def _child_sizes(fs, paths, q):
    q.put([len(fs.read_bytes(x)) for x in paths])


# ---- connecting ------------------------------------------------------------------------------


def test_connect_from_mount_address_and_failures(cluster):
    mnt = cluster.mount()
    real = os.path.realpath(mnt)
    write_mount(os.path.join(mnt, "hello"), b"hi")
    os.mkdir(os.path.join(mnt, "sub"))

    fs = loom.connect(mnt, key_file=cluster.key)
    assert fs.mountpoint == real
    assert fs.mds == cluster.addr
    assert fs.fsname == "loom"
    assert loom.mount_of(os.path.join(mnt, "sub")) == (real, "%s:/loom" % cluster.addr)
    assert (real, "%s:/loom" % cluster.addr) in loom.loom_mounts()
    assert fs.read_bytes(os.path.join(mnt, "hello")) == fs.read_bytes("/hello") == b"hi"
    # A path inside the mount finds the same mount.
    fs2 = loom.connect(os.path.join(mnt, "sub"), key_file=cluster.key)
    assert fs2.mountpoint == real and fs2.read_bytes(os.path.join(mnt, "hello")) == b"hi"
    fs2.close()
    # By address: the file system's own paths.
    fs3 = connect(cluster)
    assert fs3.mountpoint is None and fs3.read_bytes("/hello") == b"hi"
    assert fs3.listdir("/") == fs.listdir(mnt)
    fs3.close()
    # The mount source form HOST:PORT:/FSNAME
    fs4 = loom.connect("%s:/loom" % cluster.addr, key_file=cluster.key)
    assert fs4.fsname == "loom" and fs4.read_bytes("hello") == b"hi"
    fs4.close()

    # Not on a Loom mount: an OSError (ENODEV), before any connection is tried.
    with pytest.raises(OSError) as ei:
        loom.connect(cluster.dir, key_file=cluster.key)
    assert ei.value.errno == errno.ENODEV
    # Nothing listening: ECONNREFUSED, soon.
    t0 = time.monotonic()
    with pytest.raises(OSError) as ei:
        loom.connect("127.0.0.1:1", key_file=cluster.key, recovery_seconds=1)
    assert ei.value.errno == errno.ECONNREFUSED and isinstance(ei.value, ConnectionRefusedError)
    assert time.monotonic() - t0 < 30
    # A file system name that is not this one's
    with pytest.raises(OSError) as ei:
        loom.connect(cluster.addr, fsname="other", key_file=cluster.key)
    assert ei.value.errno == errno.ENODEV
    # The connection still works after all that.
    assert fs.stat(os.path.join(mnt, "hello")).st_size == 2

    # connect() accepts a path through a symlink to the mount (it resolves it); the paths under
    # that same name must then be accepted too.
    link = os.path.join(cluster.dir, "link-to-mnt")
    os.symlink(mnt, link)
    fs5 = loom.connect(link, key_file=cluster.key)
    assert fs5.mountpoint == real
    assert os.path.exists(os.path.join(link, "hello"))
    assert fs5.read_bytes(os.path.join(link, "hello")) == b"hi"
    fs5.close()


def test_connect_refuses_a_key_file_others_can_read(cluster, workdir, monkeypatch):
    key = os.path.join(workdir, "shared.key")
    with open(cluster.key) as src, open(key, "w") as dst:
        dst.write(src.read())
    os.chmod(key, 0o644)
    want = "key file %s is readable by its group and others (mode 0644): chmod 600 %s" % (key, key)
    with pytest.raises(PermissionError) as ei:
        loom.connect(cluster.addr, key_file=key).listdir("/")
    assert ei.value.errno == errno.EPERM and want in str(ei.value), str(ei.value)
    # As libloom chooses it: $LOOM_KEY_FILE.
    monkeypatch.setenv("LOOM_KEY_FILE", key)
    with pytest.raises(PermissionError) as ei:
        loom.connect(cluster.addr).listdir("/")
    assert want in str(ei.value), str(ei.value)
    os.chmod(key, 0o600)
    fs = loom.connect(cluster.addr, key_file=key)
    assert fs.listdir("/") == []
    fs.close()


# ---- shards ----------------------------------------------------------------------------------


def records(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        if i % 3 == 0:
            out.append(rng.standard_normal((i % 5 + 1, 7)).astype(np.float32))
        elif i % 7 == 1:
            out.append(b"")
        else:
            out.append(rng.integers(0, 256, int(rng.integers(1, 200000)), dtype=np.uint8).tobytes())
    return out


def same_record(got, want):
    if isinstance(want, np.ndarray):
        a = np.load(io.BytesIO(got), allow_pickle=False)
        return a.dtype == want.dtype and np.array_equal(a, want)
    return got == want


def test_shards_native_and_through_the_mount(cluster):
    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    recs = records(20, 1)

    dn = os.path.join(mnt, "shards", "native")
    w = shard.ShardWriter(dn, max_records=6, fs=fs)
    assert [w.write(r) for r in recs] == list(range(20))
    paths = w.close()
    assert len(paths) == 4 and all(p.startswith(dn + "/") and p.endswith(".loomshard") for p in paths)
    assert sorted(os.listdir(dn)) == sorted(os.path.basename(p) for p in paths)   # no .tmp left

    dm = os.path.join(mnt, "shards", "mount")
    with shard.ShardWriter(dm, max_records=6, native=False) as w:   # through the kernel
        for r in recs:
            w.write(r)
    mpaths = w.paths
    assert not isinstance(w._storage, LoomStorage)
    assert sorted(fs.listdir(dm)) == sorted(os.path.basename(p) for p in mpaths)
    # The same records give the same bytes whichever way they were written.
    for a, b in zip(paths, mpaths):
        assert mount_bytes(a) == mount_bytes(b)

    for ps in (paths, mpaths):
        for storage in (LoomStorage(fs), LocalStorage()):
            s = shard.ShardSet(ps, storage)
            assert len(s) == 20
            for i, r in enumerate(recs):
                assert same_record(s.read(i), r), (ps[0], type(storage).__name__, i)
            path, off, length = s.locate(13)
            assert path == ps[2] and length == len(shard.encode_record(recs[13]))
            with pytest.raises(IndexError):
                s.locate(20)
            storage.close()

    # max_bytes closes a shard early
    w = shard.ShardWriter(os.path.join(mnt, "shards", "small"), max_bytes=100 * KiB, fs=fs)
    for i in range(5):
        w.write(bytes([i]) * (60 * KiB))
    sp = w.close()
    assert len(sp) == 3
    s = shard.ShardSet(sp, LoomStorage(fs))
    assert [s.read(i) for i in range(5)] == [bytes([i]) * (60 * KiB) for i in range(5)]
    with pytest.raises(TypeError):
        shard.encode_record("a str is not a record")


def test_corrupt_shards_raise_sharderror_and_aborted_writers_leave_nothing(cluster):
    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    d = os.path.join(mnt, "sh")
    w = shard.ShardWriter(d, max_records=100, fs=fs)
    recs = [rand(1000 + 37 * i, i) for i in range(10)]
    for r in recs:
        w.write(r)
    (good,) = w.close()
    raw = mount_bytes(good)
    assert raw[-32:-24] == shard.MAGIC
    index_off = len(raw) - 32 - 11 * 8

    def corrupt(name, content):
        p = os.path.join(d, name)
        write_mount(p, content)
        return p

    def flip(buf, at):
        b = bytearray(buf)
        b[at] ^= 0x40
        return bytes(b)

    bad = {
        "truncated": raw[:-1],
        "cut in the index": raw[:index_off + 20],
        "tiny": raw[:10],
        "empty": b"",
        "index byte flipped": flip(raw, index_off + 9),
        "magic flipped": flip(raw, len(raw) - 30),
        "count flipped": flip(raw, len(raw) - 24),
        "crc flipped": flip(raw, len(raw) - 8),
        "index offset flipped": flip(raw, len(raw) - 16),
        "not a shard": rand(5000, 1),
    }
    for k, (name, content) in enumerate(bad.items()):
        p = corrupt("bad%d.loomshard" % k, content)
        for storage in (LoomStorage(fs), LocalStorage()):
            with pytest.raises(shard.ShardError):
                shard.ShardSet([good, p], storage)
    assert issubclass(shard.ShardError, ValueError)
    # The good one still reads.
    s = shard.ShardSet([good], LoomStorage(fs))
    assert [s.read(i) for i in range(10)] == recs

    # A writer whose block raises removes its unfinished shard: no .tmp, no shard.
    for kw in ({"fs": fs}, {"native": False}):
        da = os.path.join(mnt, "aborted-%s" % ("native" if "fs" in kw else "mount"))
        with pytest.raises(RuntimeError):
            with shard.ShardWriter(da, max_records=10, **kw) as w:
                w.write(b"one")
                w.write(np.arange(4))
                raise RuntimeError("the producer failed")
        assert os.listdir(da) == [] and fs.listdir(da) == []


# ---- prefetch --------------------------------------------------------------------------------


def test_prefetch_files_ranges_errors_and_memory_bound(cluster):
    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    pd = os.path.join(mnt, "pf")
    os.mkdir(pd)
    blobs = []
    for i in range(40):
        b = rand(256 * KiB, 1000 + i)
        write_mount(os.path.join(pd, "%02d" % i), b)
        blobs.append(b)
    items = [os.path.join(pd, "%02d" % i) for i in range(40)]

    with fs.prefetch(items, max_bytes=MiB, threads=8) as pf:
        assert len(pf) == 40
        for i in range(40):
            assert pf.take(i) == mount_bytes(items[i]), i
        st = pf.stats()
    assert 0 < st["peak_bytes"] <= MiB, st
    assert st["fetched"] + st["direct"] >= 40 and st["bytes_held"] == 0, st

    big = os.path.join(mnt, "big.bin")
    big_data = rand(9 * MiB + 5, 77)
    write_mount(big, big_data)
    missing = os.path.join(pd, "missing")
    mixed = [
        items[0],                                  # 0: a whole file
        (items[1], 1000, 5000),                    # 1: a range
        (big, 4 * MiB - 10, 2 * MiB),              # 2: a range across stripes
        missing,                                   # 3: a missing file
        (items[2], 100, -1),                       # 4: to the end
        (items[3], 256 * KiB - 10, 100),           # 5: past EOF: the bytes there are
        "/pf/04",                                  # 6: the file system's own path
        big,                                       # 7: larger than max_bytes
        (items[5], 256 * KiB, 10),                 # 8: at EOF: nothing
        items[6],                                  # 9
    ]
    want = [blobs[0], blobs[1][1000:6000], big_data[4 * MiB - 10:6 * MiB - 10], None, blobs[2][100:],
            blobs[3][-10:], blobs[4], big_data, b"", blobs[6]]
    with fs.prefetch(mixed, max_bytes=4 * MiB, threads=4) as pf:
        assert pf.take(0) == want[0]
        assert pf.take(1) == want[1]
        assert pf.take(2) == want[2]
        assert pf.take(6) == want[6]        # skip ahead ...
        assert pf.take(4) == want[4]        # ... and go back: given up items are read again
        assert pf.take(5) == want[5]
        assert pf.take(9) == want[9]
        assert pf.take(7) == want[7]
        assert pf.take(8) == b""
        assert pf.take(0) == want[0]
        with pytest.raises(FileNotFoundError) as ei:
            pf.take(3)
        assert ei.value.errno == errno.ENOENT
        assert pf.take(1) == want[1]        # the others still work after the error
        missing_error = ei.value
    with pytest.raises(ValueError):
        pf.take(0)                          # stopped

    # In order from the start, the missing item fails only at its own take().
    with fs.prefetch(mixed, max_bytes=2 * MiB, threads=3) as pf:
        for i, w in enumerate(want):
            if w is None:
                with pytest.raises(FileNotFoundError):
                    pf.take(i)
            else:
                assert pf.take(i) == w, i
        st = pf.stats()
    assert st["peak_bytes"] <= max(2 * MiB, len(big_data)), st

    # The error names the path as the caller gave it, as every other call of the package does.
    assert missing_error.filename == missing


CLOSE_UNDER_PREFETCH = r"""
import os, sys, loom
fs = loom.connect(sys.argv[1])
paths = [os.path.join(sys.argv[1], "pf", "f%d" % i) for i in range(200)]
pf = fs.prefetch(paths, max_bytes=1 << 20, threads=8)   # threads still reading when fs closes
assert len(pf.take(0)) == 100000
f = fs.open(paths[1], "rb")
fs.close()
assert f.closed
try:
    pf.take(1)
except ValueError:
    pass
else:
    raise SystemExit("a stopped prefetcher still answered")
print("closed")
"""


def test_closing_the_file_system_stops_its_prefetchers_and_files_first(cluster):
    """libloom's threads must not use a connection that was closed: fs.close() stops them."""
    import subprocess
    from pyloom import child_env
    mnt = cluster.mount()
    os.makedirs(os.path.join(mnt, "pf"))
    for i in range(200):
        write_mount(os.path.join(mnt, "pf", "f%d" % i), rand(100000, i))
    p = subprocess.run(["/usr/bin/python3", "-c", CLOSE_UNDER_PREFETCH, mnt], capture_output=True, text=True,
                       env=child_env(cluster), timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "closed", p.stdout + p.stderr


GC_CYCLE = r"""
import gc, os, sys, loom
fs = loom.connect(sys.argv[1])
paths = [os.path.join(sys.argv[1], "cyc", "f%d" % i) for i in range(8)]
class Holder:
    pass
for k in range(50):
    # A file system, its files (one with writes still buffered) and a prefetcher in one
    # reference cycle: the collector clears weak references before it runs any finalizer.
    h = Holder()
    h.fs = loom.connect(sys.argv[1])
    h.files = [h.fs.open(paths[k % 8], "rb"), h.fs.open(paths[k % 8] + ".w%d" % k, "wb")]
    h.files[1].write(b"written %d" % k)
    h.pf = h.fs.prefetch(paths, max_bytes=1 << 20, threads=2)
    h.fs.cycle = h
    del h
    gc.collect()
print("collected")
# At exit the same with what is left (the interpreter's own finalization).
h = Holder(); h.fs = loom.connect(sys.argv[1]); h.f = h.fs.open(paths[0], "rb"); h.fs.cycle = h
"""


def test_a_file_system_and_its_files_collected_in_one_cycle(cluster):
    """The garbage collector may finalize a FileSystem before its files (in one cycle, their weak
    references are cleared first): the files must still close on a live connection, their
    buffered writes reach the file, and nothing waits forever at exit (a rank of a DataLoader run
    hung so, in its interpreter's finalization)."""
    import subprocess
    from pyloom import child_env
    mnt = cluster.mount()
    os.makedirs(os.path.join(mnt, "cyc"))
    for i in range(8):
        write_mount(os.path.join(mnt, "cyc", "f%d" % i), rand(300000, i))
    p = subprocess.run(["/usr/bin/python3", "-c", GC_CYCLE, mnt], capture_output=True, text=True,
                       env=child_env(cluster), timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "collected", p.stdout + p.stderr
    for k in range(50):
        assert mount_bytes(os.path.join(mnt, "cyc", "f%d.w%d" % (k % 8, k))) == b"written %d" % k

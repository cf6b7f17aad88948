"""Data-on-MDT (issue 5): a file's first bytes, up to its layout's dom_size (64 KiB unless a
directory says otherwise), live on the MDS. What a user sees: small files work and keep working
with every OSS down, a file grows past the threshold onto its objects transparently, two mounts
see each other's closed files (close-to-open) and lock-ordered updates, truncation and O_TRUNC
hold, and nothing acknowledged is lost when the MDS is killed."""

import fcntl
import os
import random
import subprocess
import sys

from loomutil import KiB, MiB, parse_any_getstripe, second_mount, wait_until

DOM = 64 * KiB
SIZES = [0, 1, 100, 4095, 4096, DOM - 1, DOM, DOM + 1, 3 * DOM + 17, 5 * MiB + 3]




def data_of(seed, n):
    return random.Random(seed).randbytes(n)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data, fsync=False):
    with open(path, "wb") as f:
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def test_files_around_the_threshold_read_back_on_another_mount(cluster):
    mnt = cluster.mount()
    os.mkdir(os.path.join(mnt, "d"))
    for n in SIZES:
        write(os.path.join(mnt, "d", "f%d" % n), data_of(n, n))
    with second_mount(cluster) as other:
        for n in SIZES:
            p = os.path.join(other, "d", "f%d" % n)
            assert os.stat(p).st_size == n
            assert read(p) == data_of(n, n), "a %d-byte file reads back different on another mount" % n
            # st_blocks counts the bytes kept on the MDS too (du must not say 0 for a small file).
            if n:
                assert os.stat(p).st_blocks > 0, "a %d-byte file shows no blocks" % n
    # Every new file has the 64 KiB Data-on-MDT component by default.
    lay = parse_any_getstripe(cluster.loom("getstripe", os.path.join(mnt, "d", "f100")).stdout)
    assert lay.dom_size == DOM, lay


def test_a_reader_opened_before_the_writers_close_reads_the_bytes_not_zeros(cluster):
    """Mount B opens a file mount A is still writing (empty to B then); once A closed it and B
    sees the new size, B's reads through the same descriptor return A's bytes, the Data-on-MDT
    part included, never zeros up to the new size (found by a two-mount soak)."""
    mnt = cluster.mount()
    os.mkdir(os.path.join(mnt, "w"))
    with second_mount(cluster) as other:
        for n in (3001, DOM + 100000):
            data = data_of(n, n)
            fd = os.open(os.path.join(mnt, "w", "f%d" % n), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            try:
                os.write(fd, data)
                rfd = os.open(os.path.join(other, "w", "f%d" % n), os.O_RDONLY | os.O_DIRECT)
            finally:
                os.close(fd)
            try:
                assert wait_until(lambda: os.fstat(rfd).st_size == n, 30), "B never saw the new size"
                got = b""
                while len(got) < n:
                    chunk = os.pread(rfd, 1 << 20, len(got))
                    assert chunk, "B's read ended at %d of %d bytes" % (len(got), n)
                    got += chunk
                assert got == data, "B read %s" % ("zeros" if not got.strip(b"\0") else
                                                   "other bytes from %d" % next(i for i in range(n) if got[i] != data[i]))
            finally:
                os.close(rfd)


def test_small_files_need_no_oss(cluster):
    """A file within dom_size is read and written without any OST: with every OSS killed,
    small files still open, read, and take new bytes; a larger one waits for its OST."""
    mnt = cluster.mount()
    small = {"s%d" % i: data_of(i, 1000 * (i + 1)) for i in range(20)}
    for name, d in small.items():
        write(os.path.join(mnt, name), d)
    for k in range(cluster.osts):
        cluster.kill9(cluster.oss_name(k))
    cluster.allow_log(r".*")  # the MDS and the mount log the lost OSSs
    with second_mount(cluster) as other:
        for name, d in small.items():
            assert read(os.path.join(other, name)) == d
        # Rewritten (O_TRUNC: nothing on the objects to cut) and appended to.
        write(os.path.join(other, "s0"), b"written while every OSS is down", fsync=True)
        with open(os.path.join(other, "s1"), "ab") as f:
            f.write(b"+more")
    assert read(os.path.join(mnt, "s0")) == b"written while every OSS is down"
    assert read(os.path.join(mnt, "s1")) == small["s1"] + b"+more"


def test_growing_past_the_threshold_and_truncating(cluster):
    mnt = cluster.mount()
    p = os.path.join(mnt, "g")
    model = bytearray(data_of(1, 1000))
    write(p, bytes(model))
    ops = random.Random(7)
    with open(p, "r+b") as f:
        for _ in range(200):
            what = ops.random()
            if what < 0.6:
                off = ops.choice([0, DOM - 3, DOM, 2 * DOM]) + ops.randrange(0, 5000)
                d = ops.randbytes(ops.choice([1, 100, 5000, DOM + 10]))
                f.seek(off)
                f.write(d)
                if off > len(model):
                    model.extend(b"\0" * (off - len(model)))
                model[off:off + len(d)] = d
            elif what < 0.8:
                n = ops.choice([0, 10, DOM - 1, DOM + 1, len(model) // 2, len(model) + 777])
                f.truncate(n)
                if n < len(model):
                    del model[n:]
                else:
                    model.extend(b"\0" * (n - len(model)))
            else:
                f.flush()
                f.seek(0)
                assert f.read() == bytes(model)
    assert read(p) == bytes(model)
    with second_mount(cluster) as other:
        assert read(os.path.join(other, "g")) == bytes(model)
        # O_TRUNC rewrite of a small file, seen by the first mount after its next open.
        write(os.path.join(other, "g"), b"short")
    assert read(p) == b"short"


def test_lock_ordered_updates_between_mounts(cluster):
    """The reader keeps the file open throughout; each time it takes the lock it reads what the
    writer wrote under it (as SQLite on two nodes expects)."""
    mnt = cluster.mount()
    p = os.path.join(mnt, "counter")
    write(p, b"0" * 64)
    with second_mount(cluster) as other, open(p, "r+b") as a, open(os.path.join(other, "counter"), "r+b") as b:
        for i in range(1, 20):
            fcntl.lockf(a, fcntl.LOCK_EX)
            a.seek(0)
            a.write(b"%064d" % i)
            a.flush()
            fcntl.lockf(a, fcntl.LOCK_UN)
            fcntl.lockf(b, fcntl.LOCK_SH)
            b.seek(0)
            got = b.read()
            fcntl.lockf(b, fcntl.LOCK_UN)
            assert got == b"%064d" % i, "update %d: the other mount read %r" % (i, got[:16])


def test_directory_without_dom_and_with_a_larger_one(cluster):
    mnt = cluster.mount()
    for name, args, want in (("plain", ["-E", "-1", "-c", "2"], 0),
                             ("big", ["-E", "256K", "-L", "mdt", "-E", "-1", "-c", "1"], 256 * KiB)):
        d = os.path.join(mnt, name)
        os.mkdir(d)
        cluster.loom("setstripe", *args, d)
        f = os.path.join(d, "f")
        data = data_of(3, 300 * KiB)
        write(f, data)
        lay = parse_any_getstripe(cluster.loom("getstripe", f).stdout)
        assert lay.dom_size == want, (name, lay)
        with second_mount(cluster) as other:
            assert read(os.path.join(other, name, "f")) == data


CHILD = r"""
import os, sys
p = sys.argv[1]
for i in range(1000000):
    with open(p + "/f%d" % i, "wb") as f:
        f.write(b"%d" % i * 100)
        f.flush()
        os.fsync(f.fileno())
    print(i, flush=True)
"""


def test_mds_kill9_keeps_what_was_fsynced(cluster):
    mnt = cluster.mount()
    d = os.path.join(mnt, "w")
    os.mkdir(d)
    p = subprocess.Popen([sys.executable, "-c", CHILD, d], stdout=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: len(os.listdir(d)) >= 30, 60)
        cluster.kill9("mds")
        cluster.mount()  # `up --mount` again: restarts the MDS and keeps the mount it has
        # The writer goes on after the MDS came back (recovery resends what was in flight).
        seen = [p.stdout.readline() for _ in range(20)]
        assert all(seen), "the writer stopped after the MDS restart"
    finally:
        p.kill()
        p.wait()
    done = int(seen[-1])
    with second_mount(cluster) as other:
        for i in range(done + 1):
            assert read(os.path.join(other, "w", "f%d" % i)) == b"%d" % i * 100, "f%d lost or wrong" % i


def test_two_handles_of_one_mount_share_the_bytes(cluster):
    """A reader that bypasses the page cache (O_DIRECT) sees, through its own handle, what
    another handle of the same mount wrote and has not flushed yet, and its truncation."""
    import mmap
    mnt = cluster.mount()
    p = os.path.join(mnt, "two")
    w = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    r = os.open(p, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 4096)
    try:
        os.write(w, b"A" * 100)
        assert os.preadv(r, [buf], 0) == 100 and bytes(buf[:100]) == b"A" * 100
        os.pwrite(w, b"B" * 10, 50)
        assert os.preadv(r, [buf], 0) == 100 and bytes(buf[45:65]) == b"A" * 5 + b"B" * 10 + b"A" * 5
        os.ftruncate(w, 55)
        assert os.preadv(r, [buf], 0) == 55 and bytes(buf[:55]) == b"A" * 50 + b"B" * 5
    finally:
        os.close(w)
        os.close(r)
    assert read(p) == b"A" * 50 + b"B" * 5

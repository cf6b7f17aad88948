"""fallocate(2) and SEEK_DATA / SEEK_HOLE beyond what the POSIX cases see (posix/
test_posix_fallocate.py): the checksums at rest that punches and zeroings leave, which every read
and the scrubber compare; a corrupted block that a punch must not bless; and OST_FALLOCATE and
OST_SEEK on the wire, refusals included, with the OSS serving on."""

import errno
import os
import random
import re
import struct

import pytest

import loomwire as w
from loomutil import (FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE, KiB, MiB,
                      fallocate, object_path)
from test_integrity import CSUM_ERROR, EIO_ERROR, Model, assert_scrub_clean, flip_byte, layout_of

BLOCK = 64 * KiB
KEEP = FALLOC_FL_KEEP_SIZE
PUNCH = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
ZERO = FALLOC_FL_ZERO_RANGE
# A punch's line when the part of a block it keeps is bad.
FALLOC_CSUM_ERROR = r"ERROR: OST[0-9a-f]{4}: fallocate: object [0-9a-f]+ block \d+ .*checksum mismatch"


class SpaceModel(Model):
    """test_integrity's model of a file through the mount, with fallocate(2)."""

    def fallocate(self, mode, off, length):
        fallocate(self.fd, mode, off, length)
        end = off + length
        if mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE):
            hi = min(end, len(self.data))
            if off < hi:
                self.data[off:hi] = bytes(hi - off)
        if not mode & KEEP and end > len(self.data):
            self.data.extend(bytes(end - len(self.data)))


LAYOUTS = {"/s64k": ("-E", "-1", "-c", "4", "-S", "64k"), "/s1m": ("-E", "-1", "-c", "2", "-S", "1M"),
           "/one": ("-E", "-1", "-c", "1"), "/dom": ("-c", "3", "-S", "64k")}


def random_ops(rng, m, nops):
    """Writes, punches, zeroings and allocations anywhere (inside blocks, across them, past the
    end), with a truncation now and then."""
    for _ in range(nops):
        size = len(m.data)
        op = rng.random()
        off = rng.randrange(0, size + MiB)
        if rng.random() < 0.3:
            off -= off % BLOCK
        length = rng.choice([1, 100, 4096, BLOCK - 1, BLOCK, BLOCK + 1, 200000, MiB + 7])
        if op < 0.35:
            m.pwrite(off, os.urandom(length))
        elif op < 0.85:
            m.fallocate(rng.choice([0, KEEP, PUNCH, ZERO, ZERO | KEEP]), off, length)
        elif size:
            m.truncate(rng.randrange(0, size))


def test_punches_and_zeroings_leave_no_block_a_read_or_scrub_finds_bad(cluster, workdir):
    # Every block a punch or zeroing touched has a checksum that matches its bytes, or none (a
    # block covered whole is a hole); reads check them, and so does the scrub of every OST.
    mnt = cluster.mount()
    models = []
    for d, args in LAYOUTS.items():
        cluster.loom("mkdir", d)
        cluster.loom("setstripe", *args, d)
    rng = random.Random(20261201)
    for d in LAYOUTS:
        for i in range(2):
            m = SpaceModel(os.path.join(mnt, d.strip("/"), "r%d" % i))
            m.pwrite(0, os.urandom(3 * MiB + 5))
            random_ops(rng, m, 30)
            models.append(m)
    for m in models:
        m.close()
    for m in models:
        path = "/" + os.path.relpath(m.path, mnt)
        p = cluster.loom("get", path, "-", check=False, text=False)
        assert p.returncode == 0, "%s: read failed: %s" % (path, p.stderr)
        assert p.stdout == bytes(m.data), "%s: wrong data (%d bytes, want %d)" % (path, len(p.stdout), len(m.data))
    assert_scrub_clean(cluster)


@pytest.mark.allow_log(CSUM_ERROR, FALLOC_CSUM_ERROR, EIO_ERROR)
def test_a_punch_keeping_part_of_a_bad_block_is_eio_and_a_whole_one_heals_it(cluster, workdir):
    mnt = cluster.mount()
    cluster.loom("setstripe", "-E", "-1", "-c", "1", "/")
    data = os.urandom(4 * BLOCK)
    path = os.path.join(mnt, "f")
    with open(path, "wb") as f:
        f.write(data)
    idx, objid = layout_of(cluster, "/f").objects[0]
    flip_byte(object_path(cluster.ost_dir(idx), objid), 2 * BLOCK + 1000)
    fd = os.open(path, os.O_RDWR)
    try:
        # The part of block 2 a punch or zeroing would keep is bad: no new checksum for it.
        # Both ends are checked before anything changes: block 1, good, is left as it was.
        for mode, off, length in ((PUNCH, 2 * BLOCK + 10, 10), (ZERO | KEEP, 3 * BLOCK - 5, 10),
                                  (ZERO, BLOCK + 5, BLOCK)):
            with pytest.raises(OSError) as e:
                fallocate(fd, mode, off, length)
            assert e.value.errno == errno.EIO, "mode %#x over a bad block: %s" % (mode, e.value)
        assert re.search(r"ERROR: OST%04x: fallocate: object %x block 2 " % (idx, objid),
                         cluster.read_log(cluster.oss_name(idx)))
        # The other blocks are untouched and read fine.
        assert os.pread(fd, 2 * BLOCK, 0) == data[:2 * BLOCK]
        # A punch of the whole block heals it: zeros, and no checksum to fail.
        fallocate(fd, PUNCH, 2 * BLOCK, BLOCK)
    finally:
        os.close(fd)
    want = data[:2 * BLOCK] + bytes(BLOCK) + data[3 * BLOCK:]
    p = cluster.loom("get", "/f", "-", check=False, text=False)
    assert p.returncode == 0 and p.stdout == want, p.stderr
    with open(object_path(cluster.ost_dir(idx), objid) + ".crc", "rb") as f:
        crcs = struct.unpack("<4I", f.read(16))
    assert crcs[2] == 0, "the punched block kept a checksum: %#x" % crcs[2]
    assert crcs[1] == w.crc32c(data[BLOCK:2 * BLOCK]) and crcs[3] == w.crc32c(data[3 * BLOCK:])
    assert_scrub_clean(cluster)


# ---- the wire ---------------------------------------------------------------------------------

FRESH = 0xFA110C00   # object ids no file uses


def io_rep(body):
    return w.OST_IO_REP.unpack(body)


def test_ost_fallocate_and_seek_on_the_wire(cluster):
    host, port = cluster.oss_addr("oss1")
    idx = cluster.ost_index_of_dir(1)
    odir = cluster.ost_dir(idx)
    with w.Conn(host, port) as c:
        # Allocating creates the object, tagged with its file as a first write does.
        h, body, _ = c.call(w.OP["OST_FALLOCATE"], w.ost_io(idx, FRESH, 4096, 3 * BLOCK, ino=77, stripe_idx=2))
        assert h.status == 0, h
        assert io_rep(body)[:2] == (0, 4096 + 3 * BLOCK)
        obj = object_path(odir, FRESH)
        assert os.path.getsize(obj) == 4096 + 3 * BLOCK
        assert os.getxattr(obj, "user.loom.fid") == b"77:2"
        # Nothing to punch or zero in an object never written: still missing, no error.
        for mode in (PUNCH, ZERO, ZERO | KEEP):
            h, body, _ = c.call(w.OP["OST_FALLOCATE"], w.ost_io(idx, FRESH + 1, 0, BLOCK, flags=mode))
            assert h.status == 0 and io_rep(body) == (0, 0, 0), (mode, h)
        assert not os.path.exists(object_path(odir, FRESH + 1))
        # Seeks: a missing object has no data, and a hole anywhere; an allocated one is a hole
        # until written.
        h, _, _ = c.call(w.OP["OST_SEEK"], w.ost_io(idx, FRESH + 1, 123, flags=os.SEEK_DATA))
        assert h.status == -errno.ENXIO, h
        h, body, _ = c.call(w.OP["OST_SEEK"], w.ost_io(idx, FRESH + 1, 123, flags=os.SEEK_HOLE))
        assert h.status == 0 and io_rep(body)[0] == 123, h
        h, body, _ = c.call(w.OP["OST_WRITE"], w.ost_io(idx, FRESH, BLOCK, 4096), b"x" * 4096)
        assert h.status == 0, h
        h, body, _ = c.call(w.OP["OST_SEEK"], w.ost_io(idx, FRESH, 0, flags=os.SEEK_DATA))
        assert h.status == 0 and io_rep(body)[0] <= BLOCK, h
        h, body, _ = c.call(w.OP["OST_SEEK"], w.ost_io(idx, FRESH, BLOCK, flags=os.SEEK_HOLE))
        assert h.status == 0 and io_rep(body)[0] >= BLOCK + 4096, h
        h, body, _ = c.call(w.OP["OST_SEEK"], w.ost_io(idx, FRESH, 10 * BLOCK, flags=os.SEEK_HOLE))
        assert h.status == 0 and io_rep(body)[0] == 10 * BLOCK, "past the end: a hole right there"
        # Refusals: answered, and the connection serves on.
        bad = [
            (w.OST_IO.pack(idx, 0x08, FRESH, 0, BLOCK, 0, 0, 0, 0, 0), -errno.EOPNOTSUPP, "collapse"),
            (w.OST_IO.pack(idx, FALLOC_FL_PUNCH_HOLE, FRESH, 0, BLOCK, 0, 0, 0, 0, 0), -errno.EOPNOTSUPP, "punch without KEEP_SIZE"),
            (w.OST_IO.pack(idx, 0x80000000, FRESH, 0, BLOCK, 0, 0, 0, 0, 0), -errno.EOPNOTSUPP, "unknown bit"),
            (w.OST_IO.pack(idx, 0, FRESH, 0, 0, 0, 0, 0, 0, 0), -errno.EINVAL, "empty range"),
            (w.OST_IO.pack(idx, KEEP, FRESH, (1 << 62) - 10, 11, 0, 0, 0, 0, 0), -errno.EFBIG, "past 2^62"),
            (w.OST_IO.pack(idx, 0, 0, 0, BLOCK, 0, 0, 0, 0, 0), -errno.EINVAL, "object 0"),
            (w.OST_IO.pack(idx, 0, FRESH, 0, BLOCK, 0, 0, 0, 0, 0)[:40], -errno.EPROTO, "short body"),
        ]
        for body, status, what in bad:
            h, _, _ = c.call(w.OP["OST_FALLOCATE"], body)
            assert h.status == status, "%s: %r" % (what, h)
        for whence, status in ((0, -errno.EINVAL), (5, -errno.EINVAL), (os.SEEK_DATA, -errno.EFBIG)):
            off = (1 << 62) + 1 if status == -errno.EFBIG else 0
            h, _, _ = c.call(w.OP["OST_SEEK"], w.ost_io(idx, FRESH, off, flags=whence))
            assert h.status == status, "whence %d: %r" % (whence, h)
        assert c.ping() == 0
        h, body, _ = c.call(w.OP["OST_GETATTR"], w.ost_io(idx, FRESH))
        assert h.status == 0 and io_rep(body)[1] == 4096 + 3 * BLOCK
        # Truncation epochs are checked as a write's: an allocation made before a cut the object
        # has had is refused (-ESTALE), one made in an epoch whose cut has not come yet waits
        # (-EAGAIN), and neither changed anything.
        size = 4096 + 3 * BLOCK
        h, _, _ = c.call(w.OP["OST_PUNCH"], w.ost_io(idx, FRESH, 0, size, trunc_epoch=2))
        assert h.status == 0, h
        for epoch, status in ((1, -errno.ESTALE), (3, -errno.EAGAIN), (0, -errno.ESTALE)):
            h, _, _ = c.call(w.OP["OST_FALLOCATE"], w.ost_io(idx, FRESH, 0, size + BLOCK, trunc_epoch=epoch))
            assert h.status == status, "epoch %d: %r" % (epoch, h)
        h, body, _ = c.call(w.OP["OST_GETATTR"], w.ost_io(idx, FRESH))
        assert h.status == 0 and io_rep(body)[1] == size
        h, body, _ = c.call(w.OP["OST_FALLOCATE"], w.ost_io(idx, FRESH, 0, size + BLOCK, trunc_epoch=2))
        assert h.status == 0 and io_rep(body)[1] == size + BLOCK, h
    assert cluster.alive("oss1")

"""fallocate(2), and lseek(2) with SEEK_DATA / SEEK_HOLE (cases 1100-1139).

Every mode Loom does (allocate, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE with and without
KEEP_SIZE) on every shape of file: one held in its Data-on-MDT part alone, one across that part's
end, four stripes of 64 KiB (after the Data-on-MDT part) and of 1 MiB (none), one stripe; ranges
across stripe and Data-on-MDT boundaries and past the end; the modes Loom refuses; and walks of
sparse files with SEEK_DATA / SEEK_HOLE. Each case runs on Loom and on the local ext4 folder, and
what mount A changed is read back through mount B after A's close.

lseek(2) lets a file system report a hole as data (zeros are data too), never data as a hole;
where Loom and ext4 differ, they differ so and the cases allow it:
  - Loom reports its Data-on-MDT part as data up to what the MDS stores of it: a punch there
    writes zeros, which stay data (ext4 makes a hole);
  - ext4 reports a range allocated and never written (mode 0, ZERO_RANGE) as a hole, or as data
    once its pages were read; so do Loom's objects, which live on ext4.
Everything else is compared exactly: a walk of a file written in 4 KiB blocks gives those blocks.
"""

import errno
import os

import pytest

from posixutil import (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE, FALLOC_FL_KEEP_SIZE,
                       FALLOC_FL_NO_HIDE_STALE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_UNSHARE_RANGE,
                       FALLOC_FL_WRITE_ZEROES, FALLOC_FL_ZERO_RANGE, KiB, MiB, expect_errno,
                       fallocate, pread_all, read_file)

KEEP = FALLOC_FL_KEEP_SIZE
PUNCH = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
ZERO = FALLOC_FL_ZERO_RANGE
MODES = {"alloc": 0, "keep": KEEP, "punch": PUNCH, "zero": ZERO, "zero_keep": ZERO | KEEP}
BLOCK = 4 * KiB                # ext4's block: the grain of its holes
DOM = 64 * KiB                 # the default Data-on-MDT part


class Shape:
    """A layout for the case's directory (`loom setstripe` arguments), its Data-on-MDT size, the
    size of the file the mode cases start from, and ranges (offset, length) across its
    boundaries, in the order they are applied."""

    def __init__(self, args, dom, size, ranges):
        self.args, self.dom, self.size, self.ranges = args, dom, size, ranges


SHAPES = {
    # The default layout (64 KiB on the MDS, then one 4 MiB stripe), the file within the first.
    "dom": Shape((), DOM, 20000,
                 [(100, 5000), (4096, 8192), (15000, 10000), (30000, 4096), (40000, 30000)]),
    # Data-on-MDT, then 2 stripes of 64 KiB: ranges across the part's end and the stripes'.
    "cross": Shape(("-c", "2", "-S", "64K"), DOM, 300 * KiB + 5,
                   [(60 * KiB, 10 * KiB), (128 * KiB - 5, 20), (190 * KiB, 3 * 64 * KiB),
                    (250 * KiB, 100 * KiB), (500 * KiB, 64 * KiB), (0, 3)]),
    "s64k": Shape(("-c", "4", "-S", "64K"), DOM, MiB + 123,
                  [(64 * KiB - 1, 2), (200 * KiB + 3, 300 * KiB), (MiB - 10, 100),
                   (2 * MiB, 64 * KiB), (5, 70 * KiB)]),
    # No Data-on-MDT part: 4 stripes of 1 MiB, and one stripe.
    "s1m": Shape(("-E", "-1", "-c", "4", "-S", "1M"), 0, 5 * MiB + 7,
                 [(MiB - 100, 200), (3 * MiB + 512 * KiB, 3 * MiB), (64 * KiB, 64 * KiB + 1),
                  (9 * MiB, MiB)]),
    "c1": Shape(("-E", "-1", "-c", "1"), 0, 300 * KiB,
                [(1, 4095), (65535, 2), (100 * KiB, 300 * KiB), (512 * KiB, 4 * KiB)]),
}


def lay_out(root, shape):
    """Gives the case's directory the shape's layout (on Loom; a local folder has none)."""
    if root.kind == "loom" and shape.args:
        root.cluster.loom("setstripe", *shape.args, root.path)
    return shape


def dom_of(root, shape):
    """The Data-on-MDT size of the shape's files on this side (none on the local disk)."""
    return shape.dom if root.kind == "loom" else 0


class Model:
    """The bytes a file must hold, changed as fallocate(2) changes a file."""

    def __init__(self, data=b""):
        self.data = bytearray(data)

    def write(self, off, buf):
        if len(self.data) < off:
            self.data.extend(bytes(off - len(self.data)))
        self.data[off:off + len(buf)] = buf

    def fallocate(self, mode, off, length):
        end = off + length
        if mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE):
            hi = min(end, len(self.data))
            if off < hi:
                self.data[off:hi] = bytes(hi - off)
        if not mode & KEEP and end > len(self.data):
            self.data.extend(bytes(end - len(self.data)))


def new_file(path, data):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    assert os.write(fd, data) == len(data)
    return fd


def check_file(fd, path, m, what):
    assert os.fstat(fd).st_size == len(m.data), "%s: st_size" % what
    got = pread_all(fd, len(m.data) + 10, 0)
    assert got == bytes(m.data), "%s: wrong bytes (%d read, %d expected)" % (what, len(got), len(m.data))


def check_closed(root, name, m, what):
    """After the last close on A: both mounts read the model, and say its size."""
    for side, path in (("A", root.p(name)), ("B", root.q(name))):
        assert os.stat(path).st_size == len(m.data), "%s: st_size through %s" % (what, side)
        got = read_file(path)
        assert got == bytes(m.data), "%s: wrong bytes through %s" % (what, side)


def walk(fd):
    """[(start, end)] of the data SEEK_DATA and SEEK_HOLE report, from 0 to the end of the file."""
    size = os.fstat(fd).st_size
    segs, pos = [], 0
    while pos < size:
        try:
            d = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            assert e.errno == errno.ENXIO, "SEEK_DATA from %d: %s" % (pos, e)
            break
        h = os.lseek(fd, d, os.SEEK_HOLE)
        assert pos <= d < h <= size, "SEEK_DATA %d -> %d, SEEK_HOLE -> %d (size %d)" % (pos, d, h, size)
        segs.append((d, h))
        pos = h
    return segs


def check_walk(fd, data, segs):
    """What lseek(2) promises, whatever the file system: every hole reads as zeros (the model's
    bytes there are zeros), the end is a hole, and seeks from inside agree with the walk."""
    size = len(data)
    prev = 0
    for d, h in segs + [(size, size)]:
        assert data[prev:d].count(0) == d - prev, "data in the hole [%d, %d) (segments %s)" % (prev, d, segs)
        prev = h
    for d, h in segs:
        for x in sorted({d, (d + h) // 2, h - 1}):
            assert os.lseek(fd, x, os.SEEK_DATA) == x
            assert os.lseek(fd, x, os.SEEK_HOLE) == h, "SEEK_HOLE from %d inside [%d, %d)" % (x, d, h)
    holes = [(a[1], b[0]) for a, b in zip([(0, 0)] + segs, segs + [(size, size)]) if a[1] < b[0]]
    for lo, hi in holes:
        nxt = [d for d, _ in segs if d >= hi]
        for x in sorted({lo, (lo + hi) // 2, hi - 1}):
            assert os.lseek(fd, x, os.SEEK_HOLE) == x, "SEEK_HOLE from %d inside the hole [%d, %d)" % (x, lo, hi)
            if nxt:
                assert os.lseek(fd, x, os.SEEK_DATA) == nxt[0]
            else:
                expect_errno(errno.ENXIO, os.lseek, fd, x, os.SEEK_DATA)
    expect_errno(errno.ENXIO, os.lseek, fd, size, os.SEEK_DATA)
    expect_errno(errno.ENXIO, os.lseek, fd, size, os.SEEK_HOLE)


def blocks_walk(data, prefix=0):
    """The walk a file of these bytes written in whole 4 KiB blocks gives: the blocks that hold
    anything but zeros, merged, and [0, prefix) (a Data-on-MDT part's stored bytes) as data."""
    segs = []
    size = len(data)
    for b in range(0, size, BLOCK):
        if b < prefix or data[b:b + BLOCK].count(0) != len(data[b:b + BLOCK]):
            end = min(b + BLOCK, size)
            if segs and segs[-1][1] == b:
                segs[-1] = (segs[-1][0], end)
            else:
                segs.append((b, end))
    return segs


# ---- each mode, on every shape ------------------------------------------------------------------


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_1100_each_mode_on_every_shape_bytes_and_size(root, shape, mode):
    # Ranges inside the data, across Data-on-MDT and stripe boundaries, across the end and past
    # it, applied one after another through one descriptor; then read back through both mounts.
    s = lay_out(root, SHAPES[shape])
    m = Model(os.urandom(s.size))
    fd = new_file(root.p("f"), m.data)
    try:
        for off, length in s.ranges:
            fallocate(fd, MODES[mode], off, length)
            m.fallocate(MODES[mode], off, length)
            check_file(fd, root.p("f"), m, "%s %s(%d, %d)" % (shape, mode, off, length))
    finally:
        os.close(fd)
    check_closed(root, "f", m, "%s %s" % (shape, mode))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_1101_keep_size_past_the_end_allocates_and_keeps_st_size(root, shape):
    # The size stays; the space is there (st_blocks counts 1 MiB more, on both); reads stop at
    # the end; growing the file shows zeros there.
    lay_out(root, SHAPES[shape])
    data = os.urandom(200 * KiB)
    fd = new_file(root.p("f"), data)
    os.close(fd)
    before = os.stat(root.p("f")).st_blocks
    fd = os.open(root.p("f"), os.O_RDWR)
    try:
        fallocate(fd, KEEP, 2 * MiB, MiB)
        assert os.fstat(fd).st_size == len(data)
        assert pread_all(fd, 100, len(data)) == b""
        expect_errno(errno.ENXIO, os.lseek, fd, len(data), os.SEEK_DATA)
        assert os.lseek(fd, 0, os.SEEK_HOLE) == len(data)
    finally:
        os.close(fd)
    st = os.stat(root.p("f"))
    assert st.st_size == len(data)
    assert st.st_blocks - before == MiB // 512, "st_blocks %d -> %d for 1 MiB kept past the end" % (before, st.st_blocks)
    assert os.stat(root.q("f")).st_blocks == st.st_blocks
    os.truncate(root.p("f"), 4 * MiB)
    assert read_file(root.q("f")) == data + bytes(4 * MiB - len(data))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_1102_allocate_an_empty_file_grows_it_with_zeros(root, shape):
    # Mode 0 over [0, 1 MiB) of an empty file: 1 MiB of zeros, and of space on the OSTs (Loom's
    # Data-on-MDT part stores only what is written: its share is not space yet).
    s = lay_out(root, SHAPES[shape])
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fallocate(fd, 0, 0, MiB)
        assert os.fstat(fd).st_size == MiB
        assert pread_all(fd, MiB, 0) == bytes(MiB)
    finally:
        os.close(fd)
    for path in (root.p("f"), root.q("f")):
        st = os.stat(path)
        assert st.st_size == MiB
        assert st.st_blocks == (MiB - dom_of(root, s)) // 512, "st_blocks %d" % st.st_blocks
    assert read_file(root.q("f")) == bytes(MiB)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_1103_punch_frees_space_zero_range_keeps_it(root, shape):
    # 4 MiB written; a punch of [1 MiB, 2 MiB) gives back exactly its 2048 blocks, a zeroing of
    # [2 MiB, 3 MiB) none (the range stays allocated, as unwritten extents).
    lay_out(root, SHAPES[shape])
    data = os.urandom(4 * MiB)
    os.close(new_file(root.p("f"), data))
    before = os.stat(root.p("f")).st_blocks
    assert before >= (4 * MiB - DOM) // 512
    fd = os.open(root.p("f"), os.O_RDWR)
    try:
        fallocate(fd, PUNCH, MiB, MiB)
    finally:
        os.close(fd)
    punched = os.stat(root.p("f")).st_blocks
    assert before - punched == MiB // 512, "st_blocks %d -> %d after punching 1 MiB" % (before, punched)
    fd = os.open(root.p("f"), os.O_RDWR)
    try:
        fallocate(fd, ZERO | KEEP, 2 * MiB, MiB)
    finally:
        os.close(fd)
    assert os.stat(root.p("f")).st_blocks == punched
    assert os.stat(root.q("f")).st_blocks == punched
    want = data[:MiB] + bytes(2 * MiB) + data[3 * MiB:]
    assert read_file(root.q("f")) == want and read_file(root.p("f")) == want


@pytest.mark.parametrize("shape", ["dom", "cross", "s1m"])
def test_1104_ranges_past_the_end(root, shape):
    # Past the end: a punch or a KEEP_SIZE zeroing changes nothing; ZERO_RANGE and mode 0 grow
    # the file to the range's end, with zeros.
    lay_out(root, SHAPES[shape])
    data = os.urandom(10000)
    m = Model(data)
    fd = new_file(root.p("f"), data)
    try:
        for mode, off, length in ((PUNCH, 20000, 5000), (ZERO | KEEP, 12000, 100000),
                                  (ZERO, 30000, 50000), (0, 200000, 1), (PUNCH, 190000, 20000)):
            fallocate(fd, mode, off, length)
            m.fallocate(mode, off, length)
            check_file(fd, root.p("f"), m, "mode %#x (%d, %d)" % (mode, off, length))
    finally:
        os.close(fd)
    assert len(m.data) == 200001
    check_closed(root, "f", m, "past the end")


def test_1105_posix_fallocate_grows_the_file(root):
    lay_out(root, SHAPES["cross"])
    fd = new_file(root.p("f"), b"abc")
    try:
        os.posix_fallocate(fd, 100 * KiB, 100 * KiB)
        assert os.fstat(fd).st_size == 200 * KiB
        os.posix_fallocate(fd, 0, 10)            # inside: nothing changes
        assert os.fstat(fd).st_size == 200 * KiB
    finally:
        os.close(fd)
    assert read_file(root.q("f")) == b"abc" + bytes(200 * KiB - 3)


# ---- what is refused ----------------------------------------------------------------------------

# Refused on both sides: by the VFS (PUNCH_HOLE without KEEP_SIZE, modes mixed) or by both file
# systems (UNSHARE_RANGE: ext4 has no shared extents).
REFUSED_BY_BOTH = {
    "punch_without_keep_size": FALLOC_FL_PUNCH_HOLE,
    "punch_and_zero": FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE | KEEP,
    "collapse_keep_size": FALLOC_FL_COLLAPSE_RANGE | KEEP,
    "unshare": FALLOC_FL_UNSHARE_RANGE,
    "unshare_keep_size": FALLOC_FL_UNSHARE_RANGE | KEEP,
    "no_hide_stale": FALLOC_FL_NO_HIDE_STALE,
    "no_hide_stale_punch": FALLOC_FL_NO_HIDE_STALE | PUNCH,
    "unknown_bit": 0x100,
}
# Modes ext4 does and Loom does not (as Lustre 2.16: no collapse, insert or write-zeroes).
REFUSED_BY_LOOM = {
    "collapse": FALLOC_FL_COLLAPSE_RANGE,
    "insert": FALLOC_FL_INSERT_RANGE,
    "write_zeroes": FALLOC_FL_WRITE_ZEROES,
}


@pytest.mark.parametrize("name", sorted(REFUSED_BY_BOTH) + sorted(REFUSED_BY_LOOM))
def test_1110_other_modes_are_eopnotsupp_and_change_nothing(root, name):
    if name in REFUSED_BY_LOOM and root.kind != "loom":
        pytest.skip("ext4 does %s" % name)
    mode = REFUSED_BY_BOTH.get(name, REFUSED_BY_LOOM.get(name))
    lay_out(root, SHAPES["cross"])
    data = os.urandom(256 * KiB)
    fd = new_file(root.p("f"), data)
    try:
        expect_errno(errno.EOPNOTSUPP, fallocate, fd, mode, 64 * KiB, 64 * KiB)
        assert os.fstat(fd).st_size == len(data)
        assert pread_all(fd, len(data), 0) == data
    finally:
        os.close(fd)
    assert read_file(root.q("f")) == data


def test_1111_errors_as_a_local_file(root):
    lay_out(root, SHAPES["cross"])
    fd = new_file(root.p("f"), b"x" * 5000)
    try:
        expect_errno(errno.EINVAL, fallocate, fd, 0, 0, 0)
        expect_errno(errno.EINVAL, fallocate, fd, PUNCH, 0, -1)
        expect_errno(errno.EINVAL, fallocate, fd, 0, -1, 10)
        expect_errno(errno.EFBIG, fallocate, fd, 0, 1 << 62, 1 << 62)
        expect_errno(errno.EFBIG, fallocate, fd, KEEP, (1 << 62) - 4096, 8192)
        expect_errno(errno.EINVAL, os.lseek, fd, 0, 5)             # no such whence
    finally:
        os.close(fd)
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        for mode in (0, KEEP, PUNCH, ZERO):
            expect_errno(errno.EBADF, fallocate, fd, mode, 0, 10)
        # Seeking needs no write access.
        assert os.lseek(fd, 0, os.SEEK_DATA) == 0 and os.lseek(fd, 0, os.SEEK_HOLE) == 5000
    finally:
        os.close(fd)
    fd = os.open(root.path, os.O_RDONLY)
    try:
        expect_errno(errno.EBADF, fallocate, fd, 0, 0, 10)
    finally:
        os.close(fd)
    assert read_file(root.q("f")) == b"x" * 5000


# ---- SEEK_DATA and SEEK_HOLE --------------------------------------------------------------------


def test_1120_seek_on_empty_dense_and_short_files(root):
    lay_out(root, SHAPES["cross"])
    fd = os.open(root.p("empty"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        for whence in (os.SEEK_DATA, os.SEEK_HOLE):
            expect_errno(errno.ENXIO, os.lseek, fd, 0, whence)
            expect_errno(errno.ENXIO, os.lseek, fd, 1, whence)
    finally:
        os.close(fd)
    for size in (1, 4095, 20000, DOM, DOM + 1, 300 * KiB + 5):
        data = os.urandom(size)
        fd = new_file(root.p("f%d" % size), data)
        try:
            assert walk(fd) == [(0, size)], "a dense file of %d bytes" % size
            assert os.lseek(fd, size - 1, os.SEEK_DATA) == size - 1
            assert os.lseek(fd, size - 1, os.SEEK_HOLE) == size
            expect_errno(errno.ENXIO, os.lseek, fd, -1, os.SEEK_DATA)
            expect_errno(errno.ENXIO, os.lseek, fd, -1, os.SEEK_HOLE)
            expect_errno(errno.ENXIO, os.lseek, fd, size, os.SEEK_DATA)
            expect_errno(errno.ENXIO, os.lseek, fd, size + 12345, os.SEEK_HOLE)
            # SEEK_DATA moves the position, as any lseek does.
            assert os.lseek(fd, 7 % size, os.SEEK_DATA) == 7 % size
            assert os.lseek(fd, 0, os.SEEK_CUR) == 7 % size
        finally:
            os.close(fd)


# Sparse files written in whole 4 KiB blocks: (offset, length) of each piece, and the size the file
# is then truncated up to (a hole at the end). Within a Data-on-MDT part the pieces start at 0,
# so that the part's stored bytes are data on both sides.
SPARSE = {
    "dom": ([(0, 8 * KiB)], 60 * KiB),
    "cross": ([(0, DOM), (128 * KiB, 4 * KiB), (200 * KiB, 100 * KiB), (600 * KiB, 8 * KiB)], MiB),
    "s64k": ([(0, 16 * KiB), (64 * KiB, 64 * KiB), (320 * KiB, 4 * KiB), (384 * KiB + 8 * KiB, 4 * KiB),
              (2 * MiB, 3 * 64 * KiB), (5 * MiB - 4 * KiB, 4 * KiB)], 7 * MiB),
    "s1m": ([(0, 4 * KiB), (MiB + 512 * KiB, MiB), (4 * MiB, 4 * KiB), (4 * MiB + 64 * KiB, 4 * KiB),
             (9 * MiB, 2 * MiB)], 16 * MiB),
    "c1": ([(8 * KiB, 4 * KiB), (MiB, 64 * KiB), (5 * MiB, 4 * KiB)], 6 * MiB),
}


@pytest.mark.parametrize("shape", sorted(SPARSE))
def test_1121_sparse_file_walk_is_its_blocks(root, shape):
    # Written in 4 KiB blocks: both sides report exactly those blocks as data (across stripes
    # and objects), the rest as holes, and the end as one; through both mounts after the close.
    lay_out(root, SHAPES[shape])
    pieces, size = SPARSE[shape]
    m = Model()
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        for off, length in pieces:
            buf = os.urandom(length)
            assert os.pwrite(fd, buf, off) == length
            m.write(off, buf)
        os.ftruncate(fd, size)
        m.write(size, b"")
        want = blocks_walk(m.data)
        segs = walk(fd)        # before the close: the writes still on their way are waited for
        assert segs == want, "walk %s, want %s" % (segs, want)
        check_walk(fd, m.data, segs)
    finally:
        os.close(fd)
    for path in (root.p("f"), root.q("f")):
        fd = os.open(path, os.O_RDONLY)
        try:
            assert walk(fd) == want
        finally:
            os.close(fd)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_1122_walk_after_punches(root, shape):
    # A dense file punched in 4 KiB blocks: the punched blocks are holes on both, except within
    # Loom's Data-on-MDT part, whose stored bytes stay data (they are zeros now).
    s = lay_out(root, SHAPES[shape])
    size = max(s.size, 256 * KiB) // BLOCK * BLOCK + 100
    m = Model(os.urandom(size))
    fd = new_file(root.p("f"), m.data)
    try:
        for off, length in ((4 * KiB, 8 * KiB), (DOM - 4 * KiB, 8 * KiB), (128 * KiB, 64 * KiB),
                            (200 * KiB, size)):
            fallocate(fd, PUNCH, off, length)
            m.fallocate(PUNCH, off, length)
        want = blocks_walk(m.data, prefix=dom_of(root, s))
        segs = walk(fd)
        assert segs == want, "walk %s, want %s" % (segs, want)
        check_walk(fd, m.data, segs)
    finally:
        os.close(fd)
    check_closed(root, "f", m, "punched")
    fd = os.open(root.q("f"), os.O_RDONLY)
    try:
        assert walk(fd) == want
    finally:
        os.close(fd)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_1123_walk_over_allocated_and_zeroed_ranges(root, shape):
    # Ranges allocated or zeroed and never written may be holes or data (ext4: data once their
    # pages were read); only what lseek promises is checked, on both sides and both mounts.
    lay_out(root, SHAPES[shape])
    m = Model(os.urandom(100 * KiB))
    fd = new_file(root.p("f"), m.data)
    try:
        for mode, off, length in ((0, 300 * KiB, 200 * KiB), (ZERO, 20 * KiB, 40 * KiB),
                                  (ZERO, 700 * KiB, 64 * KiB), (KEEP, MiB, MiB)):
            fallocate(fd, mode, off, length)
            m.fallocate(mode, off, length)
        buf = os.urandom(5000)
        assert os.pwrite(fd, buf, 400 * KiB + 3) == len(buf)    # written inside an allocation
        m.write(400 * KiB + 3, buf)
        check_walk(fd, m.data, walk(fd))
        check_file(fd, root.p("f"), m, "allocated and zeroed")
    finally:
        os.close(fd)
    check_closed(root, "f", m, "allocated and zeroed")
    for path in (root.p("f"), root.q("f")):
        fd = os.open(path, os.O_RDONLY)
        try:
            check_walk(fd, m.data, walk(fd))
        finally:
            os.close(fd)


# ---- caches and other handles ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["punch", "zero_keep", "zero"])
def test_1130_pages_cached_on_a_and_b_do_not_survive_a_punch(root, mode):
    # A's kernel caches the pages through one descriptor while another punches them; B had read
    # the file before and opens it again after A's close.
    lay_out(root, SHAPES["s64k"])
    data = os.urandom(512 * KiB)
    m = Model(data)
    os.close(new_file(root.p("f"), data))
    assert read_file(root.q("f")) == data
    reader = os.open(root.p("f"), os.O_RDONLY)
    try:
        assert pread_all(reader, len(data), 0) == data            # A's pages, cached
        fd = os.open(root.p("f"), os.O_RDWR)
        try:
            for off, length in ((10 * KiB, 100 * KiB), (300 * KiB + 1, 5)):
                fallocate(fd, MODES[mode], off, length)
                m.fallocate(MODES[mode], off, length)
        finally:
            os.close(fd)
        assert pread_all(reader, len(data) + 1, 0) == bytes(m.data), "A's cached pages survived the punch"
    finally:
        os.close(reader)
    check_closed(root, "f", m, "cached on both")


def test_1131_writes_in_flight_land_before_the_punch_and_after(root):
    # Small writes go behind on Loom (answered before they land): a punch right after them must
    # zero what they wrote, through this descriptor and another, and a write after it land after.
    lay_out(root, SHAPES["s64k"])
    m = Model(os.urandom(2 * MiB))
    os.close(new_file(root.p("f"), m.data))
    fd = os.open(root.p("f"), os.O_RDWR)
    other = os.open(root.p("f"), os.O_RDWR)
    try:
        for i in range(16):
            buf = os.urandom(64 * KiB)
            assert os.pwrite(fd, buf, i * 128 * KiB) == len(buf)
            m.write(i * 128 * KiB, buf)
        fallocate(other, PUNCH, 32 * KiB, 2 * MiB)
        m.fallocate(PUNCH, 32 * KiB, 2 * MiB)
        buf = os.urandom(1000)
        assert os.pwrite(fd, buf, MiB + 17) == len(buf)
        m.write(MiB + 17, buf)
        check_file(other, root.p("f"), m, "after the punch")
    finally:
        os.close(fd)
        os.close(other)
    check_closed(root, "f", m, "writes around a punch")


def test_1132_allocated_then_written_is_data(root):
    # Writes into an allocated range are data for SEEK_DATA, and the allocation's size stays.
    lay_out(root, SHAPES["s1m"])
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fallocate(fd, 0, 0, 4 * MiB)
        buf = os.urandom(8 * KiB)
        assert os.pwrite(fd, buf, 2 * MiB + 4 * KiB) == len(buf)
        assert os.fstat(fd).st_size == 4 * MiB
        d = os.lseek(fd, 0, os.SEEK_DATA)
        assert d <= 2 * MiB + 4 * KiB
        assert os.lseek(fd, 2 * MiB + 4 * KiB, os.SEEK_DATA) == 2 * MiB + 4 * KiB
        assert os.lseek(fd, 2 * MiB + 4 * KiB, os.SEEK_HOLE) >= 2 * MiB + 12 * KiB
    finally:
        os.close(fd)
    assert read_file(root.q("f")) == bytes(2 * MiB + 4 * KiB) + buf + bytes(2 * MiB - 12 * KiB)

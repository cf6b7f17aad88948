"""Data: reads and writes at any offset, sparse files beyond 4 GiB, truncate, fsync (cases 0100-0129)."""

import errno
import os

from posixutil import GiB, KiB, MiB, expect_errno, pread_all, read_file, write_file


def test_0100_write_read_at_many_offsets(root):
    # Offsets around page, 64 KiB, 1 MiB and 4 MiB (the default stripe size) boundaries.
    offsets = [0, 1, 4095, 4096, 65535, 65536 + 7, MiB - 3, 4 * MiB - 5, 4 * MiB, 8 * MiB + 1, 13 * MiB - 1]
    pieces = {off: ("<%d>" % off).encode() * 3 for off in offsets}
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        for off, data in pieces.items():
            os.lseek(fd, off, os.SEEK_SET)
            assert os.write(fd, data) == len(data)
    finally:
        os.close(fd)
    expect = bytearray(max(o + len(d) for o, d in pieces.items()))
    for off, data in pieces.items():
        expect[off:off + len(data)] = data
    assert os.stat(root.p("f")).st_size == len(expect)
    got = read_file(root.p("f"))
    assert got == bytes(expect)


def test_0101_pwrite_pread_do_not_move_offset(root):
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"abcdef")
        assert os.pwrite(fd, b"XY", 1) == 2
        assert os.lseek(fd, 0, os.SEEK_CUR) == 6
        assert os.pread(fd, 4, 0) == b"aXYd"
        assert os.lseek(fd, 0, os.SEEK_CUR) == 6
        assert os.pread(fd, 100, 3) == b"def"
    finally:
        os.close(fd)


def test_0102_read_at_eof_returns_empty(root):
    write_file(root.p("f"), b"12345")
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        assert os.read(fd, 5) == b"12345"
        assert os.read(fd, 5) == b""
        assert os.pread(fd, 10, 5) == b""
        assert os.pread(fd, 10, 1 << 40) == b"", "a read far past EOF returns nothing"
    finally:
        os.close(fd)


def test_0103_read_empty_file_returns_empty(root):
    write_file(root.p("f"), b"")
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        assert os.read(fd, 4096) == b""
    finally:
        os.close(fd)


def test_0104_sparse_write_at_5gib(root):
    off = 5 * GiB
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        assert os.pwrite(fd, b"far-away", off) == 8
        assert os.fstat(fd).st_size == off + 8
    finally:
        os.close(fd)
    assert os.stat(root.p("f")).st_size == off + 8
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        assert os.pread(fd, 8, off) == b"far-away"
        assert os.pread(fd, 100, off) == b"far-away"
        assert os.pread(fd, 4096, 0) == bytes(4096)
        assert os.pread(fd, 4096, 4 * GiB - 2048) == bytes(4096), "the hole at 4 GiB is not zeros"
        assert os.pread(fd, 16, off - 16) == bytes(16)
    finally:
        os.close(fd)


def test_0105_write_across_4gib_boundary(root):
    off = 4 * GiB - 3
    data = b"0123456789"
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        assert os.pwrite(fd, data, off) == len(data)
    finally:
        os.close(fd)
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        assert os.pread(fd, 10, off) == data
        assert os.pread(fd, 4, 4 * GiB) == b"3456"
    finally:
        os.close(fd)
    assert os.stat(root.p("f")).st_size == 4 * GiB + 7


def test_0106_hole_in_the_middle_reads_zeros(root):
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"A" * 1000)
        os.pwrite(fd, b"B" * 1000, 9 * MiB)
    finally:
        os.close(fd)
    data = read_file(root.p("f"))
    assert len(data) == 9 * MiB + 1000
    assert data[:1000] == b"A" * 1000
    assert data[1000:9 * MiB] == bytes(9 * MiB - 1000)
    assert data[9 * MiB:] == b"B" * 1000


def test_0107_truncate_shrink_then_extend_reads_zeros(root):
    write_file(root.p("f"), b"X" * 100000)
    os.truncate(root.p("f"), 1000)
    assert os.stat(root.p("f")).st_size == 1000
    os.truncate(root.p("f"), 100000)
    data = read_file(root.p("f"))
    assert len(data) == 100000
    assert data[:1000] == b"X" * 1000
    assert data[1000:] == bytes(99000), "old bytes came back after shrink and extend"


def test_0108_ftruncate_shrink_then_extend_reads_zeros(root):
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"Y" * (5 * MiB))
        os.ftruncate(fd, 10)
        assert os.fstat(fd).st_size == 10
        os.ftruncate(fd, 5 * MiB)
        assert os.fstat(fd).st_size == 5 * MiB
        data = pread_all(fd, 5 * MiB, 0)
    finally:
        os.close(fd)
    assert data[:10] == b"Y" * 10
    assert data[10:] == bytes(5 * MiB - 10), "ftruncate extend read old data, not zeros"
    assert read_file(root.p("f")) == data


def test_0109_ftruncate_shrink_then_write_past_end_leaves_zero_gap(root):
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"Z" * 8192)
        os.ftruncate(fd, 100)
        os.pwrite(fd, b"end", 8000)
    finally:
        os.close(fd)
    data = read_file(root.p("f"))
    assert data == b"Z" * 100 + bytes(7900) + b"end"


def test_0110_truncate_extend_makes_zeros(root):
    write_file(root.p("f"), b"abc")
    os.truncate(root.p("f"), 3 * MiB + 5)
    st = os.stat(root.p("f"))
    assert st.st_size == 3 * MiB + 5
    assert read_file(root.p("f")) == b"abc" + bytes(3 * MiB + 2)


def test_0111_truncate_to_zero(root):
    write_file(root.p("f"), b"q" * 70000)
    os.truncate(root.p("f"), 0)
    assert os.stat(root.p("f")).st_size == 0
    assert read_file(root.p("f")) == b""


def test_0112_truncate_directory_eisdir(root):
    os.mkdir(root.p("d"))
    expect_errno(errno.EISDIR, os.truncate, root.p("d"), 0)


def test_0113_truncate_negative_einval(root):
    write_file(root.p("f"), b"abc")
    expect_errno(errno.EINVAL, os.truncate, root.p("f"), -1)
    fd = os.open(root.p("f"), os.O_RDWR)
    try:
        expect_errno(errno.EINVAL, os.ftruncate, fd, -1)
    finally:
        os.close(fd)
    assert read_file(root.p("f")) == b"abc"


def test_0114_truncate_missing_enoent(root):
    expect_errno(errno.ENOENT, os.truncate, root.p("missing"), 0)


def test_0115_ftruncate_readonly_descriptor_einval(root):
    write_file(root.p("f"), b"abc")
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        expect_errno(errno.EINVAL, os.ftruncate, fd, 0)
    finally:
        os.close(fd)
    assert read_file(root.p("f")) == b"abc"


def test_0116_fsync_succeeds_and_data_is_there(root):
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"synced" * 1000)
        os.fsync(fd)
        assert os.fstat(fd).st_size == 6000
        assert read_file(root.p("f")) == b"synced" * 1000
    finally:
        os.close(fd)


def test_0117_fdatasync_succeeds_and_data_is_there(root):
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"d" * 3000, 1 * MiB)
        os.fdatasync(fd)
        assert read_file(root.p("f"))[MiB:] == b"d" * 3000
    finally:
        os.close(fd)
    assert os.stat(root.p("f")).st_size == MiB + 3000


def test_0118_fsync_readonly_descriptor_and_directory(root):
    write_file(root.p("f"), b"x")
    os.mkdir(root.p("d"))
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fd = os.open(root.p("d"), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_0119_overwrite_in_place_keeps_the_rest(root):
    data = bytearray(os.urandom(3 * MiB + 17))
    write_file(root.p("f"), bytes(data))
    fd = os.open(root.p("f"), os.O_WRONLY)
    try:
        os.pwrite(fd, b"\xff" * 300, 2 * MiB - 100)
    finally:
        os.close(fd)
    data[2 * MiB - 100:2 * MiB + 200] = b"\xff" * 300
    assert read_file(root.p("f")) == bytes(data)
    assert os.stat(root.p("f")).st_size == len(data)


def test_0120_large_write_across_stripes_reads_back(root):
    data = os.urandom(9 * MiB + 12345)
    write_file(root.p("f"), data)
    assert os.stat(root.p("f")).st_size == len(data)
    assert read_file(root.p("f")) == data
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        assert os.pread(fd, 64 * KiB, 4 * MiB - 32 * KiB) == data[4 * MiB - 32 * KiB:4 * MiB + 32 * KiB]
    finally:
        os.close(fd)


def test_0121_ftruncate_shrink_of_open_file_drops_cached_tail(root):
    # The bytes past the new end must not come back from this descriptor's cache either.
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"C" * 8192)
        assert os.pread(fd, 8192, 0) == b"C" * 8192
        os.ftruncate(fd, 100)
        assert os.pread(fd, 8192, 0) == b"C" * 100
        os.ftruncate(fd, 8192)
        assert os.pread(fd, 8192, 0) == b"C" * 100 + bytes(8092)
    finally:
        os.close(fd)


def test_0122_fstat_of_written_open_file_reports_size(root):
    # stat while the writer still has the file open, then the size after close.
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"hello")
        assert os.fstat(fd).st_size == 5
        assert os.stat(root.p("f")).st_size == 5
        os.write(fd, b" world")
        assert os.fstat(fd).st_size == 11
    finally:
        os.close(fd)
    assert os.stat(root.p("f")).st_size == 11
    assert read_file(root.p("f")) == b"hello world"


def test_0123_lseek_end_after_write_is_the_new_size(root):
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"12345")
        assert os.lseek(fd, 0, os.SEEK_END) == 5
        os.write(fd, b"678")
        assert os.lseek(fd, 0, os.SEEK_END) == 8
    finally:
        os.close(fd)
    assert read_file(root.p("f")) == b"12345678"


def test_0124_other_descriptor_reads_data_before_writer_closes(root):
    # POSIX: a read after a write returned sees the data, from any descriptor on this node.
    w = os.open(root.p("f"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(w, b"not closed yet")
        r = os.open(root.p("f"), os.O_RDONLY)
        try:
            assert os.read(r, 100) == b"not closed yet"
        finally:
            os.close(r)
        assert os.stat(root.p("f")).st_size == 14
    finally:
        os.close(w)
    assert read_file(root.p("f")) == b"not closed yet"


def test_0125_sparse_file_st_blocks_counts_data_not_holes(root):
    # What du(1) shows and what cp/tar use to detect sparse files: a 5 GiB hole is not space used.
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"head" * 1024)
        os.pwrite(fd, b"tail", 5 * GiB)
    finally:
        os.close(fd)
    st = os.stat(root.p("f"))
    assert st.st_size == 5 * GiB + 4
    assert 0 < st.st_blocks * 512 < 64 * MiB, "st_blocks = %d (%d MiB) for 8 KiB of data in a 5 GiB file" % (
        st.st_blocks, st.st_blocks * 512 // MiB)


def test_0126_a_later_write_through_another_descriptor_wins(root):
    # POSIX: once a write returned, a later write of the same bytes, from any descriptor, is what
    # the file holds. Both writes go behind here (answered before the OST has them): the later
    # must not be overtaken by the earlier one still in flight. Lost 2 times in 3 before the fix.
    for t in range(20):
        p = root.p("f%d" % t)
        a = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        b = os.open(p, os.O_WRONLY)
        body, patch = os.urandom(300 * KiB), os.urandom(4 * KiB)
        try:
            os.pwrite(a, body, 0)
            os.pwrite(b, patch, 100 * KiB)
        finally:
            os.close(b)
            os.close(a)
        want = body[:100 * KiB] + patch + body[104 * KiB:]
        assert read_file(p) == want, "trial %d: the earlier write's bytes won" % t
        assert read_file(root.q("f%d" % t)) == want, "trial %d: the other mount reads the earlier bytes" % t

"""open(2): flags and errors (cases 0001-0029)."""

import errno
import mmap
import os
import stat

from posixutil import expect_errno, read_file, touch, write_file


def test_0001_open_creat_makes_empty_regular_file(root):
    fd = os.open(root.p("f"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    assert stat.S_ISREG(st.st_mode) and st.st_size == 0
    assert os.listdir(root.path) == ["f"]


def test_0002_open_creat_mode_is_masked_by_umask(root):
    os.close(os.open(root.p("f"), os.O_WRONLY | os.O_CREAT, 0o666))   # the session umask is 022
    os.close(os.open(root.p("g"), os.O_WRONLY | os.O_CREAT, 0o640))
    assert stat.S_IMODE(os.stat(root.p("f")).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(root.p("g")).st_mode) == 0o640


def test_0003_open_creat_existing_keeps_contents(root):
    write_file(root.p("f"), b"hello")
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        assert os.read(fd, 100) == b"hello"
    finally:
        os.close(fd)
    assert stat.S_IMODE(os.stat(root.p("f")).st_mode) == 0o644, "O_CREAT changed an existing file's mode"


def test_0004_open_excl_existing_eexist(root):
    write_file(root.p("f"), b"keep")
    expect_errno(errno.EEXIST, os.open, root.p("f"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    assert read_file(root.p("f")) == b"keep"


def test_0005_open_excl_new_creates(root):
    fd = os.open(root.p("f"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"x")
    os.close(fd)
    assert read_file(root.p("f")) == b"x"


def test_0006_open_excl_on_dangling_symlink_eexist(root):
    os.symlink("nowhere", root.p("l"))
    expect_errno(errno.EEXIST, os.open, root.p("l"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    assert not os.path.lexists(root.p("nowhere"))


def test_0007_open_excl_on_directory_eexist(root):
    os.mkdir(root.p("d"))
    expect_errno(errno.EEXIST, os.open, root.p("d"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)


def test_0008_open_trunc_empties_file(root):
    write_file(root.p("f"), b"x" * 10000)
    fd = os.open(root.p("f"), os.O_WRONLY | os.O_TRUNC)
    try:
        assert os.fstat(fd).st_size == 0
        os.write(fd, b"ab")
    finally:
        os.close(fd)
    assert os.stat(root.p("f")).st_size == 2
    assert read_file(root.p("f")) == b"ab"


def test_0009_open_creat_trunc_existing_empties(root):
    write_file(root.p("f"), b"y" * 5000)
    os.close(os.open(root.p("f"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
    assert read_file(root.p("f")) == b""


def test_0010_open_append_writes_at_end(root):
    write_file(root.p("f"), b"0123456789")
    fd = os.open(root.p("f"), os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b"AB")
        os.write(fd, b"CD")
    finally:
        os.close(fd)
    assert read_file(root.p("f")) == b"0123456789ABCD"


def test_0011_open_append_ignores_lseek(root):
    write_file(root.p("f"), b"0123456789")
    fd = os.open(root.p("f"), os.O_RDWR | os.O_APPEND)
    try:
        os.lseek(fd, 2, os.SEEK_SET)
        os.write(fd, b"XY")
        assert os.lseek(fd, 0, os.SEEK_CUR) == 12, "the offset after an O_APPEND write is the new end"
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, b"Z")
    finally:
        os.close(fd)
    assert read_file(root.p("f")) == b"0123456789XYZ"


def test_0012_open_append_sees_other_writers_end(root):
    # Two descriptors: an O_APPEND write lands after what the other one wrote.
    write_file(root.p("f"), b"")
    a = os.open(root.p("f"), os.O_WRONLY | os.O_APPEND)
    b = os.open(root.p("f"), os.O_WRONLY)
    try:
        os.write(a, b"1")
        os.pwrite(b, b"2222", 1)
        os.write(a, b"3")
    finally:
        os.close(a)
        os.close(b)
    assert read_file(root.p("f")) == b"122223"


def test_0013_open_direct_aligned_write_and_read(root):
    size = 1 << 20
    wbuf = mmap.mmap(-1, size)            # anonymous mappings are page-aligned
    pattern = bytes(range(256)) * (size // 256)
    wbuf[:] = pattern
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        assert os.write(fd, wbuf) == size
        assert os.pwrite(fd, memoryview(wbuf)[:4096], 2 * size) == 4096
        rbuf = mmap.mmap(-1, size)
        os.lseek(fd, 0, os.SEEK_SET)
        assert os.readv(fd, [rbuf]) == size
        assert rbuf[:] == pattern
        rbuf2 = mmap.mmap(-1, 8192)
        assert os.preadv(fd, [rbuf2], 2 * size) == 4096, "an O_DIRECT read ends at EOF"
        assert rbuf2[:4096] == pattern[:4096]
        assert os.preadv(fd, [rbuf2], size) == 8192
        assert rbuf2[:] == bytes(8192), "the hole between the O_DIRECT writes is not zeros"
    finally:
        os.close(fd)
    assert os.stat(root.p("f")).st_size == 2 * size + 4096
    with open(root.p("f"), "rb") as f:          # buffered reads agree with the O_DIRECT writes
        assert f.read(size) == pattern


def test_0014_open_rdonly_write_ebadf(root):
    write_file(root.p("f"), b"data")
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        expect_errno(errno.EBADF, os.write, fd, b"x")
    finally:
        os.close(fd)
    assert read_file(root.p("f")) == b"data"


def test_0015_open_wronly_read_ebadf(root):
    write_file(root.p("f"), b"data")
    fd = os.open(root.p("f"), os.O_WRONLY)
    try:
        expect_errno(errno.EBADF, os.read, fd, 4)
    finally:
        os.close(fd)


def test_0016_open_missing_enoent(root):
    expect_errno(errno.ENOENT, os.open, root.p("missing"), os.O_RDONLY)
    expect_errno(errno.ENOENT, os.open, root.p("missing"), os.O_WRONLY)


def test_0017_open_directory_for_write_eisdir(root):
    os.mkdir(root.p("d"))
    expect_errno(errno.EISDIR, os.open, root.p("d"), os.O_WRONLY)
    expect_errno(errno.EISDIR, os.open, root.p("d"), os.O_RDWR)
    expect_errno(errno.EISDIR, os.open, root.p("d"), os.O_WRONLY | os.O_CREAT, 0o644)


def test_0018_open_directory_rdonly_works(root):
    os.mkdir(root.p("d"))
    fd = os.open(root.p("d"), os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert stat.S_ISDIR(os.fstat(fd).st_mode)
        expect_errno(errno.EISDIR, os.read, fd, 10)
    finally:
        os.close(fd)


def test_0019_open_path_through_file_enotdir(root):
    touch(root.p("f"))
    expect_errno(errno.ENOTDIR, os.open, root.p("f", "x"), os.O_RDONLY)
    expect_errno(errno.ENOTDIR, os.open, root.p("f", "x"), os.O_WRONLY | os.O_CREAT, 0o644)


def test_0020_open_o_directory_on_file_enotdir(root):
    touch(root.p("f"))
    expect_errno(errno.ENOTDIR, os.open, root.p("f"), os.O_RDONLY | os.O_DIRECTORY)


def test_0021_open_name_256_bytes_enametoolong(root):
    expect_errno(errno.ENAMETOOLONG, os.open, root.p("n" * 256), os.O_WRONLY | os.O_CREAT, 0o644)
    expect_errno(errno.ENAMETOOLONG, os.open, root.p("n" * 256), os.O_RDONLY)
    assert os.listdir(root.path) == []


def test_0022_open_name_255_bytes_works(root):
    name = "n" * 255
    write_file(root.p(name), b"long")
    assert os.listdir(root.path) == [name]
    assert read_file(root.p(name)) == b"long"


def test_0023_open_creat_in_missing_dir_enoent(root):
    expect_errno(errno.ENOENT, os.open, root.p("nodir", "f"), os.O_WRONLY | os.O_CREAT, 0o644)
    assert os.listdir(root.path) == []


def test_0024_open_rdonly_keeps_data_rdwr_trunc_empties(root):
    # O_RDWR|O_TRUNC truncates; a plain O_RDONLY open does not touch the data.
    write_file(root.p("f"), b"abc")
    os.close(os.open(root.p("f"), os.O_RDONLY))
    assert read_file(root.p("f")) == b"abc"
    os.close(os.open(root.p("f"), os.O_RDWR | os.O_TRUNC))
    assert read_file(root.p("f")) == b""


def test_0025_open_creat_utf8_and_odd_names(root):
    names = ["caf\u00e9", "sp ace", "new\nline", "-dash", ".hidden", "\u65e5\u672c"]
    for n in names:
        write_file(root.p(n), n.encode())
    assert sorted(os.listdir(root.path)) == sorted(names)
    for n in names:
        assert read_file(root.p(n)) == n.encode()

"""Extended attributes: user.*, trusted.*, security.*, flags and errors (cases 0400-0429)."""

import errno
import os
import shutil
import tempfile

import pytest

from posixutil import KiB, assert_as, expect_errno, getxattr_into, touch, write_file

XATTR_SIZE_MAX = 64 * KiB      # the largest value Linux passes to a file system


def user_xattrs(path, follow=True):
    return sorted(n for n in os.listxattr(path, follow_symlinks=follow) if n.startswith("user."))


def test_0400_user_xattr_set_get(root):
    touch(root.p("f"))
    os.setxattr(root.p("f"), "user.color", b"blue")
    assert os.getxattr(root.p("f"), "user.color") == b"blue"


def test_0401_user_xattr_listed(root):
    touch(root.p("f"))
    assert user_xattrs(root.p("f")) == []
    os.setxattr(root.p("f"), "user.a", b"1")
    os.setxattr(root.p("f"), "user.b", b"22")
    assert user_xattrs(root.p("f")) == ["user.a", "user.b"]


def test_0402_user_xattr_remove(root):
    touch(root.p("f"))
    os.setxattr(root.p("f"), "user.a", b"1")
    os.setxattr(root.p("f"), "user.b", b"2")
    os.removexattr(root.p("f"), "user.a")
    assert user_xattrs(root.p("f")) == ["user.b"]
    expect_errno(errno.ENODATA, os.getxattr, root.p("f"), "user.a")


def test_0403_xattr_create_on_existing_eexist(root):
    touch(root.p("f"))
    os.setxattr(root.p("f"), "user.a", b"old", os.XATTR_CREATE)
    expect_errno(errno.EEXIST, os.setxattr, root.p("f"), "user.a", b"new", os.XATTR_CREATE)
    assert os.getxattr(root.p("f"), "user.a") == b"old"


def test_0404_xattr_replace_on_missing_enodata(root):
    touch(root.p("f"))
    expect_errno(errno.ENODATA, os.setxattr, root.p("f"), "user.a", b"v", os.XATTR_REPLACE)
    assert user_xattrs(root.p("f")) == []


def test_0405_xattr_replace_existing_changes_value(root):
    touch(root.p("f"))
    os.setxattr(root.p("f"), "user.a", b"a-much-longer-old-value")
    os.setxattr(root.p("f"), "user.a", b"new", os.XATTR_REPLACE)
    assert os.getxattr(root.p("f"), "user.a") == b"new"
    os.setxattr(root.p("f"), "user.a", b"newer")
    assert os.getxattr(root.p("f"), "user.a") == b"newer"
    assert user_xattrs(root.p("f")) == ["user.a"]


def test_0406_getxattr_missing_enodata(root):
    touch(root.p("f"))
    expect_errno(errno.ENODATA, os.getxattr, root.p("f"), "user.nothing")


def test_0407_removexattr_missing_enodata(root):
    touch(root.p("f"))
    expect_errno(errno.ENODATA, os.removexattr, root.p("f"), "user.nothing")


def test_0408_xattr_value_of_64kib(root):
    if root.kind == "local":
        # ext4 without ea_inode keeps values within one block; tmpfs holds XATTR_SIZE_MAX, so the
        # local reference for this case is a tmpfs directory.
        base = tempfile.mkdtemp(dir="/dev/shm")
    else:
        base = root.path
    try:
        f = os.path.join(base, "f")
        touch(f)
        value = bytes((i * 7) & 0xFF for i in range(XATTR_SIZE_MAX))
        os.setxattr(f, "user.big", value)
        assert os.getxattr(f, "user.big") == value
        assert getxattr_into(f, "user.big", 0) == XATTR_SIZE_MAX
        expect_errno(errno.E2BIG, os.setxattr, f, "user.huge", value + b"!")
    finally:
        if base != root.path:
            shutil.rmtree(base)


def test_0409_getxattr_small_buffer_erange(root):
    touch(root.p("f"))
    os.setxattr(root.p("f"), "user.a", b"0123456789")
    expect_errno(errno.ERANGE, getxattr_into, root.p("f"), "user.a", 4)
    assert getxattr_into(root.p("f"), "user.a", 0) == 10, "size 0 asks for the value's length"
    assert getxattr_into(root.p("f"), "user.a", 10) == b"0123456789"


def test_0410_xattr_binary_and_empty_values(root):
    touch(root.p("f"))
    os.setxattr(root.p("f"), "user.bin", b"\x00\xff\x00\n")
    os.setxattr(root.p("f"), "user.empty", b"")
    assert os.getxattr(root.p("f"), "user.bin") == b"\x00\xff\x00\n"
    assert os.getxattr(root.p("f"), "user.empty") == b""
    assert user_xattrs(root.p("f")) == ["user.bin", "user.empty"]


def test_0411_xattr_on_directory(root):
    os.mkdir(root.p("d"))
    os.setxattr(root.p("d"), "user.dir", b"yes")
    assert os.getxattr(root.p("d"), "user.dir") == b"yes"
    assert user_xattrs(root.p("d")) == ["user.dir"]


def test_0412_trusted_xattr_as_root(root):
    touch(root.p("f"))
    os.setxattr(root.p("f"), "trusted.t", b"root-only")
    assert os.getxattr(root.p("f"), "trusted.t") == b"root-only"
    assert "trusted.t" in os.listxattr(root.p("f"))
    os.removexattr(root.p("f"), "trusted.t")
    assert "trusted.t" not in os.listxattr(root.p("f"))


def test_0413_security_xattr_as_root(root):
    touch(root.p("f"))
    os.setxattr(root.p("f"), "security.s", b"label")
    assert os.getxattr(root.p("f"), "security.s") == b"label"
    assert "security.s" in os.listxattr(root.p("f"))


def test_0414_user_xattr_on_symlink_eperm(root):
    touch(root.p("f"))
    os.symlink("f", root.p("l"))
    expect_errno(errno.EPERM, os.setxattr, root.p("l"), "user.a", b"v", follow_symlinks=False)
    assert user_xattrs(root.p("f")) == []
    os.setxattr(root.p("l"), "user.a", b"v")          # followed: lands on the target
    assert os.getxattr(root.p("f"), "user.a") == b"v"


def test_0415_nonroot_trusted_xattr_not_listed(root):
    touch(root.p("f"))
    os.chmod(root.p("f"), 0o644)
    os.setxattr(root.p("f"), "trusted.hidden", b"x")
    os.setxattr(root.p("f"), "user.seen", b"y")
    f = root.p("f")

    def check():
        names = os.listxattr(f)
        if "trusted.hidden" in names:
            return 1
        if "user.seen" not in names:
            return 2
        return 0
    assert_as(0, check)


def test_0416_nonroot_trusted_xattr_set_eperm(root):
    touch(root.p("f"))
    os.chown(root.p("f"), 1000, 1000)
    f = root.p("f")
    assert_as(errno.EPERM, lambda: os.setxattr(f, "trusted.x", b"v"))
    assert "trusted.x" not in os.listxattr(f)


def test_0417_nonroot_trusted_xattr_get_enodata(root):
    # An unprivileged reader cannot see trusted.* at all: it reads as absent.
    touch(root.p("f"))
    os.setxattr(root.p("f"), "trusted.hidden", b"x")
    f = root.p("f")
    assert_as(errno.ENODATA, lambda: os.getxattr(f, "trusted.hidden"))


def test_0418_nonroot_user_xattr_needs_write_permission(root):
    touch(root.p("f"))
    os.chmod(root.p("f"), 0o644)
    os.setxattr(root.p("f"), "user.a", b"v")
    f = root.p("f")
    assert_as(errno.EACCES, lambda: os.setxattr(f, "user.b", b"v"))
    assert_as(0, lambda: None if os.getxattr(f, "user.a") == b"v" else 1)
    os.chmod(root.p("f"), 0o600)
    assert_as(errno.EACCES, lambda: os.getxattr(f, "user.a"))
    os.chmod(root.p("f"), 0o666)
    assert_as(0, lambda: os.setxattr(f, "user.b", b"w"))
    assert os.getxattr(f, "user.b") == b"w"


def test_0419_xattr_missing_file_enoent(root):
    expect_errno(errno.ENOENT, os.getxattr, root.p("missing"), "user.a")
    expect_errno(errno.ENOENT, os.setxattr, root.p("missing"), "user.a", b"v")
    expect_errno(errno.ENOENT, os.listxattr, root.p("missing"))


def test_0420_xattr_unknown_namespace_eopnotsupp(root):
    touch(root.p("f"))
    expect_errno(errno.EOPNOTSUPP, os.setxattr, root.p("f"), "bogus.a", b"v")


def test_0421_xattr_name_too_long_erange(root):
    touch(root.p("f"))
    expect_errno(errno.ERANGE, os.setxattr, root.p("f"), "user." + "n" * 256, b"v")


def test_0422_xattr_survives_rename_and_is_shared_by_links(root):
    write_file(root.p("f"), b"x")
    os.setxattr(root.p("f"), "user.k", b"v")
    os.rename(root.p("f"), root.p("g"))
    os.link(root.p("g"), root.p("h"))
    assert os.getxattr(root.p("h"), "user.k") == b"v"
    os.setxattr(root.p("h"), "user.k", b"w")
    assert os.getxattr(root.p("g"), "user.k") == b"w"


def test_0423_many_xattrs_on_one_file(root):
    touch(root.p("f"))
    names = ["user.attr%03d" % i for i in range(50)]
    for n in names:
        os.setxattr(root.p("f"), n, n.encode())
    assert user_xattrs(root.p("f")) == names
    for n in names:
        assert os.getxattr(root.p("f"), n) == n.encode()


def test_0424_setxattr_moves_ctime(root):
    from posixutil import tick
    touch(root.p("f"))
    tick(root.p("f"))
    before = os.stat(root.p("f")).st_ctime_ns
    os.setxattr(root.p("f"), "user.a", b"v")
    assert os.stat(root.p("f")).st_ctime_ns > before


@pytest.mark.parametrize("ns", ["user", "trusted"])
def test_0425_xattr_on_fd(root, ns):
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.setxattr(fd, ns + ".fd", b"via-fd")
        assert os.getxattr(fd, ns + ".fd") == b"via-fd"
        assert ns + ".fd" in os.listxattr(fd)
        os.removexattr(fd, ns + ".fd")
        expect_errno(errno.ENODATA, os.getxattr, fd, ns + ".fd")
    finally:
        os.close(fd)

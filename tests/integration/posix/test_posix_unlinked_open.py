"""A file unlinked while open lives until its last close (cases 0700-0709)."""

import errno
import os

from posixutil import MiB, expect_errno, pread_all, write_file


def test_0700_unlinked_open_file_stays_readable_and_writable(root):
    write_file(root.p("f"), b"before")
    fd = os.open(root.p("f"), os.O_RDWR)
    try:
        os.unlink(root.p("f"))
        assert os.listdir(root.path) == []
        expect_errno(errno.ENOENT, os.stat, root.p("f"))
        assert os.pread(fd, 6, 0) == b"before"
        os.pwrite(fd, b"-after", 6)
        assert os.pread(fd, 100, 0) == b"before-after"
        st = os.fstat(fd)
        assert st.st_nlink == 0, "an unlinked open file has st_nlink 0"
        assert st.st_size == 12
    finally:
        os.close(fd)
    assert os.listdir(root.path) == []


def test_0701_unlinked_open_file_large_data(root):
    data = os.urandom(5 * MiB + 1)
    write_file(root.p("f"), data)
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        os.unlink(root.p("f"))
        assert pread_all(fd, len(data), 0) == data
    finally:
        os.close(fd)


def test_0702_unlinked_file_other_descriptor_keeps_it(root):
    # Two descriptors: closing one does not end the file while the other is open.
    write_file(root.p("f"), b"two fds")
    a = os.open(root.p("f"), os.O_RDONLY)
    b = os.open(root.p("f"), os.O_RDWR)
    try:
        os.unlink(root.p("f"))
        os.close(a)
        a = None
        assert os.pread(b, 100, 0) == b"two fds"
        os.ftruncate(b, 3)
        assert os.pread(b, 100, 0) == b"two"
    finally:
        if a is not None:
            os.close(a)
        os.close(b)


def test_0703_name_reused_while_unlinked_file_open(root):
    write_file(root.p("f"), b"old inode")
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        os.unlink(root.p("f"))
        write_file(root.p("f"), b"new inode")
        assert os.pread(fd, 100, 0) == b"old inode"
        with open(root.p("f"), "rb") as g:
            assert g.read() == b"new inode"
    finally:
        os.close(fd)
    with open(root.p("f"), "rb") as g:
        assert g.read() == b"new inode"


def test_0704_replaced_by_rename_while_open(root):
    write_file(root.p("f"), b"victim")
    write_file(root.p("g"), b"winner")
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        os.rename(root.p("g"), root.p("f"))
        assert os.pread(fd, 100, 0) == b"victim"
        assert os.fstat(fd).st_nlink == 0
    finally:
        os.close(fd)
    with open(root.p("f"), "rb") as g:
        assert g.read() == b"winner"


def test_0705_unlinked_via_other_mount_while_open(root):
    write_file(root.p("f"), b"remote unlink")
    fd = os.open(root.p("f"), os.O_RDWR)
    try:
        os.unlink(root.q("f"))
        assert os.pread(fd, 100, 0) == b"remote unlink"
        os.pwrite(fd, b"!", 13)
        assert os.pread(fd, 100, 0) == b"remote unlink!"
    finally:
        os.close(fd)
    expect_errno(errno.ENOENT, os.stat, root.q("f"))


def test_0706_unlinked_hard_link_keeps_nlink_of_others(root):
    write_file(root.p("f"), b"x")
    os.link(root.p("f"), root.p("g"))
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        os.unlink(root.p("f"))
        assert os.fstat(fd).st_nlink == 1
        assert os.stat(root.p("g")).st_nlink == 1
    finally:
        os.close(fd)

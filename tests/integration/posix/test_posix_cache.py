"""Caches that stay correct across two mounts of one file system (cases 1000-1029).

Data is close-to-open: what one mount wrote and closed, a later open on the other mount reads, even
when that mount cached the old pages or the old size. Names and attributes changed through one
mount show on the other within the attribute/entry timeout: those cases poll with a deadline
(posixutil.poll) and never assert on how long it took. Each mount sees its own changes at once.
On the local root the second mount is a bind mount, where all of this holds trivially.
"""

import errno
import os
import stat

from posixutil import (KiB, MiB, exists, expect_errno, poll, read_file, resident_pages, touch,
                       write_file)

DEADLINE = 10.0      # seconds: far beyond the 1 s attribute and entry timeouts


def _overwrite(path, data):
    fd = os.open(path, os.O_WRONLY)
    try:
        assert os.pwrite(fd, data, 0) == len(data)
    finally:
        os.close(fd)


def test_1000_data_closed_on_a_read_on_b(root):
    data = os.urandom(3 * MiB + 5)
    write_file(root.p("f"), data)
    assert read_file(root.q("f")) == data


def test_1001_b_cached_old_data_sees_new_after_a_close(root):
    # Same size, so only the contents (and mtime) differ: B's page cache must not serve the old.
    write_file(root.p("f"), b"A" * (256 * KiB))
    assert read_file(root.q("f")) == b"A" * (256 * KiB)
    _overwrite(root.p("f"), b"B" * (256 * KiB))
    assert read_file(root.q("f")) == b"B" * (256 * KiB), "mount B served stale cached pages"


def test_1002_b_cached_old_data_partial_rewrite(root):
    write_file(root.p("f"), b"x" * (64 * KiB))
    assert read_file(root.q("f")) == b"x" * (64 * KiB)
    fd = os.open(root.p("f"), os.O_WRONLY)
    try:
        os.pwrite(fd, b"NEW", 4096 * 3 + 10)
    finally:
        os.close(fd)
    got = read_file(root.q("f"))
    assert got[4096 * 3 + 10:4096 * 3 + 13] == b"NEW"
    assert got == b"x" * (4096 * 3 + 10) + b"NEW" + b"x" * (64 * KiB - 4096 * 3 - 13)


def test_1003_b_cached_size_sees_growth_after_a_close(root):
    write_file(root.p("f"), b"short")
    assert os.stat(root.q("f")).st_size == 5 and read_file(root.q("f")) == b"short"
    fd = os.open(root.p("f"), os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b" and now much longer" * 100)
    finally:
        os.close(fd)
    got = read_file(root.q("f"))
    assert got == b"short" + b" and now much longer" * 100, "B read %d bytes" % len(got)


def test_1004_b_cached_size_sees_truncate_on_a(root):
    write_file(root.p("f"), b"z" * 100000)
    assert read_file(root.q("f")) == b"z" * 100000
    os.truncate(root.p("f"), 10)
    assert read_file(root.q("f")) == b"z" * 10


def test_1005_write_on_b_seen_on_a_which_cached_it(root):
    write_file(root.p("f"), b"1" * 8192)
    assert read_file(root.p("f")) == b"1" * 8192
    _overwrite(root.q("f"), b"2" * 8192)
    assert read_file(root.p("f")) == b"2" * 8192


def test_1006_create_on_a_seen_on_b(root):
    os.listdir(root.other)                   # B has looked at the directory before
    expect_errno(errno.ENOENT, os.stat, root.q("new"))
    write_file(root.p("new"), b"hello")
    assert poll(lambda: exists(root.q("new")), DEADLINE), "B never saw the new name"
    assert poll(lambda: "new" in os.listdir(root.other), DEADLINE)
    assert read_file(root.q("new")) == b"hello"


def test_1007_rename_on_a_seen_on_b(root):
    write_file(root.p("old"), b"r")
    assert read_file(root.q("old")) == b"r"
    os.rename(root.p("old"), root.p("renamed"))
    assert poll(lambda: not exists(root.q("old")), DEADLINE), "B still sees the old name"
    assert poll(lambda: exists(root.q("renamed")), DEADLINE)
    assert poll(lambda: sorted(os.listdir(root.other)) == ["renamed"], DEADLINE)
    assert read_file(root.q("renamed")) == b"r"


def test_1008_unlink_on_a_seen_on_b(root):
    write_file(root.p("f"), b"u")
    assert os.stat(root.q("f")).st_size == 1
    os.unlink(root.p("f"))
    assert poll(lambda: not exists(root.q("f")), DEADLINE), "B still sees an unlinked name"
    expect_errno(errno.ENOENT, os.open, root.q("f"), os.O_RDONLY)
    assert os.listdir(root.other) == []


def test_1009_rename_over_on_a_seen_on_b(root):
    write_file(root.p("target"), b"old contents")
    write_file(root.p("tmp"), b"new contents")
    assert read_file(root.q("target")) == b"old contents"
    os.rename(root.p("tmp"), root.p("target"))

    def b_reads_new():
        # The name exists all along: B may read the old file for a while, never fail.
        try:
            got = read_file(root.q("target"))
        except OSError as e:
            raise AssertionError("B: open/read of a name that always existed failed: %r" % e) from e
        assert got in (b"old contents", b"new contents"), got
        return got == b"new contents"
    assert poll(b_reads_new, DEADLINE), "B still reads the replaced file through the name"


def test_1010_mkdir_on_a_then_create_inside_on_b(root):
    os.mkdir(root.p("d"))
    assert poll(lambda: exists(root.q("d")), DEADLINE)
    write_file(root.q("d", "f"), b"from b")
    assert read_file(root.p("d", "f")) == b"from b"


def test_1011_rmdir_and_recreate_as_file_on_a(root):
    os.mkdir(root.p("x"))
    assert os.path.isdir(root.q("x"))
    os.rmdir(root.p("x"))
    write_file(root.p("x"), b"now a file")
    assert poll(lambda: os.path.isfile(root.q("x")), DEADLINE), "B still sees x as a directory"
    assert read_file(root.q("x")) == b"now a file"


def test_1012_chmod_on_a_seen_on_b(root):
    touch(root.p("f"))
    assert stat.S_IMODE(os.stat(root.q("f")).st_mode) == 0o644
    os.chmod(root.p("f"), 0o600)
    assert poll(lambda: stat.S_IMODE(os.stat(root.q("f")).st_mode) == 0o600, DEADLINE)


def test_1013_own_changes_seen_at_once(root):
    # No polling: a mount's own changes are visible to it immediately.
    for side in (root.p, root.q):
        write_file(side("f"), b"mine")
        assert read_file(side("f")) == b"mine"
        assert os.stat(side("f")).st_size == 4
        os.chmod(side("f"), 0o640)
        assert stat.S_IMODE(os.stat(side("f")).st_mode) == 0o640
        os.rename(side("f"), side("g"))
        assert not exists(side("f")) and exists(side("g"))
        assert os.listdir(side()) == ["g"]
        _overwrite(side("g"), b"MINE")
        assert read_file(side("g")) == b"MINE"
        os.unlink(side("g"))
        assert not exists(side("g")) and os.listdir(side()) == []


def test_1014_xattr_on_a_seen_on_b(root):
    touch(root.p("f"))
    os.setxattr(root.p("f"), "user.k", b"v1")
    assert os.getxattr(root.q("f"), "user.k") == b"v1"
    os.setxattr(root.p("f"), "user.k", b"v2")
    assert os.getxattr(root.q("f"), "user.k") == b"v2"


def test_1015_hard_link_on_a_seen_on_b(root):
    write_file(root.p("f"), b"l")
    assert os.stat(root.q("f")).st_nlink == 1
    os.link(root.p("f"), root.p("g"))
    assert poll(lambda: exists(root.q("g")), DEADLINE)
    assert poll(lambda: os.stat(root.q("f")).st_nlink == 2, DEADLINE)


def test_1016_both_mounts_write_disjoint_ranges(root):
    write_file(root.p("f"), bytes(2 * MiB))
    a = os.open(root.p("f"), os.O_WRONLY)
    b = os.open(root.q("f"), os.O_WRONLY)
    try:
        os.pwrite(a, b"A" * MiB, 0)
        os.pwrite(b, b"B" * MiB, MiB)
    finally:
        os.close(a)
        os.close(b)
    want = b"A" * MiB + b"B" * MiB
    assert read_file(root.p("f")) == want
    assert read_file(root.q("f")) == want


def test_1017_page_cache_kept_across_opens_of_unchanged_file(root):
    size = MiB
    write_file(root.p("f"), os.urandom(size))
    pages = size // 4096
    with open(root.p("f"), "rb") as f:
        f.read()
        assert resident_pages(root.p("f"), size) == pages, "reading did not fill the page cache"
    # Reopened, nobody changed it: the cached pages are still the file's and must be kept.
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        assert resident_pages(root.p("f"), size) == pages, "open dropped the cache of an unchanged file"
    finally:
        os.close(fd)


def test_1018_page_cache_of_b_dropped_when_a_changed_file(root):
    write_file(root.p("f"), b"a" * MiB)
    assert read_file(root.q("f")) == b"a" * MiB
    _overwrite(root.p("f"), b"b" * MiB)
    fd = os.open(root.q("f"), os.O_RDONLY)
    try:
        assert os.pread(fd, 4096, 512 * KiB) == b"b" * 4096
    finally:
        os.close(fd)


def test_1019_stat_on_b_during_write_on_a_then_read_after_close(root):
    # B looks at the file while A is still writing (B may see the old size then); once A has
    # closed, an open on B reads everything A wrote.
    fd = os.open(root.p("f"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"written on A" * 1000)
        assert os.stat(root.q("f")).st_size in (0, 12000)
    finally:
        os.close(fd)
    assert os.stat(root.p("f")).st_size == 12000
    assert read_file(root.q("f")) == b"written on A" * 1000


def test_1020_write_only_descriptor_updates_what_this_mount_cached(root):
    # A write-only descriptor's writes bypass the page cache on Loom; another descriptor of the
    # same mount that cached the file must still read them at once, before any close.
    write_file(root.p("f"), b"A" * (64 * KiB))
    rfd = os.open(root.p("f"), os.O_RDONLY)
    try:
        assert os.pread(rfd, 64 * KiB, 0) == b"A" * (64 * KiB)
        wfd = os.open(root.p("f"), os.O_WRONLY)
        try:
            assert os.pwrite(wfd, b"B" * 4096, 8192) == 4096
            assert os.pwrite(wfd, b"C" * 100, 64 * KiB - 50) == 100
            assert os.pread(rfd, 4096, 8192) == b"B" * 4096
            assert os.fstat(rfd).st_size == 64 * KiB + 50
            assert os.pread(rfd, 200, 64 * KiB - 100) == b"A" * 50 + b"C" * 100
        finally:
            os.close(wfd)
    finally:
        os.close(rfd)

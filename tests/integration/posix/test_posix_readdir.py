"""readdir: listdir and scandir, large directories, removal while reading (cases 0800-0819)."""

import concurrent.futures
import errno
import os

import pytest

from posixutil import expect_errno, touch


def _create_many(d, names, dirs=None, threads=1):
    """Creates empty files names in d; with dirs (views of d through several mounts) and
    threads, in parallel through all of them (one mount serializes creates in one directory)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    dirs = dirs or [d]

    def create(where, part):
        for n in part:
            os.close(os.open(os.path.join(where, n), flags, 0o644))
    if threads == 1:
        create(d, names)
        return
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(create, dirs[k % len(dirs)], names[k::threads]) for k in range(threads)]:
            f.result()


def test_0800_listdir_names_exactly(root):
    names = ["a", "b", "c.txt", "dir", "link", ".dot"]
    for n in names[:3] + [".dot"]:
        touch(root.p(n))
    os.mkdir(root.p("dir"))
    os.symlink("a", root.p("link"))
    got = os.listdir(root.path)
    assert sorted(got) == sorted(names), "listdir must list every entry once, without . and .."
    assert len(got) == len(set(got))


def test_0801_scandir_entry_types(root):
    touch(root.p("f"))
    os.mkdir(root.p("d"))
    os.symlink("f", root.p("l"))
    kinds = {}
    with os.scandir(root.path) as it:
        for e in it:
            kinds[e.name] = (e.is_file(follow_symlinks=False), e.is_dir(follow_symlinks=False),
                             e.is_symlink(), e.inode())
    assert kinds["f"][:3] == (True, False, False)
    assert kinds["d"][:3] == (False, True, False)
    assert kinds["l"][:3] == (False, False, True)
    for name, k in kinds.items():
        assert k[3] == os.lstat(root.p(name)).st_ino, "d_ino of %s differs from its st_ino" % name


def test_0802_listdir_empty_directory(root):
    os.mkdir(root.p("d"))
    assert os.listdir(root.p("d")) == []


def test_0803_listdir_file_enotdir(root):
    touch(root.p("f"))
    expect_errno(errno.ENOTDIR, os.listdir, root.p("f"))


def test_0804_listdir_missing_enoent(root):
    expect_errno(errno.ENOENT, os.listdir, root.p("missing"))


def test_0805_listdir_after_create_rename_unlink(root):
    names = ["n%03d" % i for i in range(300)]
    _create_many(root.path, names)
    for i in range(0, 300, 3):
        os.unlink(root.p(names[i]))
    for i in range(1, 300, 3):
        os.rename(root.p(names[i]), root.p("r" + names[i]))
    expect = {names[i] for i in range(2, 300, 3)} | {"r" + names[i] for i in range(1, 300, 3)}
    got = os.listdir(root.path)
    assert len(got) == len(set(got)) and set(got) == expect


def test_0806_unlink_every_entry_while_reading(root):
    # rm -r's pattern: remove each entry as readdir returns it; every one must be seen and go.
    names = {"e%04d" % i for i in range(2000)}
    _create_many(root.path, sorted(names))
    seen = []
    with os.scandir(root.path) as it:
        for e in it:
            seen.append(e.name)
            os.unlink(e.path)
    assert len(seen) == len(set(seen)), "an entry was returned twice"
    assert set(seen) == names, "%d entries never returned" % len(names - set(seen))
    assert os.listdir(root.path) == []
    os.rmdir(root.path)
    os.mkdir(root.path)


def test_0807_readdir_of_1000_entries_with_long_names(root):
    names = {("%04d" % i) + "x" * 200 for i in range(1000)}
    _create_many(root.path, sorted(names))
    got = os.listdir(root.path)
    assert len(got) == 1000 and set(got) == names


def test_0808_readdir_after_rewind_lists_again(root):
    names = {"w%03d" % i for i in range(500)}
    _create_many(root.path, sorted(names))
    fd = os.open(root.path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        first = os.listdir(fd)
        os.lseek(fd, 0, os.SEEK_SET)
        second = os.listdir(fd)
    finally:
        os.close(fd)
    assert set(first) == names and sorted(first) == sorted(second)


def _listed_each_once(root, n):
    names = ["file%06d" % i for i in range(n)]
    _create_many(root.path, names, dirs=[root.path, root.other], threads=4)
    got = os.listdir(root.path)
    assert len(got) == len(set(got)), "%d names listed more than once" % (len(got) - len(set(got)))
    missing = set(names) - set(got)
    extra = set(got) - set(names)
    assert not missing and not extra, "missing %d (e.g. %s), extra %d (e.g. %s)" % (
        len(missing), sorted(missing)[:3], len(extra), sorted(extra)[:3])
    with os.scandir(root.path) as it:
        count = sum(1 for _ in it)
    assert count == n


@pytest.mark.slow
def test_0809_readdir_10000_entries_each_once(root):
    # Ten thousand names fill several of the MDS's 128 KiB readdir pages (about 3,000 names
    # each) and many of FUSE's 4 KiB ones: every kind of cookie boundary that 100,000 crosses,
    # at a tenth of the cost.
    _listed_each_once(root, 10_000)


@pytest.mark.soak
def test_0809_readdir_100000_entries_each_once(root):
    # A soak (`make soak`): 100,000 creates cost minutes while every commit is an fdatasync.
    _listed_each_once(root, 100_000)

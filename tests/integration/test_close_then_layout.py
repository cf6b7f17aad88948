"""A file closed on the mount is closed, for what comes next at once. FUSE sends a handle's release
after close(2) has returned, so the MDS can still see the handle open for a moment: a layout
change (`loom setstripe NEWFILE` on the mount, the loom.lov xattr, `loom migrate`) right after a
close must not fail as if the file were still open. A file a process really holds open stays
busy."""

import errno
import os

import pytest

from loomutil import parse_any_getstripe

ROUNDS = 60


def stripe_count(cluster, path):
    return parse_any_getstripe(cluster.loom("getstripe", path).stdout).stripe_count


def test_layout_xattr_right_after_a_close(cluster):
    mnt = cluster.mount()
    os.mkdir(os.path.join(mnt, "d"))
    template = os.path.join(mnt, "template")
    cluster.loom("setstripe", "-E", "-1", "-c", "3", template)
    lov = os.getxattr(template, "loom.lov")
    for i in range(ROUNDS):
        path = os.path.join(mnt, "d", "f%d" % i)
        open(path, "w").close()
        os.setxattr(path, "loom.lov", lov)            # EBUSY here: the release had not landed
    assert {stripe_count(cluster, "/d/f%d" % i) for i in range(ROUNDS)} == {3}


def test_setstripe_of_new_files_on_the_mount(cluster):
    # `lfs setstripe FILE` on a new name, as the seeds' users type it after a script made the
    # directory: loom creates the file, closes it, and lays it out.
    mnt = cluster.mount()
    for i in range(20):
        cluster.loom("setstripe", "-E", "-1", "-c", "2", os.path.join(mnt, "n%d" % i))
    assert {stripe_count(cluster, "/n%d" % i) for i in range(20)} == {2}


def test_setstripe_by_file_system_path_right_after_a_close_on_the_mount(cluster):
    # libloom cannot see the mount's handles: it gives the release a moment to land.
    mnt = cluster.mount()
    for i in range(20):
        open(os.path.join(mnt, "e%d" % i), "w").close()
        cluster.loom("setstripe", "-c", "2", "/e%d" % i)
    assert {stripe_count(cluster, "/e%d" % i) for i in range(20)} == {2}


def test_file_held_open_on_the_mount_stays_busy(cluster):
    mnt = cluster.mount()
    path = os.path.join(mnt, "held")
    cluster.loom("setstripe", "-E", "-1", "-c", "1", path)
    lov = os.getxattr(path, "loom.lov")
    with open(path, "r+b"):
        with pytest.raises(OSError) as e:
            os.setxattr(path, "loom.lov", lov)
        assert e.value.errno == errno.EBUSY
        p = cluster.loom("setstripe", "-c", "2", "/held", check=False)
        assert p.returncode != 0 and "busy" in p.stderr, p.stderr
    os.setxattr(path, "loom.lov", lov)                # closed now: laid out again
    cluster.loom("setstripe", "-c", "2", "/held")
    assert stripe_count(cluster, "/held") == 2


def test_migrate_right_after_writing_through_the_mount(cluster):
    mnt = cluster.mount()
    os.mkdir(os.path.join(mnt, "m"))
    cluster.loom("setstripe", "-E", "-1", "-c", "1", "/m")  # the directory's default
    for i in range(10):
        path = os.path.join(mnt, "m", "f%d" % i)
        data = os.urandom(200000 + i)
        with open(path, "wb") as f:
            f.write(data)
        p = cluster.loom("migrate", "-c", "2", path, check=False)
        assert p.returncode == 0, "round %d: %s" % (i, p.stderr)   # "open for writing" otherwise
        assert stripe_count(cluster, "/m/f%d" % i) == 2
        with open(path, "rb") as f:
            assert f.read() == data

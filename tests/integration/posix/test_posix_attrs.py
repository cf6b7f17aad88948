"""Attributes: chmod, chown, the sticky and setgid directory bits, utimensat, stat fields, statfs
(cases 0300-0369)."""

import errno
import os
import re
import stat
import time

import pytest

from posixutil import (GROUP, OTHER_GROUP, OTHER_USER, USER, UTIME_NOW, UTIME_OMIT, assert_as,
                       expect_errno, tick, touch, utimensat, write_file)

# ---- chmod ----------------------------------------------------------------------------------


def test_0300_chmod_sets_permission_bits(root):
    touch(root.p("f"))
    for mode in (0o600, 0o4755, 0o2711, 0o1777, 0o000, 0o7777):
        os.chmod(root.p("f"), mode)
        assert stat.S_IMODE(os.stat(root.p("f")).st_mode) == mode, oct(mode)
    assert stat.S_ISREG(os.stat(root.p("f")).st_mode)


def test_0301_chmod_directory(root):
    os.mkdir(root.p("d"))
    os.chmod(root.p("d"), 0o1731)
    st = os.stat(root.p("d"))
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o1731


def test_0302_chmod_missing_enoent(root):
    expect_errno(errno.ENOENT, os.chmod, root.p("missing"), 0o644)


def test_0303_chmod_through_symlink_changes_target(root):
    touch(root.p("f"))
    os.symlink("f", root.p("l"))
    os.chmod(root.p("l"), 0o600)
    assert stat.S_IMODE(os.stat(root.p("f")).st_mode) == 0o600


def test_0304_fchmod_on_open_descriptor(root):
    fd = os.open(root.p("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.fchmod(fd, 0o640)
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o640
    finally:
        os.close(fd)
    assert stat.S_IMODE(os.stat(root.p("f")).st_mode) == 0o640


# ---- chown ----------------------------------------------------------------------------------


def test_0310_chown_as_root_to_another_uid_and_gid(root):
    touch(root.p("f"))
    os.chown(root.p("f"), USER, GROUP)
    st = os.stat(root.p("f"))
    assert (st.st_uid, st.st_gid) == (USER, GROUP)
    os.chown(root.p("f"), -1, OTHER_GROUP)
    st = os.stat(root.p("f"))
    assert (st.st_uid, st.st_gid) == (USER, OTHER_GROUP), "chown with uid -1 must keep the uid"
    os.chown(root.p("f"), OTHER_USER, -1)
    st = os.stat(root.p("f"))
    assert (st.st_uid, st.st_gid) == (OTHER_USER, OTHER_GROUP), "chown with gid -1 must keep the gid"


def test_0311_chown_clears_setuid_and_setgid_of_regular_file(root):
    touch(root.p("f"))
    os.chmod(root.p("f"), 0o6755)
    os.chown(root.p("f"), USER, GROUP)
    mode = stat.S_IMODE(os.stat(root.p("f")).st_mode)
    assert mode & 0o6000 == 0, "chown left set-id bits: %o" % mode
    assert mode & 0o777 == 0o755


def test_0312_chown_keeps_setgid_without_group_exec(root):
    # setgid without group execute is mandatory locking, not a privilege: chown keeps it.
    touch(root.p("f"))
    os.chmod(root.p("f"), 0o2644)
    os.chown(root.p("f"), USER, GROUP)
    assert stat.S_IMODE(os.stat(root.p("f")).st_mode) == 0o2644


def test_0313_chown_directory_keeps_setgid(root):
    os.mkdir(root.p("d"))
    os.chmod(root.p("d"), 0o2775)
    os.chown(root.p("d"), USER, GROUP)
    st = os.stat(root.p("d"))
    assert (st.st_uid, st.st_gid) == (USER, GROUP)
    assert stat.S_IMODE(st.st_mode) == 0o2775


def test_0314_lchown_changes_symlink_not_target(root):
    touch(root.p("f"))
    os.symlink("f", root.p("l"))
    os.chown(root.p("l"), USER, GROUP, follow_symlinks=False)
    assert (os.lstat(root.p("l")).st_uid, os.lstat(root.p("l")).st_gid) == (USER, GROUP)
    assert (os.stat(root.p("f")).st_uid, os.stat(root.p("f")).st_gid) == (0, 0)
    os.chown(root.p("l"), OTHER_USER, OTHER_GROUP)
    assert os.stat(root.p("f")).st_uid == OTHER_USER
    assert os.lstat(root.p("l")).st_uid == USER


def test_0315_chown_missing_enoent(root):
    expect_errno(errno.ENOENT, os.chown, root.p("missing"), USER, GROUP)


# ---- sticky directories ---------------------------------------------------------------------


def _sticky_setup(root):
    os.mkdir(root.p("tmp"))
    os.chmod(root.p("tmp"), 0o1777)
    write_file(root.p("tmp", "theirs"), b"x")
    os.chown(root.p("tmp", "theirs"), OTHER_USER, OTHER_GROUP)
    os.chmod(root.p("tmp", "theirs"), 0o666)
    return root.p("tmp", "theirs")


def test_0320_sticky_dir_other_user_cannot_unlink_eperm(root):
    f = _sticky_setup(root)
    assert_as(errno.EPERM, lambda: os.unlink(f))
    assert os.path.exists(f)


def test_0321_sticky_dir_other_user_cannot_rename_away_eperm(root):
    f = _sticky_setup(root)
    assert_as(errno.EPERM, lambda: os.rename(f, root.p("tmp", "stolen")))
    assert sorted(os.listdir(root.p("tmp"))) == ["theirs"]


def test_0322_sticky_dir_owner_can_unlink(root):
    f = _sticky_setup(root)
    assert_as(0, lambda: os.unlink(f), uid=OTHER_USER, gid=OTHER_GROUP)
    assert os.listdir(root.p("tmp")) == []


def test_0323_sticky_dir_user_can_create_and_remove_own(root):
    _sticky_setup(root)
    mine = root.p("tmp", "mine")

    def create_and_remove():
        touch(mine)
        os.rename(mine, mine + "2")
        os.unlink(mine + "2")
    assert_as(0, create_and_remove)
    assert os.listdir(root.p("tmp")) == ["theirs"]


def test_0324_non_sticky_world_writable_dir_lets_anyone_unlink(root):
    f = _sticky_setup(root)
    os.chmod(root.p("tmp"), 0o777)
    assert_as(0, lambda: os.unlink(f))
    assert os.listdir(root.p("tmp")) == []


# ---- setgid directories ---------------------------------------------------------------------


def _setgid_dir(root):
    os.mkdir(root.p("sg"))
    os.chown(root.p("sg"), 0, OTHER_GROUP)
    os.chmod(root.p("sg"), 0o2777)
    return root.p("sg")


def test_0330_setgid_dir_new_file_inherits_group(root):
    d = _setgid_dir(root)
    touch(os.path.join(d, "f"))
    assert os.stat(os.path.join(d, "f")).st_gid == OTHER_GROUP
    # also for a user who is not in that group
    assert_as(0, lambda: touch(os.path.join(d, "u")))
    st = os.stat(os.path.join(d, "u"))
    assert (st.st_uid, st.st_gid) == (USER, OTHER_GROUP)


def test_0331_setgid_dir_new_subdir_inherits_setgid_and_group(root):
    d = _setgid_dir(root)
    os.mkdir(os.path.join(d, "sub"))
    st = os.stat(os.path.join(d, "sub"))
    assert st.st_gid == OTHER_GROUP
    assert st.st_mode & stat.S_ISGID, "a new subdirectory of a setgid directory must be setgid"
    os.mkdir(os.path.join(d, "sub", "deeper"))
    assert os.stat(os.path.join(d, "sub", "deeper")).st_gid == OTHER_GROUP


def test_0332_plain_dir_new_file_gets_creator_group(root):
    os.mkdir(root.p("d"))
    os.chown(root.p("d"), 0, OTHER_GROUP)
    os.chmod(root.p("d"), 0o777)
    assert_as(0, lambda: touch(root.p("d", "f")))
    st = os.stat(root.p("d", "f"))
    assert (st.st_uid, st.st_gid) == (USER, GROUP)


# ---- utimensat ------------------------------------------------------------------------------

T1 = 1_000_000_000_123_456_789     # 2001-09-09, with nanoseconds
T2 = 1_500_000_000_987_654_321


def test_0340_utime_sets_atime_and_mtime_ns(root):
    touch(root.p("f"))
    os.utime(root.p("f"), ns=(T1, T2))
    st = os.stat(root.p("f"))
    assert (st.st_atime_ns, st.st_mtime_ns) == (T1, T2)


def test_0341_utimensat_omit_mtime_sets_only_atime(root):
    touch(root.p("f"))
    os.utime(root.p("f"), ns=(T1, T2))
    utimensat(root.p("f"), T2, UTIME_OMIT)
    st = os.stat(root.p("f"))
    assert (st.st_atime_ns, st.st_mtime_ns) == (T2, T2)


def test_0342_utimensat_omit_atime_sets_only_mtime(root):
    touch(root.p("f"))
    os.utime(root.p("f"), ns=(T1, T2))
    utimensat(root.p("f"), UTIME_OMIT, T1)
    st = os.stat(root.p("f"))
    assert (st.st_atime_ns, st.st_mtime_ns) == (T1, T1)


def test_0343_utimensat_now_sets_current_time(root):
    touch(root.p("f"))
    os.utime(root.p("f"), ns=(T1, T1))
    before = time.time_ns()
    utimensat(root.p("f"), UTIME_OMIT, UTIME_NOW)
    st = os.stat(root.p("f"))
    assert st.st_atime_ns == T1
    # "now": later than the old value, and the present to within a generous clock slack
    assert abs(st.st_mtime_ns - before) < 60 * 10**9, (st.st_mtime_ns, before)
    utimensat(root.p("f"), UTIME_NOW, UTIME_OMIT)
    st2 = os.stat(root.p("f"))
    assert abs(st2.st_atime_ns - before) < 60 * 10**9
    assert st2.st_mtime_ns == st.st_mtime_ns


def test_0344_utime_now_both(root):
    touch(root.p("f"))
    os.utime(root.p("f"), ns=(T1, T1))
    now = time.time_ns()
    os.utime(root.p("f"))
    st = os.stat(root.p("f"))
    assert abs(st.st_atime_ns - now) < 60 * 10**9 and abs(st.st_mtime_ns - now) < 60 * 10**9


def test_0345_utimensat_moves_ctime(root):
    touch(root.p("f"))
    tick(root.p("f"))
    before = os.stat(root.p("f")).st_ctime_ns
    os.utime(root.p("f"), ns=(T1, T2))
    after = os.stat(root.p("f")).st_ctime_ns
    assert after > before, "utimensat must move ctime"
    tick(root.p("f"))
    utimensat(root.p("f"), UTIME_OMIT, UTIME_OMIT)      # both omitted: nothing changes
    assert os.stat(root.p("f")).st_mtime_ns == T2


def test_0346_utime_no_follow_changes_symlink_only(root):
    touch(root.p("f"))
    os.utime(root.p("f"), ns=(T1, T1))
    os.symlink("f", root.p("l"))
    os.utime(root.p("l"), ns=(T2, T2), follow_symlinks=False)
    assert os.lstat(root.p("l")).st_mtime_ns == T2
    assert os.stat(root.p("f")).st_mtime_ns == T1
    os.utime(root.p("l"), ns=(T2, T2))
    assert os.stat(root.p("f")).st_mtime_ns == T2


def test_0347_utime_directory(root):
    os.mkdir(root.p("d"))
    os.utime(root.p("d"), ns=(T1, T2))
    st = os.stat(root.p("d"))
    assert (st.st_atime_ns, st.st_mtime_ns) == (T1, T2)


def test_0348_utime_missing_enoent(root):
    expect_errno(errno.ENOENT, os.utime, root.p("missing"), ns=(T1, T1))


# ---- stat fields ----------------------------------------------------------------------------


def test_0350_stat_dir_nlink_is_two_plus_subdirs(root):
    os.mkdir(root.p("d"))
    assert os.stat(root.p("d")).st_nlink == 2
    for i in range(5):
        os.mkdir(root.p("d", "s%d" % i))
    touch(root.p("d", "file"))
    os.symlink("s0", root.p("d", "link"))
    assert os.stat(root.p("d")).st_nlink == 7, "files and symlinks must not count"


def test_0351_stat_size_and_blocks(root):
    write_file(root.p("f"), b"z" * 100000)
    st = os.stat(root.p("f"))
    assert st.st_size == 100000
    assert st.st_blocks > 0, "a file with data must have st_blocks > 0"
    assert st.st_blksize > 0
    touch(root.p("empty"))
    assert os.stat(root.p("empty")).st_size == 0


def test_0352_stat_mtime_and_ctime_change_on_write(root):
    write_file(root.p("f"), b"a")
    tick(root.p("f"))
    st0 = os.stat(root.p("f"))
    fd = os.open(root.p("f"), os.O_WRONLY)
    try:
        os.write(fd, b"b")
    finally:
        os.close(fd)
    st1 = os.stat(root.p("f"))
    assert st1.st_mtime_ns > st0.st_mtime_ns, "write must move mtime"
    assert st1.st_ctime_ns > st0.st_ctime_ns, "write must move ctime"


def test_0353_stat_ctime_changes_on_chmod_mtime_does_not(root):
    write_file(root.p("f"), b"a")
    tick(root.p("f"))
    st0 = os.stat(root.p("f"))
    os.chmod(root.p("f"), 0o600)
    st1 = os.stat(root.p("f"))
    assert st1.st_ctime_ns > st0.st_ctime_ns, "chmod must move ctime"
    assert st1.st_mtime_ns == st0.st_mtime_ns, "chmod must not move mtime"


def test_0354_stat_dir_mtime_changes_on_create_and_unlink(root):
    os.mkdir(root.p("d"))
    tick(root.p("d"))
    m0 = os.stat(root.p("d")).st_mtime_ns
    touch(root.p("d", "f"))
    m1 = os.stat(root.p("d")).st_mtime_ns
    assert m1 > m0, "creating an entry must move the directory's mtime"
    tick(root.p("d"))
    os.unlink(root.p("d", "f"))
    assert os.stat(root.p("d")).st_mtime_ns > m1, "removing an entry must move the directory's mtime"


def test_0355_stat_truncate_moves_mtime(root):
    write_file(root.p("f"), b"abcdef")
    tick(root.p("f"))
    m0 = os.stat(root.p("f")).st_mtime_ns
    os.truncate(root.p("f"), 2)
    assert os.stat(root.p("f")).st_mtime_ns > m0


def test_0356_stat_new_file_owned_by_creator(root):
    os.chmod(root.path, 0o777)
    assert_as(0, lambda: touch(root.p("f")))
    assert_as(0, lambda: os.mkdir(root.p("d")))
    for name in ("f", "d"):
        st = os.stat(root.p(name))
        assert (st.st_uid, st.st_gid) == (USER, GROUP), name


def test_0357_stat_distinct_files_distinct_inodes(root):
    touch(root.p("a"))
    touch(root.p("b"))
    os.mkdir(root.p("d"))
    inos = {os.stat(root.p(n)).st_ino for n in ("a", "b", "d")}
    assert len(inos) == 3
    assert os.stat(root.p("d", "..")).st_ino == os.stat(root.path).st_ino


# ---- statfs ---------------------------------------------------------------------------------


def test_0360_statvfs_fields(root):
    v = os.statvfs(root.path)
    assert v.f_blocks > 0 and v.f_bsize > 0 and v.f_frsize > 0
    assert v.f_namemax == 255
    assert v.f_bfree <= v.f_blocks and v.f_bavail <= v.f_blocks
    assert v.f_files > 0 and v.f_ffree <= v.f_files


def test_0361_statvfs_blocks_equal_sum_of_osts(root):
    if root.kind != "loom":
        pytest.skip("the OST sum is Loom's own: `loom df`")
    v = os.statvfs(root.path)
    df = root.cluster.loom("df").stdout
    m = re.search(r"^filesystem_summary:\s+(\d+)\s+(\d+)\s+(\d+)", df, re.M)
    assert m, "no filesystem_summary line in `loom df`:\n" + df
    osts = [int(x) for x in re.findall(r"^\S+-OST[0-9a-f]{4}_UUID\s+(\d+)", df, re.M)]
    assert len(osts) == 4 and sum(osts) == int(m.group(1)), df
    assert v.f_blocks * v.f_frsize == int(m.group(1)) * 1024, \
        "statfs f_blocks*f_frsize = %d, loom df sum of OSTs = %d KiB" % (v.f_blocks * v.f_frsize, int(m.group(1)))


def test_0362_statvfs_missing_enoent(root):
    expect_errno(errno.ENOENT, os.statvfs, root.p("missing"))

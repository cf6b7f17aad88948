"""Permission checks for unprivileged users (cases 0900-0939). Each checked operation runs in a
child process that has dropped to uid/gid 1000/1000 (posixutil.run_as); its exit code is the errno."""

import errno
import os

from posixutil import (GROUP, OTHER_GROUP, OTHER_USER, SUPP_GROUP, USER, assert_as, read_file,
                       run_as, touch, write_file)


def _access(path, mode):
    """0 if access(2) grants mode, EACCES if not."""
    return lambda: 0 if os.access(path, mode) else errno.EACCES


def _read(path):
    return lambda: os.close(os.open(path, os.O_RDONLY))


def _write(path):
    return lambda: os.close(os.open(path, os.O_WRONLY))


def test_0900_read_root_0600_file_eacces(root):
    write_file(root.p("f"), b"secret")
    os.chmod(root.p("f"), 0o600)
    assert_as(errno.EACCES, _read(root.p("f")))


def test_0901_read_root_0644_file_works_write_eacces(root):
    write_file(root.p("f"), b"public")
    os.chmod(root.p("f"), 0o644)
    f = root.p("f")
    assert_as(0, lambda: None if read_file(f) == b"public" else 1)
    assert_as(errno.EACCES, _write(f))
    assert_as(errno.EACCES, lambda: os.truncate(f, 0))
    assert read_file(f) == b"public"


def test_0902_create_in_root_0755_dir_eacces(root):
    os.mkdir(root.p("d"), 0o755)
    d = root.p("d")
    assert_as(errno.EACCES, lambda: touch(os.path.join(d, "f")))
    assert_as(errno.EACCES, lambda: os.mkdir(os.path.join(d, "sub")))
    assert_as(errno.EACCES, lambda: os.symlink("x", os.path.join(d, "l")))
    assert os.listdir(d) == []


def test_0903_unlink_and_rename_in_root_0755_dir_eacces(root):
    os.mkdir(root.p("d"), 0o755)
    touch(root.p("d", "f"))
    os.chmod(root.p("d", "f"), 0o666)
    d = root.p("d")
    assert_as(errno.EACCES, lambda: os.unlink(os.path.join(d, "f")))
    assert_as(errno.EACCES, lambda: os.rename(os.path.join(d, "f"), os.path.join(d, "g")))
    assert os.listdir(d) == ["f"]


def test_0904_chmod_of_another_users_file_eperm(root):
    touch(root.p("f"))
    os.chmod(root.p("f"), 0o666)
    f = root.p("f")
    assert_as(errno.EPERM, lambda: os.chmod(f, 0o777))
    assert os.stat(f).st_mode & 0o777 == 0o666


def test_0905_owner_can_chmod_own_file(root):
    touch(root.p("f"))
    os.chown(root.p("f"), USER, GROUP)
    f = root.p("f")
    assert_as(0, lambda: os.chmod(f, 0o600))
    assert os.stat(f).st_mode & 0o777 == 0o600


def test_0906_chown_to_another_user_eperm(root):
    touch(root.p("f"))
    os.chown(root.p("f"), USER, GROUP)
    f = root.p("f")
    assert_as(errno.EPERM, lambda: os.chown(f, OTHER_USER, -1))
    assert_as(errno.EPERM, lambda: os.chown(f, -1, OTHER_GROUP), groups=())
    assert (os.stat(f).st_uid, os.stat(f).st_gid) == (USER, GROUP)


def test_0907_owner_chgrp_to_own_supplementary_group(root):
    touch(root.p("f"))
    os.chown(root.p("f"), USER, GROUP)
    f = root.p("f")
    assert_as(0, lambda: os.chown(f, -1, SUPP_GROUP), groups=[SUPP_GROUP])
    assert os.stat(f).st_gid == SUPP_GROUP


def test_0908_access_results(root):
    write_file(root.p("r"), b"x")
    os.chmod(root.p("r"), 0o644)
    write_file(root.p("n"), b"x")
    os.chmod(root.p("n"), 0o600)
    write_file(root.p("x"), b"x")
    os.chmod(root.p("x"), 0o755)
    write_file(root.p("w"), b"x")
    os.chmod(root.p("w"), 0o666)
    cases = [("r", os.F_OK, 0), ("r", os.R_OK, 0), ("r", os.W_OK, errno.EACCES), ("r", os.X_OK, errno.EACCES),
             ("n", os.F_OK, 0), ("n", os.R_OK, errno.EACCES),
             ("x", os.X_OK, 0), ("x", os.R_OK | os.X_OK, 0), ("x", os.W_OK, errno.EACCES),
             ("w", os.W_OK, 0), ("w", os.R_OK | os.W_OK, 0), ("w", os.X_OK, errno.EACCES)]
    for name, mode, want in cases:
        got = run_as(_access(root.p(name), mode))
        assert got == want, "access(%s, %d) as uid %d: expected %s, got %s" % (name, mode, USER, want, got)


def test_0909_access_as_owner_uses_owner_bits(root):
    write_file(root.p("f"), b"x")
    os.chown(root.p("f"), USER, GROUP)
    os.chmod(root.p("f"), 0o077)          # the owner has no rights even though everyone else does
    f = root.p("f")
    assert_as(errno.EACCES, _access(f, os.R_OK))
    assert_as(errno.EACCES, _read(f))


def test_0910_supplementary_group_grants_read(root):
    write_file(root.p("f"), b"group data")
    os.chown(root.p("f"), 0, SUPP_GROUP)
    os.chmod(root.p("f"), 0o640)
    f = root.p("f")
    assert_as(0, lambda: None if read_file(f) == b"group data" else 1, groups=[SUPP_GROUP])
    assert_as(0, _access(f, os.R_OK), groups=[SUPP_GROUP])
    assert_as(errno.EACCES, _write(f), groups=[SUPP_GROUP])


def test_0911_without_the_group_read_eacces(root):
    write_file(root.p("f"), b"group data")
    os.chown(root.p("f"), 0, SUPP_GROUP)
    os.chmod(root.p("f"), 0o640)
    f = root.p("f")
    assert_as(errno.EACCES, _read(f), groups=())
    assert_as(errno.EACCES, _access(f, os.R_OK), groups=())


def test_0912_primary_group_grants_read(root):
    write_file(root.p("f"), b"g")
    os.chown(root.p("f"), 0, SUPP_GROUP)
    os.chmod(root.p("f"), 0o640)
    assert_as(0, _read(root.p("f")), gid=SUPP_GROUP)


def test_0913_search_permission_needed_to_traverse(root):
    os.mkdir(root.p("d"), 0o700)
    write_file(root.p("d", "f"), b"x")
    os.chmod(root.p("d", "f"), 0o644)
    f = root.p("d", "f")
    assert_as(errno.EACCES, lambda: os.stat(f))
    assert_as(errno.EACCES, _read(f))
    os.chmod(root.p("d"), 0o711)          # search without read: the name works, listing does not
    assert_as(0, _read(f))
    assert_as(errno.EACCES, lambda: os.listdir(root.p("d")))


def test_0914_listdir_needs_read_permission(root):
    os.mkdir(root.p("d"), 0o733)
    d = root.p("d")
    assert_as(errno.EACCES, lambda: os.listdir(d))
    os.chmod(d, 0o755)
    assert_as(0, lambda: os.listdir(d))


def test_0915_owner_without_write_bit_eacces(root):
    write_file(root.p("f"), b"ro")
    os.chown(root.p("f"), USER, GROUP)
    os.chmod(root.p("f"), 0o444)
    f = root.p("f")
    assert_as(errno.EACCES, _write(f))
    assert_as(0, lambda: os.chmod(f, 0o644))
    assert_as(0, _write(f))


def test_0916_create_in_writable_dir_owned_by_creator(root):
    os.mkdir(root.p("d"))
    os.chmod(root.p("d"), 0o777)
    d = root.p("d")

    def work():
        write_file(os.path.join(d, "f"), b"mine")
        os.mkdir(os.path.join(d, "sub"))
        os.rename(os.path.join(d, "f"), os.path.join(d, "sub", "g"))
    assert_as(0, work)
    st = os.stat(root.p("d", "sub", "g"))
    assert (st.st_uid, st.st_gid) == (USER, GROUP)
    assert read_file(root.p("d", "sub", "g")) == b"mine"


def test_0917_utime_explicit_times_needs_ownership(root):
    touch(root.p("f"))
    os.chmod(root.p("f"), 0o666)
    f = root.p("f")
    # Writable but not the owner: "now" is allowed, explicit times are not.
    assert_as(0, lambda: os.utime(f))
    assert_as(errno.EPERM, lambda: os.utime(f, ns=(10**18, 10**18)))
    os.chmod(f, 0o644)
    assert_as(errno.EACCES, lambda: os.utime(f))


def test_0918_rmdir_in_root_dir_eacces(root):
    os.mkdir(root.p("d"), 0o755)
    os.mkdir(root.p("d", "e"), 0o777)
    d = root.p("d")
    assert_as(errno.EACCES, lambda: os.rmdir(os.path.join(d, "e")))
    assert os.listdir(d) == ["e"]


def test_0919_chmod_by_non_member_clears_setgid(root):
    # An owner who is not in the file's group cannot set setgid: the bit is silently dropped.
    touch(root.p("f"))
    os.chown(root.p("f"), USER, OTHER_GROUP)
    f = root.p("f")
    assert_as(0, lambda: os.chmod(f, 0o2755))
    assert os.stat(f).st_mode & 0o7777 == 0o755


def test_0920_write_clears_setuid_of_file(root):
    touch(root.p("f"))
    os.chmod(root.p("f"), 0o4777)
    f = root.p("f")

    def write():
        fd = os.open(f, os.O_WRONLY)
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
    assert_as(0, write)
    assert os.stat(f).st_mode & 0o4000 == 0, "a write by another user must clear setuid"


def test_0921_link_to_unreadable_file_by_non_owner(root):
    # Linux with protected_hardlinks: an unprivileged user cannot hard-link another user's file
    # that she could not read and write. Loom must at least allow the permitted case.
    os.mkdir(root.p("d"))
    os.chmod(root.p("d"), 0o777)
    touch(root.p("f"))
    os.chown(root.p("f"), USER, GROUP)
    f = root.p("f")
    assert_as(0, lambda: os.link(f, os.path.join(root.p("d"), "mine")))
    assert os.stat(f).st_nlink == 2

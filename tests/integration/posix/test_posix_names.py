"""Names: mkdir, rmdir, unlink, rename (and renameat2), link, symlink, readlink (cases 0200-0299)."""

import errno
import os
import stat

from posixutil import (RENAME_EXCHANGE, RENAME_NOREPLACE, expect_errno, read_file, renameat2, touch,
                       write_file)

# ---- mkdir ----------------------------------------------------------------------------------


def test_0200_mkdir_makes_empty_directory(root):
    os.mkdir(root.p("d"), 0o750)
    st = os.stat(root.p("d"))
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o750
    assert st.st_nlink == 2
    assert os.listdir(root.p("d")) == []


def test_0201_mkdir_existing_eexist(root):
    os.mkdir(root.p("d"))
    expect_errno(errno.EEXIST, os.mkdir, root.p("d"))
    touch(root.p("f"))
    expect_errno(errno.EEXIST, os.mkdir, root.p("f"))
    os.symlink("nowhere", root.p("l"))
    expect_errno(errno.EEXIST, os.mkdir, root.p("l"))


def test_0202_mkdir_missing_parent_enoent(root):
    expect_errno(errno.ENOENT, os.mkdir, root.p("no", "d"))
    assert os.listdir(root.path) == []


def test_0203_mkdir_under_file_enotdir(root):
    touch(root.p("f"))
    expect_errno(errno.ENOTDIR, os.mkdir, root.p("f", "d"))


def test_0204_mkdir_name_256_enametoolong(root):
    expect_errno(errno.ENAMETOOLONG, os.mkdir, root.p("d" * 256))
    os.mkdir(root.p("d" * 255))
    assert os.listdir(root.path) == ["d" * 255]


# ---- rmdir ----------------------------------------------------------------------------------


def test_0210_rmdir_empty_directory(root):
    os.mkdir(root.p("d"))
    os.rmdir(root.p("d"))
    assert os.listdir(root.path) == []
    expect_errno(errno.ENOENT, os.stat, root.p("d"))


def test_0211_rmdir_nonempty_enotempty(root):
    os.mkdir(root.p("d"))
    touch(root.p("d", "f"))
    expect_errno(errno.ENOTEMPTY, os.rmdir, root.p("d"))
    os.mkdir(root.p("e"))
    os.mkdir(root.p("e", "sub"))
    expect_errno(errno.ENOTEMPTY, os.rmdir, root.p("e"))
    assert sorted(os.listdir(root.path)) == ["d", "e"]


def test_0212_rmdir_file_enotdir(root):
    touch(root.p("f"))
    expect_errno(errno.ENOTDIR, os.rmdir, root.p("f"))
    assert os.path.isfile(root.p("f"))


def test_0213_rmdir_missing_enoent(root):
    expect_errno(errno.ENOENT, os.rmdir, root.p("missing"))


def test_0214_rmdir_symlink_to_dir_enotdir(root):
    os.mkdir(root.p("d"))
    os.symlink("d", root.p("l"))
    expect_errno(errno.ENOTDIR, os.rmdir, root.p("l"))
    assert os.path.isdir(root.p("d"))


def test_0215_rmdir_updates_parent_nlink(root):
    os.mkdir(root.p("d"))
    os.mkdir(root.p("d", "a"))
    os.mkdir(root.p("d", "b"))
    assert os.stat(root.p("d")).st_nlink == 4
    os.rmdir(root.p("d", "a"))
    assert os.stat(root.p("d")).st_nlink == 3


# ---- unlink ---------------------------------------------------------------------------------


def test_0220_unlink_file(root):
    write_file(root.p("f"), b"x")
    os.unlink(root.p("f"))
    assert os.listdir(root.path) == []
    expect_errno(errno.ENOENT, os.stat, root.p("f"))


def test_0221_unlink_directory_eisdir(root):
    os.mkdir(root.p("d"))
    expect_errno(errno.EISDIR, os.unlink, root.p("d"))
    assert os.path.isdir(root.p("d"))


def test_0222_unlink_missing_enoent(root):
    expect_errno(errno.ENOENT, os.unlink, root.p("missing"))
    expect_errno(errno.ENOENT, os.unlink, root.p("missing", "x"))


def test_0223_unlink_symlink_removes_link_not_target(root):
    write_file(root.p("f"), b"target")
    os.symlink("f", root.p("l"))
    os.unlink(root.p("l"))
    assert os.listdir(root.path) == ["f"]
    assert read_file(root.p("f")) == b"target"


def test_0224_unlink_through_file_enotdir(root):
    touch(root.p("f"))
    expect_errno(errno.ENOTDIR, os.unlink, root.p("f", "x"))


# ---- rename ---------------------------------------------------------------------------------


def test_0230_rename_file_to_new_name(root):
    write_file(root.p("a"), b"A")
    ino = os.stat(root.p("a")).st_ino
    os.rename(root.p("a"), root.p("b"))
    assert os.listdir(root.path) == ["b"]
    assert read_file(root.p("b")) == b"A"
    assert os.stat(root.p("b")).st_ino == ino


def test_0231_rename_over_existing_file(root):
    write_file(root.p("a"), b"source")
    write_file(root.p("b"), b"victim")
    ino = os.stat(root.p("a")).st_ino
    os.rename(root.p("a"), root.p("b"))
    assert os.listdir(root.path) == ["b"]
    assert read_file(root.p("b")) == b"source"
    assert os.stat(root.p("b")).st_ino == ino


def test_0232_rename_dir_over_empty_dir(root):
    os.mkdir(root.p("a"))
    touch(root.p("a", "inside"))
    os.mkdir(root.p("b"))
    os.rename(root.p("a"), root.p("b"))
    assert os.listdir(root.path) == ["b"]
    assert os.listdir(root.p("b")) == ["inside"]


def test_0233_rename_dir_over_nonempty_dir_enotempty(root):
    os.mkdir(root.p("a"))
    os.mkdir(root.p("b"))
    touch(root.p("b", "x"))
    expect_errno(errno.ENOTEMPTY, os.rename, root.p("a"), root.p("b"))
    assert sorted(os.listdir(root.path)) == ["a", "b"]
    assert os.listdir(root.p("b")) == ["x"]


def test_0234_rename_dir_into_own_subtree_einval(root):
    os.makedirs(root.p("a", "b", "c"))
    expect_errno(errno.EINVAL, os.rename, root.p("a"), root.p("a", "b", "c", "a"))
    expect_errno(errno.EINVAL, os.rename, root.p("a"), root.p("a", "x"))
    assert os.listdir(root.path) == ["a"]
    assert os.listdir(root.p("a", "b", "c")) == []


def test_0235_rename_file_over_dir_eisdir(root):
    touch(root.p("f"))
    os.mkdir(root.p("d"))
    expect_errno(errno.EISDIR, os.rename, root.p("f"), root.p("d"))
    assert os.path.isfile(root.p("f")) and os.path.isdir(root.p("d"))


def test_0236_rename_dir_over_file_enotdir(root):
    touch(root.p("f"))
    os.mkdir(root.p("d"))
    expect_errno(errno.ENOTDIR, os.rename, root.p("d"), root.p("f"))
    assert os.path.isfile(root.p("f")) and os.path.isdir(root.p("d"))


def test_0237_rename_file_across_directories(root):
    os.mkdir(root.p("d1"))
    os.mkdir(root.p("d2"))
    write_file(root.p("d1", "f"), b"moved")
    os.rename(root.p("d1", "f"), root.p("d2", "g"))
    assert os.listdir(root.p("d1")) == []
    assert os.listdir(root.p("d2")) == ["g"]
    assert read_file(root.p("d2", "g")) == b"moved"


def test_0238_rename_dir_across_directories_moves_parent_links(root):
    os.mkdir(root.p("d1"))
    os.mkdir(root.p("d2"))
    os.mkdir(root.p("d1", "sub"))
    touch(root.p("d1", "sub", "f"))
    assert os.stat(root.p("d1")).st_nlink == 3 and os.stat(root.p("d2")).st_nlink == 2
    os.rename(root.p("d1", "sub"), root.p("d2", "sub"))
    assert os.listdir(root.p("d2", "sub")) == ["f"]
    assert os.stat(root.p("d1")).st_nlink == 2
    assert os.stat(root.p("d2")).st_nlink == 3
    assert os.stat(root.p("d2", "sub", "..")).st_ino == os.stat(root.p("d2")).st_ino


def test_0239_rename_noreplace_existing_eexist(root):
    write_file(root.p("a"), b"A")
    write_file(root.p("b"), b"B")
    expect_errno(errno.EEXIST, renameat2, root.p("a"), root.p("b"), RENAME_NOREPLACE)
    assert read_file(root.p("a")) == b"A" and read_file(root.p("b")) == b"B"


def test_0240_rename_noreplace_to_new_name(root):
    write_file(root.p("a"), b"A")
    renameat2(root.p("a"), root.p("c"), RENAME_NOREPLACE)
    assert os.listdir(root.path) == ["c"]
    assert read_file(root.p("c")) == b"A"


def test_0241_rename_exchange_file_and_dir_swap(root):
    write_file(root.p("f"), b"file")
    os.mkdir(root.p("d"))
    touch(root.p("d", "inside"))
    fino, dino = os.stat(root.p("f")).st_ino, os.stat(root.p("d")).st_ino
    renameat2(root.p("f"), root.p("d"), RENAME_EXCHANGE)
    assert sorted(os.listdir(root.path)) == ["d", "f"]
    assert os.path.isdir(root.p("f")) and os.listdir(root.p("f")) == ["inside"]
    assert os.path.isfile(root.p("d")) and read_file(root.p("d")) == b"file"
    assert os.stat(root.p("f")).st_ino == dino and os.stat(root.p("d")).st_ino == fino


def test_0242_rename_exchange_two_files_across_dirs(root):
    os.mkdir(root.p("x"))
    os.mkdir(root.p("y"))
    write_file(root.p("x", "a"), b"AAA")
    write_file(root.p("y", "b"), b"B")
    renameat2(root.p("x", "a"), root.p("y", "b"), RENAME_EXCHANGE)
    assert read_file(root.p("x", "a")) == b"B"
    assert read_file(root.p("y", "b")) == b"AAA"


def test_0243_rename_exchange_missing_target_enoent(root):
    write_file(root.p("a"), b"A")
    expect_errno(errno.ENOENT, renameat2, root.p("a"), root.p("missing"), RENAME_EXCHANGE)
    assert os.listdir(root.path) == ["a"]


def test_0244_rename_noreplace_and_exchange_together_einval(root):
    touch(root.p("a"))
    touch(root.p("b"))
    expect_errno(errno.EINVAL, renameat2, root.p("a"), root.p("b"), RENAME_NOREPLACE | RENAME_EXCHANGE)


def test_0245_rename_missing_source_enoent(root):
    expect_errno(errno.ENOENT, os.rename, root.p("missing"), root.p("b"))
    touch(root.p("f"))
    expect_errno(errno.ENOENT, os.rename, root.p("f"), root.p("nodir", "f"))
    assert os.listdir(root.path) == ["f"]


def test_0246_rename_hard_links_of_one_file_is_a_noop(root):
    write_file(root.p("a"), b"A")
    os.link(root.p("a"), root.p("b"))
    os.rename(root.p("a"), root.p("b"))
    assert sorted(os.listdir(root.path)) == ["a", "b"], "rename between links of one inode must do nothing"
    assert os.stat(root.p("a")).st_nlink == 2


def test_0247_rename_to_itself_is_a_noop(root):
    write_file(root.p("a"), b"A")
    os.rename(root.p("a"), root.p("a"))
    assert os.listdir(root.path) == ["a"] and read_file(root.p("a")) == b"A"


def test_0248_rename_symlink_moves_the_link(root):
    os.mkdir(root.p("d"))
    write_file(root.p("f"), b"t")
    os.symlink("../f", root.p("d", "l"))
    os.rename(root.p("d", "l"), root.p("d", "m"))
    assert os.readlink(root.p("d", "m")) == "../f"
    assert read_file(root.p("d", "m")) == b"t"


def test_0249_rename_name_256_enametoolong(root):
    touch(root.p("a"))
    expect_errno(errno.ENAMETOOLONG, os.rename, root.p("a"), root.p("r" * 256))
    assert os.listdir(root.path) == ["a"]


# ---- link -----------------------------------------------------------------------------------


def test_0250_link_counts_in_st_nlink(root):
    write_file(root.p("a"), b"shared")
    assert os.stat(root.p("a")).st_nlink == 1
    os.link(root.p("a"), root.p("b"))
    assert os.stat(root.p("a")).st_nlink == 2 and os.stat(root.p("b")).st_nlink == 2
    assert os.stat(root.p("a")).st_ino == os.stat(root.p("b")).st_ino
    os.mkdir(root.p("d"))
    os.link(root.p("a"), root.p("d", "c"))
    assert os.stat(root.p("b")).st_nlink == 3
    os.unlink(root.p("a"))
    assert os.stat(root.p("b")).st_nlink == 2
    assert read_file(root.p("d", "c")) == b"shared"


def test_0251_link_shares_data(root):
    write_file(root.p("a"), b"one")
    os.link(root.p("a"), root.p("b"))
    fd = os.open(root.p("b"), os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"+two")
    os.close(fd)
    assert read_file(root.p("a")) == b"one+two"
    assert os.stat(root.p("a")).st_size == 7


def test_0252_link_to_directory_eperm(root):
    os.mkdir(root.p("d"))
    expect_errno(errno.EPERM, os.link, root.p("d"), root.p("e"))
    assert os.listdir(root.path) == ["d"]


def test_0253_link_existing_target_eexist(root):
    touch(root.p("a"))
    touch(root.p("b"))
    expect_errno(errno.EEXIST, os.link, root.p("a"), root.p("b"))
    assert os.stat(root.p("a")).st_nlink == 1


def test_0254_link_missing_source_enoent(root):
    expect_errno(errno.ENOENT, os.link, root.p("missing"), root.p("b"))
    touch(root.p("a"))
    expect_errno(errno.ENOENT, os.link, root.p("a"), root.p("nodir", "b"))


def test_0255_link_to_symlink_links_the_symlink(root):
    touch(root.p("f"))
    os.symlink("f", root.p("l"))
    os.link(root.p("l"), root.p("l2"), follow_symlinks=False)
    assert os.path.islink(root.p("l2")) and os.readlink(root.p("l2")) == "f"
    assert os.lstat(root.p("l")).st_nlink == 2
    assert os.stat(root.p("f")).st_nlink == 1


def test_0256_link_changes_ctime(root):
    from posixutil import tick
    touch(root.p("a"))
    tick(root.p("a"))
    before = os.stat(root.p("a")).st_ctime_ns
    os.link(root.p("a"), root.p("b"))
    assert os.stat(root.p("a")).st_ctime_ns > before


# ---- symlink, readlink ----------------------------------------------------------------------


def test_0260_symlink_relative_target(root):
    os.mkdir(root.p("d"))
    write_file(root.p("d", "f"), b"rel")
    os.symlink("d/f", root.p("l"))
    assert os.readlink(root.p("l")) == "d/f"
    assert read_file(root.p("l")) == b"rel"
    st = os.lstat(root.p("l"))
    assert stat.S_ISLNK(st.st_mode) and st.st_size == len("d/f")


def test_0261_symlink_absolute_target(root):
    write_file(root.p("f"), b"abs")
    os.symlink(root.p("f"), root.p("l"))
    assert os.readlink(root.p("l")) == root.p("f")
    assert read_file(root.p("l")) == b"abs"
    assert os.lstat(root.p("l")).st_size == len(root.p("f"))


def test_0262_symlink_to_directory_is_followed_in_paths(root):
    os.mkdir(root.p("d"))
    write_file(root.p("d", "f"), b"via")
    os.symlink("d", root.p("l"))
    assert read_file(root.p("l", "f")) == b"via"
    assert os.listdir(root.p("l")) == ["f"]
    write_file(root.p("l", "g"), b"new")
    assert sorted(os.listdir(root.p("d"))) == ["f", "g"]


def test_0263_readlink_of_non_symlink_einval(root):
    touch(root.p("f"))
    os.mkdir(root.p("d"))
    expect_errno(errno.EINVAL, os.readlink, root.p("f"))
    expect_errno(errno.EINVAL, os.readlink, root.p("d"))


def test_0264_readlink_missing_enoent(root):
    expect_errno(errno.ENOENT, os.readlink, root.p("missing"))


def test_0265_dangling_symlink_stat_enoent_lstat_works(root):
    os.symlink("nowhere", root.p("l"))
    expect_errno(errno.ENOENT, os.stat, root.p("l"))
    expect_errno(errno.ENOENT, os.open, root.p("l"), os.O_RDONLY)
    st = os.lstat(root.p("l"))
    assert stat.S_ISLNK(st.st_mode)
    assert os.readlink(root.p("l")) == "nowhere"


def test_0266_open_creat_through_dangling_symlink_creates_target(root):
    os.symlink("target", root.p("l"))
    write_file(root.p("l"), b"made")
    assert read_file(root.p("target")) == b"made"
    assert os.path.islink(root.p("l"))


def test_0267_symlink_loop_eloop(root):
    os.symlink("b", root.p("a"))
    os.symlink("a", root.p("b"))
    expect_errno(errno.ELOOP, os.stat, root.p("a"))
    expect_errno(errno.ELOOP, os.open, root.p("a"), os.O_RDONLY)
    expect_errno(errno.ELOOP, os.open, root.p("b", "x"), os.O_RDONLY)
    os.symlink("self", root.p("self"))
    expect_errno(errno.ELOOP, os.stat, root.p("self"))


def test_0268_symlink_existing_name_eexist(root):
    touch(root.p("f"))
    expect_errno(errno.EEXIST, os.symlink, "x", root.p("f"))
    assert os.path.isfile(root.p("f"))


def test_0269_symlink_long_target(root):
    target = "/".join(["x" * 200] * 20)          # 4019 bytes: within PATH_MAX
    os.symlink(target, root.p("l"))
    assert os.readlink(root.p("l")) == target
    assert os.lstat(root.p("l")).st_size == len(target)


def test_0270_open_nofollow_on_symlink_eloop(root):
    touch(root.p("f"))
    os.symlink("f", root.p("l"))
    expect_errno(errno.ELOOP, os.open, root.p("l"), os.O_RDONLY | os.O_NOFOLLOW)

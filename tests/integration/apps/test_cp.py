"""`cp -a` of a source tree onto the mount: the copy is the original, to `diff -r` and to lstat()
(modes, owners, mtimes, symlinks, hard links), from this mount and from another one."""

import os

import pytest

from apputil import Findings, run


@pytest.mark.slow  # the plain pass only: under ASan, the copy back and tar take the same paths
def test_cp_a_source_tree_onto_the_mount_is_identical(mounted, second_mount, source_tree):
    dst = mounted.p("tree")
    run(["cp", "-a", source_tree, dst])
    f = Findings()
    # What diff sees: same names, same contents, same symlink targets ...
    f.diff_r(source_tree, dst)
    # ... and what ls -l / stat see: cp -a preserves modes, owners, mtimes, symlinks, hard links.
    f.trees("cp -a onto mount A, then lstat() through mount A", source_tree, dst)
    # Another node sees the same tree.
    f.diff_r(source_tree, second_mount.p("tree"), "through mount B")
    f.trees("cp -a onto mount A, then lstat() through mount B", source_tree, second_mount.p("tree"))
    f.check()


def test_cp_a_back_from_the_mount_is_identical(mounted, source_tree, workdir):
    """The round trip: onto the mount and back off it with cp -a."""
    run(["cp", "-a", source_tree, mounted.p("tree")])
    back = os.path.join(workdir, "back")
    run(["cp", "-a", mounted.p("tree"), back])
    f = Findings()
    f.diff_r(source_tree, back)
    f.trees("cp -a onto the mount and back to local", source_tree, back)
    f.check()

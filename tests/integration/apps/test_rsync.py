"""rsync -a from a local disk to the mount and back: identical trees; running it again transfers
nothing (rsync's quick check, size and mtime, finds every file up to date)."""

import os
import re

import pytest

from apputil import Findings, run


def transferred(out):
    m = re.search(r"^Number of regular files transferred: ([\d,]+)$", out, re.M)
    assert m, "no 'Number of regular files transferred' in rsync --stats output:\n" + out
    return int(m.group(1).replace(",", ""))


def changes(out):
    """The --itemize-changes lines (a change rsync made or would make)."""
    return [ln for ln in out.splitlines() if re.match(r"^[<>ch.*][fdLDS]", ln) and not ln.startswith(".d..t")
            or re.match(r"^\*deleting", ln)]


@pytest.mark.slow  # the plain pass only: under ASan, tar, git and cp take the mount through the same calls
def test_rsync_to_the_mount_and_back(mounted, second_mount, source_tree, workdir):
    f = Findings()
    dst = mounted.p("tree")
    p = run(["rsync", "-a", "--stats", source_tree + "/", dst + "/"])
    if transferred(p.stdout) == 0:
        f.add("the first rsync to the mount transferred no file:\n" + p.stdout)
    f.diff_r(source_tree, dst, "after rsync -a to the mount")
    f.trees("rsync -a local -> mount", source_tree, dst, attrs=("type", "mode", "uid", "gid", "mtime_ns",
                                                                  "size", "sha256", "target"))

    # Again, at once: nothing to do.
    p = run(["rsync", "-a", "--itemize-changes", "--stats", source_tree + "/", dst + "/"])
    n, ch = transferred(p.stdout), changes(p.stdout)
    if n or ch:
        f.add("a second rsync -a to the mount transferred %d files; itemized changes:\n  %s"
              % (n, "\n  ".join(ch[:20])))

    # From another node's mount back to the local disk.
    back = os.path.join(workdir, "back")
    run(["rsync", "-a", second_mount.p("tree") + "/", back + "/"])
    f.diff_r(source_tree, back, "after rsync -a back from mount B")
    f.trees("rsync -a local -> mount A, then mount B -> local", source_tree, back,
            attrs=("type", "mode", "uid", "gid", "mtime_ns", "size", "sha256", "target"))
    p = run(["rsync", "-a", "--itemize-changes", "--stats", second_mount.p("tree") + "/", back + "/"])
    n, ch = transferred(p.stdout), changes(p.stdout)
    if n or ch:
        f.add("a second rsync -a from mount B to local transferred %d files; itemized changes:\n  %s"
              % (n, "\n  ".join(ch[:20])))
    f.check()

"""tar on the mount: an archive created on the mount from a tree on the mount holds that tree, and
extracting it (onto the mount, and to a local disk) gives the tree back."""

import os

import pytest

from apputil import Findings, run, sha256_file


def place_tree(src, dst):
    """Copies a tree with plain system calls (mkdir, open/write/close, symlink, link, then lchown,
    chmod and utime by name, directories last), so that this test depends on tar alone."""
    inodes = {}
    os.mkdir(dst)
    for dirpath, dirnames, filenames in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        out = os.path.join(dst, rel) if rel != "." else dst
        for name in sorted(dirnames):
            s = os.path.join(dirpath, name)
            if os.path.islink(s):
                os.symlink(os.readlink(s), os.path.join(out, name))
            else:
                os.mkdir(os.path.join(out, name))
        for name in sorted(filenames):
            s, d = os.path.join(dirpath, name), os.path.join(out, name)
            st = os.lstat(s)
            if os.path.islink(s):
                os.symlink(os.readlink(s), d)
            elif st.st_nlink > 1 and (st.st_dev, st.st_ino) in inodes:
                os.link(inodes[(st.st_dev, st.st_ino)], d)
            else:
                inodes[(st.st_dev, st.st_ino)] = d
                with open(s, "rb") as fi, open(d, "wb") as fo:
                    while True:
                        b = fi.read(1 << 20)
                        if not b:
                            break
                        fo.write(b)
    # Owners, modes and times once every entry exists, deepest first.
    for dirpath, dirnames, filenames in os.walk(src, topdown=False):
        rel = os.path.relpath(dirpath, src)
        for name in dirnames + filenames + ([] if rel != "." else [None]):
            s = os.path.join(dirpath, name) if name else src
            d = os.path.join(dst, rel, name) if name else dst
            st = os.lstat(s)
            os.chown(d, st.st_uid, st.st_gid, follow_symlinks=False)
            if not os.path.islink(s):
                os.chmod(d, st.st_mode & 0o7777)
            os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def tar_listing(archive):
    """`tar -tvf` of an archive, the way a user checks what it holds."""
    return run(["tar", "--numeric-owner", "--full-time", "-tvf", archive]).stdout


# POSIX (pax) archives keep nanosecond mtimes; without atime and ctime (which reading the tree
# changes) the archive of a tree is a function of the tree alone.
TAR_C = ["tar", "--format=posix", "--pax-option=delete=atime,delete=ctime", "--sort=name"]


# Slow under ASan (20 s); the plain pass runs it, the POSIX cases cover its calls there.
@pytest.mark.slow
def test_tar_create_and_extract_on_the_mount(mounted, source_tree, workdir):
    tree = mounted.p("tree")
    place_tree(source_tree, tree)
    f = Findings()
    f.trees("the tree placed on the mount with plain system calls", source_tree, tree)

    # Create on the mount, from the tree on the mount; names sorted so that the archive does not
    # depend on readdir order: it must be byte for byte the archive tar makes of the local original.
    archive = mounted.p("tree.tar")
    run(TAR_C + ["-C", tree, "-cf", archive, "."])
    local_archive = os.path.join(workdir, "local.tar")
    run(TAR_C + ["-C", source_tree, "-cf", local_archive, "."])
    if sha256_file(archive) != sha256_file(local_archive):
        a, b = tar_listing(local_archive).splitlines(), tar_listing(archive).splitlines()
        bad = [("- " + x) for x in a if x not in set(b)][:10] + [("+ " + x) for x in b if x not in set(a)][:10]
        f.add("the archive tar made on the mount differs from the one it makes of the local original "
              "(sizes %d and %d); tar -tvf lines only in the local (-) / mount (+) archive:\n  %s"
              % (os.path.getsize(local_archive), os.path.getsize(archive), "\n  ".join(bad) or "(none)"))

    # Extract onto the mount (as root, tar restores owners and modes: -p --same-owner).
    x1 = mounted.p("extracted")
    os.mkdir(x1)
    run(["tar", "-C", x1, "-xpf", archive])
    f.diff_r(tree, x1, "tar extracted on the mount")
    f.trees("tar -x of the archive onto the mount, vs the tree it was made from", tree, x1)

    # Extract to the local disk.
    x2 = os.path.join(workdir, "extracted")
    os.mkdir(x2)
    run(["tar", "-C", x2, "-xpf", archive])
    f.diff_r(source_tree, x2, "tar made on the mount, extracted locally")
    f.trees("tar -x of the archive made on the mount to a local directory, vs the original", source_tree, x2)
    f.check()

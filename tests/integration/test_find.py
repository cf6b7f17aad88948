"""loom find: lfs find's filters over a tree, through a mount and through libloom paths."""

import os

from loomutil import parse_any_getstripe




def tree(cluster, mnt):
    """a/ (default -c 2), a/f1 (2 stripes, 1 byte), a/wide (4 stripes, 1M), a/b/big (5000 bytes),
    a/link -> f1, a/b/c/ (empty)."""
    a = os.path.join(mnt, "a")
    os.mkdir(a)
    cluster.loom("setstripe", "-E", "-1", "-c", "2", a)
    os.makedirs(os.path.join(a, "b", "c"))    # they inherit a's default
    with open(os.path.join(a, "f1"), "w") as f:
        f.write("x")
    cluster.loom("setstripe", "-E", "-1", "-c", "4", "-S", "1M", os.path.join(a, "wide"))
    with open(os.path.join(a, "b", "big"), "wb") as f:
        f.write(bytes(5000))
    os.symlink("f1", os.path.join(a, "link"))
    return a


def find(cluster, *args, check=True):
    p = cluster.loom("find", *args, check=check)
    return sorted(p.stdout.split("\n")[:-1]) if check else p


def test_find_filters_like_lfs_find(cluster):
    mnt = cluster.mount()
    a = tree(cluster, mnt)
    rel = lambda paths: sorted(os.path.relpath(p, a) for p in paths)  # noqa: E731

    assert rel(find(cluster, a)) == [".", "b", "b/big", "b/c", "f1", "link", "wide"]
    assert rel(find(cluster, a, "--type", "f")) == ["b/big", "f1", "wide"]
    assert rel(find(cluster, a, "-t", "d")) == [".", "b", "b/c"]
    assert rel(find(cluster, a, "--type", "l")) == ["link"]
    assert rel(find(cluster, a, "--name", "*i*")) == ["b/big", "link", "wide"]
    assert rel(find(cluster, a, "-t", "f", "--size", "+1")) == ["b/big"]
    assert rel(find(cluster, a, "-t", "f", "--size", "-2")) == ["f1", "wide"]
    assert rel(find(cluster, a, "-t", "f", "-s", "5000")) == ["b/big"]
    assert rel(find(cluster, a, "--stripe-count", "4")) == ["wide"]
    assert rel(find(cluster, a, "-t", "f", "!", "--stripe-count", "4")) == ["b/big", "f1"]
    # Directories count with their default layouts (b and b/c inherited a's).
    assert rel(find(cluster, a, "--stripe-count", "2")) == [".", "b", "b/big", "b/c", "f1"]
    assert rel(find(cluster, a, "--stripe-size", "1M")) == ["wide"]
    assert rel(find(cluster, a, "--mtime", "-1", "-t", "f")) == ["b/big", "f1", "wide"]
    assert rel(find(cluster, a, "--mtime", "+1")) == []
    assert rel(find(cluster, a, "--maxdepth", "1")) == [".", "b", "f1", "link", "wide"]
    assert rel(find(cluster, a, "--maxdepth", "0")) == ["."]

    # --ost: every file with an object on that OST, and ! for the others (how an OST is drained).
    idx = parse_any_getstripe(cluster.loom("getstripe", os.path.join(a, "f1")).stdout).objects[0][0]
    on = set()
    for f in ("f1", "wide", "b/big"):
        osts = [o for o, _ in parse_any_getstripe(cluster.loom("getstripe", os.path.join(a, f)).stdout).objects]
        if idx in osts:
            on.add(f)
    assert set(rel(find(cluster, a, "-t", "f", "--ost", str(idx)))) == on
    assert set(rel(find(cluster, a, "-t", "f", "!", "--ost", "OST%04x" % idx))) == {"f1", "wide", "b/big"} - on
    assert rel(find(cluster, a, "--ost", "%d,%d" % (idx, (idx + 1) % 4), "-n", "wide")) == ["wide"]

    # The same walk through libloom, by file system path.
    assert find(cluster, "/a", "-t", "f") == ["/a/b/big", "/a/f1", "/a/wide"]


def test_find_errors(cluster):
    cluster.mount()
    for bad in (["find"], ["find", "/", "--type", "x"], ["find", "/", "--size", "1Q"],
                ["find", "/", "--ost", "one"], ["find", "/", "!"], ["find", "/", "--maxdepth", "-1"],
                ["find", "/", "--nope", "1"]):
        p = cluster.loom(*bad, check=False)
        assert p.returncode == 2, (bad, p.returncode, p.stdout, p.stderr)
    p = cluster.loom("find", "/no/such/dir", check=False)
    assert p.returncode == 1 and "No such file or directory" in p.stderr

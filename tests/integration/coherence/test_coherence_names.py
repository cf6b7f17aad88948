"""Names changed on node A, used by node B right after: a file renamed over a name B holds open, a
file created after B listed and stat'ed its directory (the mount's statahead fetched it whole), a
name removed, a hard link written through, a symlink replaced. B's next open (or stat) after A's
change must find what A left, at once: no case waits or polls.
"""

import errno
import functools
import os

import pytest

from cohutil import check_all, check_bytes, check_read, data

SCAN = 24            # stats in a row in one directory: past the mount's statahead streak (16)


@pytest.mark.parametrize("b_holds", ["b_holds_old", "b_closed_old"])
def test_rename_over_name_b_uses(side, b_holds):
    # A writes a new file and renames it over N (as a checkpoint or a dataset shard is published):
    # B's next open and stat of N are the new file, bytes and inode.
    a, b = side.a, side.b
    old, new = data("N-old", 20000), data("N-new", 30000)
    a.write_file("N", old)
    check_read(b, "N", old)
    held = b.open("N", os.O_RDONLY) if b_holds == "b_holds_old" else None
    if held is not None:
        check_bytes(b.read_fd(held), old, "B: read through the descriptor it holds")
    a.write_file("N.tmp", new)
    a.rename("N.tmp", "N")
    ino = a.stat("N")["ino"]

    def b_opens():
        st = check_read(b, "N", new, "B: open of N after A renamed a new file over it", old=old)
        assert st["ino"] == ino, "B: fstat of its new open of N: inode %d, A's N is %d" % (st["ino"], ino)

    def b_stats():
        st = b.stat("N")
        assert (st["ino"], st["size"]) == (ino, len(new)), "B: stat of N: inode %d, %d bytes; " \
            "A's N is inode %d, %d bytes" % (st["ino"], st["size"], ino, len(new))
    check_all(b_opens, b_stats)
    if held is not None:
        b.close(held)
    assert b.listdir() == ["N"]


def _b_scans(side, names, scan):
    """B stats the first scan names in a row (the mount fetches the directory whole after 16),
    then lists the directory, which holds names."""
    got = side.b.stat_many(names[:scan])
    failed = [(n, errno.errorcode.get(st, st)) for n, st in zip(names[:scan], got)
              if not isinstance(st, dict)]
    assert not failed, "B: stat failed: %r" % failed
    assert side.b.listdir() == sorted(names)


def test_create_seen_after_statahead(side):
    # After B scanned the directory, A creates names in it (one B had looked for and not found):
    # B opens and reads each right after A closed it.
    a, b = side.a, side.b
    names = ["f%03d" % i for i in range(SCAN + 6)]
    for n in names:
        a.write_file(n, n.encode())
    _b_scans(side, names, SCAN)
    assert b.errno_of("stat", "looked_for") == errno.ENOENT
    for n in ("looked_for", "unseen"):
        a.write_file(n, data(n, 5000))
    check_all(*[functools.partial(check_read, b, n, data(n, 5000),
                                  "B: open of %s, created and closed on A after B's scan" % n)
                for n in ("looked_for", "unseen")])
    assert b.listdir() == sorted(names + ["looked_for", "unseen"])


def test_unlink_seen_after_statahead(side):
    # After B scanned the directory, A removes a name B had stat'ed: B's open fails with ENOENT.
    a, b = side.a, side.b
    names = ["f%03d" % i for i in range(SCAN + 6)]
    for n in names:
        a.write_file(n, n.encode())
    _b_scans(side, names, SCAN)
    gone = names[5]
    a.unlink(gone)
    check_all(lambda: _enoent(b, "open", gone, os.O_RDONLY), lambda: _enoent(b, "stat", gone),
              lambda: check_read(b, names[6], names[6].encode()))


def _enoent(node, call, name, *args):
    e = node.errno_of(call, name, *args)
    assert e == errno.ENOENT, "%s: %s of %s after A removed it: %s, want ENOENT" % (
        node.name, call, name, errno.errorcode.get(e, "success"))


def test_hard_link_written_through(side):
    # A links a file B has read, and rewrites it through the link: B's open of the original name
    # reads the new bytes, and B sees the link count A sees.
    a, b = side.a, side.b
    old, new = data("link-old", 50000), data("link-new", 70000)
    a.write_file("orig", old)
    check_read(b, "orig", old)
    a.link("orig", "alias")
    a.write_file("alias", new)
    nlink = a.stat("orig")["nlink"]
    assert nlink == 2
    st = check_read(b, "orig", new, "B: open of orig after A rewrote it through a hard link", old=old)
    assert st["nlink"] == nlink, "B: fstat of orig: st_nlink %d, A sees %d" % (st["nlink"], nlink)
    got = b.stat("orig")["nlink"]
    assert got == nlink, "B: stat of orig after its open: st_nlink %d, A sees %d" % (got, nlink)
    check_read(b, "alias", new)


def test_symlink_replaced(side):
    # A points symlink s at X, B reads through it; A replaces s (new symlink renamed over it) to
    # point at Y: B's next open through s reads Y.
    a, b = side.a, side.b
    x, y = data("X", 9000), data("Y", 11000)
    a.write_file("X", x)
    a.write_file("Y", y)
    a.symlink("X", "s")
    check_read(b, "s", x)
    assert b.readlink("s") == "X"
    a.symlink("Y", "s.tmp")
    a.rename("s.tmp", "s")
    check_all(lambda: check_read(b, "s", y, "B: open through s after A pointed it at Y", X=x),
              lambda: _same_link(a, b, "s", "Y"))


def _same_link(a, b, name, target):
    got, ino = b.readlink(name), a.lstat(name)["ino"]
    assert got == target, "B: readlink of %s: %r, want %r" % (name, got, target)
    got = b.lstat(name)["ino"]
    assert got == ino, "B: lstat of %s: inode %d, A's is %d" % (name, got, ino)


def test_renamed_away_and_reused_while_b_knows_both(side):
    # Checkpoint rotation: A renames ckpt to ckpt.old and writes a new ckpt. B, which had read
    # ckpt, stats ckpt.old (a fresh name of the old file) and then opens ckpt: the new file, not
    # the old one it still knows under the old name.
    a, b = side.a, side.b
    one, two = data("ckpt-1", 40000), data("ckpt-2", 50000)
    a.write_file("ckpt", one)
    check_read(b, "ckpt", one)
    a.rename("ckpt", "ckpt.old")
    a.write_file("ckpt", two)
    assert b.stat("ckpt.old")["size"] == len(one)
    check_all(lambda: check_read(b, "ckpt", two, "B: open of ckpt after A rotated it", old=one),
              lambda: check_read(b, "ckpt.old", one, "B: open of ckpt.old"))


def test_renamed_over_while_b_knows_both_names(side):
    # Publishing by rename: A writes N.tmp and renames it over N. B had read both, so its kernel
    # holds a name for each file; B's next open of N is the new file (once ESTALE came twice
    # here: the retry's lookup told the newer name while the old name was still remembered).
    a, b = side.a, side.b
    old, new = data("P-old", 3000), data("P-new", 4000)
    a.write_file("P", old)
    a.write_file("P.tmp", new)
    check_read(b, "P", old)
    check_read(b, "P.tmp", new)
    a.rename("P.tmp", "P")
    check_read(b, "P", new, "B: open of P after A renamed P.tmp, which B had read, over it", old=old)
    assert b.listdir() == ["P"]


def test_directory_renamed_and_remade(side):
    # A renames directory out (which B had walked into) to out.old and makes a new out with a new
    # file at the same path: B's open of out/sub/f reads the new one, and out.old keeps the old.
    a, b = side.a, side.b
    v1, v2 = data("dir-v1", 30000), data("dir-v2", 35000)
    a.mkdir("out")
    a.mkdir("out/sub")
    a.write_file("out/sub/f", v1)
    check_read(b, "out/sub/f", v1)
    a.rename("out", "out.old")
    a.mkdir("out")
    a.mkdir("out/sub")
    a.write_file("out/sub/f", v2)
    check_all(lambda: check_read(b, "out/sub/f", v2, "B: open of out/sub/f after A remade out", old=v1),
              lambda: check_read(b, "out.old/sub/f", v1, "B: open of out.old/sub/f"))
    assert b.listdir("out/sub") == ["f"]


def test_o_trunc_through_a_stale_name_spares_the_old_file(side):
    # B knows ckpt (it read it); A renames it away and puts a new one there. B then overwrites
    # ckpt (O_TRUNC, as np.save and torch.save do): the file now at ckpt is B's, and the old one,
    # renamed away, keeps every byte: an open through a stale name must not truncate what it
    # named before.
    a, b = side.a, side.b
    old, new, mine = data("t-old", 30000), data("t-new", 20000), data("t-b", 10000)
    a.write_file("ckpt", old)
    check_read(b, "ckpt", old)
    a.rename("ckpt", "ckpt.old")
    a.write_file("ckpt", new)
    b.write_file("ckpt", mine)
    check_all(lambda: check_read(a, "ckpt", mine, "A: ckpt after B overwrote it", new=new, old=old),
              lambda: check_read(a, "ckpt.old", old, "A: ckpt.old after B overwrote ckpt"))

"""Shrinks: node B has read (or stat'ed) a file, node A shrinks it to a size off every power-of-two
boundary (by truncate(2) of the path, ftruncate(2) of a descriptor, or an O_TRUNC rewrite), and
B's next open reads exactly the new size and bytes -- nothing past the new end, no zeros -- with
fstat agreeing, whether B reads in one large read(2), in 1 MiB reads or in 64 KiB reads (each
way on a file of its own, so each is B's first look after the shrink).
"""

import functools
import os

import pytest

from cohutil import KiB, MiB, check_all, check_read, data

BIG = 5_365_334
SHRINKS = [(BIG, 2_682_667), (BIG, MiB + 1), (BIG, 65_537), (BIG, 4097), (BIG, 1),
           (3 * MiB + 12345, 2 * MiB - 1), (200_000, 65_535)]
# Every size by path truncate; the other two methods on a few (each case costs megabytes).
FEW = [(BIG, 2_682_667), (BIG, 65_537), (BIG, 1)]
CASES = ([s + ("truncate",) for s in SHRINKS] +
         [s + (m,) for m in ("ftruncate", "o_trunc_rewrite") for s in FEW])
STAT_CASES = [FEW[0] + (m,) for m in ("truncate", "ftruncate", "o_trunc_rewrite")]
READS = [("one_read", 16 * MiB), ("1MiB_reads", MiB), ("64KiB_reads", 64 * KiB)]


def _ids(cases):
    return ["%d-to-%d-%s" % c for c in cases]


def shrink(node, path, size, method, old):
    """node shrinks path to size by method; returns what the file holds then."""
    if method == "truncate":
        node.truncate(path, size)
        return old[:size]
    if method == "ftruncate":
        fd = node.open(path, os.O_RDWR)
        node.ftruncate(fd, size)
        node.close(fd)
        return old[:size]
    new = data("rewrite-%d-%s" % (size, path), size)
    node.write_file(path, new)
    return new


def shrink_and_read(side, old_size, new_size, method, b_looks):
    """A writes one file per way of reading; B looks at each (b_looks); A shrinks each; B opens
    each and reads it its way. Every read that is wrong is reported, not just the first."""
    __tracebackhide__ = True
    a, b = side.a, side.b
    old = {}
    for name, _ in READS:
        old[name] = data("old-%d-%s" % (old_size, name), old_size)
        a.write_file(name, old[name])
    for name, chunk in READS:
        b_looks(name, old[name], chunk)
    want = {name: shrink(a, name, new_size, method, old[name]) for name, _ in READS}
    check_all(*[functools.partial(check_read, b, name, want[name], "B: %s after A shrank %d -> %d by %s"
                                  % (name, old_size, new_size, method), chunk=chunk, old=old[name])
                for name, chunk in READS])
    check_read(a, READS[0][0], want[READS[0][0]], "A: read after its own shrink", old=old[READS[0][0]])


@pytest.mark.parametrize("old_size,new_size,method", CASES, ids=_ids(CASES))
def test_shrink_after_b_read(side, old_size, new_size, method):
    # B read the whole file (its pages and size are cached) before A shrank it.
    def b_reads(name, old, chunk):
        check_read(side.b, name, old, chunk=chunk)
    shrink_and_read(side, old_size, new_size, method, b_reads)


@pytest.mark.parametrize("old_size,new_size,method", STAT_CASES, ids=_ids(STAT_CASES))
def test_shrink_after_b_stat(side, old_size, new_size, method):
    # B only stat'ed the file (its size is cached, no pages) before A shrank it.
    def b_stats(name, old, chunk):
        assert side.b.stat(name)["size"] == len(old)
    shrink_and_read(side, old_size, new_size, method, b_stats)

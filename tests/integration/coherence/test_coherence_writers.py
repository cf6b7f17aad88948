"""Two writers of one file: nodes A and B write disjoint byte ranges that share 4 KiB pages (and,
at offset 0, Loom's 64 KiB Data-on-MDT part), each through its own descriptor, and both close;
then appenders that take turns. Afterwards both nodes read exactly every byte each one wrote.
"""

import os

import pytest

from cohutil import DOM_SIZE, KiB, MiB, check_views, data

SLOT = 100                   # A writes the even 100-byte slots of a span, B the odd ones
SPAN = DOM_SIZE             # over 64 KiB: at offset 0, all of the Data-on-MDT part


def _slots(base, tag, parity):
    """The (offset, bytes) pieces of one writer: every other SLOT-byte slot of [base, base+SPAN)."""
    pieces = []
    for k in range(parity, SPAN // SLOT, 2):
        off = base + k * SLOT
        pieces.append((off, data("%s-%d" % (tag, k), SLOT)))
    return pieces


@pytest.mark.parametrize("base", [0, MiB], ids=["at_0", "at_1MiB"])
@pytest.mark.parametrize("flags", ["O_WRONLY", "O_RDWR"])
def test_disjoint_writers_in_shared_pages(side, flags, base):
    # A and B interleave 100-byte slots over 64 KiB: no writer's bytes may be lost or zeroed.
    a, b = side.a, side.b
    size = base + SPAN + 4 * KiB
    filler = data("filler", size)
    a.write_file("f", filler)
    mode = getattr(os, flags)
    fa, fb = a.open("f", mode), b.open("f", mode)
    pa, pb = _slots(base, "A", 0), _slots(base, "B", 1)
    a.pwrite_many(fa, pa)
    b.pwrite_many(fb, pb)
    a.close(fa)
    b.close(fb)
    want = bytearray(filler)
    for off, piece in pa + pb:
        want[off:off + SLOT] = piece
    views = [("A: read after both closed", a.read_file("f")[0]),
             ("B: read after both closed", b.read_file("f")[0]),
             ("B: O_DIRECT read after both closed", b.direct_read("f"))]
    check_views(views, bytes(want), filler=filler)


def test_alternating_appends(side):
    # A and B take turns appending a record (open O_APPEND, write, close): the file is every
    # record in order, on both nodes. Records of 3-10 KiB carry it past the 64 KiB DoM part.
    a, b = side.a, side.b
    records = [data("record-%d" % i, 3 * KiB + 397 * i) for i in range(20)]
    for i, rec in enumerate(records):
        node = a if i % 2 == 0 else b
        node.write_file("log", rec, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    want = b"".join(records)
    check_views([("A: read of the log", a.read_file("log")[0]),
                 ("B: read of the log", b.read_file("log")[0])], want)

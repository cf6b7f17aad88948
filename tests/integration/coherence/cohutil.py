"""Helpers for the coherence cases: file contents that tell versions apart, comparisons whose
failure says what the reader got (length, first wrong byte, whether it is zeros or an older
version) instead of dumping megabytes, and the three kinds of file each data case runs on."""

import functools
import random
import zlib

KiB = 1 << 10
MiB = 1 << 20

DOM_SIZE = 64 * KiB      # Loom's default Data-on-MDT part: the first 64 KiB of a file
MAX_DATA = 8 * MiB       # the largest file contents data() makes


@functools.lru_cache(maxsize=1)
def _pool():
    return random.Random("coherence").randbytes(2 * MAX_DATA)


def data(tag, size):
    """size bytes that belong to tag (random, reproducible): a window of a random pool at an
    offset of the tag's own, so two versions never agree on more than a stray byte here and
    there. Cheap: no case pays for generating megabytes."""
    assert size <= MAX_DATA
    off = zlib.crc32(tag.encode()) % MAX_DATA
    return _pool()[off:off + size]


# ---- the kinds of file ---------------------------------------------------------------------------

class Kind:
    """A kind of file: sizes of its successive versions (they grow and shrink, within the kind's
    range), the size of the cases that need just one, a spot that is a boundary worth writing
    across, and whether its directory is striped."""

    def __init__(self, sizes, size, spot, striped=False):
        self.sizes, self.size, self.spot, self.striped = sizes, size, spot, striped


KINDS = {
    # inside the Data-on-MDT part; spot: a page boundary
    "small": Kind((4 * KiB, 60 * KiB, 12345, 33 * KiB + 7), 33 * KiB + 7, 4 * KiB),
    # across it; spot: the end of the DoM part
    "boundary": Kind((60 * KiB, 200 * KiB, 65537, 128 * KiB + 3), 200 * KiB, DOM_SIZE),
    # a few MiB in 1 MiB stripes over 4 OSTs; spot: the first stripe boundary
    "striped": Kind((3 * MiB + 17, 5 * MiB - 3, 4 * MiB, 2 * MiB + 12345), 5 * MiB - 3, MiB, striped=True),
}


def kind_dir(side, kind):
    """A directory of the case for files of this kind (`loom setstripe -c 4 -S 1M` on Loom for the
    striped kind); returns its name relative to the case directory."""
    side.mkdir(kind)
    if KINDS[kind].striped:
        side.setstripe(kind, "-c", "4", "-S", "1M")
    return kind


# ---- comparisons ---------------------------------------------------------------------------------

def _what(got, at, others):
    """Describes got[at:at+16]: zeros, a named other version's bytes, or just hex."""
    piece = got[at:at + 16]
    if not piece:
        return "<EOF>"
    if piece == bytes(len(piece)):
        return "zeros"
    for name, other in others.items():
        if other[at:at + len(piece)] == piece:
            return "%s's bytes" % name
    return piece.hex()


def _runs(got, want, limit=3, unit=64):
    """Up to limit [start, end) runs where got differs from want (within the common length),
    found unit bytes at a time and then cut to the exact first and last wrong byte."""
    n = min(len(got), len(want))
    got, want = got[:n], want[:n]
    runs, i = [], 0
    while i < n and len(runs) < limit:
        if got[i:i + 4096] == want[i:i + 4096]:
            i += 4096
            continue
        while got[i:i + unit] == want[i:i + unit]:
            i += unit
        k = i
        while k < n and got[k:k + unit] != want[k:k + unit]:
            k += unit
        k = min(k, n)
        while got[i] == want[i]:
            i += 1
        e = k
        while got[e - 1] == want[e - 1]:
            e -= 1
        runs.append((i, e))
        i = k
    return runs


def check_bytes(got, want, what, **others):
    """Asserts got == want; the message names what was read (e.g. "B: read of f"), both lengths,
    and the first wrong ranges with what they hold (zeros, or the bytes of a version named in
    others: check_bytes(got, new, "...", old=old))."""
    __tracebackhide__ = True
    if got == want:
        return
    msg = ["%s: got %d bytes, want %d" % (what, len(got), len(want))]
    runs = _runs(got, want, limit=4)
    for start, end in runs[:3]:
        w = _what(want, start, others)
        named = w == "zeros" or w.endswith("'s bytes")       # hex of the wanted bytes says nothing
        msg.append("bytes [%d, %d) differ: got %s%s" % (start, end, _what(got, start, others),
                                                        " (want %s)" % w if named else ""))
    if len(runs) > 3:
        msg.append("more differences from %d on" % runs[3][0])
    if len(got) > len(want):
        extra = got[len(want):]
        held = "all zeros" if extra == bytes(len(extra)) else _what(got, len(want), others)
        msg.append("%d bytes past the end (%d): %s" % (len(extra), len(want), held))
    elif len(got) < len(want):
        msg.append("missing from %d on" % len(got))
    raise AssertionError("; ".join(msg))


def check_read(node, path, want, what=None, chunk=MiB, **others):
    """node opens path and reads it whole (read(2)s of chunk bytes): the bytes and the size fstat
    reports on that descriptor must be want's. Returns the fstat."""
    __tracebackhide__ = True
    got, st = node.read_file(path, chunk)
    what = what or "%s: read of %s" % (node.name, path)
    check_bytes(got, want, what, **others)
    assert st["size"] == len(want), "%s: fstat says %d bytes, want %d" % (what, st["size"], len(want))
    return st


def check_views(views, want, **others):
    """Asserts that every (what, bytes) of views is want, reporting all that are not at once (which
    of a node's page cache, its O_DIRECT read and the other node differ tells where bytes went)."""
    __tracebackhide__ = True
    wrong = []
    for what, got in views:
        try:
            check_bytes(got, want, what, **others)
        except AssertionError as e:
            wrong.append(str(e))
    if wrong:
        raise AssertionError("\n".join(wrong))


def check_all(*checks):
    """Runs every check (a function of no arguments) and reports all that fail (an
    AssertionError, or an OSError: a node's call failed) in one AssertionError."""
    __tracebackhide__ = True
    wrong = []
    for check in checks:
        try:
            check()
        except (AssertionError, OSError) as e:
            if isinstance(e, AssertionError):
                wrong.append(str(e).split("\nassert ")[0])      # the message, not pytest's explanation
            else:
                wrong.append("%s: %s" % (type(e).__name__, e))
    if wrong:
        raise AssertionError("\n".join(wrong))

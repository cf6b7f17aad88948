"""Close-to-open data: what node A wrote and closed, node B's next open reads, byte for byte and
with the right size, whatever B had cached (pages, size, mtime, a descriptor or a mapping still
open). Each case runs on three kinds of file: small (inside Loom's 64 KiB Data-on-MDT part),
boundary (across it) and striped (a few MiB over 4 OSTs). No case waits or polls: B's open right
after A's close must be right.
"""

import os

import pytest

from cohutil import DOM_SIZE, KINDS, MiB, check_bytes, check_read, check_views, data, kind_dir

ORDERS = ["a_then_b", "b_cached_then_a_rewrites", "alternating", "b_holds_fd"]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("kind", list(KINDS))
def test_write_close_then_open_read(side, kind, order):
    # Every order of writer and reader: B's next open after A's close reads A's bytes.
    f = os.path.join(kind_dir(side, kind), "f")
    sizes = KINDS[kind].sizes
    v = [data("%s-%d" % (kind, i), n) for i, n in enumerate(sizes)]
    a, b = side.a, side.b
    if order == "a_then_b":
        a.write_file(f, v[0])
        check_read(b, f, v[0])
        if side.on_loom:                            # the kind is what it says on Loom
            lay = side.layout(f)
            assert lay.dom_size == DOM_SIZE and lay.stripe_count == (4 if KINDS[kind].striped else 1), lay
            assert lay.stripe_size == MiB or not KINDS[kind].striped, lay
    elif order == "b_cached_then_a_rewrites":
        a.write_file(f, v[0])
        check_read(b, f, v[0])                      # B caches pages and size
        a.write_file(f, v[1])
        check_read(b, f, v[1], "B: read after A rewrote (%d -> %d bytes)" % (sizes[0], sizes[1]), old=v[0])
        a.write_file(f, v[2])
        check_read(b, f, v[2], "B: read after A rewrote (%d -> %d bytes)" % (sizes[1], sizes[2]), old=v[1])
    elif order == "alternating":
        a.write_file(f, v[0])
        for i in range(1, len(v)):                  # the writer changes every round
            writer, reader = (b, a) if i % 2 else (a, b)
            check_read(reader, f, v[i - 1], "%s: read in round %d" % (reader.name, i))
            writer.write_file(f, v[i])
            what = "%s: read after %s rewrote in round %d" % (reader.name, writer.name, i)
            check_read(reader, f, v[i], what, old=v[i - 1])
        check_read(a, f, v[-1])
        check_read(b, f, v[-1])
    elif order == "b_holds_fd":
        a.write_file(f, v[0])
        held = b.open(f, os.O_RDONLY)
        check_bytes(b.read_fd(held), v[0], "B: read of f through the held descriptor")
        a.write_file(f, v[1])                       # what the old descriptor sees is not asserted
        check_read(b, f, v[1], "B: new open while B holds an old descriptor", old=v[0])
        b.close(held)


@pytest.mark.parametrize("method", ["trunc_rewrite", "in_place"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_same_size_rewrite_with_mtime_restored(side, kind, method):
    # As cp -p, rsync -t and tar -x leave a file: new bytes, same size, the old atime/mtime.
    f = os.path.join(kind_dir(side, kind), "f")
    size = KINDS[kind].size
    old, new = data(kind + "-old", size), data(kind + "-new", size)
    a, b = side.a, side.b
    a.write_file(f, old)
    a.utime(f, 1_600_000_000_123_456_789, 1_600_000_000_987_654_321)
    check_read(b, f, old)                           # B caches pages, size and mtime
    st = a.stat(f)
    if method == "trunc_rewrite":
        a.write_file(f, new)
    else:
        fd = a.open(f, os.O_WRONLY)
        a.pwrite(fd, new, 0)
        a.close(fd)
    a.utime(f, st["atime_ns"], st["mtime_ns"])
    assert a.stat(f)["mtime_ns"] == st["mtime_ns"]
    check_read(b, f, new, "B: read after A rewrote with the same size and put the mtime back", old=old)
    check_read(a, f, new)


@pytest.mark.parametrize("kind", list(KINDS))
def test_writer_on_b_open_across_a_write(side, kind):
    # B holds the file open for writing while A writes part of it and closes; B then writes other
    # bytes (in the same pages) and closes: everyone must see A's bytes and B's bytes.
    f = os.path.join(kind_dir(side, kind), "f")
    size = KINDS[kind].size
    base = data(kind + "-base", size)
    spot = KINDS[kind].spot
    a_off, a_bytes = spot - 100, data(kind + "-by-a", 300)    # A's bytes straddle the spot
    b_off, b_bytes = spot + 1000, data(kind + "-by-b", 50)    # B's: in A's second 4 KiB page
    want = bytearray(base)
    want[a_off:a_off + len(a_bytes)] = a_bytes
    want[b_off:b_off + len(b_bytes)] = b_bytes
    want = bytes(want)
    a, b = side.a, side.b
    a.write_file(f, base)
    bfd = b.open(f, os.O_RDWR)
    check_bytes(b.read_fd(bfd), base, "B: read through its O_RDWR descriptor")
    fd = a.open(f, os.O_WRONLY)
    a.pwrite(fd, a_bytes, a_off)
    a.close(fd)
    b.pwrite(bfd, b_bytes, b_off)
    b.close(bfd)
    check_views([("B: fresh open after both closed", b.read_file(f)[0]),
                 ("B: O_DIRECT read after both closed", b.direct_read(f)),
                 ("A: fresh open after both closed", a.read_file(f)[0])], want, base=base)


@pytest.mark.parametrize("held", ["old_map_held", "old_map_gone"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_mmap_reader_sees_rewrite(side, kind, held):
    # B reads the file through a mapping; A rewrites it (same size) and closes; B's new open and
    # new mapping show the new bytes.
    f = os.path.join(kind_dir(side, kind), "f")
    size = KINDS[kind].size
    old, new = data(kind + "-old", size), data(kind + "-new", size)
    a, b = side.a, side.b
    a.write_file(f, old)
    fd = b.open(f, os.O_RDONLY)
    m = b.mmap(fd, size)
    check_bytes(b.map_read(m, 0, size), old, "B: first mapping")
    if held == "old_map_gone":
        b.munmap(m)
        b.close(fd)
    a.write_file(f, new)
    got, st = b.mmap_read(f)
    check_bytes(got, new, "B: new mapping after A rewrote the file", old=old)
    assert st["size"] == size
    off, n = size // 3, size // 3
    got, _ = b.mmap_read(f, off, n)
    check_bytes(got, new[off:off + n], "B: new mapping, bytes [%d, %d)" % (off, off + n),
                old=old[off:off + n])
    check_read(b, f, new, "B: read after the new mapping", old=old)
    if held == "old_map_held":
        b.munmap(m)
        b.close(fd)

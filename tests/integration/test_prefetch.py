"""libloom's prefetcher (loom_prefetch_*), driven by tests/helpers/prefetch_check so that it runs
under the sanitizers too: what it hands over equals the files read through the mount, it holds
no more than its bound, and a reader that skips, goes back or meets a missing file still gets
the right bytes."""

import hashlib
import os
import subprocess

from loomutil import BUILD, KiB, MiB

CHECK = os.path.join(BUILD, "tests", "helpers", "prefetch_check")


def run_check(cluster, items, max_bytes, threads, order=None, wait_fetched=None):
    """Runs prefetch_check over items [(path on the file system, offset, length)], taking them in
    order (all in turn by default) once wait_fetched items were read ahead; returns
    ([(item, length or None, sha256 or -errno)], stats dict)."""
    lines = "".join("%d %d %s\n" % (off, length, path) for path, off, length in items)
    args = [CHECK, cluster.addr, str(max_bytes), str(threads)]
    if order is not None or wait_fetched is not None:
        args.append(",".join(map(str, order)) if order is not None else "-")
    if wait_fetched is not None:
        args.append(str(wait_fetched))
    p = subprocess.run(args, input=lines, capture_output=True, text=True, env=cluster.env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    takes, stats = [], None
    for line in p.stdout.splitlines():
        f = line.split()
        if f[0] == "take" and f[2] == "ERR":
            takes.append((int(f[1]), None, int(f[3])))
        elif f[0] == "take":
            takes.append((int(f[1]), int(f[2]), f[3]))
        elif f[0] == "stats":
            stats = {k: int(v) for k, v in (kv.split("=") for kv in f[1:])}
    assert stats is not None, p.stdout
    return takes, stats


def expected(mnt, path, off, length):
    with open(os.path.join(mnt, path.lstrip("/")), "rb") as f:
        f.seek(off)
        data = f.read() if length < 0 else f.read(length)
    return len(data), hashlib.sha256(data).hexdigest()


def write_files(mnt, d, sizes):
    os.makedirs(os.path.join(mnt, d), exist_ok=True)
    paths = []
    for k, size in enumerate(sizes):
        p = "/%s/f%03d" % (d, k)
        with open(os.path.join(mnt, p.lstrip("/")), "wb") as f:
            f.write(os.urandom(size))
        paths.append(p)
    return paths


def test_items_equal_the_files_read_through_the_mount(cluster):
    mnt = cluster.mount()
    cluster.loom("setstripe", "-c", "-1", "-S", "1M", "/")
    # Whole files around the Data-on-MDT boundary (64 KiB) and over several stripes, then ranges.
    paths = write_files(mnt, "w", [0, 1, 64 * KiB - 1, 64 * KiB, 64 * KiB + 1, 300 * KiB, 5 * MiB + 7])
    items = [(p, 0, -1) for p in paths]
    big = paths[-1]
    items += [(big, 0, 100), (big, 64 * KiB - 10, 20), (big, 1 * MiB - 3, 2 * MiB + 5), (big, 5 * MiB, 100),
              (paths[1], 5, 10), (big, 3 * MiB, -1)]
    takes, stats = run_check(cluster, items, 64 * MiB, 8)
    assert [t[0] for t in takes] == list(range(len(items)))
    for (i, length, digest), (path, off, ln) in zip(takes, items):
        assert (length, digest) == expected(mnt, path, off, ln), "item %d: %r" % (i, items[i])
    # An item the threads had not reached when it was asked for is read by the reader itself.
    assert stats["ready"] + stats["waited"] + stats["direct"] == len(items), stats
    assert stats["held"] == 0


def test_memory_stays_within_the_bound(cluster):
    mnt = cluster.mount()
    paths = write_files(mnt, "b", [256 * KiB] * 40)
    items = [(p, 0, -1) for p in paths]
    # The reader starts once 4 items were read ahead (all 4 are then held: 1 MiB, the bound).
    takes, stats = run_check(cluster, items, 1 * MiB, 8, wait_fetched=4)
    for (i, length, digest), (path, off, ln) in zip(takes, items):
        assert (length, digest) == expected(mnt, path, off, ln)
    assert stats["peak"] <= 1 * MiB, stats
    assert stats["peak"] == 1 * MiB, stats

    # One item larger than the bound is still read, alone.
    big = write_files(mnt, "big", [3 * MiB])[0]
    takes, stats = run_check(cluster, [(big, 0, -1), (paths[0], 0, -1)], 1 * MiB, 4, wait_fetched=1)
    assert takes[0][1:] == expected(mnt, big, 0, -1)
    assert takes[1][1:] == expected(mnt, paths[0], 0, -1)
    assert stats["peak"] == 3 * MiB, stats


def test_a_reader_that_skips_or_goes_back_gets_the_right_bytes(cluster):
    mnt = cluster.mount()
    paths = write_files(mnt, "s", [100 * KiB + k for k in range(30)])
    items = [(p, 0, -1) for p in paths]
    order = [0, 1, 7, 3, 8, 29, 2, 28, 29]
    takes, stats = run_check(cluster, items, 8 * MiB, 4, order)
    assert [t[0] for t in takes] == order
    for i, length, digest in takes:
        assert (length, digest) == expected(mnt, paths[i], 0, -1), "item %d" % i
    # 3, 2, 28 and the second 29 come after a later item was taken: the reader reads them
    # (and 8 or 29 too, if the threads had not reached them yet).
    assert stats["direct"] >= 4, stats
    assert stats["held"] <= 8 * MiB


def test_a_missing_file_fails_its_item_only(cluster):
    mnt = cluster.mount()
    paths = write_files(mnt, "m", [10 * KiB, 20 * KiB])
    items = [(paths[0], 0, -1), ("/m/nope", 0, -1), ("/m", 0, -1), (paths[1], 0, -1)]
    takes, stats = run_check(cluster, items, 4 * MiB, 2)
    assert takes[0][1:] == expected(mnt, paths[0], 0, -1)
    assert takes[1][1:] == (None, -2)    # ENOENT
    assert takes[2][1] is None and takes[2][2] in (-21, -22)  # a directory: EISDIR (or EINVAL)
    assert takes[3][1:] == expected(mnt, paths[1], 0, -1)
    assert stats["fetched"] + stats["direct"] == len(items), stats


def test_records_of_a_shard_are_read_by_the_block_within_the_bound(cluster):
    """Ranged items that share an aligned MiB (prefetch_blocks.c) come from one read of it; where
    the blocks would not fit in half the bound they are read one by one; and a reader that skips
    most of them leaves nothing held."""
    import random
    mnt = cluster.mount()
    cluster.loom("setstripe", "-c", "-1", "-S", "1M", "/")
    shard = write_files(mnt, "r", [4 * MiB + 1000])[0]
    rec = 4 * KiB + 100          # records across block ends too
    items = [(shard, k * rec, rec) for k in range((4 * MiB + 1000) // rec)]
    order = list(range(len(items)))
    random.Random(7).shuffle(order)
    shuffled = [items[k] for k in order]

    takes, stats = run_check(cluster, shuffled, 64 * MiB, 8)
    for (i, length, digest), (path, off, ln) in zip(takes, shuffled):
        assert (length, digest) == expected(mnt, path, off, ln), "item %d" % i
    # Only the records that cross a block's end were read on their own; the rest came from
    # 5 blocks (4 MiB and the tail).
    crossing = sum(1 for _, off, ln in items if off // MiB != (off + ln - 1) // MiB)
    assert stats["fetched"] == crossing, stats
    assert stats["ready"] + stats["waited"] + stats["direct"] == len(items), stats
    assert stats["held"] == 0 and stats["peak"] <= 64 * MiB, stats

    # Half of a 1.5 MiB bound holds no block: every record is read by itself, within the bound.
    takes, stats = run_check(cluster, shuffled, 3 * MiB // 2, 8)
    for (i, length, digest), (path, off, ln) in zip(takes, shuffled):
        assert (length, digest) == expected(mnt, path, off, ln), "item %d" % i
    assert stats["fetched"] + stats["direct"] == len(items), stats
    assert stats["peak"] <= 3 * MiB // 2, stats

    # A reader that takes one record in ten, and the last, gives up the others: their blocks go
    # too, so once the last is taken no block is held (a record still in flight, read alone by
    # a thread, may be, until its read ends: at most one per thread).
    some = list(range(0, len(items) - 1, 10)) + [len(items) - 1]
    takes, stats = run_check(cluster, shuffled, 64 * MiB, 8, order=some)
    assert [t[0] for t in takes] == some
    for i, length, digest in takes:
        assert (length, digest) == expected(mnt, *shuffled[i]), "item %d" % i
    assert stats["held"] <= 8 * rec, stats

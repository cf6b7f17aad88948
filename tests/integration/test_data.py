"""Data path: striped writes and reads through `loom put`/`loom get`, checked byte for byte and
object by object on the OSTs' disks."""

import os
import random

import pytest

from loomutil import (GiB, KiB, MiB, make_random_file, object_path, object_size, parse_file_getstripe,
                      read_at, sha256_file, stripe_units)


def stat_size(cluster, path):
    out = cluster.loom("stat", path).stdout
    for line in out.splitlines():
        if line.strip().startswith("Size:"):
            return int(line.split()[1])
    raise AssertionError("no Size: line in `loom stat %s`:\n%s" % (path, out))


def check_objects(cluster, layout, src, size, samples=None, rng=None):
    """Each object on disk holds exactly its share of the file, and (a sample of) its stripe units
    hold the file's bytes at the right object offsets."""
    s, c = layout.stripe_size, layout.stripe_count
    paths = []
    for k, (idx, objid) in enumerate(layout.objects):
        p = object_path(cluster.ost_dir(idx), objid)
        want = object_size(size, s, c, k)
        if want == 0 and not os.path.exists(p):
            paths.append(None)  # an object never written may not exist yet: it reads as empty
            continue
        assert os.path.exists(p), "object %d (OST %d, objid %#x) of %s missing at %s" % (
            k, idx, objid, layout.path, p)
        got = os.path.getsize(p)
        assert got == want, ("object %d (OST %d, objid %#x) of %s (size %d, stripe %d x %d) holds %d "
                             "bytes on disk, expected %d" % (k, idx, objid, layout.path, size, s, c, got, want))
        paths.append(p)
    units = list(stripe_units(size, s, c))
    if samples is not None and len(units) > samples:
        rng = rng or random.Random(size)
        units = [units[0], units[-1]] + rng.sample(units[1:-1], samples - 2)
    for unit, off, n, k, obj_off in units:
        want = read_at(src, off, n)
        got = read_at(paths[k], obj_off, n)
        assert got == want, ("stripe unit %d (file offset %d, %d bytes) differs in object %d at offset %d"
                             % (unit, off, n, k, obj_off))


@pytest.mark.soak  # make soak: the smaller cases move the same code in the suite (CI's 30 minutes)
def test_1gib_over_4_stripes_reads_back_and_each_ost_holds_its_share(cluster, workdir):
    size = GiB
    src = os.path.join(workdir, "src")
    out = os.path.join(workdir, "out")
    digest = make_random_file(src, size)

    cluster.loom("mkdir", "/big")
    cluster.loom("setstripe", "-E", "-1", "-c", "4", "/big")   # no DoM: objects hold it all
    cluster.loom("put", src, "/big/data")
    cluster.loom("get", "/big/data", out)

    assert os.path.getsize(out) == size, "fetched copy has the wrong size"
    assert sha256_file(out) == digest, "fetched copy differs from the source (sha256)"
    os.unlink(out)
    assert stat_size(cluster, "/big/data") == size

    layout = parse_file_getstripe(cluster.loom("getstripe", "/big/data").stdout)
    assert layout.stripe_count == 4 and len(layout.objects) == 4, layout
    assert sorted(idx for idx, _ in layout.objects) == [0, 1, 2, 3], "stripes not on 4 distinct OSTs: %r" % layout
    check_objects(cluster, layout, src, size, samples=64)


@pytest.mark.slow  # the plain pass only: 4 clusters of 16 OSTs started, the `loom cluster` tool's numbering
def test_ost_index_equals_cluster_directory_number(cluster_factory):
    # `loom cluster` runs DIR/ostK as daemon ossK; users (and `loom cluster status`) take ossK to
    # serve OST index K. The MDS numbers new OSTs as they register, so check a few fresh clusters.
    for attempt in range(4):
        c = cluster_factory(osts=16)
        got = {k: c.ost_index_of_dir(k) for k in range(16)}
        wrong = {k: idx for k, idx in got.items() if idx != k}
        assert not wrong, ("cluster %d (%s): DIR/ostK holds another OST index: %s" % (
            attempt, c.dir, ", ".join("ost%d -> OST%04x" % kv for kv in sorted(wrong.items()))))
        c.down()


FILE_SIZES = [0, 1, 65535, 65537, 5 * MiB + 123, 13 * MiB + 7]


@pytest.mark.parametrize("stripe_size", [64 * KiB, MiB, 4 * MiB], ids=["64K", "1M", "4M"])
@pytest.mark.parametrize("stripe_count", [1, 2, 3, 4])
def test_layout_matrix_reads_back_byte_identical(cluster, workdir, stripe_count, stripe_size):
    d = "/m"
    cluster.loom("mkdir", d)
    cluster.loom("setstripe", "-E", "-1", "-c", stripe_count, "-S", stripe_size, d)   # no DoM
    for size in FILE_SIZES:
        src = os.path.join(workdir, "src%d" % size)
        out = os.path.join(workdir, "out%d" % size)
        digest = make_random_file(src, size)
        path = "%s/f%d" % (d, size)
        cluster.loom("put", src, path)
        cluster.loom("get", path, out)
        assert os.path.getsize(out) == size, "%s: fetched %d bytes, wrote %d" % (path, os.path.getsize(out), size)
        assert sha256_file(out) == digest, "%s (%d bytes, -c %d -S %d) differs after a round trip" % (
            path, size, stripe_count, stripe_size)
        assert stat_size(cluster, path) == size
        layout = parse_file_getstripe(cluster.loom("getstripe", path).stdout)
        assert (layout.stripe_count, layout.stripe_size) == (stripe_count, stripe_size), layout
        assert len({idx for idx, _ in layout.objects}) == stripe_count, "stripes share an OST: %r" % layout
        check_objects(cluster, layout, src, size)


def test_put_over_existing_file_leaves_exactly_the_new_content(cluster, workdir):
    cluster.loom("mkdir", "/o")
    cluster.loom("setstripe", "-E", "-1", "-c", "4", "-S", "64k", "/o")
    long_src = os.path.join(workdir, "long")
    short_src = os.path.join(workdir, "short")
    out = os.path.join(workdir, "out")
    make_random_file(long_src, 3 * MiB + 4321)
    short_digest = make_random_file(short_src, 100_000)

    cluster.loom("put", long_src, "/o/f")
    cluster.loom("put", short_src, "/o/f")
    cluster.loom("get", "/o/f", out)
    assert os.path.getsize(out) == 100_000, "stale tail after overwriting with a shorter file"
    assert sha256_file(out) == short_digest
    assert stat_size(cluster, "/o/f") == 100_000
    # The OSTs were truncated too: no object keeps bytes of the old, longer content.
    layout = parse_file_getstripe(cluster.loom("getstripe", "/o/f").stdout)
    check_objects(cluster, layout, short_src, 100_000)


def test_put_empty_file_over_existing_file_empties_it(cluster, workdir):
    src = os.path.join(workdir, "src")
    empty = os.path.join(workdir, "empty")
    out = os.path.join(workdir, "out")
    make_random_file(src, 2 * MiB + 1)
    open(empty, "wb").close()

    cluster.loom("put", src, "/f")
    cluster.loom("put", empty, "/f")
    cluster.loom("get", "/f", out)
    assert os.path.getsize(out) == 0
    assert stat_size(cluster, "/f") == 0


def test_put_new_empty_file(cluster, workdir):
    empty = os.path.join(workdir, "empty")
    out = os.path.join(workdir, "out")
    open(empty, "wb").close()
    cluster.loom("put", empty, "/e")
    cluster.loom("get", "/e", out)
    assert os.path.getsize(out) == 0
    assert stat_size(cluster, "/e") == 0
    assert "e" in cluster.loom("ls", "/").stdout.split()


def test_put_from_stdin_and_get_to_stdout(cluster):
    data = os.urandom(3 * MiB + 17)
    cluster.loom("put", "-", "/piped", input=data, text=False)
    got = cluster.loom("get", "/piped", "-", text=False).stdout
    assert got == data

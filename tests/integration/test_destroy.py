"""The objects of removed files are destroyed on the OSTs, so that no space leaks."""

import os

from loomutil import wait_until
from loomutil import MiB, make_random_file, object_path, parse_any_getstripe, parse_file_getstripe, sha256_file

DESTROY_TIMEOUT = 60  # seconds; the destroyer retries an unreachable OST every few seconds


def object_paths(cluster, path):
    layout = parse_any_getstripe(cluster.loom("getstripe", path).stdout)
    return [object_path(cluster.ost_dir(idx), objid) for idx, objid in layout.objects]


def all_gone(paths):
    return lambda: not any(os.path.exists(p) for p in paths)


def put_striped(cluster, workdir, path, size):
    src = os.path.join(workdir, "src")
    make_random_file(src, size)
    cluster.loom("put", src, path)
    paths = object_paths(cluster, path)
    assert all(os.path.exists(p) for p in paths), "objects of %s not on disk: %r" % (path, paths)
    return paths


def test_rm_destroys_objects(cluster, workdir):
    cluster.loom("setstripe", "-E", "-1", "-c", "4", "-S", "64k", "/")
    paths = put_striped(cluster, workdir, "/f", MiB)
    keep = put_striped(cluster, workdir, "/keep", MiB)
    cluster.loom("rm", "/f")
    assert wait_until(all_gone(paths), DESTROY_TIMEOUT), \
        "objects of a removed file still on disk: %r" % [p for p in paths if os.path.exists(p)]
    assert all(os.path.exists(p) for p in keep), "objects of another file were destroyed"


def test_rm_r_destroys_objects_of_every_file(cluster, workdir):
    cluster.loom("mkdir", "-p", "/t/sub")
    cluster.loom("setstripe", "-E", "-1", "-c", "2", "-S", "64k", "/t")
    paths = []
    for i in range(5):
        paths += put_striped(cluster, workdir, "/t/sub/f%d" % i if i % 2 else "/t/f%d" % i, 100_000 + i)
    cluster.loom("rm", "-r", "/t")
    assert wait_until(all_gone(paths), DESTROY_TIMEOUT), \
        "objects of removed files still on disk: %r" % [p for p in paths if os.path.exists(p)]


def test_mv_over_existing_file_destroys_the_replaced_objects(cluster, workdir):
    cluster.loom("setstripe", "-E", "-1", "-c", "4", "-S", "64k", "/")
    victim = put_striped(cluster, workdir, "/b", MiB)
    survivor = put_striped(cluster, workdir, "/a", MiB)
    cluster.loom("mv", "/a", "/b")
    assert wait_until(all_gone(victim), DESTROY_TIMEOUT), "objects of the replaced file leaked"
    assert all(os.path.exists(p) for p in survivor)


def test_put_over_existing_file_leaks_no_objects(cluster, workdir):
    # An overwrite (O_TRUNC) either keeps the objects and truncates them, or lays the file out
    # anew and destroys the old objects; either way no byte of the old content stays on disk.
    cluster.loom("setstripe", "-E", "-1", "-c", "4", "-S", "64k", "/")
    before = put_striped(cluster, workdir, "/f", 2 * MiB)
    src = os.path.join(workdir, "new")
    size = MiB // 2 + 100
    digest = make_random_file(src, size)
    cluster.loom("put", src, "/f")
    layout = parse_file_getstripe(cluster.loom("getstripe", "/f").stdout)
    after = [object_path(cluster.ost_dir(idx), objid) for idx, objid in layout.objects]
    replaced = [p for p in before if p not in after]
    assert wait_until(all_gone(replaced), DESTROY_TIMEOUT), "objects replaced by an overwrite leaked"
    on_disk = sum(os.path.getsize(p) for p in after if os.path.exists(p))
    assert on_disk == size, "the OSTs hold %d bytes for a file of %d after the overwrite" % (on_disk, size)
    out = os.path.join(workdir, "out")
    cluster.loom("get", "/f", out)
    assert sha256_file(out) == digest


def test_destroy_survives_oss_down_and_mds_kill9(cluster, workdir):
    # The OSS holding the objects is down when the file is removed, and the MDS is then killed:
    # the destroy is recorded in the MDT and carried out once the OSS is back.
    cluster.loom("setstripe", "-E", "-1", "-c", "1", "-i", "1", "/")
    paths = put_striped(cluster, workdir, "/f", MiB)
    cluster.kill9(cluster.oss_name(1))
    cluster.loom("rm", "/f")
    cluster.kill9("mds")
    assert all(os.path.exists(p) for p in paths)
    cluster.restart()
    assert wait_until(all_gone(paths), DESTROY_TIMEOUT), "objects removed while their OSS was down leaked"


def test_destroy_many_checks_its_request_and_removes_objects_in_order(cluster, workdir):
    """OST_DESTROY_MANY on the wire, as the MDS's destroyer sends it: malformed requests are
    refused with nothing removed; a list removes its objects in order up to an id 0, which is
    refused; a resend of the rest finds the removed ones gone and is not an error."""
    import errno
    import struct

    import loomwire as w

    cluster.loom("setstripe", "-E", "-1", "-c", "1", "-i", "0", "-S", "64k", "/")
    paths, ids = [], []
    for i in range(4):
        p = put_striped(cluster, workdir, "/d%d" % i, 200 * 1024)
        layout = parse_any_getstripe(cluster.loom("getstripe", "/d%d" % i).stdout)
        paths += p
        ids += [objid for _, objid in layout.objects]
    idx = parse_any_getstripe(cluster.loom("getstripe", "/d0").stdout).objects[0][0]
    host, port = cluster.oss_addr("oss0")
    pack = lambda xs: b"".join(struct.pack("<Q", x) for x in xs)  # noqa: E731
    op = w.OP["OST_DESTROY_MANY"]
    with w.Conn(host, port) as c:
        bad = [
            (w.ost_io(idx, 0, 0, 12), pack(ids)[:12], -errno.EINVAL),         # not whole ids
            (w.ost_io(idx, 0, 0, 0), b"", -errno.EINVAL),                     # none
            (w.ost_io(idx, 0, 0, 8 * 257), pack(range(1, 258)), -errno.EINVAL),  # too many
            (w.ost_io(idx, ids[0], 0, 8), pack(ids[:1]), -errno.EPROTO),      # an object in the body
            (w.ost_io(idx, 0, 8, 8), pack(ids[:1]), -errno.EPROTO),           # an offset
            (w.ost_io(idx, 0, 0, 16), pack(ids[:1]), -errno.EPROTO),          # bulk shorter than length
        ]
        for body, bulk, want in bad:
            h, _, _ = c.call(op, body, bulk)
            assert h.status == want, (body, h.status, want)
        assert all(os.path.exists(p) for p in paths), "a refused request removed objects"
        h, rep, _ = c.call(op, w.ost_io(idx, 0, 0, 24), pack(ids[:2] + [0]))
        assert h.status == -errno.EINVAL
        assert [os.path.exists(p) for p in paths] == [False, False, True, True]
        h, rep, _ = c.call(op, w.ost_io(idx, 0, 0, 8 * len(ids)), pack(ids))
        assert h.status == 0 and w.OST_IO_REP.unpack(rep)[0] == len(ids)
        assert not any(os.path.exists(p) for p in paths)

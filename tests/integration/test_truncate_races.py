"""Truncations racing writes on other nodes (architecture.md, "Truncation"): the MDS cuts the
objects in a new truncation epoch before it answers; a write made before the cut is refused by
the objects afterwards (the writer learns the epoch and writes again), and a size report of
writes made before it does not grow the file back. Checked through two mounts, through the raw
OSS protocol, and across an MDS restart with a cut still to do.
"""

import errno
import os

import pytest

import loomwire as w
from loomutil import MiB, object_path, parse_file_getstripe, second_mount, wait_until


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _reported_then_more(path, first, more):
    """Opens path for writing, writes first and fsyncs (the MDS knows its size), then writes more
    (not reported yet); returns the descriptor."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, first)
    os.fsync(fd)
    os.write(fd, more)
    return fd


def _only_theirs_or_zeros(got, start, byte, what):
    """got[start:] holds nothing but byte and zeros, and ends with byte if it is not empty: the
    unreported writes of another node in flight during a cut, each piece of them landed before
    it (cut: zeros, or nothing past the size) or refused by its object and sent again after it
    (the writer's bytes, and its size report covers them: never a tail of zeros)."""
    rest = got[start:]
    assert set(rest) <= {0, byte}, "%s: bytes that are neither the writer's nor zeros" % what
    assert not rest or rest[-1] == byte, "%s: the size grew over zeros (%d bytes)" % (what, len(got))


def test_late_report_does_not_grow_a_truncated_file_back(cluster):
    # A writes 4 MiB (reported), then 4 MiB more; B truncates to 0; A closes. A's last writes were
    # sent before the truncation: what of them landed first was cut, and a late report of them
    # does not grow the file back; a piece the cut overtook was sent again after it, and is the
    # file's. The file is the same on both mounts, and never shows a size over zeros.
    a = cluster.mount()
    with second_mount(cluster) as b:
        fd = _reported_then_more(os.path.join(a, "f"), b"x" * (4 * MiB), b"y" * (4 * MiB))
        os.truncate(os.path.join(b, "f"), 0)
        os.close(fd)
        got = _read(os.path.join(b, "f"))
        for m in (a, b):
            assert os.stat(os.path.join(m, "f")).st_size == len(got), m
            assert _read(os.path.join(m, "f")) == got, m
        assert len(got) == 0 or 4 * MiB < len(got) <= 8 * MiB, len(got)
        assert got[:4 * MiB] == bytes(min(len(got), 4 * MiB)), "the cut part shows old bytes"
        _only_theirs_or_zeros(got, 4 * MiB, ord("y"), "truncated to 0")


def test_write_after_a_truncation_elsewhere_is_kept(cluster):
    # A keeps its descriptor across B's truncation and writes again: that write comes after the
    # cut and must be the file's bytes, not zeros and not lost.
    a = cluster.mount()
    with second_mount(cluster) as b:
        fd = os.open(os.path.join(a, "f"), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"a" * (2 * MiB))
        os.fsync(fd)
        os.truncate(os.path.join(b, "f"), 0)
        assert os.pwrite(fd, b"b" * MiB, 0) == MiB
        os.close(fd)
        for m in (a, b):
            assert _read(os.path.join(m, "f")) == b"b" * MiB, m


def test_truncate_up_elsewhere_zeroes_what_was_not_reported(cluster):
    # A's unreported bytes past the old end were sent before B's truncation up, which extends the
    # file the MDS knows (1 MiB): the new part reads as zeros (as truncate(2) promises), the
    # reported part as A wrote it. A piece of A's the cut overtook is sent again after it and
    # shows there instead of zeros; the size is B's.
    a = cluster.mount()
    with second_mount(cluster) as b:
        fd = _reported_then_more(os.path.join(a, "f"), b"p" * MiB, b"q" * MiB)
        os.truncate(os.path.join(b, "f"), 3 * MiB)
        os.close(fd)
        got = _read(os.path.join(b, "f"))
        assert len(got) == 3 * MiB
        assert _read(os.path.join(a, "f")) == got
        assert got[:MiB] == b"p" * MiB and got[2 * MiB:] == bytes(MiB)
        assert set(got[MiB:2 * MiB]) <= {0, ord("q")}, "bytes that are neither A's nor zeros"


def test_own_truncate_takes_in_unreported_writes(cluster):
    # Write, then truncate up on the same node: the write is part of the file (truncate after
    # write), the rest zeros.
    a = cluster.mount()
    fd = _reported_then_more(os.path.join(a, "f"), b"1" * MiB, b"2" * MiB)
    os.ftruncate(fd, 5 * MiB)
    os.close(fd)
    got = _read(os.path.join(a, "f"))
    assert got == b"1" * MiB + b"2" * MiB + bytes(3 * MiB)


def _object_of(cluster, path):
    """(OST index, objid) of the only stripe of a file, from `loom getstripe`."""
    layout = parse_file_getstripe(cluster.loom("getstripe", path).stdout)
    return layout.objects[0]


def test_objects_refuse_writes_of_another_epoch(cluster):
    # The OSS's side, on the wire: an object cut in epoch 1 refuses a write made in epoch 0
    # (-ESTALE) and answers a write of epoch 2 with -EAGAIN (its cut has not come); a cut of an
    # epoch the object is in already leaves it alone; a cut of a missing object makes it, empty.
    idx, objid = 0, 0x7000001
    host, port = cluster.oss_addr(cluster.oss_name(idx))
    bulk = b"z" * 4096
    with w.Conn(host, port) as c:
        h, body, _ = c.call(w.OP["OST_WRITE"], w.ost_io(idx, objid, 0, len(bulk), ino=5), bulk)
        assert h.status == 0
        h, body, _ = c.call(w.OP["OST_PUNCH"], w.ost_io(idx, objid, length=1000, ino=5, trunc_epoch=1))
        assert h.status == 0
        h, body, _ = c.call(w.OP["OST_WRITE"], w.ost_io(idx, objid, 0, len(bulk), ino=5), bulk)
        assert h.status == -errno.ESTALE
        h, body, _ = c.call(w.OP["OST_WRITE"], w.ost_io(idx, objid, 0, len(bulk), ino=5, trunc_epoch=2), bulk)
        assert h.status == -errno.EAGAIN
        h, body, _ = c.call(w.OP["OST_WRITE"], w.ost_io(idx, objid, 0, len(bulk), ino=5, trunc_epoch=1), bulk)
        assert h.status == 0
        # A cut of epoch 1 again: the object is in epoch 1 already, its new bytes stay.
        h, body, _ = c.call(w.OP["OST_PUNCH"], w.ost_io(idx, objid, length=0, ino=5, trunc_epoch=1))
        assert h.status == 0
        h, body, _ = c.call(w.OP["OST_GETATTR"], w.ost_io(idx, objid))
        assert h.status == 0 and w.OST_IO_REP.unpack(body)[1] == 4096
        # A cut of a missing object makes it, in the epoch: an old write is refused.
        h, body, _ = c.call(w.OP["OST_PUNCH"], w.ost_io(idx, objid + 1, length=0, ino=6, trunc_epoch=3))
        assert h.status == 0
        h, body, _ = c.call(w.OP["OST_WRITE"], w.ost_io(idx, objid + 1, 0, len(bulk), ino=6, trunc_epoch=2), bulk)
        assert h.status == -errno.ESTALE
        # Epochs are only for writes and cuts.
        h, body, _ = c.call(w.OP["OST_GETATTR"], w.ost_io(idx, objid, trunc_epoch=1))
        assert h.status == -errno.EPROTO


@pytest.mark.allow_log(r"truncator: inode \d+: objects not cut yet", r"connection to OSS")
def test_cut_still_to_do_survives_an_mds_restart(cluster):
    # The OSS holding the object is down while the file is truncated: the MDS records the cut,
    # answers after a while anyway, and is killed. Restarted (with the OSS), it cuts the object.
    mnt = cluster.mount()
    cluster.loom("setstripe", "-E", "-1", "-c", "1", mnt)
    path = os.path.join(mnt, "f")
    with open(path, "wb") as f:
        f.write(b"k" * (3 * MiB))
    idx, objid = _object_of(cluster, path)
    obj = object_path(cluster.ost_dir(idx), objid)
    assert os.path.getsize(obj) == 3 * MiB
    cluster.kill9(cluster.oss_name(idx))
    os.truncate(path, MiB)                      # answered although the object is not cut
    assert os.stat(path).st_size == MiB
    assert os.path.getsize(obj) == 3 * MiB
    cluster.kill9("mds")
    cluster.up()
    assert wait_until(lambda: os.path.getsize(obj) == MiB, 60), \
        "the restarted MDS never cut the object (%d bytes)" % os.path.getsize(obj)
    assert _read(path) == b"k" * MiB

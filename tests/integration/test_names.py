"""Hostile names: '/', 256 bytes, an embedded NUL, '.' and '..', and paths that try to climb out
of the root. The MDS answers each with the errno a local file system gives, over the raw wire
(where no kernel filters them first) and through the `loom` tool."""

import errno
import struct

import loomwire as w

ROOT = 1
S_IFDIR = 0o040000
MDS_MKDIR = 0x0106   # wire.h


def mkdir_body(parent, name, mode=0o755):
    return w.cred() + struct.pack("<QIHH", parent, mode, len(name), 0) + name


def name_body(parent, name):
    return w.cred() + struct.pack("<QH6x", parent, len(name)) + name


BAD_NAMES = [
    (b"a/b", errno.EINVAL),
    (b"/", errno.EINVAL),
    (b"x" * 256, errno.ENAMETOOLONG),
    (b"nul\0byte", errno.EINVAL),
    (b"\0", errno.EINVAL),
    (b"", errno.ENOENT),
    (b".", errno.EEXIST),
    (b"..", errno.EEXIST),
    (b"../../etc", errno.EINVAL),
]


def test_mkdir_with_a_bad_name_gets_the_posix_errno(cluster):
    with w.Conn(cluster.mds_host, cluster.mds_port) as c:
        for name, err in BAD_NAMES:
            h, _, _ = c.call(MDS_MKDIR, mkdir_body(ROOT, name))
            assert h.status == -err, "mkdir %r: status %d, expected -%s" % (name, h.status, errno.errorcode[err])
            assert c.ping() == 0, "the connection stopped serving after mkdir %r" % name
    # Nothing was made.
    assert cluster.loom("ls", "/").stdout == ""


def test_a_255_byte_name_is_fine(cluster):
    name = b"y" * 255
    with w.Conn(cluster.mds_host, cluster.mds_port) as c:
        h, body, _ = c.call(MDS_MKDIR, mkdir_body(ROOT, name))
        assert h.status == 0, h
        h, body, _ = c.call(w.OP["MDS_LOOKUP"], name_body(ROOT, name))
        assert h.status == 0 and w.parse_attr(body)["mode"] & S_IFDIR
    assert cluster.loom("ls", "/").stdout == name.decode() + "\n"


def test_lookup_of_dotdot_at_the_root_stays_at_the_root(cluster):
    with w.Conn(cluster.mds_host, cluster.mds_port) as c:
        h, body, _ = c.call(w.OP["MDS_LOOKUP"], name_body(ROOT, b".."))
        assert h.status == 0 and w.parse_attr(body)["ino"] == ROOT, (h, body[:8])
        for bad, err in ((b"../etc", errno.EINVAL), (b"a/../b", errno.EINVAL), (b"x" * 256, errno.ENAMETOOLONG)):
            h, _, _ = c.call(w.OP["MDS_LOOKUP"], name_body(ROOT, bad))
            assert h.status == -err, (bad, h)


def test_paths_cannot_climb_out_of_the_root(cluster):
    # As on any file system, /.. is /: the tool's path walk can never leave the file system.
    cluster.loom("mkdir", "/../../escape")
    cluster.loom("put", "-", "/a/../../../b", input="x", check=False)
    assert set(cluster.loom("ls", "/").stdout.split()) == {"escape"}
    cluster.loom("mkdir", "/a")
    cluster.loom("put", "-", "/a/../../../b", input="x")
    assert set(cluster.loom("ls", "/").stdout.split()) == {"escape", "a", "b"}
    p = cluster.loom("mkdir", "/" + "n" * 256, check=False)
    assert p.returncode != 0 and "File name too long" in p.stderr, p.stderr

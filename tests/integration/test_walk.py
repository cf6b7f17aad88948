"""MDS_WALK on the wire: the MDS resolves what it can of a path in one round trip and stops where
the client's own walk must take over (a symlink, a missing name, a non-directory followed by
'/', the last component when the parent is asked for); with LW_WALK_OPEN it opens the file as
MDS_OPEN would. Malformed walks are refused with a clear errno and the connection stays up."""

import os
import struct

import loomwire as w

WALK = 0x0121
OPEN_FLAG, PARENT_FLAG = 0x2, 0x1
WALK_REQ = struct.Struct("<IIH6x")      # lw_walk_req: flags open_flags pathlen pad[3]
WALK_REP_TAIL = struct.Struct("<II")    # after lw_attr: consumed flags
OPEN_REP_TAIL = struct.Struct("<QIIQ")  # lw_open_rep after lw_attr: handle has_layout dom_len dir_moves


def walk(conn, path, flags=0, open_flags=os.O_RDONLY):
    """(status, attr, consumed, reply flags, rest of the body)."""
    h, body, _ = conn.call(WALK, w.cred() + WALK_REQ.pack(flags, open_flags, len(path)) + path)
    if h.status:
        return h.status, None, None, None, body
    attr = w.parse_attr(body)
    consumed, rflags = WALK_REP_TAIL.unpack_from(body, w.ATTR.size)
    return 0, attr, consumed, rflags, body[w.ATTR.size + WALK_REP_TAIL.size:]


def test_walk_stops_where_the_client_must_walk_on(cluster):
    mnt = cluster.mount()
    os.makedirs(os.path.join(mnt, "a", "b"))
    with open(os.path.join(mnt, "a", "b", "f"), "wb") as f:
        f.write(b"x" * 100)
    os.symlink("b", os.path.join(mnt, "a", "link"))
    ino = {p: os.stat(os.path.join(mnt, p)).st_ino for p in ("a", "a/b", "a/b/f")}
    with w.Conn(cluster.mds_host, cluster.mds_port) as c:
        st, attr, consumed, _, _ = walk(c, b"/a/b/f")
        assert (st, attr["ino"], consumed, attr["size"]) == (0, ino["a/b/f"], 6, 100)
        st, attr, consumed, _, _ = walk(c, b"//a//b///")             # a directory and its slashes
        assert (st, attr["ino"], consumed) == (0, ino["a/b"], 6)
        st, attr, consumed, _, _ = walk(c, b"/a/b/f/")               # a file with '/' after it
        assert (st, attr["ino"], consumed) == (0, ino["a/b"], 4)
        st, attr, consumed, _, _ = walk(c, b"/a/b/f/g")
        assert (st, attr["ino"], consumed) == (0, ino["a/b"], 4)
        st, attr, consumed, _, _ = walk(c, b"/a/link/f")             # a symlink: the client's
        assert (st, attr["ino"], consumed) == (0, ino["a"], 2)
        st, attr, consumed, _, _ = walk(c, b"/a/nope/f")             # a missing name
        assert (st, attr["ino"], consumed) == (0, ino["a"], 2)
        st, attr, consumed, _, _ = walk(c, b"/a/b/f", PARENT_FLAG)   # the parent of the last one
        assert (st, attr["ino"], consumed) == (0, ino["a/b"], 4)
        st, attr, consumed, _, _ = walk(c, b"/a/b/../b/./f")          # "." and ".." as lookups do
        assert (st, attr["ino"], consumed) == (0, ino["a/b/f"], 13)
        st, attr, consumed, _, _ = walk(c, b"")
        assert (st, attr["ino"], consumed) == (0, w.ROOT_INO, 0)
        st, attr, consumed, _, _ = walk(c, b"x" * 256)                # a name too long: not looked up
        assert (st, attr["ino"], consumed) == (0, w.ROOT_INO, 0)


def test_walk_opens_for_reading_in_the_same_round_trip(cluster):
    mnt = cluster.mount()
    with open(os.path.join(mnt, "small"), "wb") as f:
        f.write(b"hello")
    os.chmod(os.path.join(mnt, "small"), 0o600)
    with w.Conn(cluster.mds_host, cluster.mds_port) as c:
        assert c.call(0x0101, w.connect_req(os.urandom(16)))[0].status == 0  # MDS_CONNECT: a session
        st, attr, consumed, rflags, rest = walk(c, b"/small", OPEN_FLAG)
        assert st == 0 and rflags == 1, (st, rflags)
        oattr = w.parse_attr(rest)
        handle, has_layout, dom_len, dir_moves = OPEN_REP_TAIL.unpack_from(rest, w.ATTR.size)
        assert oattr["ino"] == attr["ino"] and handle != 0 and has_layout == 1 and dom_len == 5
        assert rest.endswith(b"hello")                               # Data-on-MDT bytes travel along
        # Not for writing, not with O_TRUNC, not without the whole path, not without permission:
        # the walk is answered and the client opens by itself.
        for path, flags, oflags in ((b"/small", OPEN_FLAG, os.O_WRONLY), (b"/small", OPEN_FLAG, os.O_RDONLY | os.O_TRUNC),
                                    (b"/small/x", OPEN_FLAG, os.O_RDONLY)):
            st, attr, consumed, rflags, rest = walk(c, path, flags, oflags)
            assert st == 0 and rflags == 0 and rest == b"", (path, oflags)
        h, body, _ = c.call(WALK, w.cred(uid=1000, gid=1000) + WALK_REQ.pack(OPEN_FLAG, os.O_RDONLY, 6) + b"/small")
        assert h.status == 0 and WALK_REP_TAIL.unpack_from(body, w.ATTR.size)[1] == 0 and len(body) == 128


def test_malformed_walks_are_refused(cluster):
    with w.Conn(cluster.mds_host, cluster.mds_port) as c:
        assert walk(c, b"/a", flags=0x4)[0] == -22                       # an unknown flag
        assert walk(c, b"/a\0b")[0] == -22                               # a NUL in the path
        h, _, _ = c.call(WALK, w.cred() + WALK_REQ.pack(0, 0, 4096) + b"a" * 4096)
        assert h.status == -22                                           # longer than PATH_MAX
        h, _, _ = c.call(WALK, w.cred() + WALK_REQ.pack(0, 0, 10) + b"/abc")
        assert h.status == -w.EPROTO                                     # shorter than it says
        h, _, _ = c.call(WALK, w.cred() + struct.pack("<IIHHHH", 0, 0, 0, 1, 0, 0))
        assert h.status == -22                                           # padding not zero
        assert c.ping() == 0                                             # still served

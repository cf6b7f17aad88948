"""The MDS's reply cache, over the raw wire: a request that changes the namespace is applied at
most once. A client that lost its connection resends it on a new one (same client uuid, same
req_id, header flag LW_F_RESENT) and gets the answer of the first run, also after the MDS was
killed with SIGKILL and restarted in between (the cache lives in the MDT, written in the same
transaction as the change). The same bytes from another client, or under another req_id, are a
new request and run afresh.
"""

import os
import re

import loomwire as w

S_IFMT, S_IFDIR, S_IFREG, S_IFLNK = 0o170000, 0o040000, 0o100000, 0o120000


class RawClient:
    """A connection that authenticated (the cluster's key) and said MDS_CONNECT with a uuid, as
    libloom does; requests go with the req_id and flags the test chooses."""

    def __init__(self, cluster, uuid):
        self.uuid = uuid
        self.conn = w.Conn(cluster.mds_host, cluster.mds_port, timeout=30)
        status, body = self.call(w.NS_OP["MDS_CONNECT"], w.connect_req(uuid), req_id=1)
        assert status == 0, "MDS_CONNECT failed: %d" % status
        self.root = w.CONNECT_REP.unpack_from(body)[0]
        assert self.root == w.ROOT_INO
        if self.last.rpflags & w.RPF_RECOVERING:
            # After a restart, as libloom's hello: nothing to replay (what these tests check
            # was committed first), so the MDS need not wait for this client.
            st, _ = self.call(w.NS_OP["MDS_REPLAY"], w.REPLAY_REQ.pack(0, 0, 0, w.RP_DONE, 0, 0, 0), req_id=2)
            assert st == 0, "MDS_REPLAY (done) answered %d" % st

    def call(self, opcode, body, req_id, flags=0):
        self.conn.send(w.frame(opcode, body, req_id=req_id, flags=flags))
        h, rbody, _ = self.conn.recv_frame()
        assert h.req_id == req_id and h.opcode == opcode and h.flags & w.F_REPLY, h
        self.last = h
        return h.status, rbody

    def close(self):
        # As libloom's disconnect: commit and say goodbye, so that a restart of the MDS right
        # after does not wait for this client.
        try:
            self.call(w.NS_OP["MDS_SYNC"], w.sync_req(w.SYNC_BYE), req_id=(1 << 62) + 3)
        except (OSError, w.ConnectionClosed):
            pass
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def new_uuid():
    return os.urandom(16)


def lookup(cluster, parent, name):
    """(status, attr dict or None) of name in parent, asked by a client of its own."""
    with RawClient(cluster, new_uuid()) as c:
        st, body = c.call(w.NS_OP["MDS_LOOKUP"], w.cred() + w.name_req(parent, name), req_id=7)
    return st, (w.parse_attr(body) if st == 0 else None)


def names(cluster, d="/"):
    return sorted(cluster.loom("ls", d).stdout.split())


def mkdir_then_rmdir(cluster, uuid, name, mkdir_id, rmdir_id):
    with RawClient(cluster, uuid) as c:
        st, body = c.call(w.NS_OP["MDS_MKDIR"], w.cred() + w.mkdir_req(w.ROOT_INO, name), req_id=mkdir_id)
        assert st == 0, "MDS_MKDIR failed: %d" % st
        attr = w.parse_attr(body)
        assert attr["mode"] & S_IFMT == S_IFDIR
        st, _ = c.call(w.NS_OP["MDS_RMDIR"], w.cred() + w.name_req(w.ROOT_INO, name), req_id=rmdir_id)
        assert st == 0, "MDS_RMDIR failed: %d" % st
        # Without a resend flag, the same request again is a new one: the directory is gone.
        st, _ = c.call(w.NS_OP["MDS_RMDIR"], w.cred() + w.name_req(w.ROOT_INO, name), req_id=rmdir_id + 1)
        assert st == -w.ENOENT, "a second rmdir of a removed directory answered %d" % st
        # Committed, as an fsync would have it (the MDS answers changes before their commit;
        # a kill -9 before it would leave them to a replay this raw client does not make).
        st, _ = c.call(w.NS_OP["MDS_SYNC"], w.sync_req(), req_id=rmdir_id + 2)
        assert st == 0, "MDS_SYNC answered %d" % st
    return attr


def check_resends(cluster, uuid, name, attr, mkdir_id, rmdir_id):
    rmdir = w.cred() + w.name_req(w.ROOT_INO, name)
    mkdir = w.cred() + w.mkdir_req(w.ROOT_INO, name)
    with RawClient(cluster, uuid) as c:
        st, _ = c.call(w.NS_OP["MDS_RMDIR"], rmdir, req_id=rmdir_id, flags=w.F_RESENT)
        assert st == 0, "a resent RMDIR was not answered from the reply cache: status %d" % st
        # The resent MKDIR gets the first run's answer (the same inode), and makes nothing.
        st, body = c.call(w.NS_OP["MDS_MKDIR"], mkdir, req_id=mkdir_id, flags=w.F_RESENT)
        assert st == 0, "a resent MKDIR was not answered from the reply cache: status %d" % st
        assert w.parse_attr(body)["ino"] == attr["ino"], "a resent MKDIR answered another inode"
        assert lookup(cluster, w.ROOT_INO, name)[0] == -w.ENOENT, "a resent MKDIR made the directory again"
        # Another req_id of the same client is a new request.
        st, _ = c.call(w.NS_OP["MDS_RMDIR"], rmdir, req_id=rmdir_id + 1000, flags=w.F_RESENT)
        assert st == -w.ENOENT, "a resend under a req_id never used answered %d, not -ENOENT" % st
    # Another client's resend with the same req_id is a new request too.
    with RawClient(cluster, new_uuid()) as other:
        st, _ = other.call(w.NS_OP["MDS_RMDIR"], rmdir, req_id=rmdir_id, flags=w.F_RESENT)
        assert st == -w.ENOENT, "another client's resend answered %d, not -ENOENT" % st
        st, _ = other.call(w.NS_OP["MDS_MKDIR"], mkdir, req_id=mkdir_id, flags=w.F_RESENT)
        assert st == 0, "another client's MKDIR with a used req_id did not run: %d" % st
    assert names(cluster) == [name.decode()]


def resend_counts(cluster):
    """The MDS's `resent` and `reply_cache_hits` lines of `loom get_param mdt.*.stats`."""
    out = cluster.loom("get_param", "-n", "mdt.*.stats").stdout
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r"^(resent|reply_cache_hits) +(\d+) samples \[reqs\]$", out, re.M)}


def test_resent_rmdir_on_a_new_connection_is_answered_from_the_reply_cache(cluster):
    uuid = new_uuid()
    attr = mkdir_then_rmdir(cluster, uuid, b"d", 100, 101)
    assert names(cluster) == []
    assert resend_counts(cluster) == {}
    check_resends(cluster, uuid, b"d", attr, 100, 101)
    # Five resends, two of them answered from the cache (the others ran afresh).
    assert resend_counts(cluster) == {"resent": 5, "reply_cache_hits": 2}


def test_reply_cache_survives_mds_kill9(cluster):
    uuid = new_uuid()
    attr = mkdir_then_rmdir(cluster, uuid, b"survivor", 5000, 5001)
    cluster.kill9("mds")
    cluster.restart()
    check_resends(cluster, uuid, b"survivor", attr, 5000, 5001)
    # And once more across a second restart: the entries are kept, not consumed.
    cluster.kill9("mds")
    cluster.restart()
    with RawClient(cluster, uuid) as c:
        st, _ = c.call(w.NS_OP["MDS_RMDIR"], w.cred() + w.name_req(w.ROOT_INO, b"survivor"), req_id=5001,
                       flags=w.F_RESENT)
        assert st == 0, "the reply cache forgot an entry across a second MDS restart: %d" % st
    assert names(cluster) == ["survivor"]


def test_resend_while_the_old_connection_is_still_open(cluster):
    # The client reconnected before the MDS noticed its old connection had died.
    uuid = new_uuid()
    old = RawClient(cluster, uuid)
    try:
        st, _ = old.call(w.NS_OP["MDS_MKDIR"], w.cred() + w.mkdir_req(w.ROOT_INO, b"x"), req_id=42)
        assert st == 0
        st, _ = old.call(w.NS_OP["MDS_RMDIR"], w.cred() + w.name_req(w.ROOT_INO, b"x"), req_id=43)
        assert st == 0
        with RawClient(cluster, uuid) as new:
            st, _ = new.call(w.NS_OP["MDS_RMDIR"], w.cred() + w.name_req(w.ROOT_INO, b"x"), req_id=43,
                             flags=w.F_RESENT)
            assert st == 0, "a resend on a second connection of the same client answered %d" % st
    finally:
        old.close()
    assert names(cluster) == []


# Each non-idempotent request, run once and then resent: the resend answers what the first run
# answered (status and body), where running it again would fail or change the namespace again.

def _prepare(c, top):
    """Makes TOP/dir and TOP/file (with user.a); returns (top, dir, file) inode numbers."""
    st, body = c.call(w.NS_OP["MDS_MKDIR"], w.cred() + w.mkdir_req(w.ROOT_INO, top), req_id=10)
    assert st == 0, st
    top_ino = w.parse_attr(body)["ino"]
    st, body = c.call(w.NS_OP["MDS_MKDIR"], w.cred() + w.mkdir_req(top_ino, b"dir"), req_id=11)
    assert st == 0, st
    dir_ino = w.parse_attr(body)["ino"]
    st, body = c.call(w.NS_OP["MDS_CREATE"], w.cred() + w.create_req(top_ino, b"file"), req_id=12)
    assert st == 0, st
    file_ino = w.parse_attr(body[:w.ATTR.size])["ino"]
    st, _ = c.call(w.NS_OP["MDS_SETXATTR"], w.cred() + w.xattr_req(file_ino, b"user.a", b"1"), req_id=13)
    assert st == 0, st
    return top_ino, dir_ino, file_ino


# name: (opcode, request body after the cred from (top, dir, file) inodes, what a second run answers)
OPS = {
    "create": ("MDS_CREATE", lambda t, d, f: w.create_req(d, b"new"), -w.EEXIST),
    "mkdir": ("MDS_MKDIR", lambda t, d, f: w.mkdir_req(d, b"sub"), -w.EEXIST),
    "unlink": ("MDS_UNLINK", lambda t, d, f: w.name_req(t, b"file"), -w.ENOENT),
    "rmdir": ("MDS_RMDIR", lambda t, d, f: w.name_req(t, b"dir"), -w.ENOENT),
    "rename": ("MDS_RENAME", lambda t, d, f: w.rename_req(t, b"file", d, b"moved"), -w.ENOENT),
    "link": ("MDS_LINK", lambda t, d, f: w.link_req(f, d, b"hard"), -w.EEXIST),
    "symlink": ("MDS_SYMLINK", lambda t, d, f: w.symlink_req(d, b"sym", b"../file"), -w.EEXIST),
    "setxattr": ("MDS_SETXATTR", lambda t, d, f: w.xattr_req(f, b"user.b", b"v", w.XATTR_CREATE), -w.EEXIST),
    "removexattr": ("MDS_REMOVEXATTR", lambda t, d, f: w.xattr_req(f, b"user.a"), -w.ENODATA),
}


def tree_state(cluster):
    """{path: (`ls -l` line, `stat` without atime)} of the whole namespace."""
    out = {}
    todo = ["/"]
    while todo:
        d = todo.pop()
        entries = [x for x in cluster.loom("ls", d).stdout.splitlines() if x]
        longs = [x for x in cluster.loom("ls", "-l", d).stdout.splitlines() if x]
        assert len(entries) == len(longs)
        for name, line in zip(entries, longs):
            p = d.rstrip("/") + "/" + name
            st = [x for x in cluster.loom("stat", p).stdout.splitlines() if not x.startswith("Access: 1")]
            out[p] = (line, st)
            if line.startswith("d"):
                todo.append(p)
    return out


def xattr_state(cluster, inos):
    out = {}
    with RawClient(cluster, new_uuid()) as c:
        for ino in inos:
            for name in (b"user.a", b"user.b"):
                st, body = c.call(w.NS_OP["MDS_GETXATTR"],
                                  w.cred() + w.XATTR_REQ.pack(ino, 256, 0, len(name)) + name, req_id=9)
                out[ino, name] = (st, body)
    return out


def test_each_namespace_change_is_applied_at_most_once(cluster):
    uuid = new_uuid()
    first = {}
    with RawClient(cluster, uuid) as c:
        for k, (op, (opname, body_of, _)) in enumerate(sorted(OPS.items())):
            inos = _prepare(c, op.encode())
            body = w.cred() + body_of(*inos)
            req_id = 1000 + k
            st, rep = c.call(w.NS_OP[opname], body, req_id=req_id)
            assert st == 0, "%s failed: %d" % (op, st)
            first[op] = (w.NS_OP[opname], body, req_id, rep, inos[2])
    tree = tree_state(cluster)
    xattrs = xattr_state(cluster, [v[4] for v in first.values()])

    wrong = []
    with RawClient(cluster, uuid) as c:        # the client, reconnected
        for op, (opcode, body, req_id, rep, _) in sorted(first.items()):
            st2, rep2 = c.call(opcode, body, req_id=req_id, flags=w.F_RESENT)
            if (st2, rep2) != (0, rep):
                wrong.append("%s resent answered %d %r, not the first answer 0 %r" % (op, st2, rep2[:24], rep[:24]))
    assert not wrong, "resends not answered from the reply cache:\n  " + "\n  ".join(wrong)
    assert tree_state(cluster) == tree, "a resend changed the namespace again"
    assert xattr_state(cluster, [v[4] for v in first.values()]) == xattrs, "a resend changed xattrs again"

    with RawClient(cluster, uuid) as c:
        for op, (opcode, body, req_id, rep, _) in sorted(first.items()):
            # The same request under a new req_id is a new one: it fails as a repeat does.
            st3, _ = c.call(opcode, body, req_id=req_id + 500, flags=w.F_RESENT)
            if st3 != OPS[op][2]:
                wrong.append("%s under a new req_id answered %d, not %d" % (op, st3, OPS[op][2]))
    assert not wrong, "\n".join(wrong)

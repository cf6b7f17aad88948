"""Resends do what they did once (issue 15), walked over the table of opcodes, src/proto/ops.def.

For every row whose RESEND is not READ, a scenario sends the request once as a client with a fixed
uuid (MDS_CONNECT first, as libloom does), reads the reply and treats it as lost: the connection
closes. On a new connection the same client sends the same body again, with the same req_id and
the header flag LW_F_RESENT, and the scenario checks what the row's policy promises:

  CACHED   the first reply again, byte for byte, and the change made once: in between, another
           request makes a change that a second run would undo or collide with;
  HANDLE   the handle the first run made (only one exists: closing it once releases the file),
           and an O_TRUNC done once, also across an MDS restart;
  REPEATS  the same status, and the state one run leaves.

Every CACHED and HANDLE scenario runs again with the MDS killed (SIGKILL) and restarted before
each resend: the reply cache lives in the MDT, the handles die with the MDS.
A row without a scenario fails (test_every_row_that_changes_state_has_a_scenario, and its own
case), so a new opcode cannot land without a tested resend policy.
"""

import collections
import itertools
import os
import struct
import re

import pytest

import loomwire as w
from loomutil import wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WIRE_H = os.path.join(REPO, "src", "proto", "wire.h")

ROOT = w.ROOT_INO
S_IFREG = 0o100000
C = w.cred()   # root's: every request below is root's


OPS = w.read_ops_def()
OP = {name: row["value"] for name, row in OPS.items()}
RESENT = sorted(name for name, row in OPS.items() if row["resend"] != "READ")

SCENARIOS = {}   # opcode name -> (policy, scenario(bench))


def scenario(name, policy):
    def register(fn):
        assert name not in SCENARIOS, name
        SCENARIOS[name] = (policy, fn)
        return fn
    return register


def test_every_row_that_changes_state_has_a_scenario():
    missing = [n for n in RESENT if n not in SCENARIOS]
    assert not missing, "rows of ops.def with a RESEND other than READ and no resend scenario here: %s" % missing
    wrong = ["%s is %s in ops.def, its scenario tests %s" % (n, OPS[n]["resend"], SCENARIOS[n][0])
             for n in RESENT if SCENARIOS[n][0] != OPS[n]["resend"]]
    assert not wrong, "\n".join(wrong)
    stale = [n for n in SCENARIOS if n not in RESENT]
    assert not stale, "scenarios for opcodes that ops.def does not list as changing state: %s" % stale


def test_loomwire_structs_have_wire_h_sizes():
    text = ""
    for h in (WIRE_H, os.path.join(os.path.dirname(WIRE_H), "wire_auth.h")):
        with open(h) as f:
            text += f.read()
    sizes = {m.group(1): int(m.group(2)) for m in
             re.finditer(r"_Static_assert\(sizeof\(struct lw_(\w+)\) == (\d+)", text)}
    ours = {"SETATTR": "setattr", "OPEN_REQ": "open_req", "OPEN_REP": "open_rep", "CLOSE_REQ": "close_req",
            "LAYOUT": "layout", "OSTOBJ": "ostobj", "SETLAYOUT_REQ": "setlayout_req", "SWAP_REQ": "swap_req",
            "POOL_REQ": "pool_req", "POOL_ENT": "pool_ent", "OST_ADMIN_REQ": "ost_admin_req",
            "LOCK_REQ": "lock_req", "LOCK_REP": "lock_rep", "WALK_REQ": "walk_req", "WALK_REP": "walk_rep",
            "OST_REGISTER_REQ": "ost_register_req", "OST_REGISTER_REP": "ost_register_rep",
            "OST_REPLACE_REP": "ost_replace_rep", "OST_REMOVE_REQ": "ost_remove_req",
            "OST_REMOVE_REP": "ost_remove_rep",
            "HEARTBEAT_REQ": "ost_heartbeat_req", "HEARTBEAT_ENT": "ost_heartbeat_ent",
            "SCRUB_REP": "scrub_rep", "INO_REQ": "ino_req", "ATTR": "attr", "OST_IO": "ost_io",
            "CONNECT_REQ": "connect_req", "CONNECT_REP": "connect_rep", "CREATE_REQ": "create_req",
            "CREATE_REP": "create_rep", "STATFS": "statfs", "OST_ENTRY": "ost_entry",
            "NODE_ENT": "node_ent", "NODEMAP_REP": "nodemap_rep"}
    wrong = ["loomwire.%s is %d bytes, struct lw_%s %s" % (k, getattr(w, k).size, s, sizes.get(s, "unknown"))
             for k, s in sorted(ours.items()) if sizes.get(s) != getattr(w, k).size]
    assert not wrong, "\n".join(wrong)


def run_scenario(bench, name):
    if name not in SCENARIOS:
        pytest.fail("%s (RESEND %s in ops.def) has no resend scenario" % (name, OPS[name]["resend"]))
    policy, run = SCENARIOS[name]
    assert policy == OPS[name]["resend"], "%s is %s in ops.def; the scenario tests %s" % (name, OPS[name]["resend"], policy)
    run(bench)


@pytest.mark.parametrize("name", RESENT)
def test_resend_does_what_it_did_once(bench, name):
    run_scenario(bench, name)


@pytest.mark.parametrize("name", [n for n in RESENT if OPS[n]["resend"] in ("CACHED", "HANDLE")])
def test_resend_across_an_mds_restart(bench, name):
    # The MDS is killed (SIGKILL) and restarted before every resend: the reply cache, written with
    # the change in the MDT, still answers; an open gets a new handle, and truncates no more.
    bench.restart_before_resend = True
    run_scenario(bench, name)


# ---- the bench: a client whose replies get lost, and another that prepares and checks ----------

Sent = collections.namedtuple("Sent", "name body bulk req_id addr connect status reply rbulk")


class Bench:
    """A test's cluster, the client whose replies get lost (first, again), and another client."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.uuid = os.urandom(16)          # the client whose replies are lost
        self.other_uuid = os.urandom(16)    # the other one's, the same across reconnections
        self.ids = itertools.count(1000)
        self._other = None
        self.restart_before_resend = False

    @property
    def other(self):
        """Another client (a uuid of its own), on one connection: it prepares, changes, checks."""
        if self._other is None:
            self._other = w.Client(self.cluster.mds_host, self.cluster.mds_port, self.other_uuid)
        return self._other

    def reconnect(self):
        """After an MDS restart: the other client's connection died with it."""
        if self._other:
            self._other.close()
        self._other = None

    def close(self):
        self.reconnect()

    def _conn(self, addr, connect):
        host, port = addr or (self.cluster.mds_host, self.cluster.mds_port)
        return w.Client(host, port, self.uuid, connect=connect and addr is None)

    def first(self, name, body, expect=0, bulk=b"", addr=None, connect=True):
        """Sends name once as the client, on a connection of its own that closes once the reply is
        in (addr: an OSS's (host, port); connect=False: no MDS_CONNECT first)."""
        req_id = next(self.ids)
        with self._conn(addr, connect) as c:
            st, rep, rbulk = c.call_bulk(OP[name], body, req_id, bulk=bulk)
        assert st == expect, "%s answered %d, not %d" % (name, st, expect)
        return Sent(name, body, bulk, req_id, addr, connect, st, rep, rbulk)

    def again(self, s):
        """Sends s again as the reconnected client would: a new connection, the same req_id, the
        same body, LW_F_RESENT. (status, body, bulk)."""
        if self.restart_before_resend and s.addr is None:
            # What was answered is committed first, as an fsync would have it: the MDS answers a
            # change before its commit, and these raw clients keep nothing to replay.
            self.do("MDS_SYNC", w.sync_req())
            self.cluster.kill9("mds")
            self.cluster.restart()
            self.reconnect()
            self.other  # back at once, saying it has nothing to replay: the MDS waits for nobody
        with self._conn(s.addr, s.connect) as c:
            return c.call_bulk(OP[s.name], s.body, s.req_id, flags=w.F_RESENT, bulk=s.bulk)

    def cached(self, s):
        """CACHED: the resend answers the first reply, byte for byte."""
        st, rep, _ = self.again(s)
        at = next((k for k, (x, y) in enumerate(zip(rep, s.reply)) if x != y), min(len(rep), len(s.reply)))
        assert (st, rep) == (s.status, s.reply), \
            "%s resent answered %d and %d bytes, the first reply %d and %d bytes; they differ from byte %d: %s, was %s" % (
                s.name, st, len(rep), s.status, len(s.reply), at, rep[at:at + 16].hex(), s.reply[at:at + 16].hex())
        return rep

    def repeats(self, s):
        """REPEATS: the resend succeeds with the first run's status; returns its reply."""
        st, rep, rbulk = self.again(s)
        assert st == s.status, "%s resent answered %d, its first run %d" % (s.name, st, s.status)
        return rep, rbulk

    def do(self, name, body, expect=0):
        """The other client's request: the change in between, or a look."""
        st, rep = self.other.call(OP[name], body, req_id=next(self.ids))
        assert expect is None or st == expect, "%s (by another client) answered %d, not %d" % (name, st, expect)
        return rep if expect is not None else (st, rep)

    # conveniences, all by the other client
    def create(self, parent, name, flags=w.CR_EXCL, open_flags=0):
        """(attr, layout dict) of a new regular file."""
        rep = self.do("MDS_CREATE", C + w.CREATE_REQ.pack(parent, S_IFREG | 0o644, 0, flags, open_flags,
                                                                  len(name)) + name)
        return w.parse_attr(rep), w.parse_layout(rep, w.CREATE_REP.size)

    def mkdir(self, parent, name):
        return w.parse_attr(self.do("MDS_MKDIR", C + w.mkdir_req(parent, name)))["ino"]

    def attr(self, ino):
        return w.parse_attr(self.do("MDS_GETATTR", C + w.ino_req(ino)))

    def lookup(self, parent, name):
        st, rep = self.do("MDS_LOOKUP", C + w.name_req(parent, name), expect=None)
        return st, (w.parse_attr(rep) if st == 0 else None)

    def layout(self, ino):
        return w.parse_layout(self.do("MDS_GETLAYOUT", C + w.ino_req(ino)))

    def getxattr(self, ino, name):
        st, rep = self.do("MDS_GETXATTR", C + w.XATTR_REQ.pack(ino, 256, 0, len(name)) + name, expect=None)
        return st, rep[8:]

    def ost_table(self):
        return w.ost_table_on(self.other.conn)[1]

    def pools(self):
        return w.parse_pools(self.do("MDS_POOL", C + w.pool_req(w.POOL_LIST)))

    def held_open(self, ino, parent, name, handle, what):
        """handle is the only handle of the file: after an unlink the file lives on until the
        client closes it once, and then it is released."""
        self.do("MDS_UNLINK", C + w.name_req(parent, name))
        st, rep = self.do("MDS_GETATTR", C + w.ino_req(ino), expect=None)
        assert st == 0, ("%s: the file was unlinked while the client held it open (handle %d), and is "
                         "gone (GETATTR answered %d): the MDS has no such handle" % (what, handle, st))
        self.first("MDS_CLOSE", C + w.close_req(ino, handle))
        self.released(ino, what)

    def released(self, ino, what):
        """The inode is gone: no second handle keeps the unlinked file alive."""
        st, rep = self.do("MDS_GETATTR", C + w.ino_req(ino), expect=None)
        assert st == -w.ESTALE, ("%s: the file is unlinked and the client holds no handle of it it knows of, "
                                 "yet its inode lives on (GETATTR answered %d, nlink %s): a handle holds it"
                                 % (what, st, w.parse_attr(rep)["nlink"] if st == 0 else "-"))


@pytest.fixture
def bench(cluster_factory):
    b = Bench(cluster_factory(osts=2))
    try:
        yield b
    finally:
        b.close()


# ---- CACHED: the first reply again, and the change made once -----------------------------------


@scenario("MDS_SETATTR", "CACHED")
def setattr_once(b):
    f = b.create(ROOT, b"f")[0]["ino"]
    s = b.first("MDS_SETATTR", C + w.setattr_req(f, w.SA_MODE, mode=0o600))
    b.do("MDS_SETATTR", C + w.setattr_req(f, w.SA_MODE, mode=0o644))
    b.cached(s)
    assert b.attr(f)["mode"] & 0o7777 == 0o644, "a resent SETATTR (mode 0600) ran again over a later chmod 0644"


@scenario("MDS_CREATE", "CACHED")
def create_once(b):
    s = b.first("MDS_CREATE", C + w.create_req(ROOT, b"f"))
    b.do("MDS_UNLINK", C + w.name_req(ROOT, b"f"))
    b.cached(s)
    assert b.lookup(ROOT, b"f")[0] == -w.ENOENT, "a resent CREATE made the file again after its unlink"
    # Created and opened: the resend names the first run's handle (after an MDS restart, a new
    # one: the handles died with the MDS), which holds the file open (an unlinked file lives on),
    # and no other handle exists (one close releases it). The rest is the first reply.
    s = b.first("MDS_CREATE", C + w.CREATE_REQ.pack(ROOT, S_IFREG | 0o644, 0, w.CR_EXCL | w.CR_OPEN, w.O_RDWR, 1) + b"g")
    handle, rep = resent_handle(b, s, lambda rep: w.CREATE_REP.unpack_from(rep)[1])
    assert rep[:120] + rep[128:] == s.reply[:120] + s.reply[128:], "a resent CREATE with LW_CR_OPEN answered otherwise"
    b.held_open(w.parse_attr(rep)["ino"], ROOT, b"g", handle, "CREATE with LW_CR_OPEN resent")
    # Nameless (LW_CR_TMPFILE, as O_TMPFILE: a migration's copy): one inode, held by the one
    # handle, which the resend names again; its close releases the file.
    s = b.first("MDS_CREATE", C + w.CREATE_REQ.pack(ROOT, S_IFREG | 0o600, 0, w.CR_TMPFILE | w.CR_OPEN, w.O_RDWR, 0))
    handle, rep = resent_handle(b, s, lambda rep: w.CREATE_REP.unpack_from(rep)[1])
    assert rep[:120] + rep[128:] == s.reply[:120] + s.reply[128:], "a resent nameless CREATE answered otherwise"
    ino = w.parse_attr(rep)["ino"]
    assert b.attr(ino)["nlink"] == 0, "a nameless file has a link"
    b.first("MDS_CLOSE", C + w.close_req(ino, handle))
    b.released(ino, "nameless CREATE resent")


@scenario("MDS_INOS", "CACHED")
def inos_once(b):
    """Inode numbers handed ahead: a resend gets the same range (a second grant would replace the
    first, and the creates sent behind with its numbers would be refused), and a create sent
    behind by that client, resent too, makes its file once."""
    s = b.first("MDS_INOS", w.INOS_REQ.pack(8, 0))
    first, count, _ = w.INOS_REP.unpack(b.cached(s))
    assert count == 8 and first > ROOT
    made = b.first("MDS_CREATE", C + w.create_req(ROOT, b"behind", ino=first + 2))
    assert w.parse_attr(made.reply)["ino"] == first + 2
    b.cached(made)
    assert b.lookup(ROOT, b"behind")[1]["ino"] == first + 2


@scenario("MDS_MKDIR", "CACHED")
def mkdir_once(b):
    s = b.first("MDS_MKDIR", C + w.mkdir_req(ROOT, b"d"))
    b.do("MDS_RMDIR", C + w.name_req(ROOT, b"d"))
    b.cached(s)
    assert b.lookup(ROOT, b"d")[0] == -w.ENOENT, "a resent MKDIR made the directory again after its rmdir"


@scenario("MDS_UNLINK", "CACHED")
def unlink_once(b):
    b.create(ROOT, b"f")
    s = b.first("MDS_UNLINK", C + w.name_req(ROOT, b"f"))
    new = b.create(ROOT, b"f")[0]["ino"]
    b.cached(s)
    st, attr = b.lookup(ROOT, b"f")
    assert st == 0 and attr["ino"] == new, "a resent UNLINK removed the file made again after it (%d)" % st


@scenario("MDS_RMDIR", "CACHED")
def rmdir_once(b):
    b.mkdir(ROOT, b"d")
    s = b.first("MDS_RMDIR", C + w.name_req(ROOT, b"d"))
    new = b.mkdir(ROOT, b"d")
    b.cached(s)
    st, attr = b.lookup(ROOT, b"d")
    assert st == 0 and attr["ino"] == new, "a resent RMDIR removed the directory made again after it (%d)" % st


@scenario("MDS_RENAME", "CACHED")
def rename_once(b):
    ino = b.create(ROOT, b"a")[0]["ino"]
    s = b.first("MDS_RENAME", C + w.rename_req(ROOT, b"a", ROOT, b"b"))
    b.do("MDS_RENAME", C + w.rename_req(ROOT, b"b", ROOT, b"a"))
    b.cached(s)
    assert b.lookup(ROOT, b"a")[1]["ino"] == ino and b.lookup(ROOT, b"b")[0] == -w.ENOENT, \
        "a resent RENAME a -> b moved the file again after it was renamed back"


@scenario("MDS_LINK", "CACHED")
def link_once(b):
    ino = b.create(ROOT, b"f")[0]["ino"]
    s = b.first("MDS_LINK", C + w.link_req(ino, ROOT, b"hard"))
    b.do("MDS_UNLINK", C + w.name_req(ROOT, b"hard"))
    b.cached(s)
    assert b.lookup(ROOT, b"hard")[0] == -w.ENOENT and b.attr(ino)["nlink"] == 1, \
        "a resent LINK made the link again after its unlink"


@scenario("MDS_SYMLINK", "CACHED")
def symlink_once(b):
    s = b.first("MDS_SYMLINK", C + w.symlink_req(ROOT, b"s", b"target"))
    b.do("MDS_UNLINK", C + w.name_req(ROOT, b"s"))
    b.cached(s)
    assert b.lookup(ROOT, b"s")[0] == -w.ENOENT, "a resent SYMLINK made the link again after its unlink"


@scenario("MDS_SETXATTR", "CACHED")
def setxattr_once(b):
    ino = b.create(ROOT, b"f")[0]["ino"]
    s = b.first("MDS_SETXATTR", C + w.xattr_req(ino, b"user.b", b"1"))
    b.do("MDS_SETXATTR", C + w.xattr_req(ino, b"user.b", b"2"))
    b.cached(s)
    assert b.getxattr(ino, b"user.b") == (0, b"2"), "a resent SETXATTR user.b=1 ran again over user.b=2"


@scenario("MDS_REMOVEXATTR", "CACHED")
def removexattr_once(b):
    ino = b.create(ROOT, b"f")[0]["ino"]
    b.do("MDS_SETXATTR", C + w.xattr_req(ino, b"user.a", b"1"))
    s = b.first("MDS_REMOVEXATTR", C + w.xattr_req(ino, b"user.a"))
    b.do("MDS_SETXATTR", C + w.xattr_req(ino, b"user.a", b"2"))
    b.cached(s)
    assert b.getxattr(ino, b"user.a") == (0, b"2"), "a resent REMOVEXATTR removed user.a set again after it"


def close_or_size_update(b, name):
    """A size report (size, mtime, a write) resent after another client truncated the file and
    set its mtime: the size does not grow back, the mtime stays, the data version moved once."""
    ino = b.create(ROOT, b"f")[0]["ino"]
    s = b.first("MDS_OPEN", C + w.open_req(ino, w.O_RDWR))
    attr, handle = w.parse_open(s.reply)
    s = b.first(name, C + w.close_req(ino, handle, w.CL_SIZE | w.CL_MTIME | w.CL_DATA, size=8192,
                                      mtime=1_000_000_000, trunc_epoch=attr["trunc_epoch"]))
    assert w.parse_attr(s.reply)["size"] == 8192
    b.do("MDS_SETATTR", C + w.setattr_req(ino, w.SA_SIZE | w.SA_MTIME, size=0, mtime=2_000_000_000))
    before = b.attr(ino)
    b.cached(s)
    after = b.attr(ino)
    assert (after["size"], after["mtime"], after["data_version"]) == (0, 2_000_000_000, before["data_version"]), \
        "a resent %s ran again after a truncation: size %d, mtime %d, data_version %d (was %d)" % (
            name, after["size"], after["mtime"], after["data_version"], before["data_version"])
    return ino, handle


@scenario("MDS_CLOSE", "CACHED")
def close_once(b):
    close_or_size_update(b, "MDS_CLOSE")


@scenario("MDS_SIZE_UPDATE", "CACHED")
def size_update_once(b):
    ino, handle = close_or_size_update(b, "MDS_SIZE_UPDATE")
    b.first("MDS_CLOSE", C + w.close_req(ino, handle))


@scenario("MDS_SETLAYOUT", "CACHED")
def setlayout_once(b):
    ino = b.create(ROOT, b"f")[0]["ino"]
    s = b.first("MDS_SETLAYOUT", C + w.setlayout_req(ino, w.layout_req(stripe_count=1)))
    later = w.parse_layout(b.do("MDS_SETLAYOUT", C + w.setlayout_req(ino, w.layout_req(stripe_count=2))))
    b.cached(s)
    now = b.layout(ino)
    assert now == later and now["stripe_count"] == 2, \
        "a resent SETLAYOUT (1 stripe) laid the file out again over a later one: %r, was %r" % (now, later)


@scenario("MDS_OST_ADMIN", "CACHED")
def ost_admin_once(b):
    idx = min(b.ost_table())
    s = b.first("MDS_OST_ADMIN", C + w.ost_admin_req(idx, set_=w.TGT_DEACTIVATED))
    assert b.ost_table()[idx]["state"] & w.TGT_DEACTIVATED
    b.do("MDS_OST_ADMIN", C + w.ost_admin_req(idx, clear=w.TGT_DEACTIVATED))
    b.cached(s)
    assert not b.ost_table()[idx]["state"] & w.TGT_DEACTIVATED, \
        "a resent deactivate of OST %d undid the activate that came after it" % idx


def fake_ost(b, uuid):
    """An OST with no OSS behind it, registered by a connection that then closes (it is inactive
    at once): its index."""
    sf = b.ost_table()[min(b.ost_table())]["sf"]
    s = b.first("MDS_OST_REGISTER", w.ost_register_req(0xFFFFFFFF, b"127.0.0.9", 9, uuid, b.other.fsname, sf))
    idx = w.OST_REGISTER_REP.unpack(s.reply)[0]
    assert wait_until(lambda: b.ost_table()[idx]["state"] & w.TGT_INACTIVE, 30, 0.1)
    return idx


@scenario("MDS_OST_REMOVE", "CACHED")
def ost_remove_once(b):
    idx = fake_ost(b, b"fake-ost-to-remove")
    s = b.first("MDS_OST_REMOVE", C + w.ost_remove_req(idx))
    assert w.OST_REMOVE_REP.unpack(s.reply) == (0, 0)
    assert idx not in b.ost_table()
    b.do("MDS_OST_REMOVE", C + w.ost_remove_req(idx), expect=-w.ENOENT)   # what a second run answers
    b.cached(s)
    assert idx not in b.ost_table(), "a resent removal brought OST %d back: %r" % (idx, b.ost_table())


@scenario("MDS_POOL", "CACHED")
def pool_once(b):
    idx = min(b.ost_table())
    new = b.first("MDS_POOL", C + w.pool_req(w.POOL_NEW, b"p"))
    add = b.first("MDS_POOL", C + w.pool_req(w.POOL_ADD, b"p", idx))
    b.cached(new)       # not -EEXIST
    b.cached(add)       # not -EEXIST
    assert b.pools() == [(b"p", [idx])], "after resent NEW and ADD: %r" % b.pools()
    b.do("MDS_POOL", C + w.pool_req(w.POOL_REMOVE, b"p", idx))
    b.cached(add)
    assert b.pools() == [(b"p", [])], "a resent ADD put the OST back after its REMOVE: %r" % b.pools()
    b.do("MDS_POOL", C + w.pool_req(w.POOL_DESTROY, b"p"))
    b.cached(new)
    assert b.pools() == [], "a resent NEW made the pool again after its DESTROY: %r" % b.pools()


@scenario("MDS_NODEMAP", "CACHED")
def nodemap_once(b):
    def nodes():
        return [(n["name"], n["generation"], n["flags"])
                for n in w.parse_nodemap(b.do("MDS_NODEMAP", C + w.nodemap_req(w.NODEMAP_LIST)))[1]]
    add = b.first("MDS_NODEMAP", C + w.nodemap_req(w.NODEMAP_ADD, b"n1"))
    b.cached(add)       # not -EEXIST
    revoke = b.first("MDS_NODEMAP", C + w.nodemap_req(w.NODEMAP_REVOKE, b"n1"))
    assert w.parse_nodemap(b.cached(revoke))[1][0]["generation"] == 2
    assert nodes() == [(b"n1", 2, 0)], "a resent REVOKE revoked the key it gave: %r" % nodes()
    modify = b.first("MDS_NODEMAP", C + w.nodemap_req(w.NODEMAP_MODIFY, b"n1", flags=w.NODE_READONLY))
    b.do("MDS_NODEMAP", C + w.nodemap_req(w.NODEMAP_MODIFY, b"n1", flags=w.NODE_ADMIN))
    b.cached(modify)
    assert nodes() == [(b"n1", 2, w.NODE_ADMIN)], "a resent MODIFY undid the one after it: %r" % nodes()
    delete = b.first("MDS_NODEMAP", C + w.nodemap_req(w.NODEMAP_DEL, b"n1"))
    b.cached(delete)    # not -ENOENT
    b.cached(add)
    assert nodes() == [], "a resent ADD made the node again after its DEL: %r" % nodes()


@scenario("MDS_SWAP_LAYOUTS", "CACHED")
def swap_layouts_once(b):
    ino, old = b.create(ROOT, b"f")
    tmp, copy = b.create(ROOT, b"tmp")
    ino, tmp = ino["ino"], tmp["ino"]
    a = b.attr(ino)
    s = b.first("MDS_SWAP_LAYOUTS", C + w.swap_req(ino, tmp, a["size"], a["mtime"], a["mtime_ns"]))
    assert (b.layout(ino)["objs"], b.layout(tmp)["objs"]) == (copy["objs"], old["objs"])
    b.cached(s)
    assert (b.layout(ino)["objs"], b.layout(tmp)["objs"]) == (copy["objs"], old["objs"]), \
        "a resent SWAP_LAYOUTS swapped the objects back (the migration is undone)"


# ---- HANDLE: the first run's handle, the only one; O_TRUNC once ---------------------------------

def resent_handle(b, s, handle_of):
    """Resends the open s: the handle its first run made, or after an MDS restart (which forgot
    every handle) a new one. Returns (handle, reply)."""
    first = handle_of(s.reply)
    st, rep, _ = b.again(s)
    assert st == 0, "%s resent answered %d" % (s.name, st)
    handle = handle_of(rep)
    if b.restart_before_resend:
        assert handle, "%s resent after an MDS restart answered no handle" % s.name
    else:
        assert handle == first, "%s resent answered handle %d; its first run made %d" % (s.name, handle, first)
    return handle, rep


def open_handle(rep):
    return w.parse_open(rep)[1]


@scenario("MDS_OPEN", "HANDLE")
def open_handle_once(b):
    for name, flags in ((b"rw", w.O_RDWR), (b"ro", w.O_RDONLY)):   # the metadata thread; the network thread
        ino = b.create(ROOT, name)[0]["ino"]
        handle, _ = resent_handle(b, b.first("MDS_OPEN", C + w.open_req(ino, flags)), open_handle)
        b.held_open(ino, ROOT, name, handle, "MDS_OPEN %#o resent" % flags)
    # O_TRUNC: not again when resent after another client set the size.
    ino = b.create(ROOT, b"t")[0]["ino"]
    b.do("MDS_SETATTR", C + w.setattr_req(ino, w.SA_SIZE, size=4096))
    s = b.first("MDS_OPEN", C + w.open_req(ino, w.O_RDWR | w.O_TRUNC))
    assert w.parse_open(s.reply)[0]["size"] == 0
    b.do("MDS_SETATTR", C + w.setattr_req(ino, w.SA_SIZE, size=8192))
    handle, rep = resent_handle(b, s, open_handle)
    assert w.parse_open(rep)[0]["size"] == 8192 and b.attr(ino)["size"] == 8192, \
        "a resent O_TRUNC open truncated again: size %d" % b.attr(ino)["size"]
    b.held_open(ino, ROOT, b"t", handle, "MDS_OPEN O_TRUNC resent")


@scenario("MDS_WALK", "HANDLE")
def walk_open_once(b):
    d = b.mkdir(ROOT, b"d")
    walk = C + w.walk_req(b"/d/f", w.WALK_OPEN, w.O_RDONLY)

    def walked_to(ino):
        def handle_of(rep):
            attr, consumed, flags = w.WALK_REP.unpack_from(rep)
            assert flags & w.WALKR_OPENED and w.parse_attr(attr)["ino"] == ino, (consumed, flags)
            return w.parse_open(rep, w.WALK_REP.size)[1]
        return handle_of

    ino = b.create(d, b"f")[0]["ino"]
    handle, _ = resent_handle(b, b.first("MDS_WALK", walk), walked_to(ino))
    b.held_open(ino, d, b"f", handle, "MDS_WALK with LW_WALK_OPEN resent")
    # The path leads elsewhere when resent (the file was renamed away, another took its name):
    # the resend opens what it finds, and the first run's handle, never learned of, goes.
    old = b.create(d, b"f")[0]["ino"]
    s = b.first("MDS_WALK", walk)
    b.do("MDS_RENAME", C + w.rename_req(d, b"f", ROOT, b"away"))
    new = b.create(d, b"f")[0]["ino"]
    st, rep, _ = b.again(s)
    assert st == 0, "MDS_WALK resent answered %d" % st
    b.held_open(new, d, b"f", walked_to(new)(rep), "MDS_WALK resent to another file")
    b.do("MDS_UNLINK", C + w.name_req(ROOT, b"away"))
    b.released(old, "MDS_WALK resent after its file was renamed away")


# ---- REPEATS: the same status, and the state one run leaves -------------------------------------

@scenario("MDS_CONNECT", "REPEATS")
def connect_again(b):
    s = b.first("MDS_CONNECT", w.connect_req(b.uuid), connect=False)
    rep, _ = b.repeats(s)
    one, two = w.CONNECT_REP.unpack(s.reply), w.CONNECT_REP.unpack(rep)
    assert one[:4] == two[:4], "MDS_CONNECT resent with the same uuid: %r, first %r" % (two, one)
    with w.Client(b.cluster.mds_host, b.cluster.mds_port, os.urandom(16)) as stranger:
        assert stranger.session_id != one[1], "another uuid got the same session"


@scenario("MDS_SYNC", "REPEATS")
def sync_again(b):
    """A commit asked for twice: each answers once every change answered before it is on disk."""
    b.create(ROOT, b"synced")
    made = b.other.last_header.transno
    s = b.first("MDS_SYNC", w.sync_req())
    assert s.reply == b"", "MDS_SYNC answered %r" % s.reply
    rep, _ = b.repeats(s)
    assert rep == b"", "MDS_SYNC resent answered %r" % rep
    assert made > 0, "a create was answered without a transaction number"
    assert b.lookup(ROOT, b"synced")[0] == 0
    assert b.other.last_header.last_committed >= made, \
        "after MDS_SYNC, last_committed %d is below the create's transno %d" % (b.other.last_header.last_committed, made)


@scenario("MDS_MIRROR", "REPEATS")
def mirror_again(b):
    """A stale mark sent twice: the second finds it marked and changes nothing (the generation the
    first gave stays); a resend cannot mark another copy."""
    rep = b.do("MDS_CREATE", C + w.CREATE_REQ.pack(ROOT, S_IFREG | 0o644, 0, w.CR_EXCL | w.CR_LAYOUT, 0, 2) +
               b"mf" + w.layout_req(stripe_count=1, mirror_count=2))
    ino, lay = w.parse_attr(rep)["ino"], w.parse_layout(rep, w.CREATE_REP.size)
    assert lay["mirror_count"] == 2 and len(lay["objs"]) == 2, lay
    b.first("MDS_OPEN", C + w.open_req(ino, w.O_RDWR))
    s = b.first("MDS_MIRROR", C + w.mirror_req(ino, w.MIRROR_STALE, [lay["objs"][1]]))
    marked = w.parse_layout(s.reply)
    assert marked["stale"] == [1] and marked["layout_gen"] == lay["layout_gen"] + 1, marked
    rep, _ = b.repeats(s)
    assert w.parse_layout(rep) == marked
    assert b.layout(ino) == marked, "a resent stale mark changed the layout again"


@scenario("MDS_LEASE", "REPEATS")
def lease_again(b):
    """A lease given back twice: the second finds it given back already; another client's create
    in the directory then waits for no recall."""
    d = b.mkdir(ROOT, b"leased")
    with b._conn(None, True) as c:
        st, _ = c.call(OP["MDS_READDIR"], w.readdir_req(d, flags=w.RD_LEASE), req_id=next(b.ids))
        assert st == 0 and c.last_header.lease_ino == d and c.last_header.lease_gen, \
            "no lease granted: %r" % (c.last_header,)
        gen = c.last_header.lease_gen
    s = b.first("MDS_LEASE", w.lease_req([(d, gen)]))
    assert s.reply == b"", "MDS_LEASE answered %r" % s.reply
    rep, _ = b.repeats(s)
    assert rep == b""
    b.create(d, b"after")
    assert b.lookup(d, b"after")[0] == 0


@scenario("MDS_REPLAY", "REPEATS")
def replay_again(b):
    """A replay of a number no crash lost (outside a recovery: committed before the last start,
    or made since) needs no redoing: answered 0, first and again, and nothing of it is done."""
    body = C + w.CREATE_REQ.pack(ROOT, S_IFREG | 0o644, 0, w.CR_EXCL, 0, 5) + b"ghost"
    rp = w.REPLAY_REQ.pack(1 << 40, 77, OP["MDS_CREATE"], 0, 0, len(body), 0) + body
    s = b.first("MDS_REPLAY", rp)
    b.repeats(s)
    assert b.lookup(ROOT, b"ghost")[0] == -w.ENOENT, "a replay outside a recovery made its file"


@scenario("MDS_OST_REGISTER", "REPEATS")
def ost_register_again(b):
    table = b.ost_table()
    idx = min(table)
    e = table[idx]
    s = b.first("MDS_OST_REGISTER", w.ost_register_req(idx, e["host"].encode(), e["port"], e["uuid"].encode(),
                                                       b.other.fsname, e["sf"]))
    rep, _ = b.repeats(s)
    assert rep == s.reply and w.OST_REGISTER_REP.unpack(rep)[0] == idx, "a resent registration answered %r" % rep
    after = b.ost_table()
    assert sorted(after) == sorted(table) and all(after[i][k] == table[i][k] for i in table for k in ("uuid", "host", "port")), \
        "a resent registration changed the OST table: %r, was %r" % (after, table)
    # Our connections spoke for the OST and closed: its OSS's heartbeats make it active again.
    assert wait_until(lambda: not b.ost_table()[idx]["state"] & w.TGT_INACTIVE, 60, 0.2)


@scenario("MDS_OST_REPLACE", "REPEATS")
def ost_replace_again(b):
    idx = fake_ost(b, b"fake-ost-lost")
    sf = b.ost_table()[idx]["sf"]
    s = b.first("MDS_OST_REPLACE", w.ost_register_req(idx, b"127.0.0.9", 10, b"fake-ost-new", b.other.fsname, sf))
    rep, _ = b.repeats(s)
    assert rep == s.reply and w.OST_REPLACE_REP.unpack(rep)[0] == idx, "a resent replacement answered %r" % rep
    assert w.OST_REPLACE_REP.unpack(rep)[3] == 1, "no object was ever made there: none below id 1 is lost"
    assert b.ost_table()[idx]["uuid"] == "fake-ost-new"
    # Without the replacement's opcode another new uuid is refused the index, as before.
    b.do("MDS_OST_REGISTER", w.ost_register_req(idx, b"127.0.0.9", 11, b"fake-ost-third", b.other.fsname, sf),
         expect=-w.EEXIST)


@scenario("MDS_OST_FAILOVER", "REPEATS")
def ost_failover_again(b):
    # Only the connection that registered an OST names its partner: an OSS registers again on its
    # new connection before anything else, then resends.
    idx = fake_ost(b, b"fake-ost-pair")
    reg = w.ost_register_req(idx, b"127.0.0.9", 9, b"fake-ost-pair", b.other.fsname, b.ost_table()[idx]["sf"])
    body = w.ost_addr(idx, b"127.0.0.10", 10)
    req_id = next(b.ids)
    for flags in (0, w.F_RESENT):
        with w.Client(b.cluster.mds_host, b.cluster.mds_port, b.uuid, connect=False) as c:
            st, rep = c.call(OP["MDS_OST_REGISTER"], reg, req_id=next(b.ids))
            assert st == 0, "the registration answered %d" % st
            st, rep = c.call(OP["MDS_OST_FAILOVER"], body, req_id=req_id, flags=flags)
            assert (st, rep) == (0, b""), "MDS_OST_FAILOVER (flags %#x) answered %d, %r" % (flags, st, rep)
        assert w.ost_failovers_on(b.other.conn) == {idx: ("127.0.0.10", 10)}
    # Nobody else names it: not a client, nor a connection that did not register the OST.
    b.do("MDS_OST_FAILOVER", body, expect=-w.EPERM)
    st, _ = b.other.call(OP["MDS_OST_FAILOVER"], w.ost_addr(idx, b"", 0), req_id=next(b.ids))
    assert st == -w.EPERM and w.ost_failovers_on(b.other.conn) == {idx: ("127.0.0.10", 10)}


@scenario("MDS_OST_HEARTBEAT", "REPEATS")
def heartbeat_again(b):
    table = b.ost_table()
    idx = min(table)
    s = b.first("MDS_OST_HEARTBEAT", w.heartbeat_req([(idx, table[idx]["sf"])]))
    b.repeats(s)
    after = b.ost_table()
    assert sorted(after) == sorted(table) and after[idx]["state"] == table[idx]["state"], (after, table)


@scenario("SET_PARAM", "REPEATS")
def set_param_again(b):
    """A setting sent twice: the same answer, the same value."""
    s = b.first("SET_PARAM", w.param_req(b"mdt.*.job_cleanup_interval", b"300"))
    assert w.PARAM_REP.unpack(s.reply)[2] == 1, w.PARAM_REP.unpack(s.reply)
    rep, _ = b.repeats(s)
    assert rep == s.reply
    st, rep, text = b.other.call_bulk(OP["GET_PARAM"], w.param_req(b"mdt.*.job_cleanup_interval", cap=4096),
                                      next(b.ids))
    assert st == 0 and text == b"mdt.loom-MDT0000.job_cleanup_interval=300\n", (st, text)


@scenario("MDS_LOCK", "REPEATS")
def lock_again(b):
    ino = b.create(ROOT, b"f")[0]["ino"]
    s = b.first("MDS_LOCK", C + w.lock_req(ino, 7, w.F_WRLCK))
    rep, _ = b.repeats(s)
    assert rep == s.reply
    b.do("MDS_LOCK", C + w.lock_req(ino, 9, w.F_WRLCK), expect=-w.EAGAIN)   # held, by the session
    b.first("MDS_LOCK", C + w.lock_req(ino, 7, w.F_UNLCK))
    b.do("MDS_LOCK", C + w.lock_req(ino, 9, w.F_WRLCK))   # one unlock ends what the resend asked again


def an_object(b):
    """(addr, io(...)) of the first object of a new file: requests on it as libloom sends them."""
    attr, layout = b.create(ROOT, b"obj%d" % next(b.ids))
    idx, objid = layout["objs"][0]
    e = b.ost_table()[idx]

    def io(offset=0, length=0, flags=0, trunc_epoch=0):
        return w.ost_io(idx, objid, offset, length, attr["ino"], 0, layout["layout_gen"], flags, trunc_epoch)
    io.objid = objid
    return (e["host"], e["port"]), io


def oss(b, addr, name, body, bulk=b"", expect=0):
    with w.Client(addr[0], addr[1], None, connect=False) as c:
        st, rep, rbulk = c.call_bulk(OP[name], body, next(b.ids), bulk=bulk)
    assert st == expect, "%s answered %d, not %d" % (name, st, expect)
    return rep, rbulk


def object_bytes(b, addr, io):
    rep, data = oss(b, addr, "OST_READ", io(0, 1 << 20))
    assert w.OST_IO_REP.unpack(rep)[1] == len(data), "object size %d, %d bytes read" % (w.OST_IO_REP.unpack(rep)[1], len(data))
    return data


@scenario("OST_WRITE", "REPEATS")
def write_again(b):
    addr, io = an_object(b)
    data = os.urandom(5000)
    s = b.first("OST_WRITE", io(0, len(data)), bulk=data, addr=addr)
    rep, _ = b.repeats(s)
    assert rep == s.reply and object_bytes(b, addr, io) == data, "a resent write left the object otherwise"


@scenario("OST_PUNCH", "REPEATS")
def punch_again(b):
    addr, io = an_object(b)
    data, later = os.urandom(8192), os.urandom(4096)
    oss(b, addr, "OST_WRITE", io(0, len(data)), bulk=data)
    s = b.first("OST_PUNCH", io(0, 4096, trunc_epoch=1), addr=addr)
    assert w.OST_IO_REP.unpack(s.reply)[1] == 4096
    oss(b, addr, "OST_WRITE", io(4096, len(later), trunc_epoch=1), bulk=later)   # written after the cut
    b.repeats(s)
    assert object_bytes(b, addr, io) == data[:4096] + later, "a resent punch cut bytes written after it"


@scenario("OST_SYNC", "REPEATS")
def sync_again(b):
    addr, io = an_object(b)
    data = os.urandom(3000)
    oss(b, addr, "OST_WRITE", io(0, len(data)), bulk=data)
    s = b.first("OST_SYNC", io(), addr=addr)
    rep, _ = b.repeats(s)
    assert rep == s.reply and object_bytes(b, addr, io) == data


@scenario("OST_DESTROY", "REPEATS")
def destroy_again(b):
    addr, io = an_object(b)
    oss(b, addr, "OST_WRITE", io(0, 100), bulk=b"x" * 100)
    s = b.first("OST_DESTROY", io(), addr=addr)
    rep, _ = b.repeats(s)
    assert rep == s.reply and w.OST_IO_REP.unpack(oss(b, addr, "OST_GETATTR", io())[0]) == (0, 0, 0)


def objects_on_one_ost(b, k):
    """(addr, ost_idx, [io, ...]) of the first objects of k new files that lie on one OST."""
    seen = {}
    while True:
        attr, layout = b.create(ROOT, b"many%d" % next(b.ids))
        idx, objid = layout["objs"][0]
        e = b.ost_table()[idx]

        def io(offset=0, length=0, idx=idx, objid=objid, ino=attr["ino"], gen=layout["layout_gen"]):
            return w.ost_io(idx, objid, offset, length, ino, 0, gen)
        io.objid = objid
        group = seen.setdefault(idx, [])
        group.append(io)
        if len(group) == k:
            return (e["host"], e["port"]), idx, group


@scenario("OST_DESTROY_MANY", "REPEATS")
def destroy_many_again(b):
    addr, idx, ios = objects_on_one_ost(b, 3)
    for io in ios:
        oss(b, addr, "OST_WRITE", io(0, 100), bulk=b"x" * 100)
    ids = b"".join(struct.pack("<Q", io.objid) for io in ios)
    s = b.first("OST_DESTROY_MANY", w.ost_io(idx, 0, 0, len(ids)), bulk=ids, addr=addr)
    assert w.OST_IO_REP.unpack(s.reply)[0] == 3
    rep, _ = b.repeats(s)
    assert rep == s.reply
    for io in ios:
        assert w.OST_IO_REP.unpack(oss(b, addr, "OST_GETATTR", io())[0]) == (0, 0, 0), "an object is left"


@scenario("OST_SCRUB", "REPEATS")
def scrub_again(b):
    addr, io = an_object(b)
    oss(b, addr, "OST_WRITE", io(0, 70000), bulk=os.urandom(70000))
    s = b.first("OST_SCRUB", io(0, w.SCRUB_START), addr=addr)
    b.repeats(s)

    def done():
        r = w.parse_scrub(oss(b, addr, "OST_SCRUB", io(0, w.SCRUB_STATUS))[0])
        return r if r["state"] == w.SCRUB_DONE else None
    r = wait_until(done, 60, 0.05)
    assert r, "the scrub never finished"
    assert (r["objid"], r["error"], r["objects_checked"], r["bad_objects"]) == (io.objid, 0, 1, 0), r


@scenario("OST_FALLOCATE", "REPEATS")
def fallocate_again(b):
    addr, io = an_object(b)
    data = os.urandom(4096)
    oss(b, addr, "OST_WRITE", io(0, len(data)), bulk=data)
    s = b.first("OST_FALLOCATE", io(4096, 4096), addr=addr)
    rep, _ = b.repeats(s)
    assert rep == s.reply and object_bytes(b, addr, io) == data + bytes(4096), "a resent fallocate left the object otherwise"

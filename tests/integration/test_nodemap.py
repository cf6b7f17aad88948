"""Node keys and the nodemap (issue 16): a client node may hold a key of its own, issued by
`loom key new --node NAME`, instead of the file system key. The MDS maps what such a node claims
(root squashed unless it is an admin node, uids and gids outside its ranges squashed unless it is
trusted, a read-only node refused every change), both servers refuse it what is for servers and
administrators only, and its key can be revoked without touching the other nodes.
"""

import errno
import os
import struct
import subprocess

import pytest

import loomwire as w
from loomutil import MDS_BIN, second_mount, wait_until

SQUASH = 65534


def issue_key(cluster, workdir, name):
    """`loom key new --node NAME FILE`: the node's key file, and the generation it holds."""
    path = os.path.join(workdir, "%s.%d.key" % (name, len(os.listdir(workdir))))
    p = cluster.loom("key", "new", "--node", name, path)
    key, (kname, gen) = w.load_node_key(path)
    assert p.stdout == "node %s: key generation %d written to %s\n" % (name, gen, path), p.stdout
    assert kname == name and len(key) == 32
    assert os.stat(path).st_mode & 0o777 == 0o600, "a node's key file must be private"
    assert key == w.node_key(w.load_key(cluster.key), name, gen), "not the key the servers derive"
    return path


def nodemap(cluster, name):
    """`loom nodemap list NAME` as {property: value}."""
    out = cluster.loom("nodemap", "list", name).stdout
    props = {}
    for line in out.splitlines():
        k, v = line.split("=", 1)
        prefix = "nodemap.%s." % name
        assert k.startswith(prefix), line
        props[k[len(prefix):]] = v
    return props


def modify(cluster, name, prop, value):
    cluster.loom("nodemap", "modify", name, "--property", prop, "--value", str(value))


def node_conn(host, port, key, ident, timeout=20):
    """A connection with a node's key, dialled again while the server answers -EAGAIN (an OSS
    that has not heard of the node yet asks the MDS, and knows within a heartbeat)."""
    found = []

    def dial():
        try:
            found.append(w.Conn(host, port, key=key, node=ident))
            return True
        except w.AuthError as e:
            assert e.status == -errno.EAGAIN, e
            return False
    assert wait_until(dial, timeout), "the server still cannot judge node %s's key" % (ident,)
    return found[0]


def owner(path):
    st = os.stat(path)
    return st.st_uid, st.st_gid


def as_user(uid, gid, *argv):
    return subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups"] + list(argv),
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def files(cluster):
    """The file system mounted with the file system key (an administrator's node), holding a
    root-only file, a public one and a directory anyone may write."""
    mnt = cluster.mount()
    with open(os.path.join(mnt, "secret"), "wb") as f:
        f.write(b"root only")
    os.chmod(os.path.join(mnt, "secret"), 0o600)
    with open(os.path.join(mnt, "public"), "wb") as f:
        f.write(b"for everyone")
    os.chmod(os.path.join(mnt, "public"), 0o644)
    os.mkdir(os.path.join(mnt, "shared"))
    os.chmod(os.path.join(mnt, "shared"), 0o777)
    return mnt


def test_a_node_key_mounts_and_its_root_is_nobody(cluster, files, workdir):
    key = issue_key(cluster, workdir, "gpu01")
    assert nodemap(cluster, "gpu01") == {
        "generation": "1", "admin_nodemap": "0", "trusted_nodemap": "0", "readonly_mount": "0",
        "squash_uid": str(SQUASH), "squash_gid": str(SQUASH),
        "uid_range": "0-4294967295", "gid_range": "0-4294967295"}
    with second_mount(cluster, key) as node:
        with open(os.path.join(node, "public"), "rb") as f:
            assert f.read() == b"for everyone"
        with pytest.raises(PermissionError):
            open(os.path.join(node, "secret"), "rb")
        with pytest.raises(PermissionError):
            open(os.path.join(node, "made-by-root"), "wb")   # / is root's 0755
        with open(os.path.join(node, "shared", "by-node-root"), "wb") as f:
            f.write(b"squashed")
    assert owner(os.path.join(files, "shared", "by-node-root")) == (SQUASH, SQUASH)
    with open(os.path.join(files, "shared", "by-node-root"), "rb") as f:
        assert f.read() == b"squashed"


def test_an_admin_node_keeps_root_and_a_read_only_node_only_reads(cluster, files, workdir):
    key = issue_key(cluster, workdir, "gpu02")
    modify(cluster, "gpu02", "admin", 1)
    assert nodemap(cluster, "gpu02")["admin_nodemap"] == "1"
    with second_mount(cluster, key) as node:
        with open(os.path.join(node, "secret"), "rb") as f:
            assert f.read() == b"root only"
        with open(os.path.join(node, "by-admin-node"), "wb") as f:
            f.write(b"root's")
        assert owner(os.path.join(files, "by-admin-node")) == (0, 0)

        modify(cluster, "gpu02", "readonly_mount", 1)
        with open(os.path.join(node, "secret"), "rb") as f:
            assert f.read() == b"root only"
        for attempt in (lambda: open(os.path.join(node, "new-file"), "wb"),
                        lambda: open(os.path.join(node, "public"), "r+b"),
                        lambda: os.unlink(os.path.join(node, "public")),
                        lambda: os.mkdir(os.path.join(node, "newdir")),
                        lambda: os.rename(os.path.join(node, "public"), os.path.join(node, "moved")),
                        lambda: os.chmod(os.path.join(node, "public"), 0o600),
                        lambda: os.truncate(os.path.join(node, "public"), 0)):
            with pytest.raises(OSError) as e:
                attempt()
            assert e.value.errno == errno.EROFS, e.value
    with open(os.path.join(files, "public"), "rb") as f:
        assert f.read() == b"for everyone"
    assert sorted(os.listdir(files)) == ["by-admin-node", "public", "secret", "shared"]

    # The OSSs refuse its writes too, on the wire (a node's root could send them by hand).
    node_key, ident = w.load_node_key(key)
    host, port = cluster.oss_addr("oss0")
    idx = cluster.ost_index_of_dir(0)

    def write_status():
        try:
            with w.Conn(host, port, key=node_key, node=ident) as c:
                h, _, _ = c.call(w.OP["OST_WRITE"], w.ost_io(idx, 0x99, 0, 4, ino=7), bulk=b"abcd")
                return h.status
        except w.AuthError as e:
            assert e.status == -errno.EAGAIN, e   # the OSS has not heard of the node yet
            return None
    assert wait_until(lambda: write_status() == -errno.EROFS, 20), write_status()
    modify(cluster, "gpu02", "readonly_mount", 0)
    assert wait_until(lambda: write_status() == 0, 20), write_status()


def test_a_revoked_key_stops_working_and_other_nodes_go_on(cluster, files, workdir):
    old = issue_key(cluster, workdir, "gpu03")
    other = issue_key(cluster, workdir, "gpu04")
    old_key, old_ident = w.load_node_key(old)
    host, port = cluster.oss_addr("oss0")

    def oss_pings():
        try:
            with w.Conn(host, port, key=old_key, node=old_ident) as c:
                return c.ping() == 0
        except w.AuthError as e:
            assert e.status == -errno.EAGAIN, e   # the OSS has not heard of the node yet
            return False
    with second_mount(cluster, old) as a, second_mount(cluster, other) as b:
        for m in (a, b):
            with open(os.path.join(m, "public"), "rb") as f:
                assert f.read() == b"for everyone"
        assert wait_until(oss_pings, 20)

        p = cluster.loom("nodemap", "revoke", "gpu03")
        assert "node gpu03: key revoked, now generation 2" in p.stdout, p.stdout
        assert nodemap(cluster, "gpu03")["generation"] == "2"
        # Every request of the revoked node is refused from now on: opens go to the MDS.
        with pytest.raises(PermissionError):
            open(os.path.join(a, "public"), "rb")
        with pytest.raises(PermissionError):
            os.mkdir(os.path.join(a, "shared", "d"))
        # The other node is not touched.
        with open(os.path.join(b, "shared", "from-b"), "wb") as f:
            f.write(b"b goes on" * 600000)
        with open(os.path.join(b, "shared", "from-b"), "rb") as f:
            assert f.read() == b"b goes on" * 600000

    # The old key authenticates nowhere any more (the OSS hears of the revoke from the MDS).
    def oss_refuses():
        try:
            w.Conn(host, port, key=old_key, node=old_ident).close()
            return False
        except w.AuthError as e:
            return e.status == -errno.EACCES   # (-EAGAIN first, while it asks the MDS)
    assert wait_until(oss_refuses, 20), "an OSS still takes a revoked key"
    with pytest.raises(w.AuthError) as e:
        w.Conn(cluster.mds_host, cluster.mds_port, key=old_key, node=old_ident)
    assert e.value.status == -errno.EACCES
    p = cluster.loom("--key", old, "ls", "/", check=False)
    assert p.returncode == 1 and "refused this client's key" in p.stderr, p.stderr
    assert "a key of node gpu03 (generation 1) that the nodemap does not hold" in cluster.read_log("mds")

    # A new key for the node works (issuing it revokes generation 2 as well).
    new = issue_key(cluster, workdir, "gpu03")
    assert w.load_node_key(new)[1] == ("gpu03", 3)
    with second_mount(cluster, new) as a:
        with open(os.path.join(a, "shared", "from-b"), "rb") as f:
            assert f.read(9) == b"b goes on"
    cluster.loom("nodemap", "del", "gpu03")
    p = cluster.loom("--key", new, "ls", "/", check=False)
    assert p.returncode == 1, "a removed node's key still works"


def test_uid_and_gid_ranges(cluster, files, workdir):
    key = issue_key(cluster, workdir, "gpu05")
    modify(cluster, "gpu05", "uid_range", "1000-1999")
    modify(cluster, "gpu05", "gid_range", "1000-1999")
    props = nodemap(cluster, "gpu05")
    assert props["uid_range"] == "1000-1999" and props["gid_range"] == "1000-1999"
    with second_mount(cluster, key) as node:
        shared = os.path.join(node, "shared")
        def create_as(uid, name):
            p = as_user(uid, uid, "sh", "-c", 'echo %d > "$1"' % uid, "sh", os.path.join(shared, name))
            assert p.returncode == 0, p.stderr
        create_as(1500, "in-range")
        create_as(2500, "out-of-range")
        modify(cluster, "gpu05", "trusted", 1)
        create_as(2500, "trusted")
    d = os.path.join(files, "shared")
    assert owner(os.path.join(d, "in-range")) == (1500, 1500)
    assert owner(os.path.join(d, "out-of-range")) == (SQUASH, SQUASH)
    assert owner(os.path.join(d, "trusted")) == (2500, 2500)


def test_a_node_key_cannot_administer(cluster, files, workdir):
    key = issue_key(cluster, workdir, "gpu06")
    modify(cluster, "gpu06", "admin", 1)   # even its root, even trusted as root
    ok = cluster.loom("--key", key, "ls", "/")
    assert ok.stdout.split() == ["public", "secret", "shared"]
    for argv in (("nodemap", "list"), ("nodemap", "add", "rogue"), ("pool", "new", "mine"),
                 ("ost", "deactivate", "0")):
        p = cluster.loom("--key", key, *argv, check=False)
        assert p.returncode == 1, (argv, p.stdout, p.stderr)
        assert any(s in p.stderr for s in ("not permitted", "needs root and the file system key",
                                           "only root may")), (argv, p.stderr)
    assert "rogue" not in cluster.loom("nodemap", "list").stdout
    assert "mine" not in cluster.loom("pool", "list").stdout
    node_key, ident = w.load_node_key(key)
    # Pretending to be an OSS, or destroying objects by hand, is refused.
    with w.Conn(cluster.mds_host, cluster.mds_port, key=node_key, node=ident) as c:
        sf = bytes(56)
        h, _, _ = c.call(w.OP["MDS_OST_REGISTER"], w.ost_register_req(7, b"127.0.0.1", 1, b"rogue-uuid", b"loom", sf))
        assert h.status == -errno.EPERM
    host, port = cluster.oss_addr("oss0")
    with node_conn(host, port, node_key, ident) as c:
        for op in ("OST_DESTROY", "OST_PUNCH", "OST_SCRUB"):
            h, _, _ = c.call(w.OP[op], w.ost_io(cluster.ost_index_of_dir(0), 0x99))
            assert h.status == -errno.EPERM, (op, h.status)
        ids = struct.pack("<Q", 0x99)
        h, _, _ = c.call(w.OP["OST_DESTROY_MANY"], w.ost_io(cluster.ost_index_of_dir(0), 0, 0, len(ids)), bulk=ids)
        assert h.status == -errno.EPERM, ("OST_DESTROY_MANY", h.status)


SA_UID, SA_GID, SA_SIZE, SA_FH = 0x002, 0x004, 0x008, 0x200


def test_a_node_claims_nothing_its_session_does_not_hold(cluster, files, workdir):
    """On the wire, as a node's root could send by hand: a truncation "through a handle" it does
    not have, a chown out of its ranges, a size report through a made-up handle, Data-on-MDT bytes
    of a file it never opened."""
    key = issue_key(cluster, workdir, "gpu09")
    modify(cluster, "gpu09", "uid_range", "1000-1999")
    modify(cluster, "gpu09", "gid_range", "1000-1999")
    mine = os.path.join(files, "shared", "mine")
    with open(mine, "wb") as f:
        f.write(b"1500's")
    os.chown(mine, 1500, 1500)
    node_key, ident = w.load_node_key(key)
    root, user = w.cred(0, 0), w.cred(1500, 1500)

    def ino_of(c, parent, name):
        h, rep, _ = c.call(w.OP["MDS_LOOKUP"], root + w.name_req(parent, name))
        assert h.status == 0, (name, h.status)
        return w.parse_attr(rep)["ino"]
    with w.Conn(cluster.mds_host, cluster.mds_port, key=node_key, node=ident) as c:
        secret = ino_of(c, w.ROOT_INO, b"secret")
        shared = ino_of(c, w.ROOT_INO, b"shared")
        mine_ino = ino_of(c, shared, b"mine")
        public = ino_of(c, w.ROOT_INO, b"public")
        h, _, _ = c.call(w.OP["MDS_SETATTR"], root + w.setattr_req(secret, SA_SIZE | SA_FH, size=0))
        assert h.status == -errno.EACCES, "a squashed root cut root's file 'through a handle': %d" % h.status
        for valid, uid, gid in ((SA_UID, 0, 0), (SA_UID, 2500, 0), (SA_GID, 0, 0), (SA_GID, 0, 2500)):
            h, _, _ = c.call(w.OP["MDS_SETATTR"], user + w.setattr_req(mine_ino, valid, uid=uid, gid=gid))
            assert h.status == -errno.EPERM, (valid, uid, gid, h.status)
        h, _, _ = c.call(w.OP["MDS_CLOSE"], user + w.close_req(secret, 0x5eed, flags=w.CL_SIZE, size=1 << 30))
        assert h.status == -errno.EBADF, h.status
        h, _, _ = c.call(w.OP["MDS_DOM_READ"], user + w.ino_req(public))
        assert h.status == -errno.EACCES, h.status
    assert os.path.getsize(os.path.join(files, "secret")) == len(b"root only")
    with open(os.path.join(files, "secret"), "rb") as f:
        assert f.read() == b"root only"
    assert owner(mine) == (1500, 1500)

    # Another node's session (its handles, locks, cached replies) is not taken by naming its
    # uuid; the same node, or the file system key, may resume it.
    other_key, other_ident = w.load_node_key(issue_key(cluster, workdir, "gpu10"))
    uuid = os.urandom(16)
    with w.Conn(cluster.mds_host, cluster.mds_port, key=other_key, node=other_ident) as c:
        h, _, _ = c.call(w.OP["MDS_CONNECT"], w.connect_req(uuid))
        assert h.status == 0
    with w.Conn(cluster.mds_host, cluster.mds_port, key=node_key, node=ident) as c:
        h, _, _ = c.call(w.OP["MDS_CONNECT"], w.connect_req(uuid))
        assert h.status == -errno.EPERM, "a node took another node's session: %d" % h.status
    with w.Conn(cluster.mds_host, cluster.mds_port, key=other_key, node=other_ident) as c:
        h, _, _ = c.call(w.OP["MDS_CONNECT"], w.connect_req(uuid))
        assert h.status == 0, "a node could not resume its own session: %d" % h.status

    # Removed and added again, the node's generations go on: its old key stays dead.
    cluster.loom("nodemap", "del", "gpu09")
    again = issue_key(cluster, workdir, "gpu09")
    assert w.load_node_key(again)[1] == ("gpu09", 2)
    with pytest.raises(w.AuthError) as e:
        w.Conn(cluster.mds_host, cluster.mds_port, key=node_key, node=ident)
    assert e.value.status == -errno.EACCES


def test_forged_node_keys_are_refused(cluster, files, workdir):
    issue_key(cluster, workdir, "gpu07")
    fs_key = w.load_key(cluster.key)
    # (key, node claimed): a made-up key, a generation not issued yet, a node never added.
    for key, ident in ((os.urandom(32), ("gpu07", 1)), (w.node_key(fs_key, "gpu07", 2), ("gpu07", 2)),
                       (w.node_key(fs_key, "nobody-added", 1), ("nobody-added", 1))):
        with pytest.raises(w.AuthError) as e:
            w.Conn(cluster.mds_host, cluster.mds_port, key=key, node=ident)
        assert e.value.status == -errno.EACCES, ident
    # The first is logged (the rest are counted in a summary line: the log is rate-limited).
    assert wait_until(lambda: "a wrong key for node gpu07 (generation 1)" in cluster.read_log("mds"), 10)
    with w.Conn(cluster.mds_host, cluster.mds_port, key=w.node_key(fs_key, "gpu07", 1), node=("gpu07", 1)) as c:
        assert c.ping() == 0
    # A node name that is not one (not [A-Za-z0-9._-], or bytes after its NUL).
    for raw_name in (b"bad name!", b"gpu07\0x"):
        c = w.Conn(cluster.mds_host, cluster.mds_port, auth=False)
        try:
            h, ch, _ = c.call(w.OP["AUTH_CHALLENGE"])
            nonce = os.urandom(32)
            body = nonce + w.auth_mac(w.node_key(fs_key, "gpu07", 1), b"loom-auth-client", ch, nonce) + \
                raw_name.ljust(32, b"\0") + struct.pack("<II", 1, 0)
            h, _, _ = c.call(w.OP["AUTH_PROVE"], body)
            assert h.status == -errno.EACCES, raw_name
        finally:
            c.close()


def test_a_server_refuses_a_node_key(cluster, workdir):
    key = issue_key(cluster, workdir, "gpu08")
    p = subprocess.run([MDS_BIN, "--mdt", os.path.join(workdir, "no-mdt"), "--key", key],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p
    assert "%s is node gpu08's key: a server needs the file system key" % key in p.stderr, p.stderr

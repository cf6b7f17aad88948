"""Commit behind and replay (issue 18): the MDS answers a change once it is applied and commits it
behind; every reply says what is committed, and each client keeps what is not and replays it
after the MDS restarts. Version checks (Lustre's VBR) refuse a replay whose inodes are not what
its first run changed.

The MDS here commits behind within 30 s (`commit-ms` in DIR/mds.conf), so that what the tests
do between two kill -9 is answered and not on disk, unless an fsync asked for it: only replays can
bring it back. Clients are mounts (loom-mount processes): `loom cluster up --mount` and
`mount -t loom`.
"""

import errno
import hashlib
import os
import re
import select
import signal
import stat
import struct
import subprocess
import tempfile

import loomwire as w
from loomutil import configured, mount_pid, second_mount, wait_until

COMMIT_BEHIND = "commit-ms = 30000\n"


def snapshot(root):
    """Everything a user sees of the tree under root: per path its type, inode number, mode,
    link count, size, and its bytes' digest, its target or its extended attributes."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            p = os.path.join(d, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            e = {"ino": st.st_ino, "mode": oct(st.st_mode), "nlink": st.st_nlink, "size": st.st_size,
                 "uid": st.st_uid}
            if stat.S_ISLNK(st.st_mode):
                e["target"] = os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    e["sha"] = hashlib.sha256(f.read()).hexdigest()
            if not stat.S_ISLNK(st.st_mode):
                e["xattrs"] = {k: os.getxattr(p, k) for k in sorted(os.listxattr(p))}
            out[rel] = e
    return out


def replayed_count(cluster):
    """How many changes the MDS's last start replayed, from its log."""
    found = re.findall(r"replay complete: (\d+) change\(s\) replayed, (\d+) refused", cluster.read_log("mds"))
    assert found, "the MDS did not log the end of a replay:\n" + cluster.read_log("mds")[-3000:]
    return tuple(int(x) for x in found[-1])


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def test_kill9_of_the_mds_replays_every_clients_interleaved_changes(cluster_factory):
    cluster = configured(cluster_factory, COMMIT_BEHIND)
    a = cluster.mount()
    with second_mount(cluster) as b, second_mount(cluster) as c:
        for m in (a, b, c):
            os.mkdir(os.path.join(m, "own-" + os.path.basename(m)))
        os.mkdir(os.path.join(a, "w"))
        changes = 1
        for i in range(12):
            # Three clients take turns in one directory, each building on what another did.
            write(os.path.join(a, "w", "a%d" % i), b"from a %d\n" % i * (i + 1))
            os.rename(os.path.join(b, "w", "a%d" % i), os.path.join(b, "w", "moved%d" % i))
            os.chmod(os.path.join(c, "w", "moved%d" % i), 0o600 + i % 8)
            os.mkdir(os.path.join(c, "w", "d%d" % i))
            write(os.path.join(b, "w", "d%d" % i, "f"), os.urandom(1000 + 37 * i))
            os.symlink("../moved%d" % i, os.path.join(a, "w", "d%d" % i, "link"))
            os.setxattr(os.path.join(b, "w", "moved%d" % i), "user.step", b"%d" % i)
            os.link(os.path.join(c, "w", "moved%d" % i), os.path.join(c, "w", "d%d" % i, "hard"))
            changes += 8
            if i % 3 == 2:
                os.unlink(os.path.join(a, "w", "d%d" % (i - 1), "hard"))
                changes += 1
        before = snapshot(os.path.join(a, "w"))
        assert snapshot(os.path.join(b, "w")) == before, "two mounts disagreed before the kill"

        cluster.kill9("mds")
        cluster.restart()
        wait_until(lambda: "replay complete" in cluster.read_log("mds"), 60)
        replayed, refused = replayed_count(cluster)
        assert refused == 0, "the MDS refused %d replays of live clients:\n%s" % (
            refused, cluster.read_log("mds")[-3000:])
        # Every change was answered and none committed: each came back by a replay.
        assert replayed >= changes, "only %d of %d changes were replayed" % (replayed, changes)
        for m in (a, b, c):
            assert snapshot(os.path.join(m, "w")) == before, "the tree through %s differs after the replay" % m
        with second_mount(cluster) as fresh:
            assert snapshot(os.path.join(fresh, "w")) == before, "a new mount sees another tree"
            for m in (a, b, c):
                assert os.path.isdir(os.path.join(fresh, "own-" + os.path.basename(m)))
        # New changes go on after the replayed ones, with new inode numbers.
        write(os.path.join(b, "w", "after"), b"after\n")
        assert os.stat(os.path.join(a, "w", "after")).st_ino not in {e["ino"] for e in before.values()}


def test_a_crash_during_recovery_keeps_the_window_of_the_first(cluster_factory):
    """The MDS is killed again while it waits for a client's replays (the client is stopped):
    the second start must take the replays in the window the first start made, not skip the
    counters again and refuse them as numbers no crash can have lost. Then a crash after the
    replays all ran skips afresh."""
    cluster = configured(cluster_factory, COMMIT_BEHIND)
    a = cluster.mount()
    os.mkdir(os.path.join(a, "w"))
    for i in range(5):
        write(os.path.join(a, "w", "f%d" % i), b"file %d\n" % i)
    before = snapshot(os.path.join(a, "w"))
    pid = mount_pid(a)
    os.kill(pid, signal.SIGSTOP)
    try:
        cluster.kill9("mds")
        cluster.restart()
        assert wait_until(lambda: "waiting up to" in cluster.read_log("mds"), 30)
        cluster.kill9("mds")
        cluster.restart()
    finally:
        os.kill(pid, signal.SIGCONT)
    assert wait_until(lambda: cluster.read_log("mds").count("replay complete") == 1, 60)
    replayed, refused = replayed_count(cluster)
    assert refused == 0, "replays refused after a crash during recovery:\n%s" % cluster.read_log("mds")[-3000:]
    assert replayed >= 6
    assert snapshot(os.path.join(a, "w")) == before
    with second_mount(cluster) as fresh:
        assert snapshot(os.path.join(fresh, "w")) == before
    # Settled: the next crash with changes answered replays them in a window of its own. (The
    # fsync commits the second mount's goodbye too: the MDS does not wait for it.)
    fsync_dir(os.path.join(a, "w"))
    write(os.path.join(a, "w", "later"), b"later\n")
    cluster.kill9("mds")
    cluster.restart()
    assert wait_until(lambda: cluster.read_log("mds").count("replay complete") == 2, 60)
    assert replayed_count(cluster)[1] == 0
    with open(os.path.join(a, "w", "later"), "rb") as f:
        assert f.read() == b"later\n"


def test_a_replay_after_a_change_lost_with_its_client_is_refused(cluster_factory):
    """Mount A dies with the MDS: what A was answered and not committed is lost. B's changes that
    built on it are refused, never applied on top of what the inodes are now; B's independent
    ones are replayed."""
    cluster = configured(cluster_factory, COMMIT_BEHIND + "recovery-window = 6\n")
    cluster.allow_log(r"replay of MDS_\w+ \(transno \d+\) from .* (refused|failed)",
                      r"the MDS restarted and refused to replay MDS_\w+ \(transno \d+\)")
    a = cluster.mount()
    with second_mount(cluster) as b:
        write(os.path.join(a, "h"), b"committed\n")
        os.mkdir(os.path.join(b, "bdir"))
        # B's first file in its own directory asks for inode numbers ahead (creates sent
        # behind), which the MDS commits before it answers: before the fsync, so that nothing
        # below commits what it should not.
        write(os.path.join(b, "bdir", "first"), b"")
        fsync_dir(b)                                     # both on disk: what follows is not
        os.chmod(os.path.join(a, "h"), 0o600)            # A: lost
        os.chmod(os.path.join(b, "h"), 0o640)            # B, on top of A's: refused (version)
        os.mkdir(os.path.join(a, "d"))                   # A: lost
        write(os.path.join(b, "d", "f"), b"B's file\n")  # B, inside A's directory: refused
        write(os.path.join(b, "bdir", "mine"), b"B alone\n")  # B, independent: replayed
        ino_h = os.stat(os.path.join(b, "h")).st_ino

        os.kill(mount_pid(a), signal.SIGKILL)
        cluster.kill9("mds")
        cluster.restart()
        # The MDS waits for A (listed) until its window passes, then replays B's in order.
        assert wait_until(lambda: "replay complete" in cluster.read_log("mds"), 90)
        replayed, refused = replayed_count(cluster)
        log = cluster.read_log("mds")
        assert refused >= 2, "B's replays that depended on A's lost changes were not refused:\n" + log[-3000:]
        assert re.search(r"replay of MDS_SETATTR \(transno \d+\) from .* refused: inode %d is at version"
                         % ino_h, log), "the refusal by version is not logged:\n" + log[-3000:]

        with second_mount(cluster) as fresh:
            st = os.stat(os.path.join(fresh, "h"))
            assert stat.S_IMODE(st.st_mode) == 0o644, \
                "B's chmod was applied on top of an inode A's lost change had not reached: %o" % st.st_mode
            assert not os.path.exists(os.path.join(fresh, "d")), "A's lost mkdir came back"
            with open(os.path.join(fresh, "bdir", "mine"), "rb") as f:
                assert f.read() == b"B alone\n", "B's independent change was not replayed"
            with open(os.path.join(fresh, "h"), "rb") as f:
                assert f.read() == b"committed\n"
        # B itself sees the file system as it is now, not what it was told before the crash.
        assert wait_until(lambda: not os.path.exists(os.path.join(b, "d")), 10)


def test_fsync_survives_kill9_of_the_mds_together_with_the_client(cluster_factory):
    """What fsync (of a file, or of a directory) returned for is on the MDT's disk: it survives the
    MDS and the client killed at once, when nothing can be replayed. What was not fsynced may be
    lost, as on a local file system after a crash."""
    cluster = configured(cluster_factory, COMMIT_BEHIND + "recovery-window = 3\n")
    a = cluster.mount()
    os.mkdir(os.path.join(a, "ck"))
    kept = {}
    for i in range(6):
        p = os.path.join(a, "ck", "step%d.pt" % i)
        data = os.urandom(3000 + 4096 * i)
        with open(p, "wb") as f:
            f.write(data)
            if i % 2 == 0:
                f.flush()
                os.fsync(f.fileno())          # fsync of the file: its name and bytes too
                kept["step%d.pt" % i] = data
    # A rename made durable by fsync of its directory, as careful checkpoint code does.
    os.rename(os.path.join(a, "ck", "step4.pt"), os.path.join(a, "ck", "latest.pt"))
    kept["latest.pt"] = kept.pop("step4.pt")
    fsync_dir(os.path.join(a, "ck"))
    # sync(1) with a path fsyncs it (the kernel passes no syncfs to a FUSE file system).
    os.mkdir(os.path.join(a, "ck", "by-sync-cmd"))
    subprocess.run(["sync", a], check=True, timeout=60)
    kept_dirs = ["by-sync-cmd"]
    os.mkdir(os.path.join(a, "ck", "unsynced"))     # answered, never made durable

    os.kill(mount_pid(a), signal.SIGKILL)
    cluster.kill9("mds")
    subprocess.run(["umount", "-l", a], capture_output=True, timeout=60)
    cluster.restart()
    assert wait_until(lambda: "replay complete" in cluster.read_log("mds"), 60)
    with second_mount(cluster) as fresh:
        names = set(os.listdir(os.path.join(fresh, "ck")))
        for name, data in kept.items():
            assert name in names, "%s, fsynced, is gone after kill -9 of the MDS and the client" % name
            with open(os.path.join(fresh, "ck", name), "rb") as f:
                assert f.read() == data, "%s, fsynced, reads back other bytes" % name
        assert "step4.pt" not in names, "the rename fsynced with its directory was undone"
        for d in kept_dirs:
            assert d in names, "%s, made before `sync %s`, is gone" % (d, a)
        # What came after the last fsync was answered and lost with the client: the MDS did commit
        # behind (else this test would prove nothing).
        assert "unsynced" not in names, "a change made after the last fsync was on disk anyway"


def test_a_program_that_exits_leaves_nothing_to_wait_for(cluster_factory):
    """`loom` commits what it was answered before it exits and says it goes: a restart of the MDS
    right after waits for nobody, and what it did is there."""
    cluster = configured(cluster_factory, COMMIT_BEHIND)
    cluster.loom("mkdir", "/p")
    cluster.loom("put", "/etc/hostname", "/p/h")
    cluster.kill9("mds")
    cluster.restart()
    assert cluster.loom("ls", "/p").stdout.split() == ["h"], "what an exited program did is gone"
    this_start = cluster.read_log("mds").rsplit("MDT space:", 1)[-1]
    assert "waiting up to" not in this_start, "the MDS waits for clients that said they went:\n" + this_start


# ---- never trust the client: replays over the raw wire ------------------------------------------

def _raw(cluster, uuid, connect=True):
    return w.Client(cluster.mds_host, cluster.mds_port, uuid, connect=connect)


def _replay_body(transno, req_id, opcode, vers, body, reply):
    return (w.REPLAY_REQ.pack(transno, req_id, opcode, 0, len(vers), len(body), len(reply)) +
            b"".join(w.OBJ_VERSION.pack(*v) for v in vers) + body + reply)


def _with_ino(create_reply, ino):
    """A create's reply (lw_create_rep + layout) naming another inode number."""
    return struct.pack("<Q", ino) + create_reply[8:]


def _with_objs(create_reply, objs):
    """A create's reply naming other objects (as many as it had)."""
    out = bytearray(create_reply)
    at = w.CREATE_REP.size + w.LAYOUT.size
    for k, (ost, objid) in enumerate(objs):
        w.OSTOBJ.pack_into(out, at + k * w.OSTOBJ.size, ost, 0, objid)
    return bytes(out)


def test_forged_replays_take_no_inode_object_or_number_and_the_true_one_goes(cluster_factory):
    """A client with the key replays what it likes during a recovery: numbers outside what a crash
    can have lost, another file's inode or objects. Each is refused and changes nothing; its own
    true replay goes; requests of others wait meanwhile, and are answered after it."""
    cluster = configured(cluster_factory, COMMIT_BEHIND + "recovery-window = 30\n")
    cluster.allow_log(r"replay of MDS_CREATE .* refused")
    cluster.loom("setstripe", "-c", "-1", "/")
    cluster.loom("put", "/etc/services", "/victim")   # committed: the tool commits before it goes
    create = w.NS_OP["MDS_CREATE"]
    me = os.urandom(16)
    with _raw(cluster, me) as x:
        st, body = x.call(w.NS_OP["MDS_LOOKUP"], w.cred() + w.name_req(w.ROOT_INO, b"victim"), 5)
        victim = w.parse_attr(body)["ino"]
        st, body = x.call(w.OP["MDS_GETLAYOUT"], w.cred() + w.ino_req(victim), 6)
        victim_objs = w.parse_layout(body)["objs"]
        assert x.call(create, w.cred() + w.create_req(w.ROOT_INO, b"first"), 10)[0] == 0
        # The victim's version, as a key holder learns it: a change's reply names the versions it
        # found (this one is lost in the crash, so the victim stays at that version).
        assert x.call(w.OP["MDS_SETATTR"], w.cred() + w.setattr_req(victim, 0x1, mode=0o600), 7)[0] == 0
        victim_version = dict(x.last_header.vers)[victim]
        mine = w.cred() + w.create_req(w.ROOT_INO, b"mine")
        st, reply = x.call(create, mine, 11)
        assert st == 0
        transno, vers = x.last_header.transno, list(x.last_header.vers)
        mine_ino = w.parse_attr(reply)["ino"]
        assert transno > x.last_header.last_committed, "the create was committed before its answer"

    cluster.kill9("mds")
    cluster.restart()
    x = _raw(cluster, me, connect=False)
    other = None
    try:
        assert x.call(w.NS_OP["MDS_CONNECT"], w.connect_req(me), 1)[0] == 0
        assert x.last_header.rpflags & w.RPF_RECOVERING
        def claiming(ino, version):
            # The versions a first run of a create of ino would have found: so VBR passes.
            return [(i, v) for i, v in vers if i != mine_ino] + [(ino, version)]

        forged = [
            ("another file's inode", transno + 1, _with_ino(reply, victim), claiming(victim, victim_version)),
            ("an inode number past any counter", transno + 2, _with_ino(reply, (1 << 64) - 1),
             claiming((1 << 64) - 1, 0)),
            ("another file's objects", transno + 3, _with_objs(_with_ino(reply, mine_ino + 100), victim_objs),
             claiming(mine_ino + 100, 0)),
            ("a number no crash can have lost", transno + (1 << 40), _with_ino(reply, mine_ino + 101),
             claiming(mine_ino + 101, 0)),
        ]
        for k, (what, t, rep, fv) in enumerate(forged):
            name = b"forged%d" % k
            st, _ = x.call(w.NS_OP["MDS_REPLAY"],
                           _replay_body(t, 20 + k, create, fv, w.cred() + w.create_req(w.ROOT_INO, name), rep),
                           30 + k)
            if t < transno + (1 << 40):
                assert st != 0, "a replay naming %s was taken" % what
        # Another client's read waits for the end of the replays: nothing shows the namespace
        # before it is what clients were told.
        other = _raw(cluster, os.urandom(16))
        other.conn.send(w.frame(w.NS_OP["MDS_GETATTR"], w.cred() + w.ino_req(w.ROOT_INO), req_id=9))
        assert not select.select([other.conn.sock], [], [], 1.0)[0], "a read was answered during the replays"
        st, _ = x.call(w.NS_OP["MDS_REPLAY"], _replay_body(transno, 11, create, vers, mine, reply), 40)
        assert st == 0, "the true replay answered %d" % st
        assert x.call(w.NS_OP["MDS_REPLAY"], w.REPLAY_REQ.pack(0, 0, 0, w.RP_DONE, 0, 0, 0), 41)[0] == 0
        h, _, _ = other.conn.recv_frame()
        assert h.status == 0 and not h.rpflags & w.RPF_RECOVERING
        # A replay after the recovery is refused: its client is late.
        st, _ = x.call(w.NS_OP["MDS_REPLAY"],
                       _replay_body(transno + 5, 50, create, vers, w.cred() + w.create_req(w.ROOT_INO, b"late"),
                                    _with_ino(reply, mine_ino + 102)), 51)
        assert st == -errno.ETIMEDOUT, "a replay after the recovery answered %d" % st
        names = {}
        for n in (b"victim", b"mine", b"first", b"late") + tuple(b"forged%d" % k for k in range(len(forged))):
            st, body = x.call(w.NS_OP["MDS_LOOKUP"], w.cred() + w.name_req(w.ROOT_INO, n), 60 + len(names))
            names[n] = w.parse_attr(body)["ino"] if st == 0 else st
    finally:
        x.close()
        if other:
            other.close()
    assert names[b"mine"] == mine_ino and names[b"victim"] == victim
    assert all(names[n] == -errno.ENOENT for n in names if n.startswith(b"forged") or n == b"late"), names
    with tempfile.TemporaryDirectory() as d:
        cluster.loom("get", "/victim", os.path.join(d, "v"))
        with open(os.path.join(d, "v"), "rb") as f, open("/etc/services", "rb") as g:
            assert f.read() == g.read(), "the victim's bytes changed"
    # New files get inode numbers and objects nobody had.
    cluster.loom("put", "/etc/hostname", "/new")
    st = cluster.loom("stat", "/new").stdout
    assert str(victim) not in st.split() and str(mine_ino) not in st.split()


def test_a_resend_answered_from_the_reply_cache_is_committed_before_its_answer(cluster_factory):
    """A change answered before its commit whose reply was lost: its resend is answered from the
    reply cache without a transno to keep, so that answer waits for the commit; a crash right
    after loses nothing the client was told."""
    cluster = configured(cluster_factory, COMMIT_BEHIND)
    me = os.urandom(16)
    mkdir = w.cred() + w.mkdir_req(w.ROOT_INO, b"once")
    with _raw(cluster, me) as x:
        assert x.call(w.NS_OP["MDS_MKDIR"], w.cred() + w.mkdir_req(w.ROOT_INO, b"listed"), 10)[0] == 0
        assert x.call(w.NS_OP["MDS_MKDIR"], mkdir, 11)[0] == 0
        assert x.last_header.transno > x.last_header.last_committed
    with _raw(cluster, me) as x:   # the reply was lost: resent on a new connection
        assert x.call(w.NS_OP["MDS_MKDIR"], mkdir, 11, flags=w.F_RESENT)[0] == 0
    cluster.kill9("mds")
    cluster.restart()
    with _raw(cluster, me) as x:     # says it has nothing to replay: it was told nothing to keep
        st, _ = x.call(w.NS_OP["MDS_LOOKUP"], w.cred() + w.name_req(w.ROOT_INO, b"once"), 20)
    assert st == 0, "a change whose resend was answered is gone after kill -9 of the MDS (%d)" % st

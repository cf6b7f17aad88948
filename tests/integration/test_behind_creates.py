"""Creates sent behind (protocol 8; docs/architecture.md, "Creates sent behind"): under an
exclusive directory lease the mount answers a create itself, with an inode number the MDS handed
ahead, and sends it to the MDS without waiting. What a user sees must not change: every file is
there for every other client as soon as the create returned, with its bytes once closed, also
after the MDS is killed; a name two clients make at once is made once."""
import errno
import os
import signal
import subprocess
import threading
import time

import loomutil
import loomwire as w
from loomutil import second_mount, wait_until
from test_leases import absent, stopped

LEASE_TIMEOUT = 2


def configured(cluster_factory, settings="lease-timeout = %d\n" % LEASE_TIMEOUT):
    return loomutil.configured(cluster_factory, settings)


def make_files(d, names, data=b""):
    for n in names:
        with open(os.path.join(d, n), "xb") as f:
            if data:
                f.write(data + n.encode())


def made_while_stopped(c, d, n):
    """n empty files made in d by another program while the MDS is stopped (SIGSTOP): each
    create answered by the mount alone, within 5 s."""
    with stopped(c.pid("mds")):
        script = ("import os\n"
                  "for i in range(%d):\n"
                  "    open(os.path.join(%r, 'made-%%d' %% i), 'x').close()\n"
                  "print('made')\n" % (n, d))
        p = subprocess.run(["timeout", "5", "python3", "-c", script], capture_output=True, text=True)
        assert p.returncode == 0 and p.stdout == "made\n", p


def test_creates_in_a_directory_this_mount_made_need_no_mds(cluster_factory):
    """With the MDS stopped, files are still made (and closed) in a directory the mount made: it
    answered them itself. Once the MDS runs again, another mount sees every one."""
    c = configured(cluster_factory, "lease-timeout = 15\n")
    with second_mount(c, opts="nowsync") as a:
        d = os.path.join(a, "fresh")
        os.mkdir(d)
        # The first create asks the MDS for inode numbers ahead; the rest need nothing.
        make_files(d, ["first"])
        os.stat(a)
        made_while_stopped(c, d, 20)
        with second_mount(c, opts="nowsync") as b:
            got = sorted(os.listdir(os.path.join(b, "fresh")))
            assert got == sorted(["first"] + ["made-%d" % i for i in range(20)])
            for n in got:
                st = os.stat(os.path.join(b, "fresh", n))
                assert st.st_size == 0 and st.st_nlink == 1
        # Inode numbers and attributes the mount answered are the MDS's.
        for n in ("first", "made-3"):
            mine = os.stat(os.path.join(d, n))
            with second_mount(c, opts="nowsync") as b:
                theirs = os.stat(os.path.join(b, "fresh", n))
            assert (mine.st_ino, mine.st_mode, mine.st_uid, mine.st_gid) == \
                (theirs.st_ino, theirs.st_mode, theirs.st_uid, theirs.st_gid)


def test_files_written_after_a_create_sent_behind_hold_their_bytes(cluster_factory):
    """np.save's pattern: create, write, close, many times; every file reads back whole from
    another mount, right after."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a, second_mount(c, opts="nowsync") as b:
        d = os.path.join(a, "shards")
        os.mkdir(d)
        names = ["shard-%03d" % i for i in range(200)]
        make_files(d, names, data=b"x" * 5000)
        for n in names:
            with open(os.path.join(b, "shards", n), "rb") as f:
                assert f.read() == b"x" * 5000 + n.encode()


def test_another_mount_sees_each_file_as_soon_as_its_create_returned(cluster_factory):
    """B's lookups and listings of A's directory wait for A's exclusive lease, which A gives back
    only once the MDS has every file it made there."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a, second_mount(c, opts="nowsync") as b:
        d = os.path.join(a, "seen")
        os.mkdir(d)
        for i in range(30):
            open(os.path.join(d, "f-%d" % i), "x").close()
            # Alternately a lookup and a listing by B, each right after A's create.
            if i % 2:
                assert os.path.exists(os.path.join(b, "seen", "f-%d" % i))
            else:
                assert "f-%d" % i in os.listdir(os.path.join(b, "seen"))
        log = c.read_log("mds")
        assert "did not give back" not in log


def test_two_mounts_creating_in_one_directory_make_every_name_once(cluster_factory):
    """A and B make files in one directory at once, distinct names and one name both ask for
    with O_EXCL: every distinct name is made, and the shared one exactly once."""
    c = configured(cluster_factory)
    b = c.mount()
    with second_mount(c, opts="nowsync") as a:
        os.mkdir(os.path.join(a, "shared"))
        errors, won = [], []

        def run(mnt, tag):
            try:
                for i in range(100):
                    open(os.path.join(mnt, "shared", "%s-%d" % (tag, i)), "x").close()
                    if i % 10 == 0:
                        try:
                            open(os.path.join(mnt, "shared", "both-%d" % i), "x").close()
                            won.append((tag, i))
                        except FileExistsError:
                            pass
            except OSError as e:
                errors.append((tag, e, e.filename))

        ts = [threading.Thread(target=run, args=(m, t)) for m, t in ((a, "a"), (b, "b"))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert errors == []
        assert sorted(i for _, i in won) == list(range(0, 100, 10))
        names = set(os.listdir(os.path.join(a, "shared")))
        assert names == set(os.listdir(os.path.join(b, "shared")))
        assert names == {"%s-%d" % (t, i) for t in "ab" for i in range(100)} | \
            {"both-%d" % i for i in range(0, 100, 10)}


def test_the_roots_attributes_wait_for_creates_in_flight_while_the_mds_answers(cluster_factory):
    """umount(8)'s stat of the root must not wait for an MDS that is away; but while the MDS is
    only slow (here: stopped for a moment, not yet taken for gone), a stat of the root that finds
    creates still in flight waits for them, as every other request does, and is answered: it
    once got EIO at once, and with it an unlink under a path through the root."""
    c = configured(cluster_factory, "lease-timeout = 15\n")
    with second_mount(c, opts="nowsync,attr_timeout=0.2") as a:
        d = os.path.join(a, "slow")
        os.mkdir(d)
        make_files(d, ["first"])
        os.stat(a)
        with stopped(c.pid("mds")):
            make_files(d, ["in-flight"])                 # answered by the mount, sent behind
            time.sleep(0.5)                              # the root's attributes expire
            timer = threading.Timer(1.0, os.kill, (c.pid("mds"), signal.SIGCONT))
            timer.start()
            try:
                p = subprocess.run(["python3", "-c", "import os, sys; os.stat(sys.argv[1]); "
                                    "os.unlink(os.path.join(sys.argv[1], 'slow', 'first'))", a],
                                   capture_output=True, text=True, timeout=60)
            finally:
                timer.cancel()
        assert p.returncode == 0, p.stderr
        assert sorted(os.listdir(d)) == ["in-flight"]


WRITER = r"""
import os, sys
d = sys.argv[1]
for i in range(3000):
    n = "f-%04d" % i
    with open(os.path.join(d, n), "xb") as f:
        f.write(n.encode() * 10)
    print(n, flush=True)
"""


def test_files_made_behind_survive_kill_9_of_the_mds(cluster_factory):
    """The MDS is killed while a program makes and writes files behind through a mount; every
    file whose close returned is there after the MDS restarts, with its bytes (resends and
    replays take the same inode numbers from the range the mount was handed). The writer is a
    program of its own, as a training job is: a thread of this process would hold a file of the
    mount open while it forks the MDS's restart, and the child's close of that file (a FUSE
    flush, which waits for the create's answer) would wait for the MDS it is to start."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a:
        d = os.path.join(a, "crash")
        os.mkdir(d)
        out_path = os.path.join(c.dir, "writer.out")
        out = open(out_path, "w")
        p = subprocess.Popen(["python3", "-c", WRITER, d], stdout=out, stderr=subprocess.PIPE, text=True)

        def written():
            # Through an open of our own: seeking the program's would move its offset too.
            with open(out_path) as f:
                return [n for n in f.read().split("\n") if n]

        try:
            wait_until(lambda: len(written()) >= 100 or p.poll() is not None, timeout=60)
            c.kill9("mds")
            c.restart()
            wait_until(lambda: "replay complete" in c.read_log("mds"), 60)
            wait_until(lambda: len(written()) >= 300 or p.poll() is not None, timeout=120)
        finally:
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=120)
        done = written()
        out.close()
        # The restart was the MDS's business: the program saw nothing of it (only the SIGINT).
        assert "Error" not in err.replace("KeyboardInterrupt", "") and len(done) >= 300, (err, len(done))
        with second_mount(c, opts="nowsync") as b:
            names = set(os.listdir(os.path.join(b, "crash")))
            assert set(done) <= names
            for n in done:
                with open(os.path.join(b, "crash", n), "rb") as f:
                    assert f.read() == n.encode() * 10, n


C = w.cred()


def inos(client, count, req_id, flags=0):
    st, body = client.call(w.NS_OP["MDS_INOS"], w.INOS_REQ.pack(count, 0), req_id=req_id, flags=flags)
    return (st, w.INOS_REP.unpack_from(body)[:2]) if st == 0 else (st, None)


def create(client, parent, name, req_id, ino=None, flags=w.CR_EXCL):
    st, body = client.call(w.NS_OP["MDS_CREATE"], C + w.create_req(parent, name, flags=flags, ino=ino),
                           req_id=req_id)
    return st, (w.parse_attr(body) if st == 0 else None)


def test_inode_numbers_ahead_on_the_wire(cluster_factory):
    """MDS_INOS hands a client numbers; a create may take each once, and only its own; a second
    range replaces the first."""
    c = configured(cluster_factory)
    host, port = c.mds_host, c.mds_port
    with w.Client(host, port, os.urandom(16)) as one, w.Client(host, port, os.urandom(16)) as two:
        st, (first, count) = inos(one, 16, 10)
        assert st == 0 and count == 16 and first > 1
        st, attr = create(one, 1, b"mine", 11, ino=first + 3)
        assert st == 0 and attr["ino"] == first + 3
        # The same number again, another client's, one never handed out: refused, nothing made.
        assert create(one, 1, b"again", 12, ino=first + 3)[0] == -errno.EINVAL
        assert create(two, 1, b"theirs", 13, ino=first + 4)[0] == -errno.EINVAL
        assert create(one, 1, b"beyond", 14, ino=first + 16)[0] == -errno.EINVAL
        assert create(one, 1, b"below", 15, ino=first - 1)[0] == -errno.EINVAL
        # Malformed: without O_EXCL, the root's number, counts out of bounds.
        assert create(one, 1, b"noexcl", 16, ino=first + 5, flags=0)[0] == -errno.EINVAL
        assert create(one, 1, b"root", 17, ino=1)[0] == -errno.EINVAL
        assert inos(one, 0, 18)[0] == -errno.EINVAL
        assert inos(one, 1025, 19)[0] == -errno.EINVAL
        # A resend of the grant gets the same range (reply cache); a new one replaces it.
        st, again = inos(one, 16, 10, flags=w.F_RESENT)
        assert st == 0 and again == (first, 16)
        st, (second, _) = inos(one, 8, 20)
        assert st == 0 and second >= first + 16
        assert create(one, 1, b"old", 21, ino=first + 6)[0] == -errno.EINVAL
        st, attr = create(one, 1, b"new", 22, ino=second)
        assert st == 0 and attr["ino"] == second
        # A plain create takes a number of its own, past every range handed out.
        st, attr = create(two, 1, b"plain", 23)
        assert st == 0 and attr["ino"] >= second + 8
        for name, ino in ((b"mine", first + 3), (b"new", second)):
            st, body = two.call(w.NS_OP["MDS_LOOKUP"], C + w.name_req(1, name), req_id=30 + ino % 7)
            assert st == 0 and w.parse_attr(body)["ino"] == ino
        for name in (b"again", b"theirs", b"beyond", b"below", b"noexcl", b"root", b"old"):
            st, _ = two.call(w.NS_OP["MDS_LOOKUP"], C + w.name_req(1, name), req_id=40)
            assert st == -errno.ENOENT, name


def test_numbers_of_a_client_that_never_comes_back_after_a_restart_are_forgotten(cluster_factory):
    """The MDT keeps the room of every number it handed ahead until the client's session ends;
    after an MDS restart, a client that does not come back within the recovery window has no
    session to end: its range is forgotten once the window passed twice, and its numbers are
    refused from then on."""
    c = configured(cluster_factory, "lease-timeout = 2\nrecovery-window = 2\n")
    host, port = c.mds_host, c.mds_port
    uuid = os.urandom(16)
    with w.Client(host, port, uuid) as gone:
        st, (first, count) = inos(gone, 64, 10)
        assert st == 0 and count == 64
        assert create(gone, 1, b"made", 11, ino=first)[0] == 0
        assert gone.call(w.NS_OP["MDS_SYNC"], w.sync_req(), req_id=12)[0] == 0
        c.kill9("mds")
    c.restart()
    assert wait_until(lambda: "forgot the inode numbers handed ahead to 1 client(s)" in c.read_log("mds"), 60), \
        c.read_log("mds")[-2000:]
    with w.Client(host, port, uuid) as back:
        assert create(back, 1, b"late", 12, ino=first + 1)[0] == -errno.EINVAL
        st, body = back.call(w.NS_OP["MDS_LOOKUP"], C + w.name_req(1, b"made"), req_id=13)
        assert st == 0 and w.parse_attr(body)["ino"] == first


def test_an_exclusive_lease_holds_others_lookups_until_it_comes_back(cluster_factory):
    """On the wire: a lease asked exclusive is, while nobody else holds one; another client's
    lookup in that directory waits for its recall and give-back, and a shared lease is never
    exclusive."""
    c = configured(cluster_factory)
    host, port = c.mds_host, c.mds_port
    with w.Client(host, port, os.urandom(16)) as holder, w.Client(host, port, os.urandom(16)) as other:
        st, body = holder.call(w.NS_OP["MDS_MKDIR"], C + w.mkdir_req(1, b"x", flags=w.MK_LEASE | w.MK_EXCL),
                               req_id=10)
        h = holder.last_header
        assert st == 0 and h.lease_gen and h.rpflags & w.RPF_LEASE_EXCL
        d = w.parse_attr(body)["ino"]
        other.conn.send(w.frame(w.NS_OP["MDS_LOOKUP"], C + w.name_req(d, b"f"), req_id=11))
        nh, nbody = holder.conn.recv_notification()
        assert w.parse_recall(nbody) == [(d, h.lease_gen)]
        # The holder's create before its give-back is seen by the lookup.
        st, _ = create(holder, d, b"f", 12)
        assert st == 0
        st, _ = holder.call(w.NS_OP["MDS_LEASE"], w.lease_req([(d, h.lease_gen)]), req_id=13)
        assert st == 0
        rh, rbody, _ = other.conn.recv_reply()
        assert rh.req_id == 11 and rh.status == 0, rh
        # Two holders: a lease asked exclusive while another holds one is shared.
        st, _ = holder.call(w.NS_OP["MDS_READDIR"], w.readdir_req(d, flags=w.RD_LEASE), req_id=14)
        assert st == 0 and holder.last_header.lease_gen and not holder.last_header.rpflags & w.RPF_LEASE_EXCL
        st, _ = other.call(w.NS_OP["MDS_READDIR"], w.readdir_req(d, flags=w.RD_LEASE | w.RD_EXCL), req_id=15)
        assert st == 0 and other.last_header.lease_gen and not other.last_header.rpflags & w.RPF_LEASE_EXCL
        # EXCL alone is malformed.
        st, _ = other.call(w.NS_OP["MDS_READDIR"], w.readdir_req(d, flags=w.RD_EXCL), req_id=16)
        assert st == -errno.EINVAL


def test_a_walk_waits_only_for_exclusive_leases_on_its_path(cluster_factory):
    """On the wire: another client's walk (the native path's MDS_WALK) through directories nobody
    leases exclusively is answered without recalling an exclusive lease elsewhere; a walk through
    the leased directory waits for its recall and give-back, and then sees what the holder made
    there before."""
    c = configured(cluster_factory)
    host, port = c.mds_host, c.mds_port
    with w.Client(host, port, os.urandom(16)) as holder, w.Client(host, port, os.urandom(16)) as other:
        st, body = holder.call(w.NS_OP["MDS_MKDIR"], C + w.mkdir_req(1, b"held", flags=w.MK_LEASE | w.MK_EXCL),
                               req_id=10)
        h = holder.last_header
        assert st == 0 and h.rpflags & w.RPF_LEASE_EXCL
        d = w.parse_attr(body)["ino"]
        st, body = other.call(w.NS_OP["MDS_MKDIR"], C + w.mkdir_req(1, b"free"), req_id=10)
        assert st == 0
        st, _ = create(other, w.parse_attr(body)["ino"], b"f", 11)
        assert st == 0
        st, body = other.call(w.NS_OP["MDS_WALK"], C + w.walk_req(b"/free/f"), req_id=12)
        assert st == 0 and w.WALK_REP.unpack_from(body)[1] == len(b"/free/f")
        # Had the walk recalled the lease, the recall would have come before this reply.
        st, _ = holder.call(w.NS_OP["MDS_GETATTR"], C + w.ino_req(d), req_id=11)
        assert st == 0 and holder.conn.notifications == [], holder.conn.notifications
        # Through the leased directory: the recall, and the walk sees the holder's file.
        other.conn.send(w.frame(w.NS_OP["MDS_WALK"], C + w.walk_req(b"/held/g"), req_id=13))
        nh, nbody = holder.conn.recv_notification()
        assert w.parse_recall(nbody) == [(d, h.lease_gen)]
        st, _ = create(holder, d, b"g", 12)
        assert st == 0
        st, _ = holder.call(w.NS_OP["MDS_LEASE"], w.lease_req([(d, h.lease_gen)]), req_id=13)
        assert st == 0
        rh, rbody, _ = other.conn.recv_reply()
        assert rh.req_id == 13 and rh.status == 0, rh
        assert w.WALK_REP.unpack_from(rbody)[1] == len(b"/held/g")


def test_another_mounts_rmdir_waits_for_the_files_made_behind(cluster_factory):
    """Files A made behind while the MDS was stopped are in A's directory before B's rmdir of it
    runs: the rmdir recalls A's exclusive lease, which A gives back only once the MDS has them."""
    c = configured(cluster_factory, "lease-timeout = 15\n")
    with second_mount(c, opts="nowsync") as a, second_mount(c, opts="nowsync") as b:
        d = os.path.join(a, "victim")
        os.mkdir(d)
        make_files(d, ["first"])
        os.stat(a)
        assert os.path.isdir(os.path.join(b, "victim"))
        result = []
        made_while_stopped(c, d, 5)
        with stopped(c.pid("mds")):
            def rmdir():
                try:
                    os.rmdir(os.path.join(b, "victim"))
                    result.append(0)
                except OSError as e:
                    result.append(e.errno)

            t = threading.Thread(target=rmdir)
            t.start()
        t.join(timeout=60)
        assert result == [errno.ENOTEMPTY], result
        assert sorted(os.listdir(os.path.join(b, "victim"))) == ["first"] + ["made-%d" % i for i in range(5)]

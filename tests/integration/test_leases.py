"""Directory leases (issue 18): a mount that looked up a few missing names in a directory lists its
names under a lease and answers lookups of names not there itself; the MDS recalls the lease
before another client changes the directory's entries, and takes it back from one that does not
answer in time.

Two mounts (two loom-mount processes, as two nodes) share each directory; raw-wire clients check
the protocol (the recall, the give-back, the loss told in a reply).
"""

import contextlib
import errno
import os
import re
import signal
import subprocess
import threading
import time

import loomutil
import loomwire as w
from loomutil import mount_pid, second_mount, wait_until

LEASE_TIMEOUT = 2   # seconds: the MDS's --lease-timeout here (mounts trust leases for 1 s idle)


def configured(cluster_factory, settings="lease-timeout = %d\n" % LEASE_TIMEOUT):
    return loomutil.configured(cluster_factory, settings)


def absent(path):
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    return False


def take_lease(mnt, d, n=8):
    """Makes mnt's loom-mount take a lease on d: lookups of n missing names there."""
    for i in range(n):
        assert absent(os.path.join(mnt, d, "missing-%d" % i))


def drop_dentries():
    """The kernel forgets cached names (negative and unused ones): lookups reach the mounts."""
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")


@contextlib.contextmanager
def stopped(pid):
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_leased_directory_answers_missing_names_without_the_mds(cluster_factory):
    """With the MDS stopped, a lookup of a missing name in a leased directory still answers ENOENT
    at once: the mount knows the directory's names. Another directory has no lease: its lookup
    waits for the MDS."""
    c = configured(cluster_factory, "lease-timeout = 15\n")
    # The kernel keeps its entries and attributes a minute: only the missing names' lookups reach
    # the mount while the MDS is stopped, however slowly a loaded machine runs this test.
    with second_mount(c, opts="entry_timeout=60,attr_timeout=60") as a:
        os.makedirs(os.path.join(a, "leased"))
        for i in range(3):
            open(os.path.join(a, "leased", "here-%d" % i), "w").close()
        mds = c.pid("mds")
        take_lease(a, "leased")
        # A directory this mount makes comes with its lease: no lookups needed first.
        os.mkdir(os.path.join(a, "fresh"))
        # The kernel dropped the root's attributes with the mkdir: read again now, or the walk
        # below would ask the stopped MDS for them (the kernel checks search permission).
        os.stat(a)
        # In a process of its own, bounded, so that a lookup that went to the stopped MDS shows as
        # a timeout, not a hang. It starts before the MDS stops: a loaded machine's slow start of
        # Python must not count. A lease is trusted only while the MDS was heard from within half
        # its timeout (7.5 s here), so the mount hears from it (statfs) just before it stops.
        script = ("import os, sys\n"
                  "print('ready', flush=True)\n"
                  "sys.stdin.readline()\n"
                  "for d in (%r, %r):\n"
                  "    for i in range(5):\n"
                  "        try:\n"
                  "            os.lstat(d + '/never-made-%%d' %% i)\n"
                  "        except FileNotFoundError:\n"
                  "            continue\n"
                  "        raise SystemExit('never-made-%%d is there' %% i)\n"
                  "print('all absent')\n" % (os.path.join(a, "leased"), os.path.join(a, "fresh")))
        p = subprocess.Popen(["python3", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline() == "ready\n"
            os.statvfs(a)
            with stopped(mds):
                try:
                    out, err = p.communicate("go\n", timeout=5)
                except subprocess.TimeoutExpired:
                    raise AssertionError("a lookup in a leased directory waited for the stopped MDS")
                assert p.returncode == 0 and out == "all absent\n", (p.returncode, out, err)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        # Another mount's create in the new directory recalls that lease too.
        with second_mount(c) as b:
            open(os.path.join(b, "fresh", "from-b"), "x").close()
        assert os.listdir(os.path.join(a, "fresh")) == ["from-b"]
        assert not absent(os.path.join(a, "fresh", "from-b"))
        # Names that exist are still asked of the MDS (their attributes), and are there.
        assert sorted(os.listdir(os.path.join(a, "leased"))) == ["here-0", "here-1", "here-2"]
        assert os.path.isfile(os.path.join(a, "leased", "here-1"))


def test_another_mounts_changes_show_at_once_in_a_leased_directory(cluster_factory):
    """Each kind of change of entries by mount B recalls A's lease first: A sees it as soon as B's
    call returned, as on one machine."""
    c = configured(cluster_factory)
    with second_mount(c) as a, second_mount(c) as b:
        os.makedirs(os.path.join(a, "d"))
        os.makedirs(os.path.join(a, "elsewhere"))
        open(os.path.join(a, "elsewhere", "src"), "w").close()
        open(os.path.join(a, "elsewhere", "moved"), "w").close()

        def changes():
            yield "file", lambda p: open(p, "x").close()
            yield "dir", os.mkdir
            yield "symlink", lambda p: os.symlink("target", p)
            yield "hardlink", lambda p: os.link(os.path.join(b, "elsewhere", "src"), p)
            yield "renamed-in", lambda p: os.rename(os.path.join(b, "elsewhere", "moved"), p)

        for name, make in changes():
            take_lease(a, "d")
            make(os.path.join(b, "d", name))
            assert not absent(os.path.join(a, "d", name)), "mount A missed B's %s" % name
        # And removals: the names go for A too.
        take_lease(a, "d")
        os.unlink(os.path.join(b, "d", "file"))
        os.rmdir(os.path.join(b, "d", "dir"))
        drop_dentries()
        assert absent(os.path.join(a, "d", "file")) and absent(os.path.join(a, "d", "dir"))
        assert sorted(os.listdir(os.path.join(a, "d"))) == ["hardlink", "renamed-in", "symlink"]
        log = c.read_log("mds")
        assert "did not give back" not in log, "a mount that answers lost its leases"


def test_a_file_put_on_the_native_path_shows_at_once_in_a_leased_directory(cluster_factory, workdir):
    """The native path (`loom put`, libloom without a mount) is another client too: its create
    recalls the mount's lease first."""
    c = configured(cluster_factory)
    with second_mount(c) as a:
        os.makedirs(os.path.join(a, "d"))
        take_lease(a, "d")
        src = os.path.join(workdir, "src")
        with open(src, "wb") as f:
            f.write(b"native bytes\n")
        c.loom("put", src, "/d/native")
        with open(os.path.join(a, "d", "native"), "rb") as f:
            assert f.read() == b"native bytes\n"


def test_a_mounts_own_changes_keep_its_list_right(cluster_factory):
    """A's own creates, renames and unlinks in a directory it holds a lease on update its list:
    with the kernel's dentries dropped, every lookup goes to the mount and finds what A made, and
    not what A removed."""
    c = configured(cluster_factory)
    with second_mount(c) as a, second_mount(c) as b:
        d = os.path.join(a, "own")
        os.makedirs(d)
        take_lease(a, "own")
        for i in range(20):
            with open(os.path.join(d, "f%d" % i), "x") as f:
                f.write("x" * i)
        os.rename(os.path.join(d, "f0"), os.path.join(d, "g0"))
        os.unlink(os.path.join(d, "f1"))
        os.mkdir(os.path.join(d, "sub"))
        os.symlink("f2", os.path.join(d, "ln"))
        drop_dentries()
        want = sorted(["g0", "sub", "ln"] + ["f%d" % i for i in range(2, 20)])
        for name in want:
            assert not absent(os.path.join(d, name)), name
        for name in ("f0", "f1"):
            assert absent(os.path.join(d, name)), name
        assert sorted(os.listdir(d)) == want
        # B sees the same.
        assert sorted(os.listdir(os.path.join(b, "own"))) == want
        assert os.path.getsize(os.path.join(b, "own", "f7")) == 7


def test_a_mount_that_stops_answering_loses_its_leases(cluster_factory):
    """A holds a lease and is stopped (SIGSTOP): B's create in that directory waits for the
    lease timeout, then goes on; the MDS says so in its log; A, resumed, sees B's file."""
    c = configured(cluster_factory)
    with second_mount(c) as a, second_mount(c) as b:
        os.makedirs(os.path.join(a, "d"))
        take_lease(a, "d")
        pid = mount_pid(a)
        with stopped(pid):
            done = []
            t = threading.Thread(target=lambda: done.append(open(os.path.join(b, "d", "while-stopped"), "x").close()))
            t.start()
            t.join(60)
            assert done, "B's create never finished while A was stopped"
        assert wait_until(lambda: "did not give back a recalled lease" in c.read_log("mds"), 10)
        assert not absent(os.path.join(a, "d", "while-stopped"))
        # A takes leases again afterwards, and they stay right.
        take_lease(a, "d")
        open(os.path.join(b, "d", "after"), "x").close()
        assert not absent(os.path.join(a, "d", "after"))


def test_a_mount_stopped_past_the_trust_window_asks_the_mds(cluster_factory):
    """A lease is trusted only for half the lease timeout after the MDS was last heard from: a
    mount stopped longer (its recall still unread in its socket when it resumes) asks the MDS
    rather than answer from a list that may be stale."""
    c = configured(cluster_factory)
    with second_mount(c) as a, second_mount(c) as b:
        os.makedirs(os.path.join(a, "d"))
        take_lease(a, "d")
        pid = mount_pid(a)
        with stopped(pid):
            open(os.path.join(b, "d", "made-meanwhile"), "x").close()
            time.sleep(LEASE_TIMEOUT / 2 + 0.5)
        drop_dentries()
        assert not absent(os.path.join(a, "d", "made-meanwhile"))


# ---- the protocol, raw ------------------------------------------------------------------------

C = w.cred()


def readdir_lease(client, d, req_id):
    st, body = client.call(w.NS_OP["MDS_READDIR"], w.readdir_req(d, flags=w.RD_LEASE), req_id=req_id)
    assert st == 0, st
    return client.last_header


def test_recall_give_back_and_loss_on_the_wire(cluster_factory):
    c = configured(cluster_factory)
    host, port = c.mds_host, c.mds_port
    with w.Client(host, port, os.urandom(16)) as holder, w.Client(host, port, os.urandom(16)) as other:
        st, body = other.call(w.NS_OP["MDS_MKDIR"], C + w.mkdir_req(1, b"wire"), req_id=10)
        assert st == 0 and other.last_header.lease_ino == 0, "a lease nobody asked for"
        d = w.parse_attr(body)["ino"]
        # A mkdir that asks gets a lease on the new directory; an unknown flag is refused.
        st, body = holder.call(w.NS_OP["MDS_MKDIR"], C + w.mkdir_req(1, b"own", flags=w.MK_LEASE), req_id=8)
        assert st == 0 and holder.last_header.lease_ino == w.parse_attr(body)["ino"] and holder.last_header.lease_gen
        st, _ = holder.call(w.NS_OP["MDS_MKDIR"], C + w.mkdir_req(1, b"odd", flags=0x2), req_id=9)
        assert st == -errno.EINVAL
        h = readdir_lease(holder, d, 10)
        assert h.lease_ino == d and h.lease_gen > 0 and h.lease_trust_ms == LEASE_TIMEOUT * 500, h
        gen = h.lease_gen

        # Another client's create waits for the recall; the holder is told, gives the lease back,
        # and the create is answered.
        other.conn.send(w.frame(w.NS_OP["MDS_CREATE"], C + w.create_req(d, b"x"), req_id=11))
        nh, nbody = holder.conn.recv_notification()
        assert nh.opcode == w.NS_OP["MDS_RECALL"] and nh.flags == w.F_NOTIFY and nh.status == 0, nh
        assert w.parse_recall(nbody) == [(d, gen)]
        st, _ = holder.call(w.NS_OP["MDS_LEASE"], w.lease_req([(d, gen)]), req_id=11)
        assert st == 0
        rh, _, _ = other.conn.recv_reply()
        assert rh.req_id == 11 and rh.status == 0, rh

        # The holder's own change recalls nothing, and a lease given back is granted again.
        h = readdir_lease(holder, d, 12)
        assert h.lease_gen > gen
        gen = h.lease_gen
        st, _ = holder.call(w.NS_OP["MDS_CREATE"], C + w.create_req(d, b"mine"), req_id=13)
        assert st == 0

        # A holder that does not answer loses every lease it holds: the create goes on after the
        # timeout, and the holder's next reply says so, with the newest grant it lost.
        st, _ = other.call(w.NS_OP["MDS_UNLINK"], C + w.name_req(d, b"mine"), req_id=14)
        assert st == 0, "the unlink waited for the lease timeout and then answered %d" % st
        nh, nbody = holder.conn.recv_notification()
        assert w.parse_recall(nbody) == [(d, gen)]
        st, _ = holder.call(w.NS_OP["MDS_GETATTR"], C + w.ino_req(d), req_id=15)
        assert st == 0
        assert holder.last_header.rpflags & w.RPF_LEASES_LOST and holder.last_header.lease_ino == 0
        assert holder.last_header.lease_gen >= gen
        # Told once.
        st, _ = holder.call(w.NS_OP["MDS_GETATTR"], C + w.ino_req(d), req_id=16)
        assert not holder.last_header.rpflags & w.RPF_LEASES_LOST
        # A late give-back of what was taken is fine.
        st, _ = holder.call(w.NS_OP["MDS_LEASE"], w.lease_req([(d, gen)]), req_id=17)
        assert st == 0
        # And a holder that lost its leases so is granted none for a while.
        h = readdir_lease(holder, d, 18)
        assert h.lease_ino == 0 and h.lease_gen == 0, h
        assert readdir_lease(other, d, 19).lease_gen, "another client is still granted one"

    # Every new session is told it holds nothing.
    with w.Client(host, port, os.urandom(16)) as fresh:
        assert fresh.last_header.rpflags & w.RPF_LEASES_LOST


def test_a_holder_whose_connection_closes_fences_its_directory(cluster_factory):
    """A holder that goes without giving its lease back may still answer from its list for
    lease_trust_ms after its last answer: the MDS holds others' changes of that directory until
    then (and says so in its log), and then runs them."""
    c = configured(cluster_factory)
    host, port = c.mds_host, c.mds_port
    with w.Client(host, port, os.urandom(16)) as other:
        st, body = other.call(w.NS_OP["MDS_MKDIR"], C + w.mkdir_req(1, b"fenced"), req_id=1)
        d = w.parse_attr(body)["ino"]
        holder = w.Client(host, port, os.urandom(16))
        h = readdir_lease(holder, d, 2)
        assert h.lease_gen
        holder.close()
        st, _ = other.call(w.NS_OP["MDS_CREATE"], C + w.create_req(d, b"after-close"), req_id=2)
        assert st == 0
        assert re.search(r"left its lease on directory %d without giving it back" % d, c.read_log("mds"))
        st, _ = other.call(w.NS_OP["MDS_LOOKUP"], C + w.name_req(d, b"after-close"), req_id=3)
        assert st == 0


def test_a_holder_that_gives_every_lease_back_as_it_goes_fences_nothing(cluster_factory):
    """A client going away gives back every lease it holds in one MDS_LEASE (LW_LEASE_ALL), as a
    recall's answer too: another client's change waiting on that recall goes on, and after the
    connection closes nothing waits on a fence."""
    c = configured(cluster_factory)
    host, port = c.mds_host, c.mds_port
    with w.Client(host, port, os.urandom(16)) as other:
        dirs = []
        for i, name in enumerate((b"kept-a", b"kept-b")):
            st, body = other.call(w.NS_OP["MDS_MKDIR"], C + w.mkdir_req(1, name), req_id=1 + i)
            assert st == 0
            dirs.append(w.parse_attr(body)["ino"])
        holder = w.Client(host, port, os.urandom(16))
        gens = [readdir_lease(holder, d, 10 + i).lease_gen for i, d in enumerate(dirs)]
        assert all(gens), gens
        other.conn.send(w.frame(w.NS_OP["MDS_CREATE"], C + w.create_req(dirs[0], b"x"), req_id=3))
        nh, nbody = holder.conn.recv_notification()
        assert w.parse_recall(nbody) == [(dirs[0], gens[0])]
        st, _ = holder.call(w.NS_OP["MDS_LEASE"], w.lease_req([], w.LEASE_ALL), req_id=12)
        assert st == 0
        rh, _, _ = other.conn.recv_reply()
        assert rh.req_id == 3 and rh.status == 0, rh
        holder.close()
        st, _ = other.call(w.NS_OP["MDS_CREATE"], C + w.create_req(dirs[1], b"y"), req_id=4)
        assert st == 0
        st, _ = other.call(w.NS_OP["MDS_LOOKUP"], C + w.name_req(dirs[1], b"y"), req_id=5)
        assert st == 0
    assert "left its lease" not in c.read_log("mds")


def test_bad_lease_requests_and_notifications_from_clients(cluster_factory):
    c = configured(cluster_factory)
    host, port = c.mds_host, c.mds_port
    with w.Client(host, port, os.urandom(16)) as cl:
        for body, want in ((w.LEASE_REQ.pack(0, 0), -errno.EINVAL),
                           (w.LEASE_REQ.pack(1, 7) + w.LEASE.pack(1, 1), -errno.EINVAL),
                           (w.LEASE_REQ.pack(4097, 0), -errno.EINVAL),
                           (w.LEASE_REQ.pack(2, 0) + w.LEASE.pack(1, 1), -errno.EPROTO),
                           (w.lease_req([(1, 1)], w.LEASE_ALL), -errno.EINVAL),
                           (w.lease_req([], w.LEASE_ALL | 0x2), -errno.EINVAL)):
            st, _ = cl.call(w.NS_OP["MDS_LEASE"], body, req_id=cl.conn.next_id + 100)
            assert st == want, (body.hex(), st, want)
        # Leases nobody holds, given back: nothing to do.
        st, _ = cl.call(w.NS_OP["MDS_LEASE"], w.lease_req([(1, 1), (123456, 99)]), req_id=300)
        assert st == 0
        st, _ = cl.call(w.NS_OP["MDS_READDIR"], w.readdir_req(1, flags=0x4), req_id=301)
        assert st == -errno.EINVAL
        # MDS_RECALL is the MDS's to send: asked of it, not served.
        st, _ = cl.call(w.NS_OP["MDS_RECALL"], w.LEASE_REQ.pack(1, 0) + w.LEASE.pack(1, 1), req_id=302)
        assert st == -errno.EOPNOTSUPP, st
    # A frame flagged as a notification, sent to a server: the connection is closed.
    with w.Conn(host, port) as conn:
        conn.send(w.frame(w.OP["PING"], b"", req_id=1, flags=w.F_NOTIFY))
        closed, _ = conn.wait_closed(10)
        assert closed
    c.allow_log(r"notification frame sent to a server")

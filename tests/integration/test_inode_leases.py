"""Inode leases (issue 18, protocol 7): a mount that opened a file for reading before asks for a
lease with its next open, and from then on opens and closes it for reading without the MDS. The
MDS recalls the lease before anything changes the file (another mount's write, truncate, chmod,
unlink, rename over it) or moves a directory; the holder first opens for real what it opened
under the lease, so that an unlinked file stays readable to those who had it open.

Two mounts (two loom-mount processes, as two nodes) share each file; raw-wire clients check the
protocol.
"""

import errno
import hashlib
import os
import subprocess
import threading

import loomutil
import loomwire as w
from loomutil import mount_pid, second_mount, wait_until
from test_destroy import all_gone, object_paths
from test_leases import stopped

LEASE_TIMEOUT = 2


def configured(cluster_factory, settings="lease-timeout = %d\n" % LEASE_TIMEOUT):
    return loomutil.configured(cluster_factory, settings)


def read(path, flags=0):
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        out = b""
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                return out
            out += b
    finally:
        os.close(fd)


def made(path, data):
    with open(path, "wb") as f:
        f.write(data)


def held_open(c, mnt, name, size):
    """A file of size random bytes made through mnt, leased there and held open (O_DIRECT: every
    read reaches the mount): (its bytes, its objects' paths, the descriptor)."""
    data = os.urandom(size)
    path = os.path.join(mnt, name)
    made(path, data)
    objects = object_paths(c, "/" + name)
    leased(path)
    return data, objects, os.open(path, os.O_RDONLY | os.O_DIRECT)


def leased(path):
    """Opens path for reading twice: the second open asks for (and gets) an inode lease."""
    first = read(path)
    assert read(path) == first
    return first


def bounded(script, seconds=5):
    """Runs a Python snippet in a process of its own, bounded: an open that went to a stopped MDS
    shows as a timeout, not a hang."""
    return subprocess.run(["timeout", str(seconds), "python3", "-c", script], capture_output=True,
                          text=True)


def test_a_leased_file_opens_and_reads_without_the_mds(cluster_factory):
    """With the MDS stopped, a file the mount holds a lease on opens, reads its exact bytes and
    closes; one it opened once only (no lease) waits for the MDS."""
    c = configured(cluster_factory, "lease-timeout = 15\n")
    with second_mount(c) as a:
        data = os.urandom(300000)
        for name in ("leased", "once"):
            made(os.path.join(a, name), data)
        leased(os.path.join(a, "leased"))
        read(os.path.join(a, "once"))
        os.stat(a)
        with stopped(c.pid("mds")):
            script = ("import os, hashlib\n"
                      "for i in range(3):\n"
                      "    fd = os.open(%r, os.O_RDONLY | os.O_DIRECT)\n"
                      "    os.close(fd)\n"
                      "with open(%r, 'rb') as f:\n"
                      "    print(hashlib.sha256(f.read()).hexdigest())\n"
                      % (os.path.join(a, "leased"), os.path.join(a, "leased")))
            p = bounded(script)
            assert p.returncode == 0 and p.stdout.strip() == hashlib.sha256(data).hexdigest(), p
            p = bounded("import os\nos.close(os.open(%r, os.O_RDONLY | os.O_DIRECT))\n"
                        % os.path.join(a, "once"), 2)
            assert p.returncode == 124, "an open without a lease did not wait for the MDS: %r" % (p,)


def test_another_mounts_changes_recall_the_lease(cluster_factory):
    """Each change mount B makes to a file A holds a lease on is seen by A's next open, as on one
    machine: a rewrite, a truncate, a chmod, a rename over it."""
    c = configured(cluster_factory)
    with second_mount(c) as a, second_mount(c) as b:
        pa, pb = os.path.join(a, "f"), os.path.join(b, "f")
        made(pa, b"first version\n")
        assert leased(pa) == b"first version\n"
        with open(pb, "r+b") as f:
            f.write(b"SECOND")
        assert read(pa) == b"SECONDversion\n"
        leased(pa)
        os.truncate(pb, 6)
        assert read(pa) == b"SECOND"
        leased(pa)
        os.chmod(pb, 0o600)
        assert os.stat(pa).st_mode & 0o777 == 0o600
        fd = os.open(pa, os.O_RDONLY)
        assert os.fstat(fd).st_mode & 0o777 == 0o600
        os.close(fd)
        leased(pa)
        made(os.path.join(b, "g"), b"replacement\n")
        os.rename(os.path.join(b, "g"), pb)
        assert read(pa) == b"replacement\n"
        log = c.read_log("mds")
        assert "did not give back" not in log, "a mount that answers lost its leases"


def test_an_unlinked_file_stays_readable_to_its_local_opens(cluster_factory):
    """A opened a file under its lease (no MDS handle) and keeps it open; B unlinks it. The recall
    makes A's open a real one before the unlink goes on, so A still reads every byte, and the
    objects go when A closes."""
    c = configured(cluster_factory)
    with second_mount(c) as a, second_mount(c) as b:
        data, objects, fd = held_open(c, a, "victim", 3 << 20)
        try:
            os.unlink(os.path.join(b, "victim"))
            assert not os.path.exists(os.path.join(b, "victim"))
            got = b""
            while True:
                chunk = os.pread(fd, 1 << 20, len(got))
                if not chunk:
                    break
                got += chunk
            assert got == data
            assert not all_gone(objects)(), "the objects went while A had the file open"
        finally:
            os.close(fd)
        assert wait_until(all_gone(objects), 60), "the objects outlived the last close"


def test_a_directory_move_recalls_every_inode_lease(cluster_factory):
    """The kernel opens through names it cached: after B moves a directory, A's open of the old
    path must not find the file there."""
    c = configured(cluster_factory)
    with second_mount(c) as a, second_mount(c) as b:
        os.makedirs(os.path.join(a, "d1"))
        pa = os.path.join(a, "d1", "f")
        made(pa, b"in d1\n")
        leased(pa)
        os.rename(os.path.join(b, "d1"), os.path.join(b, "d2"))
        try:
            read(pa)
            raise AssertionError("the old path still opened after the directory moved")
        except FileNotFoundError:
            pass
        assert read(os.path.join(a, "d2", "f")) == b"in d1\n"


def test_a_stopped_holder_loses_its_lease_and_never_reads_freed_objects(cluster_factory):
    """A holds a lease and a local open, and is stopped: B's unlink waits for the lease timeout,
    then goes on, and the file's objects are freed. A, resumed, gets an error from its open file,
    never bytes that are not the file's."""
    c = configured(cluster_factory)
    with second_mount(c) as a, second_mount(c) as b:
        _, objects, fd = held_open(c, a, "gone", 2 << 20)
        try:
            with stopped(mount_pid(a)):
                done = []
                t = threading.Thread(target=lambda: done.append(os.unlink(os.path.join(b, "gone"))))
                t.start()
                t.join(60)
                assert done, "B's unlink never finished while A was stopped"
                assert wait_until(all_gone(objects), 60), "the unlinked file's objects stayed"
            assert "did not give back a recalled lease" in c.read_log("mds")
            try:
                got = os.pread(fd, 1 << 20, 0)
            except OSError as e:
                assert e.errno == errno.ESTALE, e
            else:
                raise AssertionError("read %d bytes of a file whose objects are gone" % len(got))
        finally:
            os.close(fd)


# ---- the protocol, raw ------------------------------------------------------------------------

C = w.cred()


def test_a_lease_is_granted_with_a_read_only_open_only(cluster_factory):
    c = configured(cluster_factory)
    with w.Client(c.mds_host, c.mds_port, os.urandom(16)) as cl, \
            w.Client(c.mds_host, c.mds_port, os.urandom(16)) as writer:
        st, body = cl.call(w.NS_OP["MDS_CREATE"], C + w.create_req(1, b"wired"), req_id=1)
        assert st == 0, st
        ino = w.parse_attr(body)["ino"]
        # Asked with a write or a truncation: refused.
        for flags in (os.O_RDWR, os.O_WRONLY, os.O_RDONLY | os.O_TRUNC):
            st, _ = cl.call(w.NS_OP["MDS_OPEN"], C + w.open_req(ino, flags, w.OPQ_LEASE), req_id=2)
            assert st == -errno.EINVAL, (flags, st)
        # Not asked: none.
        st, _ = cl.call(w.NS_OP["MDS_OPEN"], C + w.open_req(ino, os.O_RDONLY), req_id=3)
        assert st == 0 and cl.last_header.lease_ino == 0
        # Asked: granted.
        st, _ = cl.call(w.NS_OP["MDS_OPEN"], C + w.open_req(ino, os.O_RDONLY, w.OPQ_LEASE), req_id=4)
        assert st == 0 and cl.last_header.lease_ino == ino and cl.last_header.lease_gen > 0
        gen = cl.last_header.lease_gen
        # Another client's open for writing waits for the recall; given back, it goes on.
        writer.conn.send(w.frame(w.NS_OP["MDS_OPEN"], C + w.open_req(ino, os.O_RDWR), req_id=5))
        nh, nbody = cl.conn.recv_notification()
        assert nh.opcode == w.NS_OP["MDS_RECALL"], nh
        assert w.parse_recall(nbody) == [(ino, gen)]
        st, _ = cl.call(w.NS_OP["MDS_LEASE"], w.lease_req([(ino, gen)]), req_id=6)
        assert st == 0
        h, body, _ = writer.conn.recv_reply()
        assert h.status == 0, h
        # While it is open for writing, no lease is granted.
        st, _ = cl.call(w.NS_OP["MDS_OPEN"], C + w.open_req(ino, os.O_RDONLY, w.OPQ_LEASE), req_id=7)
        assert st == 0 and cl.last_header.lease_ino == 0


def test_the_holders_own_changes(cluster_factory):
    """The holder's own change that cannot free the file does not wait for its lease: the recall
    comes before the reply, and the lease is given back behind. Its own unlink waits for the
    lease to come back (its cached opens become real first), unless it says it opened nothing
    under a lease (LW_NM_UNLEASED, which only MDS_UNLINK may say): the lease then ends at once."""
    c = configured(cluster_factory)
    with w.Client(c.mds_host, c.mds_port, os.urandom(16)) as cl:
        inos = {}
        for i, name in enumerate((b"chmodded", b"waited", b"unleased")):
            st, body = cl.call(w.NS_OP["MDS_CREATE"], C + w.create_req(1, name), req_id=10 + i)
            assert st == 0, st
            inos[name] = w.parse_attr(body)["ino"]

        def lease(ino, req_id):
            st, _ = cl.call(w.NS_OP["MDS_OPEN"], C + w.open_req(ino, os.O_RDONLY, w.OPQ_LEASE), req_id=req_id)
            assert st == 0 and cl.last_header.lease_ino == ino, cl.last_header
            return cl.last_header.lease_gen

        gen = lease(inos[b"chmodded"], 20)
        st, _ = cl.call(w.NS_OP["MDS_SETATTR"], C + w.setattr_req(inos[b"chmodded"], w.SA_MODE, mode=0o600), req_id=21)
        assert st == 0
        nh, nbody = cl.conn.recv_notification()
        assert nh.opcode == w.NS_OP["MDS_RECALL"] and w.parse_recall(nbody) == [(inos[b"chmodded"], gen)]
        assert w.recall_flags(nbody) == 0   # to be given back, once its opens are real
        # Until it is, no new lease.
        st, _ = cl.call(w.NS_OP["MDS_OPEN"], C + w.open_req(inos[b"chmodded"], os.O_RDONLY, w.OPQ_LEASE), req_id=28)
        assert st == 0 and cl.last_header.lease_ino == 0
        st, _ = cl.call(w.NS_OP["MDS_LEASE"], w.lease_req([(inos[b"chmodded"], gen)]), req_id=29)
        assert st == 0

        gen = lease(inos[b"waited"], 22)
        cl.conn.send(w.frame(w.NS_OP["MDS_UNLINK"], C + w.name_req(1, b"waited"), req_id=23))
        nh, nbody = cl.conn.recv_notification()
        assert w.parse_recall(nbody) == [(inos[b"waited"], gen)]
        st, _ = cl.call(w.NS_OP["MDS_LEASE"], w.lease_req([(inos[b"waited"], gen)]), req_id=24)
        assert st == 0
        h, _, _ = cl.conn.recv_reply()
        assert h.req_id == 23 and h.status == 0, h

        gen = lease(inos[b"unleased"], 25)
        st, _ = cl.call(w.NS_OP["MDS_UNLINK"], C + w.name_req(1, b"unleased", w.NM_UNLEASED), req_id=26)
        assert st == 0
        nh, nbody = cl.conn.recv_notification()
        assert w.parse_recall(nbody) == [(inos[b"unleased"], gen)]
        assert w.recall_flags(nbody) == w.RC_ENDED
        for op in ("MDS_LOOKUP", "MDS_RMDIR"):
            st, _ = cl.call(w.NS_OP[op], C + w.name_req(1, b"x", w.NM_UNLEASED), req_id=27)
            assert st == -errno.EINVAL, (op, st)
        assert "did not give back" not in c.read_log("mds")


def test_a_mount_removes_the_files_it_read_without_waiting_on_itself(cluster_factory):
    """A mount that read its files several times (inode leases) and removes them: every file
    goes, and another mount sees them gone."""
    c = configured(cluster_factory)
    with second_mount(c) as a, second_mount(c) as b:
        os.makedirs(os.path.join(a, "d"))
        for i in range(20):
            made(os.path.join(a, "d", "f%d" % i), b"%d" % i)
        for _ in range(3):
            for i in range(20):
                assert read(os.path.join(a, "d", "f%d" % i)) == b"%d" % i
        fds = [os.open(os.path.join(a, "d", "f%d" % i), os.O_RDONLY) for i in (0, 1)]
        for i in range(20):
            os.unlink(os.path.join(a, "d", "f%d" % i))
        # Those still open here read on after their unlink.
        assert [os.pread(fd, 10, 0) for fd in fds] == [b"0", b"1"]
        for fd in fds:
            os.close(fd)
        assert os.listdir(os.path.join(b, "d")) == []


def test_no_lease_on_a_file_already_unlinked(cluster_factory):
    """A file kept only by an open handle after its unlink gets no lease: its last close frees it
    with nothing to recall."""
    c = configured(cluster_factory)
    with w.Client(c.mds_host, c.mds_port, os.urandom(16)) as cl:
        st, body = cl.call(w.NS_OP["MDS_CREATE"], C + w.create_req(1, b"doomed"), req_id=1)
        assert st == 0, st
        ino = w.parse_attr(body)["ino"]
        st, _ = cl.call(w.NS_OP["MDS_OPEN"], C + w.open_req(ino, os.O_RDONLY), req_id=2)
        assert st == 0
        st, _ = cl.call(w.NS_OP["MDS_UNLINK"], C + w.name_req(1, b"doomed"), req_id=3)
        assert st == 0
        st, _ = cl.call(w.NS_OP["MDS_OPEN"], C + w.open_req(ino, os.O_RDONLY, w.OPQ_LEASE), req_id=4)
        assert st == 0 and cl.last_header.lease_ino == 0, cl.last_header


def test_an_unmount_gives_its_leases_back(cluster_factory):
    """A mount that goes gives its leases back, on files and directories, even those recalled
    while it goes: the MDS need not hold others' changes of them for as long as the mount might
    still have trusted them."""
    c = configured(cluster_factory)
    with second_mount(c) as b:
        with second_mount(c) as a:
            made(os.path.join(a, "f"), b"kept\n")
            leased(os.path.join(a, "f"))
            assert read(os.path.join(a, "f")) == b"kept\n"
            assert os.listdir(a) == ["f"]  # and a directory lease
        with open(os.path.join(b, "f"), "r+b") as f:
            f.write(b"KEPT")
        assert read(os.path.join(b, "f")) == b"KEPT\n"
    assert "left its lease on file" not in c.read_log("mds")

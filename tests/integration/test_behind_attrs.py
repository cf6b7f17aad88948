"""The attributes of a file made behind (docs/architecture.md, "Attributes of files made
behind"): while the exclusive lease on its directory stands, nobody else can reach the file, so
its writer's fstat (np.save's, after the header) is answered by the mount from the create's
answer and the writes not yet reported. What the writer sees must be what the MDS would say, and
a change by anyone else, or by another path of this mount, must show at once."""
import os
import stat
import subprocess
import time

import numpy as np

from loomutil import second_mount
from test_behind_creates import configured


def test_the_writers_fstat_is_what_another_mount_sees_after_the_close(cluster_factory):
    """np.save and a write loop with fstat after each write: every fstat's size is the bytes
    written so far, and once closed, another mount's stat of each file says what the writer's
    last fstat said (inode, mode, owner, size)."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a, second_mount(c, opts="nowsync") as b:
        d = os.path.join(a, "own")
        os.mkdir(d)
        last = {}
        for i in range(30):
            p = os.path.join(d, "f-%d" % i)
            fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640)
            try:
                for k in range(1, 4):
                    os.write(fd, b"x" * (1000 + i))
                    st = os.fstat(fd)
                    assert st.st_size == k * (1000 + i) and stat.S_IMODE(st.st_mode) == 0o640
            finally:
                os.close(fd)
            last[p] = st
        for i in range(10):
            np.save(os.path.join(d, "a-%d.npy" % i), np.arange(100 + i, dtype=np.int32))
        for p, mine in last.items():
            theirs = os.stat(os.path.join(b, "own", os.path.basename(p)))
            assert (theirs.st_ino, theirs.st_mode, theirs.st_uid, theirs.st_gid, theirs.st_size) == \
                (mine.st_ino, mine.st_mode, mine.st_uid, mine.st_gid, mine.st_size)
        for i in range(10):
            got = np.load(os.path.join(b, "own", "a-%d.npy" % i))
            assert got.tolist() == list(range(100 + i))


def test_a_chmod_through_the_path_shows_in_the_writers_fstat(cluster_factory):
    """The writer's own chmod and truncate through the file's name (not its handle) change what
    the MDS has: the fstat that follows says so."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a:
        d = os.path.join(a, "chm")
        os.mkdir(d)
        p = os.path.join(d, "f")
        fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        try:
            os.write(fd, b"y" * 5000)
            os.chmod(p, 0o600)
            os.write(fd, b"y")
            assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o600
            os.truncate(p, 100)
            os.pwrite(fd, b"z", 10)
            assert os.fstat(fd).st_size == 100
        finally:
            os.close(fd)
        assert os.stat(p).st_size == 100


def test_another_mounts_write_shows_in_the_writers_fstat(cluster_factory):
    """A makes a file behind, writes to it and fsyncs, keeping it open; B opens it (its lookup
    recalls A's lease), appends and closes. A writes again within what B wrote: its next fstat
    says B's size, not its own."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a, second_mount(c, opts="nowsync") as b:
        d = os.path.join(a, "two")
        os.mkdir(d)
        fd = os.open(os.path.join(d, "f"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        try:
            os.write(fd, b"a" * 100)
            assert os.fstat(fd).st_size == 100
            os.fsync(fd)
            with open(os.path.join(b, "two", "f"), "ab") as f:
                f.write(b"b" * 5000)
            os.write(fd, b"a" * 100)
            time.sleep(1.1)                      # the kernel's own cached attributes expire
            assert os.fstat(fd).st_size == 5100
        finally:
            os.close(fd)


def test_another_handle_on_the_same_mount_shows_in_the_writers_fstat(cluster_factory):
    """P makes a file behind (O_APPEND), writes and fsyncs; Q, another program on the same
    mount, opens it again, appends and closes. P's fstat says Q's size, and P's next append
    lands after Q's bytes (the kernel's size for O_APPEND comes from that fstat's answer)."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a:
        d = os.path.join(a, "twohandles")
        os.mkdir(d)
        p = os.path.join(d, "f")
        fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_APPEND, 0o644)
        try:
            os.write(fd, b"a" * 100)
            os.fsync(fd)
            # An open of the name the kernel knows (an OPEN, not a CREATE), for appending.
            subprocess.run(["python3", "-c", "import os, sys; fd = os.open(sys.argv[1], "
                            "os.O_WRONLY | os.O_APPEND); os.write(fd, b'b' * 5000); os.close(fd)", p],
                           check=True)
            assert os.fstat(fd).st_size == 5100  # P's write made the kernel's attributes stale
            os.write(fd, b"c" * 10)
        finally:
            os.close(fd)
        with open(p, "rb") as f:
            assert f.read() == b"a" * 100 + b"b" * 5000 + b"c" * 10


# A file made behind gets its open file at its first use, from the create's answer; what others
# did to it before that (this mount's other programs, or another mount after a recall) counts.
APPEND = ("import os, sys; f = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND); "
          "os.write(f, open(sys.argv[2], 'rb').read()); os.close(f)")


def test_another_programs_append_before_the_creators_first_write_reads_back(cluster_factory):
    """The creator's handle is built at its first use from the create's answer (size 0, no
    Data-on-MDT bytes): another program's append before that must still read back through it
    (it read zeros: the Data-on-MDT part taken as empty)."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a:
        d = os.path.join(a, "late")
        os.mkdir(d)
        x = os.urandom(70000)
        p = os.path.join(d, "f")
        fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_APPEND, 0o644)
        try:
            src = os.path.join(c.dir, "append.bin")
            with open(src, "wb") as f:
                f.write(x)
            subprocess.run(["python3", "-c", APPEND, p, src], check=True)
            os.write(fd, b"Z" * 7)
            assert os.pread(fd, 80000, 0) == x + b"Z" * 7
        finally:
            os.close(fd)
        os.stat(p)
        time.sleep(0.2)   # the kernel sends the RELEASE after close returns: before the unmount


def test_a_truncate_through_the_path_before_the_creators_first_read_shows(cluster_factory):
    """A truncate through the name before the creator's first use: its pread sees the new size
    (it read nothing: the create's size 0)."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a:
        d = os.path.join(a, "late")
        os.mkdir(d)
        p = os.path.join(d, "f")
        fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        try:
            os.truncate(p, 70000)
            assert os.fstat(fd).st_size == 70000
            assert os.pread(fd, 70000, 0) == b"\0" * 70000
        finally:
            os.close(fd)
        time.sleep(0.2)   # the kernel sends the RELEASE after close returns: before the unmount


def test_another_mounts_append_before_the_creators_first_use_reads_back(cluster_factory):
    """Another mount appends to a file made behind (its lookup recalled the lease) before the
    creator's first use: the creator's fstat and pread see the appended bytes."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a, second_mount(c, opts="nowsync") as b:
        d = os.path.join(a, "late2")
        os.mkdir(d)
        fd = os.open(os.path.join(d, "k"), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        try:
            with open(os.path.join(b, "late2", "k"), "ab") as f:
                f.write(b"z" * 5000)
            time.sleep(1.1)                      # A's kernel trusts its size for attr_timeout
            assert os.pread(fd, 10000, 0) == b"z" * 5000
            assert os.fstat(fd).st_size == 5000
        finally:
            os.close(fd)


def _as_user(uid, fn):
    """fn() in a child running as uid (its exit status: 0 when fn returned)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            fn()
            code = 0
        except BaseException as e:  # noqa: BLE001 - reported through the exit status
            print("child:", repr(e), flush=True)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_setuid_set_again_after_a_write_is_dropped_by_the_next_write(cluster_factory):
    """A write by someone other than root drops setuid and setgid (with group execute), every
    time, as a local file system does: also when a chmod or fchmod set them again after the
    handle's first write, for a file made behind and for one that existed before its open.
    Another mount sees the mode the writer sees."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a, second_mount(c, opts="nowsync") as b:
        d = os.path.join(a, "suid")
        os.mkdir(d)
        os.chown(d, 4321, 4321)
        old = os.path.join(d, "existing")
        with open(old, "wb") as f:
            f.write(b"e")
        os.chown(old, 4321, 4321)

        def writer():
            for name, how in (("made-chmod", "chmod"), ("made-fchmod", "fchmod"), ("existing", "chmod")):
                p = os.path.join(d, name)
                if name == "existing":
                    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
                else:
                    fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o755)
                try:
                    modes = []
                    for bits in (0o4755, 0o2775, 0o6775):
                        os.write(fd, b"a")
                        (os.fchmod(fd, bits) if how == "fchmod" else os.chmod(p, bits))
                        modes.append(stat.S_IMODE(os.fstat(fd).st_mode))
                        os.write(fd, b"b")
                        modes.append(stat.S_IMODE(os.fstat(fd).st_mode))
                finally:
                    os.close(fd)
                assert modes == [0o4755, 0o755, 0o2775, 0o775, 0o6775, 0o775], (name, [oct(m) for m in modes])

        assert _as_user(4321, writer) == 0
        for name in ("made-chmod", "made-fchmod", "existing"):
            assert stat.S_IMODE(os.stat(os.path.join(b, "suid", name)).st_mode) == 0o775, name
            assert stat.S_IMODE(os.stat(os.path.join(d, name)).st_mode) == 0o775, name


def test_a_made_files_lookup_after_its_entry_expired_says_what_the_mds_says(cluster_factory):
    """Files made behind and closed: once the kernel's entries expired, their lookups are
    answered by the mount (what the MDS said at the create or the last close). What a stat by
    name shows must be what another mount sees afterwards: after writes, a chmod or truncate
    through the path, a rename, an unlink and a new file of the same name; and after another
    mount's append (which recalls the lease)."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a, second_mount(c, opts="nowsync") as b:
        d = os.path.join(a, "made")
        os.mkdir(d)
        for i in range(8):      # past the lookups of missing names that take the lease
            with open(os.path.join(d, "warm%d" % i), "wb"):
                pass
        for i in range(6):
            with open(os.path.join(d, "f%d" % i), "wb") as f:
                f.write(b"x" * (1000 * i))
        os.close(os.open(os.path.join(d, "empty"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640))
        got = lambda st: (st.st_ino, st.st_mode, st.st_nlink, st.st_size, st.st_mtime_ns)  # noqa: E731
        time.sleep(1.3)         # the kernel's entries expired: the stats below look the names up
        first = {n: got(os.stat(os.path.join(d, n))) for n in ["f%d" % i for i in range(6)] + ["empty"]}
        assert [first["f%d" % i][3] for i in range(6)] == [1000 * i for i in range(6)]
        assert stat.S_IMODE(first["empty"][1]) == 0o640
        # Changes through this mount, by path.
        os.chmod(os.path.join(d, "f1"), 0o600)
        os.truncate(os.path.join(d, "f2"), 7)
        os.rename(os.path.join(d, "f3"), os.path.join(d, "g3"))
        os.unlink(os.path.join(d, "f4"))
        with open(os.path.join(d, "f4"), "wb") as f:
            f.write(b"new")
        time.sleep(1.3)
        names = ["f0", "f1", "f2", "g3", "f4", "f5", "empty"]
        mine = {n: got(os.stat(os.path.join(d, n))) for n in names}
        assert not os.path.exists(os.path.join(d, "f3"))
        assert stat.S_IMODE(mine["f1"][1]) == 0o600 and mine["f2"][3] == 7 and mine["g3"][3] == 3000
        assert mine["f4"][0] != first["f4"][0] and mine["f4"][3] == 3
        for n in ["f0", "f5", "empty"]:
            assert mine[n] == first[n], n
        # Another mount sees the same (its lookups recall this mount's lease).
        theirs = {n: got(os.stat(os.path.join(b, "made", n))) for n in names}
        assert mine == theirs
        with open(os.path.join(b, "made", "f5"), "ab") as f:
            f.write(b"y" * 11)
        time.sleep(1.3)
        assert os.stat(os.path.join(d, "f5")).st_size == 5011
        with open(os.path.join(d, "f5"), "rb") as f:
            assert f.read() == b"x" * 5000 + b"y" * 11

"""The attributes of a file made behind (creates sent behind under an exclusive lease): what its
writer's fstat says must be what the MDS says, also after another program on the same mount or
another mount changed the file, and a chmod or truncate through its name must show at once. (The
mount answered that fstat itself for a day, 2026-12-06; a soak found it wrong after another
descriptor's close raced a write, and it was withdrawn: docs/performance.md.)"""
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

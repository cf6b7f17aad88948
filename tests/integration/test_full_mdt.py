"""A full MDT recovers by itself. The MDT keeps a reserve for what frees space (as ext4 keeps
reserved blocks): once it is down to that, what makes it hold more (creates, mkdir, symlinks,
xattrs, Data-on-MDT bytes) answers ENOSPC, never EIO, while unlink, rmdir, truncate and close go
on, so `rm -rf` empties it and creates work again, with no restart, and also after a restart
while full. Checked with the MDT on a small tmpfs (the disk fills) and with a small LMDB map
(`--map-size`: the map fills), and the OST on a small tmpfs too (ENOSPC for its writes).
"""

import contextlib
import errno
import os
import re
import subprocess
import time

import pytest

from loomutil import MDS_BIN, errno_of, second_mount, wait_until

KiB = 1 << 10
MiB = 1 << 20

MDT_TMPFS = "12m"   # with the default reserve (4 MiB here) about 9,000 empty files fit
OST_TMPFS = "8m"


@contextlib.contextmanager
def tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", path], check=True, timeout=60)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", path], timeout=60)


@pytest.fixture
def small_targets(cluster_factory):
    """A cluster whose MDT is a 12 MiB tmpfs and whose one OST an 8 MiB one."""
    c = cluster_factory(osts=1, start=False)
    with tmpfs(os.path.join(c.dir, "mdt"), MDT_TMPFS), tmpfs(os.path.join(c.dir, "ost0"), OST_TMPFS):
        try:
            c.up()
            yield c
        finally:
            c.down()


def touch(path):
    open(path, "x").close()


def fill(d, limit=200000):
    """Creates empty files in d (made first, if it can be) until one fails; returns (how many
    fit, the errno, seconds)."""
    t0 = time.monotonic()
    e = errno_of(lambda: os.makedirs(d, exist_ok=True))
    if e:
        return 0, e, time.monotonic() - t0
    for n in range(limit):
        e = errno_of(touch, os.path.join(d, "f%06d" % n))
        if e:
            return n, e, time.monotonic() - t0
    pytest.fail("%d files fit in a %s MDT: nothing filled it" % (limit, MDT_TMPFS))


def mdt_row(c, mnt, *flags):
    """`loom df`'s MDT line, split: [uuid, total, used, avail, use%, where, flags...]."""
    out = c.loom("df", *flags, mnt).stdout
    line = next(l for l in out.splitlines() if "-MDT0000_UUID" in l)
    return line.split()


def assert_full(c, mnt, d):
    """Everything that grows the MDT says ENOSPC; what frees it still works."""
    for what, fn in (("mkdir", lambda: os.mkdir(os.path.join(d, "newdir"))),
                     ("symlink", lambda: os.symlink("target", os.path.join(d, "newlink"))),
                     ("link", lambda: os.link(os.path.join(d, "f000000"), os.path.join(d, "newhard"))),
                     ("setxattr", lambda: os.setxattr(os.path.join(d, "f000001"), "user.k", b"v" * 512)),
                     ("create", lambda: touch(os.path.join(d, "another")))):
        assert errno_of(fn) == errno.ENOSPC, "%s on a full MDT did not answer ENOSPC" % what
    # Through libloom as well.
    r = c.loom("mkdir", "/newdir", check=False)
    assert r.returncode != 0 and "No space left on device" in r.stderr, r.stderr
    # loom df: no room left on the MDT, flagged S (out of space) and I (out of inodes), in lfs
    # df's format; df -i through the mount shows no free inodes.
    row = mdt_row(c, mnt)
    assert row[3] == "0" and row[4] == "100%" and row[-1] == "SI", row
    st = os.statvfs(mnt)
    assert st.f_ffree == 0 and st.f_files > 0, (st.f_files, st.f_ffree)
    # Metadata changes that do not grow it go on.
    os.chmod(os.path.join(d, "f000002"), 0o600)
    os.utime(os.path.join(d, "f000002"), (1, 1))


def inodes_in_use(mnt):
    st = os.statvfs(mnt)
    return st.f_files - st.f_ffree


def empty_and_refill(c, mnt, d, fitted, keep=1):
    """rm -rf of everything works on the full MDT, then creates work again. keep: the inodes left
    then (the root, and what the test kept): none is held by a handle that failed to close."""
    t0 = time.monotonic()
    subprocess.run(["rm", "-rf", d], check=True, timeout=600, capture_output=True)
    took = time.monotonic() - t0
    assert not os.path.exists(d)
    print("rm -rf of %d files on a full MDT: %.1f s" % (fitted, took))
    assert wait_until(lambda: inodes_in_use(mnt) == keep, 30, 0.2), \
        "%d inodes in use after rm -rf, not %d" % (inodes_in_use(mnt), keep)
    # No restart: space freed is room again, at once.
    os.mkdir(d)
    for n in range(100):
        touch(os.path.join(d, "again%03d" % n))
    row = mdt_row(c, mnt)
    assert int(row[3]) > 0 and not row[-1].isalpha(), row
    return took


def test_full_mdt_disk_recovers_without_restart(small_targets):
    c = small_targets
    mnt = c.mount()
    d = os.path.join(mnt, "d")
    # A file with data on the OST, and one with a Data-on-MDT part, made while there is room.
    c.loom("setstripe", "-E", "-1", "-c", "1", "-S", "1M", mnt)
    big = os.path.join(mnt, "big")
    with open(big, "wb") as f:
        f.write(b"b" * (2 * MiB))
    c.loom("setstripe", "-E", "64K", "-L", "mdt", "-E", "-1", "-c", "1", mnt)
    dom = os.path.join(mnt, "dom")
    touch(dom)
    free_inodes = os.statvfs(mnt).f_ffree

    fitted, e, took = fill(d)
    assert e == errno.ENOSPC, "a create on a full MDT failed with %s, not ENOSPC" % errno.errorcode.get(e, e)
    print("creates that fit in a %s MDT with the default reserve: %d (%.1f s); df -i said %d free"
          % (MDT_TMPFS, fitted, took, free_inodes))
    assert fitted > free_inodes // 2, "df -i promised %d inodes, %d fit" % (free_inodes, fitted)
    assert_full(c, mnt, d)

    # Data-on-MDT bytes are growth: ENOSPC at the close that carries them, and the file is
    # closed all the same (else it would hold its space until the mount goes).
    fd = os.open(dom, os.O_WRONLY)
    os.write(fd, b"d" * (32 * KiB))
    assert errno_of(os.fsync, fd) == errno.ENOSPC
    assert errno_of(os.close, fd) in (0, errno.ENOSPC)   # the bytes are still not stored
    # Truncation frees: it works on the full MDT.
    os.truncate(big, 4096)
    assert os.stat(big).st_size == 4096
    os.unlink(dom)

    empty_and_refill(c, mnt, d, fitted, keep=2)         # the root and big
    # The OST fills as well (ENOSPC for its writes), and comes back once its files are gone.
    c.loom("setstripe", "-E", "-1", "-c", "1", "-S", "1M", mnt)
    path = os.path.join(mnt, "fill-ost")
    e = 0
    with open(path, "wb") as f:
        for k in range(16):                      # 16 MiB into an 8 MiB OST
            e = errno_of(f.write, b"o" * MiB) or errno_of(f.flush)
            if e:
                break
        e = e or errno_of(os.fsync, f.fileno())
        e = errno_of(f.close) or e
    assert e == errno.ENOSPC, "a full OST answered %s" % errno.errorcode.get(e, e)
    os.unlink(path)
    os.unlink(big)

    def write_again():
        try:
            with open(os.path.join(mnt, "again-ost"), "wb") as f:
                f.write(b"z" * (2 * MiB))
                f.flush()
                os.fsync(f.fileno())
            return True
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
            return False
    assert wait_until(write_again, 60, interval=0.5), "the OST's space never came back"


def test_creates_sent_behind_keep_their_room_on_a_filling_mdt(small_targets):
    """A mount with nowsync answers creates itself, with inode numbers the MDS handed it ahead:
    the MDS keeps the room of their creates for them, so Data-on-MDT bytes that fill the MDT
    meanwhile cannot leave a create already answered without room (it would fail at the MDS
    after the program was told it succeeded). The bytes get ENOSPC at their close; every create
    that returned is on the MDT, and every file whose close returned holds its bytes."""
    c = small_targets
    c.loom("setstripe", "-E", "64K", "-L", "mdt", "-E", "-1", "-c", "1", "/")
    data = b"x" * (48 * KiB)   # a range's 256 files outrun the margin at which none is handed
    made, closed = [], []
    with second_mount(c, opts="nowsync") as a:
        os.mkdir(os.path.join(a, "d"))
        e = 0
        for n in range(5000):
            path = os.path.join(a, "d", "f%05d" % n)
            e = errno_of(touch, path)
            if e:
                break
            made.append(path)
            try:
                with open(path, "r+b") as f:
                    f.write(data)
            except OSError as x:
                e = x.errno
                break
            closed.append(path)
        assert e == errno.ENOSPC, "a full MDT answered %s" % errno.errorcode.get(e, e)
        assert len(closed) > 20, len(closed)
        # Creates go on into the room kept for the numbers the mount still holds, then are
        # refused with ENOSPC, never EIO.
        for n in range(5000):
            path = os.path.join(a, "d", "g%05d" % n)
            e = errno_of(touch, path)
            if e:
                break
            made.append(path)
        assert e == errno.ENOSPC, "a create on a full MDT answered %s" % errno.errorcode.get(e, e)
        print("%d files closed with their bytes, %d made in all" % (len(closed), len(made)))
        with second_mount(c) as b:
            names = set(os.listdir(os.path.join(b, "d")))
            assert names == {os.path.basename(p) for p in made}
            for p in closed:
                with open(os.path.join(b, "d", os.path.basename(p)), "rb") as f:
                    assert f.read() == data, p


@pytest.mark.slow  # the plain pass only: the ASan pass keeps the disk-full case without a restart
def test_full_mdt_serves_deletions_after_a_restart(small_targets):
    c = small_targets
    mnt = c.mount()
    d = os.path.join(mnt, "d")
    fitted, e, _ = fill(d)
    assert e == errno.ENOSPC
    # Stopped while full (killed: nothing tidied up), it starts and serves deletions.
    c.kill9("mds")
    c.restart()
    assert wait_until(lambda: c.loom("ls", "/", check=False).returncode == 0, 60, 0.2)
    assert errno_of(touch, os.path.join(d, "another")) == errno.ENOSPC
    assert re.search(r"the MDT is full", c.read_log("mds")), "a start on a full MDT did not say so"
    empty_and_refill(c, mnt, d, fitted)


@pytest.mark.slow  # the plain pass only: the ASan pass keeps the disk-full cases that reach the same code
def test_another_program_filling_the_disk_leaves_the_reserve(small_targets):
    # The disk under the MDT fills without the MDT writing (a log growing beside it): once it is
    # down to twice the reserve, the MDS holds the reserve in data.mdb, so the hog gets ENOSPC and
    # deletions still work.
    c = small_targets
    mnt = c.mount()
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    for n in range(200):
        touch(os.path.join(d, "f%06d" % n))
    hog = os.path.join(c.dir, "mdt", "hog")
    e = 0
    with open(hog, "wb") as f:
        for _ in range(64):                       # 16 MiB at 4 MiB/s into a 12 MiB disk
            e = errno_of(f.write, b"h" * (256 * KiB)) or errno_of(f.flush)
            if e:
                break
            time.sleep(0.0625)
    assert e == errno.ENOSPC, "the hog filled nothing"
    st = os.statvfs(os.path.join(c.dir, "mdt"))
    assert st.f_bavail * st.f_frsize < MiB, "the disk is not full"
    assert re.search(r"WARN: .*reserve", c.read_log("mds")) is None, c.read_log("mds")[-2000:]
    fitted, e, _ = fill(d + "2")                  # what room is left beyond the reserve
    assert e == errno.ENOSPC
    print("after the hog, %d more files fit" % fitted)
    subprocess.run(["rm", "-rf", d, d + "2"], check=True, timeout=600, capture_output=True)
    assert wait_until(lambda: inodes_in_use(mnt) == 1, 30, 0.2), inodes_in_use(mnt)
    os.unlink(hog)
    os.mkdir(d)
    for n in range(1000):
        touch(os.path.join(d, "after%04d" % n))


@contextlib.contextmanager
def mds_by_hand(c, *flags):
    """The cluster's MDS replaced by one started with flags (same MDT, address and key)."""
    c.kill9("mds")
    log_path = c.log_path("mds-small-map")
    log = open(log_path, "a")
    p = subprocess.Popen([MDS_BIN, "--mdt", os.path.join(c.dir, "mdt"), "--listen", c.addr, "--key", c.key]
                         + list(flags), stdout=log, stderr=log)
    try:
        assert wait_until(lambda: c.loom("ls", "/", check=False).returncode == 0, 30, 0.1), \
            "the MDS started by hand does not serve"
        yield p
        assert p.poll() is None, "the MDS died (exit %r)" % p.returncode
    finally:
        if p.poll() is None:
            p.terminate()
        p.wait(timeout=60)
        log.close()
        c.restart()


@pytest.mark.slow  # the plain pass only: the ASan pass keeps the disk-full case, through the same code
def test_full_map_recovers_without_restart(cluster_factory):
    # The disk has room; LMDB's map (--map-size) is what fills.
    c = cluster_factory(osts=1)
    mnt = c.mount()
    d = os.path.join(mnt, "d")
    with mds_by_hand(c, "--map-size", "8M", "--reserve", "1M"):
        fitted, e, took = fill(d)
        assert e == errno.ENOSPC, "a create in a full map failed with %s" % errno.errorcode.get(e, e)
        print("creates that fit in an 8 MiB map with a 1 MiB reserve: %d (%.1f s)" % (fitted, took))
        row = mdt_row(c, mnt)
        assert int(row[1]) == 8192, "the MDT line does not show the map: %r" % row   # 8 MiB in KiB
        assert_full(c, mnt, d)
        empty_and_refill(c, mnt, d, fitted)

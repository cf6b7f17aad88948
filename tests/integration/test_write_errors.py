"""Write errors as a user sees them on a mount: a write that went behind and failed is reported
once to every descriptor that could have written it (at its fsync or close, as Linux's errseq
does), and what failed is never reported as part of the file: a later fsync that returns 0 does
not turn it into zeros. Checked with a write past the largest file an OST can hold (EFBIG) and
with an OST on a small tmpfs that fills up (ENOSPC).
"""

import errno
import os
import subprocess

import pytest

from loomutil import errno_of, wait_until

KiB = 1 << 10
MiB = 1 << 20
TiB = 1 << 40


def test_write_past_the_largest_size(cluster):
    # 17 TiB is past what ext4 holds in one object: the OSS refuses it after write(2) returned.
    mnt = cluster.mount()
    path = os.path.join(mnt, "f")
    with open(path, "wb") as f:
        f.write(b"hello")
    writer = os.open(path, os.O_WRONLY)
    other = os.open(path, os.O_RDWR)          # opened before the write: could have written it
    try:
        try:
            n = os.pwrite(writer, b"x" * 4096, 17 * TiB)
        except OSError as e:
            assert e.errno == errno.EFBIG, e
            n = None
        if n is not None:
            assert n == 4096
            assert errno_of(os.fsync, writer) == errno.EFBIG
            assert errno_of(os.fsync, writer) == 0, "the error was reported twice to one descriptor"
            assert errno_of(os.fsync, other) == errno.EFBIG, "another writable descriptor never heard of it"
            assert errno_of(os.fsync, other) == 0
    finally:
        os.close(writer)
        os.close(other)
    # What failed is not part of the file, now or later.
    assert os.stat(path).st_size == 5
    with open(path, "rb") as f:
        assert f.read() == b"hello"
    # The file still works.
    with open(path, "ab") as f:
        f.write(b" world")
    with open(path, "rb") as f:
        assert f.read() == b"hello world"


def test_close_reports_a_failed_write(cluster):
    mnt = cluster.mount()
    path = os.path.join(mnt, "f")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"kept")
    try:
        os.pwrite(fd, b"y" * 100, 17 * TiB)
    except OSError as e:
        assert e.errno == errno.EFBIG
        os.close(fd)
    else:
        assert errno_of(os.close, fd) == errno.EFBIG
    assert os.stat(path).st_size == 4
    with open(path, "rb") as f:
        assert f.read() == b"kept"


@pytest.fixture
def small_ost(cluster_factory):
    """One OSS whose OST is an 8 MiB tmpfs: writes past that fail with ENOSPC."""
    c = cluster_factory(osts=1, start=False)
    ost = os.path.join(c.dir, "ost0")
    os.makedirs(ost)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", ost], check=True, timeout=60)
    try:
        c.up()
        yield c
    finally:
        c.down()
        subprocess.run(["umount", "-l", ost], timeout=60)


def test_full_ost(small_ost):
    c = small_ost
    mnt = c.mount()
    c.loom("setstripe", "-E", "-1", "-c", "1", "-S", "1M", mnt)   # no Data-on-MDT part: all on the OST
    path = os.path.join(mnt, "f")
    chunk = MiB
    pieces = [bytes([65 + k]) * chunk for k in range(16)]        # 16 MiB: twice what fits
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    other = os.open(path, os.O_RDONLY)
    failed_at = None
    try:
        for k, piece in enumerate(pieces):
            try:
                n = os.pwrite(fd, piece, k * chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                failed_at = k
                break
            if n < chunk:          # a short write: the OST filled in the middle of it
                failed_at = k
                break
        first = errno_of(os.fsync, fd)
        assert first == errno.ENOSPC or failed_at is not None, "16 MiB fit in an 8 MiB OST"
        # Reported once: the next fsync succeeds, and must not make the failed chunks part of it.
        assert errno_of(os.fsync, fd) == 0
        assert errno_of(os.fsync, other) in (0, errno.ENOSPC)
    finally:
        os.close(fd)
        os.close(other)
    size = os.stat(path).st_size
    assert 0 < size < len(pieces) * chunk
    with open(path, "rb") as f:
        got = f.read()
    assert len(got) == size
    want = b"".join(pieces)[:size]
    if got != want:
        bad = next(i for i in range(size) if got[i] != want[i])
        pytest.fail("the file reads wrong from byte %d (%s): a failed write became part of it"
                    % (bad, "zeros" if got[bad:bad + 4096].count(0) == len(got[bad:bad + 4096]) else "other bytes"))
    # Space comes back: the file system recovers. The unlinked file's objects are destroyed in
    # the background and the OST's free space reaches the MDS with its next heartbeat (as on
    # Lustre), so a create may meet ENOSPC for a moment.
    os.unlink(path)
    path2 = os.path.join(mnt, "g")

    def write_again():
        try:
            with open(path2, "wb") as f:
                f.write(b"z" * (2 * MiB))
                f.flush()
                os.fsync(f.fileno())
            return True
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
            return False
    assert wait_until(write_again, 60, interval=0.5), "the space of the unlinked file never came back"
    assert os.stat(path2).st_size == 2 * MiB

"""flock(2) and fcntl(2) byte-range locks, between processes on one mount and across two mounts of
one file system (cases 0600-0639). A lock is always held by a child process (LockHolder): a
process never conflicts with its own fcntl locks."""

import errno
import fcntl
import os

from posixutil import LockHolder, expect_errno, getlk, setlk, write_file

BUSY = (errno.EAGAIN, errno.EACCES)     # EWOULDBLOCK is EAGAIN on Linux; F_SETLK may give EACCES


def _flock_ex(fd):
    fcntl.flock(fd, fcntl.LOCK_EX)


def _flock_sh(fd):
    fcntl.flock(fd, fcntl.LOCK_SH)


def _wrlck(start=0, length=0):
    return lambda fd: setlk(fd, fcntl.F_WRLCK, start, length)


def _rdlck(fd):
    setlk(fd, fcntl.F_RDLCK)


def _open(path, flags=os.O_RDWR):
    return os.open(path, flags)


def _file(root):
    write_file(root.p("f"), b"lock me" * 100)
    return root.p("f")


# ---- flock, one mount -----------------------------------------------------------------------


def test_0600_flock_exclusive_excludes_other_process(root):
    f = _file(root)
    fd = _open(f)
    try:
        with LockHolder(f, _flock_ex) as h:
            expect_errno(errno.EWOULDBLOCK, fcntl.flock, fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            expect_errno(errno.EWOULDBLOCK, fcntl.flock, fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            h.release()
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def test_0601_flock_shared_locks_coexist(root):
    f = _file(root)
    fd = _open(f, os.O_RDONLY)
    try:
        with LockHolder(f, _flock_sh, os.O_RDONLY):
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            expect_errno(errno.EWOULDBLOCK, fcntl.flock, fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_0602_flock_released_when_holder_dies(root):
    f = _file(root)
    fd = _open(f)
    try:
        h = LockHolder(f, _flock_ex).__enter__()
        try:
            expect_errno(errno.EWOULDBLOCK, fcntl.flock, fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            h.kill()
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_0603_flock_released_by_close(root):
    f = _file(root)
    fd = _open(f)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)
    with LockHolder(f, lambda x: fcntl.flock(x, fcntl.LOCK_EX | fcntl.LOCK_NB)):
        pass


# ---- fcntl byte-range locks, one mount ------------------------------------------------------


def test_0610_fcntl_write_lock_excludes_other_process(root):
    f = _file(root)
    fd = _open(f)
    try:
        with LockHolder(f, _wrlck()) as h:
            expect_errno(BUSY, setlk, fd, fcntl.F_WRLCK)
            expect_errno(BUSY, setlk, fd, fcntl.F_RDLCK)
            h.release()
            setlk(fd, fcntl.F_WRLCK)
            setlk(fd, fcntl.F_UNLCK)
    finally:
        os.close(fd)


def test_0611_fcntl_disjoint_ranges_coexist(root):
    f = _file(root)
    fd = _open(f)
    try:
        with LockHolder(f, _wrlck(0, 100)):
            setlk(fd, fcntl.F_WRLCK, 100, 100)
            expect_errno(BUSY, setlk, fd, fcntl.F_WRLCK, 50, 100)
            expect_errno(BUSY, setlk, fd, fcntl.F_WRLCK, 99, 1)
            setlk(fd, fcntl.F_WRLCK, 1000, 0)            # to EOF and beyond, past the holder's range
    finally:
        os.close(fd)


def test_0612_fcntl_read_locks_share(root):
    f = _file(root)
    fd = _open(f)
    try:
        with LockHolder(f, _rdlck, os.O_RDONLY):
            setlk(fd, fcntl.F_RDLCK)
            setlk(fd, fcntl.F_UNLCK)
            expect_errno(BUSY, setlk, fd, fcntl.F_WRLCK)
    finally:
        os.close(fd)


def test_0613_fcntl_getlk_reports_holder(root):
    f = _file(root)
    fd = _open(f)
    try:
        with LockHolder(f, _wrlck(10, 20)) as h:
            t, start, length, pid = getlk(fd, fcntl.F_WRLCK)
            assert (t, start, length) == (fcntl.F_WRLCK, 10, 20)
            assert pid == h.pid, "F_GETLK names the holding process"
            t, _, _, _ = getlk(fd, fcntl.F_WRLCK, 30, 10)
            assert t == fcntl.F_UNLCK, "no lock conflicts with [30, 40)"
    finally:
        os.close(fd)


def test_0614_fcntl_getlk_no_conflict_unlck(root):
    f = _file(root)
    fd = _open(f)
    try:
        assert getlk(fd, fcntl.F_WRLCK)[0] == fcntl.F_UNLCK
        with LockHolder(f, _rdlck, os.O_RDONLY):
            assert getlk(fd, fcntl.F_RDLCK)[0] == fcntl.F_UNLCK, "read locks do not conflict"
            assert getlk(fd, fcntl.F_WRLCK)[0] == fcntl.F_RDLCK
    finally:
        os.close(fd)


def test_0615_fcntl_lock_released_when_holder_dies(root):
    f = _file(root)
    fd = _open(f)
    try:
        h = LockHolder(f, _wrlck()).__enter__()
        try:
            expect_errno(BUSY, setlk, fd, fcntl.F_WRLCK)
        finally:
            h.kill()
        setlk(fd, fcntl.F_WRLCK)
    finally:
        os.close(fd)


def test_0616_fcntl_lockf_wrapper(root):
    f = _file(root)
    fd = _open(f)
    try:
        with LockHolder(f, lambda x: fcntl.lockf(x, fcntl.LOCK_EX, 10, 0)):
            expect_errno(BUSY, fcntl.lockf, fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 10)
    finally:
        os.close(fd)


def test_0617_fcntl_write_lock_on_readonly_fd_ebadf(root):
    f = _file(root)
    fd = _open(f, os.O_RDONLY)
    try:
        expect_errno(errno.EBADF, setlk, fd, fcntl.F_WRLCK)
    finally:
        os.close(fd)


# ---- across two mounts ----------------------------------------------------------------------


def test_0630_flock_cross_mount_conflict_then_release(root):
    f = _file(root)
    fd = _open(root.q("f"))
    try:
        with LockHolder(f, _flock_ex) as h:
            expect_errno(errno.EWOULDBLOCK, fcntl.flock, fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            h.release()
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_0631_flock_cross_mount_holder_on_b_excludes_a(root):
    f = _file(root)
    fd = _open(f)
    try:
        with LockHolder(root.q("f"), _flock_ex) as h:
            expect_errno(errno.EWOULDBLOCK, fcntl.flock, fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            h.release()
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_0632_fcntl_cross_mount_conflict_then_release(root):
    f = _file(root)
    fd = _open(root.q("f"))
    try:
        with LockHolder(f, _wrlck()) as h:
            expect_errno(BUSY, setlk, fd, fcntl.F_WRLCK)
            expect_errno(BUSY, setlk, fd, fcntl.F_RDLCK)
            h.release()
            setlk(fd, fcntl.F_WRLCK)
    finally:
        os.close(fd)


def test_0633_fcntl_getlk_cross_mount_reports_lock(root):
    f = _file(root)
    fd = _open(root.q("f"))
    try:
        with LockHolder(f, _wrlck(100, 50)):
            t, start, length, _pid = getlk(fd, fcntl.F_RDLCK)
            assert (t, start, length) == (fcntl.F_WRLCK, 100, 50), "F_GETLK through B must report A's lock"
        assert getlk(fd, fcntl.F_WRLCK)[0] == fcntl.F_UNLCK
    finally:
        os.close(fd)


def test_0634_fcntl_cross_mount_disjoint_ranges_coexist(root):
    f = _file(root)
    fd = _open(root.q("f"))
    try:
        with LockHolder(f, _wrlck(0, 4096)):
            setlk(fd, fcntl.F_WRLCK, 4096, 4096)
            expect_errno(BUSY, setlk, fd, fcntl.F_WRLCK, 4000, 200)
    finally:
        os.close(fd)


def test_0635_fcntl_cross_mount_read_locks_share(root):
    f = _file(root)
    fd = _open(root.q("f"))
    try:
        with LockHolder(f, _rdlck, os.O_RDONLY):
            setlk(fd, fcntl.F_RDLCK)
            setlk(fd, fcntl.F_UNLCK)
            expect_errno(BUSY, setlk, fd, fcntl.F_WRLCK)
    finally:
        os.close(fd)


def test_0636_fcntl_cross_mount_released_when_holder_dies(root):
    f = _file(root)
    fd = _open(root.q("f"))
    try:
        h = LockHolder(f, _wrlck()).__enter__()
        try:
            expect_errno(BUSY, setlk, fd, fcntl.F_WRLCK)
        finally:
            h.kill()
        setlk(fd, fcntl.F_WRLCK)
    finally:
        os.close(fd)

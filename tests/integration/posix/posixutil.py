"""Helpers for the POSIX conformance cases: errno checks, syscalls Python's os module lacks
(renameat2, utimensat with UTIME_NOW/UTIME_OMIT, getxattr into a caller's buffer, mincore;
fallocate with any mode comes from loomutil), running
an operation as another user in a child process, and a child process that holds a lock."""

import ctypes
import ctypes.util
import errno
import fcntl
import mmap
import os
import select
import struct
import sys
import time
import traceback

import pytest

# fallocate(2) with any mode, shared with the other integration tests.
from loomutil import (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE, FALLOC_FL_KEEP_SIZE,  # noqa: F401
                      FALLOC_FL_NO_HIDE_STALE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_UNSHARE_RANGE,
                      FALLOC_FL_WRITE_ZEROES, FALLOC_FL_ZERO_RANGE, fallocate)

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

USER = 1000            # the unprivileged user the permission cases act as
GROUP = 1000
OTHER_USER = 1001      # a second unprivileged user (owner of "another user's" files)
OTHER_GROUP = 1001
SUPP_GROUP = 2000      # a group only reachable as a supplementary group

CHILD_DEADLINE = 60    # seconds a helper child may take before the test calls it hung

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2


def expect_errno(err, fn, *args, **kwargs):
    """Calls fn(*args, **kwargs), which must fail with OSError errno err (or one of a tuple)."""
    errs = err if isinstance(err, tuple) else (err,)
    try:
        r = fn(*args, **kwargs)
    except OSError as e:
        assert e.errno in errs, "%s%r: expected %s, got %s (%s)" % (
            getattr(fn, "__name__", fn), args, "/".join(errno.errorcode[x] for x in errs),
            errno.errorcode.get(e.errno, e.errno), e)
        return e
    if hasattr(r, "close"):
        r.close()
    elif isinstance(r, int) and getattr(fn, "__name__", "") == "open":
        os.close(r)
    pytest.fail("%s%r succeeded (returned %r), expected %s" % (
        getattr(fn, "__name__", fn), args, r, "/".join(errno.errorcode[x] for x in errs)))


def _check(rc):
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return rc


# ---- syscalls through ctypes ----------------------------------------------------------------

_libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]


def renameat2(old, new, flags):
    """renameat2(2) with RENAME_NOREPLACE / RENAME_EXCHANGE; raises OSError."""
    _check(_libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags))


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(_Timespec), ctypes.c_int]


def utimensat(path, atime, mtime, follow=True):
    """utimensat(2). atime/mtime: nanoseconds since the epoch, or UTIME_NOW / UTIME_OMIT."""
    def ts(v):
        if v in (UTIME_NOW, UTIME_OMIT):
            return _Timespec(0, v)
        return _Timespec(v // 10**9, v % 10**9)
    times = (_Timespec * 2)(ts(atime), ts(mtime))
    _check(_libc.utimensat(AT_FDCWD, os.fsencode(path), times, 0 if follow else AT_SYMLINK_NOFOLLOW))


_libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
_libc.getxattr.restype = ctypes.c_ssize_t


def getxattr_into(path, name, size):
    """getxattr(2) with a buffer of exactly size bytes: returns the bytes it filled (with size 0,
    the value's length as an int)."""
    buf = ctypes.create_string_buffer(max(size, 1))
    n = _check(_libc.getxattr(os.fsencode(path), os.fsencode(name), buf if size else None, size))
    return n if size == 0 else buf.raw[:n]


_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]


def resident_pages(path, length):
    """How many of the first length bytes' pages of path are in the page cache (mincore(2) over a
    fresh private mapping, which faults nothing in)."""
    pages = (length + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    fd = os.open(path, os.O_RDONLY)
    try:
        m = mmap.mmap(fd, length, access=mmap.ACCESS_COPY)
    finally:
        os.close(fd)
    try:
        vec = (ctypes.c_ubyte * pages)()
        first = ctypes.c_char.from_buffer(m)
        try:
            _check(_libc.mincore(ctypes.c_void_p(ctypes.addressof(first)), length, vec))
        finally:
            del first             # the mapping cannot be closed while a ctypes view exports it
        return sum(b & 1 for b in vec)
    finally:
        m.close()


# ---- files ----------------------------------------------------------------------------------


def write_file(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        n = os.write(fd, data)
        assert n == len(data)
    finally:
        os.close(fd)


def read_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        out = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                return b"".join(out)
            out.append(b)
    finally:
        os.close(fd)


def pread_all(fd, length, offset):
    out = []
    while length > 0:
        b = os.pread(fd, length, offset)
        if not b:
            break
        out.append(b)
        length -= len(b)
        offset += len(b)
    return b"".join(out)


def touch(path, mode=0o644):
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, mode))


def tick(path, follow=True):
    """Waits until the clock has moved past path's ctime and mtime, so that a change made next
    gets a later timestamp even on a file system with coarse timestamps (never a time bound)."""
    st = os.stat(path, follow_symlinks=follow)
    last = max(st.st_ctime_ns, st.st_mtime_ns)
    while time.time_ns() <= last + 20_000_000:
        time.sleep(0.01)


def poll(pred, timeout=10.0, interval=0.05):
    """Polls pred() until it returns a true value (returned) or timeout seconds pass (its last
    value). A deadline for what must happen eventually, never a measure of speed."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def exists(path):
    try:
        os.lstat(path)
        return True
    except FileNotFoundError:
        return False


# ---- acting as another user -----------------------------------------------------------------

OK = 0
UNEXPECTED = 250      # the child raised something other than OSError (traceback on stderr)


def _child_exit(fn):
    code = UNEXPECTED
    try:
        r = fn()
        code = r if type(r) is int else OK      # an int is a result code; anything else is success
    except OSError as e:
        code = e.errno if 0 < e.errno < UNEXPECTED else UNEXPECTED
        if code == UNEXPECTED:
            traceback.print_exc()
    except BaseException:  # noqa: BLE001 - the exit code reports it
        traceback.print_exc()
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)


def drop_privileges(uid=USER, gid=GROUP, groups=()):
    os.setgroups(list(groups))
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def run_as(fn, uid=USER, gid=GROUP, groups=()):
    """Runs fn() in a child process that has become uid/gid with exactly these supplementary
    groups; returns its exit code: the errno of an OSError fn raised, the int fn returned, or 0."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        def body():
            drop_privileges(uid, gid, groups)
            return fn()
        _child_exit(body)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), "child acting as uid %d died: status %#x" % (uid, status)
    code = os.WEXITSTATUS(status)
    assert code != UNEXPECTED, "child acting as uid %d raised an unexpected exception (see stderr)" % uid
    return code


def errname(code):
    return "OK" if code == 0 else errno.errorcode.get(code, str(code))


def assert_as(expected, fn, uid=USER, gid=GROUP, groups=()):
    code = run_as(fn, uid, gid, groups)
    assert code == expected, "as uid %d: expected %s, got %s" % (uid, errname(expected), errname(code))


# ---- a child that holds a lock ----------------------------------------------------------------

FLOCK_FMT = "hh4xqqi4x"      # struct flock on 64-bit Linux: l_type, l_whence, l_start, l_len, l_pid
assert struct.calcsize(FLOCK_FMT) == 32


def getlk(fd, ltype, start=0, length=0):
    """fcntl(F_GETLK): returns (l_type, l_start, l_len, l_pid) of a lock that would block ltype."""
    arg = struct.pack(FLOCK_FMT, ltype, os.SEEK_SET, start, length, 0)
    res = fcntl.fcntl(fd, fcntl.F_GETLK, arg)
    t, _whence, s, n, pid = struct.unpack(FLOCK_FMT, res)
    return t, s, n, pid


def setlk(fd, ltype, start=0, length=0):
    """fcntl(F_SETLK): takes (or with F_UNLCK drops) a byte-range lock without waiting."""
    fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack(FLOCK_FMT, ltype, os.SEEK_SET, start, length, 0))


class LockHolder:
    """A child process that opens path, takes a lock with lock(fd) and holds it until release()
    (or until the test ends). Use as a context manager."""

    def __init__(self, path, lock, flags=os.O_RDWR):
        self.path, self.lock, self.flags = path, lock, flags
        self.pid = None

    def __enter__(self):
        up_r, up_w = os.pipe()
        down_r, down_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(up_r)
            os.close(down_w)

            def body():
                fd = os.open(self.path, self.flags)
                try:
                    self.lock(fd)
                except OSError as e:
                    os.write(up_w, b"E%d" % e.errno)
                    return 0
                os.write(up_w, b"L")
                os.read(down_r, 1)          # until release() (or the parent's end: EOF)
                os.close(fd)
                return 0
            _child_exit(body)
        os.close(up_w)
        os.close(down_r)
        self.pid, self._up, self._down = pid, up_r, down_w
        ready, _, _ = select.select([up_r], [], [], CHILD_DEADLINE)
        msg = os.read(up_r, 16) if ready else b""
        if msg != b"L":
            self.release()
            raise AssertionError("lock holder could not take its lock: %r" % msg)
        return self

    def release(self):
        """Makes the child close its descriptor (dropping the lock) and exit; waits for it."""
        if self.pid is None:
            return
        try:
            os.write(self._down, b"x")
        except OSError:
            pass
        os.close(self._down)
        os.close(self._up)
        deadline = time.monotonic() + CHILD_DEADLINE
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
                self.pid = None
                raise AssertionError("lock holder did not exit")
            time.sleep(0.01)
        self.pid = None
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "lock holder failed: %#x" % status

    def kill(self):
        """SIGKILLs the child while it holds the lock (the lock must die with it)."""
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        os.close(self._down)
        os.close(self._up)
        self.pid = None

    def __exit__(self, *exc):
        self.release()
        return False

"""Locks across an MDS restart (issue 15): granted fcntl(2) and flock(2) locks are replayed by
their clients after the MDS was killed with SIGKILL and started again, as open files are.

A process that held a lock still holds it afterwards (another process, on either mount, still
gets EAGAIN, F_GETLK names the holder, and the holder can take it again as its own), a process
that was waiting for it still waits and gets it once the holder lets go, and read locks of two
processes both survive. Every lock is held by a child process (Proc), on mount A
(`loom cluster up --mount`) or mount B (`mount -t loom`, another loom-mount: another client).

No assertion on time: order is checked through a pipe the processes write to, and waits poll
with generous deadlines. The test process itself opens files on the mounts only while the MDS is
up: a fork (the `loom cluster up` that restarts it) closes the descriptors it inherits, and each
such close drops the child's locks at the MDS, so it would wait for the MDS it is to start.
"""

import contextlib
import errno
import fcntl
import os
import select
import struct
import sys
import traceback

from loomutil import errno_of, second_mount, wait_until

FLOCK_FMT = "hhqqi"          # struct flock on Linux x86_64 / aarch64: type, whence, start, len, pid
DEADLINE = 60                 # seconds any child or the file system gets to do a step


def setlk(fd, ltype, start=0, length=0, cmd=fcntl.F_SETLK):
    fcntl.fcntl(fd, cmd, struct.pack(FLOCK_FMT, ltype, os.SEEK_SET, start, length, 0))


def getlk(fd, ltype, start=0, length=0):
    """F_GETLK: (l_type, l_start, l_len, l_pid) of a lock that would block ltype."""
    res = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(FLOCK_FMT, ltype, os.SEEK_SET, start, length, 0))
    t, _whence, s, n, pid = struct.unpack(FLOCK_FMT, res)
    return t, s, n, pid


class Proc:
    """A child process with a file open, told what to do one step at a time: `take` runs
    take(fd) (which may block: F_SETLKW, flock without LOCK_NB) and reports the errno it ended
    with (0: done); `again` runs again(fd), which must not block; `release` writes b"R" to the
    order pipe, then runs release(fd). The order pipe is shared by every Proc of a test: a step
    that must come after another is seen there in that order."""

    def __init__(self, path, order_w, take, again=None, release=None, flags=os.O_RDWR):
        self.take_fn, self.again_fn, self.release_fn = take, again or take, release
        cmd_r, self._cmd = os.pipe()
        self._up, up_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                os.close(self._cmd)
                os.close(self._up)
                fd = os.open(path, flags)
                while True:
                    c = os.read(cmd_r, 1)
                    if c in (b"", b"x"):
                        break
                    if c == b"t":
                        rc = errno_of(self.take_fn, fd)
                        if rc == 0:
                            os.write(order_w, b"G")
                    elif c == b"a":
                        rc = errno_of(self.again_fn, fd)
                    elif c == b"r":
                        os.write(order_w, b"R")
                        rc = errno_of(self.release_fn, fd)
                    os.write(up_w, b"%d\n" % rc)
                os.close(fd)
                code = 0
            except BaseException:  # noqa: BLE001 - the exit code reports it
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(cmd_r)
        os.close(up_w)
        self.pid = pid
        self._buf = b""

    def _send(self, c):
        os.write(self._cmd, c)

    def result(self, timeout=DEADLINE):
        """The errno the last step ended with; None if it has not ended within timeout."""
        while b"\n" not in self._buf:
            ready, _, _ = select.select([self._up], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(self._up, 64)
            assert chunk, "child %d died" % self.pid
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return int(line)

    def done(self):
        """Whether the step under way has ended (without waiting)."""
        if b"\n" in self._buf:
            return True
        ready, _, _ = select.select([self._up], [], [], 0)
        return bool(ready)

    def take(self):
        self._send(b"t")
        return self.result()

    def start_take(self):
        self._send(b"t")

    def again(self):
        self._send(b"a")
        return self.result()

    def release(self):
        self._send(b"r")
        return self.result()

    def kill(self):
        """SIGKILLs the child and reaps it."""
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        os.close(self._cmd)
        os.close(self._up)
        self.pid = None

    def close(self):
        """Ends the child (closing its file drops what it holds) and reaps it."""
        if self.pid is None:
            return
        try:
            self._send(b"x")
        except OSError:
            pass
        os.close(self._cmd)
        os.close(self._up)
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "child failed: %#x" % status


def fcntl_lock(ltype, start, length, cmd=fcntl.F_SETLK):
    return lambda fd: setlk(fd, ltype, start, length, cmd)


def unlock_all(fd):
    setlk(fd, fcntl.F_UNLCK, 0, 0)


# fcntl(2) and flock(2), by machine: what a process blocked on a lock sits in.
LOCK_SYSCALLS = {"x86_64": {"72", "73"}, "aarch64": {"25", "32"}}.get(os.uname().machine)


def blocked_on_lock(pid):
    """Whether pid sits in fcntl(2) or flock(2) (its F_SETLKW, its flock), asleep."""
    try:
        with open("/proc/%d/syscall" % pid) as f:
            first = f.read().split()[0]
    except (OSError, IndexError):
        return False
    if LOCK_SYSCALLS is None:       # another machine: asleep in some call will have to do
        return first not in ("running", "-1")
    return first in LOCK_SYSCALLS


def mdt_lock_free(cluster):
    """Whether no process holds the MDT (the MDS's flock on mdt.lock). kill9 returns once the
    MDS's main thread is a zombie; its other threads may still hold the lock for a moment, and a
    new MDS would find the MDT busy."""
    fd = os.open(os.path.join(cluster.dir, "mdt", "mdt.lock"), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)     # drops the flock, if taken


class Setup:
    """Mount A, mount B, a file f seen through both, and the order pipe."""

    def __init__(self, cluster, b):
        self.cluster = cluster
        self.a = cluster.mount()
        self.b = b
        self.fa = os.path.join(self.a, "f")
        self.fb = os.path.join(self.b, "f")
        with open(self.fa, "wb") as f:
            f.write(b"lock me" * 1000)
        assert wait_until(lambda: os.path.exists(self.fb), DEADLINE), "f is not seen through mount B"
        self.order_r, self.order_w = os.pipe()
        os.set_blocking(self.order_r, False)
        self.order = b""
        self.procs = []

    def proc(self, path, take, **kw):
        p = Proc(path, self.order_w, take, **kw)
        self.procs.append(p)
        return p

    def restart_mds(self):
        """SIGKILL the MDS and start it again. `up` keeps mount A, still in place, as the
        cluster's (`up --mount` would first look the mount point up, through the mount, which
        waits for the MDS it is about to start)."""
        self.cluster.kill9("mds")
        assert wait_until(lambda: mdt_lock_free(self.cluster), DEADLINE), "the killed MDS keeps its MDT"
        self.cluster.restart()

    def read_order(self):
        try:
            self.order += os.read(self.order_r, 64)
        except BlockingIOError:
            pass
        return self.order

    def close(self):
        for p in self.procs:
            p.close()
        os.close(self.order_r)
        os.close(self.order_w)


@contextlib.contextmanager
def opened(path, flags=os.O_RDWR):
    fd = os.open(path, flags)
    try:
        yield fd
    finally:
        os.close(fd)


def until_ok(fn, *args):
    """Polls fn(*args) until it succeeds (a lock just let go is free at once; the poll only
    absorbs a mount still reconnecting); the last errno if it never does."""
    last = [None]

    def attempt():
        last[0] = errno_of(fn, *args)
        return last[0] == 0

    return 0 if wait_until(attempt, DEADLINE, 0.1) else last[0]


# ---- 1. an fcntl write lock -------------------------------------------------------------------


def test_fcntl_write_lock_survives_mds_restart(cluster):
    with second_mount(cluster) as b:
        s = Setup(cluster, b)
        try:
            a = s.proc(s.fa, fcntl_lock(fcntl.F_WRLCK, 100, 50), release=unlock_all)
            assert a.take() == 0
            with opened(s.fb) as fd_b:
                assert errno_of(setlk, fd_b, fcntl.F_WRLCK, 120, 10) == errno.EAGAIN  # as ever

            s.restart_mds()

            with opened(s.fb) as fd_b:
                # Held by A: B, on the other mount, is refused, and told who holds it.
                assert errno_of(setlk, fd_b, fcntl.F_WRLCK, 120, 10) == errno.EAGAIN
                assert errno_of(setlk, fd_b, fcntl.F_RDLCK, 149, 1) == errno.EAGAIN
                assert getlk(fd_b, fcntl.F_WRLCK, 0, 0) == (fcntl.F_WRLCK, 100, 50, a.pid)
                assert getlk(fd_b, fcntl.F_WRLCK, 150, 10)[0] == fcntl.F_UNLCK    # past its end
                # ... and so is another process on A's own mount.
                c = s.proc(s.fa, fcntl_lock(fcntl.F_WRLCK, 125, 30))
                assert c.take() == errno.EAGAIN
                # A still owns it: taking it again is its own business.
                assert a.again() == 0
                # Outside A's range B locks at once.
                assert errno_of(setlk, fd_b, fcntl.F_WRLCK, 0, 100) == 0
                setlk(fd_b, fcntl.F_UNLCK, 0, 100)

                assert a.release() == 0
                assert until_ok(setlk, fd_b, fcntl.F_WRLCK, 120, 10) == 0
                assert c.take() == errno.EAGAIN       # now B holds [120, 130)
                setlk(fd_b, fcntl.F_UNLCK, 0, 0)
                assert c.take() == 0
        finally:
            s.close()


# ---- 2. an flock lock -------------------------------------------------------------------------


def test_flock_exclusive_survives_mds_restart(cluster):
    with second_mount(cluster) as b:
        s = Setup(cluster, b)
        try:
            a = s.proc(s.fa, lambda fd: fcntl.flock(fd, fcntl.LOCK_EX),
                       again=lambda fd: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB),
                       release=lambda fd: fcntl.flock(fd, fcntl.LOCK_UN))
            assert a.take() == 0

            s.restart_mds()

            with opened(s.fb) as fd_b:
                assert errno_of(fcntl.flock, fd_b, fcntl.LOCK_EX | fcntl.LOCK_NB) == errno.EWOULDBLOCK
                assert errno_of(fcntl.flock, fd_b, fcntl.LOCK_SH | fcntl.LOCK_NB) == errno.EWOULDBLOCK
                c = s.proc(s.fa, lambda fd: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB))
                assert c.take() == errno.EWOULDBLOCK  # another open file on A's mount
                # fcntl locks are apart from flock ones, after the restart as before.
                assert errno_of(setlk, fd_b, fcntl.F_WRLCK, 0, 0) == 0
                setlk(fd_b, fcntl.F_UNLCK, 0, 0)
                assert a.again() == 0                 # still A's own

                assert a.release() == 0
                assert until_ok(fcntl.flock, fd_b, fcntl.LOCK_EX | fcntl.LOCK_NB) == 0
                assert c.take() == errno.EWOULDBLOCK  # B's now
                fcntl.flock(fd_b, fcntl.LOCK_UN)
                assert c.take() == 0
        finally:
            s.close()


# ---- 3. a waiter across the restart -----------------------------------------------------------


def test_fcntl_waiter_keeps_waiting_across_mds_restart(cluster):
    with second_mount(cluster) as b:
        s = Setup(cluster, b)
        try:
            a = s.proc(s.fa, fcntl_lock(fcntl.F_WRLCK, 0, 0), release=unlock_all)
            assert a.take() == 0
            w = s.proc(s.fb, fcntl_lock(fcntl.F_WRLCK, 10, 10, fcntl.F_SETLKW), release=unlock_all)
            w.start_take()
            assert wait_until(lambda: blocked_on_lock(w.pid), DEADLINE), "B never blocked in F_SETLKW"
            assert not w.done()

            s.restart_mds()

            with opened(s.fb) as fd_c:
                # A's lock is back (this answer also waits for the MDS's recovery to end), and
                # B, whose request was resent after A's replay, still waits.
                assert getlk(fd_c, fcntl.F_RDLCK, 10, 1) == (fcntl.F_WRLCK, 0, 0, a.pid)
                assert errno_of(setlk, fd_c, fcntl.F_WRLCK, 15, 1) == errno.EAGAIN
                assert not w.done(), "the waiter was granted while A still held the lock"
                assert s.read_order() == b"G", "only A's grant so far: %r" % s.order

                assert a.release() == 0
                assert w.result() == 0, "the waiter did not get the lock after A let go"
                assert wait_until(lambda: s.read_order() == b"GRG", DEADLINE), \
                    "B got the lock before A released it: %r" % s.order
                # Now B holds it, as its own.
                assert getlk(fd_c, fcntl.F_WRLCK, 0, 0) == (fcntl.F_WRLCK, 10, 10, w.pid)
                assert w.release() == 0
                assert until_ok(setlk, fd_c, fcntl.F_WRLCK, 0, 0) == 0
                setlk(fd_c, fcntl.F_UNLCK, 0, 0)
        finally:
            s.close()


def test_flock_waiter_on_the_same_mount_keeps_waiting_across_mds_restart(cluster):
    with second_mount(cluster) as b:
        s = Setup(cluster, b)
        try:
            a = s.proc(s.fa, lambda fd: fcntl.flock(fd, fcntl.LOCK_EX),
                       release=lambda fd: fcntl.flock(fd, fcntl.LOCK_UN))
            assert a.take() == 0
            w = s.proc(s.fa, lambda fd: fcntl.flock(fd, fcntl.LOCK_EX),
                       release=lambda fd: fcntl.flock(fd, fcntl.LOCK_UN))
            w.start_take()
            assert wait_until(lambda: blocked_on_lock(w.pid), DEADLINE), "B never blocked in flock"

            s.restart_mds()

            c = s.proc(s.fb, lambda fd: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB))
            assert c.take() == errno.EWOULDBLOCK  # A's, after the restart
            assert not w.done(), "the waiter was granted while A still held the lock"
            assert a.release() == 0
            assert w.result() == 0
            assert wait_until(lambda: s.read_order() == b"GRG", DEADLINE), \
                "B got the lock before A released it: %r" % s.order
            assert c.take() == errno.EWOULDBLOCK  # now the waiter's
            assert w.release() == 0
            assert c.take() == 0
        finally:
            s.close()


# ---- 4. read locks ----------------------------------------------------------------------------


def test_read_locks_of_two_processes_survive_mds_restart(cluster):
    with second_mount(cluster) as b:
        s = Setup(cluster, b)
        try:
            r1 = s.proc(s.fa, fcntl_lock(fcntl.F_RDLCK, 0, 100), release=unlock_all)
            r2 = s.proc(s.fb, fcntl_lock(fcntl.F_RDLCK, 50, 100), release=unlock_all)
            assert r1.take() == 0
            assert r2.take() == 0

            s.restart_mds()

            with opened(s.fa) as fd_c:
                # Both are there: a writer is refused over either, and told whose it is.
                assert errno_of(setlk, fd_c, fcntl.F_WRLCK, 0, 10) == errno.EAGAIN
                assert errno_of(setlk, fd_c, fcntl.F_WRLCK, 140, 10) == errno.EAGAIN
                assert getlk(fd_c, fcntl.F_WRLCK, 0, 10) == (fcntl.F_RDLCK, 0, 100, r1.pid)
                assert getlk(fd_c, fcntl.F_WRLCK, 120, 10) == (fcntl.F_RDLCK, 50, 100, r2.pid)
                assert getlk(fd_c, fcntl.F_WRLCK, 150, 0)[0] == fcntl.F_UNLCK
                # A reader shares them, from either mount, and the holders read-lock again.
                assert errno_of(setlk, fd_c, fcntl.F_RDLCK, 0, 200) == 0
                setlk(fd_c, fcntl.F_UNLCK, 0, 0)
                w = s.proc(s.fb, fcntl_lock(fcntl.F_WRLCK, 60, 10))
                assert w.take() == errno.EAGAIN
                assert r1.again() == 0 and r2.again() == 0

                # r1 lets go: only r2's range is held.
                assert r1.release() == 0
                assert until_ok(setlk, fd_c, fcntl.F_WRLCK, 0, 50) == 0
                setlk(fd_c, fcntl.F_UNLCK, 0, 0)
                assert w.take() == errno.EAGAIN
                assert getlk(fd_c, fcntl.F_WRLCK, 0, 0) == (fcntl.F_RDLCK, 50, 100, r2.pid)
                assert r2.release() == 0
                assert until_ok(setlk, fd_c, fcntl.F_WRLCK, 0, 0) == 0
                setlk(fd_c, fcntl.F_UNLCK, 0, 0)
                assert w.take() == 0
        finally:
            s.close()


# ---- 5. a holder that does not come back ------------------------------------------------------



def test_lock_of_a_client_that_never_comes_back_is_free_after_the_recovery_window(cluster):
    """The MDS waits for the clients that may hold locks; one that died with the MDS is given up
    after the recovery window (here 3 s, on an MDS started by hand), and its lock is free."""
    from test_faults import start_mds_by_hand
    from loomutil import mount_daemon_pids
    import signal

    with second_mount(cluster) as b:
        s = Setup(cluster, b)
        try:
            holder = s.proc(s.fb, fcntl_lock(fcntl.F_WRLCK, 0, 0))
            assert holder.take() == 0
            with opened(s.fa) as fd_a:
                assert errno_of(setlk, fd_a, fcntl.F_WRLCK, 0, 1) == errno.EAGAIN
            for pid in mount_daemon_pids(b):    # mount B dies with its lock
                os.kill(pid, signal.SIGKILL)
            holder.kill()
            cluster.kill9("mds")
            assert wait_until(lambda: mdt_lock_free(cluster), DEADLINE), "the killed MDS keeps its MDT"
            start_mds_by_hand(cluster, "--recovery-window", "3")
            with opened(s.fa) as fd_a:
                # Mount A waits for the MDS's recovery (B never replays), then gets the lock.
                assert until_ok(setlk, fd_a, fcntl.F_WRLCK, 0, 1) == 0
                assert "did not replay their locks" in cluster.read_log("mds")
                setlk(fd_a, fcntl.F_UNLCK, 0, 0)
        finally:
            s.close()

"""A node agent: a long-lived child process that stands for one node of a training job. It runs
in its node's directory (on its own mount), executes the file commands the test sends it one at a
time, and answers each with the result or the errno of the OSError it raised. Because it lives
across steps, a scenario can hold a descriptor or a mapping open on one node while the other acts,
and order every step exactly.

Run as `python3 nodeagent.py` (the test side is the Node class below). The wire is a pair of
pipes: the agent reads (command, args) and writes ("ok", value) | ("oserror", errno, strerror) |
("crash", traceback), each a pickle with its large byte strings sent raw after it (they arrive as
bytearrays). The agent exits when its stdin closes,
and is killed with its parent (PR_SET_PDEATHSIG), so it never outlives the test.
"""

import ctypes
import fcntl
import io
import mmap
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import traceback

CALL_DEADLINE = 60.0          # seconds one command may take before the test calls the node hung
HEADER = struct.Struct("<II")    # pickle length, blob count
BLOB_LEN = struct.Struct("<Q")
BLOB_MIN = 64 << 10                # byte strings from this size travel raw, not pickled
PIPE_SIZE = 1 << 20


def _stat_dict(st):
    return {"size": st.st_size, "ino": st.st_ino, "nlink": st.st_nlink, "mode": st.st_mode,
            "mtime_ns": st.st_mtime_ns, "atime_ns": st.st_atime_ns, "ctime_ns": st.st_ctime_ns}


def _read_fd(fd, chunk):
    """Reads fd from its offset to EOF in read(2)s of chunk bytes."""
    out = []
    while True:
        b = os.read(fd, chunk)
        if not b:
            return b"".join(out)
        out.append(b)


# ---- the agent: one function per command --------------------------------------------------------

class Agent:
    def __init__(self):
        self.maps = {}            # map id -> (mmap, length)
        self.next_map = 1

    # descriptors

    def open(self, path, flags, mode=0o644):
        return os.open(path, flags, mode)

    def close(self, fd):
        os.close(fd)

    def pread(self, fd, n, off):
        return os.pread(fd, n, off)

    def pwrite(self, fd, data, off):
        return os.pwrite(fd, data, off)

    def pwrite_many(self, fd, pieces):
        """pwrite(2) of every (offset, bytes) in order; returns the bytes written in all."""
        return sum(os.pwrite(fd, data, off) for off, data in pieces)

    def write(self, fd, data):
        return os.write(fd, data)

    def read_fd(self, fd, chunk=1 << 20):
        """Everything from offset 0 to EOF, by read(2)s of chunk bytes."""
        os.lseek(fd, 0, os.SEEK_SET)
        return _read_fd(fd, chunk)

    def fstat(self, fd):
        return _stat_dict(os.fstat(fd))

    def ftruncate(self, fd, size):
        os.ftruncate(fd, size)

    def fsync(self, fd):
        os.fsync(fd)

    # whole files

    def read_file(self, path, chunk=1 << 20):
        """open(O_RDONLY), read(2)s of chunk bytes to EOF, fstat, close: (bytes, fstat)."""
        fd = os.open(path, os.O_RDONLY)
        try:
            got = _read_fd(fd, chunk)
            return got, _stat_dict(os.fstat(fd))
        finally:
            os.close(fd)

    def write_file(self, path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode=0o644):
        """open(flags), write(2) all of data, close (where a close-to-open writer's data lands)."""
        fd = os.open(path, flags, mode)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        finally:
            os.close(fd)

    def direct_read(self, path, chunk=1 << 20):
        """open(O_RDONLY | O_DIRECT) and read to EOF into a page-aligned buffer (an anonymous
        mapping): what the file holds, bypassing this node's page cache."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, chunk)
        try:
            out, off = [], 0
            while True:
                n = os.preadv(fd, [buf], off)
                if n <= 0:
                    return b"".join(out)
                out.append(buf[:n])
                off += n
        finally:
            buf.close()
            os.close(fd)

    # maps

    def mmap(self, fd, length):
        """A shared read-only mapping of the first length bytes of fd: a map id."""
        m = mmap.mmap(fd, length, mmap.MAP_SHARED, mmap.PROT_READ)
        mid = self.next_map
        self.next_map += 1
        self.maps[mid] = m
        return mid

    def map_read(self, mid, off, n):
        return self.maps[mid][off:off + n]

    def munmap(self, mid):
        self.maps.pop(mid).close()

    def mmap_read(self, path, off=0, length=None):
        """open, fstat, mmap the whole file, copy out [off, off+length) (to the end if length is
        None), unmap, close: (bytes, fstat)."""
        fd = os.open(path, os.O_RDONLY)
        try:
            st = os.fstat(fd)
            with mmap.mmap(fd, st.st_size, mmap.MAP_SHARED, mmap.PROT_READ) as m:
                end = st.st_size if length is None else off + length
                return m[off:end], _stat_dict(st)
        finally:
            os.close(fd)

    # names

    def stat(self, path):
        return _stat_dict(os.stat(path))

    def lstat(self, path):
        return _stat_dict(os.lstat(path))

    def stat_many(self, paths):
        """stat(2) of each path in a row: a list of stat dicts, or the errno where one failed."""
        out = []
        for p in paths:
            try:
                out.append(_stat_dict(os.stat(p)))
            except OSError as e:
                out.append(e.errno)
        return out

    def truncate(self, path, size):
        os.truncate(path, size)

    def rename(self, old, new):
        os.rename(old, new)

    def unlink(self, path):
        os.unlink(path)

    def link(self, old, new):
        os.link(old, new)

    def symlink(self, target, path):
        os.symlink(target, path)

    def readlink(self, path):
        return os.readlink(path)

    def listdir(self, path="."):
        return sorted(os.listdir(path))

    def mkdir(self, path, mode=0o755):
        os.mkdir(path, mode)

    def utime(self, path, atime_ns, mtime_ns):
        os.utime(path, ns=(atime_ns, mtime_ns))


def _read_exact(f, n):
    """n bytes from f into a new bytearray, or fewer at EOF (f may be a raw pipe)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = f.readinto(view[got:])
        if not k:
            break
        got += k
    del view
    if got < n:
        del buf[got:]
    return buf


def _write_all(f, data):
    view = memoryview(data)
    while view:
        view = view[f.write(view):]


def _widen(f):
    """Megabytes of file contents cross the pipes: a wide pipe costs fewer wake-ups."""
    try:
        fcntl.fcntl(f.fileno(), fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    except OSError:
        pass                              # a narrower pipe is slower, not wrong


class _Pickler(pickle.Pickler):
    """Pickles a message with its large byte strings left out (sent raw after it): each copy of
    megabytes costs milliseconds on these machines."""

    def __init__(self, f):
        super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
        self.blobs = []

    def persistent_id(self, obj):
        if type(obj) in (bytes, bytearray) and len(obj) >= BLOB_MIN:
            self.blobs.append(obj)
            return len(self.blobs) - 1
        return None


def _send(f, obj):
    """Frame: pickle length, blob count, blob lengths, the pickle, the blobs."""
    body = io.BytesIO()
    p = _Pickler(body)
    p.dump(obj)
    body = body.getbuffer()
    head = HEADER.pack(len(body), len(p.blobs)) + b"".join(BLOB_LEN.pack(len(b)) for b in p.blobs)
    _write_all(f, head + body)
    for b in p.blobs:
        _write_all(f, b)
    f.flush()


def _recv(f):
    """The message _send framed (its blobs come back as bytearrays), or None at EOF."""
    head = _read_exact(f, HEADER.size)
    if len(head) < HEADER.size:
        return None
    n, nblobs = HEADER.unpack(head)
    lens = [BLOB_LEN.unpack(_read_exact(f, BLOB_LEN.size))[0] for _ in range(nblobs)]
    body = _read_exact(f, n)
    blobs = [_read_exact(f, k) for k in lens]
    if len(body) < n or any(len(b) < k for b, k in zip(blobs, lens)):
        return None
    u = pickle.Unpickler(io.BytesIO(body))
    u.persistent_load = blobs.__getitem__
    return u.load()


def serve():
    # Die with the test process, whatever happens to it.
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(sys.argv[1]):
        os._exit(1)                       # the parent died before prctl took effect
    rx = os.fdopen(0, "rb", buffering=1 << 16)
    tx = os.fdopen(1, "wb", buffering=1 << 16)
    sys.stdout = sys.stderr               # a stray print must not corrupt the wire
    agent = Agent()
    while True:
        req = _recv(rx)
        if req is None:
            os._exit(0)                   # the test is done with this node: exit at once
        cmd, args = req
        try:
            reply = ("ok", getattr(agent, cmd)(*args))
        except OSError as e:
            reply = ("oserror", e.errno, e.strerror)
        except Exception:  # noqa: BLE001 - reported to the test as a broken command
            reply = ("crash", traceback.format_exc())
        _send(tx, reply)


# ---- the test's side -----------------------------------------------------------------------------

COMMANDS = {name for name in vars(Agent) if not name.startswith("_")}


class Node:
    """A node agent working in directory cwd; node.CMD(*args) runs Agent.CMD there and returns
    its value, or raises the OSError (same errno) it raised. `node.errno_of(CMD, *args)` returns
    0 or the errno instead. Names are relative to cwd, so a scenario is written once for every
    side."""

    def __init__(self, name, cwd):
        self.name, self.cwd = name, cwd
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), str(os.getpid())], cwd=cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        for f in (self.proc.stdin, self.proc.stdout):
            _widen(f)

    def __repr__(self):
        return "Node(%s in %s)" % (self.name, self.cwd)

    def call(self, cmd, *args):
        assert cmd in COMMANDS, "node agents have no command %r" % cmd
        if self.proc.poll() is not None:
            raise AssertionError("node %s is gone (exit status %s)" % (self.name, self.proc.returncode))
        try:
            _send(self.proc.stdin, (cmd, args))
        except BrokenPipeError:
            raise AssertionError("node %s died before %s%r (exit status %s)"
                                 % (self.name, cmd, _short(args), self.proc.wait(10))) from None
        ready, _, _ = select.select([self.proc.stdout], [], [], CALL_DEADLINE)
        if not ready:
            self.kill()
            raise AssertionError("node %s: %s%r did not answer within %.0f s (hung on the file system?)"
                                 % (self.name, cmd, _short(args), CALL_DEADLINE))
        reply = _recv(self.proc.stdout)
        if reply is None:
            raise AssertionError("node %s died during %s%r (exit status %s)"
                                 % (self.name, cmd, _short(args), self.proc.wait(10)))
        if reply[0] == "ok":
            return reply[1]
        if reply[0] == "oserror":
            raise OSError(reply[1], "node %s: %s%r: %s" % (self.name, cmd, _short(args), reply[2]))
        raise AssertionError("node %s: %s%r raised:\n%s" % (self.name, cmd, _short(args), reply[1]))

    def errno_of(self, cmd, *args):
        """0 if the command succeeded (a descriptor it opened is closed again), else its errno."""
        try:
            r = self.call(cmd, *args)
        except OSError as e:
            return e.errno
        if cmd == "open":
            self.call("close", r)
        return 0

    def __getattr__(self, cmd):
        if cmd in COMMANDS:
            return lambda *args: self.call(cmd, *args)
        raise AttributeError(cmd)

    def hang_up(self):
        """Tells the agent to exit (EOF on its commands); stop() waits for it."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def stop(self):
        """Ends the agent (its descriptors and maps close with it): EOF, then SIGKILL if it
        lingers."""
        self.hang_up()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.kill()
        self.proc.stdout.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _short(args):
    """args for a message, with bulk data shown by its length."""
    return tuple("<%d bytes>" % len(a) if isinstance(a, (bytes, bytearray)) and len(a) > 40 else
                 "<%d pieces>" % len(a) if isinstance(a, list) and len(a) > 8 else a for a in args)


if __name__ == "__main__":
    serve()

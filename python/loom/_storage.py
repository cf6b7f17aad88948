"""Where a dataset's bytes come from: a local (or mounted) folder through the kernel, or Loom
through libloom. Both read whole files and byte ranges, and keep the files they read ranges of
open, one set per process (a DataLoader worker opens its own)."""

import builtins
import fnmatch
import os
import warnings
import weakref


def glob_walk(walk, root, pattern, recursive):
    """glob over a walk that yields as os.walk does (os.walk, FileSystem.walk): the files, not
    the directories nor symlinks to them."""
    found = []
    for dirpath, _, files in walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            if fnmatch.fnmatchcase(os.path.relpath(p, root) if recursive else name, pattern):
                found.append(p)
        if not recursive:
            break
    return sorted(found)


def _raise(err):
    raise err  # os.walk stays silent about a root that cannot be read: a dataset must not


class LocalStorage:
    """Files through the kernel: a local folder, or a Loom mount used as any folder."""

    native = False

    def __init__(self):
        self._fds = {}
        self._pid = os.getpid()

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self.__init__()

    def open(self, path, mode="rb"):
        return builtins.open(path, mode)

    def read_file(self, path):
        with builtins.open(path, "rb", buffering=0) as f:
            return f.readall()

    def _fd(self, path):
        if self._pid != os.getpid():
            self._fds, self._pid = {}, os.getpid()
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        return fd

    def read_range(self, path, offset, length):
        fd = self._fd(path)
        out = os.pread(fd, length, offset)
        while len(out) < length:
            more = os.pread(fd, length - len(out), offset + len(out))
            if not more:
                break
            out += more
        return out

    def size(self, path):
        return os.stat(path).st_size

    def glob(self, root, pattern="*", recursive=False):
        return glob_walk(lambda top: os.walk(top, onerror=_raise), root, pattern, recursive)

    def makedirs(self, path):
        os.makedirs(path, exist_ok=True)

    def rename(self, src, dst):
        os.rename(src, dst)

    def remove(self, path):
        os.remove(path)

    def sync_dir(self, path):
        """Makes the directory's entries durable (a rename into it), as fsync of it does."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self):
        if self._pid == os.getpid():
            for fd in self._fds.values():
                os.close(fd)
        self._fds = {}


class LoomStorage:
    """Files through libloom, with a connection per process (loom.FileSystem reconnects after
    fork), and prefetch."""

    native = True

    def __init__(self, fs):
        self.fs = fs
        self._files = {}
        self._pid = os.getpid()

    def __getstate__(self):
        return {"fs": self.fs}

    def __setstate__(self, state):
        self.__init__(state["fs"])

    def open(self, path, mode="rb"):
        return self.fs.open(path, mode)

    def read_file(self, path):
        with self.fs.open(path, "rb") as f:
            return f.read()

    def read_range(self, path, offset, length):
        if self._pid != os.getpid():
            self._files, self._pid = {}, os.getpid()
        f = self._files.get(path)
        if f is None:
            f = self._files[path] = self.fs.open(path, "rb")
        return f._pread(length, offset)

    def size(self, path):
        return self.fs.stat(path).st_size

    def glob(self, root, pattern="*", recursive=False):
        return self.fs.glob(root, pattern, recursive)

    def makedirs(self, path):
        self.fs.makedirs(path, exist_ok=True)

    def rename(self, src, dst):
        self.fs.rename(src, dst)

    def remove(self, path):
        self.fs.remove(path)

    def sync_dir(self, path):
        """Has the MDS commit every change of this connection (the rename into path too)."""
        self.fs.sync()

    def prefetch(self, items, **kw):
        return self.fs.prefetch(items, **kw)

    def close(self):
        if self._pid == os.getpid():
            for f in self._files.values():
                f.close()
        self._files = {}


# (mountpoint, source) -> the loom.FileSystem storage_for made, while something uses it.
_connections = weakref.WeakValueDictionary()


def storage_for(root, native=None, fs=None):
    """LoomStorage when fs is given, or native is not False and root is on a Loom mount;
    else LocalStorage. native=True insists on Loom."""
    if fs is not None and native is not False:
        return LoomStorage(fs)
    if native is False:
        return LocalStorage()
    from ._fs import KEY_ERRNOS, connect, mount_of
    root = os.path.abspath(root)
    found = mount_of(root)
    if found is not None:
        try:
            # One connection per mount while one is in use: a checkpoint save each time would
            # otherwise connect (and authenticate) again, in the training loop's wait.
            fs = _connections.get(found)
            if fs is None:
                fs = _connections[found] = connect(found[0])
            return LoomStorage(fs)
        except PermissionError as e:
            if native or e.errno not in KEY_ERRNOS:
                raise
            # A user without the key reads through the mount, as any program does.
            warnings.warn("loom: reading %s through the mount, not natively: %s" % (root, e),
                          stacklevel=3)
            return LocalStorage()
    if native:
        raise OSError(19, "not on a Loom mount (give fs= to read through libloom)", root)
    return LocalStorage()

"""loom.FileSystem: a connection to one Loom file system, and what it can do without a mount."""

import ctypes
import errno
import os
import stat as stat_mod
import threading
import weakref
from dataclasses import dataclass, field

from . import _lib
from ._file import File, _error
from ._lib import lib
from ._storage import glob_walk

MOUNT_TYPE = "fuse.loom"


def stat_result(st):
    """An os.stat_result from a struct loom_attr."""
    a = st.atime_sec * 1_000_000_000 + st.atime_nsec
    m = st.mtime_sec * 1_000_000_000 + st.mtime_nsec
    c = st.ctime_sec * 1_000_000_000 + st.ctime_nsec
    # The float times as CPython's os.stat computes them (sec + nsec * 1e-9), to the last bit.
    return os.stat_result((st.mode, st.ino, st.dev, st.nlink, st.uid, st.gid, st.size,
                           st.atime_sec, st.mtime_sec, st.ctime_sec,
                           st.atime_sec + st.atime_nsec * 1e-9, st.mtime_sec + st.mtime_nsec * 1e-9,
                           st.ctime_sec + st.ctime_nsec * 1e-9, a, m, c, st.blksize, st.blocks,
                           st.rdev))


def _key_path(key_file):
    """The key file loom_connect_with chooses: key_file, $LOOM_KEY_FILE, /etc/loom/loom.key."""
    path = key_file or os.environ.get("LOOM_KEY_FILE")
    if path is None and os.path.exists("/etc/loom/loom.key"):
        path = "/etc/loom/loom.key"
    return path


def _key_refusal(key_file):
    """Why libloom refused the key file it chose (as loom_connect_with chooses it), or None."""
    path = _key_path(key_file)
    if not path:
        return None
    buf = ctypes.create_string_buffer(2 * 4096 + 160)   # 2 * PATH_MAX + 160, as loom.h says
    if lib.loom_key_refusal(os.fsencode(path), buf, len(buf)) != 0:
        return None
    return os.fsdecode(buf.value)


# Errors of a connection refused for want of the key: the caller is told the ways in.
KEY_ERRNOS = (errno.EACCES, errno.EPERM, errno.ENOKEY, errno.ENOENT, errno.EKEYREJECTED)


def _mount_of_mds(mds):
    """The first Loom mount of the file system whose MDS is mds, or None."""
    return next((m for m, src in loom_mounts() if _mds_of_source(src)[0] == mds), None)


def _ways_in(mds, mountpoint):
    """The sentence that follows a refusal for want of the key: both ways in, for this user."""
    if mountpoint is None:
        mountpoint = _mount_of_mds(mds)
    way = ("the door of its mount at %s, which root's loom-mount serves (the package goes "
           "through it as this user, natively; a mount made with nodoor has none), or that "
           "mount itself, with open() and the usual tools" % mountpoint if mountpoint else
           "a mount of it on this node (mount -t loom %s:/FSNAME /mnt/loom, as root): the "
           "package then goes through the mount's door, as this user; there is no Loom mount "
           "of it here" % mds)
    return ("The ways in: the file system's key (key_file=, $LOOM_KEY_FILE or /etc/loom/loom.key, "
            "which only its owner may read: docs/python.md, \"Who may connect\"), or %s" % way)


def _unescape(s):
    # /proc/self/mounts escapes space, tab, newline and backslash as octal.
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 3 < len(s) and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def loom_mounts():
    """[(mountpoint, source)] of every Loom mount this process sees."""
    found = []
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[2] == MOUNT_TYPE:
                    found.append((_unescape(parts[1]), _unescape(parts[0])))
    except OSError:
        pass
    return found


def mount_of(path):
    """(mountpoint, source) of the Loom mount that holds path, or None."""
    real = os.path.realpath(path)
    best = None
    for mnt, src in loom_mounts():
        if real == mnt or real.startswith(mnt.rstrip("/") + "/"):
            if best is None or len(mnt) > len(best[0]):
                best = (mnt, src)
    return best


def _mds_of_source(source):
    # LIST:/FSNAME (the mount's source) -> (LIST, FSNAME). LIST is any list libloom takes
    # (HOST:PORT, mds1,mds2, mds1@tcp:mds2@tcp): hosts hold no "/", so the first ":/" ends it.
    if ":/" in source:
        addr, fsname = source.split(":/", 1)
        return addr, fsname or None
    return source, None


@dataclass
class Layout:
    """A file's layout, or a directory's default (is_default), as `loom getstripe` shows it."""
    stripe_count: int
    stripe_size: int
    stripe_offset: int
    pattern: str = "raid0"
    layout_gen: int = 0
    pool: str = ""
    dom_size: int = 0
    is_default: bool = False
    inherited: bool = False
    objects: list = field(default_factory=list)  # [(ost_idx, objid)] for a file, mirror by mirror
    mirror_count: int = 1                         # copies (0 in a default: inherited)
    stale: list = field(default_factory=list)     # indexes into objects of copies not in sync
    write_pending: bool = False                   # a mirrored file's writers: copies may differ
    ec_parity: int = 0                            # erasure coding: parity objects after the data
    def osts(self):
        return [o for o, _ in self.objects]


@dataclass
class DirEntry:
    """An entry of FileSystem.scandir(), as os.DirEntry gives (without a stat cache)."""
    name: str
    path: str
    inode_number: int
    d_type: int

    def inode(self):
        return self.inode_number

    def is_dir(self):
        return self.d_type == 4   # DT_DIR

    def is_file(self):
        return self.d_type == 8   # DT_REG

    def is_symlink(self):
        return self.d_type == 10  # DT_LNK


_MODES = {"r": os.O_RDONLY, "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
          "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND, "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL}


def _open_flags(mode):
    kinds = [c for c in mode if c in "rwax"]
    if (len(kinds) != 1 or any(c not in "rwaxbt+" for c in mode) or ("b" in mode and "t" in mode)
            or len(set(mode)) != len(mode)):
        raise ValueError("invalid mode: %r" % mode)
    flags = _MODES[kinds[0]]
    if "+" in mode:
        flags = (flags & ~os.O_ACCMODE) | os.O_RDWR
    return flags


class FileSystem:
    """A connection to a Loom file system, from loom.connect().

    Paths are the file system's ("/data/x.npy"; relative ones start at its root). When the
    connection was found from a mount, paths under that mount ("/mnt/loom/data/x.npy", or
    relative ones from a working directory inside it) are accepted too and mean the same files. The object may be used by many threads at once.
    A process forked from the one that connected (a DataLoader worker) connects again on its first
    call: a connection's threads do not survive fork. Pickling keeps only how to connect.
    """

    def __init__(self, mds, fsname=None, key_file=None, recovery_seconds=0, mountpoint=None,
                 door=None):
        self.mds = mds
        self._door = door
        self.mountpoint = mountpoint
        self._lock = threading.Lock()
        self._h = None
        self._pid = None
        self._closed = False
        self._children = weakref.WeakSet()  # open Files and running Prefetchers
        # How many of them are open, counted apart from the WeakSet: when the garbage collector
        # takes this object and its files in one cycle, it clears the weak references before any
        # finalizer runs, and a file closed after the disconnect would use freed memory. So a
        # finalizer that finds files still open leaves the disconnect to the last one's close.
        self._live = 0
        self.via_door = False  # connected through a mount's door (no key), as this user
        self._disconnect_at_last = False
        self._fsname = fsname
        self._key_file = key_file
        self._recovery = recovery_seconds
        self._handle()

    def __reduce__(self):
        return (FileSystem, (self.mds, self._fsname, self._key_file, self._recovery, self.mountpoint,
                             self._door))

    def _handle(self):
        h = self._h
        if h is not None and self._pid == os.getpid():
            return h
        if self._closed:
            raise ValueError("operation on a closed loom.FileSystem")
        with self._lock:
            if self._h is not None and self._pid == os.getpid():
                return self._h
            opts = _lib.ConnectOpts(self._fsname.encode() if self._fsname else None,
                                    os.fsencode(self._key_file) if self._key_file else None,
                                    self._recovery)
            out = ctypes.c_void_p()
            if self._door:
                return self._through_door(out)
            rc = lib.loom_connect_with(self.mds.encode(), ctypes.byref(opts), ctypes.byref(out))
            if rc < 0:
                # libloom's sentence names the address that said what (a list has several).
                why = ((_key_refusal(self._key_file) if rc == -errno.EPERM else None)
                       or os.fsdecode(lib.loom_connect_error() or b"") or os.strerror(-rc))
                if rc == -errno.ENOKEY:
                    why = "this user (uid %d) may not read the key file %s" % (
                        os.getuid(), _key_path(self._key_file))
                elif rc == -errno.ENOENT:
                    why = "there is no key file at %s" % _key_path(self._key_file)
                msg = "cannot connect to the Loom MDS at %s: %s" % (self.mds, why)
                if -rc in KEY_ERRNOS and self._door is None:
                    # Without the key: through the door of this node's mount, as this user.
                    mnt = self.mountpoint or _mount_of_mds(self.mds)
                    if mnt is not None:
                        drc, dwhy = self._door_connect(mnt, out)
                        if drc == 0:
                            return self._h
                        msg += "; nor through the door of its mount at %s: %s" % (mnt, dwhy)
                    # A permission problem, whatever libloom's errno (ENOKEY, EKEYREJECTED).
                    cls = FileNotFoundError if rc == -errno.ENOENT else PermissionError
                    raise cls(-rc, "%s. %s" % (msg, _ways_in(self.mds, self.mountpoint)))
                raise OSError(-rc, msg)
            self._h, self._pid = out.value, os.getpid()
            self._jobid_settings(self._h)
            return self._h

    def _jobid_settings(self, h):
        """The job id settings of the mount this connection was found from (or of this file
        system's mount here), so that this process's requests are tagged as its requests through
        the mount are; without a mount (or one too old to say), libloom's defaults. Either way
        $LOOM_JOBID_VAR and $LOOM_JOBID_NAME win (docs/operations.md, "Job statistics")."""
        mnt = self.mountpoint or _mount_of_mds(self.mds)
        if mnt is not None:
            lib.loom_jobid_from_mount(h, os.fsencode(mnt))  # an error leaves the defaults

    @property
    def jobid(self):
        """The job id this process's requests carry ("" for none), as the servers count them
        (`loom jobstats`). Through a mount's door, the mount tags them itself, with its settings:
        this is then what libloom would have sent."""
        buf = ctypes.create_string_buffer(_lib.LOOM_JOBID_LEN)
        lib.loom_jobid(self._handle(), buf, len(buf))
        return buf.value.decode("ascii", "replace")

    def _door_connect(self, mnt, out):
        """Connects through the door of the mount at mnt (under self._lock): (0, None), the
        handle kept, or (the negative errno, libloom's sentence why)."""
        rc = lib.loom_connect_mount(os.fsencode(mnt), ctypes.byref(out))
        if rc < 0:
            return rc, os.fsdecode(lib.loom_connect_error() or b"") or os.strerror(-rc)
        self._h, self._pid, self.via_door = out.value, os.getpid(), True
        self._jobid_settings(self._h)  # for .jobid only: the mount tags this session's requests
        return 0, None

    def _through_door(self, out):
        """door=True: the mount's door only, key or not (under self._lock)."""
        if self.mountpoint is None:
            raise ValueError("door=True needs a path on a Loom mount, not an MDS address")
        rc, why = self._door_connect(self.mountpoint, out)
        if rc < 0:
            raise OSError(-rc, "cannot connect through the door of the mount at %s: %s"
                          % (self.mountpoint, why))
        return self._h

    @property
    def fsname(self):
        return lib.loom_fsname(self._handle()).decode()

    def close(self, _wait=True):
        """Closes the files still open and stops the prefetchers (which use the connection),
        has the MDS commit what this connection changed (waiting for an MDS that is away, as
        any call does), then disconnects. The object is unusable afterwards."""
        self._closed = True
        for child in list(self._children):
            try:
                child.close()
            except Exception:  # noqa: BLE001 - a file's last report failing must not keep the rest open
                pass
        with self._lock:
            h, self._h = self._h, None
            if h is not None and self._pid == os.getpid():
                (lib.loom_disconnect if _wait else lib.loom_disconnect_nowait)(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            with self._lock:
                if self._live > 0:
                    self._closed = self._disconnect_at_last = True
                    return
            # Collected, not closed: nothing asked for durability here, and a program's exit
            # must not wait for an MDS that is away (loom_disconnect_nowait).
            self.close(_wait=False)
        except Exception:
            pass

    def _child_opened(self):
        with self._lock:
            self._live += 1

    def _child_closed(self):
        """A File or Prefetcher of this connection has let go of it (after its last call)."""
        with self._lock:
            self._live -= 1
            if self._live > 0 or not self._disconnect_at_last:
                return
            h, self._h = self._h, None
            if h is not None and self._pid == os.getpid():
                lib.loom_disconnect_nowait(h)  # the collector's, as in __del__

    def __repr__(self):
        where = " mounted on %s" % self.mountpoint if self.mountpoint else ""
        return "<loom.FileSystem mds=%s%s>" % (self.mds, where)

    # -- paths --

    def fspath(self, path):
        """The file system's own path for path (as bytes, for libloom)."""
        p = os.fsdecode(os.fspath(path))
        m = self.mountpoint.rstrip("/") if self.mountpoint else ""
        if m and not os.path.isabs(p) and os.path.abspath(p).startswith(m + "/"):
            p = os.path.abspath(p)  # relative to a working directory inside the mount
        if m and os.path.isabs(p) and p != m and not p.startswith(m + "/"):
            real = os.path.realpath(p)  # through a symlink to the mount, or to inside it
            if real == m or real.startswith(m + "/"):
                p = real
        if m and os.path.isabs(p):
            if p == m:
                p = "/"
            elif p.startswith(m + "/"):
                p = p[len(m):]
        return os.fsencode(p)

    def _call(self, rc, *paths):
        if rc < 0:
            names = [os.fsdecode(os.fspath(p)) for p in paths]
            if len(names) == 2:
                raise OSError(-rc, os.strerror(-rc), names[0], None, names[1])
            raise _error(rc, names[0] if names else None)
        return rc

    # -- names and attributes --

    def stat(self, path, follow_symlinks=True):
        fn = lib.loom_stat if follow_symlinks else lib.loom_lstat
        rc, st = _lib.stat_call(fn, self._handle(), self.fspath(path))
        self._call(rc, path)
        return stat_result(st)

    def lstat(self, path):
        return self.stat(path, follow_symlinks=False)

    # As os.path's: False for any error (a name too long, no permission), not an exception.
    def exists(self, path):
        try:
            self.stat(path)
            return True
        except (OSError, ValueError):
            return False

    def isdir(self, path):
        try:
            return stat_mod.S_ISDIR(self.stat(path).st_mode)
        except (OSError, ValueError):
            return False

    def isfile(self, path):
        try:
            return stat_mod.S_ISREG(self.stat(path).st_mode)
        except (OSError, ValueError):
            return False

    def getsize(self, path):
        return self.stat(path).st_size

    def mkdir(self, path, mode=0o777):
        self._call(lib.loom_mkdir(self._handle(), self.fspath(path), mode), path)

    def makedirs(self, path, mode=0o777, exist_ok=False):
        p = os.fsdecode(self.fspath(path))
        parts = [x for x in p.split("/") if x]
        for i in range(1, len(parts) + 1):
            sub = "/" + "/".join(parts[:i])
            try:
                self.mkdir(sub, mode)
            except FileExistsError as e:
                if i == len(parts) and (not exist_ok or not self.isdir(sub)):
                    e.filename = os.fsdecode(os.fspath(path))
                    raise

    def sync(self):
        """Returns once the MDS has committed every change it answered this connection (the MDS
        answers changes before they are on its disk, and this process would replay them should
        the MDS crash first): what os.sync() does for a local file system. File.fsync() does it
        too, after making the file's bytes durable."""
        self._call(lib.loom_sync(self._handle()))

    def rmdir(self, path):
        self._call(lib.loom_rmdir(self._handle(), self.fspath(path)), path)

    def remove(self, path):
        self._call(lib.loom_unlink(self._handle(), self.fspath(path)), path)

    unlink = remove

    def rename(self, src, dst):
        """Replaces dst if it exists (as os.rename and os.replace on Linux), atomically."""
        self._call(lib.loom_rename(self._handle(), self.fspath(src), self.fspath(dst), 0), src, dst)

    replace = rename

    def symlink(self, target, linkpath):
        self._call(lib.loom_symlink(self._handle(), os.fsencode(target), self.fspath(linkpath)), linkpath)

    def readlink(self, path):
        cap = 4096
        buf = ctypes.create_string_buffer(cap)
        n = ctypes.c_size_t()
        self._call(lib.loom_readlink(self._handle(), self.fspath(path), buf, cap, ctypes.byref(n)), path)
        return os.fsdecode(buf.raw[:n.value])

    def chmod(self, path, mode):
        self._call(lib.loom_chmod(self._handle(), self.fspath(path), mode), path)

    def truncate(self, path, length):
        self._call(lib.loom_truncate(self._handle(), self.fspath(path), length), path)

    def statvfs(self, path="/"):
        rc, sv = _lib.statvfs_call(lib.loom_statfs, self._handle())
        self._call(rc)
        return os.statvfs_result((sv.bsize, sv.frsize, sv.blocks, sv.bfree, sv.bavail,
                                  sv.files, sv.ffree, sv.favail, sv.flag, sv.namemax))

    # -- directories --

    def scandir(self, path="/"):
        """The entries of a directory, without "." and "..", in the MDS's order."""
        d = ctypes.c_void_p()
        self._call(lib.loom_opendir(self._handle(), self.fspath(path), ctypes.byref(d)), path)
        base = os.fsdecode(os.fspath(path))
        entries = []
        try:
            ent = _lib.Dirent()
            while True:
                rc = self._call(lib.loom_readdir(d, ctypes.byref(ent)), path)
                if rc == 0:
                    break
                name = os.fsdecode(ent.name)
                if name in (".", ".."):
                    continue
                entries.append(DirEntry(name, os.path.join(base, name), ent.ino, ent.type))
        finally:
            lib.loom_closedir(d)
        return entries

    def listdir(self, path="/"):
        return [e.name for e in self.scandir(path)]

    def _is_dir_entry(self, e):
        return e.is_dir() or (e.is_symlink() and self.isdir(e.path))

    def walk(self, top="/"):
        """As os.walk: top-down; a symlink to a directory is listed among the directories but
        not descended into."""
        top = os.fsdecode(os.fspath(top))
        entries = self.scandir(top)
        dirs = [e.name for e in entries if self._is_dir_entry(e)]
        files = [e.name for e in entries if not self._is_dir_entry(e)]
        yield top, dirs, files
        for e in entries:
            if e.is_dir():
                yield from self.walk(os.path.join(top, e.name))

    def glob(self, root, pattern="*", recursive=False):
        """Sorted paths of the files in root (recursive: under it) whose name (recursive: path
        relative to root) matches pattern (fnmatch)."""
        return glob_walk(self.walk, os.fsdecode(os.fspath(root)), pattern, recursive)

    # -- files --

    def open(self, path, mode="r", buffering=-1, encoding=None, errors=None, newline=None, *,
             layout=None):
        """As the builtin open(): "rb" gives a loom.File that np.load, torch.load and zipfile
        accept; text modes wrap it in io.TextIOWrapper. layout (a dict of setstripe's keywords:
        stripe_count, stripe_size, stripe_offset, pool) lays out a file this call creates."""
        import io
        flags = _open_flags(mode)
        out = ctypes.c_void_p()
        p = self.fspath(path)
        if layout is not None and flags & os.O_CREAT:
            lay = _request_layout(**layout)
            rc = lib.loom_create(self._handle(), p, flags, 0o666, ctypes.byref(lay), ctypes.byref(out))
        else:
            rc = lib.loom_open(self._handle(), p, flags, 0o666, ctypes.byref(out))
        self._call(rc, path)
        _, st = _lib.stat_call(lib.loom_file_attr, out.value)
        if stat_mod.S_ISDIR(st.mode):  # as open(2) of a directory for reading, in Python
            lib.loom_close(out.value)
            raise IsADirectoryError(21, os.strerror(21), os.fsdecode(os.fspath(path)))
        f = File(self, out.value, os.fsdecode(os.fspath(path)), mode, flags)
        self._children.add(f)
        self._child_opened()
        if "b" in mode:
            return f
        return io.TextIOWrapper(f, encoding=encoding, errors=errors, newline=newline)

    def read_bytes(self, path):
        """The whole file, as Path.read_bytes()."""
        with self.open(path, "rb") as f:
            return f.read()

    def write_bytes(self, path, data):
        with self.open(path, "wb") as f:
            return f.write(data)

    # -- layouts --

    def getstripe(self, path):
        """The layout of a file, or a directory's default for new files (loom getstripe)."""
        out = ctypes.POINTER(_lib.Layout)()
        self._call(lib.loom_getlayout(self._handle(), self.fspath(path), ctypes.byref(out)), path)
        try:
            lay = out.contents
            objs = ctypes.cast(ctypes.addressof(lay) + ctypes.sizeof(_lib.Layout),
                               ctypes.POINTER(_lib.OstObj))
            # A default that leaves the stripe size to inherit shows the built-in one, as
            # `loom getstripe` does.
            size = lay.stripe_size or (_lib.LOOM_DEFAULT_STRIPE_SIZE if lay.flags & _lib.LOOM_LAYOUT_DEFAULT else 0)
            return Layout(stripe_count=lay.stripe_count, stripe_size=size,
                          stripe_offset=lay.stripe_offset, layout_gen=lay.layout_gen,
                          pool=lay.pool.decode(), dom_size=lay.dom_size,
                          is_default=bool(lay.flags & _lib.LOOM_LAYOUT_DEFAULT),
                          inherited=bool(lay.flags & _lib.LOOM_LAYOUT_INHERITED),
                          objects=[(objs[k].ost_idx, objs[k].objid) for k in range(lay.nobjs)],
                          mirror_count=lay.mirror_count,
                          stale=[k for k in range(lay.nobjs) if objs[k].flags & _lib.LOOM_OBJ_STALE],
                          write_pending=bool(lay.flags & _lib.LOOM_LAYOUT_WRITE_PENDING),
                          ec_parity=lay.ec_parity)
        finally:
            lib.loom_layout_free(out)

    def setstripe(self, path, stripe_count=0, stripe_size=0, stripe_offset=-1, pool="", dom_size=0,
                  mirror_count=0, ec=None):
        """As `loom setstripe` (lfs setstripe): on a directory, the default for new files in it;
        on a path that does not exist, a new empty file with that layout. stripe_count -1 is
        every OST; 0 and 0 / -1 / "" inherit. mirror_count N keeps N copies (-N); ec=(K, M)
        erasure-codes K data stripes with M parity objects (--ec K+M)."""
        lay = _request_layout(stripe_count, stripe_size, stripe_offset, pool, dom_size, mirror_count)
        if ec is not None:
            k, m = ec
            if mirror_count > 1 or (stripe_count and stripe_count != k) or k < 1 or m < 1:
                raise ValueError("ec=(K, M): K data stripes, M >= 1 parity objects, one copy")
            lay.stripe_count, lay.ec_parity, lay.mirror_count = k, m, 1
        self._call(lib.loom_setlayout(self._handle(), self.fspath(path), ctypes.byref(lay)), path)

    def mirror_resync(self, path, timeout=0):
        """As `loom mirror resync`: has the MDS copy path's stale copies again and waits until none
        is stale (timeout seconds at most; 0: no limit)."""
        self._call(lib.loom_mirror_resync(self._handle(), self.fspath(path), int(timeout)), path)

    def mirror_extend(self, path):
        """As `loom mirror extend`: one more copy of path, filled by the MDS in the background."""
        self._call(lib.loom_mirror_extend(self._handle(), self.fspath(path)), path)

    def mirror_split(self, path, mirror_id):
        """As `loom mirror split -d --mirror-id ID`: that copy goes, its objects destroyed."""
        self._call(lib.loom_mirror_split(self._handle(), self.fspath(path), int(mirror_id)), path)

    def mirror_verify(self, path):
        """As `loom mirror verify` (`loom ec verify`): compares every in-sync copy of path, or checks
        an erasure-coded file's objects against the code. None when they agree, else (mirror_a,
        mirror_b, offset) of the first difference; for an erasure-coded file (0, index + 1 of the
        object that disagrees, the file offset of its row's bytes there)."""
        d = _lib.MirrorDiff()
        self._call(lib.loom_mirror_verify(self._handle(), self.fspath(path), ctypes.byref(d)), path)
        return (d.mirror_a, d.mirror_b, d.offset) if d.differ else None

    def delstripe(self, path):
        """Removes a directory's own default layout (loom setstripe -d)."""
        self._call(lib.loom_dellayout(self._handle(), self.fspath(path)), path)

    # -- reading ahead --

    def prefetch(self, items, max_bytes=256 << 20, threads=16, max_ahead=0):
        """A Prefetcher that reads items (paths, or (path, offset, length) ranges) ahead in this
        order, holding at most max_bytes."""
        from ._prefetch import Prefetcher
        return Prefetcher(self, items, max_bytes=max_bytes, threads=threads, max_ahead=max_ahead)


def _request_layout(stripe_count=0, stripe_size=0, stripe_offset=-1, pool="", dom_size=0, mirror_count=0):
    lay = _lib.Layout()
    lay.mirror_count = mirror_count
    lay.pattern = 1
    lay.stripe_count = stripe_count
    lay.stripe_size = stripe_size
    lay.stripe_offset = stripe_offset
    lay.pool = (pool or "").encode()
    lay.dom_size = dom_size
    return lay


def connect(target=None, *, fsname=None, key_file=None, recovery_seconds=0, door=None):
    """Connects to a Loom file system.

    target is a path on a Loom mount ("/mnt/loom"; its MDS is found from the mount, and paths
    under the mount are accepted), an MDS address ("HOST", "HOST:PORT"), a failover list of them
    ("mds1,mds2:9901", Lustre's "mds1@tcp:mds2@tcp") or a mount source ("HOST:PORT:/FSNAME",
    "mds1@tcp,mds2@tcp:/lfs01"). Without one: $LOOM_MDS, else the first Loom mount. The key is key_file,
    else $LOOM_KEY_FILE, else /etc/loom/loom.key (as for `loom` and `loom-mount`).

    Without a key this user may use, the connection goes through the door of the node's Loom
    mount (loom-mount does the requests as this user; docs/python.md, "Who may connect").
    door=True goes through the door only (target must be on a mount), door=False never.
    """
    mountpoint = None
    if target is None:
        target = os.environ.get("LOOM_MDS")
        if target is None:
            mounts = loom_mounts()
            if not mounts:
                raise FileNotFoundError(2, "no Loom mount here and $LOOM_MDS is not set")
            target = mounts[0][0]
    target = os.fsdecode(os.fspath(target))
    if target.startswith("/") or target.startswith(".") or os.path.exists(target):
        target = os.path.abspath(target)
        found = mount_of(target)
        if found is None:
            raise OSError(19, "not on a Loom mount", target)
        mountpoint, source = found
        mds, mfs = _mds_of_source(source)
        fsname = fsname or mfs
    else:
        mds, mfs = _mds_of_source(target)
        fsname = fsname or mfs
    return FileSystem(mds, fsname=fsname, key_file=key_file, recovery_seconds=recovery_seconds,
                      mountpoint=mountpoint, door=door)

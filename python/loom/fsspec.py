"""fsspec's `loom://` protocol, so that pandas, pyarrow and Hugging Face `datasets` read Loom.

    loom://HOST:PORT/data/train.csv     the file system whose MDS is at HOST:PORT (a failover
                                        list "mds1,mds2:9901" too), its own path /data/train.csv
    loom:///mnt/loom/data/train.csv     the file system mounted at /mnt/loom (its own path
                                        /data/train.csv, as every name this class gives)
    loom:///data/train.csv              $LOOM_MDS's file system, else the first Loom mount's

Installed with pip, fsspec finds this class through the package's entry point; from a source
tree, `import loom.fsspec` registers it. Reads and writes go through libloom (loom.connect), not
through a mount, so they need the key as loom.connect does. Storage options: key_file, fsname,
recovery_seconds (loom.connect's).
"""

import datetime
import os
import stat as stat_mod

from fsspec import AbstractFileSystem, register_implementation
from fsspec.utils import infer_storage_options

from ._fs import connect, loom_mounts, mount_of

COPY_CHUNK = 8 << 20


def _kind(mode):
    if stat_mod.S_ISDIR(mode):
        return "directory"
    if stat_mod.S_ISREG(mode):
        return "file"
    return "other"


class LoomFileSystem(AbstractFileSystem):
    """A Loom file system for fsspec: ls, info, open, ranged cat_file, and the usual changes."""

    protocol = "loom"
    root_marker = "/"

    def __init__(self, host=None, key_file=None, fsname=None, recovery_seconds=0, **kwargs):
        super().__init__(**kwargs)
        self.host = host or None
        self._lfs = connect(self.host, key_file=key_file, fsname=fsname,
                            recovery_seconds=recovery_seconds)

    @classmethod
    def _strip_protocol(cls, path):
        """The file system's own path: a path on a Loom mount loses the mount point."""
        path = os.fspath(path) if not isinstance(path, str) else path
        if path.startswith("loom://"):
            path = infer_storage_options(path)["path"]
        if not path.startswith("/"):
            path = "/" + path
        # A path under a Loom mount point, by its text alone (no realpath: this runs for every
        # name fsspec hands back; a path through a symlink is mapped by loom.FileSystem.fspath).
        for mnt, _ in loom_mounts():
            m = mnt.rstrip("/")
            if path == m or path.startswith(m + "/"):
                path = path[len(m):]
                break
        return path.rstrip("/") or "/"

    @staticmethod
    def _get_kwargs_from_urls(path):
        opts = infer_storage_options(path)
        host = opts.get("host")
        if host and opts.get("port"):
            host = "%s:%s" % (host, opts["port"])
        if not host:
            found = mount_of(opts["path"])
            host = found[0] if found else None
        return {"host": host} if host else {}

    def unstrip_protocol(self, name):
        return "loom://%s%s" % ((self.host or "").rstrip("/"), name)

    # -- what is there --

    def _info_of(self, path, st, link=False):
        return {"name": path, "size": st.st_size, "type": _kind(st.st_mode), "mode": st.st_mode,
                "uid": st.st_uid, "gid": st.st_gid, "nlink": st.st_nlink, "ino": st.st_ino,
                "mtime": st.st_mtime, "created": st.st_ctime, "islink": link}

    def info(self, path, **kwargs):
        return self._info_at(self._strip_protocol(path))

    def _info_at(self, path):
        """info() of a path already the file system's own."""
        lst = self._lfs.lstat(path)
        if stat_mod.S_ISLNK(lst.st_mode):
            try:
                return self._info_of(path, self._lfs.stat(path), link=True)
            except FileNotFoundError:
                return self._info_of(path, lst, link=True)  # a dangling link, as LocalFileSystem
        return self._info_of(path, lst)

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        st = self._lfs.stat(path)
        if not stat_mod.S_ISDIR(st.st_mode):
            return [self._info_of(path, st)] if detail else [path]
        base = path.rstrip("/")
        names = sorted(base + "/" + e.name for e in self._lfs.scandir(path))
        if not detail:
            return names
        out = []
        for name in names:
            try:
                out.append(self._info_at(name))
            except FileNotFoundError:
                continue  # removed since the listing, as os.scandir + stat would skip it
        return out

    def exists(self, path, **kwargs):
        try:
            self._lfs.lstat(self._strip_protocol(path))
            return True
        except OSError:
            return False

    def modified(self, path):
        return datetime.datetime.fromtimestamp(self._lfs.stat(self._strip_protocol(path)).st_mtime,
                                               tz=datetime.timezone.utc)

    def created(self, path):
        return datetime.datetime.fromtimestamp(self._lfs.stat(self._strip_protocol(path)).st_ctime,
                                               tz=datetime.timezone.utc)

    # -- bytes --

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None,
              **kwargs):
        if not autocommit:
            raise NotImplementedError("loom:// writes are committed at close (autocommit)")
        if "b" not in mode:
            mode += "b"
        return self._lfs.open(self._strip_protocol(path), mode)

    def cat_file(self, path, start=None, end=None, **kwargs):
        """The bytes [start, end) of a file (negative: from its end), in one ranged read."""
        path = self._strip_protocol(path)
        with self._lfs.open(path, "rb") as f:
            size = None
            if (start is not None and start < 0) or (end is not None and end < 0):
                size = f.stat().st_size
            start = 0 if start is None else (max(size + start, 0) if start < 0 else start)
            if end is not None and end < 0:
                end = max(size + end, 0)
            if end is not None and end <= start:
                return b""
            f.seek(start)
            return f.read(-1 if end is None else end - start)

    def pipe_file(self, path, value, **kwargs):
        self._lfs.write_bytes(self._strip_protocol(path), value)

    def cp_file(self, path1, path2, **kwargs):
        with self._lfs.open(self._strip_protocol(path1), "rb") as src, \
                self._lfs.open(self._strip_protocol(path2), "wb") as dst:
            while True:
                chunk = src.read(COPY_CHUNK)
                if not chunk:
                    break
                dst.write(chunk)

    # -- names --

    def mkdir(self, path, create_parents=True, **kwargs):
        path = self._strip_protocol(path)
        if create_parents:
            self.makedirs(path, exist_ok=True)
        else:
            self._lfs.mkdir(path)

    def makedirs(self, path, exist_ok=False):
        self._lfs.makedirs(self._strip_protocol(path), exist_ok=exist_ok)

    def rmdir(self, path):
        self._lfs.rmdir(self._strip_protocol(path))

    def rm_file(self, path):
        """A file, or (as fsspec's rm removes what a recursive walk found, deepest first) an
        empty directory."""
        path = self._strip_protocol(path)
        if self.isdir(path):
            self._lfs.rmdir(path)
        else:
            self._lfs.remove(path)

    _rm = rm_file

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        """A rename (atomic, as os.replace) where it can be one; fsspec's copy and delete of a
        list or glob otherwise."""
        if isinstance(path1, str) and isinstance(path2, str) and not self._is_glob(path1):
            self._lfs.rename(self._strip_protocol(path1), self._strip_protocol(path2))
            return
        super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)

    @staticmethod
    def _is_glob(path):
        return any(c in path for c in "*?[")

    def chmod(self, path, mode):
        self._lfs.chmod(self._strip_protocol(path), mode)

    def sign(self, path, expiration=100, **kwargs):
        raise NotImplementedError("loom:// has no signed URLs")


register_implementation("loom", LoomFileSystem, clobber=True)

"""loom.Prefetcher: reading a known order of files or byte ranges ahead, in bounded memory."""

import ctypes
import os

from . import _lib
from ._file import _error
from ._lib import lib


class Prefetcher:
    """Reads items ahead of the caller, in the given order, from every server at once.

    items are paths (whole files) or (path, offset, length) ranges (length -1: to the end).
    take(i) returns item i's bytes; items are meant to be taken in order, and taking i gives up
    the items before it that were not taken. At most max_bytes are held (read and not taken,
    and reads in flight), by `threads` reads in flight. Made by FileSystem.prefetch().
    """

    def __init__(self, fs, items, max_bytes=256 << 20, threads=16, max_ahead=0):
        self._fs = fs
        self._pid = os.getpid()
        self._h = None
        arr = (_lib.PrefetchItem * len(items))()
        keep = []  # the encoded paths, alive until loom_prefetch_start copied them
        self.paths = []
        for k, it in enumerate(items):
            if isinstance(it, (tuple, list)):
                path, off, length = it
            else:
                path, off, length = it, 0, -1
            p = fs.fspath(path)
            keep.append(p)
            self.paths.append(os.fsdecode(os.fspath(path)))  # as the caller named it, for errors
            arr[k].path, arr[k].offset, arr[k].length = p, off, length
        opts = _lib.PrefetchOpts(max_bytes, threads, max_ahead)
        out = ctypes.c_void_p()
        rc = lib.loom_prefetch_start(fs._handle(), arr, len(items), ctypes.byref(opts), ctypes.byref(out))
        if rc < 0:
            raise _error(rc)
        self._h = out.value
        self.max_bytes = max_bytes
        self._fs = fs
        fs._children.add(self)  # stopped before fs disconnects
        fs._child_opened()

    def __len__(self):
        return len(self.paths)

    def take(self, i):
        """Item i's bytes. Raises the OSError its open or read met."""
        if self._h is None or os.getpid() != self._pid:
            raise ValueError("prefetcher stopped, or made in another process")
        buf = ctypes.c_void_p()
        n = lib.loom_prefetch_take(self._h, i, ctypes.byref(buf))
        if n < 0:
            raise _error(n, self.paths[i] if 0 <= i < len(self.paths) else None)
        try:
            return ctypes.string_at(buf.value, n) if n else b""
        finally:
            lib.loom_prefetch_free(buf)

    def stats(self):
        """fetched, ready, waited, direct, dropped, bytes_fetched, bytes_held, peak_bytes."""
        st = _lib.PrefetchStats()
        if self._h is not None and os.getpid() == self._pid:
            lib.loom_prefetch_get_stats(self._h, ctypes.byref(st))
        return {name: getattr(st, name) for name, _ in _lib.PrefetchStats._fields_}

    def close(self):
        h, self._h = self._h, None
        if h is None:
            return
        try:
            if os.getpid() == self._pid:
                lib.loom_prefetch_stop(h)
        finally:
            self._fs._child_closed()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

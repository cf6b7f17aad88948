"""loom.File: a binary file object over libloom, for np.load, torch.load and the like.

It is an io.BufferedIOBase with a buffer of its own in each direction: small reads (a zip
reader's headers, np.load's magic) are served from one larger read, and small writes (torch.save
writes many short pieces) are sent as one. Reads and writes go to libloom directly, not through
a mount. Like Python's own file objects, one File is for one thread at a time.
"""

import ctypes
import io
import os

from . import _lib
from ._lib import lib

READ_CHUNK = 1 << 20   # a read smaller than this fills the buffer with this much
WRITE_CHUNK = 1 << 20  # writes are gathered up to this much (libloom sends 1 MiB behind)


def _error(rc, path=None):
    return OSError(-rc, os.strerror(-rc), path) if path is not None else OSError(-rc, os.strerror(-rc))


def _writable_address(buf):
    """The address of a writable buffer (bytearray, memoryview, numpy array) and its length."""
    mv = memoryview(buf).cast("B")
    if mv.readonly:
        raise TypeError("a writable buffer is needed")
    if len(mv) == 0:
        return None, mv, 0
    return ctypes.addressof(ctypes.c_char.from_buffer(mv)), mv, len(mv)


class File(io.BufferedIOBase):
    """A file open through libloom. Made by FileSystem.open(); not constructed directly."""

    def __init__(self, fs, handle, path, mode, flags):
        super().__init__()
        self._fs = fs
        self._h = handle
        self._pid = os.getpid()
        self.name = path
        self.mode = mode
        self._readable = (flags & os.O_ACCMODE) in (os.O_RDONLY, os.O_RDWR)
        self._writable = (flags & os.O_ACCMODE) in (os.O_WRONLY, os.O_RDWR)
        self._append = bool(flags & os.O_APPEND)
        self._pos = 0
        self._rbuf = b""      # bytes of the file from _rbuf_off
        self._rbuf_off = 0
        self._wbuf = bytearray()  # bytes to write at _wbuf_off
        self._wbuf_off = 0
        self._closing = False
        if self._append:
            self._pos = self._size()
        _, st = _lib.stat_call(lib.loom_file_attr, handle)
        self._size_hint = st.size  # as the open found it: buffer no more than the file holds

    # -- plumbing --

    def _handle(self):
        if self._h is None:
            raise ValueError("I/O operation on closed file")
        if os.getpid() != self._pid:
            raise OSError(9, "a loom.File cannot be used in a process forked after it was opened",
                          self.name)
        return self._h

    def _check(self, rc):
        if rc < 0:
            raise _error(rc, self.name)
        return rc

    def _size(self):
        rc, st = _lib.stat_call(lib.loom_fstat, self._handle())
        self._check(rc)
        return st.size

    def _pread_into(self, address, length, offset):
        got = 0
        while got < length:
            n = self._check(lib.loom_pread(self._handle(), address + got, length - got, offset + got))
            if n == 0:
                break
            got += n
        return got

    def _pread(self, length, offset):
        buf = bytearray(length)
        if length == 0:
            return bytes(buf)
        address, _, _ = _writable_address(buf)
        got = self._pread_into(address, length, offset)
        del buf[got:]
        return bytes(buf)

    def _flush_writes(self):
        if not self._wbuf:
            return
        data, self._wbuf = self._wbuf, bytearray()
        self._send(data, self._wbuf_off)

    def _send(self, data, offset):
        view = memoryview(data).cast("B")
        if view.readonly:
            data = bytearray(view)
            view = memoryview(data)
        address = ctypes.addressof(ctypes.c_char.from_buffer(view))
        h = self._handle()
        if self._append:
            n = self._check(lib.loom_write(h, address, len(view)))
            pos = ctypes.c_int64()
            self._check(lib.loom_lseek(h, 0, os.SEEK_CUR, ctypes.byref(pos)))
            self._pos = pos.value
        else:
            # In pieces libloom sends behind (up to 1 MiB each, 4 MiB in flight per handle), not
            # one large write it would send and wait for: torch.save writes whole storages.
            n = 0
            while n < len(view):
                piece = min(WRITE_CHUNK, len(view) - n)
                got = self._check(lib.loom_pwrite(h, address + n, piece, offset + n))
                n += got
                if got != piece:
                    break
        if n != len(view):
            raise OSError(5, "short write", self.name)

    # -- io.BufferedIOBase --

    def readable(self):
        self._handle()
        return self._readable

    def writable(self):
        self._handle()
        return self._writable

    def seekable(self):
        self._handle()
        return True

    def fileno(self):
        raise io.UnsupportedOperation("a loom.File has no file descriptor (it does not go through the kernel)")

    def isatty(self):
        return False

    def tell(self):
        self._handle()
        if self._append:
            self._flush_writes()  # where appended bytes went is known once they are sent
        return self._pos

    def seek(self, offset, whence=os.SEEK_SET):
        self._handle()
        if self._append:
            self._flush_writes()  # its sending moves the position to the end: before, not after
        if whence == os.SEEK_SET:
            pos = offset
        elif whence == os.SEEK_CUR:
            pos = self._pos + offset
        elif whence == os.SEEK_END:
            self._flush_writes()
            pos = self._size() + offset
        else:
            raise ValueError("invalid whence (%r)" % whence)
        if pos < 0:
            raise OSError(22, "Invalid argument", self.name)
        self._pos = pos
        return pos

    def read(self, size=-1):
        self._handle()
        if not self._readable:
            self._handle()
            raise io.UnsupportedOperation("not readable")
        self._flush_writes()
        if size is None or size < 0:
            return self._read_to_end()
        start = self._pos - self._rbuf_off
        if 0 <= start and start + size <= len(self._rbuf):
            out = self._rbuf[start:start + size]
        elif size >= READ_CHUNK:
            out = self._pread(size, self._pos)
        else:
            head = self._rbuf[start:] if 0 <= start < len(self._rbuf) else b""
            self._rbuf_off = self._pos + len(head)
            self._rbuf = self._pread(self._fill_size(size - len(head)), self._rbuf_off)
            out = head + self._rbuf[:size - len(head)]
        self._pos += len(out)
        return out

    read1 = read

    def _read_to_end(self):
        # The size the open returned (close-to-open) sizes the first read, without a round trip;
        # the file may have grown since, so read on until a read comes back short.
        parts, want = [], max(self._size_hint - self._pos, 0) + 1
        start = self._pos - self._rbuf_off
        if 0 <= start < len(self._rbuf):
            parts.append(self._rbuf[start:])
            self._pos += len(parts[0])
        while True:
            data = self._pread(want, self._pos)
            parts.append(data)
            self._pos += len(data)
            if len(data) < want:
                break
            want = READ_CHUNK
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def readinto(self, b):
        self._handle()
        if not self._readable:
            self._handle()
            raise io.UnsupportedOperation("not readable")
        self._flush_writes()
        address, mv, length = _writable_address(b)
        if length == 0:
            return 0
        start = self._pos - self._rbuf_off
        if 0 <= start and start + length <= len(self._rbuf):
            mv[:] = self._rbuf[start:start + length]
            n = length
        elif length >= READ_CHUNK:
            n = self._pread_into(address, length, self._pos)
        else:
            data = self.read(length)
            mv[:len(data)] = data
            return len(data)
        self._pos += n
        return n

    readinto1 = readinto

    def readline(self, size=-1):
        self._handle()
        if not self._readable:
            self._handle()
            raise io.UnsupportedOperation("not readable")
        line = bytearray()
        while size is None or size < 0 or len(line) < size:
            start = self._pos - self._rbuf_off
            if not (0 <= start < len(self._rbuf)):
                self._flush_writes()
                if not self._refill():
                    break
                continue
            end = self._rbuf.find(b"\n", start)
            end = len(self._rbuf) if end < 0 else end + 1
            if size is not None and size >= 0:
                end = min(end, start + size - len(line))
            line += self._rbuf[start:end]
            self._pos += end - start
            if line.endswith(b"\n"):
                break
        return bytes(line)

    def _fill_size(self, want):
        # A whole small file in one read, a large one READ_CHUNK at a time; past the size the
        # open saw (the file grew), what is asked for.
        return max(want, min(READ_CHUNK, self._size_hint - self._rbuf_off))

    def _refill(self):
        self._rbuf_off = self._pos
        self._rbuf = self._pread(self._fill_size(1), self._pos)
        return len(self._rbuf) > 0

    def write(self, b):
        self._handle()
        if not self._writable:
            self._handle()
            raise io.UnsupportedOperation("not writable")
        view = memoryview(b).cast("B")
        n = len(view)
        if n == 0:
            self._handle()
            return 0
        self._rbuf = b""
        self._size_hint = max(self._size_hint, self._pos + n)
        if self._wbuf and self._wbuf_off + len(self._wbuf) != self._pos:
            self._flush_writes()
        if not self._wbuf:
            self._wbuf_off = self._pos
        if not self._wbuf and n >= WRITE_CHUNK:
            self._send(view, self._pos)
        else:
            self._wbuf += view
            if len(self._wbuf) >= WRITE_CHUNK:
                self._flush_writes()
        if not self._append:
            self._pos += n
        return n

    def truncate(self, size=None):
        self._flush_writes()
        size = self._pos if size is None else size
        self._check(lib.loom_ftruncate(self._handle(), size))
        self._rbuf = b""
        return size

    def flush(self):
        if self._closing:
            return
        self._handle()
        self._flush_writes()

    def fsync(self):
        """Makes what was written durable on the servers (os.fsync's counterpart)."""
        self._flush_writes()
        self._check(lib.loom_fsync(self._handle()))

    def stat(self):
        """os.fstat's counterpart."""
        self._flush_writes()
        rc, st = _lib.stat_call(lib.loom_fstat, self._handle())
        self._check(rc)
        from ._fs import stat_result
        return stat_result(st)

    def close(self):
        if self._h is None:
            return
        try:
            if os.getpid() == self._pid:
                self._flush_writes()
        finally:
            self._closing = True  # io's close calls flush(): there is nothing left to send
            h, self._h = self._h, None
            try:
                rc = lib.loom_close(h) if os.getpid() == self._pid else 0
            finally:
                self._fs._child_closed()
            super().close()
            self._closing = False
        if rc < 0:
            raise _error(rc, self.name)

    @property
    def closed(self):
        return self._h is None

    def __repr__(self):
        return "<loom.File name=%r mode=%r%s>" % (self.name, self.mode, " closed" if self.closed else "")

"""The mount's door's raw protocol (src/common/door.h), as a test (or a hostile local user)
speaks it: struct door_req and door_rep, a channel's first request with its memfd, and
LOOM_IOC_DOOR. Also imported by programs the tests run as another user."""

import fcntl
import hashlib
import os
import socket
import struct

REQ = struct.Struct("=IIQqQIIQ")   # struct door_req
REP = struct.Struct("=qQ")         # struct door_rep
HELLO = struct.Struct("=II Q 16s 16s")  # struct door_hello
SLOT = 2 << 20
OP = {name: i for i, name in enumerate(
    "HELLO ATTACH STAT LSTAT MKDIR RMDIR UNLINK RENAME LINK SYMLINK READLINK CHMOD CHOWN UTIMENS "
    "TRUNCATE STATFS GETXATTR SETXATTR LISTXATTR REMOVEXATTR GETLAYOUT SETLAYOUT DELLAYOUT SYNC "
    "OPENDIR READDIR CLOSEDIR OPEN PREAD PWRITE READ WRITE LSEEK SEEK_DATA FALLOCATE FSYNC "
    "FTRUNCATE FSTAT FILE_ATTR CLOSE PF_NEW PF_ITEMS PF_START PF_TAKE PF_STATS PF_STOP".split())}


def pattern(n, seed):
    out, block = bytearray(), hashlib.sha256(b"%d" % seed).digest()
    while len(out) < n:
        out += block
        block = hashlib.sha256(block).digest()
    return bytes(out[:n])


def door_of(mnt):
    """(socket path, daemon pid) that LOOM_IOC_DOOR answers on the mount point."""
    ioc = bytearray(108 + 8)
    cmd = (3 << 30) | (len(ioc) << 16) | (ord("L") << 8) | 0xA4   # _IOWR('L', 0xA4, ...)
    fd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, cmd, ioc)
    finally:
        os.close(fd)
    return ioc[:108].split(b"\0")[0].decode(), struct.unpack_from("=I", ioc, 108)[0]


def sealed_memfd(seal=True, size=SLOT):
    fd = os.memfd_create("t", os.MFD_CLOEXEC | (os.MFD_ALLOW_SEALING if seal else 0))
    os.ftruncate(fd, size)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd


def recv_rep(s):
    buf = b""
    while len(buf) < REP.size:
        try:
            got = s.recv(REP.size - len(buf))
        except ConnectionResetError:
            got = b""
        if not got:
            return None   # the daemon closed the channel
        buf += got
    return REP.unpack(buf)


def knock(path, op, memfd=None, slot_bytes=b"", version=1):
    """A channel's first request (HELLO or ATTACH) with memfd: (socket, mmap, rc)."""
    import mmap
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    own = memfd is None
    fd = sealed_memfd() if own else memfd
    m = mmap.mmap(fd, SLOT) if os.fstat(fd).st_size >= SLOT else None
    if m is not None and slot_bytes:
        m[:len(slot_bytes)] = slot_bytes
    socket.send_fds(s, [REQ.pack(OP[op], 0, 0, 0, 0, 0, 0, version)], [fd])
    if own:
        os.close(fd)
    rep = recv_rep(s)
    return s, m, (rep[0] if rep else None)


def ask(s, op, body=b"", fh=0, off=0, length=0, flags=0, mode=0, arg=0):
    s.sendall(REQ.pack(OP[op], len(body), fh, off, length, flags, mode, arg) + body)
    return recv_rep(s)

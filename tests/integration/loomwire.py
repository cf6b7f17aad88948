"""A tiny Python implementation of Loom's wire framing (src/proto/wire.h, src/proto/codec.c).

Only what the integration tests need: crc32c, building and parsing frames (header, body, bulk),
a blocking connection with timeouts, and the few message structs the tests speak.

A frame is a 40-byte little-endian header, then body_len bytes of body, then bulk_len bytes of
bulk. hdr_crc is crc32c over the header with hdr_crc zeroed, continued over the body; bulk_crc is
crc32c of the bulk (0 when there is none).
"""

import errno
import hashlib
import hmac
import os
import socket
import struct
import time

# ---- crc32c (Castagnoli, reflected, init and final xor 0xffffffff) ----------------------------

_POLY = 0x82F63B78


def _make_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()


def crc32c(data, crc=0):
    """Standard crc32c; chainable as codec.c does: crc32c(b, crc32c(a)) == crc32c(a + b)."""
    reg = crc ^ 0xFFFFFFFF
    table = _TABLE
    for b in bytes(data):
        reg = table[(reg ^ b) & 0xFF] ^ (reg >> 8)
    return reg ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283, "crc32c check value"

# ---- constants from wire.h --------------------------------------------------------------------

MAGIC = 0x4D4F4F4C
VERSION = 3  # LW_VERSION: what this speaks; replies carry the server's
MAX_BODY = (1 << 20) + (64 << 10)  # LW_MAX_BODY
MAX_BULK = 16 << 20
F_REPLY = 0x1

HDR = struct.Struct("<IHHIiQIIII")  # magic version opcode flags status req_id body_len bulk_len bulk_crc hdr_crc
assert HDR.size == 40

OP = {
    "PING": 0x0001,
    "AUTH_CHALLENGE": 0x0002,
    "AUTH_PROVE": 0x0003,
    "MDS_CONNECT": 0x0101,
    "MDS_LOOKUP": 0x0102,
    "MDS_GETATTR": 0x0103,
    "MDS_STATFS": 0x010E,
    "MDS_GETLAYOUT": 0x0116,
    "MDS_OST_TABLE": 0x0118,
    "OST_READ": 0x0201,
    "OST_WRITE": 0x0202,
    "OST_PUNCH": 0x0203,
    "OST_GETATTR": 0x0204,
    "OST_STATFS": 0x0206,
    "OST_FALLOCATE": 0x0209,
    "OST_SEEK": 0x020A,
}

EPROTO = errno.EPROTO      # 71
EBADMSG = errno.EBADMSG    # 74
EOPNOTSUPP = errno.EOPNOTSUPP
EACCES = errno.EACCES
F_RESENT = 0x2

TGT_INACTIVE = 0x4

# struct lw_attr: ino gen size blocks atime mtime ctime atime_ns mtime_ns ctime_ns mode uid gid
# nlink rdev blksize flags data_version name_version trunc_epoch pad
ATTR = struct.Struct("<QQQQqqqIIIIIIIIIIQQII")
assert ATTR.size == 120
ATTR_FIELDS = ("ino", "gen", "size", "blocks", "atime", "mtime", "ctime", "atime_ns", "mtime_ns",
               "ctime_ns", "mode", "uid", "gid", "nlink", "rdev", "blksize", "flags", "data_version",
               "name_version", "trunc_epoch", "pad")

# struct lw_statfs
STATFS = struct.Struct("<QQQQQIIII")
assert STATFS.size == 56

# struct lw_ost_entry: idx state port pad[3] host[64] uuid[40] lw_statfs
OST_ENTRY = struct.Struct("<IIH6x64s40s56s")
assert OST_ENTRY.size == 176

# struct lw_ost_io: ost_idx flags objid offset length ino stripe_idx layout_gen
OST_IO = struct.Struct("<IIQQQQIIII")
assert OST_IO.size == 56

OST_IO_REP = struct.Struct("<QQQ")  # length, obj_size, obj_blocks


class Header:
    __slots__ = ("magic", "version", "opcode", "flags", "status", "req_id", "body_len", "bulk_len",
                 "bulk_crc", "hdr_crc")

    def __init__(self, raw):
        (self.magic, self.version, self.opcode, self.flags, self.status, self.req_id,
         self.body_len, self.bulk_len, self.bulk_crc, self.hdr_crc) = HDR.unpack(raw)

    def __repr__(self):
        return ("Header(opcode=%#x flags=%#x status=%d req_id=%d body_len=%d bulk_len=%d)"
                % (self.opcode, self.flags, self.status, self.req_id, self.body_len, self.bulk_len))


def pack_header(opcode, body=b"", bulk=b"", req_id=1, flags=0, status=0, magic=MAGIC,
                version=VERSION, body_len=None, bulk_len=None, bulk_crc=None, hdr_crc=None):
    """A 40-byte header for body and bulk; any field can be overridden to make a bad one.
    hdr_crc is computed over the header as finally packed (with overrides) and the body."""
    body_len = len(body) if body_len is None else body_len
    bulk_len = len(bulk) if bulk_len is None else bulk_len
    if bulk_crc is None:
        bulk_crc = crc32c(bulk) if bulk_len else 0
    raw = HDR.pack(magic, version, opcode, flags, status, req_id, body_len, bulk_len, bulk_crc, 0)
    if hdr_crc is None:
        hdr_crc = crc32c(body, crc32c(raw))
    return raw[:36] + struct.pack("<I", hdr_crc)


def frame(opcode, body=b"", bulk=b"", **kw):
    """A whole frame: header, body and bulk."""
    return pack_header(opcode, body, bulk, **kw) + bytes(body) + bytes(bulk)


def cred(uid=0, gid=0, groups=()):
    """The lw_cred prefix of MDS requests."""
    return struct.pack("<IIII", uid, gid, len(groups), 0) + b"".join(struct.pack("<I", g) for g in groups)


def parse_attr(body, offset=0):
    return dict(zip(ATTR_FIELDS, ATTR.unpack_from(body, offset)))


def ost_io(ost_idx, objid, offset=0, length=0, ino=0, stripe_idx=0, layout_gen=0, flags=0, trunc_epoch=0):
    return OST_IO.pack(ost_idx, flags, objid, offset, length, ino, stripe_idx, layout_gen, trunc_epoch, 0)


class ConnectionClosed(Exception):
    pass


# ---- authentication (wire.h: AUTH_CHALLENGE / AUTH_PROVE) -------------------------------------

# The key connections prove they hold unless told otherwise: the conftest sets it to the key of
# the cluster a test runs against.
DEFAULT_KEY = None


def load_key(path):
    """A key file: hex on one line (src/common/auth.c)."""
    with open(path) as f:
        return bytes.fromhex(f.read().strip())


def auth_mac(key, label, a, b):
    return hmac.new(key, label + a + b, hashlib.sha256).digest()


class AuthError(Exception):
    pass


class Conn:
    """One blocking TCP connection to a Loom server, with a timeout on every read."""

    def __init__(self, host, port, timeout=10.0, key=None, auth=True):
        """Connects and, with auth (the default), proves it holds key (DEFAULT_KEY if None;
        no exchange when that is None too)."""
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.next_id = 1
        key = DEFAULT_KEY if key is None else key
        if auth and key is not None:
            try:
                self.authenticate(key)
            except BaseException:
                self.close()
                raise

    def authenticate(self, key):
        """The exchange of wire.h; AuthError when the server refuses the key or cannot prove
        it holds it."""
        h, ch, _ = self.call(OP["AUTH_CHALLENGE"])
        if h.status != 0 or len(ch) != 32:
            raise AuthError("AUTH_CHALLENGE answered %r" % (h,))
        nonce = os.urandom(32)
        h, proof, _ = self.call(OP["AUTH_PROVE"], nonce + auth_mac(key, b"loom-auth-client", ch, nonce))
        if h.status != 0:
            raise AuthError("the server refused the key (status %d)" % h.status)
        if not hmac.compare_digest(proof, auth_mac(key, b"loom-auth-server", nonce, ch)):
            raise AuthError("the server's proof is wrong")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def recv_exact(self, n):
        buf = bytearray()
        deadline = time.monotonic() + self.timeout
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("timed out waiting for %d bytes (got %d)" % (n, len(buf)))
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError as e:
                raise ConnectionClosed("connection reset after %d of %d bytes" % (len(buf), n)) from e
            if not chunk:
                raise ConnectionClosed("connection closed after %d of %d bytes" % (len(buf), n))
            buf += chunk
        return bytes(buf)

    def recv_frame(self):
        """Reads one frame and checks its framing (magic, version, both checksums)."""
        raw = self.recv_exact(HDR.size)
        h = Header(raw)
        if h.magic != MAGIC or h.version != VERSION:
            raise AssertionError("reply with bad magic/version: %r" % (h,))
        body = self.recv_exact(h.body_len) if h.body_len else b""
        bulk = self.recv_exact(h.bulk_len) if h.bulk_len else b""
        zeroed = raw[:36] + b"\0\0\0\0"
        if crc32c(body, crc32c(zeroed)) != h.hdr_crc:
            raise AssertionError("reply with a wrong hdr_crc: %r" % (h,))
        if h.bulk_len and crc32c(bulk) != h.bulk_crc:
            raise AssertionError("reply with a wrong bulk_crc: %r" % (h,))
        return h, body, bulk

    def call(self, opcode, body=b"", bulk=b""):
        """Sends one request and returns (header, body, bulk) of its reply."""
        rid = self.next_id
        self.next_id += 1
        self.send(frame(opcode, body, bulk, req_id=rid))
        h, rbody, rbulk = self.recv_frame()
        if h.req_id != rid or h.opcode != opcode or not h.flags & F_REPLY:
            raise AssertionError("reply does not match request %#x id %d: %r" % (opcode, rid, h))
        return h, rbody, rbulk

    def ping(self):
        h, _, _ = self.call(OP["PING"])
        return h.status

    def wait_closed(self, timeout=10.0):
        """True when the peer closes the connection (EOF or reset) within timeout; False if it
        is still open then. Any bytes the peer sends before closing are returned as the second
        element."""
        got = bytearray()
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False, bytes(got)
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return False, bytes(got)
            except (ConnectionResetError, BrokenPipeError):
                return True, bytes(got)
            if not chunk:
                return True, bytes(got)
            got += chunk


def ost_table(host, port, timeout=10.0):
    """The MDS's OST table: {idx: dict(state, host, port, uuid)} and its generation."""
    with Conn(host, port, timeout) as c:
        return ost_table_on(c)


def ost_table_on(conn):
    h, body, _ = conn.call(OP["MDS_OST_TABLE"], cred())
    if h.status != 0:
        raise AssertionError("MDS_OST_TABLE failed with status %d" % h.status)
    gen, count = struct.unpack_from("<II", body, 0)
    table = {}
    for i in range(count):
        idx, state, port, host, uuid, _sf = OST_ENTRY.unpack_from(body, 8 + i * OST_ENTRY.size)
        table[idx] = {
            "state": state,
            "host": host.split(b"\0", 1)[0].decode(),
            "port": port,
            "uuid": uuid.split(b"\0", 1)[0].decode(),
        }
    return gen, table


# ---- namespace changes and MDS_CONNECT (for the reply-cache tests) ----------------------------
# New names only (OP above is left as it is): NS_OP holds the opcodes of wire.h these use.

NS_OP = {
    "MDS_CONNECT": 0x0101,
    "MDS_LOOKUP": 0x0102,
    "MDS_GETATTR": 0x0103,
    "MDS_CREATE": 0x0105,
    "MDS_MKDIR": 0x0106,
    "MDS_UNLINK": 0x0107,
    "MDS_RMDIR": 0x0108,
    "MDS_RENAME": 0x0109,
    "MDS_LINK": 0x010A,
    "MDS_SYMLINK": 0x010B,
    "MDS_GETXATTR": 0x010F,
    "MDS_SETXATTR": 0x0110,
    "MDS_REMOVEXATTR": 0x0112,
}

ENOENT = errno.ENOENT
EEXIST = errno.EEXIST
ENODATA = errno.ENODATA

CLIENT_CLIENT = 1          # lw_connect_req.client_kind of a client (LW_CLIENT_CLIENT)
ROOT_INO = 1

CONNECT_REQ = struct.Struct("<II16sQQ")    # proto_version client_kind fsname[16] client_uuid[2]
assert CONNECT_REQ.size == 40
CONNECT_REP = struct.Struct("<QQ16sII")    # root_ino session_id fsname[16] max_bulk ost_table_gen
assert CONNECT_REP.size == 40
NAME_REQ = struct.Struct("<QH6x")          # lw_name_req: parent namelen pad[3]
assert NAME_REQ.size == 16
MKDIR_REQ = struct.Struct("<QIHH")         # lw_mkdir_req: parent mode namelen pad
assert MKDIR_REQ.size == 16
CREATE_REQ = struct.Struct("<QIIIIH6x")    # lw_create_req: parent mode rdev flags open_flags namelen pad[3]
assert CREATE_REQ.size == 32
CREATE_REP = struct.Struct("<120sQII")     # lw_create_rep: attr handle flags has_layout
assert CREATE_REP.size == 136
RENAME_REQ = struct.Struct("<QQIHH")       # lw_rename_req: src_parent dst_parent flags src_namelen dst_namelen
assert RENAME_REQ.size == 24
LINK_REQ = struct.Struct("<QQH6x")         # lw_link_req: ino new_parent namelen pad[3]
assert LINK_REQ.size == 24
SYMLINK_REQ = struct.Struct("<QHHI")       # lw_symlink_req: parent namelen pad targetlen
assert SYMLINK_REQ.size == 16
XATTR_REQ = struct.Struct("<QIIH6x")       # lw_xattr_req: ino size flags namelen pad[3]
assert XATTR_REQ.size == 24
CR_EXCL = 0x1
XATTR_CREATE = 0x1


def connect_req(uuid, fsname=b"", version=VERSION, kind=CLIENT_CLIENT):
    """The MDS_CONNECT body (no cred prefix); uuid is a 16-byte string."""
    lo, hi = struct.unpack("<QQ", uuid)
    return CONNECT_REQ.pack(version, kind, fsname, lo, hi)


def name_req(parent, name):
    """MDS_LOOKUP / MDS_UNLINK / MDS_RMDIR body after the cred."""
    return NAME_REQ.pack(parent, len(name)) + name


def mkdir_req(parent, name, mode=0o755):
    return MKDIR_REQ.pack(parent, mode, len(name), 0) + name


def create_req(parent, name, mode=0o100644, flags=CR_EXCL):
    return CREATE_REQ.pack(parent, mode, 0, flags, 0, len(name)) + name


def rename_req(src_parent, src, dst_parent, dst, flags=0):
    return RENAME_REQ.pack(src_parent, dst_parent, flags, len(src), len(dst)) + src + dst


def link_req(ino, new_parent, name):
    return LINK_REQ.pack(ino, new_parent, len(name)) + name


def symlink_req(parent, name, target):
    return SYMLINK_REQ.pack(parent, len(name), 0, len(target)) + name + target


def xattr_req(ino, name, value=b"", flags=0):
    return XATTR_REQ.pack(ino, len(value), flags, len(name)) + name + value

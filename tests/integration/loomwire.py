"""A tiny Python implementation of Loom's wire framing (src/proto/wire.h, src/proto/codec.c).

Only what the integration tests need: crc32c, building and parsing frames (header, body, bulk),
a blocking connection with timeouts, and the few message structs the tests speak.

A frame is a 40-byte little-endian header, then body_len bytes of body, then bulk_len bytes of
bulk. hdr_crc is crc32c over the header with hdr_crc zeroed, continued over the body; bulk_crc is
crc32c of the bulk (0 when there is none). After the AUTH_* exchange every frame, both ways, is
sealed (wire.h, "Sealed frames"): AES-256-GCM under the direction's session key, with the
direction's frame counter as nonce, and the 16-byte tag after the bulk. Conn does this itself:
whole frames given to Conn.send are sealed on the way, replies opened by recv_frame.
"""

import errno
import hashlib
import hmac
import os
import re
import socket
import struct
import time

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

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
VERSION = 10  # LW_VERSION: what this speaks; replies carry the server's
VERSION_MIN = 9  # LW_VERSION_MIN: the oldest a server accepts
MAX_BODY = (1 << 20) + (64 << 10)  # LW_MAX_BODY
MAX_BULK = 16 << 20
F_REPLY = 0x1
F_ENCRYPT = 0x4   # LW_F_ENCRYPT: on AUTH_* only
TAG_LEN = 16      # LW_TAG_LEN

HDR = struct.Struct("<IHHIiQIIII")  # magic version opcode flags status req_id body_len bulk_len bulk_crc hdr_crc
assert HDR.size == 40

OP = {
    "PING": 0x0001,
    "AUTH_CHALLENGE": 0x0002,
    "AUTH_PROVE": 0x0003,
    "MDS_CONNECT": 0x0101,
    "MDS_LOOKUP": 0x0102,
    "MDS_GETATTR": 0x0103,
    "MDS_SETATTR": 0x0104,
    "MDS_STATFS": 0x010E,
    "MDS_GETLAYOUT": 0x0116,
    "MDS_OST_TABLE": 0x0118,
    "MDS_SETATTR": 0x0104,
    "MDS_CLOSE": 0x0114,
    "MDS_DOM_READ": 0x011D,
    "MDS_OST_REGISTER": 0x0119,
    "MDS_NODEMAP": 0x0122,
    "MDS_OST_FAILOVER": 0x012B,
    "MDS_OST_FAILOVERS": 0x012C,
    "OST_READ": 0x0201,
    "OST_WRITE": 0x0202,
    "OST_PUNCH": 0x0203,
    "OST_GETATTR": 0x0204,
    "OST_STATFS": 0x0206,
    "OST_DESTROY": 0x0207,
    "OST_SCRUB": 0x0208,
    "OST_FALLOCATE": 0x0209,
    "OST_SEEK": 0x020A,
    "OST_DESTROY_MANY": 0x020B,
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


# struct lw_mds_rep_prefix (protocol 6): transno, last_committed, nvers, flags, lease_ino,
# lease_gen, lease_trust_ms, pad; then nvers lw_obj_version (ino, version) before every MDS
# reply's own body.
MDS_PREFIX = struct.Struct("<QQIIQQII")
assert MDS_PREFIX.size == 48
RPF_RECOVERING = 0x1                      # LW_RPF_RECOVERING: the MDS awaits clients' replays
RPF_LEASES_LOST = 0x2                     # LW_RPF_LEASES_LOST: the client's leases were taken back
F_NOTIFY = 0x8                            # LW_F_NOTIFY: a frame the server sends unasked
F_JOBID = 0x10                            # LW_F_JOBID: the body starts with a job id (protocol 10)
JOBID_LEN = 32                            # LW_JOBID_LEN


def job_prefix(job):
    """The LW_JOBID_LEN bytes a request with F_JOBID starts its body with."""
    job = job.encode() if isinstance(job, str) else bytes(job)
    return job[:JOBID_LEN].ljust(JOBID_LEN, b"\0")
RD_PLUS, RD_LEASE, RD_EXCL = 0x1, 0x2, 0x4  # lw_readdir_req.flags
RPF_LEASE_EXCL = 0x4                      # LW_RPF_LEASE_EXCL: the lease granted is exclusive
LEASE = struct.Struct("<QQ")              # lw_lease: ino gen
LEASE_REQ = struct.Struct("<II")          # lw_lease_req / lw_recall: count flags
REPLAY_REQ = struct.Struct("<QQHHIII")    # lw_replay_req: transno req_id opcode flags nvers body_len reply_len
assert REPLAY_REQ.size == 32
RP_DONE = 0x1                             # LW_RP_DONE
OBJ_VERSION = struct.Struct("<QQ")


class Header:
    __slots__ = ("magic", "version", "opcode", "flags", "status", "req_id", "body_len", "bulk_len",
                 "bulk_crc", "hdr_crc", "transno", "last_committed", "vers", "rpflags",
                 "lease_ino", "lease_gen", "lease_trust_ms")

    def __init__(self, raw):
        (self.magic, self.version, self.opcode, self.flags, self.status, self.req_id,
         self.body_len, self.bulk_len, self.bulk_crc, self.hdr_crc) = HDR.unpack(raw)
        self.transno = self.last_committed = self.rpflags = 0
        self.lease_ino = self.lease_gen = self.lease_trust_ms = 0
        self.vers = []

    def __repr__(self):
        return ("Header(opcode=%#x flags=%#x status=%d req_id=%d body_len=%d bulk_len=%d)"
                % (self.opcode, self.flags, self.status, self.req_id, self.body_len, self.bulk_len))


def take_mds_prefix(h, body):
    """The MDS's replies (opcodes 0x01xx) start with struct lw_mds_rep_prefix: its fields go to
    h (transno, last_committed, vers), and the body without it is returned. An empty body (an
    error the frame layer answered) has none."""
    if h.opcode >> 8 != 1 or not h.flags & F_REPLY or not body:
        return body
    (h.transno, h.last_committed, nvers, h.rpflags, h.lease_ino, h.lease_gen, h.lease_trust_ms,
     _) = MDS_PREFIX.unpack_from(body)
    end = MDS_PREFIX.size + nvers * OBJ_VERSION.size
    assert nvers <= 8 and len(body) >= end, "malformed MDS reply prefix: %r" % (h,)
    h.vers = [OBJ_VERSION.unpack_from(body, MDS_PREFIX.size + i * OBJ_VERSION.size)
              for i in range(nvers)]
    return body[end:]


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
    """A key file: hex on its first line (src/common/auth.c)."""
    with open(path) as f:
        return bytes.fromhex(f.readline().strip())


def load_node_key(path):
    """A node's key file (`loom key new --node`): (key, (name, generation))."""
    with open(path) as f:
        key = bytes.fromhex(f.readline().strip())
        word, name, gen = f.readline().split()
    assert word == "node", "not a node's key file: " + path
    return key, (name, int(gen))


def node_key(fs_key, name, generation):
    """A node's key as every server derives it (wire_auth.h, "Node keys")."""
    msg = b"loom-node" + name.encode().ljust(32, b"\0") + struct.pack("<I", generation)
    return hmac.new(fs_key, msg, hashlib.sha256).digest()


def auth_mac(key, label, a, b):
    return hmac.new(key, label + a + b, hashlib.sha256).digest()


def session_keys(key, client_nonce, server_nonce):
    """(c2s, s2c): HKDF-SHA256 of the file system key (common/auth.h, loom_session_keys)."""
    def derive(info):
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=client_nonce + server_nonce,
                    info=info).derive(key)
    return derive(b"loom c2s"), derive(b"loom s2c")


class Seal:
    """One direction of a connection's sealed frames (src/net/seal.h): AES-256-GCM under its
    session key, nonce = 4 zero bytes || the frame counter (u64 big-endian)."""

    def __init__(self, key, encrypt):
        self.aead = AESGCM(key)
        self.encrypt = encrypt
        self.counter = 0

    def _nonce(self):
        n = b"\0\0\0\0" + struct.pack(">Q", self.counter)
        self.counter += 1
        return n

    def seal(self, hdr, body, bulk):
        """(body, bulk, tag) as they go on the wire."""
        nonce = self._nonce()
        if self.encrypt:
            out = self.aead.encrypt(nonce, bytes(body) + bytes(bulk), bytes(hdr))
            return out[:len(body)], out[len(body):-TAG_LEN], out[-TAG_LEN:]
        return body, bulk, self.aead.encrypt(nonce, b"", bytes(hdr) + bytes(body) + bytes(bulk))

    def open(self, hdr, body, bulk, tag):
        """(body, bulk) in the clear; InvalidTag when the frame is not what was sealed."""
        nonce = self._nonce()
        if self.encrypt:
            out = self.aead.decrypt(nonce, bytes(body) + bytes(bulk) + bytes(tag), bytes(hdr))
            return out[:len(body)], out[len(body):]
        self.aead.decrypt(nonce, bytes(tag), bytes(hdr) + bytes(body) + bytes(bulk))
        return body, bulk


class AuthError(Exception):
    def __init__(self, msg, status=0):
        super().__init__(msg)
        self.status = status   # the AUTH_PROVE reply's status, when the server refused


class TagError(AssertionError):
    """A reply that failed its tag."""


class Conn:
    """One blocking TCP connection to a Loom server, with a timeout on every read."""

    def __init__(self, host, port, timeout=10.0, key=None, auth=True, encrypt=False, source=None,
                 node=None):
        """Connects and, with auth (the default), proves it holds key (DEFAULT_KEY if None;
        no exchange when that is None too); frames are sealed from then on, and encrypted with
        encrypt (or when the server requires it). source: the local address to connect from
        (another 127.x.y.z is another peer to the server). node: (name, generation) when key is
        that node's key."""
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.next_id = 1
        self.notifications = []
        self.tx = self.rx = None
        key = DEFAULT_KEY if key is None else key
        if auth and key is not None:
            try:
                self.authenticate(key, encrypt, node=node)
            except BaseException:
                self.close()
                raise

    def authenticate(self, key, encrypt=False, follow=True, node=None):
        """The exchange of wire.h, then the session keys; AuthError when the server refuses the
        key or cannot prove it holds it. follow: encrypt when the server requires it. node:
        (name, generation) of a node's key (lw_auth_node follows the proof)."""
        h, ch, _ = self.call(OP["AUTH_CHALLENGE"])
        if h.status != 0 or len(ch) != 32:
            raise AuthError("AUTH_CHALLENGE answered %r" % (h,))
        encrypt = encrypt or (follow and bool(h.flags & F_ENCRYPT))
        client, server = (b"loom-auth-client-encrypt", b"loom-auth-server-encrypt") if encrypt else \
            (b"loom-auth-client", b"loom-auth-server")
        nonce = os.urandom(32)
        ext = b"" if node is None else \
            node[0].encode().ljust(32, b"\0") + struct.pack("<II", node[1], 0)
        h, proof, _ = self.call(OP["AUTH_PROVE"], nonce + auth_mac(key, client, ch, nonce) + ext,
                                flags=F_ENCRYPT if encrypt else 0)
        if h.status != 0:
            raise AuthError("the server refused the key (status %d)" % h.status, h.status)
        if not hmac.compare_digest(proof, auth_mac(key, server, nonce, ch)):
            raise AuthError("the server's proof is wrong")
        if bool(h.flags & F_ENCRYPT) != encrypt:
            raise AuthError("the server's proof does not carry the encryption chosen")
        c2s, s2c = session_keys(key, nonce, ch)
        self.tx, self.rx = Seal(c2s, encrypt), Seal(s2c, encrypt)

    @property
    def encrypts(self):
        return bool(self.tx and self.tx.encrypt)

    def sealed(self, data):
        """data (frames, perhaps a partial one last) as they go on this connection: each whole
        frame sealed; what does not make a whole frame (a header announcing more than follows,
        garbage) left as it is."""
        if self.tx is None:
            return bytes(data)
        out, pos = [], 0
        while len(data) - pos >= HDR.size:
            h = Header(bytes(data[pos:pos + HDR.size]))
            end = pos + HDR.size + h.body_len + h.bulk_len
            if end > len(data):
                break
            hdr = data[pos:pos + HDR.size]
            body = data[pos + HDR.size:pos + HDR.size + h.body_len]
            bulk = data[pos + HDR.size + h.body_len:end]
            out += [bytes(hdr)] + [bytes(x) for x in self.tx.seal(hdr, body, bulk)]
            pos = end
        out.append(bytes(data[pos:]))
        return b"".join(out)

    def open(self, raw, body, bulk, tag):
        """A reply read by hand (header raw, body, bulk, tag) opened: (body, bulk)."""
        try:
            return self.rx.open(raw, body, bulk, tag)
        except InvalidTag:
            raise TagError("a reply failed its tag: %r" % (Header(raw),)) from None

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
        """Sends data, sealing each whole frame in it once the connection authenticated."""
        self.sock.sendall(self.sealed(data))

    def send_raw(self, data):
        """Sends data as it is (a frame with a made-up tag, say)."""
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
        if self.rx is not None:
            body, bulk = self.open(raw, body, bulk, self.recv_exact(TAG_LEN))
        zeroed = raw[:36] + b"\0\0\0\0"
        if crc32c(body, crc32c(zeroed)) != h.hdr_crc:
            raise AssertionError("reply with a wrong hdr_crc: %r" % (h,))
        if h.bulk_len and crc32c(bulk) != h.bulk_crc:
            raise AssertionError("reply with a wrong bulk_crc: %r" % (h,))
        return h, take_mds_prefix(h, body), bulk

    def recv_reply(self):
        """The next reply; notifications (LW_F_NOTIFY) met before it are kept in
        self.notifications as (header, body)."""
        while True:
            h, rbody, rbulk = self.recv_frame()
            if not h.flags & F_NOTIFY:
                return h, rbody, rbulk
            self.notifications.append((h, rbody))

    def recv_notification(self):
        """The next notification (header, body), one kept or the next frame (which must be
        one)."""
        if self.notifications:
            return self.notifications.pop(0)
        h, body, _ = self.recv_frame()
        if not h.flags & F_NOTIFY:
            raise AssertionError("expected a notification, got %r" % (h,))
        return h, body

    def call(self, opcode, body=b"", bulk=b"", flags=0):
        """Sends one request and returns (header, body, bulk) of its reply."""
        rid = self.next_id
        self.next_id += 1
        self.send(frame(opcode, body, bulk, req_id=rid, flags=flags))
        h, rbody, rbulk = self.recv_reply()
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
        idx, state, port, host, uuid, sf = OST_ENTRY.unpack_from(body, 8 + i * OST_ENTRY.size)
        table[idx] = {
            "state": state,
            "host": host.split(b"\0", 1)[0].decode(),
            "port": port,
            "uuid": uuid.split(b"\0", 1)[0].decode(),
            "sf": sf,   # the lw_statfs as packed
        }
    return gen, table


# ---- namespace changes and MDS_CONNECT (for the reply-cache tests) ----------------------------
# New names only (OP above is left as it is): NS_OP holds the opcodes of wire.h these use.

NS_OP = {
    "MDS_CONNECT": 0x0101,
    "MDS_LOOKUP": 0x0102,
    "MDS_GETATTR": 0x0103,
    "MDS_SETATTR": 0x0104,
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
    "MDS_OPEN": 0x0113,
    "MDS_LOCK": 0x011C,
    "MDS_SYNC": 0x0125,
    "MDS_REPLAY": 0x0126,
    "MDS_READDIR": 0x010D,
    "MDS_LEASE": 0x0127,
    "MDS_RECALL": 0x0128,
    "MDS_INOS": 0x0129,
    "MDS_WALK": 0x0121,
}

ENOENT = errno.ENOENT
EEXIST = errno.EEXIST
EPERM = errno.EPERM
ENODATA = errno.ENODATA

CLIENT_CLIENT = 1          # lw_connect_req.client_kind of a client (LW_CLIENT_CLIENT)
ROOT_INO = 1

CONNECT_REQ = struct.Struct("<II16sQQ")    # proto_version client_kind fsname[16] client_uuid[2]
assert CONNECT_REQ.size == 40
CONNECT_REP = struct.Struct("<QQ16sII")    # root_ino session_id fsname[16] max_bulk ost_table_gen
assert CONNECT_REP.size == 40
NAME_REQ = struct.Struct("<QHH4x")         # lw_name_req: parent namelen flags pad[2]
NM_UNLEASED = 0x1                         # lw_name_req.flags on MDS_UNLINK
assert NAME_REQ.size == 16
MKDIR_REQ = struct.Struct("<QIHH")         # lw_mkdir_req: parent mode namelen flags
MK_LEASE, MK_EXCL = 0x1, 0x2               # LW_MK_LEASE, LW_MK_EXCL
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
CR_OPEN = 0x2
CR_LAYOUT = 0x4            # LW_CR_LAYOUT: a layout request follows the name
CR_TMPFILE = 0x8           # LW_CR_TMPFILE: nameless (O_TMPFILE), with CR_OPEN and namelen 0
CR_INO = 0x10              # LW_CR_INO: an inode number MDS_INOS handed ahead follows the name
PARAM_REQ = struct.Struct("<II128s128s")   # lw_param_req: cap flags name value (protocol 10)
PARAM_REP = struct.Struct("<IIII")         # lw_param_rep: len total matched pad
assert PARAM_REQ.size == 264 and PARAM_REP.size == 16


def param_req(name, value=b"", cap=0):
    """GET_PARAM / SET_PARAM body."""
    return PARAM_REQ.pack(cap, 0, name, value)


INOS_REQ = struct.Struct("<II")            # lw_inos_req: count pad
INOS_REP = struct.Struct("<QII")           # lw_inos_rep: first count pad
assert INOS_REQ.size == 8 and INOS_REP.size == 16
XATTR_CREATE = 0x1


def connect_req(uuid, fsname=b"", version=VERSION, kind=CLIENT_CLIENT):
    """The MDS_CONNECT body (no cred prefix); uuid is a 16-byte string."""
    lo, hi = struct.unpack("<QQ", uuid)
    return CONNECT_REQ.pack(version, kind, fsname, lo, hi)


def name_req(parent, name, flags=0):
    """MDS_LOOKUP / MDS_UNLINK / MDS_RMDIR body after the cred."""
    return NAME_REQ.pack(parent, len(name), flags) + name


def mkdir_req(parent, name, mode=0o755, flags=0):
    return MKDIR_REQ.pack(parent, mode, len(name), flags) + name


def create_req(parent, name, mode=0o100644, flags=CR_EXCL, ino=None, open_flags=0):
    """With ino, LW_CR_INO and the number after the name."""
    if ino is not None:
        flags |= CR_INO
    body = CREATE_REQ.pack(parent, mode, 0, flags, open_flags, len(name)) + name
    return body + (struct.pack("<Q", ino) if ino is not None else b"")


def rename_req(src_parent, src, dst_parent, dst, flags=0):
    return RENAME_REQ.pack(src_parent, dst_parent, flags, len(src), len(dst)) + src + dst


def link_req(ino, new_parent, name):
    return LINK_REQ.pack(ino, new_parent, len(name)) + name


def symlink_req(parent, name, target):
    return SYMLINK_REQ.pack(parent, len(name), 0, len(target)) + name + target


def xattr_req(ino, name, value=b"", flags=0):
    return XATTR_REQ.pack(ino, len(value), flags, len(name)) + name + value


# ---- a client with an identity, and the rest of the MDS's requests (for the resend tests) ----

EBADF = errno.EBADF
ESTALE = errno.ESTALE
EAGAIN = errno.EAGAIN

F_RDLCK, F_WRLCK, F_UNLCK = 0, 1, 2        # Linux values, as lw_lock_req.type
O_RDONLY, O_WRONLY, O_RDWR, O_TRUNC = os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_TRUNC

SA_MODE, SA_SIZE, SA_MTIME = 0x001, 0x008, 0x020          # LW_SA_*
CL_SIZE, CL_MTIME, CL_DATA = 0x1, 0x2, 0x10               # LW_CL_*
LK_WAIT, LK_TEST, LK_FLOCK, LK_CANCEL = 0x1, 0x2, 0x4, 0x8  # LW_LK_*
WALK_OPEN, WALKR_OPENED = 0x2, 0x1                        # LW_WALK_OPEN, LW_WALKR_OPENED
TGT_DEACTIVATED = 0x8                                     # LW_TGT_DEACTIVATED
POOL_NEW, POOL_DESTROY, POOL_ADD, POOL_REMOVE, POOL_LIST = 1, 2, 3, 4, 5
SCRUB_START, SCRUB_STATUS, SCRUB_DONE = 0, 1, 2
LAYOUT_MAGIC, LAYOUT_V2, LAYOUT_V3 = 0x0BD10BD0, 2, 3
OBJ_STALE = 0x1                                # LW_OBJ_STALE
MIRROR_STALE, MIRROR_RESYNC = 1, 2             # lw_mirror_req.cmd
MIRROR_REQ = struct.Struct("<QII")             # lw_mirror_req: ino cmd count
assert MIRROR_REQ.size == 16

INO_REQ = struct.Struct("<Q")                 # lw_ino_req
assert INO_REQ.size == 8
SETATTR = struct.Struct("<QIIIIQqqqIIII")     # lw_setattr: ino valid mode uid gid size atime mtime ctime *_ns pad
assert SETATTR.size == 72
OPEN_REQ = struct.Struct("<QIIQQ")            # lw_open_req: ino open_flags flags names dir_moves
assert OPEN_REQ.size == 32
OPEN_REP = struct.Struct("<120sQIIQII")       # lw_open_rep: attr handle has_layout dom_len dir_moves flags pad
assert OPEN_REP.size == 152
CLOSE_REQ = struct.Struct("<QQQqIIQII")       # lw_close_req: ino handle size mtime mtime_ns flags blocks dom_parts trunc_epoch
assert CLOSE_REQ.size == 56
LAYOUT = struct.Struct("<IHHIiiI16sIIIHH")    # lw_layout (versions 2 and 3: mirror_count reserved)
assert LAYOUT.size == 56
OSTOBJ = struct.Struct("<IIQ")                # lw_ostobj: ost_idx flags objid
assert OSTOBJ.size == 16
SETLAYOUT_REQ = struct.Struct("<QII")         # lw_setlayout_req: ino flags pad
assert SETLAYOUT_REQ.size == 16
SWAP_REQ = struct.Struct("<QQQqII")           # lw_swap_req: ino tmp size mtime mtime_ns pad
assert SWAP_REQ.size == 40
POOL_REQ = struct.Struct("<II16s")            # lw_pool_req: cmd idx name
assert POOL_REQ.size == 24
POOL_ENT = struct.Struct("<16sII")            # lw_pool_ent: name nosts pad
assert POOL_ENT.size == 24
OST_ADMIN_REQ = struct.Struct("<IIII")        # lw_ost_admin_req: idx set clear pad
assert OST_ADMIN_REQ.size == 16
LOCK_REQ = struct.Struct("<QQQQIIII")         # lw_lock_req: ino owner start end type flags pid pad
assert LOCK_REQ.size == 48
LOCK_REP = struct.Struct("<QQII")             # lw_lock_rep: start end type pid
assert LOCK_REP.size == 24
WALK_REQ = struct.Struct("<IIH6x")            # lw_walk_req: flags open_flags pathlen pad[3]
assert WALK_REQ.size == 16
WALK_REP = struct.Struct("<120sII")           # lw_walk_rep: attr consumed flags
assert WALK_REP.size == 128
OST_REGISTER_REQ = struct.Struct("<IHH64s40s16s56s")  # want_idx port pad host uuid fsname sf
assert OST_REGISTER_REQ.size == 184
OST_REGISTER_REP = struct.Struct("<II16s")    # idx pad fsname
assert OST_REGISTER_REP.size == 24
OST_REPLACE_REP = struct.Struct("<II16sQ")    # lw_ost_replace_rep: idx pad fsname lost_below
assert OST_REPLACE_REP.size == 32
OST_REMOVE_REQ = struct.Struct("<II")         # lw_ost_remove_req: idx flags
assert OST_REMOVE_REQ.size == 8
OST_REMOVE_REP = struct.Struct("<QQ")         # lw_ost_remove_rep: files objects
assert OST_REMOVE_REP.size == 16
OSTRM_DRYRUN, OSTRM_FORCE = 0x1, 0x2          # LW_OSTRM_*
OST_ADDR = struct.Struct("<IHH64s")           # lw_ost_addr: idx port pad host
assert OST_ADDR.size == 72
HEARTBEAT_REQ = struct.Struct("<II")          # lw_ost_heartbeat_req: count pad
assert HEARTBEAT_REQ.size == 8
HEARTBEAT_ENT = struct.Struct("<II56s")       # lw_ost_heartbeat_ent: idx pad sf
assert HEARTBEAT_ENT.size == 64
SCRUB_REP = struct.Struct("<IiQqqQQQQQQQII512s")  # lw_scrub_rep: state error objid ... nbad pad bad_objids
assert SCRUB_REP.size == 608
SCRUB_FIELDS = ("state", "error", "objid", "start_time", "finish_time", "objects_checked",
                "bytes_checked", "blocks_checked", "blocks_unchecked", "bad_blocks", "bad_objects",
                "rate", "nbad", "pad", "bad_objids")


class Client:
    """A connection that authenticated (DEFAULT_KEY) and said MDS_CONNECT with a 16-byte uuid, as
    libloom does; requests go with the req_id and header flags the caller chooses. connect=False
    leaves the MDS_CONNECT to the caller (a test of MDS_CONNECT itself)."""

    def __init__(self, host, port, uuid, connect=True, timeout=30, encrypt=False):
        self.uuid = uuid
        self.conn = Conn(host, port, timeout=timeout, encrypt=encrypt)
        if connect:
            status, body = self.call(NS_OP["MDS_CONNECT"], connect_req(uuid), req_id=1)
            assert status == 0, "MDS_CONNECT failed: %d" % status
            self.root, self.session_id, fsname = CONNECT_REP.unpack_from(body)[:3]
            self.fsname = fsname.rstrip(b"\0")
            if self.last_header.rpflags & RPF_RECOVERING:
                self.say_nothing_to_replay()

    def say_nothing_to_replay(self):
        """What libloom's hello says after an MDS restart when it kept no change and holds no
        lock: the MDS, which may wait for this client until its recovery window ends, goes on."""
        status, _ = self.call(NS_OP["MDS_REPLAY"], REPLAY_REQ.pack(0, 0, 0, RP_DONE, 0, 0, 0),
                              req_id=(1 << 62) + 1)
        assert status == 0, "MDS_REPLAY (done) answered %d" % status
        status, _ = self.call(NS_OP["MDS_LOCK"], cred() + lock_req(0, 0, 2, flags=0x20),
                              req_id=(1 << 62) + 2)
        assert status == 0, "MDS_LOCK (replay done) answered %d" % status

    def call(self, opcode, body, req_id, flags=0, bulk=b""):
        """(status, body) of the reply; call_bulk for the reply's bulk too."""
        status, rbody, _ = self.call_bulk(opcode, body, req_id, flags, bulk)
        return status, rbody

    def call_bulk(self, opcode, body, req_id, flags=0, bulk=b""):
        self.conn.send(frame(opcode, body, bulk, req_id=req_id, flags=flags))
        h, rbody, rbulk = self.conn.recv_reply()
        assert h.req_id == req_id and h.opcode == opcode and h.flags & F_REPLY, h
        self.last_header = h  # its transno and last_committed (an MDS reply's prefix)
        return h.status, rbody, rbulk

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def ino_req(ino):
    return INO_REQ.pack(ino)


SYNC_BYE = 0x1                             # LW_SYNC_BYE


READDIR_REQ = struct.Struct("<QQII")      # lw_readdir_req: ino cookie max_bytes flags
READDIR_REP = struct.Struct("<II")        # lw_readdir_rep: count eof


def readdir_req(ino, cookie=0, max_bytes=4096, flags=0):
    return cred() + READDIR_REQ.pack(ino, cookie, max_bytes, flags)


LEASE_ALL = 0x1                           # lw_lease_req.flags: every lease the session holds


def lease_req(leases, flags=0):
    """MDS_LEASE's body: the leases [(ino, gen)] given back (none with LEASE_ALL)."""
    return LEASE_REQ.pack(len(leases), flags) + b"".join(LEASE.pack(i, g) for i, g in leases)


RC_ENDED = 0x1                            # lw_recall.flags: ended by the MDS, give nothing back


def recall_flags(body):
    """MDS_RECALL's flags."""
    return LEASE_REQ.unpack_from(body)[1]


def parse_recall(body):
    """MDS_RECALL's body: [(ino, gen)]."""
    count, _ = LEASE_REQ.unpack_from(body)
    return [LEASE.unpack_from(body, LEASE_REQ.size + i * LEASE.size) for i in range(count)]


def sync_req(flags=0):
    """lw_sync_req: flags, pad."""
    return struct.pack("<II", flags, 0)


def setattr_req(ino, valid, mode=0, size=0, mtime=0, mtime_ns=0, uid=0, gid=0):
    return SETATTR.pack(ino, valid, mode, uid, gid, size, 0, mtime, 0, 0, mtime_ns, 0, 0)


OPQ_LEASE = 0x4                           # lw_open_req.flags: ask for an inode lease


def open_req(ino, open_flags, flags=0):
    return OPEN_REQ.pack(ino, open_flags, flags, 0, 0)


def parse_open(body, offset=0):
    """An lw_open_rep: (attr dict, handle)."""
    _, handle, _, _, _, _, _ = OPEN_REP.unpack_from(body, offset)
    return parse_attr(body, offset), handle


def close_req(ino, handle, flags=0, size=0, mtime=0, mtime_ns=0, trunc_epoch=0, blocks=0):
    """MDS_CLOSE / MDS_SIZE_UPDATE body after the cred (no Data-on-MDT parts)."""
    return CLOSE_REQ.pack(ino, handle, size, mtime, mtime_ns, flags, blocks, 0, trunc_epoch)


def layout_req(stripe_count=0, stripe_size=0, stripe_offset=-1, pool=b"", mirror_count=0):
    """A request layout (nobjs 0): zero fields are "inherit"."""
    return LAYOUT.pack(LAYOUT_MAGIC, LAYOUT_V3 if mirror_count else LAYOUT_V2, 0, stripe_size, stripe_count,
                       stripe_offset, 0, pool, 0, 0, 0, mirror_count, 0)


def mirror_req(ino, cmd, objs=()):
    """MDS_MIRROR: objs a list of (ost_idx, objid)."""
    return MIRROR_REQ.pack(ino, cmd, len(objs)) + b"".join(OSTOBJ.pack(o, 0, i) for o, i in objs)


def setlayout_req(ino, layout, flags=0):
    return SETLAYOUT_REQ.pack(ino, flags, 0) + layout


def parse_layout(body, offset=0):
    """A layout (lw_layout + objects): a dict with "objs", a list of (ost_idx, objid)."""
    (magic, version, pattern, stripe_size, stripe_count, stripe_offset, layout_gen, pool, nobjs,
     flags, dom_size, mirror_count, _) = LAYOUT.unpack_from(body, offset)
    assert magic == LAYOUT_MAGIC and version in (LAYOUT_V2, LAYOUT_V3), (magic, version)
    objs = [OSTOBJ.unpack_from(body, offset + LAYOUT.size + k * OSTOBJ.size) for k in range(nobjs)]
    return {"stripe_size": stripe_size, "stripe_count": stripe_count, "stripe_offset": stripe_offset,
            "layout_gen": layout_gen, "pool": pool.rstrip(b"\0"), "flags": flags, "dom_size": dom_size,
            "mirror_count": max(mirror_count, 1) if nobjs else mirror_count,
            "objs": [(idx, objid) for idx, _, objid in objs],
            "stale": [k for k, (_, f, _) in enumerate(objs) if f & OBJ_STALE]}


def swap_req(ino, tmp, size, mtime, mtime_ns):
    return SWAP_REQ.pack(ino, tmp, size, mtime, mtime_ns, 0)


def pool_req(cmd, name=b"", idx=0):
    return POOL_REQ.pack(cmd, idx, name)


def parse_pools(body):
    """MDS_POOL LIST's answer: [(name, [ost indices])] in the order given."""
    out, pos = [], 0
    while pos < len(body):
        name, n, _ = POOL_ENT.unpack_from(body, pos)
        pos += POOL_ENT.size
        out.append((name.rstrip(b"\0"), list(struct.unpack_from("<%dI" % n, body, pos))))
        pos += 4 * n
    return out


# struct lw_node_ent, lw_nodemap_req, lw_nodemap_rep (wire_auth.h)
NODE_ENT = struct.Struct("<32sIIIIIIII")  # name generation flags squash_uid squash_gid uid_min uid_max gid_min gid_max
assert NODE_ENT.size == 64
NODEMAP_REP = struct.Struct("<QII")      # version count pad
NODEMAP_ADD, NODEMAP_DEL, NODEMAP_MODIFY, NODEMAP_REVOKE, NODEMAP_LIST = 1, 2, 3, 4, 5
NODE_ADMIN, NODE_TRUSTED, NODE_READONLY = 1, 2, 4


def nodemap_req(cmd, name=b"", flags=0, squash=(65534, 65534), uids=(0, 2**32 - 1), gids=(0, 2**32 - 1)):
    """MDS_NODEMAP's body after the cred prefix."""
    return struct.pack("<II", cmd, 0) + NODE_ENT.pack(name, 0, flags, squash[0], squash[1], uids[0], uids[1],
                                                      gids[0], gids[1])


def parse_nodemap(body):
    """MDS_NODEMAP's answer: (version, [{name, generation, flags, ...}])."""
    version, count, _ = NODEMAP_REP.unpack_from(body)
    assert len(body) == NODEMAP_REP.size + count * NODE_ENT.size, "MDS_NODEMAP reply of %d bytes" % len(body)
    keys = ("name", "generation", "flags", "squash_uid", "squash_gid", "uid_min", "uid_max", "gid_min", "gid_max")
    nodes = [dict(zip(keys, NODE_ENT.unpack_from(body, NODEMAP_REP.size + k * NODE_ENT.size))) for k in range(count)]
    for n in nodes:
        n["name"] = n["name"].rstrip(b"\0")
    return version, nodes


def ost_admin_req(idx, set_=0, clear=0):
    return OST_ADMIN_REQ.pack(idx, set_, clear, 0)


def lock_req(ino, owner, type_, start=0, end=(1 << 64) - 1, flags=0, pid=0):
    return LOCK_REQ.pack(ino, owner, start, end, type_, flags, pid, 0)


def walk_req(path, flags=0, open_flags=0):
    return WALK_REQ.pack(flags, open_flags, len(path)) + path


def ost_register_req(want_idx, host, port, uuid, fsname, sf):
    """MDS_OST_REGISTER (no cred): host, uuid and fsname are bytes; sf a packed lw_statfs."""
    return OST_REGISTER_REQ.pack(want_idx, port, 0, host, uuid, fsname, sf)


def ost_addr(idx, host, port):
    """MDS_OST_FAILOVER (no cred): OST idx's failover partner, host bytes (b"": none)."""
    return OST_ADDR.pack(idx, port, 0, host)


def ost_failovers_on(conn):
    """MDS_OST_FAILOVERS: {idx: (host, port)} of every OST with a failover partner."""
    h, body, _ = conn.call(OP["MDS_OST_FAILOVERS"], cred())
    if h.status != 0:
        raise AssertionError("MDS_OST_FAILOVERS failed with status %d" % h.status)
    gen, count = struct.unpack_from("<II", body, 0)
    assert len(body) == 8 + count * OST_ADDR.size, len(body)
    out = {}
    for i in range(count):
        idx, port, pad, host = OST_ADDR.unpack_from(body, 8 + i * OST_ADDR.size)
        out[idx] = (host.split(b"\0", 1)[0].decode(), port)
    return out


def ost_remove_req(idx, flags=0):
    return OST_REMOVE_REQ.pack(idx, flags)


def heartbeat_req(entries):
    """MDS_OST_HEARTBEAT (no cred): entries [(idx, packed lw_statfs)]."""
    return HEARTBEAT_REQ.pack(len(entries), 0) + b"".join(HEARTBEAT_ENT.pack(i, 0, sf) for i, sf in entries)


def parse_scrub(body):
    return dict(zip(SCRUB_FIELDS, SCRUB_REP.unpack_from(body)))


# ---- the protocol's one table (src/proto/ops.def) ------------------------------------------

OPS_DEF = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "src", "proto", "ops.def")
OPS_COLUMNS = ("name", "value", "server", "resend", "flags", "request", "reply", "handler", "net")
OPS_POLICIES = ("READ", "CACHED", "HANDLE", "REPEATS")


def read_ops_def(path=None):
    """{name: row dict} of ops.def's LW_OP(...) rows (those at the start of a line: the one in the
    opening comment is indented)."""
    rows = {}
    with open(path or OPS_DEF) as f:
        for m in re.finditer(r"^LW_OP\((.*)\)\s*$", f.read(), re.M):
            cells = [c.strip() for c in m.group(1).split(",")]
            assert len(cells) == len(OPS_COLUMNS), "a row of ops.def with %d columns: %s" % (len(cells), m.group(0))
            row = dict(zip(OPS_COLUMNS, cells))
            row["value"] = int(row["value"], 16)
            assert row["resend"] in OPS_POLICIES, "unknown RESEND %r in %s" % (row["resend"], m.group(0))
            assert row["name"] not in rows, "opcode %s twice in ops.def" % row["name"]
            rows[row["name"]] = row
    assert len(rows) > 40, "ops.def parsed to only %d rows" % len(rows)
    return rows

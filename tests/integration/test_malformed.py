"""Malformed frames sent to every server port (the MDS and each OSS). Each is answered with an
error reply or a closed connection, never a crash, and the server keeps serving everyone else."""

import os
import socket
import struct

import pytest

import loomwire as w
from loomutil import KiB, make_random_file, object_path, sha256_file

PROBE_SIZE = 300 * KiB + 11


@pytest.fixture
def servers(cluster, workdir):
    """[(name, host, port, kind, ost_idx)] for the MDS and every OSS, with a probe file striped
    over every OST for the health checks."""
    src = os.path.join(workdir, "probe")
    cluster.probe_sum = make_random_file(src, PROBE_SIZE)
    cluster.loom("setstripe", "-c", "4", "-S", "64k", "/probe")
    cluster.loom("put", src, "/probe")
    out = [("mds", cluster.mds_host, cluster.mds_port, "mds", None)]
    for k in range(cluster.osts):
        host, port = cluster.oss_addr("oss%d" % k)
        out.append(("oss%d" % k, host, port, "oss", cluster.ost_index_of_dir(k)))
    return out


def check_healthy(cluster, workdir, after):
    """Every daemon alive and serving: PING on a new connection to each, and df, ls, get."""
    for name in sorted(cluster.expected):
        assert cluster.alive(name), "%s died after %s" % (name, after)
    for name, host, port in cluster.server_addrs():
        with w.Conn(host, port) as c:
            assert c.ping() == 0, "%s does not answer PING after %s" % (name, after)
    df = cluster.loom("df").stdout
    assert "inactive" not in df and df.count("loom-OST") == 4, "df after %s:\n%s" % (after, df)
    assert cluster.loom("ls", "/").stdout == "probe\n"
    out = os.path.join(workdir, "probe.out")
    cluster.loom("get", "/probe", out)
    assert sha256_file(out) == cluster.probe_sum, "probe file reads back wrong after %s" % after


def expect_rejected(conn, what):
    """The server closes the connection, or answers with an error reply (and nothing else)."""
    closed, data = conn.wait_closed(timeout=15)
    if data:
        assert len(data) >= w.HDR.size, "%s: server sent %d stray bytes" % (what, len(data))
        h = w.Header(data[:w.HDR.size])
        assert h.magic == w.MAGIC and h.flags & w.F_REPLY and h.status < 0, "%s: answered %r" % (what, h)
        return
    assert closed, "%s: the server neither closed the connection nor answered" % what


def expect_error_reply(conn, opcode, req_id, what, status=None):
    h, body, bulk = conn.recv_frame()
    assert h.flags & w.F_REPLY, "%s: reply without the REPLY flag: %r" % (what, h)
    assert (h.opcode, h.req_id) == (opcode, req_id), "%s: reply does not echo the request: %r" % (what, h)
    assert h.status < 0, "%s: answered with status %d, expected an error" % (what, h.status)
    if status is not None:
        assert h.status == status, "%s: status %d, expected %d" % (what, h.status, status)
    assert conn.ping() == 0, "%s: the connection is unusable after the error reply" % what
    return h


def short_body(kind):
    """(opcode, body) too short for the opcode."""
    if kind == "mds":
        return w.OP["MDS_GETATTR"], w.cred() + b"\x01\x00\x00\x00"   # lw_ino_req is 8 bytes
    return w.OP["OST_GETATTR"], w.ost_io(0, 1)[:20]                  # lw_ost_io is 56 bytes


# ---- the cases: each sends one kind of bad input to one server ----


def case_garbage(conn, kind, idx):
    conn.send(b"this is not a Loom frame at all!" * 2)
    expect_rejected(conn, "garbage bytes")


def case_bad_magic(conn, kind, idx):
    conn.send(w.frame(w.OP["PING"], magic=0x4C4F4F4D))
    expect_rejected(conn, "bad magic")


def case_bad_version(conn, kind, idx):
    conn.send(w.frame(w.OP["PING"], version=w.VERSION + 1))
    expect_rejected(conn, "bad version")


def case_body_too_long(conn, kind, idx):
    conn.send(w.pack_header(w.OP["PING"], body_len=w.MAX_BODY + 1))
    expect_rejected(conn, "body_len > 1 MiB")


def case_bulk_too_long(conn, kind, idx):
    conn.send(w.pack_header(w.OP["PING"], bulk_len=w.MAX_BULK + 1, bulk_crc=0))
    expect_rejected(conn, "bulk_len > 16 MiB")


def case_wrong_hdr_crc(conn, kind, idx):
    body = w.cred() + struct.pack("<Q", 1) if kind == "mds" else w.ost_io(idx, 1)
    op = w.OP["MDS_GETATTR"] if kind == "mds" else w.OP["OST_GETATTR"]
    good = w.pack_header(op, body)
    crc = struct.unpack_from("<I", good, 36)[0]
    conn.send(w.pack_header(op, body, hdr_crc=crc ^ 0x10) + body)
    expect_rejected(conn, "wrong hdr_crc")


def case_truncated_then_close(conn, kind, idx):
    body = w.cred() + struct.pack("<Q", 1) if kind == "mds" else w.ost_io(idx, 1)
    op = w.OP["MDS_GETATTR"] if kind == "mds" else w.OP["OST_GETATTR"]
    conn.send(w.frame(op, body)[:w.HDR.size + len(body) // 2])
    conn.close()


def case_reply_flag(conn, kind, idx):
    conn.send(w.frame(w.OP["PING"], flags=w.F_REPLY))
    expect_rejected(conn, "a frame with the REPLY flag")


def case_unknown_opcode(conn, kind, idx):
    conn.send(w.frame(0x7777, w.cred(), req_id=42))
    expect_error_reply(conn, 0x7777, 42, "unknown opcode")


def case_other_servers_opcode(conn, kind, idx):
    op = w.OP["OST_READ"] if kind == "mds" else w.OP["MDS_GETATTR"]
    body = w.ost_io(0, 1, length=10) if kind == "mds" else w.cred() + struct.pack("<Q", 1)
    conn.send(w.frame(op, body, req_id=43))
    expect_error_reply(conn, op, 43, "the other server kind's opcode")


def case_short_body(conn, kind, idx):
    op, body = short_body(kind)
    conn.send(w.frame(op, body, req_id=44))
    expect_error_reply(conn, op, 44, "a too-short body", status=-w.EPROTO)


def case_body_shorter_than_cred(conn, kind, idx):
    op = w.OP["MDS_GETATTR"] if kind == "mds" else w.OP["OST_READ"]
    conn.send(w.frame(op, b"\0" * 8, req_id=45))
    expect_error_reply(conn, op, 45, "a body shorter than its fixed part", status=-w.EPROTO)


def send_bulk_to_mds(conn, bulk, what):
    # No MDS request takes bulk data: such a frame closes the connection, before its bulk is
    # even read (so the send may be cut short).
    op, body = w.OP["MDS_GETATTR"], w.cred() + struct.pack("<Q", 1)
    try:
        conn.send(w.frame(op, body, bulk, req_id=46, bulk_crc=w.crc32c(bulk)))
    except (BrokenPipeError, ConnectionResetError):
        pass
    expect_rejected(conn, what)


def case_wrong_bulk_crc(conn, kind, idx):
    bulk = os.urandom(4096)
    if kind == "mds":
        send_bulk_to_mds(conn, bulk, "bulk data sent to the MDS")
        return
    op, body = w.OP["OST_WRITE"], w.ost_io(idx, BAD_OBJID, 0, len(bulk), ino=999)
    conn.send(w.frame(op, body, bulk, req_id=46, bulk_crc=w.crc32c(bulk) ^ 1))
    expect_error_reply(conn, op, 46, "a bulk with a wrong bulk_crc", status=-w.EBADMSG)
    if kind == "oss":
        # Nothing of the rejected bulk reached the object.
        h, rbody, _ = conn.call(w.OP["OST_GETATTR"], w.ost_io(idx, BAD_OBJID))
        assert h.status == 0 and w.OST_IO_REP.unpack(rbody)[1] == 0, \
            "the object of a write rejected for its bulk_crc has size %d" % w.OST_IO_REP.unpack(rbody)[1]


def case_megabyte_of_random_bytes(conn, kind, idx):
    try:
        conn.send(os.urandom(1 << 20))
    except (BrokenPipeError, ConnectionResetError):
        return  # closed before we finished: that is a rejection too
    expect_rejected(conn, "1 MiB of random bytes")


def case_max_body_unknown_opcode(conn, kind, idx):
    # A body of exactly LW_MAX_BODY is a legal frame: it gets an error reply, not a close.
    conn.send(w.frame(0x7778, os.urandom(w.MAX_BODY), req_id=47))
    expect_error_reply(conn, 0x7778, 47, "an unknown opcode with a 1 MiB body")


def case_max_bulk_wrong_crc(conn, kind, idx):
    # A bulk of exactly LW_MAX_BULK is a legal frame; its (wrong) checksum earns -EBADMSG.
    bulk = os.urandom(w.MAX_BULK)
    if kind == "mds":
        send_bulk_to_mds(conn, bulk, "16 MiB of bulk data sent to the MDS")
        return
    op, body = w.OP["OST_WRITE"], w.ost_io(idx, BAD_OBJID + 3, 0, len(bulk), ino=999)
    conn.send(w.frame(op, body, bulk, req_id=48, bulk_crc=0x12345678))
    expect_error_reply(conn, op, 48, "a 16 MiB bulk with a wrong bulk_crc", status=-w.EBADMSG)


def case_bad_fixed_fields(conn, kind, idx):
    if kind == "mds":
        # ngroups far beyond LOOM_MAX_GROUPS (and whose byte count overflows 32 bits)
        op, body = w.OP["MDS_GETATTR"], struct.pack("<IIII", 0, 0, 0xFFFFFFFF, 0) + struct.pack("<Q", 1)
    else:
        op, body = w.OP["OST_GETATTR"], w.ost_io(idx, 1, flags=0xFFFFFFFF)   # flags are reserved, 0
    conn.send(w.frame(op, body, req_id=49))
    expect_error_reply(conn, op, 49, "a body with invalid fixed fields", status=-w.EPROTO)


def case_length_beyond_body(conn, kind, idx):
    if kind == "mds":
        # lw_name_req says 200 bytes of name; 10 follow
        op, body = w.OP["MDS_LOOKUP"], w.cred() + struct.pack("<QH6x", 1, 200) + b"abcdefghij"
    else:
        # a read longer than any bulk may be
        op, body = w.OP["OST_READ"], w.ost_io(idx, 1, 0, w.MAX_BULK + 1)
    conn.send(w.frame(op, body, req_id=50))
    expect_error_reply(conn, op, 50, "a length field beyond the body or limits", status=-w.EPROTO)


BAD_OBJID = 0xFEED00000001

CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_input_leaves_every_server_serving(cluster, servers, workdir, case):
    fn = CASES[case]
    for name, host, port, kind, idx in servers:
        conn = w.Conn(host, port)
        try:
            fn(conn, kind, idx)
        finally:
            conn.close()
        check_healthy(cluster, workdir, "%s sent to %s" % (case, name))


def test_half_open_connection_does_not_block_others(cluster, servers, workdir):
    held = []
    try:
        for name, host, port, kind, idx in servers:
            c = w.Conn(host, port)
            c.send(w.frame(w.OP["PING"])[:20])   # half a header, then silence
            held.append(c)
        check_healthy(cluster, workdir, "half a header left open on every server")
    finally:
        for c in held:
            c.close()
    check_healthy(cluster, workdir, "closing the half-open connections")


def test_valid_write_with_right_bulk_crc_is_accepted(cluster, servers):
    # The control for the bulk_crc case: the same write with the right checksum lands on disk.
    name, host, port, kind, idx = servers[1]
    bulk = os.urandom(4096)
    with w.Conn(host, port) as c:
        h, body, _ = c.call(w.OP["OST_WRITE"], w.ost_io(idx, BAD_OBJID + 1, 0, len(bulk), ino=999), bulk)
        assert h.status == 0, h
        assert w.OST_IO_REP.unpack(body)[:2] == (len(bulk), len(bulk))
        h, _, got = c.call(w.OP["OST_READ"], w.ost_io(idx, BAD_OBJID + 1, 0, len(bulk)))
        assert h.status == 0 and got == bulk
    with open(object_path(cluster.ost_dir(idx), BAD_OBJID + 1), "rb") as f:
        assert f.read() == bulk


def test_mds_answers_getattr_of_root_over_raw_wire(cluster):
    with w.Conn(cluster.mds_host, cluster.mds_port) as c:
        h, body, _ = c.call(w.OP["MDS_GETATTR"], w.cred() + struct.pack("<Q", 1))
    assert h.status == 0, h
    attr = w.parse_attr(body)
    assert attr["ino"] == 1 and (attr["mode"] & 0o170000) == 0o040000, attr


def test_connection_closed_mid_bulk_leaves_oss_serving(cluster, servers, workdir):
    for name, host, port, kind, idx in servers[1:]:
        bulk = os.urandom(1 << 20)
        c = w.Conn(host, port)
        data = w.frame(w.OP["OST_WRITE"], w.ost_io(idx, BAD_OBJID + 2, 0, len(bulk)), bulk)
        c.send(data[:len(data) // 2])
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
        check_healthy(cluster, workdir, "a connection closed mid-bulk on %s" % name)

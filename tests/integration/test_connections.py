"""Many clients at once: the MDS serves 1,000 simultaneous connections from an event loop, not a
thread per connection."""

import os
import selectors
import socket
import struct
import threading
import time

import pytest

import loomwire as w
from loomutil import nofile_at_least

NCONN = 1000
S_IFMT, S_IFDIR = 0o170000, 0o040000


@pytest.fixture
def enough_fds():
    with nofile_at_least(NCONN + 200):
        yield


def thread_count(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def test_1000_simultaneous_connections_each_get_root_attributes(cluster, enough_fds):
    mds_pid = cluster.pid("mds")
    threads_idle = thread_count(mds_pid)
    conns, socks = [], []
    try:
        for i in range(NCONN):
            # Each proves it holds the file system key, as every client does (and seals its
            # frames with its own session keys). From 100 addresses, as from 100 nodes: one
            # address keeps at most 256 connections (--max-conns-per-peer).
            conns.append(w.Conn(cluster.mds_host, cluster.mds_port, timeout=30,
                                source="127.0.4.%d" % (1 + i % 100)))
            socks.append(conns[-1].sock)
        # Every connection is open; now each sends its request before any reply is read.
        for i, s in enumerate(socks):
            s.sendall(conns[i].sealed(w.frame(w.OP["MDS_GETATTR"], w.cred() + struct.pack("<Q", 1),
                                              req_id=1000 + i)))

        threads_busy = thread_count(mds_pid)

        sel = selectors.DefaultSelector()
        bufs = {}
        for i, s in enumerate(socks):
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, i)
            bufs[i] = bytearray()
        replies = {}
        closed = []
        deadline = time.monotonic() + 120
        while len(replies) + len(closed) < NCONN and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1):
                i = key.data
                try:
                    chunk = key.fileobj.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    closed.append(i)
                    sel.unregister(key.fileobj)
                    continue
                bufs[i] += chunk
                if len(bufs[i]) >= w.HDR.size:
                    raw = bytes(bufs[i][:w.HDR.size])
                    h = w.Header(raw)
                    end = w.HDR.size + h.body_len + h.bulk_len
                    if len(bufs[i]) >= end + w.TAG_LEN:
                        b = bytes(bufs[i])
                        body, _ = conns[i].open(raw, b[w.HDR.size:w.HDR.size + h.body_len],
                                                b[w.HDR.size + h.body_len:end], b[end:end + w.TAG_LEN])
                        replies[i] = (h, w.take_mds_prefix(h, body))
                        sel.unregister(key.fileobj)
        sel.close()
        threads_after = thread_count(mds_pid)
    finally:
        for s in socks:
            s.close()

    assert not closed, "the MDS closed %d of %d connections (first: %r)" % (len(closed), NCONN, closed[:5])
    assert len(replies) == NCONN, "only %d of %d connections got a reply within 120 s" % (len(replies), NCONN)
    bad = []
    for i, (h, body) in sorted(replies.items()):
        ok = (h.magic == w.MAGIC and h.flags & w.F_REPLY and h.req_id == 1000 + i and
              h.opcode == w.OP["MDS_GETATTR"] and h.status == 0 and len(body) == w.ATTR.size)
        if ok:
            attr = w.parse_attr(body)
            ok = attr["ino"] == 1 and (attr["mode"] & S_IFMT) == S_IFDIR
        if not ok:
            bad.append((i, h, body[:16]))
    assert not bad, "%d connections got a wrong reply, e.g. %r" % (len(bad), bad[:3])
    assert max(threads_busy, threads_after) < 20, (
        "the MDS runs %d threads with %d connections open (%d when idle): a thread per connection?"
        % (max(threads_busy, threads_after), NCONN, threads_idle))
    assert cluster.alive("mds")
    assert cluster.loom("ls", "/").returncode == 0


def test_many_pipelined_requests_on_one_connection_are_all_answered(cluster):
    # One connection carries many requests at once (more than the server keeps in flight per
    # connection, so it must pause reading and resume): every one is answered, matched by id.
    n = 5000
    req = w.cred() + struct.pack("<Q", 1)
    data = b"".join(w.frame(w.OP["MDS_GETATTR"], req, req_id=i + 1) for i in range(n))
    with w.Conn(cluster.mds_host, cluster.mds_port, timeout=60) as c:
        sender = threading.Thread(target=c.send, args=(data,), daemon=True)
        sender.start()
        seen = set()
        for _ in range(n):
            h, body, _ = c.recv_frame()
            assert h.status == 0 and h.opcode == w.OP["MDS_GETATTR"], h
            assert w.parse_attr(body)["ino"] == 1
            seen.add(h.req_id)
        sender.join(timeout=60)
        assert c.ping() == 0
    assert seen == set(range(1, n + 1)), "replies missing or duplicated"

"""Peers of incompatible builds: a server answers a frame of a protocol version it does not speak
with a refusal that names its versions and release (struct lw_version_refusal), logs both sides'
versions and keeps serving; a client refused so says which versions each side speaks."""

import errno
import os
import re
import socket
import struct
import subprocess
import threading

import pytest

import loomwire as w
from loomutil import LOOM, read, wait_until

REFUSAL = struct.Struct("<HHI24s")  # version_min version_max pad release[24]
EPROTONOSUPPORT = 93


def release():
    from test_server_config import release as r
    return r()


def refused_by(host, port, version):
    """Sends a PING of `version` on a new (unauthenticated) connection: (header, body) of the
    answer, after which the server must have closed the connection."""
    c = w.Conn(host, port, auth=False)
    try:
        c.send_raw(w.frame(w.OP["PING"], req_id=77, version=version))
        raw = c.recv_exact(w.HDR.size)
        h = w.Header(raw)
        body = c.recv_exact(h.body_len)
        assert w.crc32c(body, w.crc32c(raw[:36] + b"\0\0\0\0")) == h.hdr_crc
        closed, extra = c.wait_closed(timeout=15)
        assert closed and not extra, "the server kept the connection open after refusing it"
        return h, body
    finally:
        c.close()


def test_a_server_answers_every_version_it_accepts(cluster):
    """LW_VERSION_MIN to LW_VERSION: a PING of each is answered (here: refused for want of the key,
    which only a frame the server took can be), in the server's version."""
    for version in range(w.VERSION_MIN, w.VERSION + 1):
        h, _ = refused_by(cluster.mds_host, cluster.mds_port, version)
        assert (h.version, h.opcode, h.req_id, h.flags) == (w.VERSION, w.OP["PING"], 77, w.F_REPLY)
        assert h.status == -errno.EACCES, (version, h)


@pytest.mark.parametrize("version", [w.VERSION_MIN - 1, w.VERSION + 1, 0, 0xFFFF])
def test_a_server_refuses_another_protocol_version_and_says_which_it_speaks(cluster, version):
    cluster.allow_log(r"speaks protocol")
    targets = [("mds", cluster.mds_host, cluster.mds_port)] + \
        [("oss%d" % k,) + cluster.oss_addr("oss%d" % k) for k in range(1)]
    for name, host, port in targets:
        h, body = refused_by(host, port, version)
        assert (h.magic, h.version, h.opcode, h.req_id) == (w.MAGIC, w.VERSION, w.OP["PING"], 77)
        assert h.flags == w.F_REPLY and h.status == -EPROTONOSUPPORT and h.bulk_len == 0
        vmin, vmax, pad, rel = REFUSAL.unpack(body)
        assert (vmin, vmax, pad) == (w.VERSION_MIN, w.VERSION, 0)
        assert rel.rstrip(b"\0").decode() == release()
        line = "connection %s speaks protocol %d; this server (loom %s) speaks %d to %d: refused" % (
            "%s", version, release(), w.VERSION_MIN, w.VERSION)
        pat = re.escape(line).replace("%s", r"\d+ from 127\.0\.0\.1:\d+")
        assert wait_until(lambda: re.search(pat, cluster.read_log(name)), 10), cluster.read_log(name)[-2000:]
    # Everyone else is served as before.
    assert cluster.loom("df").stdout.count("OST") >= cluster.osts
    with w.Conn(cluster.mds_host, cluster.mds_port) as c:
        assert c.ping() == 0


def test_another_version_on_an_authenticated_connection_closes_it(cluster):
    with w.Conn(cluster.mds_host, cluster.mds_port) as c:
        c.send(w.frame(w.OP["PING"], version=w.VERSION + 1))
        closed, data = c.wait_closed(timeout=15)
        assert closed and not data


class RefusingServer:
    """A stand-in for a server of another build: reads the first frame of each connection and
    answers it with `answer(header)` (bytes), then closes."""

    def __init__(self, answer):
        self.answer = answer
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.seen = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            with s:
                s.settimeout(10)
                try:
                    raw = b""
                    while len(raw) < w.HDR.size:
                        chunk = s.recv(w.HDR.size - len(raw))
                        if not chunk:
                            break
                        raw += chunk
                    if len(raw) < w.HDR.size:
                        continue
                    h = w.Header(raw)
                    self.seen.append(h)
                    s.sendall(self.answer(h))
                except OSError:
                    pass

    def close(self):
        self.sock.close()


def refusal_from(vmin, vmax, rel):
    def answer(h):
        body = REFUSAL.pack(vmin, vmax, 0, rel.encode())
        return w.frame(h.opcode, body, req_id=h.req_id, flags=w.F_REPLY, status=-EPROTONOSUPPORT,
                       version=vmax)
    return answer


@pytest.fixture
def no_key_env(workdir):
    env = dict(os.environ)
    for k in ("LOOM_KEY_FILE", "LOOM_FS", "LOOM_CONFIG"):
        env.pop(k, None)
    env["LOOM_CONFIG"] = os.path.join(workdir, "none.conf")
    return env


@pytest.mark.parametrize("keyed", [False, True])
def test_a_client_refused_names_both_sides_versions(cluster, no_key_env, keyed):
    srv = RefusingServer(refusal_from(w.VERSION + 1, w.VERSION + 2, "9.9.9"))
    try:
        argv = [LOOM, "--fs", "127.0.0.1:%d" % srv.port] + (["--key", cluster.key] if keyed else []) + ["df"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=no_key_env)
    finally:
        srv.close()
    assert r.returncode != 0
    assert ("MDS (127.0.0.1:%d): the server (loom 9.9.9) speaks protocol %d to %d; this client (loom %s) speaks "
            "%d to %d: refused" % (srv.port, w.VERSION + 1, w.VERSION + 2, release(), w.VERSION_MIN, w.VERSION)) \
        in r.stderr, r.stderr
    assert srv.seen and srv.seen[0].version == w.VERSION


def test_a_client_refused_without_a_refusal_body_still_names_the_versions(cluster, no_key_env):
    def bare(h):
        return w.pack_header(h.opcode, req_id=h.req_id, flags=w.F_REPLY, status=-EPROTONOSUPPORT,
                             version=w.VERSION + 1)
    srv = RefusingServer(bare)
    try:
        r = subprocess.run([LOOM, "--fs", "127.0.0.1:%d" % srv.port, "df"], capture_output=True, text=True,
                           timeout=120, env=no_key_env)
    finally:
        srv.close()
    assert r.returncode != 0
    assert ("MDS (127.0.0.1:%d): the server speaks protocol %d; this client (loom %s) speaks %d to %d"
            % (srv.port, w.VERSION + 1, release(), w.VERSION_MIN, w.VERSION)) in r.stderr, r.stderr

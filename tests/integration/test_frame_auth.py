"""Every frame authenticated: a man in the middle without the key, between real clients (the `loom`
command, a mount) and the MDS or an OSS, lets the AUTH_* exchange through and then tries to inject,
alter, replay, reorder and drop frames, both ways. Each attempt is refused: the frame is never
used (the injected create does not exist, the data on the servers and read back is the client's),
the side that found it logs it and drops the connection, and the client reconnects, resends and
carries on. A relay that changes nothing is a relay like any other, and with encryption it sees
none of the data it carries.

The relay sits in front of the MDS (the client is pointed at it) and of the only OSS, which is
restarted by hand on 127.0.0.2 and advertises 127.0.0.1, where the relay listens on its port: the
MDS's OST table sends every client (and the MDS's own destroyer) through the relay.
"""

import os
import socket
import subprocess
import threading
import time

import pytest

import loomwire as w
from loomutil import LOOM, OSS_BIN, OST_REGISTERED_AT, is_mounted, recv_exact, wait_until

TAG = w.TAG_LEN
SERVER_REFUSED = "a frame failed authentication"       # net/server_read.c
CLIENT_REFUSED = "a reply failed authentication"       # net/rpc_recv.c


class Frame:
    """One frame as it crossed the relay: header, body, bulk and (once sealed) tag, raw."""

    def __init__(self, raw, body, bulk, tag):
        self.raw, self.body, self.bulk, self.tag = raw, body, bulk, tag
        self.h = w.Header(raw)

    def bytes(self):
        return self.raw + self.body + self.bulk + self.tag


class Pair:
    """One client connection through the relay and its connection to the server."""

    def __init__(self, down, up):
        self.down, self.up = down, up
        self.up_local = "%s:%d" % up.getsockname()[:2]  # how the server names this peer
        self.sealed = {"c2s": False, "s2c": False}
        self.count = {"c2s": 0, "s2c": 0}   # sealed frames seen each way
        self.tampered = None                # the direction tampered with on this pair
        self.closed_by = None               # "server" or "client": who hung up first
        self.sent = {"c2s": [], "s2c": []}  # sealed frames as they went on (for replays)


class Relay:
    """A TCP relay that parses the frames it carries (their headers are in the clear) and hands
    each sealed one to plan(pair, direction, frame) while armed, which returns the frames (bytes)
    to send on instead, or None for "as it came". The plan fires on one pair only: the client's
    next connection goes through untouched. Every byte carried is kept (self.carried)."""

    def __init__(self, listen_host, listen_port, up_host, up_port):
        self.up = (up_host, up_port)
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((listen_host, listen_port))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.addr = "%s:%d" % (listen_host, self.port)
        self.lock = threading.Lock()
        self.pairs = []
        self.plan = None
        self.fired_on = None       # the pair the plan fired on
        self.carried = {"c2s": bytearray(), "s2c": bytearray()}
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, plan):
        with self.lock:
            self.plan, self.fired_on = plan, None

    def _accept(self):
        while not self.stopping:
            try:
                down, _ = self.lsock.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(self.up, timeout=10)
            except OSError:
                down.close()
                continue
            up.settimeout(None)
            for s in (down, up):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = Pair(down, up)
            with self.lock:
                self.pairs.append(pair)
            threading.Thread(target=self._pump, args=(pair, "c2s"), daemon=True).start()
            threading.Thread(target=self._pump, args=(pair, "s2c"), daemon=True).start()

    def _decide(self, pair, direction, f):
        with self.lock:
            if self.plan is None or (self.fired_on is not None and self.fired_on is not pair):
                return None
            out = self.plan(pair, direction, f)
            if out is not None:
                self.fired_on = pair
                pair.tampered = direction
            return out

    def _pump(self, pair, direction):
        src, dst = (pair.down, pair.up) if direction == "c2s" else (pair.up, pair.down)
        sender, receiver = ("client", "server") if direction == "c2s" else ("server", "client")
        gone = sender    # who hung up, if this pump stops: the end it reads from ...
        try:
            while True:
                raw = recv_exact(src, w.HDR.size)
                h = w.Header(raw)
                body = recv_exact(src, h.body_len) if h.body_len else b""
                bulk = recv_exact(src, h.bulk_len) if h.bulk_len else b""
                sealed = pair.sealed[direction]
                tag = recv_exact(src, TAG) if sealed else b""
                f = Frame(raw, body, bulk, tag)
                out = None
                if sealed:
                    out = self._decide(pair, direction, f)
                    pair.count[direction] += 1
                if out is None:
                    out = [f.bytes()]
                for data in out:
                    with self.lock:
                        self.carried[direction] += data
                    try:
                        dst.sendall(data)
                    except OSError:
                        gone = receiver   # ... or the one it writes to
                        raise
                if sealed:
                    pair.sent[direction].append(f)
                if h.opcode == w.OP["AUTH_PROVE"] and h.status == 0:
                    pair.sealed[direction] = True   # the next frame this way is sealed
        except (EOFError, OSError):
            pass
        with self.lock:
            if pair.closed_by is None and not self.stopping:
                pair.closed_by = gone
        for s in (dst, src):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self):
        self.stopping = True
        self.lsock.close()
        with self.lock:
            pairs = list(self.pairs)
        for p in pairs:
            for s in (p.down, p.up):
                try:
                    s.close()
                except OSError:
                    pass

    def tampered_pair(self):
        with self.lock:
            return self.fired_on


def flip(data, at):
    at %= len(data)
    return data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1:]


# ---- what the relay tries ----

def nth(opcode, n, direction="c2s"):
    """A predicate: the n-th (0-based) sealed frame with opcode going that way on a pair."""
    seen = {}

    def match(pair, d, f):
        if d != direction or (opcode is not None and f.h.opcode != opcode):
            return False
        k = seen.get(id(pair), 0)
        seen[id(pair)] = k + 1
        return k == n
    return match


def alter_body(match):
    return lambda pair, d, f: [f.raw + flip(f.body, len(f.body) // 2) + f.bulk + f.tag] if match(pair, d, f) else None


def alter_bulk(match):
    return lambda pair, d, f: [f.raw + f.body + flip(f.bulk, 12345) + f.tag] if match(pair, d, f) else None


def drop(match):
    return lambda pair, d, f: [] if match(pair, d, f) else None


def replay_first(match):
    """After the matched frame, the first sealed frame this way sent again."""
    return lambda pair, d, f: [f.bytes(), pair.sent[d][0].bytes()] if match(pair, d, f) else None


class Reorder:
    """The matched frame is held back and sent after the next one (or after 2 s)."""

    def __init__(self, match):
        self.match, self.held = match, None

    def __call__(self, pair, d, f):
        if self.held is not None and d == self.held[0]:
            held, self.held = self.held[1], None
            return [f.bytes(), held.bytes()]
        if self.match(pair, d, f):
            self.held = (d, f)
            return []
        return None


def inject_create(name, tag_from, match):
    """Before the matched frame, an MDS_CREATE of /name by uid 0 built without the key: a frame
    with a copied tag (the previous frame's) or a made-up one."""
    def make(pair, d, f):
        if not match(pair, d, f):
            return None
        body = w.cred(uid=0) + w.create_req(w.ROOT_INO, name.encode(), mode=0o100600)
        fake = w.frame(w.NS_OP["MDS_CREATE"], body, req_id=f.h.req_id + 1000)
        tag = pair.sent[d][-1].tag if tag_from == "copied" and pair.sent[d] else os.urandom(TAG)
        return [fake + tag, f.bytes()]
    return make


# ---- the cluster behind the relays ----

class Relayed:
    def __init__(self, cluster, mds_relay, oss_relay, oss_proc, oss_log):
        self.cluster, self.mds, self.oss = cluster, mds_relay, oss_relay
        self.oss_proc, self.oss_log = oss_proc, oss_log

    def loom(self, *args, check=True, input=None, text=True, encrypt=False):
        """`loom ARGS` through the relays."""
        env = dict(self.cluster.env, LOOM_FS=self.mds.addr)
        argv = [LOOM] + (["--encrypt"] if encrypt else []) + [str(a) for a in args]
        p = subprocess.run(argv, input=input, capture_output=True, text=text, env=env, timeout=300)
        if check and p.returncode != 0:
            raise AssertionError("`loom %s` through the relay exited %d:\n%s" % (" ".join(argv[1:]),
                                 p.returncode, p.stderr))
        return p

    def oss_log_text(self):
        with open(self.oss_log, errors="replace") as f:
            return f.read()

    def server_log(self, which):
        return self.cluster.read_log("mds") if which == "mds" else self.oss_log_text()


def start_relayed(cluster, encrypt_oss=False):
    """The cluster's OSS restarted behind a relay (see the module's docstring), and a relay in
    front of the MDS."""
    cluster.kill9("oss0")
    pf = os.path.join(cluster.dir, "run", "oss0-relayed.addr")
    log_path = os.path.join(cluster.dir, "log", "oss0-relayed.log")
    before = len(OST_REGISTERED_AT.findall(cluster.read_log("mds")))
    # The relay takes a port the kernel picks on 127.0.0.1 first, then the OSS listens on the same
    # port of 127.0.0.2. The other way round, another test may hold that port on 127.0.0.1 already
    # (CI saw EADDRINUSE); this way the OSS's bind is the one that can fail, and it is retried.
    for attempt in range(10):
        oss_relay = Relay("127.0.0.1", 0, "127.0.0.2", 0)
        port = oss_relay.port
        oss_relay.up = ("127.0.0.2", port)
        argv = [OSS_BIN, "--ost", os.path.join(cluster.dir, "ost0"), "--mds", cluster.addr,
                "--listen", "127.0.0.2:%d" % port, "--advertise", "127.0.0.1",
                "--port-file", pf, "--key", cluster.key] + (["--encrypt"] if encrypt_oss else [])
        log = open(log_path, "a")
        proc = subprocess.Popen(argv, stdout=log, stderr=log)
        log.close()
        assert wait_until(lambda: os.path.exists(pf) or proc.poll() is not None, 30), \
            "the OSS started by hand wrote no port file"
        if os.path.exists(pf):
            break
        oss_relay.stop()
    else:
        pytest.fail("the OSS started by hand found no free port:\n" + open(log_path).read()[-2000:])
    mds_relay = Relay("127.0.0.1", 0, cluster.mds_host, cluster.mds_port)
    assert wait_until(lambda: len(OST_REGISTERED_AT.findall(cluster.read_log("mds"))) > before, 60, 0.1), \
        "the OSS started by hand did not register:\n" + open(log_path).read()[-2000:]
    return Relayed(cluster, mds_relay, oss_relay, proc, log_path)


@pytest.fixture(params=[False], ids=["authenticated"])
def relayed(request, cluster_factory):
    cluster = cluster_factory(osts=1)
    r = start_relayed(cluster, encrypt_oss=request.param)
    try:
        yield r
        assert r.oss_proc.poll() is None, "the OSS died:\n" + r.oss_log_text()[-3000:]
        assert cluster.alive("mds"), "the MDS died"
    finally:
        r.mds.stop()
        r.oss.stop()
        if r.oss_proc.poll() is None:
            r.oss_proc.terminate()
        r.oss_proc.wait(timeout=60)


@pytest.fixture
def data(workdir):
    """A 20 MiB file (five 4 MiB writes in flight at once from `loom put`)."""
    path = os.path.join(workdir, "data")
    with open(path, "wb") as f:
        f.write(os.urandom(20 << 20))
    return path


def read_direct(cluster, path):
    """A file read back without the relays."""
    return cluster.loom("get", path, "-", text=False).stdout


def names_direct(cluster):
    return set(cluster.loom("ls", "/").stdout.split())


def refused_and_dropped(r, which, relay, before, log_text):
    """The side that got the frame said so, naming the peer, and the pair was hung up by it."""
    pair = relay.tampered_pair()
    assert pair is not None, "the relay never tampered (its plan matched nothing)"
    closer = "server" if pair.tampered == "c2s" else "client"
    assert wait_until(lambda: pair.closed_by is not None, 30), "the tampered connection stays open"
    assert pair.closed_by == closer, "the %s, not the %s, hung up the tampered connection" % (
        pair.closed_by, closer)
    if closer == "server":
        peer = pair.up_local
        assert wait_until(lambda: r.server_log(which).count(SERVER_REFUSED) > before, 10), \
            "the %s did not log the refused frame:\n%s" % (which, r.server_log(which)[-2000:])
        line = [ln for ln in r.server_log(which).splitlines() if SERVER_REFUSED in ln][-1]
        assert peer in line, "the log line does not name the peer %s: %s" % (peer, line)
    else:
        assert CLIENT_REFUSED in log_text, "the client did not say why it reconnected:\n" + log_text
    # The client came back on a new connection, which went through.
    assert len(relay.pairs) >= 2, "the client did not reconnect"


# ---- the tests ----

def test_a_relay_that_changes_nothing_is_a_relay(relayed, data, workdir):
    r = relayed
    r.loom("mkdir", "/d")
    r.loom("put", data, "/d/x")
    assert r.loom("get", "/d/x", "-", text=False).stdout == open(data, "rb").read()
    assert read_direct(r.cluster, "/d/x") == open(data, "rb").read()
    assert "d" in r.loom("ls", "/").stdout.split()
    for which in ("mds", "oss"):
        assert SERVER_REFUSED not in r.server_log(which)
    # Without encryption the data is authenticated, not hidden: it crossed the relay in the clear.
    assert open(data, "rb").read()[10 << 20:(10 << 20) + 4096] in r.oss.carried["c2s"]


@pytest.mark.parametrize("tag_from", ["copied", "made up"])
def test_an_injected_create_is_refused_and_never_runs(relayed, data, tag_from):
    r = relayed
    before = r.cluster.read_log("mds").count(SERVER_REFUSED)
    r.mds.arm(inject_create("injected", tag_from, nth(None, 2)))
    p = r.loom("put", data, "/x")
    refused_and_dropped(r, "mds", r.mds, before, p.stderr)
    assert "injected" not in names_direct(r.cluster), "the injected MDS_CREATE ran"
    assert read_direct(r.cluster, "/x") == open(data, "rb").read()


def test_an_altered_request_body_is_refused(relayed, data):
    r = relayed
    before = r.cluster.read_log("mds").count(SERVER_REFUSED)
    # The name in the MDS_CREATE of /victim: altered in flight, it would make another name.
    r.mds.arm(alter_body(nth(w.NS_OP["MDS_CREATE"], 0)))
    p = r.loom("put", data, "/victim")
    refused_and_dropped(r, "mds", r.mds, before, p.stderr)
    assert names_direct(r.cluster) == {"victim"}, names_direct(r.cluster)
    assert read_direct(r.cluster, "/victim") == open(data, "rb").read()


@pytest.mark.parametrize("how", ["altered bulk", "replayed", "reordered", "dropped"])
def test_a_write_tampered_with_is_refused_and_the_data_is_the_clients(relayed, data, how):
    r = relayed
    before = r.oss_log_text().count(SERVER_REFUSED)
    write = w.OP["OST_WRITE"]
    plan = {"altered bulk": lambda: alter_bulk(nth(write, 1)),
            "replayed": lambda: replay_first(nth(write, 2)),
            "reordered": lambda: Reorder(nth(write, 1)),
            "dropped": lambda: drop(nth(write, 1))}[how]()
    r.oss.arm(plan)
    p = r.loom("put", data, "/x")
    refused_and_dropped(r, "oss", r.oss, before, p.stderr)
    assert read_direct(r.cluster, "/x") == open(data, "rb").read(), "the OST holds other data than the client's"


@pytest.mark.parametrize("how", ["altered bulk", "injected", "reordered", "dropped"])
def test_a_read_reply_tampered_with_is_refused_by_the_client(relayed, data, how):
    r = relayed
    r.cluster.loom("put", data, "/x")
    read = w.OP["OST_READ"]
    plan = {"altered bulk": lambda: alter_bulk(nth(read, 1, "s2c")),
            # a reply the relay makes up: one already sent, again before the next
            "injected": lambda: replay_first(nth(read, 1, "s2c")),
            "reordered": lambda: Reorder(nth(read, 1, "s2c")),
            "dropped": lambda: drop(nth(read, 1, "s2c"))}[how]()
    r.oss.arm(plan)
    p = r.loom("get", "/x", "-", text=False)
    assert p.stdout == open(data, "rb").read(), "the client read other data than the file's"
    refused_and_dropped(r, "oss", r.oss, 0, p.stderr.decode(errors="replace"))


def test_an_altered_metadata_reply_is_refused_by_the_client(relayed, data):
    r = relayed
    r.cluster.loom("mkdir", "/d")
    r.mds.arm(alter_body(nth(None, 2, "s2c")))
    p = r.loom("put", data, "/d/x")
    refused_and_dropped(r, "mds", r.mds, 0, p.stderr)
    assert read_direct(r.cluster, "/d/x") == open(data, "rb").read()


# ---- encryption ----

MARKER = b"loom-frame-auth-marker-"


def test_encryption_hides_names_and_data_from_the_relay(cluster_factory, workdir):
    """The OSS requires encryption (--encrypt): every client encrypts to it, asked or not, and a
    client that will not is refused. `loom --encrypt` encrypts to the MDS too."""
    cluster = cluster_factory(osts=1)
    r = start_relayed(cluster, encrypt_oss=True)
    try:
        payload = MARKER * ((4 << 20) // len(MARKER))
        src = os.path.join(workdir, "marked")
        with open(src, "wb") as f:
            f.write(payload)
        name = "secret-name-" + "q" * 20
        r.loom("put", src, "/" + name, encrypt=True)
        assert r.loom("get", "/" + name, "-", text=False, encrypt=True).stdout == payload
        assert name.encode() not in r.mds.carried["c2s"] + r.mds.carried["s2c"], \
            "the name crossed the relay in the clear"
        assert read_direct(cluster, "/" + name) == payload
        for direction in ("c2s", "s2c"):
            assert MARKER not in r.oss.carried[direction], "the data crossed the relay in the clear"
        assert SERVER_REFUSED not in r.oss_log_text()

        # Without --encrypt the client still encrypts to the OSS (it requires it).
        r.oss.carried["c2s"].clear()
        r.loom("put", src, "/plain-client")
        assert read_direct(cluster, "/plain-client") == payload
        assert MARKER not in r.oss.carried["c2s"]

        # A client that proves it holds the key without encrypting is refused, and said so.
        host, port = "127.0.0.2", r.oss.port
        c = w.Conn(host, port, auth=False)
        with pytest.raises(w.AuthError):
            c.authenticate(w.DEFAULT_KEY, encrypt=False, follow=False)
        c.close()
        assert wait_until(lambda: "does not encrypt" in r.oss_log_text(), 10), r.oss_log_text()[-2000:]
        with w.Conn(host, port) as c:   # one that follows the requirement is served
            assert c.encrypts and c.ping() == 0
    finally:
        r.mds.stop()
        r.oss.stop()
        r.oss_proc.terminate()
        r.oss_proc.wait(timeout=60)


def test_a_mount_with_o_encrypt_hides_its_data(relayed, workdir):
    r = relayed
    mnt = os.path.join(workdir, "mnt")
    os.mkdir(mnt)
    p = subprocess.run(["mount", "-t", "loom", "-o", "encrypt,key=" + r.cluster.key,
                        "%s:/loom" % r.mds.addr, mnt], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, "mount -o encrypt failed: " + p.stderr
    try:
        payload = MARKER * ((1 << 20) // len(MARKER))
        with open(os.path.join(mnt, "f"), "wb") as f:
            f.write(payload)
        with open(os.path.join(mnt, "f"), "rb") as f:
            assert f.read() == payload
    finally:
        subprocess.run(["umount", mnt], capture_output=True, timeout=60)
        wait_until(lambda: not is_mounted(mnt), 30)
    assert read_direct(r.cluster, "/f") == payload
    assert MARKER not in r.oss.carried["c2s"], "the mount's data crossed the relay in the clear"


def test_an_altered_handshake_reply_is_an_error_not_a_session(relayed):
    # The first sealed reply is MDS_CONNECT's, read by the connection's hello: altered, the
    # client gets no session from it (the first connection must work, so the command fails
    # with an error rather than carrying on with what the relay made).
    r = relayed
    r.mds.arm(alter_body(nth(w.NS_OP["MDS_CONNECT"], 0, "s2c")))
    p = r.loom("ls", "/", check=False)
    assert p.returncode != 0, "the client took an altered MDS_CONNECT reply"
    assert "failed authentication" in p.stderr, p.stderr
    assert r.loom("ls", "/").returncode == 0   # the next connection is not tampered with

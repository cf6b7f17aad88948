"""Authentication: every connection to the MDS and to each OSS proves it holds the file system key
(DIR/fs.key) with an HMAC challenge before anything else. Without the key, or with another one,
the `loom` tool and `mount -t loom` fail with a clear message, the server logs why it refused
the connection, and it goes on serving the clients that hold the key.
"""

import os
import shutil
import struct
import subprocess
import tempfile

import pytest

import loomwire as w
from loomutil import mount_daemon_pids, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.environ.get("LOOM_BUILD") or os.path.join(HERE, "..", "..", "build"))
LOOM = os.path.join(BUILD, "src", "tools", "loom")

NO_KEY_MSG = "require the file system key, and none was given"
WRONG_KEY_MSG = "refused this client's key"
MOUNT_MSG = "it must hold the file system key"
LOG_WRONG_KEY = "wrong file system key"
LOG_NO_KEY = "before authenticating"


def write_key_file(path, text, mode=0o600):
    """A key file as `loom_key_create` makes it: mode 0600 (a shared one is refused unread)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, mode)   # the umask only takes bits away
    return path


@pytest.fixture
def wrong_key(workdir):
    return write_key_file(os.path.join(workdir, "wrong.key"), os.urandom(32).hex() + "\n")


def loom_as(cluster, env_key, *args, key=None):
    """Runs `loom [--key KEY] ARGS` with LOOM_KEY_FILE set to env_key (None: unset)."""
    env = dict(cluster.env, LOOM_FS=cluster.addr)
    env.pop("LOOM_KEY_FILE", None)
    env.pop("LOOM_CONFIG", None)
    if env_key is not None:
        env["LOOM_KEY_FILE"] = env_key
    argv = [LOOM] + (["--key", key] if key else []) + list(args)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


def log_count(cluster, name, text):
    return cluster.read_log(name).count(text)


def still_serves(cluster, workdir):
    data = os.urandom(3 * (1 << 20) + 11)
    name = "/check%d" % len(cluster.loom("ls", "/").stdout.split())
    cluster.loom("put", "-", name, input=data, text=False)
    assert cluster.loom("get", name, "-", text=False).stdout == data
    with w.Conn(cluster.mds_host, cluster.mds_port) as c:
        assert c.ping() == 0


def test_loom_without_a_key_fails_clearly(cluster, workdir):
    assert not os.path.exists("/etc/loom/loom.key"), "this machine has a default key; the test needs none"
    before = log_count(cluster, "mds", LOG_NO_KEY)
    p = loom_as(cluster, "", "ls", "/")
    assert p.returncode == 1, "`loom ls` without a key exited %d: %s" % (p.returncode, p.stderr)
    assert NO_KEY_MSG in p.stderr, "unclear error without a key: %r" % p.stderr
    assert p.stdout == ""
    assert wait_until(lambda: log_count(cluster, "mds", LOG_NO_KEY) > before, 10), \
        "the MDS did not log why it refused a client without a key:\n%s" % cluster.read_log("mds")[-2000:]
    # LOOM_KEY_FILE unset altogether (and no config, no /etc/loom/loom.key): the same.
    p = loom_as(cluster, None, "df")
    assert p.returncode == 1 and NO_KEY_MSG in p.stderr, (p.returncode, p.stderr)
    still_serves(cluster, workdir)


def test_loom_with_a_wrong_key_fails_clearly(cluster, workdir, wrong_key):
    before = log_count(cluster, "mds", LOG_WRONG_KEY)
    for how in ("env", "option"):
        if how == "env":
            p = loom_as(cluster, wrong_key, "ls", "/")
        else:
            p = loom_as(cluster, None, "ls", "/", key=wrong_key)
        assert p.returncode == 1, "`loom ls` with a wrong key (%s) exited %d: %s" % (how, p.returncode, p.stderr)
        assert WRONG_KEY_MSG in p.stderr, "unclear error with a wrong key (%s): %r" % (how, p.stderr)
        assert p.stdout == ""
    assert wait_until(lambda: log_count(cluster, "mds", LOG_WRONG_KEY) >= before + 2, 10), \
        "the MDS did not log the wrong keys:\n%s" % cluster.read_log("mds")[-2000:]
    # The right key given with --key wins over a wrong LOOM_KEY_FILE.
    p = loom_as(cluster, wrong_key, "ls", "/", key=cluster.key)
    assert p.returncode == 0, p.stderr
    # A key file that holds no key at all.
    bad = write_key_file(os.path.join(workdir, "empty.key"), "not a key\n")
    p = loom_as(cluster, bad, "ls", "/")
    assert p.returncode == 1 and "holds no key" in p.stderr, (p.returncode, p.stderr)
    still_serves(cluster, workdir)


def mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


@pytest.fixture
def mnt_dir():
    d = tempfile.mkdtemp(prefix="loom-auth-mnt-")
    yield d
    if mounted(d):
        subprocess.run(["umount", "-l", d], capture_output=True, timeout=60)
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("how", ["no key", "wrong key"])
def test_mount_without_the_key_fails_clearly_and_mounts_nothing(cluster, workdir, wrong_key, mnt_dir, how):
    env = dict(os.environ)
    env.pop("LOOM_KEY_FILE", None)
    opts = [] if how == "no key" else ["-o", "key=" + wrong_key]
    log_line = LOG_NO_KEY if how == "no key" else LOG_WRONG_KEY
    before = log_count(cluster, "mds", log_line)
    p = subprocess.run(["mount", "-t", "loom"] + opts + ["%s:/loom" % cluster.addr, mnt_dir], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0, "mount -t loom with %s succeeded" % how
    assert MOUNT_MSG in p.stderr, "unclear error from mount with %s: %r" % (how, p.stderr)
    assert not mounted(mnt_dir), "a mount with %s was left in place" % how
    assert not mount_daemon_pids(mnt_dir), "a loom-mount with %s still runs" % how
    assert os.listdir(mnt_dir) == []
    assert wait_until(lambda: log_count(cluster, "mds", log_line) > before, 10), \
        "the MDS did not log the refused mount (%s)" % how
    # The right key mounts.
    subprocess.run(["mount", "-t", "loom", "-o", "key=" + cluster.key, "%s:/loom" % cluster.addr, mnt_dir],
                   check=True, env=env, timeout=60)
    try:
        with open(os.path.join(mnt_dir, "f"), "w") as f:
            f.write("with the key\n")
        assert cluster.loom("cat", "/f").stdout == "with the key\n"
    finally:
        subprocess.run(["umount", mnt_dir], timeout=60)
    still_serves(cluster, workdir)


def test_raw_connections_without_the_key_are_refused_by_every_server(cluster, workdir, wrong_key):
    getattr_req = w.cred() + struct.pack("<Q", 1)
    read_req = w.ost_io(0, 1, 0, 4096)
    for name, host, port in cluster.server_addrs():
        before = log_count(cluster, name, LOG_NO_KEY)
        requests = [(w.OP["MDS_GETATTR"], getattr_req)]
        if name != "mds":
            requests.append((w.OP["OST_READ"], read_req))
        for opcode, body in requests:
            with w.Conn(host, port, auth=False) as c:
                h, rbody, rbulk = c.call(opcode, body)
                assert h.status == -w.EACCES, "%s answered %#x before authentication with %d, not -EACCES" % (
                    name, opcode, h.status)
                assert rbulk == b"", "%s sent data to a client that did not authenticate" % name
                closed, extra = c.wait_closed(10)
                assert closed, "%s kept a connection open after refusing it" % name
                assert extra == b"", "%s answered more before closing: %r" % (name, extra[:64])
        assert wait_until(lambda: log_count(cluster, name, LOG_NO_KEY) >= before + len(requests), 10), \
            "%s did not log the refused connection:\n%s" % (name, cluster.read_log(name)[-1500:])

        # A wrong key: the exchange itself fails.
        before = log_count(cluster, name, LOG_WRONG_KEY)
        with pytest.raises(w.AuthError):
            w.Conn(host, port, key=w.load_key(wrong_key))
        assert wait_until(lambda: log_count(cluster, name, LOG_WRONG_KEY) > before, 10), \
            "%s did not log the wrong key" % name

        # The right key works.
        with w.Conn(host, port) as c:
            assert c.ping() == 0
            if name == "mds":
                h, body, _ = c.call(w.OP["MDS_GETATTR"], getattr_req)
                assert h.status == 0 and w.parse_attr(body)["ino"] == 1
            else:
                h, _, _ = c.call(w.OP["OST_STATFS"], w.ost_io(cluster.ost_index_of_dir(int(name[3:])), 0))
                assert h.status == 0, "%s refused OST_STATFS from an authenticated client: %d" % (name, h.status)
    still_serves(cluster, workdir)
    for name in cluster.daemon_names():
        assert cluster.alive(name), "%s died" % name


def test_large_frames_before_authentication_are_cut_off_without_taking_memory(cluster, workdir):
    # A stranger announcing 16 MiB of bulk (or a 64 KiB body) on many connections, and never
    # sending it: each connection is closed at once, with nothing read or answered, and the
    # servers go on serving the clients that hold the key.
    for name, host, port in cluster.server_addrs():
        opcode = w.OP["MDS_GETATTR"] if name == "mds" else w.OP["OST_WRITE"]
        conns = []
        try:
            for k in range(32):
                c = w.Conn(host, port, auth=False)
                conns.append(c)
                if k % 2:
                    hdr = w.pack_header(opcode, bulk_len=16 << 20, bulk_crc=0)
                else:
                    hdr = w.pack_header(opcode, body_len=64 << 10)
                c.send(hdr)
            for c in conns:
                closed, extra = c.wait_closed(10)
                assert closed, "%s kept a connection open that announced a large frame unauthenticated" % name
                assert extra == b"", "%s answered a large unauthenticated frame: %r" % (name, extra[:64])
        finally:
            for c in conns:
                c.close()
        with w.Conn(host, port) as c:
            assert c.ping() == 0
    still_serves(cluster, workdir)

"""Authentication: every connection to the MDS and to each OSS proves it holds the file system key
(DIR/fs.key) with an HMAC challenge before anything else. Without the key, or with another one,
the `loom` tool and `mount -t loom` fail with a clear message, the server logs why it refused
the connection, and it goes on serving the clients that hold the key.
"""

import os
import shutil
import stat
import struct
import subprocess
import tempfile

import pytest

import loomwire as w
from loomutil import MDS_BIN, OSS_BIN, mount_daemon_pids, wait_until

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


def mount_and_write(cluster, key, mnt_dir, env, text):
    """`mount -t loom -o key=KEY` works: a file written there is the file system's; unmounted after."""
    subprocess.run(["mount", "-t", "loom", "-o", "key=" + key, "%s:/loom" % cluster.addr, mnt_dir],
                   check=True, env=env, timeout=60)
    try:
        with open(os.path.join(mnt_dir, "f"), "w") as f:
            f.write(text)
        assert cluster.loom("cat", "/f").stdout == text
    finally:
        subprocess.run(["umount", mnt_dir], timeout=60)


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
    mount_and_write(cluster, cluster.key, mnt_dir, env, "with the key\n")
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


# ---- key files handled like keys (issue 16) ----
#
# Whoever can read the key is root on the file system, so every program refuses a key file its
# group or others can read or write, as ssh refuses a private key, and says which file, its mode
# and the fix; the same file after `chmod 600` works.

def shared_refusal(path, mode, by="its group and others"):
    return "key file %s is readable by %s (mode %04o): chmod 600 %s" % (path, by, mode, path)


def read_port_file(path):
    try:
        with open(path) as f:
            text = f.read().strip()
    except FileNotFoundError:
        return None
    return text or None


def start_server(argv, log_path, port_file):
    """A server started by hand; returns (Popen, "HOST:PORT") once it serves."""
    with open(log_path, "a") as log:
        p = subprocess.Popen(argv + ["--port-file", port_file], stdout=log, stderr=log)
    if not wait_until(lambda: read_port_file(port_file) or p.poll() is not None, 30, 0.05) or p.poll() is not None:
        p.kill()
        p.wait(timeout=30)
        with open(log_path, errors="replace") as f:
            raise AssertionError("%s did not start:\n%s" % (argv[0], f.read()[-2000:]))
    return p, read_port_file(port_file)


def stop_server(p):
    if p.poll() is None:
        p.terminate()
    p.wait(timeout=60)


def test_a_key_file_others_can_read_is_refused_by_every_program(cluster, workdir, mnt_dir):
    # `loom cluster up` made the key private, and a copy keeps its mode.
    assert stat.S_IMODE(os.stat(cluster.key).st_mode) == 0o600
    key = os.path.join(workdir, "copy.key")
    shutil.copy(cluster.key, key)
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    # Servers of a second file system of their own, so that the cluster's are left alone.
    mdt, ost = os.path.join(workdir, "mdt2"), os.path.join(workdir, "ost2")
    subprocess.run([MDS_BIN, "--format", "--fsname", "keys", "--mdt", mdt, "--key", key], check=True,
                   capture_output=True, timeout=60)
    subprocess.run([OSS_BIN, "--format", "--fsname", "keys", "--ost", ost], check=True, capture_output=True,
                   timeout=60)
    mds_argv = [MDS_BIN, "--mdt", mdt, "--listen", "127.0.0.1:0", "--key", key]
    mds_log, oss_log = os.path.join(workdir, "mds2.log"), os.path.join(workdir, "oss2.log")
    env = dict(os.environ)
    env.pop("LOOM_KEY_FILE", None)

    for mode, by in ((0o644, "its group and others"), (0o640, "its group"), (0o604, "others")):
        os.chmod(key, mode)
        want = shared_refusal(key, mode, by)
        runs = {
            "loom-mds": [MDS_BIN, "--mdt", mdt, "--listen", "127.0.0.1:0", "--key", key],
            # A new MDT, whose key (this one) is kept.
            "loom-mds --format": [MDS_BIN, "--format", "--fsname", "keys", "--key", key,
                                  "--mdt", os.path.join(workdir, "mdt-%o" % mode)],
            "loom-oss": [OSS_BIN, "--ost", ost, "--mds", cluster.addr, "--listen", "127.0.0.1:0", "--key", key],
            "loom --key": [LOOM, "--fs", cluster.addr, "--key", key, "ls", "/"],
            "mount -t loom": ["mount", "-t", "loom", "-o", "key=" + key, "%s:/loom" % cluster.addr, mnt_dir],
        }
        for name, argv in runs.items():
            p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
            assert p.returncode != 0, "%s started with a key file of mode %04o" % (name, mode)
            assert want in p.stderr, "%s with a key file of mode %04o said:\n%s" % (name, mode, p.stderr)
        # libloom's $LOOM_KEY_FILE, as applications give it.
        p = loom_as(cluster, key, "ls", "/")
        assert p.returncode == 1 and want in p.stderr, p.stderr
        assert not mounted(mnt_dir) and not mount_daemon_pids(mnt_dir)
    # A key of another user's is refused too (root's own, as the cluster's is, is fine).
    os.chmod(key, 0o600)
    os.chown(key, 65534, 65534)
    p = subprocess.run([LOOM, "--fs", cluster.addr, "--key", key, "ls", "/"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1 and "key file %s belongs to uid 65534" % key in p.stderr, p.stderr
    os.chown(key, 0, 0)
    # A user who may not read root's key is told so, not that the servers refused a key.
    p = subprocess.run([LOOM, "--fs", cluster.addr, "--key", key, "ls", "/"], env=env, capture_output=True,
                       text=True, timeout=60, user=65534, group=65534)
    assert p.returncode == 1 and "this user may not read the key file" in p.stderr, p.stderr
    # `loom cluster up` tells of its own key before it starts anything.
    os.chmod(cluster.key, 0o644)
    try:
        p = cluster.cluster_cmd("up", check=False)
        assert p.returncode == 1 and shared_refusal(cluster.key, 0o644) in p.stderr, p.stderr
    finally:
        os.chmod(cluster.key, 0o600)

    # The fix that was given: chmod 600. Each program starts with the same file.
    mds, mds_addr = start_server(mds_argv, mds_log, os.path.join(workdir, "mds2.addr"))
    try:
        oss, oss_addr = start_server([OSS_BIN, "--ost", ost, "--mds", mds_addr, "--listen", "127.0.0.1:0",
                                      "--key", key], oss_log, os.path.join(workdir, "oss2.addr"))
        try:
            for addr in (mds_addr, oss_addr):
                host, port = addr.rsplit(":", 1)
                with w.Conn(host, int(port), key=w.load_key(key)) as c:
                    assert c.ping() == 0
            p = subprocess.run([LOOM, "--fs", mds_addr, "--key", key, "ls", "/"], env=env, capture_output=True,
                               text=True, timeout=60)
            assert p.returncode == 0, p.stderr
        finally:
            stop_server(oss)
    finally:
        stop_server(mds)
    p = loom_as(cluster, key, "ls", "/")
    assert p.returncode == 0, p.stderr
    mount_and_write(cluster, key, mnt_dir, env, "a private key\n")
    still_serves(cluster, workdir)

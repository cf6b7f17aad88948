"""loom migrate: files re-striped online. A reader of the file sees its data throughout; the old
objects go once no handle from before the swap remains; a file open for writing is left alone."""

import hashlib
import mmap
import os
import subprocess
import threading

from loomutil import LOOM, MiB, object_path, parse_any_getstripe, second_mount, wait_until

DESTROY_TIMEOUT = 60




def layout(cluster, path):
    return parse_any_getstripe(cluster.loom("getstripe", path).stdout)


def objects(cluster, path):
    return [object_path(cluster.ost_dir(idx), objid) for idx, objid in layout(cluster, path).objects]


def put(path, data):
    with open(path, "wb") as f:
        f.write(data)


def test_migrate_restripes_and_keeps_the_file(cluster):
    mnt = cluster.mount()
    os.mkdir(os.path.join(mnt, "m"))
    cluster.loom("setstripe", "-E", "-1", "-c", "1", "/m")
    data = os.urandom(9 * MiB + 77)
    path = os.path.join(mnt, "m", "f")
    put(path, data)
    os.chmod(path, 0o640)
    before = os.stat(path)
    old = objects(cluster, "/m/f")
    assert len(old) == 1

    p = cluster.loom("migrate", "-c", "4", "-S", "1M", path)
    assert p.stdout == "" and p.stderr == "", p          # not a terminal: no progress bar
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mode, after.st_mtime_ns) == \
        (before.st_ino, before.st_size, before.st_mode, before.st_mtime_ns)
    lay = layout(cluster, "/m/f")
    assert lay.stripe_count == 4 and lay.stripe_size == MiB
    with open(path, "rb") as f:
        assert f.read() == data
    with second_mount(cluster) as other:
        with open(os.path.join(other, "m", "f"), "rb") as f:
            assert f.read() == data
    # No one had it open: the old object goes, and no temporary file is left.
    assert wait_until(lambda: not os.path.exists(old[0]), DESTROY_TIMEOUT), "old object never destroyed"
    assert os.listdir(os.path.join(mnt, "m")) == ["f"]

    # -r over a tree, by file system path, into a pool-less default: every file moves.
    os.makedirs(os.path.join(mnt, "m", "d", "e"))
    for name in ("d/a", "d/e/b"):
        put(os.path.join(mnt, "m", name), os.urandom(3 * MiB))
    sums = {n: hashlib.sha256(open(os.path.join(mnt, "m", n), "rb").read()).hexdigest() for n in ("d/a", "d/e/b")}
    cluster.loom("migrate", "-r", "-c", "2", "/m/d")
    for n, s in sums.items():
        assert layout(cluster, "/m/" + n).stripe_count == 2
        assert hashlib.sha256(open(os.path.join(mnt, "m", n), "rb").read()).hexdigest() == s


def test_reader_reads_right_through_a_migration(cluster):
    mnt = cluster.mount()
    data = os.urandom(8 * MiB)
    path = os.path.join(mnt, "f")
    cluster.loom("setstripe", "-E", "-1", "-c", "1", "/f")
    put(path, data)
    old = objects(cluster, "/f")
    errors, rounds, stop = [], [0], threading.Event()
    # O_DIRECT: each read goes to the servers (through the layout the reader opened with).
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, len(data))

    def reader():
        while not stop.is_set():
            n = os.preadv(fd, [buf], 0)
            if n != len(data) or buf[:n] != data:
                errors.append("read %d bytes, not the file's" % n)
                return
            rounds[0] += 1

    t = threading.Thread(target=reader)
    t.start()
    try:
        for count in ("4", "2", "3"):
            cluster.loom("migrate", "-c", count, "/f")
        assert layout(cluster, "/f").stripe_count == 3
        # The objects the reader reads stay while it has the file open.
        assert all(os.path.exists(o) for o in old)
    finally:
        stop.set()
        t.join()
        os.close(fd)
    assert not errors, errors
    assert rounds[0] > 0
    with open(path, "rb") as f:
        assert f.read() == data
    assert wait_until(lambda: not any(os.path.exists(o) for o in old), DESTROY_TIMEOUT), \
        "the old objects stayed after the reader closed"


def test_file_open_for_writing_is_left_alone(cluster, workdir):
    mnt = cluster.mount()
    path = os.path.join(mnt, "w")
    cluster.loom("setstripe", "-E", "-1", "-c", "1", "/w")
    put(path, b"x" * MiB)
    with open(path, "r+b") as f:
        f.write(b"y")
        p = cluster.loom("migrate", "-c", "4", "/w", check=False)
        assert p.returncode == 1 and "open for writing" in p.stderr, p.stderr
    assert layout(cluster, "/w").stripe_count == 1
    with open(path, "rb") as f:
        assert f.read() == b"y" + b"x" * (MiB - 1)
    assert sorted(os.listdir(mnt)) == ["w"], "a temporary file was left"
    # Other errors.
    for args in (["migrate"], ["migrate", "-c", "0", "/w"], ["migrate", "-S", "100k", "/w"]):
        assert cluster.loom(*args, check=False).returncode == 2, args
    p = cluster.loom("migrate", "/", check=False)
    assert p.returncode == 1 and "is a directory" in p.stderr
    p = cluster.loom("migrate", "/nope", check=False)
    assert p.returncode == 1 and "No such file" in p.stderr
    p = cluster.loom("migrate", "-p", "nopool", "/w", check=False)
    assert p.returncode == 1
    assert layout(cluster, "/w").stripe_count == 1


def test_drain_an_ost(cluster):
    # The admin's path: deactivate, find what is there, migrate it, and nothing is left on it.
    mnt = cluster.mount()
    os.mkdir(os.path.join(mnt, "data"))
    cluster.loom("setstripe", "-E", "-1", "-c", "2", "/data")
    for k in range(8):
        put(os.path.join(mnt, "data", "f%d" % k), os.urandom(MiB + k))
    cluster.loom("ost", "deactivate", "1")
    on1 = cluster.loom("find", "/data", "--ost", "1", "-t", "f").stdout.split()
    assert on1
    cluster.loom("migrate", *on1)
    assert cluster.loom("find", "/data", "--ost", "1").stdout == ""
    for k in range(8):
        assert os.path.getsize(os.path.join(mnt, "data", "f%d" % k)) == MiB + k


def test_progress_bar_on_a_terminal(cluster):
    mnt = cluster.mount()
    put(os.path.join(mnt, "big"), os.urandom(20 * MiB))
    env = dict(os.environ, LOOM_FS=cluster.addr, LOOM_KEY_FILE=cluster.key)
    # script(1) gives loom a terminal; -q hides the bar again.
    out = subprocess.run(["script", "-qec", "%s migrate -c 2 /big" % LOOM, "/dev/null"], env=env,
                         capture_output=True, timeout=120).stdout        # bytes: keep the \r
    assert b"\r[" in out and b"] 100% /big" in out, repr(out)
    out = subprocess.run(["script", "-qec", "%s migrate -q -c 3 /big" % LOOM, "/dev/null"], env=env,
                         capture_output=True, timeout=120).stdout
    assert out == b"", repr(out)
    assert layout(cluster, "/big").stripe_count == 3

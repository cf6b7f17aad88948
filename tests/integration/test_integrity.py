"""Checksums at rest: every OSS keeps a crc32c per 64 KiB block of each object (the sidecar
O/xx/<objid>.crc) and checks the blocks a read touches. A byte flipped on disk fails the read
with EIO instead of returning wrong data, `loom scrub` finds it, and a new write of the block
heals it; no sequence of writes, holes, truncations or crashes may ever make a good block fail.
"""

import errno
import json
import os
import random
import re
import struct
import subprocess
import sys
import threading
import time

import pytest

import loomwire
from loomutil import KiB, MiB, make_random_file, object_path, parse_file_getstripe, sha256_file, wait_until

BLOCK = 64 * KiB
CSUM_ERROR = r"ERROR: OST[0-9a-f]{4}: (read|scrub|write|punch): object [0-9a-f]+ block \d+ .*checksum mismatch"
# Reads through a mount may also log the EIO the OSS answered.
EIO_ERROR = r"ERROR: .*(Input/output error|EIO)"


# ---- helpers ----------------------------------------------------------------------------------




def layout_of(cluster, path):
    return parse_file_getstripe(cluster.loom("getstripe", path).stdout)


def file_offset(layout, k, obj_off):
    """The file offset of byte obj_off of stripe k's object (RAID-0)."""
    s, c = layout.stripe_size, layout.stripe_count
    return ((obj_off // s) * c + k) * s + obj_off % s


def flip_byte(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        assert b, "%s has no byte %d" % (path, offset)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x5A]))


def get(cluster, path, workdir):
    """`loom get` into a local file; returns (CompletedProcess, local path)."""
    out = os.path.join(workdir, "got")
    if os.path.exists(out):
        os.unlink(out)
    return cluster.loom("get", path, out, check=False), out


def scrub(cluster, *args):
    p = cluster.loom("scrub", *args, check=False)
    assert p.returncode in (0, 1), "`loom scrub %s` failed:\n%s%s" % (" ".join(args), p.stdout, p.stderr)
    return p


def scrub_line(out, idx):
    m = re.search(r"^OST%04x: done[^\n]*" % idx, out, re.M)
    assert m, "no finished scrub of OST%04x in:\n%s" % (idx, out)
    return m.group(0)


def assert_scrub_clean(cluster):
    p = scrub(cluster, "--wait", "--all")
    assert p.returncode == 0, "scrub found bad blocks where there are none:\n%s" % p.stdout
    for k in range(cluster.osts):
        assert " 0 bad blocks in 0 objects" in scrub_line(p.stdout, k), p.stdout
    return p


class Model:
    """A file through the mount and the bytes it must hold."""

    def __init__(self, path):
        self.path = path
        self.data = bytearray()
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def pwrite(self, off, buf):
        assert os.pwrite(self.fd, buf, off) == len(buf)
        if len(self.data) < off:
            self.data.extend(bytes(off - len(self.data)))
        self.data[off:off + len(buf)] = buf

    def append(self, buf):
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            assert os.write(fd, buf) == len(buf)
        finally:
            os.close(fd)
        self.data.extend(buf)

    def truncate(self, size):
        os.ftruncate(self.fd, size)
        if size < len(self.data):
            del self.data[size:]
        else:
            self.data.extend(bytes(size - len(self.data)))

    def close(self):
        os.fsync(self.fd)
        os.close(self.fd)


# ---- corruption is found, reported and healed -------------------------------------------------


@pytest.mark.allow_log(CSUM_ERROR, EIO_ERROR)
def test_flipped_byte_fails_reads_scrub_reports_it_and_a_new_write_heals_it(cluster, workdir):
    mnt = cluster.mount()
    cluster.loom("mkdir", "/d")
    cluster.loom("setstripe", "-E", "-1", "-c", "4", "-S", "1M", "/d")
    src = os.path.join(workdir, "src")
    good_src = os.path.join(workdir, "good_src")
    make_random_file(src, 6 * MiB + 12345)
    good_sum = make_random_file(good_src, 3 * MiB + 7)
    cluster.loom("put", src, "/d/bad")
    cluster.loom("put", good_src, "/d/good")
    with open(src, "rb") as f:
        want = bytearray(f.read())

    layout = layout_of(cluster, "/d/bad")
    k = 1
    idx, objid = layout.objects[k]
    obj = object_path(cluster.ost_dir(idx), objid)
    obj_off = 300000                     # in block 4 of the object: bytes 262144-327679
    bad_block = obj_off // BLOCK
    flip_byte(obj, obj_off)

    # Every way of reading it fails with EIO; none returns the flipped byte.
    p, out = get(cluster, "/d/bad", workdir)
    assert p.returncode != 0, "a corrupted file read back without an error"
    assert "Input/output error" in p.stderr, "unclear error for a corrupted file: %r" % p.stderr
    with open(os.path.join(mnt, "d", "bad"), "rb") as f:
        with pytest.raises(OSError) as e:
            f.read()
        assert e.value.errno == errno.EIO
    log = cluster.read_log(cluster.oss_name(idx))
    assert re.search(r"ERROR: OST%04x: read: object %x block %d " % (idx, objid, bad_block), log), \
        "the OSS did not log the bad block (OST, object, block):\n%s" % log[-2000:]
    # The other blocks of the object, and other files, read fine.
    p, out = get(cluster, "/d/good", workdir)
    assert p.returncode == 0 and sha256_file(out) == good_sum, p.stderr
    fo = file_offset(layout, k, (bad_block + 1) * BLOCK)
    with open(os.path.join(mnt, "d", "bad"), "rb") as f:
        f.seek(fo)
        assert f.read(BLOCK) == bytes(want[fo:fo + BLOCK])

    # Scrub finds it, on that OST only, and says which object.
    p = scrub(cluster, "--wait", "--all")
    assert p.returncode == 1, "scrub found nothing wrong:\n%s" % p.stdout
    for j in range(cluster.osts):
        line = scrub_line(p.stdout, j)
        if j == idx:
            assert " 1 bad block in 1 object" in line, p.stdout
        else:
            assert " 0 bad blocks in 0 objects" in line, p.stdout
    assert re.search(r"^OST%04x: bad object %#x$" % (idx, objid), p.stdout, re.M), p.stdout
    assert re.search(r"ERROR: OST%04x: scrub: object %x block %d " % (idx, objid, bad_block),
                     cluster.read_log(cluster.oss_name(idx))), "the scrub did not log the bad block"
    p = scrub(cluster, "--status", "--paths", str(idx))
    assert p.returncode == 1 and "(file /d/bad)" in p.stdout, p.stdout

    # A write that keeps part of the bad block cannot give it a new checksum: EIO.
    fd = os.open(os.path.join(mnt, "d", "bad"), os.O_RDWR)
    try:
        with pytest.raises(OSError) as e:
            os.pwrite(fd, b"x" * 10, file_offset(layout, k, obj_off - 5))
            os.fsync(fd)
        assert e.value.errno == errno.EIO
        # Writing the whole block heals it.
        new = os.urandom(BLOCK)
        fo = file_offset(layout, k, bad_block * BLOCK)
        assert os.pwrite(fd, new, fo) == BLOCK
        os.fsync(fd)
        want[fo:fo + BLOCK] = new
    finally:
        os.close(fd)
    p, out = get(cluster, "/d/bad", workdir)
    assert p.returncode == 0, "still unreadable after the bad block was rewritten: %s" % p.stderr
    with open(out, "rb") as f:
        assert f.read() == bytes(want), "wrong data after the bad block was rewritten"
    assert_scrub_clean(cluster)

    # So does writing the file anew.
    flip_byte(obj, 5)
    assert get(cluster, "/d/bad", workdir)[0].returncode != 0
    cluster.loom("put", src, "/d/bad")
    p, out = get(cluster, "/d/bad", workdir)
    assert p.returncode == 0 and sha256_file(out) == sha256_file(src), p.stderr


@pytest.mark.allow_log(CSUM_ERROR)
def test_sidecar_layout_and_flip_in_a_short_last_block(cluster, workdir):
    # The sidecar holds 4 bytes per block, the last block counting only up to the object's end.
    cluster.loom("setstripe", "-E", "-1", "-c", "1", "-i", "2", "/")
    data = os.urandom(3 * BLOCK + 1000)
    cluster.loom("put", "-", "/f", input=data, text=False)
    idx, objid = layout_of(cluster, "/f").objects[0]
    obj = object_path(cluster.ost_dir(idx), objid)
    with open(obj + ".crc", "rb") as f:
        crcs = struct.unpack("<4I", f.read())
    for i in range(4):
        block = data[i * BLOCK:(i + 1) * BLOCK]
        assert crcs[i] == loomwire.crc32c(block + bytes(BLOCK - len(block))), "block %d's checksum" % i
    flip_byte(obj, 3 * BLOCK + 999)
    p = cluster.loom("get", "/f", "-", check=False, text=False)
    assert p.returncode != 0 and not p.stdout.endswith(data[-100:])
    assert cluster.loom("cat", "/f", check=False, text=False).returncode != 0


def test_scrub_runs_in_the_background_at_a_bounded_rate(cluster, workdir):
    # The OSS limits a scrub to 128 MiB/s per OST by default (loom-oss --scrub-rate). The whole
    # file on one object (no Data-on-MDT part, whose bytes would be a hole there).
    cluster.loom("setstripe", "-E", "-1", "-c", "1", "-i", "0", "/")
    src = os.path.join(workdir, "src")
    digest = make_random_file(src, 384 * MiB)
    cluster.loom("put", src, "/big")
    p = scrub(cluster, "0")
    assert p.returncode == 0 and re.match(r"^OST0000: running for \d+s: ", p.stdout), p.stdout
    started = re.search(r"scrub started \(at most (\d+) MiB/s\)", cluster.read_log("oss0"))
    assert started and started.group(1) == "128", "no rate-limited scrub in the log"
    # A second start while one runs starts nothing.
    p = scrub(cluster, "0")
    assert p.returncode == 0 and "running" in p.stdout, p.stdout
    # Clients keep reading meanwhile.
    out = os.path.join(workdir, "out")
    cluster.loom("get", "/big", out)
    assert sha256_file(out) == digest
    p = scrub(cluster, "--wait", "0")
    m = re.match(r"^OST0000: done in (\d+)s: 1 object, 384\.0M \(6144 blocks checked, 0 without "
                 r"checksums\), 0 bad blocks in 0 objects$", p.stdout)
    assert p.returncode == 0 and m, p.stdout
    assert int(m.group(1)) >= 2, "384 MiB scrubbed in %ss: faster than the 128 MiB/s limit" % m.group(1)
    assert cluster.read_log("oss0").count("scrub started") == 1, "a second scrub started while one ran"


# ---- no false alarms --------------------------------------------------------------------------


LAYOUTS = {"/s64k": ("-c", "4", "-S", "64k"), "/s1m": ("-c", "2", "-S", "1M"), "/s4m": ("-c", "1",)}
SIZES = [1, 100, 4095, 4096, BLOCK - 1, BLOCK, BLOCK + 1, 200000, MiB, 3 * MiB + 7]


def random_ops(rng, m, nops):
    for _ in range(nops):
        size = len(m.data)
        op = rng.random()
        if op < 0.55:
            # Anywhere: inside, across the end, or past it (a hole).
            off = rng.randrange(0, size + 3 * MiB)
            if rng.random() < 0.3:
                off -= off % BLOCK
            m.pwrite(off, os.urandom(rng.choice(SIZES)))
        elif op < 0.7:
            m.append(os.urandom(rng.choice(SIZES)))
        elif op < 0.85 and size:
            m.truncate(rng.randrange(0, size))                        # down, often mid-block
        else:
            m.truncate(size + rng.randrange(1, 4 * MiB))               # up: zeros


def test_holes_partial_writes_overwrites_truncation_and_appends_verify(cluster, workdir):
    mnt = cluster.mount()
    models = []
    for d, args in LAYOUTS.items():
        cluster.loom("mkdir", d)
        cluster.loom("setstripe", *args, d)
    # Fixed cases first: a sparse file, a short last block that grows, a cut inside a block.
    m = Model(os.path.join(mnt, "s64k", "sparse"))
    m.pwrite(0, b"head")
    m.pwrite(10 * MiB + 3, os.urandom(5000))
    m.pwrite(BLOCK - 10, os.urandom(20))
    models.append(m)
    m = Model(os.path.join(mnt, "s4m", "grow"))
    m.pwrite(0, os.urandom(100))
    m.pwrite(5 * BLOCK + 17, os.urandom(33))      # block 0 keeps its checksum: the gap is zeros
    m.truncate(BLOCK // 2 + 3)                    # cut inside block 0
    m.truncate(3 * MiB)                           # and grow it again
    m.pwrite(BLOCK // 2, os.urandom(10))          # partial write over the new end
    m.append(os.urandom(BLOCK + 5))
    models.append(m)
    rng = random.Random(20261129)
    for d in LAYOUTS:
        for i in range(2):
            m = Model(os.path.join(mnt, d.strip("/"), "r%d" % i))
            random_ops(rng, m, 40)
            models.append(m)
    for m in models:
        m.close()

    for m in models:
        path = "/" + os.path.relpath(m.path, mnt)
        p = cluster.loom("get", path, "-", check=False, text=False)
        assert p.returncode == 0, "%s: read failed: %s" % (path, p.stderr)
        assert p.stdout == bytes(m.data), "%s: wrong data (%d bytes, want %d)" % (path, len(p.stdout), len(m.data))
    assert_scrub_clean(cluster)


# ---- crashes ----------------------------------------------------------------------------------


def restart_killed(cluster, name):
    """Waits until the daemon `name` is gone, then starts it again."""
    pid = cluster.pid(name)
    assert wait_until(lambda: not cluster.alive(name), 30), "%s (pid %d) did not die" % (name, pid)
    cluster.restart()


def test_oss_killed_between_data_and_checksums_recomputes_them_at_start(cluster, workdir):
    """The exact window: LOOM_OSS_CRASH_AT makes the OSS kill itself after a write's data and
    before its checksums. The write is sent raw (no client resends it), so only the OSS's own
    recovery can make the checksums agree with the new data."""
    cluster.loom("setstripe", "-E", "-1", "-c", "1", "-i", "0", "/")   # raw OST writes at file offset 0
    old = os.urandom(MiB)
    cluster.loom("put", "-", "/f", input=old, text=False)
    idx, objid = layout_of(cluster, "/f").objects[0]
    name = cluster.oss_name(idx)
    for attempt, (off, length) in enumerate([(2 * BLOCK - 100, 2 * BLOCK + 200), (0, 2 * BLOCK),
                                             (5 * BLOCK + 1, 10)]):
        cluster.kill9(name)
        cluster.env["LOOM_OSS_CRASH_AT"] = "1"
        try:
            cluster.restart()
        finally:
            del cluster.env["LOOM_OSS_CRASH_AT"]
        new = os.urandom(length)
        host, port = cluster.oss_addr(name)
        with loomwire.Conn(host, port) as c:
            with pytest.raises((loomwire.ConnectionClosed, OSError)):
                h, _, _ = c.call(loomwire.OP["OST_WRITE"],
                                 loomwire.ost_io(idx, objid, off, length, ino=1), new)
                raise AssertionError("the OSS answered a write it should have died in: %r" % h)
        restart_killed(cluster, name)
        assert cluster.read_log(name).count("recomputed after an interrupted write") == attempt + 1, \
            "the restarted OSS did not repair the interrupted write's checksums"
        want = bytearray(old)
        want[off:off + length] = new         # the data reached the page cache before the kill
        old = bytes(want)
        p = cluster.loom("get", "/f", "-", check=False, text=False)
        assert p.returncode == 0, "false checksum error after a crash (attempt %d): %s" % (attempt, p.stderr)
        assert p.stdout == old, "wrong data after the crash (attempt %d)" % attempt
    assert_scrub_clean(cluster)


# The overwriters run in a process of their own, as an application would: the test process
# itself forks `loom cluster up` to restart the OSS, and a fork's child closes the files it
# inherited, which waits (as on NFS) for their writes in flight to an OSS that is down.
OVERWRITERS = r"""
import json, os, random, sys, threading
mnt, out, stop, BLOCK = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
lock = threading.Lock()
models, doubtful, errors = {}, {}, []

def overwriter(t):
    # In-place overwrites of blocks that already have checksums: the case a crash between
    # data and checksums would turn into false EIO.
    rng = random.Random(t)
    path = os.path.join(mnt, "w", "f%d" % t)
    data = bytearray(os.urandom(2 * (1 << 20) + t * 777))
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    with lock:
        models[path] = data
    fd = os.open(path, os.O_RDWR)
    try:
        while not os.path.exists(stop):
            off = rng.randrange(0, len(data) + BLOCK)
            buf = os.urandom(rng.choice([10, 5000, BLOCK, BLOCK + 3, 300000]))
            old = bytes(data[off:off + len(buf)])
            try:
                os.pwrite(fd, buf, off)
                os.fsync(fd)
            except OSError as e:
                with lock:
                    errors.append("%s: %s" % (path, e))
                    doubtful.setdefault(path, []).append((off, old.hex(), buf.hex()))
                continue
            with lock:
                if len(data) < off:
                    data.extend(bytes(off - len(data)))
                data[off:off + len(buf)] = buf
    finally:
        os.close(fd)

threads = [threading.Thread(target=overwriter, args=(t,)) for t in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
with open(out, "w") as f:
    json.dump({"models": {p: d.hex() for p, d in models.items()}, "doubtful": doubtful,
               "errors": errors}, f)
"""


def test_oss_kill9_during_writes_then_everything_acknowledged_reads_back(cluster, workdir):
    mnt = cluster.mount()
    cluster.loom("mkdir", "/w", "/p")
    cluster.loom("setstripe", "-c", "4", "-S", "64k", "/w")
    cluster.loom("setstripe", "-c", "2", "-S", "1M", "/p")
    stop = threading.Event()
    lock = threading.Lock()
    acked_puts = {}        # path -> sha256
    errors = []
    stopfile = os.path.join(workdir, "stop")
    result = os.path.join(workdir, "overwriters.json")
    writers = subprocess.Popen([sys.executable, "-c", OVERWRITERS, mnt, result, stopfile, str(BLOCK)],
                               stderr=subprocess.PIPE, text=True)

    def putter():
        i = 0
        while not stop.is_set():
            src = os.path.join(workdir, "p%d" % i)
            digest = make_random_file(src, 1000 + (i * 7919) % (3 * MiB))
            path = "/p/f%d" % (i % 6)      # rewrites of existing files too
            i += 1
            p = cluster.loom("put", src, path, check=False, timeout=150)
            with lock:
                if p.returncode == 0:
                    acked_puts[path] = digest
                else:
                    errors.append("put %s: %s" % (path, p.stderr.strip()))
                    acked_puts.pop(path, None)
            os.unlink(src)

    threads = [threading.Thread(target=putter, daemon=True)]
    for t in threads:
        t.start()
    rng = random.Random(7)
    try:
        assert wait_until(lambda: acked_puts and all(os.path.exists(os.path.join(mnt, "w", "f%d" % t))
                                                     for t in range(3)), 60), \
            "the writers did not start: %r" % errors
        time.sleep(0.5)
        for round_ in range(4):
            time.sleep(rng.uniform(0.5, 1.5))
            cluster.kill9("oss%d" % rng.randrange(cluster.osts))
            time.sleep(rng.uniform(0.1, 0.5))
            cluster.restart()
        time.sleep(1)
    finally:
        stop.set()
        open(stopfile, "w").close()
        for t in threads:
            t.join(timeout=200)
        try:
            _, err = writers.communicate(timeout=200)
        except subprocess.TimeoutExpired:
            writers.kill()
            _, err = writers.communicate()
    assert not any(t.is_alive() for t in threads), "a writer hangs"
    assert writers.returncode == 0, "the overwriters failed: %s" % err
    with open(result) as f:
        res = json.load(f)
    models = {p: bytearray.fromhex(d) for p, d in res["models"].items()}
    doubtful = {p: [(off, bytes.fromhex(o), bytes.fromhex(n)) for off, o, n in v]
                for p, v in res["doubtful"].items()}
    errors += res["errors"]
    assert len(models) == 3
    print("errors while the OSSs were killed: %d (first: %r)" % (len(errors), errors[:3]))

    for path, data in models.items():
        rel = "/" + os.path.relpath(path, mnt)
        p = cluster.loom("get", rel, "-", check=False, text=False)
        assert p.returncode == 0, "%s: read failed after OSS crashes: %s" % (rel, p.stderr)
        got = p.stdout
        want = bytes(data)
        if path not in doubtful:
            assert got == want, "%s: acknowledged data lost or wrong after OSS crashes" % rel
            continue
        # A failed write may have landed in part: each of its bytes is old or new.
        assert len(got) >= len(want)
        spans = [(off, old, new) for off, old, new in doubtful[path]]
        for i in range(len(want)):
            if got[i] != want[i] and not any(off <= i < off + len(new) for off, _, new in spans):
                raise AssertionError("%s: byte %d changed outside any failed write" % (rel, i))
    for path, digest in acked_puts.items():
        out = os.path.join(workdir, "out")
        p = cluster.loom("get", path, out, check=False)
        assert p.returncode == 0, "%s: read failed after OSS crashes: %s" % (path, p.stderr)
        assert sha256_file(out) == digest, "%s: acknowledged put lost or wrong" % path
    assert_scrub_clean(cluster)

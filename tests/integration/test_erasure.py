"""Erasure-coded files (issue 20): `loom setstripe --ec K+M` stripes the data over K objects and
keeps M Reed-Solomon parity objects (ISA-L), each on an OST of its own. Whole rows get their parity
as they are written; a write to part of a row marks the parity stale and the MDS makes it again;
readers rebuild what up to M lost objects held, the application seeing nothing.

Every case on real servers, with the writer and the readers in processes of their own: a mount
or a native client writes, new native clients read."""

import hashlib
import os
import re
import shutil
import subprocess
import sys

import pytest

import signal

import loomutil
import pyloom
from loomutil import OSS_BIN, MiB, object_path, wait_until
from test_mirrors import LOST_OSS, pattern, read_in_child

pytestmark = pyloom.pylib

EC_STALE = r"WARN: erasure-coded file \d+: (data|parity) object \d+ .*(missed a write|will miss a write|read back bad bytes|missed a change)"


def sha(data):
    return hashlib.sha256(data).hexdigest()


def wait_rebuilt(fs, path, timeout=60):
    """Waits until no object of path is stale and it has no writer's mark; returns its layout."""
    assert wait_until(lambda: not fs.getstripe(path).stale and not fs.getstripe(path).write_pending,
                      timeout, 0.2), "objects still stale after %d s: %r" % (timeout, fs.getstripe(path))
    return fs.getstripe(path)


def ec_dir(cluster, path="/e", spec="4+2", extra=("-E", "-1")):
    cluster.loom("mkdir", path)
    cluster.loom("setstripe", "--ec", spec, *extra, "-S", "1M", path)


def kill_and_read(cluster, lay, path, want, victims):
    """Kills the OSSs of objects `victims` (indexes in the layout); readers in new processes get
    every byte."""
    for i in victims:
        cluster.kill9(cluster.oss_name(lay.objects[i][0]))
    for _ in range(2):
        assert read_in_child(cluster, path)[0] == want


def test_setstripe_ec_puts_data_and_parity_on_osts_of_their_own_and_refuses_what_cannot_be(cluster_factory):
    cluster = cluster_factory(osts=6)
    fs = pyloom.connect(cluster)
    ec_dir(cluster)
    data = pattern(9 * MiB + 12345, 20)
    with fs.open("/e/f", "wb") as f:
        f.write(data)
    lay = fs.getstripe("/e/f")
    assert (lay.stripe_count, lay.ec_parity, lay.mirror_count, len(lay.objects)) == (4, 2, 1, 6), lay
    assert len({ost for ost, _ in lay.objects}) == 6, lay.objects
    # Written whole, up to its last row (zeros after the end): the parity is in sync at once.
    assert lay.stale == [] and not lay.write_pending, lay
    assert cluster.loom("ec", "verify", "-v", "/e/f").stdout.startswith("/e/f: every object agrees")
    # The data objects hold RAID-0 of the file, the parity objects as long as data object 0.
    for k in range(4):
        with open(object_path(cluster.ost_dir(lay.objects[k][0]), lay.objects[k][1]), "rb") as f:
            obj = f.read()
        want = b"".join(data[u * MiB:(u + 1) * MiB] for u in range(k, (len(data) + MiB - 1) // MiB, 4))
        assert obj == want, "data object %d" % k
    sizes = [os.path.getsize(object_path(cluster.ost_dir(o), i)) for o, i in lay.objects[4:]]
    assert sizes == [3 * MiB, 3 * MiB], sizes
    assert read_in_child(cluster, "/e/f")[0] == sha(data)

    out = cluster.loom("getstripe", "/e/f").stdout
    assert "  lcm_ec:            4+2\n  lcm_flags:         ok\n" in out, out
    assert re.findall(r"lcme_flags: +(\S+)", out) == ["init", "init,parity"], out
    assert re.findall(r"lmm_pattern: +(\S+)", out) == ["raid0", "parity"], out
    assert re.findall(r"l_ost_idx: (\d+)", out) == [str(ost) for ost, _ in lay.objects], out
    assert "lcm_ec:            4+2" in cluster.loom("getstripe", "-d", "/e").stdout

    # Wider than the OSTs, copies and parity at once, malformed: refused, saying why.
    p = cluster.loom("setstripe", "--ec", "5+2", "/e/wide", check=False)
    assert p.returncode == 1 and "--ec 5+2 needs 7 OSTs of its own" in p.stderr, p.stderr
    p = cluster.loom("setstripe", "--ec", "4+2", "-N", "2", "/e/both", check=False)
    assert p.returncode == 2 and "mirrored or erasure-coded, not both" in p.stderr, p.stderr
    for bad in ("4", "0+2", "4+0", "4+17", "250+6", "x+y"):
        p = cluster.loom("setstripe", "--ec", bad, "/e/bad", check=False)
        assert p.returncode == 2 and "invalid --ec '%s'" % bad in p.stderr, (bad, p.stderr)
    assert not fs.exists("/e/wide") and not fs.exists("/e/bad")
    # The Python API says the same as the tool.
    fs.setstripe("/e/py", ec=(3, 3), stripe_size=MiB)
    lay = fs.getstripe("/e/py")
    assert (lay.stripe_count, lay.ec_parity, len({o for o, _ in lay.objects})) == (3, 3, 6)
    with pytest.raises(OSError) as e:
        fs.setstripe("/e/py2", ec=(5, 3))
    assert e.value.errno == 22


@pytest.mark.allow_log(LOST_OSS, EC_STALE)
def test_two_osss_killed_under_a_4_2_write_lose_no_byte_and_come_back_rebuilt(cluster_factory):
    """A mount writes 64 MiB; halfway, the OSSs of one data and one parity object are killed
    (kill -9). The write and its fsync succeed; the two objects are marked stale; readers in other
    processes read every byte with both still dead. When they return the MDS rebuilds their
    objects, and then two other OSSs can die and every byte still reads back."""
    cluster = cluster_factory(osts=6)
    mnt = cluster.mount()
    fs = pyloom.connect(cluster)
    ec_dir(cluster)
    size = 64 * MiB + 4321
    want = sha(pattern(size, 21))
    path = os.path.join(mnt, "e", "big")
    code = ("import os, sys\n"
            "sys.path.insert(0, %r)\n"
            "from test_mirrors import pattern\n"
            "data = pattern(%d, 21)\n"
            "fd = os.open(%r, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)\n"
            "for off in range(0, len(data), 1 << 20):\n"
            "    os.write(fd, data[off:off + (1 << 20)])\n"
            "    if off == 24 << 20:\n"
            "        print('half', flush=True)\n"
            "        sys.stdin.readline()\n"
            "os.fsync(fd)\n"
            "os.close(fd)\n"
            "print('done', flush=True)\n" % (os.path.dirname(__file__), size, path))
    w = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert w.stdout.readline() == "half\n", w.stderr.read()
        lay = fs.getstripe("/e/big")
        victims = [1, 4]                      # data object 1 and parity object 0
        for i in victims:
            cluster.kill9(cluster.oss_name(lay.objects[i][0]))
        w.stdin.write("go\n")
        w.stdin.flush()
        out, err = w.communicate(timeout=300)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    assert w.returncode == 0 and out == "done\n", "the writer failed: %r" % err
    lay = fs.getstripe("/e/big")
    assert sorted(lay.stale) == victims, lay
    assert "init,stale" in cluster.loom("getstripe", "/e/big").stdout
    for _ in range(2):
        assert read_in_child(cluster, "/e/big")[0] == want
    # Back: rebuilt by the MDS with nobody asking; then two others die.
    cluster.restart()
    lay = wait_rebuilt(fs, "/e/big")
    assert cluster.loom("ec", "verify", "/e/big").returncode == 0
    assert "resync: inode" in cluster.read_log("mds")
    kill_and_read(cluster, lay, "/e/big", want, [0, 5])
    with open(path, "rb") as f:
        assert sha(f.read()) == want


@pytest.mark.allow_log(LOST_OSS, EC_STALE)
def test_a_write_to_part_of_a_row_stales_the_parity_until_the_mds_makes_it_again(cluster_factory):
    """Two clients: one rewrites 5000 bytes in the middle of a row (its parity cannot follow from
    that alone: marked stale first, as Lustre does), another reads. Once the writer closes, the
    MDS computes the parity again; then any two OSSs can die."""
    cluster = cluster_factory(osts=6)
    fs = pyloom.connect(cluster)
    ec_dir(cluster, extra=())                 # with the file system's Data-on-MDT part
    data = bytearray(pattern(13 * MiB, 22))
    with fs.open("/e/f", "wb") as f:
        f.write(data)
    assert fs.getstripe("/e/f").stale == []
    data[5 * MiB + 3:5 * MiB + 5003] = b"Y" * 5000
    with fs.open("/e/f", "r+b") as f:
        f.seek(5 * MiB + 3)
        f.write(b"Y" * 5000)
        f.flush()
        lay = fs.getstripe("/e/f")
        assert sorted(lay.stale) == [4, 5] and lay.write_pending, lay
        assert read_in_child(cluster, "/e/f")[0] == sha(data)
    lay = wait_rebuilt(fs, "/e/f")
    assert cluster.loom("ec", "verify", "-v", "/e/f").returncode == 0
    kill_and_read(cluster, lay, "/e/f", sha(bytes(data)), [2, 3])


@pytest.mark.allow_log(EC_STALE, r"ERROR: OST[0-9a-f]{4}: read: object [0-9a-f]+ block \d+ .*checksum mismatch")
def test_a_flipped_byte_in_a_data_object_is_read_through_the_code_and_the_object_made_again(cluster_factory):
    cluster = cluster_factory(osts=6)
    fs = pyloom.connect(cluster)
    ec_dir(cluster)
    data = pattern(8 * MiB, 23)
    with fs.open("/e/f", "wb") as f:
        f.write(data)
    lay = fs.getstripe("/e/f")
    ost, objid = lay.objects[2]
    with open(object_path(cluster.ost_dir(ost), objid), "r+b") as f:
        f.seek(MiB + 99)
        b = f.read(1)
        f.seek(MiB + 99)
        f.write(bytes([b[0] ^ 0x08]))
    gen = fs.getstripe("/e/f").layout_gen
    _, err = read_in_child(cluster, "/e/f")
    assert "data object 2 (OST%04x object %#x) read back bad bytes: marked stale" % (ost, objid) in err, err
    assert fs.getstripe("/e/f").layout_gen > gen
    lay = wait_rebuilt(fs, "/e/f")
    with open(object_path(cluster.ost_dir(ost), objid), "rb") as f:
        assert f.read() == data[2 * MiB:3 * MiB] + data[6 * MiB:7 * MiB]
    assert cluster.loom("ec", "verify", "/e/f").returncode == 0


@pytest.mark.allow_log(LOST_OSS, EC_STALE, r"ERROR: OST[0-9a-f]{4}: its directory .* is gone",
                       r"WARN: OST[0-9a-f]{4} replaced: ",
                       r"WARN: OST[0-9a-f]{4}: the copies \(or erasure-coded objects\) \d+ redundant file",
                       r"(WARN|ERROR): .*(Input/output error|EIO)")
def test_a_dead_disk_loses_no_erasure_coded_byte_and_its_replacement_is_rebuilt(cluster_factory):
    """An OST's directory deleted under its running OSS: every erasure-coded file reads back whole
    (its OSS answers EIO, never zeros; readers decode around it). A new OST takes the index
    (--replace): the MDS marks the objects the old one held stale and rebuilds them onto it; then
    two other OSSs die and every byte still reads back. `loom fsck` is content all along."""
    cluster = cluster_factory(osts=6)
    fs = pyloom.connect(cluster)
    ec_dir(cluster, spec="3+2")
    files = {}
    for k, size in enumerate((1, 3 * MiB + 17, 11 * MiB, 64 * 1024)):
        data = pattern(size, 30 + k)
        with fs.open("/e/f%d" % k, "wb") as f:
            f.write(data)
        files["/e/f%d" % k] = data
    held = {}
    for p in files:
        for ost, _ in fs.getstripe(p).objects:
            held[ost] = held.get(ost, 0) + 1
    dead = max(held, key=held.get)
    ost_dir = cluster.ost_dir(dead)
    shutil.rmtree(ost_dir)
    for p, data in files.items():
        assert read_in_child(cluster, p)[0] == sha(data), p
    cluster.kill9("oss%s" % os.path.basename(ost_dir)[3:])
    p = subprocess.run([OSS_BIN, "--format", "--fsname", "loom", "--ost", ost_dir, "--index", str(dead),
                        "--replace"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    cluster.restart()
    for p, data in files.items():
        lay = wait_rebuilt(fs, p)
        assert cluster.loom("ec", "verify", p).returncode == 0, p
    rebuilt = [p for p in files if dead in [o for o, _ in fs.getstripe(p).objects]]
    assert len(rebuilt) == held[dead]
    for p in rebuilt:
        lay = fs.getstripe(p)
        others = [i for i, (o, _) in enumerate(lay.objects) if o != dead][:2]
        for i in others:
            cluster.kill9(cluster.oss_name(lay.objects[i][0]))
        assert read_in_child(cluster, p)[0] == sha(files[p]), p
        cluster.restart()


def test_two_writers_at_once_leave_the_parity_made_again_from_the_data(cluster_factory):
    """Two clients with the file open for writing at once, each writing whole rows: their writes
    may cross within a row (each sends data and parity in an order of its own), so at the last
    close the MDS takes the data objects as the file's and makes the parity again. A mirrored
    file's copies are put right the same way. One writer alone costs nothing of the kind."""
    cluster = cluster_factory(osts=6)
    fs = pyloom.connect(cluster)
    ec_dir(cluster)
    cluster.loom("mkdir", "/m")
    cluster.loom("setstripe", "-N", "2", "-E", "-1", "-c", "2", "/m")
    for path in ("/e/f", "/m/f"):
        data = bytearray(pattern(16 * MiB, 40))
        with fs.open(path, "wb") as f:
            f.write(data)
        gen = fs.getstripe(path).layout_gen
        code = ("import loom, sys\n"
                "fs = loom.connect(%r, key_file=%r)\n"
                "f = fs.open(%r, 'r+b')\n"
                "print('open', flush=True)\n"
                "sys.stdin.readline()\n"
                "f.seek(8 << 20)\n"
                "f.write(b'B' * (4 << 20))\n"
                "f.close()\n" % (cluster.addr, cluster.key, path))
        other = subprocess.Popen([sys.executable, "-c", code], env=pyloom.child_env(cluster),
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert other.stdout.readline() == "open\n"
            with fs.open(path, "r+b") as f:
                f.write(b"A" * (4 << 20))
                other.stdin.write("go\n")
                other.stdin.flush()
                assert other.wait(timeout=60) == 0
        finally:
            if other.poll() is None:
                other.kill()
        data[:4 * MiB] = b"A" * (4 * MiB)
        data[8 * MiB:12 * MiB] = b"B" * (4 * MiB)
        assert wait_until(lambda: fs.getstripe(path).layout_gen > gen, 10, 0.1), fs.getstripe(path)
        lay = wait_rebuilt(fs, path)
        assert cluster.loom("mirror", "verify", path).returncode == 0
        assert read_in_child(cluster, path)[0] == sha(bytes(data))
    assert "written through several handles at once" in cluster.read_log("mds")
    # One writer: no objects made again.
    gen = fs.getstripe("/e/f").layout_gen
    with fs.open("/e/f", "r+b") as f:
        f.write(b"C" * (4 << 20))
    assert fs.getstripe("/e/f").layout_gen == gen and fs.getstripe("/e/f").stale == []


@pytest.mark.allow_log(LOST_OSS)
def test_a_truncate_inside_a_row_stales_the_parity_and_one_at_a_row_boundary_does_not(cluster_factory):
    """A cut inside a row changes that row's data (zeros past the cut): the MDS marks the parity
    stale in the truncate's own transaction and makes it again; a cut at a row's end keeps it.
    Either way, two OSSs can then die and the file reads back as cut."""
    cluster = cluster_factory(osts=6)
    fs = pyloom.connect(cluster)
    ec_dir(cluster)
    data = pattern(10 * MiB + 777, 50)
    with fs.open("/e/f", "wb") as f:
        f.write(data)
    gen = fs.getstripe("/e/f").layout_gen
    fs.truncate("/e/f", 8 * MiB)                  # two whole rows of 4 MiB
    assert fs.getstripe("/e/f").stale == [] and fs.getstripe("/e/f").layout_gen == gen
    fs.truncate("/e/f", 5 * MiB + 3)
    assert sorted(fs.getstripe("/e/f").stale) == [4, 5]
    lay = wait_rebuilt(fs, "/e/f")
    assert cluster.loom("ec", "verify", "/e/f").returncode == 0
    # The parity objects are as long as data object 0 of a 5 MiB + 3 file: 2 MiB.
    for ost, objid in lay.objects[4:]:
        assert os.path.getsize(object_path(cluster.ost_dir(ost), objid)) == 2 * MiB
    kill_and_read(cluster, lay, "/e/f", sha(data[:5 * MiB + 3]), [1, 2])


@pytest.mark.allow_log(LOST_OSS, EC_STALE)
def test_a_row_kept_across_a_truncate_is_not_taken_for_the_file(cluster_factory):
    """A handle's last row goes with its parity at an fsync and stays gathered, so that the writes
    that follow make it whole; a truncate in between cut those bytes: the row is then finished
    as a part of a row (parity stale, made again), not with parity of bytes the file lost."""
    cluster = cluster_factory(osts=6)
    fs = pyloom.connect(cluster)
    ec_dir(cluster)
    with fs.open("/e/f", "wb") as f:
        f.write(b"A" * 100000)
        f.fsync()
        f.truncate(0)
        f.seek(100000)
        f.write(b"B" * (4 * MiB - 100000))
    want = b"\0" * 100000 + b"B" * (4 * MiB - 100000)
    lay = wait_rebuilt(fs, "/e/f")
    assert cluster.loom("ec", "verify", "/e/f").returncode == 0
    kill_and_read(cluster, lay, "/e/f", sha(want), [1, 4])


@pytest.mark.allow_log(LOST_OSS, EC_STALE)
def test_a_reader_opened_before_another_clients_write_does_not_decode_with_stale_parity(cluster_factory):
    """Reader R opens; another client writes part of a row (the parity goes stale at the MDS, R's
    layout still says in sync); a data object's OSS dies. R's read of that object must not decode
    with the stale parity: it learns the marks from the MDS, waits for the object (its recovery
    window, 3 s here) and says EIO, as for a plain file whose OSS is gone, rather than hand back
    bytes nobody wrote."""
    cluster = cluster_factory(osts=6)
    fs = pyloom.connect(cluster)
    ec_dir(cluster)
    data = bytearray(pattern(8 * MiB, 7))
    with fs.open("/e/f", "wb") as f:
        f.write(data)
    code = ("import hashlib, loom, sys\n"
            "fs = loom.connect(%r, key_file=%r, recovery_seconds=3)\n"
            "f = fs.open('/e/f', 'rb')\n"
            "print('open', flush=True)\n"
            "sys.stdin.readline()\n"
            "f.seek(4 << 20)\n"
            "try:\n"
            "    print(hashlib.sha256(f.read(1 << 20)).hexdigest(), flush=True)\n"
            "except OSError as e:\n"
            "    print('errno', e.errno, flush=True)\n" % (cluster.addr, cluster.key))
    r = subprocess.Popen([sys.executable, "-c", code], env=pyloom.child_env(cluster), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert r.stdout.readline() == "open\n"
        lay = fs.getstripe("/e/f")
        with fs.open("/e/f", "r+b") as w:
            w.seek(5 * MiB + 3)
            w.write(b"Y" * 5000)
            w.flush()
            assert sorted(fs.getstripe("/e/f").stale) == [4, 5]
            cluster.kill9(cluster.oss_name(lay.objects[0][0]))
            r.stdin.write("go\n")
            r.stdin.flush()
            got = r.stdout.readline().strip()
        assert got == "errno 5", got
    finally:
        if r.poll() is None:
            r.kill()
        r.wait()


def test_loom_ec_verify_takes_stripes_larger_than_its_chunk(cluster):
    fs = pyloom.connect(cluster)
    cluster.loom("mkdir", "/e")
    cluster.loom("setstripe", "--ec", "2+1", "-E", "-1", "-S", "8M", "/e")
    with fs.open("/e/f", "wb") as f:
        f.write(pattern(20 * MiB, 3))
    out = cluster.loom("ec", "verify", "-v", "/e/f", timeout=60).stdout
    assert out == "/e/f: every object agrees with the code (%d bytes of each checked)\n" % (12 * MiB), out


@pytest.mark.allow_log(LOST_OSS, r"WARN: file \d+: its writer went without closing")
def test_a_writer_that_dies_between_data_and_parity_leaves_no_parity_taken_for_in_sync(cluster_factory):
    """Power-loss order: a client dies after a whole row reached the data objects and one parity
    object but not the other (its OSS stopped). The file was write-pending from the open: when the
    writer's session ends the MDS takes the data objects as the file's and makes the parity again,
    so afterwards any two objects can be lost."""
    c = loomutil.configured(cluster_factory, "recovery-window = 3\n", osts=6)
    fs = pyloom.connect(c)
    ec_dir(c)
    old = pattern(8 * MiB, 60)
    with fs.open("/e/f", "wb") as f:
        f.write(old)
    lay = fs.getstripe("/e/f")
    assert not lay.stale
    with open(object_path(c.ost_dir(lay.objects[5][0]), lay.objects[5][1]), "rb") as f:
        f.seek(MiB)
        old_parity = f.read(MiB)
    code = ("import loom, sys\n"
            "fs = loom.connect(%r, key_file=%r)\n"
            "f = fs.open('/e/f', 'r+b')\n"
            "f.write(bytes([5]) * (4 << 20))\n"
            "f.flush()\n"
            "print('open', flush=True)\n"
            "sys.stdin.readline()\n"
            "f.write(bytes([7]) * (4 << 20))\n"
            "f.fsync()\n"
            "print('never', flush=True)\n" % (c.addr, c.key))
    w = subprocess.Popen([sys.executable, "-c", code], env=pyloom.child_env(c), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopped = c.oss_name(lay.objects[4][0])
    try:
        assert w.stdout.readline() == "open\n", w.stderr.read()
        assert fs.getstripe("/e/f").write_pending
        pid = c.pid(stopped)
        os.kill(pid, signal.SIGSTOP)
        try:
            w.stdin.write("go\n")
            w.stdin.flush()
            # Row 1 (the writer's second) reaches data object 0 and parity object 1; parity
            # object 0's OSS, stopped, holds it unread. The writer dies then.
            other = object_path(c.ost_dir(lay.objects[5][0]), lay.objects[5][1])
            first = object_path(c.ost_dir(lay.objects[0][0]), lay.objects[0][1])

            def landed():
                with open(first, "rb") as a, open(other, "rb") as b:
                    a.seek(MiB)
                    b.seek(MiB)
                    return a.read(1) == b"\x07" and b.read(MiB) != old_parity
            assert wait_until(landed, 30, 0.02), "the write never reached the data and the other parity"
            w.kill()
            w.wait()
            assert w.stdout.read() == "", "the writer finished: it was to die in the middle"
            # The stopped OSS dies with the write still unread in its socket: parity object 0
            # keeps the old row's parity, and nothing has said so.
            c.kill9(stopped)
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    c.restart()
    assert not fs.getstripe("/e/f").stale
    with open(object_path(c.ost_dir(lay.objects[4][0]), lay.objects[4][1]), "rb") as f:
        f.seek(MiB)
        stale_parity = f.read(MiB)           # row 1's, from before the writer
    # The writer's session ends (3 s): the parity is marked, cut at the size, made again.
    lay = wait_rebuilt(fs, "/e/f", timeout=60)
    assert lay.layout_gen >= 2, lay
    with open(object_path(c.ost_dir(lay.objects[4][0]), lay.objects[4][1]), "rb") as f:
        f.seek(MiB)
        assert f.read(MiB) != stale_parity, "parity object 0 was never made again"
    assert "its writer went without closing" in c.read_log("mds")
    assert c.loom("ec", "verify", "/e/f").returncode == 0
    want = bytes([5]) * (4 * MiB) + bytes([7]) * (4 * MiB)
    kill_and_read(c, lay, "/e/f", sha(want), [0, 3])

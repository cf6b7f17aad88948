"""Mirrored files (issue 20): `loom setstripe -N COPIES` keeps every byte in that many copies, each
on OSTs of its own. A write goes to every copy at once; a copy whose OSS dies is marked stale and
the write goes on; readers take any in-sync copy and go to the next one on an error, the
application seeing nothing; a copy read back bad is marked stale.

Two clients in each case where it matters: the writer (a mount, or a native process) and readers
that open the file afterwards in processes of their own."""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

import signal

import loomutil
import loomwire
import pyloom
from loomutil import OSS_BIN, MiB, object_path, wait_until

pytestmark = pyloom.pylib

CSUM_ERROR = r"ERROR: OST[0-9a-f]{4}: read: object [0-9a-f]+ block \d+ .*checksum mismatch"
# A client that writes or reads while an OSS is dead logs the connection it lost.
LOST_OSS = r"(WARN|ERROR): .*(OST[0-9a-f]{4}|127\.0\.0\.1:\d+).*(lost|refused|reach|reset|closed)"


def pattern(size, seed):
    """Deterministic bytes that differ from MiB to MiB."""
    out = bytearray()
    block = hashlib.sha256(b"mirror-%d" % seed).digest() * (MiB // 32)
    for i in range((size + MiB - 1) // MiB):
        out += bytes((b + i) & 0xFF for b in block[:64]) + block[64:]
    return bytes(out[:size])


def layout(fs, path):
    return fs.getstripe(path)


def copies_of(lay):
    """[[(ost, objid) of stripe k] per copy]."""
    per = len(lay.objects) // lay.mirror_count
    return [lay.objects[m * per:(m + 1) * per] for m in range(lay.mirror_count)]


def read_in_child(cluster, path):
    """sha256 of path read by a new native client in a process of its own, and its stderr."""
    code = ("import hashlib, loom, sys\n"
            "fs = loom.connect(%r, key_file=%r)\n"
            "with fs.open(%r, 'rb') as f:\n"
            "    print(hashlib.sha256(f.read()).hexdigest())\n" % (cluster.addr, cluster.key, path))
    p = subprocess.run([sys.executable, "-c", code], env=pyloom.child_env(cluster), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, "a reader failed: %s" % p.stderr
    return p.stdout.strip(), p.stderr


def test_setstripe_N_keeps_copies_on_osts_of_their_own_and_getstripe_shows_them(cluster):
    fs = pyloom.connect(cluster)
    cluster.loom("mkdir", "/m")
    cluster.loom("setstripe", "-N", "2", "-E", "-1", "-c", "2", "-S", "1M", "/m")
    data = pattern(5 * MiB + 4321, 1)
    with fs.open("/m/f", "wb") as f:
        f.write(data)
    lay = layout(fs, "/m/f")
    assert lay.mirror_count == 2 and lay.stripe_count == 2 and len(lay.objects) == 4
    assert len({ost for ost, _ in lay.objects}) == 4, "copies share an OST: %r" % lay.objects
    assert lay.stale == []
    # Object k of each copy holds the same bytes, on disk.
    for k in range(2):
        blobs = []
        for copy in copies_of(lay):
            ost, objid = copy[k]
            with open(object_path(cluster.ost_dir(ost), objid), "rb") as f:
                blobs.append(f.read())
        assert blobs[0] == blobs[1] and len(blobs[0]) > 2 * MiB
    assert read_in_child(cluster, "/m/f")[0] == hashlib.sha256(data).hexdigest()

    # lfs's composite format: a mirror count, FLR's ids and mirror ids, the state "ro".
    out = cluster.loom("getstripe", "/m/f").stdout
    assert "  lcm_mirror_count:  2\n  lcm_entry_count:   2\n  lcm_flags:         ro\n" in out, out
    assert re.findall(r"lcme_id: +(\d+)", out) == ["65537", "131073"], out
    assert re.findall(r"lcme_mirror_id: +(\d+)", out) == ["1", "2"], out
    assert re.findall(r"l_ost_idx: (\d+)", out) == [str(ost) for ost, _ in lay.objects], out
    out = cluster.loom("getstripe", "-d", "/m").stdout
    assert "lcm_mirror_count:  2" in out, out
    # A new file in the directory inherits the copies; one asking for one copy has one.
    cluster.loom("setstripe", "-N", "1", "/m/single")
    assert layout(fs, "/m/single").mirror_count == 1
    # More copies than OSTs, or than Loom keeps: refused, saying why.
    p = cluster.loom("setstripe", "-N", "5", "/m/five", check=False)
    assert p.returncode != 0 and "5 copies need 5 OSTs" in p.stderr, p.stderr
    p = cluster.loom("setstripe", "-N", "17", "/m/many", check=False)
    assert p.returncode != 0 and "invalid mirror count '17'" in p.stderr, p.stderr
    # Three copies of as many stripes as fit: one each on 4 OSTs.
    cluster.loom("setstripe", "-N", "3", "-c", "-1", "/m/three")
    lay = layout(fs, "/m/three")
    assert lay.mirror_count == 3 and lay.stripe_count == 1 and len({o for o, _ in lay.objects}) == 3


def mirrored_write_through_an_oss_kill(cluster, size):
    """kill -9 of the OSS under one copy while a mount writes size bytes: the write and its
    fsync succeed, that copy is marked stale, and readers in other processes, with the OSS still
    dead, read back every byte. Returns (the victim's OSS name, the bytes' sha256)."""
    mnt = cluster.mount()
    fs = pyloom.connect(cluster)
    cluster.loom("mkdir", "/m")
    cluster.loom("setstripe", "-N", "2", "-E", "-1", "-c", "2", "-S", "1M", "/m")
    want = hashlib.sha256(pattern(size, 2)).hexdigest()
    code = ("import hashlib, os, sys\n"
            "sys.path.insert(0, %r)\n"
            "from test_mirrors import pattern\n"
            "data = pattern(%d, 2)\n"
            "fd = os.open(%r, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)\n"
            "for off in range(0, len(data), 1 << 20):\n"
            "    os.write(fd, data[off:off + (1 << 20)])\n"
            "    if off == %d:\n"
            "        print('half', flush=True)\n"
            "        sys.stdin.readline()\n"
            "os.fsync(fd)\n"
            "os.close(fd)\n"
            "print('done', flush=True)\n" % (os.path.dirname(__file__), size, os.path.join(mnt, "m", "big"),
                                             size // 8 // MiB * MiB))
    w = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert w.stdout.readline() == "half\n", w.stderr.read()
        lay = layout(fs, "/m/big")
        victim_ost = copies_of(lay)[1][0][0]
        cluster.kill9(cluster.oss_name(victim_ost))
        w.stdin.write("go\n")
        w.stdin.flush()
        out, err = w.communicate(timeout=600)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    assert w.returncode == 0 and out == "done\n", "the writer failed: %r" % err

    lay = layout(fs, "/m/big")
    stale = [lay.objects[i] for i in lay.stale]
    assert stale and all(ost == victim_ost for ost, _ in stale), (victim_ost, lay)
    out = cluster.loom("getstripe", "/m/big").stdout
    assert "lcm_flags:         wp" in out and "init,stale" in out, out
    # Two readers, the dead OSS still dead: each reads every byte.
    for _ in range(2):
        got, _ = read_in_child(cluster, "/m/big")
        assert got == want
    with open(os.path.join(mnt, "m", "big"), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == want
    return cluster.oss_name(victim_ost), want


@pytest.mark.allow_log(LOST_OSS)
def test_a_mirrored_write_goes_on_when_an_oss_is_killed_and_readers_see_every_byte(cluster):
    mirrored_write_through_an_oss_kill(cluster, 64 * MiB)


@pytest.mark.soak
@pytest.mark.allow_log(LOST_OSS)
def test_a_1gib_mirrored_write_through_an_oss_kill_is_resynced_when_it_returns(cluster):
    """The issue's size: 1 GiB. Then the OSS comes back and the MDS resyncs its copy; the copy
    that never missed a write dies, and every byte still reads back."""
    victim, want = mirrored_write_through_an_oss_kill(cluster, 1024 * MiB)
    fs = pyloom.connect(cluster)
    cluster.restart()
    lay = wait_in_sync(fs, "/m/big", timeout=300)
    assert fs.mirror_verify("/m/big") is None
    cluster.kill9(cluster.oss_name(copies_of(lay)[0][0][0]))
    assert read_in_child(cluster, "/m/big")[0] == want


@pytest.mark.allow_log(CSUM_ERROR, r"WARN: mirrored file \d+: mirror \d stripe \d .* read back bad bytes")
def test_a_copy_with_a_flipped_byte_is_read_from_the_other_and_marked_stale(cluster):
    fs = pyloom.connect(cluster)
    cluster.loom("mkdir", "/m")
    cluster.loom("setstripe", "-N", "2", "-E", "-1", "-c", "1", "/m")
    data = pattern(3 * MiB, 3)
    with fs.open("/m/f", "wb") as f:
        f.write(data)
    lay = layout(fs, "/m/f")
    bad_ost, bad_obj = copies_of(lay)[0][0]
    path = object_path(cluster.ost_dir(bad_ost), bad_obj)
    with open(path, "r+b") as f:
        f.seek(MiB + 77)
        b = f.read(1)
        f.seek(MiB + 77)
        f.write(bytes([b[0] ^ 0x20]))
    want = hashlib.sha256(data).hexdigest()
    # Each reader starts at a copy of its own choosing (its client id): readers come until one
    # has met the bad copy. Every one of them reads the right bytes.
    gen = layout(fs, "/m/f").layout_gen
    for _ in range(40):
        got, _ = read_in_child(cluster, "/m/f")
        assert got == want
        if layout(fs, "/m/f").layout_gen != gen:
            break                          # marked (and perhaps resynced already)
    assert layout(fs, "/m/f").layout_gen != gen, "no reader met the bad copy in 40 tries"
    lay = layout(fs, "/m/f")
    assert lay.stale == [] or [lay.objects[i] for i in lay.stale] == [(bad_ost, bad_obj)], lay
    # The MDS copies it again from the good copy, by itself: both copies hold the file's bytes.
    lay = wait_in_sync(fs, "/m/f")
    for m in range(2):
        got = copy_bytes(cluster, lay, m, len(data))
        assert got == data, ("copy %d after its repair" % m, lay, layout(fs, "/m/f"),
                             [os.path.exists(object_path(cluster.ost_dir(o), i)) for o, i in lay.objects],
                             cluster.read_log("mds")[-600:])
    assert fs.mirror_verify("/m/f") is None
    assert read_in_child(cluster, "/m/f")[0] == want


def wait_in_sync(fs, path, timeout=60):
    """Waits until no copy of path is stale and it has no writer's mark; returns its layout."""
    assert wait_until(lambda: not layout(fs, path).stale and not layout(fs, path).write_pending, timeout, 0.2), \
        "copies still stale after %d s: %r" % (timeout, layout(fs, path))
    return layout(fs, path)


def copy_bytes(cluster, lay, m, size):
    """Copy m of a file, read from its objects on disk: the file's bytes [0, size) as that copy
    holds them (RAID-0 of stripe_size over its objects; past an object's end, zeros)."""
    per = len(lay.objects) // lay.mirror_count
    objs = []
    for ost, objid in lay.objects[m * per:(m + 1) * per]:
        p = object_path(cluster.ost_dir(ost), objid)
        objs.append(open(p, "rb").read() if os.path.exists(p) else b"")
    out = bytearray()
    s = lay.stripe_size
    for unit in range((size + s - 1) // s):
        o, row = unit % per, unit // per
        chunk = objs[o][row * s:(row + 1) * s]
        out += chunk + bytes(s - len(chunk))
    return bytes(out[:size])


@pytest.mark.allow_log(LOST_OSS)
def test_a_stale_copy_is_resynced_by_the_mds_when_its_oss_returns(cluster):
    """A copy that missed a rewrite while its OSS was dead is copied again by the MDS once the
    OSS is back, with nobody asking; then the copy that stayed in sync can die and every byte
    still reads back, from the resynced one."""
    fs = pyloom.connect(cluster)
    cluster.loom("mkdir", "/m")
    cluster.loom("setstripe", "-N", "2", "-E", "-1", "-c", "2", "-S", "1M", "/m")
    old = pattern(24 * MiB + 5, 4)
    with fs.open("/m/f", "wb") as f:
        f.write(old)
    lay = layout(fs, "/m/f")
    victim = copies_of(lay)[1][0][0]
    cluster.kill9(cluster.oss_name(victim))
    new = bytearray(old)
    new[3 * MiB:11 * MiB] = pattern(8 * MiB, 5)
    with fs.open("/m/f", "r+b") as f:
        f.seek(3 * MiB)
        f.write(new[3 * MiB:11 * MiB])
    assert [lay.objects[i][0] for i in layout(fs, "/m/f").stale] == [victim]
    p = cluster.loom("mirror", "resync", "--timeout", "2", "/m/f", check=False)
    assert p.returncode == 1 and "objects still stale after 2 s" in p.stderr, p.stderr
    cluster.restart()
    lay = wait_in_sync(fs, "/m/f")
    assert lay.layout_gen > 0
    for m in range(2):
        assert copy_bytes(cluster, lay, m, len(new)) == bytes(new), "copy %d differs after the resync" % m
    assert cluster.loom("mirror", "verify", "-v", "/m/f").stdout.startswith("/m/f: in-sync mirrors agree")
    assert "resync: inode" in cluster.read_log("mds")
    # The copy that never missed a write dies: the resynced one serves every byte.
    cluster.kill9(cluster.oss_name(copies_of(lay)[0][0][0]))
    got, _ = read_in_child(cluster, "/m/f")
    assert got == hashlib.sha256(bytes(new)).hexdigest()


def test_loom_mirror_verify_finds_copies_that_differ_and_mirror_verbs_need_a_mirrored_file(cluster):
    fs = pyloom.connect(cluster)
    cluster.loom("mkdir", "/m")
    cluster.loom("setstripe", "-N", "2", "-E", "-1", "-c", "1", "/m")
    data = pattern(2 * MiB, 6)
    with fs.open("/m/f", "wb") as f:
        f.write(data)
    assert fs.mirror_verify("/m/f") is None
    p = cluster.loom("mirror", "verify", "/m/f")
    assert p.stdout == "", p.stdout
    # Other bytes written into copy 2 alone, with their checksums, as a client that wrote one
    # copy and died before it could say so would leave them: a difference only verify sees.
    lay = layout(fs, "/m/f")
    ost, objid = copies_of(lay)[1][0]
    host, port = cluster.oss_addr(cluster.oss_name(ost))
    with loomwire.Conn(host, port) as c:
        h, body, _ = c.call(loomwire.OP["OST_WRITE"],
                            loomwire.ost_io(ost, objid, MiB + 10, 5, ino=fs.stat("/m/f").st_ino, stripe_idx=1),
                            b"XXXXX")
        assert h.status == 0, h
    assert fs.mirror_verify("/m/f") == (1, 2, MiB + 10)
    p = cluster.loom("mirror", "verify", "/m/f", check=False)
    assert p.returncode == 1 and p.stdout == "/m/f: mirror 1 and mirror 2 differ at offset %d\n" % (MiB + 10), \
        (p.stdout, p.stderr)
    # Verbs for mirrors on a file with one copy: refused, saying why.
    cluster.loom("setstripe", "-N", "1", "/m/one")
    for verb in ("resync", "verify"):
        p = cluster.loom("mirror", verb, "/m/one", check=False)
        assert p.returncode == 1 and "'/m/one': not a mirrored or erasure-coded file" in p.stderr, p.stderr
    p = cluster.loom("mirror", "create", "/m/new", check=False)
    assert p.returncode == 2 and "-N COPIES is needed" in p.stderr, p.stderr
    cluster.loom("mirror", "create", "-N", "3", "/m/new")
    assert layout(fs, "/m/new").mirror_count == 3


@pytest.mark.allow_log(LOST_OSS, r"WARN: file \d+: its writer went without closing")
def test_a_writer_that_dies_between_its_copies_leaves_no_copy_that_looks_in_sync(cluster_factory):
    """Power-loss order: a client dies after its write reached one copy and before the other
    copy took it or was marked stale. The MDS knew the file was open for writing (committed at
    the open): when the writer's session ends, every copy but the first is marked stale and
    resynced, so the copies agree again, and none ever claimed to be in sync while it was not."""
    c = loomutil.configured(cluster_factory, "recovery-window = 3\n")
    fs = pyloom.connect(c)
    c.loom("mkdir", "/m")
    c.loom("setstripe", "-N", "2", "-E", "-1", "-c", "1", "/m")
    with fs.open("/m/f", "wb") as f:
        f.write(bytes(2 * MiB))
    lay = layout(fs, "/m/f")
    assert not lay.stale
    second = c.oss_name(copies_of(lay)[1][0][0])
    code = ("import loom, sys\n"
            "fs = loom.connect(%r, key_file=%r)\n"
            "f = fs.open('/m/f', 'r+b')\n"
            "print('open', flush=True)\n"
            "sys.stdin.readline()\n"
            "f.write(bytes([7]) * (1 << 20))\n"
            "f.flush()\n"
            "print('never', flush=True)\n" % (c.addr, c.key))
    w = subprocess.Popen([sys.executable, "-c", code], env=pyloom.child_env(c), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert w.stdout.readline() == "open\n", w.stderr.read()
        assert layout(fs, "/m/f").write_pending, "a writer's open did not make the file write-pending"
        pid = c.pid(second)
        os.kill(pid, signal.SIGSTOP)
        try:
            w.stdin.write("go\n")
            w.stdin.flush()
            # The first copy has the new bytes once its object holds them.
            first_obj = object_path(c.ost_dir(copies_of(lay)[0][0][0]), copies_of(lay)[0][0][1])
            assert wait_until(lambda: open(first_obj, "rb").read(1) == b"\x07", 30, 0.1), \
                "the write never reached the first copy"
            w.kill()
            w.wait()
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    # The copies differ now, and nothing says so yet...
    assert not layout(fs, "/m/f").stale
    # ...until the writer's session ends (the recovery window, 3 s): copy 2 is marked, resynced.
    lay = wait_in_sync(fs, "/m/f", timeout=60)
    assert lay.layout_gen >= 2, lay
    assert fs.mirror_verify("/m/f") is None
    want = bytes([7]) * MiB + bytes(MiB)
    for m in range(2):
        assert copy_bytes(c, lay, m, 2 * MiB) == want
    assert "its writer went without closing" in c.read_log("mds")


@pytest.mark.allow_log(LOST_OSS, r"ERROR: OST[0-9a-f]{4}: its directory .* is gone",
                       r"WARN: OST[0-9a-f]{4} replaced: ", r"WARN: OST[0-9a-f]{4}: the copies \(or erasure-coded objects\) \d+ redundant file",
                       r"(WARN|ERROR): .*(Input/output error|EIO)")
def test_a_dead_disk_loses_no_mirrored_byte_and_its_replacement_gets_every_copy_back(cluster):
    """An OST's directory deleted under its running OSS, as a disk that dies: every mirrored file
    reads back whole (the OSS answers EIO for what it lost, never zeros, and readers go to the
    other copy). A new OST formatted with --replace takes the index: the MDS marks the copies the
    old one held stale and resyncs them onto it, and then the copies that never left can die
    and every byte still reads back."""
    fs = pyloom.connect(cluster)
    cluster.loom("mkdir", "/m")
    cluster.loom("setstripe", "-N", "2", "-E", "-1", "-c", "1", "/m")
    files = {}
    for k, size in enumerate((1, 3 * MiB + 17, 9 * MiB, 64 * 1024)):
        data = pattern(size, 10 + k)
        with fs.open("/m/f%d" % k, "wb") as f:
            f.write(data)
        files["/m/f%d" % k] = data
    # The OST that holds the most copies dies, from under its OSS.
    held = {}
    for p in files:
        for ost, _ in layout(fs, p).objects:
            held[ost] = held.get(ost, 0) + 1
    dead = max(held, key=held.get)
    ost_dir = cluster.ost_dir(dead)
    shutil.rmtree(ost_dir)
    for p, data in files.items():
        for _ in range(2):
            assert read_in_child(cluster, p)[0] == hashlib.sha256(data).hexdigest(), p
    # The disk is replaced: a new OST takes the index.
    cluster.kill9("oss%s" % os.path.basename(ost_dir)[3:])
    p = subprocess.run([OSS_BIN, "--format", "--fsname", "loom", "--ost", ost_dir, "--index", str(dead),
                        "--replace"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    cluster.restart()
    assert wait_until(lambda: re.search(r"OST%04x: the copies \(or erasure-coded objects\) %d redundant files? had there are stale" % (
        dead, held[dead]), cluster.read_log("mds")), 30, 0.2), cluster.read_log("mds")[-2000:]
    for p, data in files.items():
        lay = wait_in_sync(fs, p)
        assert fs.mirror_verify(p) is None, p
    # The copies that never left die: the rebuilt ones serve every byte of the files they hold.
    rebuilt = [p for p in files if dead in [o for o, _ in layout(fs, p).objects]]
    assert len(rebuilt) == held[dead]
    for ost in set(o for p in files for o, _ in layout(fs, p).objects) - {dead}:
        cluster.kill9(cluster.oss_name(ost))
    for p in rebuilt:
        assert read_in_child(cluster, p)[0] == hashlib.sha256(files[p]).hexdigest(), p


def test_loom_mirror_extend_adds_a_copy_the_mds_fills_and_split_removes_one(cluster):
    fs = pyloom.connect(cluster)
    cluster.loom("mkdir", "/m")
    cluster.loom("setstripe", "-N", "2", "-E", "-1", "-c", "1", "/m")
    data = pattern(5 * MiB + 3, 20)
    with fs.open("/m/f", "wb") as f:
        f.write(data)
    before = layout(fs, "/m/f")
    cluster.loom("mirror", "extend", "/m/f")
    lay = wait_in_sync(fs, "/m/f")
    assert lay.mirror_count == 3 and lay.objects[:2] == before.objects, lay
    assert len({o for o, _ in lay.objects}) == 3
    assert copy_bytes(cluster, lay, 2, len(data)) == data
    assert fs.mirror_verify("/m/f") is None
    # No fourth OST left that holds none of it? There is one; a fifth copy has none.
    cluster.loom("mirror", "extend", "/m/f")
    p = cluster.loom("mirror", "extend", "/m/f", check=False)
    assert p.returncode == 1 and "no OST left that holds none of it" in p.stderr, p.stderr
    wait_in_sync(fs, "/m/f")
    # Split: refused while open; then copy 1 goes, its objects destroyed; the rest read back.
    f = fs.open("/m/f", "rb")
    p = cluster.loom("mirror", "split", "-d", "--mirror-id", "1", "/m/f", check=False)
    assert p.returncode == 1 and "open somewhere" in p.stderr, p.stderr
    f.close()
    first = layout(fs, "/m/f").objects[0]
    cluster.loom("mirror", "split", "-d", "--mirror-id", "1", "/m/f")
    lay = layout(fs, "/m/f")
    assert lay.mirror_count == 3 and first not in lay.objects, lay
    assert wait_until(lambda: not os.path.exists(object_path(cluster.ost_dir(first[0]), first[1])), 30, 0.2)
    p = cluster.loom("mirror", "split", "-d", "--mirror-id", "4", "/m/f", check=False)
    assert p.returncode == 1 and "no mirror 4" in p.stderr, p.stderr
    p = cluster.loom("mirror", "split", "--mirror-id", "1", "/m/f", check=False)
    assert p.returncode == 2 and "lfs's -f NEWFILE is not supported" in p.stderr, p.stderr
    # Down to one copy: a plain file, which reads back whole.
    cluster.loom("mirror", "split", "-d", "--mirror-id", "1", "/m/f")
    cluster.loom("mirror", "split", "-d", "--mirror-id", "1", "/m/f")
    lay = layout(fs, "/m/f")
    assert lay.mirror_count == 1 and len(lay.objects) == 1
    assert "lcm_mirror_count" not in cluster.loom("getstripe", "/m/f").stdout
    assert read_in_child(cluster, "/m/f")[0] == hashlib.sha256(data).hexdigest()

"""loom fsck: the namespace checked against the objects, offline, and repaired.

Each test makes one kind of damage in a stopped cluster (an object deleted or left behind on an
OST, a writer killed before it reported its size, link counts and names broken in the MDT), runs
`loom fsck --dir DIR` (reports, changes nothing, exit 1), `--repair` (exit 0), and fsck again
(clean, exit 0), then starts the cluster and reads the data back.

Two small C programs under fsck_tools/ are built against this build: mdt_damage (breaks MDT
records with the store's own functions) and crash_writer (a libloom client killed -9 between
its writes and its close).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile

import pytest

from loomutil import (KiB, MiB, make_random_file, object_path, parse_file_getstripe, read_at,
                      sha256_file, stripe_units, wait_until)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(os.environ.get("LOOM_BUILD") or os.path.join(REPO, "build"))

SUMMARY = re.compile(r"^(\d+) problems found, (\d+) repaired$", re.M)


# ---- running fsck ---------------------------------------------------------------------------


class Fsck:
    def __init__(self, p):
        self.rc = p.returncode
        self.out = p.stdout
        self.err = p.stderr
        m = SUMMARY.search(p.stdout)
        self.found, self.repaired = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        # problem lines: everything before the totals line
        self.lines = [l for l in p.stdout.splitlines()
                      if l and not SUMMARY.match(l) and not re.match(r"^\d+ inodes ", l)]

    def __repr__(self):
        return "fsck exit %d\nstdout:\n%s\nstderr:\n%s" % (self.rc, self.out, self.err)

    def with_kind(self, kind):
        return [l for l in self.lines if l.startswith(kind + ": ")]


def fsck(cluster, *args):
    return Fsck(cluster.loom("fsck", *args, check=False))


def fsck_dir(cluster, repair=False):
    return fsck(cluster, "--dir", cluster.dir, *(["--repair"] if repair else []))


def check_and_repair(cluster, kind, count=1):
    """fsck finds `count` problems of `kind` (and nothing else), changes nothing; --repair repairs
    them all; a last fsck is clean. Returns the first run's lines of that kind."""
    mdt = os.path.join(cluster.dir, "mdt", "data.mdb")
    before = sha256_file(mdt)
    first = fsck_dir(cluster)
    assert first.rc == 1, first
    found = first.with_kind(kind)
    assert len(found) == count and first.found == count and first.repaired == 0, first
    assert sha256_file(mdt) == before, "a check without --repair wrote to the MDT"
    again = fsck_dir(cluster)
    assert again.lines == first.lines, "a check without --repair changed something:\n%r\n%r" % (first, again)
    fixed = fsck_dir(cluster, repair=True)
    assert fixed.rc == 0 and fixed.found == count and fixed.repaired == count, fixed
    assert all("; repaired: " in l for l in fixed.lines), fixed
    clean = fsck_dir(cluster)
    assert clean.rc == 0 and clean.found == 0 and clean.lines == [], clean
    return found


# ---- the C helpers --------------------------------------------------------------------------


def build_option(name):
    """A Meson option of the build (None when it cannot be read)."""
    try:
        with open(os.path.join(BUILD, "meson-info", "intro-buildoptions.json")) as f:
            return next((o["value"] for o in json.load(f) if o["name"] == name), None)
    except (OSError, ValueError):
        return None


@pytest.fixture(scope="module")
def tools():
    """Builds fsck_tools/*.c against this build; skips when there is no C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler for the fsck test helpers")
    out = tempfile.mkdtemp(prefix="loom-fsck-tools-")
    src = os.path.join(HERE, "fsck_tools")
    flags = ["-std=c11", "-O1", "-g", "-D_GNU_SOURCE", "-D_FILE_OFFSET_BITS=64",
             "-I", os.path.join(REPO, "include"), "-I", os.path.join(REPO, "src")]
    sanitize = build_option("b_sanitize")
    if sanitize and sanitize != "none":   # a sanitized build's libraries need its runtime
        flags.append("-fsanitize=" + sanitize)
    damage = os.path.join(out, "mdt_damage")
    writer = os.path.join(out, "crash_writer")
    libs = [os.path.join(BUILD, "src", d, "libloom%s.a" % n)
            for d, n in (("mdt", "mdt"), ("proto", "proto"), ("common", "common"))]
    libdir = os.path.join(BUILD, "src", "client")
    try:
        subprocess.run([cc] + flags + ["-o", damage, os.path.join(src, "mdt_damage.c")] + libs +
                       ["-llmdb", "-lisal", "-lcrypto", "-lpthread"], check=True)
        subprocess.run([cc] + flags + ["-o", writer, os.path.join(src, "crash_writer.c"),
                                       "-L", libdir, "-lloom", "-Wl,-rpath," + libdir], check=True)
        yield {"damage": damage, "writer": writer}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def damage(tools, cluster, *args):
    p = subprocess.run([tools["damage"], os.path.join(cluster.dir, "mdt")] + [str(a) for a in args],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return int(p.stdout)


# ---- helpers --------------------------------------------------------------------------------


def layout(cluster, path):
    return parse_file_getstripe(cluster.loom("getstripe", path).stdout)


def layout_any(cluster, path):
    """[(ost, objid)] of a file in any getstripe format, copy by copy for a mirrored one."""
    out = cluster.loom("getstripe", path).stdout
    return [(int(o), int(i, 16)) for o, i in re.findall(r"l_ost_idx: (\d+), l_fid: \[0x[0-9a-f]+:(0x[0-9a-f]+):", out)]


def ino_of(cluster, path):
    return int(re.search(r"Inode: (\d+)", cluster.loom("stat", path).stdout).group(1))


def links_of(cluster, path):
    return int(re.search(r"Links: (\d+)", cluster.loom("stat", path).stdout).group(1))


def put(cluster, workdir, path, size):
    src = os.path.join(workdir, os.path.basename(path) + ".src")
    make_random_file(src, size)
    cluster.loom("put", src, path)
    return src


def get(cluster, workdir, path):
    out = os.path.join(workdir, os.path.basename(path) + ".out")
    cluster.loom("get", path, out)
    return out


# ---- tests ----------------------------------------------------------------------------------


def test_clean_file_system_reports_nothing(cluster, workdir):
    cluster.loom("mkdir", "-p", "/a/b/c", "/empty")
    cluster.loom("setstripe", "-c", "4", "-S", "64k", "/a")
    put(cluster, workdir, "/a/striped", 3 * MiB + 12345)
    put(cluster, workdir, "/a/b/small", 10)
    put(cluster, workdir, "/a/b/c/empty", 0)
    put(cluster, workdir, "/one", 200 * KiB)
    cluster.loom("mv", "/one", "/a/b/c/moved")
    cluster.loom("rm", "/a/b/small")
    cluster.down()
    r = fsck_dir(cluster)
    assert r.rc == 0 and r.found == 0 and r.repaired == 0 and r.lines == [], r
    assert re.search(r"^\d+ inodes \(\d+ directories, \d+ files\), \d+ entries, \d+ objects on 4 OSTs checked$",
                     r.out, re.M), r
    # --repair on a clean file system changes nothing either
    r = fsck_dir(cluster, repair=True)
    assert r.rc == 0 and r.found == 0, r
    # the explicit form names the same targets
    osts = []
    for k in range(cluster.osts):
        osts += ["--ost", os.path.join(cluster.dir, "ost%d" % k)]
    r = fsck(cluster, "--mdt", os.path.join(cluster.dir, "mdt"), *osts)
    assert r.rc == 0 and r.found == 0, r
    # without one OST its objects go unchecked, with a warning, and nothing is called an orphan
    r = fsck(cluster, "--mdt", os.path.join(cluster.dir, "mdt"), *osts[:-2])
    assert r.rc == 0 and r.found == 0, r
    assert "was not given" in r.err, r
    cluster.up()
    assert cluster.loom("ls", "/a/b/c").stdout.split() == ["empty", "moved"]


def test_refuses_a_running_file_system(cluster):
    r = fsck_dir(cluster)
    assert r.rc == 4 and "loom-oss" in r.err, r
    r = fsck(cluster, "--mdt", os.path.join(cluster.dir, "mdt"), "--ost", os.path.join(cluster.dir, "ost1"))
    assert r.rc == 4 and "loom-oss" in r.err, r
    # with every OSS gone the MDS still holds the MDT
    for k in range(cluster.osts):
        cluster.kill9("oss%d" % k)
    r = fsck_dir(cluster, repair=True)
    assert r.rc == 4 and "in use" in r.err, r
    cluster.down()
    assert fsck_dir(cluster).rc == 0


def test_usage_and_operational_errors(cluster, workdir):
    cluster.down()
    assert fsck(cluster).rc == 16
    assert fsck(cluster, "--dir", cluster.dir, "--mdt", "x").rc == 16
    r = fsck(cluster, "--dir", workdir)
    assert r.rc == 4, r
    r = fsck(cluster, "--mdt", workdir, "--ost", os.path.join(cluster.dir, "ost0"))
    assert r.rc == 4 and "no MDT" in r.err, r
    # an OST of another file system is refused, not swept for orphans
    other = os.path.join(workdir, "other")
    subprocess.run([os.path.join(BUILD, "src", "oss", "loom-oss"), "--format", "--fsname", "other",
                    "--ost", other], check=True, capture_output=True)
    r = fsck(cluster, "--mdt", os.path.join(cluster.dir, "mdt"), "--ost", other)
    assert r.rc == 4 and "file system" in r.err, r


def test_missing_object_is_reported_and_created_empty(cluster, workdir):
    cluster.loom("setstripe", "-E", "-1", "-c", "4", "-S", "64k", "/")
    size = MiB + 1000
    src = put(cluster, workdir, "/f", size)
    lay = layout(cluster, "/f")
    ino = ino_of(cluster, "/f")
    victim = object_path(cluster.ost_dir(lay.objects[1][0]), lay.objects[1][1])
    assert os.path.exists(victim) and os.path.exists(victim + ".crc")
    try:
        tagged = bool(os.getxattr(victim, "user.loom.fid"))
    except OSError:
        tagged = False           # a backing file system without user xattrs
    cluster.down()
    os.unlink(victim)            # its checksum sidecar stays behind, describing data now gone

    (line,) = check_and_repair(cluster, "missing object")
    assert line.startswith("missing object: /f (ino %d): stripe 1: OST %d object %#x does not exist"
                           % (ino, lay.objects[1][0], lay.objects[1][1])), line
    assert "lost data" in line and "%d bytes" % (4 * 64 * KiB) in line, line
    assert os.path.getsize(victim) == 0
    assert not os.path.exists(victim + ".crc")
    if tagged:
        assert os.getxattr(victim, "user.loom.fid") == ("%d:1" % ino).encode()

    cluster.up()
    out = get(cluster, workdir, "/f")
    assert os.path.getsize(out) == size
    # stripe 1's units read as zeros, every other unit as written
    for _, off, n, k, _ in stripe_units(size, 64 * KiB, 4):
        want = bytes(n) if k == 1 else read_at(src, off, n)
        assert read_at(out, off, n) == want, "unit at %d (object %d)" % (off, k)


def test_orphan_objects_are_moved_to_lost_found(cluster, workdir):
    cluster.loom("setstripe", "-E", "-1", "-c", "1", "-i", "2", "/")
    src = put(cluster, workdir, "/keep", 300 * KiB)
    lay = layout(cluster, "/keep")
    ost = cluster.ost_dir(2)
    cluster.down()
    # a stray object well above the ids in use (with a sidecar), a misplaced copy of a live
    # object, and files that are not objects at all
    stray = object_path(ost, 0x1234)
    with open(stray, "wb") as f:
        f.write(b"stray data")
    with open(stray + ".crc", "wb") as f:
        f.write(b"\0" * 4)
    misplaced = os.path.join(ost, "O", "00", "%x" % lay.objects[0][1])
    shutil.copy(object_path(ost, lay.objects[0][1]), misplaced)
    notes = os.path.join(ost, "O", "00", "notes.txt")
    with open(notes, "w") as f:
        f.write("not an object\n")

    first = fsck_dir(cluster)
    assert first.rc == 1 and first.found == 2, first
    orphans = first.with_kind("orphan object")
    assert len(orphans) == 2, first
    assert any(l.startswith("orphan object: OST 2 object 0x1234 (10 bytes") and
               "a new file would have found its data" in l for l in orphans), first
    assert any("O/00/%x" % lay.objects[0][1] in l and "not where the OSS looks" in l for l in orphans), first
    assert os.path.exists(stray)

    fixed = fsck_dir(cluster, repair=True)
    assert fixed.rc == 0 and fixed.found == 2 and fixed.repaired == 2, fixed
    lost = os.path.join(ost, "lost+found")
    assert not os.path.exists(stray) and not os.path.exists(stray + ".crc")
    with open(os.path.join(lost, "1234"), "rb") as f:
        assert f.read() == b"stray data"
    assert os.path.exists(os.path.join(lost, "1234.crc"))
    assert not os.path.exists(misplaced)
    assert os.path.exists(notes), "fsck touched a file that is not an object"
    assert fsck_dir(cluster).found == 0

    cluster.up()
    assert sha256_file(get(cluster, workdir, "/keep")) == sha256_file(src)


def test_wrong_size_after_an_object_grew_on_disk(cluster, workdir):
    # The MDS never heard of bytes written beyond the size: put them straight into object 1
    # (beyond its checksummed blocks) while the cluster is down.
    cluster.loom("mkdir", "/d")
    cluster.loom("setstripe", "-E", "-1", "-c", "2", "-S", "64k", "/d")
    src = put(cluster, workdir, "/d/f", 100 * KiB)
    lay = layout(cluster, "/d/f")
    cluster.down()
    obj1 = object_path(cluster.ost_dir(lay.objects[1][0]), lay.objects[1][1])
    tail = b"the tail a crashed writer wrote"
    obj_off = 200000
    with open(obj1, "r+b") as f:
        f.seek(obj_off)
        f.write(tail)
    # object offset 200000 of object 1 is in its row 3: file unit 3*2+1, 200000 % 64K into it
    file_off = (3 * 2 + 1) * 64 * KiB + obj_off % (64 * KiB)
    end = file_off + len(tail)

    (line,) = check_and_repair(cluster, "wrong size")
    assert "/d/f" in line and "size %d, but its objects hold data up to %d" % (100 * KiB, end) in line, line

    cluster.up()
    out = get(cluster, workdir, "/d/f")
    assert os.path.getsize(out) == end
    assert read_at(out, 0, 100 * KiB) == read_at(src, 0, 100 * KiB)
    assert read_at(out, 100 * KiB, file_off - 100 * KiB) == bytes(file_off - 100 * KiB)
    assert read_at(out, file_off, len(tail)) == tail


def test_writer_killed_before_close(tools, cluster, workdir):
    # A real client writes through the OSSs (checksums and all) and is killed before its close
    # reports the size: the MDT says 0 bytes, the objects hold everything.
    cluster.loom("mkdir", "/crash")
    cluster.loom("setstripe", "-E", "-1", "-c", "3", "-S", "64k", "/crash")
    size = 2 * MiB + 777
    src = os.path.join(workdir, "src")
    digest = make_random_file(src, size)
    p = subprocess.Popen([tools["writer"], cluster.addr, src, "/crash/f"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=cluster.env)
    try:
        assert p.stdout.readline().strip() == "written", p.stderr.read()
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert cluster.loom("stat", "/crash/f").stdout.find("Size: 0 ") >= 0
    cluster.down()

    (line,) = check_and_repair(cluster, "wrong size")
    assert line.startswith("wrong size: /crash/f (ino ") and \
        "size 0, but its objects hold data up to %d" % size in line, line

    cluster.up()
    assert sha256_file(get(cluster, workdir, "/crash/f")) == digest
    assert "Size: %d " % size in cluster.loom("stat", "/crash/f").stdout


def test_link_counts_are_set_right(tools, cluster, workdir):
    cluster.loom("mkdir", "-p", "/d/sub1", "/d/sub2")
    cluster.loom("setstripe", "-E", "-1", "-c", "1", "-i", "0", "/")
    put(cluster, workdir, "/d/f", 70 * KiB)
    lay = layout(cluster, "/d/f")
    obj = object_path(cluster.ost_dir(0), lay.objects[0][1])
    cluster.down()
    ino_f = damage(tools, cluster, "nlink", "/d/f", 5)
    ino_d = damage(tools, cluster, "nlink", "/d", 9)

    first = fsck_dir(cluster)
    assert first.rc == 1 and first.found == 2, first
    assert "bad link count: /d/f (ino %d): file nlink 5, 1 entry names it" % ino_f in first.lines, first
    assert "bad link count: /d (ino %d): directory nlink 9, should be 2 + 2 subdirectories" % ino_d \
        in first.lines, first
    fixed = fsck_dir(cluster, repair=True)
    assert fixed.rc == 0 and fixed.repaired == 2, fixed
    assert fsck_dir(cluster).found == 0

    cluster.up()
    assert links_of(cluster, "/d/f") == 1
    assert links_of(cluster, "/d") == 4
    # With nlink 5 an rm would have left 4 links and leaked the objects; now they go.
    cluster.loom("rm", "/d/f")
    assert wait_until(lambda: not os.path.exists(obj), 60), "objects of a removed file leaked"


def test_disconnected_file_goes_to_lost_found(tools, cluster, workdir):
    cluster.loom("mkdir", "/d")
    src = put(cluster, workdir, "/d/f", 123 * KiB)
    cluster.down()
    ino = damage(tools, cluster, "drop-entry", "/d/f")

    first = fsck_dir(cluster)
    assert first.rc == 1, first
    assert first.with_kind("disconnected inode") == [
        "disconnected inode: file %d (nlink 1) has no entry in any directory and is not in the orphan list" % ino], first
    fixed = fsck_dir(cluster, repair=True)
    assert fixed.rc == 0 and fixed.repaired == fixed.found, fixed
    assert "linked as /lost+found/#%d" % ino in fixed.out, fixed
    assert fsck_dir(cluster).found == 0

    cluster.up()
    assert cluster.loom("ls", "/lost+found").stdout.split() == ["#%d" % ino]
    assert sha256_file(get(cluster, workdir, "/lost+found/#%d" % ino)) == sha256_file(src)
    assert cluster.loom("ls", "/d").stdout.split() == []
    cluster.loom("rm", "-r", "/d")     # its entry count is right again: rmdir works


@pytest.mark.allow_log(r"(WARN|ERROR): .*(OST[0-9a-f]{4}|127\.0\.0\.1:\d+).*(lost|refused|reach|closed)")
def test_mirrored_files_stale_copies_are_not_problems_and_a_missing_in_sync_copy_is_not_made_empty(cluster, workdir):
    """fsck knows mirrors: a stale copy (its OSS was away for a write) is the resync's, not a
    problem, whatever its object holds; a missing object of an in-sync copy is reported, and not
    made empty, which would read as zeros where the other copy holds the file's bytes."""
    cluster.loom("mkdir", "/m")
    cluster.loom("setstripe", "-N", "2", "-E", "-1", "-c", "1", "/m")
    src = put(cluster, workdir, "/m/clean", 2 * MiB + 5)
    put(cluster, workdir, "/m/stale", 3 * MiB)
    lay = layout_any(cluster, "/m/stale")
    # The second copy's OSS is away for a rewrite: it is stale, and stays so (the OSS never
    # comes back before fsck).
    second = lay[1]
    cluster.kill9(cluster.oss_name(second[0]))
    put(cluster, workdir, "/m/stale", 3 * MiB + 100)
    clean = layout_any(cluster, "/m/clean")
    cluster.down()
    r = fsck_dir(cluster)
    assert r.rc == 0 and r.found == 0 and r.lines == [], r
    # An in-sync copy's object goes missing: reported; --repair marks the copy stale (it makes
    # nothing empty) and the MDS copies it again from the other mirror.
    victim = object_path(cluster.ost_dir(clean[0][0]), clean[0][1])
    os.unlink(victim)
    (line,) = check_and_repair(cluster, "missing object")
    assert ("mirror 0 stripe 0: OST %d object %#x does not exist; %d bytes of the file were there"
            % (clean[0][0], clean[0][1], 2 * MiB + 5)) in line, line
    assert "marked stale" not in line
    assert not os.path.exists(victim), "fsck made an in-sync copy's object empty"
    cluster.up()
    assert open(get(cluster, workdir, "/m/clean"), "rb").read() == open(src, "rb").read()
    assert wait_until(lambda: "init,stale" not in cluster.loom("getstripe", "/m/clean").stdout, 60, 0.2)
    assert os.path.getsize(victim) == 2 * MiB + 5
    assert cluster.loom("mirror", "verify", "/m/clean").returncode == 0


@pytest.mark.allow_log(r"(WARN|ERROR): .*(OST[0-9a-f]{4}|127\.0\.0\.1:\d+).*(lost|refused|reach|reset|closed)",
                       r"WARN: erasure-coded file \d+: data object \d+ .*missed a write")
def test_erasure_coded_files_stale_objects_are_not_problems_and_a_missing_one_is_not_made_empty(cluster, workdir):
    """fsck knows erasure coding: a stale object (its OSS was away for a write) is the rebuild's,
    not a problem; a missing in-sync object is reported and marked stale (made empty it would be
    taken for zeros by the code), and the MDS makes it again from the others; the file's size
    comes from its data objects, not its parity."""
    cluster.loom("mkdir", "/e")
    cluster.loom("setstripe", "--ec", "2+2", "-E", "-1", "-S", "1M", "/e")
    src = put(cluster, workdir, "/e/clean", 5 * MiB + 5)
    put(cluster, workdir, "/e/stale", 3 * MiB)
    lay = layout_any(cluster, "/e/stale")
    cluster.kill9(cluster.oss_name(lay[0][0]))
    put(cluster, workdir, "/e/stale", 3 * MiB + 100)
    assert "init,stale" in cluster.loom("getstripe", "/e/stale").stdout
    clean = layout_any(cluster, "/e/clean")
    cluster.down()
    r = fsck_dir(cluster)
    assert r.rc == 0 and r.found == 0 and r.lines == [], r
    # A parity object goes missing: reported, marked stale by --repair, not made empty.
    victim = object_path(cluster.ost_dir(clean[3][0]), clean[3][1])
    assert os.path.getsize(victim) == 3 * MiB
    os.unlink(victim)
    (line,) = check_and_repair(cluster, "missing object")
    assert ("parity object 3: OST %d object %#x does not exist; %d bytes of it were there"
            % (clean[3][0], clean[3][1], 3 * MiB)) in line, line
    assert not os.path.exists(victim), "fsck made an erasure-coded object empty"
    cluster.up()
    assert open(get(cluster, workdir, "/e/clean"), "rb").read() == open(src, "rb").read()
    assert wait_until(lambda: "stale" not in cluster.loom("getstripe", "/e/clean").stdout, 60, 0.2)
    assert os.path.getsize(victim) == 3 * MiB
    assert cluster.loom("ec", "verify", "/e/clean").returncode == 0

"""The admin's day with a failed disk: an OSS dead for good (killed, its OST directory deleted) is
shown at once as an inactive device and avoided by new files; a new empty OST formatted with
`loom-oss --format --index N --replace` takes its index, the lost objects read as EIO (never zeros)
while the other stripes of the same files read right, `loom fsck` lists them as lost objects; and
an OST drained with `loom migrate` is retired with `loom ost remove` (EBUSY before, with the
count), after which df no longer lists it and it is refused if it comes back.

Every command that must answer promptly runs with a timeout far below the recovery window (100
s): one that waits for the dead OSS fails the test on its own."""

import errno
import mmap
import os
import re
import shutil
import signal
import subprocess

from loomutil import (LOOM, MDS_BIN, OSS_BIN, MiB, OST_REGISTERED, parse_any_getstripe, pid_alive, pings,
                      read, second_mount, wait_until)

PROMPT = 30          # seconds: well below the 100 s recovery window a hang would take
STRIPE = 64 * 1024
DEAD = 2             # the OST whose disk fails
SIZES = [MiB + 17, 4 * STRIPE, 3 * STRIPE + 5, 2 * MiB]   # every file has data on every OST


def osts_of(cluster, path):
    return [idx for idx, _ in parse_any_getstripe(cluster.loom("getstripe", path, timeout=PROMPT).stdout).objects]


def df_lines(cluster):
    return cluster.loom("df", timeout=PROMPT).stdout.splitlines()


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=PROMPT, **kw)


def content(k, size):
    return bytes((k * 7 + i * 13) & 0xFF for i in range(251)) * (size // 251 + 1)


def pread_direct(path, off, length):
    """length bytes at off read with O_DIRECT (no page cache of this mount); the OSError's errno
    on failure. off and length are multiples of 4 KiB."""
    buf = mmap.mmap(-1, length)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        n = os.preadv(fd, [buf], off)
        return bytes(buf[:n])
    finally:
        os.close(fd)
        buf.close()


def errno_of_read(path, off, length):
    try:
        pread_direct(path, off, length)
    except OSError as e:
        return e.errno
    return 0


def stripe_of(cluster, path, ost):
    objs = osts_of(cluster, path)
    return objs.index(ost), len(objs)


def write_files(mnt):
    os.mkdir(os.path.join(mnt, "d"))
    paths = []
    for k, size in enumerate(SIZES):
        p = os.path.join(mnt, "d", "f%d" % k)
        with open(p, "wb") as f:
            f.write(content(k, size)[:size])
        paths.append(p)
    return paths


def kill_for_good(cluster, idx):
    d = cluster.ost_dir(idx)
    cluster.kill9(cluster.oss_name(idx))
    shutil.rmtree(d)
    return d


def check_reads(cluster, view, paths):
    """Through mount `view`: each file's stripe on the replaced OST answers EIO, every other stripe
    reads its bytes."""
    for k, size in enumerate(SIZES):
        p = os.path.join(view, "d", "f%d" % k)
        lost, count = stripe_of(cluster, "/d/f%d" % k, DEAD)
        want = content(k, size)[:size]
        for s in range(count):
            off = s * STRIPE
            if off >= size:
                continue
            if s == lost:
                assert errno_of_read(p, off, STRIPE) == errno.EIO, (p, s)
            else:
                assert pread_direct(p, off, STRIPE) == want[off:off + STRIPE], (p, s)
        # A read of the whole file fails, as cat would: EIO, never a file with zeros in it.
        r = subprocess.run(["cat", p], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=PROMPT)
        assert r.returncode != 0 and "Input/output error" in r.stderr, r.stderr


def test_failed_disk_replaced(cluster):
    cluster.allow_log(r"the MDS refused .*ost%d" % DEAD)
    mnt = cluster.mount()
    cluster.loom("setstripe", "-E", "-1", "-c", "-1", "-S", "64k", "/")
    paths = write_files(mnt)
    for k in range(len(SIZES)):
        assert sorted(osts_of(cluster, "/d/f%d" % k)) == [0, 1, 2, 3]
    ost_dir = kill_for_good(cluster, DEAD)

    # At once, without waiting for it: df shows it inactive, as lfs df does.
    assert wait_until(lambda: "OST%04x             : inactive device" % DEAD in df_lines(cluster), PROMPT)
    p = cluster.loom("df", timeout=PROMPT)
    assert "waiting for it" not in p.stderr, p.stderr
    # Its files answer stat, ls -l and getstripe promptly, with the size the MDS knows.
    for k, size in enumerate(SIZES):
        assert run(["stat", "-c", "%s", paths[k]]).stdout == "%d\n" % size
        assert "Size: %d " % size in cluster.loom("stat", "/d/f%d" % k, timeout=PROMPT).stdout
    assert run(["ls", "-l", os.path.join(mnt, "d")]).returncode == 0
    # New files avoid it.
    for k in range(6):
        cluster.loom("setstripe", "-c", "-1", "/new%d" % k, timeout=PROMPT)
        assert sorted(osts_of(cluster, "/new%d" % k)) == [0, 1, 3]
    assert cluster.loom("ost", "deactivate", DEAD, timeout=PROMPT).returncode == 0
    assert cluster.loom("ost", "activate", DEAD, timeout=PROMPT).returncode == 0

    # An MDS restarted meanwhile counts every OST it knows as active until the expiry period
    # ends; once the living OSSs registered again, new files go to them only.
    cluster.kill9("mds")
    log_path = os.path.join(cluster.dir, "log", "mds-by-hand.log")
    with open(log_path, "a") as log:
        mds = subprocess.Popen([MDS_BIN, "--mdt", os.path.join(cluster.dir, "mdt"), "--listen", cluster.addr,
                                "--key", cluster.key], stdout=log, stderr=log)
    try:
        assert wait_until(lambda: pings(cluster.mds_host, cluster.mds_port), PROMPT, 0.1)
        assert wait_until(lambda: len(OST_REGISTERED.findall(read(log_path))) >= 3, PROMPT, 0.1)
        for k in range(6):
            cluster.loom("setstripe", "-c", "-1", "/restarted%d" % k, timeout=PROMPT)
            assert sorted(osts_of(cluster, "/restarted%d" % k)) == [0, 1, 3]
        w = os.path.join(mnt, "written-after-restart")
        run(["sh", "-c", "head -c 300000 /dev/urandom > %s" % w]).check_returncode()
    finally:
        mds.send_signal(signal.SIGTERM)
        mds.wait(timeout=60)

    # A new empty OST claiming the index without --replace is refused, on both sides.
    name = "oss" + os.path.basename(ost_dir)[3:]   # its directory is gone: named by it
    restarted_at = len(cluster.read_log("mds"))
    p = cluster.cluster_cmd("up", "--osts", "4", "--mount", mnt, check=False)
    assert p.returncode != 0
    # At once, not after waiting for an OST that cannot come.
    assert "loom cluster: %s exited (status 1) before its OST came up; see %s/log/%s.log" % (
        name, cluster.dir, name) in p.stderr, p.stderr
    assert wait_until(lambda: "format this one with --index %d --replace" % DEAD in cluster.read_log("oss%d" % DEAD), PROMPT)
    assert re.search(r"refused OST \S+ from \S+ \(wants index %d\): its index belongs to another OST" % DEAD,
                     cluster.read_log("mds")), cluster.read_log("mds")[-2000:]
    shutil.rmtree(ost_dir)

    # With --replace it takes the index. The MDS was just started: an OST it has not heard from
    # yet may still come back, so it would wait out the OST's expiry period, unless the index is
    # deactivated first (Lustre's procedure); that stays in force until it is activated.
    p = run([OSS_BIN, "--format", "--fsname", "loom", "--ost", ost_dir, "--index", str(DEAD), "--replace"])
    assert p.returncode == 0 and "to replace the lost OST%04x" % DEAD in p.stdout, p.stdout + p.stderr
    assert cluster.loom("ost", "deactivate", DEAD, timeout=PROMPT).returncode == 0
    cluster.up()
    assert "does not give up OST%04x yet" % DEAD not in cluster.read_log("oss%d" % DEAD)
    assert cluster.loom("ost", "activate", DEAD, timeout=PROMPT).returncode == 0
    # (The living OSSs find the MDS again within a second or so: until then it has no objects
    # of theirs to hand out, and creates stripe over fewer OSTs.)
    assert wait_until(lambda: len(OST_REGISTERED.findall(cluster.read_log("mds")[restarted_at:])) >= 3, PROMPT, 0.1)
    assert re.search(r"OST%04x replaced: \S+ at \S+ takes the index of \S+; objects below id \d+ were on "
                     r"the old OST and are lost" % DEAD, cluster.read_log("mds"))
    assert wait_until(lambda: any(x.startswith("loom-OST%04x_UUID" % DEAD) for x in df_lines(cluster)), PROMPT)
    assert re.search(r"^lost_below=\d+$", read(os.path.join(ost_dir, "ost.conf")), re.M)

    # Lost stripes: EIO; the rest of the same files intact; both clients alike.
    check_reads(cluster, mnt, paths)
    with second_mount(cluster) as view:
        check_reads(cluster, view, paths)
        # New files stripe on the new OST at once, and read back whole from the other client.
        data = os.urandom(5 * STRIPE + 3)
        cluster.loom("setstripe", "-c", "-1", "/fresh", timeout=PROMPT)
        assert sorted(osts_of(cluster, "/fresh")) == [0, 1, 2, 3]
        with open(os.path.join(mnt, "fresh"), "wb") as f:
            f.write(data)
        assert pread_direct(os.path.join(view, "fresh"), 0, 6 * STRIPE) == data
        # A write into a lost object is refused too (it would make the rest of it read as zeros).
        lost, _ = stripe_of(cluster, "/d/f0", DEAD)
        fd = os.open(os.path.join(view, "d", "f0"), os.O_WRONLY)
        try:
            os.pwrite(fd, b"x", lost * STRIPE)
            rc = os.fsync(fd) or 0
        except OSError as e:
            rc = e.errno
        finally:
            try:
                os.close(fd)
            except OSError as e:
                rc = rc or e.errno
        assert rc == errno.EIO

    # fsck lists each file's lost object; --repair makes them empty, as it does missing ones.
    cluster.down()
    p = subprocess.run([LOOM, "fsck", "--dir", cluster.dir],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    lost_lines = [x for x in p.stdout.splitlines() if x.startswith("lost object: ")]
    assert len(lost_lines) == len(SIZES), p.stdout
    for k in range(len(SIZES)):
        assert any(re.match(r"lost object: /d/f%d \(ino \d+\): stripe \d+: OST %d object 0x[0-9a-f]+ was lost "
                            r"with the OST that OST%04x replaced" % (k, DEAD, DEAD), x) for x in lost_lines), p.stdout
    p = subprocess.run([LOOM, "fsck", "--dir", cluster.dir, "--repair"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    cluster.up()
    lost, _ = stripe_of(cluster, "/d/f0", DEAD)
    out = cluster.loom("cat", "/d/f0", text=False).stdout
    assert out[lost * STRIPE:(lost + 1) * STRIPE] == bytes(STRIPE)


def test_remove_a_drained_ost(cluster):
    gone = 3
    mnt = cluster.mount()
    cluster.loom("setstripe", "-E", "-1", "-c", "-1", "-S", "64k", "/")
    paths = write_files(mnt)

    # Files still have objects there: refused, with the count and the way to drain it.
    p = cluster.loom("ost", "remove", gone, check=False, timeout=PROMPT)
    assert p.returncode == 1
    assert p.stderr == ("loom ost remove: OST%04x: Device or resource busy: 4 files still have 4 objects there; "
                        "drain it first: loom find MOUNT --ost %d -t f | xargs loom migrate (or remove it with "
                        "--force: their objects there are lost)\n" % (gone, gone)), p.stderr
    assert cluster.loom("ost", "remove", "--dryrun", gone).stdout == \
        "OST%04x: 4 files have 4 objects there: drain it before removing it\n" % gone
    assert any(x.startswith("loom-OST%04x_UUID" % gone) for x in df_lines(cluster))

    # Drained: deactivated, then every file on it migrated off.
    cluster.loom("ost", "deactivate", gone)
    on_it = cluster.loom("find", mnt, "--ost", gone, "-t", "f").stdout.split()
    assert sorted(on_it) == sorted(paths)
    cluster.loom("migrate", "-q", *on_it)
    assert cluster.loom("find", mnt, "--ost", gone, "-t", "f").stdout == ""
    assert cluster.loom("ost", "remove", gone).stdout == "OST%04x removed: its index is retired\n" % gone
    assert not any("OST%04x" % gone in x for x in df_lines(cluster)), df_lines(cluster)
    p = cluster.loom("ost", "remove", gone, check=False)
    assert p.returncode == 1 and "no OST has index %d" % gone in p.stderr
    p = cluster.loom("ost", "activate", gone, check=False)
    assert p.returncode == 1 and "no OST has index %d" % gone in p.stderr

    # Its OSS, still running, is refused at its next heartbeat's registration and exits.
    pid = cluster.pid("oss%d" % gone)
    cluster.expected.discard("oss%d" % gone)
    cluster.allow_log(r"the MDS refused .*removed from the file system")
    assert wait_until(lambda: "this OST was removed from the file system" in cluster.read_log("oss%d" % gone), PROMPT)
    assert wait_until(lambda: not pid_alive(pid), PROMPT)

    # The data is all there, from both clients; new files use the OSTs that are left.
    with second_mount(cluster) as view:
        for view_root in (mnt, view):
            for k, size in enumerate(SIZES):
                got = pread_direct(os.path.join(view_root, "d", "f%d" % k), 0, (size + 4095) // 4096 * 4096)
                assert got == content(k, size)[:size]
        cluster.loom("setstripe", "-c", "-1", "/after")
        assert sorted(osts_of(cluster, "/after")) == [0, 1, 2]

    # A new OST does not get the retired index.
    new_dir = os.path.join(cluster.dir, "ost-new")
    run([OSS_BIN, "--format", "--fsname", "loom", "--ost", new_dir]).check_returncode()
    log_path = os.path.join(cluster.dir, "log", "oss-new.log")
    with open(log_path, "a") as log:
        oss = subprocess.Popen([OSS_BIN, "--ost", new_dir, "--mds", cluster.addr, "--listen", "127.0.0.1:0",
                                "--key", cluster.key], stdout=log, stderr=log)
    try:
        assert wait_until(lambda: "registered with the MDS" in read(log_path), PROMPT)
        assert re.search(r"^index=4$", read(os.path.join(new_dir, "ost.conf")), re.M)
        assert wait_until(lambda: any(x.startswith("loom-OST0004_UUID") for x in df_lines(cluster)), PROMPT)
    finally:
        oss.send_signal(signal.SIGTERM)
        oss.wait(timeout=60)


def test_forced_removal_loses_its_objects(cluster_factory):
    cluster = cluster_factory(osts=3)
    gone = 2
    mnt = cluster.mount()
    cluster.loom("setstripe", "-E", "-1", "-c", "-1", "-S", "64k", "/")
    data = bytes(range(256)) * (3 * STRIPE // 256)
    with open(os.path.join(mnt, "f"), "wb") as f:
        f.write(data)
    lost, count = stripe_of(cluster, "/f", gone)
    assert count == 3
    assert cluster.loom("ost", "remove", gone, check=False).returncode == 1
    cluster.expected.discard("oss%d" % gone)
    cluster.allow_log(r"the MDS refused .*removed from the file system")
    p = cluster.loom("ost", "remove", "--force", gone, timeout=PROMPT)
    assert p.stdout == "OST%04x removed: 1 object of 1 file there is lost\n" % gone, p.stdout
    assert not any("OST%04x" % gone in x for x in df_lines(cluster))
    with second_mount(cluster) as view:
        p = os.path.join(view, "f")
        for s in range(count):
            if s == lost:
                assert errno_of_read(p, s * STRIPE, STRIPE) == errno.EIO
            else:
                assert pread_direct(p, s * STRIPE, STRIPE) == data[s * STRIPE:(s + 1) * STRIPE]
    assert "removed: 1 objects of 1 files" not in cluster.read_log("mds")
    assert re.search(r"OST%04x removed by \S+ \(forced\): 1 objects of 1 files there are lost" % gone,
                     cluster.read_log("mds"))

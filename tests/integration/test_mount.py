"""Mounting: mount -t loom, an fstab line, umount, options, cluster up --mount and down."""
import errno
import os
import shutil
import subprocess
import tempfile

import pytest

from loomutil import BUILD

LOOM_MOUNT = os.path.join(BUILD, "src", "fuse", "loom-mount")



def mounts():
    """{mount point: (source, type, options)} from /proc/self/mounts."""
    out = {}
    with open("/proc/self/mounts") as f:
        for line in f:
            src, mnt, typ, opts = line.split()[:4]
            out[mnt] = (src, typ, opts.split(","))
    return out


def spec_of(cluster):
    return "%s:/loom" % cluster.addr


def key_opt(cluster):
    return "key=" + cluster.key


@pytest.fixture
def mnt_dir():
    d = tempfile.mkdtemp(prefix="loom-mnt-")
    try:
        yield d
    finally:
        if d in mounts():
            subprocess.run(["umount", "-l", d])
        shutil.rmtree(d, ignore_errors=True)


def test_mount_t_loom_then_umount(cluster, mnt_dir):
    subprocess.run(["mount", "-t", "loom", "-o", key_opt(cluster), spec_of(cluster), mnt_dir], check=True,
                   timeout=60)
    src, typ, _ = mounts()[mnt_dir]
    assert (src, typ) == (spec_of(cluster), "fuse.loom")
    with open(os.path.join(mnt_dir, "hello"), "w") as f:
        f.write("through mount -t loom\n")
    assert cluster.loom("cat", "/hello").stdout == "through mount -t loom\n"
    subprocess.run(["umount", mnt_dir], check=True, timeout=60)
    assert mnt_dir not in mounts()
    # The daemon leaves once unmounted: nothing serves the directory any more.
    assert os.listdir(mnt_dir) == []


def test_fstab_line_mounts_with_mount_dir(cluster, mnt_dir):
    line = "%s %s loom defaults,_netdev,noatime,%s 0 0\n" % (spec_of(cluster), mnt_dir, key_opt(cluster))
    with open("/etc/fstab") as f:
        saved = f.read()
    try:
        with open("/etc/fstab", "a") as f:
            f.write(line)
        subprocess.run(["mount", mnt_dir], check=True, timeout=60)
        src, typ, opts = mounts()[mnt_dir]
        assert typ == "fuse.loom" and "noatime" in opts
        os.mkdir(os.path.join(mnt_dir, "from-fstab"))
        assert "from-fstab" in cluster.loom("ls", "/").stdout.split()
    finally:
        with open("/etc/fstab", "w") as f:
            f.write(saved)
        subprocess.run(["umount", mnt_dir], timeout=60)


def test_ro_mount_refuses_writes(cluster, mnt_dir):
    cluster.loom("mkdir", "/d")
    subprocess.run(["mount", "-t", "loom", "-o", "ro," + key_opt(cluster), spec_of(cluster), mnt_dir], check=True,
                   timeout=60)
    try:
        assert "ro" in mounts()[mnt_dir][2]
        assert os.listdir(mnt_dir) == ["d"]
        with pytest.raises(OSError) as e:
            open(os.path.join(mnt_dir, "x"), "w")
        assert e.value.errno == errno.EROFS
    finally:
        subprocess.run(["umount", mnt_dir], timeout=60)


def test_mount_of_another_fsname_fails_clearly(cluster, mnt_dir):
    p = subprocess.run(["mount", "-t", "loom", "-o", key_opt(cluster), "%s:/other" % cluster.addr, mnt_dir],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 32
    assert "the MDS at %s serves file system loom, not other" % cluster.addr in p.stderr, p.stderr
    assert mnt_dir not in mounts()


def test_mount_returns_with_its_output_captured(cluster, mnt_dir):
    # `out=$(mount ...)` reads until the helper's stdout and stderr close: the daemon that stays
    # behind must not hold them open, or the caller waits forever (here: until the timeout).
    p = subprocess.run(["mount", "-t", "loom", "-o", key_opt(cluster), spec_of(cluster), mnt_dir],
                       capture_output=True, text=True, timeout=60)
    try:
        assert p.returncode == 0, p.stderr
        assert mounts()[mnt_dir][1] == "fuse.loom"
        assert os.listdir(mnt_dir) == []
    finally:
        subprocess.run(["umount", mnt_dir], timeout=60)


def test_mds_restarted_right_after_mount_returns_keeps_the_mount(cluster, mnt_dir):
    # Once the mount helper has returned, the mount is there to stay: an MDS that restarts at
    # once (a crash, a failover) is waited for, never a mount that vanishes on its own. The
    # daemon once connected a second time after going to the background, and unmounted when
    # that failed (in one round of 20 to 30 here). loom-mount itself, as `loom cluster` runs it:
    # mount(8) adds enough time after it to hide the window.
    for i in range(20):
        subprocess.run([LOOM_MOUNT, spec_of(cluster), mnt_dir, "-o", key_opt(cluster)], check=True, timeout=60)
        cluster.kill9("mds")
        cluster.up()
        assert mnt_dir in mounts(), "the mount vanished after the MDS restarted (round %d)" % i
        with open(os.path.join(mnt_dir, "f%d" % i), "w") as f:
            f.write("round %d" % i)
        assert cluster.loom("cat", "/f%d" % i).stdout == "round %d" % i
        subprocess.run(["umount", mnt_dir], check=True, timeout=60)


def test_no_default_permissions_is_refused(cluster, mnt_dir):
    # Without the kernel's checks nothing would check who opens a fifo or a device node (the
    # kernel opens them without asking the file system): refused, saying why.
    p = subprocess.run(["mount", "-t", "loom", "-o", key_opt(cluster) + ",no_default_permissions",
                        spec_of(cluster), mnt_dir], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "no_default_permissions is not supported" in p.stderr and "fifos" in p.stderr, p.stderr
    assert mnt_dir not in mounts()


def test_mount_with_nothing_listening_fails_clearly(mnt_dir):
    p = subprocess.run(["mount", "-t", "loom", "127.0.0.1:1:/loom", mnt_dir], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode != 0
    assert "cannot reach" in p.stderr
    assert mnt_dir not in mounts()


def test_mount_fake_option_does_nothing(cluster, mnt_dir):
    # mount -f: mount(8) asks the helper to do everything but the mount itself.
    subprocess.run(["mount", "-f", "-t", "loom", "-o", key_opt(cluster), spec_of(cluster), mnt_dir], check=True,
                   timeout=60)
    assert mnt_dir not in mounts()


def test_cluster_up_mount_and_down_unmounts(cluster_factory, tmp_path):
    mnt = str(tmp_path / "m")
    c = cluster_factory(osts=2)
    c.cluster_cmd("up", "--mount", mnt)   # on a running cluster: mounts, starts nothing new
    assert mounts()[mnt][1] == "fuse.loom"
    with open(os.path.join(mnt, "f"), "w") as f:
        f.write("x")
    assert "mounted" in c.cluster_cmd("status").stdout
    c.down()
    assert mnt not in mounts()


def test_cluster_up_again_keeps_the_mount_for_down(cluster_factory, tmp_path):
    # Servers restarted under a mounted file system (`up` without --mount after a crash): the
    # mount rides through, and `down` still unmounts it.
    mnt = str(tmp_path / "m")
    c = cluster_factory(osts=2)
    c.cluster_cmd("up", "--mount", mnt)
    c.kill9("mds")
    c.cluster_cmd("up")
    assert mounts()[mnt][1] == "fuse.loom"
    with open(os.path.join(mnt, "g"), "w") as f:
        f.write("after the restart")
    assert "mounted" in c.cluster_cmd("status").stdout
    c.down()
    assert mnt not in mounts(), "`cluster down` left the mount behind after an `up` without --mount"

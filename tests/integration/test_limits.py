"""A full OST, and root squashing: clear errors, nothing already written lost."""

import errno
import hashlib
import os
import shutil
import subprocess
import tempfile

import pytest

from loomutil import MiB, wait_until

OST_SIZE = 24 * MiB
BUILD = os.path.abspath(os.environ.get("LOOM_BUILD") or
                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build"))
MDS_BIN = os.path.join(BUILD, "src", "mds", "loom-mds")


def mounted(path):
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture
def small_ost_cluster(cluster_factory):
    """A one-OST cluster whose OST lives on a 24 MiB tmpfs, mounted on DIR/mnt."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    c = cluster_factory(osts=1, start=False)
    ost = os.path.join(c.dir, "ost0")
    os.makedirs(ost)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % OST_SIZE, "tmpfs", ost], check=True)
    c.mnt = os.path.join(c.dir, "mnt")
    try:
        c.up()
        c.cluster_cmd("up", "--mount", c.mnt)
        yield c
    finally:
        c.down()
        subprocess.run(["umount", "-l", ost])


def test_full_ost_fails_the_write_with_enospc_and_keeps_what_was_written(small_ost_cluster):
    c = small_ost_cluster
    first = os.path.join(c.mnt, "first")
    with open(first, "wb") as f:
        f.write(os.urandom(6 * MiB))
    first_sum = sha(first)

    big = os.path.join(c.mnt, "big")
    written = 0
    with pytest.raises(OSError) as e:
        with open(big, "wb") as f:
            chunk = os.urandom(MiB)
            for _ in range(2 * OST_SIZE // MiB):
                f.write(chunk)
                f.flush()
                written += len(chunk)
            os.fsync(f.fileno())
    assert e.value.errno == errno.ENOSPC, "a write to a full OST failed with %r, not ENOSPC" % e.value
    assert written < OST_SIZE

    # What was written before stays; the failed file holds no more than the OST could take.
    subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], check=False)
    assert sha(first) == first_sum, "a full OST damaged a file written before"
    assert os.path.getsize(big) <= OST_SIZE

    # Freeing space makes writes work again.
    os.unlink(big)
    again = os.path.join(c.mnt, "again")

    def write_again():
        try:
            with open(again, "wb") as f:
                f.write(os.urandom(4 * MiB))
                os.fsync(f.fileno())
            return True
        except OSError as err:
            if err.errno != errno.ENOSPC:
                raise
            return False   # the objects of `big` are destroyed in the background

    assert wait_until(write_again, 30, 0.5), "writes still fail after the big file was removed"
    assert sha(first) == first_sum


def test_root_squash_mount_makes_root_nobody(cluster_factory, tmp_path):
    c = cluster_factory(osts=2)
    plain, squashed = str(tmp_path / "plain"), str(tmp_path / "squashed")
    os.chmod(str(tmp_path), 0o755)
    c.cluster_cmd("up", "--mount", plain)
    os.mkdir(squashed)
    subprocess.run(["mount", "-t", "loom", "-o", "root_squash,key=" + c.key, "%s:/loom" % c.addr, squashed],
                   check=True, timeout=60)
    try:
        os.mkdir(os.path.join(plain, "pub"))
        os.chmod(os.path.join(plain, "pub"), 0o1777)
        os.mkdir(os.path.join(plain, "private"), 0o700)
        with open(os.path.join(plain, "private", "secret"), "w") as f:
            f.write("root only\n")

        # On the squashed mount, root is nobody: the MDS refuses what nobody may not do...
        with pytest.raises(PermissionError):
            os.listdir(os.path.join(squashed, "private"))
        with pytest.raises(PermissionError):
            open(os.path.join(squashed, "private", "secret")).read()
        with pytest.raises(PermissionError):
            os.mkdir(os.path.join(squashed, "rootdir"))      # / is root's, 0755
        # ... and what it creates belongs to nobody.
        with open(os.path.join(squashed, "pub", "mine"), "w") as f:
            f.write("x")
        st = os.stat(os.path.join(plain, "pub", "mine"))
        assert (st.st_uid, st.st_gid) == (65534, 65534), "a squashed root created a file as %d:%d" % (st.st_uid, st.st_gid)
        # The plain mount's root is still root.
        assert open(os.path.join(plain, "private", "secret")).read() == "root only\n"
    finally:
        subprocess.run(["umount", "-l", squashed])


def test_mds_root_squash_applies_to_every_client(cluster, workdir):
    cluster.loom("mkdir", "/d")
    cluster.kill9("mds")
    log = open(os.path.join(cluster.dir, "log", "mds-squash.log"), "w")
    p = subprocess.Popen([MDS_BIN, "--mdt", os.path.join(cluster.dir, "mdt"), "--listen", cluster.addr,
                          "--key", cluster.key, "--root-squash"], stdout=log, stderr=log)
    try:
        assert wait_until(lambda: cluster.loom("ls", "/d", check=False).returncode == 0, 30, 0.1), \
            "the MDS started by hand does not serve"
        r = cluster.loom("mkdir", "/d/x", check=False)
        assert r.returncode != 0 and "Permission denied" in r.stderr, \
            "root made a directory through an MDS with --root-squash: %r" % (r.stdout + r.stderr)
        assert "x" not in cluster.loom("ls", "/d").stdout.split()
    finally:
        p.terminate()
        p.wait(timeout=30)
        log.close()
    cluster.restart()
    cluster.loom("mkdir", "/d/x")     # without it, root is root again

"""MDS addresses as Lustre admins write them: names from /etc/hosts, failover lists (',' and
Lustre's NIDs with ':'), the fsname after ':/' checked, other LNet networks and bad addresses
refused with what to do, a second mount over a mount refused, and remount.

The test MDS listens on a random port of 127.0.0.1, so the NID forms carry one (HOST@tcp:PORT);
Lustre's portless HOST@tcp (the default port, 9900) is covered by tests/unit/test_mdsaddr.c. A
dead failover address is 127.0.0.9 at the MDS's port: nothing listens there.
"""
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile

import pytest

from loomutil import BUILD, LOOM, MDS_BIN, is_mounted, mount_daemon_pids, pings, read, wait_until

LOOM_MOUNT = os.path.join(BUILD, "src", "fuse", "loom-mount")
MOUNT_HELPER = os.path.join(BUILD, "src", "fuse", "mount.loom")
DEAD = "127.0.0.9"


def gai_error(host):
    """What getaddrinfo says of host here (as loom's messages quote it)."""
    try:
        socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror as e:
        return e.strerror
    pytest.skip("%s resolves on this machine" % host)


def source_of(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        for line in f:
            src, mnt, typ = line.split()[:3]
            if mnt == path and typ == "fuse.loom":
                return src
    return None


@pytest.fixture
def fs(cluster_factory):
    return cluster_factory(osts=2)


@pytest.fixture
def mnt_dir():
    d = tempfile.mkdtemp(prefix="loom-addr-")
    try:
        yield d
    finally:
        for _ in range(3):   # a test that failed may leave a mount stacked on another
            if not is_mounted(d):
                break
            if subprocess.run(["umount", d], capture_output=True, timeout=60).returncode != 0:
                subprocess.run(["umount", "-l", d], capture_output=True, timeout=60)
        shutil.rmtree(d, ignore_errors=True)


def ours(link):
    """Whether mount(8)'s helper at link is this build's mount.loom (another checkout's session on
    this machine may have made the link)."""
    return os.path.exists(link) and os.path.realpath(link) == os.path.realpath(MOUNT_HELPER)


def mount_t_loom(spec, mnt, opts=None):
    """The command of `mount -t loom [-o OPTS] SPEC MNT`: mount(8) when it runs this build's helper,
    else the helper itself with the arguments mount(8) would give it."""
    o = ["-o", opts] if opts else []
    if ours("/sbin/mount.loom"):
        return ["mount", "-t", "loom"] + o + [spec, mnt]
    return [MOUNT_HELPER, spec, mnt] + o


def mount(cluster, spec, mnt, *opts):
    """`mount -t loom -o key=...[,OPTS] SPEC MNT`."""
    o = ",".join(("key=" + cluster.key,) + opts)
    return subprocess.run(mount_t_loom(spec, mnt, o), capture_output=True, text=True, timeout=120)


def mount_bare(spec, mnt):
    """`mount -t loom SPEC MNT`, no options."""
    return subprocess.run(mount_t_loom(spec, mnt), capture_output=True, text=True, timeout=60)


def remount(mnt, opts):
    """`mount -o remount,OPTS MNT`: mount(8) runs mount.fuse.loom for a mounted Loom file system."""
    if ours("/sbin/mount.fuse.loom"):
        cmd = ["mount", "-o", "remount," + opts, mnt]
    else:
        cmd = [MOUNT_HELPER, source_of(mnt), mnt, "-o", "remount," + opts, "-t", "fuse.loom"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)


def put_data(cluster, name, size=3 * 1024 * 1024 + 17):
    data = os.urandom(size)
    local = os.path.join(cluster.dir, name + ".src")
    with open(local, "wb") as f:
        f.write(data)
    cluster.loom("put", local, "/" + name)
    return hashlib.sha256(data).hexdigest()


def sha_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def mounted_reads(cluster, spec, mnt, name, digest):
    p = mount(cluster, spec, mnt)
    assert p.returncode == 0, "mount -t loom %s failed (%d): %s" % (spec, p.returncode, p.stderr)
    try:
        assert source_of(mnt) == spec
        assert sha_of(os.path.join(mnt, name)) == digest
        # The tool finds the MDS from the mount's source, whatever its form.
        p = subprocess.run([LOOM, "df", mnt], capture_output=True, text=True, env=no_fs_env(cluster),
                           timeout=120)
        assert p.returncode == 0 and "loom-MDT0000_UUID" in p.stdout, p.stderr
        p = subprocess.run([LOOM, "getstripe", "-c", os.path.join(mnt, name)], capture_output=True,
                           text=True, env=no_fs_env(cluster), timeout=120)
        assert p.returncode == 0 and p.stdout.strip().isdigit(), p.stderr
    finally:
        subprocess.run(["umount", mnt], check=True, timeout=60)


def no_fs_env(cluster):
    env = dict(cluster.env)
    env.pop("LOOM_FS", None)
    env["LOOM_CONFIG"] = os.path.join(cluster.dir, "no-such.conf")
    return env


# ---- forms that mount -------------------------------------------------------------------------


def test_a_name_from_etc_hosts(fs, mnt_dir):
    digest = put_data(fs, "f")
    mounted_reads(fs, "localhost:%d:/loom" % fs.mds_port, mnt_dir, "f", digest)


def test_nids_with_a_port(fs, mnt_dir):
    digest = put_data(fs, "f")
    mounted_reads(fs, "127.0.0.1@tcp:%d:/loom" % fs.mds_port, mnt_dir, "f", digest)
    # Lustre's numbered tcp networks are TCP too.
    mounted_reads(fs, "127.0.0.1@tcp1:%d:/loom" % fs.mds_port, mnt_dir, "f", digest)


def test_failover_list_whose_first_address_is_dead(fs, mnt_dir):
    digest = put_data(fs, "f")
    P = fs.mds_port
    for spec in ("%s:%d,127.0.0.1:%d:/loom" % (DEAD, P, P),
                 "%s@tcp:%d,127.0.0.1@tcp:%d:/loom" % (DEAD, P, P),
                 "%s@tcp:%d:127.0.0.1@tcp:%d:/loom" % (DEAD, P, P),     # Lustre's ':' between NIDs
                 "no-such-host.invalid:%d,localhost:%d:/loom" % (P, P)):
        mounted_reads(fs, spec, mnt_dir, "f", digest)


def test_failover_list_with_the_live_mds_first(fs, mnt_dir):
    digest = put_data(fs, "f")
    P = fs.mds_port
    mounted_reads(fs, "127.0.0.1:%d,%s:%d:/loom" % (P, DEAD, P), mnt_dir, "f", digest)
    mounted_reads(fs, "127.0.0.1@tcp:%d:%s@tcp:%d:/loom" % (P, DEAD, P), mnt_dir, "f", digest)


def test_mds_failing_over_to_the_second_address(fs, mnt_dir):
    # The MDS moves (a failover pair): the mount reconnects to the next address of its list, opens
    # its files again there, and reads go on. Here the "partner" is the same MDT served on
    # 127.0.0.3.
    digest = put_data(fs, "f")
    P = fs.mds_port
    spec = "127.0.0.1:%d,127.0.0.3:%d:/loom" % (P, P)
    p = mount(fs, spec, mnt_dir, "recovery=60")
    assert p.returncode == 0, p.stderr
    f = open(os.path.join(mnt_dir, "f"), "rb")
    try:
        first = f.read(4096)
        fs.kill9("mds")
        log_path = os.path.join(fs.dir, "log", "mds-partner.log")
        with open(log_path, "a") as log:
            partner = subprocess.Popen([MDS_BIN, "--mdt", os.path.join(fs.dir, "mdt"), "--listen",
                                        "127.0.0.3:%d" % P, "--key", fs.key], stdout=log, stderr=log)
        try:
            assert wait_until(lambda: pings("127.0.0.3", P), 30, 0.1), read(log_path)[-2000:]
            rest = f.read()
            assert hashlib.sha256(first + rest).hexdigest() == digest
            with open(os.path.join(mnt_dir, "after"), "w") as g:
                g.write("written through the partner\n")
            assert sha_of(os.path.join(mnt_dir, "f")) == digest
        finally:
            f.close()
            subprocess.run(["umount", mnt_dir], timeout=60)
            # umount returns when the kernel lets go; the daemon ends its session with the
            # partner after that. Stopped first, the partner would leave a session the restarted
            # MDS waits its whole recovery window (100 s) for.
            assert wait_until(lambda: not mount_daemon_pids(mnt_dir), 60, 0.05)
            partner.terminate()
            partner.wait(timeout=60)
    finally:
        if not f.closed:
            f.close()
    fs.restart()
    assert fs.loom("cat", "/after").stdout == "written through the partner\n"


# ---- refused, saying what to do ---------------------------------------------------------------


def test_another_fsname_is_refused(fs, mnt_dir):
    p = mount(fs, "%s:/other" % fs.addr, mnt_dir)
    assert (p.returncode, p.stderr) == (32, "loom-mount: cannot reach file system other: the MDS at %s "
                                             "serves file system loom, not other\n" % fs.addr)
    assert not is_mounted(mnt_dir)
    # In a list, each address says what it is; none serves "other".
    p = mount(fs, "%s:%d,%s:/other" % (DEAD, fs.mds_port, fs.addr), mnt_dir)
    assert (p.returncode, p.stderr) == (32, "loom-mount: cannot reach file system other: %s:%d: "
                                             "Connection refused; the MDS at %s serves file system "
                                             "loom, not other\n" % (DEAD, fs.mds_port, fs.addr))
    assert not is_mounted(mnt_dir)


def test_other_lnet_networks_are_refused(mnt_dir):
    for spec, nid, net, host in (("10.0.0.1@o2ib:/loom", "10.0.0.1@o2ib", "o2ib", "10.0.0.1"),
                                 ("mds1@tcp,mds2@o2ib1:/loom", "mds2@o2ib1", "o2ib1", "mds2"),
                                 ("mds1@gni:mds2@gni:/loom", "mds1@gni", "gni", "mds1")):
        p = mount_bare(spec, mnt_dir)
        assert (p.returncode, p.stderr) == (1, "loom-mount: loom supports TCP only: '%s' is on LNet "
                                                "network %s (write %s@tcp, or %s)\n" % (nid, net, host, host))
        assert not is_mounted(mnt_dir)


def test_a_name_that_does_not_resolve(mnt_dir):
    p = mount_bare("no-such-host.invalid:/loom", mnt_dir)
    assert (p.returncode, p.stderr) == (32, "loom-mount: cannot reach file system loom: cannot resolve "
                                             "no-such-host.invalid: %s\n" % gai_error("no-such-host.invalid"))
    assert not is_mounted(mnt_dir)


def test_bad_ports_and_empty_hosts(mnt_dir):
    cases = {
        "mds1:99999:/loom": "bad port '99999' in 'mds1:99999' (1 to 65535)",
        "mds1:0:/loom": "bad port '0' in 'mds1:0' (1 to 65535)",
        ":9900:/loom": "empty host in ':9900'",
        "mds1,,mds2:/loom": "empty host in 'mds1,,mds2'",
        "mds1:/": "bad file system name '' in 'mds1:/' (1 to 8 of A-Z a-z 0-9 _ -)",
        "mds1": "'mds1' is not HOST[:PORT][,HOST[:PORT]...]:/FSNAME",
    }
    for spec, why in cases.items():
        p = mount_bare(spec, mnt_dir)
        assert (p.returncode, p.stderr) == (1, "loom-mount: %s\n" % why), spec
        assert not is_mounted(mnt_dir)


# ---- a mount over a mount, remount -----------------------------------------------------------


def test_a_second_mount_over_a_mount_is_refused(fs, mnt_dir):
    digest = put_data(fs, "f")
    spec = "%s:/loom" % fs.addr
    assert mount(fs, spec, mnt_dir).returncode == 0
    try:
        real = os.path.realpath(mnt_dir)
        for again in (spec, "127.0.0.1@tcp:%d:/loom" % fs.mds_port):
            p = mount(fs, again, mnt_dir)
            assert (p.returncode, p.stderr) == (32, "mount.loom: %s is already mounted (%s)\n" % (real, spec))
        # loom-mount run by hand says the same.
        p = subprocess.run([LOOM_MOUNT, spec, mnt_dir, "-o", "key=" + fs.key], capture_output=True, text=True,
                           timeout=60)
        assert (p.returncode, p.stderr) == (32, "loom-mount: %s is already mounted (%s)\n" % (real, spec))
        # The first mount is untouched: one daemon, one mount, the data.
        assert len(mount_daemon_pids(mnt_dir)) == 1
        with open("/proc/self/mounts") as f:
            assert sum(1 for line in f if line.split()[1] == real) == 1
        assert sha_of(os.path.join(mnt_dir, "f")) == digest
    finally:
        subprocess.run(["umount", mnt_dir], check=True, timeout=60)


def test_remount_changes_ro_and_keeps_the_mount(fs, mnt_dir):
    spec = "%s:/loom" % fs.addr
    assert mount(fs, spec, mnt_dir).returncode == 0
    try:
        pids = mount_daemon_pids(mnt_dir)
        # As mount(8) does it for a mounted file system (it runs /sbin/mount.fuse.loom) ...
        remount(mnt_dir, "ro")
        with pytest.raises(OSError) as e:
            open(os.path.join(mnt_dir, "x"), "w")
        assert e.value.errno == 30   # EROFS
        remount(mnt_dir, "rw")
        with open(os.path.join(mnt_dir, "x"), "w") as f:
            f.write("rw again\n")
        # ... and as `mount -t loom -o remount` asks mount.loom.
        p = mount(fs, spec, mnt_dir, "remount", "ro")
        assert p.returncode == 0, p.stderr
        with open("/proc/self/mounts") as f:
            opts = [line.split()[3].split(",") for line in f if line.split()[1] == os.path.realpath(mnt_dir)]
        assert len(opts) == 1 and "ro" in opts[0] and "nosuid" in opts[0] and "nodev" in opts[0]
        assert mount_daemon_pids(mnt_dir) == pids
        assert fs.loom("cat", "/x").stdout == "rw again\n"
    finally:
        subprocess.run(["umount", mnt_dir], check=True, timeout=60)
    # Nothing mounted: nothing to remount.
    p = mount(fs, spec, mnt_dir, "remount", "ro")
    assert (p.returncode, p.stderr) == (32, "mount.loom: %s is not a Loom mount: nothing to remount\n" % mnt_dir)


# ---- the loom tool: --fs, $LOOM_FS, a config file's mds = --------------------------------------


def test_loom_tool_takes_the_same_lists(fs):
    P = fs.mds_port
    fs.loom("mkdir", "/seen")
    env = no_fs_env(fs)
    lists = ["localhost:%d" % P, "127.0.0.1@tcp:%d" % P, "%s:%d,127.0.0.1:%d" % (DEAD, P, P),
             "%s@tcp:%d:127.0.0.1@tcp:%d" % (DEAD, P, P), "%s:%d,127.0.0.1:%d:/loom" % (DEAD, P, P)]
    conf = os.path.join(fs.dir, "list.conf")
    for lst in lists:
        p = subprocess.run([LOOM, "--fs", lst, "ls", "/"], capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode == 0 and "seen" in p.stdout.split(), (lst, p.stderr)
        p = subprocess.run([LOOM, "ls", "/"], capture_output=True, text=True, env=dict(env, LOOM_FS=lst),
                           timeout=120)
        assert p.returncode == 0 and "seen" in p.stdout.split(), (lst, p.stderr)
        with open(conf, "w") as f:
            f.write("mds = %s\nkey = %s\n" % (lst, fs.key))
        keyless = {k: v for k, v in env.items() if k != "LOOM_KEY_FILE"}   # the config's key =
        p = subprocess.run([LOOM, "--config", conf, "ls", "/"], capture_output=True, text=True, env=keyless,
                           timeout=120)
        assert p.returncode == 0 and "seen" in p.stdout.split(), (lst, p.stderr)
    bad = {
        "mds1@o2ib": "loom supports TCP only: 'mds1@o2ib' is on LNet network o2ib (write mds1@tcp, or mds1)",
        "no-such-host.invalid": "cannot resolve no-such-host.invalid: %s" % gai_error("no-such-host.invalid"),
        "%s:%d" % (DEAD, P): "%s:%d: Connection refused" % (DEAD, P),
        "127.0.0.1:99999": "bad port '99999' in '127.0.0.1:99999' (1 to 65535)",
        "%s:/other" % fs.addr: "the MDS at %s serves file system loom, not other" % fs.addr,
    }
    for lst, why in bad.items():
        p = subprocess.run([LOOM, "--fs", lst, "ls", "/"], capture_output=True, text=True, env=env, timeout=120)
        assert (p.returncode, p.stderr) == (1, "loom: cannot connect to the MDS: %s\n" % why), lst

"""One directory seen through two mounts, for the suites that check what a second node sees (the
POSIX cases' cache section, the coherence cases): a Loom file system mounted twice by two
loom-mount processes, and a local folder with a bind mount of it as the control.

Both are context managers yielding a Space (the two paths of one directory), and check the
mounts when they end: problems found are raised as one pytest failure after everything was
unmounted and stopped.
"""

import contextlib
import os
import shutil
import subprocess
import tempfile

import pytest


class Space:
    """A directory as the first mount shows it (a) and as the second does (b)."""

    def __init__(self, kind, a, b, cluster=None):
        self.kind, self.a, self.b, self.cluster = kind, a, b, cluster


def is_mounted(path, fstype=None):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[1].replace("\\040", " ") == path and (fstype is None or fields[2] == fstype):
                return True
    return False


def unmount(path):
    """Unmounts path if mounted (lazily when a plain umount fails); a problem string or None."""
    if not is_mounted(path):
        return None
    p = subprocess.run(["umount", path], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        subprocess.run(["umount", "-l", path], capture_output=True, timeout=120)
        return "umount %s failed (%s); detached it lazily" % (path, p.stderr.strip())
    return None


def mount_alive(path):
    """A problem string if path is no longer a working mount (its FUSE daemon died)."""
    if not is_mounted(path):
        return "%s is no longer mounted" % path
    try:
        os.listdir(path)
    except OSError as e:
        return "the mount on %s stopped serving: %s" % (path, e)
    return None


def mount_command(P, key, spec, mnt, opts=None):
    """`mount -t loom -o key=KEY SPEC MNT`. mount(8) runs /sbin/mount.loom, which runs the
    loom-mount beside it; when that link names another build than the one under test (a Loom
    installed, or another checkout's link), this build's mount.loom is run directly instead, with
    the arguments mount(8) would give it."""
    ours = os.path.join(P.BUILD, "src", "fuse", "mount.loom")
    helper = getattr(P, "MOUNT_HELPER", "/sbin/mount.loom")
    o = "key=" + key + ("," + opts if opts else "")
    if os.path.exists(helper) and os.path.realpath(helper) == os.path.realpath(ours):
        return ["mount", "-t", "loom", "-o", o, spec, mnt]
    return [ours, spec, mnt, "-o", o]


@contextlib.contextmanager
def loom_twice(P, session, prefix):
    """A 4-OST Loom file system mounted twice: A by `loom cluster up --mount`, B by `mount -t loom`.
    P is the parent conftest module (its Cluster, _teardown, CMD_TIMEOUT, BUILD); session the pytest
    session (a failed one keeps the directory). The cluster is checked at the end as the parent
    conftest checks its clusters: daemons alive, no ERROR or sanitizer line in a log, both mounts
    still serving."""
    P._check_binaries()

    class MountedCluster(P.Cluster):
        """A cluster whose `up` also mounts it (`loom cluster up --mount MNT`)."""

        def __init__(self, root, mnt, osts):
            super().__init__(root, osts)
            self.mnt = mnt

        def cluster_cmd(self, verb, *extra, check=True):
            if verb == "up":
                extra = extra + ("--mount", self.mnt)
            return super().cluster_cmd(verb, *extra, check=check)

    top = tempfile.mkdtemp(prefix=prefix)
    os.chmod(top, 0o755)          # cases that act as other users must reach the mounts
    mnt_a = os.path.join(top, "mnt_a")
    mnt_b = os.path.join(top, "mnt_b")
    os.mkdir(mnt_b, 0o755)
    c = MountedCluster(os.path.join(top, "cluster"), mnt_a, osts=4)
    problems = []
    try:
        c.up()
        assert is_mounted(mnt_a, "fuse.loom"), "`loom cluster up --mount` did not mount " + mnt_a
        spec = "%s:%d:/loom" % (c.mds_host, c.mds_port)
        cmd = mount_command(P, c.key, spec, mnt_b)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=P.CMD_TIMEOUT)
        assert p.returncode == 0 and is_mounted(mnt_b, "fuse.loom"), \
            "%s failed (%d): %s%s" % (" ".join(cmd), p.returncode, p.stderr, c.log_tails())
        for m in (mnt_a, mnt_b):
            os.chmod(m, 0o755)
        yield Space("loom", mnt_a, mnt_b, c)
        problems += [x for x in (mount_alive(mnt_a), mount_alive(mnt_b)) if x]
    finally:
        try:
            x = unmount(mnt_b)
            if x:
                problems.append(x)
        finally:
            try:
                problems += P._teardown(c)
            except Exception as e:  # noqa: BLE001 - reported below
                problems.append("teardown raised %r" % e)
            if is_mounted(mnt_a):
                problems.append("%s still mounted after `loom cluster down`" % mnt_a)
                unmount(mnt_a)
    if problems:
        print(c.log_tails())
    if problems or session.testsfailed or os.environ.get("LOOM_KEEP_TMP"):
        print("cluster directory kept for inspection: %s" % c.dir)
    else:
        shutil.rmtree(top, ignore_errors=True)
    if problems:
        pytest.fail("[%s] %s" % (c.dir, "\n".join(problems)), pytrace=False)


@contextlib.contextmanager
def local_twice(prefix):
    """A directory on the local disk under /tmp, and a bind mount of it."""
    top = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    os.chmod(top, 0o755)
    a = os.path.join(top, "a")
    b = os.path.join(top, "b")
    os.mkdir(a, 0o755)
    os.mkdir(b, 0o755)
    p = subprocess.run(["mount", "--bind", a, b], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, "mount --bind %s %s failed: %s" % (a, b, p.stderr)
    try:
        yield Space("local", a, b)
    finally:
        err = unmount(b)
        shutil.rmtree(top, ignore_errors=True)
    assert err is None, err

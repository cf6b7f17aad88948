"""Fixtures for the POSIX conformance cases.

Every case takes the `root` fixture, parametrized over two file systems:

  loom   a directory on a Loom mount (mount A) of a cluster shared by the whole session; the same
         directory seen through a second, independent mount of that file system (mount B, a
         second client process as a second node would run) is `root.other`.
  local  a directory under /tmp on the local disk; `root.other` is the same directory through a
         bind mount, so that the cross-mount cases run there too and prove themselves.

Each case gets a fresh directory of its own on both (`root.path`, and `root.p(name)` for a name in
it). The Loom cluster is started once (`loom cluster up --mount`) and checked at the end as the
parent conftest checks its clusters: every daemon still alive, no ERROR or sanitizer line in any
daemon log, both mounts still serving.
"""

import os
import re
import shutil
import subprocess
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PARENT_CONFTEST = os.path.join(os.path.dirname(HERE), "conftest.py")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a long case (deselect with -m 'not slow')")


def _parent(config):
    """The parent conftest module (pytest registers conftests under their path)."""
    mod = config.pluginmanager.get_plugin(PARENT_CONFTEST)
    assert mod is not None, "tests/integration/conftest.py is not loaded"
    return mod


def _is_mounted(path, fstype=None):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            mnt = fields[1].replace("\\040", " ")
            if mnt == path and (fstype is None or fields[2] == fstype):
                return True
    return False


def _unmount(path):
    if not _is_mounted(path):
        return None
    p = subprocess.run(["umount", path], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        subprocess.run(["umount", "-l", path], capture_output=True, timeout=120)
        return "umount %s failed (%s); detached it lazily" % (path, p.stderr.strip())
    return None


def _mount_alive(path):
    """A problem string if path is no longer a working mount (its FUSE daemon died)."""
    if not _is_mounted(path):
        return "%s is no longer mounted" % path
    try:
        os.listdir(path)
    except OSError as e:
        return "the mount on %s stopped serving: %s" % (path, e)
    return None


class Space:
    """Where one kind of root lives: directory a, the same directory as seen through b."""

    def __init__(self, kind, a, b, cluster=None):
        self.kind, self.a, self.b, self.cluster = kind, a, b, cluster


class Root:
    """A case's own directory: path (through mount A), other (the same through mount B)."""

    def __init__(self, space, name):
        self.kind = space.kind
        self.space = space
        self.cluster = space.cluster
        self.path = os.path.join(space.a, name)
        self.other = os.path.join(space.b, name)

    def p(self, *names):
        return os.path.join(self.path, *names)

    def q(self, *names):
        """The same name through the second mount."""
        return os.path.join(self.other, *names)

    def __repr__(self):
        return "Root(%s, %s)" % (self.kind, self.path)


@pytest.fixture(scope="session", autouse=True)
def _umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture(scope="session")
def loom_space(request):
    """One Loom file system for the session, mounted twice (A by `loom cluster up --mount`, B by
    `mount -t loom`)."""
    P = _parent(request.config)
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

    top = tempfile.mkdtemp(prefix="loom-posix-")
    os.chmod(top, 0o755)          # the permission cases act as other users: let them reach the mounts
    mnt_a = os.path.join(top, "mnt_a")
    mnt_b = os.path.join(top, "mnt_b")
    os.mkdir(mnt_b, 0o755)
    c = MountedCluster(os.path.join(top, "cluster"), mnt_a, osts=4)
    problems = []
    try:
        c.up()
        assert _is_mounted(mnt_a, "fuse.loom"), "`loom cluster up --mount` did not mount " + mnt_a
        spec = "%s:%d:/loom" % (c.mds_host, c.mds_port)
        p = subprocess.run(["mount", "-t", "loom", "-o", "key=" + c.key, spec, mnt_b], capture_output=True, text=True,
                           timeout=P.CMD_TIMEOUT)
        assert p.returncode == 0 and _is_mounted(mnt_b, "fuse.loom"), \
            "mount -t loom %s %s failed (%d): %s%s" % (spec, mnt_b, p.returncode, p.stderr, c.log_tails())
        for m in (mnt_a, mnt_b):
            os.chmod(m, 0o755)
        yield Space("loom", mnt_a, mnt_b, c)
        problems += [x for x in (_mount_alive(mnt_a), _mount_alive(mnt_b)) if x]
    finally:
        try:
            x = _unmount(mnt_b)
            if x:
                problems.append(x)
        finally:
            try:
                problems += P._teardown(c)
            except Exception as e:  # noqa: BLE001 - reported below
                problems.append("teardown raised %r" % e)
            if _is_mounted(mnt_a):
                problems.append("%s still mounted after `loom cluster down`" % mnt_a)
                _unmount(mnt_a)
    if problems:
        print(c.log_tails())
    if problems or request.session.testsfailed or os.environ.get("LOOM_KEEP_TMP"):
        print("cluster directory kept for inspection: %s" % c.dir)
    else:
        shutil.rmtree(top, ignore_errors=True)
    if problems:
        pytest.fail("[%s] %s" % (c.dir, "\n".join(problems)), pytrace=False)


@pytest.fixture(scope="session")
def local_space():
    """A directory on the local disk, and a bind mount of it."""
    top = tempfile.mkdtemp(prefix="loom-posix-local-", dir="/tmp")
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
        err = _unmount(b)
        shutil.rmtree(top, ignore_errors=True)
    assert err is None, err


def _case_dir_name(node_name):
    # test_0012_rename_noreplace_existing_eexist[loom] -> 0012_rename_noreplace_existing_eexist
    name = re.sub(r"\[.*\]$", "", node_name)
    name = re.sub(r"^test_", "", name)
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


# LOOM_POSIX_SIDES=loom runs the cases on Loom only (the sanitizer pass: the local folder proves
# the tests once, in the plain pass).
@pytest.fixture(params=os.environ.get("LOOM_POSIX_SIDES", "loom,local").split(","))
def root(request):
    """The case's own directory (0755, owned by root) on Loom or on the local disk."""
    space = request.getfixturevalue(request.param + "_space")
    r = Root(space, _case_dir_name(request.node.name))
    if os.path.lexists(r.path):
        shutil.rmtree(r.path)
    os.mkdir(r.path, 0o755)
    os.chmod(r.path, 0o755)
    return r

"""Fixtures for the application tests: unmodified programs (cp, tar, rsync, git, sqlite3, numpy,
PyTorch) run on a mounted Loom file system, and each test checks what their user would see.

  mounted        a cluster of its own for the test (the parent conftest's cluster_factory: its
                 daemons are checked and their logs scanned at teardown), started and mounted by
                 `loom cluster up --osts 4 --mount MNT`; `mounted.path` is the mount point (mount A).
  second_mount   the same file system mounted again with `mount -t loom HOST:PORT:/FSNAME DIR`, a
                 second client process as a second node would run (mount B); `.path` is its root.
  source_tree    a local sample tree (apputil.make_source_tree) to copy onto the mount.

At teardown both mounts must still serve (their FUSE daemon alive); `loom cluster down` then
unmounts A, and this conftest unmounts B.

A watchdog backs up the per-command timeouts: if a test runs longer than LOOM_APPS_WATCHDOG seconds
(default 300) it kills the test's own mount daemons, so that whatever is blocked on the mount gets
ENOTCONN and the test fails instead of hanging the suite.

LOOM_APPS_LOCAL=1 runs the same tests on a local directory instead (mount B is then a bind mount of
it): the reference of what a local file system does.
"""

import os
import re
import signal
import subprocess
import tempfile
import threading

import pytest

from apputil import make_source_tree
from loomutil import mount_daemon_pids
from mountpair import is_mounted

HERE = os.path.dirname(os.path.abspath(__file__))
PARENT_CONFTEST = os.path.join(os.path.dirname(HERE), "conftest.py")
LOCAL = os.environ.get("LOOM_APPS_LOCAL") == "1"
WATCHDOG = float(os.environ.get("LOOM_APPS_WATCHDOG", "300"))
MOUNT_TIMEOUT = 60


def _parent(config):
    """The parent conftest module (pytest registers conftests under their path)."""
    mod = config.pluginmanager.get_plugin(PARENT_CONFTEST)
    assert mod is not None, "tests/integration/conftest.py is not loaded"
    return mod


def mount_problem(path):
    """None if path is still a working Loom mount, else what is wrong with it."""
    if LOCAL:
        return None
    if not is_mounted(path, "fuse.loom"):
        return "%s is no longer mounted" % path
    try:
        os.listdir(path)
    except OSError as e:
        return "the mount on %s stopped serving (its loom-mount died?): %s" % (path, e)
    return None


class Mount:
    def __init__(self, path, cluster=None, spec=None):
        self.path = path
        self.cluster = cluster
        self.spec = spec           # HOST:PORT:/FSNAME
        self.pids = []             # loom-mount daemon(s) serving it

    def p(self, *names):
        return os.path.join(self.path, *names)

    def __repr__(self):
        return "Mount(%s)" % self.path


class Watchdog:
    """Kills the test's own mount daemons if the test outlives its time (see the module doc)."""

    def __init__(self, seconds):
        self.mounts = []
        self.fired = False
        self.timer = threading.Timer(seconds, self._fire)
        self.timer.daemon = True
        self.seconds = seconds
        self.timer.start()

    def _fire(self):
        self.fired = True
        for m in self.mounts:
            for pid in m.pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def cancel(self):
        self.timer.cancel()


@pytest.fixture(scope="session", autouse=True)
def _umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def mounted(request):
    """A fresh 4-OST cluster of this test, mounted by `loom cluster up --mount` (mount A)."""
    if LOCAL:
        d = tempfile.mkdtemp(prefix="loom-apps-local-")
        os.chmod(d, 0o755)
        yield Mount(d)
        subprocess.run(["rm", "-rf", d], timeout=120)
        return
    if os.geteuid() != 0:
        pytest.skip("the application tests mount Loom with mount(8): run them as root")
    P = _parent(request.config)
    factory = request.getfixturevalue("cluster_factory")

    class MountedCluster(P.Cluster):
        """A cluster whose `up` also mounts it (`loom cluster up --mount MNT`)."""

        mnt = None

        def cluster_cmd(self, verb, *extra, check=True):
            if verb == "up":
                extra = extra + ("--mount", self.mnt)
            return super().cluster_cmd(verb, *extra, check=check)

    c = factory(osts=4, start=False)
    c.__class__ = MountedCluster
    c.mnt = os.path.join(c.dir, "mnt")
    out = c.up().stdout
    assert is_mounted(c.mnt, "fuse.loom"), "`loom cluster up --mount %s` did not mount it:\n%s" % (c.mnt, out)
    m = re.search(r"mount -t loom -o key=\S+ (\S+) DIR", out)
    assert m, "`loom cluster up --mount` did not say how to mount it elsewhere:\n" + out
    mnt = Mount(c.mnt, c, m.group(1))
    mnt.pids = mount_daemon_pids(c.mnt)
    dog = Watchdog(WATCHDOG)
    dog.mounts.append(mnt)
    c.watchdog = dog
    yield mnt
    dog.cancel()
    problems = []
    if dog.fired:
        problems.append("watchdog: the test ran over %ds; its mount daemons were killed" % dog.seconds)
    x = mount_problem(c.mnt)
    if x:
        problems.append(x)
    # `loom cluster down` (the parent's teardown, next) unmounts it.
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def second_mount(mounted):
    """The same file system mounted a second time, by `mount -t loom SPEC DIR` (mount B)."""
    if LOCAL:
        d = mounted.path + "-b"
        os.mkdir(d)
        subprocess.run(["mount", "--bind", mounted.path, d], check=True, timeout=60)
        yield Mount(d)
        subprocess.run(["umount", d], timeout=60)
        os.rmdir(d)
        return
    c = mounted.cluster
    path = os.path.join(c.dir, "mnt2")
    os.mkdir(path)
    p = subprocess.run(["mount", "-t", "loom", "-o", "key=" + c.key, mounted.spec, path], capture_output=True, text=True,
                       timeout=MOUNT_TIMEOUT)
    assert p.returncode == 0 and is_mounted(path, "fuse.loom"), \
        "`mount -t loom %s %s` failed (%d): %s%s" % (mounted.spec, path, p.returncode, p.stderr, c.log_tails())
    m = Mount(path, c, mounted.spec)
    m.pids = mount_daemon_pids(path)
    c.watchdog.mounts.append(m)
    yield m
    problems = []
    if c.watchdog.fired:
        problems.append("watchdog: the test ran over %ds; its mount daemons were killed" % c.watchdog.seconds)
    x = mount_problem(path)
    if x:
        problems.append(x)
    if is_mounted(path):
        p = subprocess.run(["umount", path], capture_output=True, text=True, timeout=MOUNT_TIMEOUT)
        if p.returncode != 0:
            subprocess.run(["umount", "-l", path], capture_output=True, timeout=MOUNT_TIMEOUT)
            problems.append("`umount %s` failed (%s); detached it lazily" % (path, p.stderr.strip()))
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def source_tree(workdir):
    """A local sample tree (see apputil.make_source_tree) at WORKDIR/tree."""
    return make_source_tree(os.path.join(workdir, "tree"))

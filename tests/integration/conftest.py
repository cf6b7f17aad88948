"""Fixtures for Loom's integration tests: real daemons started with `loom cluster up`.

Every test gets its own cluster (function scope). Teardown always runs `loom cluster down`, then
fails the test if a daemon that should be running died, or if any daemon log holds an ERROR line
or a sanitizer report that the test did not declare as expected (`@pytest.mark.allow_log(RE...)`
or `cluster.allow_log(RE)`).

LOOM_BUILD names the build directory (the Makefile sets it); by default it is ../../build
relative to this file.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import loomwire
from loomutil import BUILD, LOOM, MDS_BIN, OSS_BIN, is_mounted, pid_alive, wait_until  # noqa: F401

CMD_TIMEOUT = 180          # seconds any single tool command may take before we call it hung
SANITIZER = re.compile(r"AddressSanitizer|LeakSanitizer|ThreadSanitizer|UndefinedBehaviorSanitizer|"
                       r"runtime error:")
BAD_LOG_LINE = re.compile(r" ERROR:|" + SANITIZER.pattern)
OSS_SERVING = re.compile(r"serving \d+ OST\(s\) on ([0-9.]+):(\d+)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "allow_log(*regexes): daemon log lines matching these are expected, not failures")
    config.addinivalue_line("markers", "slow: a long case (deselect with -m 'not slow')")
    config.addinivalue_line("markers", "soak: a case too long for the suite: `make soak` runs them")
    config.addinivalue_line("markers", "pylib: loads libloom into Python (the package loom); plain build only")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Lets fixtures see whether the test body failed (to keep its directory for a post-mortem).
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


MOUNT_HELPER = "/sbin/mount.loom"
# What mount(8) runs for a mounted Loom file system (type fuse.loom): `mount -o remount DIR`.
MOUNT_HELPER_FUSE = "/sbin/mount.fuse.loom"


_made_mount_helpers = set()


def _ensure_mount_helper():
    if os.geteuid() != 0:
        return
    for link in (MOUNT_HELPER, MOUNT_HELPER_FUSE):
        if os.path.lexists(link):
            continue
        try:
            os.symlink(os.path.join(BUILD, "src", "fuse", "mount.loom"), link)
            _made_mount_helpers.add(link)
        except FileExistsError:
            pass


@pytest.fixture(scope="session", autouse=True)
def mount_helper():
    """`mount -t loom` runs /sbin/mount.loom (and a remount of a Loom mount /sbin/mount.fuse.loom),
    which `meson install` puts there. On a machine where Loom is not installed (CI), the build's
    helper stands in for the session."""
    _ensure_mount_helper()
    try:
        yield
    finally:
        ours = os.path.join(BUILD, "src", "fuse", "mount.loom")
        for link in _made_mount_helpers:
            if os.path.islink(link) and os.readlink(link) == ours:
                os.unlink(link)


@pytest.fixture(autouse=True)
def _mount_helper_still_there(mount_helper):
    # Another test session on this machine may have removed the link it made when it ended.
    _ensure_mount_helper()


def _check_binaries():
    missing = [p for p in (LOOM, MDS_BIN, OSS_BIN) if not os.access(p, os.X_OK)]
    if missing:
        pytest.exit("Loom is not built (missing %s); run `make` or set LOOM_BUILD" % ", ".join(missing),
                    returncode=2)


class Cluster:
    """One `loom cluster` under its own directory."""

    def __init__(self, root, osts=4):
        self.dir = root
        self.osts = osts
        self.mds_host = None
        self.mds_port = None
        self.expected = set()        # daemons that must be alive at teardown
        self.allowed = []            # compiled regexes of expected bad log lines
        self.env = dict(os.environ)
        for var in ("LOOM_CONFIG", "LOOM_FS", "LOOM_BIN_DIR"):   # always this build, this cluster
            self.env.pop(var, None)
        self.key = os.path.join(root, "fs.key")   # `loom cluster up` makes it
        self.env["LOOM_KEY_FILE"] = self.key

    # ---- running the tool ----

    @property
    def addr(self):
        return "%s:%d" % (self.mds_host, self.mds_port)

    def loom(self, *args, check=True, input=None, timeout=CMD_TIMEOUT, text=True):
        """Runs `loom ARGS` against this file system; returns the CompletedProcess."""
        env = dict(self.env)
        if self.mds_port is not None:
            env["LOOM_FS"] = self.addr
        p = subprocess.run([LOOM] + [str(a) for a in args], input=input, capture_output=True,
                           text=text, env=env, timeout=timeout)
        err = p.stderr if text else p.stderr.decode(errors="replace")
        if SANITIZER.search(err):
            raise AssertionError("sanitizer report from `loom %s`:\n%s" % (" ".join(map(str, args)), err))
        if check and p.returncode != 0:
            raise AssertionError("`loom %s` exited %d\nstdout:\n%s\nstderr:\n%s"
                                 % (" ".join(map(str, args)), p.returncode, p.stdout, p.stderr))
        return p

    def cluster_cmd(self, verb, *extra, check=True):
        p = subprocess.run([LOOM, "cluster", verb, "--dir", self.dir] + list(extra), capture_output=True,
                           text=True, env=self.env, timeout=CMD_TIMEOUT)
        if SANITIZER.search(p.stderr):
            raise AssertionError("sanitizer report from `loom cluster %s`:\n%s" % (verb, p.stderr))
        if check and p.returncode != 0:
            raise AssertionError("`loom cluster %s --dir %s %s` exited %d\nstdout:\n%s\nstderr:\n%s%s"
                                 % (verb, self.dir, " ".join(extra), p.returncode, p.stdout, p.stderr,
                                    self.log_tails()))
        return p

    # ---- lifecycle ----

    def up(self, osts=None):
        """`loom cluster up`: formats what is new and starts whatever is not running."""
        if osts is not None:
            self.osts = osts
        p = self.cluster_cmd("up", "--osts", str(self.osts))
        m = re.search(r"export LOOM_FS=([0-9.]+):(\d+)", p.stdout)
        assert m, "`loom cluster up` did not print the MDS address:\n" + p.stdout
        self.mds_host, self.mds_port = m.group(1), int(m.group(2))
        loomwire.DEFAULT_KEY = loomwire.load_key(self.key)   # raw-wire tests speak as a client
        self.expected = {"mds"} | {"oss%d" % k for k in range(self.osts)}
        return p

    restart = up

    def mount(self):
        """`loom cluster up --mount DIR/mnt`: the file system mounted (`down` unmounts it, also when
        the test fails); returns the mount point."""
        mnt = os.path.join(self.dir, "mnt")
        self.cluster_cmd("up", "--osts", str(self.osts), "--mount", mnt)
        assert is_mounted(mnt), "`loom cluster up --mount` did not mount " + mnt
        return mnt

    def down(self):
        """`loom cluster down`: stops every daemon of this cluster."""
        p = self.cluster_cmd("down")
        self.expected = set()
        return p

    def daemon_names(self):
        return ["mds"] + ["oss%d" % k for k in range(self.osts)]

    def pid(self, name):
        with open(os.path.join(self.dir, "run", name + ".pid")) as f:
            return int(f.read().strip())

    def alive(self, name):
        try:
            return pid_alive(self.pid(name))
        except FileNotFoundError:
            return False

    def kill9(self, name):
        """SIGKILL a daemon ("mds", "ossN") and wait until it is gone."""
        pid = self.pid(name)
        self.expected.discard(name)
        os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: not pid_alive(pid), 30), "%s (pid %d) survived SIGKILL" % (name, pid)
        return pid

    def allow_log(self, *regexes):
        self.allowed.extend(re.compile(r) for r in regexes)

    # ---- where things are ----

    def log_path(self, name):
        return os.path.join(self.dir, "log", name + ".log")

    def read_log(self, name):
        try:
            with open(self.log_path(name), errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def oss_addr(self, name):
        """(host, port) an OSS serves on now: the last "serving ... on HOST:PORT" of its log."""
        found = OSS_SERVING.findall(self.read_log(name))
        assert found, "no 'serving' line in %s's log" % name
        host, port = found[-1]
        return host, int(port)

    def ost_index_of_dir(self, k):
        """The OST index recorded in DIR/ost<k>/ost.conf (assigned by the MDS at registration)."""
        with open(os.path.join(self.dir, "ost%d" % k, "ost.conf")) as f:
            m = re.search(r"^index=(\d+)$", f.read(), re.M)
        assert m, "ost%d/ost.conf has no index" % k
        return int(m.group(1))

    def ost_dir(self, idx):
        """The directory of the OST with index idx."""
        for k in range(self.osts):
            if self.ost_index_of_dir(k) == idx:
                return os.path.join(self.dir, "ost%d" % k)
        raise AssertionError("no OST directory holds index %d" % idx)

    def oss_name(self, idx):
        """The daemon name (ossK) serving OST index idx."""
        return "oss%d" % int(os.path.basename(self.ost_dir(idx))[3:])

    def ost_table(self):
        gen, table = loomwire.ost_table(self.mds_host, self.mds_port)
        return table

    def server_addrs(self):
        """[(name, host, port)] of the MDS and every OSS."""
        out = [("mds", self.mds_host, self.mds_port)]
        out += [("oss%d" % k,) + self.oss_addr("oss%d" % k) for k in range(self.osts)]
        return out

    # ---- post-mortem ----

    def log_tails(self, n=30):
        out = []
        logdir = os.path.join(self.dir, "log")
        if not os.path.isdir(logdir):
            return ""
        for name in sorted(os.listdir(logdir)):
            with open(os.path.join(logdir, name), errors="replace") as f:
                lines = f.read().splitlines()[-n:]
            out.append("\n---- %s (last %d lines) ----\n%s" % (name, len(lines), "\n".join(lines)))
        return "".join(out)

    def bad_log_lines(self):
        bad = []
        logdir = os.path.join(self.dir, "log")
        if not os.path.isdir(logdir):
            return bad
        for name in sorted(os.listdir(logdir)):
            if not name.endswith(".log"):
                continue
            with open(os.path.join(logdir, name), errors="replace") as f:
                for line in f:
                    if BAD_LOG_LINE.search(line) and not any(r.search(line) for r in self.allowed):
                        bad.append("%s: %s" % (name, line.rstrip("\n")))
        return bad


def _loom_mounts_under(d):
    """Loom mounts at or under directory d (a test's own mounts elsewhere are its business)."""
    d = os.path.realpath(d).rstrip("/") + "/"
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            path = fields[1].replace("\\040", " ")
            if fields[2] == "fuse.loom" and (path + "/").startswith(d):
                out.append(path)
    return out


def _teardown(cluster):
    """Stops the cluster (always) and returns a list of problems found."""
    problems = []
    try:
        for name in sorted(cluster.expected):
            if not cluster.alive(name):
                problems.append("daemon %s died during the test" % name)
    finally:
        try:
            cluster.down()
        except Exception as e:  # noqa: BLE001 - reported, never hides the other checks
            problems.append("loom cluster down failed: %s" % e)
    for name in cluster.daemon_names():
        try:
            pid = cluster.pid(name)
        except FileNotFoundError:
            continue
        if pid_alive(pid):
            problems.append("%s (pid %d) still runs after `loom cluster down`" % (name, pid))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    left = _loom_mounts_under(cluster.dir)
    for m in left:
        subprocess.run(["umount", "-l", m], capture_output=True, timeout=60)
    if left:
        problems.append("mounts left behind after `loom cluster down`: %s" % left)
    bad = cluster.bad_log_lines()
    if bad:
        problems.append("unexpected ERROR or sanitizer lines in the daemon logs:\n  " + "\n  ".join(bad[:50]))
    return problems


@pytest.fixture
def cluster_factory(request):
    """Makes clusters (cluster_factory(osts=4, start=True)); all are torn down and checked."""
    _check_binaries()
    made = []
    keep = os.environ.get("LOOM_KEEP_TMP")
    marker_res = []
    for m in request.node.iter_markers("allow_log"):
        marker_res.extend(m.args)

    def make(osts=4, start=True):
        root = tempfile.mkdtemp(prefix="loom-it-")
        c = Cluster(root, osts)
        c.allow_log(*marker_res)
        made.append(c)
        if start:
            c.up()
        return c

    yield make

    problems = []
    for c in made:
        try:
            p = _teardown(c)
        except Exception as e:  # noqa: BLE001 - the other clusters must still be stopped
            p = ["teardown raised %r" % e]
        problems.extend("[%s] %s" % (c.dir, x) for x in p)
        if p:
            print(c.log_tails())
    failed = problems or getattr(request.node, "rep_call", None) is None or request.node.rep_call.failed
    for c in made:
        if failed or keep:
            print("cluster directory kept for inspection: %s" % c.dir)
        else:
            shutil.rmtree(c.dir, ignore_errors=True)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def cluster(cluster_factory):
    """A running 4-OST cluster, own to this test."""
    return cluster_factory(osts=4)


@pytest.fixture
def workdir():
    """A scratch directory for local files (source and fetched copies); removed afterwards."""
    d = tempfile.mkdtemp(prefix="loom-it-local-")
    yield d
    shutil.rmtree(d, ignore_errors=True)

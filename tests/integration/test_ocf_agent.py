"""The Pacemaker resource agent scripts/ocf/loom (ocf:loom:loom, issue 21), run for real.

resource-agents' ocf-tester runs its checks (meta-data against the OCF DTD, probes, start, stop,
starting what runs, stopping what is stopped) against the MDT and an OST of a test cluster. Then
the agent is called as Pacemaker calls it, with the two hosts of a failover pair played by two
resources (each its own pid and log file) on the same config file and target: the second is
refused while the first serves (multi-mount protection, OCF_ERR_GENERIC with the server's reason),
takes the target once the first stopped, notices a kill -9 (OCF_NOT_RUNNING) and takes over from
the dead server; a frozen server is caught by the depth-10 monitor. What is checked is what
Pacemaker and an admin see: the agent's exit codes, its exit reasons, the servers' log lines and
the file system answering through the server the agent started."""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET

import pytest

from loomutil import MDS_BIN, OSS_BIN, REPO, pid_alive, wait_until

AGENT = os.path.join(REPO, "scripts", "ocf", "loom")
OCF_ROOT = "/usr/lib/ocf"
MMP_MS = 200

# OCF exit codes (the OCF resource agent API; resource-agents' ocf-returncodes).
OCF_SUCCESS, OCF_ERR_GENERIC, OCF_ERR_ARGS, OCF_ERR_UNIMPLEMENTED = 0, 1, 2, 3
OCF_ERR_INSTALLED, OCF_ERR_CONFIGURED, OCF_NOT_RUNNING = 5, 6, 7

REFUSED = r"ERROR: the (MDT|OST) in .* is in use by loom-(mds|oss) pid \d+ on .*: its multi-mount protection heartbeat is alive"


@pytest.fixture(scope="module")
def ocf_tester():
    """resource-agents' ocf-tester (and the ocf-shellfuncs the agent sources): scripts/deps.sh test
    installs them; installed here if missing and possible, else the module is skipped."""
    def found():
        return shutil.which("ocf-tester") or next(
            (p for p in ("/usr/sbin/ocf-tester",) if os.access(p, os.X_OK)), None)
    if not (found() and os.path.isfile(os.path.join(OCF_ROOT, "lib", "heartbeat", "ocf-shellfuncs"))
            and shutil.which("xmllint")):
        if os.geteuid() == 0 and shutil.which("apt-get"):
            subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "resource-agents",
                            "libxml2-utils"], capture_output=True, timeout=900,
                           env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        if not found() or not shutil.which("xmllint"):
            pytest.skip("ocf-tester is missing (Debian: resource-agents, libxml2-utils) and could not be installed")
    return found()


@pytest.fixture
def agent_copy():
    """The agent in a directory anyone may enter: ocf-tester runs its meta-data as nobody (as
    Pacemaker may), and a checkout or a test's temporary directory may be closed to nobody."""
    assert os.stat(AGENT).st_mode & 0o111 == 0o111, "scripts/ocf/loom must be executable by all"
    d = tempfile.mkdtemp(prefix="loom-ocf-")
    os.chmod(d, 0o755)
    path = os.path.join(d, "loom")
    shutil.copy2(AGENT, path)
    os.chmod(path, 0o755)   # as installed (scripts/ocf/meson.build)
    yield path
    shutil.rmtree(d, ignore_errors=True)


class Resource:
    """One Pacemaker resource of type ocf:loom:loom on this host: the agent called with the
    environment Pacemaker gives it (OCF_ROOT, OCF_RESOURCE_INSTANCE, OCF_RESKEY_*)."""

    def __init__(self, root, name, server, config, agent=AGENT):
        self.name, self.server, self.agent = name, server, agent
        self.params = {"server": server, "config": config, "binary": MDS_BIN if server == "mds" else OSS_BIN,
                       "pidfile": os.path.join(root, "run", "ocf-%s.pid" % name),
                       # in a cluster's log directory: teardown fails the test on an ERROR line
                       # there that the test did not declare
                       "logfile": os.path.join(root, "log", "ocf-%s.log" % name)}

    def call(self, action, depth=None, interval_ms=None, timeout_ms=20000):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OCF_", "LOOM_"))}
        env.update({"OCF_ROOT": OCF_ROOT, "OCF_RA_VERSION_MAJOR": "1", "OCF_RA_VERSION_MINOR": "1",
                    "OCF_RESOURCE_INSTANCE": self.name, "OCF_RESOURCE_TYPE": "loom",
                    "OCF_RESOURCE_PROVIDER": "loom", "OCF_RESKEY_CRM_meta_timeout": str(timeout_ms)})
        env.update(("OCF_RESKEY_" + k, v) for k, v in self.params.items())
        if interval_ms is not None:
            env["OCF_RESKEY_CRM_meta_interval"] = str(interval_ms)
        if depth is not None:
            env["OCF_RESKEY_OCF_CHECK_LEVEL"] = str(depth)   # as Pacemaker passes OCF_CHECK_LEVEL=10
        t = time.monotonic()
        # stdin /dev/null, as Pacemaker runs agents (ocf-shellfuncs logs differently to a terminal)
        p = subprocess.run([self.agent, action], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=60)
        p.seconds = time.monotonic() - t
        return p

    def rc(self, action, **kw):
        p = self.call(action, **kw)
        return p.returncode

    def monitor(self, **kw):
        # a recurring monitor, as `op monitor interval=10s` runs it
        return self.call("monitor", interval_ms=10000, **kw)

    def pid(self):
        with open(self.params["pidfile"]) as f:
            return int(f.read())

    def addr(self):
        with open(self.params["pidfile"][:-len(".pid")] + ".addr") as f:
            host, port = f.read().strip().rsplit(":", 1)
        return host, int(port)

    def log(self):
        try:
            with open(self.params["logfile"], errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def ocf_tester(self, tester):
        args = [tester, "-n", self.name]
        for k, v in self.params.items():
            args += ["-o", "%s=%s" % (k, v)]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OCF_", "LOOM_"))}
        env["OCF_ROOT"] = OCF_ROOT
        return subprocess.run(args + [self.agent], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120)


def stop_cleanly(c, name):
    """SIGTERM the cluster's own server `name` and wait for it: the agent's takes its target."""
    pid = c.pid(name)
    c.expected.discard(name)
    os.kill(pid, signal.SIGTERM)
    assert wait_until(lambda: not pid_alive(pid), 30), "%s (pid %d) ignores SIGTERM" % (name, pid)


def write_conf(root, name, lines):
    path = os.path.join(root, name)
    with open(path, "w") as f:
        f.write("# written by test_ocf_agent.py\n" + "".join("%s = %s\n" % kv for kv in lines))
    return path


def heartbeat_holder(target):
    """Who the multi-mount protection heartbeat in target says holds it ("loom-mds pid N")."""
    with open(os.path.join(target, "mmp"), "rb") as f:
        return f.read(168)[104:168].rstrip(b"\0").decode()


def assert_pair_fails_over(a, b, target, answers):
    """The calls Pacemaker makes to move a target between resource a and resource b (the pair's two
    hosts), with the failures it must see. answers() says whether the file system is served through
    the server that runs."""
    prog = "loom-" + a.server
    # a starts: its server holds the target and the file system answers through it.
    p = a.call("start")
    assert p.returncode == OCF_SUCCESS, (p.stdout, p.stderr, a.log()[-2000:])
    assert a.monitor().returncode == OCF_SUCCESS
    assert heartbeat_holder(target) == "%s pid %d" % (prog, a.pid())
    assert "%s pid %d serves on %s:%d" % ((prog, a.pid()) + a.addr()) in p.stderr, p.stderr
    assert wait_until(lambda: answers(a), 30, 0.1), "the file system does not answer through a"
    assert a.rc("start") == OCF_SUCCESS, "a start of a running resource must succeed"
    # b on the same target while a serves: the server refuses (multi-mount protection), the agent
    # says why and fails the start; a goes on.
    b_started = a.pid()
    p = b.call("start")
    assert p.returncode == OCF_ERR_GENERIC, (p.returncode, p.stderr)
    assert re.search(r"ocf-exit-reason:%s exited with status 1: the (MDT|OST) in %s is in use by %s pid %d on %s: "
                     r"its multi-mount protection heartbeat is alive" % (prog, re.escape(target), prog, a.pid(),
                                                                         re.escape(socket.gethostname())),
                     p.stderr), p.stderr
    assert re.search(REFUSED, b.log()), b.log()
    assert b.monitor().returncode == OCF_NOT_RUNNING
    assert a.monitor().returncode == OCF_SUCCESS and a.pid() == b_started
    # a stops (a clean stop: its heartbeat is marked clean), twice; then b takes the target.
    assert a.rc("stop") == OCF_SUCCESS
    assert a.monitor().returncode == OCF_NOT_RUNNING
    assert a.rc("stop") == OCF_SUCCESS, "a stop of a stopped resource must succeed"
    p = b.call("start")
    assert p.returncode == OCF_SUCCESS, (p.stderr, b.log()[-2000:])
    assert heartbeat_holder(target) == "%s pid %d" % (prog, b.pid())
    assert wait_until(lambda: answers(b), 30, 0.1), "the file system does not answer through b"
    # b's host dies (kill -9): the monitor sees the resource stopped, and a takes over once the dead
    # heartbeat has been silent long enough.
    dead = b.pid()
    os.kill(dead, signal.SIGKILL)
    assert wait_until(lambda: not pid_alive(dead), 10)
    assert b.monitor().returncode == OCF_NOT_RUNNING
    p = a.call("start")
    assert p.returncode == OCF_SUCCESS, (p.stderr, a.log()[-2000:])
    assert p.seconds >= 2 * MMP_MS / 1000, "a took a target whose heartbeat it had not watched"
    assert heartbeat_holder(target) == "%s pid %d" % (prog, a.pid())
    assert wait_until(lambda: answers(a), 30, 0.1), "the file system does not answer after the takeover"
    assert b.rc("stop") == OCF_SUCCESS, "stop after a crash (stale pid file) must succeed"
    assert not os.path.exists(b.params["pidfile"])
    # A frozen server keeps its listening socket (depth 0 cannot tell), not its heartbeat (depth 10).
    frozen = a.pid()
    os.kill(frozen, signal.SIGSTOP)
    try:
        assert a.monitor().returncode == OCF_SUCCESS
        p = a.monitor(depth=10)
        assert p.returncode == OCF_ERR_GENERIC, p.stderr
        assert "ocf-exit-reason:the heartbeat in %s did not move" % target in p.stderr, p.stderr
    finally:
        os.kill(frozen, signal.SIGCONT)
    assert a.monitor(depth=10).returncode == OCF_SUCCESS
    assert a.rc("stop") == OCF_SUCCESS
    assert a.monitor().returncode == OCF_NOT_RUNNING


@pytest.mark.allow_log(REFUSED)
def test_the_agent_moves_the_mdt(cluster_factory, ocf_tester, agent_copy):
    c = cluster_factory(osts=1)
    mdt = os.path.join(c.dir, "mdt")
    stop_cleanly(c, "mds")
    conf = write_conf(c.dir, "ocf-mds.conf", [("mdt", mdt), ("listen", c.addr), ("key", c.key),
                                          ("mmp-interval", MMP_MS)])
    a = Resource(c.dir, "mdt-a", "mds", conf, agent=agent_copy)
    b = Resource(c.dir, "mdt-b", "mds", conf, agent=agent_copy)
    try:
        t = a.ocf_tester(ocf_tester)
        assert t.returncode == 0 and "passed all tests" in t.stdout, t.stdout + t.stderr
        assert a.monitor().returncode == OCF_NOT_RUNNING, "ocf-tester leaves the resource stopped"

        def answers(r):
            # the OSS finds the MDS again at the same address; `loom df` lists both targets
            p = c.loom("df", check=False)
            return p.returncode == 0 and re.search(r"-MDT0000_UUID", p.stdout) and \
                re.search(r"-OST0000_UUID", p.stdout)
        assert_pair_fails_over(a, b, mdt, answers)
    finally:
        for r in (a, b):
            r.call("stop")


@pytest.mark.allow_log(REFUSED, r"lost the MDS|OST0000.*(Connection refused|away|reconnect)")
def test_the_agent_moves_an_ost(cluster_factory, ocf_tester, agent_copy):
    c = cluster_factory(osts=2)
    ost = c.ost_dir(0)
    stop_cleanly(c, c.oss_name(0))
    # Any free port, as an OSS's default: the agent learns it from the port file it hands the server.
    conf = write_conf(c.dir, "ocf-oss.conf", [("ost", ost), ("mds", c.addr), ("listen", "127.0.0.1:0"),
                                          ("key", c.key), ("mmp-interval", MMP_MS)])
    a = Resource(c.dir, "ost0-a", "oss", conf, agent=agent_copy)
    b = Resource(c.dir, "ost0-b", "oss", conf, agent=agent_copy)
    try:
        t = a.ocf_tester(ocf_tester)
        assert t.returncode == 0 and "passed all tests" in t.stdout, t.stdout + t.stderr
        assert a.monitor().returncode == OCF_NOT_RUNNING

        def answers(r):
            # the MDS's table has the OST active at the address of the server r started
            try:
                e = c.ost_table().get(0)
            except (OSError, AssertionError):
                return False
            return bool(e) and (e["host"], e["port"]) == r.addr() and not e["state"] & 1
        assert_pair_fails_over(a, b, ost, answers)
    finally:
        for r in (a, b):
            r.call("stop")


def test_the_agent_says_what_is_wrong(ocf_tester, workdir):
    """meta-data, validate-all and start with what an admin may get wrong: the exit code Pacemaker
    acts on (a hard error keeps the resource off this host, a fatal one off every host) and the
    reason it shows. No server serves: cheap."""
    target = os.path.join(workdir, "shared-mdt")
    os.makedirs(target)
    good = write_conf(workdir, "good.conf", [("mdt", target), ("mmp-interval", MMP_MS)])
    r = Resource(workdir, "mdt", "mds", good)

    p = r.call("meta-data")
    assert p.returncode == OCF_SUCCESS
    meta = ET.fromstring(p.stdout)
    assert meta.get("name") == "loom" and meta.findtext("version") == "1.1"
    params = {e.get("name"): e.get("required") for e in meta.iter("parameter")}
    assert params == {"server": "1", "config": "1", "binary": None, "pidfile": None, "logfile": None}
    assert {e.get("name") for e in meta.iter("action")} == {"start", "stop", "monitor", "validate-all", "meta-data"}

    assert r.rc("validate-all") == OCF_SUCCESS
    # A probe on a host where nothing ran, even without the program: not running.
    r.params["binary"] = os.path.join(workdir, "no-such-loom-mds")
    assert r.call("monitor", interval_ms=0).returncode == OCF_NOT_RUNNING
    assert r.rc("stop") == OCF_SUCCESS
    p = r.call("validate-all")
    assert p.returncode == OCF_ERR_INSTALLED and "no executable loom-mds" in p.stderr, p.stderr
    r.params["binary"] = MDS_BIN

    def reason(p):
        m = re.search(r"^ocf-exit-reason:(.*)$", p.stderr, re.M)
        assert m, p.stderr
        return m.group(1)

    cases = [
        ({"server": "nfs"}, OCF_ERR_CONFIGURED, "server must be mds or oss, not 'nfs'"),
        ({"server": ""}, OCF_ERR_CONFIGURED, "the parameter server is required"),
        ({"config": ""}, OCF_ERR_CONFIGURED, "the parameter config is required"),
        ({"config": os.path.join(workdir, "none.conf")}, OCF_ERR_ARGS, "cannot read the config file"),
        ({"config": write_conf(workdir, "nommp.conf", [("mdt", target)])}, OCF_ERR_ARGS,
         "multi-mount protection is off for %s: set mmp-interval" % target),
        ({"config": write_conf(workdir, "gone.conf", [("mdt", target + "-x"), ("mmp-interval", 300)])}, OCF_ERR_ARGS,
         "the target %s-x is not there (is the shared disk mounted on this host?)" % target),
        ({"config": write_conf(workdir, "noost.conf", [("mdt", target), ("mmp-interval", 300)]), "server": "oss",
          "binary": OSS_BIN}, OCF_ERR_ARGS, "names no OST (ost = DIR)"),
    ]
    for change, code, why in cases:
        saved = dict(r.params)
        r.params.update(change)
        for action in ("validate-all", "start"):
            p = r.call(action)
            assert p.returncode == code and why in reason(p), (change, action, p.returncode, p.stderr)
        r.params = saved

    # A mistake in the file that only the server knows: it exits 2, the agent says OCF_ERR_ARGS with
    # the server's own message, and nothing is left running.
    r.params["config"] = write_conf(workdir, "typo.conf", [("mdt", target), ("mmp-interval", 300), ("lissen", "x")])
    p = r.call("start")
    assert p.returncode == OCF_ERR_ARGS, (p.returncode, p.stderr)
    assert "loom-mds exited with status 2: loom-mds: %s:4: unknown setting 'lissen'" % r.params["config"] \
        in reason(p), p.stderr
    assert r.monitor().returncode == OCF_NOT_RUNNING
    for action in ("promote", "demote", "notify", "migrate_to", "reload"):
        assert r.rc(action) == OCF_ERR_UNIMPLEMENTED, action


def test_the_agent_is_posix_sh():
    """Pacemaker runs the agent with /bin/sh (dash on Debian): no bashisms, and shellcheck's
    findings fixed (when shellcheck is installed)."""
    p = subprocess.run(["sh", "-n", AGENT], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    if shutil.which("dash"):
        p = subprocess.run(["dash", "-n", AGENT], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
    if shutil.which("shellcheck"):
        p = subprocess.run(["shellcheck", "-s", "sh", AGENT], capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr

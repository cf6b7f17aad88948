"""What an admin who installs Loom sees of its programs before any file system exists: `--version`
on each, the servers' `--config FILE` (docs/operations.md, "Configuration files"), and where their
logs go (the journal's priorities, syslog with --log-syslog)."""

import os
import re
import socket
import subprocess
import sys
import textwrap

import pytest

from loomutil import BUILD, LOOM, MDS_BIN, OSS_BIN, REPO, read, wait_until

MOUNT_BIN = os.path.join(BUILD, "src", "fuse", "loom-mount")
MOUNT_HELPER = os.path.join(BUILD, "src", "fuse", "mount.loom")


def release():
    m = re.search(r"version\s*:\s*'([^']+)'", read(os.path.join(REPO, "meson.build")))
    return m.group(1)


def protocol_version():
    m = re.search(r"#define\s+LW_VERSION\s+(\d+)u", read(os.path.join(REPO, "src", "proto", "wire.h")))
    return int(m.group(1))


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, **kw)


@pytest.mark.parametrize("prog,argv", [
    ("loom-mds", [MDS_BIN, "--version"]),
    ("loom-oss", [OSS_BIN, "--version"]),
    ("loom", [LOOM, "--version"]),
    ("loom-mount", [MOUNT_BIN, "--version"]),
    ("mount.loom", [MOUNT_HELPER, "--version"]),
])
def test_every_program_says_its_release_and_protocol(prog, argv):
    r = run(argv)
    assert r.returncode == 0, r.stderr
    if prog == "mount.loom":  # the helper only runs loom-mount: no protocol of its own
        assert r.stdout == "mount.loom %s\n" % release()
        return
    v = protocol_version()
    extra = r"; libfuse \d+\.\d+\.\d+" if prog == "loom-mount" else ""
    assert re.fullmatch(r"%s %s \(protocol %d, accepts \d+ to %d%s\)\n" % (re.escape(prog), re.escape(release()), v,
                                                                        v, extra), r.stdout), r.stdout


def write(path, text):
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


@pytest.fixture
def formatted(workdir):
    """An MDT and two OSTs of file system `cfgfs`, formatted through config files."""
    mdt, ost0, ost1 = (os.path.join(workdir, n) for n in ("mdt", "ost0", "ost1"))
    mds_conf = write(os.path.join(workdir, "mds.conf"), """\
        # the MDS of cfgfs
        mdt = %s
        fsname = cfgfs

        listen = 127.0.0.1:0
        port-file = %s/mds.addr
        log-level = warn
        """ % (mdt, workdir))
    r = run([MDS_BIN, "--config", mds_conf, "--format"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("formatted MDT in %s for file system cfgfs\n" % mdt), r.stdout
    oss_conf = write(os.path.join(workdir, "oss.conf"), """\
        ost = %s   # the first
        ost = %s
        fsname = cfgfs
        key = %s/fs.key
        listen = 127.0.0.1:0
        port-file = %s/oss.addr
        """ % (ost0, ost1, mdt, workdir))
    r = run([OSS_BIN, "--config", oss_conf, "--format"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "formatted OST in %s for file system cfgfs\nformatted OST in %s for file system cfgfs\n" % (
        ost0, ost1)
    return workdir, mds_conf, oss_conf


class Server:
    def __init__(self, argv, log_path, env=None):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.p = subprocess.Popen(argv, stdout=self.log, stderr=self.log, env=env)

    def text(self):
        return read(self.log_path)

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
        rc = self.p.wait(timeout=60)
        self.log.close()
        return rc


def serving(server, pattern, timeout=30):
    ok = wait_until(lambda: re.search(pattern, server.text()) or server.p.poll() is not None, timeout, 0.05)
    assert ok and server.p.poll() is None, "not serving (exit %r):\n%s" % (server.p.poll(), server.text())
    return re.search(pattern, server.text())


def test_the_servers_run_from_their_config_files_and_flags_override_them(formatted):
    d, mds_conf, oss_conf = formatted
    mds = Server([MDS_BIN, "--config", mds_conf], os.path.join(d, "mds.log"))
    oss = None
    try:
        assert wait_until(lambda: os.path.exists(os.path.join(d, "mds.addr")) or mds.p.poll() is not None, 30)
        assert mds.p.poll() is None, mds.text()
        mds_addr = read(os.path.join(d, "mds.addr")).strip()
        assert re.fullmatch(r"127\.0\.0\.1:\d+", mds_addr)
        assert " INFO: " not in mds.text()  # log-level = warn came from the file
        # The file's two OSTs, and --mds given only as a flag.
        oss = Server([OSS_BIN, "--config", oss_conf, "--mds", mds_addr], os.path.join(d, "oss.log"))
        serving(oss, r"serving 2 OST\(s\) on 127\.0\.0\.1:\d+")
        assert oss.stop() == 0
        # --ost on the command line replaces the file's list: one OST served, not three.
        oss = Server([OSS_BIN, "--config", oss_conf, "--mds", mds_addr, "--ost", os.path.join(d, "ost1")],
                     os.path.join(d, "oss2.log"))
        serving(oss, r"serving 1 OST\(s\) on 127\.0\.0\.1:\d+")
        # A single-valued flag overrides the file's value: the log level.
        assert oss.stop() == 0
        oss = Server([OSS_BIN, "--config", oss_conf, "--mds", mds_addr, "--log-level=error"],
                     os.path.join(d, "oss3.log"))
        assert wait_until(lambda: os.path.exists(os.path.join(d, "oss.addr")), 10)
        assert oss.p.poll() is None
        assert "INFO:" not in oss.text()
    finally:
        if oss:
            oss.stop()
        mds.stop()


@pytest.mark.parametrize("body,message", [
    ("mdt = /x\nbogus = 1\n", "{conf}:2: unknown setting 'bogus' (`loom-mds --help` lists them, without their --)"),
    ("mdt = /x\nformat = yes\n", "{conf}:2: format is not a setting: give --format on the command line"),
    ("replace = yes\n", "{conf}:1: replace is not a setting: give --replace on the command line"),
    ("# c\nroot-squash = maybe\n", "{conf}:2: root-squash takes yes or no, not 'maybe'"),
    ("listen =\n", "{conf}:1: listen needs a value"),
    ("mdt = /a\n\nmdt = /b\n", "{conf}:3: mdt is set a second time"),
    ("just words\n", "{conf}:1: not a setting (NAME = VALUE): 'just words'"),
    ("config = /etc/other.conf\n", "{conf}:1: unknown setting 'config'"),
])
def test_a_bad_config_file_is_refused_with_its_line(workdir, body, message):
    conf = os.path.join(workdir, "mds.conf")
    with open(conf, "w") as f:
        f.write(body)
    r = run([MDS_BIN, "--config", conf])
    assert r.returncode == 2
    assert r.stderr.startswith("loom-mds: " + message.format(conf=conf)), r.stderr


def test_a_missing_config_file_or_value_is_an_error(workdir):
    missing = os.path.join(workdir, "nope.conf")
    r = run([OSS_BIN, "--config", missing])
    assert r.returncode == 2
    assert r.stderr == "loom-oss: cannot read the config file %s: No such file or directory\n" % missing
    r = run([OSS_BIN, "--ost", workdir, "--config"])
    assert r.returncode == 2
    assert "loom-oss: --config needs a FILE" in r.stderr or "requires an argument" in r.stderr


def test_a_server_refuses_a_target_of_another_file_system(formatted):
    d, mds_conf, oss_conf = formatted
    r = run([MDS_BIN, "--config", mds_conf, "--fsname", "other"])
    assert r.returncode == 1
    assert "the MDT in %s/mdt belongs to file system cfgfs, not other (--fsname)" % d in r.stderr
    r = run([OSS_BIN, "--config", oss_conf, "--mds", "127.0.0.1:1", "--fsname", "other"])
    assert r.returncode == 1
    assert "the OST in %s/ost0 belongs to file system cfgfs, not other (--fsname)" % d in r.stderr


def test_under_systemd_lines_carry_the_journal_priority(formatted):
    """systemd says stderr is the journal with JOURNAL_STREAM=DEV:INODE: lines then start with
    "<N>" (journald's priority) and carry no time stamp of their own."""
    d, mds_conf, _ = formatted
    log_path = os.path.join(d, "journal.log")
    open(log_path, "w").close()
    st = os.stat(log_path)
    env = dict(os.environ, JOURNAL_STREAM="%d:%d" % (st.st_dev, st.st_ino))
    mds = Server([MDS_BIN, "--config", mds_conf, "--log-level", "info"], log_path, env=env)
    try:
        serving(mds, r"file system cfgfs")
    finally:
        assert mds.stop() == 0
    lines = mds.text().splitlines()
    assert lines and all(re.match(r"<[0-7]>(ERROR|WARN|INFO|DEBUG): ", ln) for ln in lines), lines
    assert any(ln.startswith("<6>INFO: file system cfgfs: MDT ") for ln in lines), lines
    # Not the journal (another file's inode): the usual time-stamped lines.
    other = os.path.join(d, "plain.log")
    mds = Server([MDS_BIN, "--config", mds_conf, "--log-level", "info"], other, env=env)
    try:
        serving(mds, r"file system cfgfs")
    finally:
        mds.stop()
    # (--log-level info overrides the file's warn)
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z loom-mds\[\d+\] INFO: ", mds.text()), mds.text()


SYSLOG_PROBE = r"""
import os, socket, subprocess, sys
mds, conf, out = sys.argv[1:4]
# A private /dev (this process is in its own mount namespace) with a syslog socket of our own.
subprocess.run(["mount", "-t", "tmpfs", "loom-test-dev", "/dev"], check=True)
os.mknod("/dev/null", 0o20666, os.makedev(1, 3))
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/dev/log")
s.settimeout(30)
with open(out + "/syslog-probe.log", "w") as log:
    p = subprocess.Popen([mds, "--config", conf, "--log-syslog", "--log-level", "info"], stdout=log, stderr=log)
got = []
try:
    while not any(b"serving on" in g for g in got):
        try:
            got.append(s.recv(4096))
        except TimeoutError:
            sys.exit("no syslog line said 'serving on': %r\n%s" % (got, open(out + "/syslog-probe.log").read()))
finally:
    p.terminate()
    p.wait()
sys.stdout.write("\n".join(g.decode() for g in got))
"""


def test_log_syslog_sends_each_line_to_syslog_as_a_daemon(formatted):
    d, mds_conf, _ = formatted
    r = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable, "-c", SYSLOG_PROBE,
                        MDS_BIN, mds_conf, d], capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    # <30> is facility daemon (3 * 8) at priority info (6); syslog adds the name and pid.
    assert re.search(r"^<30>.*loom-mds\[\d+\]: file system cfgfs: MDT \S+, serving on 127\.0\.0\.1:\d+",
                     r.stdout, re.M), r.stdout


@pytest.mark.parametrize("prog,binary,who", [("loom-mds", MDS_BIN, "MDS"), ("loom-oss", OSS_BIN, "OSS")])
def test_operations_md_documents_every_setting_key_by_key(prog, binary, who):
    doc = read(os.path.join(REPO, "docs", "operations.md"))
    rows = dict(re.findall(r"^\| `([a-z-]+)` \| (MDS|OSS|both) \|", doc, re.M))
    opts = set(re.findall(r"^\s+--([a-z-]+)", run([binary, "--help"]).stdout, re.M)) - {"config", "version", "format",
                                                                                       "replace"}
    missing = sorted(o for o in opts if rows.get(o) not in (who, "both"))
    assert not missing, "docs/operations.md's table of settings lacks %s for %s" % (missing, prog)


def test_a_key_file_that_cannot_be_read_is_named_by_every_program(workdir):
    missing = os.path.join(workdir, "no.key")
    mdt = os.path.join(workdir, "mdt")
    assert run([MDS_BIN, "--format", "--fsname", "k", "--mdt", mdt]).returncode == 0
    cases = [
        ([MDS_BIN, "--mdt", mdt, "--listen", "127.0.0.1:0", "--key", missing], "cannot read the file system key %s"),
        ([OSS_BIN, "--ost", workdir, "--mds", "127.0.0.1:1", "--key", missing], "cannot read the file system key %s"),
        ([LOOM, "--fs", "127.0.0.1:1", "--key", missing, "df"], "loom: cannot read the key file %s"),
        ([MOUNT_BIN, "127.0.0.1:1:/k", os.path.join(workdir, "mnt"), "-o", "key=" + missing],
         "loom-mount: cannot read the key file %s"),
    ]
    os.mkdir(os.path.join(workdir, "mnt"))
    for argv, said in cases:
        r = run(argv)
        assert r.returncode != 0
        assert (said % missing) + ": No such file or directory" in r.stderr, (argv[0], r.stderr)

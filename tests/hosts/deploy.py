"""Hosts of a HostBed that run Loom as an admin installs it: from an installed tree, with their
own /etc, /srv and /mnt, through the commands of docs/operations.md ("A cluster of three hosts").

    bed = DeployBed(build)            # `meson install --destdir` of the build into a scratch root
    h = bed.add_deploy_host("mds1")
    bed.write(h, "/etc/loom/mds.conf", text)
    bed.sh(h, "loom-mds --config /etc/loom/mds.conf --format")

Each host is a network namespace of the bed and a mount namespace of its own, held open by a
process that sleeps in it. In that mount namespace the installed tree is laid over the machine's
own (overlayfs, read-only: the installed /usr/local and /sbin over the machine's), /etc is the
machine's with a writable layer of the host's own, /srv is the host's directory and /mnt an empty
tmpfs. So `mount -a` reads the host's /etc/fstab, mount(8) finds the installed /sbin/mount.loom,
and `ldconfig` writes the host's own /etc/ld.so.cache, as on a machine of its own.

There is no systemd in the bed: `systemctl enable --now UNIT` starts the installed unit's
ExecStart (its %i filled in, its ConditionPathExists honoured) with stderr to the host's log, as
the journal would take it (JOURNAL_STREAM set). `scp -p FILE HOST:PATH` copies into the other
host's view of PATH, keeping the mode. Both are stand-ins written into a directory that comes
first in PATH, for these two commands only.
"""
import os
import shutil
import subprocess
import tempfile

from hostbed import HostBed

SYSTEMCTL = r'''#!/usr/bin/python3
"""The bed's stand-in for systemctl: enable --now UNIT, start UNIT, stop UNIT."""
import configparser, os, shlex, signal, subprocess, sys, time
args = [a for a in sys.argv[1:] if not a.startswith("-")]
if len(args) != 2 or args[0] not in ("enable", "start", "stop"):
    sys.exit("systemctl (test bed): only enable --now, start and stop UNIT")
verb, unit = args
if verb == "enable" and "--now" not in sys.argv:
    sys.exit(0)
name = unit if unit.endswith(".service") else unit + ".service"
inst = ""
if "@" in name:
    base, inst = name[:-len(".service")].split("@", 1)
    path = os.path.join(os.environ["LOOM_BED_UNITDIR"], base + "@.service")
else:
    path = os.path.join(os.environ["LOOM_BED_UNITDIR"], name)
if not os.path.exists(path):
    sys.exit("Failed to start %s: Unit %s not found." % (name, name))
pidfile = os.path.join(os.environ["LOOM_BED_LOGDIR"], name + ".pid")
if verb == "stop":
    if os.path.exists(pidfile):
        try:
            os.kill(int(open(pidfile).read()), signal.SIGTERM)
        except ProcessLookupError:
            pass
    sys.exit(0)
u = configparser.ConfigParser(strict=False, interpolation=None, comment_prefixes=("#", ";"))
u.optionxform = str
u.read(path)
fill = lambda s: s.replace("%i", inst)
cond = u.get("Unit", "ConditionPathExists", fallback=None)
if cond and not os.path.exists(fill(cond)):
    print("%s: condition ConditionPathExists=%s not met, not started" % (name, fill(cond)))
    sys.exit(0)
argv = shlex.split(fill(u.get("Service", "ExecStart")))
log_path = os.path.join(os.environ["LOOM_BED_LOGDIR"], name + ".log")
log = open(log_path, "ab")
st = os.fstat(log.fileno())
env = dict(os.environ, JOURNAL_STREAM="%d:%d" % (st.st_dev, st.st_ino))
nofile = u.get("Service", "LimitNOFILE", fallback=None)
def limits():
    if nofile:
        import resource
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        n = min(int(nofile), hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd="/",
                     start_new_session=True, preexec_fn=limits)
open(pidfile, "w").write(str(p.pid))
time.sleep(0.5)
if p.poll() is not None:
    sys.exit("%s: failed: %s exited %d:\n%s" % (name, argv[0], p.returncode, open(log_path).read()))
'''

SCP = r'''#!/usr/bin/python3
"""The bed's stand-in for scp -p FILE HOST:PATH: the bytes and the mode, into HOST's view."""
import os, subprocess, sys
args = [a for a in sys.argv[1:] if a != "-p"]
if len(args) != 2 or ":" not in args[1]:
    sys.exit("scp (test bed): only scp -p FILE HOST:PATH")
src, (host, dst) = args[0], args[1].split(":", 1)
holders = dict(kv.split("=") for kv in os.environ["LOOM_BED_HOLDERS"].split(","))
if host not in holders:
    sys.exit("ssh: Could not resolve hostname %s: Name or service not known" % host)
data = open(src, "rb").read()
mode = os.stat(src).st_mode & 0o7777 if "-p" in sys.argv else 0o644
r = subprocess.run(["nsenter", "-t", holders[host], "-m", "--", "sh", "-c",
                    'umask 077 && cat > "$1" && chmod %o "$1"' % mode, "scp", dst], input=data)
sys.exit(r.returncode)
'''


def layout(tree, etc_up, etc_work):
    """Shell lines that, in a mount namespace of its own, lay the installed tree over the
    machine's (each installed dir over the machine's, read-only) and give it a writable /etc."""
    subs = ["usr/local"] + ["usr/" + p for p in ("bin", "sbin", "lib", "share", "include")] + ["sbin", "lib"]
    lines = ["mount -t overlay loom-installed -o lowerdir=%s:%s %s" % (os.path.join(tree, sub), os.path.realpath("/" + sub),
                                                                     os.path.realpath("/" + sub))
             for sub in subs if os.path.isdir(os.path.join(tree, sub)) and os.path.isdir("/" + sub)]
    return lines + ["mount -t overlay loom-etc -o lowerdir=/etc,upperdir=%s,workdir=%s /etc" % (etc_up, etc_work)]


def install(build, tree):
    """meson install of the build (as built: --no-rebuild) under tree."""
    r = subprocess.run(["meson", "install", "-C", build, "--destdir", tree, "--no-rebuild", "--quiet"],
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise RuntimeError("meson install failed:\n" + r.stdout + r.stderr)


def run_installed(tree, scratch, script, timeout=120):
    """script, as root, in a mount namespace where the installed tree is laid over the machine's
    (a writable /etc of its own under scratch). A CompletedProcess, text."""
    up, work = os.path.join(scratch, "etc-up"), os.path.join(scratch, "etc-work")
    os.makedirs(up, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    lines = ["set -e"] + layout(tree, up, work) + ["cd /", script]
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", "\n".join(lines)],
                          capture_output=True, text=True, timeout=timeout)


class DeployHost:
    def __init__(self, host, root, holder):
        self.host = host
        self.name = host.name
        self.root = root          # the host's own files: etc (the writable layer), srv, log
        self.holder = holder      # the process that keeps its mount namespace

    @property
    def log_dir(self):
        return os.path.join(self.root, "log")


class DeployBed(HostBed):
    def __init__(self, build, prefix=None):
        self.dir = tempfile.mkdtemp(prefix="loom-deploy-")
        self.tree = os.path.join(self.dir, "installed")
        self.deploy_hosts = {}
        try:
            super().__init__(prefix)
            install(build, self.tree)
            self.shims = os.path.join(self.dir, "shims")
            os.makedirs(self.shims)
            for name, text in (("systemctl", SYSTEMCTL), ("scp", SCP)):
                with open(os.path.join(self.shims, name), "w") as f:
                    f.write(text)
                os.chmod(os.path.join(self.shims, name), 0o755)
        except BaseException:
            self.close()
            raise

    def unit_dir(self):
        for dirpath, _, files in os.walk(self.tree):
            if "loom-mds.service" in files:
                return dirpath
        raise RuntimeError("no loom-mds.service in the installed tree")

    def add_deploy_host(self, name):
        h = self.add_host(name)
        root = os.path.join(self.dir, "hosts", name)
        for d in ("etc-up", "etc-work", "srv", "log"):
            os.makedirs(os.path.join(root, d))
        setup = ["set -e"] + layout(self.tree, os.path.join(root, "etc-up"), os.path.join(root, "etc-work")) + [
            "mount --bind %s/srv /srv" % root,
            "mount -t tmpfs loom-mnt /mnt",
            "echo ready",
            "exec sleep 1000000",
        ]
        holder = self.popen(h, ["unshare", "-m", "--propagation", "private", "sh", "-c", "\n".join(setup)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = holder.stdout.readline()
        if line.strip() != "ready":
            holder.kill()
            raise RuntimeError("host %s: cannot lay out its namespace: %s" % (name, holder.stderr.read()))
        dh = DeployHost(h, root, holder)
        self.deploy_hosts[name] = dh
        return dh

    def write_hosts(self):
        """Every host's /etc/hosts names every host, as DNS would."""
        text = "127.0.0.1 localhost\n" + "".join(
            "%s %s\n" % (dh.host.addr, dh.name) for dh in self.deploy_hosts.values())
        for dh in self.deploy_hosts.values():
            self.write(dh, "/etc/hosts", text)

    def argv(self, dh, argv):
        env = ["env", "-i", "PATH=%s:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" % self.shims,
               "HOME=/root", "LANG=C.UTF-8", "LOOM_BED_UNITDIR=%s" % self.unit_dir(),
               "LOOM_BED_LOGDIR=%s" % dh.log_dir,
               "LOOM_BED_HOLDERS=%s" % ",".join("%s=%d" % (n, d.holder.pid) for n, d in self.deploy_hosts.items())]
        return ["nsenter", "-t", str(dh.holder.pid), "-m", "-n", "--wd=/", "--"] + env + list(argv)

    def sh(self, dh, script, check=True, timeout=180):
        """Runs a shell script on the host as root would at its prompt: (stdout, stderr)."""
        r = subprocess.run(self.argv(dh, ["sh", "-e", "-c", script]), capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode:
            raise AssertionError("on %s, exit %d:\n%s\nstdout:\n%s\nstderr:\n%s\nlogs:\n%s" % (
                dh.name, r.returncode, script, r.stdout, r.stderr, self.logs(dh)))
        return r

    def write(self, dh, path, text, mode=0o644):
        """A file of the host's own (under its /etc, /srv ...), made as an editor would."""
        subprocess.run(self.argv(dh, ["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1" && chmod %o "$1"'
                                      % mode, "write", path]), input=text, text=True, check=True, timeout=60)

    def logs(self, dh):
        out = []
        for f in sorted(os.listdir(dh.log_dir)):
            if f.endswith(".log"):
                with open(os.path.join(dh.log_dir, f), errors="replace") as fh:
                    out.append("--- %s %s\n%s" % (dh.name, f, fh.read()[-3000:]))
        return "\n".join(out)

    def close(self):
        # Unmount what the clients mounted (in their namespaces) before their processes go.
        for dh in list(getattr(self, "deploy_hosts", {}).values()):
            if dh.holder.poll() is None:
                subprocess.run(self.argv(dh, ["sh", "-c", "grep -q ' /mnt/loom ' /proc/self/mounts && "
                                                          "umount /mnt/loom || true"]),
                               capture_output=True, timeout=60)
        try:
            super().close()
        finally:
            shutil.rmtree(getattr(self, "dir", "/nonexistent"), ignore_errors=True)

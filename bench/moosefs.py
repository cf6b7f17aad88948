"""A private MooseFS for bench/run.py's peer side: one mfsmaster and four mfschunkservers (as
Loom's one MDS and four OSS), mounted with mfsmount, all under one temporary directory.

Uses Debian's packages (moosefs-master, moosefs-chunkserver, moosefs-client; 3.0.117 in Debian
12), never their services or files: every daemon gets its own configuration, data directory and
free ports, listens on 127.0.0.1 only and runs in the foreground as a child of the bench, so that
down() can stop what up() started, in order, whatever happened in between.

    fs = MooseFS(os.path.join(tmp, "moosefs"))
    try:
        fs.up()                  # then fs.mnt is a MooseFS mount
        ...
    finally:
        fs.down()

MooseFS refuses loopback between chunkservers and master: a chunkserver will not connect to a
master address in 127.0.0.0/8, and the master drops a chunkserver whose address (which it hands
to clients) is in 127.0.0.0/8. Both checks are passed without leaving loopback: chunkservers
bind 127.0.0.1 and connect to 0.0.0.0, which Linux sends to the bound source address
(127.0.0.1); the master remaps 127.0.0.1 to 0.0.0.0 (REMAP_* in mfsmaster.cfg, meant for
clients on another network), and mfsmount's unbound connections to 0.0.0.0 go to 127.0.0.1. So
every connection is 127.0.0.1 to 127.0.0.1.
"""
import os
import shutil
import signal
import socket
import subprocess
import time

PACKAGES = ("moosefs-master", "moosefs-chunkserver", "moosefs-client")
PROGRAMS = ("mfsmaster", "mfschunkserver", "mfsmount")
SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin"])
EMPTY_METADATA = "/var/lib/mfs/metadata.mfs.empty"    # shipped by moosefs-master


def prog(name):
    return shutil.which(name, path=SEARCH) or name


def missing():
    """The Debian packages whose program is not installed (empty: MooseFS can run)."""
    return [pkg for pkg, program in zip(PACKAGES, PROGRAMS) if not shutil.which(program, path=SEARCH)]


def version():
    """mfsmaster's version, e.g. '3.0.117-1' (None if it cannot tell)."""
    try:
        p = subprocess.run([prog("mfsmaster"), "-v"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = (p.stdout + p.stderr).strip()        # "version: 3.0.117-1 ; build: 1341"
    return out.split(";")[0].replace("version:", "").strip() or None


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


def free_ports(n):
    """n TCP ports free on 127.0.0.1 now (all held at once, so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def write_cfg(path, settings):
    with open(path, "w") as f:
        f.write("# written by bench/moosefs.py for one bench run\n")
        for k, v in settings.items():
            f.write("%s = %s\n" % (k, v))


# Settings every daemon shares. NICE_LEVEL: MooseFS raises its daemons to -19 by default, which
# on 2 cores would take the CPU from the benchmark's own processes and Loom's servers (nice 0);
# the same footing for both. Root: the bench runs as root, so no files change owner.
# DISABLE_OOM_KILLER: a benchmark's daemons are no reason to shield processes from the OOM killer.
COMMON = {"WORKING_USER": "root", "WORKING_GROUP": "root", "NICE_LEVEL": 0,
          "DISABLE_OOM_KILLER": 0, "LOCK_MEMORY": 0}


class MooseFS:
    """One master and `chunkservers` chunkservers under root, mounted on root/mnt."""

    def __init__(self, root, chunkservers=4):
        self.root = root
        self.n = chunkservers
        self.mnt = os.path.join(root, "mnt")
        self.procs = []                        # [(name, Popen)], in start order
        self.mount_proc = None

    # ---- starting ----

    def up(self):
        os.makedirs(self.mnt)
        ports = free_ports(3 + self.n)
        self.ml_port, self.cs_port, self.cl_port = ports[:3]
        self._start_master()
        for i, port in enumerate(ports[3:]):
            self._start_chunkserver(i, port)
        self._wait_registered()
        self._mount()
        # Goal 1 (one copy of each chunk, the default is 2) to compare with Loom's unreplicated
        # files; trash time 0 so that an unlink removes the file, as on Loom and the local
        # folder (by default MooseFS keeps deleted files in its trash for a day).
        for cmd in ([prog("mfssetgoal"), "-r", "1", self.mnt],
                    [prog("mfssettrashtime"), "-r", "0", self.mnt]):
            self._tool(cmd)

    def _spawn(self, name, argv):
        log = open(os.path.join(self.root, name + ".log"), "wb")
        # A session of its own: Ctrl-C on the terminal reaches the bench, which stops the
        # daemons in order (mount, chunkservers, master), instead of all of them at once.
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        log.close()
        return p

    def _start_master(self):
        d = os.path.join(self.root, "master")
        os.makedirs(d)
        # mfsmaster starts only from an existing metadata file; a new file system's is 8 bytes.
        if os.path.exists(EMPTY_METADATA):
            shutil.copyfile(EMPTY_METADATA, os.path.join(d, "metadata.mfs"))
        else:
            with open(os.path.join(d, "metadata.mfs"), "wb") as f:
                f.write(b"MFSM NEW")
        with open(os.path.join(d, "mfsexports.cfg"), "w") as f:
            f.write("127.0.0.1\t/\trw,alldirs,admin,maproot=0:0\n")
        open(os.path.join(d, "mfstopology.cfg"), "w").close()
        cfg = os.path.join(d, "mfsmaster.cfg")
        write_cfg(cfg, dict(COMMON, **{
            "DATA_PATH": d,
            "EXPORTS_FILENAME": os.path.join(d, "mfsexports.cfg"),
            "TOPOLOGY_FILENAME": os.path.join(d, "mfstopology.cfg"),
            "MATOML_LISTEN_HOST": "127.0.0.1", "MATOML_LISTEN_PORT": self.ml_port,
            "MATOCS_LISTEN_HOST": "127.0.0.1", "MATOCS_LISTEN_PORT": self.cs_port,
            "MATOCL_LISTEN_HOST": "127.0.0.1", "MATOCL_LISTEN_PORT": self.cl_port,
            # See the module's docstring: chunkservers are told to clients as 0.0.0.0.
            "REMAP_BITS": 32, "REMAP_SOURCE_IP_CLASS": "127.0.0.1",
            "REMAP_DESTINATION_IP_CLASS": "0.0.0.0",
        }))
        self.master_log = os.path.join(self.root, "master.log")
        argv = [prog("mfsmaster"), "-f", "-c", cfg, "start"]
        self.procs.append(("master", self._spawn("master", argv)))
        self._wait(lambda: self._listening(self.cl_port), 60, "mfsmaster to listen")

    def _start_chunkserver(self, i, port):
        d = os.path.join(self.root, "cs%d" % i)
        hdd = os.path.join(d, "hdd")
        os.makedirs(hdd)
        with open(os.path.join(d, "mfshdd.cfg"), "w") as f:
            f.write(hdd + "\n")
        cfg = os.path.join(d, "mfschunkserver.cfg")
        write_cfg(cfg, dict(COMMON, **{
            "DATA_PATH": d,
            "HDD_CONF_FILENAME": os.path.join(d, "mfshdd.cfg"),
            "BIND_HOST": "127.0.0.1",
            "MASTER_HOST": "0.0.0.0",          # = 127.0.0.1 from a socket bound there
            "MASTER_PORT": self.cs_port,
            "MASTER_RECONNECTION_DELAY": 1,
            "CSSERV_LISTEN_HOST": "127.0.0.1", "CSSERV_LISTEN_PORT": port,
        }))
        name = "chunkserver%d" % i
        argv = [prog("mfschunkserver"), "-f", "-c", cfg, "start"]
        self.procs.append((name, self._spawn(name, argv)))

    def _wait_registered(self):
        def registered():
            with open(self.master_log, "rb") as f:
                return f.read().count(b"chunkserver register end") >= self.n
        self._wait(registered, 60, "%d chunkservers to register with mfsmaster" % self.n)

    def _mount(self):
        # mfsmount's defaults otherwise (caches, write-back, fsync before close), as a user gets
        # them; -n: no allow_other, which only root uses here.
        argv = [prog("mfsmount"), "-f", "-n", "-H", "127.0.0.1", "-P", str(self.cl_port),
                "-o", "mfsnice=0", self.mnt]
        self.mount_proc = self._spawn("mfsmount", argv)
        self._wait(lambda: is_mounted(self.mnt), 60, "mfsmount to mount %s" % self.mnt,
                   [("mfsmount", self.mount_proc)])

    def _tool(self, argv):
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if p.returncode:
            raise RuntimeError("%s failed: %s" % (" ".join(argv), (p.stdout + p.stderr).strip()))

    @staticmethod
    def _listening(port):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    def _wait(self, cond, timeout, what, extra=()):
        deadline = time.monotonic() + timeout
        while not cond():
            for name, p in list(self.procs) + list(extra):
                if p.poll() is not None:
                    raise RuntimeError("MooseFS %s exited (status %s) while waiting for %s:\n%s"
                                       % (name, p.returncode, what, self.log_tail(name)))
            if time.monotonic() > deadline:
                raise RuntimeError("MooseFS: timed out waiting for %s" % what)
            time.sleep(0.1)

    def log_tail(self, name, lines=15):
        try:
            with open(os.path.join(self.root, name + ".log"), "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.replace("\0", "").splitlines()[-lines:])

    # ---- stopping ----

    def down(self):
        """Unmounts, then stops the chunkservers and the master (SIGTERM, then SIGKILL after a
        while). Returns False if the mount point is still mounted."""
        if is_mounted(self.mnt):
            p = subprocess.run(["umount", self.mnt], capture_output=True, timeout=60)
            if p.returncode:
                subprocess.run(["umount", "-l", self.mnt], capture_output=True, timeout=60)
        if self.mount_proc is not None:
            stop([self.mount_proc], 20)
        # The chunkservers (all at once: each takes about a second) before the master, which
        # then stores its metadata and exits.
        stop([p for name, p in self.procs if name != "master"], 20)
        stop([p for name, p in self.procs if name == "master"], 60)
        self.procs = []
        self.mount_proc = None
        return not is_mounted(self.mnt)


def stop(procs, grace):
    """SIGTERM to every process, and SIGKILL to those still running after grace seconds."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=30)

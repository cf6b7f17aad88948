"""A Loom file system spread over the hosts of a HostBed: the MDS on one host, each OSS on its
own, and FUSE mounts made by client hosts.

    with LoomBed(build, osts=4, oss_rate_mib=100) as lb:
        mnt = lb.mount(lb.add_client("c0"))
        ...

Each server keeps its files under a temporary directory, removed at close().
"""
import os
import re
import shutil
import subprocess
import tempfile
import time

from hostbed import HostBed

MDS_PORT = 9900
OSS_PORT = 9901
FSNAME = "loom"


class LoomBed(HostBed):
    """mds_pair: the MDT is served by a failover pair, hosts mds and mds2 (one at a time, with
    multi-mount protection every mmp_ms); OSSs, mounts and the tool list both addresses.
    replicated: hosts mds and mds2 each keep an MDT of their own (a replicated MDT), and a host
    etcd runs etcd, which decides which serves; the MDS on mds starts first (active)."""

    def __init__(self, build, osts, oss_rate_mib=None, prefix=None, mds_pair=False, mmp_ms=1000,
                 replicated=False):
        self.build = os.path.abspath(build)
        self.bin = {name: os.path.join(self.build, "src", sub, name) for sub, name in
                    (("mds", "loom-mds"), ("oss", "loom-oss"), ("fuse", "loom-mount"), ("tools", "loom"))}
        self.dir = tempfile.mkdtemp(prefix="loom-bed-")
        self.key = os.path.join(self.dir, "fs.key")
        self.clients = []
        self.oss = []
        try:
            super().__init__(prefix)
            self.replicated = replicated
            self.etcd = self._start_etcd() if replicated else None
            self.mds = self.add_host("mds")
            self.mds2 = self.add_host("mds2") if mds_pair or replicated else None
            self.mmp_ms = mmp_ms if mds_pair else 0
            self._start_mds()
            for i in range(osts):
                self.add_oss(oss_rate_mib)
            self.wait_osts(osts)
        except BaseException:
            self.close()
            raise

    # ---- servers ----

    def _log(self, name):
        return open(os.path.join(self.dir, name + ".log"), "ab")

    def _start_etcd(self):
        """etcd (Debian's etcd-server) alone on a host of its own."""
        h = self.add_host("etcd")
        self.etcd_url = "http://%s:2379" % h.addr
        self.popen(h, ["/usr/bin/etcd", "--name", "bed", "--data-dir", os.path.join(self.dir, "etcd"),
                       "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
                       "--listen-peer-urls", "http://%s:2380" % h.addr,
                       "--initial-advertise-peer-urls", "http://%s:2380" % h.addr,
                       "--initial-cluster", "bed=http://%s:2380" % h.addr],
                   stdout=self._log("etcd"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while self.etcdctl(h, "endpoint", "health").returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError("etcd did not come up:\n" + self.logs())
            time.sleep(0.2)
        return h

    def etcdctl(self, host, *args):
        """etcdctl run on host against the bed's etcd."""
        return self.run(host, ["etcdctl", "--endpoints", self.etcd_url] + list(args),
                        env=dict(os.environ, ETCDCTL_API="3"))

    def etcd_get(self, key):
        p = self.etcdctl(self.etcd, "get", "--print-value-only", key)
        return p.stdout.strip() if p.returncode == 0 else None

    def mdt_of(self, host):
        return os.path.join(self.dir, "mdt-" + host.name) if self.replicated else os.path.join(self.dir, "mdt")

    def _start_mds(self):
        mdt = self.mdt_of(self.mds)
        subprocess.run([self.bin["loom-mds"], "--format", "--fsname", FSNAME, "--mdt", mdt, "--key", self.key],
                       check=True, capture_output=True, timeout=60)
        self.fs = ",".join("%s:%d" % (h.addr, MDS_PORT) for h in (self.mds, self.mds2) if h)
        self.start_mds(self.mds)
        if self.replicated:
            deadline = time.monotonic() + 60
            while not self.etcd_get("/loom/%s/leader" % FSNAME):
                if time.monotonic() > deadline:
                    raise RuntimeError("the first MDS did not become active:\n" + self.logs())
                time.sleep(0.1)
            self.start_mds(self.mds2)

    def start_mds(self, host):
        """The MDS on host (either of a pair's): its Popen."""
        argv = [self.bin["loom-mds"], "--mdt", self.mdt_of(host),
                "--listen", "%s:%d" % (host.addr, MDS_PORT), "--key", self.key]
        if self.mmp_ms:
            argv += ["--mmp-interval", str(self.mmp_ms)]
        if self.replicated:
            argv += ["--etcd", self.etcd_url, "--fsname", FSNAME]
        return self.popen(host, argv, stdout=self._log("mds-" + host.name), stderr=subprocess.STDOUT)

    def add_oss(self, rate_mib=None):
        """A new OSS host with one OST, started at once (also while clients are mounted)."""
        k = len(self.oss)
        h = self.add_host("oss%d" % k, rate_mib)
        ost = os.path.join(self.dir, "ost%d" % k)
        subprocess.run([self.bin["loom-oss"], "--format", "--fsname", FSNAME, "--ost", ost, "--index", str(k)],
                       check=True, capture_output=True, timeout=60)
        self.popen(h, [self.bin["loom-oss"], "--ost", ost, "--mds", self.fs,
                       "--listen", "%s:%d" % (h.addr, OSS_PORT), "--key", self.key, "--log-level", "debug"],
                   stdout=self._log("oss%d" % k), stderr=subprocess.STDOUT)
        self.oss.append(h)
        return h

    def loom(self, host, *args, check=True):
        """The loom tool, run on host (it speaks to the MDS and OSSs over the bed's network)."""
        env = dict(os.environ, LOOM_FS=self.fs, LOOM_KEY_FILE=self.key)
        p = self.run(host, [self.bin["loom"]] + list(args), env=env)
        if check and p.returncode:
            raise RuntimeError("loom %s on %s failed (%d): %s%s" % (" ".join(args), host.name, p.returncode,
                                                                   p.stdout, p.stderr))
        return p

    def wait_osts(self, n, timeout=60):
        """Waits until the MDS has n OSTs that are up (`loom df` from the MDS's host)."""
        deadline = time.monotonic() + timeout
        while True:
            p = self.loom(self.mds, "df", check=False)
            up = len(re.findall(r"\[OST:\d+\]", p.stdout)) - p.stdout.count("inactive")
            if p.returncode == 0 and up >= n:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("only %d of %d OSTs up after %d s:\n%s%s\n%s" %
                                   (up, n, timeout, p.stdout, p.stderr, self.logs()))
            time.sleep(0.2)

    def logs(self):
        out = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith(".log"):
                with open(os.path.join(self.dir, name), errors="replace") as f:
                    out.append("---- %s ----\n%s" % (name, "".join(f.readlines()[-20:])))
        return "\n".join(out)

    # ---- clients ----

    def add_client(self, name=None, rate_mib=None):
        h = self.add_host(name or "c%d" % len(self.clients), rate_mib)
        self.clients.append(h)
        return h

    def mount(self, client, options=""):
        """Mounts the file system from client's network onto a new directory (visible to all)."""
        mnt = tempfile.mkdtemp(prefix="loom-bed-mnt-")
        opts = "key=" + self.key + ("," + options if options else "")
        self.popen(client, [self.bin["loom-mount"], "%s:/%s" % (self.fs, FSNAME), mnt, "-f", "-o", opts],
                   stdout=self._log("mount-" + client.name), stderr=subprocess.STDOUT)
        self.mounted(mnt)
        deadline = time.monotonic() + 30
        while not _is_fuse_mount(mnt):
            if time.monotonic() > deadline:
                raise RuntimeError("the mount of %s did not appear:\n%s" % (client.name, self.logs()))
            time.sleep(0.05)
        return mnt

    def close(self):
        try:
            super().close()
        finally:
            for path in getattr(self, "mounts", []):
                try:
                    os.rmdir(path)
                except OSError:
                    pass
            shutil.rmtree(self.dir, ignore_errors=True)


def _is_fuse_mount(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path and line.split()[2].startswith("fuse") for line in f)

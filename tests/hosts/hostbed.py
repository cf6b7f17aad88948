"""A test bed of hosts on one machine: Linux network namespaces joined by veth pairs to a bridge.

Each host is a network namespace with one interface, eth0, holding its own address in a private
range (10.209.X.0/24, X chosen per bed so that beds of concurrent runs do not meet). The bridge
lives in a namespace of its own, so nothing is created in the machine's own namespace and
nothing leaves the namespaces the bed made. A link may be shaped with tc's token-bucket filter
(tbf), in both directions, to emulate a cluster link of a given rate.

Processes run in a host with `nsenter --net`: they get the host's network but share the
machine's mount namespace, so a FUSE mount made by a client host is visible to the tests.

    with HostBed() as bed:
        mds = bed.add_host("mds")
        oss = bed.add_host("oss0", rate_mib=100)
        p = bed.popen(oss, ["loom-oss", ...])
        ...
    # everything stopped and removed, also when the body raised

Needs root, iproute2 (ip, tc) and util-linux (nsenter).
"""
import os
import random
import signal
import subprocess
import time

NETNS_DIR = "/run/netns"


def _run(argv, check=True):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if check and p.returncode:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(argv), p.returncode, p.stderr.strip()))
    return p


def available():
    """Whether this machine can make a bed: root, ip, tc and nsenter, and network namespaces."""
    if os.geteuid() != 0:
        return False
    for tool in ("ip", "tc", "nsenter"):
        if not any(os.access(os.path.join(d, tool), os.X_OK)
                   for d in os.environ.get("PATH", "/usr/sbin:/usr/bin").split(":") + ["/usr/sbin", "/sbin"]):
            return False
    return os.path.exists("/proc/self/ns/net")


class Host:
    def __init__(self, bed, name, index):
        self.bed = bed
        self.name = name
        self.netns = "%s-%s" % (bed.prefix, name)
        self.addr = "%s.%d" % (bed.subnet, index)
        self.veth = "v%s%d" % (bed.tag, index)   # this host's end is renamed eth0
        self.rate_mib = None

    def __repr__(self):
        return "Host(%s, %s)" % (self.name, self.addr)


class HostBed:
    """Hosts on one machine. Use as a context manager, or call close() in a finally."""

    def __init__(self, prefix=None):
        self.tag = "%04x" % random.randrange(0x10000)
        self.prefix = prefix or "loombed" + self.tag
        # 10.209.X.0/24: X from the tag, away from the addresses a machine usually has.
        self.subnet = "10.209.%d" % (int(self.tag, 16) % 250 + 1)
        self.switch = self.prefix + "-sw"
        self.hosts = {}
        self.procs = []
        self.mounts = []
        self._made = []                         # namespaces, in order of creation
        self._netns(self.switch)
        _run(self._in(self.switch, ["ip", "link", "add", "br0", "type", "bridge"]))
        _run(self._in(self.switch, ["ip", "link", "set", "br0", "up"]))
        _run(self._in(self.switch, ["ip", "link", "set", "lo", "up"]))

    # ---- building ----

    def _netns(self, name):
        _run(["ip", "netns", "add", name])
        self._made.append(name)

    @staticmethod
    def _in(netns, argv):
        return ["ip", "netns", "exec", netns] + argv

    def add_host(self, name, rate_mib=None):
        """A new host on the bridge; with rate_mib, its link is shaped to that many MiB/s each way."""
        if name in self.hosts:
            raise ValueError("host %s exists" % name)
        index = len(self.hosts) + 1
        if index > 250:
            raise ValueError("at most 250 hosts")
        h = Host(self, name, index)
        self._netns(h.netns)
        peer = h.veth + "p"
        _run(["ip", "link", "add", h.veth, "netns", h.netns, "type", "veth", "peer", "name", peer,
              "netns", self.switch])
        _run(self._in(self.switch, ["ip", "link", "set", peer, "master", "br0"]))
        _run(self._in(self.switch, ["ip", "link", "set", peer, "up"]))
        _run(self._in(h.netns, ["ip", "link", "set", h.veth, "name", "eth0"]))
        _run(self._in(h.netns, ["ip", "addr", "add", h.addr + "/24", "dev", "eth0"]))
        _run(self._in(h.netns, ["ip", "link", "set", "eth0", "up"]))
        _run(self._in(h.netns, ["ip", "link", "set", "lo", "up"]))
        self.hosts[name] = h
        if rate_mib:
            self.shape(h, rate_mib)
        return h

    def shape(self, h, rate_mib):
        """Shapes h's link to rate_mib MiB/s in each direction (tbf on both ends of its veth)."""
        rate = "%dkbit" % int(rate_mib * 1024 * 8 * 1.024)   # tc's kbit is 1000 bit
        # A burst of a few milliseconds of traffic: enough for a 1 MiB request to flow, small
        # enough that the rate holds over a fraction of a second.
        burst = "%dkb" % max(64, int(rate_mib * 1024 / 100))
        for ns, dev in ((h.netns, "eth0"), (self.switch, h.veth + "p")):
            _run(self._in(ns, ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
                               "burst", burst, "latency", "100ms"]))
        h.rate_mib = rate_mib

    # ---- running things ----

    def argv_in(self, h, argv):
        """argv run in host h's network, in the machine's own mount namespace."""
        return ["nsenter", "--net=%s/%s" % (NETNS_DIR, h.netns), "--"] + list(argv)

    def popen(self, h, argv, **kw):
        """Starts argv in host h; the bed stops it at close()."""
        kw.setdefault("start_new_session", True)
        p = subprocess.Popen(self.argv_in(h, argv), **kw)
        self.procs.append(p)
        return p

    def run(self, h, argv, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", 120)
        return subprocess.run(self.argv_in(h, argv), **kw)

    def kill_host(self, h):
        """Host h dies: every process in its network killed (SIGKILL), and its link down, so that
        its peers hear nothing more from it (no reset, no refusal)."""
        _run(self._in(h.netns, ["ip", "link", "set", "eth0", "down"]))
        for pid in _pids_in_netns(h.netns):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _wait_netns_empty(h.netns)

    def cut(self, a, b):
        """The link between hosts a and b fails silently, each way (as a dead switch port: no reset,
        no refusal; connections stall and dials time out): each sends the other's frames to a
        MAC address nobody has. Their links to every other host stay."""
        for x, y in ((a, b), (b, a)):
            _run(self._in(x.netns, ["ip", "neigh", "replace", y.addr, "lladdr", "02:00:00:00:00:01",
                                    "dev", "eth0", "nud", "permanent"]))

    def heal(self, a, b):
        """The link between a and b works again."""
        for x, y in ((a, b), (b, a)):
            _run(self._in(x.netns, ["ip", "neigh", "del", y.addr, "dev", "eth0"]), check=False)

    def revive_host(self, h):
        """h's link up again (its processes stay dead: start what it should run)."""
        _run(self._in(h.netns, ["ip", "link", "set", "eth0", "up"]))

    def mounted(self, path):
        """Records a mount the bed must take down at close()."""
        self.mounts.append(path)

    # ---- taking down ----

    def close(self):
        problems = []
        for path in reversed(getattr(self, "mounts", [])):
            if _is_mounted(path):
                if subprocess.run(["umount", path], capture_output=True, timeout=60).returncode:
                    subprocess.run(["umount", "-l", path], capture_output=True, timeout=60)
        procs = getattr(self, "procs", [])
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(10)
        # Processes of the bed's that were not started through it (a daemon that forked).
        made = getattr(self, "_made", [])
        for ns in made:
            for pid in _pids_in_netns(ns):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for ns in reversed(made):
            if _run(["ip", "netns", "delete", ns], check=False).returncode:
                problems.append(ns)
        self._made = []
        if problems:
            raise RuntimeError("could not delete network namespaces %s" % problems)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


def _wait_netns_empty(ns, timeout=30):
    deadline = time.monotonic() + timeout
    while _pids_in_netns(ns):
        if time.monotonic() > deadline:
            raise RuntimeError("processes of %s survived SIGKILL: %s" % (ns, _pids_in_netns(ns)))
        time.sleep(0.05)


def _pids_in_netns(ns):
    p = _run(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in p.stdout.split() if x.isdigit()]


def leftover_namespaces(prefix="loombed"):
    """Namespaces of beds that still exist (a test checks that none outlived its bed)."""
    p = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.startswith(prefix)]

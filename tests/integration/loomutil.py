"""Helpers shared by the integration tests: layouts as `loom getstripe` prints them, the stripe
math (as a plain reference model), random source files, and fallocate(2) with any mode."""

import contextlib
import ctypes
import ctypes.util
import hashlib
import os
import subprocess
import tempfile
import time
import re

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

# The binaries under test: $LOOM_BUILD, else the repository's build/. Tests import these from
# here, not from conftest (posix/ has a conftest of its own, which would shadow this one's).
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("LOOM_BUILD") or os.path.join(REPO, "build"))
LOOM = os.path.join(BUILD, "src", "tools", "loom")
MDS_BIN = os.path.join(BUILD, "src", "mds", "loom-mds")
OSS_BIN = os.path.join(BUILD, "src", "oss", "loom-oss")

# ---- fallocate(2) ---------------------------------------------------------------------------

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_NO_HIDE_STALE = 0x04
FALLOC_FL_COLLAPSE_RANGE = 0x08
FALLOC_FL_ZERO_RANGE = 0x10
FALLOC_FL_INSERT_RANGE = 0x20
FALLOC_FL_UNSHARE_RANGE = 0x40
FALLOC_FL_WRITE_ZEROES = 0x80      # Linux 6.17

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


def fallocate(fd, mode, offset, length):
    """fallocate(2) with any mode (os.posix_fallocate has mode 0 only); raises OSError."""
    if _libc.fallocate(fd, mode, offset, length) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


# ---- getstripe output ----------------------------------------------------------------------

# The object row format of lfs: "\t%6u\t%14llu\t%#13llx\t%14llu"
OBJ_ROW = re.compile(r"^\t( {0,5}\d{1,6})\t( {0,13}\d{1,14})\t( {0,12}0x[0-9a-f]+| {12}0)\t( {0,13}\d{1,14})$")


class FileLayout:
    def __init__(self, path, fields, objects):
        self.path = path
        self.fields = fields          # lmm_* name (without "lmm_") -> str value
        self.objects = objects        # [(ost_idx, objid)] in stripe order

    @property
    def stripe_count(self):
        return int(self.fields["stripe_count"])

    @property
    def stripe_size(self):
        return int(self.fields["stripe_size"])

    @property
    def stripe_offset(self):
        return int(self.fields["stripe_offset"])

    def __repr__(self):
        return "FileLayout(%s, %r, %r)" % (self.path, self.fields, self.objects)


def parse_file_getstripe(text):
    """Parses `loom getstripe FILE` output for one regular file (strict: every line must be one
    lfs prints). Returns a FileLayout."""
    lines = text.rstrip("\n").split("\n")
    assert len(lines) >= 7, "getstripe output too short:\n%s" % text
    path = lines[0]
    fields = {}
    i = 1
    while i < len(lines) and lines[i].startswith("lmm_"):
        m = re.match(r"^lmm_([a-z_]+):( +)(\S+)$", lines[i])
        assert m, "bad lmm_ line %r in:\n%s" % (lines[i], text)
        fields[m.group(1)] = m.group(3)
        i += 1
    for name in ("stripe_count", "stripe_size", "pattern", "layout_gen", "stripe_offset"):
        assert name in fields, "lmm_%s missing from getstripe output:\n%s" % (name, text)
    assert i < len(lines) and lines[i] == "\tobdidx\t\t objid\t\t objid\t\t group", \
        "bad object table header %r in:\n%s" % (lines[i] if i < len(lines) else None, text)
    objects = []
    for line in lines[i + 1:]:
        m = OBJ_ROW.match(line)
        assert m, "object row %r does not match lfs's \\t%%6u\\t%%14llu\\t%%#13llx\\t%%14llu" % line
        idx, objid, objhex, group = (g.strip() for g in m.groups())
        # Rebuild the row with the exact C format and compare (widths included).
        want = "\t%6u\t%14u\t%13s\t%14u" % (int(idx), int(objid), hex(int(objid)) if int(objid) else "0", int(group))
        assert line == want, "object row %r is not formatted as lfs does (%r)" % (line, want)
        assert int(objhex, 16) == int(objid), "hex objid %s != decimal %s" % (objhex, objid)
        objects.append((int(idx), int(objid)))
    return FileLayout(path, fields, objects)


# A component's object as lfs prints it: "      - N: { l_ost_idx: OST, l_fid: [SEQ:OID:VER] }"
COMP_OBJ_ROW = re.compile(r"^      - (\d+): \{ l_ost_idx: (\d+), l_fid: \[0x([0-9a-f]+):0x([0-9a-f]+):0x([0-9a-f]+)\] \}$")


def idif_objid(ost_idx, seq, oid, ver):
    """The object id in the IDIF FID lfs prints for an OST object (seq 0x1 << 32 | ost << 16 |
    objid bits 32-47, oid bits 0-31, ver bits 48-63); checks it names ost_idx."""
    assert seq >> 32 == 1 and (seq >> 16) & 0xFFFF == ost_idx, \
        "l_fid sequence %#x is not OST %d's IDIF sequence" % (seq, ost_idx)
    return ver << 48 | (seq & 0xFFFF) << 32 | oid


def parse_composite_getstripe(text):
    """Parses `loom getstripe FILE` output in lfs's composite format (a Data-on-MDT component,
    then RAID-0 to EOF), strictly: names, value columns and object rows as lfs prints them.
    Returns a FileLayout of the RAID-0 component (fields, objects) with .dom_size (the mdt
    component's end), .header (lcm_* name -> value) and .components ([{lcme_* and lmm_* name ->
    value}])."""
    lines = text.rstrip("\n").split("\n")
    path = lines[0]
    header, comps, objects = {}, [], []
    for line in lines[1:]:
        if line == "":
            continue
        m = re.match(r"^  (lcm_[a-z_]+):( +)(\S+)$", line)
        if m:
            assert len("  %s:%s" % m.group(1, 2)) == 21, "lcm_ value not in column 21: %r" % line
            header[m.group(1)] = m.group(3)
            continue
        m = re.match(r"^    (lcme_[a-z_.]+):( +)(\S+)$", line)
        if m:
            assert len("    %s:%s" % m.group(1, 2)) == 25, "lcme_ value not in column 25: %r" % line
            if m.group(1) == "lcme_id":
                comps.append({})
            comps[-1][m.group(1)] = m.group(3)
            continue
        m = re.match(r"^      (lmm_[a-z_]+):( *)(\S*)$", line)
        if m:
            if m.group(1) != "lmm_objects":
                assert len("      %s:%s" % m.group(1, 2)) == 25, "lmm_ value not in column 25: %r" % line
            comps[-1][m.group(1)] = m.group(3)
            continue
        m = COMP_OBJ_ROW.match(line)
        assert m, "line %r is not in lfs's composite format:\n%s" % (line, text)
        i, ost = int(m.group(1)), int(m.group(2))
        assert i == len(objects), "object rows out of order:\n" + text
        objects.append((ost, idif_objid(ost, *(int(g, 16) for g in m.group(3, 4, 5)))))
    assert [c.get("lmm_pattern") for c in comps] == ["mdt", "raid0"], \
        "not an mdt component then a raid0 one:\n" + text
    dom, raid0 = comps
    fields = {k[4:]: v for k, v in raid0.items() if k != "lmm_objects"}
    layout = FileLayout(path, fields, objects)
    layout.dom_size = int(dom["lcme_extent.e_end"])
    layout.header = header
    layout.components = comps
    assert "lmm_objects" in raid0 and len(objects) == layout.stripe_count, \
        "the raid0 component lists %d objects for %d stripes:\n%s" % (len(objects), layout.stripe_count, text)
    return layout


def parse_any_getstripe(text):
    """A file's layout in either format: the plain one (dom_size 0) or the composite one (the
    RAID-0 component, with dom_size). For tests about stripes that do not mind a Data-on-MDT part."""
    if text.split("\n", 2)[1].startswith("  lcm_"):
        return parse_composite_getstripe(text)
    layout = parse_file_getstripe(text)
    layout.dom_size = 0
    return layout


# ---- stripe math --------------------------------------------------------------------------


def object_size(file_size, stripe_size, stripe_count, k):
    """Bytes object k of a RAID-0 file holds."""
    s, c, length = stripe_size, stripe_count, file_size
    full = length // (s * c)
    rest = length % (s * c)
    return full * s + min(s, max(0, rest - k * s))


def stripe_units(file_size, stripe_size, stripe_count):
    """Yields (unit_no, file_offset, length, k, obj_offset) for every stripe unit of a file."""
    unit = 0
    off = 0
    while off < file_size:
        n = min(stripe_size, file_size - off)
        k = unit % stripe_count
        obj_off = (unit // stripe_count) * stripe_size
        yield unit, off, n, k, obj_off
        unit += 1
        off += n


def object_path(ost_dir, objid):
    """Where an OST keeps an object: O/<objid & 0xff as %02x>/<objid in lowercase hex>."""
    return os.path.join(ost_dir, "O", "%02x" % (objid & 0xFF), "%x" % objid)


# ---- files --------------------------------------------------------------------------------


def make_random_file(path, size, chunk=16 * MiB):
    """Writes size random bytes to path; returns the sha256 hex digest."""
    h = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left:
            b = os.urandom(min(chunk, left))
            f.write(b)
            h.update(b)
            left -= len(b)
    return h.hexdigest()


def sha256_file(path, chunk=16 * MiB):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def read_at(path, offset, length):
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


def pid_alive(pid):
    """True if pid is a live process. A zombie counts as dead once its last thread is gone: its
    leader turns zombie while the other threads still exit, holding its files (an MDT's lock)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
        threads = len(os.listdir("/proc/%d/task" % pid))
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat[stat.rindex(")") + 2:].split()[0]
    return state not in ("Z", "X") or threads > 1


def errno_of(fn, *args):
    """0 if fn(*args) succeeds, else the errno of the OSError it raised."""
    try:
        fn(*args)
    except OSError as e:
        return e.errno
    return 0


def wait_until(pred, timeout, interval=0.05):
    """Polls pred() until it returns a true value (returned) or timeout seconds pass (None)."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


def mount_daemon_pids(path):
    """Pids of the loom-mount processes serving mount point path (found by their command line)."""
    path = os.path.realpath(path).encode()
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"loom-mount" and path in argv[1:]:
            pids.append(int(d))
    return pids


def is_mounted(path, fstype="fuse.loom"):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[1].replace("\\040", " ") == path and fields[2] == fstype:
                return True
    return False


@contextlib.contextmanager
def second_mount(cluster, key=None, opts=None, source=None):
    """The file system mounted again by another loom-mount (mount -t loom): a client with nothing
    cached, as another node would read it; with key (a node's key file), as that node; opts: more
    mount options (a comma-separated string); source: what to mount (the cluster's MDS:/loom)."""
    import mountpair
    import types
    # The conftest that defined the cluster's class knows the build under test (BUILD); its
    # module is found by its functions' globals, as conftests share one module name.
    g = next(f.__globals__ for c in type(cluster).__mro__ for f in vars(c).values()
             if isinstance(f, types.FunctionType) and "BUILD" in f.__globals__)
    parent = types.SimpleNamespace(**g)
    d = tempfile.mkdtemp(prefix="loom-view-")
    try:
        cmd = mountpair.mount_command(parent, key or cluster.key, source or "%s:/loom" % cluster.addr, d, opts)
        # Its log (a file as stderr, which the daemon keeps) beside the cluster's: the teardown
        # checks it for ERROR and sanitizer lines as it checks the daemons'.
        log = os.path.join(cluster.dir, "log", "mount-%s.log" % os.path.basename(d))
        with open(log, "a") as err:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, timeout=60)
        if p.returncode != 0 or not is_mounted(d):
            with open(log) as f:
                raise AssertionError("a second mount failed (%d): %s" % (p.returncode, f.read()[-4000:]))
        yield d
    finally:
        if is_mounted(d):
            if subprocess.run(["umount", d], capture_output=True, timeout=60).returncode != 0:
                subprocess.run(["umount", "-l", d], capture_output=True, timeout=60)
        os.rmdir(d)


@contextlib.contextmanager
def nofile_at_least(want):
    """This process's RLIMIT_NOFILE raised to want descriptors while inside (the test skipped if
    the hard limit is lower), and put back afterwards."""
    import pytest
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip("RLIMIT_NOFILE hard limit %d is below the %d descriptors this test needs" % (hard, want))
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def pings(host, port, timeout=5):
    """Whether an authenticated PING to host:port is answered."""
    import loomwire as w
    try:
        with w.Conn(host, port, timeout=timeout) as c:
            return c.ping() == 0
    except (OSError, w.ConnectionClosed, w.AuthError):
        return False


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


OST_REGISTERED = re.compile(r" INFO: OST[0-9a-f]+ registered: ")
# ... and the port its OSS serves on (relays in front of it: test_frame_auth, test_jobid_tags).
OST_REGISTERED_AT = re.compile(r" INFO: OST[0-9a-f]+ registered: .* at 127\.0\.0\.1:(\d+)")


def recv_exact(sock, n):
    """n bytes from a socket; EOFError if it closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


@contextlib.contextmanager
def mds_by_hand(cluster, *flags):
    """The cluster's MDS replaced by one started with flags (same MDT, address and key), logging to
    DIR/log/mds-by-hand.log, which teardown scans as it does the others. Yields the Popen once every
    OSS has registered with it (so that the descriptors a test counts are all the MDS will hold);
    the cluster's own MDS is back afterwards."""
    cluster.kill9("mds")
    log_path = os.path.join(cluster.dir, "log", "mds-by-hand.log")
    log = open(log_path, "a")
    p = subprocess.Popen([MDS_BIN, "--mdt", os.path.join(cluster.dir, "mdt"), "--listen", cluster.addr,
                          "--key", cluster.key] + list(flags), stdout=log, stderr=log)
    p.log_path = log_path
    try:
        assert wait_until(lambda: pings(cluster.mds_host, cluster.mds_port), 30, 0.1), \
            "the MDS started by hand does not serve"
        assert wait_until(lambda: len(OST_REGISTERED.findall(read(log_path))) >= cluster.osts, 60, 0.2), \
            "the OSSs did not register with the MDS started by hand:\n" + read(log_path)[-2000:]
        yield p
        assert p.poll() is None, "the MDS died (exit %r):\n%s" % (p.returncode, read(log_path)[-3000:])
    finally:
        if p.poll() is None:
            p.terminate()
        p.wait(timeout=60)
        log.close()
        cluster.restart()


def closed_now(s):
    """True when the peer has closed s (EOF or reset); bytes it sent first are read and dropped."""
    s.setblocking(False)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (BlockingIOError, InterruptedError):
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True


def mount_pid(mnt):
    """The pid of the loom-mount serving mnt."""
    mnt = os.path.realpath(mnt)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"loom-mount") and mnt.encode() in argv:
            return int(pid)
    raise AssertionError("no loom-mount serves " + mnt)


def configured(cluster_factory, settings, osts=4):
    """A cluster (of osts OSTs) whose MDS starts with settings (mds.conf lines)."""
    c = cluster_factory(osts=osts, start=False)
    with open(os.path.join(c.dir, "mds.conf"), "w") as f:
        f.write(settings)
    c.up()
    return c

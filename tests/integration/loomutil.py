"""Helpers shared by the integration tests: layouts as `loom getstripe` prints them, the stripe
math (as a plain reference model), and random source files."""

import hashlib
import os
import time
import re

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

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
    """True if pid is a live process (a zombie counts as dead)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat[stat.rindex(")") + 2:].split()[0]
    return state not in ("Z", "X")


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

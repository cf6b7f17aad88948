"""The mount's door (src/common/door.h): a user without the file system key uses Loom natively
through root's loom-mount, as itself. The daemon learns who asks from the kernel, so permission
checks hold; the raw protocol is tried as a hostile local user would; a mount without a door
leaves the package saying both ways in and reading through the mount. The raw protocol, as a
hostile local user speaks it: test_door_protocol.py."""

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from loomutil import BUILD, REPO, mount_pid, second_mount, wait_until
from doorproto import door_of, pattern
from pyloom import pylib

pytestmark = pylib

NOBODY = 65534
HERE = os.path.dirname(os.path.abspath(__file__))


def user_package():
    """A directory holding the package and this build's libloom (and doorproto), where any user
    may read them: for programs run as another user, as PYTHONPATH. The caller removes it."""
    pkg = tempfile.mkdtemp(prefix="loom-pkg-", dir="/tmp")
    os.chmod(pkg, 0o755)
    shutil.copytree(os.path.join(REPO, "python", "loom"), os.path.join(pkg, "loom"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.realpath(os.path.join(BUILD, "src", "client", "libloom.so")),
                os.path.join(pkg, "loom", "libloom.so.0"))
    shutil.copy(os.path.join(HERE, "doorproto.py"), pkg)
    subprocess.run(["chmod", "-R", "a+rX", pkg], check=True)
    return pkg


def run_as(code, *args, uid=NOBODY):
    """A Python program run as uid (its group the same, no others) with the package where that
    user may read it; its stdout as JSON."""
    pkg = user_package()
    try:
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": pkg, "HOME": "/"}
        r = subprocess.run([sys.executable, "-c", code] + [str(a) for a in args], cwd="/", env=env,
                           capture_output=True, text=True, timeout=180, user=uid, group=uid,
                           extra_groups=[])
    finally:
        shutil.rmtree(pkg)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


AS_A_USER = r"""
import json, os, sys, warnings
import loom, loom.torch as lt
from doorproto import door_of, pattern
mnt = sys.argv[1]
out = {}
fs = loom.connect(mnt)
out["via_door"], out["fsname"] = fs.via_door, fs.fsname
with fs.open("/pub/big", "rb") as f:
    data = f.read()
out["big"] = [len(data), data == pattern(len(data), 1)]
with fs.open("/pub/big", "rb") as f:
    f.seek((3 << 20) - 7)
    out["ranged"] = f.read(100) == pattern(6 << 20, 1)[(3 << 20) - 7:(3 << 20) + 93]
out["listing"] = sorted(fs.listdir("/pub"))
# Reads around the head an open for reading brings (64 KiB): small files, one of exactly that,
# and larger ones, read across its end and past the file's.
heads = []
for size in (0, 100, 65536, 65537, 200000):
    want = pattern(size, 3)
    for off, n in ((0, size + 10), (0, 65536), (65530, 20), (size, 5), (size + 100, 5), (1, 3)):
        with fs.open("/heads/%d" % size, "rb") as f:
            f.seek(off)
            heads.append(f.read(n) == want[off:off + n])
out["heads"] = all(heads)
# A prefetcher through the door runs in loom-mount: items larger than its 2 MiB slot come in
# pieces, ranges and small files whole, a skipped item is given up, and a missing one fails alone.
big = pattern(6 << 20, 1)
items = [("/pub/big", 0, -1), ("/heads/65537", 0, -1), ("/pub/big", (3 << 20) - 7, 100),
         ("/pub/nope", 0, -1), ("/heads/100", 0, -1), ("/pub/big", 5 << 20, -1)]
want = [big, pattern(65537, 3), big[(3 << 20) - 7:(3 << 20) + 93], None, pattern(100, 3), big[5 << 20:]]
with fs.prefetch(items, max_bytes=32 << 20) as pf:
    got = []
    for k in (0, 1, 3, 4, 5):     # 2 given up
        try:
            got.append(pf.take(k) == want[k])
        except FileNotFoundError:
            got.append("ENOENT")
    st = pf.stats()
out["prefetch"] = got
# Records of a shard (ranges, most of the items) are read ahead here, by the block, through
# the door's reads.
import random
ranges = [("/pub/big", k * 5000, 5000) for k in range(300)]
random.Random(1).shuffle(ranges)
with fs.prefetch(ranges) as pf:
    out["records"] = all(pf.take(k) == big[off:off + n] for k, (_, off, n) in enumerate(ranges))
out["prefetch_stats"] = [st["fetched"] + st["direct"] >= 4, st["peak_bytes"] <= 32 << 20]
def err(fn, *a):
    try:
        fn(*a)
    except OSError as e:
        return e.errno
    return 0
out["secret"] = err(lambda: fs.open("/secret", "rb").read())
out["write_in_root_dir"] = err(lambda: fs.open("/ro/new", "wb"))
out["chmod_root_file"] = err(fs.chmod, "/pub/big", 0o777)
mine = pattern((5 << 20) + 123, 2)
with fs.open("/drop/mine.bin", "wb") as f:
    f.write(mine)
st = fs.stat("/drop/mine.bin")
out["mine"] = [st.st_size, st.st_uid, st.st_gid]
fs.mkdir("/drop/sub")
fs.rename("/drop/mine.bin", "/drop/sub/mine.bin")
out["moved"] = sorted(fs.listdir("/drop/sub"))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ds = lt.FileDataset(mnt + "/pub", "*.txt", decode=bytes)
    out["dataset"] = [type(ds.storage).__name__, [ds[i] .decode() for i in range(len(ds))]]
out["warnings"] = [str(w.message) for w in caught]
print(json.dumps(out))
"""


def test_a_user_without_the_key_reads_and_writes_natively_as_itself(cluster):
    if os.path.exists("/etc/loom/loom.key"):
        pytest.skip("this machine has a key every user's libloom would try (/etc/loom/loom.key)")
    mnt = cluster.mount()
    os.chmod(cluster.dir, 0o711)   # the mount under it is reachable; the key (0600) stays not
    os.mkdir(os.path.join(mnt, "pub"))
    subprocess.run([os.path.join(BUILD, "src", "tools", "loom"), "setstripe", "-c", "2", "-S", "1M",
                    os.path.join(mnt, "pub")], check=True, capture_output=True)
    with open(os.path.join(mnt, "pub", "big"), "wb") as f:
        f.write(pattern(6 << 20, 1))
    for i in range(3):
        with open(os.path.join(mnt, "pub", "%d.txt" % i), "w") as f:
            f.write("sample %d" % i)
    with open(os.path.join(mnt, "secret"), "wb") as f:
        f.write(b"root's own")
    os.chmod(os.path.join(mnt, "secret"), 0o600)
    os.mkdir(os.path.join(mnt, "ro"), 0o755)
    os.mkdir(os.path.join(mnt, "drop"))
    os.chmod(os.path.join(mnt, "drop"), 0o1777)

    os.mkdir(os.path.join(mnt, "heads"))
    for size in (0, 100, 65536, 65537, 200000):
        with open(os.path.join(mnt, "heads", str(size)), "wb") as f:
            f.write(pattern(size, 3))

    out = run_as(AS_A_USER, mnt)
    assert out["via_door"] is True and out["fsname"] == "loom"
    assert out["heads"] is True
    assert out["prefetch"] == [True, True, "ENOENT", True, True]
    assert out["records"] is True
    assert out["prefetch_stats"] == [True, True]
    assert out["big"] == [6 << 20, True] and out["ranged"] is True
    assert out["listing"] == ["0.txt", "1.txt", "2.txt", "big"]
    assert out["secret"] == errno.EACCES            # another user's 0600 file stays closed
    assert out["write_in_root_dir"] == errno.EACCES
    assert out["chmod_root_file"] == errno.EPERM
    assert out["mine"] == [(5 << 20) + 123, NOBODY, NOBODY]
    assert out["moved"] == ["mine.bin"]
    assert out["dataset"] == ["LoomStorage", ["sample 0", "sample 1", "sample 2"]]
    assert out["warnings"] == []
    # What the user wrote is what everyone reads, and it is the user's.
    path = os.path.join(mnt, "drop", "sub", "mine.bin")
    with open(path, "rb") as f:
        assert f.read() == pattern((5 << 20) + 123, 2)
    assert (os.stat(path).st_uid, os.stat(path).st_gid) == (NOBODY, NOBODY)
    with open(os.path.join(mnt, "secret"), "rb") as f:
        assert f.read() == b"root's own"


NO_DOOR = r"""
import json, sys, warnings
import loom, loom.torch as lt
mnt, key, addr = sys.argv[1:4]
out = {}
try:
    loom.connect(mnt, key_file=key)
except PermissionError as e:
    out["unreadable key"] = str(e)
try:
    loom.connect(mnt, key_file=key + ".gone")
except FileNotFoundError as e:
    out["no key file"] = str(e)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ds = lt.FileDataset(mnt + "/pub", "*.txt", decode=bytes)
    out["storage"] = [type(ds.storage).__name__, [ds[i].decode() for i in range(len(ds))]]
out["warnings"] = [str(w.message) for w in caught]
try:
    lt.FileDataset(mnt, "secret.txt")[0]
except PermissionError as e:
    out["secret"] = e.errno
print(json.dumps(out))
"""


def test_a_mount_without_a_door_leaves_both_ways_named_and_datasets_on_the_mount(cluster):
    if os.path.exists("/etc/loom/loom.key"):
        pytest.skip("this machine has a key every user's libloom would try (/etc/loom/loom.key)")
    os.chmod(cluster.dir, 0o711)
    with second_mount(cluster, opts="nodoor") as mnt:
        os.chmod(mnt, 0o755)
        os.mkdir(os.path.join(mnt, "pub"))
        for i in range(2):
            with open(os.path.join(mnt, "pub", "%d.txt" % i), "w") as f:
                f.write("sample %d" % i)
        with open(os.path.join(mnt, "secret.txt"), "w") as f:
            f.write("no")
        os.chmod(os.path.join(mnt, "secret.txt"), 0o600)
        assert door_of(mnt)[0] == ""
        out = run_as(NO_DOOR, mnt, cluster.key, cluster.addr)
    ways = ("The ways in: the file system's key (key_file=, $LOOM_KEY_FILE or /etc/loom/loom.key, "
            "which only its owner may read: docs/python.md, \"Who may connect\"), or the door of "
            "its mount at %s, which root's loom-mount serves (the package goes through it as this "
            "user, natively; a mount made with nodoor has none), or that mount itself, with open() "
            "and the usual tools" % mnt)
    no_door = ("nor through the door of its mount at %s: the Loom mount holding %s serves no door "
               "(mounted with nodoor, or not by root)" % (mnt, mnt))
    assert out["unreadable key"] == (
        "[Errno 126] cannot connect to the Loom MDS at %s: this user (uid 65534) may not read the "
        "key file %s; %s. %s" % (cluster.addr, cluster.key, no_door, ways)), out["unreadable key"]
    assert out["no key file"] == (
        "[Errno 2] cannot connect to the Loom MDS at %s: there is no key file at %s.gone; %s. %s"
        % (cluster.addr, cluster.key, no_door, ways)), out["no key file"]
    assert out["storage"] == ["LocalStorage", ["sample 0", "sample 1"]]
    assert len(out["warnings"]) == 1 and out["warnings"][0].startswith(
        "loom: reading %s/pub through the mount, not natively: [Errno 13] cannot connect to the "
        "Loom MDS at %s: the MDS at %s refused this client's key (or it has none); %s. %s"
        % (mnt, cluster.addr, cluster.addr, no_door, ways)), out["warnings"]
    assert out["secret"] == errno.EACCES


HOLD_OPEN = r"""
import json, os, sys, time
import loom
fs = loom.connect(sys.argv[1])
f = fs.open("/f", "rb")
first = f.read(4)
print("ready", flush=True)
sys.stdin.readline()          # the test unmounts meanwhile
try:
    fs.stat("/f")
    after = 0
except OSError as e:
    after = e.errno
print(json.dumps({"first": first.decode(), "after": after, "via_door": fs.via_door}))
"""


def test_an_unmount_ends_door_sessions_with_eio_and_the_daemon_exits(cluster):
    if os.path.exists("/etc/loom/loom.key"):
        pytest.skip("this machine has a key every user's libloom would try (/etc/loom/loom.key)")
    os.chmod(cluster.dir, 0o711)
    with second_mount(cluster) as mnt:
        os.chmod(mnt, 0o755)
        with open(os.path.join(mnt, "f"), "wb") as f:
            f.write(b"data")
        pid = mount_pid(mnt)
        pkg = user_package()
        try:
            p = subprocess.Popen([sys.executable, "-c", HOLD_OPEN, mnt], cwd="/", text=True,
                                 env={"PATH": os.environ["PATH"], "PYTHONPATH": pkg, "HOME": "/"},
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 user=NOBODY, group=NOBODY, extra_groups=[])
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
            assert subprocess.run(["umount", mnt], capture_output=True, timeout=60).returncode == 0
            assert wait_until(lambda: not os.path.exists("/proc/%d" % pid), 30), \
                "loom-mount did not exit after the unmount with a door session open"
            out, err = p.communicate("go\n", timeout=60)
        finally:
            shutil.rmtree(pkg)
        res = json.loads(out.strip().splitlines()[-1])
        assert res == {"first": "data", "after": errno.EIO, "via_door": True}, err
        assert not os.path.exists("/run/loom/door.%d.sock" % pid)


def test_a_worker_without_room_for_a_prefetcher_reads_as_asked(cluster):
    """Through the door, a uid's prefetchers share what loom-mount will hold for it: once another
    session of the same user holds it all, a dataset reads its samples as asked, correctly, and
    says once why it does not read ahead."""
    import struct
    import warnings
    import numpy as np
    import loom
    import loom.torch as lt
    from doorproto import ask, knock
    mnt = cluster.mount()
    os.mkdir(os.path.join(mnt, "tok"))
    for i in range(40):
        np.save(os.path.join(mnt, "tok", "%02d.npy" % i), np.full(8, i))
    path, _ = door_of(mnt)
    s, m, rc = knock(path, "HELLO")       # this process's uid, holding its whole share
    assert rc == 0
    held = []
    for _ in range(3):
        fh, n = ask(s, "PF_NEW", arg=1536 << 20)
        assert fh > 0
        held.append(struct.unpack_from("=Q", m, 0)[0])
    assert sum(held) == 4 << 30
    fs = loom.connect(mnt, door=True)
    try:
        ds = lt.FileDataset(os.path.join(mnt, "tok"), "*.npy", decode=lt.decode_npy, fs=fs)
        order = list(reversed(range(40)))
        ds.plan(order)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = [int(ds[i][0]) for i in order]
        assert got == order
        said = [str(w.message) for w in caught]
        assert len(said) == 1 and said[0].startswith("loom.torch: no prefetch in this process: [Errno 12]"), said
    finally:
        fs.close()
        s.close()


def test_a_door_reader_sees_what_another_client_wrote_after_its_open(cluster):
    """Two clients at once: a file open for reading through the door, rewritten through the
    mount (another client) meanwhile, reads back the new bytes on its OSTs, as a keyed client's
    does. (Its first 64 KiB, Data-on-MDT, are what the open saw, for both: close-to-open.)"""
    import loom
    mnt = cluster.mount()
    path = os.path.join(mnt, "f")
    with open(path, "wb") as f:
        f.write(b"old " * 100000)       # past Data-on-MDT: on the OSTs
    keyed = loom.connect(mnt, key_file=cluster.key, door=False)
    door = loom.connect(mnt, door=True)
    try:
        readers = [fs.open("/f", "rb") for fs in (keyed, door)]
        with open(path, "r+b") as f:
            f.write(b"new " * 100000)
        for r in readers:
            r.seek(200000)
            assert r.read(8) == b"new new ", "keyed" if r is readers[0] else "door"
            r.close()
    finally:
        keyed.close()
        door.close()

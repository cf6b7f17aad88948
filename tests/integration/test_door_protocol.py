"""The mount's door's raw protocol (src/common/door.h), spoken as a hostile local user would:
the daemon takes who asks from the kernel, not from the caller, and refuses what is malformed
without harm to itself or to other sessions. No libloom in the test's Python: the sanitized
build's loom-mount is tried too."""

import errno
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile

from doorproto import HELLO, REQ, SLOT, ask, door_of, knock, recv_rep, sealed_memfd
from loomutil import mount_pid

HERE = os.path.dirname(os.path.abspath(__file__))
NOBODY = 65534


def run_as(code, *args, uid=NOBODY):
    """A Python program (which may import doorproto) run as uid; its last line of stdout."""
    d = tempfile.mkdtemp(prefix="loom-door-", dir="/tmp")
    try:
        os.chmod(d, 0o755)
        shutil.copy(os.path.join(HERE, "doorproto.py"), d)
        os.chmod(os.path.join(d, "doorproto.py"), 0o644)
        r = subprocess.run([sys.executable, "-c", code] + [str(a) for a in args], cwd="/",
                           env={"PATH": os.environ["PATH"], "PYTHONPATH": d, "HOME": "/"},
                           capture_output=True, text=True, timeout=60, user=uid, group=uid,
                           extra_groups=[])
    finally:
        shutil.rmtree(d)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip().splitlines()[-1]


ATTACH_AS_USER = r"""
import sys, struct
from doorproto import knock, ask
path, session, token = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
att = struct.pack("=Q16s", session, token)
s, m, rc = knock(path, "ATTACH", slot_bytes=att)
print(rc)
"""


def test_the_door_takes_who_asks_from_the_kernel_and_refuses_what_is_malformed(cluster):
    mnt = cluster.mount()
    os.chmod(cluster.dir, 0o711)
    with open(os.path.join(mnt, "f"), "wb") as f:
        f.write(b"0123456789")
    path, pid = door_of(mnt)
    assert pid == mount_pid(mnt) and path == "/run/loom/door.%d.sock" % pid
    assert oct(os.stat(path).st_mode & 0o777) == "0o666"

    # Garbage, a short header, an op out of range as the first request: refused, and the
    # channel closed.
    for junk in (b"\xff" * 200, b"\x00" * 7, REQ.pack(9999, 0, 0, 0, 0, 0, 0, 1)):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(junk)
        s.shutdown(socket.SHUT_WR)
        assert recv_rep(s) in ((-errno.EPROTO, 0), None)
        assert recv_rep(s) is None
        s.close()
    # A memory the caller could shrink under the daemon, or too small: refused.
    s, m, rc = knock(path, "HELLO", memfd=sealed_memfd(seal=False))
    assert rc == -errno.EINVAL
    s, m, rc = knock(path, "HELLO", memfd=sealed_memfd(size=4096))
    assert rc == -errno.EINVAL
    s, m, rc = knock(path, "HELLO", version=999)
    assert rc == -errno.EPROTONOSUPPORT

    # A session (root's here) and what it answers.
    s, m, rc = knock(path, "HELLO")
    assert rc == 0
    version, slot_bytes, session, token, fsname = HELLO.unpack_from(m, 0)
    assert (version, slot_bytes, fsname.rstrip(b"\0")) == (1, SLOT, b"loom")
    fh, _ = ask(s, "OPEN", b"/f\0", flags=os.O_RDONLY)
    assert fh > 0
    assert ask(s, "PREAD", fh=fh, off=2, length=5) == (5, 5) and m[:5] == b"23456"
    assert ask(s, "PREAD", fh=fh, off=0, length=SLOT + 1)[0] == -errno.EINVAL
    assert ask(s, "STAT", b"/f")[0] == -errno.EINVAL          # a path without its NUL
    assert ask(s, "STAT", b"/f\0extra")[0] == -errno.EINVAL   # bytes after the paths
    assert ask(s, "PREAD", fh=fh + 1000, length=1)[0] == -errno.EBADF
    # Another session cannot use this one's handle.
    s2, m2, rc = knock(path, "HELLO")
    assert rc == 0 and ask(s2, "PREAD", fh=fh, length=1)[0] == -errno.EBADF
    # Its token, from another user: refused (the kernel says who knocks, not the caller).
    assert run_as(ATTACH_AS_USER, path, session, token.hex()) == str(-errno.EACCES)
    # A wrong token from the same user: refused; the right one: a second channel.
    bad = bytes(b ^ 1 for b in token)
    assert knock(path, "ATTACH", slot_bytes=struct.pack("=Q16s", session, bad))[2] == -errno.EACCES
    s3, m3, rc = knock(path, "ATTACH", slot_bytes=struct.pack("=Q16s", session, token))
    assert rc == 0 and ask(s3, "PREAD", fh=fh, off=8, length=10) == (2, 2) and m3[:2] == b"89"
    assert ask(s3, "CLOSE", fh=fh) == (0, 0)
    assert ask(s, "PREAD", fh=fh, length=1)[0] == -errno.EBADF
    for c in (s, s2, s3):
        c.close()
    # The daemon is whole, and the mount answers.
    assert os.path.exists("/proc/%d" % pid)
    with open(os.path.join(mnt, "f"), "rb") as f:
        assert f.read() == b"0123456789"


LINK_AS_USER = r"""
import os, sys
from doorproto import knock, ask
path = sys.argv[1]
s, m, rc = knock(path, "HELLO")
print(" ".join(str(ask(s, "LINK", src + b"\0" + dst + b"\0")[0]) for src, dst in
               ((b"/secret", b"/drop/a"), (b"/public", b"/drop/b"), (b"/drop/own", b"/drop/c"))))
"""


def test_the_door_keeps_the_kernels_rules_read_only_mounts_protected_hardlinks_and_one_listing_at_a_time(cluster):
    import threading
    mnt = cluster.mount()
    os.chmod(cluster.dir, 0o711)
    for name, mode in (("secret", 0o600), ("public", 0o644)):
        with open(os.path.join(mnt, name), "w") as f:
            f.write(name)
        os.chmod(os.path.join(mnt, name), mode)
    os.mkdir(os.path.join(mnt, "drop"))
    os.chmod(os.path.join(mnt, "drop"), 0o1777)
    with open(os.path.join(mnt, "drop", "own"), "w") as f:
        f.write("own")
    os.chown(os.path.join(mnt, "drop", "own"), NOBODY, NOBODY)
    big = os.path.join(mnt, "big")
    os.mkdir(big)
    long_names = ["n%04d" % i + "x" * 200 for i in range(1000)]  # several pages of the MDS's listing
    for name in long_names:
        open(os.path.join(big, name), "w").close()
    path, _ = door_of(mnt)

    # protected_hardlinks, as the kernel keeps it on the mount: another's file the user may not
    # read and write is not linked; its own is.
    with open("/proc/sys/fs/protected_hardlinks") as f:
        protected = f.read().strip() == "1"
    want = "%d %d 0" % ((-errno.EPERM, -errno.EPERM) if protected else (0, 0))
    assert run_as(LINK_AS_USER, path) == want

    # A file created through the door gets the mode asked (the caller's libloom applies its
    # umask, not the daemon's).
    s, m, rc = knock(path, "HELLO")
    assert rc == 0
    _, _, session, token, _ = HELLO.unpack_from(m, 0)
    fh, _ = ask(s, "OPEN", b"/drop/m666\0", flags=os.O_CREAT | os.O_WRONLY, mode=0o666)
    assert fh > 0 and ask(s, "CLOSE", fh=fh) == (0, 0)
    assert os.stat(os.path.join(mnt, "drop", "m666")).st_mode & 0o7777 == 0o666

    # Two channels of a session listing one directory at once: each name comes once.
    s2, m2, rc = knock(path, "ATTACH", slot_bytes=struct.pack("=Q16s", session, token))
    assert rc == 0
    want = sorted([".", ".."] + long_names)
    for _ in range(20):
        dh, _ = ask(s, "OPENDIR", b"/big\0")
        assert dh > 0
        names, errors = [], []

        def lister(sock, slot):
            # A page of the MDS's listing's worth a request: both sides cross its pages at once.
            while True:
                count, length = ask(sock, "READDIR", fh=dh, length=64 << 10)
                if count <= 0:
                    if count < 0:
                        errors.append(count)
                    return
                at = 0
                for _ in range(count):
                    ino, namelen, typ = struct.unpack_from("=QHB", slot, at)
                    names.append(bytes(slot[at + 16:at + 16 + namelen]).decode())
                    at += (16 + namelen + 7) & ~7
        threads = [threading.Thread(target=lister, args=(s, m)), threading.Thread(target=lister, args=(s2, m2))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert sorted(names) == want
        assert ask(s, "CLOSEDIR", fh=dh) == (0, 0)
    s.close()
    s2.close()

    # A read-only mount's door changes nothing, as the mount itself.
    from loomutil import second_mount
    with second_mount(cluster, opts="ro") as ro:
        rpath, _ = door_of(ro)
        s, m, rc = knock(rpath, "HELLO")
        assert rc == 0
        assert ask(s, "MKDIR", b"/newdir\0", mode=0o755)[0] == -errno.EROFS
        assert ask(s, "OPEN", b"/public\0", flags=os.O_WRONLY)[0] == -errno.EROFS
        assert ask(s, "OPEN", b"/drop/new\0", flags=os.O_CREAT | os.O_RDONLY, mode=0o644)[0] == -errno.EROFS
        fh, _ = ask(s, "OPEN", b"/public\0", flags=os.O_RDONLY)
        assert fh > 0 and ask(s, "PREAD", fh=fh, length=6) == (6, 6) and m[:6] == b"public"
        s.close()
    assert not os.path.exists(os.path.join(mnt, "newdir"))


HOG = r"""
import socket, sys, time
path, n = sys.argv[1], int(sys.argv[2])
held, shut = [], 0
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(b"\x01" * 20)      # half a HELLO, and then nothing
    held.append(s)
time.sleep(1)
for s in held:
    s.settimeout(0.01)
    try:
        shut += s.recv(1) == b""
    except ConnectionResetError:
        shut += 1
    except (socket.timeout, BlockingIOError):
        pass
print(shut, flush=True)
sys.stdin.readline()
"""


def test_one_user_cannot_take_the_door_from_the_others(cluster):
    mnt = cluster.mount()
    os.chmod(cluster.dir, 0o711)
    path, _ = door_of(mnt)
    p = subprocess.Popen([sys.executable, "-c", HOG, path, "300"], cwd="/", text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         user=NOBODY, group=NOBODY, extra_groups=[])
    try:
        # The connections past the uid's 256 are closed at once; the others wait for their HELLO.
        assert p.stdout.readline().strip() == "44", p.stderr.read()
        # Meanwhile another user (root here) gets in and is served.
        s, m, rc = knock(path, "HELLO")
        assert rc == 0 and ask(s, "STAT", b"/\0")[0] == 0
        s.close()
    finally:
        p.communicate("\n", timeout=30)


def pf_items(*items):
    out = b""
    for path, off, length in items:
        p = path.encode()
        out += struct.pack("=QqII", off, length, len(p), 0) + p + bytes(-len(p) % 8)
    return out


def test_the_daemons_prefetchers_are_bounded_and_check_what_they_are_given(cluster):
    mnt = cluster.mount()
    with open(os.path.join(mnt, "f"), "wb") as f:
        f.write(bytes(range(256)) * 40)
    path, _ = door_of(mnt)
    s, m, rc = knock(path, "HELLO")
    assert rc == 0
    # What one may ask for: at most 4 GiB held, 256 threads; 4 prefetchers a session.
    assert ask(s, "PF_NEW", arg=(4 << 30) + 1)[0] == -errno.EINVAL
    assert ask(s, "PF_NEW", flags=257)[0] == -errno.EINVAL

    def granted(sock, slot, asked):
        fh, n = ask(sock, "PF_NEW", arg=asked)
        return fh, (struct.unpack_from("=Q", slot, 0)[0] if fh > 0 and n == 8 else None)
    big = [granted(s, m, 1536 << 20) for _ in range(3)]
    # A uid's prefetchers hold 4 GiB at most: the third gets what is left.
    assert [g for _, g in big] == [1536 << 20, 1536 << 20, 1 << 30] and min(f for f, _ in big) > 0
    s2, m2, rc = knock(path, "HELLO")
    assert rc == 0 and ask(s2, "PF_NEW", arg=64 << 20)[0] == -errno.ENOMEM   # nothing left
    assert ask(s, "PF_STOP", fh=big[2][0]) == (0, 0)
    assert granted(s2, m2, 0)[1] == 256 << 20                       # libloom's default, back
    s2.close()
    small = [ask(s, "PF_NEW", arg=1 << 20)[0] for _ in range(3)]
    assert min(small[:2]) > 0 and small[2] == -errno.EMFILE         # 4 a session
    for fh in [f for f, _ in big[:2]] + small[:1]:
        assert ask(s, "PF_STOP", fh=fh) == (0, 0)
    fh = small[1]
    # Items are checked: an empty path, a NUL in one, a length under -1, a record cut short.
    for bad in (pf_items(("", 0, -1)), pf_items(("/a\0b", 0, -1)), pf_items(("/f", 0, -2)),
                pf_items(("/f", 0, -1))[:20]):
        m[:len(bad)] = bad
        assert ask(s, "PF_ITEMS", fh=fh, length=len(bad))[0] == -errno.EINVAL
    assert ask(s, "PF_TAKE", fh=fh, off=0, length=SLOT)[0] == -errno.EINVAL   # not started
    good = pf_items(("/f", 0, -1), ("/f", 100, 10), ("/nope", 0, -1))
    m[:len(good)] = good
    assert ask(s, "PF_ITEMS", fh=fh, length=len(good)) == (0, 0)
    assert ask(s, "PF_START", fh=fh) == (0, 0)
    assert ask(s, "PF_ITEMS", fh=fh, length=len(good))[0] == -errno.EBUSY
    assert ask(s, "PF_TAKE", fh=fh, off=0, length=SLOT) == (10240, 10240)
    assert bytes(m[:10240]) == bytes(range(256)) * 40
    assert ask(s, "PF_TAKE", fh=fh, off=1, length=SLOT) == (10, 10) and bytes(m[:10]) == bytes(range(100, 110))
    assert ask(s, "PF_TAKE", fh=fh, off=2, length=SLOT)[0] == -errno.ENOENT
    assert ask(s, "PF_TAKE", fh=fh, off=0, arg=5, length=SLOT)[0] == -errno.EINVAL  # not the one in hand
    assert ask(s, "PF_STOP", fh=fh) == (0, 0)
    assert ask(s, "PF_TAKE", fh=fh, off=0, length=SLOT)[0] == -errno.EBADF
    s.close()

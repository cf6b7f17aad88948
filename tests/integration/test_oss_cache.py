"""What an OSS keeps in its page cache: large (streaming) reads are dropped once sent, since the
client that asked caches them, while small reads stay cached (loom-oss --readcache-max-io).
Large writes start going to disk at once (--writeback-min-io); bench/ measures what that gains
for checkpoints."""

import importlib.util
import mmap
import os
import subprocess

import loomwire as w
from loomutil import OSS_BIN, KiB, MiB, object_path, parse_any_getstripe, second_mount

HERE = os.path.dirname(os.path.abspath(__file__))
# posix/posixutil.py by its path: putting posix/ on sys.path would shadow this directory's conftest.
_spec = importlib.util.spec_from_file_location("posixutil", os.path.join(HERE, "posix", "posixutil.py"))
posixutil = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(posixutil)
resident_pages = posixutil.resident_pages

SIZE = 8 * MiB




def drop_caches():
    subprocess.run(["sync"], check=True, timeout=120)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def one_object_file(cluster, mnt, name):
    """A SIZE-byte file on one OST, with no bytes on the MDS; returns (data, its object's path)."""
    d = os.path.join(mnt, "one")
    if not os.path.isdir(d):
        os.mkdir(d)
        cluster.loom("setstripe", "-E", "-1", "-c", "1", "/one")
    data = os.urandom(SIZE)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    layout = parse_any_getstripe(cluster.loom("getstripe", "/one/" + name).stdout)
    (idx, objid), = layout.objects
    return data, object_path(cluster.ost_dir(idx), objid), (idx, objid)


def stream_from_the_oss(cluster, idx, objid, size, chunk=MiB):
    """The object's bytes, read from its OSS in OST_READs of chunk bytes, as a client streams it."""
    host, port = cluster.oss_addr(cluster.oss_name(idx))
    got = bytearray()
    with w.Conn(host, port) as c:
        for off in range(0, size, chunk):
            h, _, bulk = c.call(w.OP["OST_READ"], w.ost_io(idx, objid, off, chunk))
            assert h.status == 0 and len(bulk) == min(chunk, size - off), (off, h.status, len(bulk))
            got += bulk
    return bytes(got)


def test_streaming_read_is_not_kept_small_reads_are(cluster):
    mnt = cluster.mount()
    data, obj, (idx, objid) = one_object_file(cluster, mnt, "f")
    pages = SIZE // 4096
    # Through a mount the client's request sizes follow the kernel's read-ahead window, which on
    # a loaded machine stays under the threshold for a varying part of the file; on the wire
    # they are what a streaming client sends. Without drop-behind every page would be resident;
    # with it, at most what the OSS's own kernel read ahead past the last drop.
    drop_caches()
    assert stream_from_the_oss(cluster, idx, objid, SIZE) == data
    assert resident_pages(obj, SIZE) < pages // 8, "the OSS kept what it streamed"
    # Through another mount the same bytes come back (what stays cached then is not asserted).
    with second_mount(cluster) as view:
        with open(os.path.join(view, "one", "f"), "rb", buffering=0) as f:
            assert f.read() == data

    drop_caches()
    offsets = [k * MiB + 12 * KiB for k in range(8)]
    fd = os.open(os.path.join(mnt, "one", "f"), os.O_RDONLY | os.O_DIRECT)
    try:
        buf = mmap.mmap(-1, 4096)
        for off in offsets:
            assert os.preadv(fd, [buf], off) == 4096
            assert buf[:] == data[off:off + 4096]
    finally:
        os.close(fd)
    for off in offsets:
        assert resident_pages_at(obj, off) == 1, "a 4 KiB read at %d was not kept" % off


def resident_pages_at(path, off):
    """Whether the page holding byte off of path is in the page cache (1) or not (0)."""
    before = resident_pages(path, off)
    return resident_pages(path, off + 4096) - before


def test_cache_policy_options_are_checked():
    for opt in ("--readcache-max-io", "--writeback-min-io"):
        for bad in ("abc", "-2", "12x", "", "99999999999"):
            p = subprocess.run([OSS_BIN, "--ost", "/nonexistent", "--mds", "127.0.0.1:1", opt, bad],
                               capture_output=True, text=True, timeout=30)
            assert p.returncode == 2, (opt, bad, p.returncode, p.stderr)
            assert opt in p.stderr

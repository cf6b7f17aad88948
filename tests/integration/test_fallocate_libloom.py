"""libloom's fallocate and seeks with no kernel in between (loom_fallocate, loom_seek_data, and
loom_lseek with SEEK_DATA / SEEK_HOLE): the checks a mount's kernel would have made first (modes,
errnos), made by libloom itself; and what only libloom sees: writes still on their way (write-
behind) when a punch or a seek comes, and the size and blocks its report gives the MDS."""

import ctypes
import errno
import os

from pyloom import connect, pylib

from loom._lib import lib

pytestmark = pylib

KiB = 1 << 10
MiB = 1 << 20
KEEP, PUNCH_HOLE, COLLAPSE, ZERO, INSERT, UNSHARE, WRITE_ZEROES = 0x01, 0x02, 0x08, 0x10, 0x20, 0x40, 0x80
PUNCH = PUNCH_HOLE | KEEP

lib.loom_fallocate.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
lib.loom_fallocate.restype = ctypes.c_int
lib.loom_seek_data.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
lib.loom_seek_data.restype = ctypes.c_int


def seek(h, off, whence):
    """loom_seek_data: the offset found, or the negative errno."""
    out = ctypes.c_int64(-1)
    rc = lib.loom_seek_data(h, off, whence, ctypes.byref(out))
    return rc if rc else out.value


def lseek(h, off, whence):
    out = ctypes.c_int64(-1)
    rc = lib.loom_lseek(h, off, whence, ctypes.byref(out))
    return rc if rc else out.value


def pwrite(h, data, off):
    buf = ctypes.create_string_buffer(data, len(data))
    assert lib.loom_pwrite(h, buf, len(data), off) == len(data)


def pread(h, n, off):
    buf = ctypes.create_string_buffer(n)
    got = lib.loom_pread(h, buf, n, off)
    assert got >= 0, os.strerror(-got)
    return buf.raw[:got]


def test_libloom_checks_modes_and_arguments_as_the_kernel_would(cluster):
    cluster.loom("setstripe", "-c", "4", "-S", "64K", "/")        # Data-on-MDT, then 4 stripes
    fs = connect(cluster)
    data = os.urandom(300 * KiB)
    with fs.open("/f", "w+b") as f:
        h = f._handle()
        pwrite(h, data, 0)
        # Modes the VFS refuses, and the ones it lets through that Loom does not do.
        for mode in (COLLAPSE, INSERT, UNSHARE, WRITE_ZEROES, PUNCH_HOLE, PUNCH_HOLE | ZERO | KEEP,
                     COLLAPSE | KEEP, 0x04, 0x100, -1):
            assert lib.loom_fallocate(h, mode, 64 * KiB, 64 * KiB) == -errno.EOPNOTSUPP, "mode %#x" % mode
        assert lib.loom_fallocate(h, 0, 0, 0) == -errno.EINVAL
        assert lib.loom_fallocate(h, PUNCH, 10, -5) == -errno.EINVAL
        assert lib.loom_fallocate(h, 0, -1, 10) == -errno.EINVAL
        assert lib.loom_fallocate(h, KEEP, (1 << 62) - 10, 20) == -errno.EFBIG
        # Seeks: errors as ext4 gives them, and lseek moving the position.
        assert seek(h, len(data), os.SEEK_DATA) == -errno.ENXIO
        assert seek(h, len(data) + 5, os.SEEK_HOLE) == -errno.ENXIO
        assert seek(h, -1, os.SEEK_DATA) == -errno.ENXIO
        assert seek(h, 0, os.SEEK_SET) == -errno.EINVAL
        assert seek(h, 100 * KiB, os.SEEK_DATA) == 100 * KiB
        assert seek(h, 0, os.SEEK_HOLE) == len(data)
        assert lseek(h, 123, os.SEEK_DATA) == 123 and lseek(h, 0, os.SEEK_CUR) == 123
        assert lseek(h, 123, os.SEEK_HOLE) == len(data) and lseek(h, 0, os.SEEK_CUR) == len(data)
        assert pread(h, len(data), 0) == data
    with fs.open("/f", "rb") as f:
        h = f._handle()
        for mode in (0, KEEP, PUNCH, ZERO):
            assert lib.loom_fallocate(h, mode, 0, 10) == -errno.EBADF
        assert seek(h, 0, os.SEEK_DATA) == 0                     # no write access needed
    assert fs.read_bytes("/f") == data
    fs.close()


def test_writes_behind_land_before_a_seek_or_punch_and_the_report_says_so(cluster):
    cluster.loom("setstripe", "-c", "4", "-S", "64K", "/")
    fs = connect(cluster)
    want = bytearray(15 * 128 * KiB + 64 * KiB)      # the end of the last write
    with fs.open("/g", "w+b") as f:
        h = f._handle()
        # Small writes go behind: answered before they land.
        for i in range(16):
            buf = os.urandom(64 * KiB)
            pwrite(h, buf, i * 128 * KiB)
            want[i * 128 * KiB:i * 128 * KiB + len(buf)] = buf
        # A seek waits for them: the first data past the Data-on-MDT part is the second write.
        assert seek(h, 64 * KiB, os.SEEK_DATA) == 128 * KiB
        assert seek(h, 128 * KiB, os.SEEK_HOLE) == 192 * KiB
        # So does a punch: none of them lands after it.
        assert lib.loom_fallocate(h, PUNCH, 0, 2 * MiB) == 0
        want[:] = bytes(len(want))
        assert pread(h, 2 * MiB, 0) == bytes(want)
        buf = os.urandom(1000)
        pwrite(h, buf, MiB + 17)
        want[MiB + 17:MiB + 17 + 1000] = buf
        # Allocating past the end grows the file, at once for this handle.
        assert lib.loom_fallocate(h, 0, 3 * MiB, MiB) == 0
        want.extend(bytes(4 * MiB - len(want)))
        assert pread(h, 4 * MiB + 10, 0) == bytes(want)
        assert seek(h, 2 * MiB, os.SEEK_DATA) == -errno.ENXIO    # allocated, never written
    st = fs.stat("/g")
    assert st.st_size == 4 * MiB
    # The report: the Data-on-MDT part (zeros now, still stored: 64 KiB), the page written after
    # the punch, and the 1 MiB allocated; the punched 1 MiB of writes gone.
    assert st.st_blocks == (64 * KiB + 4 * KiB + MiB) // 512, "st_blocks %d" % st.st_blocks
    assert fs.read_bytes("/g") == bytes(want)
    fs.close()

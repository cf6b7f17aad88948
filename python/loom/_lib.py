"""ctypes bindings to libloom (include/loom/loom.h): the C structs and the calls' signatures.

Nothing here is compiled: the package loads libloom.so at import. It looks, in order, at
$LOOM_LIBRARY, at the copy inside the package (`pip install .` puts it there), at the build tree
beside this source tree (build/src/client/, or $LOOM_BUILD's), and then where the dynamic linker
finds an installed libloom.so.0 (`meson install`, the Debian package).
"""

import ctypes
import ctypes.util
import os

c_int, c_uint, c_uint32, c_int32, c_uint64, c_int64, c_size_t, c_ssize_t = (
    ctypes.c_int, ctypes.c_uint, ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64, ctypes.c_int64,
    ctypes.c_size_t, ctypes.c_ssize_t)
c_void_p, c_char_p, POINTER, byref = ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER, ctypes.byref

LOOM_NAME_MAX = 255
LOOM_POOL_NAME_MAX = 15
LOOM_LAYOUT_DEFAULT = 0x1
LOOM_LAYOUT_INHERITED = 0x2
LOOM_LAYOUT_WRITE_PENDING = 0x4
LOOM_OBJ_STALE = 0x1
LOOM_DOM_NONE = 0xFFFFFFFF
LOOM_DEFAULT_STRIPE_SIZE = 4 << 20
LOOM_JOBID_LEN = 32


class Attr(ctypes.Structure):
    """struct loom_attr: a struct stat in fixed-width fields (loom_attr_from_stat)."""
    _fields_ = [("dev", c_uint64), ("ino", c_uint64), ("nlink", c_uint64), ("rdev", c_uint64),
                ("mode", c_uint32), ("uid", c_uint32), ("gid", c_uint32), ("pad", c_uint32),
                ("size", c_int64), ("blksize", c_int64), ("blocks", c_int64),
                ("atime_sec", c_int64), ("atime_nsec", c_int64), ("mtime_sec", c_int64),
                ("mtime_nsec", c_int64), ("ctime_sec", c_int64), ("ctime_nsec", c_int64)]


class FsAttr(ctypes.Structure):
    """struct loom_fsattr: a struct statvfs in fixed-width fields."""
    _fields_ = [(n, c_uint64) for n in ("bsize", "frsize", "blocks", "bfree", "bavail", "files",
                                       "ffree", "favail", "fsid", "flag", "namemax")]


class ConnectOpts(ctypes.Structure):
    _fields_ = [("fsname", c_char_p), ("key_file", c_char_p), ("recovery_seconds", c_uint),
                ("soft_seconds", c_uint), ("at_min_seconds", c_uint), ("encrypt", ctypes.c_bool)]


class Dirent(ctypes.Structure):
    _fields_ = [("ino", c_uint64), ("type", ctypes.c_ubyte),
                ("name", ctypes.c_char * (LOOM_NAME_MAX + 1))]


class OstObj(ctypes.Structure):
    _fields_ = [("ost_idx", c_uint32), ("flags", c_uint32), ("objid", c_uint64)]


class Layout(ctypes.Structure):
    """struct loom_layout without its flexible array of objects (nobjs OstObj follow it)."""
    _fields_ = [("pattern", c_uint32), ("stripe_size", c_uint32), ("stripe_count", c_int32),
                ("stripe_offset", c_int32), ("layout_gen", c_uint32), ("flags", c_uint32),
                ("pool", ctypes.c_char * (LOOM_POOL_NAME_MAX + 1)), ("dom_size", c_uint32),
                ("mirror_count", ctypes.c_uint16), ("ec_parity", ctypes.c_uint16), ("nobjs", c_uint32),
                ("pad", c_uint32)]


class PrefetchItem(ctypes.Structure):
    _fields_ = [("path", c_char_p), ("offset", c_uint64), ("length", c_int64)]


class PrefetchOpts(ctypes.Structure):
    _fields_ = [("max_bytes", c_size_t), ("threads", c_uint), ("max_ahead", c_uint)]


class MirrorDiff(ctypes.Structure):
    _fields_ = [("differ", ctypes.c_bool), ("mirror_a", c_uint32), ("mirror_b", c_uint32),
                ("offset", c_uint64), ("compared", c_uint64)]


class PrefetchStats(ctypes.Structure):
    _fields_ = [("fetched", c_uint64), ("ready", c_uint64), ("waited", c_uint64),
                ("direct", c_uint64), ("dropped", c_uint64), ("bytes_fetched", c_uint64),
                ("bytes_held", c_size_t), ("peak_bytes", c_size_t)]


def _candidates():
    env = os.environ.get("LOOM_LIBRARY")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libloom.so.0")   # the copy `pip install .` puts in the package
    build = os.environ.get("LOOM_BUILD") or os.path.join(here, "..", "..", "build")
    yield os.path.join(build, "src", "client", "libloom.so")
    yield "libloom.so.0"
    found = ctypes.util.find_library("loom")
    if found:
        yield found


def _load():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            continue
        try:
            return ctypes.CDLL(path, use_errno=True)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("loom: cannot load libloom (build Loom with `make`, or set LOOM_LIBRARY): "
                      + "; ".join(errors or ["not found"]))


lib = _load()

_SIGNATURES = {
    "loom_connect_with": (c_int, [c_char_p, POINTER(ConnectOpts), POINTER(c_void_p)]),
    "loom_disconnect": (None, [c_void_p]),
    "loom_disconnect_nowait": (None, [c_void_p]),
    "loom_connect_error": (c_char_p, []),
    "loom_key_refusal": (c_int, [c_char_p, c_char_p, c_size_t]),
    "loom_connect_mount": (c_int, [c_char_p, POINTER(c_void_p)]),
    "loom_fsname": (c_char_p, [c_void_p]),
    "loom_jobid_conf": (c_int, [c_void_p, c_char_p, c_char_p]),
    "loom_jobid_from_mount": (c_int, [c_void_p, c_char_p]),
    "loom_jobid": (None, [c_void_p, c_char_p, c_size_t]),
    "loom_stat": (c_int, [c_void_p, c_char_p, c_void_p]),
    "loom_lstat": (c_int, [c_void_p, c_char_p, c_void_p]),
    "loom_mkdir": (c_int, [c_void_p, c_char_p, c_uint]),
    "loom_rmdir": (c_int, [c_void_p, c_char_p]),
    "loom_unlink": (c_int, [c_void_p, c_char_p]),
    "loom_rename": (c_int, [c_void_p, c_char_p, c_char_p, c_uint]),
    "loom_symlink": (c_int, [c_void_p, c_char_p, c_char_p]),
    "loom_readlink": (c_int, [c_void_p, c_char_p, c_char_p, c_size_t, POINTER(c_size_t)]),
    "loom_chmod": (c_int, [c_void_p, c_char_p, c_uint]),
    "loom_truncate": (c_int, [c_void_p, c_char_p, c_int64]),
    "loom_statfs": (c_int, [c_void_p, c_void_p]),
    "loom_opendir": (c_int, [c_void_p, c_char_p, POINTER(c_void_p)]),
    "loom_readdir": (c_int, [c_void_p, POINTER(Dirent)]),
    "loom_closedir": (None, [c_void_p]),
    "loom_open": (c_int, [c_void_p, c_char_p, c_int, c_uint, POINTER(c_void_p)]),
    "loom_create": (c_int, [c_void_p, c_char_p, c_int, c_uint, POINTER(Layout), POINTER(c_void_p)]),
    "loom_pread": (c_ssize_t, [c_void_p, c_void_p, c_size_t, c_int64]),
    "loom_pwrite": (c_ssize_t, [c_void_p, c_void_p, c_size_t, c_int64]),
    "loom_write": (c_ssize_t, [c_void_p, c_void_p, c_size_t]),
    "loom_lseek": (c_int, [c_void_p, c_int64, c_int, POINTER(c_int64)]),
    "loom_fsync": (c_int, [c_void_p]),
    "loom_sync": (c_int, [c_void_p]),
    "loom_ftruncate": (c_int, [c_void_p, c_int64]),
    "loom_fstat": (c_int, [c_void_p, c_void_p]),
    "loom_close": (c_int, [c_void_p]),
    "loom_file_attr": (None, [c_void_p, c_void_p]),
    "loom_getlayout": (c_int, [c_void_p, c_char_p, POINTER(POINTER(Layout))]),
    "loom_setlayout": (c_int, [c_void_p, c_char_p, POINTER(Layout)]),
    "loom_dellayout": (c_int, [c_void_p, c_char_p]),
    "loom_layout_free": (None, [POINTER(Layout)]),
    "loom_mirror_resync": (c_int, [c_void_p, c_char_p, ctypes.c_uint]),
    "loom_mirror_extend": (c_int, [c_void_p, c_char_p]),
    "loom_mirror_split": (c_int, [c_void_p, c_char_p, c_uint32]),
    "loom_mirror_verify": (c_int, [c_void_p, c_char_p, POINTER(MirrorDiff)]),
    "loom_prefetch_start": (c_int, [c_void_p, POINTER(PrefetchItem), c_size_t,
                                    POINTER(PrefetchOpts), POINTER(c_void_p)]),
    "loom_prefetch_take": (c_ssize_t, [c_void_p, c_size_t, POINTER(c_void_p)]),
    "loom_prefetch_free": (None, [c_void_p]),
    "loom_prefetch_get_stats": (None, [c_void_p, POINTER(PrefetchStats)]),
    "loom_prefetch_stop": (None, [c_void_p]),
    "loom_attr_from_stat": (None, [c_void_p, POINTER(Attr)]),
    "loom_fsattr_from_statvfs": (None, [c_void_p, POINTER(FsAttr)]),
    "loom_struct_size": (c_size_t, [c_char_p]),
}

for _name, (_restype, _argtypes) in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes


# The structs mirrored here, checked against the sizes libloom was built with: a package and a
# library of different versions fail at import, not with a corrupt answer later.
MIRRORED = {"attr": Attr, "fsattr": FsAttr, "connect_opts": ConnectOpts, "dirent": Dirent,
            "layout": Layout, "ostobj": OstObj, "prefetch_item": PrefetchItem,
            "prefetch_opts": PrefetchOpts, "prefetch_stats": PrefetchStats, "mirror_diff": MirrorDiff}


def check_mirrored(mirrored):
    for name, cls in mirrored.items():
        size = lib.loom_struct_size(name.encode())
        if size != ctypes.sizeof(cls):
            raise ImportError("loom: struct loom_%s is %d bytes in %s but %d in this package: "
                              "they are of different versions" % (name, size, lib._name,
                                                                  ctypes.sizeof(cls)))


check_mirrored(MIRRORED)
STAT_SIZE = lib.loom_struct_size(b"stat")
STATVFS_SIZE = lib.loom_struct_size(b"statvfs")


def stat_call(fn, *args):
    """fn(*args, struct stat *): its return value, and the struct as an Attr."""
    buf = ctypes.create_string_buffer(STAT_SIZE)
    rc = fn(*args, buf)
    attr = Attr()
    if rc == 0 or rc is None:
        lib.loom_attr_from_stat(buf, byref(attr))
    return rc, attr


def statvfs_call(fn, *args):
    """fn(*args, struct statvfs *): its return value, and the struct as an FsAttr."""
    buf = ctypes.create_string_buffer(STATVFS_SIZE)
    rc = fn(*args, buf)
    attr = FsAttr()
    if rc == 0:
        lib.loom_fsattr_from_statvfs(buf, byref(attr))
    return rc, attr

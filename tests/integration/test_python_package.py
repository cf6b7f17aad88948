"""The Python package as users install and reach it: `pip install .` and `pip install -e .`
(pyproject.toml, setup.py), the import-time check of the structs it mirrors, and fsspec's
`loom://` protocol (python/loom/fsspec.py) with fsspec's own calls and pandas."""

import ctypes
import os
import pickle
import shutil
import subprocess
import sys

import pytest

from loomutil import BUILD, REPO
from pyloom import connect, loom, pylib

import loom._lib as _lib

pytestmark = pylib

fsspec = pytest.importorskip("fsspec")
import loom.fsspec  # noqa: E402,F401  (registers loom:// from the source tree)


def _source_copy(dst):
    """What pip needs of the repository, copied so that its build files land outside it."""
    os.makedirs(os.path.join(dst, "python"))
    for name in ("pyproject.toml", "setup.py"):
        shutil.copy(os.path.join(REPO, name), dst)
    os.makedirs(os.path.join(dst, "docs"))
    shutil.copy(os.path.join(REPO, "docs", "python.md"), os.path.join(dst, "docs"))
    shutil.copytree(os.path.join(REPO, "python", "loom"), os.path.join(dst, "python", "loom"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _venv(path):
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", path], check=True)
    return os.path.join(path, "bin", "python")


def _pip_install(python, *args, env):
    r = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                        "--disable-pip-version-check", "-q", *args],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def _user_env(cluster):
    """A user's environment: none of the suite's variables that point the package at the
    build tree."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LOOM_LIBRARY", "LOOM_BUILD", "PYTHONPATH")}
    env["LOOM_KEY_FILE"] = cluster.key
    return env


USE_INSTALLED = r"""
import sys, fsspec, loom, loom._lib
addr = sys.argv[1]
fs = loom.connect(addr)
with fs.open("/installed.txt", "wb") as f:
    f.write(b"from an installed package")
# No `import loom.fsspec`: fsspec finds loom:// through the installed entry point.
with fsspec.open("loom://%s/installed.txt" % addr, "rb") as f:
    f.seek(5)
    print(f.read(9).decode())
print(loom._lib.lib._name)
print(loom.__file__)
"""


def test_pip_install_puts_libloom_in_the_package_and_fsspec_finds_loom_urls(cluster, tmp_path):
    src = _source_copy(str(tmp_path / "src"))
    python = _venv(str(tmp_path / "venv"))
    build_env = dict(_user_env(cluster), LOOM_BUILD=BUILD)  # setup.py builds in this tree
    _pip_install(python, src, env=build_env)
    r = subprocess.run([python, "-c", USE_INSTALLED, cluster.addr], cwd=str(tmp_path),
                       env=_user_env(cluster), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    word, lib_path, module = r.stdout.splitlines()
    assert word == "an instal"
    site = os.path.join(str(tmp_path / "venv"), "lib")
    assert lib_path.startswith(site) and lib_path.endswith("/loom/libloom.so.0"), lib_path
    assert module.startswith(site), module
    assert open(lib_path, "rb").read() == open(
        os.path.realpath(os.path.join(BUILD, "src", "client", "libloom.so")), "rb").read()


def test_an_editable_install_loads_the_build_tree_beside_its_sources(cluster, tmp_path):
    src = _source_copy(str(tmp_path / "src"))
    os.symlink(BUILD, os.path.join(src, "build"))
    python = _venv(str(tmp_path / "venv"))
    _pip_install(python, "-e", src, env=_user_env(cluster))
    assert not os.path.exists(os.path.join(src, "python", "loom", "libloom.so.0"))
    r = subprocess.run([python, "-c", USE_INSTALLED, cluster.addr], cwd="/",
                       env=_user_env(cluster), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    word, lib_path, module = r.stdout.splitlines()
    assert word == "an instal"
    assert os.path.realpath(lib_path) == os.path.realpath(
        os.path.join(BUILD, "src", "client", "libloom.so"))
    assert module == os.path.join(src, "python", "loom", "__init__.py")


# ---- the structs the package mirrors ------------------------------------------------------


def test_the_package_refuses_a_libloom_whose_structs_differ_from_its_own():
    _lib.check_mirrored(_lib.MIRRORED)  # as at import

    class OldDirent(ctypes.Structure):  # a version with a shorter name field
        _fields_ = [("ino", ctypes.c_uint64), ("type", ctypes.c_ubyte), ("name", ctypes.c_char * 128)]

    assert ctypes.sizeof(_lib.Dirent) == 272
    with pytest.raises(ImportError, match=r"struct loom_dirent is 272 bytes in .* but 144"):
        _lib.check_mirrored({"dirent": OldDirent})
    assert _lib.lib.loom_struct_size(b"no_such_struct") == 0
    assert _lib.STAT_SIZE > 0 and _lib.STATVFS_SIZE > 0


def test_stat_and_statvfs_read_as_os_gives_them_on_the_mount(cluster):
    mnt = cluster.mount()
    fs = connect(cluster, mnt)
    p = os.path.join(mnt, "times")
    with open(p, "wb") as f:
        f.write(b"x" * 70000)
    os.chmod(p, 0o4751)
    os.utime(p, ns=(1_234_567_890_123_456_789, 1_600_000_000_987_654_321))
    os.link(p, p + ".2")
    want, got = os.stat(p), fs.stat(p)
    for field in ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime_ns",
                  "st_mtime_ns", "st_ctime_ns", "st_blocks", "st_atime", "st_mtime", "st_ctime"):
        assert getattr(got, field) == getattr(want, field), field
    assert (got.st_mtime_ns, got.st_nlink, stat_mode(got)) == (1_600_000_000_987_654_321, 2, 0o4751)
    want, got = os.statvfs(mnt), fs.statvfs()
    for field in ("f_bsize", "f_frsize", "f_blocks", "f_files", "f_namemax"):
        assert getattr(got, field) == getattr(want, field), field
    fs.close()


def stat_mode(st):
    return st.st_mode & 0o7777


# ---- fsspec's loom:// ------------------------------------------------------------------------


@pytest.fixture
def cached_instances(cluster):
    """fsspec keeps the instances fsspec.open() and pandas make: their connections are closed
    before the test's cluster goes (teardown runs in the reverse order of setup)."""
    yield
    cls = loom.fsspec.LoomFileSystem
    for inst in list(cls._cache.values()):
        inst._lfs.close()
    cls.clear_instance_cache()


@pytest.fixture
def lfs(cluster):
    fs = fsspec.filesystem("loom", host=cluster.addr, key_file=cluster.key, skip_instance_cache=True)
    yield fs
    fs._lfs.close()


def test_fsspec_lists_and_describes_what_the_mount_shows(cluster, lfs):
    mnt = cluster.mount()
    os.makedirs(os.path.join(mnt, "ds", "sub"))
    for name, size in (("a.csv", 10), ("b.bin", 70000), ("sub/c.txt", 0)):
        with open(os.path.join(mnt, "ds", name), "wb") as f:
            f.write(b"z" * size)
    os.symlink("a.csv", os.path.join(mnt, "ds", "link"))
    listed = lfs.ls("loom://%s/ds" % cluster.addr)
    assert [e["name"] for e in listed] == ["/ds/a.csv", "/ds/b.bin", "/ds/link", "/ds/sub"]
    by = {e["name"]: e for e in listed}
    assert (by["/ds/b.bin"]["size"], by["/ds/b.bin"]["type"]) == (70000, "file")
    assert by["/ds/sub"]["type"] == "directory"
    assert by["/ds/link"]["islink"] and by["/ds/link"]["size"] == 10
    assert by["/ds/a.csv"]["mtime"] == os.stat(os.path.join(mnt, "ds", "a.csv")).st_mtime
    assert lfs.ls("/ds/a.csv", detail=False) == ["/ds/a.csv"]
    assert lfs.find("/ds") == ["/ds/a.csv", "/ds/b.bin", "/ds/link", "/ds/sub/c.txt"]
    assert lfs.glob("/ds/**/*.txt") == ["/ds/sub/c.txt"]
    assert lfs.isdir("/ds/sub") and lfs.isfile("/ds/b.bin") and not lfs.exists("/ds/nope")
    assert lfs.du("/ds") == 10 + 70000 + 0 + 10
    with pytest.raises(FileNotFoundError):
        lfs.info("/ds/nope")
    with pytest.raises(FileNotFoundError):
        lfs.cat_file("/nope")
    with pytest.raises(IsADirectoryError):
        lfs.open("/ds/sub", "rb")


@pytest.mark.parametrize("start,end", [(None, None), (0, 1), (5, 70000), (65530, 65540),
                                       (-10, None), (100, -100), (69990, 80000), (80000, None),
                                       (500, 400), (-80000, 3)])
def test_fsspec_ranged_reads_give_the_bytes_a_slice_gives(cluster, lfs, start, end):
    mnt = cluster.mount()
    data = bytes((i * 7 + i // 251) & 0xFF for i in range(70000))
    with open(os.path.join(mnt, "r.bin"), "wb") as f:
        f.write(data)
    assert lfs.cat_file("/r.bin", start, end) == data[start:end]
    if (start or 0) >= 0 and (end or 0) >= 0:   # the same through a file object
        with lfs.open("/r.bin", "rb") as f:
            f.seek(start or 0)
            got = f.read(-1 if end is None else max(end - (start or 0), 0))
        assert got == data[start:end]


def test_fsspec_writes_renames_copies_and_removes_as_the_mount_sees(cluster, lfs, cached_instances):
    mnt = cluster.mount()
    url = "loom://%s" % cluster.addr
    with fsspec.open(url + "/w/one.txt", "w", key_file=cluster.key) as f:   # text mode
        f.write("line 1\nline 2\n")
    with open(os.path.join(mnt, "w", "one.txt"), "rb") as f:
        assert f.read() == b"line 1\nline 2\n"
    lfs.pipe("/w/two.bin", b"\x00\x01" * 5000)
    lfs.mv("/w/two.bin", "/w/three.bin")
    lfs.cp("/w/three.bin", "/w/four.bin")
    assert sorted(os.listdir(os.path.join(mnt, "w"))) == ["four.bin", "one.txt", "three.bin"]
    with open(os.path.join(mnt, "w", "four.bin"), "rb") as f:
        assert f.read() == b"\x00\x01" * 5000
    lfs.rm("/w", recursive=True)
    assert not os.path.exists(os.path.join(mnt, "w"))


def test_pandas_reads_and_writes_loom_urls(cluster, lfs, cached_instances):
    pd = pytest.importorskip("pandas")
    mnt = cluster.mount()
    with open(os.path.join(mnt, "table.csv"), "w") as f:
        f.write("step,loss\n1,2.5\n2,1.25\n3,0.625\n")
    opts = {"key_file": cluster.key}
    df = pd.read_csv("loom://%s/table.csv" % cluster.addr, storage_options=opts)
    assert list(df["loss"]) == [2.5, 1.25, 0.625]
    df["loss"] *= 2
    df.to_json("loom://%s/table.json" % cluster.addr, storage_options=opts)
    with open(os.path.join(mnt, "table.json")) as f:
        assert f.read() == '{"step":{"0":1,"1":2,"2":3},"loss":{"0":5.0,"1":2.5,"2":1.25}}'


def test_a_loom_url_may_name_the_mount_instead_of_the_mds(cluster, cached_instances):
    mnt = cluster.mount()
    with open(os.path.join(mnt, "m.txt"), "wb") as f:
        f.write(b"via the mount's MDS")
    with fsspec.open("loom://%s/m.txt" % mnt, "rb", key_file=cluster.key) as f:
        assert f.read() == b"via the mount's MDS"
    fs, path = fsspec.core.url_to_fs("loom://%s/m.txt" % mnt, key_file=cluster.key)
    assert (fs.host, path) == (mnt, "/m.txt")
    assert fs.ls("loom://%s" % mnt, detail=False) == ["/m.txt"]
    assert fs.glob("loom://%s/*.txt" % mnt) == ["/m.txt"]
    assert fs.unstrip_protocol("/m.txt") == "loom://%s/m.txt" % mnt
    copy = pickle.loads(pickle.dumps(fs))   # what a spawned DataLoader worker gets
    assert copy.cat_file("%s/m.txt" % mnt, 4, 7) == b"the"



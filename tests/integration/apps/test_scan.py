"""A program that stats every name of a big directory one after another (a loader's scan, `ls -l`
without readdir, tar) sees exactly what is there, on its own mount at once after its own changes,
and on another mount within the attribute timeout (loom-mount answers such scans from a listing
fetched whole: statahead). Also runs on a local folder, to prove the test."""

import errno
import os
import time

import pytest

N = 300
TIMEOUT = 1.0    # loom-mount's default entry and attribute timeouts, seconds


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


def scan(d, n=N):
    """{name: (size, mode)} from os.stat of f0..f{n-1}, None for a missing one."""
    out = {}
    for i in range(n):
        try:
            st = os.stat(os.path.join(d, "f%d" % i))
            out["f%d" % i] = (st.st_size, st.st_mode)
        except FileNotFoundError:
            out["f%d" % i] = None
    return out


def make(d, n=N):
    os.mkdir(d)
    for i in range(n):
        with open(os.path.join(d, "f%d" % i), "wb") as f:
            f.write(b"x" * (i % 7))


def test_scan_sees_its_own_changes_at_once(mounted):
    d = mounted.p("scan")
    make(d)
    drop_caches()
    got = scan(d)
    assert {k: v[0] if v else v for k, v in got.items()} == {"f%d" % i: i % 7 for i in range(N)}
    # Changes through this mount, each seen by the very next stat, mid-scan.
    os.unlink(os.path.join(d, "f10"))
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(d, "f10"))
    with open(os.path.join(d, "f11"), "ab") as f:
        f.write(b"more")
    assert os.stat(os.path.join(d, "f11")).st_size == 11 % 7 + 4
    os.rename(os.path.join(d, "f12"), os.path.join(d, "renamed"))
    assert not os.path.exists(os.path.join(d, "f12"))
    assert os.stat(os.path.join(d, "renamed")).st_size == 12 % 7
    os.chmod(os.path.join(d, "f13"), 0o600)
    assert os.stat(os.path.join(d, "f13")).st_mode & 0o777 == 0o600
    with open(os.path.join(d, "new"), "wb") as f:
        f.write(b"abc")
    assert os.stat(os.path.join(d, "new")).st_size == 3
    got = scan(d)
    assert got["f10"] is None and got["f12"] is None
    assert got["f11"][0] == 8 and got["f13"][1] & 0o777 == 0o600
    assert all(got["f%d" % i] == (i % 7, got["f%d" % i][1]) for i in range(N) if i not in (10, 11, 12, 13))
    assert sum(1 for v in got.values() if v is None) == 2


def test_scan_sees_another_mounts_changes_within_the_timeout(mounted, second_mount):
    d = mounted.p("scan")
    other = second_mount.p("scan")
    make(d)
    drop_caches()
    assert None not in scan(other).values()
    # Mount A changes names and sizes while mount B has a listing.
    os.unlink(os.path.join(d, "f5"))
    with open(os.path.join(d, "f6"), "ab") as f:
        f.write(b"12345")
    with open(os.path.join(d, "f%d" % N), "wb") as f:
        f.write(b"late")
    time.sleep(TIMEOUT + 0.5)
    got = scan(other, N + 1)
    assert got["f5"] is None, "mount B still sees a file removed %.1f s ago" % (TIMEOUT + 0.5)
    assert got["f6"][0] == 6 % 7 + 5, "mount B sees f6's old size %.1f s after it changed" % (TIMEOUT + 0.5)
    assert got["f%d" % N] == (4, got["f%d" % N][1]), "mount B does not see a file created %.1f s ago" % (
        TIMEOUT + 0.5)
    with pytest.raises(OSError) as e:
        os.stat(os.path.join(other, "f5"))
    assert e.value.errno == errno.ENOENT


def test_scans_of_several_directories_at_once_see_exactly_what_is_there(mounted, second_mount):
    """Two programs each scanning a directory of their own, their stats interleaved (mdtest's
    processes): each directory is followed apart (a listing each), and each sees its own changes
    at once and another mount's within the timeout."""
    dirs = [mounted.p("scan%d" % k) for k in range(3)]
    for d in dirs:
        make(d)
    drop_caches()
    seen = [{} for _ in dirs]
    for i in range(N):
        for k, d in enumerate(dirs):
            st = os.stat(os.path.join(d, "f%d" % i))
            seen[k]["f%d" % i] = st.st_size
    assert all(s == {"f%d" % i: i % 7 for i in range(N)} for s in seen)
    # Changes through this mount, seen at once in the middle of the interleaved scans.
    os.unlink(os.path.join(dirs[0], "f1"))
    with open(os.path.join(dirs[1], "f2"), "ab") as f:
        f.write(b"more")
    assert not os.path.exists(os.path.join(dirs[0], "f1"))
    assert os.stat(os.path.join(dirs[1], "f2")).st_size == 2 + 4
    # Another mount's, within the timeout.
    os.unlink(os.path.join(second_mount.p("scan2"), "f3"))
    time.sleep(TIMEOUT + 0.5)
    for i in range(N):
        for k, d in enumerate(dirs):
            try:
                seen[k]["f%d" % i] = os.stat(os.path.join(d, "f%d" % i)).st_size
            except FileNotFoundError:
                seen[k]["f%d" % i] = None
    assert seen[0]["f1"] is None and seen[1]["f2"] == 6 and seen[2]["f3"] is None
    assert sum(v is None for s in seen for v in s.values()) == 2

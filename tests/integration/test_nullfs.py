"""bench/nullfs.c, the yardstick bench/fuse_floor.py sets beside Loom: its figures stand for what a
FUSE file system can do here only if it is one, so what the workloads do must work on it as on
a local folder (bytes, sizes, errors)."""
import errno
import fcntl
import os
import subprocess
import termios
import time

import numpy as np
import pytest

from loomutil import BUILD

NULLFS = os.path.join(BUILD, "bench", "loom-nullfs")


@pytest.fixture
def nullfs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    p = subprocess.Popen([NULLFS, str(mnt)])
    try:
        for _ in range(200):
            if os.path.ismount(mnt):
                break
            assert p.poll() is None, "loom-nullfs exited"
            time.sleep(0.05)
        assert os.path.ismount(mnt)
        yield str(mnt)
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], check=False)
        p.wait(timeout=30)


def test_the_workloads_calls_behave_as_on_a_local_folder(nullfs):
    d = os.path.join(nullfs, "d")
    os.mkdir(d)
    a = np.arange(3000, dtype=np.int32)
    np.save(os.path.join(d, "a.npy"), a)
    assert np.load(os.path.join(d, "a.npy")).tolist() == a.tolist()
    p = os.path.join(d, "f")
    os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640))
    with pytest.raises(FileExistsError):
        os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640)
    st = os.stat(p)
    assert (st.st_size, st.st_mode & 0o777) == (0, 0o640)
    with open(p, "r+b") as f:
        f.write(b"x" * 5000)
        f.seek(70000)
        f.write(b"y")
    assert os.stat(p).st_size == 70001
    with open(p, "rb") as f:
        got = f.read()
    assert got == b"x" * 5000 + bytes(65000) + b"y"
    fd = os.open(p, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as e:
            fcntl.ioctl(fd, termios.TCGETS, bytes(64))
        assert e.value.errno == errno.ENOTTY
    finally:
        os.close(fd)
    assert sorted(os.listdir(d)) == ["a.npy", "f"]
    os.unlink(p)
    assert not os.path.exists(p)
    with pytest.raises(OSError) as e:
        os.rmdir(d)
    assert e.value.errno == errno.ENOTEMPTY
    os.unlink(os.path.join(d, "a.npy"))
    os.rmdir(d)
    assert os.listdir(nullfs) == []

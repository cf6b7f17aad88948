"""Erasure-coded files through the mount and the tool only (no Python package), so that the
sanitized pass runs the client's erasure-coding paths too: the mount gathers 1 MiB writes into
rows with their parity, a write into the middle of a row stales the parity until the MDS makes it
again, and with two OSSs killed the tool and a second mount read every byte."""

import hashlib
import os
import re

import pytest

from loomutil import MiB, wait_until

LOST_OSS = r"(WARN|ERROR): .*(OST[0-9a-f]{4}|127\.0\.0\.1:\d+).*(lost|refused|reach|reset|closed)"
EC_STALE = r"WARN: erasure-coded file \d+: (data|parity) object \d+ .*(missed a write|will miss a write)"


def osts_of(cluster, path):
    out = cluster.loom("getstripe", path).stdout
    return [int(o) for o in re.findall(r"l_ost_idx: (\d+)", out)], out


@pytest.mark.allow_log(LOST_OSS, EC_STALE)
def test_a_mounted_erasure_coded_file_survives_two_lost_osss(cluster_factory, tmp_path):
    cluster = cluster_factory(osts=6)
    mnt = cluster.mount()
    cluster.loom("mkdir", "/e")
    cluster.loom("setstripe", "--ec", "4+2", "-S", "1M", "/e")   # with the default Data-on-MDT part
    data = bytearray(os.urandom(9 * MiB + 123))
    path = os.path.join(mnt, "e", "f")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for off in range(0, len(data), MiB):
        os.write(fd, data[off:off + MiB])
    os.fsync(fd)
    os.close(fd)
    osts, out = osts_of(cluster, "/e/f")
    assert len(set(osts)) == 6 and "stale" not in out, out
    assert cluster.loom("ec", "verify", "/e/f").returncode == 0
    # Into the middle of a row: the parity goes stale first, and is made again after the close.
    data[5 * MiB + 3:5 * MiB + 5003] = b"Y" * 5000
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, b"Y" * 5000, 5 * MiB + 3)
    assert "init,parity,stale" in cluster.loom("getstripe", "/e/f").stdout
    os.close(fd)
    assert wait_until(lambda: "stale" not in cluster.loom("getstripe", "/e/f").stdout, 60, 0.2), \
        cluster.loom("getstripe", "/e/f").stdout
    assert cluster.loom("ec", "verify", "-v", "/e/f").stdout.startswith("/e/f: every object agrees")
    # Data object 1 and parity object 0 gone: every byte, through the tool and another mount.
    for i in (1, 4):
        cluster.kill9(cluster.oss_name(osts[i]))
    back = tmp_path / "back"
    cluster.loom("get", "/e/f", str(back))
    want = hashlib.sha256(bytes(data)).hexdigest()
    assert hashlib.sha256(back.read_bytes()).hexdigest() == want
    other = cluster.mount()
    with open(os.path.join(other, "e", "f"), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == want

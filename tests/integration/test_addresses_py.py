"""loom.connect with the MDS addresses mount takes: failover lists, Lustre's NIDs, a mount's source
in every form (found from /proc/self/mounts), and libloom's sentence when none answers."""
import errno
import os
import socket
import subprocess
import tempfile

import pytest

from pyloom import loom, pylib
from test_addresses import mount_t_loom

pytestmark = pylib
DEAD = "127.0.0.9"


def test_connect_takes_lists_nids_and_mount_sources(cluster_factory):
    c = cluster_factory(osts=1)
    P = c.mds_port
    c.loom("mkdir", "/seen")
    for target in ("%s:%d,127.0.0.1:%d" % (DEAD, P, P), "%s@tcp:%d:127.0.0.1@tcp:%d" % (DEAD, P, P),
                   "localhost:%d" % P, "%s@tcp:%d,localhost:%d:/loom" % (DEAD, P, P)):
        fs = loom.connect(target, key_file=c.key)
        assert fs.fsname == "loom" and "seen" in fs.listdir("/"), target
        fs.close()
    # Through a mount whose source is Lustre's colon form: the MDS is found from it.
    mnt = tempfile.mkdtemp(prefix="loom-addr-py-")
    spec = "%s@tcp:%d:127.0.0.1@tcp:%d:/loom" % (DEAD, P, P)
    subprocess.run(mount_t_loom(spec, mnt, "key=" + c.key), check=True, timeout=120)
    try:
        assert loom.mount_of(mnt) == (os.path.realpath(mnt), spec)
        fs = loom.connect(mnt, key_file=c.key)
        assert fs.fsname == "loom" and "seen" in fs.listdir(mnt)
        fs.close()
    finally:
        subprocess.run(["umount", mnt], check=True, timeout=60)
        os.rmdir(mnt)


def test_connect_errors_name_the_address(cluster_factory):
    c = cluster_factory(osts=1)
    try:
        socket.getaddrinfo("no-such-host.invalid", None, socket.AF_INET)
        pytest.skip("no-such-host.invalid resolves here")
    except socket.gaierror as e:
        gai = e.strerror
    cases = [
        ("no-such-host.invalid", "cannot resolve no-such-host.invalid: " + gai),
        ("%s:%d" % (DEAD, c.mds_port), "%s:%d: Connection refused" % (DEAD, c.mds_port)),
        ("mds1@o2ib", "loom supports TCP only: 'mds1@o2ib' is on LNet network o2ib (write mds1@tcp, or mds1)"),
        ("%s:/other" % c.addr, "the MDS at %s serves file system loom, not other" % c.addr),
    ]
    for target, why in cases:
        with pytest.raises(OSError) as ei:
            loom.connect(target, key_file=c.key, recovery_seconds=1)
        mds = target.split(":/")[0]
        assert ei.value.strerror == "cannot connect to the Loom MDS at %s: %s" % (mds, why), target
    with pytest.raises(OSError) as ei:
        loom.connect("%s:/other" % c.addr, key_file=c.key)
    assert ei.value.errno == errno.ENODEV

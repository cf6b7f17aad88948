"""loom ost deactivate/activate: an OST taken out on purpose gets no new stripes, keeps serving the
files it holds, is marked N by `loom df`, and stays out across an MDS restart."""

import os
import shutil
import subprocess

from loomutil import LOOM, MiB, make_random_file, parse_any_getstripe, sha256_file


def osts_of(cluster, path):
    return [idx for idx, _ in parse_any_getstripe(cluster.loom("getstripe", path).stdout).objects]


def df_row(cluster, idx):
    for line in cluster.loom("df").stdout.splitlines():
        if line.startswith("loom-OST%04x_UUID" % idx):
            return line
    raise AssertionError("no df row for OST%04x" % idx)


def test_deactivated_ost_gets_no_new_stripes_and_keeps_its_files(cluster, workdir):
    cluster.loom("setstripe", "-E", "-1", "-c", "-1", "-S", "64k", "/")
    src = os.path.join(workdir, "src")
    make_random_file(src, 2 * MiB + 17)
    cluster.loom("put", src, "/before")
    assert sorted(osts_of(cluster, "/before")) == [0, 1, 2, 3]

    p = cluster.loom("ost", "deactivate", "OST0002")
    assert p.stdout == "OST0002 deactivated: no new stripes go there\n"
    assert df_row(cluster, 2).endswith("[OST:2] N"), df_row(cluster, 2)
    assert not df_row(cluster, 1).endswith(" N")
    for k in range(12):
        cluster.loom("setstripe", "-c", "-1", "/new%d" % k)
        assert sorted(osts_of(cluster, "/new%d" % k)) == [0, 1, 3]
    cluster.loom("setstripe", "-c", "1", "-i", "2", "/asked")   # asked for it: the next one up
    assert osts_of(cluster, "/asked") == [3]
    # Its files are still read and written whole.
    out = os.path.join(workdir, "out")
    cluster.loom("get", "/before", out)
    assert sha256_file(out) == sha256_file(src)
    cluster.loom("put", src, "/before")
    cluster.loom("get", "/before", out)
    assert sha256_file(out) == sha256_file(src)

    # The MDS keeps the state across a restart, and the re-registration of the OST.
    cluster.down()
    cluster.up()
    assert df_row(cluster, 2).endswith("[OST:2] N")
    cluster.loom("setstripe", "-c", "-1", "/after-restart")
    assert sorted(osts_of(cluster, "/after-restart")) == [0, 1, 3]

    assert cluster.loom("ost", "activate", "2").stdout == "OST0002 activated\n"
    assert not df_row(cluster, 2).endswith(" N")
    cluster.loom("setstripe", "-c", "-1", "/again")
    assert sorted(osts_of(cluster, "/again")) == [0, 1, 2, 3]


def test_ost_verb_errors(cluster, workdir):
    p = cluster.loom("ost", "deactivate", "9", check=False)
    assert p.returncode == 1 and "no OST has index 9" in p.stderr
    for bad in (["ost"], ["ost", "deactivate"], ["ost", "stop", "1"], ["ost", "deactivate", "x1"],
                ["ost", "activate", "-1"], ["ost", "activate", "70000"]):
        p = cluster.loom(*bad, check=False)
        assert p.returncode == 2, (bad, p.returncode, p.stderr)
    # Only root steers placement: a user who holds the key is refused.
    key = os.path.join(workdir, "user.key")
    shutil.copy(cluster.key, key)
    os.chown(key, 65534, 65534)
    os.chmod(workdir, 0o755)
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", LOOM, "--fs", cluster.addr,
                        "--key", key, "ost", "deactivate", "1"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "only root may deactivate" in p.stderr, p.stderr
    assert not df_row(cluster, 1).endswith(" N")

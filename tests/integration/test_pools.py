"""OST pools: loom pool (lctl pool_*), setstripe -p, df --pool and find --pool."""

import os
import shutil
import subprocess

from loomutil import LOOM, parse_any_getstripe


def osts_of(cluster, path):
    return sorted(idx for idx, _ in parse_any_getstripe(cluster.loom("getstripe", path).stdout).objects)


def test_pool_places_new_files_on_its_osts(cluster):
    assert cluster.loom("pool", "list").stdout == "Pools from loom:\n"
    cluster.loom("pool", "new", "fast")
    cluster.loom("pool", "add", "loom.fast", "OST0003", "1")
    assert cluster.loom("pool", "list").stdout == "Pools from loom:\nloom.fast\n"
    assert cluster.loom("pool", "list", "fast").stdout == \
        "Pool: loom.fast\nloom-OST0001_UUID\nloom-OST0003_UUID\n"

    cluster.loom("mkdir", "/p")
    cluster.loom("setstripe", "-E", "-1", "-c", "-1", "-p", "fast", "/p")
    assert cluster.loom("getstripe", "-p", "/p").stdout == "fast\n"
    for k in range(8):
        cluster.loom("put", "-", "/p/f%d" % k, input="data %d\n" % k)
        assert osts_of(cluster, "/p/f%d" % k) == [1, 3]
    cluster.loom("setstripe", "-E", "-1", "-c", "1", "-p", "fast", "/one")
    assert osts_of(cluster, "/one") in ([1], [3])
    assert "lmm_pool:          fast" in cluster.loom("getstripe", "/p/f0").stdout

    # An OST that leaves gets no new files of the pool; the pool's old files keep theirs.
    cluster.loom("pool", "remove", "fast", "3")
    cluster.loom("put", "-", "/p/later", input="later\n")
    assert osts_of(cluster, "/p/later") == [1]
    assert osts_of(cluster, "/p/f0") == [1, 3]
    assert cluster.loom("cat", "/p/f0").stdout == "data 0\n"

    # df --pool shows the MDT and the pool's OSTs; find --pool the files that name it.
    rows = [line.split()[0] for line in cluster.loom("df", "--pool", "fast").stdout.splitlines() if line]
    assert rows == ["UUID", "loom-MDT0000_UUID", "loom-OST0001_UUID", "filesystem_summary:"]
    found = cluster.loom("find", "/", "--pool", "fast", "-t", "f").stdout.split()
    assert sorted(found) == sorted(["/one", "/p/later"] + ["/p/f%d" % k for k in range(8)])

    # Pools are kept by the MDT.
    cluster.down()
    cluster.up()
    assert cluster.loom("pool", "list", "fast").stdout == "Pool: loom.fast\nloom-OST0001_UUID\n"

    # Only an empty pool goes; a directory that still names it then stripes over every OST.
    p = cluster.loom("pool", "destroy", "fast", check=False)
    assert p.returncode == 1 and "still has OSTs" in p.stderr
    cluster.loom("pool", "remove", "fast", "1")
    cluster.loom("pool", "destroy", "fast")
    assert cluster.loom("pool", "list").stdout == "Pools from loom:\n"
    cluster.loom("put", "-", "/p/after", input="after\n")
    assert osts_of(cluster, "/p/after") == [0, 1, 2, 3]


def test_pool_errors(cluster, workdir):
    cluster.loom("pool", "new", "a")
    for args, code, text in (
            (["pool", "new", "a"], 1, "exists already"),
            (["pool", "new", "bad.name.x"], 1, "not a pool of file system"),
            (["pool", "new", "b@d"], 1, "not a pool name"),
            (["pool", "new", "x" * 16], 1, "not a pool name"),
            (["pool", "add", "a", "9"], 1, "no OST has index 9"),
            (["pool", "add", "nope", "1"], 1, "no pool nope"),
            (["pool", "remove", "a", "2"], 1, "not in pool a"),
            (["pool", "list", "nope"], 1, "no pool loom.nope"),
            (["pool", "add", "a"], 2, "usage"),
            (["pool", "add", "a", "x"], 2, "not an OST index"),
            (["pool", "fly", "a"], 2, "usage"),
            (["pool"], 2, "usage")):
        p = cluster.loom(*args, check=False)
        assert p.returncode == code and text in p.stderr, (args, p.returncode, p.stderr)
    cluster.loom("pool", "add", "a", "2")
    p = cluster.loom("pool", "add", "a", "2", check=False)
    assert p.returncode == 1 and "in pool a already" in p.stderr
    # setstripe -p of a pool that does not exist is refused, as lfs refuses it.
    cluster.loom("mkdir", "/d")
    p = cluster.loom("setstripe", "-p", "nope", "/d", check=False)
    assert p.returncode != 0
    assert cluster.loom("getstripe", "-p", "/d").stdout == "\n"
    # Only root changes pools; anyone may list them.
    key = os.path.join(workdir, "user.key")
    shutil.copy(cluster.key, key)
    os.chown(key, 65534, 65534)
    os.chmod(workdir, 0o755)
    user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", LOOM, "--fs", cluster.addr, "--key", key]
    p = subprocess.run(user + ["pool", "add", "a", "1"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "only root may change pools" in p.stderr, p.stderr
    p = subprocess.run(user + ["pool", "list", "a"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "Pool: loom.a\nloom-OST0002_UUID\n", p.stderr

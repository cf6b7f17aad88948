"""An OSS started later joins the live file system."""

import os

import loomwire
from loomutil import wait_until
from loomutil import MiB, make_random_file, object_path, object_size, parse_file_getstripe, sha256_file


def test_fifth_oss_joins_live_file_system(cluster, workdir):
    old_src = os.path.join(workdir, "old")
    old_sum = make_random_file(old_src, 3 * MiB + 1)
    cluster.loom("put", old_src, "/old")

    with loomwire.Conn(cluster.mds_host, cluster.mds_port) as client:
        gen0, table0 = loomwire.ost_table_on(client)
        assert sorted(table0) == [0, 1, 2, 3]

        cluster.up(osts=5)          # formats DIR/ost4 and starts oss4; the others keep running

        # The client connected before the join sees the new OST on the same connection.
        def five():
            gen, table = loomwire.ost_table_on(client)
            return (gen, table) if 4 in table and not table[4]["state"] & loomwire.TGT_INACTIVE else None

        got = wait_until(five, 30, 0.2)
        assert got, "the MDS's OST table never listed an active OST 4"
        gen1, table1 = got
        assert sorted(table1) == [0, 1, 2, 3, 4] and gen1 != gen0, (gen0, gen1, table1)
        assert client.ping() == 0

    df = cluster.loom("df").stdout
    ost_rows = [line for line in df.splitlines() if line.startswith("loom-OST")]
    assert [r.split()[0] for r in ost_rows] == ["loom-OST%04x_UUID" % k for k in range(5)], df

    cluster.loom("mkdir", "/wide")
    cluster.loom("setstripe", "-E", "-1", "-c", "-1", "-S", "64k", "/wide")
    src = os.path.join(workdir, "src")
    out = os.path.join(workdir, "out")
    size = 5 * 64 * 1024 * 3 + 12345
    digest = make_random_file(src, size)
    cluster.loom("put", src, "/wide/f")
    layout = parse_file_getstripe(cluster.loom("getstripe", "/wide/f").stdout)
    assert layout.stripe_count == 5 and sorted(i for i, _ in layout.objects) == [0, 1, 2, 3, 4], layout
    cluster.loom("get", "/wide/f", out)
    assert sha256_file(out) == digest

    k = [i for i, _ in layout.objects].index(4)
    p = object_path(cluster.ost_dir(4), layout.objects[k][1])
    assert os.path.getsize(p) == object_size(size, layout.stripe_size, 5, k), "the new OST's object has the wrong size"

    cluster.loom("get", "/old", out)
    assert sha256_file(out) == old_sum, "a file written before the join reads back wrong"

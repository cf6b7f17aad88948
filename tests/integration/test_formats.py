"""`loom getstripe`, `loom setstripe` and `loom df` print what Lustre's lfs prints
(/work/shared/lfs-habits.md), so that users' scripts keep working."""

import re

from loomutil import wait_until
from loomutil import parse_any_getstripe, parse_file_getstripe

# The file system default: 64 KiB on the MDT (Data-on-MDT), then Lustre's 1 x 4 MiB.
FS_DEFAULT_DIR = """\
  lcm_layout_gen:    0
  lcm_mirror_count:  1
  lcm_entry_count:   2
    lcme_id:             N/A
    lcme_mirror_id:      N/A
    lcme_flags:          0
    lcme_extent.e_start: 0
    lcme_extent.e_end:   65536
      stripe_count:  0       stripe_size:   65536       pattern:       mdt       stripe_offset: -1

    lcme_id:             N/A
    lcme_mirror_id:      N/A
    lcme_flags:          0
    lcme_extent.e_start: 65536
    lcme_extent.e_end:   EOF
      stripe_count:  1       stripe_size:   4194304       pattern:       raid0       stripe_offset: -1
"""


def dir_line(count, size, offset):
    return "stripe_count:  %d stripe_size:   %d pattern:       raid0 stripe_offset: %d" % (count, size, offset)


def test_getstripe_file_prints_lmm_block_and_lfs_object_rows(cluster):
    cluster.loom("setstripe", "-E", "-1", "-c", "3", "-S", "1M", "/f")   # plain: no DoM component
    out = cluster.loom("getstripe", "/f").stdout
    lines = out.rstrip("\n").split("\n")
    layout = parse_file_getstripe(out)   # checks each object row against "\t%6u\t%14llu\t%#13llx\t%14llu"
    first_ost = layout.objects[0][0]
    assert lines[:6] == [
        "/f",
        "lmm_stripe_count:  3",
        "lmm_stripe_size:   1048576",
        "lmm_pattern:       raid0",
        "lmm_layout_gen:    0",
        "lmm_stripe_offset: %d" % first_ost,
    ], out
    assert lines[6] == "\tobdidx\t\t objid\t\t objid\t\t group", out
    assert len(layout.objects) == 3 and len(lines) == 10, out
    assert len({idx for idx, _ in layout.objects}) == 3, "stripes share an OST:\n" + out


def test_getstripe_single_field_options_print_one_value(cluster):
    cluster.loom("setstripe", "-c", "2", "-S", "128k", "-i", "1", "/f")
    assert cluster.loom("getstripe", "-c", "/f").stdout == "2\n"
    assert cluster.loom("getstripe", "-S", "/f").stdout == "131072\n"
    assert cluster.loom("getstripe", "-i", "/f").stdout == "1\n"

    cluster.loom("mkdir", "/d")
    cluster.loom("setstripe", "-c", "3", "-S", "2M", "/d")
    assert cluster.loom("getstripe", "-c", "/d").stdout == "3\n"
    assert cluster.loom("getstripe", "-S", "/d").stdout == "2097152\n"
    assert cluster.loom("getstripe", "-i", "/d").stdout == "-1\n"


def test_setstripe_index_puts_first_stripe_on_that_ost(cluster):
    cluster.loom("setstripe", "-c", "2", "-i", "2", "/f")
    layout = parse_any_getstripe(cluster.loom("getstripe", "/f").stdout)
    assert layout.objects[0][0] == 2 and layout.stripe_offset == 2, layout


def test_getstripe_directory_prints_lfs_one_liner(cluster):
    cluster.loom("mkdir", "/d")
    cluster.loom("setstripe", "-c", "2", "-S", "1M", "/d")
    assert cluster.loom("getstripe", "-d", "/d").stdout == "/d\n" + dir_line(2, 1048576, -1) + "\n"
    cluster.loom("setstripe", "-c", "4", "-S", "64k", "-i", "1", "/d")
    assert cluster.loom("getstripe", "-d", "/d").stdout == "/d\n" + dir_line(4, 65536, 1) + "\n"


def test_getstripe_directory_without_d_lists_its_files_layouts(cluster):
    cluster.loom("mkdir", "/d")
    cluster.loom("setstripe", "-c", "2", "/d")
    cluster.loom("put", "-", "/d/a", input="hello\n")
    out = cluster.loom("getstripe", "/d").stdout
    assert out.startswith("/d\n" + dir_line(2, 4194304, -1) + "\n"), out
    block = out[out.index("/d/a\n"):]
    layout = parse_any_getstripe(block)
    assert layout.path == "/d/a" and layout.stripe_count == 2, out


def test_getstripe_r_y_walks_the_tree_in_yaml(cluster):
    cluster.loom("mkdir", "/t")
    cluster.loom("setstripe", "-E", "-1", "-c", "2", "-S", "1M", "/t")
    cluster.loom("mkdir", "/t/sub")
    cluster.loom("put", "-", "/t/a", input="a\n")
    cluster.loom("put", "-", "/t/sub/b", input="b\n")
    out = cluster.loom("getstripe", "-r", "-y", "/t").stdout
    blocks = {b.split("\n", 1)[0]: b.split("\n", 1)[1] for b in out.rstrip("\n").split("\n\n")}
    assert sorted(blocks) == ["/t", "/t/a", "/t/sub", "/t/sub/b"], out
    for d in ("/t", "/t/sub"):
        assert blocks[d] == "stripe_count:  2\nstripe_size:   1048576\npattern:       raid0\nstripe_offset: -1", out
    for f in ("/t/a", "/t/sub/b"):
        lines = blocks[f].split("\n")
        assert lines[:3] == ["lmm_stripe_count:  2", "lmm_stripe_size:   1048576", "lmm_pattern:       raid0"], out
        assert lines[5] == "lmm_objects:" and len(lines) == 10, out
        osts = [int(x.split(":")[1]) for x in lines[6::2]]
        assert all(x.startswith("      - l_ost_idx: ") for x in lines[6::2]), out
        assert all(re.match(r"^        l_fid:     0x[0-9a-f]+:0x[0-9a-f]+:0x0$", x) for x in lines[7::2]), out
        assert osts == [o for o, _ in parse_any_getstripe(cluster.loom("getstripe", f).stdout).objects]
    # Without -r, the subdirectory is not entered (only the files right inside are shown).
    flat = cluster.loom("getstripe", "/t").stdout
    assert "/t/a\n" in flat and "/t/sub" not in flat, flat


def test_setstripe_size_not_multiple_of_64k_is_rejected(cluster):
    cluster.loom("mkdir", "/d")
    cluster.loom("setstripe", "-c", "2", "-S", "1M", "/d")
    for bad in ("100k", "65537", "1000"):
        p = cluster.loom("setstripe", "-S", bad, "/d", check=False)
        assert p.returncode != 0, "setstripe -S %s accepted" % bad
        assert "64 KiB" in p.stderr or "64K" in p.stderr or "65536" in p.stderr, p.stderr
    assert cluster.loom("getstripe", "-d", "/d").stdout == "/d\n" + dir_line(2, 1048576, -1) + "\n", \
        "a rejected setstripe changed the directory's default"
    p = cluster.loom("setstripe", "-S", "100k", "/newfile", check=False)
    assert p.returncode != 0
    assert "newfile" not in cluster.loom("ls", "/").stdout, "a rejected setstripe created the file"


def test_setstripe_size_suffixes(cluster):
    cluster.loom("mkdir", "/d")
    for arg, want in (("64k", 65536), ("1M", 1048576), ("4M", 4194304), ("1G", 1 << 30), ("196608", 196608)):
        cluster.loom("setstripe", "-S", arg, "/d")
        assert cluster.loom("getstripe", "-S", "/d").stdout == "%d\n" % want, arg


def test_setstripe_delete_restores_filesystem_default(cluster):
    cluster.loom("mkdir", "/d")
    root = cluster.loom("getstripe", "-d", "/").stdout
    assert root == "/\n" + FS_DEFAULT_DIR, "file system default is not 64 KiB on the MDT, then 1 x 4 MiB:\n" + root
    cluster.loom("setstripe", "-c", "3", "-S", "256k", "/d")
    cluster.loom("setstripe", "-d", "/d")
    assert cluster.loom("getstripe", "-d", "/d").stdout == "/d\n" + FS_DEFAULT_DIR
    cluster.loom("put", "-", "/d/f", input="x" * 100)
    layout = parse_any_getstripe(cluster.loom("getstripe", "/d/f").stdout)
    assert (layout.dom_size, layout.stripe_count, layout.stripe_size) == (65536, 1, 4194304), layout


def test_file_inherits_directory_default(cluster):
    cluster.loom("mkdir", "-p", "/d/sub")
    cluster.loom("setstripe", "-c", "3", "-S", "192k", "/d")
    cluster.loom("put", "-", "/d/f", input="data")
    layout = parse_any_getstripe(cluster.loom("getstripe", "/d/f").stdout)
    assert (layout.stripe_count, layout.stripe_size) == (3, 196608), layout


def test_setstripe_count_minus_one_uses_every_ost(cluster):
    cluster.loom("setstripe", "-c", "-1", "/f")
    layout = parse_any_getstripe(cluster.loom("getstripe", "/f").stdout)
    assert sorted(idx for idx, _ in layout.objects) == [0, 1, 2, 3], layout
    assert layout.stripe_count == 4


def test_setstripe_on_file_with_data_refused(cluster):
    cluster.loom("put", "-", "/f", input="some data")
    p = cluster.loom("setstripe", "-c", "2", "/f", check=False)
    assert p.returncode != 0
    assert "stripe already set" in p.stderr, p.stderr
    assert cluster.loom("get", "/f", "-").stdout == "some data"


DF_HEADER = "UUID                   1K-blocks        Used   Available Use% Mounted on"
DF_ROW = re.compile(r"^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)% (\S+)$")


def parse_df(out):
    lines = out.rstrip("\n").split("\n")
    assert lines[0] == DF_HEADER, "df header differs from lfs df:\n" + out
    rows = {}
    inactive = []
    for line in lines[1:]:
        if not line:
            continue
        m = re.match(r"^(OST[0-9a-f]{4}|MDT[0-9a-f]{4}) {13}: inactive device$", line)
        if m:
            inactive.append(m.group(1))
            continue
        m = DF_ROW.match(line)
        assert m, "df row %r is not in lfs df's format" % line
        total, used, avail, pct = (int(m.group(i)) for i in (2, 3, 4, 5))
        assert line[:20].rstrip() == m.group(1) and len(line[:20]) == 20 and \
            re.match(r"^\S+ *\d+ *\d+ *\d+ *\d+% ", line), line
        rows[m.group(1)] = (total, used, avail, pct, m.group(6))
    return lines, rows, inactive


def test_df_lists_mdt_osts_and_summary_in_lfs_format(cluster):
    out = cluster.loom("df").stdout
    lines, rows, inactive = parse_df(out)
    names = [line.split()[0] for line in lines[1:] if line]
    assert names == ["loom-MDT0000_UUID", "loom-OST0000_UUID", "loom-OST0001_UUID", "loom-OST0002_UUID",
                     "loom-OST0003_UUID", "filesystem_summary:"], out
    assert lines[-2] == "", "no blank line before filesystem_summary:\n" + out
    assert not inactive
    assert rows["loom-MDT0000_UUID"][4].endswith("[MDT:0]"), out
    for k in range(4):
        assert rows["loom-OST%04x_UUID" % k][4].endswith("[OST:%d]" % k), out
    for name, (total, used, avail, pct, _) in rows.items():
        assert total > 0 and used <= total and avail <= total, (name, total, used, avail)
        want_pct = -(-used * 100 // (used + avail)) if used + avail else 0
        assert pct == want_pct, "%s Use%% %d, expected %d" % (name, pct, want_pct)
    summary = rows["filesystem_summary:"]
    osts = [rows["loom-OST%04x_UUID" % k] for k in range(4)]
    for col, label in ((0, "1K-blocks"), (1, "Used"), (2, "Available")):
        assert summary[col] == sum(r[col] for r in osts), "summary %s is not the sum of the OSTs:\n%s" % (label, out)


def test_df_h_prints_human_sizes(cluster):
    out = cluster.loom("df", "-h").stdout
    lines = out.rstrip("\n").split("\n")
    assert lines[0] == "UUID                       bytes        Used   Available Use% Mounted on", out
    for line in lines[1:]:
        if line:
            assert re.match(r"^\S+ +[0-9.]+[KMGTPE]? +[0-9.]+[KMGTPE]? +[0-9.]+[KMGTPE]? +\d+% \S+$", line), line


def test_df_i_counts_inodes_the_mdt_holds(cluster):
    def mdt_and_summary():
        out = cluster.loom("df", "-i").stdout
        lines = out.rstrip("\n").split("\n")
        assert lines[0] == "UUID                      Inodes       IUsed       IFree IUse% Mounted on", out
        rows = {}
        for line in lines[1:]:
            if line:
                f = line.split()
                assert len(f) == 6 and f[4].endswith("%"), line
                rows[f[0]] = [int(x) for x in f[1:4]]
        assert sorted(rows) == ["filesystem_summary:", "loom-MDT0000_UUID", "loom-OST0000_UUID", "loom-OST0001_UUID",
                                "loom-OST0002_UUID", "loom-OST0003_UUID"], out
        assert rows["filesystem_summary:"] == rows["loom-MDT0000_UUID"], out
        total, used, free = rows["loom-MDT0000_UUID"]
        assert used + free == total and used >= 1, out
        return used

    before = mdt_and_summary()
    cluster.loom("mkdir", "-p", "/i/j")
    for k in range(5):
        cluster.loom("setstripe", "-c", "1", "/i/j/f%d" % k)   # an empty file each
    assert mdt_and_summary() == before + 7


def test_df_shows_killed_oss_as_inactive_device(cluster):
    victim = 2
    cluster.kill9(cluster.oss_name(victim))

    def inactive_now():
        out = cluster.loom("df").stdout
        return out if "OST0002             : inactive device\n" in out else None

    out = wait_until(inactive_now, 60, interval=0.5)
    assert out, "loom df never showed OST0002 as inactive:\n" + cluster.loom("df").stdout
    lines, rows, inactive = parse_df(out)
    assert inactive == ["OST0002"], out
    assert sorted(rows) == ["filesystem_summary:", "loom-MDT0000_UUID", "loom-OST0000_UUID", "loom-OST0001_UUID",
                            "loom-OST0003_UUID"], out
    osts = [rows["loom-OST%04x_UUID" % k] for k in (0, 1, 3)]
    assert rows["filesystem_summary:"][0] == sum(r[0] for r in osts), "summary counts the inactive OST:\n" + out

    cluster.restart()
    out = wait_until(lambda: (lambda o: o if "inactive" not in o else None)(cluster.loom("df").stdout), 60, 0.5)
    assert out and "loom-OST0002_UUID" in out, "OST0002 not active again after its OSS restarted"

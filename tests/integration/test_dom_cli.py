"""Data-on-MDT on the command line: `loom setstripe -E END -L mdt -E -1 ...` as `lfs setstripe`
spells it, and `loom getstripe` printing lfs's composite format for a layout with an MDT part
(/work/shared/lfs-habits.md). The file data itself is tested with the core."""

import os
import re
import struct

import pytest

from loomutil import (KiB, MiB, object_path, parse_any_getstripe, parse_composite_getstripe,
                      parse_file_getstripe)

DOM_DEFAULT = 64 * KiB   # LOOM_DEFAULT_DOM_SIZE: what a new file gets when nothing says otherwise


def dir_line(count, size, offset):
    return "stripe_count:  %d stripe_size:   %d pattern:       raid0 stripe_offset: %d" % (count, size, offset)


def composite_dir_text(path, dom, count, size, offset=-1):
    """`lfs getstripe -d DIR` of a directory default with an MDT component, byte for byte."""
    comp = ("    lcme_id:             N/A\n"
            "    lcme_mirror_id:      N/A\n"
            "    lcme_flags:          0\n"
            "    lcme_extent.e_start: %s\n"
            "    lcme_extent.e_end:   %s\n"
            "      stripe_count:  %d       stripe_size:   %d       pattern:       %s       stripe_offset: %d\n")
    return (path + "\n"
            "  lcm_layout_gen:    0\n"
            "  lcm_mirror_count:  1\n"
            "  lcm_entry_count:   2\n"
            + comp % (0, dom, 0, dom, "mdt", -1) + "\n"
            + comp % (dom, "EOF", count, size, "raid0", offset))


def composite_file_text(path, dom, size, objects, gen=0):
    """`lfs getstripe FILE` of a file with an MDT component then RAID-0 to EOF, byte for byte."""
    head = ("    lcme_id:             %d\n"
            "    lcme_mirror_id:      0\n"
            "    lcme_flags:          init\n"
            "    lcme_extent.e_start: %s\n"
            "    lcme_extent.e_end:   %s\n")
    lmm = ("      lmm_stripe_count:  %d\n"
           "      lmm_stripe_size:   %d\n"
           "      lmm_pattern:       %s\n"
           "      lmm_layout_gen:    0\n"
           "      lmm_stripe_offset: %d\n")
    rows = "".join("      - %d: { l_ost_idx: %d, l_fid: [0x%x:0x%x:0x%x] }\n"
                   % (i, ost, 1 << 32 | ost << 16 | (objid >> 32) & 0xFFFF, objid & 0xFFFFFFFF, objid >> 48)
                   for i, (ost, objid) in enumerate(objects))
    return (path + "\n"
            "  lcm_layout_gen:    %d\n"
            "  lcm_mirror_count:  1\n"
            "  lcm_entry_count:   2\n" % gen
            + head % (1, 0, dom) + lmm % (0, dom, "mdt", 0) + "\n"
            + head % (2, dom, "EOF") + lmm % (len(objects), size, "raid0", objects[0][0])
            + "      lmm_objects:\n" + rows)


def getstripe(cluster, *args):
    return cluster.loom("getstripe", *args).stdout


# ---- setstripe -E END -L mdt -E -1 ----------------------------------------------------------


def test_dom_directory_default_and_its_file_print_lfs_composite_format(cluster):
    cluster.loom("mkdir", "/d")
    cluster.loom("setstripe", "-E", "64K", "-L", "mdt", "-E", "-1", "-c", "2", "/d")
    assert getstripe(cluster, "-d", "/d") == composite_dir_text("/d", 65536, 2, 4 * MiB)

    cluster.loom("put", "-", "/d/f", input="small file\n")
    out = getstripe(cluster, "/d/f")
    layout = parse_composite_getstripe(out)
    assert layout.dom_size == 65536 and layout.stripe_count == 2 and layout.stripe_size == 4 * MiB, out
    assert len({ost for ost, _ in layout.objects}) == 2, "stripes share an OST:\n" + out
    assert out == composite_file_text("/d/f", 65536, 4 * MiB, layout.objects), out
    assert layout.components[1]["lcme_extent.e_start"] == "65536"

    # `getstripe DIR` shows the default, then each file, a blank line between.
    listing = getstripe(cluster, "/d")
    assert listing == composite_dir_text("/d", 65536, 2, 4 * MiB) + "\n" + out, listing


def test_single_field_options_print_the_raid0_component(cluster):
    cluster.loom("mkdir", "/d")
    cluster.loom("setstripe", "-E", "128k", "-L", "mdt", "-E", "-1", "-c", "3", "-S", "256k", "-i", "1", "/d")
    cluster.loom("put", "-", "/d/f", input="x" * 1000)
    layout = parse_composite_getstripe(getstripe(cluster, "/d/f"))
    assert layout.dom_size == 131072
    assert getstripe(cluster, "-c", "/d/f") == "3\n"
    assert getstripe(cluster, "-S", "/d/f") == "262144\n"
    assert getstripe(cluster, "-i", "/d/f") == "1\n" == "%d\n" % layout.objects[0][0]
    assert getstripe(cluster, "-c", "/d") == "3\n"
    assert getstripe(cluster, "-S", "/d") == "262144\n"
    assert getstripe(cluster, "-i", "/d") == "1\n"


def test_dom_layout_on_a_new_file_name_creates_it(cluster):
    cluster.loom("setstripe", "-E", "1M", "-L", "mdt", "-S", "1M", "-E", "eof", "-c", "-1", "-S", "1M", "/f")
    layout = parse_composite_getstripe(getstripe(cluster, "/f"))
    assert (layout.dom_size, layout.stripe_count, layout.stripe_size) == (MiB, 4, MiB), layout
    assert sorted(ost for ost, _ in layout.objects) == [0, 1, 2, 3]


def test_eof_only_component_means_no_dom(cluster):
    cluster.loom("mkdir", "/p")
    cluster.loom("setstripe", "-E", "-1", "-c", "1", "/p")
    assert getstripe(cluster, "-d", "/p") == "/p\n" + dir_line(1, 4 * MiB, -1) + "\n"
    cluster.loom("put", "-", "/p/f", input="plain\n")
    layout = parse_file_getstripe(getstripe(cluster, "/p/f"))   # the plain format, unchanged
    assert layout.stripe_count == 1 and len(layout.objects) == 1, layout

    cluster.loom("setstripe", "-E", "-1", "-c", "2", "-S", "128k", "/g")   # a new file
    layout = parse_file_getstripe(getstripe(cluster, "/g"))
    assert (layout.stripe_count, layout.stripe_size) == (2, 131072), layout


def test_new_files_get_64k_on_the_mdt_by_default(cluster):
    cluster.loom("put", "-", "/f", input="default\n")
    layout = parse_composite_getstripe(getstripe(cluster, "/f"))
    assert layout.dom_size == DOM_DEFAULT and layout.stripe_count == 1 and layout.stripe_size == 4 * MiB, layout


def test_setstripe_without_E_inherits_the_dom_size(cluster):
    cluster.loom("setstripe", "-E", "256k", "-L", "mdt", "-E", "-1", "/")   # the file system default
    cluster.loom("mkdir", "/d")
    cluster.loom("setstripe", "-c", "2", "/d")                             # no -E: DoM inherited
    assert getstripe(cluster, "-d", "/d") == "/d\n" + dir_line(2, 4 * MiB, -1) + "\n"
    cluster.loom("put", "-", "/d/f", input="inherits\n")
    layout = parse_composite_getstripe(getstripe(cluster, "/d/f"))
    assert (layout.dom_size, layout.stripe_count) == (256 * KiB, 2), layout

    cluster.loom("setstripe", "-E", "-1", "-c", "2", "/d")                 # now explicitly none
    cluster.loom("put", "-", "/d/g", input="plain\n")
    assert parse_file_getstripe(getstripe(cluster, "/d/g")).stripe_count == 2

    cluster.loom("setstripe", "-d", "/d")                                  # back to the fs default
    cluster.loom("put", "-", "/d/h", input="again\n")
    assert parse_composite_getstripe(getstripe(cluster, "/d/h")).dom_size == 256 * KiB


def test_setstripe_on_an_empty_dom_file_lays_it_out_plain(cluster):
    cluster.loom("setstripe", "-E", "64k", "-L", "mdt", "-E", "-1", "-c", "2", "/f")
    assert parse_composite_getstripe(getstripe(cluster, "/f")).dom_size == 65536
    cluster.loom("setstripe", "-E", "-1", "-c", "3", "/f")
    layout = parse_file_getstripe(getstripe(cluster, "/f"))
    assert layout.stripe_count == 3 and layout.fields["layout_gen"] == "1", layout


def test_composite_objects_name_the_real_objects(cluster):
    cluster.loom("mkdir", "/d")
    cluster.loom("setstripe", "-E", "64k", "-L", "mdt", "-E", "-1", "-c", "2", "-S", "64k", "/d")
    cluster.loom("put", "-", "/d/f", input="z" * MiB)
    layout = parse_composite_getstripe(getstripe(cluster, "/d/f"))
    for ost, objid in layout.objects:
        path = object_path(cluster.ost_dir(ost), objid)
        assert os.path.exists(path), "l_fid of OST %d names object %#x, not on that OST (%s)" % (ost, objid, path)


# ---- errors ---------------------------------------------------------------------------------

BAD = [
    (("-E", "100k", "-L", "mdt", "-E", "-1"), "64 KiB"),
    (("-E", "2M", "-L", "mdt", "-E", "-1"), "at most 1 MiB of a file on the MDT"),
    (("-E", "1088k", "-L", "mdt", "-E", "-1"), "at most 1 MiB of a file on the MDT"),
    (("-L", "mdt", "-c", "2"), "-E"),                                          # -L mdt without -E
    (("-E", "-1", "-c", "2", "-E", "64k", "-L", "mdt"), "first component"),    # mdt not first
    (("-E", "4M", "-c", "1", "-E", "-1", "-c", "4"), "one RAID-0 component to EOF"),   # PFL
    (("-E", "64k", "-L", "mdt", "-E", "1M", "-E", "-1"), "more than 2 components"),
    (("-E", "64k", "-L", "mdt"), "RAID-0 component"),                         # DoM only
    (("-E", "64k", "-L", "raid1", "-E", "-1"), "raid0 or mdt"),
    (("-E", "64k", "-L", "mdt", "-c", "2", "-E", "-1"), "RAID-0 component"),  # -c on the mdt one
    (("-E", "64k", "-L", "mdt", "-S", "128k", "-E", "-1"), "END"),            # -S != END
    (("-E", "0", "-E", "-1"), "END"),
    (("-E", "-1", "-d"), "usage"),
]


@pytest.mark.parametrize("args,why", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_components_are_refused_and_change_nothing(cluster, args, why):
    cluster.loom("mkdir", "/d")
    cluster.loom("setstripe", "-E", "-1", "-c", "2", "/d")
    before = getstripe(cluster, "-d", "/d")
    p = cluster.loom("setstripe", *args, "/d", check=False)
    assert p.returncode == 2, "setstripe %s exited %d" % (" ".join(args), p.returncode)
    assert p.stderr.startswith("loom setstripe: ") or p.stderr.startswith("usage: "), p.stderr
    assert why in p.stderr, "the message does not say why (%r):\n%s" % (why, p.stderr)
    assert p.stdout == ""
    assert getstripe(cluster, "-d", "/d") == before, "a refused setstripe changed the default"
    p = cluster.loom("setstripe", *args, "/new", check=False)
    assert p.returncode == 2 and "new" not in cluster.loom("ls", "/").stdout.split(), \
        "a refused setstripe created the file"


def test_help_describes_dom(cluster):
    out = cluster.loom("setstripe", "--help").stdout
    assert "-E END -L mdt -E -1" in out and "64 KiB" in out and "1 MiB" in out, out
    assert re.search(r"-E -1 \[OPTIONS\]` alone means no DoM", out), out
    assert "inherited" in out, out


# ---- through a mount: the loom.lov xattr carries dom_size both ways -------------------------


def test_dom_layout_through_the_mount_xattr(cluster):
    mnt = os.path.join(cluster.dir, "mnt")
    cluster.cluster_cmd("up", "--osts", str(cluster.osts), "--mount", mnt)
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    cluster.loom("setstripe", "-E", "192k", "-L", "mdt", "-E", "-1", "-c", "2", d)
    assert getstripe(cluster, "-d", d) == composite_dir_text(d, 196608, 2, 4 * MiB)
    assert getstripe(cluster, "-d", "/d") == composite_dir_text("/d", 196608, 2, 4 * MiB), \
        "libloom sees another default than the mount set"
    with open(os.path.join(d, "f"), "w") as f:
        f.write("through the mount\n")
    via_mount = getstripe(cluster, os.path.join(d, "f"))
    layout = parse_composite_getstripe(via_mount)
    assert (layout.dom_size, layout.stripe_count) == (196608, 2), via_mount
    assert via_mount.split("\n", 1)[1] == getstripe(cluster, "/d/f").split("\n", 1)[1]

    # The xattr is the wire image struct lw_layout, version 2: dom_size at offset 48.
    raw = os.getxattr(os.path.join(d, "f"), "loom.lov")
    magic, version = struct.unpack_from("<IH", raw, 0)
    assert (magic, version) == (0x0BD10BD0, 2) and len(raw) == 56 + 16 * 2, raw.hex()
    assert struct.unpack_from("<I", raw, 48)[0] == 196608, raw.hex()

    cluster.loom("setstripe", "-E", "-1", "-c", "1", os.path.join(d, "plain"))   # a new file, no DoM
    assert parse_any_getstripe(getstripe(cluster, os.path.join(d, "plain"))).dom_size == 0
    raw = os.getxattr(os.path.join(d, "plain"), "loom.lov")
    assert struct.unpack_from("<I", raw, 48)[0] == 0, raw.hex()

"""docs/operations.md's "A cluster of three hosts", run as written on the test bed's hosts: an
installed tree (not the build), config files under each host's /etc/loom, the servers started by
their installed systemd units, the key handed over with scp -p, and the clients mounted by
`mount -a` from /etc/fstab lines through the installed /sbin/mount.loom. Then what a user would
check: two clients see one file system with three OSTs and the same bytes."""

import json
import os
import re
import subprocess
import sys

import pytest

from loomutil import BUILD, REPO

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hosts"))
import hostbed  # noqa: E402
from deploy import DeployBed  # noqa: E402

pytestmark = pytest.mark.skipif(not hostbed.available(), reason="needs root, ip, tc and nsenter")

GUIDE = "## A cluster of three hosts"
HOSTS = ("mds1", "oss1", "oss2", "client1", "client2")


def guide_blocks():
    """[(kind, hosts, text)] of the guide's fenced blocks, in order: kind "file" (hosts, path) for
    `# /PATH on H1, H2`, "sh" for `# on HOST` or `# on every host`."""
    text = open(os.path.join(REPO, "docs", "operations.md")).read()
    start = text.index(GUIDE)
    end = text.find("\n## ", start + len(GUIDE))
    section = text[start:end if end > 0 else len(text)]
    out = []
    for m in re.finditer(r"^```(\w+)\n(.*?)^```", section, re.S | re.M):
        first, _, body = m.group(2).partition("\n")
        f = re.fullmatch(r"# (/\S+) on (.+)", first)
        if f:
            out.append(("file", ([h.strip() for h in f.group(2).split(",")], f.group(1)), body))
            continue
        s = re.fullmatch(r"# on (.+)", first)
        assert s, "a block of the guide says neither which host nor which file: %r" % first
        hosts = list(HOSTS) if s.group(1) == "every host" else [s.group(1)]
        out.append(("sh", hosts, body))
    return out


def test_the_guide_is_what_this_test_runs():
    blocks = guide_blocks()
    assert [b[1] for b in blocks if b[0] == "sh"][1:] == [["mds1"], ["oss1"], ["oss2"], ["client1"], ["client2"]]
    assert any(b[0] == "file" and b[1][1] == "/etc/fstab" for b in blocks)


def install_step(line):
    """The guide's install line on the bed: the tree is installed already (meson install
    --destdir of this build, laid over each host's /usr/local and /sbin), the rest runs."""
    return re.sub(r"^make install PREFIX=/usr/local( && )?", "", line)


def sanitized_build():
    with open(os.path.join(BUILD, "src", "client", "libloom.so"), "rb") as f:
        return b"__asan_init" in f.read()


def build_prefix():
    opts = json.loads(subprocess.run(["meson", "introspect", BUILD, "--buildoptions"], capture_output=True,
                                     text=True, check=True).stdout)
    return next(o["value"] for o in opts if o["name"] == "prefix")


def test_three_hosts_deploy_from_the_installed_tree_as_the_guide_says():
    prefix = build_prefix()
    with DeployBed(BUILD) as bed:
        hosts = {n: bed.add_deploy_host(n) for n in HOSTS}
        bed.write_hosts()
        out = {}
        for kind, where, body in guide_blocks():
            if kind == "file":
                names, path = where
                for n in names:
                    bed.write(hosts[n], path, body)
                continue
            for n in where:
                script = "\n".join(install_step(line) for line in body.splitlines())
                out.setdefault(n, []).append(bed.sh(hosts[n], script).stdout)
        c1, c2, mds = hosts["client1"], hosts["client2"], hosts["mds1"]

        # The programs that run are the installed ones, started by the installed units.
        exe = bed.sh(mds, "readlink /proc/$(cat $LOOM_BED_LOGDIR/loom-mds.service.pid)/exe").stdout.strip()
        assert exe == prefix + "/sbin/loom-mds"
        assert bed.sh(c1, "readlink -f /sbin/mount.loom").stdout.strip() == os.path.realpath("/sbin") + "/mount.loom"
        mounts = bed.sh(c1, "grep ' /mnt/loom ' /proc/self/mounts").stdout
        assert mounts.startswith("mds1:/lfs01 /mnt/loom fuse.loom "), mounts  # mount -a, from fstab
        mounts = bed.sh(c2, "grep ' /mnt/loom ' /proc/self/mounts").stdout
        assert mounts.startswith("mds1@tcp:/lfs01 /mnt/loom fuse.loom "), mounts  # mount -t loom

        # loom df on client1 (the guide's own command): the MDT and three OSTs of lfs01.
        df = "".join(out["client1"])
        names = re.findall(r"^(lfs01-(?:MDT|OST)[0-9a-f]{4}_UUID)", df, re.M)
        assert names == ["lfs01-MDT0000_UUID", "lfs01-OST0000_UUID", "lfs01-OST0001_UUID", "lfs01-OST0002_UUID"], df
        assert "inactive" not in df

        # A file written on one client stripes over all three OSTs and reads the same on the other.
        wrote = bed.sh(c1, "head -c 5000000 /dev/urandom > /mnt/loom/models/w.bin && "
                           "sha256sum /mnt/loom/models/w.bin").stdout.split()[0]
        got = bed.sh(c2, "sha256sum /mnt/loom/models/w.bin").stdout.split()[0]
        assert got == wrote
        layout = bed.sh(c2, "loom getstripe /mnt/loom/models/w.bin").stdout
        assert re.search(r"^\s*lmm_stripe_count:\s+3$", layout, re.M), layout  # after the Data-on-MDT part
        # Under the (stand-in) journal each line carries its priority; none is an error.
        for dh in hosts.values():
            logs = bed.logs(dh)
            assert not re.search(r"^<[0-3]>|Sanitizer|runtime error:", logs, re.M), logs
        mds_log = bed.logs(mds)
        assert re.search(r"^<6>INFO: file system lfs01: MDT /srv/loom/mdt, serving on 0\.0\.0\.0:9900$", mds_log,
                         re.M), mds_log

        # Python from the installed package, on the installed libloom (not for a sanitized build:
        # its libloom cannot be loaded into Python without the runtime preloaded, pyloom.py).
        if sanitized_build():
            return
        py = bed.sh(c2, "cd / && python3 -c \"import loom; fs = loom.connect('/mnt/loom'); "
                        "print(fs.open('/mnt/loom/models/w.bin', 'rb').read()[:0] == b'', loom.__file__)\"").stdout
        assert re.fullmatch(r"True %s/lib/python3[.0-9]*/dist-packages/loom/__init__.py\n" % re.escape(prefix), py), py


"""What `meson install` (and so `make install`) puts on a machine, checked in a scratch root laid
over this one in a mount namespace of its own: the programs where an admin looks for them, a
library a program builds against with pkg-config, the systemd units (systemd-analyze verify), the
fstab line's unit, and mount(8) finding the installed helper with no PATH."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from loomutil import BUILD

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hosts"))
from deploy import install, run_installed  # noqa: E402
from test_deploy import build_prefix  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                reason="needs root and unshare for a mount namespace")


@pytest.fixture(scope="module")
def tree():
    d = tempfile.mkdtemp(prefix="loom-install-")
    try:
        install(BUILD, os.path.join(d, "root"))
        yield d, os.path.join(d, "root"), build_prefix()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def sh(tree, script):
    d, root, _ = tree
    r = run_installed(root, os.path.join(d, "ns-%d" % len(os.listdir(d))), script)
    assert r.returncode == 0, "exit %d:\n%s\n%s" % (r.returncode, r.stdout, r.stderr)
    return r.stdout


def test_everything_goes_where_an_admin_looks(tree):
    _, root, prefix = tree
    p = root + prefix
    for path in ("sbin/loom-mds", "sbin/loom-oss", "bin/loom", "bin/loom-mount"):
        assert os.access(os.path.join(p, path), os.X_OK), path
    assert os.access(os.path.join(root, "sbin", "mount.loom"), os.X_OK)
    for h in ("loom.h", "loom_ll.h", "types.h"):
        assert os.path.isfile(os.path.join(p, "include", "loom", h))
    libs = [f for f in os.listdir(os.path.join(p, "lib", "x86_64-linux-gnu"))]
    assert {"libloom.so", "libloom.so.0"} <= set(libs), libs
    assert os.path.isfile(os.path.join(p, "lib", "x86_64-linux-gnu", "pkgconfig", "loom.pc"))
    for page in ("man8/loom-mds.8", "man8/loom-oss.8", "man8/loom-mount.8", "man8/mount.loom.8", "man1/loom.1",
                 "man5/loom.conf.5"):
        assert os.path.isfile(os.path.join(p, "share", "man", page)), page
    examples = os.path.join(p, "share", "doc", "loom", "examples")
    assert sorted(os.listdir(examples)) == ["loom.conf", "mds.conf", "oss.conf"]
    # Pacemaker's resource type ocf:loom:loom (docs/pacemaker.md): under PREFIX/lib, not libdir.
    agent = os.path.join(p, "lib", "ocf", "resource.d", "loom", "loom")
    assert os.stat(agent).st_mode & 0o777 == 0o755, oct(os.stat(agent).st_mode)


def test_the_installed_programs_run_from_their_paths(tree):
    _, _, prefix = tree
    out = sh(tree, "ldconfig && env -i loom-mds --version 2>&1 || true; %s/sbin/loom-mds --version; "
                   "%s/bin/loom --version; /sbin/mount.loom --version" % (prefix, prefix))
    assert re.search(r"^loom-mds \S+ \(protocol \d+", out, re.M), out
    assert re.search(r"^loom \S+ \(protocol \d+", out, re.M), out
    assert re.search(r"^mount.loom \S+$", out, re.M), out


def build_option(name):
    opts = json.loads(subprocess.run(["meson", "introspect", BUILD, "--buildoptions"], capture_output=True,
                                     text=True, check=True).stdout)
    return next(o["value"] for o in opts if o["name"] == name)


def test_a_program_builds_against_the_installed_library_with_pkg_config(tree):
    d, _, prefix = tree
    # A library built with sanitizers needs their runtime in the program too.
    sanitize = build_option("b_sanitize")
    cflags = "-fsanitize=%s " % sanitize if sanitize not in ("none", "") else ""
    src = os.path.join(d, "hello.c")
    with open(src, "w") as f:
        f.write('#include <loom/loom.h>\n#include <stdio.h>\n'
                'int main(void) { loom_fs *fs; int rc = loom_connect("127.0.0.1:1", "lfs01", &fs);\n'
                '  printf("loom_connect: %d\\n", rc); return rc < 0 ? 0 : 1; }\n')
    out = sh(tree, "ldconfig && export PKG_CONFIG_PATH=%s/lib/x86_64-linux-gnu/pkgconfig && "
                   "cc %s-Wall -Werror -o %s/hello %s $(pkg-config --cflags --libs loom) && "
                   "LOOM_CONFIG=/nonexistent %s/hello" % (prefix, cflags, d, src, d))
    assert re.search(r"^loom_connect: -\d+$", out, re.M), out


def test_the_units_pass_systemd_analyze_verify(tree):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed (package systemd)")
    _, root, prefix = tree
    units = []
    for dirpath, _, files in os.walk(root):
        units += [os.path.join(dirpath, f) for f in files if f.endswith(".service")]
    assert sorted(os.path.basename(u) for u in units) == ["loom-mds.service", "loom-oss@.service"]
    unitdir = os.path.dirname(units[0])
    text = open(os.path.join(unitdir, "loom-oss@.service")).read()
    assert "ExecStart=%s/sbin/loom-oss --config /etc/loom/oss-%%i.conf\n" % prefix in text
    assert re.search(r"^Restart=on-failure$", text, re.M) and re.search(r"^NoNewPrivileges=yes$", text, re.M)
    # The manual pages the units name are installed too: MANPATH finds them.
    out = sh(tree, "MANPATH=%s/share/man:/usr/share/man systemd-analyze verify %s/loom-mds.service "
                   "%s/loom-oss@.service 2>&1; echo rc=$?" % (prefix, unitdir, unitdir))
    assert out.strip().splitlines()[-1] == "rc=0", out
    assert "not executable" not in out and "failed" not in out, out


def test_an_fstab_line_with_netdev_mounts_after_the_network(tree):
    gen = "/lib/systemd/system-generators/systemd-fstab-generator"
    if not os.access(gen, os.X_OK):
        pytest.skip("systemd-fstab-generator is not installed (package systemd)")
    d = tempfile.mkdtemp(prefix="loom-fstab-")
    try:
        fstab = os.path.join(d, "fstab")
        with open(fstab, "w") as f:
            f.write("mds1@tcp:/lfs01  /mnt/loom  loom  _netdev,key=/etc/loom/loom.key  0 0\n")
        out = os.path.join(d, "out")
        os.mkdir(out)
        subprocess.run([gen, out, out, out], env=dict(os.environ, SYSTEMD_FSTAB=fstab), check=True, timeout=60)
        unit = open(os.path.join(out, "mnt-loom.mount")).read()
        # A network mount: in remote-fs.target, which systemd orders after network-online.target.
        assert os.path.exists(os.path.join(out, "remote-fs.target.requires", "mnt-loom.mount"))
        assert "Before=remote-fs.target" in unit and "Type=loom" in unit and "What=mds1@tcp:/lfs01" in unit
    finally:
        shutil.rmtree(d, ignore_errors=True)

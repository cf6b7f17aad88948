"""Fixtures for the POSIX conformance cases.

Every case takes the `root` fixture, parametrized over two file systems:

  loom   a directory on a Loom mount (mount A) of a cluster shared by the whole session; the same
         directory seen through a second, independent mount of that file system (mount B, a
         second client process as a second node would run) is `root.other`.
  local  a directory under /tmp on the local disk; `root.other` is the same directory through a
         bind mount, so that the cross-mount cases run there too and prove themselves.

Each case gets a fresh directory of its own on both (`root.path`, and `root.p(name)` for a name in
it). The Loom cluster is started once (`loom cluster up --mount`) and checked at the end as the
parent conftest checks its clusters: every daemon still alive, no ERROR or sanitizer line in any
daemon log, both mounts still serving.
"""

import os
import re
import shutil

import pytest

import mountpair

HERE = os.path.dirname(os.path.abspath(__file__))
PARENT_CONFTEST = os.path.join(os.path.dirname(HERE), "conftest.py")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a long case (deselect with -m 'not slow')")
    config.addinivalue_line("markers", "soak: a case too long for the suite: `make soak` runs them")


def _parent(config):
    """The parent conftest module (pytest registers conftests under their path)."""
    mod = config.pluginmanager.get_plugin(PARENT_CONFTEST)
    assert mod is not None, "tests/integration/conftest.py is not loaded"
    return mod


class Root:
    """A case's own directory: path (through mount A), other (the same through mount B)."""

    def __init__(self, space, name):
        self.kind = space.kind
        self.space = space
        self.cluster = space.cluster
        self.path = os.path.join(space.a, name)
        self.other = os.path.join(space.b, name)

    def p(self, *names):
        return os.path.join(self.path, *names)

    def q(self, *names):
        """The same name through the second mount."""
        return os.path.join(self.other, *names)

    def __repr__(self):
        return "Root(%s, %s)" % (self.kind, self.path)


@pytest.fixture(scope="session", autouse=True)
def _umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture(scope="session")
def loom_space(request):
    """One Loom file system for the session, mounted twice (A by `loom cluster up --mount`, B by
    `mount -t loom`)."""
    with mountpair.loom_twice(_parent(request.config), request.session, "loom-posix-") as space:
        yield space


@pytest.fixture(scope="session")
def local_space():
    """A directory on the local disk, and a bind mount of it."""
    with mountpair.local_twice("loom-posix-local-") as space:
        yield space


def _case_dir_name(node_name):
    # test_0012_rename_noreplace_existing_eexist[loom] -> 0012_rename_noreplace_existing_eexist;
    # a case's other parameters stay in it (test_1100_x[loom-s1m-punch] -> 1100_x-s1m-punch), so
    # that each has a directory of its own: another mount may still hold the names of the last.
    m = re.match(r"^(.*)\[(.*)\]$", node_name)
    name = m.group(1) if m else node_name
    extra = [p for p in m.group(2).split("-") if p not in ("loom", "local")] if m else []
    name = re.sub(r"^test_", "", name) + "".join("-" + p for p in extra)
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


# LOOM_POSIX_SIDES=loom runs the cases on Loom only (the sanitizer pass: the local folder proves
# the tests once, in the plain pass).
@pytest.fixture(params=os.environ.get("LOOM_POSIX_SIDES", "loom,local").split(","))
def root(request):
    """The case's own directory (0755, owned by root) on Loom or on the local disk."""
    space = request.getfixturevalue(request.param + "_space")
    r = Root(space, _case_dir_name(request.node.name))
    if os.path.lexists(r.path):
        shutil.rmtree(r.path)
    os.mkdir(r.path, 0o755)
    os.chmod(r.path, 0o755)
    return r

"""Fixtures for the coherence cases: what the nodes of a training job see when one node writes and
closes a file and another then opens and reads it (close-to-open), on three sides:

  mounts  node A works through mount A of a Loom file system, node B through mount B, a second,
          independent mount of it (another loom-mount process, as a second node runs);
  procs   nodes A and B are two processes on one Loom mount (mount A): it must pass, and so proves
          that the case itself is right;
  local   a local folder under /tmp (A) and a bind mount of it (B): the control, a real file
          system on which every case must pass.

Every case takes `side`: a fresh directory of its own, seen by node A (`side.a`) and node B
(`side.b`), each a node agent (nodeagent.Node) running in that directory through its side's path.
The agents end with the case. One Loom cluster serves the whole session (`loom cluster up
--mount` for A, `mount -t loom` for B) and is checked at the end as the parent conftest checks its
clusters: every daemon alive, no ERROR or sanitizer line in the logs, both mounts still serving,
everything unmounted and stopped afterwards.

LOOM_COHERENCE_SIDES (default mounts,procs,local) selects the sides; the sanitizer pass leaves out
local, which proves the cases, not Loom.
"""

import os
import re
import shutil

import pytest

import mountpair
from loomutil import parse_any_getstripe
from nodeagent import Node

HERE = os.path.dirname(os.path.abspath(__file__))
PARENT_CONFTEST = os.path.join(os.path.dirname(HERE), "conftest.py")
SIDES = os.environ.get("LOOM_COHERENCE_SIDES", "mounts,procs,local").split(",")


def _parent(config):
    """The parent conftest module (pytest registers conftests under their path)."""
    mod = config.pluginmanager.get_plugin(PARENT_CONFTEST)
    assert mod is not None, "tests/integration/conftest.py is not loaded"
    return mod


class Side:
    """A case's own directory on one side, and the two nodes working in it."""

    def __init__(self, kind, space, name):
        self.kind = kind                      # "mounts", "procs" or "local"
        self.cluster = space.cluster
        self.path = os.path.join(space.a, name)                               # through A
        self.other = os.path.join(space.a if kind == "procs" else space.b, name)  # B's view
        self.a = self.b = None

    @property
    def on_loom(self):
        return self.kind in ("mounts", "procs")

    def mkdir(self, name):
        """A directory in the case's directory, made through A (by the test process)."""
        os.mkdir(os.path.join(self.path, name), 0o755)

    def setstripe(self, name, *args):
        """`loom setstripe ARGS` on a directory of the case (through mount A); nothing on local."""
        if self.on_loom:
            self.cluster.loom("setstripe", *args, os.path.join(self.path, name))

    def layout(self, name):
        """The layout of a file of the case (`loom getstripe`, parsed by loomutil); Loom only."""
        return parse_any_getstripe(self.cluster.loom("getstripe", os.path.join(self.path, name)).stdout)

    def __repr__(self):
        return "Side(%s, %s)" % (self.kind, self.path)


@pytest.fixture(scope="session", autouse=True)
def _umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture(scope="session")
def loom_space(request):
    """One Loom file system for the session, mounted twice (A by `loom cluster up --mount`, B by
    `mount -t loom`)."""
    with mountpair.loom_twice(_parent(request.config), request.session, "loom-coherence-") as space:
        yield space


@pytest.fixture(scope="session")
def local_space():
    """A directory on the local disk under /tmp, and a bind mount of it."""
    with mountpair.local_twice("loom-coherence-local-") as space:
        yield space


def _case_dir_name(node_name):
    # test_rename_over[held-mounts] -> rename_over-held-mounts
    name = re.sub(r"^test_", "", node_name).replace("[", "-").rstrip("]")
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


@pytest.fixture(params=SIDES)
def side(request):
    """The case's own fresh directory on one side, with node A and node B (agents) working in it."""
    space = request.getfixturevalue("local_space" if request.param == "local" else "loom_space")
    s = Side(request.param, space, _case_dir_name(request.node.name))
    if os.path.lexists(s.path):
        shutil.rmtree(s.path)
    os.mkdir(s.path, 0o755)
    nodes = []
    try:
        s.a = Node("A", s.path)
        nodes.append(s.a)
        s.b = Node("B", s.other)
        nodes.append(s.b)
        yield s
    finally:
        for n in nodes:
            n.hang_up()
        for n in nodes:
            n.stop()

"""The Python package `loom` (python/loom) for tests, loaded against this build's libloom.

Tests that use it carry the `pylib` mark: they load libloom into the pytest process (or into the
Python programs they start), which the sanitized build's libloom cannot be without its runtime
preloaded, so the ASan pass leaves them out (Makefile).
"""

import os
import sys

import pytest

from loomutil import BUILD, REPO

PYTHON_DIR = os.path.join(REPO, "python")
LIBLOOM = os.path.join(BUILD, "src", "client", "libloom.so")
EXAMPLES = os.path.join(REPO, "examples")



def _sanitized(path):
    try:
        with open(path, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


if _sanitized(LIBLOOM):
    # Loading it would abort Python (the sanitizer runtime must come first): these modules are
    # the plain pass's. The Makefile deselects them (-m "not pylib"); this keeps their import safe.
    pytest.skip("libloom of a sanitized build cannot be loaded into Python", allow_module_level=True)

os.environ["LOOM_LIBRARY"] = LIBLOOM
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

import loom  # noqa: E402

pylib = pytest.mark.pylib


def child_env(cluster, **extra):
    """The environment for a Python program that uses the package against cluster."""
    env = dict(cluster.env)
    env["LOOM_LIBRARY"] = LIBLOOM
    env["PYTHONPATH"] = PYTHON_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def connect(cluster, mnt=None):
    """loom.connect() to cluster: through its mount point when given, else its MDS address."""
    return loom.connect(mnt if mnt else cluster.addr, key_file=cluster.key)

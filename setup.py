"""Builds libloom for `pip install .` and puts it in the package (pyproject.toml has the rest).

libloom is built with Meson in $LOOM_BUILD if that names a configured build tree, else in the
source tree's build/ if `make` configured it, else in build-py/meson. The copy inside the package
is the one loom/_lib.py loads first, so an installed package never pairs with another version's
library. An editable install (`pip install -e .`) builds nothing: it loads the build tree's.
"""
import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY = os.path.join("src", "client", "libloom.so")


def _meson_tree():
    for tree in (os.environ.get("LOOM_BUILD"), os.path.join(HERE, "build")):
        if tree and os.path.exists(os.path.join(tree, "build.ninja")):
            return tree
    tree = os.path.join(HERE, "build-py", "meson")
    if not os.path.exists(os.path.join(tree, "build.ninja")):
        subprocess.run(["meson", "setup", "--buildtype=release", tree, HERE], check=True)
    return tree


class BuildWithLibloom(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        tree = _meson_tree()
        subprocess.run(["meson", "compile", "-C", tree, "src/client/loom:shared_library"], check=True)
        target = os.path.join(self.build_lib, "loom", "libloom.so.0")
        shutil.copyfile(os.path.realpath(os.path.join(tree, LIBRARY)), target)
        os.chmod(target, 0o755)


class BinaryDistribution(Distribution):
    """The wheel holds a shared library: it is for this platform, not any."""

    def has_ext_modules(self):
        return True


os.makedirs(os.path.join(HERE, "build-py"), exist_ok=True)   # egg_info's directory must exist
setup(cmdclass={"build_py": BuildWithLibloom}, distclass=BinaryDistribution,
      options={"build": {"build_base": "build-py"}, "egg_info": {"egg_base": "build-py"}})

"""Loom from Python, without a mount: files, directories, layouts and read-ahead over libloom.

    import loom
    fs = loom.connect("/mnt/loom")          # the MDS found from a mount (or "HOST:PORT")
    with fs.open("/mnt/loom/data/x.npy", "rb") as f:
        arr = np.load(f)
    fs.setstripe("/mnt/loom/models", stripe_count=-1)
    print(fs.getstripe("/mnt/loom/models/base.pt").osts())

Errors are the OSError subclasses Python raises for the same errno (FileNotFoundError, ...).
loom.torch has PyTorch datasets; loom.shard the record-shard format.
"""

from ._fs import DirEntry, FileSystem, Layout, connect, loom_mounts, mount_of  # noqa: F401
from ._file import File  # noqa: F401
from ._prefetch import Prefetcher  # noqa: F401

__all__ = ["connect", "FileSystem", "File", "Layout", "DirEntry", "Prefetcher", "loom_mounts",
           "mount_of"]

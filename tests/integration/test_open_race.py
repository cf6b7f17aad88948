"""Opens for reading race the release of the file they open.

The MDS answers an open for reading on its network thread, beside the metadata thread that
releases unlinked inodes (and has their objects destroyed). A reader that got a descriptor must
keep reading the file it opened, whole, however the writer replaces or removes it meanwhile:
POSIX keeps an unlinked file alive while it is open.
"""

import errno
import mmap
import os
import threading
import time

from loomutil import KiB, second_mount

SIZE = 192 * KiB          # on the OSTs (the directory has no Data-on-MDT), so a release destroys it
VERSIONS = 8
SECONDS = 6




def version(k):
    return bytes([65 + k]) * SIZE


def test_reader_keeps_the_file_it_opened_while_the_writer_replaces_it(cluster):
    mnt = cluster.mount()
    os.mkdir(os.path.join(mnt, "race"))
    cluster.loom("setstripe", "-E", "-1", "-c", "1", "/race")
    stop = time.monotonic() + SECONDS
    errors = []
    opened = [0]

    def writer():
        # Replaces f by rename (the old inode is released when nobody has it open) and now and
        # then removes it outright.
        k = 0
        d = os.path.join(mnt, "race")
        try:
            while time.monotonic() < stop:
                tmp = os.path.join(d, "tmp")
                with open(tmp, "wb") as f:
                    f.write(version(k % VERSIONS))
                os.rename(tmp, os.path.join(d, "f"))
                if k % 5 == 4:
                    os.unlink(os.path.join(d, "f"))
                k += 1
        except OSError as e:
            errors.append("writer: %r" % e)

    def reader(root):
        # O_DIRECT: every read asks the servers, none is served from this mount's page cache.
        p = os.path.join(root, "race", "f")
        buf = mmap.mmap(-1, SIZE)

        def read_all(fd):
            n = os.preadv(fd, [buf], 0)
            return bytes(buf[:n])

        while time.monotonic() < stop and not errors:
            try:
                fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
            except OSError as e:
                if e.errno in (errno.ENOENT, errno.ESTALE):
                    continue
                raise
            try:
                first = read_all(fd)
                if len(first) != SIZE or first != first[:1] * SIZE:
                    errors.append("read %d bytes of mixed content at first" % len(first))
                    return
                time.sleep(0.02)          # the writer moves on; the release and destroy follow
                again = read_all(fd)
                if again != first:
                    errors.append("the open file changed under its reader (%d bytes, %r...)"
                                  % (len(again), again[:1]))
                    return
                opened[0] += 1
            except OSError as e:
                errors.append("reader: %r" % e)
                return
            finally:
                os.close(fd)

    with second_mount(cluster) as other:
        threads = [threading.Thread(target=writer), threading.Thread(target=reader, args=(other,)),
                   threading.Thread(target=reader, args=(other,))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors[:5]
    assert opened[0] > 10, "the readers hardly ever opened the file (%d times)" % opened[0]

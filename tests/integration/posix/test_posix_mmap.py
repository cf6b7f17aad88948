"""mmap: shared and private mappings (cases 0500-0519)."""

import mmap
import os

from posixutil import MiB, read_file, write_file


def _map(path, length, access, flags=os.O_RDWR):
    fd = os.open(path, flags)
    try:
        return mmap.mmap(fd, length, access=access)
    finally:
        os.close(fd)          # the mapping keeps the file open


def test_0500_mmap_read_sees_file_data(root):
    data = os.urandom(3 * mmap.PAGESIZE + 123)
    write_file(root.p("f"), data)
    m = _map(root.p("f"), len(data), mmap.ACCESS_READ, os.O_RDONLY)
    try:
        assert m[:] == data
    finally:
        m.close()


def test_0501_map_shared_write_reaches_file_after_msync(root):
    write_file(root.p("f"), bytes(2 * MiB))
    fd = os.open(root.p("f"), os.O_RDWR)
    try:
        m = mmap.mmap(fd, 2 * MiB, access=mmap.ACCESS_WRITE)
        try:
            m[10:15] = b"hello"
            m[MiB + 7:MiB + 12] = b"world"
            m.flush()                                     # msync(MS_SYNC)
            assert os.pread(fd, 5, 10) == b"hello"
            other = os.open(root.p("f"), os.O_RDONLY)
            try:
                assert os.pread(other, 5, MiB + 7) == b"world"
            finally:
                os.close(other)
        finally:
            m.close()
    finally:
        os.close(fd)


def test_0502_map_shared_write_survives_close_and_reopen(root):
    write_file(root.p("f"), b"." * 10000)
    m = _map(root.p("f"), 10000, mmap.ACCESS_WRITE)
    m[0:4] = b"HEAD"
    m[9996:10000] = b"TAIL"
    m.flush()
    m.close()
    data = read_file(root.p("f"))
    assert data[:4] == b"HEAD" and data[-4:] == b"TAIL" and data[4:9996] == b"." * 9992
    assert os.stat(root.p("f")).st_size == 10000


def test_0503_map_shared_write_without_msync_reaches_file_after_munmap(root):
    write_file(root.p("f"), bytes(8192))
    m = _map(root.p("f"), 8192, mmap.ACCESS_WRITE)
    m[4096:4100] = b"page"
    m.close()                                             # munmap without msync
    fd = os.open(root.p("f"), os.O_RDONLY)
    try:
        os.fsync(fd)
        assert os.pread(fd, 4, 4096) == b"page"
    finally:
        os.close(fd)


def test_0504_map_private_write_does_not_reach_file(root):
    write_file(root.p("f"), b"original" * 1000)
    m = _map(root.p("f"), 8000, mmap.ACCESS_COPY, os.O_RDONLY)
    try:
        m[0:8] = b"PRIVATE!"
        assert m[0:8] == b"PRIVATE!"
        m.flush()
        assert read_file(root.p("f"))[:8] == b"original"
    finally:
        m.close()
    assert read_file(root.p("f")) == b"original" * 1000


def test_0505_map_shared_sees_write_through_descriptor(root):
    write_file(root.p("f"), bytes(4096))
    m = _map(root.p("f"), 4096, mmap.ACCESS_READ, os.O_RDONLY)
    try:
        fd = os.open(root.p("f"), os.O_WRONLY)
        try:
            os.pwrite(fd, b"via-write", 100)
        finally:
            os.close(fd)
        assert m[100:109] == b"via-write"
    finally:
        m.close()


def test_0506_map_shared_write_seen_through_other_mount(root):
    write_file(root.p("f"), bytes(4096))
    m = _map(root.p("f"), 4096, mmap.ACCESS_WRITE)
    m[0:6] = b"mapped"
    m.flush()
    m.close()
    assert read_file(root.q("f"))[:6] == b"mapped"


def test_0507_map_shared_write_of_short_file_keeps_size(root):
    # The rest of the last page is not part of the file: writing the mapping keeps st_size.
    write_file(root.p("f"), b"abc")
    m = _map(root.p("f"), 3, mmap.ACCESS_WRITE)
    try:
        m[0:3] = b"XYZ"
        m.flush()
    finally:
        m.close()
    assert read_file(root.p("f")) == b"XYZ"
    assert os.stat(root.p("f")).st_size == 3


def test_0508_map_shared_write_after_a_descriptors_write_wins(root):
    # A write through one descriptor, then a mapping of the file through another changes some of
    # those bytes: the mapping's bytes are the file's (its pages go out through the other
    # descriptor, while the first write may still be on its way to the OST).
    for t in range(10):
        p = root.p("f%d" % t)
        fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        try:
            body = bytearray(os.urandom(190 * 1024))
            os.write(fd, body)
            patch = os.urandom(5000)
            m = _map(p, len(body), mmap.ACCESS_WRITE)
            try:
                m[63613:63613 + len(patch)] = patch
                m.flush()
            finally:
                m.close()
            body[63613:63613 + len(patch)] = patch
            assert os.pread(fd, len(body) + 1, 0) == bytes(body), "trial %d" % t
        finally:
            os.close(fd)
        assert read_file(root.q("f%d" % t)) == bytes(body), "trial %d: the other mount" % t

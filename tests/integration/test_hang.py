"""A hung server is not a hung cluster (issue 15): a server stopped with SIGSTOP keeps its sockets
up and answers nothing, as a server on a hung disk does. The mount must notice (no reply within
its adaptive timeout, at_min=2 here), and then:

- hard (the default): the application waits as for a restarting server, and carries on when the
  server does, with no error; a signal ends the wait (EINTR), and kill -9 ends the process;
- soft,timeout=SEC: the call fails with EIO;
- umount and umount -l work while the server is stopped.

Nothing here asserts how fast: every bound is a deadline far past the few seconds it takes.
"""

import os
import select
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from loomutil import BUILD, is_mounted, pid_alive, wait_until

LOOM_MOUNT = os.path.join(BUILD, "src", "fuse", "loom-mount")
PATIENCE = 60  # seconds: far past at_min=2 plus a reconnection attempt


@pytest.fixture
def stopped(cluster):
    """stopped(name): SIGSTOPs a daemon; every daemon stopped is continued at the end."""
    names = []

    def stop(name):
        os.kill(cluster.pid(name), signal.SIGSTOP)
        names.append(name)

    yield stop
    for name in names:
        os.kill(cluster.pid(name), signal.SIGCONT)


@pytest.fixture
def mount_with(cluster):
    """mount_with(options): the file system mounted again by loom-mount with -o options."""
    made = []

    def mount(options):
        d = tempfile.mkdtemp(prefix="loom-hang-")
        p = subprocess.run([LOOM_MOUNT, "%s:/loom" % cluster.addr, d, "-o", "key=%s,%s" % (cluster.key, options)],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and is_mounted(d), "loom-mount -o %s failed: %s" % (options, p.stderr)
        made.append(d)
        return d

    cluster.up()
    yield mount
    for d in made:
        if is_mounted(d):
            subprocess.run(["umount", "-l", d], capture_output=True, timeout=60)
        os.rmdir(d)


def child(code):
    """A Python process running code, its stdout a pipe."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def started(p, word="started"):
    """Waits for the child's first line, which says it is about to block."""
    line = p.stdout.readline().strip()
    assert line == word, "the child said %r (stderr: %s)" % (line, p.stderr.read() if p.poll() is not None else "")


def test_hard_mount_waits_for_a_stopped_mds_then_carries_on(cluster, mount_with, stopped):
    mnt = mount_with("at_min=2")
    with open(os.path.join(mnt, "before"), "w") as f:
        f.write("x")
    stopped("mds")
    p = child("""
        import os, sys
        print("started", flush=True)
        fd = os.open(%r, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"made while the MDS was stopped")
        os.close(fd)
        print("done", flush=True)
    """ % os.path.join(mnt, "during"))
    started(p)
    # Long enough for the mount to take the MDS for hung (at_min=2) and try to reconnect: the
    # application still waits, with no error.
    time.sleep(6)
    assert p.poll() is None, "the create ended while the MDS was stopped: %r" % (p.communicate(),)
    os.kill(cluster.pid("mds"), signal.SIGCONT)
    out, err = p.communicate(timeout=PATIENCE)
    assert p.returncode == 0 and out.strip() == "done", (p.returncode, out, err)
    with open(os.path.join(mnt, "during")) as f:
        assert f.read() == "made while the MDS was stopped"
    assert sorted(os.listdir(mnt)) == ["before", "during"]


def test_a_signal_ends_a_wait_on_a_stopped_mds_with_eintr(cluster, mount_with, stopped):
    mnt = mount_with("at_min=2")
    stopped("mds")
    p = child("""
        import errno, os, signal
        def give_up(signum, frame):
            raise InterruptedError(errno.EINTR, "interrupted")
        signal.signal(signal.SIGUSR1, give_up)
        print("started", flush=True)
        try:
            os.stat(%r)
            print("answered")
        except InterruptedError:
            print("EINTR")
        except OSError as e:
            print("errno", e.errno)
    """ % os.path.join(mnt, "missing"))
    started(p)
    time.sleep(1)            # in the stat by now (and if not, the handler still ends it)
    p.send_signal(signal.SIGUSR1)
    out, err = p.communicate(timeout=PATIENCE)
    assert out.strip() == "EINTR", (out, err)


def test_kill9_ends_a_process_blocked_on_a_stopped_mds(cluster, mount_with, stopped):
    mnt = mount_with("at_min=2")
    stopped("mds")
    p = child("""
        import os
        print("started", flush=True)
        os.listdir(%r)
    """ % os.path.join(mnt, "."))
    started(p)
    time.sleep(1)
    p.kill()
    assert wait_until(lambda: p.poll() is not None, PATIENCE), \
        "kill -9 did not end a process waiting on a stopped MDS (state D?)"
    assert p.returncode == -signal.SIGKILL


def test_kill9_ends_a_reader_blocked_on_a_stopped_oss(cluster, mount_with, stopped):
    mnt = mount_with("at_min=2")
    path = os.path.join(mnt, "big")
    cluster.loom("setstripe", "-c", "-1", "-S", "1M", path)
    with open(path, "wb") as f:
        f.write(os.urandom(8 << 20))
    # A cold read: through another mount, which has nothing cached.
    other = mount_with("at_min=2")
    for k in range(cluster.osts):
        stopped("oss%d" % k)
    p = child("""
        import os
        print("started", flush=True)
        with open(%r, "rb") as f:
            f.read()
    """ % os.path.join(other, "big"))
    started(p)
    time.sleep(1)
    p.kill()
    assert wait_until(lambda: p.poll() is not None, PATIENCE), \
        "kill -9 did not end a process reading from a stopped OSS"


def test_a_write_waiting_on_stopped_osss_ends_on_a_signal_and_keeps_what_was_acknowledged(
        cluster, mount_with, stopped):
    """Writes go behind (4 MiB per handle): past that, write(2) waits for the OSSs. A signal ends
    that wait with EINTR, kill -9 ends the process, and every byte a write acknowledged reaches
    the file once the OSSs are back."""
    mnt = mount_with("at_min=2")
    paths = [os.path.join(mnt, name) for name in ("interrupted", "killed")]
    for path in paths:
        cluster.loom("setstripe", "-c", "-1", "-S", "1M", path)
    for k in range(cluster.osts):
        stopped("oss%d" % k)
    writer = """
        import errno, os, signal
        def give_up(signum, frame):
            raise InterruptedError(errno.EINTR, "interrupted")
        signal.signal(signal.SIGUSR1, give_up)
        fd = os.open(%r, os.O_WRONLY)
        print("started", flush=True)
        try:
            for i in range(64):                      # far past what goes behind
                block = bytes([i + 1]) * (1 << 20)
                done = 0
                while done < len(block):
                    done += os.write(fd, block[done:])
            print("all written", flush=True)
        except InterruptedError:
            print("EINTR at", os.lseek(fd, 0, os.SEEK_CUR), flush=True)
        os._exit(0)                                  # the kernel closes fd: its writes go on
    """
    interrupted, killed = child(writer % paths[0]), child(writer % paths[1])
    started(interrupted)
    started(killed)
    time.sleep(3)            # both wait for the OSSs by now (and a signal ends any wait anyway)
    killed.kill()
    assert wait_until(lambda: killed.poll() is not None, PATIENCE), \
        "kill -9 did not end a process writing to stopped OSSs"
    interrupted.send_signal(signal.SIGUSR1)
    # Its exit closes the descriptor, and close(2) waits for the OSSs (hard): read its line.
    ready, _, _ = select.select([interrupted.stdout], [], [], PATIENCE)
    assert ready, "a signal did not end a write waiting for stopped OSSs"
    line = interrupted.stdout.readline()
    words = line.split()
    assert words[:2] == ["EINTR", "at"], line
    acknowledged = int(words[2])
    assert 0 < acknowledged < 64 << 20, line
    for k in range(cluster.osts):
        os.kill(cluster.pid("oss%d" % k), signal.SIGCONT)
    interrupted.communicate(timeout=PATIENCE)
    # The release of the closed descriptor sends what went behind, then reports the size.
    assert wait_until(lambda: os.stat(paths[0]).st_size == acknowledged, PATIENCE), \
        "size %d, acknowledged %d" % (os.stat(paths[0]).st_size, acknowledged)
    want = b"".join(bytes([i + 1]) * (1 << 20) for i in range(64))[:acknowledged]
    with open(paths[0], "rb") as f:
        assert f.read() == want


def test_soft_mount_gives_eio_after_its_timeout(cluster, mount_with, stopped):
    mnt = mount_with("soft,timeout=3,at_min=2")
    stopped("mds")
    p = child("""
        import os
        print("started", flush=True)
        try:
            os.stat(%r)
            print("answered")
        except OSError as e:
            print("errno", e.errno)
    """ % os.path.join(mnt, "missing"))
    started(p)
    out, err = p.communicate(timeout=PATIENCE)
    assert out.strip() == "errno %d" % 5, (out, err)   # EIO


def test_umount_works_while_the_mds_is_stopped(cluster, mount_with, stopped):
    plain = mount_with("at_min=2")
    lazy = mount_with("at_min=2")
    for d in (plain, lazy):
        os.stat(d)           # the root's attributes are known
        os.listdir(d)
    daemons = [int(x) for x in subprocess.run(["pgrep", "-f", "loom-mount .*%s" % plain], capture_output=True,
                                             text=True).stdout.split()]
    stopped("mds")
    time.sleep(3)            # past at_min: the mount knows the MDS is away
    p = subprocess.run(["umount", plain], capture_output=True, text=True, timeout=PATIENCE)
    assert p.returncode == 0 and not is_mounted(plain), "umount failed: %s" % p.stderr
    p = subprocess.run(["umount", "-l", lazy], capture_output=True, text=True, timeout=PATIENCE)
    assert p.returncode == 0 and not is_mounted(lazy), "umount -l failed: %s" % p.stderr
    # The daemon of the plain mount leaves too (it has nothing left to serve), at the latest
    # when its last requests give up.
    for pid in daemons:
        assert wait_until(lambda: not pid_alive(pid), 150), "loom-mount %d stayed after umount" % pid

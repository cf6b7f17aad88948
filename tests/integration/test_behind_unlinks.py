"""Unlinks sent behind (docs/architecture.md, "Unlinks sent behind"): under an exclusive directory
lease whose list knows a name as a file's, the mount answers its unlink itself and sends it to the
MDS without waiting. What a user sees must not change: a name removed is gone for every other
client as soon as the unlink returned, a name made again right after holds the new file, and an
unlink that returned stays done after the MDS is killed."""
import os
import shutil
import signal
import subprocess
import threading
import time

import loomutil
from loomutil import second_mount, wait_until
from test_behind_creates import configured, make_files
from test_leases import stopped, take_lease


def test_unlinks_in_a_directory_this_mount_leases_need_no_mds(cluster_factory):
    """With the MDS stopped, a program makes 20 files and removes them again in a directory the
    mount made: the mount answered every create and unlink itself. Once the MDS runs again,
    another mount sees none of them, and the file made before is still there."""
    c = configured(cluster_factory, "lease-timeout = 15\n")
    with second_mount(c, opts="nowsync") as a:
        d = os.path.join(a, "fresh")
        os.mkdir(d)
        make_files(d, ["kept"])                  # asks the MDS for inode numbers ahead
        os.stat(a)
        with stopped(c.pid("mds")):
            script = ("import os, sys\n"
                      "d = sys.argv[1]\n"
                      "names = [os.path.join(d, 'gone-%d' % i) for i in range(20)]\n"
                      "for n in names:\n"
                      "    open(n, 'x').close()\n"
                      "for n in names:\n"
                      "    os.unlink(n)\n"
                      "try:\n"
                      "    os.unlink(names[0])\n"
                      "except FileNotFoundError:\n"
                      "    print('gone')\n")
            p = subprocess.run(["timeout", "5", "python3", "-c", script, d], capture_output=True,
                               text=True)
            assert p.returncode == 0 and p.stdout == "gone\n", p
        assert os.listdir(d) == ["kept"]
        with second_mount(c, opts="nowsync") as b:
            assert os.listdir(os.path.join(b, "fresh")) == ["kept"]


def test_a_name_removed_behind_and_made_again_holds_the_new_file(cluster_factory):
    """A checkpoint rotation's pattern: write a file, remove it, write it again; another mount
    reads the newest bytes of each right after. A reader that had the old file open before it
    was removed still reads it whole (the MDS keeps an unlinked file for its open handles)."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a, second_mount(c, opts="nowsync") as b:
        d = os.path.join(a, "ckpt")
        os.mkdir(d)
        old = os.urandom(300000)
        with open(os.path.join(d, "held"), "wb") as f:
            f.write(old)
        reader = open(os.path.join(b, "ckpt", "held"), "rb")
        try:
            time.sleep(1.2)                      # B's lookup recalled A's lease: A waits a second
            take_lease(a, "ckpt")                # and takes it again
            for i in range(40):
                n = os.path.join(d, "step-%d" % (i % 4))
                if os.path.exists(n):
                    os.unlink(n)
                with open(n, "xb") as f:
                    f.write(b"step %d " % i * 100)
            os.unlink(os.path.join(d, "held"))
            assert reader.read() == old
        finally:
            reader.close()
        for k in range(4):
            with open(os.path.join(b, "ckpt", "step-%d" % k), "rb") as f:
                assert f.read() == b"step %d " % (36 + k) * 100
        assert sorted(os.listdir(os.path.join(b, "ckpt"))) == ["step-%d" % k for k in range(4)]
        shutil.rmtree(d)
        assert "ckpt" not in os.listdir(b)      # (B's kernel may know the name for a second)


def test_a_file_another_mount_opened_is_unlinked_the_usual_way(cluster_factory):
    """B holds an inode lease on a file and stops (SIGSTOP). A file A's mount did not make under
    its current lease may be leased by others: its unlink goes to the MDS, which holds it until
    B's lease times out (sent behind, every later request of A would wait for it, and A's
    create of the name right after could reach the MDS first). A makes the name again at once,
    and every mount reads the new file."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a, second_mount(c, opts="nowsync") as b:
        d = os.path.join(a, "held")
        os.mkdir(d)
        with open(os.path.join(d, "f"), "wb") as f:
            f.write(b"old")
        bf = os.path.join(b, "held", "f")
        for _ in range(2):                       # the second read-only open takes the lease
            with open(bf, "rb") as f:
                assert f.read() == b"old"
        time.sleep(1.2)                          # B's lookups recalled A's lease: A waits a second
        take_lease(a, "held")
        assert os.path.exists(os.path.join(d, "f"))
        with stopped(loomutil.mount_pid(b)):
            os.unlink(os.path.join(d, "f"))
            with open(os.path.join(d, "f"), "xb") as f:
                f.write(b"new")
        with second_mount(c, opts="nowsync") as e:
            with open(os.path.join(e, "held", "f"), "rb") as f:
                assert f.read() == b"new"
        with open(bf, "rb") as f:
            assert f.read() == b"new"


ROTATOR = r"""
import os, sys
d = sys.argv[1]
for i in range(100000):
    with open(os.path.join(d, "f-%06d" % i), "xb") as f:
        f.write(b"%d" % i)
    if i >= 5:
        os.unlink(os.path.join(d, "f-%06d" % (i - 5)))
    print(i, flush=True)
"""


def test_unlinks_sent_behind_stay_done_after_kill_9_of_the_mds(cluster_factory):
    """A program makes a file and removes the one made five before, again and again, while the
    MDS is killed and restarted: after it, the directory holds exactly the files the program
    had not removed (each unlink that returned stays done: resent or replayed in order with the
    creates), with their bytes."""
    c = configured(cluster_factory)
    with second_mount(c, opts="nowsync") as a:
        d = os.path.join(a, "rot")
        os.mkdir(d)
        out_path = os.path.join(c.dir, "rotator.out")
        out = open(out_path, "w")
        p = subprocess.Popen(["python3", "-c", ROTATOR, d], stdout=out, stderr=subprocess.PIPE,
                             text=True)

        def steps():
            # Read through an open of our own: seeking the one the program writes through would
            # move its offset too (one open file), and its next line could land at the start.
            with open(out_path) as f:
                return [int(n) for n in f.read().split("\n") if n]

        try:
            wait_until(lambda: len(steps()) >= 200 or p.poll() is not None, timeout=60)
            c.kill9("mds")
            c.restart()
            wait_until(lambda: "replay complete" in c.read_log("mds"), 60)
            wait_until(lambda: len(steps()) >= 600 or p.poll() is not None, timeout=120)
        finally:
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=120)
        last = steps()[-1]
        out.close()
        assert "Error" not in err.replace("KeyboardInterrupt", "") and last >= 599, (err, last)
        with second_mount(c, opts="nowsync") as b:
            names = sorted(os.listdir(os.path.join(b, "rot")))
            # Step `last` returned; the next one may have made its file and not yet removed
            # the oldest.
            must = ["f-%06d" % i for i in range(last - 3, last + 1)]
            may = ["f-%06d" % (last - 4), "f-%06d" % (last + 1)]
            assert set(must) <= set(names) <= set(must + may), (last, names)
            for n in names:
                with open(os.path.join(b, "rot", n), "rb") as f:
                    got = f.read()
                # The SIGINT may have come between the next step's create and its write.
                assert got == b"%d" % int(n[2:]) or (got == b"" and n == may[1]), (n, got)


RM = r"""
import os, sys, time
at = float(sys.argv.pop(1))
while time.time() < at:
    pass
for n in sys.argv[1:]:
    os.unlink(n)
"""


def test_two_mounts_removing_files_the_other_reads_do_not_wait_for_each_other(cluster_factory):
    """A and B each read the other's files twice (each holds inode leases on the other's files),
    then each removes the files of its own directory at the same moment. An unlink held at the
    MDS for the other's lease must not be one the other's give-back waits for: no lease may time
    out (each would then wait for the other until the MDS took every lease of both)."""
    c = configured(cluster_factory, "lease-timeout = 10\n")
    # Long timeouts: the kernel's dentries last, so each unlink is the UNLINK alone.
    opts = "nowsync,entry_timeout=60,attr_timeout=60"
    with second_mount(c, opts=opts) as a, second_mount(c, opts=opts) as b:
        names = ["f-%d" % i for i in range(40)]
        for mnt, d in ((a, "pa"), (b, "pb")):
            os.mkdir(os.path.join(mnt, d))
            make_files(os.path.join(mnt, d), names, b"x")
        for _ in range(2):
            for n in names:
                for mnt, d in ((a, "pb"), (b, "pa")):
                    with open(os.path.join(mnt, d, n), "rb") as f:
                        assert f.read() == b"x" + n.encode()
        time.sleep(1.2)                          # the recalls by the reads: each waits a second
        take_lease(a, "pa")
        take_lease(b, "pb")
        for n in names:
            os.stat(os.path.join(a, "pa", n))
            os.stat(os.path.join(b, "pb", n))
        at = str(time.time() + 1.0)              # both start together
        ps = [subprocess.Popen(["python3", "-c", RM, at] + [os.path.join(mnt, d, n) for n in names])
              for mnt, d in ((a, "pa"), (b, "pb"))]
        for p in ps:
            assert p.wait(timeout=120) == 0
        assert os.listdir(os.path.join(a, "pb")) == [] and os.listdir(os.path.join(b, "pa")) == []
        log = c.read_log("mds")
        assert "did not give back" not in log, log[-2000:]


def test_an_mds_that_squashes_root_has_roots_unlinks_judged_there(cluster_factory):
    """With --root-squash, root on a client is nobody at the MDS: the mount cannot judge its
    rights, so no lease is granted exclusive and nothing is answered behind. Root's unlink in
    a directory only root may write fails, and the file stays."""
    c = configured(cluster_factory, "recovery-window = 2\n")
    with second_mount(c, opts="nowsync") as a:
        d = os.path.join(a, "rs")
        os.mkdir(d)
        make_files(d, ["f-%d" % i for i in range(3)])
        # Committed before the MDS is killed: sync(2) does not reach a FUSE file system, and
        # the unmount's own commit may still be on its way when umount(8) returns.
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    c.kill9("mds")
    log = open(os.path.join(c.dir, "log", "mds-squash.log"), "w")
    p = subprocess.Popen([loomutil.MDS_BIN, "--mdt", os.path.join(c.dir, "mdt"), "--listen", c.addr,
                          "--key", c.key, "--root-squash", "--recovery-window", "2"],
                         stdout=log, stderr=log)
    try:
        assert wait_until(lambda: c.loom("ls", "/rs", check=False).returncode == 0, 30, 0.1)
        with second_mount(c, opts="nowsync") as a:
            d = os.path.join(a, "rs")
            take_lease(a, "rs")
            try:
                os.unlink(os.path.join(d, "f-0"))
                assert False, "root's unlink succeeded through an MDS that squashes root"
            except PermissionError:
                pass
            try:
                open(os.path.join(d, "new"), "x").close()
                assert False, "root's create succeeded through an MDS that squashes root"
            except PermissionError:
                pass
            assert sorted(os.listdir(d)) == ["f-0", "f-1", "f-2"]
    finally:
        p.terminate()
        p.wait(timeout=30)
        log.close()
    c.restart()


def test_a_file_linked_elsewhere_is_unlinked_the_usual_way(cluster_factory):
    """A makes a file under its exclusive lease and links it into another directory, where B
    opens it twice (an inode lease) and stops. A's unlink of the first name may be held at the
    MDS for B's lease: it is not sent behind, so A's other requests do not wait for it (A's
    listing of another directory returns while B is still stopped, before its lease times
    out)."""
    c = configured(cluster_factory, "lease-timeout = 10\n")
    with second_mount(c, opts="nowsync") as a, second_mount(c, opts="nowsync") as b:
        os.mkdir(os.path.join(a, "mine"))
        os.mkdir(os.path.join(a, "other"))
        os.mkdir(os.path.join(a, "unrelated"))
        with open(os.path.join(a, "mine", "f"), "wb") as f:
            f.write(b"linked")
        os.link(os.path.join(a, "mine", "f"), os.path.join(a, "other", "g"))
        for _ in range(2):
            with open(os.path.join(b, "other", "g"), "rb") as f:
                assert f.read() == b"linked"
        with stopped(loomutil.mount_pid(b)):
            t = threading.Thread(target=os.unlink, args=(os.path.join(a, "mine", "f"),))
            t.start()
            assert os.listdir(os.path.join(a, "unrelated")) == []
            assert "did not give back" not in c.read_log("mds")
            t.join(timeout=60)
        assert not t.is_alive()
        assert os.listdir(os.path.join(a, "mine")) == []

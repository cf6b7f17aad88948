"""Servers killed with SIGKILL: what was acknowledged survives, and while a server is down the
file system fails cleanly instead of returning wrong data."""

import os
import re
import subprocess
import threading

import loomwire
from loomutil import wait_until
from loomutil import KiB, MiB, make_random_file, parse_any_getstripe, sha256_file

NLOADERS = 4
ATIME_LINE = re.compile(r"^Access: \d+\.\d+$")   # `loom stat`'s atime; reads may move it


def walk(cluster, path="/"):
    """Every entry under path: {path: (kind, `ls -l` line, `stat` output without atime)}."""
    snap = {}
    todo = [path]
    while todo:
        d = todo.pop()
        names = cluster.loom("ls", d).stdout.split("\n")
        longs = cluster.loom("ls", "-l", d).stdout.split("\n")
        names = [n for n in names if n]
        longs = [x for x in longs if x]
        assert len(names) == len(longs), "ls and ls -l of %s disagree" % d
        for name, line in zip(names, longs):
            p = d.rstrip("/") + "/" + name
            st = cluster.loom("stat", p).stdout
            st = "\n".join(x for x in st.splitlines() if not ATIME_LINE.match(x))
            kind = "d" if line.startswith("d") else "f"
            snap[p] = (kind, line, st)
            if kind == "d":
                todo.append(p)
    return snap


def layouts(cluster, snap):
    out = {}
    for p, (kind, _, _) in sorted(snap.items()):
        args = ("getstripe", "-d", p) if kind == "d" else ("getstripe", p)
        out[p] = cluster.loom(*args).stdout
    return out


def build_namespace(cluster, workdir):
    """A small tree with dir defaults, data, renames and unlinks; returns {path: sha256}."""
    sums = {}

    def put(size, path):
        src = os.path.join(workdir, path.strip("/").replace("/", "_"))
        sums[path] = make_random_file(src, size)
        cluster.loom("put", src, path)

    cluster.loom("mkdir", "-p", "/a/b/c", "/x")
    cluster.loom("setstripe", "-c", "2", "-S", "1M", "/a")
    cluster.loom("setstripe", "-c", "4", "-S", "64k", "/a/b")
    put(MiB + MiB // 2, "/a/f1")
    put(3 * MiB + 5, "/a/b/f2")
    put(777, "/a/b/c/f3")
    put(64 * KiB, "/x/f4")
    put(10, "/a/tmp")
    cluster.loom("mv", "/a/f1", "/x/f1renamed")
    sums["/x/f1renamed"] = sums.pop("/a/f1")
    cluster.loom("mv", "/a/b/c", "/x/c")
    sums["/x/c/f3"] = sums.pop("/a/b/c/f3")
    cluster.loom("rm", "/a/tmp")
    del sums["/a/tmp"]
    cluster.loom("rm", "/x/f4")
    del sums["/x/f4"]
    return sums


def check_data(cluster, workdir, sums):
    for path, digest in sums.items():
        out = os.path.join(workdir, "got")
        cluster.loom("get", path, out)
        assert sha256_file(out) == digest, "%s: content changed" % path


def test_mds_kill9_while_idle_keeps_namespace_layouts_and_data(cluster, workdir):
    sums = build_namespace(cluster, workdir)
    before = walk(cluster)
    before_layouts = layouts(cluster, before)
    assert "/x/c/f3" in before and "/a/tmp" not in before and "/a/f1" not in before, sorted(before)

    cluster.kill9("mds")
    cluster.restart()

    after = walk(cluster)
    assert sorted(after) == sorted(before), "namespace changed across an MDS kill -9"
    for p in before:
        assert after[p] == before[p], "%s changed across an MDS kill -9:\nbefore %r\nafter  %r" % (p, before[p], after[p])
    assert layouts(cluster, after) == before_layouts, "layouts changed across an MDS kill -9"
    check_data(cluster, workdir, sums)


def test_mds_kill9_restart_does_not_reuse_object_ids(cluster, workdir):
    src = os.path.join(workdir, "src")
    digest = make_random_file(src, 2 * MiB)
    cluster.loom("setstripe", "-c", "-1", "/")
    cluster.loom("put", src, "/old")
    old = set(parse_any_getstripe(cluster.loom("getstripe", "/old").stdout).objects)

    cluster.kill9("mds")
    cluster.restart()

    new_src = os.path.join(workdir, "new")
    make_random_file(new_src, 2 * MiB)
    cluster.loom("put", new_src, "/new")
    new = set(parse_any_getstripe(cluster.loom("getstripe", "/new").stdout).objects)
    assert not old & new, "a file created after the restart got objects of an existing file: %r" % (old & new)
    out = os.path.join(workdir, "out")
    cluster.loom("get", "/old", out)
    assert sha256_file(out) == digest, "/old was overwritten by a file created after the MDS restart"


def test_mds_kill9_during_creates_keeps_every_acknowledged_file(cluster, workdir):
    cluster.loom("mkdir", "/load")
    cluster.loom("setstripe", "-c", "2", "-S", "64k", "/load")
    acked = {}             # path -> sha256, recorded only after `loom put` returned 0
    failed = []
    hung = []
    stop = threading.Event()
    lock = threading.Lock()

    def loader(t):
        # Several loaders at once, so that the MDS has creates of several clients in flight
        # (and in one group commit) when it is killed.
        i = 0
        while not stop.is_set():
            src = os.path.join(workdir, "s%d_%d" % (t, i))
            digest = make_random_file(src, 1000 + (i * 7919 + t * 104729) % (200 * KiB))
            path = "/load/f%d_%d" % (t, i)
            i += 1
            try:
                p = cluster.loom("put", src, path, check=False, timeout=60)
            except subprocess.TimeoutExpired:
                hung.append(path)
                continue
            with lock:
                if p.returncode == 0:
                    acked[path] = digest
                else:
                    failed.append((path, p.returncode, p.stderr.strip()))
            os.unlink(src)

    threads = [threading.Thread(target=loader, args=(t,), daemon=True) for t in range(NLOADERS)]
    for t in threads:
        t.start()
    try:
        assert wait_until(lambda: len(acked) >= 40, 120), "the loaders did not get going: %r" % failed[:3]
        cluster.kill9("mds")
        # Let the loaders run into the dead MDS for a while (puts fail, or wait for it).
        wait_until(lambda: len(failed) >= 2 * NLOADERS, 10)
        n_before_restart = len(acked)
        cluster.restart()
        assert wait_until(lambda: len(acked) >= n_before_restart + 20, 120), \
            "creates did not succeed again after the MDS restart: %r" % failed[-3:]
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    print("acknowledged %d puts, %d failed (first: %r)" % (len(acked), len(failed), failed[:1]))
    assert not any(t.is_alive() for t in threads), "a loader thread hangs"
    assert not hung, "`loom put` hung (over 60 s) across the MDS restart: %r" % hung

    listed = set(cluster.loom("ls", "/load").stdout.split())
    missing = sorted(p for p in acked if p.rsplit("/", 1)[1] not in listed)
    assert not missing, "acknowledged files lost by an MDS kill -9: %r" % missing
    out = os.path.join(workdir, "out")
    for path, digest in sorted(acked.items()):
        cluster.loom("get", path, out)
        assert sha256_file(out) == digest, "acknowledged file %s has the wrong content after the MDS restart" % path


def test_oss_kill9_fails_reads_on_it_serves_others_and_restart_keeps_data(cluster, workdir):
    wide_src = os.path.join(workdir, "wide")
    safe_src = os.path.join(workdir, "safe")
    wide_data_sum = make_random_file(wide_src, 5 * MiB + 3)
    safe_sum = make_random_file(safe_src, 2 * MiB + 9)
    with open(wide_src, "rb") as f:
        wide_data = f.read()

    cluster.loom("mkdir", "/wide", "/safe")
    cluster.loom("setstripe", "-c", "4", "-S", "1M", "/wide")
    cluster.loom("setstripe", "-c", "2", "-i", "0", "/safe")
    cluster.loom("put", wide_src, "/wide/f")
    cluster.loom("put", safe_src, "/safe/f")
    safe_osts = {idx for idx, _ in parse_any_getstripe(cluster.loom("getstripe", "/safe/f").stdout).objects}
    wide_osts = {idx for idx, _ in parse_any_getstripe(cluster.loom("getstripe", "/wide/f").stdout).objects}
    victim = 3
    assert victim in wide_osts and victim not in safe_osts, (wide_osts, safe_osts)

    cluster.kill9(cluster.oss_name(victim))

    # A read waits for the OSS through the recovery window (shortened here), then fails with EIO.
    cluster.env["LOOM_RECOVERY_SECONDS"] = "3"
    try:
        p = cluster.loom("get", "/wide/f", "-", check=False, text=False)
    finally:
        del cluster.env["LOOM_RECOVERY_SECONDS"]
    assert p.returncode != 0, "reading a file striped on a dead OSS succeeded (%d bytes)" % len(p.stdout)
    assert len(p.stdout) < len(wide_data) and wide_data.startswith(p.stdout), \
        "reading a file striped on a dead OSS returned wrong data"
    err = p.stderr.decode(errors="replace").strip().splitlines()
    assert "OST0003" in "\n".join(err), "no word of which OST is away: %r" % err
    assert err[-1] == "loom get: /wide/f: Input/output error", "unclear error message: %r" % err

    out = os.path.join(workdir, "out")
    cluster.loom("get", "/safe/f", out)
    assert sha256_file(out) == safe_sum, "a file not on the dead OSS read back wrong"
    assert set(cluster.loom("ls", "/").stdout.split()) == {"safe", "wide"}

    cluster.restart()
    cluster.loom("get", "/wide/f", out)
    assert sha256_file(out) == wide_data_sum, "data on the killed OSS changed across its restart"
    cluster.loom("get", "/safe/f", out)
    assert sha256_file(out) == safe_sum


def test_new_files_avoid_an_ost_the_mds_reports_inactive(cluster, workdir):
    victim = 3
    cluster.kill9(cluster.oss_name(victim))
    assert wait_until(lambda: cluster.ost_table()[victim]["state"] & loomwire.TGT_INACTIVE, 60, 0.5), \
        "the MDS never marked the OST of a killed OSS inactive"
    for i in range(8):
        cluster.loom("put", "-", "/n%d" % i, input="file %d" % i)
        layout = parse_any_getstripe(cluster.loom("getstripe", "/n%d" % i).stdout)
        assert victim not in [idx for idx, _ in layout.objects], "new file placed on the inactive OST: %r" % layout
    cluster.loom("setstripe", "-c", "-1", "/wide")
    layout = parse_any_getstripe(cluster.loom("getstripe", "/wide").stdout)
    assert sorted(idx for idx, _ in layout.objects) == [0, 1, 2], "-c -1 with OST%04x inactive: %r" % (victim, layout)
    data = os.urandom(5 * MiB + 1)
    cluster.loom("put", "-", "/wide", input=data, text=False)
    assert cluster.loom("get", "/wide", "-", text=False).stdout == data

    cluster.restart()
    assert wait_until(lambda: not cluster.ost_table()[victim]["state"] & loomwire.TGT_INACTIVE, 60, 0.5)
    cluster.loom("setstripe", "-c", "-1", "/wide4")
    assert cluster.loom("getstripe", "-c", "/wide4").stdout == "4\n"

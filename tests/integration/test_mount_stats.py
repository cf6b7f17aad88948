"""The mount's own counters (issue 22): what a program did through a mount -- writes of known
sizes, O_DIRECT reads, unlinks, a refused rmdir, a lookup of a missing name, a scan of a
directory -- must be what `loom stats --mount` prints (Lustre's llite stats), what `loom
get_param 'llite.*.stats'` prints, and what the mount's /metrics says (-o http=, read with
Prometheus' own parser); `clear` starts them again; and two mounts each count only their own.

Also checked without servers: every FUSE handler of src/fuse/ops_*.c is counted."""

import os
import re
import socket
import subprocess
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from loomutil import LOOM, mount_daemon_pids, second_mount, wait_until

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WRITES = [65536] * 10 + [1000]          # one FUSE write each: O_WRONLY handles are direct I/O
HEAD = re.compile(r"^llite\.(\S+)\.(\w+)=$")
SAMPLES = re.compile(r"^(\w+) +(\d+) samples \[(\w+)\](?: (\d+) (\d+) (\d+))?$")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_llite(text):
    """lctl-style text of llite parameters -> {instance: {param: {line name: value}}}: a stats
    line's value is (count, min, max, sum) or (count,), a statahead line's an int."""
    out, cur = {}, None
    for line in text.splitlines():
        m = HEAD.match(line)
        if m:
            cur = out.setdefault(m.group(1), {}).setdefault(m.group(2), {})
            continue
        assert cur is not None, "a line before any parameter: %r\n%s" % (line, text)
        m = SAMPLES.match(line)
        if m:
            nums = [int(g) for g in m.groups()[3:] if g is not None]
            cur[m.group(1)] = (int(m.group(2)), *nums)
        elif line.split()[0] in ("snapshot_time", "start_time", "elapsed_time"):
            assert line.endswith(" secs.nsecs"), line
        else:
            key, _, val = line.rpartition(": ")
            assert key and val.isdigit(), "not a counter line: %r" % line
            cur[key] = int(val)
    return out


def mount_stats(cluster, mnt):
    """`loom stats --mount MNT` parsed: {param: {name: value}}, and the instance's name."""
    out = cluster.loom("stats", "--mount", mnt).stdout
    got = parse_llite(out)
    assert len(got) == 1, out
    (instance, params), = got.items()
    assert set(params) == {"stats", "statahead_stats", "read_ahead_stats", "cache_stats",
                           "write_behind_stats"}, out
    return instance, params


def instance_of(mnt):
    pids = mount_daemon_pids(mnt)
    assert len(pids) == 1, pids
    return "loom-%016x" % pids[0]


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}   # raises on a bad line
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in fams.values() for s in f.samples}
    return fams, samples


def metric(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0)


def test_every_handler_is_counted():
    """Each function an ops table of src/fuse/ops_*.c installs (but init) opens with
    LM_INTERRUPTIBLE or LM_COUNTED, and LM_OPS (mstats.h) has a row for it: no FUSE request
    goes uncounted."""
    with open(os.path.join(REPO, "src", "fuse", "mstats.h")) as f:
        rows = set(re.findall(r"^\tX\((\w+),", f.read(), re.M))
    assert len(rows) == 37, rows
    seen = set()
    for name in sorted(os.listdir(os.path.join(REPO, "src", "fuse"))):
        if not (name.startswith("ops_") and name.endswith(".c")):
            continue
        with open(os.path.join(REPO, "src", "fuse", name)) as f:
            src = f.read()
        for op, fn in re.findall(r"ops->(\w+) = (lm_\w+);", src):
            if op == "init":
                continue
            body = re.search(r"^static \w+ %s\([^)]*\)\n\{\n(.*?)^\}" % fn, src, re.M | re.S)
            assert body, "%s: no definition of %s" % (name, fn)
            first = [ln.strip() for ln in body.group(1).splitlines() if ln.strip()][:2]
            assert any(ln in ("LM_INTERRUPTIBLE(req);", "LM_COUNTED(req);") for ln in first), \
                "%s: %s does not start by counting its request" % (name, fn)
            assert fn[3:] in rows, "%s: LM_OPS has no row for %s" % (name, fn)
            assert "fuse_reply_err(" not in body.group(1), \
                "%s: %s answers an error without lm_reply_err (not counted)" % (name, fn)
            seen.add(fn[3:])
    assert seen == rows, "rows of LM_OPS no handler uses: %s" % sorted(rows - seen)


def test_mount_counts_what_programs_did(cluster_factory):
    c = cluster_factory(osts=2)
    port = free_port()
    with second_mount(c, opts="http=127.0.0.1:%d" % port) as a, \
            second_mount(c, opts="http=127.0.0.1:0") as b:
        url = "http://127.0.0.1:%d/metrics" % port
        # Writes of known sizes, read back past the page cache.
        os.mkdir(os.path.join(a, "d"))
        path = os.path.join(a, "d", "data")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for i, n in enumerate(WRITES):
            assert os.write(fd, bytes([i]) * n) == n
        os.close(fd)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        got = b""
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            got += chunk
        os.close(fd)
        assert got == b"".join(bytes([i]) * n for i, n in enumerate(WRITES))
        # Names made and removed; a refused rmdir; a lookup of a name that is not there.
        for i in range(5):
            os.close(os.open(os.path.join(a, "d", "gone%d" % i), os.O_WRONLY | os.O_CREAT, 0o644))
        for i in range(5):
            os.unlink(os.path.join(a, "d", "gone%d" % i))
        os.mkdir(os.path.join(a, "full"))
        os.close(os.open(os.path.join(a, "full", "f"), os.O_WRONLY | os.O_CREAT, 0o644))
        try:
            os.rmdir(os.path.join(a, "full"))
            raise AssertionError("rmdir of a directory with a file succeeded")
        except OSError as e:
            assert e.errno == 39, e     # ENOTEMPTY
        os.unlink(os.path.join(a, "full", "f"))
        os.rmdir(os.path.join(a, "full"))
        assert not os.path.exists(os.path.join(a, "no-such-name"))
        # A directory of 50 files, stat'd name by name through the other mount (nothing cached
        # there): after a streak of lookups statahead fetches it whole and answers the rest.
        os.mkdir(os.path.join(a, "many"))
        for i in range(50):
            os.close(os.open(os.path.join(a, "many", "f%02d" % i), os.O_WRONLY | os.O_CREAT, 0o644))
        for i in range(50):
            os.stat(os.path.join(b, "many", "f%02d" % i))
        # B's own work: three files made and removed there.
        for i in range(3):
            os.close(os.open(os.path.join(b, "b%d" % i), os.O_WRONLY | os.O_CREAT, 0o644))
            os.unlink(os.path.join(b, "b%d" % i))

        written = sum(WRITES)
        inst, st = mount_stats(c, a)
        assert inst == instance_of(a)
        ops = st["stats"]
        assert ops["write"][0] == len(WRITES), ops
        assert ops["write_bytes"] == (len(WRITES), 1000, 65536, written), ops
        assert ops["read_bytes"] == (len(WRITES), 1000, 65536, written), ops
        assert ops["read"][0] >= len(WRITES)           # (and the one that found the end)
        assert ops["unlink"][0] == 6, ops
        assert ops["rmdir"][0] == 2, ops
        assert ops["mkdir"][0] == 3, ops
        assert ops["lookup"][0] >= 1 and ops["close"][0] >= 1, ops
        for name, v in ops.items():
            if name not in ("read_bytes", "write_bytes"):
                assert v[1] <= v[2] <= v[3], (name, v)   # min <= max <= sum, in usecs
        assert st["cache_stats"]["page_cache_kept"][0] + st["cache_stats"]["page_cache_dropped"][0] == 1
        wb = st["write_behind_stats"]
        assert wb["writes_behind"][0] + wb["writes_sync"][0] >= 1, wb

        # The mount that scanned: statahead answered, and it did only its own work.
        inst_b, st_b = mount_stats(c, b)
        assert inst_b == instance_of(b) != inst
        sa = st_b["statahead_stats"]
        assert sa["statahead total"] >= 1 and sa["hit_total"] >= 30, sa
        assert sa["hit_total"] + sa["miss_total"] <= 50 - 16, sa
        assert st_b["stats"]["unlink"][0] == 3, st_b["stats"]
        assert "write" not in st_b["stats"] and "rmdir" not in st_b["stats"], st_b["stats"]
        assert st["statahead_stats"]["hit_total"] == 0, st["statahead_stats"]

        # The same through /metrics, with Prometheus' parser.
        fams, m = scrape(url)
        assert fams["loom_client_requests"].type == "counter"
        assert fams["loom_client_request_duration_seconds"].type == "histogram"
        assert metric(m, "loom_client_requests_total", op="unlink") == 6
        assert metric(m, "loom_client_requests_total", op="rmdir") == 2
        assert metric(m, "loom_client_errors_total", op="rmdir") == 1
        assert metric(m, "loom_client_errors_total", op="lookup") == 0
        assert metric(m, "loom_client_requests_total", op="write") == len(WRITES)
        assert metric(m, "loom_client_write_bytes_total") == written
        assert metric(m, "loom_client_read_bytes_total") == written
        assert metric(m, "loom_client_statahead_hits_total") == 0
        # Only the refused rmdir failed: the missing name's ENOENT, and the kernel's own asks
        # (security.capability's ENODATA), answered questions.
        assert sum(v for (n, _), v in m.items() if n == "loom_client_errors_total") == 1, \
            {k: v for k, v in m.items() if k[0] == "loom_client_errors_total" and v}

        # Each request is in its histogram once (the kernel's own requests, a release after a
        # close, may be counted between two of the scrape's lines: scraped again then).
        def histograms_match():
            _, s = scrape(url)
            ops_seen = [dict(ls)["op"] for (n, ls) in s if n == "loom_client_requests_total"]
            return all(s[("loom_client_request_duration_seconds_count", (("op", op),))] ==
                       s[("loom_client_requests_total", (("op", op),))] ==
                       s[("loom_client_request_duration_seconds_bucket", (("le", "+Inf"), ("op", op)))]
                       for op in ops_seen) and len(ops_seen) >= 10
        assert wait_until(histograms_match, 5), scrape(url)[1]

        # Every local mount's, as lctl names them, without the key and without a server.
        env = dict(c.env, LOOM_FS="127.0.0.1:1")
        env.pop("LOOM_KEY_FILE")
        p = subprocess.run([LOOM, "get_param", "llite.*.stats"], env=env, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        every = parse_llite(p.stdout)
        assert every[inst]["stats"]["unlink"][0] >= 6 and every[inst_b]["stats"]["unlink"][0] == 3
        assert sorted(every[inst]) == ["stats"]

        # clear: everything from zero (the reading's own requests aside), the other mount's kept.
        assert c.loom("stats", "--mount", a, "clear").stdout == ""
        _, st = mount_stats(c, a)
        assert "unlink" not in st["stats"] and "write_bytes" not in st["stats"], st["stats"]
        assert st["cache_stats"]["page_cache_dropped"] == (0,)
        _, m = scrape(url)
        assert metric(m, "loom_client_requests_total", op="unlink") == 0
        assert metric(m, "loom_client_write_bytes_total") == 0
        assert sum(v for (n, _), v in m.items() if n == "loom_client_errors_total") == 0
        _, st_b = mount_stats(c, b)
        assert st_b["stats"]["unlink"][0] == 3
        assert st_b["statahead_stats"]["hit_total"] >= 30
        # Port 0: the mount took a free one and said which (its log is its stderr).
        log = os.path.join(c.dir, "log", "mount-%s.log" % os.path.basename(b))
        with open(log) as f:
            at = re.search(r"statistics on (http://127\.0\.0\.1:\d+/metrics)", f.read())
        assert at, "the mount did not say where it serves /metrics (%s)" % log
        _, m_b = scrape(at.group(1))
        assert metric(m_b, "loom_client_requests_total", op="unlink") == 3
        assert metric(m_b, "loom_client_statahead_hits_total") == st_b["statahead_stats"]["hit_total"]


def test_bad_http_address_fails_the_mount(cluster_factory):
    c = cluster_factory(osts=1)
    with pytest.raises(AssertionError, match=r"http=localhost:80x: HOST:PORT, a numeric IPv4 host"):
        with second_mount(c, opts="http=localhost:80x"):
            pass


def test_nostats_counts_no_request(cluster_factory):
    """-o nostats (what bench/stats_cost.py measures against): the mount answers as always and
    counts none of it; a mount beside it counts its own."""
    c = cluster_factory(osts=1)
    with second_mount(c, opts="nostats") as a, second_mount(c) as b:
        for mnt in (a, b):
            with open(os.path.join(mnt, "f-" + os.path.basename(mnt)), "wb") as f:
                f.write(b"x" * 5000)
        assert sorted(os.listdir(a)) == sorted(os.listdir(b))
        _, off = mount_stats(c, a)
        _, on = mount_stats(c, b)
        assert set(off["stats"]) == set(), off["stats"]
        assert on["stats"]["write_bytes"][3] == 5000, on["stats"]

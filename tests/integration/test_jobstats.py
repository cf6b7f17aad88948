"""Job statistics and the servers' counters (issue 22): two jobs, tagged by an environment
variable through the mount and through libloom, each write and read their own files; the bytes
each job moved must be what `loom jobstats`, `loom get_param` and every server's /metrics say,
as Prometheus' own parser reads them."""

import json
import os
import pty
import re
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from loomutil import LOOM

MiB = 1 << 20
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HTTP_AT = re.compile(r"statistics on http://([0-9.]+):(\d+)/metrics")

# One job's work through the mount: write files (fsync each), then read others back whole.
JOB = r"""
import os, sys
root, tag, nwrite, wsize, rdir = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
os.makedirs(os.path.join(root, tag), exist_ok=True)
wrote = 0
for i in range(nwrite):
    data = bytes([(i * 7 + len(tag)) & 0xff]) * wsize
    fd = os.open(os.path.join(root, tag, "w%d" % i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    wrote += wsize
read = 0
for name in sorted(os.listdir(rdir)):
    with open(os.path.join(rdir, name), "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            read += len(b)
print(wrote, read)
"""


def http_addr(cluster, daemon):
    m = HTTP_AT.search(cluster.read_log(daemon))
    assert m, "%s did not say where it serves HTTP:\n%s" % (daemon, cluster.read_log(daemon)[-2000:])
    return "http://%s:%s" % m.groups()


def scrape(url):
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    # Prometheus' parser: a malformed line raises.
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def metric_sum(samples, name, **labels):
    return sum(v for (n, ls), v in samples.items()
               if n == name and all(dict(ls).get(k) == w for k, w in labels.items()))


def jobstats(cluster):
    """`loom jobstats` as {target: {job_id: entry}}, read with a YAML parser."""
    out = cluster.loom("jobstats").stdout
    blocks = re.split(r"^(\S+)\.job_stats=\n", out, flags=re.M)
    assert blocks[0] == "", out
    res = {}
    for target, body in zip(blocks[1::2], blocks[2::2]):
        doc = yaml.safe_load(body)
        res[target] = {str(e["job_id"]): e for e in (doc["job_stats"] or [])}
    return res


def job_bytes(stats, job, what):
    return sum(t[job][what]["sum"] for t in stats.values() if job in t)


@pytest.fixture
def stats_cluster(cluster_factory):
    c = cluster_factory(osts=2, start=False)
    for conf in ("mds.conf", "oss.conf"):
        with open(os.path.join(c.dir, conf), "w") as f:
            f.write("http = 127.0.0.1:0\n")
    c.up()
    return c


def run_job(cluster, root, tag, nwrite, wsize, rdir, env_var="LOOM_TEST_JOB"):
    env = dict(cluster.env, **{env_var: tag})
    p = subprocess.run([sys.executable, "-c", JOB, root, tag, str(nwrite), str(wsize), rdir],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    wrote, read = map(int, p.stdout.split())
    return wrote, read


def test_two_jobs_bytes_match_in_jobstats_and_metrics(stats_cluster, tmp_path):
    c = stats_cluster
    mnt = os.path.join(c.dir, "mnt")
    c.cluster_cmd("up", "--osts", "2", "--mount", mnt, "-o", "jobid_var=LOOM_TEST_JOB")
    # Files for the jobs to read, put in by another job (libloom's: the loom tool).
    for tag, n, size in (("alpha", 3, 3 * MiB + 12345), ("beta", 2, 5 * MiB + 7)):
        src = tmp_path / ("in-" + tag)
        src.write_bytes(os.urandom(size))
        c.loom("mkdir", "-p", "/in-%s" % tag)
        for i in range(n):
            c.loom("put", str(src), "/in-%s/f%d" % (tag, i))
    c.loom("jobstats", "clear")
    assert not any(jobstats(c).values())   # nothing left after clear

    a = run_job(c, os.path.join(mnt, "out"), "alpha", 4, 2 * MiB + 100, os.path.join(mnt, "in-alpha"))
    b = run_job(c, os.path.join(mnt, "out"), "beta", 2, 6 * MiB + 1, os.path.join(mnt, "in-beta"))
    assert a == (4 * (2 * MiB + 100), 3 * (3 * MiB + 12345))
    assert b == (2 * (6 * MiB + 1), 2 * (5 * MiB + 7))

    js = jobstats(c)
    assert set(js) == {"mdt.loom-MDT0000", "ost.loom-OST0000", "ost.loom-OST0001"}, js.keys()
    for job, (wrote, read) in (("alpha", a), ("beta", b)):
        assert job_bytes(js, job, "write_bytes") == wrote, (job, js)
        assert job_bytes(js, job, "read_bytes") == read, (job, js)
    # Each job's metadata operations were counted to it on the MDT.
    mdt = js["mdt.loom-MDT0000"]
    for job, files in (("alpha", 4), ("beta", 2)):
        assert mdt[job]["create"]["samples"] >= files, mdt[job]

    # The same figures on every server's /metrics, summed over the servers.
    servers = ["mds", "oss0", "oss1"]
    scraped = [scrape(http_addr(c, d)) for d in servers]
    for job, (wrote, read) in (("alpha", a), ("beta", b)):
        assert sum(metric_sum(s, "loom_job_write_bytes_total", job=job) for s in scraped) == wrote
        assert sum(metric_sum(s, "loom_job_read_bytes_total", job=job) for s in scraped) == read
    # Per OST: what the OSTs were sent and read, in all (the two jobs and the loom tool's puts).
    osts = scraped[1:]
    ost_written = sum(metric_sum(s, "loom_ost_write_bytes_total") for s in osts)
    ost_read = sum(metric_sum(s, "loom_ost_read_bytes_total") for s in osts)
    mdt_written = metric_sum(scraped[0], "loom_mdt_write_bytes_total")
    puts = 3 * (3 * MiB + 12345) + 2 * (5 * MiB + 7)
    assert ost_written + mdt_written == a[0] + b[0] + puts
    assert ost_read + metric_sum(scraped[0], "loom_mdt_read_bytes_total") == a[1] + b[1]
    # Latency histograms: every answered request is in one bucket; +Inf holds them all.
    for s in scraped:
        for (n, ls), v in s.items():
            if n == "loom_rpc_duration_seconds_count":
                op = dict(ls)["op"]
                assert s[("loom_rpc_duration_seconds_bucket", tuple(sorted({"op": op, "le": "+Inf"}.items())))] == v
                assert s[("loom_rpc_requests_total", (("op", op),))] >= v
    # Every series the Grafana dashboard in the repository asks for is served.
    with open(os.path.join(REPO, "docs", "grafana", "loom.json")) as f:
        dash = json.load(f)
    asked = set(re.findall(r"\bloom_[a-z_]+", " ".join(t["expr"] for p in dash["panels"] for t in p["targets"])))
    served = {n for s in scraped for (n, _) in s}
    assert asked and asked <= served, sorted(asked - served)
    # The MDS's view of the cluster.
    mds = scraped[0]
    assert mds[("loom_mds_ost_up", (("ost", "OST0000"),))] == 1
    assert mds[("loom_mdt_clients", (("mdt", "MDT0000"), ("state", "connected")))] >= 1
    assert mds[("loom_mdt_recovering", (("mdt", "MDT0000"),))] == 0

    # `clear` of one job forgets that job only.
    c.loom("jobstats", "-j", "alpha", "clear")
    js = jobstats(c)
    assert not any("alpha" in t for t in js.values())
    assert job_bytes(js, "beta", "write_bytes") == b[0]


def test_get_param_and_set_param(stats_cluster):
    c = stats_cluster
    out = c.loom("get_param", "ost.*.kbytestotal").stdout.splitlines()
    assert [l.split("=")[0] for l in out] == ["ost.loom-OST0000.kbytestotal", "ost.loom-OST0001.kbytestotal"]
    assert all(int(l.split("=")[1]) > 0 for l in out)
    assert c.loom("get_param", "-n", "mdt.*.recovery_status").stdout == "status: INACTIVE\n"
    assert c.loom("get_param", "-n", "*.job_cleanup_interval").stdout == "600\n600\n600\n"
    assert c.loom("set_param", "*.job_cleanup_interval=300").stdout == "*.job_cleanup_interval=300\n"
    assert c.loom("get_param", "-n", "*.job_cleanup_interval").stdout == "300\n300\n300\n"
    # Bad names, values, read-only parameters: errors, and nothing changed.
    p = c.loom("get_param", "ost.*.nosuch", check=False)
    assert p.returncode == 1 and "ost.*.nosuch: no such parameter" in p.stderr
    p = c.loom("set_param", "*.job_cleanup_interval=-5", check=False)
    assert p.returncode == 1 and "does not take that value" in p.stderr
    p = c.loom("set_param", "ost.*.kbytesfree=5", check=False)
    assert p.returncode == 1 and "cannot be set" in p.stderr
    assert c.loom("get_param", "-n", "*.job_cleanup_interval").stdout == "300\n300\n300\n"
    # Over HTTP, the same text.
    url = http_addr(c, "oss1") + "/params?name=ost.*.uuid"
    with urllib.request.urlopen(url, timeout=10) as r:
        assert re.fullmatch(r"ost\.loom-OST0001\.uuid=\S+\n", r.read().decode())
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(http_addr(c, "mds") + "/params?name=nosuch", timeout=10)
    assert e.value.code == 404


def test_settings_change_at_run_time(stats_cluster, tmp_path):
    """The MDS's commit_ms and resync_rate and each OST's scrub_rate are set at run time, as lctl
    set_param sets Lustre's; a scrub that runs takes its OST's new rate at once."""
    c = stats_cluster
    get = lambda name: c.loom("get_param", "-n", name).stdout
    assert get("mdt.*.commit_ms") == "5\n" and get("mdt.*.resync_rate") == "256\n"
    assert get("ost.*.scrub_rate") == "128\n128\n"
    assert c.loom("set_param", "mdt.*.commit_ms=0").stdout == "mdt.*.commit_ms=0\n"
    c.loom("set_param", "mdt.*.resync_rate=64")
    assert get("mdt.*.commit_ms") == "0\n" and get("mdt.*.resync_rate") == "64\n"
    assert "commit_ms set to 0 ms" in c.read_log("mds")
    for bad in ("mdt.*.commit_ms=60001", "mdt.*.resync_rate=-1", "ost.*.scrub_rate=x",
                "ost.*.scrub_rate=1000001"):
        p = c.loom("set_param", bad, check=False)
        assert p.returncode == 1 and "does not take that value" in p.stderr, (bad, p.stderr)
    assert get("mdt.*.commit_ms") == "0\n" and get("ost.*.scrub_rate") == "128\n128\n"
    # Changes still answer and last with commits at every batch.
    mnt = c.mount()
    with open(os.path.join(mnt, "after"), "wb") as f:
        f.write(b"x" * 1000)
    # A scrub at 1 MiB/s over a 40 MiB object, then the limit lifted while it runs: it ends in
    # far less than the 40 s the old rate needed (a bound no load can make it cross the other way).
    c.loom("setstripe", "-E", "-1", "-c", "1", "-i", "0", "/big")
    with open(os.path.join(mnt, "big"), "wb") as f:
        f.write(os.urandom(40 * MiB))
        f.flush()
        os.fsync(f.fileno())
    c.loom("set_param", "ost.loom-OST0000.scrub_rate=1")
    assert get("ost.*.scrub_rate") == "1\n128\n"
    p = c.loom("scrub", "0")
    assert re.match(r"^OST0000: running for \d+s: ", p.stdout), p.stdout
    assert "scrub started (at most 1 MiB/s)" in c.read_log("oss0")
    c.loom("set_param", "ost.*.scrub_rate=0")
    p = c.loom("scrub", "--wait", "0", timeout=60)
    m = re.match(r"^OST0000: done in (\d+)s: 1 object, 40\.0M ", p.stdout)
    assert m and int(m.group(1)) < 30, p.stdout


def test_loom_top_through_a_terminal(stats_cluster):
    """`loom top` on a pseudo-terminal, while a tagged job writes: one line a second, the job and
    the targets it writes to among the busiest."""
    c = stats_cluster
    mnt = os.path.join(c.dir, "mnt")
    c.cluster_cmd("up", "--osts", "2", "--mount", mnt, "-o", "jobid_var=LOOM_TEST_JOB")
    c.loom("setstripe", "-c", "-1", "/")
    writer = subprocess.Popen(
        [sys.executable, "-c", "import os, sys, time\n"
         "end = time.time() + 30\n"
         "while time.time() < end and not os.path.exists(sys.argv[2]):\n"
         "    with open(sys.argv[1], 'wb') as f:\n"
         "        f.write(os.urandom(4 << 20)); f.flush(); os.fsync(f.fileno())\n",
         os.path.join(mnt, "busy"), os.path.join(c.dir, "stop-writer")],
        env=dict(c.env, LOOM_TEST_JOB="gamma"))
    try:
        master, slave = pty.openpty()
        env = dict(c.env, LOOM_FS=c.addr)
        top = subprocess.Popen([LOOM, "top", "-n", "4", "-i", "1"], stdin=slave, stdout=slave,
                               stderr=slave, env=env, close_fds=True)
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break   # EIO: the terminal's other side closed
            if not chunk:
                break
            out += chunk
        assert top.wait(timeout=60) == 0, out
        os.close(master)
    finally:
        open(os.path.join(c.dir, "stop-writer"), "w").close()
        writer.wait(timeout=60)
    lines = out.decode().replace("\r", "").splitlines()
    assert lines[0].split()[:5] == ["time", "ops/s", "read", "MiB/s", "write"], lines
    rows = [l for l in lines[1:] if re.match(r"\d\d:\d\d:\d\d ", l)]
    assert len(rows) == 4, lines
    busy = [l for l in rows if re.search(r"\bgamma (\d+\.\d)", l) and float(re.search(r"\bgamma (\d+\.\d)", l).group(1)) > 0]
    assert busy, lines
    assert any(re.search(r"OST000[01] \d+\.\d", l) for l in busy), lines
    for l in rows:
        f = l.split()
        assert float(f[1]) >= 0 and float(f[2]) >= 0 and float(f[3]) >= 0, l

"""`loom dashboard` (issue 22), in a real browser: headless Chromium loads the page while two tagged
jobs write through the mount, and what the page's scripts put in the DOM must be the running
cluster's: charts of non-zero figures, both jobs with their rates, each job's bytes equal to what
it read and wrote (and to `loom jobstats` and /api/status); then an OSS dies, and the page shows
its OST as down, the jobs' totals unchanged."""

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser

import pytest
import yaml

from loomutil import LOOM, wait_until

MiB = 1 << 20
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(not CHROMIUM, reason="needs Debian's chromium (scripts/deps.sh test)")

# One job: puts files into root/tag until the stop file appears, each fsync'd, then reads back
# the files of rdir (put there by another client: none is in this mount's cache) and says how
# many bytes it wrote and read.
JOB = r"""
import os, sys, time
root, tag, wsize, rdir, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
os.makedirs(os.path.join(root, tag), exist_ok=True)
wrote, i, end = 0, 0, time.time() + 60
while time.time() < end and not os.path.exists(stop):
    fd = os.open(os.path.join(root, tag, "w%d" % i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, bytes([(i * 7 + len(tag)) & 0xff]) * wsize)
    os.fsync(fd)
    os.close(fd)
    wrote += wsize
    i += 1
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


class Dom(HTMLParser):
    """The elements of a page that carry an id or a data-target / data-job, with their attributes,
    their text (all of it, nested elements' included) and, for a table's row, its cells."""

    VOID = {"meta", "link", "br", "img", "input", "hr", "canvas"}

    def __init__(self, html):
        super().__init__()
        self.open = []
        self.found = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        e = {"tag": tag, "attrs": dict(attrs), "text": "", "cells": []}
        if tag in ("td", "th"):
            row = next((o for o in reversed(self.open) if o["tag"] == "tr"), None)
            if row:
                row["cells"].append(e)
        self.open.append(e)
        a = e["attrs"]
        if "id" in a or "data-target" in a or "data-job" in a or tag == "body":
            self.found.append(e)

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        while self.open:
            if self.open.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for e in self.open:
            e["text"] += data

    def by_id(self, i):
        return next(e for e in self.found if e["attrs"].get("id") == i)

    def rows(self, key):
        return {e["attrs"]["data-" + key]: e for e in self.found if "data-" + key in e["attrs"]}


def chromium(tmp_path, *args):
    """Runs headless Chromium (a profile of its own) and returns its stdout."""
    profile = tmp_path / "chromium-profile"
    p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--no-first-run", "--user-data-dir=%s" % profile] + list(args),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def load_page(tmp_path, url):
    """The DOM after the page's scripts ran and refreshed a few times (virtual time: no waiting)."""
    html = chromium(tmp_path, "--virtual-time-budget=3000", "--window-size=1280,1000", "--dump-dom", url)
    dom = Dom(html)
    body = next(e for e in dom.found if e["tag"] == "body")
    assert body["attrs"].get("data-loaded") == "1", html[:3000]
    assert int(body["attrs"]["data-updates"]) >= 1
    assert dom.by_id("error")["attrs"].get("hidden") is not None, dom.by_id("error")["text"]
    return dom


def api(url):
    with urllib.request.urlopen(url + "api/status", timeout=10) as r:
        assert r.status == 200 and r.headers["Content-Type"] == "application/json"
        return json.loads(r.read())


def api_job(status, job):
    return next((j for j in status["jobs"] if j["id"] == job), None)


def jobstats_bytes(cluster, job):
    """(read, written) of job in `loom jobstats`, summed over the targets (read with YAML)."""
    out = cluster.loom("jobstats").stdout
    blocks = re.split(r"^(\S+)\.job_stats=\n", out, flags=re.M)
    rd = wr = 0
    for body in blocks[2::2]:
        for e in yaml.safe_load(body)["job_stats"] or []:
            if str(e["job_id"]) == job:
                rd += e["read_bytes"]["sum"]
                wr += e["write_bytes"]["sum"]
    return rd, wr


def fmt_bytes(n):
    """As the page's fmtBytes."""
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    i, v = 0, float(n)
    while v >= 1024 and i < len(units) - 1:
        v /= 1024
        i += 1
    return ("%d" % n if i == 0 else "%.1f" % v) + " " + units[i]


def start_dashboard(cluster):
    env = dict(cluster.env, LOOM_FS=cluster.addr)
    p = subprocess.Popen([LOOM, "dashboard", "--http", "127.0.0.1:0", "-i", "0.5"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready, _, _ = select.select([p.stdout], [], [], 30)
    line = p.stdout.readline() if ready else ""
    m = re.fullmatch(r"dashboard on (http://127\.0\.0\.1:\d+/)\n", line)
    if not m:
        p.kill()
        raise AssertionError("loom dashboard said %r; stderr:\n%s" % (line, p.communicate(timeout=10)[1]))
    return p, m.group(1)


def test_dashboard_in_a_browser(cluster_factory, tmp_path):
    c = cluster_factory(osts=2)
    mnt = os.path.join(c.dir, "mnt")
    c.cluster_cmd("up", "--osts", "2", "--mount", mnt, "-o", "jobid_var=LOOM_TEST_JOB")
    c.loom("setstripe", "-c", "-1", "/")   # every file on both OSTs: both show traffic
    inputs = {"alpha": (2, 1 * MiB + 4321), "beta": (1, 3 * MiB + 5)}
    for tag, (n, size) in inputs.items():
        src = tmp_path / ("in-" + tag)
        src.write_bytes(os.urandom(size))
        c.loom("mkdir", "-p", "/in-" + tag)
        for i in range(n):
            c.loom("put", str(src), "/in-%s/f%d" % (tag, i))

    dash, url = start_dashboard(c)
    stop = os.path.join(c.dir, "stop-jobs")
    jobs = {}
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.headers["Content-Type"].startswith("text/html") and b'src="app.js"' in r.read()
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url + "nosuch", timeout=10)
        assert e.value.code == 404

        for tag, wsize in (("alpha", MiB + 100), ("beta", 2 * MiB + 7)):
            jobs[tag] = subprocess.Popen(
                [sys.executable, "-c", JOB, os.path.join(mnt, "out"), tag, str(wsize),
                 os.path.join(mnt, "in-" + tag), stop],
                env=dict(c.env, LOOM_TEST_JOB=tag), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        # While both write: the API has seen both, then the page draws it.
        def both_writing():
            s = api(url)
            return all((api_job(s, t) or {}).get("write_bytes_minute", 0) > 0 for t in jobs) and \
                max(v or 0 for v in s["series"]["write_Bps"]) > 0
        assert wait_until(both_writing, 30), api(url)
        dom = load_page(tmp_path, url)
        thr = dom.by_id("chart-throughput")["attrs"]
        assert int(thr["data-points"]) >= 2, thr
        assert float(thr["data-max-write"]) > 0, thr
        assert float(dom.by_id("chart-ops")["attrs"]["data-max-ops"]) > 0
        lat = dom.by_id("chart-latency")["attrs"]
        assert int(lat["data-points"]) >= 2 and float(lat["data-max-ost"]) > 0 and float(lat["data-max-mdt"]) > 0, lat
        assert re.search(r"write \d+\.\d", dom.by_id("legend-throughput")["text"]), dom.by_id("legend-throughput")
        rows = dom.rows("job")
        for tag in jobs:
            assert tag in rows, rows.keys()
            a = rows[tag]["attrs"]
            assert int(a["data-minute-write-bytes"]) > 0, a
            # Its name, read and write MiB/s, requests/s, then bytes (the last minute's, in all).
            cells = [x["text"].strip() for x in rows[tag]["cells"]]
            assert cells[0] == tag and all(re.fullmatch(r"\d+\.\d", x) for x in cells[1:3]), cells
            assert re.fullmatch(r"\d+", cells[3]) and all(re.fullmatch(r"[\d.]+ [KMG]?i?B", x) for x in cells[4:]), cells
        targets = dom.rows("target")
        assert list(targets) == ["MDT0000", "OST0000", "OST0001"], targets.keys()
        for t in targets.values():
            assert t["attrs"]["data-state"] == "up" and int(t["attrs"]["data-size"]) > 0, t
        assert dom.by_id("recovery")["attrs"]["data-status"] == "INACTIVE"
    finally:
        open(stop, "w").close()
        done = {t: p.communicate(timeout=120) for t, p in jobs.items()}
    for tag, p in jobs.items():
        assert p.returncode == 0, done[tag][1]
    moved = {t: tuple(map(int, done[t][0].split())) for t in jobs}   # (wrote, read)
    for tag, (n, size) in inputs.items():
        assert moved[tag][1] == n * size and moved[tag][0] > 0

    try:
        # Each job's bytes: what it wrote and read = the API's = `loom jobstats`' = the page's.
        def settled():
            s = api(url)
            return all((api_job(s, t) or {}).get("write_bytes") == moved[t][0] and
                       api_job(s, t)["read_bytes"] == moved[t][1] for t in jobs)
        assert wait_until(settled, 20), (moved, api(url)["jobs"])
        for tag in jobs:
            assert jobstats_bytes(c, tag) == (moved[tag][1], moved[tag][0])
        dom = load_page(tmp_path, url)
        rows = dom.rows("job")
        for tag in jobs:
            a = rows[tag]["attrs"]
            assert (int(a["data-write-bytes"]), int(a["data-read-bytes"])) == moved[tag], a
            cells = [x["text"].strip() for x in rows[tag]["cells"]]
            assert cells[6:] == [fmt_bytes(moved[tag][1]), fmt_bytes(moved[tag][0])], cells
            assert [x["attrs"]["title"] for x in rows[tag]["cells"][6:]] == ["%d bytes" % moved[tag][1],
                                                                               "%d bytes" % moved[tag][0]]

        # An OSS dies: once the MDS marks its OST inactive (as `loom df` shows), the page says DOWN.
        victim = c.oss_name(1)
        c.kill9(victim)
        assert wait_until(lambda: re.search(r"OST0001\s*: inactive device", c.loom("df").stdout), 30), \
            c.loom("df").stdout

        def down_in_api():
            t = {x["name"]: x for x in api(url)["targets"]}
            return t["OST0001"]["state"] == "down" and t["OST0001"]["reason"] == "inactive"
        assert wait_until(down_in_api, 10), api(url)["targets"]
        dom = load_page(tmp_path, url)
        targets = dom.rows("target")
        assert targets["OST0001"]["attrs"]["data-state"] == "down", targets["OST0001"]
        assert "DOWN" in targets["OST0001"]["text"]
        assert targets["OST0000"]["attrs"]["data-state"] == "up" and targets["MDT0000"]["attrs"]["data-state"] == "up"
        # The jobs' totals keep the dead OST's share: their bytes were moved all the same.
        rows = dom.rows("job")
        for tag in jobs:
            assert (int(rows[tag]["attrs"]["data-write-bytes"]), int(rows[tag]["attrs"]["data-read-bytes"])) == moved[tag]

        # A screenshot renders (docs/dashboard.png was made so, with LOOM_DASHBOARD_SCREENSHOT).
        shot = tmp_path / "dashboard.png"
        chromium(tmp_path, "--virtual-time-budget=3000", "--window-size=1280,1150",
                 "--hide-scrollbars", "--screenshot=%s" % shot, url)
        with open(shot, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        assert shot.stat().st_size > 10000
        if os.environ.get("LOOM_DASHBOARD_SCREENSHOT"):
            shutil.copyfile(shot, os.environ["LOOM_DASHBOARD_SCREENSHOT"])
    finally:
        dash.send_signal(signal.SIGTERM)
        out, err = dash.communicate(timeout=30)
    assert dash.returncode == 0, err
    assert "Sanitizer" not in err and "runtime error" not in err, err

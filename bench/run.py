#!/usr/bin/env python3
"""Loom's benchmark suite: the issue's AI workloads on a Loom mount beside a local folder.

Starts a local file system (one MDS and four OSS on 127.0.0.1, mounted through FUSE) under a
temporary directory, and a plain folder beside it on the same disk. Runs every workload on
both (bench/workloads.py: small files, images, checkpoints, model, metadata, mdtest, fio),
dropping the page cache before every read phase, and prints loom/local for each figure beside
the issue's target floor. The metadata workloads (metadata, mdtest) also run on a peer parallel
file system, MooseFS (one master and four chunkservers on 127.0.0.1, bench/moosefs.py), when
its Debian packages are installed, and the table adds loom/moosefs. Writes the figures as JSON
and a chart of the ratios to --out. Stops and removes everything at the end, also on an error
or Ctrl-C.

    python3 bench/run.py [--build build] [--quick] [--only NAME[,NAME]] [--runs N]
                         [--out bench/results] [--keep] [--no-peer]

Needs root (to drop the page cache and mount), fio, python3-matplotlib and the MooseFS packages
(scripts/deps.sh bench). The temporary directory is under $TMPDIR (default /tmp).
"""
import argparse
import dataclasses
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moosefs  # noqa: E402
import workloads  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIDES = ("local", "loom", "moosefs")
# The workloads the issue compares with a peer parallel file system: metadata is where a
# cluster file system pays most against a local disk, so that is where "slow" needs a yardstick.
PEER_WORKLOADS = ("metadata", "mdtest")


# ---- the file system under test ----

def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


class Bench:
    """A temporary directory holding a Loom cluster (mounted on mnt/), a local folder and,
    when asked for, a MooseFS (under moosefs/, mounted on moosefs/mnt)."""

    def __init__(self, build, keep, mount_opts=None):
        self.loom = os.path.join(build, "src", "tools", "loom")
        self.keep = keep
        self.mount_opts = mount_opts            # loom-mount's -o beside its key (e.g. nowsync)
        self.tmp = tempfile.mkdtemp(prefix="loom-bench-")
        self.cdir, self.mnt, self.local = (os.path.join(self.tmp, d) for d in ("cluster", "mnt", "local"))
        self.cold = True                        # every drop of the page cache worked
        self.peer_fs = None                     # the MooseFS, once asked for
        self.peer = None                        # the same, once it is up

    def up(self):
        os.makedirs(self.local)
        p = subprocess.run([self.loom, "cluster", "up", "--dir", self.cdir, "--osts", "4",
                            "--mount", self.mnt] + (["-o", self.mount_opts] if self.mount_opts else []),
                           capture_output=True, text=True, timeout=120)
        if p.returncode:
            raise RuntimeError("loom cluster up failed:\n" + p.stdout + p.stderr)
        os.environ["LOOM_KEY_FILE"] = os.path.join(self.cdir, "fs.key")   # for loom setstripe

    def peer_up(self):
        """Starts the MooseFS beside Loom (same disk, same temporary directory). If it cannot
        start, stops what did, so that nothing idles beside the workloads."""
        self.peer_fs = moosefs.MooseFS(os.path.join(self.tmp, "moosefs"))
        try:
            self.peer_fs.up()
        except Exception:
            self.peer_fs.down()
            raise
        self.peer = self.peer_fs

    def down(self):
        """Unmounts, stops the servers and removes the directory (unless --keep)."""
        peer_unmounted = True
        if self.peer_fs is not None:
            peer_unmounted = self.peer_fs.down()
            if not peer_unmounted:
                print("warning: %s is still mounted" % self.peer_fs.mnt, file=sys.stderr)
        if os.path.exists(self.cdir):
            p = subprocess.run([self.loom, "cluster", "down", "--dir", self.cdir],
                               capture_output=True, text=True, timeout=120)
            if p.returncode:
                print("warning: loom cluster down: " + (p.stdout + p.stderr).strip(), file=sys.stderr)
        if is_mounted(self.mnt):
            subprocess.run(["umount", "-l", self.mnt], timeout=60)
        if is_mounted(self.mnt) or not peer_unmounted:
            if is_mounted(self.mnt):
                print("warning: %s is still mounted" % self.mnt, file=sys.stderr)
            print("warning: leaving %s" % self.tmp, file=sys.stderr)
        elif self.keep:
            shutil.rmtree(self.local, ignore_errors=True)
            print("kept the cluster directory %s (loom cluster up --dir %s --mount %s restarts it)"
                  % (self.cdir, self.cdir, self.mnt))
            if self.peer_fs is not None:
                print("kept MooseFS's directory %s (its configurations and logs)" % self.peer_fs.root)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def setstripe(self, path, count):
        subprocess.run([self.loom, "setstripe", "-c", str(count), path], check=True,
                       capture_output=True, timeout=60)

    def drop_caches(self):
        # syncfs of the file systems at hand (the mounts first: they write into the OSTs and
        # chunk directories on the local disk), not sync(1): another, stale FUSE mount could
        # make that hang.
        mounts = [self.mnt] + ([self.peer.mnt] if self.peer is not None else [])
        subprocess.run(["sync", "-f"] + mounts + [self.local], check=True, timeout=300)
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        except OSError:
            self.cold = False

    def sides(self, name, sizes):
        """The sides workload `name` runs on: MooseFS's only for PEER_WORKLOADS, when it is up."""
        out = [workloads.Side("local", self.local, sizes, self.drop_caches),
               workloads.Side("loom", self.mnt, sizes, self.drop_caches, self.setstripe)]
        if self.peer is not None and name in PEER_WORKLOADS:
            out.append(workloads.Side("moosefs", self.peer.mnt, sizes, self.drop_caches))
        return out


# ---- running ----

def run_all(bench, names, sizes, runs, raw, errors):
    """Runs each workload `runs` times on each side, into raw ({name: {side: [figures]}}) and
    errors as it goes: an interrupted run keeps what it measured."""
    for name in names:
        raw[name] = {side.name: [] for side in bench.sides(name, sizes)}
        for r in range(runs):
            for side in bench.sides(name, sizes):
                print("  %-10s run %d/%d on %-7s ..." % (name, r + 1, runs, side.name), end="", flush=True)
                t0 = time.monotonic()
                try:
                    raw[name][side.name].append(workloads.WORKLOADS[name](side))
                    print(" %.0f s" % (time.monotonic() - t0), flush=True)
                except Exception as e:   # a benchmark reports a failure and goes on
                    print(" failed: %s" % e, flush=True)
                    traceback.print_exc()
                    errors.append({"workload": name, "side": side.name, "run": r + 1, "error": str(e)})


def summarize(raw):
    """One row per metric: the median of the runs on each side, the ratios (loom/local,
    loom/moosefs) and their floors. A side that did not run has None."""
    def ratio(a, b):
        return a / b if a is not None and b else None

    def met(r, floor):
        return None if floor is None or r is None else r >= floor

    rows = []
    for name, by_side in raw.items():
        for m in workloads.METRICS[name]:
            med = {}
            for s in SIDES:
                vals = [run[m.key] for run in by_side.get(s, []) if m.key in run]
                med[s] = statistics.median(vals) if vals else None
            r, rp = ratio(med["loom"], med["local"]), ratio(med["loom"], med["moosefs"])
            rows.append({"workload": name, "key": m.key, "label": m.label, "unit": m.unit,
                         "local": med["local"], "loom": med["loom"], "moosefs": med["moosefs"],
                         "ratio": r, "floor": m.floor, "met": met(r, m.floor),
                         "ratio_moosefs": rp, "floor_moosefs": m.peer_floor,
                         "met_moosefs": met(rp, m.peer_floor)})
    return rows


# ---- output ----

def fmt(v):
    if v is None:
        return "-"
    return "%.0f" % v if abs(v) >= 100 else "%.1f" % v


def fmt_ratio(x):
    return "%.2f" % x if x >= 0.1 else "%.3f" % x


def state(met):
    return "?" if met is None else ("met" if met else "NOT MET")


def target(row):
    """The row's floors: '>=0.40 met' (loom/local), '>=4x mfs NOT MET' (loom/moosefs)."""
    out = []
    if row["floor"] is not None:
        out.append(">=%.2f %s" % (row["floor"], state(row["met"])))
    if row["floor_moosefs"] is not None:
        out.append(">=%gx mfs %s" % (row["floor_moosefs"], state(row["met_moosefs"])))
    return ", ".join(out)


def targets(rows):
    """Every floor of every row, as met (True/False) or None when a side did not run."""
    return [r[k] for r in rows for f, k in (("floor", "met"), ("floor_moosefs", "met_moosefs"))
            if r[f] is not None]


def print_table(rows, title):
    print("\n" + title)
    line = "%-42s %-9s %10s %10s %10s %6s %8s  %s"
    head = line % ("workload", "unit", "local", "loom", "moosefs", "ratio", "loom/mfs",
                   "targets (loom/local, loom/moosefs)")
    print(head)
    print("-" * len(head))
    for r in rows:
        ratio = "-" if r["ratio"] is None else fmt_ratio(r["ratio"])
        ratio_mfs = "-" if r["ratio_moosefs"] is None else fmt_ratio(r["ratio_moosefs"])
        print(line % (r["label"], r["unit"], fmt(r["local"]), fmt(r["loom"]), fmt(r["moosefs"]),
                      ratio, ratio_mfs, target(r)))
    t = targets(rows)
    judged = [m for m in t if m is not None]
    print("%d of %d targets met%s" % (sum(judged), len(judged),
                                      "" if len(judged) == len(t) else
                                      " (%d more not judged: a side did not run)" % (len(t) - len(judged))))


def machine_info():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return {"nproc": len(os.sched_getaffinity(0)), "cpu": cpu, "kernel": platform.release(),
            "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30, 1),
            "python": platform.python_version()}


def git_info():
    def git(*args):
        p = subprocess.run(["git", "-C", ROOT] + list(args), capture_output=True, text=True)
        return p.stdout.strip() if p.returncode == 0 else None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None}


def write_results(path, out):
    """out, with the machine and the commit, as JSON at path (a side bench's results)."""
    out = dict(out, machine=machine_info(), git=git_info())
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print("written: %s" % path)


def build_time(build):
    """When the binaries under test were linked: the build may be older than the git commit."""
    try:
        t = max(os.path.getmtime(os.path.join(build, "src", d, d2)) for d, d2 in
                (("mds", "loom-mds"), ("oss", "loom-oss"), ("fuse", "loom-mount"), ("tools", "loom")))
    except OSError:
        return None
    return datetime.datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def chart_panel(ax, rows, key, floor_key, met_key, xlabel, log=False):
    """Horizontal bars of rows[key], the first row on top, with each floor marked."""
    rows = [r for r in rows if r[key] is not None][::-1]
    colors = ["#9e9e9e" if r[met_key] is None else ("#2e7d32" if r[met_key] else "#c62828") for r in rows]
    y = range(len(rows))
    ax.barh(y, [r[key] for r in rows], color=colors, height=0.6)
    for i, r in enumerate(rows):
        ax.text(max(r[key], r[floor_key] or 0), i, " " + fmt_ratio(r[key]), va="center", fontsize=8)
        if r[floor_key] is not None:
            ax.plot([r[floor_key]] * 2, [i - 0.4, i + 0.4], color="black", linewidth=2)
    ax.axvline(1.0, color="#555555", linestyle="--", linewidth=1)
    ax.set_yticks(list(y))
    ax.set_yticklabels(["%s (%s)" % (r["label"], r["unit"]) for r in rows], fontsize=8)
    top = max([1.0] + [max(r[key], r[floor_key] or 0) for r in rows])
    if log:       # loom/moosefs spans from well under 1 to several times over
        ax.set_xscale("log")
        ax.set_xlim(min([0.5] + [r[key] / 2 for r in rows]), top * 3)
    else:
        ax.set_xlim(0, max(1.15, top * 1.15))
    ax.set_xlabel(xlabel, fontsize=9)


def write_chart(rows, path, title):
    """A panel of loom/local and, when MooseFS ran, one of loom/moosefs. False if there was no
    ratio to chart."""
    panels = [p for p in (
        ([r for r in rows if r["ratio"] is not None], "ratio", "floor", "met",
         "loom / local (black marks: the target floor; green met, red not)", False),
        ([r for r in rows if r["ratio_moosefs"] is not None], "ratio_moosefs", "floor_moosefs", "met_moosefs",
         "loom / moosefs, log scale (black marks: the target floor; green met, red not)", True),
    ) if p[0]]
    if not panels:
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heights = [len(p[0]) for p in panels]
    fig, axes = plt.subplots(len(panels), 1, squeeze=False, gridspec_kw={"height_ratios": heights},
                             figsize=(10, 0.42 * sum(heights) + 1.6 * len(panels)))
    for ax, p in zip(axes[:, 0], panels):
        chart_panel(ax, *p[:5], log=p[5])
    axes[0][0].set_title(textwrap.fill(title, 110), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ---- main ----

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="the Meson build directory")
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--only", help="comma-separated workloads: " + ",".join(workloads.WORKLOADS))
    ap.add_argument("--runs", type=int, default=1, help="runs of each workload; the median is shown")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"),
                    help="where latest.json and latest.png go")
    ap.add_argument("--keep", action="store_true", help="keep the cluster directory (stopped)")
    ap.add_argument("--mount-opts", metavar="OPTS",
                    help="more options for the Loom mount (loom-mount's -o), e.g. nowsync")
    ap.add_argument("--no-peer", action="store_true",
                    help="no MooseFS side for %s" % ",".join(PEER_WORKLOADS))
    a = ap.parse_args()
    a.only = a.only.split(",") if a.only else list(workloads.WORKLOADS)
    unknown = [n for n in a.only if n not in workloads.WORKLOADS]
    if unknown:
        ap.error("unknown workload %s; choose from %s" % (",".join(unknown), ",".join(workloads.WORKLOADS)))
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    return a


def peer_plan(a):
    """Whether the MooseFS side is to run: (True, None) or (False, why not)."""
    if not any(n in PEER_WORKLOADS for n in a.only):
        return False, "no workload of %s selected" % ",".join(PEER_WORKLOADS)
    if a.no_peer:
        return False, "--no-peer"
    miss = moosefs.missing()
    if miss:
        return False, "not installed (%s; scripts/deps.sh bench installs them)" % " ".join(miss)
    return True, None


def on_sigterm(signum, frame):
    raise KeyboardInterrupt


def main():
    a = parse_args()
    sizes = workloads.QUICK if a.quick else workloads.FULL
    if os.geteuid() != 0:
        print("warning: not root: the page cache cannot be dropped (reads are warm)", file=sys.stderr)
    signal.signal(signal.SIGTERM, on_sigterm)
    started = datetime.datetime.now().astimezone()
    t0 = time.monotonic()
    bench = Bench(a.build, a.keep, a.mount_opts)
    raw, errors, interrupted = {}, [], False
    want_peer, why_not = peer_plan(a)
    peer = {"name": "moosefs", "packages": list(moosefs.PACKAGES), "workloads": list(PEER_WORKLOADS),
            "version": None, "ran": False, "why_not": why_not}
    print("loom bench: %s, %d run(s), workloads %s, in %s" %
          ("quick" if a.quick else "full", a.runs, ",".join(a.only), bench.tmp), flush=True)
    if why_not and any(n in PEER_WORKLOADS for n in a.only):
        print("note: no MooseFS side: %s" % why_not, flush=True)
    try:
        bench.up()
        if want_peer:
            try:
                bench.peer_up()
                peer.update(ran=True, version=moosefs.version())
            except Exception as e:          # Loom's figures are still worth having
                print("warning: MooseFS did not start, no moosefs side: %s" % e, file=sys.stderr)
                errors.append({"workload": "-", "side": "moosefs", "run": 0, "error": str(e)})
                peer["why_not"] = "did not start"
        run_all(bench, a.only, sizes, a.runs, raw, errors)
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted; stopping the file system", file=sys.stderr)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)     # let the clean-up finish
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        bench.down()
    wall = time.monotonic() - t0

    rows = summarize(raw)
    title = "Loom (1 MDS, 4 OSS, FUSE mount%s) vs a local folder on the same disk%s: %s run, median of %d%s" % (
        ", -o " + a.mount_opts if a.mount_opts else "",
        " and MooseFS %s (1 master, 4 chunkservers)" % (peer["version"] or "") if peer["ran"] else "",
        "quick" if a.quick else "full", a.runs, "" if bench.cold else " (page cache NOT dropped)")
    print_table(rows, title)
    print("wall time %.0f s" % wall)
    os.makedirs(a.out, exist_ok=True)
    result = {"date": started.isoformat(timespec="seconds"), "git": git_info(), "machine": machine_info(),
              "options": {"quick": a.quick, "runs": a.runs, "only": a.only, "build": a.build,
                          "no_peer": a.no_peer, "mount_opts": a.mount_opts},
              "build_time": build_time(a.build), "peer": peer,
              "sizes": dataclasses.asdict(sizes), "cold": bench.cold, "wall_seconds": round(wall, 1),
              "interrupted": interrupted, "errors": errors, "results": rows, "raw": raw}
    jpath = os.path.join(a.out, "latest.json")
    with open(jpath, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote %s" % jpath)
    if rows:
        try:
            if write_chart(rows, os.path.join(a.out, "latest.png"), title):
                print("wrote %s" % os.path.join(a.out, "latest.png"))
        except ImportError:
            print("warning: no matplotlib (scripts/deps.sh bench): no chart", file=sys.stderr)
    return 130 if interrupted else (1 if errors else 0)


if __name__ == "__main__":
    sys.exit(main())

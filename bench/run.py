#!/usr/bin/env python3
"""Loom's benchmark suite: the issue's AI workloads on a Loom mount beside a local folder.

Starts a local file system (one MDS and four OSS on 127.0.0.1, mounted through FUSE) under a
temporary directory, and a plain folder beside it on the same disk. Runs every workload on
both (bench/workloads.py: small files, images, checkpoints, model, metadata, fio), dropping
the page cache before every read phase, and prints loom/local for each figure beside the
issue's target floor. Writes the figures as JSON and a chart of the ratios to --out. Stops and
removes everything at the end, also on an error or Ctrl-C.

    python3 bench/run.py [--build build] [--quick] [--only NAME[,NAME]] [--runs N]
                         [--out bench/results] [--keep]

Needs root (to drop the page cache and mount), fio and python3-matplotlib (scripts/deps.sh
bench). The temporary directory is under $TMPDIR (default /tmp).
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
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- the file system under test ----

def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


class Bench:
    """A temporary directory holding a Loom cluster (mounted on mnt/) and a local folder."""

    def __init__(self, build, keep):
        self.loom = os.path.join(build, "src", "tools", "loom")
        self.keep = keep
        self.tmp = tempfile.mkdtemp(prefix="loom-bench-")
        self.cdir, self.mnt, self.local = (os.path.join(self.tmp, d) for d in ("cluster", "mnt", "local"))
        self.cold = True                        # every drop of the page cache worked

    def up(self):
        os.makedirs(self.local)
        p = subprocess.run([self.loom, "cluster", "up", "--dir", self.cdir, "--osts", "4",
                            "--mount", self.mnt], capture_output=True, text=True, timeout=120)
        if p.returncode:
            raise RuntimeError("loom cluster up failed:\n" + p.stdout + p.stderr)
        os.environ["LOOM_KEY_FILE"] = os.path.join(self.cdir, "fs.key")   # for loom setstripe

    def down(self):
        """Unmounts, stops the servers and removes the directory (unless --keep)."""
        if os.path.exists(self.cdir):
            p = subprocess.run([self.loom, "cluster", "down", "--dir", self.cdir],
                               capture_output=True, text=True, timeout=120)
            if p.returncode:
                print("warning: loom cluster down: " + (p.stdout + p.stderr).strip(), file=sys.stderr)
        if is_mounted(self.mnt):
            subprocess.run(["umount", "-l", self.mnt], timeout=60)
        if is_mounted(self.mnt):
            print("warning: %s is still mounted; leaving %s" % (self.mnt, self.tmp), file=sys.stderr)
        elif self.keep:
            shutil.rmtree(self.local, ignore_errors=True)
            print("kept the cluster directory %s (loom cluster up --dir %s --mount %s restarts it)"
                  % (self.cdir, self.cdir, self.mnt))
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def setstripe(self, path, count):
        subprocess.run([self.loom, "setstripe", "-c", str(count), path], check=True,
                       capture_output=True, timeout=60)

    def drop_caches(self):
        # syncfs of the two file systems at hand (the mount first: it writes into the OSTs on
        # the local disk), not sync(1): another, stale FUSE mount could make that hang.
        subprocess.run(["sync", "-f", self.mnt, self.local], check=True, timeout=300)
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        except OSError:
            self.cold = False

    def sides(self, sizes):
        return [workloads.Side("local", self.local, sizes, self.drop_caches),
                workloads.Side("loom", self.mnt, sizes, self.drop_caches, self.setstripe)]


# ---- running ----

def run_all(bench, names, sizes, runs, raw, errors):
    """Runs each workload `runs` times on each side, into raw ({name: {side: [figures]}}) and
    errors as it goes: an interrupted run keeps what it measured."""
    for name in names:
        raw[name] = {"local": [], "loom": []}
        for r in range(runs):
            for side in bench.sides(sizes):
                print("  %-10s run %d/%d on %-5s ..." % (name, r + 1, runs, side.name), end="", flush=True)
                t0 = time.monotonic()
                try:
                    raw[name][side.name].append(workloads.WORKLOADS[name](side))
                    print(" %.0f s" % (time.monotonic() - t0), flush=True)
                except Exception as e:   # a benchmark reports a failure and goes on
                    print(" failed: %s" % e, flush=True)
                    traceback.print_exc()
                    errors.append({"workload": name, "side": side.name, "run": r + 1, "error": str(e)})


def summarize(raw):
    """One row per metric: the median of the runs on each side, the ratio and the floor."""
    rows = []
    for name, by_side in raw.items():
        for m in workloads.METRICS[name]:
            vals = {s: [run[m.key] for run in by_side[s] if m.key in run] for s in ("local", "loom")}
            med = {s: statistics.median(v) if v else None for s, v in vals.items()}
            ratio = med["loom"] / med["local"] if med["loom"] is not None and med["local"] else None
            rows.append({"workload": name, "key": m.key, "label": m.label, "unit": m.unit,
                         "local": med["local"], "loom": med["loom"], "ratio": ratio,
                         "floor": m.floor,
                         "met": None if m.floor is None or ratio is None else ratio >= m.floor})
    return rows


# ---- output ----

def fmt(v):
    if v is None:
        return "-"
    return "%.0f" % v if abs(v) >= 100 else "%.1f" % v


def fmt_ratio(x):
    return "%.2f" % x if x >= 0.1 else "%.3f" % x


def target(row):
    if row["floor"] is None:
        return ""
    state = "?" if row["met"] is None else ("met" if row["met"] else "NOT MET")
    return ">=%.2f %s" % (row["floor"], state)


def print_table(rows, title):
    print("\n" + title)
    head = "%-42s %-9s %10s %10s %6s  %s" % ("workload", "unit", "local", "loom", "ratio", "target (loom/local)")
    print(head)
    print("-" * len(head))
    for r in rows:
        ratio = "-" if r["ratio"] is None else fmt_ratio(r["ratio"])
        print("%-42s %-9s %10s %10s %6s  %s" % (r["label"], r["unit"], fmt(r["local"]), fmt(r["loom"]),
                                                ratio, target(r)))
    floors = [r for r in rows if r["floor"] is not None]
    print("%d of %d targets met" % (sum(1 for r in floors if r["met"]), len(floors)))


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


def build_time(build):
    """When the binaries under test were linked: the build may be older than the git commit."""
    try:
        t = max(os.path.getmtime(os.path.join(build, "src", d, d2)) for d, d2 in
                (("mds", "loom-mds"), ("oss", "loom-oss"), ("fuse", "loom-mount"), ("tools", "loom")))
    except OSError:
        return None
    return datetime.datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def write_chart(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r["ratio"] is not None][::-1]   # first row on top
    fig, ax = plt.subplots(figsize=(10, 0.42 * len(rows) + 1.6))
    colors = ["#9e9e9e" if r["met"] is None else ("#2e7d32" if r["met"] else "#c62828") for r in rows]
    y = range(len(rows))
    ax.barh(y, [r["ratio"] for r in rows], color=colors, height=0.6)
    for i, r in enumerate(rows):
        ax.text(max(r["ratio"], r["floor"] or 0), i, " " + fmt_ratio(r["ratio"]), va="center", fontsize=8)
        if r["floor"] is not None:
            ax.plot([r["floor"]] * 2, [i - 0.4, i + 0.4], color="black", linewidth=2)
    ax.axvline(1.0, color="#555555", linestyle="--", linewidth=1)
    ax.set_yticks(list(y))
    ax.set_yticklabels(["%s (%s)" % (r["label"], r["unit"]) for r in rows], fontsize=8)
    ax.set_xlim(0, max([1.15] + [r["ratio"] * 1.15 for r in rows]))
    ax.set_xlabel("loom / local (black marks: the target floor; green met, red not)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
    a = ap.parse_args()
    a.only = a.only.split(",") if a.only else list(workloads.WORKLOADS)
    unknown = [n for n in a.only if n not in workloads.WORKLOADS]
    if unknown:
        ap.error("unknown workload %s; choose from %s" % (",".join(unknown), ",".join(workloads.WORKLOADS)))
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    return a


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
    bench = Bench(a.build, a.keep)
    raw, errors, interrupted = {}, [], False
    print("loom bench: %s, %d run(s), workloads %s, in %s" %
          ("quick" if a.quick else "full", a.runs, ",".join(a.only), bench.tmp), flush=True)
    try:
        bench.up()
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
    title = "Loom (1 MDS, 4 OSS, FUSE mount) vs a local folder on the same disk: %s run, median of %d%s" % (
        "quick" if a.quick else "full", a.runs, "" if bench.cold else " (page cache NOT dropped)")
    print_table(rows, title)
    print("wall time %.0f s" % wall)
    os.makedirs(a.out, exist_ok=True)
    result = {"date": started.isoformat(timespec="seconds"), "git": git_info(), "machine": machine_info(),
              "options": {"quick": a.quick, "runs": a.runs, "only": a.only, "build": a.build},
              "build_time": build_time(a.build),
              "sizes": dataclasses.asdict(sizes), "cold": bench.cold, "wall_seconds": round(wall, 1),
              "interrupted": interrupted, "errors": errors, "results": rows, "raw": raw}
    jpath = os.path.join(a.out, "latest.json")
    with open(jpath, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote %s" % jpath)
    if rows:
        try:
            write_chart(rows, os.path.join(a.out, "latest.png"), title)
            print("wrote %s" % os.path.join(a.out, "latest.png"))
        except ImportError:
            print("warning: no matplotlib (scripts/deps.sh bench): no chart", file=sys.stderr)
    return 130 if interrupted else (1 if errors else 0)


if __name__ == "__main__":
    sys.exit(main())

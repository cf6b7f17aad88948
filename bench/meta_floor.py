#!/usr/bin/env python3
"""What one metadata operation costs through FUSE on this machine, and where the floor is.

Starts a Loom cluster (bench/run.py's Bench) and, on the mount and on a local folder beside it,
times per operation, single-threaded: create (open O_CREAT|O_EXCL + close), cold stat (page
cache dropped: every name is a FUSE LOOKUP, which loom-mount answers from its statahead
listing, without a server), and unlink. Then the cold stat again with this process and every
loom-mount thread pinned to one CPU: the same work without a wake-up crossing CPUs.

The cold stat is therefore the cost of one FUSE round trip with a daemon that answers from
memory: no metadata operation that must ask loom-mount can be cheaper. docs/performance.md
compares it with the floors of the issue.

    python3 bench/meta_floor.py [--build build] [--files 5000]

Needs root (page cache, mount, taskset).
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402


def per_op_us(fn, names):
    t0 = time.perf_counter()
    for p in names:
        fn(p)
    return (time.perf_counter() - t0) / len(names) * 1e6


def create(p):
    os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))


def cold_stat(names, drop_caches):
    drop_caches()
    time.sleep(0.5)              # let the kernel's FORGETs for the dropped inodes drain first
    return per_op_us(os.stat, names)


def mount_pid(mnt):
    """The loom-mount serving mnt (its command line names the mount point)."""
    mnt = os.path.realpath(mnt)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"loom-mount") and mnt.encode() in argv:
            return int(pid)
    raise RuntimeError("no loom-mount serves " + mnt)


def pinned(pid, cpus):
    subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], check=True, stdout=subprocess.DEVNULL)
    os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})


def side(root, n, drop_caches, pid=None):
    d = os.path.join(root, "meta-floor")
    os.makedirs(d)
    names = [os.path.join(d, "f%06d" % i) for i in range(n)]
    out = {"create": per_op_us(create, names), "stat (cold)": cold_stat(names, drop_caches)}
    if pid:
        all_cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
        try:
            pinned(pid, "0")
            out["stat (cold), one CPU"] = cold_stat(names, drop_caches)
        finally:
            pinned(pid, all_cpus)
    out["unlink"] = per_op_us(os.unlink, names)
    os.rmdir(d)
    return out


def halt_poll():
    try:
        with open("/sys/module/haltpoll/parameters/guest_halt_poll_ns") as f:
            return f.read().strip() + " ns"
    except OSError:
        return "n/a"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(run.ROOT, "build"))
    ap.add_argument("--files", type=int, default=5000)
    a = ap.parse_args()
    b = run.Bench(os.path.abspath(a.build), keep=False)
    try:
        b.up()
        local = side(b.local, a.files, b.drop_caches)
        loom = side(b.mnt, a.files, b.drop_caches, mount_pid(b.mnt))
    finally:
        b.down()
    print("%d files, one thread, %d CPUs, guest halt polling %s" % (a.files, os.cpu_count(), halt_poll()))
    print("%-24s %10s %10s  %s" % ("operation", "local us", "loom us", "local/loom (the issue's ratio)"))
    for k, v in loom.items():
        lv = local.get(k.replace(", one CPU", ""))
        print("%-24s %10.1f %10.1f  %.2f" % (k, lv, v, lv / v))
    floor = loom["stat (cold)"]
    print("\nA FUSE round trip answered from loom-mount's memory costs %.1f us (%.1f us on one CPU):"
          % (floor, loom.get("stat (cold), one CPU", float("nan"))))
    for k in ("create", "stat (cold)", "unlink"):
        print("  %-12s reaches 0.25 of local only at <= %.1f us per operation" % (k, local[k] * 4))


if __name__ == "__main__":
    main()

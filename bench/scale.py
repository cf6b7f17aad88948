#!/usr/bin/env python3
"""Does bandwidth scale with stripes and clients? Loom over a bed of hosts (tests/hosts/).

Every OSS runs on a host of its own whose link is shaped to --rate MiB/s each way (tc tbf), so
the servers cannot hide behind one loopback. Two experiments:

  stripes   one client (its link unshaped) reads a --size MiB file striped over 1, 2, 4 and 8
            OSTs, one per OSS host, with the page cache dropped first. Linear is k x rate.
  clients   1, 2 and 4 client hosts (their links shaped like the servers') read a shared
            dataset of 8 MiB files, each client its own share of the files as a
            DistributedSampler gives them, all at once. Once with the files spread over every
            OSS (the default layout), once with every file on one OSS (what the seeds call
            NFS). Linear is n x rate: each client's own link.

Prints aggregate MiB/s and the fraction of linear; writes DIR/scale.json and DIR/scale.png.

    python3 bench/scale.py [--build build] [--rate 100] [--size 1024] [--files 64] [--out bench/results]

Needs root (namespaces, tc, mounts, dropping the page cache).
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "hosts"))
import loombed  # noqa: E402

MiB = 1 << 20
IMAGE = 8 * MiB


def drop_caches():
    subprocess.run(["sync"], check=True, timeout=300)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def write_file(path, size, block):
    with open(path, "wb") as f:
        left = size
        while left:
            k = min(left, len(block))
            f.write(block[:k])
            left -= k


def read_files(paths, buf):
    n = 0
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while True:
                k = f.readinto(buf)
                if not k:
                    break
                n += k
    return n


def stripes(lb, args, block):
    c = lb.add_client("reader")
    mnt = lb.mount(c)
    rows = []
    for k in (1, 2, 4, 8):
        if k > len(lb.oss):
            break
        d = os.path.join(mnt, "s%d" % k)
        os.mkdir(d)
        lb.loom(c, "setstripe", "-E", "-1", "-c", str(k), "-S", "1M", "/s%d" % k)
        path = os.path.join(d, "big")
        write_file(path, args.size * MiB, block)
        drop_caches()
        t0 = time.perf_counter()
        n = read_files([path], bytearray(8 * MiB))
        dt = time.perf_counter() - t0
        assert n == args.size * MiB, "short read"
        mibs = n / MiB / dt
        rows.append({"stripes": k, "mib_s": mibs, "linear": k * args.rate, "fraction": mibs / (k * args.rate)})
        print("  %d stripe(s): %7.1f MiB/s  (%.0f%% of %d x %d MiB/s)"
              % (k, mibs, 100 * mibs / (k * args.rate), k, args.rate), flush=True)
        os.unlink(path)
    return rows


def clients(lb, args, block, mounts, single):
    """Each of the len(mounts) clients reads its share of the dataset at once."""
    name = "single" if single else "spread"
    d = os.path.join(mounts[0], name)
    if not os.path.isdir(d):
        os.mkdir(d)
        if single:   # every file on OST 0: one server for the whole dataset
            lb.loom(lb.clients[0], "setstripe", "-E", "-1", "-c", "1", "-i", "0", "/" + name)
        for i in range(args.files):
            write_file(os.path.join(d, "img_%05d.jpg" % i), IMAGE, block)
    rows = []
    for n in (1, 2, 4):
        if n > len(mounts):
            break
        drop_caches()
        got = [0] * n

        def reader(r):
            names = ["img_%05d.jpg" % i for i in range(r, args.files, n)]   # DistributedSampler's share
            got[r] = read_files([os.path.join(mounts[r], name, x) for x in names], bytearray(IMAGE))

        threads = [threading.Thread(target=reader, args=(r,)) for r in range(n)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        dt = time.perf_counter() - t0
        assert sum(got) == args.files * IMAGE, "short read"
        mibs = sum(got) / MiB / dt
        rows.append({"clients": n, "layout": name, "mib_s": mibs, "linear": n * args.rate,
                     "fraction": mibs / (n * args.rate)})
        print("  %-6s %d client(s): %7.1f MiB/s  (%.0f%% of %d x %d MiB/s)"
              % (name, n, mibs, 100 * mibs / (n * args.rate), n, args.rate), flush=True)
    return rows


def chart(result, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: no chart")
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    s = result["stripes"]
    a.plot([r["stripes"] for r in s], [r["mib_s"] for r in s], "o-", label="Loom, one client")
    a.plot([r["stripes"] for r in s], [r["linear"] for r in s], "--", color="grey", label="linear (k x link)")
    a.set_xlabel("stripes (one OSS host each)")
    a.set_ylabel("MiB/s")
    a.set_title("One file, one client")
    a.legend()
    for layout, style in (("spread", "o-"), ("single", "s-")):
        rows = [r for r in result["clients"] if r["layout"] == layout]
        b.plot([r["clients"] for r in rows], [r["mib_s"] for r in rows], style,
               label="files over every OSS" if layout == "spread" else "every file on one OSS (NFS-like)")
    rows = [r for r in result["clients"] if r["layout"] == "spread"]
    b.plot([r["clients"] for r in rows], [r["linear"] for r in rows], "--", color="grey", label="linear (n x link)")
    b.set_xlabel("client hosts")
    b.set_ylabel("aggregate MiB/s")
    b.set_title("A shared dataset, read by n clients")
    b.legend()
    fig.suptitle("Loom over %d OSS hosts, every link shaped to %d MiB/s" % (result["osts"], result["rate_mib"]))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rate", type=int, default=100, help="MiB/s of every shaped link (default 100)")
    ap.add_argument("--size", type=int, default=1024, help="MiB of the striped file (default 1024)")
    ap.add_argument("--files", type=int, default=64, help="8 MiB files in the shared dataset (default 64)")
    ap.add_argument("--osts", type=int, default=8, help="OSS hosts (default 8)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/scale.py needs root")
    started = time.perf_counter()
    block = os.urandom(16 * MiB)
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "rate_mib": args.rate, "osts": args.osts, "size_mib": args.size, "files": args.files}
    print("Loom over %d OSS hosts, links shaped to %d MiB/s" % (args.osts, args.rate), flush=True)
    with loombed.LoomBed(args.build, osts=args.osts, oss_rate_mib=args.rate) as lb:
        print("one client, one %d MiB file:" % args.size, flush=True)
        result["stripes"] = stripes(lb, args, block)
        mounts = [lb.mount(lb.add_client("c%d" % i, rate_mib=args.rate)) for i in range(4)]
        print("n clients, a dataset of %d x 8 MiB:" % args.files, flush=True)
        result["clients"] = clients(lb, args, block, mounts, single=False)
        result["clients"] += clients(lb, args, block, mounts, single=True)
    result["seconds"] = time.perf_counter() - started
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "scale.json"), "w") as f:
        json.dump(result, f, indent=1)
    print("wrote", os.path.join(args.out, "scale.json"))
    if chart(result, os.path.join(args.out, "scale.png")):
        print("wrote", os.path.join(args.out, "scale.png"))
    four = [r for r in result["stripes"] if r["stripes"] == 4]
    if four:
        print("4 stripes: %.0f%% of linear (target >= 85%%)" % (100 * four[0]["fraction"]))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What sealing frames costs on the data path: sequential write and read of one file through a
mount (dd) and through libloom (loom-iobench), on the same machine, with servers that have no key
(frames carry only crc32c), with a key (every frame after the handshake AES-256-GCM
authenticated: docs/protocol.md, "Sealed frames") and with a key and --encrypt (body and bulk
encrypted too). Prints MiB/s per mode, each the median of --runs, and each mode against "no key".

    python3 bench/seal_cost.py [--build build] [--size 1G] [--runs 3] [--osts 4]

One MDS and --osts OSSs on 127.0.0.1, the file striped over all of them, the MDT and OSTs in
--tmp (default /dev/shm: memory, so that the figures compare the network path, which is what the
seal changes, and not a disk busy with the previous run's write-back). Reads are of a fresh mount
(the client's page cache is cold). Each file is removed once measured. Runs as root (it mounts).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("no key", "authenticated", "encrypted")


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    sys.exit("timed out waiting for " + what)


class Cluster:
    """MDS and OSSs started by hand, so that the key and --encrypt are this script's to choose."""

    def __init__(self, build, tmp, osts, mode):
        self.build, self.dir, self.mode = build, os.path.join(tmp, mode.replace(" ", "-")), mode
        self.procs = []
        mds, oss = (os.path.join(build, "src", d, "loom-" + d) for d in ("mds", "oss"))
        os.makedirs(os.path.join(self.dir, "log"))
        mdt = os.path.join(self.dir, "mdt")
        subprocess.run([mds, "--format", "--fsname", "bench", "--mdt", mdt], check=True,
                       capture_output=True)
        self.key = os.path.join(mdt, "fs.key")
        if mode == "no key":
            os.unlink(self.key)   # the MDS uses MDT/fs.key if it is there
            self.key = None
        keyargs = ["--key", self.key] if self.key else []
        enc = ["--encrypt"] if mode == "encrypted" else []
        pf = os.path.join(self.dir, "mds.addr")
        self.spawn("mds", [mds, "--mdt", mdt, "--listen", "127.0.0.1:0", "--port-file", pf] + keyargs + enc)
        wait_for(lambda: os.path.exists(pf), 30, "the MDS")
        self.addr = open(pf).read().strip()
        for k in range(osts):
            ost = os.path.join(self.dir, "ost%d" % k)
            subprocess.run([oss, "--format", "--fsname", "bench", "--ost", ost], check=True,
                           capture_output=True)
            self.spawn("oss%d" % k, [oss, "--ost", ost, "--mds", self.addr, "--listen", "127.0.0.1:0"]
                       + keyargs + enc)
        log = os.path.join(self.dir, "log", "mds.log")
        wait_for(lambda: open(log).read().count(" registered: ") >= osts, 60, "the OSSs")
        self.env = dict(os.environ, LOOM_FS=self.addr)
        self.env.pop("LOOM_KEY_FILE", None)
        if self.key:
            self.env["LOOM_KEY_FILE"] = self.key
        subprocess.run([os.path.join(build, "src/tools/loom"), "setstripe", "-c", "-1", "/"],
                       env=self.env, check=True, capture_output=True)
        self.mnt = os.path.join(self.dir, "mnt")
        os.makedirs(self.mnt)

    def spawn(self, name, argv):
        log = open(os.path.join(self.dir, "log", name + ".log"), "a")
        self.procs.append(subprocess.Popen(argv, stdout=log, stderr=log))
        log.close()

    def mount(self):
        opts = ["-o", "key=" + self.key] if self.key else []
        subprocess.run([os.path.join(self.build, "src/fuse/loom-mount"), self.addr + ":/bench",
                        self.mnt] + opts, check=True, env=self.env, capture_output=True)

    def umount(self):
        subprocess.run(["umount", self.mnt], check=True, capture_output=True)

    def stop(self):
        subprocess.run(["umount", "-l", self.mnt], capture_output=True)
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(timeout=60)


def dd_seconds(args):
    out = subprocess.run(["dd"] + args, capture_output=True, text=True, check=True).stderr
    return float(re.search(r"copied, ([0-9.]+) s", out).group(1))


def iobench(c, *args):
    out = subprocess.run([os.path.join(c.build, "bench/loom-iobench"), "--fs", c.addr] + list(args),
                         capture_output=True, text=True, check=True, env=c.env).stdout
    return float(out.split()[3])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--size", default="1G")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--osts", type=int, default=4)
    ap.add_argument("--tmp", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    a = ap.parse_args()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    size = int(a.size[:-1]) * mult[a.size[-1].upper()] if a.size[-1].isalpha() else int(a.size)
    mib, build = size / (1 << 20), os.path.abspath(a.build)
    res = {(m, k): [] for m in MODES for k in ("mount write", "mount read", "libloom write", "libloom read")}
    tmp = tempfile.mkdtemp(prefix="loom-seal-bench-", dir=a.tmp)
    clusters = {}
    try:
        for m in MODES:
            clusters[m] = Cluster(build, tmp, a.osts, m)
        for run in range(a.runs):
            # The modes take turns in each run, so that a busy moment of the machine falls on all.
            for m in (MODES if run % 2 == 0 else MODES[::-1]):
                c = clusters[m]
                c.mount()
                f = os.path.join(c.mnt, "f%d" % run)
                res[(m, "mount write")].append(mib / dd_seconds(
                    ["if=/dev/zero", "of=" + f, "bs=4M", "count=%d" % (size >> 22), "conv=fsync"]))
                c.umount()
                c.mount()   # a cold client cache
                res[(m, "mount read")].append(mib / dd_seconds(["if=" + f, "of=/dev/null", "bs=4M"]))
                os.unlink(f)
                c.umount()
                res[(m, "libloom write")].append(iobench(c, "write", "/g%d" % run, str(size), "--fsync"))
                res[(m, "libloom read")].append(iobench(c, "read", "/g%d" % run))
                subprocess.run([os.path.join(build, "src/tools/loom"), "rm", "/g%d" % run], env=c.env,
                               check=True, capture_output=True)
    finally:
        for c in clusters.values():
            c.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%s sequential, %d OSTs on one machine, median of %d (MiB/s; vs no key)" % (a.size, a.osts, a.runs))
    print("%-15s" % "" + "".join("%22s" % m for m in MODES))
    for k in ("mount write", "mount read", "libloom write", "libloom read"):
        base = statistics.median(res[("no key", k)])
        row = "%-15s" % k
        for m in MODES:
            v = statistics.median(res[(m, k)])
            row += "%14.0f (%5.2f)" % (v, v / base)
        print(row)


if __name__ == "__main__":
    main()

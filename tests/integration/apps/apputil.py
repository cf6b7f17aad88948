"""Helpers for the application tests: running a program with a hard timeout, building a sample
source tree, and comparing two trees as a user would (content, type, mode, owner, mtime, symlink
targets, hard links)."""

import hashlib
import os
import shutil
import signal
import stat
import subprocess

KiB = 1 << 10
MiB = 1 << 20

APP_TIMEOUT = 150    # seconds one application run may take before we call it hung


def _fmt_cmd(cmd):
    return " ".join(str(c) for c in cmd)


def run(cmd, *, cwd=None, env=None, timeout=APP_TIMEOUT, check=True, input=None):
    """Runs cmd (a list) in a process group of its own and returns the CompletedProcess (text).
    If it outlives timeout, the whole group is killed and the test fails: an application on the
    mount must never hang the suite. check=True fails the test on a non-zero exit."""
    p = subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=env, text=True, start_new_session=True,
                         stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise AssertionError("`%s` (in %s) hung: killed after %ds\nstdout:\n%s\nstderr:\n%s"
                             % (_fmt_cmd(cmd), cwd or os.getcwd(), timeout, out[-4000:], err[-4000:]))
    if check and p.returncode != 0:
        raise AssertionError("`%s` (in %s) exited %d\nstdout:\n%s\nstderr:\n%s"
                             % (_fmt_cmd(cmd), cwd or os.getcwd(), p.returncode, out[-4000:], err[-4000:]))
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


# ---- a sample tree ------------------------------------------------------------------------

SOURCE_DIRS = ["/work/main/src", "/work/main/include", "/work/main/docs", "/work/main/scripts",
               "/usr/include/linux"]

# Modes, mtimes (ns) and owners the sample tree sets on purpose, relative to its root.
OLD = 1_000_000_000          # 2001-09-09, seconds
EXTRAS_MTIME = {
    "bin/random-1": (OLD + 1) * 10**9 + 123456789,
    "bin/random-65537": (OLD + 2) * 10**9 + 1,
    "bin/random-9M": (OLD + 3) * 10**9 + 999999999,
    "bin/sparse-8M": (OLD + 4) * 10**9,
    "empty": (OLD + 5) * 10**9 + 5,
    "modes/run.sh": (OLD + 6) * 10**9 + 6,
}


def _write(path, data, mode=None):
    with open(path, "wb") as f:
        f.write(data)
    if mode is not None:
        os.chmod(path, mode)


def make_source_tree(dst, seed=0):
    """Builds a realistic tree under dst (which must not exist): a snapshot of Loom's own sources
    and of /usr/include/linux (several hundred text files in nested directories), plus binary files
    (1 B, 64 KiB + 1, 9 MiB, a sparse 8 MiB), an empty file and an empty directory, symlinks
    (relative, to a directory, absolute, dangling), a pair of hard links, odd modes (0444, 0600,
    0640, 0755, a 0700 directory, a sticky 1777 and a setgid 2755 directory), files owned by other
    users (when run as root), names with spaces, UTF-8 and 200 characters, and explicit nanosecond
    mtimes on files, directories and a symlink. Returns dst."""
    import random
    rng = random.Random(seed)
    os.makedirs(dst)
    for d in SOURCE_DIRS:
        if os.path.isdir(d):
            shutil.copytree(d, os.path.join(dst, os.path.basename(d)), symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))

    os.mkdir(os.path.join(dst, "bin"))
    _write(os.path.join(dst, "bin", "random-1"), rng.randbytes(1))
    _write(os.path.join(dst, "bin", "random-65537"), rng.randbytes(64 * KiB + 1))
    _write(os.path.join(dst, "bin", "random-9M"), rng.randbytes(9 * MiB + 123))
    with open(os.path.join(dst, "bin", "sparse-8M"), "wb") as f:
        f.truncate(8 * MiB)
        f.seek(8 * MiB - 3)
        f.write(b"end")
    _write(os.path.join(dst, "bin", "hard-a"), b"one inode, two names\n" * 100)
    os.link(os.path.join(dst, "bin", "hard-a"), os.path.join(dst, "bin", "hard-b"))

    _write(os.path.join(dst, "empty"), b"")
    os.mkdir(os.path.join(dst, "emptydir"))
    os.chmod(os.path.join(dst, "emptydir"), 0o700)

    os.mkdir(os.path.join(dst, "modes"))
    _write(os.path.join(dst, "modes", "readonly"), b"read only\n", 0o444)
    _write(os.path.join(dst, "modes", "private"), b"private\n", 0o600)
    _write(os.path.join(dst, "modes", "group"), b"group readable\n", 0o640)
    _write(os.path.join(dst, "modes", "run.sh"), b"#!/bin/sh\necho hello\n", 0o755)
    os.mkdir(os.path.join(dst, "modes", "sticky"))
    _write(os.path.join(dst, "modes", "sticky", "f"), b"in a sticky dir\n")
    os.chmod(os.path.join(dst, "modes", "sticky"), 0o1777)
    os.mkdir(os.path.join(dst, "modes", "setgid"))
    _write(os.path.join(dst, "modes", "setgid", "f"), b"in a setgid dir\n")
    os.chmod(os.path.join(dst, "modes", "setgid"), 0o2755)

    os.mkdir(os.path.join(dst, "names"))
    for name in ("with space", "ünïcödé-名前.txt", "x" * 200, "-leading-dash", ".hidden"):
        _write(os.path.join(dst, "names", name), name.encode() + b"\n")

    os.symlink("src/fuse/main.c", os.path.join(dst, "link-to-file"))
    os.symlink("docs", os.path.join(dst, "link-to-dir"))
    os.symlink("/etc/hostname", os.path.join(dst, "abs-link"))
    os.symlink("nowhere/at/all", os.path.join(dst, "dangling"))

    if os.geteuid() == 0:
        os.mkdir(os.path.join(dst, "owned"))
        _write(os.path.join(dst, "owned", "by-1000"), b"owned by 1000\n")
        os.chown(os.path.join(dst, "owned", "by-1000"), 1000, 1000)
        os.chown(os.path.join(dst, "owned"), 1234, 5678)

    for rel, ns in EXTRAS_MTIME.items():
        os.utime(os.path.join(dst, rel), ns=(ns, ns))
    # Symlinks and directories get old mtimes too: a new one has the current time, and rsync
    # leaves that alone when it falls in the same second as the original's (it compares seconds).
    for k, rel in enumerate(("link-to-file", "link-to-dir", "abs-link", "dangling")):
        ns = (OLD + 20 + k) * 10**9 + 7 + k
        os.utime(os.path.join(dst, rel), ns=(ns, ns), follow_symlinks=False)
    # Directories last (creating entries in them moves their mtime), deepest first.
    dirs = [dirpath for dirpath, _, _ in os.walk(dst)]
    for k, path in enumerate(sorted(dirs, key=len, reverse=True)):
        ns = (OLD + 100 + k) * 10**9 + 11 * k
        os.utime(path, ns=(ns, ns))
    return dst


# ---- comparing trees ----------------------------------------------------------------------

def sha256_file(path, chunk=4 * MiB):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                return h.hexdigest()
            h.update(b)


def snapshot(root, *, content=True):
    """{relpath: {attribute: value}} for root ('.') and every entry under it, as lstat() and
    readlink() show them, with each regular file's sha256 and its hard-link group (the first name
    of the inode, in sorted order, when it has several names in the tree)."""
    out = {}
    first_name = {}

    def visit(rel):
        path = os.path.join(root, rel) if rel != "." else root
        st = os.lstat(path)
        e = {"type": stat.S_IFMT(st.st_mode), "mode": "%04o" % stat.S_IMODE(st.st_mode),
             "uid": st.st_uid, "gid": st.st_gid, "mtime_ns": st.st_mtime_ns}
        if stat.S_ISREG(st.st_mode):
            e["size"] = st.st_size
            if content:
                e["sha256"] = sha256_file(path)
            if st.st_nlink > 1:
                e["link_group"] = first_name.setdefault((st.st_dev, st.st_ino), rel)
        elif stat.S_ISLNK(st.st_mode):
            e["target"] = os.readlink(path)
        out[rel] = e
        if stat.S_ISDIR(st.st_mode):
            for name in sorted(os.listdir(path)):
                visit(name if rel == "." else os.path.join(rel, name))

    visit(".")
    return out


TYPE_NAMES = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink"}


def compare_trees(want_root, got_root, *, attrs=("type", "mode", "uid", "gid", "mtime_ns", "size", "sha256",
                                                 "target", "link_group"), skip=()):
    """Differences between two trees as a list of readable lines (empty when they are the same).
    attrs: what to compare; skip: relpaths to leave out (with everything under them)."""
    a = snapshot(want_root, content="sha256" in attrs)
    b = snapshot(got_root, content="sha256" in attrs)

    def skipped(rel):
        return any(rel == s or rel.startswith(s + "/") for s in skip)

    diffs = []
    for rel in sorted(set(a) | set(b)):
        if skipped(rel):
            continue
        if rel not in b:
            diffs.append("%s: missing from %s" % (rel, got_root))
            continue
        if rel not in a:
            diffs.append("%s: extra in %s" % (rel, got_root))
            continue
        for k in attrs:
            va, vb = a[rel].get(k), b[rel].get(k)
            if va != vb:
                if k == "type":
                    va, vb = TYPE_NAMES.get(va, va), TYPE_NAMES.get(vb, vb)
                diffs.append("%s: %s %s, expected %s" % (rel, k, vb, va))
    return diffs


def summarize(diffs, limit=25):
    """A report of tree differences: counts per attribute, then the first few lines."""
    if not diffs:
        return "no differences"
    kinds = {}
    for d in diffs:
        k = d.split(": ", 1)[1].split(" ", 1)[0]
        kinds[k] = kinds.get(k, 0) + 1
    head = ", ".join("%d %s" % (n, k) for k, n in sorted(kinds.items()))
    more = "\n  ... and %d more" % (len(diffs) - limit) if len(diffs) > limit else ""
    return "%d differences (%s):\n  %s%s" % (len(diffs), head, "\n  ".join(diffs[:limit]), more)


class Findings:
    """Collects what a test found wrong, so that one run reports every problem, not just the first."""

    def __init__(self):
        self.items = []

    def add(self, what):
        self.items.append(what)

    def trees(self, what, want_root, got_root, **kw):
        """Adds the differences between two trees (compare_trees), if any."""
        diffs = compare_trees(want_root, got_root, **kw)
        if diffs:
            self.add("%s: %s" % (what, summarize(diffs)))
        return diffs

    def diff_r(self, want_root, got_root, what=""):
        """Adds what `diff -r --no-dereference` reports, if it finds differences."""
        p = run(["diff", "-r", "--no-dereference", want_root, got_root], check=False)
        if p.returncode != 0:
            lines = (p.stdout + p.stderr).splitlines()
            heads = [ln for ln in lines if ln.startswith(("diff ", "Only in", "Files ", "diff:"))
                     or " is a " in ln]
            self.add("`diff -r --no-dereference %s %s`%s exited %d, %d files differ; first:\n  %s"
                     % (want_root, got_root, " (" + what + ")" if what else "", p.returncode, len(heads),
                        "\n  ".join((heads or lines)[:20])))
        return p.returncode == 0

    def check(self):
        assert not self.items, "\n\n".join(self.items)


class SqlAgent:
    """A SQLite connection held open by a process of its own (sqlagent.py) on path."""

    def __init__(self, path, timeout=60):
        import sys
        self.path = path
        self.timeout = timeout
        self.proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "sqlagent.py"), path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)

    def _ask(self, req):
        import json
        import selectors
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(self.timeout):
            self.kill()
            raise AssertionError("SQLite on %s did not answer %r within %ds" % (self.path, req, self.timeout))
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read()
            raise AssertionError("the SQLite process on %s died on %r:\n%s" % (self.path, req, err[-3000:]))
        return json.loads(line)

    def execute(self, sql, params=(), expect_error=False):
        """Rows of sql; fails the test on an error unless expect_error (then returns the reply)."""
        r = self._ask({"sql": sql, "params": list(params)})
        if "error" in r and not expect_error:
            raise AssertionError("SQLite on %s: %r failed: %s" % (self.path, sql, r["error"]))
        return r if expect_error else r["rows"]

    def script(self, sql):
        r = self._ask({"script": sql})
        if "error" in r:
            raise AssertionError("SQLite on %s: script failed: %s\n%s" % (self.path, r["error"], sql))

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(self.timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

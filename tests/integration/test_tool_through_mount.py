"""Any user can run the tool on a mounted path (issue 17): without the file system key, `loom df`,
`pool list`, `getstripe`, `find`, `stat`, `ls`, `cat` and `get` on a path under a Loom mount
ask the mount (loom-mount's ioctls, the loom.lov xattr, the kernel's own calls), with the user's
rights, and print byte for byte what root prints with the key. What the user may not reach stays
hidden as find(1) and stat(1) hide it; verbs that change things say they need the key.

The user is nobody (65534), with no key and no config. The cluster's targets are tmpfs mounts
of their own, so that the space figures `df` prints do not move with the machine's disk."""

import contextlib
import errno
import os
import subprocess

import pytest

from loomutil import LOOM, second_mount

NOBODY = 65534
AS_NOBODY = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
NEEDS_KEY = "require the file system key, and none was given"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="runs the tool as another user and mounts tmpfs")


@contextlib.contextmanager
def tmpfs(path, size="64m"):
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", path], check=True, timeout=60)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", path], timeout=60)


@pytest.fixture
def mounted(cluster_factory):
    """A 3-OST cluster whose MDT and OSTs are tmpfs mounts, mounted on DIR/mnt, which any user
    can reach; returns (cluster, mount point)."""
    c = cluster_factory(osts=3, start=False)
    os.chmod(c.dir, 0o755)
    with contextlib.ExitStack() as targets:
        for name in ["mdt"] + ["ost%d" % k for k in range(3)]:
            targets.enter_context(tmpfs(os.path.join(c.dir, name)))
        try:
            c.up()
            yield c, c.mount()
        finally:
            c.down()


def user_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_")}
    env["LANG"] = env["LC_ALL"] = "C"
    return env


def as_nobody(*args, env=None):
    """`loom ARGS` as nobody, without a key: (returncode, stdout, stderr)."""
    p = subprocess.run(AS_NOBODY + [LOOM] + [str(a) for a in args], capture_output=True, text=True,
                       env=env or user_env(), timeout=120, cwd="/")
    return p.returncode, p.stdout, p.stderr


def nobody_runs(*args, check=True):
    rc, out, err = as_nobody(*args)
    assert not check or rc == 0, "`loom %s` as nobody exited %d: %s" % (" ".join(map(str, args)), rc, err)
    return out


def same_as_root(c, *args):
    """nobody's output (without a key) is root's with the key, byte for byte; returns it."""
    want = c.loom(*args).stdout
    got = nobody_runs(*args)
    assert got == want, "`loom %s`: nobody through the mount printed\n%s\nroot with the key\n%s" % (
        " ".join(map(str, args)), got, want)
    return got


def same_df_as_root(c, *args):
    """The same for df, whose figures are the servers' of the moment: the MDT's room moves when
    the MDS's own work (a session ended by the previous command) commits, so nobody's output
    must equal root's of just before or just after (tries again if both moved)."""
    for _ in range(10):
        before = c.loom("df", *args).stdout
        got = nobody_runs("df", *args)
        after = c.loom("df", *args).stdout
        if got in (before, after):
            return got
    raise AssertionError("`loom df %s`: nobody through the mount printed\n%s\nroot with the key\n%s"
                         % (" ".join(map(str, args)), got, after))


def tree(c, mnt):
    """A readable tree: a striped file, a Data-on-MDT (composite) one, a directory default."""
    c.loom("mkdir", "/t")
    c.loom("mkdir", "/t/sub")
    c.loom("setstripe", "-E", "-1", "-c", "2", "-S", "1M", "/t/striped")
    c.loom("put", "-", "/t/striped", input="s" * 5000)
    c.loom("put", "-", "/t/dom", input="small file\n")
    c.loom("setstripe", "-E", "128K", "-L", "mdt", "-E", "-1", "-c", "3", "/t/sub")
    c.loom("put", "-", "/t/sub/inherits", input="x" * 200000)
    c.loom("pool", "new", "fast")
    c.loom("pool", "add", "fast", "1", "2")
    c.loom("setstripe", "-c", "1", "-p", "fast", "/t/pooled")
    os.symlink("striped", os.path.join(mnt, "t", "link"))
    return os.path.join(mnt, "t")


def test_df_through_the_mount_is_roots_df(mounted):
    c, mnt = mounted
    tree(c, mnt)
    for flags in ([], ["-h"], ["-i"], ["--pool", "fast"], ["--pool", "loom.fast", "-i"]):
        out = same_df_as_root(c, *flags, mnt)
        assert "%s[MDT:0]" % mnt in out
    # A path inside the mount, or a file there, asks the same mount.
    assert same_df_as_root(c, os.path.join(mnt, "t", "dom")) == same_df_as_root(c, mnt)
    c.loom("pool", "new", "empty")
    same_df_as_root(c, "--pool", "empty", mnt)
    rc, out, err = as_nobody("df", "--pool", "nope", mnt)
    assert (rc, out, err) == (1, "", "loom df: no pool nope\n")


def test_two_mounts_give_the_same_df(mounted):
    c, mnt = mounted
    with second_mount(c) as other:
        for _ in range(10):
            first = nobody_runs("df", mnt)
            second = nobody_runs("df", other)
            if second == first.replace(mnt, other):
                break
        assert second == first.replace(mnt, other), (first, second)
        same_df_as_root(c, other)


def test_pool_list_through_the_mount(mounted):
    c, mnt = mounted
    tree(c, mnt)
    assert same_as_root(c, "pool", "list", mnt) == "Pools from loom:\nloom.fast\n"
    assert same_as_root(c, "pool", "list", "fast", mnt) == "Pool: loom.fast\nloom-OST0001_UUID\nloom-OST0002_UUID\n"
    same_as_root(c, "pool", "list", "loom.fast", os.path.join(mnt, "t"))
    rc, out, err = as_nobody("pool", "list", "nope", mnt)
    assert (rc, out, err) == (1, "", "loom pool: no pool loom.nope\n")


def test_getstripe_through_the_mount(mounted):
    c, mnt = mounted
    t = tree(c, mnt)
    plain = same_as_root(c, "getstripe", os.path.join(t, "striped"))
    assert "lmm_stripe_count:  2" in plain and "lcm_layout_gen" not in plain
    composite = same_as_root(c, "getstripe", os.path.join(t, "sub", "inherits"))
    assert "lmm_pattern:       mdt" in composite and "lcme_extent.e_end:   131072" in composite
    same_as_root(c, "getstripe", os.path.join(t, "dom"))
    for flag in ("-c", "-S", "-i", "-p", "-y"):
        same_as_root(c, "getstripe", flag, os.path.join(t, "striped"), os.path.join(t, "pooled"))
    same_as_root(c, "getstripe", "-d", os.path.join(t, "sub"))
    same_as_root(c, "getstripe", os.path.join(t, "link"))
    out = same_as_root(c, "getstripe", "-r", t)
    assert os.path.join(t, "sub", "inherits") in out
    same_as_root(c, "getstripe", "-r", "-y", t)
    same_as_root(c, "getstripe", t)


def test_find_through_the_mount(mounted):
    c, mnt = mounted
    tree(c, mnt)
    # The tree was made elsewhere (libloom): a mount that saw none of it is current at once,
    # where the first one may show attributes up to attr_timeout old (the mount root's).
    with second_mount(c) as view:
        find_everything(c, os.path.join(view, "t"))


def find_everything(c, t):
    for preds in ([], ["--type", "f"], ["--type", "d"], ["--type", "l"], ["--name", "s*"],
                  ["--size", "+4k"], ["--size", "-100"], ["--mtime", "-1"], ["--stripe-count", "2"],
                  ["!", "--stripe-count", "2", "--type", "f"], ["--ost", "1"], ["--ost", "OST0000,2"],
                  ["--pool", "fast"], ["!", "--pool", "fast"], ["--stripe-size", "+1M"], ["--maxdepth", "1"],
                  ["--type", "f", "--name", "*i*", "--size", "+1k"]):
        same_as_root(c, "find", t, *preds)


def test_stat_ls_cat_get_through_the_mount(mounted):
    c, mnt = mounted
    tree(c, mnt)
    with second_mount(c) as view:
        stat_ls_cat_get(c, os.path.join(view, "t"))


def stat_ls_cat_get(c, t):
    same_as_root(c, "stat", os.path.join(t, "dom"), os.path.join(t, "striped"), t, os.path.join(t, "link"))
    same_as_root(c, "ls", t)
    same_as_root(c, "ls", "-la", t)
    same_as_root(c, "ls", "-l", os.path.join(t, "link"))
    assert same_as_root(c, "cat", os.path.join(t, "dom"), os.path.join(t, "striped")) == "small file\n" + "s" * 5000
    assert same_as_root(c, "get", os.path.join(t, "sub", "inherits"), "-") == "x" * 200000
    # An error is the one libloom gives.
    rc, out, err = as_nobody("cat", t)
    assert (rc, out, err) == (1, "", "loom cat: %s: Is a directory\n" % t)
    rc, out, err = as_nobody("stat", os.path.join(t, "nope"))
    assert (rc, out, err) == (1, "", "loom stat: %s: No such file or directory\n" % os.path.join(t, "nope"))


def test_what_nobody_may_not_search_stays_hidden(mounted):
    c, mnt = mounted
    t = tree(c, mnt)
    c.loom("mkdir", "/t/private")
    c.loom("put", "-", "/t/private/secret", input="secret\n")
    os.chmod(os.path.join(t, "private"), 0o700)
    secret = os.path.join(t, "private", "secret")
    env = user_env()

    # find prints what find(1) prints, and says what it could not read as find(1) does.
    rc, out, err = as_nobody("find", t)
    real = subprocess.run(AS_NOBODY + ["find", t], capture_output=True, text=True, env=env, timeout=60)
    assert out == real.stdout and rc == 1 and real.returncode == 1
    assert "secret" not in out
    assert err == "loom find: %s: Permission denied\n" % os.path.join(t, "private")
    rc, out, err = as_nobody("find", secret)
    assert (rc, out, err) == (1, "", "loom find: %s: Permission denied\n" % secret)

    # getstripe -r goes on past it, stat and getstripe of the file are refused as stat(1) is.
    rc, out, err = as_nobody("getstripe", "-r", t)
    assert rc == 1 and "secret" not in out and "secret" not in err
    assert err == "loom getstripe: %s: Permission denied\n" % os.path.join(t, "private")
    want = subprocess.run(AS_NOBODY + ["stat", secret], capture_output=True, text=True, env=env, timeout=60)
    assert want.returncode == 1 and "Permission denied" in want.stderr
    for verb in ("stat", "getstripe", "cat"):
        rc, out, err = as_nobody(verb, secret)
        assert (rc, out, err) == (1, "", "loom %s: %s: %s\n" % (verb, secret, os.strerror(errno.EACCES)))
    rc, out, err = as_nobody("ls", os.path.join(t, "private"))
    assert (rc, out) == (1, "") and "Permission denied" in err
    # Root, with the key, sees it all.
    assert secret in c.loom("find", t).stdout


def test_setstripe_as_the_owner_through_the_mount(mounted):
    c, mnt = mounted
    t = tree(c, mnt)
    mine = os.path.join(t, "mine")
    os.mkdir(mine)
    os.chown(mine, NOBODY, NOBODY)
    nobody_runs("setstripe", "-c", "2", "-S", "2M", mine)
    assert same_as_root(c, "getstripe", "-d", mine).endswith("stripe_count:  2 stripe_size:   2097152 "
                                                           "pattern:       raid0 stripe_offset: -1\n")
    nobody_runs("setstripe", "-c", "3", os.path.join(mine, "new"))
    assert same_as_root(c, "getstripe", "-c", os.path.join(mine, "new")) == "3\n"
    # Not on root's directory: the MDS says no, as lfs shows it.
    rc, out, err = as_nobody("setstripe", "-c", "1", os.path.join(t, "sub"))
    assert (rc, out, err) == (1, "", "loom setstripe: %s: Permission denied\n" % os.path.join(t, "sub"))


def test_without_the_key_the_errors_are_clear(mounted):
    c, mnt = mounted
    t = tree(c, mnt)
    # Verbs that change things, or have no mount to ask, need the key, and say so.
    for args in (["rm", os.path.join(t, "dom")], ["migrate", "-c", "1", os.path.join(t, "dom")],
                 ["mkdir", "/x"], ["pool", "new", "slow"]):
        rc, out, err = as_nobody("--fs", c.addr, *args)
        assert rc == 1 and out == "", (args, rc, out, err)
        assert err.startswith("loom: %s needs the file system key (--key FILE" % args[0]) and NEEDS_KEY in err, err
    assert os.path.exists(os.path.join(t, "dom"))
    # Without a mount: df of a path elsewhere, and of the file system by address.
    rc, out, err = as_nobody("df", "/tmp")
    assert (rc, out, err) == (1, "", "loom df: /tmp is not on a Loom mount\n")
    rc, out, err = as_nobody("--fs", c.addr, "df")
    assert rc == 1 and out == "" and NEEDS_KEY in err and err.startswith("loom: df needs the file system key"), err
    # A key file this user may not read ($LOOM_KEY_FILE here, root's) counts as none: the mount answers.
    env = user_env()
    env["LOOM_KEY_FILE"] = c.key
    rc, out, err = as_nobody("df", mnt, env=env)
    assert (rc, err) == (0, "") and "%s[MDT:0]" % mnt in out

"""git on the mount: a new repository and a clone of a real one live there as they would on a
local disk: status is clean after clone and after commit, fsck finds nothing wrong, log shows
the commits, and another node's mount sees the same repository."""

import os

import pytest

from apputil import Findings, run

SOURCE_REPO = "/work/main"   # Loom's own repository: a real history


def git_env(workdir):
    home = os.path.join(workdir, "home")
    os.makedirs(home, exist_ok=True)
    env = dict(os.environ)
    env.update(HOME=home, GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="Loom Test",
               GIT_AUTHOR_EMAIL="test@loom.invalid", GIT_COMMITTER_NAME="Loom Test",
               GIT_COMMITTER_EMAIL="test@loom.invalid", LC_ALL="C")
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(var, None)
    with open(os.path.join(home, ".gitconfig"), "w") as f:
        f.write("[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n[gc]\n\tauto = 0\n")
    return env


def git(env, repo, *args, check=True):
    return run(["git", "-C", repo] + list(args), env=env, check=check)


def status(env, repo):
    return git(env, repo, "status", "--porcelain", "--untracked-files=all").stdout


def fsck(f, env, repo, what):
    p = git(env, repo, "fsck", "--full", "--strict", check=False)
    if p.returncode != 0 or p.stderr.strip():
        f.add("`git fsck --full --strict` %s exited %d:\n%s%s" % (what, p.returncode, p.stdout[-2000:],
                                                               p.stderr[-2000:]))


def first_lines(text, n=15):
    lines = text.splitlines()
    return "\n  ".join(lines[:n]) + ("\n  ... (%d lines)" % len(lines) if len(lines) > n else "")


def test_git_init_commit_on_the_mount(mounted, second_mount, source_tree, workdir):
    env = git_env(workdir)
    repo = mounted.p("repo")
    run(["git", "init", "-q", repo], env=env)
    run(["cp", "-r", os.path.join(source_tree, "src"), os.path.join(source_tree, "docs"), repo])
    git(env, repo, "add", "-A")
    git(env, repo, "commit", "-q", "-m", "first: sources and docs")
    f = Findings()
    s = status(env, repo)
    if s:
        f.add("`git status --porcelain` right after the first commit is not empty:\n  " + first_lines(s))

    # Modify, add, commit.
    with open(os.path.join(repo, "docs", "operations.md"), "a") as fh:
        fh.write("\nA line added on the mount.\n")
    with open(os.path.join(repo, "NEW.txt"), "w") as fh:
        fh.write("a new file\n")
    os.unlink(os.path.join(repo, "src", "common", "crc.h"))
    s = status(env, repo)
    want = {" M docs/operations.md", "?? NEW.txt", " D src/common/crc.h"}
    if set(s.splitlines()) != want:
        f.add("`git status --porcelain` after changing three files shows:\n  %s\nexpected:\n  %s"
              % (first_lines(s), "\n  ".join(sorted(want))))
    git(env, repo, "add", "-A")
    git(env, repo, "commit", "-q", "-m", "second: edit, add, delete")
    s = status(env, repo)
    if s:
        f.add("`git status --porcelain` right after the second commit is not empty:\n  " + first_lines(s))
    log = git(env, repo, "log", "--format=%s").stdout.splitlines()
    if log != ["second: edit, add, delete", "first: sources and docs"]:
        f.add("`git log` shows %r" % log)
    show = git(env, repo, "show", "--stat", "--format=%s", "HEAD").stdout
    for name in ("docs/operations.md", "NEW.txt", "src/common/crc.h"):
        if name not in show:
            f.add("`git show --stat HEAD` does not name %s:\n%s" % (name, show))
    fsck(f, env, repo, "on mount A")

    # Packing rewrites the object store (new pack, index and refs files renamed into place).
    git(env, repo, "gc", "-q", "--prune=now")
    fsck(f, env, repo, "after git gc")
    s = status(env, repo)
    if s:
        f.add("`git status --porcelain` after git gc is not empty:\n  " + first_lines(s))

    # Another node: the same history, a clean work tree, an intact object store.
    other = second_mount.p("repo")
    if git(env, other, "rev-parse", "HEAD").stdout != git(env, repo, "rev-parse", "HEAD").stdout:
        f.add("HEAD differs between mount A and mount B")
    s = status(env, other)
    if s:
        f.add("`git status --porcelain` through mount B is not empty:\n  " + first_lines(s))
    fsck(f, env, other, "through mount B")
    f.check()


# Slow under ASan (20 s); the plain pass runs it, the POSIX cases cover its calls there.
@pytest.mark.slow
def test_git_clone_onto_the_mount(mounted, second_mount, workdir):
    env = git_env(workdir)
    head = run(["git", "-C", SOURCE_REPO, "rev-parse", "HEAD"], env=env).stdout.strip()
    clone = mounted.p("clone")
    run(["git", "clone", "-q", "--no-hardlinks", SOURCE_REPO, clone], env=env)
    f = Findings()
    s = status(env, clone)
    if s:
        f.add("`git status --porcelain` right after `git clone` onto the mount is not empty "
              "(%d lines):\n  %s" % (len(s.splitlines()), first_lines(s)))
    got = git(env, clone, "rev-parse", "HEAD").stdout.strip()
    if got != head:
        f.add("the clone's HEAD is %s, the source's %s" % (got, head))
    # The checked-out files are the committed ones.
    p = git(env, clone, "diff", "--stat", "HEAD", check=False)
    if p.returncode != 0 or p.stdout:
        f.add("`git diff --stat HEAD` in the clone:\n" + p.stdout[-2000:] + p.stderr[-1000:])
    fsck(f, env, clone, "of the clone")

    # Modify, add, commit in the clone.
    readme = os.path.join(clone, "README.md")
    with open(readme, "a") as fh:
        fh.write("\nEdited in a clone on a Loom mount.\n")
    if status(env, clone) != " M README.md\n":
        f.add("`git status --porcelain` after editing README.md:\n  " + first_lines(status(env, clone)))
    git(env, clone, "add", "README.md")
    git(env, clone, "commit", "-q", "-m", "edit on the mount")
    s = status(env, clone)
    if s:
        f.add("`git status --porcelain` after the commit is not empty:\n  " + first_lines(s))
    log = git(env, clone, "log", "--format=%H %s", "-2").stdout.splitlines()
    if len(log) != 2 or not log[0].endswith(" edit on the mount") or not log[1].startswith(head):
        f.add("`git log -2` shows %r; expected the new commit on top of %s" % (log, head))
    fsck(f, env, clone, "after the commit")

    # Clone it back from another node's mount to a local disk: the same history and files.
    back = os.path.join(workdir, "back")
    run(["git", "clone", "-q", second_mount.p("clone"), back], env=env)
    if git(env, back, "rev-parse", "HEAD").stdout != git(env, clone, "rev-parse", "HEAD").stdout:
        f.add("a clone of the clone (through mount B) has another HEAD")
    fsck(f, env, back, "of a local clone of the clone, made through mount B")
    with open(os.path.join(back, "README.md")) as fh:
        if not fh.read().endswith("Edited in a clone on a Loom mount.\n"):
            f.add("README.md in the clone of the clone does not hold the edit")
    f.check()

"""The manual pages in man/: each program's page names every option its --help prints (so the two
cannot drift apart), every page renders without a warning, and meson installs each page under
mandir/manN.

No servers are started: the programs are only asked for their usage."""

import glob
import os
import re
import shutil
import subprocess

import pytest

from loomutil import BUILD, LOOM, MDS_BIN, OSS_BIN, REPO

MAN_DIR = os.path.join(REPO, "man")
MOUNT_BIN = os.path.join(BUILD, "src", "fuse", "loom-mount")
MOUNT_HELPER_BIN = os.path.join(BUILD, "src", "fuse", "mount.loom")

# The page of each program, and the program.
PROGRAM_PAGES = {
    "loom-mds.8": MDS_BIN,
    "loom-oss.8": OSS_BIN,
    "loom-mount.8": MOUNT_BIN,
    "mount.loom.8": MOUNT_HELPER_BIN,
    "loom.1": LOOM,
}
ALL_PAGES = sorted(list(PROGRAM_PAGES) + ["loom.conf.5"])

# Long options a usage mentions that are another program's or verb's ("a server started with
# --encrypt", "`loom key new --node`"): the page must name them, but describes no item of them.
MENTIONED = {"loom-mount.8": {"--encrypt"}, "nodemap": {"--node"},
             "ost": {"--format", "--index", "--ost", "--replace"}}

# A long option as --help writes it: `--stripe-count`, not the `--` of "without its --".
LONG_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")

# Whatever a verb run without arguments might try to reach: nothing listens on port 1, and no
# config file or mount of this machine is read.
NO_FS_ENV = dict(os.environ, LOOM_FS="127.0.0.1:1", LOOM_CONFIG="/nonexistent/loom.conf",
                 LC_ALL="C.UTF-8")
NO_FS_ENV.pop("LOOM_KEY_FILE", None)

RENDER_ENV = dict(os.environ, LC_ALL="C.UTF-8", MANWIDTH="80", MANPAGER="cat", PAGER="cat")
RENDER_ENV.pop("MAN_KEEP_FORMATTING", None)


def run(argv, env=NO_FS_ENV):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env,
                          stdin=subprocess.DEVNULL)


def help_text(prog, *args):
    """What `prog args --help` prints; it must succeed."""
    r = run([prog, *args, "--help"])
    assert r.returncode == 0, "%s %s --help: exit %d\n%s" % (prog, " ".join(args), r.returncode,
                                                            r.stderr)
    assert r.stdout.startswith("usage:"), r.stdout
    return r.stdout


def long_options(text):
    return sorted(set(LONG_OPTION.findall(text)))


def page_text(page, width=200):
    """The page as a reader sees it (man -l, else groff), with hyphenated line breaks joined, so
    that an option broken over two lines still reads as one word."""
    path = os.path.join(MAN_DIR, page)
    env = dict(RENDER_ENV, MANWIDTH=str(width))
    if shutil.which("man"):
        r = run(["man", "-l", path], env=env)
    else:
        r = run(["groff", "-man", "-Tutf8", "-P-cbou", "-rLL=%dn" % width, path], env=env)
    assert r.returncode == 0, r.stderr
    text = r.stdout.replace("\u2010", "-").replace("\u2212", "-")
    return re.sub(r"(\w)-\n\s+", r"\1-", text)


def missing_words(words, text):
    """The words that text does not hold."""
    return [w for w in words if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(w), text)]


def untagged(options, text):
    """The options that no item of text describes: an item's tag starts its line at column 7
    ("       --mdt DIR", "       -c, --stripe-count COUNT", "       --uid-range A-B, --gid-range
    A-B"); a mention in running text does not count."""
    return [o for o in options
            if not re.search(r"^ {7}(?:[^\n]*?, )?%s(?![\w-])" % re.escape(o), text, re.M)]


def section(page, heading):
    """The text of a section (a heading in column 0) of a rendered page."""
    return re.split(r"\n(?=\S)", page.split("\n%s\n" % heading, 1)[1], 1)[0]


def loom_verbs():
    """The verbs `loom --help` lists, with each one's line there."""
    text = help_text(LOOM)
    block = text.split("\ncommands:\n", 1)[1].split("\n\n", 1)[0]
    verbs = {}
    for line in block.splitlines():
        m = re.match(r"^  ([a-z_]+) +(.*)$", line)
        assert m, "not a command line in `loom --help`: %r" % line
        verbs[m.group(1)] = line
    assert len(verbs) >= 15, verbs
    return verbs


def verb_usage(verb):
    """What a user finds for one verb: its --help, or (for verbs without one) the usage it prints
    when run without arguments; "" when it prints neither."""
    for argv in ([LOOM, verb, "up", "--help"] if verb == "cluster" else [LOOM, verb, "--help"],
                 [LOOM, verb]):
        r = run(argv)
        out = r.stdout + r.stderr
        if "usage: loom %s" % verb in out:
            return out[out.index("usage: loom"):]
    return ""


def need_binaries():
    missing = [p for p in PROGRAM_PAGES.values() if not os.access(p, os.X_OK)]
    if missing:
        pytest.fail("not built: %s (set LOOM_BUILD)" % ", ".join(missing))


# ---- (1) every option --help prints is in the page --------------------------------------------

@pytest.mark.parametrize("page", ["loom-mds.8", "loom-oss.8", "loom-mount.8", "mount.loom.8"])
def test_server_and_mount_pages_name_every_long_option(page):
    need_binaries()
    # Every program takes --help and --version, whether its usage says so or not.
    options = sorted(set(long_options(help_text(PROGRAM_PAGES[page])) + ["--help", "--version"]))
    mentioned = MENTIONED.get(page, set())
    text = page_text(page)
    missing = untagged([o for o in options if o not in mentioned], section(text, "OPTIONS"))
    missing += missing_words(sorted(mentioned), text)
    assert not missing, "%s lacks options that `%s --help` prints: %s" % (
        page, os.path.basename(PROGRAM_PAGES[page]), missing)


def test_loom_mount_page_names_every_mount_option():
    """The -o options are not long options: each one `loom-mount --help` lists, Loom's and the
    kernel's and the ignored ones, is in loom-mount(8)."""
    need_binaries()
    text = help_text(MOUNT_BIN)
    loom_part, rest = text.split("\nLoom options:\n", 1)[1].split("\nMount options handled", 1)
    ours = re.findall(r"^  ([a-z_]+)(?:=[A-Z]+)?\s", loom_part, re.M)      # attr_timeout=SEC
    ours += re.findall(r"(?<![\w-])(-[a-z])\s", loom_part)                  # -f, -d
    kernel = rest.split("FUSE:\n", 1)[1].split("\nIgnored", 1)[0]
    ignored = rest.split("Ignored (for fstab):", 1)[1]
    others = [w.strip().rstrip(".").split("=")[0] for w in (kernel + "," + ignored).split(",")]
    ours, others = sorted(set(ours)), sorted(set(o for o in others if o))
    for must in ("attr_timeout", "key", "soft", "hard", "encrypt", "-f", "-d"):
        assert must in ours, (must, ours)
    for must in ("ro", "max_read", "_netdev", "nofail"):
        assert must in others, (must, others)
    options = section(page_text("loom-mount.8"), "OPTIONS")
    missing = untagged(ours, options)
    assert not missing, "loom-mount.8 describes no item of these Loom options: %s" % missing
    missing = missing_words(others, options)
    assert not missing, "loom-mount.8 lacks these mount options of --help: %s" % missing


def test_loom_page_names_every_verb_and_its_options():
    need_binaries()
    page = page_text("loom.1")
    commands = page.split("\nCOMMANDS\n", 1)[1].split("\nENVIRONMENT\n", 1)[0]
    # Subsections, "   put, get, cat" and the text below it, by the verbs they are about.
    sections = {}
    for heading, body in re.findall(r"^ {3}(\S[^\n]*)\n(.*?)(?=^ {3}\S|\Z)", commands, re.M | re.S):
        for verb in heading.split(", "):
            sections[verb] = body
    top = help_text(LOOM)
    missing = untagged(long_options(top.split("\ncommands:\n")[0]) + ["--help", "--version"],
                       section(page, "OPTIONS"))
    assert not missing, "loom.1 lacks global options of `loom --help`: %s" % missing
    for verb, line in loom_verbs().items():
        assert verb in sections, "loom.1 has no subsection for `loom %s`" % verb
        assert re.search(r"^\s+loom %s\b" % verb, sections[verb], re.M), \
            "loom.1 has no synopsis of `loom %s`" % verb
        options = set(long_options(line) + long_options(verb_usage(verb)))
        mentioned = MENTIONED.get(verb, set())
        missing = untagged(sorted(options - mentioned), sections[verb])
        missing += missing_words(sorted(mentioned), sections[verb])
        assert not missing, "loom.1 lacks options of `loom %s`: %s" % (verb, missing)


def test_loom_verbs_that_print_usage():
    """The verbs whose usage the check above reads; one that stops printing it would hide its
    options from that check."""
    need_binaries()
    silent = set(v for v in loom_verbs() if not verb_usage(v))
    assert silent <= {"df", "ls"}, sorted(silent)


def test_settings_page_lists_every_server_setting():
    """loom.conf(5) names every setting of the servers' --config files: each long option but
    the ones that are not settings."""
    need_binaries()
    page = page_text("loom.conf.5")
    for prog, section in ((MDS_BIN, "loom-mds settings"), (OSS_BIN, "loom-oss settings")):
        part = re.split(r"\n(?= {0,3}\S)", page.split("\n   %s\n" % section, 1)[1], 1)[0]
        names = [o[2:] for o in long_options(help_text(prog))
                 if o not in ("--config", "--help", "--version", "--format", "--replace")]
        missing = missing_words(names, part)
        assert not missing, "loom.conf.5 (%s) lacks: %s" % (section, missing)


# ---- (2) every page renders, without a warning ---------------------------------------------

@pytest.mark.parametrize("page", ALL_PAGES)
def test_page_renders_without_warnings(page):
    if not shutil.which("groff"):
        pytest.skip("groff is not installed (package groff-base)")
    path = os.path.join(MAN_DIR, page)
    r = run(["groff", "-man", "-ww", "-z", "-Tutf8", path], env=RENDER_ENV)
    assert r.returncode == 0 and r.stderr == "", "groff -ww on %s:\n%s" % (page, r.stderr)


@pytest.mark.parametrize("page", ALL_PAGES)
def test_page_reads_at_80_columns(page):
    if not shutil.which("man"):
        pytest.skip("man is not installed (package man-db)")
    r = run(["man", "-l", os.path.join(MAN_DIR, page)], env=RENDER_ENV)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    name = page.rsplit(".", 1)[0].upper()
    assert lines[0].startswith(name + "(" + page.rsplit(".", 1)[1] + ")"), lines[0]
    for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "FILES", "SEE ALSO"):
        assert heading in lines, "%s has no %s section" % (page, heading)
    if page in PROGRAM_PAGES:
        for heading in ("OPTIONS", "EXIT STATUS", "EXAMPLES"):
            assert heading in lines, "%s has no %s section" % (page, heading)
    wide = [ln for ln in lines if len(ln) > 80]
    assert not wide, "%s: lines wider than 80 columns:\n%s" % (page, "\n".join(wide))


# ---- (3) meson installs them under mandir/manN -----------------------------------------------

def test_meson_build_lists_every_page():
    with open(os.path.join(MAN_DIR, "meson.build")) as f:
        listed = re.findall(r"'([^']+\.[1-8])'", f.read())
    on_disk = sorted(os.path.basename(p) for p in glob.glob(os.path.join(MAN_DIR, "*.[1-8]")))
    assert sorted(listed) == on_disk == ALL_PAGES


def test_meson_install_puts_pages_under_mandir(tmp_path):
    meson = shutil.which("meson")
    if not meson:
        pytest.skip("meson is not installed")
    build, dest = tmp_path / "build", tmp_path / "dest"
    r = run([meson, "setup", "--prefix=/usr", str(build), REPO], env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    # Only the pages: they need nothing built.
    r = run([meson, "install", "-C", str(build), "--no-rebuild", "--tags", "man",
             "--destdir", str(dest)], env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    installed = sorted(os.path.relpath(os.path.join(d, f), dest)
                       for d, _, files in os.walk(dest) for f in files)
    assert installed == sorted("usr/share/man/man%s/%s" % (p.rsplit(".", 1)[1], p)
                               for p in ALL_PAGES)
    for p in ALL_PAGES:
        with open(os.path.join(dest, "usr/share/man/man" + p.rsplit(".", 1)[1], p), "rb") as f, \
                open(os.path.join(MAN_DIR, p), "rb") as g:
            assert f.read() == g.read()

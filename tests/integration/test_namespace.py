"""The namespace through the tool: mkdir, ls, mv, rm, and the limits of names."""

import os

from loomutil import MiB, make_random_file, sha256_file


def ls(cluster, path="/"):
    return cluster.loom("ls", path).stdout.split("\n")[:-1]


def test_mkdir_and_ls(cluster):
    cluster.loom("mkdir", "/b", "/a")
    cluster.loom("mkdir", "/a/sub")
    assert ls(cluster) == ["a", "b"], "ls / is not the sorted directory list"
    assert ls(cluster, "/a") == ["sub"]
    long = cluster.loom("ls", "-l", "/").stdout.splitlines()
    assert len(long) == 2 and all(line.startswith("drwxr-xr-x") for line in long), long
    assert long[0].endswith(" a") and long[1].endswith(" b"), long
    assert ls(cluster, "/b") == []


def test_mkdir_p_makes_parents_and_accepts_existing(cluster):
    cluster.loom("mkdir", "-p", "/x/y/z")
    cluster.loom("mkdir", "-p", "/x/y/z")
    assert ls(cluster, "/x/y") == ["z"]


def test_mkdir_existing_fails_with_file_exists(cluster):
    cluster.loom("mkdir", "/a")
    p = cluster.loom("mkdir", "/a", check=False)
    assert p.returncode != 0 and "File exists" in p.stderr, p.stderr


def test_mkdir_under_missing_parent_fails(cluster):
    p = cluster.loom("mkdir", "/nope/sub", check=False)
    assert p.returncode != 0 and "No such file or directory" in p.stderr, p.stderr
    assert ls(cluster) == []


def test_ls_long_shows_sizes(cluster):
    cluster.loom("put", "-", "/f", input="x" * 12345)
    line = cluster.loom("ls", "-l", "/").stdout.strip()
    fields = line.split()
    assert fields[0] == "-rw-r--r--" and fields[4] == "12345" and fields[-1] == "f", line


def test_mv_file_across_directories(cluster, workdir):
    src = os.path.join(workdir, "src")
    out = os.path.join(workdir, "out")
    digest = make_random_file(src, MiB + 3)
    cluster.loom("mkdir", "/d1", "/d2")
    cluster.loom("put", src, "/d1/f")
    cluster.loom("mv", "/d1/f", "/d2/g")
    assert ls(cluster, "/d1") == []
    assert ls(cluster, "/d2") == ["g"]
    cluster.loom("get", "/d2/g", out)
    assert sha256_file(out) == digest


def test_mv_onto_existing_file_replaces_it(cluster):
    cluster.loom("mkdir", "/d")
    cluster.loom("put", "-", "/d/a", input="content of a")
    cluster.loom("put", "-", "/d/b", input="content of b, longer")
    cluster.loom("mv", "/d/a", "/d/b")
    assert ls(cluster, "/d") == ["b"]
    assert cluster.loom("get", "/d/b", "-").stdout == "content of a"


def test_mv_directory_with_contents(cluster):
    cluster.loom("mkdir", "-p", "/src/inner", "/dst")
    cluster.loom("put", "-", "/src/inner/f", input="payload")
    cluster.loom("mv", "/src", "/dst/moved")
    assert ls(cluster) == ["dst"]
    assert cluster.loom("get", "/dst/moved/inner/f", "-").stdout == "payload"


def test_mv_directory_into_itself_fails(cluster):
    cluster.loom("mkdir", "-p", "/a/b")
    p = cluster.loom("mv", "/a", "/a/b/c", check=False)
    assert p.returncode != 0 and "Invalid argument" in p.stderr, p.stderr
    assert ls(cluster) == ["a"] and ls(cluster, "/a") == ["b"] and ls(cluster, "/a/b") == []


def test_mv_missing_source_fails(cluster):
    p = cluster.loom("mv", "/none", "/other", check=False)
    assert p.returncode != 0 and "No such file or directory" in p.stderr, p.stderr


def test_rm_file(cluster):
    cluster.loom("put", "-", "/f", input="x")
    cluster.loom("put", "-", "/g", input="y")
    cluster.loom("rm", "/f")
    assert ls(cluster) == ["g"]
    p = cluster.loom("get", "/f", "-", check=False)
    assert p.returncode != 0 and "No such file or directory" in p.stderr


def test_rm_missing_file_fails(cluster):
    p = cluster.loom("rm", "/missing", check=False)
    assert p.returncode != 0 and "No such file or directory" in p.stderr, p.stderr


def test_rm_non_empty_directory_without_r_fails(cluster):
    cluster.loom("mkdir", "/d")
    cluster.loom("put", "-", "/d/f", input="keep me")
    p = cluster.loom("rm", "/d", check=False)
    assert p.returncode != 0, "rm of a non-empty directory without -r succeeded"
    assert p.stderr.strip(), "no error message"
    assert ls(cluster) == ["d"] and ls(cluster, "/d") == ["f"]
    assert cluster.loom("get", "/d/f", "-").stdout == "keep me"


def test_rm_r_removes_a_tree(cluster):
    cluster.loom("mkdir", "-p", "/t/a/b/c", "/t/d", "/keep")
    for path in ("/t/f0", "/t/a/f1", "/t/a/b/f2", "/t/a/b/c/f3", "/t/d/f4", "/keep/f"):
        cluster.loom("put", "-", path, input=path * 100)
    for i in range(40):  # more entries than one small readdir page
        cluster.loom("put", "-", "/t/d/many%02d" % i, input="m")
    cluster.loom("rm", "-r", "/t")
    assert ls(cluster) == ["keep"]
    assert cluster.loom("get", "/keep/f", "-").stdout == "/keep/f" * 100


def test_name_of_255_bytes_works(cluster):
    name = "n" * 250 + "abcde"
    assert len(name.encode()) == 255
    cluster.loom("put", "-", "/" + name, input="long name")
    dname = "d" * 255
    cluster.loom("mkdir", "/" + dname)
    assert sorted(ls(cluster)) == sorted([name, dname])
    assert cluster.loom("get", "/" + name, "-").stdout == "long name"
    cluster.loom("mv", "/" + name, "/%s/%s" % (dname, name))
    assert ls(cluster, "/" + dname) == [name]


def test_name_of_255_bytes_multibyte_utf8_works(cluster):
    name = "é" * 127 + "x"     # 255 bytes, 128 characters
    assert len(name.encode()) == 255
    cluster.loom("put", "-", "/" + name, input="utf8")
    assert ls(cluster) == [name]


def test_name_of_256_bytes_fails_with_file_name_too_long(cluster):
    name = "n" * 256
    p = cluster.loom("put", "-", "/" + name, input="x", check=False)
    assert p.returncode != 0 and "File name too long" in p.stderr, p.stderr
    p = cluster.loom("mkdir", "/" + name, check=False)
    assert p.returncode != 0 and "File name too long" in p.stderr, p.stderr
    cluster.loom("put", "-", "/short", input="x")
    p = cluster.loom("mv", "/short", "/" + name, check=False)
    assert p.returncode != 0 and "File name too long" in p.stderr, p.stderr
    assert ls(cluster) == ["short"]

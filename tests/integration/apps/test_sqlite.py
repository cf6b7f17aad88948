"""SQLite on the mount, a writer on one node and readers on another: what one commits, a new
connection on the other mount sees; and SQLite's fcntl locks exclude each other across mounts
as they do between two processes on one machine."""

import hashlib
import json

import pytest

from apputil import Findings, SqlAgent, run

SCHEMA = "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL, payload BLOB);"
SELECT = "SELECT id, name, score, hex(payload) FROM t ORDER BY id"


def make_rows(start, n):
    """Rows [id, name, score, payload] with payloads of 0 to ~6 KiB, so that the table spans many
    pages, overflow pages included."""
    return [[i, "row %d" % i, i * 0.5, hashlib.sha256(str(i).encode()).digest() * (i % 200)]
            for i in range(start, start + n)]


def as_read(rows):
    """What SELECT returns for rows (payload as hex(payload) shows it)."""
    return [[i, name, score, payload.hex().upper()] for i, name, score, payload in rows]


def insert(agent, rows):
    for i, name, score, payload in rows:
        agent.execute("INSERT INTO t VALUES (?, ?, ?, ?)", [i, name, score, {"hex": payload.hex()}])


def cli_read(db):
    """A fresh connection (the sqlite3 program) reads the whole table."""
    p = run(["sqlite3", "-readonly", "-json", db,
             "SELECT id, name, score, hex(payload) AS payload FROM t ORDER BY id"])
    return [[r["id"], r["name"], r["score"], r["payload"]] for r in json.loads(p.stdout or "[]")]


def cli_check(db):
    return run(["sqlite3", "-readonly", db, "PRAGMA integrity_check"], check=False)


def describe(got, want):
    if len(got) != len(want):
        return "%d rows, expected %d" % (len(got), len(want))
    bad = [w[0] for g, w in zip(got, want) if g != w]
    return "%d rows differ (ids %s ...)" % (len(bad), bad[:10])


@pytest.fixture
def agents():
    made = []

    def make(path):
        a = SqlAgent(path)
        made.append(a)
        return a

    yield make
    for a in made:
        a.close()


def test_sqlite_writer_on_one_mount_reader_on_the_other(mounted, second_mount, agents):
    a_db, b_db = mounted.p("train.db"), second_mount.p("train.db")
    writer = agents(a_db)
    writer.script(SCHEMA)
    first = make_rows(1, 400)
    writer.execute("BEGIN")
    insert(writer, first)
    writer.execute("COMMIT")

    got = cli_read(b_db)
    assert got == as_read(first), "after A committed, a new connection through mount B reads " + \
        describe(got, as_read(first))

    # The writer's connection stays open; more rows and an update, committed; a fresh
    # connection on B sees everything.
    more = make_rows(401, 300)
    writer.execute("BEGIN")
    insert(writer, more)
    writer.execute("UPDATE t SET score = -1 WHERE id % 100 = 0")
    writer.execute("COMMIT")
    want = as_read(first + more)
    for r in want:
        if r[0] % 100 == 0:
            r[2] = -1.0
    assert writer.execute(SELECT) == want, "the writer does not read back what it committed"
    got = cli_read(b_db)
    assert got == want, "after A's second commit, a new connection through mount B reads " + describe(got, want)
    for db, name in ((b_db, "B"), (a_db, "A")):
        p = cli_check(db)
        assert p.returncode == 0 and p.stdout.strip() == "ok", \
            "PRAGMA integrity_check through mount %s: %s%s" % (name, p.stdout[-2000:], p.stderr[-1000:])


def test_sqlite_locks_exclude_each_other_across_mounts(mounted, second_mount, agents):
    """Two processes, one on each mount, as two on one machine: a reader's SHARED lock holds
    off the writer's commit (SQLITE_BUSY), the writer's RESERVED lock holds off a second writer,
    and once the reader is done the commit goes through and the reader then sees it."""
    a = agents(mounted.p("locks.db"))
    a.script(SCHEMA)
    a.execute("BEGIN")
    insert(a, make_rows(1, 10))
    a.execute("COMMIT")

    b = agents(second_mount.p("locks.db"))
    b.execute("BEGIN")
    assert b.execute("SELECT count(*) FROM t") == [[10]]          # B holds a SHARED lock now

    a.execute("BEGIN IMMEDIATE")                                    # RESERVED: allowed beside SHARED
    insert(a, make_rows(11, 50))
    r = a.execute("COMMIT", expect_error=True)
    assert r.get("error") == "database is locked", \
        "A committed while B (on the other mount) was in a read transaction: %r; SQLite's fcntl " \
        "locks do not exclude each other across mounts" % r
    assert b.execute("SELECT count(*) FROM t") == [[10]], "B's read transaction sees A's uncommitted rows"
    r = b.execute("INSERT INTO t VALUES (1000, 'from B', 0, NULL)", expect_error=True)
    assert r.get("error") == "database is locked", \
        "B wrote while A held the RESERVED lock: %r" % r
    b.execute("COMMIT")                                             # B's read transaction ends

    a.execute("COMMIT")                                             # now it goes through

    got = cli_read(second_mount.p("locks.db"))
    assert got == as_read(make_rows(1, 60)), "after A's commit, a fresh connection through mount B reads " + \
        describe(got, as_read(make_rows(1, 60)))
    p = cli_check(second_mount.p("locks.db"))
    assert p.returncode == 0 and p.stdout.strip() == "ok", "PRAGMA integrity_check: " + p.stdout + p.stderr


def test_sqlite_open_connections_on_two_mounts_take_turns(mounted, second_mount, agents):
    """Two long-lived connections, one per mount (two workers sharing a job database), take turns
    writing. Each transaction starts by taking SQLite's SHARED lock and reading the file's change
    counter, which tells it whether the other side changed the database since; it then reads the
    new pages. So each side sees the other's commits, and no write loses another's."""
    a = agents(mounted.p("jobs.db"))
    a.script(SCHEMA)
    a.execute("BEGIN")
    insert(a, make_rows(1, 10))
    a.execute("COMMIT")
    b = agents(second_mount.p("jobs.db"))
    assert b.execute("SELECT count(*) FROM t") == [[10]]

    f = Findings()
    a.execute("BEGIN")
    insert(a, make_rows(11, 50))
    a.execute("COMMIT")
    got = b.execute("SELECT count(*) FROM t")
    if got != [[60]]:
        # (No fresh connection through mount B here: opening the file anew on B would drop B's
        # cached pages, and hide what follows.)
        f.add("after A committed 50 more rows, B's open connection counts %s rows, expected 60" % got)
    b.execute("INSERT INTO t VALUES (1000, 'from B', 0, NULL)")    # autocommit
    want = as_read(make_rows(1, 60)) + [[1000, "from B", 0.0, ""]]
    for db, name in ((mounted.p("jobs.db"), "A"), (second_mount.p("jobs.db"), "B")):
        got = cli_read(db)
        if got != want:
            f.add("after B then inserted one row, a fresh connection through mount %s reads %s; ids %s"
                  % (name, describe(got, want), compact_ids(got)))
        p = cli_check(db)
        if p.returncode != 0 or p.stdout.strip() != "ok":
            f.add("PRAGMA integrity_check through mount %s: %s%s" % (name, p.stdout[-2000:], p.stderr[-1000:]))
    got = a.execute("SELECT count(*) FROM t")
    if got != [[61]]:
        f.add("A's open connection then counts %s rows, expected 61" % got)
    f.check()


def compact_ids(rows):
    """ids of rows as ranges: 1-10,1000."""
    ids, out = [r[0] for r in rows], []
    for i in ids:
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return ",".join("%d" % a if a == b else "%d-%d" % (a, b) for a, b in out)

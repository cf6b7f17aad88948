"""A SQLite client driven over stdin/stdout, one JSON request per line, so that a test can hold a
connection (and its locks) open in its own process while another process, on another mount,
uses the same database:

  {"sql": "...", "params": [...]}     -> {"rows": [[...], ...]} or {"error": "...", "type": "..."}
                                         (a parameter {"hex": "..."} is a BLOB)
  {"script": "..."}                   -> {"ok": true} or {"error": ...}

Usage: python3 sqlagent.py DBPATH. The connection is in autocommit mode (isolation_level=None,
transactions are explicit BEGIN/COMMIT) and never waits for a lock (timeout=0): a conflict is
answered at once with "database is locked"."""

import json
import sqlite3
import sys


def main():
    db = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if "script" in req:
                db.executescript(req["script"])
                out = {"ok": True}
            else:
                params = [bytes.fromhex(p["hex"]) if isinstance(p, dict) else p for p in req.get("params", [])]
                cur = db.execute(req["sql"], params)
                out = {"rows": [list(r) for r in cur.fetchall()]}
        except sqlite3.Error as e:
            out = {"error": str(e), "type": type(e).__name__}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    db.close()


if __name__ == "__main__":
    main()

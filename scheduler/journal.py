"""The daemon's journal in SQLite: jobs (with profiles), allocation history, counters.

A restarted daemon reads it back (``load``) and knows its queue, running
jobs, profiles and history.

Durability and latency. The daemon commits once per batch of messages,
before it replies (group commit), so a reply is only sent for a state that
is on disk. WAL mode with ``synchronous=NORMAL``: a commit appends to the
WAL with ``write()`` and no ``fsync``; the data is then in the operating
system's page cache, which a ``kill -9`` of the daemon does not touch, so
nothing acknowledged is lost when the daemon dies (a power cut or kernel
crash may lose the last commits, never corrupt the database: SQLite's
documented guarantee for WAL + NORMAL). The ``fsync`` calls are in the
*checkpoints* that copy the WAL into the database. SQLite runs them inside
the commit that crosses ``wal_autocheckpoint`` pages, which put two
``fsync`` (4-10 ms each on this machine's disk) into the request path of
every few hundredth batch. Here automatic checkpoints are off:

* a background thread (its own connection; sqlite3 releases the GIL while
  it works) runs a ``PASSIVE`` checkpoint every ``checkpoint_every``
  seconds, which copies what it can without ever blocking a commit;
* the WAL is only rewound when a checkpoint finishes with no commit in
  between, so the daemon calls :meth:`Journal.idle` when a poll found no
  request: a ``TRUNCATE`` checkpoint then costs nobody a wait. Under
  sustained load with no idle moment, :meth:`idle` with ``force`` truncates
  once the WAL exceeds ``wal_limit_pages``: a rare, bounded pause.

The last connection to close checkpoints the rest.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from typing import Any

from .state import Job, NodeRecord

__all__ = ["Journal"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (job_id INTEGER PRIMARY KEY, state TEXT NOT NULL, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, job_id INTEGER NOT NULL,
    kind TEXT NOT NULL, nprocs INTEGER NOT NULL, busy INTEGER NOT NULL, detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (host TEXT PRIMARY KEY, state TEXT NOT NULL, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS node_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, host TEXT NOT NULL,
    kind TEXT NOT NULL, total INTEGER NOT NULL, detail TEXT NOT NULL);
"""


class Journal:
    def __init__(self, path: str, checkpoint_every: float | None = 1.0, wal_limit_pages: int = 4096):
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)
        self._meta: dict[str, Any] = {}
        self.wal_limit_pages = wal_limit_pages
        self.wal_pages = 0  # WAL size seen by the last checkpoint (background thread)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if checkpoint_every:
            self.db.execute("PRAGMA wal_autocheckpoint=0")
            self._thread = threading.Thread(target=self._checkpointer, args=(checkpoint_every,),
                                            name="journal-checkpoint", daemon=True)
            self._thread.start()

    def _checkpointer(self, every: float) -> None:
        con = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            while not self._stop.wait(every):
                with contextlib.suppress(sqlite3.Error):  # busy: try again next time
                    _, log, _ = con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    self.wal_pages = max(log, 0)
        finally:
            con.close()

    def idle(self, force: bool = False) -> None:
        """Rewind the WAL now (daemon idle), or when ``force`` and it grew past the limit."""
        if self._thread is None or not self.wal_pages:
            return
        if force and self.wal_pages < self.wal_limit_pages:
            return
        with contextlib.suppress(sqlite3.Error):
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            self.wal_pages = 0

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.db.close()

    def save(self, jobs: list[Job], events: list[dict[str, Any]], meta: dict[str, Any],
             nodes: list[NodeRecord] = (), node_events: list[dict[str, Any]] = ()) -> None:
        """Write changed jobs and nodes, new history events and changed counters in one transaction."""
        meta = {k: v for k, v in meta.items() if self._meta.get(k, ...) != v}
        if not jobs and not events and not meta and not nodes and not node_events:
            return
        cur = self.db.cursor()
        cur.execute("BEGIN")
        try:
            cur.executemany(
                "INSERT OR REPLACE INTO jobs(job_id, state, record) VALUES (?, ?, ?)",
                [(j.job_id, j.state, json.dumps(j.to_dict())) for j in jobs])
            cur.executemany(
                "INSERT INTO events(t, job_id, kind, nprocs, busy, detail) VALUES (?, ?, ?, ?, ?, ?)",
                [(e["t"], e["job_id"], e["kind"], e["nprocs"], e["busy"], e["detail"]) for e in events])
            cur.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                            [(k, json.dumps(v)) for k, v in meta.items()])
            cur.executemany("INSERT OR REPLACE INTO nodes(host, state, record) VALUES (?, ?, ?)",
                            [(n.host, n.state, json.dumps(n.to_dict())) for n in nodes])
            cur.executemany("INSERT INTO node_events(t, host, kind, total, detail) VALUES (?, ?, ?, ?, ?)",
                            [(e["t"], e["host"], e["kind"], e["total"], e["detail"]) for e in node_events])
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        self._meta.update(meta)

    def load(self) -> tuple[list[Job], dict[str, Any]]:
        jobs = [Job.from_dict(json.loads(r)) for (r,) in
                self.db.execute("SELECT record FROM jobs ORDER BY job_id")]
        meta = {k: json.loads(v) for k, v in self.db.execute("SELECT key, value FROM meta")}
        self._meta = dict(meta)
        return jobs, meta

    def load_nodes(self) -> list[NodeRecord]:
        return [NodeRecord.from_dict(json.loads(r)) for (r,) in
                self.db.execute("SELECT record FROM nodes ORDER BY host")]

    def node_history(self) -> list[dict[str, Any]]:
        cols = ("t", "host", "kind", "total", "detail")
        return [dict(zip(cols, r, strict=True)) for r in self.db.execute(
            "SELECT t, host, kind, total, detail FROM node_events ORDER BY seq")]

    def history(self) -> list[dict[str, Any]]:
        cols = ("t", "job_id", "kind", "nprocs", "busy", "detail")
        return [dict(zip(cols, r, strict=True)) for r in self.db.execute(
            "SELECT t, job_id, kind, nprocs, busy, detail FROM events ORDER BY seq")]

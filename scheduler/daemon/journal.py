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

Retention. :meth:`Journal.prune` deletes the jobs that ended before a cutoff
(``reshape daemon --retain-days``) with their events, and node events as old,
a bounded batch at a time, by the index on each ended job's ``end_time``; the
freed pages are given back to the file system (``auto_vacuum=INCREMENTAL``,
set when the journal is created), so a daemon that runs for months keeps a
journal of the period it retains.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sqlite3
import threading
from typing import Any

from scheduler.core.job import FINAL
from scheduler.core.state import Job, NodeRecord

__all__ = ["Journal"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (job_id INTEGER PRIMARY KEY, state TEXT NOT NULL, record TEXT NOT NULL,
                                 end_time REAL);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, job_id INTEGER NOT NULL,
    kind TEXT NOT NULL, nprocs INTEGER NOT NULL, busy INTEGER NOT NULL, detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS quarantine (seq INTEGER PRIMARY KEY AUTOINCREMENT, tbl TEXT, key TEXT, record TEXT,
                                       why TEXT);
CREATE TABLE IF NOT EXISTS nodes (host TEXT PRIMARY KEY, state TEXT NOT NULL, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS node_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, host TEXT NOT NULL,
    kind TEXT NOT NULL, total INTEGER NOT NULL, detail TEXT NOT NULL);
"""
_INDEXES = """
CREATE INDEX IF NOT EXISTS jobs_end ON jobs(end_time) WHERE end_time IS NOT NULL;
CREATE INDEX IF NOT EXISTS events_job ON events(job_id);
"""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # JSON's escape of a UTF-16 surrogate (a pair, or a lone one)


def _read(text: str) -> Any:
    """A record's JSON; ValueError for one that holds a non-finite number or a string no UTF-8 can
    hold (a lone surrogate: every later write of it, a reply or a history row, would fail)."""
    x = json.loads(text, parse_constant=_no_constant)
    if _SURROGATE.search(text):
        try:
            json.dumps(x, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"a string is not valid Unicode (a lone surrogate {e.object[e.start]!a})") from None
    return x


def _text(s: str) -> str:
    """A text SQLite can store (UTF-8): a lone surrogate written as its escape, never an error."""
    return s if s.isascii() else s.encode("utf-8", "backslashreplace").decode("utf-8")


def _dumps(record: dict[str, Any]) -> str:
    """A record as JSON; a non-finite number is written as null rather than as ``Infinity`` (which
    no reply could carry, so the record would break every later ``history``)."""
    try:
        return json.dumps(record, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(record), allow_nan=False)


def _finite(x: Any) -> Any:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


class Journal:
    def __init__(self, path: str, checkpoint_every: float | None = 1.0, wal_limit_pages: int = 4096):
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA auto_vacuum=INCREMENTAL")  # takes effect for a new journal only
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)
        if "end_time" not in {r[1] for r in self.db.execute("PRAGMA table_info(jobs)")}:  # an older journal
            self.db.execute("ALTER TABLE jobs ADD COLUMN end_time REAL")
        self.db.executescript(_INDEXES)
        self._meta: dict[str, Any] = {}
        self.quarantined: list[str] = []  # records set aside at load (see _records)
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
                "INSERT OR REPLACE INTO jobs(job_id, state, record, end_time) VALUES (?, ?, ?, ?)",
                [(j.job_id, j.state, _dumps(j.to_dict()), j.end_time if j.state in FINAL else None) for j in jobs])
            cur.executemany(
                "INSERT INTO events(t, job_id, kind, nprocs, busy, detail) VALUES (?, ?, ?, ?, ?, ?)",
                [(e["t"], e["job_id"], e["kind"], e["nprocs"], e["busy"], _text(e["detail"])) for e in events])
            cur.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                            [(k, json.dumps(v)) for k, v in meta.items()])
            cur.executemany("INSERT OR REPLACE INTO nodes(host, state, record) VALUES (?, ?, ?)",
                            [(n.host, n.state, _dumps(n.to_dict())) for n in nodes])
            cur.executemany("INSERT INTO node_events(t, host, kind, total, detail) VALUES (?, ?, ?, ?, ?)",
                            [(e["t"], _text(e["host"]), e["kind"], e["total"], _text(e["detail"]))
                             for e in node_events])
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        self._meta.update(meta)

    def _records(self, table: str, key: str, make) -> list:
        """Every record of ``table`` that reads back; one that does not (not JSON, a value JSON cannot
        carry such as infinity, a string no UTF-8 can hold, a field the code no longer knows) moves to
        ``quarantine`` with the reason, listed in :attr:`quarantined` (the daemon prints each at start),
        so a bad record costs a warning, never a crash loop."""
        out = []
        self.db.text_factory = lambda b: b.decode("utf-8", "replace")  # bytes that are not UTF-8: not JSON below
        try:
            rows = list(self.db.execute(f"SELECT {key}, record FROM {table} ORDER BY {key}"))
        finally:
            self.db.text_factory = str
        for k, r in rows:
            try:
                out.append(make(_read(r)))
            except Exception as e:
                why = f"{type(e).__name__}: {e}"[:300]
                self.db.execute("BEGIN")
                self.db.execute("INSERT INTO quarantine(tbl, key, record, why) VALUES (?, ?, ?, ?)",
                                (table, str(k), r, why))
                self.db.execute(f"DELETE FROM {table} WHERE {key} = ?", (k,))
                self.db.execute("COMMIT")
                self.quarantined.append(f"{table} {k}: {why}")
        return out

    def load(self) -> tuple[list[Job], dict[str, Any]]:
        jobs = self._records("jobs", "job_id", Job.from_dict)
        unset = {k for (k,) in self.db.execute("SELECT job_id FROM jobs WHERE end_time IS NULL")}
        ended = [(j.end_time, j.job_id) for j in jobs if j.job_id in unset and j.state in FINAL and j.end_time]
        if ended:  # written by an older daemon: the column prune reads
            self.db.execute("BEGIN")
            self.db.executemany("UPDATE jobs SET end_time = ? WHERE job_id = ?", ended)
            self.db.execute("COMMIT")
        meta = {k: json.loads(v) for k, v in self.db.execute("SELECT key, value FROM meta")}
        self._meta = dict(meta)
        return jobs, meta

    def load_nodes(self) -> list[NodeRecord]:
        return self._records("nodes", "host", NodeRecord.from_dict)

    def prune(self, before: float, batch: int = 1000) -> int:
        """Delete up to ``batch`` jobs that ended before ``before`` (epoch seconds) with their events, and the
        node events older than that; free pages go back to the file system. The number of jobs deleted."""
        ids = [k for (k,) in self.db.execute("SELECT job_id FROM jobs WHERE end_time < ? ORDER BY end_time LIMIT ?",
                                             (before, batch))]
        self.db.execute("BEGIN")
        try:
            marks = ",".join("?" * len(ids))
            if ids:
                self.db.execute(f"DELETE FROM events WHERE job_id IN ({marks})", ids)
                self.db.execute(f"DELETE FROM jobs WHERE job_id IN ({marks})", ids)
            self.db.execute("DELETE FROM node_events WHERE t < ?", (before,))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        with contextlib.suppress(sqlite3.Error):
            self.db.execute("PRAGMA incremental_vacuum").fetchall()
        return len(ids)

    def node_history(self) -> list[dict[str, Any]]:
        cols = ("t", "host", "kind", "total", "detail")
        return [dict(zip(cols, r, strict=True)) for r in self.db.execute(
            "SELECT t, host, kind, total, detail FROM node_events ORDER BY seq")]

    def history(self, jobs: tuple[int, int] | None = None) -> list[dict[str, Any]]:
        """Every allocation event, or those of the jobs with ids in ``jobs`` (first, last)."""
        cols = ("t", "job_id", "kind", "nprocs", "busy", "detail")
        where, args = ("WHERE job_id BETWEEN ? AND ? ", jobs) if jobs else ("", ())
        return [dict(zip(cols, r, strict=True)) for r in self.db.execute(
            f"SELECT t, job_id, kind, nprocs, busy, detail FROM events {where}ORDER BY seq", args)]

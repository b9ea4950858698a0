"""The daemon's journal in SQLite: jobs (with profiles), allocation history, counters.

A restarted daemon reads it back (``load``) and knows its queue, running
jobs, profiles and history. WAL mode with ``synchronous=NORMAL``: a commit
survives the daemon being killed (``kill -9``); the daemon commits once per
batch of messages, before it replies.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from .state import Job

__all__ = ["Journal"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (job_id INTEGER PRIMARY KEY, state TEXT NOT NULL, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, job_id INTEGER NOT NULL,
    kind TEXT NOT NULL, nprocs INTEGER NOT NULL, busy INTEGER NOT NULL, detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class Journal:
    def __init__(self, path: str):
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    def save(self, jobs: list[Job], events: list[dict[str, Any]], meta: dict[str, Any]) -> None:
        """Write changed jobs, new history events and counters in one transaction."""
        if not jobs and not events and not meta:
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
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise

    def load(self) -> tuple[list[Job], dict[str, Any]]:
        jobs = [Job.from_dict(json.loads(r)) for (r,) in
                self.db.execute("SELECT record FROM jobs ORDER BY job_id")]
        meta = {k: json.loads(v) for k, v in self.db.execute("SELECT key, value FROM meta")}
        return jobs, meta

    def history(self) -> list[dict[str, Any]]:
        cols = ("t", "job_id", "kind", "nprocs", "busy", "detail")
        return [dict(zip(cols, r, strict=True)) for r in self.db.execute(
            "SELECT t, job_id, kind, nprocs, busy, detail FROM events ORDER BY seq")]

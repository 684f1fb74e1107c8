"""The job-history tables, shared by the capture side (inside the server) and the export/analytics side.

They live in the server's store file, ``<dir>/respqueue.db`` (WAL mode). The capture side writes them in
the same commit as the BullMQ write it records; ``respqueue history export`` reads them in one read
transaction and writes Parquet; ``respqueue analytics`` computes figures from that Parquet with Spark.

Only the standard library is imported here: the server imports this module.
"""

from __future__ import annotations

import sqlite3

#: Event kinds recorded in ``job_events.event``.
EVENTS: tuple[str, ...] = (
    "added", "waiting", "delayed", "active", "progress", "retried", "stalled", "completed", "failed", "removed",
)

#: Final states recorded in ``job_final.state``.
FINAL_STATES: tuple[str, ...] = ("completed", "failed")

HISTORY_DDL = """
CREATE TABLE IF NOT EXISTS job_events(
    id INTEGER PRIMARY KEY,
    ts_ms INTEGER NOT NULL,
    prefix TEXT NOT NULL,
    queue TEXT NOT NULL,
    job_id TEXT NOT NULL,
    job_name TEXT,
    event TEXT NOT NULL,
    attempt INTEGER,
    worker TEXT,
    failed_reason TEXT,
    returnvalue_size INTEGER,
    delay_ms INTEGER
);
CREATE INDEX IF NOT EXISTS job_events_ts ON job_events(ts_ms);
CREATE TABLE IF NOT EXISTS job_final(
    prefix TEXT,
    queue TEXT,
    job_id TEXT,
    name TEXT,
    data TEXT,
    opts TEXT,
    timestamp INTEGER,
    delay INTEGER,
    processed_on INTEGER,
    finished_on INTEGER,
    attempts_made INTEGER,
    failed_reason TEXT,
    returnvalue TEXT,
    state TEXT,
    recorded_ms INTEGER,
    PRIMARY KEY(prefix, queue, job_id, finished_on)
);
CREATE TABLE IF NOT EXISTS history_watermarks(
    dest TEXT PRIMARY KEY,
    last_event_id INTEGER NOT NULL,
    last_final_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
"""

#: Column name -> logical type ("int" or "str"), in table order. Export and analytics derive their
#: Arrow and Spark schemas from these, so all three sides agree on names and types.
JOB_EVENTS_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "int"), ("ts_ms", "int"), ("prefix", "str"), ("queue", "str"), ("job_id", "str"),
    ("job_name", "str"), ("event", "str"), ("attempt", "int"), ("worker", "str"), ("failed_reason", "str"),
    ("returnvalue_size", "int"), ("delay_ms", "int"),
)
JOB_FINAL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("prefix", "str"), ("queue", "str"), ("job_id", "str"), ("name", "str"), ("data", "str"), ("opts", "str"),
    ("timestamp", "int"), ("delay", "int"), ("processed_on", "int"), ("finished_on", "int"),
    ("attempts_made", "int"), ("failed_reason", "str"), ("returnvalue", "str"), ("state", "str"),
    ("recorded_ms", "int"),
)
TABLES: dict[str, tuple[tuple[str, str], ...]] = {"job_events": JOB_EVENTS_COLUMNS, "job_final": JOB_FINAL_COLUMNS}


def create_history_tables(conn: sqlite3.Connection) -> None:
    """Create the history tables and indexes if they do not exist (idempotent)."""
    conn.executescript(HISTORY_DDL)


def has_history(conn: sqlite3.Connection) -> bool:
    """True when the database holds the history tables."""
    row = conn.execute("SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN ('job_events','job_final')")
    return row.fetchone()[0] == 2

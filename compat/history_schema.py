"""The job-history tables, shared by the capture side (inside the server) and the export/analytics side.

They live in the server's store file, ``<dir>/respqueue.db`` (WAL mode). The capture side writes them in
the same commit as the BullMQ write it records; ``respqueue history export`` reads them in one read
transaction and writes Parquet; ``respqueue analytics`` computes figures from that Parquet with Spark.

Since store schema version 7 the history is written in chunks: one ``history_chunks`` row holds the events
of one queue in one journal batch (at most :data:`CHUNK_MAX`), packed as a JSON array, and the final records
of the jobs that finished in it, so a batch of many job transitions writes one row per queue it touched.
``job_events`` and ``job_final`` are views with the columns they had as tables (a row per event, a row per
finished job), unpacked with SQLite's ``json_each``: SQL written for the tables keeps working (reads, and
``INSERT`` through ``INSTEAD OF`` triggers, a chunk per row inserted that way).

An event's ``id`` is ``chunk id * 65536 + its index in the chunk``: ids grow with every chunk written and
are never reused (``AUTOINCREMENT``), which the export's watermark relies on. The rows a store of an
earlier version holds stay in ``job_events_legacy``/``job_final_legacy`` (the old tables, renamed when the
store is upgraded; empty in a store created since), unioned into the views with their ids, and the first
chunk's id is set above them (``sqlite_sequence``).

Only the standard library is imported here: the server imports this module.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

#: Event kinds recorded in ``job_events.event``.
EVENTS: tuple[str, ...] = (
    "added", "waiting", "delayed", "active", "progress", "retried", "stalled", "completed", "failed", "removed",
)

#: Final states recorded in ``job_final.state``.
FINAL_STATES: tuple[str, ...] = ("completed", "failed")

#: events per chunk at most (an event's id is chunk id * ID_SPAN + its index, so fewer than ID_SPAN)
CHUNK_MAX = 4096
ID_SPAN = 65536

#: The chunk table. ``events``: a JSON array of ``[ts_ms, job_id, job_name, event, attempt, worker,
#: failed_reason, returnvalue_size, delay_ms]``, each without its trailing nulls; ``finals``: a JSON array of
#: ``[job_id, name, data, opts, timestamp, delay, processed_on, finished_on, attempts_made, failed_reason,
#: returnvalue, state]`` or NULL;
#: ``ts_ms``/``last_ms``: the first and last event's time; ``recorded_ms``: when the batch closed.
CHUNKS_DDL = """
CREATE TABLE IF NOT EXISTS history_chunks(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts_ms INTEGER NOT NULL,
    last_ms INTEGER NOT NULL,
    recorded_ms INTEGER NOT NULL,
    prefix TEXT NOT NULL,
    queue TEXT NOT NULL,
    n INTEGER NOT NULL,
    events TEXT NOT NULL,
    finals TEXT
);
CREATE INDEX IF NOT EXISTS history_chunks_last ON history_chunks(last_ms);
CREATE TABLE IF NOT EXISTS job_events_legacy(
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
CREATE INDEX IF NOT EXISTS job_events_ts ON job_events_legacy(ts_ms);
CREATE TABLE IF NOT EXISTS job_final_legacy(
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
"""
WATERMARKS_DDL = """CREATE TABLE IF NOT EXISTS history_watermarks(
    dest TEXT PRIMARY KEY,
    last_event_id INTEGER NOT NULL,
    last_final_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
)"""

# The unpacked columns of a chunk's event ``e`` and final record ``f`` (json_each rows), in table order.
_EV = ("c.id * 65536 + e.key", "e.value ->> 0", "c.prefix", "c.queue", "e.value ->> 1", "e.value ->> 2",
       "e.value ->> 3", "e.value ->> 4", "e.value ->> 5", "e.value ->> 6", "e.value ->> 7", "e.value ->> 8")
_FI = ("c.prefix", "c.queue", "f.value ->> 0", "f.value ->> 1", "f.value ->> 2", "f.value ->> 3", "f.value ->> 4",
       "f.value ->> 5", "f.value ->> 6", "f.value ->> 7", "f.value ->> 8", "f.value ->> 9", "f.value ->> 10",
       "f.value ->> 11", "c.recorded_ms")

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
_EV_NAMES = ", ".join(n for n, _ in JOB_EVENTS_COLUMNS)
_FI_NAMES = ", ".join(n for n, _ in JOB_FINAL_COLUMNS)


def _cols(exprs: tuple[str, ...], names: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{x} AS {n}" for x, (n, _) in zip(exprs, names, strict=True))


def events_select(where: str = "", legacy_where: str = "") -> str:
    """``SELECT`` of the ``job_events`` columns: the legacy rows (``legacy_where``), then every chunk's
    events (``where``, on the chunk ``c`` and its event ``e``)."""
    return (f"SELECT {_EV_NAMES} FROM job_events_legacy{' WHERE ' + legacy_where if legacy_where else ''}"
            f" UNION ALL SELECT {_cols(_EV, JOB_EVENTS_COLUMNS)} FROM history_chunks c, json_each(c.events) e"
            f"{' WHERE ' + where if where else ''}")


def finals_select(where: str = "", legacy_where: str = "") -> str:
    """``SELECT`` of the ``job_final`` columns (``where`` on the chunk ``c`` and its record ``f``)."""
    return (f"SELECT {_FI_NAMES} FROM job_final_legacy{' WHERE ' + legacy_where if legacy_where else ''}"
            f" UNION ALL SELECT {_cols(_FI, JOB_FINAL_COLUMNS)} FROM history_chunks c, json_each(c.finals) f"
            f"{' WHERE ' + where if where else ''}")


def _ev_json(new: str = "NEW") -> str:
    return (f"json_array(json_array({new}.ts_ms, {new}.job_id, {new}.job_name, {new}.event, {new}.attempt,"
            f" {new}.worker, {new}.failed_reason, {new}.returnvalue_size, {new}.delay_ms))")


VIEWS_DDL = f"""
CREATE VIEW IF NOT EXISTS job_events AS {events_select()};
CREATE VIEW IF NOT EXISTS job_final AS {finals_select()};
CREATE TRIGGER IF NOT EXISTS job_events_insert INSTEAD OF INSERT ON job_events BEGIN
    INSERT INTO history_chunks(ts_ms, last_ms, recorded_ms, prefix, queue, n, events)
    VALUES(NEW.ts_ms, NEW.ts_ms, NEW.ts_ms, NEW.prefix, NEW.queue, 1, {_ev_json()});
END;
CREATE TRIGGER IF NOT EXISTS job_final_insert INSTEAD OF INSERT ON job_final BEGIN
    INSERT INTO history_chunks(ts_ms, last_ms, recorded_ms, prefix, queue, n, events, finals)
    VALUES(coalesce(NEW.recorded_ms, 0), coalesce(NEW.recorded_ms, 0), coalesce(NEW.recorded_ms, 0),
           NEW.prefix, NEW.queue, 0, '[]',
           json_array(json_array(NEW.job_id, NEW.name, NEW.data, NEW.opts, NEW.timestamp, NEW.delay,
                                 NEW.processed_on, NEW.finished_on, NEW.attempts_made, NEW.failed_reason,
                                 NEW.returnvalue, NEW.state)));
END;
"""


def _split(script: str) -> list[str]:
    """Single statements of a DDL script (``;`` inside a trigger's body kept: sqlite3.complete_statement)."""
    out: list[str] = []
    cur = ""
    for line in script.strip().splitlines(keepends=True):
        cur += line
        if sqlite3.complete_statement(cur):
            out.append(cur.strip())
            cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


#: every history statement, in order (idempotent): what the store's migration to version 7 runs
HISTORY_STATEMENTS: list[str] = _split(CHUNKS_DDL) + [WATERMARKS_DDL] + _split(VIEWS_DDL)
HISTORY_DDL = ";\n".join(HISTORY_STATEMENTS) + ";\n"
#: the history's tables (views and triggers are not tables: repair recreates them from the schema)
HISTORY_TABLES = ("history_chunks", "job_events_legacy", "job_final_legacy", "history_watermarks")
#: legacy table -> the name it had before schema version 7 (repair of an old store copies from that)
LEGACY_NAMES = {"job_events_legacy": "job_events", "job_final_legacy": "job_final"}


# the first chunk's id above the legacy events' ids (once: AUTOINCREMENT keeps the largest id since)
_SEED = ("INSERT INTO sqlite_sequence(name, seq) SELECT 'history_chunks', max(id) / 65536 + 1 FROM job_events_legacy"
         " WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'history_chunks') HAVING max(id) IS NOT NULL")


def upgrade_legacy(conn: sqlite3.Connection) -> None:
    """A store of an earlier version holds the history as the tables ``job_events``/``job_final`` (a row
    per event): rename them to ``*_legacy`` so the views can take their names, and start the chunks' ids
    above theirs. Runs before :data:`HISTORY_STATEMENTS` in a transaction (idempotent: nothing to do once
    they are views and the chunks' id sequence exists). The statements themselves write no rows (the store's
    rollback runs them in a scratch database)."""
    kinds = dict(conn.execute("SELECT name, type FROM sqlite_master WHERE name IN ('job_events', 'job_final',"
                              " 'job_events_legacy', 'job_final_legacy')").fetchall())
    for legacy, old in LEGACY_NAMES.items():
        if kinds.get(old) == "table":
            if legacy in kinds:  # an empty legacy table made by a tool beside the old one: the old one wins
                conn.execute(f"DROP TABLE {legacy}")
            conn.execute(f"ALTER TABLE {old} RENAME TO {legacy}")
            kinds[legacy] = "table"
    if kinds.get("job_events_legacy") == "table":
        conn.execute(HISTORY_STATEMENTS[0])  # history_chunks (and with it sqlite_sequence)
        conn.execute(_SEED)


def create_history_tables(conn: sqlite3.Connection) -> None:
    """Create the history tables, views and indexes if they do not exist, upgrading a store of an earlier
    version first (idempotent). Not for a store a server of an earlier version still writes to."""
    in_tx = conn.in_transaction
    if not in_tx:
        conn.execute("BEGIN IMMEDIATE")
    try:
        upgrade_legacy(conn)
        for stmt in HISTORY_STATEMENTS:
            conn.execute(stmt)
    except BaseException:
        if not in_tx:
            conn.execute("ROLLBACK")
        raise
    if not in_tx:
        conn.execute("COMMIT")


def ensure_watermarks(conn: sqlite3.Connection) -> None:
    """The exporter's ``history_watermarks`` table (the only history table a reader creates)."""
    conn.execute(WATERMARKS_DDL)
    if conn.in_transaction:
        conn.commit()


def has_history(conn: sqlite3.Connection) -> bool:
    """True when the database holds the history (as views over chunks, or the tables of an earlier version)."""
    row = conn.execute("SELECT count(*) FROM sqlite_master WHERE name IN ('job_events','job_final')"
                       " AND type IN ('table', 'view')")
    return row.fetchone()[0] == 2


def is_chunked(conn: sqlite3.Connection) -> bool:
    """True for a store of version 7 or later (chunks); False for the row-per-event tables of earlier ones."""
    row = conn.execute("SELECT count(*) FROM sqlite_master WHERE name='history_chunks' AND type='table'")
    return row.fetchone()[0] == 1


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _untail(e: Any) -> Any:
    """``e`` without its trailing nulls."""
    n = len(e)
    while n and e[n - 1] is None:
        n -= 1
    return e if n == len(e) else e[:n]


def json_text(v: Any) -> str:
    """``v`` as the chunks' JSON has it (compact, not ASCII-escaped): e.g. a job id to search a chunk for."""
    return _dumps(v)


def pack(events: list[Any]) -> str:
    """A chunk's ``events`` (or ``finals``) column from its list of event (final) arrays, each without its
    trailing nulls (``->>`` reads a missing element as null, ``history_export`` pads them back)."""
    return _dumps([_untail(e) for e in events])


def chunk_rows(events: Iterable[tuple], finals: Iterable[tuple], size: int = CHUNK_MAX) -> list[tuple]:
    """``history_chunks`` rows (for :data:`CHUNK_INSERT`) of ``job_events`` rows without id and ``job_final``
    rows (both in table column order), for tools that write a history themselves (synthetic data, imports):
    events grouped per (prefix, queue), ``size`` per chunk at most, in the order given; final records in
    chunks of their own, one per (prefix, queue, recorded_ms), so each keeps its ``recorded_ms``."""
    groups: dict[tuple[str, str], list[list[Any]]] = {}
    for ev in events:
        groups.setdefault((ev[1], ev[2]), []).append([ev[0], *ev[3:]])
    rows: list[tuple] = []
    for (prefix, queue), evs in groups.items():
        for i in range(0, len(evs), size):
            part = evs[i:i + size]
            ts = [e[0] for e in part]
            rows.append((min(ts), max(ts), max(ts), prefix, queue, len(part), pack(part), None))
    fgroups: dict[tuple[str, str, int], list[list[Any]]] = {}
    for f in finals:
        fgroups.setdefault((f[0], f[1], f[14] or 0), []).append(list(f[2:14]))
    for (prefix, queue, rec), fis in fgroups.items():
        rows.append((rec, rec, rec, prefix, queue, 0, "[]", pack(fis)))
    return rows


CHUNK_INSERT = ("INSERT INTO history_chunks(ts_ms, last_ms, recorded_ms, prefix, queue, n, events, finals)"
                " VALUES(?,?,?,?,?,?,?,?)")


def max_event_id(conn: sqlite3.Connection) -> int:
    """The id of the newest event stored (0: none), read from the newest chunk that has events (no unpacking);
    every event to come gets a larger one."""
    legacy = conn.execute("SELECT coalesce(max(id), 0) FROM job_events_legacy").fetchone()[0]
    top = conn.execute("SELECT id * 65536 + n - 1 FROM history_chunks WHERE n > 0 ORDER BY id DESC LIMIT 1").fetchone()
    return max(legacy, 0 if top is None else top[0])

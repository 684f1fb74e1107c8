"""Job history in chunks (compat/history_schema.py, store schema version 7): the rows a BullMQ workload costs,
the ``job_events``/``job_final`` views over the chunks (plain SQL, json_each, INSERT through the triggers), and
the upgrade of a store written by the release before (history as a row per event) with its rows, ids and export
watermark kept."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sqlite3
import subprocess

import pytest
import redis

import compat.history  # noqa: F401 - registers the history schema with the store (repair here needs it)
from compat.history_schema import CHUNK_MAX, ID_SPAN, TABLES
from respqueue.persistence.store import MIGRATIONS, SCHEMA_VERSION, SCHEMAS, repair

from .servers import ROOT, ServerProcess, start_respqueue

INTEROP = os.path.join(ROOT, "interop")
needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(os.path.join(INTEROP, "node_modules", "bullmq")),
    reason="run `npm ci` in interop/ (and install node) for the BullMQ workloads",
)

# The history tables as the release before chunks (store schema version 6) created them: a frozen copy, so that
# the upgrade test opens what that release wrote.
V6_HISTORY_DDL = """
CREATE TABLE IF NOT EXISTS job_events(
    id INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL, prefix TEXT NOT NULL, queue TEXT NOT NULL,
    job_id TEXT NOT NULL, job_name TEXT, event TEXT NOT NULL, attempt INTEGER, worker TEXT,
    failed_reason TEXT, returnvalue_size INTEGER, delay_ms INTEGER
);
CREATE INDEX IF NOT EXISTS job_events_ts ON job_events(ts_ms);
CREATE TABLE IF NOT EXISTS job_final(
    prefix TEXT, queue TEXT, job_id TEXT, name TEXT, data TEXT, opts TEXT, timestamp INTEGER, delay INTEGER,
    processed_on INTEGER, finished_on INTEGER, attempts_made INTEGER, failed_reason TEXT, returnvalue TEXT,
    state TEXT, recorded_ms INTEGER, PRIMARY KEY(prefix, queue, job_id, finished_on)
);
CREATE TABLE IF NOT EXISTS history_watermarks(
    dest TEXT PRIMARY KEY, last_event_id INTEGER NOT NULL, last_final_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL
);
"""
OLD_EVENTS = 70_000  # more than one chunk's id span: new ids must start above them


def sql(srv: ServerProcess, q: str, args: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(os.path.join(srv.workdir, "data", "respqueue.db"))
    try:
        return conn.execute(q, args).fetchall()
    finally:
        conn.close()


def history_rows(srv: ServerProcess) -> int:
    """Rows in the store's history tables (views are not tables: they hold no rows of their own)."""
    names = [r[0] for r in sql(srv, "SELECT name FROM sqlite_master WHERE type='table' AND"
                                    " (name LIKE 'job_%' OR name = 'history_chunks')")]
    return sum(sql(srv, f"SELECT count(*) FROM {n}")[0][0] for n in names)  # noqa: S608 - names from the schema


@pytest.fixture
def server():
    started: list[ServerProcess] = []

    def start(*extra: str, workdir: str | None = None) -> ServerProcess:
        srv = start_respqueue(*extra, workdir=workdir)
        started.append(srv)
        return srv

    yield start
    for s in started:
        s.stop()


@needs_node
def test_bullmq_jobs_cost_fewer_history_rows_than_jobs(server):
    """5 events and a final record per job used to be 5 rows per job; in chunks a batch of transitions is one
    row per queue, so N jobs added and processed write far fewer than N history rows."""
    n = 600
    srv = server()
    p = subprocess.run(["node", os.path.join("bench", "bullmq_bench.js"), str(srv.port), "process", "--jobs", str(n)],
                       cwd=INTEROP, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    # every transition is there through the views
    counts = dict(sql(srv, "SELECT event, count(*) FROM job_events GROUP BY event"))
    assert counts.get("added") == n and counts.get("active") == n and counts.get("completed") == n, counts
    assert sql(srv, "SELECT count(*), count(DISTINCT job_id) FROM job_final WHERE state='completed'") == [(n, n)]
    events = sum(counts.values())
    rows = history_rows(srv)
    assert rows < n // 2, (rows, events)  # old code: events + finals = ~5 rows per job
    assert sql(srv, "SELECT sum(n) FROM history_chunks") == [(events,)]
    # ids grow with the order of each job's events
    for (jid,) in sql(srv, "SELECT job_id FROM job_final LIMIT 20"):
        got = sql(srv, "SELECT event FROM job_events WHERE job_id=? ORDER BY id", (jid,))
        assert [e[0] for e in got][0] == "added" and got[-1][0] == "completed", got


def test_one_batch_is_one_chunk_per_queue_and_full_chunks_split(server):
    srv = server()
    r = redis.Redis(port=srv.port)
    p = r.pipeline(transaction=True)
    for i in range(CHUNK_MAX + 10):
        p.xadd("bull:big:events", {"event": "waiting", "jobId": str(i)})
    p.xadd("bull:other:events", {"event": "added", "jobId": "x", "name": "nx"})
    p.xadd("bull:other:events", {"event": "failed", "jobId": "x", "failedReason": "boom"})
    p.execute()
    chunks = sql(srv, "SELECT queue, n, finals IS NOT NULL FROM history_chunks ORDER BY id")
    assert chunks == [("big", CHUNK_MAX, 0), ("big", 10, 0), ("other", 2, 1)]
    ids = [r[0] for r in sql(srv, "SELECT id FROM job_events WHERE queue='big' ORDER BY id")]
    assert len(ids) == CHUNK_MAX + 10 and len(set(ids)) == len(ids)
    assert [int(j) for (j,) in sql(srv, "SELECT job_id FROM job_events WHERE queue='big' ORDER BY id")] == \
        list(range(CHUNK_MAX + 10))
    assert ids[CHUNK_MAX] - ids[0] >= ID_SPAN  # the next chunk's ids start at its own chunk id
    assert sql(srv, "SELECT job_id, state, failed_reason FROM job_final") == [("x", "failed", "boom")]


def test_views_answer_sql(server):
    """The views have the tables' columns and types, and take the SQL users wrote for the tables."""
    srv = server()
    r = redis.Redis(port=srv.port)
    r.hset("bull:q:1", mapping={"name": "mail", "timestamp": "1000", "atm": "0", "delay": "0", "data": '{"to":"ü"}',
                                "opts": "{}"})
    r.xadd("bull:q:events", {"event": "added", "jobId": "1", "name": "mail"})
    p = r.pipeline(transaction=True)  # as moveToActive does: the worker is set after the event
    p.xadd("bull:q:events", {"event": "active", "jobId": "1"})
    p.hset("bull:q:1", mapping={"pb": "w1", "processedOn": "1001"})
    p.execute()
    r.hset("bull:q:1", mapping={"atm": "1", "finishedOn": "1002"})
    r.xadd("bull:q:events", {"event": "completed", "jobId": "1", "returnvalue": '"done"'})
    cols = [c[1] for c in sql(srv, "PRAGMA table_info(job_events)")]
    assert cols == [n for n, _ in TABLES["job_events"]]
    assert [c[1] for c in sql(srv, "PRAGMA table_info(job_final)")] == [n for n, _ in TABLES["job_final"]]
    assert sql(srv, "SELECT typeof(id), typeof(ts_ms), typeof(job_id), typeof(attempt) FROM job_events"
                    " WHERE event='completed'") == [("integer", "integer", "text", "integer")]
    assert sql(srv, "SELECT event, attempt, worker, returnvalue_size FROM job_events WHERE job_id='1' ORDER BY id") \
        == [("added", None, None, None), ("active", 1, "w1", None), ("completed", 1, "w1", 6)]
    # a join of the two views, an aggregate, json on a column
    assert sql(srv, "SELECT f.state, f.data ->> '$.to', count(e.id), max(e.ts_ms) <= f.recorded_ms"
                    " FROM job_final f JOIN job_events e ON e.queue=f.queue AND e.job_id=f.job_id"
                    " GROUP BY f.job_id") == [("completed", "ü", 3, 1)]
    # INSERT through the views (a chunk per row): what tools written for the tables do
    conn = sqlite3.connect(os.path.join(srv.workdir, "data", "respqueue.db"), timeout=10)
    with conn:
        conn.execute("INSERT INTO job_events(ts_ms, prefix, queue, job_id, job_name, event) VALUES(5, 'p', 'q9',"
                     " 'k', 'nk', 'added')")
        conn.execute("INSERT INTO job_final(prefix, queue, job_id, state, finished_on, recorded_ms)"
                     " VALUES('p', 'q9', 'k', 'failed', 6, 7)")
    conn.close()
    assert sql(srv, "SELECT job_id, job_name, event, ts_ms FROM job_events WHERE queue='q9'") == [
        ("k", "nk", "added", 5)]
    assert sql(srv, "SELECT job_id, state, finished_on, recorded_ms FROM job_final WHERE queue='q9'") == [
        ("k", "failed", 6, 7)]
    r.xadd("bull:q:events", {"event": "removed", "jobId": "1"})
    assert sql(srv, "SELECT count(*) FROM job_events") == [(5,)]  # the server's chunk ids go on after those


def _v6_store(d: str) -> None:
    """A store as the release before chunks wrote it: schema version 6, history a row per event."""
    os.makedirs(d)
    conn = sqlite3.connect(os.path.join(d, "respqueue.db"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    registered = {s for _v, stmts, _t in SCHEMAS.values() for s in stmts}
    for v in range(1, 7):
        for stmt in MIGRATIONS[v]:
            if stmt not in registered:
                conn.execute(stmt)
    conn.executescript(V6_HISTORY_DDL)
    conn.execute("INSERT INTO meta VALUES('schema_version', '6')")
    conn.execute("BEGIN")
    conn.execute("INSERT INTO keys(db, key, type, expire_ms, version, value) VALUES(0, ?, 'string', NULL, 1, ?)",
                 (b"k", b"v"))
    conn.executemany(
        "INSERT INTO job_events(id, ts_ms, prefix, queue, job_id, job_name, event, attempt) VALUES(?,?,?,?,?,?,?,?)",
        [(i, 1000 + i, "bull", "old", str(i), "n", "added", None) for i in range(1, OLD_EVENTS + 1)])
    conn.execute("INSERT INTO job_final VALUES('bull','old','1','n','{}','{}',1000,0,1001,1002,1,NULL,'7',"
                 "'completed',1003)")
    conn.execute("INSERT INTO history_watermarks VALUES(?, ?, 1003, 1)", (os.path.abspath(d + "-export"), OLD_EVENTS))
    conn.execute("COMMIT")
    conn.close()


def test_upgrade_of_a_store_with_rows_per_event(server, tmp_path):
    pytest.importorskip("pyarrow")
    from compat.history_export import export_history, read_export

    data = str(tmp_path / "s0" / "data")
    _v6_store(data)
    srv = server(workdir=str(tmp_path / "s0"))
    r = redis.Redis(port=srv.port)
    assert r.get("k") == b"v"
    assert sql(srv, "SELECT value FROM meta WHERE name='schema_version'") == [(str(SCHEMA_VERSION),)]
    kinds = dict(sql(srv, "SELECT name, type FROM sqlite_master WHERE name LIKE 'job_%' OR name LIKE 'history_%'"))
    assert kinds["job_events"] == kinds["job_final"] == "view"
    assert kinds["job_events_legacy"] == kinds["job_final_legacy"] == kinds["history_chunks"] == "table"
    r.hset("bull:old:2", mapping={"name": "n2", "processedOn": "5"})
    r.xadd("bull:old:events", {"event": "added", "jobId": "2"})
    r.xadd("bull:old:events", {"event": "completed", "jobId": "2", "returnvalue": "1"})
    # old rows with their ids, new ones after them
    assert sql(srv, "SELECT count(*), min(id), max(id) FROM job_events WHERE id <= ?", (OLD_EVENTS,)) == [
        (OLD_EVENTS, 1, OLD_EVENTS)]
    new = sql(srv, "SELECT id, job_id, event FROM job_events WHERE id > ? ORDER BY id", (OLD_EVENTS,))
    assert [e[1:] for e in new] == [("2", "added"), ("2", "completed")] and new[0][0] > OLD_EVENTS
    assert sql(srv, "SELECT job_id, returnvalue FROM job_final ORDER BY job_id") == [("1", "7"), ("2", "1")]
    # the export's watermark (written by the old release) goes on: only the new events are exported
    res = export_history(data, data + "-export", settle_ms=-10**9)
    assert res.events == 2 and res.finals == 1 and res.last_event_id == new[-1][0]
    ev = read_export(data + "-export", "job_events").to_pydict()
    assert sorted(ev["id"]) == [e[0] for e in new]
    # reopening changes nothing; repair keeps old and new rows
    srv.stop()
    srv2 = server(workdir=str(tmp_path / "s0"))
    assert redis.Redis(port=srv2.port).get("k") == b"v"
    srv2.stop()
    ok, msg = repair(data)
    assert ok, msg
    assert sql(srv, "SELECT count(*) FROM job_events") == [(OLD_EVENTS + 2,)]
    assert sql(srv, "SELECT count(*) FROM job_final") == [(2,)]


def test_repair_of_a_store_with_rows_per_event(tmp_path):
    """``respqueue repair`` on a store of the release before: the old tables go into the legacy ones."""
    data = str(tmp_path / "data")
    _v6_store(data)
    if importlib.util.find_spec("pyarrow") is not None:
        # before any server of this version opened it: the export reads the old tables as they are
        from compat.history_export import export_history

        res = export_history(data, str(tmp_path / "out"), settle_ms=-10**9)
        assert (res.events, res.finals, res.last_event_id) == (OLD_EVENTS, 1, OLD_EVENTS)
    ok, msg = repair(data)
    assert ok, msg
    conn = sqlite3.connect(os.path.join(data, "respqueue.db"))
    try:
        assert conn.execute("SELECT count(*), max(id) FROM job_events").fetchone() == (OLD_EVENTS, OLD_EVENTS)
        assert conn.execute("SELECT job_id FROM job_final").fetchall() == [("1",)]
        assert conn.execute("SELECT seq FROM sqlite_sequence WHERE name='history_chunks'").fetchone()[0] * ID_SPAN \
            > OLD_EVENTS
    finally:
        conn.close()

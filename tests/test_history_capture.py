"""Job-history capture inside the server (compat/history.py): real BullMQ workloads on respqueue, then the
history tables in ``<dir>/respqueue.db`` are read with sqlite3 and compared with what BullMQ reported."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from typing import Any

import pytest
import redis

from compat.history import parse_retention, parse_switch
from respqueue.persistence.store import MIGRATIONS, SCHEMA_VERSION, repair

from .servers import ROOT, ServerProcess, start_respqueue

INTEROP = os.path.join(ROOT, "interop")
needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(os.path.join(INTEROP, "node_modules", "bullmq")),
    reason="run `npm ci` in interop/ (and install node) for the BullMQ workloads",
)


def workload(name: str, port: int, queue: str | None = None, timeout: float = 90, env: dict | None = None) -> Any:
    args = ["node", os.path.join("bullmq", "history_workload.js"), name, str(port)] + ([queue] if queue else [])
    p = subprocess.run(args, cwd=INTEROP, capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    out = json.loads(p.stdout)
    assert "error" not in out, out
    return out


def db_rows(srv: ServerProcess, sql: str, args: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(os.path.join(srv.workdir, "data", "respqueue.db"))
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def events_of(srv: ServerProcess, queue: str, job_id: str) -> list[tuple]:
    return db_rows(srv, "SELECT event, attempt, worker, failed_reason, returnvalue_size, delay_ms, job_name, ts_ms, id"
                   " FROM job_events WHERE queue=? AND job_id=? ORDER BY id", (queue, job_id))


def finals_of(srv: ServerProcess, queue: str) -> dict[str, dict[str, Any]]:
    conn = sqlite3.connect(os.path.join(srv.workdir, "data", "respqueue.db"))
    conn.row_factory = sqlite3.Row
    try:
        return {r["job_id"]: dict(r) for r in conn.execute("SELECT * FROM job_final WHERE queue=?", (queue,))}
    finally:
        conn.close()


@pytest.fixture
def server(tmp_path):
    started: list[ServerProcess] = []

    def start(*extra: str, env: dict[str, str] | None = None) -> ServerProcess:
        old = dict(os.environ)
        os.environ.update(env or {})
        wd = tmp_path / f"s{len(started)}"
        wd.mkdir(exist_ok=True)
        try:
            srv = start_respqueue(*extra, workdir=str(wd))
        finally:
            os.environ.clear()
            os.environ.update(old)
        started.append(srv)
        return srv

    yield start
    for s in started:
        s.stop()


def js(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"))


# ---- BullMQ workloads -------------------------------------------------------------------------------------

LIFECYCLE = {
    "ok": ["added", "waiting", "active", "completed"],
    "progress": ["added", "waiting", "active", "progress", "completed"],
    "flaky-backoff": ["added", "waiting", "active", "retried", "waiting", "active", "retried", "waiting", "active",
                      "completed"],
    "flaky-now": ["added", "waiting", "active", "retried", "active", "completed"],
    "doomed": ["added", "waiting", "active", "retried", "active", "failed"],
    "delayed": ["added", "delayed", "waiting", "active", "completed"],
    "gone-ok": ["added", "waiting", "active", "completed"],
    "gone-fail": ["added", "waiting", "active", "failed"],
}


@needs_node
def test_lifecycle_events_and_final_records(server):
    srv = server()
    out = workload("lifecycle", srv.port, "hist")
    ids, finished = out["ids"], out["finished"]
    r = redis.Redis(port=srv.port)
    # removeOnComplete / removeOnFail: BullMQ deleted these jobs; their history stays
    assert not r.exists("bull:hist:" + ids["gone-ok"]) and not r.exists("bull:hist:" + ids["gone-fail"])
    for name, want in LIFECYCLE.items():
        rows = events_of(srv, "hist", ids[name])
        assert [e[0] for e in rows] == want, (name, rows)
        assert {e[6] for e in rows} == {name}, rows  # job_name on every row, also after removal
        ts = [e[7] for e in rows]
        assert ts == sorted(ts)
        # attempt numbers: the running attempt for active/progress, the finished one for retried/completed/failed
        att = [(e[0], e[1]) for e in rows if e[0] in ("active", "progress", "retried", "completed", "failed")]
        n = 0
        for kind, a in att:
            if kind == "active":
                n += 1
            assert a == n, (name, att)
        for e in rows:
            if e[0] in ("active", "progress", "retried", "completed", "failed"):
                assert e[2] == "w-hist", (name, e)  # the Worker's name (pb)
            else:
                assert e[1] is None and e[2] is None
    retried = [e[3] for e in events_of(srv, "hist", ids["flaky-backoff"]) if e[0] == "retried"]
    assert retried == ["backoff fail 1", "backoff fail 2"]
    assert [e[5] for e in events_of(srv, "hist", ids["flaky-backoff"]) if e[0] == "retried"] == [50, 50]
    assert [e[3] for e in events_of(srv, "hist", ids["flaky-now"]) if e[0] == "retried"] == ["now fail 1"]
    assert [e[5] for e in events_of(srv, "hist", ids["flaky-now"]) if e[0] == "retried"] == [None]
    assert [e[3] for e in events_of(srv, "hist", ids["doomed"]) if e[0] in ("retried", "failed")] == ["doomed 1", "doomed 2"]
    assert [e[5] for e in events_of(srv, "hist", ids["delayed"])][:2] == [300, 300]
    for name in ("ok", "progress", "gone-ok", "flaky-now"):
        done = [e for e in events_of(srv, "hist", ids[name]) if e[0] == "completed"][0]
        assert done[4] == len(js(finished[name]["returnvalue"]).encode())

    finals = finals_of(srv, "hist")
    assert set(finals) == set(ids.values())
    for name, jid in ids.items():
        f, b = finals[jid], finished[name]
        assert f["prefix"] == "bull" and f["name"] == name
        assert f["state"] == ("failed" if name in ("doomed", "gone-fail") else "completed")
        assert f["attempts_made"] == b["attemptsMade"]
        assert f["failed_reason"] == b["failedReason"]
        assert (json.loads(f["returnvalue"]) if f["returnvalue"] is not None else None) == b["returnvalue"]
        assert f["timestamp"] == b["timestamp"] and f["processed_on"] == b["processedOn"]
        assert json.loads(f["data"])["v"] == list(LIFECYCLE).index(name) + 1
        assert isinstance(json.loads(f["opts"]), dict)
        assert f["processed_on"] >= f["timestamp"] and f["finished_on"] >= f["processed_on"]
        if name.startswith("gone-"):
            # the hash was deleted before the event: finishedOn is the event's time
            assert 0 <= f["finished_on"] - b["finishedOn"] < 1000
        else:
            assert f["finished_on"] == b["finishedOn"]
        assert f["recorded_ms"] >= f["finished_on"] - 1000
    assert json.loads(finals[ids["gone-ok"]]["opts"])["removeOnComplete"] is True
    assert json.loads(finals[ids["gone-fail"]]["opts"])["removeOnFail"] is True
    # drained/paused/retries-exhausted are not per-job history
    assert db_rows(srv, "SELECT DISTINCT event FROM job_events WHERE event NOT IN"
                   " ('added','waiting','delayed','active','progress','retried','completed','failed')") == []


@needs_node
def test_trimmed_events_stream_loses_no_history(server):
    srv = server()
    out = workload("trimmed", srv.port, "trim")
    n = len(out["ids"])
    assert out["xlen"] < 2 * n  # the stream dropped most of its 4 * n entries (MAXLEN ~ 5)...
    rows = db_rows(srv, "SELECT job_id, group_concat(event, ',') FROM"
                   " (SELECT job_id, event FROM job_events WHERE queue='trim' ORDER BY id) GROUP BY job_id")
    assert len(rows) == n  # ...the history kept every job's life
    assert {r[1] for r in rows} == {"added,waiting,active,completed"}
    finals = finals_of(srv, "trim")
    assert set(finals) == set(out["ids"])
    assert all(f["state"] == "completed" and f["attempts_made"] == 1 for f in finals.values())
    assert sorted(int(json.loads(f["returnvalue"])) for f in finals.values()) == [2 * i for i in range(n)]
    assert redis.Redis(port=srv.port).keys("bull:trim:[0-9]*") == []  # removeOnComplete


@needs_node
def test_stalled_job(server):
    srv = server()
    out = workload("stalled", srv.port, "stall")
    jid = out["ids"]["victim"]
    rows = events_of(srv, "stall", jid)
    got = [(e[0], e[1], e[2]) for e in rows]
    assert got == [
        ("added", None, None), ("waiting", None, None),
        ("active", 1, "doomed"),  # taken by a worker that was then killed
        ("waiting", None, None), ("stalled", 1, "doomed"),  # moved back to wait without using an attempt
        ("active", 1, "rescuer"), ("completed", 1, "rescuer"),
    ], rows
    f = finals_of(srv, "stall")[jid]
    assert (f["state"], f["attempts_made"], f["returnvalue"]) == ("completed", 1, '"recovered"')
    assert f["processed_on"] == out["finished"]["victim"]["processedOn"]


# ---- capture details through plain XADD ------------------------------------------------------------------

def test_rows_commit_with_the_write(server):
    """Durable mode: when XADD's reply arrives, its history row is already committed."""
    srv = server()
    r = redis.Redis(port=srv.port)
    r.hset("{b}:q:7", mapping={"name": "n7", "timestamp": "1000", "atm": "0", "delay": "0"})
    r.xadd("{b}:q:events", {"event": "added", "jobId": "7", "name": "n7"})
    assert db_rows(srv, "SELECT prefix, queue, job_id, job_name, event FROM job_events") == [
        ("{b}", "q", "7", "n7", "added")]
    # a prefix with ':' in it: the queue is the component before ':events'
    r.xadd("my:pre:fix:q2:events", {"event": "waiting", "jobId": "1"})
    assert db_rows(srv, "SELECT prefix, queue, job_id, job_name FROM job_events WHERE queue='q2'") == [
        ("my:pre:fix", "q2", "1", None)]
    # not per-job / not BullMQ: nothing recorded
    r.xadd("bull:q:events", {"event": "drained"})
    r.xadd("events", {"event": "added", "jobId": "1"})
    r.xadd("bull:q:other", {"event": "added", "jobId": "1"})
    r.xadd("bull:q:events", {"jobId": "1"})
    assert db_rows(srv, "SELECT count(*) FROM job_events") == [(2,)]
    # from a script (how BullMQ writes), and inside MULTI
    r.eval("redis.call('XADD', KEYS[1], '*', 'event', 'progress', 'jobId', '7', 'data', '5')", 1, "{b}:q:events")
    p = r.pipeline(transaction=True)
    p.xadd("{b}:q:events", {"event": "removed", "jobId": "7", "prev": "wait"})
    p.execute()
    assert db_rows(srv, "SELECT event, attempt FROM job_events WHERE queue='q' ORDER BY id") == [
        ("added", None), ("progress", 1), ("removed", None)]
    # a final event for a job the capture never saw: recorded from the event alone
    r.xadd("bull:z:events", {"event": "failed", "jobId": "x1", "failedReason": "boom", "prev": "active"})
    f = finals_of(srv, "z")["x1"]
    assert (f["state"], f["failed_reason"], f["name"], f["attempts_made"]) == ("failed", "boom", None, None)
    assert f["finished_on"] > 0


def test_waiting_right_after_added_reads_the_job_as_it_is(server):
    """'waiting' right after its job's 'added' (what BullMQ's add scripts write) takes a short path; it still
    reads the job's name from the hash as it is then, and any other event, job, hash or queue in between
    takes the whole path."""
    srv = server()
    r = redis.Redis(port=srv.port)
    add = ("redis.call('HSET', KEYS[1], 'name', ARGV[1], 'timestamp', '1000', 'atm', '0', 'delay', '0');"
           " redis.call('XADD', KEYS[2], '*', 'event', 'added', 'jobId', ARGV[2], 'name', ARGV[1]);"
           " if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'name', ARGV[3]) end;"
           " if ARGV[4] == 'del' then redis.call('DEL', KEYS[1]) end;"
           " redis.call('XADD', KEYS[2], '*', 'event', 'waiting', 'jobId', ARGV[2])")
    r.eval(add, 2, "bull:w:1", "bull:w:events", "a", "1", "", "")
    r.eval(add, 2, "bull:w:2", "bull:w:events", "b", "2", "renamed", "")  # the name changed in between
    r.eval(add, 2, "bull:w:3", "bull:w:events", "c", "3", "", "del")  # the hash gone: from the cache
    r.eval(add, 2, "bull:w:4", "bull:w:events", "d", "4", "", "")
    r.xadd("bull:w:events", {"event": "waiting", "jobId": "4"})  # a second one: the whole path
    assert db_rows(srv, "SELECT job_id, event, job_name FROM job_events WHERE queue='w' ORDER BY id") == [
        ("1", "added", "a"), ("1", "waiting", "a"),
        ("2", "added", "b"), ("2", "waiting", "renamed"),
        ("3", "added", "c"), ("3", "waiting", "c"),
        ("4", "added", "d"), ("4", "waiting", "d"), ("4", "waiting", "d")]


def test_chunk_text_is_the_json_of_the_values_as_read(server):
    """The capture writes each event and final record as its JSON text straight from the values' bytes:
    the chunk's text is exactly what ``history_schema.pack`` makes of the values (``json``, no spaces, no
    \\u escapes but for control characters), and the values are the job hash's fields decoded (bad UTF-8
    replaced) and read as numbers (non-canonical decimals, floats, junk: an int or null), for odd names, job
    ids, workers, reasons and data. A number no int holds (``inf``) is null, not an error of the XADD."""
    from compat.history_schema import pack

    srv = server()
    r = redis.Redis(port=srv.port)
    jobs = [("j\"1", "ünï \"q\" \\ \t\x01 ✓".encode()), ("ü2", b"bad \xff\xfe utf8"), ("007", b"plain")]
    data = '{"s":"x\\"y\\n","é":[1,2]}\x7f'.encode()
    opts, rv = b'{"attempts":3}\xc3', '{"r":"ü"}'.encode()
    worker, reason = 'wörker "1"'.encode(), b"boom\n\x1f"
    for jid, name in jobs:
        k = f"bull:odd:{jid}"
        r.hset(k, mapping={"name": name, "data": data, "opts": opts, "timestamp": "007", "delay": "1.5", "atm": "0"})
        r.eval("redis.call('XADD', KEYS[2], '*', 'event', 'added', 'jobId', ARGV[1], 'name', ARGV[2]);"
               " redis.call('XADD', KEYS[2], '*', 'event', 'waiting', 'jobId', ARGV[1])", 2, k, "bull:odd:events",
               jid, name)
        r.eval("redis.call('XADD', KEYS[2], '*', 'event', 'active', 'jobId', ARGV[1]);"
               " redis.call('HSET', KEYS[1], 'pb', ARGV[2], 'processedOn', ' 12 ')", 2, k, "bull:odd:events",
               jid, worker)
        r.hset(k, "atm", "1")
        r.xadd("bull:odd:events", {"event": "progress", "jobId": jid, "data": "5"})
        r.hset(k, mapping={"atm": "2", "failedReason": reason})
        r.xadd("bull:odd:events", {"event": "waiting", "jobId": jid})
        r.hset(k, mapping={"atm": "inf", "finishedOn": "abc", "returnvalue": rv})
        assert r.xadd("bull:odd:events", {"event": "completed", "jobId": jid, "returnvalue": rv})
        r.xadd("bull:odd:events", {"event": 'we"ird', "jobId": jid})
    r.xadd("bull:odd:events", {"event": "failed", "jobId": "gone\x02", "failedReason": reason})
    chunks = db_rows(srv, "SELECT events, finals FROM history_chunks WHERE queue='odd' ORDER BY id")
    assert chunks
    for evs, fis in chunks:
        assert evs == pack(json.loads(evs)), evs
        assert ",null]" not in evs, evs  # no event keeps its trailing nulls (the view reads them as null)
        assert fis is None or fis == pack(json.loads(fis)), fis
    s = lambda b: b.decode("utf-8", "replace")  # noqa: E731
    want = []
    for jid, name in jobs:
        n = s(name)
        want += [(jid, n, "added", None, None, None, None, 1), (jid, n, "waiting", None, None, None, None, None),
                 (jid, n, "active", 1, s(worker), None, None, None), (jid, n, "progress", 2, s(worker), None, None, None),
                 (jid, n, "retried", 2, s(worker), s(reason), None, None),
                 (jid, n, "completed", None, s(worker), None, len(rv), None),
                 (jid, n, 'we"ird', None, None, None, None, None)]
    want.append(("gone\x02", None, "failed", None, None, s(reason), None, None))
    assert db_rows(srv, "SELECT job_id, job_name, event, attempt, worker, failed_reason, returnvalue_size, delay_ms"
                   " FROM job_events WHERE queue='odd' ORDER BY id") == want
    finals = finals_of(srv, "odd")
    for jid, name in jobs:
        f = finals[jid]
        assert f["finished_on"] >= 10**12  # finishedOn unreadable: the event's time
        assert (f["name"], f["data"], f["opts"], f["timestamp"], f["delay"], f["processed_on"], f["attempts_made"],
                f["failed_reason"], f["returnvalue"], f["state"]) == (
            s(name), s(data), s(opts), 7, 1, 12, None, s(reason), s(rv), "completed")
    assert finals["gone\x02"]["failed_reason"] == s(reason)
    r.close()


def test_waiting_job_removed_after_its_hash_keeps_its_name(server):
    """A job added, left waiting (its hash gone cold: packed) and removed the way BullMQ's removeJob does
    it (the hash deleted before the 'removed' event, in the same script): the event still has the job's name,
    from the hash the script deleted, in database 0 and in another database."""
    srv = server("--hash-compact-delay", "50")
    r = redis.Redis(port=srv.port)
    for dbi in (0, 3):
        c = redis.Redis(port=srv.port, db=dbi)
        c.hset("bull:rm:1", mapping={"name": f"nm{dbi}", "timestamp": "1000", "atm": "0", "delay": "0"})
        c.xadd("bull:rm:events", {"event": "added", "jobId": "1", "name": f"nm{dbi}"})
        deadline = time.time() + 30
        while c.execute_command("DEBUG", "PACKED", "bull:rm:1") not in (1, 2):
            assert time.time() < deadline, "the job hash did not go cold"
            time.sleep(0.05)
        c.eval("redis.call('DEL', KEYS[1]); redis.call('XADD', KEYS[2], '*', 'event', 'removed', 'jobId', '1',"
               " 'prev', 'wait')", 2, "bull:rm:1", "bull:rm:events")
        rows = db_rows(srv, "SELECT event, job_name FROM job_events WHERE queue='rm' ORDER BY id")
        assert rows[-2:] == [("added", f"nm{dbi}"), ("removed", f"nm{dbi}")], rows
        c.close()
    r.close()


@pytest.mark.parametrize("dbi,jid", [(0, "1"), (0, "a:b"), (2, "7"), (2, "x:7")])
def test_waiting_job_goes_cold_as_its_blob_and_its_final_record_has_its_changes(server, dbi, jid):
    """A waiting job's hash goes cold as its blob alone (DEBUG PACKED 2: nothing but the keyspace holds it),
    and once a command thaws it and changes it, a final record made after its hash is deleted (in the
    script that writes the event) has the changed fields, not those it had when it went cold. In another
    database too, and for a job id with a colon."""
    srv = server("--hash-compact-delay", "50")
    c = redis.Redis(port=srv.port, db=dbi)
    q = f"sw{dbi}{len(jid)}"
    c.hset(f"bull:{q}:other", mapping={"name": "x"})  # (a job of another id in the same queue)
    c.xadd(f"bull:{q}:events", {"event": "added", "jobId": "other", "name": "x"})
    c.hset(f"bull:{q}:{jid}", mapping={"name": "nm", "timestamp": "1000", "atm": "0", "delay": "0"})
    c.xadd(f"bull:{q}:events", {"event": "added", "jobId": jid, "name": "nm"})
    deadline = time.time() + 30
    while c.execute_command("DEBUG", "PACKED", f"bull:{q}:{jid}") != 2:
        assert time.time() < deadline, "the job hash did not go cold as its blob"
        time.sleep(0.05)
    c.hset(f"bull:{q}:{jid}", mapping={"atm": "1", "processedOn": "2000", "finishedOn": "3000"})
    c.eval("redis.call('DEL', KEYS[1]); redis.call('XADD', KEYS[2], '*', 'event', 'completed', 'jobId', ARGV[1],"
           " 'returnvalue', '7')", 2, f"bull:{q}:{jid}", f"bull:{q}:events", jid)
    c.save()
    f = finals_of(srv, q)[jid]
    assert (f["name"], f["attempts_made"], f["processed_on"], f["state"]) == ("nm", 1, 2000, "completed"), f
    c.close()


def test_job_hashes_go_cold_without_telling_the_capture(server):
    """The capture holds no job hash (a finished, a waiting and an active job alike): each goes cold without
    a ``hash_swapped`` call (DEBUG COLD-HASHES' 5th figure counts the compactions that told the
    subscribers), as its blob alone. A final record made after the hash is deleted, in the script that
    writes the event, has the fields the job had, thawed and changed since it went cold."""
    srv = server("--hash-compact-delay", "50")
    c = redis.Redis(port=srv.port)
    c.hset("bull:fin:1", mapping={"name": "done", "timestamp": "1000", "atm": "1", "processedOn": "2000"})
    c.xadd("bull:fin:events", {"event": "added", "jobId": "1", "name": "done"})
    c.xadd("bull:fin:events", {"event": "completed", "jobId": "1", "returnvalue": "7"})
    c.hset("bull:fin:2", mapping={"name": "held", "timestamp": "1000", "atm": "0"})
    c.xadd("bull:fin:events", {"event": "added", "jobId": "2", "name": "held"})
    c.hset("bull:fin:3", mapping={"name": "busy", "timestamp": "1000", "atm": "0"})
    c.xadd("bull:fin:events", {"event": "added", "jobId": "3", "name": "busy"})
    c.xadd("bull:fin:events", {"event": "active", "jobId": "3", "prev": "waiting"})
    deadline = time.time() + 30
    while any(c.execute_command("DEBUG", "PACKED", f"bull:fin:{i}") != 2 for i in (1, 2, 3)):
        assert time.time() < deadline, "the job hashes did not go cold as their blobs"
        time.sleep(0.05)
    assert c.execute_command("DEBUG", "COLD-HASHES")[4] == 0
    c.hset("bull:fin:2", mapping={"atm": "1", "processedOn": "2500"})  # (thawed, changed)
    c.eval("redis.call('DEL', KEYS[1]); redis.call('XADD', KEYS[2], '*', 'event', 'completed', 'jobId', '2',"
           " 'returnvalue', '8')", 2, "bull:fin:2", "bull:fin:events")
    c.save()
    f = finals_of(srv, "fin")
    assert (f["1"]["name"], f["1"]["processed_on"]) == ("done", 2000), f
    assert (f["2"]["name"], f["2"]["timestamp"], f["2"]["processed_on"], f["2"]["attempts_made"],
            f["2"]["state"]) == ("held", 1000, 2500, 1, "completed"), f
    c.close()


def test_history_off_writes_nothing(server):
    srv = server(env={"RESPQUEUE_HISTORY": "off"})
    r = redis.Redis(port=srv.port)
    r.hset("bull:q:1", mapping={"name": "n"})
    for ev in ("added", "waiting", "active"):
        r.xadd("bull:q:events", {"event": ev, "jobId": "1"})
    r.xadd("bull:q:events", {"event": "completed", "jobId": "1", "returnvalue": "1"})
    r.save()
    assert db_rows(srv, "SELECT count(*) FROM job_events") == [(0,)]
    assert db_rows(srv, "SELECT count(*) FROM job_final") == [(0,)]
    assert r.xlen("bull:q:events") == 4


def test_memory_durability_has_no_history(server):
    srv = server("--durability", "memory")
    r = redis.Redis(port=srv.port)
    r.xadd("bull:q:events", {"event": "added", "jobId": "1"})
    assert r.xlen("bull:q:events") == 1
    assert not os.path.exists(os.path.join(srv.workdir, "data", "respqueue.db"))


def test_retention_deletes_old_rows_in_the_background(server):
    srv = server("--history-retention", "1s")
    r = redis.Redis(port=srv.port)
    for i in range(30):
        r.hset(f"bull:q:{i}", mapping={"name": "n", "processedOn": "5"})
        r.xadd("bull:q:events", {"event": "added", "jobId": str(i)})
        r.xadd("bull:q:events", {"event": "completed", "jobId": str(i), "returnvalue": "null"})
    assert db_rows(srv, "SELECT count(*) FROM job_events") == [(60,)]
    assert db_rows(srv, "SELECT count(*) FROM job_final") == [(30,)]
    (last_id,) = db_rows(srv, "SELECT max(id) FROM job_events")[0]
    end = time.monotonic() + 15
    while time.monotonic() < end:
        if db_rows(srv, "SELECT count(*) FROM job_final") == [(0,)] and \
                db_rows(srv, "SELECT count(*) FROM job_events") == [(0,)]:
            break
        time.sleep(0.2)
    assert db_rows(srv, "SELECT count(*) FROM history_chunks") == [(0,)]
    assert db_rows(srv, "SELECT count(*) FROM job_final") == [(0,)]
    assert r.ping()  # the server kept serving
    # chunk ids are never reused (AUTOINCREMENT), so event ids only grow (the export's watermark needs that)
    r.xadd("bull:q:events", {"event": "added", "jobId": "new"})
    (new_id,) = db_rows(srv, "SELECT max(id) FROM job_events")[0]
    assert new_id > last_id


def test_bad_settings_are_refused(tmp_path):
    for args, msg in ((["--history-retention", "5x"], "bad history retention"),
                      (["--history", "maybe"], "use on or off")):
        p = subprocess.run([sys.executable, "-m", "respqueue", "serve", "--port", "0", "--dir", str(tmp_path), *args],
                           capture_output=True, text=True, timeout=30, cwd=ROOT)
        assert p.returncode == 2 and msg in p.stderr, p.stderr
    env = {**os.environ, "RESPQUEUE_HISTORY_RETENTION": "soon", "PYTHONPATH": ROOT}
    p = subprocess.run([sys.executable, "-m", "respqueue", "serve", "--port", "0", "--dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=30, cwd=ROOT, env=env)
    assert p.returncode != 0 and "bad history retention" in p.stderr, p.stderr


def test_parsers():
    assert [parse_retention(v) for v in ("3600s", "90m", "12h", "7d", "2w", "120", "0", " 5 M ")] == [
        3600, 5400, 43200, 604800, 1209600, 120, 0, 300]
    for bad in ("", "7 days", "-1d", "1.5h", "d"):
        with pytest.raises(ValueError):
            parse_retention(bad)
    assert [parse_switch(v) for v in ("on", "OFF", "yes", "no", "true", "0", True)] == [
        True, False, True, False, True, False, True]
    with pytest.raises(ValueError):
        parse_switch("sometimes")


# ---- the store: migration and repair ------------------------------------------------------------------------

def test_migration_from_version_1(server, tmp_path):
    d = tmp_path / "s0" / "data"
    d.mkdir(parents=True)
    conn = sqlite3.connect(d / "respqueue.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for stmt in MIGRATIONS[1]:
        conn.execute(stmt)
    conn.execute("INSERT INTO meta VALUES('schema_version', '1')")
    conn.execute("INSERT INTO keys VALUES(0, ?, 'string', NULL, 1, ?)", (b"k", b"v"))
    conn.close()
    srv = server()
    r = redis.Redis(port=srv.port)
    assert r.get("k") == b"v"
    assert db_rows(srv, "SELECT value FROM meta WHERE name='schema_version'") == [(str(SCHEMA_VERSION),)]
    r.xadd("bull:q:events", {"event": "added", "jobId": "1"})
    assert db_rows(srv, "SELECT job_id, event FROM job_events") == [("1", "added")]


def test_store_made_without_the_history_schema_gets_it(server, tmp_path):
    """A store of the current version created while history was not registered (the store knows no plug-in's
    tables: compat/history.py registers them) gets the history tables when a server opens it."""
    from respqueue.persistence.store import SCHEMAS

    registered = {s for _v, stmts, _t in SCHEMAS.values() for s in stmts}
    assert registered and all(s in MIGRATIONS[7] for s in registered)
    d = tmp_path / "s0" / "data"
    d.mkdir(parents=True)
    conn = sqlite3.connect(d / "respqueue.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for v in range(1, SCHEMA_VERSION + 1):
        for stmt in MIGRATIONS[v]:
            if stmt not in registered:
                conn.execute(stmt)
    conn.execute("INSERT INTO meta VALUES('schema_version', ?)", (str(SCHEMA_VERSION),))
    assert not conn.execute("SELECT name FROM sqlite_master WHERE name='job_events'").fetchall()
    conn.close()
    srv = server()
    r = redis.Redis(port=srv.port)
    r.xadd("bull:q:events", {"event": "added", "jobId": "1"})
    assert db_rows(srv, "SELECT job_id, event FROM job_events") == [("1", "added")]
    assert db_rows(srv, "SELECT value FROM meta WHERE name='schema_version'") == [(str(SCHEMA_VERSION),)]


def test_repair_keeps_history(server):
    srv = server()
    r = redis.Redis(port=srv.port)
    r.set("k", "v")
    r.xadd("bull:q:events", {"event": "added", "jobId": "1"})
    r.xadd("bull:q:events", {"event": "completed", "jobId": "1", "returnvalue": "7"})
    srv.stop()
    before = db_rows(srv, "SELECT id, job_id, event FROM job_events ORDER BY id")
    assert [e[1:] for e in before] == [("1", "added"), ("1", "completed")]
    ok, msg = repair(os.path.join(srv.workdir, "data"))
    assert ok, msg
    assert db_rows(srv, "SELECT id, job_id, event FROM job_events ORDER BY id") == before  # ids kept
    assert db_rows(srv, "SELECT job_id, returnvalue FROM job_final") == [("1", "7")]
    assert db_rows(srv, "SELECT value FROM meta WHERE name='schema_version'") == [(str(SCHEMA_VERSION),)]

"""Spark into the queue: ``respqueue.pipeline.enqueue`` and ``respqueue enqueue`` add DataFrame rows as BullMQ
jobs on respqueue; an ordinary bullmq (Python) Worker processes them all. Also the full round trip
DataFrame -> queue -> workers -> history -> analytics, once history capture exists."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
import sqlite3
import time
from collections import Counter
from typing import Any

import pytest
import redis

from .servers import run_async, start_respqueue

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("bullmq") is None
    or shutil.which("java") is None,
    reason="needs pyspark and a Java runtime (pip install -e '.[test,spark]') and the bullmq package",
)


def conn(port: int) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": port}


async def drain(port: int, queue: str, expect: int, fail_every: int = 0, timeout: float = 60.0,
                concurrency: int = 20) -> dict[str, Any]:
    """Run a bullmq Worker until ``expect`` jobs finished; return what it saw."""
    from bullmq import Worker

    seen: dict[str, Any] = {"jobs": [], "failed": 0}

    async def proc(job: Any, token: str) -> Any:
        seen["jobs"].append((job.name, job.data, job.opts.get("attempts")))
        if fail_every and job.data.get("i", 1) % fail_every == 0:
            raise ValueError("divisible")
        return job.data.get("i")

    done = {"n": 0}
    w = Worker(queue, proc, {"connection": conn(port), "concurrency": concurrency})
    w.on("completed", lambda *a: done.__setitem__("n", done["n"] + 1))

    def on_failed(*a: Any) -> None:
        done["n"] += 1
        seen["failed"] += 1

    w.on("failed", on_failed)
    w.on("error", lambda *a: None)
    end = time.monotonic() + timeout
    try:
        while done["n"] < expect and time.monotonic() < end:
            await asyncio.sleep(0.05)
    finally:
        await w.close()
    seen["done"] = done["n"]
    return seen


def test_enqueue_dataframe_then_worker_processes_all(spark, rq_server):
    from respqueue.pipeline import enqueue

    r = redis.Redis(port=rq_server.port)
    r.flushall()
    n = 1000
    df = spark.createDataFrame([(i, f"user{i}@example.com", i % 3 == 0) for i in range(n)],
                               "i long, email string, vip boolean").repartition(4)
    res = enqueue(df, "spark_in", name="mail", data_cols=["i", "email"], opts={"attempts": 2},
                  connection=conn(rq_server.port), batch_size=150)
    assert res.total == n and len(res.partitions) == 4
    assert sum(p["added"] for p in res.partitions) == n
    assert all(p["batches"] == -(-p["added"] // 150) and p["retries"] == 0 for p in res.partitions)
    assert res.summary().startswith(f"added {n} jobs to spark_in from 4 partition(s)")
    assert r.llen("bull:spark_in:wait") == n
    seen = run_async(drain(rq_server.port, "spark_in", n))
    assert seen["done"] == n and seen["failed"] == 0
    assert sorted(d["i"] for _, d, _ in seen["jobs"]) == list(range(n))
    assert {nm for nm, _, _ in seen["jobs"]} == {"mail"}
    assert all(set(d) == {"i", "email"} and d["email"] == f"user{d['i']}@example.com" for _, d, _ in seen["jobs"])
    assert {a for _, _, a in seen["jobs"]} == {2}
    assert int(r.zcard("bull:spark_in:completed")) == n


def test_job_id_column_makes_enqueue_idempotent(spark, rq_server):
    from respqueue.pipeline import enqueue

    r = redis.Redis(port=rq_server.port)
    r.flushall()
    df = spark.createDataFrame([(f"order-{i}", i, "a" if i % 2 else "b") for i in range(200)],
                               "oid string, i long, kind string").repartition(3)
    for _ in range(2):
        res = enqueue(df, "orders", name_col="kind", job_id_col="oid", connection=conn(rq_server.port))
        assert res.total == 200
    assert r.llen("bull:orders:wait") == 200
    assert r.hget("bull:orders:order-7", "name") == b"a"
    assert json.loads(r.hget("bull:orders:order-8", "data")) == {"oid": "order-8", "i": 8, "kind": "b"}


def test_bad_arguments(spark):
    from respqueue.pipeline import enqueue

    df = spark.createDataFrame([(1,)], "a long")
    with pytest.raises(ValueError, match="no such column"):
        enqueue(df, "q", data_cols=["nope"])
    with pytest.raises(ValueError, match="batch_size"):
        enqueue(df, "q", batch_size=0)


def test_batches_are_retried_a_bounded_number_of_times(rq_server, monkeypatch):
    """A batch that fails is retried up to max_retries times, then the error surfaces."""
    import bullmq

    from respqueue.pipeline import add_rows

    r = redis.Redis(port=rq_server.port)
    r.flushall()
    real = bullmq.Queue.addBulk
    calls = {"n": 0}

    async def flaky(self: Any, jobs: list[dict[str, Any]]) -> Any:
        calls["n"] += 1
        if calls["n"] % 3 != 0:  # two failures before each success
            raise ConnectionError("injected")
        return await real(self, jobs)

    monkeypatch.setattr(bullmq.Queue, "addBulk", flaky)
    rows = [{"i": i} for i in range(25)]
    res = run_async(add_rows(rows, "flaky", connection=conn(rq_server.port), batch_size=10, max_retries=2,
                               backoff_s=0.001))
    assert res == {"added": 25, "batches": 3, "retries": 6, "queues": {"flaky": 25}}
    assert r.llen("bull:flaky:wait") == 25
    calls["n"] = 0
    with pytest.raises(ConnectionError):
        run_async(add_rows(rows, "flaky", connection=conn(rq_server.port), batch_size=10, max_retries=1,
                             backoff_s=0.001))


def test_read_file_formats(spark, tmp_path):
    from respqueue.pipeline import read_file

    (tmp_path / "a.csv").write_text("i,name\n1,x\n2,y\n")
    (tmp_path / "a.jsonl").write_text('{"i": 1, "name": "x"}\n{"i": 2, "name": "y"}\n')
    for f in ("a.csv", "a.jsonl"):
        rows = sorted((r["i"], r["name"]) for r in read_file(spark, str(tmp_path / f)).collect())
        assert rows == [(1, "x"), (2, "y")]
    with pytest.raises(ValueError, match="cannot tell the format"):
        read_file(spark, str(tmp_path / "a.txt"))


def test_cli_enqueue_from_parquet(spark, rq_server, tmp_path, capsys):
    """`respqueue enqueue --from FILE QUEUE` (in process: it reuses the active session)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from respqueue.cli import main

    r = redis.Redis(port=rq_server.port)
    r.flushall()
    pq.write_table(pa.table({"i": list(range(300)), "word": [f"w{i}" for i in range(300)]}), tmp_path / "in.parquet")
    rc = main(["enqueue", "--from", str(tmp_path / "in.parquet"), "words", "--name", "count", "--port",
               str(rq_server.port), "--partitions", "2", "--batch", "100", "--opts", '{"attempts": 3}',
               "--data-cols", "word"])
    assert rc == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("added 300 jobs to words from 2 partition(s)")
    assert r.llen("bull:words:wait") == 300
    assert json.loads(r.hget("bull:words:1", "opts"))["attempts"] == 3
    assert r.hget("bull:words:1", "name") == b"count"
    assert set(json.loads(r.hget("bull:words:1", "data"))) == {"word"}
    assert not spark.sparkContext._jsc.sc().isStopped()


def pct(values: list[float], p: float) -> float:
    v = sorted(values)
    pos = p * (len(v) - 1)
    lo, hi = int(pos), min(int(pos) + 1, len(v) - 1)
    return v[lo] + (pos - lo) * (v[hi] - v[lo])


async def work(port: int, queue: str, total: int, timeout: float = 90.0) -> dict[str, int]:
    """A bullmq Worker: i % 10 == 0 always fails, i % 10 == 5 fails its first attempt only.
    Runs until ``total`` jobs are in the completed or failed sets."""
    from bullmq import Worker

    tries: dict[str, int] = {}

    async def proc(job: Any, token: str) -> Any:
        tries[job.id] = tries.get(job.id, 0) + 1
        i = job.data["i"]
        if i % 10 == 0:
            raise ValueError("divisible by ten")
        if i % 10 == 5 and tries[job.id] == 1:
            raise ValueError("flaky")
        await asyncio.sleep(0.002)
        return {"double": 2 * i}

    w = Worker(queue, proc, {"connection": conn(port), "concurrency": 10})
    w.on("error", lambda *a: None)
    r = redis.Redis(port=port)
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            if r.zcard(f"bull:{queue}:completed") + r.zcard(f"bull:{queue}:failed") >= total:
                break
            await asyncio.sleep(0.05)
    finally:
        await w.close()
    return tries


def test_round_trip_dataframe_queue_workers_history_analytics(spark, tmp_path):
    """DataFrame -> respqueue -> a bullmq worker (failures, retries, delays) -> history tables -> analytics.

    The expected figures come from the job hashes BullMQ itself left on the server (timestamp, delay,
    processedOn, finishedOn, attemptsMade, failedReason), read before the server stops."""
    from compat.analytics.job import run_analytics
    from respqueue.pipeline import enqueue

    srv = start_respqueue(workdir=str(tmp_path))
    try:
        now = spark.createDataFrame([(i,) for i in range(200)], "i long").repartition(2)
        later = spark.createDataFrame([(i,) for i in range(1000, 1050)], "i long")
        assert enqueue(now, "roundtrip", name="calc", opts={"attempts": 2, "backoff": 20},
                       connection=conn(srv.port), batch_size=64).total == 200
        assert enqueue(later, "roundtrip", name="later", opts={"delay": 300, "attempts": 2},
                       connection=conn(srv.port)).total == 50
        run_async(work(srv.port, "roundtrip", 250))
        r = redis.Redis(port=srv.port, decode_responses=True)
        failed_ids = set(r.zrange("bull:roundtrip:failed", 0, -1))
        ids = r.zrange("bull:roundtrip:completed", 0, -1) + sorted(failed_ids)
        assert len(ids) == 250
        jobs = [(j in failed_ids, r.hgetall(f"bull:roundtrip:{j}")) for j in ids]
    finally:
        srv.stop()
    truth: dict[str, dict[str, Any]] = {}
    for failed, h in jobs:
        t = truth.setdefault(h["name"], {"completed": 0, "failed": 0, "wait": [], "run": [], "attempts": Counter(),
                                          "reasons": Counter()})
        if failed:
            t["failed"] += 1
            t["reasons"][h["failedReason"]] += 1
        else:
            t["completed"] += 1
        ts, delay, pon, fon = (int(h.get(k) or 0) for k in ("timestamp", "delay", "processedOn", "finishedOn"))
        t["wait"].append(pon - ts - delay)
        t["run"].append(fon - pon)
        t["attempts"][int(h.get("atm") or h.get("attemptsMade") or 0)] += 1
    assert truth["calc"]["failed"] == 20 and truth["later"]["failed"] == 5
    assert truth["calc"]["attempts"][2] >= 40  # the always-failing and the flaky ones took two attempts

    db = tmp_path / "data" / "respqueue.db"
    has = False
    if db.exists():
        c = sqlite3.connect(db)
        has = c.execute("SELECT count(*) FROM sqlite_master WHERE name='job_events'").fetchone()[0] == 1
        c.close()
    assert has, "the store has no job_events (the job history's view)"
    data = run_analytics(str(tmp_path / "data"), str(tmp_path / "out"), spark=spark)
    rows = {s["name"]: s for s in data["summary"] if s["queue"] == "roundtrip"}
    assert set(rows) == {"calc", "later"}
    for name, n in (("calc", 200), ("later", 50)):
        s, t = rows[name], truth[name]
        assert (s["added"], s["completed"], s["failed"]) == (n, t["completed"], t["failed"])
        for p in (50, 95, 99):
            assert s[f"wait_p{p}"] == pytest.approx(pct(t["wait"], p / 100))
            assert s[f"run_p{p}"] == pytest.approx(pct(t["run"], p / 100))
        got = {x["attempts_made"]: x["jobs"] for x in data["retries"] if x["queue"] == "roundtrip" and x["name"] == name}
        assert got == dict(t["attempts"])
        reasons = {x["reason"]: x["count"] for x in data["failure_reasons"]
                   if x["queue"] == "roundtrip" and x["name"] == name}
        assert reasons == dict(t["reasons"])
    assert (tmp_path / "out" / "report.html").exists()

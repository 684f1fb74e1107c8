"""``--metrics-port``: Prometheus ``/metrics`` over real HTTP, with BullMQ (Python) jobs run on the server.

The scrape is parsed with ``prometheus_client``'s own parser (the test extra), so a malformed exposition
fails here, and the values must match what BullMQ did.
"""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from .servers import ServerProcess, free_port, run_async, start_respqueue

needs = pytest.mark.skipif(
    importlib.util.find_spec("bullmq") is None or importlib.util.find_spec("prometheus_client") is None,
    reason="bullmq and prometheus_client are test extras (pip install -e '.[test]')",
)


def http_get(port: int, path: str, timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def scrape(port: int) -> dict[str, Any]:
    """family name -> family, parsed by prometheus_client."""
    from prometheus_client.parser import text_string_to_metric_families

    status, headers, body = http_get(port, "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


def value(fams: dict[str, Any], family: str, sample: str | None = None, **labels: Any) -> float:
    want = {k: str(v) for k, v in labels.items()}
    found = [
        s.value
        for s in fams[family].samples
        if s.name == (sample or family) and all(s.labels.get(k) == v for k, v in want.items())
    ]
    assert len(found) == 1, (family, sample, labels, fams[family].samples)
    return found[0]


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[ServerProcess, int]]:
    mport = free_port()
    srv = start_respqueue("--metrics-port", str(mport))
    yield srv, mport
    srv.stop()


async def wait_for(pred: Any, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if await pred():
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("timed out waiting")


async def run_jobs(port: int) -> dict[str, Any]:
    """Queue ``m1``: 6 jobs (4 complete, 2 fail for good), 2 delayed by a minute; ``m2``: 3 waiting."""
    from bullmq import Queue, Worker

    conn = {"connection": {"host": "127.0.0.1", "port": port}}
    q1, q2 = Queue("m1", conn), Queue("m2", conn)

    async def proc(job: Any, token: Any) -> Any:
        await asyncio.sleep(0.02)
        if job.data.get("fail"):
            raise Exception("bad input " + str(job.data["i"]))
        return job.data["i"]

    for i in range(6):
        await q1.add("work", {"i": i, "fail": i in (1, 4)})
    for i in range(2):
        await q1.add("later", {"i": i}, {"delay": 60_000})
    for i in range(3):
        await q2.add("idle", {"i": i})
    w = Worker("m1", proc, {**conn, "concurrency": 2})
    try:
        await wait_for(lambda: _done(q1, 6))
    finally:
        await w.close()
    counts = await q1.getJobCounts("completed", "failed", "delayed", "wait", "active")
    for q in (q1, q2):
        await q.close()
    return counts


async def _done(q: Any, n: int) -> bool:
    c = await q.getJobCounts("completed", "failed")
    return c["completed"] + c["failed"] >= n


@needs
def test_metrics_after_bullmq_jobs(server):
    srv, mport = server
    counts = run_async(run_jobs(srv.port))
    assert counts == {"completed": 4, "failed": 2, "delayed": 2, "wait": 0, "active": 0}
    fams = scrape(mport)

    def jobs(queue: str, state: str) -> float:
        return value(fams, "respqueue_bullmq_jobs", queue=queue, prefix="bull", db=0, state=state)

    assert {s: jobs("m1", s) for s in counts} == counts
    assert jobs("m2", "wait") == 3 and jobs("m2", "completed") == 0
    assert jobs("m1", "waiting-children") == 0 and jobs("m1", "prioritized") == 0 and jobs("m1", "paused") == 0
    assert value(fams, "respqueue_bullmq_queue_paused", queue="m1") == 0
    assert value(fams, "respqueue_bullmq_oldest_waiting_job_age_seconds", queue="m2") > 0
    assert value(fams, "respqueue_bullmq_oldest_waiting_job_age_seconds", queue="m1") == 0
    # totals: prometheus_client names counters without _total and samples with it
    assert value(fams, "respqueue_bullmq_jobs_added", "respqueue_bullmq_jobs_added_total", queue="m1") == 8
    assert value(fams, "respqueue_bullmq_jobs_added", "respqueue_bullmq_jobs_added_total", queue="m2") == 3
    assert value(fams, "respqueue_bullmq_jobs_completed", "respqueue_bullmq_jobs_completed_total", queue="m1") == 4
    assert value(fams, "respqueue_bullmq_jobs_failed", "respqueue_bullmq_jobs_failed_total", queue="m1") == 2
    assert fams["respqueue_bullmq_job_wait_seconds"].type == "histogram"
    for h in ("respqueue_bullmq_job_wait_seconds", "respqueue_bullmq_job_run_seconds"):
        assert value(fams, h, h + "_count", queue="m1") == 6
        assert value(fams, h, h + "_bucket", queue="m1", le="+Inf") == 6
        buckets = [s for s in fams[h].samples if s.name == h + "_bucket" and s.labels["queue"] == "m1"]
        assert [s.value for s in buckets] == sorted(s.value for s in buckets)  # cumulative
    # each job slept 20 ms in the worker: every run is at least that long
    assert value(fams, "respqueue_bullmq_job_run_seconds", "respqueue_bullmq_job_run_seconds_sum", queue="m1") >= 0.1
    assert (
        value(
            fams, "respqueue_bullmq_job_run_seconds", "respqueue_bullmq_job_run_seconds_bucket", queue="m1", le="0.01"
        )
        == 0
    )
    assert value(fams, "respqueue_bullmq_queues") >= 2

    # server families
    assert value(fams, "respqueue_commands_processed", "respqueue_commands_processed_total") > 50
    assert value(fams, "respqueue_command_calls", "respqueue_command_calls_total", cmd="evalsha") > 10
    assert (
        value(fams, "respqueue_command_duration_seconds", "respqueue_command_duration_seconds_count", cmd="evalsha")
        > 10
    )
    assert fams["respqueue_command_duration_seconds"].type == "summary"
    assert value(fams, "respqueue_db_keys", db=0) > 10
    assert value(fams, "respqueue_memory_rss_bytes") > 1_000_000
    assert value(fams, "respqueue_uptime_seconds") > 0
    assert value(fams, "respqueue_connected_clients") >= 0
    commits = value(fams, "respqueue_store_commits", "respqueue_store_commits_total")
    assert commits > 10
    assert value(fams, "respqueue_store_commit_errors", "respqueue_store_commit_errors_total") == 0
    assert (
        value(fams, "respqueue_store_commit_duration_seconds", "respqueue_store_commit_duration_seconds_count")
        == commits
    )
    assert value(fams, "respqueue_store_batch_changes", "respqueue_store_batch_changes_sum") > 0


def test_metrics_clients_and_keys(server):
    srv, mport = server
    r = redis.Redis(port=srv.port, db=3)
    try:
        r.set("a", "1")
        r.set("b", "2", ex=100)
        blocked = redis.Redis(port=srv.port)
        fut = _blpop_in_thread(blocked)
        deadline = time.time() + 10
        while time.time() < deadline:
            fams = scrape(mport)
            if value(fams, "respqueue_blocked_clients") >= 1:
                break
            time.sleep(0.05)
        assert value(fams, "respqueue_blocked_clients") >= 1
        assert value(fams, "respqueue_connected_clients") >= 2
        assert value(fams, "respqueue_db_keys", db=3) == 2
        assert value(fams, "respqueue_db_keys_expiring", db=3) == 1
        waker = redis.Redis(port=srv.port)  # the blocked client waits in db 0
        waker.lpush("wake", "x")
        fut.join(10)
        assert not fut.is_alive()
        waker.delete("wake")
        waker.close()
    finally:
        r.flushdb()
        r.close()


def _blpop_in_thread(c: redis.Redis) -> Any:
    import threading

    t = threading.Thread(target=lambda: (c.blpop(["wake"], 10), c.close()), daemon=True)
    t.start()
    return t


# fields redis_exporter (oliver006/redis_exporter) turns into metrics from INFO on a standalone master
EXPORTER_FIELDS = (
    "redis_version",
    "uptime_in_seconds",
    "connected_clients",
    "blocked_clients",
    "used_memory",
    "used_memory_rss",
    "maxmemory",
    "total_commands_processed",
    "instantaneous_ops_per_sec",
    "keyspace_hits",
    "keyspace_misses",
    "expired_keys",
    "evicted_keys",
    "rdb_last_save_time",
    "role",
    "connected_slaves",
    "total_connections_received",
    "rejected_connections",
    "used_cpu_sys",
    "used_cpu_user",
    "maxclients",
    "mem_fragmentation_ratio",
    "mem_fragmentation_bytes",
    "allocator_allocated",
    "allocator_active",
    "allocator_resident",
    "active_defrag_running",
    "used_memory_peak",
    "used_memory_lua",
    "used_memory_scripts",
    "total_system_memory",
    "maxmemory_policy",
    "loading",
    "aof_enabled",
    "rdb_changes_since_last_save",
    "rdb_bgsave_in_progress",
    "rdb_last_bgsave_status",
    "aof_rewrite_in_progress",
    "master_repl_offset",
    "total_net_input_bytes",
    "total_net_output_bytes",
    "pubsub_channels",
    "pubsub_patterns",
    "latest_fork_usec",
    "number_of_cached_scripts",
    "process_id",
    "tcp_port",
    "cluster_enabled",
    "lazyfree_pending_objects",
)


def test_info_has_redis_exporter_fields(server):
    srv, _ = server
    r = redis.Redis(port=srv.port)
    try:
        r.set("k", "v")
        info = r.info("all")
        missing = [f for f in EXPORTER_FIELDS if f not in info]
        assert not missing
        assert info["role"] == "master" and info["connected_slaves"] == 0
        assert info["db0"]["keys"] >= 1 and "expires" in info["db0"]
        assert info["used_memory_rss"] > 0 and info["total_commands_processed"] > 0
    finally:
        r.delete("k")
        r.close()


def test_http_errors_and_keepalive(server):
    _, mport = server
    assert http_get(mport, "/nope")[0] == 404
    assert http_get(mport, "/healthz")[0] == 200
    with socket.create_connection(("127.0.0.1", mport), timeout=10) as s:
        # two requests on one connection (keep-alive), then garbage: 400 and close
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while got.count(b"ok\n") < 2:
            chunk = s.recv(65536)
            assert chunk
            got += chunk
        assert got.count(b"HTTP/1.1 200 OK") == 2
        s.sendall(b"BLAH\r\n\r\n")
        rest = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        assert rest.startswith(b"HTTP/1.1 400 Bad Request")
    # a body too large is refused without reading it
    with socket.create_connection(("127.0.0.1", mport), timeout=10) as s:
        s.sendall(b"POST /api/action HTTP/1.1\r\nContent-Length: 999999999\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 413")
    for raw, want in (
        (b"POST /api/action HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", b"HTTP/1.1 501"),
        (b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n", b"HTTP/1.1 400"),
        (b"GET /metrics SPDY/3\r\n\r\n", b"HTTP/1.1 400"),
        (b"GET /" + b"x" * 20000 + b" HTTP/1.1\r\n\r\n", b"HTTP/1.1 400"),
    ):
        with socket.create_connection(("127.0.0.1", mport), timeout=10) as s:
            s.sendall(raw)
            assert s.recv(65536).startswith(want), raw[:60]
    assert http_get(mport, "/metrics")[0] == 200  # still serving


def test_metrics_port_off_by_default():
    srv = start_respqueue()
    try:
        assert "metrics and dashboard" not in srv.output()
    finally:
        srv.stop()


def test_metrics_flags_have_env_and_toml_twins(tmp_path):
    from respqueue.config import Config

    assert Config.load({}, {}).metrics_port == 0 and Config.load({}, {}).metrics_host is None
    env = {"RESPQUEUE_METRICS_PORT": "9121", "RESPQUEUE_METRICS_HOST": "0.0.0.0"}
    cfg = Config.load({}, env)
    assert (cfg.metrics_port, cfg.metrics_host) == (9121, "0.0.0.0")
    toml = tmp_path / "rq.toml"
    toml.write_text('metrics_port = 9200\nmetrics-host = "127.0.0.2"\n')
    cfg = Config.load({"config": str(toml)}, {})
    assert (cfg.metrics_port, cfg.metrics_host) == (9200, "127.0.0.2")
    assert Config.load({"config": str(toml), "metrics_port": 9300}, env).metrics_port == 9300
    with pytest.raises(ValueError, match="RESPQUEUE_METRICS_PORT must be an integer"):
        Config.load({}, {"RESPQUEUE_METRICS_PORT": "lots"})


def test_memory_mode_queue_found_without_history():
    """--durability memory: no store and no history, but queues and their counts are read from the keys."""
    mport = free_port()
    srv = start_respqueue("--metrics-port", str(mport), "--durability", "memory")
    try:
        r = redis.Redis(port=srv.port)
        r.hset("pfx:raw:meta", "opts.maxLenEvents", "10000")
        r.lpush("pfx:raw:wait", "1", "2")  # "1" is next in line (the right end)
        r.hset("pfx:raw:1", mapping={"name": "x", "timestamp": int(time.time() * 1000) - 5000})
        r.zadd("pfx:raw:failed", {"9": 1})
        r.hset("pfx:raw:1:failed", "child", "reason")  # a parent's key: not a queue
        deadline = time.time() + 20
        while True:
            fams = scrape(mport)
            if any(s.labels.get("queue") == "raw" for s in fams["respqueue_bullmq_jobs"].samples):
                break
            assert time.time() < deadline, "queue not found"
            time.sleep(0.5)
        assert value(fams, "respqueue_bullmq_jobs", queue="raw", prefix="pfx", state="wait") == 2
        assert value(fams, "respqueue_bullmq_jobs", queue="raw", prefix="pfx", state="failed") == 1
        assert value(fams, "respqueue_bullmq_oldest_waiting_job_age_seconds", queue="raw") >= 4
        assert not any(s.labels.get("prefix") == "pfx:raw" for s in fams["respqueue_bullmq_jobs"].samples)
        assert "respqueue_store_commits" not in fams
        assert value(fams, "respqueue_store_info", durability="memory") == 1
        assert fams["respqueue_bullmq_jobs_completed"].samples == []  # totals come from the history capture
        r.close()
    finally:
        srv.stop()


def test_bad_metrics_port_refuses_to_start(tmp_path):
    import subprocess
    import sys

    from .servers import ROOT

    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "respqueue",
            "serve",
            "--port",
            "0",
            "--dir",
            str(tmp_path / "d"),
            "--metrics-port",
            "70000",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert p.returncode == 1
    assert "bad --metrics-port 70000" in p.stderr
    assert "Traceback" not in p.stderr


def test_exposition_escaping_and_histogram():
    """Label values with quotes, backslashes and newlines (queue names may hold them) survive the parser."""
    from prometheus_client.parser import text_string_to_metric_families

    from respqueue.http.metrics import Exposition
    from respqueue.stats import Histogram

    e = Exposition()
    odd = 'we"ird\\queue\nname'
    e.family("t_jobs", "gauge", "Jobs with a \\ and a\nnewline in the help.")
    e.sample("t_jobs", 3, {"queue": odd})
    h = Histogram((10, 100), 0.001)
    for v in (5, 10, 50, 500):
        h.observe(v)
    e.family("t_wait_seconds", "histogram", "Wait.")
    e.histogram("t_wait_seconds", h, {"queue": odd})
    with pytest.raises(ValueError):
        e.family("t_jobs", "gauge", "twice")
    fams = {f.name: f for f in text_string_to_metric_families(e.text())}
    assert fams["t_jobs"].documentation == "Jobs with a \\ and a\nnewline in the help."
    assert [(s.labels["queue"], s.value) for s in fams["t_jobs"].samples] == [(odd, 3)]
    got = {(s.name, s.labels.get("le")): s.value for s in fams["t_wait_seconds"].samples}
    assert got[("t_wait_seconds_bucket", "0.01")] == 2  # 5 and 10 ms: upper bounds are inclusive
    assert got[("t_wait_seconds_bucket", "0.1")] == 3
    assert got[("t_wait_seconds_bucket", "+Inf")] == 4
    assert got[("t_wait_seconds_count", None)] == 4
    assert got[("t_wait_seconds_sum", None)] == pytest.approx(0.565)

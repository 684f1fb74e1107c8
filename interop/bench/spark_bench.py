"""Spark benchmark (not a test): enqueue throughput from Spark vs a single Node addBulk producer on the same
respqueue, and analytics wall time over a synthetic job history.

    python -m interop.bench.spark_bench [--rows 1000000] [--history 1000000] [--master local[2]]
                                        [--batch 1000] [--durability durable|buffered|memory]

enqueue: ``respqueue.pipeline.enqueue`` of a ``--rows`` DataFrame (id, email) at --master, one addBulk stream
per partition (as many partitions as Spark cores), batches of --batch; then, on the flushed server, the Node
driver (bullmq_bench.js addbulk) adds the same number of jobs from one producer in the same batch size.
analytics: a synthetic history of at least --history records (job_events + job_final rows), exported to
Parquet (timed), then ``run_analytics`` (timed, Spark session start-up reported separately).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from .common import ROOT, machine, start_respqueue

HERE = os.path.dirname(os.path.abspath(__file__))


def flushall(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        s.sendall(b"*1\r\n$8\r\nFLUSHALL\r\n")
        s.recv(64)


def llen(port: int, key: str) -> int:
    import redis

    return int(redis.Redis(port=port, socket_timeout=120).llen(key))


def bench_enqueue(spark, port: int, rows: int, batch: int, node: bool = True) -> dict:
    from respqueue.pipeline import enqueue

    cores = spark.sparkContext.defaultParallelism
    df = spark.range(rows).selectExpr("id AS i", "concat('user', id, '@example.com') AS email").repartition(cores)
    df = df.cache()
    df.count()  # materialise the input: time the enqueue, not the generation
    flushall(port)
    t0 = time.perf_counter()
    res = enqueue(df, "bench_spark", name="mail", connection={"host": "127.0.0.1", "port": port}, batch_size=batch)
    secs = time.perf_counter() - t0
    df.unpersist()
    waiting = llen(port, "bull:bench_spark:wait")
    import redis

    last_id = int(redis.Redis(port=port, socket_timeout=120).get("bull:bench_spark:id") or 0)
    out = {"jobs": res.total, "partitions": len(res.partitions), "seconds": round(secs, 2),
           "jobs_per_s": round(res.total / secs), "ok": waiting == rows, "waiting": waiting,
           "last_id": last_id, "retries": res.retries}
    if not node:
        return out
    flushall(port)
    p = subprocess.run(["node", os.path.join(HERE, "bullmq_bench.js"), str(port), "addbulk", "--jobs", str(rows),
                        "--batch", str(batch)], capture_output=True, text=True, timeout=7200)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if not line:
        out["node"] = {"error": p.stderr[-1000:]}
    else:
        r = json.loads(line[-1][7:])
        out["node"] = {"jobs": r["jobs"], "seconds": round(r["ms"] / 1000, 2),
                       "jobs_per_s": round(r["jobs"] / (r["ms"] / 1000)), "ok": r["ok"]}
    flushall(port)
    return out


def bench_analytics(spark, records: int, tmp: str) -> dict:
    from compat.analytics import synthetic
    from compat.analytics.job import run_analytics
    from compat.history_export import export_history

    jobs = max(1, int(records / 5.2))
    while True:
        events, finals = synthetic.generate(jobs, seed=1, span_ms=3_600_000)
        if len(events) + len(finals) >= records:
            break
        jobs = int(jobs * 1.05) + 1
    db = os.path.join(tmp, "history.db")
    synthetic.write(db, events, finals)
    t0 = time.perf_counter()
    exp = export_history(db, os.path.join(tmp, "export"), incremental=False, settle_ms=0)
    t_export = time.perf_counter() - t0
    t0 = time.perf_counter()
    data = run_analytics(os.path.join(tmp, "export"), os.path.join(tmp, "out"), spark=spark)
    t_an = time.perf_counter() - t0
    return {"jobs": jobs, "events": len(events), "finals": len(finals), "records": len(events) + len(finals),
            "export_seconds": round(t_export, 2), "export_files": len(exp.files),
            "analytics_seconds": round(t_an, 2), "summary_rows": len(data["summary"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--history", type=int, default=1_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--durability", default=None, choices=("durable", "buffered", "memory"))
    ap.add_argument("--skip-enqueue", action="store_true")
    ap.add_argument("--skip-analytics", action="store_true")
    ap.add_argument("--skip-node", action="store_true")
    ns = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    from compat.analytics.job import build_session

    t0 = time.perf_counter()
    spark = build_session(ns.master, app="respqueue-bench")
    result: dict = {"machine": machine(), "master": ns.master, "spark": spark.version,
                    "session_start_seconds": round(time.perf_counter() - t0, 2)}
    tmp = tempfile.mkdtemp(prefix="spark-bench-")
    try:
        if not ns.skip_enqueue:
            extra = ("--durability", ns.durability) if ns.durability else ()
            srv = start_respqueue(*extra)
            try:
                result["durability"] = ns.durability or "default"
                result["enqueue"] = bench_enqueue(spark, srv.port, ns.rows, ns.batch, not ns.skip_node)
            finally:
                srv.stop()
            print(json.dumps(result), flush=True)
        if not ns.skip_analytics:
            result["analytics"] = bench_analytics(spark, ns.history, tmp)
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The Spark job behind ``respqueue analytics SRC OUT [--master local[*]]``.

Also runnable on its own::

    spark-submit compat/analytics/job.py SRC OUT
    python -m compat.analytics SRC OUT --master local[2]

SRC is a ``respqueue history export`` folder, an ``s3://bucket/prefix`` export (copied to a temporary
folder through boto3 first, so no hadoop-aws jars are needed), or a live store (a data dir holding
``respqueue.db``, or the .db file itself: it is snapshot-exported to a temporary folder first, without
touching any export watermark).

Figures, per queue and job name (``name`` is '' when a job has none):

* ``added``: ``added`` events; ``stalled`` and ``retried``: events of those kinds.
* ``completed``/``failed``: final records (``job_final``) in that state.
* ``throughput_per_min``: final records / the number of minutes from the minute of the first
  ``finished_on`` to the minute of the last, inclusive (minutes are UTC, floor(ms / 60000)).
* ``wait_ms`` = processed_on - timestamp - coalesce(delay, 0) and ``run_ms`` = finished_on - processed_on,
  over final records that have the inputs, at p50/p95/p99 with Spark's exact ``percentile`` aggregate
  (linear interpolation between closest ranks, as numpy's default), not ``percentile_approx``.
* ``retries``: final records per ``attempts_made``.
* ``failure_reasons``: final ``failed`` records per ``failed_reason``, the top 10 per queue and name
  (by count, then reason).
* ``throughput``: per minute of ``finished_on``: finished, completed, failed.
* ``backlog``: per minute: added (events, by ``ts_ms``) minus finished (final records, by
  ``finished_on``), and its running sum ``backlog`` (minutes with no activity are left out).

Output: Parquet tables under OUT/tables/<name>/, OUT/report.json (the collected figures) and
OUT/report.html (self-contained).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

from compat.history_schema import TABLES

TABLE_NAMES = ("summary", "throughput", "backlog", "retries", "failure_reasons")
TOP_REASONS = 10


def build_session(master: str | None = "local[*]", app: str = "respqueue-analytics") -> Any:
    """A SparkSession suited to the job (UTC, small shuffles, no UI)."""
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName(app)
    if master:
        b = b.master(master)
    b = (b.config("spark.sql.session.timeZone", "UTC")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false"))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if master and master.startswith("local"):
        # One shuffle partition per core and no adaptive re-planning: the result tables are small, and on
        # one machine the planning overhead dominates (first run 2-3x faster than Spark's defaults).
        spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism))
        spark.conf.set("spark.sql.adaptive.enabled", "false")
    return spark


def _spark_schema(table: str) -> Any:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    types = {"int": LongType(), "str": StringType()}
    return StructType([StructField(n, types[t], True) for n, t in TABLES[table]])


def load_export(spark: Any, src: str) -> tuple[Any, Any]:
    """(events, finals) DataFrames from an export folder; missing tables come back empty."""
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    out = []
    for table in ("job_events", "job_final"):
        base = os.path.join(src, table)
        schema = _spark_schema(table)
        has_files = os.path.isdir(base) and any(f.endswith(".parquet") for _, _, fs in os.walk(base) for f in fs)
        if has_files:
            df = spark.read.option("basePath", base).parquet(base)
            df = df.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])
        else:
            df = spark.createDataFrame([], schema)
        out.append(df)
    return out[0], out[1]


def resolve_source(src: str, tmp: str) -> str:
    """An export folder for SRC: as is, downloaded from S3, or snapshot-exported from a live store."""
    from compat.history_export import DB_FILE, download_s3, export_history

    if src.startswith("s3://"):
        return download_s3(src, os.path.join(tmp, "s3"))
    from compat.history_export import export_shards, shard_stores

    if shard_stores(src):  # a sharded data directory (serve --shards): every shard's store
        dest = os.path.join(tmp, "snapshot")
        export_shards(src, dest, incremental=False, settle_ms=0)
        return dest
    if os.path.isfile(src) or os.path.isfile(os.path.join(src, DB_FILE)):
        dest = os.path.join(tmp, "snapshot")
        export_history(src, dest, incremental=False, settle_ms=0)
        return dest
    if not os.path.isdir(src):
        raise FileNotFoundError(f"no export, store or s3 URL at {src}")
    return src


def compute(events: Any, finals: Any) -> dict[str, Any]:
    """The figures as DataFrames, keyed by table name."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = ["queue", "name"]
    e = events.withColumn("name", F.coalesce(F.col("job_name"), F.lit(""))).cache()
    f = (finals.withColumn("name", F.coalesce(F.col("name"), F.lit("")))
         .withColumn("wait_ms", F.col("processed_on") - F.col("timestamp") - F.coalesce(F.col("delay"), F.lit(0)))
         .withColumn("run_ms", F.col("finished_on") - F.col("processed_on"))
         .withColumn("minute", F.floor(F.col("finished_on") / 60000) * 60000)
         .cache())

    ev_counts = e.groupBy(*key).agg(
        F.sum((F.col("event") == "added").cast("long")).alias("added"),
        F.sum((F.col("event") == "stalled").cast("long")).alias("stalled"),
        F.sum((F.col("event") == "retried").cast("long")).alias("retried"),
    )
    pct = "percentile({c}, array(0.5, 0.95, 0.99))"
    fin = f.groupBy(*key).agg(
        F.sum((F.col("state") == "completed").cast("long")).alias("completed"),
        F.sum((F.col("state") == "failed").cast("long")).alias("failed"),
        F.count(F.lit(1)).alias("finished"),
        F.min("minute").alias("first_minute"),
        F.max("minute").alias("last_minute"),
        F.expr(pct.format(c="wait_ms")).alias("wait"),
        F.expr(pct.format(c="run_ms")).alias("run"),
    )
    summary = ev_counts.join(fin, key, "full_outer").select(
        *key,
        *[F.coalesce(F.col(c), F.lit(0)).cast("long").alias(c)
          for c in ("added", "completed", "failed", "stalled", "retried")],
        F.when(F.col("finished") > 0,
               F.col("finished") / ((F.col("last_minute") - F.col("first_minute")) / 60000 + 1))
        .otherwise(F.lit(0.0)).alias("throughput_per_min"),
        *[F.col(w)[i].alias(f"{w}_p{p}") for w in ("wait", "run") for i, p in enumerate((50, 95, 99))],
    ).orderBy(*key)

    throughput = f.groupBy(*key, "minute").agg(
        F.count(F.lit(1)).alias("finished"),
        F.sum((F.col("state") == "completed").cast("long")).alias("completed"),
        F.sum((F.col("state") == "failed").cast("long")).alias("failed"),
    ).orderBy(*key, "minute")

    added_min = (e.filter(F.col("event") == "added")
                 .select(*key, (F.floor(F.col("ts_ms") / 60000) * 60000).alias("minute"),
                         F.lit(1).cast("long").alias("a"), F.lit(0).cast("long").alias("d")))
    done_min = f.filter(F.col("finished_on").isNotNull()).select(
        *key, "minute", F.lit(0).cast("long").alias("a"), F.lit(1).cast("long").alias("d"))
    w = Window.partitionBy(*key).orderBy("minute").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    backlog = (added_min.unionByName(done_min).groupBy(*key, "minute")
               .agg(F.sum("a").alias("added"), F.sum("d").alias("finished"))
               .withColumn("delta", F.col("added") - F.col("finished"))
               .withColumn("backlog", F.sum("delta").over(w))
               .orderBy(*key, "minute"))

    retries = (f.groupBy(*key, F.coalesce(F.col("attempts_made"), F.lit(0)).alias("attempts_made"))
               .agg(F.count(F.lit(1)).alias("jobs")).orderBy(*key, "attempts_made"))

    rw = Window.partitionBy(*key).orderBy(F.col("count").desc(), F.col("reason").asc())
    reasons = (f.filter(F.col("state") == "failed")
               .groupBy(*key, F.coalesce(F.col("failed_reason"), F.lit("")).alias("reason"))
               .agg(F.count(F.lit(1)).alias("count"))
               .withColumn("rank", F.row_number().over(rw))
               .filter(F.col("rank") <= TOP_REASONS)
               .orderBy(*key, "rank"))
    return {"summary": summary, "throughput": throughput, "backlog": backlog, "retries": retries,
            "failure_reasons": reasons}


def _rows(df: Any) -> list[dict[str, Any]]:
    return [r.asDict() for r in df.collect()]


def run_analytics(src: str, out: str, spark: Any = None, master: str | None = "local[*]") -> dict[str, Any]:
    """Compute every figure from SRC, write OUT/tables/*, OUT/report.json and OUT/report.html."""
    from compat.analytics.report import write_report

    t0 = time.time()
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    own = spark is None
    if own:
        spark = build_session(master)
    tmp = tempfile.mkdtemp(prefix="rq-analytics-")
    try:
        folder = resolve_source(src, tmp)
        events, finals = load_export(spark, folder)
        frames = compute(events, finals)
        os.makedirs(os.path.join(out, "tables"), exist_ok=True)
        data: dict[str, Any] = {}
        for name, df in frames.items():
            df = df.cache()
            df.coalesce(1).write.mode("overwrite").parquet(os.path.join(out, "tables", name))
            data[name] = _rows(df)
            df.unpersist()
        events.unpersist()
        finals.unpersist()
        data["meta"] = {"source": src, "generated_ms": int(time.time() * 1000),
                        "seconds": round(time.time() - t0, 3), "spark": spark.version}
        with open(os.path.join(out, "report.json"), "w") as fh:
            json.dump(data, fh, default=str)
        write_report(data, os.path.join(out, "report.html"))
        return data
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if own:
            spark.stop()


def build_parser(p: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = p or argparse.ArgumentParser(prog="respqueue analytics", description="Job-history analytics on Spark.")
    p.add_argument("src", metavar="SRC", help="export folder, s3://bucket/prefix, or a data dir / respqueue.db")
    p.add_argument("out", metavar="OUT", help="output folder: tables/<name>/ (Parquet), report.json, report.html")
    p.add_argument("--master", default=None,
                   help="Spark master, default local[*] (under spark-submit: whatever spark-submit was given)")
    return p


def run_cli(ns: argparse.Namespace) -> int:
    """Run from parsed arguments; print a short summary."""
    master = ns.master
    if master is None and "SPARK_ENV_LOADED" not in os.environ and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = "local[*]"
    data = run_analytics(ns.src, ns.out, master=master)
    for s in data["summary"]:
        print(f"{s['queue']}/{s['name'] or '-'}: added {s['added']}, completed {s['completed']}, "
              f"failed {s['failed']}, stalled {s['stalled']}, {s['throughput_per_min']:.1f}/min, "
              f"wait p50/p95/p99 {_ms(s['wait_p50'])}/{_ms(s['wait_p95'])}/{_ms(s['wait_p99'])} ms, "
              f"run p50/p95/p99 {_ms(s['run_p50'])}/{_ms(s['run_p95'])}/{_ms(s['run_p99'])} ms")
    print(f"wrote {len(TABLE_NAMES)} tables to {os.path.join(ns.out, 'tables')} and {os.path.join(ns.out, 'report.html')}"
          f" in {data['meta']['seconds']:.1f} s")
    return 0


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    return run_cli(ns)


if __name__ == "__main__":
    sys.exit(main())

"""Spark into the queue: add a DataFrame's rows as BullMQ jobs.

    from respqueue.pipeline import enqueue
    res = enqueue(df, "emails", name="send", data_cols=["to", "subject"],
                  connection={"host": "127.0.0.1", "port": 6379})
    print(res.total, res.partitions)

Each Spark partition opens its own bullmq-python ``Queue`` and adds its rows with ``addBulk`` in batches
of ``batch_size``; a batch that fails (connection error, timeout, server error) is retried up to
``max_retries`` times with exponential backoff, then the job fails. A retried batch may have been added
once already (the reply was lost): give ``job_id_col`` to make retries idempotent (BullMQ ignores a job
id it already holds). Jobs are plain BullMQ jobs, processed by ordinary Node or Python workers.

On a Redis Cluster (``respqueue serve --shards N``, or Redis's; ``cluster=True``, or found by ``INFO cluster``)
each queue is added through the node that serves its slot (found with CLUSTER SLOTS, asked again when a batch
fails, e.g. on -MOVED after a reshard): bullmq-python's addBulk pipelines EVALSHA, which redis-py's
``RedisCluster`` pipeline refuses. Every key of a queue must then hash to one slot, so the queue name or the
prefix needs a ``{hash tag}``
(``{emails}``, or ``prefix="{bull}"``), as BullMQ asks on Redis Cluster. ``queue_col`` takes each row's queue
from a column, so one Spark job fills queues on several shards.

bullmq and pyspark are imported inside the functions (the executors need ``bullmq`` installed).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import decimal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

Connection = dict[str, Any] | str


@dataclass
class EnqueueResult:
    """What ``enqueue`` added: the total and one entry per partition."""

    queue: str
    total: int = 0
    partitions: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    queues: dict[str, int] = field(default_factory=dict)  # jobs added per queue

    @property
    def retries(self) -> int:
        return sum(p["retries"] for p in self.partitions)

    def summary(self) -> str:
        rate = self.total / self.seconds if self.seconds > 0 else 0.0
        where = self.queue
        if len(self.queues) > 1 or (self.queues and self.queue not in self.queues):
            where = ", ".join(f"{q} ({n})" for q, n in sorted(self.queues.items()))
        return (f"added {self.total} jobs to {where} from {len(self.partitions)} partition(s) "
                f"in {self.seconds:.2f} s ({rate:,.0f} jobs/s, {self.retries} batch retries)")


def _jsonable(v: Any) -> Any:
    if isinstance(v, (_dt.datetime, _dt.date)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (bytes, bytearray)):
        return v.decode("utf-8", "replace")
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if hasattr(v, "asDict"):
        return _jsonable(v.asDict(recursive=True))
    return v


def row_to_job(row: dict[str, Any], name: str, data_cols: list[str] | None, opts: dict[str, Any] | None,
               name_col: str | None = None, job_id_col: str | None = None) -> dict[str, Any]:
    """One addBulk entry from a row (a dict)."""
    cols = data_cols if data_cols is not None else list(row)
    data = {c: _jsonable(row.get(c)) for c in cols}
    job_opts = dict(opts or {})
    if job_id_col is not None and row.get(job_id_col) is not None:
        job_opts["jobId"] = str(row[job_id_col])
    job_name = str(row[name_col]) if name_col is not None and row.get(name_col) is not None else name
    return {"name": job_name, "data": data, "opts": job_opts}


def has_hash_tag(key: str) -> bool:
    """Whether ``key`` has a non-empty ``{hash tag}`` (Redis Cluster hashes only that part)."""
    i = key.find("{")
    return i >= 0 and key.find("}", i + 1) > i + 1


def check_cluster_queue(queue: str, prefix: str | None) -> None:
    """On a cluster every key of a BullMQ queue (``<prefix>:<queue>:...``) must be in one slot."""
    if not has_hash_tag(f"{prefix or 'bull'}:{queue}:"):
        raise ValueError(f"queue {queue!r} (prefix {prefix or 'bull'!r}) has no {{hash tag}}: on a Redis Cluster "
                         "BullMQ needs one in the queue name or the prefix, e.g. '{" + queue + "}'")


def _conn_dict(connection: Connection | None) -> dict[str, Any]:
    """redis-py connection settings from a dict or a redis:// URL."""
    import redis

    if isinstance(connection, str):
        kw = dict(redis.Redis.from_url(connection).connection_pool.connection_kwargs)
        return {k: v for k, v in kw.items() if k in ("host", "port", "username", "password", "db", "ssl")}
    return {"host": "127.0.0.1", "port": 6379, **(connection or {})}


def slot_owner(connection: Connection | None, key: str) -> dict[str, Any]:
    """The connection settings of the cluster node that serves ``key``'s slot (CLUSTER SLOTS of the node
    ``connection`` names): bullmq-python's addBulk pipelines EVALSHA, which redis-py's cluster pipeline refuses,
    so each queue goes straight to the node that owns its hash tag's slot."""
    import redis

    from .cluster.slots import key_slot

    conn = _conn_dict(connection)
    conn.pop("db", None)
    slot = key_slot(key.encode())
    client = redis.Redis(socket_timeout=10, **conn)
    try:
        table = client.execute_command("CLUSTER", "SLOTS")
    finally:
        client.close()
    for entry in table:
        a, b, master = entry[0], entry[1], entry[2]
        if a <= slot <= b:
            host = master[0].decode() if isinstance(master[0], bytes) else str(master[0])
            return {**conn, "host": host or conn["host"], "port": int(master[1])}
    raise ValueError(f"no cluster node serves slot {slot} (of {key!r})")


def is_cluster(connection: Connection | None) -> bool:
    """Whether the server behind ``connection`` is a Redis Cluster node (``INFO cluster``: cluster_enabled:1)."""
    import redis

    if isinstance(connection, str):
        client = redis.Redis.from_url(connection, socket_timeout=10)
    else:
        client = redis.Redis(**{"host": "127.0.0.1", "port": 6379, "socket_timeout": 10, **(connection or {})})
    try:
        return str(client.info("cluster").get("cluster_enabled", 0)) == "1"
    finally:
        client.close()


async def add_rows(rows: Iterable[dict[str, Any]], queue: str, *, name: str = "default",
                   data_cols: list[str] | None = None, opts: dict[str, Any] | None = None,
                   connection: Connection | None = None, prefix: str | None = None, batch_size: int = 1000,
                   max_retries: int = 3, backoff_s: float = 0.2, name_col: str | None = None,
                   job_id_col: str | None = None, cluster: bool = False,
                   queue_col: str | None = None) -> dict[str, Any]:
    """Add rows as jobs in batches through bullmq-python's addBulk; return counts (``queues``: per queue).

    ``queue_col``: each row's queue is that column's value (``queue`` where it is empty). ``cluster``: through a
    RedisCluster client per queue (each queue needs a hash tag)."""
    from bullmq import Queue

    opened: dict[str, Any] = {}
    pending: dict[str, list[dict[str, Any]]] = {}
    per_queue: dict[str, int] = {}
    added = batches = retries = 0

    def queue_for(qname: str) -> Any:
        q = opened.get(qname)
        if q is None:
            if cluster:
                check_cluster_queue(qname, prefix)
                conn: Any = slot_owner(connection, f"{prefix or 'bull'}:{qname}:id")
            else:
                conn = connection if connection is not None else {"host": "127.0.0.1", "port": 6379}
            qopts: dict[str, Any] = {"connection": conn}
            if prefix:
                qopts["prefix"] = prefix
            q = opened[qname] = Queue(qname, qopts)
            pending[qname] = []
            per_queue.setdefault(qname, 0)
        return q

    async def flush(qname: str) -> None:
        nonlocal added, batches, retries
        q, batch = opened[qname], pending[qname]
        for attempt in range(max_retries + 1):
            try:
                await q.addBulk(batch)
                break
            except Exception:
                if attempt == max_retries:
                    raise
                retries += 1
                await asyncio.sleep(backoff_s * (2 ** attempt))
                if cluster:  # the slot may have moved (MOVED): ask again which node serves it
                    old = opened.pop(qname)
                    keep = pending.pop(qname)
                    try:
                        await old.close()
                    except Exception:  # a broken connection: it is dropped anyway
                        pass
                    q = queue_for(qname)
                    pending[qname] = keep
        added += len(batch)
        per_queue[qname] += len(batch)
        batches += 1
        batch.clear()

    try:
        for row in rows:
            qname = queue
            if queue_col is not None and row.get(queue_col) not in (None, ""):
                qname = str(row[queue_col])
            queue_for(qname)
            batch = pending[qname]
            batch.append(row_to_job(row, name, data_cols, opts, name_col, job_id_col))
            if len(batch) >= batch_size:
                await flush(qname)
        for qname, batch in pending.items():
            if batch:
                await flush(qname)
    finally:
        for q in opened.values():
            await q.close()
    return {"added": added, "batches": batches, "retries": retries, "queues": per_queue}


def _partition_adder(queue: str, kw: dict[str, Any]) -> Any:
    def run(index: int, it: Iterator[Any]) -> Iterator[dict[str, Any]]:
        t0 = time.time()
        res = asyncio.run(add_rows((r.asDict(recursive=True) for r in it), queue, **kw))
        res.update(partition=index, seconds=round(time.time() - t0, 3))
        yield res

    return run


def enqueue(df: Any, queue: str, name: str = "default", data_cols: list[str] | None = None,
            opts: dict[str, Any] | None = None, connection: Connection | None = None, *, prefix: str | None = None,
            batch_size: int = 1000, max_retries: int = 3, name_col: str | None = None,
            job_id_col: str | None = None, progress: Callable[..., Any] | None = None,
            cluster: bool | None = None, queue_col: str | None = None, progress_every: float = 0.25) -> EnqueueResult:
    """Add every row of the Spark DataFrame ``df`` to BullMQ queue ``queue``; one addBulk stream per partition.

    ``data_cols`` picks the columns that form each job's data (default: all); ``name`` is the job name, or
    take it per row from ``name_col``; ``opts`` are BullMQ job options for every job; ``connection`` is a
    bullmq connection (dict of redis-py options or a redis:// URL), default 127.0.0.1:6379.

    ``progress`` (a factory from respqueue/progress.py; default none) shows jobs added so far, out of
    ``df.count()`` (an extra pass over the input, only then), as the queue's id counter grows: BullMQ's
    add scripts INCR it once per job, so jobs other producers add meanwhile count too; the counter is read
    every ``progress_every`` seconds.

    ``cluster``: the connection is a node of a Redis Cluster (None: ask the server, ``INFO cluster``); each
    queue then needs a hash tag. ``queue_col``: take each row's queue from this column (``queue`` where it is
    empty); ``EnqueueResult.queues`` has the count per queue.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if data_cols is not None:
        missing = [c for c in data_cols if c not in df.columns]
        if missing:
            raise ValueError(f"no such column(s): {', '.join(missing)}")
    if queue_col is not None and queue_col not in df.columns:
        raise ValueError(f"no such column: {queue_col}")
    if cluster is None:
        cluster = is_cluster(connection)
    if cluster and queue_col is None:
        check_cluster_queue(queue, prefix)
    kw = {"name": name, "data_cols": data_cols, "opts": opts, "connection": connection, "prefix": prefix,
          "batch_size": batch_size, "max_retries": max_retries, "name_col": name_col, "job_id_col": job_id_col,
          "cluster": cluster, "queue_col": queue_col}
    t0 = time.time()
    watcher = None
    if progress is not None and queue_col is None:
        pr = progress(f"enqueue: {queue}", df.count(), "jobs")
        watcher = _CounterWatch(connection, prefix, queue, pr, every_s=progress_every, cluster=cluster)
    try:
        parts = df.rdd.mapPartitionsWithIndex(_partition_adder(queue, kw)).collect()
    except BaseException:
        if watcher is not None:
            watcher.stop(None)
        raise
    parts.sort(key=lambda p: p["partition"])
    per_queue: dict[str, int] = {}
    for p in parts:
        for qn, n in p.get("queues", {}).items():
            per_queue[qn] = per_queue.get(qn, 0) + n
    res = EnqueueResult(queue=queue, total=sum(p["added"] for p in parts), partitions=parts,
                        seconds=time.time() - t0, queues=per_queue)
    if watcher is not None:
        watcher.stop(res.total)
    return res


class _CounterWatch:
    """Polls the queue's id counter (``<prefix>:<queue>:id``) from the driver and feeds a Progress."""

    def __init__(self, connection: Connection | None, prefix: str | None, queue: str, pr: Any,
                 every_s: float = 0.25, cluster: bool = False) -> None:
        import redis

        if cluster:
            from redis.cluster import RedisCluster

            if isinstance(connection, str):
                self.client = RedisCluster.from_url(connection, socket_timeout=5)
            else:
                conn = {"host": "127.0.0.1", "port": 6379, "socket_timeout": 5, **(connection or {})}
                conn.pop("db", None)
                self.client = RedisCluster(**conn)
        elif isinstance(connection, str):
            self.client = redis.Redis.from_url(connection, socket_timeout=5)
        else:
            self.client = redis.Redis(**{"host": "127.0.0.1", "port": 6379, "socket_timeout": 5, **(connection or {})})
        self.key = f"{prefix or 'bull'}:{queue}:id"
        self.pr = pr
        self.every_s = every_s
        self.base = self._read() or 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="respqueue-enqueue-progress", daemon=True)
        self.thread.start()

    def _read(self) -> int | None:
        try:
            v = self.client.get(self.key)
            return int(v) if v is not None else 0
        except Exception:  # progress is best effort: a hiccup skips one update
            return None

    def _run(self) -> None:
        while not self.done.wait(self.every_s):
            v = self._read()
            if v is not None:
                self.pr.set(max(0, v - self.base))

    def stop(self, total: int | None) -> None:
        """Stop polling; with the final ``total``, show it and finish the display."""
        self.done.set()
        self.thread.join()
        if total is not None:
            self.pr.set(total)
            self.pr.close()
        else:
            self.pr.abort()
        self.client.close()


def read_file(spark: Any, path: str) -> Any:
    """A DataFrame from a .parquet, .csv (with a header row) or .jsonl/.json file (or folder)."""
    low = path.lower().rstrip("/")
    if low.endswith(".parquet") or low.endswith(".pq"):
        return spark.read.parquet(path)
    if low.endswith(".csv"):
        return spark.read.option("header", "true").option("inferSchema", "true").csv(path)
    if low.endswith(".jsonl") or low.endswith(".json") or low.endswith(".ndjson"):
        return spark.read.json(path)
    raise ValueError(f"cannot tell the format of {path} (use .parquet, .csv or .jsonl)")

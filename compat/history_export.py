"""``respqueue history export``: job history from the store to Parquet, incrementally.

Reads ``job_events`` and ``job_final`` from ``<dir>/respqueue.db`` in one read transaction (a consistent
snapshot while the server keeps writing, thanks to WAL) and writes Parquet files laid out as::

    DEST/job_events/queue=<q>/date=YYYY-MM-DD/part-<uuid>.parquet
    DEST/job_final/queue=<q>/date=YYYY-MM-DD/part-<uuid>.parquet

``queue`` is percent-encoded in the path (Hive style, which Spark and pyarrow decode) and is not stored in
the files; ``date`` is the UTC day of ``ts_ms`` (events) or ``finished_on`` (final records).

DEST is a folder or ``s3://bucket/prefix`` (boto3; endpoint and credentials from the usual AWS
environment/config, e.g. ``AWS_ENDPOINT_URL``).

Incremental: ``history_watermarks`` keeps, per DEST, the last exported event id and the ``recorded_ms``
up to which final records were exported. Event ids only grow (SQLite rowids, one writer), so events are
exported exactly once. Final records are exported up to ``now - settle_ms`` (default 2 s): a record is
stamped a few ms before its commit, and the settle window keeps a late commit from slipping under the
watermark. The watermark is written after the files, so a crash in between re-exports (at least once).

pyarrow and boto3 are imported lazily: the server never imports them.
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import os
import sqlite3
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from compat.history_schema import (
    ID_SPAN,
    TABLES,
    ensure_watermarks,
    finals_select,
    has_history,
    is_chunked,
    max_event_id,
)

DB_FILE = "respqueue.db"


class ExportError(Exception):
    """A user-facing export failure (no database, no history tables, bad DEST)."""


@dataclass
class ExportResult:
    dest: str
    events: int = 0
    finals: int = 0
    files: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)
    last_event_id: int = 0
    last_final_ms: int = 0

    def summary(self) -> str:
        mark = f"event id {self.last_event_id}, final records up to {_iso(self.last_final_ms)}"
        if not self.events and not self.finals:
            return f"nothing new to export to {self.dest} (watermark: {mark})"
        return (f"exported {self.events} events and {self.finals} final records "
                f"from {len(self.queues)} queue(s) ({', '.join(self.queues)}) to {self.dest} in {len(self.files)} file(s); "
                f"watermark: {mark}")


def _iso(ms: int) -> str:
    if ms < 0:
        return "-"
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def db_path(dir_or_file: str) -> str:
    """The store file: DIR/respqueue.db, or the path itself when it is a file."""
    if os.path.isdir(dir_or_file):
        return os.path.join(dir_or_file, DB_FILE)
    return dir_or_file


def parse_time(s: str | None) -> int | None:
    """Milliseconds since the epoch from digits (ms) or an ISO 8601 date/time (UTC unless it says otherwise)."""
    if s is None or s == "":
        return None
    s = s.strip()
    if s.lstrip("-").isdigit():
        return int(s)
    try:
        t = _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise ExportError(f"not a time: {s!r} (use milliseconds since the epoch or ISO 8601)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    return int(t.timestamp() * 1000)


def normalize_dest(dest: str) -> str:
    """The watermark key: s3 URLs as given (without a trailing slash), folders as absolute paths."""
    if dest.startswith("s3://"):
        return dest.rstrip("/")
    return os.path.abspath(dest)


def connect(path: str, timeout: float = 10.0) -> sqlite3.Connection:
    """Open the store for the export (it must exist: the export never creates a store)."""
    if not os.path.exists(path):
        raise ExportError(f"no store at {path}")
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    conn.execute("PRAGMA busy_timeout=%d" % int(timeout * 1000))
    return conn


def _arrow_schema(table: str, drop: tuple[str, ...] = ("queue",)) -> Any:
    import pyarrow as pa

    types = {"int": pa.int64(), "str": pa.string()}
    return pa.schema([(n, types[t]) for n, t in TABLES[table] if n not in drop])


def _day(ms: int | None) -> str:
    if ms is None:
        return "unknown"
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).strftime("%Y-%m-%d")


class _Sink:
    """Write files under a local folder or an S3 prefix."""

    def __init__(self, dest: str) -> None:
        self.dest = dest
        if dest.startswith("s3://"):
            import boto3

            rest = dest[5:]
            self.bucket, _, self.prefix = rest.partition("/")
            if not self.bucket:
                raise ExportError(f"no bucket in {dest!r}")
            self.prefix = self.prefix.strip("/")
            self.s3 = boto3.client("s3")
        else:
            self.s3 = None
            os.makedirs(dest, exist_ok=True)

    def put(self, rel: str, data: bytes) -> str:
        if self.s3 is not None:
            key = f"{self.prefix}/{rel}" if self.prefix else rel
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)
            return f"s3://{self.bucket}/{key}"
        path = os.path.join(self.dest, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return path


def _write_table(sink: _Sink, table: str, rows: list[tuple], time_col: str,
                 progress: Any = None, tag: str = "") -> tuple[list[str], set[str]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [n for n, _ in TABLES[table]]
    qi, ti = names.index("queue"), names.index(time_col)
    keep = [i for i, n in enumerate(names) if n != "queue"]
    groups: dict[tuple[str, str], list[tuple]] = defaultdict(list)
    for row in rows:
        groups[(row[qi], _day(row[ti]))].append(row)
    schema = _arrow_schema(table)
    files = []
    for (q, day), grp in sorted(groups.items()):
        cols = {names[i]: [r[i] for r in grp] for i in keep}
        tbl = pa.Table.from_pydict(cols, schema=schema)
        buf = io.BytesIO()
        pq.write_table(tbl, buf, compression="zstd")
        part = f"part-{tag}-" if tag else "part-"
        rel = f"{table}/queue={quote(q, safe='')}/date={day}/{part}{uuid.uuid4().hex}.parquet"
        files.append(sink.put(rel, buf.getvalue()))
        if progress is not None:
            progress.update(len(grp))
    return files, {q for q, _ in groups}


def export_history(
    source: str,
    dest: str,
    since_ms: int | None = None,
    until_ms: int | None = None,
    *,
    incremental: bool = True,
    settle_ms: int = 2000,
    now_ms: int | None = None,
    progress: Callable[..., Any] | None = None,
    file_tag: str = "",
) -> ExportResult:
    """Export new history rows from ``source`` (a data dir or a .db file) to ``dest``.

    ``since_ms``/``until_ms`` bound ``ts_ms`` (events) and ``finished_on`` (final records), both inclusive.
    With ``incremental`` false the watermark is neither read nor written (a one-off snapshot).
    ``progress`` (see respqueue/progress.py) makes the display of the rows written; default none.
    ``file_tag`` goes into every file name (``part-<tag>-<uuid>.parquet``): the shard, in a cluster's export.
    """
    path = db_path(source)
    conn = connect(path)
    key = normalize_dest(dest)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    try:
        if not has_history(conn):
            raise ExportError(f"{path} has no job history tables (job_events, job_final)")
        last_event_id, last_final_ms = 0, -1
        chunked = is_chunked(conn)
        if incremental:
            # The capture side creates this table too; make sure it is there before the snapshot.
            ensure_watermarks(conn)
            row = conn.execute(
                "SELECT last_event_id, last_final_ms FROM history_watermarks WHERE dest=?", (key,)).fetchone()
            if row:
                last_event_id, last_final_ms = row
        cutoff = now - settle_ms
        ev_sql, ev_args, fi_sql, fi_args = _queries(chunked, last_event_id, last_final_ms, cutoff, since_ms, until_ms)
        # One read transaction: both tables come from the same snapshot.
        conn.execute("BEGIN")
        try:
            events = conn.execute(ev_sql, ev_args).fetchall()
            if chunked:  # the legacy rows above, the chunks' events here (ids above the legacy ones)
                events += _chunk_events(conn, last_event_id, since_ms, until_ms)
            finals = conn.execute(fi_sql, fi_args).fetchall()
            if chunked:
                max_id = max_event_id(conn)
            else:
                max_id = conn.execute("SELECT coalesce(max(id), 0) FROM job_events").fetchone()[0]
        finally:
            conn.execute("COMMIT")
    except sqlite3.Error as e:
        conn.close()
        raise ExportError(f"cannot read {path}: {e}") from None
    except BaseException:
        conn.close()
        raise

    res = ExportResult(dest=key, events=len(events), finals=len(finals))
    try:
        sink = _Sink(dest)
        from respqueue.progress import silent

        with (progress or silent)("history export: writing", len(events) + len(finals), "rows") as pr:
            f1, q1 = _write_table(sink, "job_events", events, "ts_ms", pr, file_tag)
            f2, q2 = _write_table(sink, "job_final", finals, "finished_on", pr, file_tag)
        res.files = f1 + f2
        res.queues = sorted(q1 | q2)
        # Without --until every event in the snapshot was considered; with it, only up to the last exported.
        if until_ms is None:
            res.last_event_id = max(last_event_id, max_id)
            res.last_final_ms = max(last_final_ms, cutoff)
        else:
            res.last_event_id = max([last_event_id] + [e[0] for e in events])
            fi_rec = [r[-1] for r in finals]
            res.last_final_ms = max([last_final_ms] + fi_rec)
        if incremental:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(
                    "INSERT INTO history_watermarks(dest, last_event_id, last_final_ms, updated_ms) VALUES(?,?,?,?)"
                    " ON CONFLICT(dest) DO UPDATE SET last_event_id=excluded.last_event_id,"
                    " last_final_ms=excluded.last_final_ms, updated_ms=excluded.updated_ms",
                    (key, res.last_event_id, res.last_final_ms, int(time.time() * 1000)),
                )
    finally:
        conn.close()
    return res


def _queries(chunked: bool, last_event_id: int, last_final_ms: int, cutoff: int, since_ms: int | None,
             until_ms: int | None) -> tuple[str, list[Any], str, list[Any]]:
    """The events' and final records' SELECTs (and their arguments) for the rows after the watermark.

    A store of an earlier version that no server has opened since has the row-per-event tables
    ``job_events``/``job_final``. On a chunked store (schema version 7) the events' SELECT reads the legacy
    table only (:func:`_chunk_events` adds the chunks' events), and the final records' filters go on the
    chunks first (recorded_ms, read without unpacking), then on the unpacked records."""
    ev_cols = ",".join(n for n, _ in TABLES["job_events"])
    fi_cols = ",".join(n for n, _ in TABLES["job_final"])
    ev = ["id > ?"]
    fi = ["recorded_ms > ?", "recorded_ms <= ?"]
    cfi = ["c.recorded_ms > ?", "c.recorded_ms <= ?"]
    ev_args: list[Any] = [last_event_id]
    fi_args: list[Any] = [last_final_ms, cutoff]
    cfi_args: list[Any] = [last_final_ms, cutoff]
    if since_ms is not None:
        ev.append("ts_ms >= ?")
        fi.append("finished_on >= ?")
        cfi.append("f.value ->> 7 >= ?")
        ev_args.append(since_ms)
        fi_args.append(since_ms)
        cfi_args.append(since_ms)
    if until_ms is not None:
        ev.append("ts_ms <= ?")
        fi.append("finished_on <= ?")
        cfi.append("f.value ->> 7 <= ?")
        ev_args.append(until_ms)
        fi_args.append(until_ms)
        cfi_args.append(until_ms)
    events, finals = ("job_events_legacy", "job_final_legacy") if chunked else ("job_events", "job_final")
    ev_sql = f"SELECT {ev_cols} FROM {events} WHERE {' AND '.join(ev)} ORDER BY id"  # noqa: S608
    if not chunked:
        return ev_sql, ev_args, f"SELECT {fi_cols} FROM {finals} WHERE {' AND '.join(fi)}", fi_args  # noqa: S608
    return ev_sql, ev_args, finals_select(" AND ".join(cfi), " AND ".join(fi)), fi_args + cfi_args


_PAD = [None] * 9


def _chunk_events(conn: sqlite3.Connection, last_event_id: int, since_ms: int | None,
                  until_ms: int | None) -> list[tuple[Any, ...]]:
    """The events of the chunks after ``last_event_id`` (within ``since_ms``/``until_ms``), in id order, as
    ``job_events`` rows. The chunks are read by their own columns (id range, time range) and unpacked with
    json.loads: the same rows as the ``job_events`` view gives, at a fraction of the cost of its
    ``->>`` per column (an export reads every column)."""
    where = ["id >= ?", "n > 0"]
    args: list[Any] = [last_event_id // ID_SPAN]
    if since_ms is not None:
        where.append("last_ms >= ?")
        args.append(since_ms)
    if until_ms is not None:
        where.append("ts_ms <= ?")
        args.append(until_ms)
    out: list[tuple[Any, ...]] = []
    add = out.append
    loads = json.loads
    sql = f"SELECT id, prefix, queue, events FROM history_chunks WHERE {' AND '.join(where)} ORDER BY id"  # noqa: S608
    for cid, prefix, queue, packed in conn.execute(sql, args):
        eid = cid * ID_SPAN - 1
        for e in loads(packed):
            eid += 1
            if eid <= last_event_id:
                continue
            ts = e[0]
            if (since_ms is not None and ts < since_ms) or (until_ms is not None and ts > until_ms):
                continue
            if len(e) < 9:  # (stored without its trailing nulls: history_schema.pack)
                e += _PAD[len(e):]
            add((eid, ts, prefix, queue, *e[1:]))
    return out


def shard_stores(source: str) -> list[tuple[int, str]]:
    """``[(K, D/shard-K)]`` when ``source`` is a sharded data directory (``serve --shards``), else ``[]``."""
    from respqueue.cluster.backup import shard_dirs

    if not os.path.isdir(source):
        return []
    return [(k, d) for k, d in shard_dirs(source) if os.path.isfile(os.path.join(d, DB_FILE))]


def export_shards(
    source: str, dest: str, since_ms: int | None = None, until_ms: int | None = None, **kw: Any
) -> list[tuple[int, ExportResult]]:
    """Export every shard of the sharded data directory ``source`` into the one dataset ``dest`` (same
    partitioning; each file named ``part-shard-K-<uuid>.parquet``). Each shard's store keeps its own watermark
    for ``dest``, so an incremental export goes on where each shard left off."""
    shards = shard_stores(source)
    if not shards:
        raise ExportError(f"{source} is not a sharded data directory (no cluster.toml and shard-K stores)")
    return [(k, export_history(d, dest, since_ms, until_ms, file_tag=f"shard-{k}", **kw)) for k, d in shards]


def read_export(src: str, table: str) -> Any:
    """Read one exported table back as a pyarrow Table (``queue`` restored from the path)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    base = os.path.join(src, table)
    names = [n for n, _ in TABLES[table]]
    types = {"int": pa.int64(), "str": pa.string()}
    schema = pa.schema([(n, types[t]) for n, t in TABLES[table]] + [("date", pa.string())])
    if not os.path.isdir(base):
        return schema.empty_table().select(names)
    part = ds.partitioning(pa.schema([("queue", pa.string()), ("date", pa.string())]), flavor="hive")
    d = ds.dataset(base, format="parquet", partitioning=part, schema=schema)
    return d.to_table().select(names)


def download_s3(src: str, local: str) -> str:
    """Copy an S3 export (``s3://bucket/prefix``) into a local folder; return that folder."""
    import boto3

    bucket, _, prefix = src[5:].partition("/")
    prefix = prefix.strip("/")
    s3 = boto3.client("s3")
    pager = s3.get_paginator("list_objects_v2")
    for page in pager.paginate(Bucket=bucket, Prefix=prefix + "/" if prefix else ""):
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(prefix):].lstrip("/") if prefix else obj["Key"]
            if not rel.endswith(".parquet"):
                continue
            path = os.path.join(local, *rel.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            s3.download_file(bucket, obj["Key"], path)
    return local

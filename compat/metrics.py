"""BullMQ queues in ``/metrics`` and the dashboard (the core HTTP server is respqueue/http/).

:func:`register` (called by the server when ``--metrics-port`` is set) adds:

* a metrics provider (``server.metrics_providers``) writing per-queue families labelled ``db``, ``prefix``
  and ``queue``: jobs by state (list lengths and zset cardinalities of BullMQ's keys, O(1) each), whether
  the queue is paused, the age of the job next in line in ``wait``, jobs added/completed/failed/retried
  since the server started, and wait-time and run-time histograms;
* :class:`QueueMetrics` on ``server.history.metrics``: the job-history capture (compat/history.py) already
  sees every job's ``added``, ``retried``, ``completed`` and ``failed`` event with its hash, and calls it
  there. Per queue it keeps counters, two fixed-bucket histograms, the last 1,000 wait and run times (for
  exact recent percentiles) and a ring of 10-second counters over the last hour (the dashboard's charts).
  With ``--history off`` or ``--durability memory`` those families stay empty;
* the dashboard's JSON API and actions (compat/dashboard.py).

Queues are found from their keys (``<prefix>:<queue>:meta`` or ``:events``): the
keyspace is scanned at start and then every :data:`RESCAN_S` seconds in the background, in chunks between
which the loop serves clients, and before a scrape or a dashboard read when the list is older than 2 s (at once
on a keyspace of up to 50,000 keys, else in the background); a queue the capture sees for the first time is
added at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any

from respqueue import http as _http
from respqueue.stats import Histogram
from respqueue.types.hash import Hash
from respqueue.types.list import List

log = logging.getLogger("respqueue")

#: state -> key suffix, as BullMQ's getCounts reads them (lists: wait, active, paused; the rest zsets)
STATES: tuple[tuple[str, bytes], ...] = (
    ("wait", b"wait"),
    ("active", b"active"),
    ("paused", b"paused"),
    ("delayed", b"delayed"),
    ("prioritized", b"prioritized"),
    ("waiting-children", b"waiting-children"),
    ("completed", b"completed"),
    ("failed", b"failed"),
)
# keys that say "a queue lives here": its meta hash (written by the first add) and its events stream
# (a job's own keys never use these suffixes; ``:failed`` or ``:processed`` may belong to a parent job)
_MARKS = (b":meta", b":events")
# any of these keeps a queue the capture counted listed
_ANY = (
    b"meta",
    b"events",
    b"id",
    b"wait",
    b"active",
    b"delayed",
    b"prioritized",
    b"completed",
    b"failed",
    b"paused",
    b"waiting-children",
)
RESCAN_S = 10.0  # background rescans
FRESH_S = 2.0  # a scrape or the dashboard rescans a list older than this...
SYNC_SCAN_KEYS = 50_000  # ...at once up to this many keys (a few ms), else in the background
SCAN_CHUNK = 20_000
SLOT_MS = 10_000  # the dashboard's time series: 10-second slots
SLOTS = 360  # one hour
RECENT = 1000  # wait/run times kept for exact recent percentiles
# wait and run times are observed in ms and exposed in seconds
JOB_BOUNDS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000, 300_000, 900_000, 3_600_000)

QueueKey = tuple[int, str, str]  # (db, prefix, queue)


def _int(b: Any) -> int | None:
    if b is None:
        return None
    try:
        return int(b)
    except (TypeError, ValueError):
        try:
            return int(float(b))
        except (TypeError, ValueError):
            return None


class QueueStats:
    """What the capture counted for one queue since the server started."""

    __slots__ = ("added", "completed", "failed", "retried", "wait", "run", "recent_wait", "recent_run", "ring")

    def __init__(self) -> None:
        self.added = self.completed = self.failed = self.retried = 0
        self.wait = Histogram(JOB_BOUNDS_MS, 0.001)
        self.run = Histogram(JOB_BOUNDS_MS, 0.001)
        self.recent_wait: deque[int] = deque(maxlen=RECENT)
        self.recent_run: deque[int] = deque(maxlen=RECENT)
        # [slot, added, completed, failed] per 10 s, newest last
        self.ring: deque[list[int]] = deque(maxlen=SLOTS)

    def _slot(self, ms: int) -> list[int]:
        s = ms // SLOT_MS
        ring = self.ring
        if ring and ring[-1][0] >= s:
            return ring[-1]
        cur = [s, 0, 0, 0]
        ring.append(cur)
        return cur

    def series(self, now_ms: int, slots: int = SLOTS) -> list[list[int]]:
        """``[slot start ms, added, completed, failed]`` for the last ``slots`` slots, zeros filled in."""
        last = now_ms // SLOT_MS
        have = {r[0]: r for r in self.ring}
        out = []
        for s in range(last - slots + 1, last + 1):
            r = have.get(s)
            out.append([s * SLOT_MS, r[1], r[2], r[3]] if r else [s * SLOT_MS, 0, 0, 0])
        return out


def percentiles(values: Any, qs: tuple[float, ...] = (0.5, 0.95, 0.99)) -> dict[str, float | None]:
    """Exact (nearest-rank) percentiles of ``values`` in seconds, from ms."""
    v = sorted(values)
    out: dict[str, float | None] = {}
    for q in qs:
        key = "p%d" % round(q * 100)
        if not v:
            out[key] = None
        else:
            i = min(len(v) - 1, max(0, int(q * len(v) + 0.999999) - 1))
            out[key] = v[i] / 1000.0
    return out


class QueueMetrics:
    """Per-queue statistics and the set of known queues (``server.bullmq_metrics``)."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.stats: dict[QueueKey, QueueStats] = {}
        self.queues: dict[QueueKey, bytes] = {}  # -> key base b"<prefix>:<queue>:"
        self._task: asyncio.Task[None] | None = None
        self._scan: asyncio.Task[None] | None = None
        self.scans = 0
        self.last_scan = 0.0

    # ---- called by compat/history.py (hot path: a few dict operations) ---------------------------
    def _get(self, db: int, prefix: str, queue: str) -> QueueStats:
        k = (db, prefix, queue)
        st = self.stats.get(k)
        if st is None:
            st = self.stats[k] = QueueStats()
            if k not in self.queues:
                self.queues[k] = f"{prefix}:{queue}:".encode()
        return st

    def added(self, db: int, prefix: str, queue: str, ms: int) -> None:
        st = self._get(db, prefix, queue)
        st.added += 1
        st._slot(ms)[1] += 1

    def retried(self, db: int, prefix: str, queue: str) -> None:
        self._get(db, prefix, queue).retried += 1

    def finished(self, db: int, prefix: str, queue: str, completed: bool, ms: int, g: Any, live: bool) -> None:
        """A job completed or failed (for good) at ``ms``; ``g`` reads its hash (None: unknown)."""
        st = self._get(db, prefix, queue)
        slot = st._slot(ms)
        if completed:
            st.completed += 1
            slot[2] += 1
        else:
            st.failed += 1
            slot[3] += 1
        if g is None:
            return
        processed = _int(g(b"processedOn"))
        if processed is None:
            return
        ts = _int(g(b"timestamp"))
        fin = _int(g(b"finishedOn")) if live else None
        if fin is None or fin < processed:
            fin = ms
        if ts is not None and processed >= ts:
            st.wait.observe(processed - ts)
            st.recent_wait.append(processed - ts)
        if fin >= processed:
            st.run.observe(fin - processed)
            st.recent_run.append(fin - processed)

    # ---- finding queues ----------------------------------------------------------------------------
    def scan_now(self) -> None:
        """Scan every database at once (at start, before clients connect)."""
        found: dict[QueueKey, bytes] = {}
        for db in self.server.dbs:
            if db.data:
                _scan_keys(db.index, list(db.data), found)
        self._replace(found)

    async def rescan(self) -> None:
        """Scan the keyspace in chunks, yielding to the loop between them."""
        found: dict[QueueKey, bytes] = {}
        for db in self.server.dbs:
            if not db.data:
                continue
            keys = list(db.data)
            for i in range(0, len(keys), SCAN_CHUNK):
                _scan_keys(db.index, keys[i : i + SCAN_CHUNK], found)
                await asyncio.sleep(0)
        self._replace(found)

    def _replace(self, found: dict[QueueKey, bytes]) -> None:
        # queues the capture counted stay listed while any of their keys exists
        for k, base in self.queues.items():
            if k not in found and k in self.stats and self._exists(k[0], base):
                found[k] = base
        # a queue gone from the keyspace (obliterated) and idle for an hour: forget its statistics
        idle = int(time.time() * 1000) // SLOT_MS - SLOTS
        for k in [k for k in self.stats if k not in found]:
            ring = self.stats[k].ring
            if not ring or ring[-1][0] < idle:
                del self.stats[k]
        self.queues = found
        self.scans += 1
        self.last_scan = time.monotonic()

    def refresh(self) -> None:
        """Before a scrape or a dashboard read: rescan a list older than FRESH_S, at once on a small
        keyspace, else in the background (this read uses the list as it is)."""
        if time.monotonic() - self.last_scan < FRESH_S:
            return
        if sum(len(db.data) for db in self.server.dbs) <= SYNC_SCAN_KEYS:
            self.scan_now()
        elif self._scan is None or self._scan.done():
            self._scan = asyncio.get_running_loop().create_task(self.rescan())

    def _exists(self, dbi: int, base: bytes) -> bool:
        data = self.server.dbs[dbi].data
        return any(base + m in data for m in _ANY)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(RESCAN_S)
            try:
                await self.rescan()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - never take the server down
                log.exception("queue scan failed")

    # ---- reading a queue -----------------------------------------------------------------------------
    def snapshot(self, k: QueueKey) -> dict[str, Any]:
        """Counts by state, paused, the age of the oldest waiting job: O(1) reads of the queue's keys."""
        dbi, _prefix, _queue = k
        base = self.queues.get(k) or f"{k[1]}:{k[2]}:".encode()
        data = self.server.dbs[dbi].data
        counts = {}
        for state, suffix in STATES:
            v = data.get(base + suffix)
            counts[state] = len(v) if v is not None and type(v) is not bytes else 0
        meta = data.get(base + b"meta")
        paused = False
        if meta is not None and type(meta) is not bytes:
            paused = _hget(meta, b"paused") is not None
        oldest = None
        w = data.get(base + b"wait")
        if isinstance(w, List) and len(w):
            jid = w._d[-1]  # BullMQ pushes on the left and takes from the right: next in line
            h = data.get(base + jid)
            ts = _int(_hget(h, b"timestamp")) if h is not None and type(h) is not bytes else None
            if ts is not None:
                oldest = max(0.0, time.time() - ts / 1000.0)
        return {"counts": counts, "paused": paused, "oldest_wait_s": oldest}

    # ---- /metrics ----------------------------------------------------------------------------------------
    def write(self, e: Any) -> None:
        self.refresh()
        queues = sorted(self.queues)
        snaps = {k: self.snapshot(k) for k in queues}

        def lab(k: QueueKey) -> dict[str, Any]:
            return {"db": k[0], "prefix": k[1], "queue": k[2]}

        e.metric("respqueue_bullmq_queues", "gauge", "BullMQ queues found in the keyspace.", len(queues))
        e.family(
            "respqueue_bullmq_jobs",
            "gauge",
            "Jobs per BullMQ queue and state (LLEN of wait/active/paused, ZCARD of the others).",
        )
        for k in queues:
            for state, n in snaps[k]["counts"].items():
                e.sample("respqueue_bullmq_jobs", n, {**lab(k), "state": state})
        e.family("respqueue_bullmq_queue_paused", "gauge", "1 when the queue is paused (its meta hash says so).")
        for k in queues:
            e.sample("respqueue_bullmq_queue_paused", 1 if snaps[k]["paused"] else 0, lab(k))
        e.family(
            "respqueue_bullmq_oldest_waiting_job_age_seconds",
            "gauge",
            "Age (now - timestamp) of the job next in line in wait; 0 when wait is empty.",
        )
        for k in queues:
            e.sample("respqueue_bullmq_oldest_waiting_job_age_seconds", snaps[k]["oldest_wait_s"] or 0.0, lab(k))
        counted = sorted(self.stats)
        for name, attr, what in (
            ("respqueue_bullmq_jobs_added_total", "added", "Jobs added"),
            ("respqueue_bullmq_jobs_completed_total", "completed", "Jobs completed"),
            ("respqueue_bullmq_jobs_failed_total", "failed", "Jobs failed for good (attempts exhausted)"),
            ("respqueue_bullmq_jobs_retried_total", "retried", "Failed attempts that were retried"),
        ):
            e.family(name, "counter", what + " since the server started (from the job-history capture).")
            for k in counted:
                e.sample(name, getattr(self.stats[k], attr), lab(k))
        e.family(
            "respqueue_bullmq_job_wait_seconds",
            "histogram",
            "Time from a job's timestamp (added) to processedOn (taken by a worker), per finished job.",
        )
        for k in counted:
            e.histogram("respqueue_bullmq_job_wait_seconds", self.stats[k].wait, lab(k))
        e.family(
            "respqueue_bullmq_job_run_seconds",
            "histogram",
            "Time from processedOn to finishedOn of a job's last attempt, per finished job.",
        )
        for k in counted:
            e.histogram("respqueue_bullmq_job_run_seconds", self.stats[k].run, lab(k))


def _hget(h: Any, field: bytes) -> Any:
    if type(h) is Hash:
        return h.d.get(field)
    g = getattr(h, "get", None)
    try:
        return g(field) if g is not None else None
    except Exception:  # noqa: BLE001 - a container of another type
        return None


def _scan_keys(dbi: int, keys: list[bytes], found: dict[QueueKey, bytes]) -> None:
    for key in keys:
        if not key.endswith(_MARKS):
            continue
        base = key[: key.rindex(b":") + 1]
        prefix, sep, queue = base[:-1].rpartition(b":")
        if not sep or not prefix or not queue:
            continue
        k = (dbi, prefix.decode("utf-8", "replace"), queue.decode("utf-8", "replace"))
        if k not in found:
            found[k] = base


def register(server: Any) -> QueueMetrics:
    """Hook BullMQ's metrics and the dashboard API into the server (``--metrics-port``)."""
    m = getattr(server, "bullmq_metrics", None)
    if m is not None:
        return m
    m = server.bullmq_metrics = QueueMetrics(server)
    if server.history is not None:
        server.history.metrics = m
    m.scan_now()
    m.start()
    server.metrics_providers.append(m.write)
    from compat.dashboard import register_routes

    register_routes(server, m)
    return m


# registered with the core's HTTP server at import (cli.load_plugins): the core never imports compat/
_http.PLUGINS.append(register)

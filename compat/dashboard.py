"""The dashboard's JSON API over BullMQ queues (the page itself is respqueue/http/dashboard.py).

Reads (``GET /api/overview``, ``/api/jobs``, ``/api/job``) look at the keyspace directly or through command
procedures with an internal client; a job's timeline comes from the job-history tables, queried with
aiosqlite on a read-only connection to the store file, so the loop never waits on SQLite.

Actions (``POST /api/action``, JSON ``{"action": ..., "db": 0, "prefix": "bull", "queue": ..., "id": ...}``)
are BullMQ's own operations redone command by command through ``respqueue.dispatch.call`` with an internal
client, the way the Lua bridge runs a script's ``redis.call``s: one action runs in one loop turn, so it
lands in one journal batch (one SQLite transaction) like a script, its XADDs reach the job-history capture,
blocked workers are woken, and the reply waits until its batch has committed. They follow the scripts of
BullMQ 5-6 (``reprocessJob``, ``promote``, ``removeJob``, ``cleanJobsInSet``, ``pause``):

* ``retry``: a failed job goes back to wait (or prioritized), as ``job.retry('failed')``;
* ``promote``: a delayed job goes to wait now, as ``job.promote()``;
* ``remove``: a job and its keys are deleted, as ``job.remove()``, except that a locked (active) job or a
  job in a flow (a parent or a child) is refused with 409: use BullMQ for those;
* ``clean``: completed or failed jobs older than ``grace_ms`` (0) are deleted, at most ``limit`` (1000),
  as ``queue.clean(grace, limit, state)``;
* ``pause`` / ``resume``: as ``queue.pause()`` / ``queue.resume()``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from compat.history_schema import events_select, finals_select, json_text
from compat.metrics import QueueMetrics, percentiles
from respqueue.client import Client
from respqueue.dispatch import call, resolve
from respqueue.http import BadRequest, Request, Response, add_route, json_response
from respqueue.resp import RedisError

LIST_STATES = ("wait", "active", "paused")
ZSET_STATES = ("delayed", "prioritized", "waiting-children", "completed", "failed")
JOB_FIELDS = (
    b"name",
    b"timestamp",
    b"processedOn",
    b"finishedOn",
    b"failedReason",
    b"atm",
    b"delay",
    b"priority",
    b"returnvalue",
    b"progress",
)
TEXT_LIMIT = 2000
# a job's events are looked for from this long before its timestamp (the client's clock) on
TIMELINE_SLACK_MS = 10 * 60 * 1000


class InternalClient(Client):
    """Runs the dashboard's commands: authenticated, never blocks, not in CLIENT LIST."""

    is_script = True

    def __init__(self, server: Any) -> None:
        super().__init__(server)
        self.authenticated = True
        self.addr = b"dashboard"
        self.laddr = b""
        self.fd = -1
        self.blocked = None
        self.monitor = False


class Ops:
    """Commands on one queue's keys through dispatch (counted, journaled, as a script's)."""

    def __init__(self, client: InternalClient, db: int, prefix: str, queue: str) -> None:
        client.select(db)
        self.c = client
        self.base = f"{prefix}:{queue}:".encode()

    def k(self, suffix: str | bytes) -> bytes:
        return self.base + (suffix.encode() if isinstance(suffix, str) else suffix)

    def __call__(self, *args: Any) -> Any:
        argv = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        cmd = resolve(argv)
        if isinstance(cmd, RedisError):
            raise cmd
        r = call(self.c, cmd, argv)
        if isinstance(r, RedisError):
            raise r
        return r


def _s(b: Any) -> Any:
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else b


def _i(b: Any) -> int | None:
    try:
        return int(b) if b is not None else None
    except (TypeError, ValueError):
        try:
            return int(float(b))
        except (TypeError, ValueError):
            return None


def _clip(s: str | None, n: int = TEXT_LIMIT) -> str | None:
    return s if s is None or len(s) <= n else s[:n] + "..."


class Dashboard:
    def __init__(self, server: Any, metrics: QueueMetrics) -> None:
        self.server = server
        self.m = metrics
        self.client = InternalClient(server)

    # ---- helpers -------------------------------------------------------------------------
    def _queue_args(self, src: dict[str, Any]) -> tuple[int, str, str]:
        try:
            db = int(src.get("db", 0))
        except (TypeError, ValueError):
            raise BadRequest(400, "db must be an integer") from None
        prefix = str(src.get("prefix") or "bull")
        queue = src.get("queue")
        if not queue or not isinstance(queue, str):
            raise BadRequest(400, "queue is required")
        if not 0 <= db < len(self.server.dbs):
            raise BadRequest(400, "db out of range")
        return db, prefix, queue

    def _data(self, db: int) -> dict[bytes, Any]:
        return self.server.dbs[db].data

    def _hash(self, db: int, key: bytes) -> dict[bytes, bytes] | None:
        h = self._data(db).get(key)
        if h is None or getattr(h, "rtype", None) != b"hash":
            return None
        return dict(h.to_dict()) if hasattr(h, "to_dict") else None

    def _job_summary(self, db: int, base: bytes, jid: bytes, score: float | None = None) -> dict[str, Any]:
        h = self._hash(db, base + jid) or {}
        out: dict[str, Any] = {"id": _s(jid)}
        for f in JOB_FIELDS:
            v = h.get(f)
            if v is None:
                continue
            name = "attemptsMade" if f == b"atm" else f.decode()
            if f in (b"timestamp", b"processedOn", b"finishedOn", b"atm", b"delay", b"priority"):
                out[name] = _i(v)
            else:
                out[name] = _clip(_s(v), 300)
        if score is not None:
            out["score"] = score
        return out

    def _top(self, db: int, key: bytes, n: int, rev: bool) -> list[tuple[bytes, float]]:
        z = self._data(db).get(key)
        if z is None or getattr(z, "rtype", None) != b"zset":
            return []
        c = self.client
        c.select(db)
        argv = [b"zrevrange" if rev else b"zrange", key, b"0", str(n - 1).encode(), b"WITHSCORES"]
        cmd = resolve(argv)
        r = cmd.proc(c, argv)  # type: ignore[union-attr]
        return [(r[i], float(r[i + 1])) for i in range(0, len(r), 2)]

    def _list(self, db: int, key: bytes, n: int) -> list[bytes]:
        v = self._data(db).get(key)
        if v is None or getattr(v, "rtype", None) != b"list":
            return []
        k = len(v)
        return [v.get(k - 1 - i) for i in range(min(n, k))]  # next in line (the right end) first

    # ---- GET /api/overview ------------------------------------------------------------------
    async def overview(self, req: Request) -> Response:
        now_ms = int(time.time() * 1000)
        m = self.m
        m.refresh()
        queues = []
        failures: list[dict[str, Any]] = []
        delayed: list[dict[str, Any]] = []
        total_series: list[list[int]] | None = None
        for k in sorted(m.queues):
            db, prefix, queue = k
            snap = m.snapshot(k)
            st = m.stats.get(k)
            q: dict[str, Any] = {"db": db, "prefix": prefix, "queue": queue, **snap}
            if st is not None:
                q["totals"] = {"added": st.added, "completed": st.completed, "failed": st.failed, "retried": st.retried}
                q["wait"] = percentiles(st.recent_wait)
                q["run"] = percentiles(st.recent_run)
                series = st.series(now_ms, 90)
                if total_series is None:
                    total_series = [list(r) for r in series]
                else:
                    for a, b in zip(total_series, series, strict=True):
                        a[1] += b[1]
                        a[2] += b[2]
                        a[3] += b[3]
            queues.append(q)
            base = m.queues[k]
            for jid, score in self._top(db, base + b"failed", 10, True):
                j = self._job_summary(db, base, jid, score)
                h = self._hash(db, base + jid) or {}
                j["stacktrace"] = _stack(h.get(b"stacktrace"))
                j.update({"db": db, "prefix": prefix, "queue": queue})
                failures.append(j)
            for jid, score in self._top(db, base + b"delayed", 10, False):
                j = self._job_summary(db, base, jid)
                j.update({"db": db, "prefix": prefix, "queue": queue, "dueOn": int(score) >> 12})
                delayed.append(j)
        failures.sort(key=lambda j: j.get("finishedOn") or j.get("score") or 0, reverse=True)
        delayed.sort(key=lambda j: j["dueOn"])
        if total_series is None:
            total_series = [[(now_ms // 10_000 - 89 + i) * 10_000, 0, 0, 0] for i in range(90)]
        return json_response(
            {
                "now": now_ms,
                "queues": queues,
                "failures": failures[:20],
                "delayed": delayed[:20],
                "series": {"slot_ms": 10_000, "points": total_series},
                "history": self.server.history is not None,
            }
        )

    # ---- GET /api/jobs -------------------------------------------------------------------------
    async def jobs(self, req: Request) -> Response:
        db, prefix, queue = self._queue_args(req.query)
        state = req.query.get("state", "wait")
        try:
            limit = max(1, min(200, int(req.query.get("limit", "50"))))
        except ValueError:
            raise BadRequest(400, "limit must be an integer") from None
        base = f"{prefix}:{queue}:".encode()
        if state in LIST_STATES:
            ids = [(j, None) for j in self._list(db, base + state.encode(), limit)]
        elif state in ZSET_STATES:
            ids = self._top(db, base + state.encode(), limit, state in ("completed", "failed"))
        else:
            raise BadRequest(400, f"unknown state {state!r}")
        return json_response({"state": state, "jobs": [self._job_summary(db, base, j, s) for j, s in ids]})

    # ---- GET /api/job ----------------------------------------------------------------------------
    async def job(self, req: Request) -> Response:
        db, prefix, queue = self._queue_args(req.query)
        jid = req.query.get("id")
        if not jid:
            raise BadRequest(400, "id is required")
        base = f"{prefix}:{queue}:".encode()
        h = self._hash(db, base + jid.encode())
        job: dict[str, Any] | None = None
        if h is not None:
            job = {_s(f): _clip(_s(v)) for f, v in h.items() if f != b"stacktrace"}
            job["stacktrace"] = _stack(h.get(b"stacktrace"))
            job["state"] = self._state(db, base, jid.encode())
        ts = _i(h.get(b"timestamp")) if h is not None else None
        timeline, final, note = await self._history(prefix, queue, jid, ts)
        if job is None and not timeline and not final:
            raise BadRequest(404, "no such job (neither in the keyspace nor in the job history)")
        return json_response({"id": jid, "job": job, "timeline": timeline, "final": final, "note": note})

    def _state(self, db: int, base: bytes, jid: bytes) -> str:
        data = self._data(db)
        for s in ZSET_STATES:
            z = data.get(base + s.encode())
            if z is not None and getattr(z, "rtype", None) == b"zset" and jid in z:
                return s
        for s in LIST_STATES:
            v = data.get(base + s.encode())
            if v is not None and getattr(v, "rtype", None) == b"list" and jid in v._d:
                return s
        return "unknown"

    async def _history(
        self, prefix: str, queue: str, jid: str, ts: int | None
    ) -> tuple[list[Any], list[Any], str | None]:
        """The job's events and final records. The history has no index on the job id (compat/history_schema.py:
        chunks of a queue's events): only the chunks of the job's queue whose text holds the job id (quoted,
        as JSON has it) are unpacked, and when the job's add time is known (its hash, else its final record)
        only the chunks from shortly before it, through the time index; otherwise (or when that misses the
        'added' event) every chunk of the queue is looked at."""
        j = self.server.journal
        if j is None or self.server.history is None:
            return [], [], "job history is off (--history off or --durability memory)"
        try:
            import aiosqlite
        except ImportError:
            return [], [], "aiosqlite is not installed"
        path = j.store.path
        cols = "ts_ms, event, attempt, worker, failed_reason, returnvalue_size, delay_ms, job_name"
        needle = json_text(jid)  # the job id as a JSON string, as the chunks hold it
        job = "prefix=? AND queue=? AND job_id=?"
        async with aiosqlite.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as conn:
            conn.row_factory = aiosqlite.Row
            fsel = finals_select("c.prefix=? AND c.queue=? AND instr(c.finals, ?) AND f.value ->> 0 = ?", job)
            cur = await conn.execute(
                "SELECT state, timestamp, processed_on, finished_on, attempts_made, failed_reason, returnvalue"
                f" FROM ({fsel}) ORDER BY finished_on",  # noqa: S608
                (prefix, queue, jid, prefix, queue, needle, jid),
            )
            finals = [dict(r) for r in await cur.fetchall()]
            known = [t for t in [ts, *(f["timestamp"] for f in finals)] if t is not None]
            events: list[dict[str, Any]] = []
            chunk = "c.prefix=? AND c.queue=? AND instr(c.events, ?) AND e.value ->> 1 = ?"
            if known:
                since = min(known) - TIMELINE_SLACK_MS
                # the chunks' time index first: a range of it, no table scan
                esel = events_select("c.last_ms >= ? AND " + chunk, "ts_ms >= ? AND " + job)
                cur = await conn.execute(
                    f"SELECT {cols} FROM ({esel}) ORDER BY ts_ms, id LIMIT 500",  # noqa: S608
                    (since, prefix, queue, jid, since, prefix, queue, needle, jid),
                )
                events = [dict(r) for r in await cur.fetchall()]
            if not events or events[0]["event"] != "added":
                cur = await conn.execute(
                    f"SELECT {cols} FROM ({events_select(chunk, job)}) ORDER BY id LIMIT 500",  # noqa: S608
                    (prefix, queue, jid, prefix, queue, needle, jid),
                )
                events = [dict(r) for r in await cur.fetchall()]
        for f in finals:
            f["returnvalue"] = _clip(f["returnvalue"], 300)
        return events, finals, None

    # ---- POST /api/action ------------------------------------------------------------------------
    async def action(self, req: Request) -> Response:
        try:
            body = req.json()
        except (ValueError, UnicodeDecodeError):
            raise BadRequest(400, "the body is not JSON") from None
        if not isinstance(body, dict):
            raise BadRequest(400, "the body must be a JSON object")
        name = body.get("action")
        fn = ACTIONS.get(name) if isinstance(name, str) else None
        if fn is None:
            raise BadRequest(400, f"unknown action {name!r}; use one of {', '.join(sorted(ACTIONS))}")
        db, prefix, queue = self._queue_args(body)
        server = self.server
        if server.write_refused is not None:
            raise BadRequest(503, server.write_refused.msg.decode("utf-8", "replace"))
        if server.busy_script is not None:
            raise BadRequest(503, "a script is running")
        ops = Ops(self.client, db, prefix, queue)
        if not any(ops.base + s in self._data(db) for s in (b"meta", b"events", b"id")):
            raise BadRequest(404, f"no queue {prefix}:{queue} in db {db}")
        d0 = server.dirty
        try:
            result = fn(ops, body)
        except RedisError as e:
            raise BadRequest(500, e.msg.decode("utf-8", "replace")) from None
        finally:
            if server.ready_keys:
                server.handle_ready_keys()
        if server.dirty != d0:
            await self._committed()
        return json_response({"ok": True, "action": name, "result": result})

    async def _committed(self) -> None:
        """Wait until the batch holding the action's writes has committed."""
        j = self.server.journal
        if j is None:
            return
        bid = j.open_id
        deadline = time.monotonic() + 30
        while j.committed_id < bid:
            if self.server.write_refused is not None:
                raise BadRequest(503, self.server.write_refused.msg.decode("utf-8", "replace"))
            if time.monotonic() > deadline:
                raise BadRequest(504, "the store did not commit the action in time")
            await asyncio.sleep(0.005)


def _stack(v: bytes | None) -> list[str]:
    if not v:
        return []
    try:
        st = json.loads(v)
    except ValueError:
        return [_s(v)]
    return [str(x)[:TEXT_LIMIT] for x in st] if isinstance(st, list) else [str(st)[:TEXT_LIMIT]]


# ---- actions: BullMQ's scripts, command by command ---------------------------------------------------
def _job_id(body: dict[str, Any]) -> bytes:
    jid = body.get("id")
    if jid is None or isinstance(jid, (dict, list)) or str(jid) == "":
        raise BadRequest(400, "id is required")
    return str(jid).encode()


def _paused_or_maxed(ops: Ops) -> bool:
    paused, conc = ops("HMGET", ops.k("meta"), "paused", "concurrency")
    if paused is not None:
        return True
    if conc is not None:
        return ops("LLEN", ops.k("active")) >= (_i(conc) or 0)
    return False


def _max_events(ops: Ops) -> bytes:
    v = ops("HGET", ops.k("meta"), "opts.maxLenEvents")
    if v is None:
        v = b"10000"
        ops("HSET", ops.k("meta"), "opts.maxLenEvents", v)
    return v


def _enqueue(ops: Ops, jid: bytes, push: str) -> None:
    """addJobInTargetList / addJobWithPriority."""
    pm = _paused_or_maxed(ops)
    prio = _i(ops("HGET", ops.k(jid), "priority")) or 0
    if prio == 0:
        ops(push, ops.k("wait"), jid)
    else:
        counter = ops("INCR", ops.k("pc"))
        ops("ZADD", ops.k("prioritized"), prio * 0x100000000 + counter % 0x100000000, jid)
    if not pm:
        ops("ZADD", ops.k("marker"), 0, "0")


def _retry(ops: Ops, body: dict[str, Any]) -> dict[str, Any]:
    """reprocessJob (job.retry('failed'))."""
    jid = _job_id(body)
    jk = ops.k(jid)
    if not ops("EXISTS", jk):
        raise BadRequest(404, "no such job")
    if not ops("ZREM", ops.k("failed"), jid):
        raise BadRequest(409, "the job is not failed")
    ops("HDEL", jk, "finishedOn", "processedOn", "failedReason")
    opts = _json(ops("HGET", jk, "opts"))
    _enqueue(ops, jid, "RPUSH" if opts.get("lifo") else "LPUSH")
    parent = ops("HGET", jk, "parentKey")
    if parent is not None and ops("EXISTS", parent):
        if ops("ZREM", parent + b":unsuccessful", jk) or ops("HDEL", parent + b":failed", jk):
            ops("SADD", parent + b":dependencies", jk)
    ops(
        "XADD",
        ops.k("events"),
        "MAXLEN",
        "~",
        _max_events(ops),
        "*",
        "event",
        "waiting",
        "jobId",
        jid,
        "prev",
        "failed",
    )
    return {"id": _s(jid), "state": "waiting"}


def _promote(ops: Ops, body: dict[str, Any]) -> dict[str, Any]:
    """promote (job.promote())."""
    jid = _job_id(body)
    if not ops("ZREM", ops.k("delayed"), jid):
        raise BadRequest(409, "the job is not delayed")
    marker = ops("LINDEX", ops.k("wait"), 0)
    if marker is not None and marker[:2] == b"0:":
        ops("LPOP", ops.k("wait"))
    _enqueue(ops, jid, "LPUSH")
    ops("XADD", ops.k("events"), "*", "event", "waiting", "jobId", jid, "prev", "delayed")
    ops("HSET", ops.k(jid), "delay", 0)
    return {"id": _s(jid), "state": "waiting"}


def _delete_job(ops: Ops, jid: bytes) -> None:
    jk = ops.k(jid)
    deid = ops("HGET", jk, "deid")
    if deid is not None:
        dk = ops.k(b"de:" + deid)
        if ops("GET", dk) == jid:
            ops("DEL", dk)
    ops("DEL", jk, jk + b":logs", jk + b":dependencies", jk + b":processed", jk + b":failed", jk + b":unsuccessful")


def _remove(ops: Ops, body: dict[str, Any]) -> dict[str, Any]:
    """removeJob (job.remove()) for a job outside flows."""
    jid = _job_id(body)
    jk = ops.k(jid)
    if not ops("EXISTS", jk):
        raise BadRequest(404, "no such job")
    if ops("EXISTS", jk + b":lock"):
        raise BadRequest(409, "the job is locked by a worker (active): it cannot be removed now")
    if ops("HGET", jk, "parentKey") is not None or ops("EXISTS", jk + b":dependencies"):
        raise BadRequest(409, "the job is part of a flow: remove it with BullMQ (job.remove())")
    prev = "unknown"
    for s in LIST_STATES:
        if ops("LREM", ops.k(s), 0, jid):
            prev = s
    for s in ZSET_STATES:
        if ops("ZREM", ops.k(s), jid):
            prev = s
    _delete_job(ops, jid)
    ops("XADD", ops.k("events"), "MAXLEN", "~", _max_events(ops), "*", "event", "removed", "jobId", jid, "prev", prev)
    return {"id": _s(jid), "removed": True, "prev": prev}


def _clean(ops: Ops, body: dict[str, Any]) -> dict[str, Any]:
    """cleanJobsInSet (queue.clean(grace, limit, 'completed'|'failed'))."""
    state = body.get("state", "completed")
    if state not in ("completed", "failed"):
        raise BadRequest(400, "state must be completed or failed")
    try:
        grace = int(body.get("grace_ms", 0))
        limit = int(body.get("limit", 1000))
    except (TypeError, ValueError):
        raise BadRequest(400, "grace_ms and limit must be integers") from None
    if grace < 0 or not 0 < limit <= 100_000:
        raise BadRequest(400, "grace_ms must be >= 0 and limit in 1..100000")
    ts = int(time.time() * 1000) - grace
    ids = ops("ZRANGEBYSCORE", ops.k(state), "-inf", ts, "LIMIT", 0, limit)
    removed = []
    for jid in ids:
        if ops("HGET", ops.k(jid), "parentKey") is not None:
            continue  # a child of a flow: its parent still refers to it
        ops("ZREM", ops.k(state), jid)
        _delete_job(ops, jid)
        removed.append(_s(jid))
    ops("XADD", ops.k("events"), "MAXLEN", "~", _max_events(ops), "*", "event", "cleaned", "count", len(removed))
    return {"state": state, "removed": removed}


def _pause(ops: Ops, body: dict[str, Any]) -> dict[str, Any]:
    """pause (queue.pause())."""
    ops("HSET", ops.k("meta"), "paused", 1)
    ops("DEL", ops.k("marker"))
    ops("XADD", ops.k("events"), "*", "event", "paused")
    return {"paused": True}


def _resume(ops: Ops, body: dict[str, Any]) -> dict[str, Any]:
    """pause with 'resumed' (queue.resume()), moving a legacy paused list back to wait."""
    ops("HDEL", ops.k("meta"), "paused")
    if ops("EXISTS", ops.k("paused")):
        if not ops("EXISTS", ops.k("wait")):
            ops("RENAME", ops.k("paused"), ops.k("wait"))
        else:
            jobs = ops("LRANGE", ops.k("paused"), 0, 6999)
            ops("RPUSH", ops.k("wait"), *jobs)
            ops("LTRIM", ops.k("paused"), len(jobs), -1)
    if ops("LLEN", ops.k("wait")) + ops("ZCARD", ops.k("prioritized")) > 0:
        ops("ZADD", ops.k("marker"), 0, "0")
    else:
        nxt = ops("ZRANGE", ops.k("delayed"), 0, 0, "WITHSCORES")
        if nxt:
            ops("ZADD", ops.k("marker"), repr(float(nxt[1]) / 0x1000), "1")
    ops("XADD", ops.k("events"), "*", "event", "resumed")
    return {"paused": False}


def _json(v: bytes | None) -> dict[str, Any]:
    try:
        d = json.loads(v) if v else {}
    except ValueError:
        return {}
    return d if isinstance(d, dict) else {}


ACTIONS = {"retry": _retry, "promote": _promote, "remove": _remove, "clean": _clean, "pause": _pause, "resume": _resume}


def register_routes(server: Any, metrics: QueueMetrics) -> Dashboard:
    d = Dashboard(server, metrics)
    add_route(server, "GET", "/api/overview", d.overview)
    add_route(server, "GET", "/api/jobs", d.jobs)
    add_route(server, "GET", "/api/job", d.job)
    add_route(server, "POST", "/api/action", d.action, access="write")
    return d

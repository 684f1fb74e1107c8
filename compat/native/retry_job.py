"""Native retryJob: a failed job retried at once goes from active back to wait (the paused list on a paused
5.x queue) or to the prioritized zset, with the 'waiting' event."""

from __future__ import annotations

from typing import Any, NamedTuple

from lua.convert import format_number_arg
from respqueue.types.hash import Hash
from respqueue.types.list import List
from respqueue.types.set import Set
from respqueue.types.zset import ZSet

from ..scripts import Bail, Ctx, cmd, native
from .helpers import (
    _NUM_RE,
    HGET,
    HINCRBY,
    HSET,
    QUEUE_V6,
    ZRANGEBYSCORE,
    QueueVariant,
    _check,
    _check_nothing_due,
    _check_pc,
    _check_stream,
    _counter_ok,
    _job_fields,
    _job_priority,
    _leave_active,
    _lock_state,
    _paused_or_maxed_attrs,
    _queue_variant,
    _target_queue,
    _xadd_star,
    _zadd_marker,
    _zadd_prioritized,
)

_PUSH = {b"LPUSH": cmd("lpush"), b"RPUSH": cmd("rpush")}

_RJ_KEYS = ["active", "wait", "paused", "job key", "meta", "events stream", "delayed key", "prioritized key",
            "pc priority counter", "marker", "stalled"]
_RJ_ARGV = ["key prefix", "timestamp", "pushcmd", "jobid", "token", "optional job fields to update"]
_RJ_CALLS = frozenset({"main>removeLock", "main>updateJobFields", "main>promoteDelayedJobs", "main>getOrSetMaxEvents",
                       "main>addJobInTargetList", "main>addJobWithPriority", "main>isQueuePausedOrMaxed",
                       "addJobInTargetList>addBaseMarkerIfNeeded", "addJobWithPriority>addBaseMarkerIfNeeded",
                       "addJobWithPriority>getPriorityScore"})
_RJ_HASH_WRITES = frozenset({"HMSET|?", "HSET|opts.maxLenEvents|?"})


class RetryVariant(NamedTuple):
    queue: QueueVariant  # the first read of the queue's state (the second is isQueuePausedOrMaxed in all)
    prev: bytes  # the waiting event's "prev": active (5.58+), failed (5.41-5.57)


RETRY_V6 = RetryVariant(QUEUE_V6, b"active")


def _accept_rj(numkeys: int, lay: dict[str, Any]) -> Any:
    """retryJob: the releases with 6.x's keys and ARGV (npm 5.41+, PyPI 2.13+), whose priority score is taken
    modulo 2**32 (getPriorityScore); the first read of the queue's state and the event's "prev" as variants."""
    if numkeys != 11 or lay.get("keys") != _RJ_KEYS or lay.get("argv") != _RJ_ARGV:
        return None
    if not _RJ_CALLS <= set(lay.get("calls", ())) or not _RJ_HASH_WRITES <= set(lay.get("hash_writes", ())):
        return None
    events = set(lay.get("events", ()))
    prev = [e.rsplit("|", 1)[1] for e in events if e.startswith("event|waiting|jobId|?|prev|")
            and e != "event|waiting|jobId|?|prev|delayed"]
    if len(prev) != 1 or prev[0] not in ("active", "failed"):
        return None
    q = _queue_variant(lay, "main")
    if q is None:
        return None
    v = RetryVariant(q, prev[0].encode())
    return True if v == RETRY_V6 else v


@native("retryJob", _accept_rj)
def retry_job(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: RetryVariant = RETRY_V6) -> Any:
    """KEYS: active wait paused job meta events delayed prioritized pc marker stalled;
    ARGV: prefix timestamp pushCmd jobId token [fields]."""
    if len(argv) < 5 or len(set(keys)) != 11:
        raise Bail("args")
    prefix, ts, push_cmd, job_id, token = argv[:5]
    fields = _job_fields(argv[5] if len(argv) > 5 else None)
    push = _PUSH.get(push_cmd)
    if push is None:
        raise Bail("push command")
    if not (len(ts) <= 16 and ts.isdigit()) and not _NUM_RE.match(ts):
        raise Bail("timestamp")
    active_key, wait_key, paused_key, job_key, meta_key, events_key, delayed_key, prio_key, pc_key, marker_key, \
        stalled_key = keys
    if job_key + b":lock" in keys:
        raise Bail("key clash")
    db = ctx.db
    # ---- reads: everything that could fail or branch after the first write
    meta = _check(db, meta_key, Hash)
    limit = None if meta is None else _paused_or_maxed_attrs(meta.get(b"paused"), meta.get(b"concurrency"))
    _check(db, active_key, List)
    upto = (float(ts) + 1) * 0x1000 - 1
    _check_nothing_due(_check(db, delayed_key, ZSet), upto)
    job = _check(db, job_key, Hash)
    lock = 0
    if job is not None:
        lock = _lock_state(db, job_key, token)
    if job is not None and lock >= 0:
        if fields is not None and {b"atm", b"priority"} & set(fields[::2]):
            raise Bail("atm or priority in fields")
        if not _counter_ok(job.get(b"atm")):
            raise Bail("atm")
        priority = _job_priority(job.get(b"priority"))
        _check(db, stalled_key, Set)
        if priority:
            _check(db, prio_key, ZSet)
            _check_pc(db, pc_key)
        else:
            _check(db, paused_key if variant.queue.paused_list and limit == -1 else wait_key, List)
        _check(db, marker_key, ZSet)
        max_events = None if meta is None else meta.get(b"opts.maxLenEvents")
        if max_events is not None and (len(max_events) > 18 or not max_events.isdigit()):
            raise Bail("maxLenEvents")
        _check_stream(db, events_key)
    # ---- the script's calls
    call = ctx.call
    target, _pom = _target_queue(ctx, variant.queue, meta_key, limit, active_key, wait_key, paused_key)
    # promoteDelayedJobs: nothing due (checked above)
    call(ZRANGEBYSCORE, [b"ZRANGEBYSCORE", delayed_key, b"0", format_number_arg(upto), b"LIMIT", b"0", b"1000"])
    n = _leave_active(ctx, job_key, job_id, job is not None, lock, token, stalled_key, fields, active_key)
    if n < 1:
        return n if n < 0 else -3
    ctx.inline(HGET, [b"HGET", job_key, b"priority"])  # (read above; the fields written hold no priority)
    _t, paused_or_maxed = _target_queue(ctx, QUEUE_V6, meta_key, limit, active_key, wait_key, paused_key)
    if priority == 0:
        call(push, [push_cmd, target, job_id])
    else:
        _zadd_prioritized(ctx, prio_key, pc_key, priority, job_id)
    if not paused_or_maxed:
        _zadd_marker(ctx, marker_key)
    call(HINCRBY, [b"HINCRBY", job_key, b"atm", b"1"])
    # getOrSetMaxEvents (meta read above; nothing wrote it since)
    ctx.inline(HGET, [b"HGET", meta_key, b"opts.maxLenEvents"])
    if max_events is None:
        max_events = b"10000"
        call(HSET, [b"HSET", meta_key, b"opts.maxLenEvents", max_events])
    _xadd_star(ctx, [b"XADD", events_key, b"MAXLEN", b"~", max_events, b"*", b"event", b"waiting", b"jobId", job_id,
                     b"prev", variant.prev])
    return 0

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
    _BOUND_AT,
    _BOUND_BELOW,
    _NUM_RE,
    HEXISTS,
    HGET,
    HINCRBY,
    LREM,
    QUEUE_V6,
    ZRANGEBYSCORE,
    QueueVariant,
    _check,
    _check_nothing_due,
    _check_pc,
    _check_stream,
    _counter_ok,
    _get_or_set_max_events,
    _job_fields,
    _job_priority,
    _leave_active,
    _lock_state,
    _paused_or_maxed_attrs,
    _queue_variant,
    _score_band,
    _target_queue,
    _xadd_star,
    _zadd_marker,
    _zadd_prioritized,
)
from .move_to_delayed import _leave_active_old

_PUSH = {b"LPUSH": cmd("lpush"), b"RPUSH": cmd("rpush")}

_RJ_KEYS = ["active", "wait", "paused", "job key", "meta", "events stream", "delayed key", "prioritized key",
            "pc priority counter", "marker", "stalled"]
_RJ_ARGV = ["key prefix", "timestamp", "pushcmd", "jobid", "token", "optional job fields to update"]
_RJ_CALLS = frozenset({"main>removeLock", "main>promoteDelayedJobs", "main>getOrSetMaxEvents",
                       "main>addJobInTargetList", "main>addJobWithPriority",
                       "addJobInTargetList>addBaseMarkerIfNeeded", "addJobWithPriority>addBaseMarkerIfNeeded"})
_RJ_HASH_WRITES = frozenset({"HSET|opts.maxLenEvents|?"})
#: the priority score (getPriorityScore from 5.41; the same expression inline in addJobWithPriority before)
#: before 5.8: the counter's low 48 bits with bit.band, a 32-bit operation (the native path takes counters
#: below 2**31 - 1 only, where it is the counter itself)


def _rj_main(fields: bool, recheck: bool, first: str) -> list[str]:
    """retryJob's main code calls, in order, for a variant."""
    return ([first, "promoteDelayedJobs", "EXISTS", "removeLock"] + (["updateJobFields"] if fields else [])
            + ["LREM", "HGET"] + (["isQueuePausedOrMaxed"] if recheck else [])
            + ["addJobInTargetList", "addJobWithPriority", "HINCRBY", "getOrSetMaxEvents", "XADD"])


class RetryVariant(NamedTuple):
    """What retryJob's releases do differently. ``queue``: the first read of the queue's state (its meta
    fields; () for ``HEXISTS meta paused``, before 5.9). ``prev``: the waiting event's "prev": active (5.58+),
    failed (before). ``fields``: ARGV[6]'s fields to update are written (5.39+). ``recheck``: the queue is read
    again (isQueuePausedOrMaxed) after the job left active (5.9+; before, the first read's paused decides the
    marker). ``bound_below``: the promotion bound is (ts + 1) * 0x1000 - 1 (5.8+; before, without the - 1).
    ``band``: the priority score's counter taken with bit.band (before 5.8)."""

    queue: QueueVariant
    prev: bytes
    fields: bool = True
    recheck: bool = True
    bound_below: bool = True
    band: bool = False
    lrem_all: bool = False
    old_lock: bool = False
    set_max: bool = True


#: npm 5.0-5.6's main code: the first read's target, LREM ... 0 (every occurrence, no -3) and a plain push
#: without the marker (``rcall(ARGV[3], target, ARGV[4])``); the lock GET and DEL inline before 5.5 (no
#: stalled key, -2 for another token too), the events' max length read without a default written in 5.0.0
_RJ_MAIN_OLD = ["getTargetQueueList", "promoteDelayedJobs", "EXISTS", "removeLock", "LREM", "HGET",
                "addJobWithPriority", "HINCRBY", "getOrSetMaxEvents", "XADD"]
_RJ_LREM_ALL = ["KEYS[1]|0|ARGV[4]"]
_RJ_PUSH_ARGV = "ARGV[3]|target|ARGV[4]"


RETRY_V6 = RetryVariant(QUEUE_V6, b"active")


def _accept_rj(numkeys: int, lay: dict[str, Any]) -> Any:
    """retryJob: the releases with 6.x's keys (npm 5.5+, PyPI 2.13+), ARGV with or without the fields to
    update, and the main code's calls in one of the orders :func:`_rj_main` gives; the first read of the
    queue's state, the event's "prev", the second read, the promotion bound and the priority score's form
    as variants (:class:`RetryVariant`)."""
    if lay.get("lrems") == _RJ_LREM_ALL:
        return _accept_rj_old(numkeys, lay)
    if numkeys != 11 or lay.get("keys") != _RJ_KEYS or lay.get("lrems") != ["KEYS[1]|-1|ARGV[4]"]:
        return None
    argv = lay.get("argv")
    calls = set(lay.get("calls", ()))
    if argv == _RJ_ARGV:
        fields = True
        if "HMSET|?" not in lay.get("hash_writes", ()) or "main>updateJobFields" not in calls:
            return None
    elif argv == _RJ_ARGV[:5]:
        fields = False  # before 5.39 (an ARGV[6] is not read)
    else:
        return None
    if not _RJ_CALLS <= calls or not _RJ_HASH_WRITES <= set(lay.get("hash_writes", ())):
        return None
    events = set(lay.get("events", ()))
    prev = [e.rsplit("|", 1)[1] for e in events if e.startswith("event|waiting|jobId|?|prev|")
            and e != "event|waiting|jobId|?|prev|delayed"]
    if len(prev) != 1 or prev[0] not in ("active", "failed"):
        return None
    reads = lay.get("hash_reads", ())
    if "main>getTargetQueueList" in calls and "HEXISTS|paused" in reads:
        if "HMGET|paused|concurrency" in reads:
            return None
        q = QueueVariant((), True)  # before 5.9: HEXISTS meta paused
    else:
        q = _queue_variant(lay, "main")
        if q is None:
            return None
    recheck = "main>isQueuePausedOrMaxed" in calls
    first = "getTargetQueueList" if q.paused_list else "isQueuePausedOrMaxed"
    if lay.get("main") != _rj_main(fields, recheck, first):
        return None
    if not recheck and q.meta_fields:
        return None  # (a concurrency limit read once only: no release does that)
    ranges = lay.get("score_ranges", ())
    if list(ranges) not in ([_BOUND_BELOW], [_BOUND_AT]):
        return None
    band = _score_band(lay)
    if band is None:
        return None
    v = RetryVariant(q, prev[0].encode(), fields, recheck, ranges[0] == _BOUND_BELOW, band)
    return True if v == RETRY_V6 else v


def _accept_rj_old(numkeys: int, lay: dict[str, Any]) -> RetryVariant | None:
    """npm 5.0-5.6 (recorded facts: ``lrems`` LREM active 0, ``dyn_calls`` the caller's push command, the
    main code's order): 11 keys with removeLock (5.5-5.6), or 10 keys without the stalled set, the lock's GET
    and DEL inline (5.0-5.4); getOrSetMaxEvents, or (5.0.0) HGET meta opts.maxLenEvents alone."""
    if lay.get("argv") != _RJ_ARGV[:5] or _RJ_PUSH_ARGV not in lay.get("dyn_calls", ()):
        return None
    main, calls = lay.get("main"), set(lay.get("calls", ()))
    if numkeys == 11 and lay.get("keys") == _RJ_KEYS:
        old_lock = False
        want = _RJ_MAIN_OLD
    elif numkeys == 10 and lay.get("keys") == _RJ_KEYS[:10]:
        old_lock = True
        want = _RJ_MAIN_OLD[:3] + ["GET", "DEL"] + _RJ_MAIN_OLD[4:]
        if lay.get("dels") != ["lockKey"] or "main>removeLock" in calls:
            return None
    else:
        return None
    set_max = "main>getOrSetMaxEvents" in calls
    if not set_max:
        want = want[:-2] + ["HGET", "XADD"]  # (5.0.0: ``HGET ... or 10000``)
    if main != want or "main>addJobInTargetList" in calls:
        return None
    if set_max != ("HSET|opts.maxLenEvents|?" in lay.get("hash_writes", ())):
        return None
    if not {"main>getTargetQueueList", "main>promoteDelayedJobs", "main>addJobWithPriority"} <= calls:
        return None
    reads = lay.get("hash_reads", ())
    if "HEXISTS|paused" not in reads or any(r.startswith("HMGET|paused") for r in reads):
        return None
    if "event|waiting|jobId|?|prev|failed" not in lay.get("events", ()):
        return None
    if lay.get("score_ranges") != [_BOUND_AT] or _score_band(lay) is not True:
        return None
    if "HINCRBY" not in main or lay.get("hincrbys") != ['KEYS[4]|"atm"|1']:
        return None
    return RetryVariant(QueueVariant((), True), b"failed", False, False, False, True, True, old_lock, set_max)


@native("retryJob", _accept_rj)
def retry_job(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: RetryVariant = RETRY_V6) -> Any:
    """KEYS: active wait paused job meta events delayed prioritized pc marker stalled;
    ARGV: prefix timestamp pushCmd jobId token [fields]."""
    if len(argv) < 5 or len(keys) != (10 if variant.old_lock else 11) or len(set(keys)) != len(keys):
        raise Bail("args")
    prefix, ts, push_cmd, job_id, token = argv[:5]
    fields = _job_fields(argv[5] if len(argv) > 5 and variant.fields else None)
    push = _PUSH.get(push_cmd)
    if push is None:
        raise Bail("push command")
    if not (len(ts) <= 16 and ts.isdigit()) and not _NUM_RE.match(ts):
        raise Bail("timestamp")
    active_key, wait_key, paused_key, job_key, meta_key, events_key, delayed_key, prio_key, pc_key, marker_key = \
        keys[:10]
    stalled_key = keys[10] if len(keys) > 10 else b""
    if job_key + b":lock" in keys:
        raise Bail("key clash")
    db = ctx.db
    # ---- reads: everything that could fail or branch after the first write
    meta = _check(db, meta_key, Hash)
    limit = None if meta is None else _paused_or_maxed_attrs(meta.get(b"paused"), meta.get(b"concurrency"))
    _check(db, active_key, List)
    upto = (float(ts) + 1) * 0x1000 - (1 if variant.bound_below else 0)
    _check_nothing_due(_check(db, delayed_key, ZSet), upto)
    job = _check(db, job_key, Hash)
    lock = 0
    if job is not None:
        lock = _lock_state(db, job_key, token, variant.old_lock)
    if job is not None and lock >= 0:
        if fields is not None and {b"atm", b"priority"} & set(fields[::2]):
            raise Bail("atm or priority in fields")
        if not _counter_ok(job.get(b"atm")):
            raise Bail("atm")
        priority = _job_priority(job.get(b"priority"))
        if not variant.old_lock:
            _check(db, stalled_key, Set)
        if priority:
            _check(db, prio_key, ZSet)
            _check_pc(db, pc_key, variant.band)  # (bit.band's 32 bits: below 2**31 - 1)
        else:
            _check(db, paused_key if variant.queue.paused_list and limit == -1 else wait_key, List)
        _check(db, marker_key, ZSet)
        max_events = None if meta is None else meta.get(b"opts.maxLenEvents")
        if max_events is not None and (len(max_events) > 18 or not max_events.isdigit()):
            raise Bail("maxLenEvents")
        _check_stream(db, events_key)
    # ---- the script's calls
    call = ctx.call
    if variant.queue.meta_fields:
        target, first_pom = _target_queue(ctx, variant.queue, meta_key, limit, active_key, wait_key, paused_key)
    else:  # before 5.9: HEXISTS meta paused
        ctx.inline(HEXISTS, [b"HEXISTS", meta_key, b"paused"])
        first_pom = limit == -1
        target = paused_key if first_pom else wait_key
    # promoteDelayedJobs: nothing due (checked above)
    call(ZRANGEBYSCORE, [b"ZRANGEBYSCORE", delayed_key, b"0", format_number_arg(upto), b"LIMIT", b"0", b"1000"])
    if variant.old_lock:
        n = _leave_active_old(ctx, job_key, job is not None, lock, token)
    else:
        n = _leave_active(ctx, job_key, job_id, job is not None, lock, token, stalled_key, fields,
                          None if variant.lrem_all else active_key)
    if n < 0:
        return n
    if variant.lrem_all:
        call(LREM, [b"LREM", active_key, b"0", job_id])  # (every occurrence; no -3: pushed back regardless)
    elif n < 1:
        return -3
    ctx.inline(HGET, [b"HGET", job_key, b"priority"])  # (read above; the fields written hold no priority)
    if variant.recheck:
        _t, paused_or_maxed = _target_queue(ctx, QUEUE_V6, meta_key, limit, active_key, wait_key, paused_key)
    else:
        paused_or_maxed = first_pom
    if priority == 0:
        call(push, [push_cmd, target, job_id])
        if not paused_or_maxed and not variant.lrem_all:  # (5.0-5.6: no marker for a plain push)
            _zadd_marker(ctx, marker_key)
    else:
        _zadd_prioritized(ctx, prio_key, pc_key, priority, job_id)
        if not paused_or_maxed:
            _zadd_marker(ctx, marker_key)
    call(HINCRBY, [b"HINCRBY", job_key, b"atm", b"1"])
    # getOrSetMaxEvents (meta read above; nothing wrote it since)
    if variant.set_max:
        max_events = _get_or_set_max_events(ctx, meta_key, max_events)
    else:  # 5.0.0: HGET meta opts.maxLenEvents or 10000
        ctx.inline(HGET, [b"HGET", meta_key, b"opts.maxLenEvents"])
        max_events = max_events or b"10000"
    _xadd_star(ctx, [b"XADD", events_key, b"MAXLEN", b"~", max_events, b"*", b"event", b"waiting", b"jobId", job_id,
                     b"prev", variant.prev])
    return 0

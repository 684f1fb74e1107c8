"""Native promote (Job.promote): a delayed job goes to wait (the paused list on a paused 5.x queue) or to the
prioritized zset, with the 'waiting' event."""

from __future__ import annotations

from typing import Any, NamedTuple

from respqueue.types.hash import Hash
from respqueue.types.list import List
from respqueue.types.zset import ZSet

from ..scripts import Bail, Ctx, cmd, native
from .helpers import (
    HEXISTS,
    HGET,
    HSET,
    LPUSH,
    QUEUE_V6,
    XADD,
    QueueVariant,
    _check,
    _check_pc,
    _check_stream,
    _job_priority,
    _paused_or_maxed_attrs,
    _queue_variant,
    _score_band,
    _target_queue,
    _zadd_marker,
    _zadd_prioritized,
)

ZREM = cmd("zrem")
LINDEX = cmd("lindex")

_PR_KEYS = ["delayed", "wait", "paused", "meta", "prioritized", "active", "pc priority counter", "event stream",
            "marker"]
#: before 5.9: no active key
_PR_KEYS_8 = _PR_KEYS[:5] + _PR_KEYS[6:]
_PR_CALLS = frozenset({"main>addJobWithPriority"})
#: the priority score (getPriorityScore from 5.41, inline in addJobWithPriority before)
#: before 5.8: the counter's low 48 bits with bit.band, a 32-bit operation (native for counters below 2**31 - 1)


class PromoteVariant(NamedTuple):
    """What promote's releases do differently. ``queue``: how they read the queue's state (6.x:
    isQueuePausedOrMaxed; 5.9+: getTargetQueueList, the paused list; ``meta_fields`` () for before 5.9's
    ``HEXISTS meta paused``). ``active``: the active key's position (None: 8 keys, before 5.9). ``band``: the
    score's counter taken with bit.band (before 5.8)."""

    queue: QueueVariant
    active: int | None = 5
    band: bool = False


PROMOTE_V6 = PromoteVariant(QUEUE_V6)


def _accept_promote(numkeys: int, lay: dict[str, Any]) -> Any:
    """promote: the releases with 6.x's 9 keys (npm 5.9+, PyPI 2.13+) or 5.x's 8 (no active key, npm 5.0-5.8),
    whose main code makes 6.x's calls in 6.x's order (npm 5.0.0's pushes and marker inline); the queue's
    state read, the key count and the priority score's form (:data:`_PR_SCORE`, or bit.band's) as variants."""
    keys = lay.get("keys")
    if numkeys == 9 and keys == _PR_KEYS:
        active: int | None = 5
    elif numkeys == 8 and keys == _PR_KEYS_8:
        active = None
    else:
        return None
    if lay.get("argv") != ["queue tokey", "jobid"]:
        return None
    calls = set(lay.get("calls", ()))
    if not _PR_CALLS <= calls or "HSET|delay|?" not in lay.get("hash_writes", ()):
        return None
    if "event|waiting|jobId|?|prev|delayed" not in lay.get("events", ()):
        return None
    reads = lay.get("hash_reads", ())
    if active is None:
        if "main>getTargetQueueList" not in calls or "HEXISTS|paused" not in reads:
            return None
        q = QueueVariant((), True)
        first = "getTargetQueueList"
    else:
        q = _queue_variant(lay, "main")
        if q is None:
            return None
        first = "getTargetQueueList" if q.paused_list else "isQueuePausedOrMaxed"
    main = lay.get("main")
    head, tail = ["ZREM", "HGET", first, "LINDEX", "LPOP"], ["addJobWithPriority", "XADD", "HSET"]
    if main == head + ["addJobInTargetList"] + tail:
        if not {"main>addJobInTargetList", "addJobInTargetList>addBaseMarkerIfNeeded",
                "addJobWithPriority>addBaseMarkerIfNeeded"} <= calls:
            return None
    elif main == head + ["LPUSH", "ZADD"] + tail:  # npm 5.0.0: the pushes' markers inline
        if active is not None or not {'KEYS[8]|0|"0"', 'markerKey|0|"0"'} <= set(lay.get("zadds", ())):
            return None
    else:
        return None
    band = _score_band(lay)
    if band is None:
        return None
    v = PromoteVariant(q, active, band)
    return True if v == PROMOTE_V6 else v


@native("promote", _accept_promote)
def promote(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: PromoteVariant = PROMOTE_V6) -> Any:
    """KEYS: delayed wait paused meta prioritized [active] pc events marker; ARGV: prefix, jobId."""
    n = 8 if variant.active is None else 9
    if len(argv) < 2 or len(set(keys)) != n:
        raise Bail("args")
    prefix, job_id = argv[0], argv[1]
    if variant.active is None:
        delayed_key, wait_key, paused_key, meta_key, prio_key, pc_key, events_key, marker_key = keys
        active_key = None
    else:
        delayed_key, wait_key, paused_key, meta_key, prio_key, active_key, pc_key, events_key, marker_key = keys
    queue = variant.queue
    job_key = prefix + job_id
    if job_key in keys:
        raise Bail("key clash")
    db = ctx.db
    # ---- reads: everything that could fail or branch after the first write
    delayed = _check(db, delayed_key, ZSet)
    if delayed is None or delayed.score(job_id) is None:
        ctx.call(ZREM, [b"ZREM", delayed_key, job_id])  # (removes nothing: no write)
        return -3
    job = _check(db, job_key, Hash)
    priority = _job_priority(None if job is None else job.get(b"priority"))
    meta = _check(db, meta_key, Hash)
    limit = None if meta is None else _paused_or_maxed_attrs(meta.get(b"paused"), meta.get(b"concurrency"))
    if active_key is not None:
        _check(db, active_key, List)
    target = paused_key if queue.paused_list and limit == -1 else wait_key
    tl = _check(db, target, List)
    if tl and tl.get(0)[:2] == b"0:":
        raise Bail("legacy marker")
    if priority:
        _check(db, prio_key, ZSet)
        _check_pc(db, pc_key, variant.band)  # (bit.band's 32 bits: below 2**31 - 1)
    _check(db, marker_key, ZSet)
    _check_stream(db, events_key)
    # ---- the script's calls
    call = ctx.call
    call(ZREM, [b"ZREM", delayed_key, job_id])
    ctx.inline(HGET, [b"HGET", job_key, b"priority"])
    if active_key is None:  # before 5.9: HEXISTS meta paused
        ctx.inline(HEXISTS, [b"HEXISTS", meta_key, b"paused"])
        paused_or_maxed = limit == -1
    else:
        target, paused_or_maxed = _target_queue(ctx, queue, meta_key, limit, active_key, wait_key, paused_key)
    ctx.inline(LINDEX, [b"LINDEX", target, b"0"])  # (no legacy marker: checked)
    if priority == 0:
        call(LPUSH, [b"LPUSH", target, job_id])
    else:
        _zadd_prioritized(ctx, prio_key, pc_key, priority, job_id)
    if not paused_or_maxed:
        _zadd_marker(ctx, marker_key)
    call(XADD, [b"XADD", events_key, b"*", b"event", b"waiting", b"jobId", job_id, b"prev", b"delayed"])
    call(HSET, [b"HSET", job_key, b"delay", b"0"])
    return 0

"""Native promote (Job.promote): a delayed job goes to wait (the paused list on a paused 5.x queue) or to the
prioritized zset, with the 'waiting' event."""

from __future__ import annotations

from typing import Any

from respqueue.types.hash import Hash
from respqueue.types.list import List
from respqueue.types.zset import ZSet

from ..scripts import Bail, Ctx, cmd, native
from .helpers import (
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
    _target_queue,
    _zadd_marker,
    _zadd_prioritized,
)

ZREM = cmd("zrem")
LINDEX = cmd("lindex")

_PR_KEYS = ["delayed", "wait", "paused", "meta", "prioritized", "active", "pc priority counter", "event stream",
            "marker"]
_PR_CALLS = frozenset({"main>addJobInTargetList", "main>addJobWithPriority", "addJobInTargetList>addBaseMarkerIfNeeded",
                       "addJobWithPriority>addBaseMarkerIfNeeded", "addJobWithPriority>getPriorityScore"})


def _accept_promote(numkeys: int, lay: dict[str, Any]) -> Any:
    """promote: the releases with 6.x's 9 keys (npm 5.41+, PyPI 2.13+), whose priority score is taken modulo
    2**32 (getPriorityScore); how they read the queue's state (6.x: isQueuePausedOrMaxed; 5.x:
    getTargetQueueList, the paused list) as a variant."""
    if numkeys != 9 or lay.get("keys") != _PR_KEYS or lay.get("argv") != ["queue tokey", "jobid"]:
        return None
    if not _PR_CALLS <= set(lay.get("calls", ())) or "HSET|delay|?" not in lay.get("hash_writes", ()):
        return None
    if "event|waiting|jobId|?|prev|delayed" not in lay.get("events", ()):
        return None
    q = _queue_variant(lay, "main")
    if q is None:
        return None
    return True if q == QUEUE_V6 else q


@native("promote", _accept_promote)
def promote(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: QueueVariant = QUEUE_V6) -> Any:
    """KEYS: delayed wait paused meta prioritized active pc events marker; ARGV: prefix, jobId."""
    if len(argv) < 2 or len(set(keys)) != 9:
        raise Bail("args")
    prefix, job_id = argv[0], argv[1]
    delayed_key, wait_key, paused_key, meta_key, prio_key, active_key, pc_key, events_key, marker_key = keys
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
    _check(db, active_key, List)
    target = paused_key if variant.paused_list and limit == -1 else wait_key
    tl = _check(db, target, List)
    if tl and tl.get(0)[:2] == b"0:":
        raise Bail("legacy marker")
    if priority:
        _check(db, prio_key, ZSet)
        _check_pc(db, pc_key)
    _check(db, marker_key, ZSet)
    _check_stream(db, events_key)
    # ---- the script's calls
    call = ctx.call
    call(ZREM, [b"ZREM", delayed_key, job_id])
    ctx.inline(HGET, [b"HGET", job_key, b"priority"])
    target, paused_or_maxed = _target_queue(ctx, variant, meta_key, limit, active_key, wait_key, paused_key)
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

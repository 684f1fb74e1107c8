"""Native moveToActive."""

from __future__ import annotations

from typing import Any

from lua.convert import format_number_arg
from respqueue.types.list import List
from respqueue.types.zset import ZSet

from ..scripts import Bail, Ctx, native
from .helpers import (
    _META4,
    _NUM_RE,
    _PREPARE_HASH,
    _PREPARE_MARKER,
    HGETALL,
    HINCRBY,
    HMGET,
    HMSET,
    SET,
    XADD,
    ZADD,
    ZRANGEBYSCORE,
    _active_reply,
    _check,
    _check_job_for_processing,
    _check_meta,
    _check_stream,
    _lock_opts,
    _meta_variant,
    _next_delay_reply,
    _paused_or_maxed,
    _paused_or_maxed_attrs,
    _pop_next,
    _truthy,
    _unpack,
    _writes_events,
)

_MTA_KEYS = ["wait key", "active key", "prioritized key", "stream events key", "stalled key", "rate limiter key",
             "delayed key", "paused key", "meta key", "pc priority counter", "marker key"]
_MTA_ARGV = ["key prefix", "timestamp", "opts"]
_MTA_OPTS = frozenset({"limiter", "lockDuration", "name", "token"})
_MTA_EVENTS = ("event|active|jobId|?|prev|waiting",)


def _accept_mta(numkeys: int, lay: dict[str, Any]) -> Any:
    """moveToActive: the releases with 6.x's keys, ARGV and options (5.3+: the worker name is read), whose
    prepareJobForProcessing re-adds the marker (addBaseMarkerIfNeeded, 5.28+). 5.x's paused list only matters
    when delayed jobs are promoted, which the native path leaves to Lua."""
    if numkeys != 11 or lay.get("keys") != _MTA_KEYS or lay.get("argv") != _MTA_ARGV:
        return None
    opts = set(lay.get("unpacked", {}).get("ARGV3", ()))
    calls = set(lay.get("calls", ()))
    if opts != _MTA_OPTS or not _writes_events(lay, _MTA_EVENTS):
        return None
    if _PREPARE_HASH not in lay.get("hash_writes", ()):
        return None  # 5.3-5.6: HSET pb, then HSET processedOn (the job hash's field order differs)
    if _PREPARE_MARKER not in calls:
        return None  # before 5.28 a fetched job does not re-add the marker
    if not calls & {"main>getQueueMetadata", "main>getTargetQueueList"}:
        return None
    return _meta_variant(lay)


@native("moveToActive", _accept_mta)
def move_to_active(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: tuple[bytes, ...] = _META4) -> Any:
    """KEYS: wait active prioritized events stalled limiter delayed paused meta pc marker;
    ARGV: prefix, timestamp, opts."""
    if len(argv) < 3 or len(set(keys)) != 11:
        raise Bail("args")
    prefix, ts = argv[0], argv[1]
    if not (len(ts) <= 16 and ts.isdigit()) and not _NUM_RE.match(ts):
        raise Bail("timestamp")
    opts = _unpack(argv[2])
    if type(opts) is not dict:
        raise Bail("opts")
    if _truthy(opts.get(b"limiter")):
        raise Bail("rate limiter")
    token, lock_ms, worker = _lock_opts(opts)

    wait_key, active_key, prio_key, events_key = keys[0], keys[1], keys[2], keys[3]
    delayed_key, meta_key, pc_key, marker_key = keys[6], keys[8], keys[9], keys[10]
    db = ctx.db
    meta = _check_meta(db, meta_key)
    if meta is not None and meta.get(b"max") is not None:
        raise Bail("rate limit")
    wait = _check(db, wait_key, List)
    _check(db, active_key, List)
    prio = _check(db, prio_key, ZSet)
    _check(db, delayed_key, ZSet)
    _check(db, marker_key, ZSet)
    _check_stream(db, events_key)
    if wait:
        _check_job_for_processing(ctx, keys, prefix, wait.get(len(wait) - 1))
    elif prio:
        _check_job_for_processing(ctx, keys, prefix, next(prio.items())[1])

    call = ctx.call
    # getQueueMetadata
    paused, conc = call(HMGET, [b"HMGET", meta_key, *variant])[:2]
    paused_or_maxed = _paused_or_maxed(call, _paused_or_maxed_attrs(paused, conc), active_key)
    # promoteDelayedJobs: only when there is nothing to promote
    upto = format_number_arg((float(ts) + 1) * 0x1000 - 1)
    if call(ZRANGEBYSCORE, [b"ZRANGEBYSCORE", delayed_key, b"0", upto, b"LIMIT", b"0", b"1000"]):
        raise Bail("delayed jobs to promote")
    if paused_or_maxed:
        return [0, 0, 0, 0]
    job_id = _pop_next(call, wait_key, active_key, prio_key, pc_key)
    if job_id is None:
        return _next_delay_reply(call, delayed_key) or [0, 0, 0, 0]
    # prepareJobForProcessing
    job_key = prefix + job_id
    if lock_ms is not None:
        call(SET, [b"SET", job_key + b":lock", token, b"PX", lock_ms])
    call(XADD, [b"XADD", events_key, b"*", b"event", b"active", b"jobId", job_id, b"prev", b"waiting"])
    hm = [b"HMSET", job_key, b"processedOn", ts]
    if worker is not None:
        hm += [b"pb", worker]
    call(HMSET, hm)
    call(HINCRBY, [b"HINCRBY", job_key, b"ats", b"1"])
    call(ZADD, [b"ZADD", marker_key, b"0", b"0"])
    return _active_reply(call(HGETALL, [b"HGETALL", job_key]), job_id)

"""Native moveToActive."""

from __future__ import annotations

from typing import Any, NamedTuple

from lua.convert import format_number_arg
from respqueue.types.list import List
from respqueue.types.zset import ZSet

from ..scripts import Bail, Ctx, native
from .helpers import (
    _BOUND_AT,
    _BOUND_BELOW,
    _META4,
    _NUM_RE,
    _PREPARE_HASH,
    _PREPARE_MARKER,
    HEXISTS,
    HGETALL,
    HINCRBY,
    HMGET,
    HMSET,
    HSET,
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


class MtaVariant(NamedTuple):
    """What moveToActive's releases do differently on the native path.

    ``meta``: the fields getQueueMetadata / getTargetQueueList HMGETs (6.x, 5.60+: 4; 5.9-5.59: paused and
    concurrency), or None for ``HEXISTS meta paused`` (before 5.9, no concurrency limit). ``bound_below``:
    promoteDelayedJobs reads up to ``(ts + 1) * 0x1000 - 1`` (5.8+) rather than ``(ts + 1) * 0x1000``.
    ``prepare``: prepareJobForProcessing's job hash writes: ``"hmset"`` (5.7+: ``HMSET processedOn ts
    [pb name]`` after the event), ``"hset"`` (5.3-5.6: ``HSET pb name`` before the event, ``HSET
    processedOn ts`` after it), ``"nopb"`` (5.0-5.2: ``HSET processedOn ts``; the worker name is not read).
    ``marker``: a taken job re-adds the marker for the next worker (5.28+)."""

    meta: tuple[bytes, ...] | None
    bound_below: bool
    prepare: str
    marker: bool


MTA_V6 = MtaVariant(_META4, True, "hmset", True)


def _accept_mta(numkeys: int, lay: dict[str, Any]) -> Any:
    """moveToActive: the releases with 6.x's keys, ARGV and options (the worker name read since 5.3), in the
    variants :class:`MtaVariant` names (5.0 to 6.x). 5.x's paused list only matters when delayed jobs are
    promoted, which the native path leaves to Lua."""
    if numkeys != 11 or lay.get("keys") != _MTA_KEYS or lay.get("argv") != _MTA_ARGV:
        return None
    opts = set(lay.get("unpacked", {}).get("ARGV3", ()))
    calls = set(lay.get("calls", ()))
    writes = set(lay.get("hash_writes", ()))
    if not opts <= _MTA_OPTS or _MTA_OPTS - opts - {"name"} or not _writes_events(lay, _MTA_EVENTS):
        return None
    if _PREPARE_HASH in writes and "name" in opts:
        prepare = "hmset"
    elif "HSET|processedOn|?" in writes and ("HSET|pb|?" in writes) == ("name" in opts):
        prepare = "hset" if "name" in opts else "nopb"
    else:
        return None
    ranges = lay.get("score_ranges", ())
    if list(ranges) not in ([_BOUND_BELOW], [_BOUND_AT]):
        return None
    if not calls & {"main>getQueueMetadata", "main>getTargetQueueList"}:
        return None
    if "HEXISTS|paused" in lay.get("hash_reads", ()):
        meta = None
    else:
        mv = _meta_variant(lay)
        if mv is None:
            return None
        meta = _META4 if mv is True else mv
    v = MtaVariant(meta, ranges[0] == _BOUND_BELOW, prepare, _PREPARE_MARKER in calls)
    return True if v == MTA_V6 else v


@native("moveToActive", _accept_mta)
def move_to_active(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: MtaVariant = MTA_V6) -> Any:
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
    prepare = variant.prepare
    if prepare == "nopb":
        worker = None

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
    if variant.meta is None:  # getTargetQueueList before 5.9
        paused_or_maxed = call(HEXISTS, [b"HEXISTS", meta_key, b"paused"]) == 1
    else:  # getQueueMetadata
        paused, conc = call(HMGET, [b"HMGET", meta_key, *variant.meta])[:2]
        paused_or_maxed = _paused_or_maxed(call, _paused_or_maxed_attrs(paused, conc), active_key)
    # promoteDelayedJobs: only when there is nothing to promote
    upto = format_number_arg((float(ts) + 1) * 0x1000 - (1 if variant.bound_below else 0))
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
    if prepare == "hmset":
        call(XADD, [b"XADD", events_key, b"*", b"event", b"active", b"jobId", job_id, b"prev", b"waiting"])
        hm = [b"HMSET", job_key, b"processedOn", ts]
        if worker is not None:
            hm += [b"pb", worker]
        call(HMSET, hm)
    else:
        if worker is not None:
            call(HSET, [b"HSET", job_key, b"pb", worker])
        call(XADD, [b"XADD", events_key, b"*", b"event", b"active", b"jobId", job_id, b"prev", b"waiting"])
        call(HSET, [b"HSET", job_key, b"processedOn", ts])
    call(HINCRBY, [b"HINCRBY", job_key, b"ats", b"1"])
    if variant.marker:
        call(ZADD, [b"ZADD", marker_key, b"0", b"0"])
    return _active_reply(call(HGETALL, [b"HGETALL", job_key]), job_id)

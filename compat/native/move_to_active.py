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
    HMGET,
    ZRANGEBYSCORE,
    _check,
    _check_job_for_processing,
    _check_meta,
    _check_nothing_due,
    _check_stream,
    _lock_opts,
    _meta_variant,
    _next_delay_reply,
    _next_job_id,
    _paused_or_maxed,
    _paused_or_maxed_attrs,
    _prepare_job,
    _take_next,
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
    delayed = _check(db, delayed_key, ZSet)
    _check(db, marker_key, ZSet)
    _check_stream(db, events_key)
    nxt = _next_job_id(wait, prio)
    if nxt is not None:
        _check_job_for_processing(ctx, keys, prefix, nxt)
    # promoteDelayedJobs: the native path runs only when there is nothing to promote
    upto = (float(ts) + 1) * 0x1000 - (1 if variant.bound_below else 0)
    _check_nothing_due(delayed, upto)

    # the reads, inline: meta is a hash or absent, and the range of due delayed jobs is empty (checked above);
    # with a MONITOR client attached (``done`` None) each is fed to it as the script would send it
    call = ctx.call
    done = ctx.done
    if variant.meta is None:  # getTargetQueueList before 5.9: paused or not, no concurrency limit
        ctx.inline(HEXISTS, [b"HEXISTS", meta_key, b"paused"])
        paused_or_maxed = meta is not None and meta.get(b"paused") is not None
    else:  # getQueueMetadata
        if done is None:
            ctx.inline(HMGET, [b"HMGET", meta_key, *variant.meta])
        else:
            done.append(HMGET)
        limit = None if meta is None else _paused_or_maxed_attrs(meta.get(b"paused"), meta.get(b"concurrency"))
        paused_or_maxed = _paused_or_maxed(call, limit, active_key)
    if done is None:
        ctx.inline(ZRANGEBYSCORE, [b"ZRANGEBYSCORE", delayed_key, b"0", format_number_arg(upto), b"LIMIT", b"0",
                                   b"1000"])
    else:
        done.append(ZRANGEBYSCORE)
    if paused_or_maxed:
        return [0, 0, 0, 0]
    job_id = _take_next(ctx, wait, wait_key, active_key, prio_key, pc_key)
    if job_id is None:
        return _next_delay_reply(call, delayed_key) or [0, 0, 0, 0]
    # prepareJobForProcessing
    return _prepare_job(ctx, prefix, events_key, marker_key, job_id, ts, token, lock_ms, worker, variant.marker,
                        prepare)

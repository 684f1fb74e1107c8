"""Native moveToFinished (with or without fetching the next job)."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from lua.convert import format_number_arg
from respqueue.coldhash import pack_now
from respqueue.commands.lists import _pop_done
from respqueue.commands.streams import append_star, node_limits, xtrim_approx
from respqueue.commands.zsets import _zadd1
from respqueue.events import STREAM_ADDED
from respqueue.numbers import str2int
from respqueue.types.hash import Hash, unpacked
from respqueue.types.list import List
from respqueue.types.set import Set
from respqueue.types.stream import MAX_ID, Stream
from respqueue.types.zset import ZSet

from ..scripts import Bail, Ctx, NativeScriptError, bulk, failed_after_writing, native, native_ran
from .helpers import (
    _BOUND_AT,
    _BOUND_BELOW,
    _EXACT,
    _INT64_MAX,
    _META4,
    _NUM_RE,
    _PREPARE_HASH,
    _PREPARE_MARKER,
    DEL,
    EXISTS,
    GET,
    HDEL,
    HEXISTS,
    HGET,
    HMGET,
    HMSET,
    HSET,
    LLEN,
    LREM,
    SCARD,
    SREM,
    XADD,
    XTRIM,
    ZADD,
    ZCARD,
    ZRANGEBYSCORE,
    _check,
    _check_job_for_processing,
    _check_nothing_due,
    _check_stream,
    _hincr1,
    _hset,
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
    _xadd_star,
)

_log = logging.getLogger("respqueue.native")

# a job with children still pending cannot finish: (key suffix, command, its name, moveToFinished's code)
_PENDING_CHILDREN = ((b":dependencies", SCARD, b"SCARD", -4), (b":unsuccessful", ZCARD, b"ZCARD", -9))


_JOB_SUFFIXES = (b":lock", b":dependencies", b":unsuccessful", b":logs", b":processed", b":failed")

#: wait key -> (the other 13 keys of moveToFinished, as a set, the job keys whose derived keys are among
#: them, and all 14 with _JOB_SLOT in the job key's place)
_MTF_KEYS: dict[bytes, tuple[list[bytes], frozenset[bytes], frozenset[bytes], list[Any]]] = {}
#: stands for the job key in a cached key list (compared by identity first: no bytes equals it by chance
#: that matters, as the list's other 13 keys are compared too)
_JOB_SLOT = object()


def _mtf_keys(keys: list[Any]) -> tuple[list[bytes], frozenset[bytes], frozenset[bytes], list[Any]]:
    """The queue keys of moveToFinished (all but the job key), cached per queue. ``keys`` is the script's
    own list (a slice of the request): compared with the cached list in place, the job key's slot
    holding the cached placeholder meanwhile (no list built per call)."""
    e = _MTF_KEYS.get(keys[0])
    if e is not None:
        job_key = keys[11]
        keys[11] = _JOB_SLOT
        same = keys == e[3]
        keys[11] = job_key
        if same:
            return e
    qk = keys[:11] + keys[12:]
    ks = frozenset(qk)
    if len(ks) != 13:
        raise Bail("args")
    clash = set()
    for k in qk:
        for suffix in _JOB_SUFFIXES:
            if k.endswith(suffix):
                clash.add(k[: -len(suffix)])
    full = list(keys)
    full[11] = _JOB_SLOT
    e = (qk, ks, frozenset(clash), full)
    if len(_MTF_KEYS) >= 256:
        _MTF_KEYS.clear()
    _MTF_KEYS[keys[0]] = e
    return e


#: raw opts -> (remove, attempts, limiter set?, token, lock PX ms, worker name) (see _mtf_opts)
_MTF_OPTS: dict[bytes, tuple[bool, Any, bool, bytes, bytes | None, bytes | None]] = {}


def _mtf_opts(raw: bytes, failed: bool) -> tuple[bool, Any, bool, bytes, bytes | None, bytes | None]:
    """moveToFinished's options, validated for the native path; cached per raw value (workers reuse them)."""
    e = _MTF_OPTS.get(raw)
    if e is None:
        opts = _unpack(raw)
        if type(opts) is not dict:
            raise Bail("opts")
        keep = opts.get(b"keepJobs")
        if type(keep) is not dict or keep.get(b"age") is not None:
            raise Bail("keepJobs")
        max_count = keep.get(b"count")
        if max_count is not None and type(max_count) not in (int, float):
            raise Bail("keepJobs count")
        if max_count is not None and max_count > 0:
            raise Bail("keepJobs count > 0")
        if opts.get(b"maxMetricsSize") != b"":
            raise Bail("metrics")
        token, lock_ms, worker = _lock_opts(opts)
        e = (max_count is not None and max_count == 0, opts.get(b"attempts"), _truthy(opts.get(b"limiter")),
             token, lock_ms, worker)
        if len(_MTF_OPTS) >= 1024:
            _MTF_OPTS.clear()
        _MTF_OPTS[raw] = e
    attempts = e[1]
    if failed and (type(attempts) not in (int, float) or attempts != attempts):
        raise Bail("attempts")
    return e


_MTF_KEYS_DOC = ["wait key", "active key", "prioritized key", "event stream key", "stalled key", "rate limiter key",
                 "delayed key", "paused key", "meta key", "pc priority counter", "completed failed key", "jobid key",
                 "metrics key", "marker key"]
_MTF_ARGV = ["jobid", "timestamp", "msg property returnvalue failedreason", "return value failed reason",
             "target completed failed", "fetch next", "keys prefix", "opts"]
#: the options moveToFinished reads in the releases served natively: those the native path reads (token,
#: lockDuration, name, keepJobs, attempts, maxMetricsSize, limiter), and those only read on paths it leaves
#: to Lua (a parent's fpof/idof/rdof/removeOnFail, dedup, delayed promotion, events trimming)
_MTF_OPT_NAMES = frozenset({"attempts", "de", "delay", "keepJobs", "lifo", "limiter", "lockDuration", "maxLenEvents",
                       "maxMetricsSize", "name", "priority", "token", "fpof", "idof", "rdof", "removeOnFail"})


_MTF_EVENTS = ("event|?|jobId|?|?|?|prev|active", "event|active|jobId|?|prev|waiting", "event|drained",
               "event|retries-exhausted|jobId|?|attemptsMade|?")


#: how the finished job's return value / failed reason and finishedOn are written (5.49+; HMSET before)
_MTF_FINISH_HASH = "HSET|?|?|finishedOn|?"
_MTF_FINISH_HMSET = "HMSET|?|?|finishedOn|?"
#: a completing job's failed children counted (the -9 code, 5.52+)
_MTF_UNSUCCESSFUL = 'ZCARD|jobIdKey .. ":unsuccessful"'


#: the keys deleted with a job removed on completion (removeJobKeys, 5.42+)
_REMOVED = (b":logs", b":dependencies", b":processed", b":failed", b":unsuccessful")


class MtfVariant(NamedTuple):
    """What moveToFinished's releases do differently on the native path.

    ``meta``: the fields the fetch's getQueueMetadata / getTargetQueueList HMGETs (6.x, 5.60+: 4; before: 2).
    ``pending``: a completing job's pending-children check: ``"both"`` (5.52+: SCARD dependencies, then ZCARD
    unsuccessful), ``"igdp"`` (5.47-5.51: HGET igdp, then SCARD dependencies unless it is set), ``"deps"``
    (5.44-5.46: SCARD dependencies). ``hmset``: the finish writes its fields with HMSET (before 5.49).
    ``hdel_defa``: a failed job's ``defa`` field is deleted (5.49+). ``prev``: the completed/failed event ends
    with ``prev active`` (5.44+). ``failed_deps``: a failing job's dependencies are checked too (before
    5.44, the releases whose event has no ``prev``). ``lock_first``: the lock is removed before the
    dependencies are counted (before 5.45). ``marker``: a fetched job re-adds the marker (5.28+). ``attrs``:
    the job fields read after the lock's removal (before 5.11 no ``deid``). ``meta`` None: the fetch reads
    ``HEXISTS meta paused`` (before 5.9). ``bound_below`` and ``prepare`` as for moveToActive's
    :class:`~compat.native.move_to_active.MtaVariant`. ``removed``: the job key suffixes a finished job
    removed at once deletes with it (5.42+: 5 of them; before 5.42: no ``:unsuccessful``; before 5.2: logs
    and processed)."""

    meta: tuple[bytes, ...] | None
    pending: str
    hmset: bool
    hdel_defa: bool
    prev: bool = True
    failed_deps: bool = False
    lock_first: bool = False
    marker: bool = True
    attrs: tuple[bytes, ...] = (b"parentKey", b"parent", b"deid")
    bound_below: bool = True
    prepare: str = "hmset"
    removed: tuple[bytes, ...] = _REMOVED


MTF_V6 = MtfVariant(_META4, "both", False, True)
#: the completed/failed event before 5.44 (no ``prev``)
_MTF_EVENT_NO_PREV = "event|?|jobId|?|?|?"


def _accept_mtf(numkeys: int, lay: dict[str, Any]) -> Any:
    """moveToFinished: the releases with 6.x's keys and ARGV (the 9th, fields to update, optional), options
    among :data:`_MTF_OPT_NAMES` (the worker name among them), a fetch that re-adds the marker and 6.x's
    events (5.44+), in the variants :class:`MtfVariant` names."""
    if numkeys != 14 or lay.get("keys") != _MTF_KEYS_DOC:
        return None
    argv = lay.get("argv", [])
    if argv[:8] != _MTF_ARGV or argv[8:] not in ([], ["job fields to update"]):
        return None
    opts = set(lay.get("unpacked", {}).get("ARGV8", ()))
    calls = set(lay.get("calls", ()))
    if not opts <= _MTF_OPT_NAMES:
        return None
    if _writes_events(lay, _MTF_EVENTS):
        prev = True
    elif _writes_events(lay, (_MTF_EVENT_NO_PREV, *_MTF_EVENTS[1:])):
        prev = False  # before 5.44
    else:
        return None
    writes = lay.get("hash_writes", ())
    ranges = list(lay.get("score_ranges", ()))
    if ranges not in ([_BOUND_BELOW], [_BOUND_AT]):
        return None
    if _PREPARE_HASH in writes and "name" in opts:
        prepare = "hmset"
    elif "HSET|processedOn|?" in writes and ("HSET|pb|?" in writes) == ("name" in opts):
        prepare = "hset" if "name" in opts else "nopb"  # before 5.7 / 5.3
    else:
        return None
    if _MTF_FINISH_HASH in writes:
        hmset = False
    elif _MTF_FINISH_HMSET in writes:
        hmset = True  # before 5.49
    else:
        return None
    if not calls & {"fetchNextJob>getQueueMetadata", "fetchNextJob>getTargetQueueList", "main>getTargetQueueList"}:
        return None  # (before 5.73 the fetch is inline in the main code)
    reads = lay.get("hash_reads", ())
    if "HEXISTS|paused" in reads:
        meta = None  # before 5.9
    else:
        meta = _meta_variant(lay)
        if meta is None:
            return None
        meta = _META4 if meta is True else meta
    counts = lay.get("counts", ())
    if "HGET|igdp" in lay.get("hash_reads", ()):
        pending = "igdp"  # 5.47-5.51: the job's ignore-dependencies flag, read on every completion
    else:
        pending = "both" if _MTF_UNSUCCESSFUL in counts else "deps"
    main = lay.get("main", [])
    lock = "removeLock" if "removeLock" in main else "GET"  # (before 5.7 the main code removes it itself)
    if lock not in main or "SCARD" not in main:
        return None
    lock_first = main.index(lock) < main.index("SCARD")
    if lock_first and pending != "deps":
        return None
    attrs: tuple[bytes, ...]
    if "HMGET|parentKey|parent|deid" in reads:
        attrs = (b"parentKey", b"parent", b"deid")
    elif "HMGET|parentKey|parent" in reads:
        attrs = (b"parentKey", b"parent")
    else:
        return None
    removed = _removed_keys(lay, "main>removeJobKeys" in calls)
    if removed is None:
        return None
    v = MtfVariant(meta, pending, hmset, "HDEL|defa" in writes, prev, not prev, lock_first,
                   _PREPARE_MARKER in calls, attrs, ranges[0] == _BOUND_BELOW, prepare, removed)
    return True if v == MTF_V6 else v


def _removed_keys(lay: dict[str, Any], helper: bool) -> tuple[bytes, ...] | None:
    """The suffixes of the keys deleted with a job removed on completion: the DEL of removeJobKeys (``helper``)
    or of the main code (before 5.2), as the layout's ``dels`` record them."""
    var = "jobKey" if helper else "jobIdKey"
    for d in lay.get("dels", ()):
        parts = d.split("|")
        if parts[0] == var and len(parts) > 1 and all(p.startswith(var + " .. '") and p.endswith("'")
                                                     for p in parts[1:]):
            return tuple(p[len(var) + 5 : -1].encode() for p in parts[1:])
    return None


@native("moveToFinished", _accept_mtf)
def move_to_finished(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: MtfVariant = MTF_V6) -> Any:
    """KEYS: wait active prioritized events stalled limiter delayed paused meta pc target jobKey metrics marker;
    ARGV: jobId timestamp prop value target fetchNext prefix opts [fields]."""
    return _finish(ctx, keys, argv, variant, None)


def _finish(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: MtfVariant, q: MtfRun | None) -> Any:
    """moveToFinished; ``q``: the run form's state (:class:`MtfRun`) when the request is one of a run, whose
    queue keys' checks (their types, meta's fields, the events stream's IDs) it made once for the run."""
    if len(argv) < 8 or len(keys) != 14:
        raise Bail("args")
    if len(argv) > 8 and argv[8]:
        raise Bail("fields to update")
    job_id, ts, prop, val, target, fetch, prefix = argv[:7]
    failed = target == b"failed"
    if not failed and target != b"completed":
        raise Bail("target")
    if not (len(ts) <= 16 and ts.isdigit()) and not _NUM_RE.match(ts):
        raise Bail("timestamp")
    wait_key, active_key, prio_key, events_key, stalled_key = keys[0], keys[1], keys[2], keys[3], keys[4]
    delayed_key, meta_key, pc_key, target_key, job_key, marker_key = keys[6], keys[8], keys[9], keys[10], keys[11], keys[13]
    if q is None:
        _qk, ks, clash, _full = _mtf_keys(keys)
    else:
        ks, clash = q.ks, q.clash
    if job_key in ks:
        raise Bail("args")
    if job_key in clash:
        raise Bail("key clash")  # job_key + one of _JOB_SUFFIXES is another key of the script
    db = ctx.db
    call = ctx.call
    monitors = ctx.monitors
    # ---- reads (an error here still falls back to Lua: nothing written yet)
    done = ctx.done  # None with a MONITOR client attached (then it is fed each inline call: ctx.inline)
    job: Any = unpacked(db.lookup(job_key))
    if done is None:
        ctx.inline(EXISTS, [b"EXISTS", job_key])
    else:
        done.append(EXISTS)  # (what ctx.inline does, without building the argv it has no use for)
    if job is None:
        return -1
    deps_after_lock = (not failed or variant.failed_deps) and variant.lock_first
    if deps_after_lock:  # counted after the lock's removal (below): a dependencies key must be a set
        _check(db, job_key + b":dependencies", Set)
    elif not failed or variant.failed_deps:
        # SCARD dependencies, ZCARD unsuccessful: inline when the keys are absent (the usual case; a key
        # present, even expired, takes the command)
        data = db.data
        pending = variant.pending
        if pending == "igdp":  # 5.47-5.51: HGET igdp first (a job that has it set skips the check: Lua)
            if type(job) is not Hash or b"igdp" in job.d:
                raise Bail("igdp")
            ctx.inline(HGET, [b"HGET", job_key, b"igdp"])
        for suffix, cmd_, name, code in (_PENDING_CHILDREN if pending == "both" else _PENDING_CHILDREN[:1]):
            k = job_key + suffix
            if done is None or k in data:
                if call(cmd_, [name, k]) != 0:
                    return code
            else:
                done.append(cmd_)
    remove, attempts, limiter, token, lock_ms, worker = _mtf_opts(argv[7], failed)
    fetch_next = fetch == b"1"
    # ---- everything that could fail or branch after the first write
    if type(job) is not Hash:
        raise Bail("wrong type")
    hjob: Hash = job
    jd = job.d  # (a plain Hash: its fields dict, read without a method call per field)
    if b"parentKey" in jd or b"parent" in jd or b"deid" in jd:
        raise Bail("job with parent or dedup")
    atm = jd.get(b"atm")
    if atm is not None:
        n = str2int(atm)
        if n is None or n >= _INT64_MAX:
            raise Bail("atm")
    if q is None:
        active = _check(db, active_key, List)
    else:
        data = db.data  # (the run's queue keys: a list / zset or absent, no TTL; checked when it opened)
        active = data.get(active_key)
    if active is None or active.find(job_id, True) < 0:
        raise Bail("not active")  # -3 comes after the lock is deleted: let Lua do it
    if q is None:
        meta = _check(db, meta_key, Hash)
        # meta's paused/concurrency, validated (the fetch's concurrency limit): trimEvents' HSET below
        # writes only opts.maxLenEvents, so they hold for the whole script
        limit = None if meta is None else _paused_or_maxed_attrs(meta.get(b"paused"), meta.get(b"concurrency"))
        max_events = None if meta is None else meta.get(b"opts.maxLenEvents")
        m = 10000  # trimEvents' MAXLEN
        if max_events is not None:
            m = str2int(max_events)  # type: ignore[assignment]
            if m is None or m < 0:
                raise Bail("maxLenEvents")
        _check_stream(db, events_key)
        _check(db, target_key, ZSet)
        wait = _check(db, wait_key, List)
        prio = _check(db, prio_key, ZSet)
        delayed = _check(db, delayed_key, ZSet)
    else:
        # meta (a hash with maxLenEvents: no script of the run writes it), the events stream (with IDs to
        # spare), the target and marker zsets: as the run found them
        meta, limit, max_events, m = q.meta, q.limit, q.max_events, q.m
        wait = data.get(wait_key)
        prio = data.get(prio_key)
        delayed = data.get(delayed_key)
    if fetch_next:
        if meta is not None and meta.get(b"max") is not None:
            raise Bail("rate limit")
        if limiter:
            raise Bail("rate limiter")
        if q is None:
            _check(db, marker_key, ZSet)
        upto = (float(ts) + 1) * 0x1000 - (1 if variant.bound_below else 0)
        _check_nothing_due(delayed, upto)
        nxt = _next_job_id(wait, prio)
        if nxt is not None:
            if nxt == job_id:
                raise Bail("next job is this job")
            nxt_key = prefix + nxt
            if nxt_key == job_key or nxt_key + b":lock" == job_key:
                raise Bail("key clash")
            # (the other 13 keys as a set: what the list of 14 would say, without a scan of it per key)
            _check_job_for_processing(ctx, ks, prefix, nxt)
    # ---- removeLock: the first write
    if token != b"0":
        lock_key = job_key + b":lock"
        lock_token = db.lookup(lock_key)
        if done is None or (lock_token is not None and type(lock_token) is not bytes):
            lock_token = call(GET, [b"GET", lock_key])
        else:
            done.append(GET)
        if lock_token != token:
            return -2 if lock_token is None else -6
        if done is None:
            call(DEL, [b"DEL", lock_key])
        else:
            ctx.wrote = True
            db.delete(lock_key)
            done.append(DEL)
        if done is None or db.lookup(stalled_key) is not None:
            call(SREM, [b"SREM", stalled_key, job_id])
        else:
            done.append(SREM)  # no stalled set: nothing to remove
    if deps_after_lock:
        k = job_key + b":dependencies"
        if done is None or k in db.data:
            if call(SCARD, [b"SCARD", k]) != 0:
                return -4
        else:
            done.append(SCARD)
    if done is None:
        # HMGET parentKey parent [deid]: all absent (checked above)
        ctx.inline(HMGET, [b"HMGET", job_key, *variant.attrs])
        call(LREM, [b"LREM", active_key, b"-1", job_id])
        # trimEvents (meta's maxLenEvents was read above and nothing wrote meta since)
        ctx.inline(HGET, [b"HGET", meta_key, b"opts.maxLenEvents"])
    else:
        done.append(HMGET)
        # LREM active -1 jobId, inline: ``active`` is the list checked above, holding the job, and nothing
        # wrote it since (its key is none of the keys written so far)
        ctx.wrote = True
        active.remove(job_id, -1)
        _pop_done(db, active_key, active)
        done.append(LREM)
        done.append(HGET)
    if max_events is None:
        max_events = b"10000"
        call(HSET, [b"HSET", meta_key, b"opts.maxLenEvents", max_events])
    if monitors or len(max_events) > 18 or not max_events.isdigit():
        call(XTRIM, [b"XTRIM", events_key, b"MAXLEN", b"~", max_events])
    else:
        ctx.wrote = True
        xtrim_approx(ctx.sc, events_key, m)  # m: max_events as validated above (a stream or absent: checked)
        done.append(XTRIM)  # type: ignore[union-attr]  # (monitors: the branch above)
    # the job hash: nothing replaced it since the checks; kept, its HINCRBY and HSET are signalled once
    attempts_made = _hincr1(ctx, job_key, b"atm", job, remove)
    if not remove:
        if done is None:
            call(ZADD, [b"ZADD", target_key, ts, job_id])
        else:
            # ZADD target ts jobId, the command's own code without its dispatch: the target is a zset or
            # absent (checked above) and ts a validated number
            _zadd1(ctx.sc, target_key, ts, job_id)
            done.append(ZADD)
        if variant.hmset:
            if _hset(ctx, HMSET, [b"HMSET", job_key, prop, val, b"finishedOn", ts], job, False):
                db.modified(job_key)
        elif _hset(ctx, HSET, [b"HSET", job_key, prop, val, b"finishedOn", ts], job, False):
            db.modified(job_key)
        if failed and variant.hdel_defa:
            call(HDEL, [b"HDEL", job_key, b"defa"])
    else:
        call(DEL, [b"DEL", job_key, *[job_key + x for x in variant.removed]])
    xadd = _xadd_star if q is None else q.xadd
    if variant.prev:
        xadd(ctx, [b"XADD", events_key, b"*", b"event", target, b"jobId", job_id, prop, val, b"prev", b"active"])
    else:
        xadd(ctx, [b"XADD", events_key, b"*", b"event", target, b"jobId", job_id, prop, val])
    if failed and attempts_made >= attempts:
        call(XADD, [b"XADD", events_key, b"*", b"event", b"retries-exhausted", b"jobId", job_id,
                    b"attemptsMade", b"%d" % attempts_made])
    if not remove and db.data.get(job_key) is job:
        # a finished job is not read again by its worker: held packed now, not a --hash-compact-delay later
        # (the same packing, without the compactor's bookkeeping or the holes its live objects would leave)
        pack_now(db, job_key, hjob)
    if fetch_next:
        # fetchNextJob. getQueueMetadata: HMGET meta (a hash or absent: checked above)
        if variant.meta is None:  # getTargetQueueList before 5.9: paused or not, no concurrency limit
            ctx.inline(HEXISTS, [b"HEXISTS", meta_key, b"paused"])
            paused_or_maxed = meta is not None and meta.get(b"paused") is not None
        else:
            if done is None:
                ctx.inline(HMGET, [b"HMGET", meta_key, *variant.meta])
            else:
                done.append(HMGET)
            paused_or_maxed = _paused_or_maxed(call, limit, active_key)
        # promoteDelayedJobs: nothing to promote (checked above), so the range is empty
        if done is None:
            # (upto: an integer below 2**53 for a whole-ms timestamp, which %.17g prints as %d)
            up = b"%d" % upto if upto.is_integer() and upto < _EXACT else format_number_arg(upto)
            ctx.inline(ZRANGEBYSCORE, [b"ZRANGEBYSCORE", delayed_key, b"0", up, b"LIMIT", b"0", b"1000"])
        else:
            done.append(ZRANGEBYSCORE)
        if paused_or_maxed:
            return [0, 0, 0, 0]
        nid = _take_next(ctx, wait, wait_key, active_key, prio_key, pc_key)
        if nid is not None:
            return _prepare_job(ctx, prefix, events_key, marker_key, nid, ts, token, lock_ms, worker, variant.marker,
                                variant.prepare, xadd)
        delay = _next_delay_reply(call, delayed_key)
        if delay is not None:
            return delay
    # LLEN wait == 0 and LLEN active == 0 and ZCARD prioritized == 0 (Lua's short cut: the first non-zero one
    # ends it): inline for a key that is absent or holds its list / zset (checked above: nothing since changed
    # its type) without a TTL; a key with one, or a MONITOR client attached, takes the command
    data = db.data
    exp = db.expires
    for k, c, name in ((wait_key, LLEN, b"LLEN"), (active_key, LLEN, b"LLEN"), (prio_key, ZCARD, b"ZCARD")):
        if done is None or k in exp:
            n = call(c, [name, k])
        else:
            v = data.get(k)
            n = 0 if v is None else len(v)
            done.append(c)
        if n != 0:
            return 0
    call(XADD, [b"XADD", events_key, b"*", b"event", b"drained"])
    return 0


# ---- a run of moveToFinished EVALSHAs (a worker's finished jobs, each fetching the next) ----------------
_EVENTS_HEADROOM = 1 << 20  # stream IDs a run may use up (the single path checks MAX_ID - 8 per script)


class MtfRun:
    """moveToFinished's run form (compat/scripts.py ``bulk``): a worker sends one EVALSHA per finished job,
    ~18 of them per read at concurrency 50, for one queue's keys (all but the job key). What
    :func:`move_to_finished` checks about the queue's 13 keys (distinct, no clash with a job's keys, their
    types, meta's paused/concurrency/maxLenEvents, the events stream's IDs) is checked once, when the run
    opens, and each request then runs the script's code (:func:`_finish`) with what the run found. Nothing
    but the run's own requests runs while it lasts (a blocked client served in between closes it), and none
    of them writes meta (maxLenEvents is there: opening requires it), nor changes a queue key's type (their
    lists and zsets are created or emptied, never another type) or TTL, so what was checked stays true.
    Each request's replies, writes and counted commands are the single path's; a request that the native
    path leaves to Lua raises Bail before writing, and runs as a single script."""

    __slots__ = ("full", "ks", "clash", "meta", "limit", "max_events", "m", "v", "stats", "debug", "stream", "events_key",
                 "limits")

    def __init__(self, ctx: Ctx, keys: list[bytes], v: MtfVariant) -> None:
        if len(keys) != 14:
            raise Bail("args")
        if ctx.monitors:
            raise Bail("a MONITOR client")  # (in EXEC: each inline command goes to it, as on the single path)
        qk, ks, clash, full = _mtf_keys(keys)
        db = ctx.db
        if db.expires and any(k in db.expires for k in qk):
            raise Bail("a queue key with a TTL")
        meta = _check(db, keys[8], Hash)
        if meta is None:
            raise Bail("no meta")
        max_events = meta.get(b"opts.maxLenEvents")
        if max_events is None:
            raise Bail("no maxLenEvents in meta")  # (the script writes it: a single script)
        m = str2int(max_events)
        if m is None or m < 0:
            raise Bail("maxLenEvents")
        self.limit = _paused_or_maxed_attrs(meta.get(b"paused"), meta.get(b"concurrency"))
        s = _check(db, keys[3], Stream)
        if s is None:
            raise Bail("no events stream")  # (the first XADD makes it: a single script)
        if s.last_id >= MAX_ID - _EVENTS_HEADROOM:
            raise Bail("stream ids")
        _check(db, keys[10], ZSet)
        _check(db, keys[0], List)
        _check(db, keys[1], List)
        _check(db, keys[2], ZSet)
        _check(db, keys[6], ZSet)
        _check(db, keys[13], ZSet)
        self.stream = s
        self.events_key = keys[3]
        self.limits = node_limits(ctx.sc)
        self.full = full
        self.ks = ks
        self.clash = clash
        self.meta = meta
        self.max_events = max_events
        self.m = m
        self.v = v
        self.stats: list[int] | None = None
        self.debug = _log.isEnabledFor(logging.DEBUG)

    def fits(self, keys: list[Any]) -> bool:
        """Whether ``keys`` (a request's) are the run's queue keys (the job key, at 11, aside)."""
        job_key = keys[11]
        keys[11] = _JOB_SLOT
        same = keys == self.full
        keys[11] = job_key
        return same

    def xadd(self, ctx: Ctx, argv: list[bytes]) -> None:
        """``XADD <events> * field value ...`` whose reply the script drops (the completed / failed and the
        active events), inline: what ``commands.streams._xadd`` does for it, on the run's events stream (a
        stream, no TTL, IDs to spare: checked when the run opened; nothing of the run deletes it)."""
        ctx.wrote = True
        new = append_star(self.stream, argv[3:], self.limits)
        key = self.events_key
        ctx.db.modified(key)
        if STREAM_ADDED:
            sc = ctx.sc
            for fn in STREAM_ADDED:
                fn(sc, key, new, argv, 3)
        ctx.done.append(XADD)  # type: ignore[union-attr]  # (no MONITOR client: checked when the run opened)

    def add(self, ctx: Ctx, keys: list[bytes], argv: list[bytes]) -> Any:
        """One moveToFinished of the run: its reply; Bail (nothing written, nothing counted) for a single
        script."""
        done = ctx.done
        n = len(done)  # type: ignore[arg-type]  # (no MONITOR client: checked when the run opened)
        ctx.wrote = False
        try:
            r = _finish(ctx, keys, argv, self.v, self)
        except Bail as e:
            if ctx.wrote:  # a bug in the native implementation
                return failed_after_writing("moveToFinished", ctx.sha, e)
            del done[n:]  # type: ignore[index]
            raise
        except NativeScriptError as e:
            return failed_after_writing("moveToFinished", ctx.sha, e)
        except Exception as e:
            if not ctx.wrote:
                del done[n:]  # type: ignore[index]
                raise Bail("an error before writing") from None
            return failed_after_writing("moveToFinished", ctx.sha, e)
        st = self.stats
        if st is None:
            st = self.stats = native_ran("moveToFinished")
        st[0] += 1
        if self.debug:
            _log.debug("native moveToFinished: ran in a run")
        return r


#: requests in a row of one run (one read) the run form may leave to the single path before the rest of the run
#: goes there directly (a rate-limited queue, a worker with a limiter, a queue without meta: every request would)
MAX_MISSES = 3


@bulk("moveToFinished", MAX_MISSES)
def open_mtf_run(ctx: Ctx, keys: list[bytes], variant: Any) -> MtfRun:
    """moveToFinished's run form for the queue of ``keys`` (Bail: not for these keys)."""
    return MtfRun(ctx, keys, MTF_V6 if variant is True else variant)


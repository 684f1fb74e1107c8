"""Native moveToDelayed: a job in active goes to the delayed zset (a failed job retried after a backoff delay,
or Job.moveToDelayed), optionally fetching the next job."""

from __future__ import annotations

from typing import Any, NamedTuple

from lua.convert import format_number_arg
from respqueue.types.hash import Hash
from respqueue.types.list import List
from respqueue.types.set import Set
from respqueue.types.zset import ZSet

from ..scripts import Bail, Ctx, native
from .add_standard_job import _delayed_score
from .helpers import (
    _EXACT,
    _INT_RE,
    _META4,
    _NUM_RE,
    _PREPARE_HASH,
    _PREPARE_MARKER,
    DEL,
    EXISTS,
    GET,
    HEXISTS,
    HGET,
    HINCRBY,
    HMGET,
    HSET,
    LREM,
    ZADD,
    ZRANGEBYSCORE,
    ZREVRANGEBYSCORE,
    _add_delay_marker,
    _check,
    _check_job_for_processing,
    _check_nothing_due,
    _check_stream,
    _counter_ok,
    _get_or_set_max_events,
    _job_fields,
    _leave_active,
    _lock_opts,
    _lock_state,
    _next_delay_reply,
    _next_job_id,
    _paused_or_maxed,
    _paused_or_maxed_attrs,
    _pop_next,
    _prepare_job,
    _truthy,
    _unpack,
    _writes_events,
    _xadd_star,
)

_MTD_KEYS = ["marker key", "active key", "prioritized key", "delayed key", "job key", "events stream", "meta key",
             "stalled key", "wait key", "rate limiter key", "pc priority counter"]
#: npm 5.73+, 6.0-6.2, PyPI 2.20+, 3.0-3.1: the paused list's key before the priority counter
_MTD_KEYS_PAUSED = _MTD_KEYS[:10] + ["paused key", "pc priority counter"]
_MTD_ARGV = ["key prefix", "timestamp", "the id of the job", "queue token", "delay value", "skip attempt",
             "optional job fields to update", "fetch next", "opts"]
_MTD_OPTS = frozenset({"limiter", "lockDuration", "maxLenEvents", "name", "token"})
_MTD_CALLS = frozenset({"main>removeLock", "main>updateJobFields", "main>getDelayedScore", "main>getOrSetMaxEvents",
                        "main>addDelayMarkerIfNeeded"})
_MTD_FETCH_CALLS = frozenset({"main>fetchNextJob", "fetchNextJob>promoteDelayedJobs",
                              "fetchNextJob>prepareJobForProcessing", _PREPARE_MARKER})
_MTD_EVENTS = ("event|delayed|jobId|?|delay|?",)
_MTD_HASH_WRITES = frozenset({"HMSET|?", "HSET|delay|?"})
#: the main code's calls, in order (5.59+: LREM, then getDelayedScore)
_MTD_MAIN = ["EXISTS", "removeLock", "updateJobFields", "LREM", "getDelayedScore", "HINCRBY", "HSET",
             "getOrSetMaxEvents", "ZADD", "XADD"]
#: 5.39-5.58: getDelayedScore, then LREM
_MTD_MAIN_SCORE_FIRST = _MTD_MAIN[:3] + ["getDelayedScore", "LREM"] + _MTD_MAIN[5:]
#: npm 5.5-5.7: the caller's score, isQueuePaused before the delay marker
_MTD_MAIN_CALLER_SCORE = ["EXISTS", "removeLock", "LREM", "HINCRBY", "HSET", "getOrSetMaxEvents", "ZADD", "XADD",
                          "isQueuePaused", "addDelayMarkerIfNeeded"]
_MTD_ARGV_CALLER_SCORE = ["key prefix", "timestamp", "delayedtimestamp", "the id of the job", "queue token",
                          "delay value", "skip attempt"]


class MtdVariant(NamedTuple):
    wait: int | None  # the wait key's position (the fetch's keys; None: the release fetches nothing)
    pc: int | None  # the priority counter's position
    score_first: bool  # getDelayedScore before LREM (before 5.59)
    fields: bool = True  # ARGV[7]'s fields to update are written (5.33+; before, no ARGV[7] is read)
    caller_score: bool = False  # 5.5-5.7: ARGV[3] is the job's score (no getDelayedScore), the delay marker
    # only for an unpaused queue (HEXISTS meta paused)
    old_lock: bool = False  # 5.0-5.4 (7 keys, no stalled set): the lock's GET and DEL inline, -2 for another
    # token's lock too
    set_max: bool = True  # getOrSetMaxEvents (5.0.0: HGET meta opts.maxLenEvents, 10000 when absent, no HSET)
    member: bytes = b"1"  # the delay marker's member ("0" in 5.0.0)


#: 6.3+ (11 keys)
MTD_V6 = MtdVariant(8, 10, False)


def _accept_mtd(numkeys: int, lay: dict[str, Any]) -> Any:
    """moveToDelayed: the releases with 6.x's keys and ARGV, the fetch's or not: npm 5.73+, 6.x, PyPI 2.20+,
    3.x fetch the next job (11 keys, or 12 with the paused list), reading meta's paused concurrency max
    duration and re-adding the marker; npm 5.33-5.72 and PyPI 2.13-2.19 take 8 keys and 7 ARGV and fetch
    nothing (before 5.59 they score the job before its LREM; npm 5.8-5.32 take 6 ARGV, no fields to update).
    Decided by the main code's call order."""
    keys, argv, main = lay.get("keys"), lay.get("argv"), lay.get("main")
    calls = set(lay.get("calls", ()))
    if keys == _MTD_KEYS[:8] and numkeys == 8 and argv == _MTD_ARGV_CALLER_SCORE:
        # npm 5.5-5.7: ARGV[3] is the score (ZADD as given), HEXISTS meta paused before the marker
        if main != _MTD_MAIN_CALLER_SCORE or "HEXISTS|paused" not in lay.get("hash_reads", ()):
            return None
        if not {"main>isQueuePaused", "main>removeLock", "main>getOrSetMaxEvents", "main>addDelayMarkerIfNeeded"} \
                <= calls or "delayedKey|score|jobId" not in lay.get("zadds", ()):
            return None
        if not _writes_events(lay, _MTD_EVENTS) or "HSET|delay|?" not in lay.get("hash_writes", ()):
            return None
        return MtdVariant(None, None, False, False, True)
    if keys == _MTD_KEYS[:7] and numkeys == 7 and argv == _MTD_ARGV_CALLER_SCORE:
        return _accept_mtd_old(lay)
    if keys == _MTD_KEYS[:8] and numkeys == 8 and argv == _MTD_ARGV[:6]:
        # npm 5.8-5.32: no fields to update (nor updateJobFields), the score before the LREM
        if main != [c for c in _MTD_MAIN_SCORE_FIRST if c != "updateJobFields"] + ["addDelayMarkerIfNeeded"]:
            return None
        if "main>updateJobFields" in calls:
            return None
        v = MtdVariant(None, None, True, False)
    elif keys == _MTD_KEYS[:8] and numkeys == 8 and argv == _MTD_ARGV[:7]:
        if main == _MTD_MAIN + ["addDelayMarkerIfNeeded"]:
            v = MtdVariant(None, None, False)
        elif main == _MTD_MAIN_SCORE_FIRST + ["addDelayMarkerIfNeeded"]:
            v = MtdVariant(None, None, True)
        else:
            return None
    elif argv == _MTD_ARGV and main == _MTD_MAIN + ["fetchNextJob", "addDelayMarkerIfNeeded"]:
        if keys == _MTD_KEYS and numkeys == 11:
            v = MTD_V6
        elif keys == _MTD_KEYS_PAUSED and numkeys == 12:
            v = MtdVariant(8, 11, False)
        else:
            return None
        if not _MTD_FETCH_CALLS <= calls or not calls & {"fetchNextJob>getQueueMetadata",
                                                         "fetchNextJob>getTargetQueueList"}:
            return None
        if not set(lay.get("unpacked", {}).get("ARGV9", ())) <= _MTD_OPTS:
            return None
        if "event|active|jobId|?|prev|waiting" not in lay.get("events", ()):
            return None
        if _PREPARE_HASH not in lay.get("hash_writes", ()):
            return None
        if "HMGET|paused|concurrency|max|duration" not in lay.get("hash_reads", ()):
            return None
    else:
        return None
    if not _MTD_CALLS - ({"main>updateJobFields"} if not v.fields else set()) <= calls:
        return None
    if not _writes_events(lay, _MTD_EVENTS):
        return None
    if not _MTD_HASH_WRITES - ({"HMSET|?"} if not v.fields else set()) <= set(lay.get("hash_writes", ())):
        return None
    return True if v == MTD_V6 else v


def _accept_mtd_old(lay: dict[str, Any]) -> MtdVariant | None:
    """npm 5.0-5.4 (7 keys): 5.5-5.7's caller-scored path, with the lock's GET and DEL inline (no stalled
    set, no -6), and in 5.0.0 the events' max length read without a default written and the marker's member
    "0"."""
    calls = set(lay.get("calls", ()))
    set_max = "main>getOrSetMaxEvents" in calls
    head = ["EXISTS", "GET", "DEL", "LREM", "HINCRBY", "HSET"]
    tail = ["ZADD", "XADD", "isQueuePaused", "addDelayMarkerIfNeeded"]
    if lay.get("main") != head + (["getOrSetMaxEvents"] if set_max else ["HGET"]) + tail:
        return None
    if set_max != ("HSET|opts.maxLenEvents|?" in lay.get("hash_writes", ())):
        return None
    if lay.get("dels") != ["lockKey"] or lay.get("lrems") != ["KEYS[2]|-1|jobId"] or "main>removeLock" in calls:
        return None
    if not {"main>isQueuePaused", "main>addDelayMarkerIfNeeded"} <= calls:
        return None
    if not {"HEXISTS|paused", "HGET|opts.maxLenEvents"} <= set(lay.get("hash_reads", ())):
        return None
    zadds = set(lay.get("zadds", ()))
    markers = [z for z in zadds if z.startswith("markerKey|nextTimestamp|")]
    if "delayedKey|score|jobId" not in zadds or markers not in (['markerKey|nextTimestamp|"0"'],
                                                               ['markerKey|nextTimestamp|"1"']):
        return None
    if not _writes_events(lay, _MTD_EVENTS) or "HSET|delay|?" not in lay.get("hash_writes", ()):
        return None
    if lay.get("hincrbys") != ['jobKey|"atm"|1']:
        return None
    return MtdVariant(None, None, False, False, True, True, set_max, markers[0][-2:-1].encode())


def _delay(ctx: Ctx, job_key: bytes, job_id: bytes, skip: bytes, delay_raw: bytes, meta_key: bytes,
           max_events: bytes | None, delayed_key: bytes, score: int, set_max: bool = True) -> bytes:
    """The attempt counted (unless skipped), the job's delay, getOrSetMaxEvents (meta read by the caller, not
    written since; without ``set_max`` (5.0.0) the HGET alone, 10000 when absent) and the ZADD to delayed.
    Returns maxLenEvents."""
    if skip == b"0":
        ctx.call(HINCRBY, [b"HINCRBY", job_key, b"atm", b"1"])
    ctx.call(HSET, [b"HSET", job_key, b"delay", delay_raw])
    if set_max:
        max_events = _get_or_set_max_events(ctx, meta_key, max_events)
    else:
        ctx.inline(HGET, [b"HGET", meta_key, b"opts.maxLenEvents"])
        max_events = max_events or b"10000"
    ctx.call(ZADD, [b"ZADD", delayed_key, b"%d" % score, job_id])
    return max_events


@native("moveToDelayed", _accept_mtd)
def move_to_delayed(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: MtdVariant = MTD_V6) -> Any:
    """KEYS: marker active prioritized delayed job events meta stalled [wait limiter [paused] pc];
    ARGV: prefix timestamp jobId token delay skipAttempt [fields] [fetchNext opts]."""
    if variant.caller_score:
        return _move_to_delayed_scored(ctx, keys, argv, variant)
    if len(argv) < 6 or len(set(keys)) != len(keys):
        raise Bail("args")
    prefix, ts, job_id, token, delay_raw, skip = argv[:6]
    fields = _job_fields(argv[6] if len(argv) > 6 and variant.fields else None)
    fetch = variant.wait is not None and len(argv) > 7 and argv[7] == b"1"
    marker_key, active_key, prio_key, delayed_key, job_key, events_key, meta_key, stalled_key = keys[:8]
    if job_key + b":lock" in keys:
        raise Bail("key clash")
    if not _INT_RE.match(delay_raw) or not (len(ts) <= 16 and ts.isdigit()) and not _NUM_RE.match(ts):
        raise Bail("delay or timestamp")
    delay = int(delay_raw)
    db = ctx.db
    # ---- reads: everything that could fail or branch after the first write
    job = _check(db, job_key, Hash)
    lock = 0
    if job is not None:
        lock = _lock_state(db, job_key, token)
    if job is not None and lock >= 0:
        if fields is not None and b"atm" in fields[::2]:
            raise Bail("atm in fields")
        if skip == b"0" and not _counter_ok(job.get(b"atm")):
            raise Bail("atm")
        _check(db, stalled_key, Set)
        active = _check(db, active_key, List)
        if active is None or active.find(job_id, True) < 0:
            raise Bail("not active")  # -3 comes after the lock is gone: Lua
        score, when = _delayed_score(db, delayed_key, ts, delay)
        meta = _check(db, meta_key, Hash)
        max_events = None if meta is None else meta.get(b"opts.maxLenEvents")
        if max_events is not None and (len(max_events) > 18 or not max_events.isdigit()):
            raise Bail("maxLenEvents")
        _check_stream(db, events_key)
        _check(db, marker_key, ZSet)
        if fetch:
            if len(argv) < 9:
                raise Bail("opts")
            opts = _unpack(argv[8])
            if type(opts) is not dict or _truthy(opts.get(b"limiter")):
                raise Bail("opts or rate limiter")
            f_token, lock_ms, worker = _lock_opts(opts)
            if meta is not None and meta.get(b"max") is not None:
                raise Bail("rate limit")
            limit = None if meta is None else _paused_or_maxed_attrs(meta.get(b"paused"), meta.get(b"concurrency"))
            upto = (float(ts) + 1) * 0x1000 - 1
            if when * 0x1000 <= upto:
                raise Bail("the job is due at once")  # promoteDelayedJobs would move it
            _check_nothing_due(db.lookup(delayed_key), upto)
            wait_key, pc_key = keys[variant.wait], keys[variant.pc]  # type: ignore[index]
            nxt = _next_job_id(_check(db, wait_key, List), _check(db, prio_key, ZSet))
            if nxt is not None:
                if nxt == job_id or prefix + nxt in (job_key, job_key + b":lock"):
                    raise Bail("next job is this job")
                _check_job_for_processing(ctx, keys, prefix, nxt)
    # ---- the script's calls
    call = ctx.call
    first = variant.score_first
    code = _leave_active(ctx, job_key, job_id, job is not None, lock, token, stalled_key, fields,
                         None if first else active_key)
    if code < 0:
        return code  # (the job is in active: checked)
    # getDelayedScore (computed above: nothing wrote the delayed zset since), before or after the LREM
    lo = when * 0x1000
    call(ZREVRANGEBYSCORE, [b"ZREVRANGEBYSCORE", delayed_key, b"%d" % (lo + 0xFFF), b"%d" % lo, b"WITHSCORES",
                            b"LIMIT", b"0", b"1"])
    if first:
        call(LREM, [b"LREM", active_key, b"-1", job_id])
    max_events = _delay(ctx, job_key, job_id, skip, delay_raw, meta_key, max_events, delayed_key, score)
    _xadd_star(ctx, [b"XADD", events_key, b"MAXLEN", b"~", max_events, b"*", b"event", b"delayed", b"jobId", job_id,
                     b"delay", b"%d" % when])
    if fetch:
        # fetchNextJob: getQueueMetadata / getTargetQueueList, then promoteDelayedJobs (nothing due: checked)
        call(HMGET, [b"HMGET", meta_key, *_META4])
        paused_or_maxed = _paused_or_maxed(call, limit, active_key)
        call(ZRANGEBYSCORE, [b"ZRANGEBYSCORE", delayed_key, b"0", format_number_arg(upto), b"LIMIT", b"0", b"1000"])
        if not paused_or_maxed:
            nid = _pop_next(call, wait_key, active_key, prio_key, pc_key)
            if nid is not None:
                return _prepare_job(ctx, prefix, events_key, marker_key, nid, ts, f_token, lock_ms, worker)
            _next_delay_reply(call, delayed_key)
    _add_delay_marker(ctx, marker_key, delayed_key)
    return 0



def _move_to_delayed_scored(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: MtdVariant) -> Any:
    """npm 5.0-5.7: KEYS marker active prioritized delayed job events meta [stalled]; ARGV prefix timestamp
    score jobId token delay skipAttempt. The job goes to the delayed zset at the caller's score (its event's
    delay: score / 4096, a Lua number); the delay marker unless the queue is paused."""
    nk = 7 if variant.old_lock else 8
    if len(argv) < 7 or len(keys) != nk or len(set(keys)) != nk:
        raise Bail("args")
    score_raw, job_id, token, delay_raw, skip = argv[2:7]
    marker_key, active_key, _prio_key, delayed_key, job_key, events_key, meta_key = keys[:7]
    stalled_key = keys[7] if nk == 8 else b""
    if job_key + b":lock" in keys:
        raise Bail("key clash")
    if not (score_raw.isdigit() and len(score_raw) <= 16 and int(score_raw) < _EXACT):
        raise Bail("score")  # (tonumber's other forms: Lua)
    score = int(score_raw)
    db = ctx.db
    # ---- reads: everything that could fail or branch after the first write
    job = _check(db, job_key, Hash)
    lock = 0
    if job is not None:
        lock = _lock_state(db, job_key, token, variant.old_lock)
    if job is not None and lock >= 0:
        if skip == b"0" and not _counter_ok(job.get(b"atm")):
            raise Bail("atm")
        if not variant.old_lock:
            _check(db, stalled_key, Set)
        active = _check(db, active_key, List)
        if active is None or active.find(job_id, True) < 0:
            raise Bail("not active")  # -3 comes after the lock is gone: Lua
        z = _check(db, delayed_key, ZSet)
        if z is not None and len(z):
            first = next(z.items())[0]
            if not (first.is_integer() and 0 <= first < _EXACT) or z.score(job_id) is not None:
                raise Bail("delayed score")  # the marker's next timestamp is computed from the first
        meta = _check(db, meta_key, Hash)
        max_events = None if meta is None else meta.get(b"opts.maxLenEvents")
        if max_events is not None and (len(max_events) > 18 or not max_events.isdigit()):
            raise Bail("maxLenEvents")
        _check_stream(db, events_key)
        _check(db, marker_key, ZSet)
    # ---- the script's calls
    call = ctx.call
    if variant.old_lock:
        n = _leave_active_old(ctx, job_key, job is not None, lock, token)
        if n == 0:
            call(LREM, [b"LREM", active_key, b"-1", job_id])
    else:
        n = _leave_active(ctx, job_key, job_id, job is not None, lock, token, stalled_key, None, active_key)
    if n < 0:
        return n  # (-1, -2, -6; the job is in active: checked)
    max_events = _delay(ctx, job_key, job_id, skip, delay_raw, meta_key, max_events, delayed_key, score,
                        variant.set_max)
    _xadd_star(ctx, [b"XADD", events_key, b"MAXLEN", b"~", max_events, b"*", b"event", b"delayed", b"jobId", job_id,
                     b"delay", format_number_arg(score / 0x1000)])
    ctx.inline(HEXISTS, [b"HEXISTS", meta_key, b"paused"])  # (meta read above; nothing wrote "paused")
    if meta is None or meta.get(b"paused") is None:
        _add_delay_marker(ctx, marker_key, delayed_key, variant.member)
    return 0


def _leave_active_old(ctx: Ctx, job_key: bytes, exists: bool, lock: int, token: bytes) -> int:
    """npm 5.0-5.4's opening: EXISTS job (-1), then unless the token is "0" GET the lock and DEL it when it is
    the token's (no stalled set), -2 otherwise."""
    ctx.inline(EXISTS, [b"EXISTS", job_key])
    if not exists:
        return -1
    if token == b"0":
        return 0
    lock_key = job_key + b":lock"
    ctx.inline(GET, [b"GET", lock_key])
    if lock < 0:
        return -2
    ctx.call(DEL, [b"DEL", lock_key])
    return 0

"""Native moveStalledJobsToWait: the stalled-jobs check every worker runs every ``stalledInterval``.

Its common paths, for every release (npm 5.0-6.x, PyPI 2.x-3.x): the stalled-check key exists (the reply at
once), or no job is truly stalled (every job of the stalled set has its lock, or is no longer active, or is a
legacy ``0:`` marker): the check key is set, the events stream trimmed, the stalled set emptied and refilled
with the active list's ids.

Truly stalled jobs (no lock, still in active), for every release: each is taken out of active, its stall
counter counted (HINCRBY of the release's field, recorded as the layout's ``hincrbys``: ``stc``, or
``stalledCounter`` before npm 5.49). Releases with the failed zset among their keys (npm 5.0-5.52, PyPI
2.13-2.14) fail a job past the limit in the script (the failed zset, parents, removeOnFail, deduplication:
Lua); within the limit it goes back as below, and the reply is ``{failed, stalled}``. The releases that defer
the failure (npm 5.53-6.x, PyPI 2.15+ and 3.x: ``HSET defa``) read its repeat options as the release does
(5.53-5.55: HMGET opts parent past the limit; 5.58-5.77: HGET opts, cjson-decoded; 5.78+/6.x: HGET rjk, then
EXISTS of the scheduler key, then ZSCORE of the repeat zset), set ``defa`` past the limit (not for a
repeatable job). Back: pushed (RPUSH) to the wait list, or the paused list of a paused 5.x queue (6.x: the
wait list; moveJobToWait's callee, getTargetQueueList or isQueuePausedOrMaxed, tells them apart), the marker
added unless paused or at the concurrency limit (5.0.0 has no marker; 5.0-5.8 read ``HEXISTS meta paused``
only), with its 'waiting' and 'stalled' events; the reply lists them. On Lua: a job past the limit on the
releases with the failed zset; opts that are not a JSON object or array as Python's strict decoder reads
them (cjson corner cases), unicode surrogate escapes; a non-integer max stalled count or stall counter; wrong
key types; a job key that is another key of the call.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from respqueue.keyspace import mstime
from respqueue.numbers import str2int
from respqueue.types.hash import Hash
from respqueue.types.list import List
from respqueue.types.set import Set
from respqueue.types.zset import ZSet

from ..scripts import Bail, Ctx, cmd, native
from .helpers import (
    _INT64_MAX,
    _INT_RE,
    _META4,
    EXISTS,
    HEXISTS,
    HGET,
    HMGET,
    HSET,
    LREM,
    RPUSH,
    SET,
    XTRIM,
    QueueVariant,
    _check,
    _check_stream,
    _hincr1,
    _paused_or_maxed_attrs,
    _target_queue,
    _xadd_star,
    _zadd_marker,
)

SMEMBERS = cmd("smembers")
LRANGE = cmd("lrange")
SADD = cmd("sadd")
DEL = cmd("del")
ZSCORE = cmd("zscore")

_ARGV = ["max stalled job count", "queue tokey", "timestamp", "max check time"]
_ROLES = {"stalled set": "stalled", "wait list": "wait", "active list": "active", "failed zset": "failed",
          "stalled check key": "check", "meta key": "meta", "paused list": "paused", "marker": "marker",
          "event stream stream": "events", "repeat key": "repeat"}
_BATCH = 7000  # the scripts' batches(#active, 7000) for SADD
#: what SET ... PX takes (a positive integer, as Redis's string2ll reads it); XTRIM MAXLEN's count
_PX_RE = re.compile(rb"[1-9][0-9]{0,14}\Z")
_COUNT_RE = re.compile(rb"(0|[1-9][0-9]{0,14})\Z")


class StallMode(NamedTuple):
    """How a release handles a truly stalled job (5.53+: back to the target list, ``defa`` past the limit)."""

    repeat: str  # how it tells a repeatable job: "parent" (HMGET opts parent, past the limit), "opts" (HGET
    #  opts, cjson-decoded), "rjk" (HGET rjk, EXISTS repeat:<rjk>, ZSCORE repeat <rjk>), "" (none) or "fail"
    #  (5.1-5.52: a job past the limit is failed in the script: Lua)
    queue: QueueVariant  # the meta fields read for the target list (() for 5.1-5.8's HEXISTS meta paused);
    #  paused_list: a paused queue's job goes to the paused list (5.x), not to wait (6.x)
    paused_known: bool  # False: the layout does not tell where a paused queue's job goes (Bail when paused)
    counter: bytes = b"stc"  # the field HINCRBY counts stalls in (the layout's ``hincrbys``; "stalledCounter"
    #  before 5.49)
    marker: bool = True  # the base marker after the push (5.0.0: no marker key, RPUSH alone)


#: the main code between the stalled job's LREM and the LRANGE, per way of telling a repeatable job
_STALL_MAIN = {
    "parent": ["HINCRBY", "HMGET", "HSET", "getTargetQueueList", "addJobInTargetList", "XADD", "XADD"],
    "": ["HINCRBY", "HSET", "moveJobToWait", "XADD"],
    "opts": ["HINCRBY", "HGET", "HSET", "moveJobToWait", "XADD"],
    "rjk": ["HINCRBY", "HGET", "EXISTS", "ZSCORE", "HSET", "moveJobToWait", "XADD"],
}
_STALL_READS = {"parent": "HMGET|opts|parent", "": None, "opts": "HGET|opts", "rjk": "HGET|rjk"}
#: 5.1-5.52: the main code after the stalled job's HINCRBY ends with the way back (the failure in between)
_FAIL_TAIL = ["getTargetQueueList", "addJobInTargetList", "XADD", "XADD"]
#: the counter field, from the layout's ``hincrbys`` (HINCRBY's arguments as source)
_COUNTERS = {'jobKey|"stc"|1': b"stc", 'jobKey|"stalledCounter"|1': b"stalledCounter"}
_MAIN_HEAD = ["EXISTS", "SET", "trimEvents", "SMEMBERS", "DEL", "LREM", "EXISTS", "LREM"]
_MAIN_TAIL = ["LRANGE", "batches", "SADD"]
_EVENTS = {"event|stalled|jobId|?", "event|waiting|jobId|?|prev|active"}
_REASON = b"job stalled more than allowable limit"
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def _counter(lay: dict[str, Any]) -> bytes | None:
    """The job hash field the release's one HINCRBY counts stalls in (recorded as ``hincrbys``)."""
    h = lay.get("hincrbys", ())
    return _COUNTERS.get(h[0]) if len(h) == 1 else None


def _fail_mode(lay: dict[str, Any], names: list[str]) -> StallMode | None:
    """5.1-5.52 (the failed zset among the keys): a truly stalled job within the limit goes back to the target
    list (getTargetQueueList: HEXISTS meta paused before 5.9, then HMGET paused concurrency; the paused list
    when paused) with the marker and its 'waiting' and 'stalled' events; past the limit it is failed in the
    script (Lua)."""
    main = lay.get("main", [])
    if main[: len(_MAIN_HEAD)] != _MAIN_HEAD or main[-len(_MAIN_TAIL):] != _MAIN_TAIL:
        return None
    marker = "marker" in names
    back = _FAIL_TAIL if marker else ["getTargetQueueList", "RPUSH", "XADD", "XADD"]  # (5.0.0: no marker)
    if main[len(_MAIN_HEAD)] != "HINCRBY" or main[-len(_MAIN_TAIL) - len(back): -len(_MAIN_TAIL)] != back:
        return None
    counter = _counter(lay)
    calls = set(lay.get("calls", ()))
    if counter is None or not _EVENTS <= set(lay.get("events", ())):
        return None
    if marker:
        if not {"main>getTargetQueueList", "main>addJobInTargetList",
                "addJobInTargetList>addBaseMarkerIfNeeded"} <= calls:
            return None
        if 'markerKey|0|"0"' not in lay.get("zadds", ()) or "pushCmd|targetKey|jobId" not in lay.get("dyn_calls", ()):
            return None
    elif "checkStalledJobs>getTargetQueueList" not in calls or any(z.startswith("markerKey") for z in
                                                                    lay.get("zadds", ())):
        return None
    reads = set(lay.get("hash_reads", ()))
    if "HMGET|paused|concurrency" in reads and "HEXISTS|paused" not in reads:
        q = QueueVariant(_META4[:2], True)
    elif "HEXISTS|paused" in reads and not any(r.startswith("HMGET|paused") for r in reads):
        q = QueueVariant((), True)
    else:
        return None
    return StallMode("fail", q, True, counter, marker)


def _stall_mode(lay: dict[str, Any], names: list[str]) -> StallMode | None:
    """The :class:`StallMode` of a layout: 5.53+ (no failed zset; ``defa`` written; the main code one of the
    known sequences; its two events; the base marker its only ZADD), 5.1-5.52 (:func:`_fail_mode`), or None
    (truly stalled jobs on Lua)."""
    if "failed zset" in names:
        return _fail_mode(lay, names)
    if "HSET|defa|?" not in lay.get("hash_writes", ()):
        return None
    main = lay.get("main", [])
    if main[: len(_MAIN_HEAD)] != _MAIN_HEAD or main[-len(_MAIN_TAIL):] != _MAIN_TAIL:
        return None
    mid = main[len(_MAIN_HEAD): -len(_MAIN_TAIL)]
    reads = set(lay.get("hash_reads", ()))
    calls = set(lay.get("calls", ()))
    repeat = next((k for k, v in _STALL_MAIN.items() if v == mid), None)
    if repeat is None:
        return None
    need = _STALL_READS[repeat]
    if need is not None and need not in reads:
        return None
    if repeat == "rjk" and "repeat key" not in names:
        return None
    if not _EVENTS <= set(lay.get("events", ())) or lay.get("zadds") != ['markerKey|0|"0"']:
        return None
    if "addJobInTargetList>addBaseMarkerIfNeeded" not in calls:
        return None
    if "HMGET|paused|concurrency|max|duration" in reads:
        fields = _META4  # only getTargetQueueList reads max and duration: the paused list
    elif "HMGET|paused|concurrency" in reads:
        fields = _META4[:2]
    else:
        return None
    counter = _counter(lay)
    if counter is None:
        return None
    if "main>getTargetQueueList" in calls:
        return StallMode(repeat, QueueVariant(fields, True), True, counter)
    if "main>moveJobToWait" not in calls:
        return None
    # moveJobToWait (5.56+): getTargetQueueList (5.x: a paused queue's job to the paused list) or 6.x's
    # isQueuePausedOrMaxed (the wait list, no marker)
    to_paused = "moveJobToWait>getTargetQueueList" in calls
    if to_paused == ("moveJobToWait>isQueuePausedOrMaxed" in calls):
        return StallMode(repeat, QueueVariant(fields, True), False, counter)  # (not told: Bail when paused)
    if fields == _META4 and not to_paused:
        return None
    return StallMode(repeat, QueueVariant(fields, to_paused), True, counter)


def _opts_repeat(raw: bytes) -> bool:
    """``cjson.decode(opts)`` and whether ``opts["repeat"]`` is truthy (a JSON null is: cjson.null); Bail where
    cjson and Python's strict decoder might differ, or where the Lua code would fail or index a non-table."""
    if _SURROGATE.search(raw) or raw.count(b"[") + raw.count(b"{") > 200:
        raise Bail("opts")
    try:
        v = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except Exception:
        raise Bail("opts") from None
    if type(v) is dict:
        return "repeat" in v and v["repeat"] is not False
    if type(v) is list:
        return False
    raise Bail("opts")


def _no_constant(name: str) -> Any:
    raise ValueError(name)


class StalledVariant(NamedTuple):
    """One release's moveStalledJobsToWait: its key positions and what differs on the common path."""

    stalled: int
    active: int
    check: int
    meta: int
    events: int
    pair_reply: bool  # the release returns {failed, stalled} (its keys have the failed zset): {{}, {}}
    set_max_events: bool  # trimEvents through getOrSetMaxEvents (HSET meta opts.maxLenEvents 10000 if unset)
    stall: StallMode | None = None  # truly stalled jobs: natively (5.53+), or None: Lua
    wait: int = 1
    paused: int = 5
    marker: int = 6
    repeat: int = 8


STALLED_V6 = StalledVariant(0, 2, 3, 4, 7, False, True, StallMode("rjk", QueueVariant(_META4[:2], False), True),
                            1, 5, 6, 8)


def _accept(numkeys: int, lay: dict[str, Any]) -> Any:
    """The releases whose documented keys and ARGV are 5.0-6.x's (every key a known role), whose trimEvents
    reads meta's opts.maxLenEvents (and, with getOrSetMaxEvents, writes its default). The reply when nothing
    stalled follows from the keys: the releases with the failed zset return {failed, stalled}."""
    if lay.get("argv") != _ARGV:
        return None
    names = lay.get("keys", [])
    if len(names) != numkeys or any(n not in _ROLES for n in names):
        return None
    pos = {_ROLES[n]: i for i, n in enumerate(names)}
    if not {"stalled", "active", "check", "meta", "events"} <= set(pos):
        return None
    calls = set(lay.get("calls", ()))
    if "HGET|opts.maxLenEvents" not in lay.get("hash_reads", ()):
        return None
    set_max = "trimEvents>getOrSetMaxEvents" in calls
    if set_max != ("HSET|opts.maxLenEvents|?" in lay.get("hash_writes", ())):
        return None
    if not calls & {"main>batches", "main>checkStalledJobs"}:
        return None
    stall = None
    if {"wait", "paused"} <= set(pos) and ("marker" in pos or "failed" in pos):
        stall = _stall_mode(lay, names)
    v = StalledVariant(pos["stalled"], pos["active"], pos["check"], pos["meta"], pos["events"], "failed" in pos,
                       set_max, stall, pos.get("wait", -1), pos.get("paused", -1), pos.get("marker", -1),
                       pos.get("repeat", -1))
    return True if v == STALLED_V6 else v


@native("moveStalledJobsToWait", _accept)
def move_stalled_jobs_to_wait(ctx: Ctx, keys: list[bytes], argv: list[bytes],
                              variant: StalledVariant = STALLED_V6) -> Any:
    """KEYS (6.x): stalled wait active stalled-check meta paused marker events repeat;
    ARGV: max stalled count, queue prefix, timestamp, max check time."""
    v = variant
    db = ctx.db
    check_key = keys[v.check]
    if db.peek(check_key) is not None:  # EXISTS stalled-check: checked less than max check time ago
        ctx.inline(EXISTS, [b"EXISTS", check_key])
        return [[], []] if v.pair_reply else []
    if len(argv) < 4 or len(set(keys)) != len(keys):
        raise Bail("args")
    prefix, ts, px = argv[1], argv[2], argv[3]
    if not _PX_RE.match(px):
        raise Bail("max check time")
    stalled_key, active_key, meta_key, events_key = keys[v.stalled], keys[v.active], keys[v.meta], keys[v.events]
    meta = _check(db, meta_key, Hash)
    max_events = None if meta is None else meta.get(b"opts.maxLenEvents")
    if max_events is not None and not _COUNT_RE.match(max_events):
        raise Bail("opts.maxLenEvents")
    _check_stream(db, events_key)
    stalled = _check(db, stalled_key, Set)
    active = _check(db, active_key, List)
    # the stalled set's members, in SMEMBERS's order, and which of them the loop removes from active (LREM: a
    # legacy marker, or a job without a lock that is no longer active; 2: its lock expired, EXISTS expires it)
    members = stalled.members() if stalled else []
    lrem: dict[bytes, int] = {}
    stuck: list[bytes] = []  # the truly stalled: no lock, still in active
    if members:
        now = mstime()
        locks = [prefix + job_id + b":lock" for job_id in members]
        if not set(keys).isdisjoint(locks):
            raise Bail("key clash")
        data = db.data
        for job_id, lock, when in zip(members, locks, map(db.expires.get, locks), strict=True):
            if when is not None and when > now and job_id[:2] != b"0:" and lock in data:
                continue  # locked (its lock extended): nothing but the EXISTS
            if job_id[:2] == b"0:":
                lrem[job_id] = 1  # a legacy marker: LREM, no EXISTS
                continue
            if lock not in data:
                lrem[job_id] = 1
            elif when is None:
                continue  # a lock without a TTL
            else:
                lrem[job_id] = 2
            if active is not None and active.find(job_id) >= 0:
                stuck.append(job_id)
        if stuck:
            _check_stuck(ctx, v, keys, argv, prefix, stuck, locks, meta)

    call = ctx.call
    inline = ctx.inline
    inline(EXISTS, [b"EXISTS", check_key])  # (0: looked up above)
    call(SET, [b"SET", check_key, ts, b"PX", px])
    # trimEvents (getOrSetMaxEvents)
    if meta is not None:
        inline(HGET, [b"HGET", meta_key, b"opts.maxLenEvents"])
    else:
        call(HGET, [b"HGET", meta_key, b"opts.maxLenEvents"])
    if max_events is None:
        max_events = b"10000"
        if v.set_max_events:
            call(HSET, [b"HSET", meta_key, b"opts.maxLenEvents", max_events])
    call(XTRIM, [b"XTRIM", events_key, b"MAXLEN", b"~", max_events])
    inline(SMEMBERS, [b"SMEMBERS", stalled_key])  # (its reply: members)
    if members:
        call(DEL, [b"DEL", stalled_key])
        stuck_set = set(stuck)
        done = ctx.done
        if done is not None and not lrem:  # no MONITOR client: the EXISTS of each lock, counted at once
            done.extend([EXISTS] * len(members))
        else:
            for job_id in members:
                how = lrem.get(job_id)
                if how != 1 or job_id[:2] != b"0:":
                    lock = prefix + job_id + b":lock"
                    inline(EXISTS, [b"EXISTS", lock])
                    if how == 2:
                        db.peek(lock)  # expires it, as EXISTS does
                if how is not None:
                    removed = call(LREM, [b"LREM", active_key, b"1", job_id])
                    if removed and job_id in stuck_set:  # (checked above: a truly stalled job)
                        _move_back(ctx, v, keys, argv, prefix, job_id, meta)
    ids = active.range(0, len(active) - 1) if active else []
    inline(LRANGE, [b"LRANGE", active_key, b"0", b"-1"])
    for i in range(0, len(ids), _BATCH):
        call(SADD, [b"SADD", stalled_key, *ids[i : i + _BATCH]])
    if v.pair_reply:
        return [[], stuck]  # (5.1-5.52: {failed, stalled}; a job past the limit went to Lua)
    return stuck


def _check_stuck(ctx: Ctx, v: StalledVariant, keys: list[bytes], argv: list[bytes], prefix: bytes,
                 stuck: list[bytes], locks: list[bytes], meta: Any) -> None:
    """Everything about the truly stalled jobs that could make a command of the script fail (or that the
    native path leaves to Lua), checked before the first write: Bail if any."""
    m = v.stall
    if m is None:
        raise Bail("a stalled job")  # (no release's layout left without a StallMode: a new one, Lua)
    db = ctx.db
    if not _INT_RE.match(argv[0]):
        raise Bail("max stalled job count")
    limit = int(argv[0])
    q = m.queue
    paused = _paused_or_maxed_attrs(meta.get(b"paused") if meta is not None else None,
                                    meta.get(b"concurrency") if meta is not None else None)
    if paused == -1 and not m.paused_known:
        raise Bail("paused: target list unknown")
    _check(db, keys[v.paused if paused == -1 and q.paused_list else v.wait], List)
    if m.marker:
        _check(db, keys[v.marker], ZSet)
    job_keys = {prefix + j for j in stuck}
    if len(job_keys) != len(stuck) or not job_keys.isdisjoint(keys) or not job_keys.isdisjoint(locks):
        raise Bail("key clash")
    rjk = False
    lock_set = set(locks)
    for job_id in stuck:
        job = _check(db, prefix + job_id, Hash)
        stc = job.get(m.counter) if job is not None else None
        if stc is None:
            count = 1
        else:
            n = str2int(stc)
            if n is None or n >= _INT64_MAX:
                raise Bail("stc")
            count = n + 1
        if m.repeat == "fail":
            if count > limit:
                raise Bail("stalled past the limit")  # failed in the script (5.1-5.52)
        elif m.repeat == "parent":
            if count > limit:
                raw = job.get(b"opts") if job is not None else None
                if raw is None:
                    raise Bail("opts")  # cjson.decode(false)
                _opts_repeat_any(raw)
        elif m.repeat == "opts":
            raw = job.get(b"opts") if job is not None else None
            if raw is not None:
                _opts_repeat(raw)
        elif m.repeat == "rjk" and job is not None:
            sid = job.get(b"rjk")
            if sid is not None:
                rjk = True
                sched = keys[v.repeat] + b":" + sid
                if sched in job_keys or sched in lock_set:
                    raise Bail("key clash")
    if rjk:
        _check(db, keys[v.repeat], ZSet)


def _opts_repeat_any(raw: bytes) -> None:
    """cjson.decode(opts) with its result unused (5.53-5.55): any JSON value, as far as Python reads it."""
    if _SURROGATE.search(raw) or raw.count(b"[") + raw.count(b"{") > 200:
        raise Bail("opts")
    try:
        json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except Exception:
        raise Bail("opts") from None


def _hget(ctx: Ctx, key: bytes, field: bytes) -> Any:
    h = ctx.db.data.get(key)
    if type(h) is Hash:
        ctx.inline(HGET, [b"HGET", key, field])
        return h.get(field)
    return ctx.call(HGET, [b"HGET", key, field])


def _move_back(ctx: Ctx, v: StalledVariant, keys: list[bytes], argv: list[bytes], prefix: bytes,
               job_id: bytes, meta: Any) -> None:
    """One truly stalled job, just taken out of active (5.53+): counted, ``defa`` past the limit unless
    repeatable, pushed back to its target list with the marker, its 'waiting' and 'stalled' events."""
    m = v.stall
    assert m is not None
    job_key = prefix + job_id
    db = ctx.db
    call = ctx.call
    count = _hincr1(ctx, job_key, m.counter, db.data.get(job_key))
    repeatable = False
    if m.repeat == "opts":
        raw = _hget(ctx, job_key, b"opts")
        repeatable = raw is not None and _opts_repeat(raw)
    elif m.repeat == "rjk":
        sid = _hget(ctx, job_key, b"rjk")
        if sid is not None:
            repeat_key = keys[v.repeat]
            if call(EXISTS, [b"EXISTS", repeat_key + b":" + sid]) == 1:
                repeatable = True
            else:
                repeatable = call(ZSCORE, [b"ZSCORE", repeat_key, sid]) is not None
    if count > int(argv[0]) and not repeatable:
        if m.repeat == "parent":
            call(HMGET, [b"HMGET", job_key, b"opts", b"parent"])
        call(HSET, [b"HSET", job_key, b"defa", _REASON])
    if meta is not None:
        meta = db.data.get(keys[v.meta])
    limit = _paused_or_maxed_attrs(meta.get(b"paused"), meta.get(b"concurrency")) if meta is not None else None
    if m.queue.meta_fields:
        target, paused_or_maxed = _target_queue(ctx, m.queue, keys[v.meta], limit, keys[v.active], keys[v.wait],
                                                keys[v.paused])
    else:  # 5.1-5.8: HEXISTS meta paused
        ctx.inline(HEXISTS, [b"HEXISTS", keys[v.meta], b"paused"])
        paused_or_maxed = limit == -1
        target = keys[v.paused] if paused_or_maxed else keys[v.wait]
    call(RPUSH, [b"RPUSH", target, job_id])
    if not paused_or_maxed and m.marker:
        _zadd_marker(ctx, keys[v.marker])
    events = keys[v.events]
    _xadd_star(ctx, [b"XADD", events, b"*", b"event", b"waiting", b"jobId", job_id, b"prev", b"active"])
    _xadd_star(ctx, [b"XADD", events, b"*", b"event", b"stalled", b"jobId", job_id])

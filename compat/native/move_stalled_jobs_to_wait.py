"""Native moveStalledJobsToWait: the stalled-jobs check every worker runs every ``stalledInterval``.

Its common paths, for every release (npm 5.0-6.x, PyPI 2.x-3.x): the stalled-check key exists (the reply at
once), or no job is truly stalled (every job of the stalled set has its lock, or is no longer active, or is a
legacy ``0:`` marker): the check key is set, the events stream trimmed, the stalled set emptied and refilled
with the active list's ids. A job that is truly stalled (no lock, still in active: moved back to wait, or
failed past the stalled limit, with its events) runs on Lua.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from respqueue.keyspace import mstime
from respqueue.types.hash import Hash
from respqueue.types.list import List
from respqueue.types.set import Set

from ..scripts import Bail, Ctx, cmd, native
from .helpers import EXISTS, HGET, HSET, LREM, SET, XTRIM, _check, _check_stream

SMEMBERS = cmd("smembers")
LRANGE = cmd("lrange")
SADD = cmd("sadd")
DEL = cmd("del")

_ARGV = ["max stalled job count", "queue tokey", "timestamp", "max check time"]
_ROLES = {"stalled set": "stalled", "wait list": "wait", "active list": "active", "failed zset": "failed",
          "stalled check key": "check", "meta key": "meta", "paused list": "paused", "marker": "marker",
          "event stream stream": "events", "repeat key": "repeat"}
_BATCH = 7000  # the scripts' batches(#active, 7000) for SADD
#: what SET ... PX takes (a positive integer, as Redis's string2ll reads it); XTRIM MAXLEN's count
_PX_RE = re.compile(rb"[1-9][0-9]{0,14}\Z")
_COUNT_RE = re.compile(rb"(0|[1-9][0-9]{0,14})\Z")


class StalledVariant(NamedTuple):
    """One release's moveStalledJobsToWait: its key positions and what differs on the common path."""

    stalled: int
    active: int
    check: int
    meta: int
    events: int
    pair_reply: bool  # the release returns {failed, stalled} (its keys have the failed zset): {{}, {}}
    set_max_events: bool  # trimEvents through getOrSetMaxEvents (HSET meta opts.maxLenEvents 10000 if unset)


STALLED_V6 = StalledVariant(0, 2, 3, 4, 7, False, True)


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
    v = StalledVariant(pos["stalled"], pos["active"], pos["check"], pos["meta"], pos["events"], "failed" in pos,
                       set_max)
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
                raise Bail("a stalled job")  # moved back to wait or failed, with its events: Lua

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
                    call(LREM, [b"LREM", active_key, b"1", job_id])  # (removes only a legacy marker)
    ids = active.range(0, len(active) - 1) if active else []
    inline(LRANGE, [b"LRANGE", active_key, b"0", b"-1"])
    for i in range(0, len(ids), _BATCH):
        call(SADD, [b"SADD", stalled_key, *ids[i : i + _BATCH]])
    return [[], []] if v.pair_reply else []

"""Native changePriority (Job.changePriority): a waiting or prioritized job re-queued with a new priority.

KEYS: wait, paused, meta, prioritized, active, pc (priority counter), marker (before 5.9: no active key);
ARGV: priority, key prefix (before 5.13: the job key itself), job id, "1" for LIFO (not read before 5.8). A missing job: -1 (EXISTS only). Otherwise the queue
is read as paused or maxed (HMGET meta paused concurrency [max duration], LLEN active against the
concurrency); the job is taken out of the prioritized zset (ZREM) or, failing that, out of the target list
(LREM -1: wait; in 5.x's texts the paused list when the queue is paused); if it was in either it is re-added:
priority 0 to the target list (LPUSH, or RPUSH with LIFO), else to the prioritized zset (LIFO: score
priority * 2^32, no marker; else INCR pc, score priority * 2^32 + counter mod 2^32), with the marker
(ZADD marker 0 "0") unless paused or maxed for the list and the counted add; then HSET job priority; 0.
Before 5.9 meta is read with HEXISTS paused (no concurrency limit). 5.0-5.7 re-add a prioritized job counted
whatever its new priority and a waiting one only for a priority > 0, with bit.band's 32-bit counter in the
score (native below 2^31 - 1).

EXISTS and HMGET are answered by the checks, the marker's ZADD and the HSET made inline where helpers'
``_zadd_marker`` and ``_hset`` can (no MONITOR client, a plain hash), each counted as the Lua path's call;
the rest goes through ``Ctx.call``. Before the first one the native path checks everything that could make
a call fail or take a branch it does not make (conservatively: whether or not the call is reached): the key
types, meta's concurrency, the priority (an integer 0..2^21 written without leading zeros), the counter
(below 2^32 - 1), keys that coincide; on anything else the Lua path runs.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from respqueue.types.list import List
from respqueue.types.zset import ZSet

from ..scripts import Bail, Ctx, cmd, native
from .helpers import (
    EXISTS,
    HEXISTS,
    HMGET,
    HSET,
    INCR,
    LLEN,
    LPUSH,
    RPUSH,
    SCORE_BAND,
    SCORE_COUNTED,
    ZADD,
    _check,
    _check_meta,
    _check_pc,
    _hset,
    _zadd_marker,
)

LREM = cmd("lrem")
ZREM = cmd("zrem")

_KEYS = ["wait", "paused", "meta", "prioritized", "active", "pc priority counter", "marker"]
#: before 5.9: no active key
_KEYS_6 = _KEYS[:4] + _KEYS[5:]
#: the counted score (5.8+) and 5.0-5.7's (bit.band's 32 bits: native for counters below 2**31 - 1)
#: the main code's calls: 5.8+ (the first read: getTargetQueueList / isQueuePausedOrMaxed), 5.0-5.7
_MAIN = ["EXISTS", "?", "ZREM", "reAddJobWithNewPriority", "LREM", "reAddJobWithNewPriority", "HSET"]
_MAIN_OLD = ["EXISTS", "isQueuePaused", "ZREM", "addJobWithPriority", "LREM", "addJobWithPriority", "HSET"]
_MAX_PRIORITY = 2**21  # BullMQ's limit; priority * 2**32 + counter stays an exact integer below 2**53
_PRIORITY = re.compile(rb"(0|[1-9][0-9]{0,6})\Z")
_NEEDS = {"main>reAddJobWithNewPriority", "addJobInTargetList>addBaseMarkerIfNeeded",
          "addJobWithPriority>addBaseMarkerIfNeeded"}


class PriorityVariant(NamedTuple):
    """How a release's text differs from 6.x's."""

    meta: tuple[bytes, ...] | None  # the fields HMGET reads from meta (None: HEXISTS meta paused, before 5.9)
    paused_target: bool  # 5.x: the paused list is the target when the queue is paused (6.x: always wait)
    job_key: bool  # before 5.13: ARGV[2] is the job key itself, not the prefix
    active: bool = True  # the active key is KEYS[5] (5.9+; before: 6 keys)
    old: bool = False  # 5.0-5.7: no LIFO; a prioritized job re-added counted whatever its new priority, a
    # waiting one only for a priority > 0
    band: bool = False  # 5.0-5.7: the score's counter taken with bit.band


V6 = PriorityVariant((b"paused", b"concurrency"), False, False)


def _accept(numkeys: int, lay: dict[str, Any]) -> Any:
    """The 7-key texts (npm 5.9+, PyPI 2.13+): 6.x's, and 5.x's (the paused list as the target; 5.60+ read
    meta's max and duration too, unused; 5.9-5.12 take the job key whole) as variants; the 6-key texts (npm
    5.0-5.8: no active key, ``HEXISTS meta paused``; 5.0-5.7 with their older re-add rules and bit.band's
    score), told apart by the main code's calls and the score expressions (``prio_scores``)."""
    if numkeys == 7 and lay.get("keys") == _KEYS:
        active = True
    elif numkeys == 6 and lay.get("keys") == _KEYS_6:
        active = False
    else:
        return None
    argv = lay.get("argv") or []
    if len(argv) != 4 or argv[0] != "priority value" or argv[2:] != ["job id", "lifo"]:
        return None
    if argv[1] not in ("prefix key", "job key"):
        return None
    if lay.get("hash_writes") != ["HSET|priority|?"] or lay.get("events"):
        return None
    calls = set(lay.get("calls", ()))
    main = lay.get("main")
    scores = lay.get("prio_scores")
    reads = lay.get("hash_reads")
    if main == _MAIN_OLD:
        if active or reads != ["HEXISTS|paused"] or scores != [SCORE_BAND] or argv[1] != "job key":
            return None
        if "main>addJobWithPriority" not in calls or 'markerKey|0|"0"' not in lay.get("zadds", ()):
            return None
        return PriorityVariant(None, True, True, False, True, True)
    if not _NEEDS <= calls or scores != ["priority * 0x100000000", SCORE_COUNTED]:
        return None
    if reads == ["HMGET|paused|concurrency"]:
        meta: tuple[bytes, ...] | None = V6.meta
    elif reads == ["HMGET|paused|concurrency|max|duration"]:
        meta = (b"paused", b"concurrency", b"max", b"duration")
    elif reads == ["HEXISTS|paused"] and not active:
        meta = None  # 5.8
    else:
        return None
    if (meta is None) == active:
        return None
    if "main>isQueuePausedOrMaxed" in calls:
        paused_target = False
        first = "isQueuePausedOrMaxed"
    elif "main>getTargetQueueList" in calls:
        paused_target = True
        first = "getTargetQueueList"
    else:
        return None
    if main != [first if c == "?" else c for c in _MAIN]:
        return None
    v = PriorityVariant(meta, paused_target, argv[1] == "job key", active)
    return True if v == V6 else v


def _is_hash(v: Any) -> bool:
    return type(v) is not bytes and getattr(v, "rtype", None) == b"hash"


@native("changePriority", _accept)
def change_priority(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: PriorityVariant = V6) -> Any:
    """KEYS: wait paused meta prioritized active pc marker; ARGV: priority, prefix, job id, lifo. 0, or -1
    for a missing job."""
    if len(argv) < 3:
        raise Bail("args")
    raw_prio, job_id = argv[0], argv[2]
    job_key = argv[1] if variant.job_key else argv[1] + job_id
    call = ctx.call
    db = ctx.db
    job = db.peek(job_key)
    if job is None:
        ctx.inline(EXISTS, [b"EXISTS", job_key])
        return -1
    # the checks (before the first call)
    if not _PRIORITY.match(raw_prio):
        raise Bail("priority")
    priority = int(raw_prio)
    if priority > _MAX_PRIORITY:
        raise Bail("priority")
    lifo = len(argv) > 3 and argv[3] == b"1"
    if variant.active:
        wait_key, paused_key, meta_key, prio_key, active_key, pc_key, marker_key = keys
    else:
        wait_key, paused_key, meta_key, prio_key, pc_key, marker_key = keys
        active_key = None
    if len(set(keys)) != len(keys) or job_key in keys:
        raise Bail("key clash")
    if not _is_hash(job):
        raise Bail("job key not a hash")
    meta = _check_meta(db, meta_key)  # (a concurrency tonumber might read otherwise: Lua)
    if active_key is not None:
        _check(db, active_key, List)
    _check(db, prio_key, ZSet)
    _check(db, marker_key, ZSet)
    _check(db, wait_key, List)
    if variant.paused_target:
        _check(db, paused_key, List)
    if variant.old or (priority and not lifo):
        _check_pc(db, pc_key, variant.band)
    # the script
    # EXISTS and HMGET meta: answered by the checks
    ctx.inline(EXISTS, [b"EXISTS", job_key])
    paused, conc = (None, None) if meta is None else (meta.get(b"paused"), meta.get(b"concurrency"))
    if variant.meta is None:  # before 5.9: HEXISTS meta paused (no concurrency limit)
        ctx.inline(HEXISTS, [b"HEXISTS", meta_key, b"paused"])
        conc = None
    else:
        ctx.inline(HMGET, [b"HMGET", meta_key, *variant.meta])
    if variant.old:
        target = paused_key if paused is not None else wait_key
        if call(ZREM, [b"ZREM", prio_key, job_id]) > 0 or (
                priority > 0 and call(LREM, [b"LREM", target, b"-1", job_id]) > 0):
            counter = call(INCR, [b"INCR", pc_key])
            call(ZADD, [b"ZADD", prio_key, b"%d" % (priority * 0x100000000 + counter), job_id])
            if paused is None:
                _zadd_marker(ctx, marker_key)
        _hset(ctx, HSET, [b"HSET", job_key, b"priority", raw_prio], db.data.get(job_key))
        return 0
    if paused is not None:
        paused_or_maxed = True
    elif conc is not None:
        paused_or_maxed = call(LLEN, [b"LLEN", active_key]) >= int(conc)  # type: ignore[list-item]
    else:
        paused_or_maxed = False
    target = paused_key if variant.paused_target and paused is not None else wait_key
    if call(ZREM, [b"ZREM", prio_key, job_id]) > 0 or call(LREM, [b"LREM", target, b"-1", job_id]) > 0:
        if priority == 0:
            call(RPUSH if lifo else LPUSH, [b"RPUSH" if lifo else b"LPUSH", target, job_id])
            if not paused_or_maxed:
                _zadd_marker(ctx, marker_key)
        elif lifo:
            call(ZADD, [b"ZADD", prio_key, b"%d" % (priority * 0x100000000), job_id])
        else:
            counter = call(INCR, [b"INCR", pc_key])
            call(ZADD, [b"ZADD", prio_key, b"%d" % (priority * 0x100000000 + counter % 0x100000000), job_id])
            if not paused_or_maxed:
                _zadd_marker(ctx, marker_key)
    _hset(ctx, HSET, [b"HSET", job_key, b"priority", raw_prio], db.data.get(job_key))
    return 0

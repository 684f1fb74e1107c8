"""Native addStandardJob, and the implementation addPrioritizedJob and addDelayedJob share (their variants)."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from respqueue.coldhash import pack_now
from respqueue.commands.streams import append_star, node_limits, xadd_auto_id
from respqueue.events import STREAM_ADDED
from respqueue.keyspace import Database
from respqueue.numbers import str2int
from respqueue.persistence.codec import COMPACT_MAX_BYTES
from respqueue.types import hash as hash_mod
from respqueue.types.hash import MAX_LISTPACK_VALUE as _LP_VALUE
from respqueue.types.hash import ColdHash, Hash, shape_no
from respqueue.types.list import List
from respqueue.types.stream import MAX_ID, Stream
from respqueue.types.zset import ZSet

from ..history import on_stream_added
from ..scripts import Bail, Ctx, bulk, native, native_ran
from .helpers import (
    _EXACT,
    _INT_RE,
    _MAX_COUNTER,
    _META4,
    EXISTS,
    HEXISTS,
    HGET,
    HMGET,
    HMSET,
    INCR,
    LLEN,
    LPUSH,
    RPUSH,
    XADD,
    ZADD,
    ZREVRANGEBYSCORE,
    _add_delay_marker,
    _arg,
    _check,
    _check_meta,
    _check_pc,
    _check_stream,
    _get_or_set_max_events,
    _num,
    _opts_with_json,
    _paused_or_maxed_attrs,
    _truthy,
    _unpack,
    _writes_events,
    _xadd_star,
    _zadd_marker,
    _zadd_prioritized,
)

_log = logging.getLogger("respqueue.native")

# ---- addStandardJob -----------------------------------------------------------------
_ADD_ARGV = ["msgpacked arguments array", "json stringified job data", "msgpacked options"]
_ADD_KEY_ROLES = {"wait": "wait", "paused": "paused", "meta": "meta", "id": "id", "completed": "completed",
                  "delayed": "delayed", "active": "active", "events stream key": "events", "marker key": "marker"}
_ADD_OPTS = frozenset({"de", "delay", "lifo", "maxLenEvents", "priority"})
_ADD_EVENTS = ("event|added|jobId|?|name|?", "event|waiting|jobId|?")


class AddVariant(NamedTuple):
    """How one release's addStandardJob differs from 6.x's (its key positions and semantics)."""

    wait: int
    paused: int
    meta: int
    id: int
    active: int | None  # None: the release ignores the concurrency limit (5.0-5.8: HEXISTS meta paused)
    events: int
    marker: int
    numkeys: int
    rjk: int  # index of the repeat job key in the args array; the parent fields sit between 4 and it
    paused_list: bool  # 5.x: a paused queue's jobs go to the paused list (6.x: to wait)
    marker_first: bool  # 5.0.0: ZADD marker before the push
    meta_fields: tuple[bytes, ...] = (b"paused", b"concurrency")  # the HMGET of meta (5.60+: 4 fields)
    prio: int | None = None  # addPrioritizedJob: the prioritized zset's and the priority counter's positions
    pc: int | None = None
    delayed: int | None = None  # addDelayedJob: the delayed zset's position
    old_delay: bool = False  # addDelayedJob before 5.8: score (ts + delay) * 4096 + (id counter & 0xfff), the
    # marker only when the queue is not paused (HEXISTS meta paused)
    delay_marker: bytes = b"1"  # the marker's member for the next delayed timestamp (5.0.0: "0")
    pc_band: bool = False  # addPrioritizedJob 5.0-5.7: bit.band's 32-bit priority counter (helpers.SCORE_BAND)


ADD_V6 = AddVariant(0, 1, 2, 3, 6, 7, 8, 9, 7, False, False)
_MAX_DELAYED_TS = 2**53 // 0x1000 - 1  # (ts + 1) * 4096 - 1 stays an exact integer
_MAX_PRIORITY = 2**21  # BullMQ's limit; priority * 2**32 + counter stays an exact integer below 2**53


ID_FIELD = "2 custom id will not generate one automatically"  # ARGV[1]'s second field, as documented


def add_layout(
    numkeys: int, lay: dict[str, Any], roles: dict[str, str], need: set[str], id_field: str = ID_FIELD
) -> tuple[dict[str, int], int, set[str]] | None:
    """What the add scripts' native paths share of a release's layout (compat/script_table.py): the
    documented ARGV and msgpacked options, every key a known role (``roles``: documented name -> role, with
    every role of ``need``), ARGV[1]'s first fields (the second documented as ``id_field``) and the repeat job
    key's slot. Returns (role -> key
    index, repeat job key's field index, the script's calls), or None when the layout is another."""
    if lay.get("argv") != _ADD_ARGV or not set(lay.get("unpacked", {}).get("ARGV3", ())) <= _ADD_OPTS:
        return None
    names = lay.get("keys", [])
    if len(names) != numkeys or any(n not in roles for n in names):
        return None
    pos = {roles[n]: i for i, n in enumerate(names)}
    if not need <= set(pos):
        return None
    fields = lay.get("argv_fields", {}).get("ARGV1", [])
    rjk = [i for i, f in enumerate(fields) if f.endswith("repeat job key")]
    if fields[:4] != ["1 key prefix", id_field, "3 name", "4 timestamp"] or len(rjk) != 1 or rjk[0] not in (7, 8):
        return None
    return pos, rjk[0], set(lay.get("calls", ()))


def _accept_add(numkeys: int, lay: dict[str, Any]) -> Any:
    """addStandardJob's native path for a release whose documented keys/args and msgpack fields it knows."""
    got = add_layout(numkeys, lay, _ADD_KEY_ROLES, {"wait", "paused", "meta", "id", "events", "marker"})
    if got is None:
        return None
    pos, rjk, calls = got
    if not _writes_events(lay, _ADD_EVENTS):
        return None
    paused_list = "main>getTargetQueueList" in calls
    if not paused_list and "main>isQueuePausedOrMaxed" not in calls:
        return None
    # 5.60+'s getTargetQueueList reads meta's rate-limit fields too (the only 4-field HMGET of meta there)
    meta4 = paused_list and "HMGET|paused|concurrency|max|duration" in lay.get("hash_reads", ())
    v = AddVariant(pos["wait"], pos["paused"], pos["meta"], pos["id"], pos.get("active"), pos["events"],
                   pos["marker"], numkeys, rjk, paused_list, "main>addJobInTargetList" not in calls,
                   _META4 if meta4 else ADD_V6.meta_fields)
    return True if v == ADD_V6 else v


def _delayed_when(ts: Any, delay: Any, undelayed: int | None) -> int:
    """The delayed timestamp, ``ts + delay`` (``undelayed`` when the delay is 0; None: ``ts``), from
    integral values; Bail unless exact."""
    ts = int(ts) if type(ts) is float and ts.is_integer() else ts
    delay = int(delay) if type(delay) is float and delay.is_integer() else delay
    if type(ts) is bytes:
        ts = str2int(ts) if _INT_RE.match(ts) else None
    if type(ts) is not int or type(delay) is not int or delay < 0:
        raise Bail("delayed timestamp")
    when = ts + delay if delay > 0 else (ts if undelayed is None else undelayed)
    if not 0 <= when <= _MAX_DELAYED_TS:
        raise Bail("delayed timestamp")
    return when


def _delayed_score(db: Database, delayed_key: bytes, ts: Any, delay: Any) -> tuple[int, int]:
    """getDelayedScore, read before any write: (the job's score, its delayed timestamp); Bail unless exact."""
    when = _delayed_when(ts, delay, None)
    lo, hi = when * 0x1000, (when + 1) * 0x1000 - 1
    z = _check(db, delayed_key, ZSet)
    if z is not None and len(z):
        first = next(z.items())[0]
        if not (first.is_integer() and 0 <= first < _EXACT):
            raise Bail("delayed score")  # the marker's next timestamp is computed from it
        a, b = z.score_span(float(lo), False, float(hi), False)
        if b > a:
            cur = z.entries(b - 1, b)[0][0]
            if not cur.is_integer():
                raise Bail("delayed score")
            return (hi if cur >= hi else int(cur) + 1), when
    return lo, when


def _old_delayed_score(db: Database, delayed_key: bytes, ts: Any, delay: Any, counter: int) -> tuple[int, int]:
    """addDelayedJob's score before 5.8 (no same-millisecond slot search): (score, delayed timestamp, 0
    without a delay); Bail unless exact."""
    when = _delayed_when(ts, delay, 0)
    _check(db, delayed_key, ZSet)
    return when * 0x1000 + (counter & 0xFFF), when


def _job_args(ctx: Ctx, v: AddVariant, argv: list[bytes], parent: tuple[int, ...] | None = None) -> tuple[Any, ...]:
    """addStandardJob's ARGV (args, data, opts) as (prefix, custom id, name, timestamp as given, timestamp
    as the job's field, repeat job key or None, opts, opts as JSON); Bail for what the native path leaves
    to Lua (a parent, odd types). ``parent``: the args array's parent fields, when not those between the
    timestamp and the repeat job key (addParentJob's)."""
    if len(argv) < 3:
        raise Bail("args")
    a = _unpack(argv[0])
    if type(a) is not list:
        raise Bail("args")
    if len(a) < 10:
        a = a + [None] * (10 - len(a))
    prefix, custom_id, name, timestamp = a[0], a[1], a[2], a[3]
    if parent is not None:
        if any(a[i] is not None for i in parent):
            raise Bail("parent")
    elif v is ADD_V6:
        if a[4] is not None or a[5] is not None:
            raise Bail("parent")  # parentKey / parent dependencies key
    elif a[4 : v.rjk].count(None) != v.rjk - 4:  # (5.x: 3 or 4 parent fields; a C count, not a generator)
        raise Bail("parent")
    if type(prefix) is not bytes or type(custom_id) is not bytes or type(name) is not bytes:
        raise Bail("args types")
    ts = timestamp if type(timestamp) is bytes else _num(timestamp)
    rjk = a[v.rjk]
    if _truthy(rjk):
        rjk = _arg(rjk)
    elif rjk is False and v is not ADD_V6:
        raise Bail("repeat job key false")  # older storeJob tests "~= nil"
    else:
        rjk = None
    opts, opts_json = _opts_with_json(ctx, argv[2])
    return prefix, custom_id, name, timestamp, ts, rjk, opts, opts_json


def _next_counter(db: Database, id_key: bytes) -> int:
    """What the script's INCR of the id counter will return; Bail near Lua's number limit."""
    cur = _check(db, id_key, bytes)
    if cur is None:
        return 1
    n = str2int(cur)
    if n is None or n >= _MAX_COUNTER:
        raise Bail("id counter")
    return n + 1


def job_checks(db: Database, keys: list[bytes], id_key: bytes, meta_key: bytes, events_key: bytes, prefix: bytes,
               custom_id: bytes) -> tuple[bytes, bytes, bytes | None]:
    """What the add scripts check before their first write (the id counter, meta, the job's key, the events
    stream); returns (job id, job key, meta's opts.maxLenEvents or None). Bail: a duplicated custom id, a
    counter near Lua's number limit, wrong key types."""
    counter = _next_counter(db, id_key)
    meta = _check_meta(db, meta_key)
    max_events = None if meta is None else meta.get(b"opts.maxLenEvents")
    if max_events is not None:
        m = str2int(max_events)
        if m is None or m < 0:
            raise Bail("maxLenEvents")
    job_id = custom_id if custom_id else b"%d" % counter
    job_key = prefix + job_id
    if job_key in keys:
        raise Bail("key clash")
    job = db.lookup(job_key)
    if job is not None:
        if custom_id:
            raise Bail("duplicated job")
        if not isinstance(job, Hash):
            raise Bail("job key type")
    _check_stream(db, events_key)
    return job_id, job_key, max_events


def store_job(ctx: Ctx, id_key: bytes, meta_key: bytes, events_key: bytes, job_id: bytes, custom_id: bytes,
              max_events: bytes | None, hm: list[bytes]) -> bytes:
    """The add scripts' first calls, after :func:`job_checks`: INCR id, getOrSetMaxEvents, EXISTS of a custom
    id's job key, storeJob (``hm``: its HMSET, the added event). Returns maxLenEvents."""
    call = ctx.call
    done = ctx.done
    db = ctx.db
    data = db.data
    if done is None:
        call(INCR, [b"INCR", id_key])
    else:
        # INCR id, inline: job_checks found it absent or a counter below the limit (its TTL, if any, stays)
        cur = data.get(id_key)
        ctx.wrote = True
        data[id_key] = b"1" if cur is None else b"%d" % (str2int(cur) + 1)  # type: ignore[operator]
        db.modified(id_key, cur is None)
        done.append(INCR)
    # HGET meta opts.maxLenEvents: read by job_checks (meta is a hash or absent, and INCR wrote another key)
    max_events = _get_or_set_max_events(ctx, meta_key, max_events)
    if custom_id:
        call(EXISTS, [b"EXISTS", hm[1]])
    if done is None or hm[1] in data:
        call(HMSET, hm)
    else:
        # HMSET of a new job hash, inline (Hash.set_pairs' work: the encoding follows the values' sizes)
        h = Hash()
        h.set_pairs(hm, 2)
        ctx.wrote = True
        data[hm[1]] = h
        # held packed from the start: a job waits before it is read again (a worker's moveToActive thaws it
        # then), and the live hash's objects freed a second later would leave the allocator's pools full of
        # holes between the keys and ids a backlog keeps (RSS per waiting job after a 200,000-job addBulk in
        # memory mode: 551 -> 318 bytes); packed once either way, without the compactor's bookkeeping
        pack_now(db, hm[1], h)
        db.modified(hm[1], True)
        done.append(HMSET)
    _xadd_star(ctx, [b"XADD", events_key, b"*", b"event", b"added", b"jobId", job_id, b"name", hm[3]])
    return max_events


@native("addStandardJob", _accept_add)
def add_standard_job(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: AddVariant = ADD_V6) -> Any:
    """KEYS (6.x): wait paused meta id completed delayed active events marker; ARGV: args, data, opts.

    Other releases' key positions and paused/concurrency semantics come in ``variant``."""
    v = variant
    if len(set(keys)) != v.numkeys:
        raise Bail("args")
    prefix, custom_id, name, timestamp, ts, rjk, opts, opts_json = _job_args(ctx, v, argv)
    if _truthy(opts.get(b"de")):
        raise Bail("deduplication")
    delay = opts.get(b"delay")
    delay = b"0" if not _truthy(delay) else _arg(delay)
    prio = opts.get(b"priority")
    priority = b"0" if not _truthy(prio) else _arg(prio)
    push = RPUSH if _truthy(opts.get(b"lifo")) else LPUSH
    if v.prio is not None:
        if type(prio) is float and prio.is_integer():
            prio = int(prio)
        if type(prio) is not int or not 0 < prio <= _MAX_PRIORITY:
            raise Bail("priority")
    wait_key = keys[v.wait] if v.wait >= 0 else b""

    meta_key, id_key, events_key, marker_key = keys[v.meta], keys[v.id], keys[v.events], keys[v.marker]
    active_key = None if v.active is None else keys[v.active]
    db = ctx.db
    # ---- checks: nothing below may fail or branch differently once writing starts
    job_id, job_key, max_events = job_checks(db, keys, id_key, meta_key, events_key, prefix, custom_id)
    if v.old_delay:
        dscore, dwhen = _old_delayed_score(db, keys[v.delayed], timestamp, opts.get(b"delay") or 0,
                                           _next_counter(db, id_key))
        _check(db, marker_key, ZSet)
    elif v.delayed is not None:
        dscore, dwhen = _delayed_score(db, keys[v.delayed], timestamp, opts.get(b"delay") or 0)
        _check(db, marker_key, ZSet)
    elif v.prio is not None:
        _check(db, keys[v.prio], ZSet)
        _check_pc(db, keys[v.pc], v.pc_band)
    else:
        _check(db, wait_key, List)
    if active_key is not None:
        _check(db, active_key, List)
    _check(db, marker_key, ZSet)
    if v.paused_list:
        _check(db, keys[v.paused], List)

    # ---- the script's calls
    call = ctx.call
    hm = [b"HMSET", job_key, b"name", name, b"data", argv[1], b"opts", opts_json,
          b"timestamp", ts, b"delay", delay, b"priority", priority]
    if rjk is not None:
        hm += [b"rjk", rjk]
    max_events = store_job(ctx, id_key, meta_key, events_key, job_id, custom_id, max_events, hm)
    if v.old_delay:
        delayed_key = keys[v.delayed]
        call(ZADD, [b"ZADD", delayed_key, b"%d" % dscore, job_id])
        _xadd_star(ctx, [b"XADD", events_key, b"MAXLEN", b"~", max_events, b"*", b"event", b"delayed", b"jobId", job_id,
                         b"delay", b"%d" % dwhen])
        if call(HEXISTS, [b"HEXISTS", meta_key, b"paused"]) != 1:
            _add_delay_marker(ctx, marker_key, delayed_key, v.delay_marker)
        return job_id
    if v.delayed is not None:
        # addDelayedJob: getDelayedScore (computed above; nothing wrote the delayed zset since), ZADD, the
        # delayed event, and the marker at the next delayed timestamp
        delayed_key = keys[v.delayed]
        lo = dwhen * 0x1000
        call(ZREVRANGEBYSCORE, [b"ZREVRANGEBYSCORE", delayed_key, b"%d" % (lo + 0xFFF), b"%d" % lo, b"WITHSCORES",
                                b"LIMIT", b"0", b"1"])
        call(ZADD, [b"ZADD", delayed_key, b"%d" % dscore, job_id])
        _xadd_star(ctx, [b"XADD", events_key, b"MAXLEN", b"~", max_events, b"*", b"event", b"delayed", b"jobId", job_id,
                         b"delay", b"%d" % dwhen])
        _add_delay_marker(ctx, marker_key, delayed_key, v.delay_marker)
        return job_id
    meta = db.lookup(meta_key)
    if active_key is None:
        # getTargetQueueList (5.0-5.8): HEXISTS meta paused (meta: a hash or absent, checked above)
        ctx.inline(HEXISTS, [b"HEXISTS", meta_key, b"paused"])
        limit = None if meta is None or meta.get(b"paused") is None else -1
    else:
        # HMGET meta paused concurrency, inline (meta: a hash or absent; the HSET above may have made it)
        ctx.inline(HMGET, [b"HMGET", meta_key, *v.meta_fields])
        limit = None if meta is None else _paused_or_maxed_attrs(meta.get(b"paused"), meta.get(b"concurrency"))
    if limit is None:
        paused_or_maxed = False
    elif limit < 0:
        paused_or_maxed = True
        if v.paused_list:
            wait_key = keys[v.paused]  # 5.x: a paused queue's new jobs go to its paused list
    else:
        paused_or_maxed = call(LLEN, [b"LLEN", active_key]) >= limit
    if v.prio is not None:
        # addJobWithPriority: score = priority * 2**32 + INCR(pc) mod 2**32
        _zadd_prioritized(ctx, keys[v.prio], keys[v.pc], prio, job_id)
    elif v.marker_first and not paused_or_maxed:
        _zadd_marker(ctx, marker_key)
    if v.prio is None:
        lst = db.data.get(wait_key)
        if ctx.done is None or lst is None:
            call(push, [push.name.upper().encode(), wait_key, job_id])
        else:
            # LPUSH (RPUSH for LIFO) of one id, inline: the list checked above (nothing changed its type since)
            ctx.wrote = True
            lst.push_one(job_id, push is LPUSH)
            db.modified(wait_key)
            ctx.done.append(push)
    if not paused_or_maxed and not v.marker_first:
        _zadd_marker(ctx, marker_key)
    _xadd_star(ctx, [b"XADD", events_key, b"MAXLEN", b"~", max_events, b"*", b"event", b"waiting", b"jobId", job_id])
    return job_id


# a new job hash's fields as the add scripts' storeJob writes them (rjk: a repeatable job's key)
_JOB_FIELDS = (b"name", b"data", b"opts", b"timestamp", b"delay", b"priority", b"rjk")


def _live_job_hash(ht: bool, values: Any) -> Hash:
    """A new job's hash as a plain :class:`Hash` (``values`` in ``_JOB_FIELDS``' order, rjk when 7)."""
    h = Hash()
    h.d.update(zip(_JOB_FIELDS, values, strict=False))
    h.ht = ht
    return h


# ---- addBulk: a run of addStandardJob EVALSHAs for one queue -------------------------------
_EVENTS_HEADROOM = 1 << 20  # stream IDs a run may use up (the single path checks MAX_ID - 8 per script)


def _zero(v: Any) -> bool:
    """A delay / priority option that storeJob writes as "0" (absent, false, or the number 0: BullMQ's Python
    client sends ``delay: 0`` with every job; in Lua a 0 is true, but ``opts['delay'] or 0`` is 0 either way)."""
    return v is None or v is False or ((type(v) is int or type(v) is float) and v == 0)


class AddRun:
    """addStandardJob's run form (compat/scripts.py ``bulk``; a pipeline of EVALSHAs, as BullMQ's addBulk
    sends): what :func:`add_standard_job` checks about the queue's keys (types, the id counter, meta's
    paused/concurrency/maxLenEvents, the events stream, the concurrency's LLEN), once for the run, then
    per request only the job's own checks and the script's writes, made directly on the containers, in
    the script's order, with the same keyspace hooks (``Database.modified``, the stream_added event) and
    the same commands counted (with ``Ctx.done``). Nothing but the run's own requests runs while the run
    lasts (a blocked client served in between closes it), so what was checked stays true; a request that is
    not a plain job (a parent, deduplication, a delay or priority, LIFO, an existing job id, an id counter
    about to overflow) raises Bail before writing and runs as a single script."""

    __slots__ = ("keys", "v", "db", "data", "id_key", "counter", "wait_key", "wait", "events_key", "marker_key",
                 "max_events", "paused_or_maxed", "per_job", "xadd_added", "xadd_waiting", "marker_ok", "stream", "maxlen",
                 "limits", "opts_ok", "debug", "stats", "shape", "shape_rjk")

    def __init__(self, ctx: Ctx, keys: list[bytes], v: AddVariant) -> None:
        if len(keys) != v.numkeys or len(set(keys)) != v.numkeys:
            raise Bail("args")
        db = ctx.db
        self.keys = keys
        self.v = v
        self.db = db
        self.data = db.data
        if db.expires and any(k in db.expires for k in keys):
            raise Bail("a queue key with a TTL")
        id_key, meta_key, events_key, marker_key = keys[v.id], keys[v.meta], keys[v.events], keys[v.marker]
        cur = _check(db, id_key, bytes)
        n = 0 if cur is None else str2int(cur)
        if n is None or n >= _MAX_COUNTER:
            raise Bail("id counter")
        meta = _check_meta(db, meta_key)
        max_events = None if meta is None else meta.get(b"opts.maxLenEvents")
        if max_events is None:
            raise Bail("no maxLenEvents in meta yet")  # the first job of a queue sets it: a single script
        m = str2int(max_events)
        if m is None or m < 0 or b"%d" % m != max_events or m >= 10**17:
            raise Bail("maxLenEvents")  # (a plain count, as XADD's fast path takes it)
        s = _check(db, events_key, Stream)
        if s is not None and s.last_id >= MAX_ID - _EVENTS_HEADROOM:
            raise Bail("stream ids")
        wait_key = keys[v.wait]
        per_job = [INCR, HGET, HMSET, XADD]
        if v.active is None:
            per_job.append(HEXISTS)
            limit = None if meta.get(b"paused") is None else -1
        else:
            per_job.append(HMGET)
            limit = _paused_or_maxed_attrs(meta.get(b"paused"), meta.get(b"concurrency"))
        if limit is None:
            paused_or_maxed = False
        elif limit < 0:
            paused_or_maxed = True
            if v.paused_list:
                wait_key = keys[v.paused]
        else:
            active = _check(db, keys[v.active], List)  # type: ignore[index]
            paused_or_maxed = (0 if active is None else len(active)) >= limit
            per_job.append(LLEN)
        wait = _check(db, wait_key, List)
        _check(db, marker_key, ZSet)
        if v.paused_list:
            _check(db, keys[v.paused], List)
        if v.active is not None:
            _check(db, keys[v.active], List)
        per_job.append(LPUSH)
        if not paused_or_maxed:
            per_job.append(ZADD)
        per_job.append(XADD)
        self.stream = s
        self.maxlen = m
        self.limits = node_limits(ctx.sc)
        self.opts_ok: Any = None  # the last options dict (a cached one, _opts_with_json) found plain
        self.debug = _log.isEnabledFor(logging.DEBUG)
        self.stats: list[int] | None = None
        # the shape numbers of a new job's hash (None: kept a Hash, with compaction off or no shape to be had)
        pack = hash_mod.COLD is not None
        self.shape = shape_no(_JOB_FIELDS[:6]) if pack else None
        self.shape_rjk = shape_no(_JOB_FIELDS) if pack else None
        self.id_key = id_key
        self.counter = n
        self.wait_key = wait_key
        self.wait = wait
        self.events_key = events_key
        self.marker_key = marker_key
        self.max_events = max_events
        self.paused_or_maxed = paused_or_maxed
        self.per_job = per_job
        self.marker_ok = False
        # the two XADDs' argv (the job's id and name go in per job)
        self.xadd_added = [b"XADD", events_key, b"*", b"event", b"added", b"jobId", b"", b"name", b""]
        self.xadd_waiting = [b"XADD", events_key, b"MAXLEN", b"~", max_events, b"*", b"event", b"waiting",
                             b"jobId", b""]

    def fits(self, keys: list[bytes]) -> bool:
        """Whether a request's ``keys`` are the run's."""
        return keys == self.keys

    def add(self, ctx: Ctx, keys: list[bytes], argv: list[bytes]) -> bytes:
        """One addStandardJob (``argv``: its ARGV; ``keys``: the run's) of the run; Bail (before writing) for a
        single script."""
        v = self.v
        prefix, custom_id, name, timestamp, ts, rjk, opts, opts_json = _job_args(ctx, v, argv)
        if opts is not self.opts_ok:
            g = opts.get
            if _truthy(g(b"de")) or _truthy(g(b"lifo")) or not _zero(g(b"delay")) or not _zero(g(b"priority")):
                raise Bail("options")  # (the single path knows them)
            self.opts_ok = opts  # (the same raw options give the same dict: the next job skips the test)
        counter = self.counter + 1
        if counter > _MAX_COUNTER:
            raise Bail("id counter")  # (a transaction's run has no length limit)
        job_id = custom_id if custom_id else b"%d" % counter
        job_key = prefix + job_id
        data = self.data
        if job_key in self.keys or data.get(job_key) is not None:
            raise Bail("existing job")  # (a duplicate: the Lua path answers it)
        # ---- the script's writes, in its order
        db = self.db
        done = ctx.done
        per_job = self.per_job
        self.counter = counter
        # INCR id (no TTL, an integer below the counter limit: checked at the run's start)
        id_key = self.id_key
        created = id_key not in data
        data[id_key] = b"%d" % counter
        db.modified(id_key, created)
        if custom_id:
            per_job = [*per_job[:3], EXISTS, *per_job[3:]]
        # HMSET job: a new hash, its fields in the script's order (Hash.set_pairs' work on a new hash: its
        # encoding a hashtable once a value is longer than a listpack's; the field names are short)
        body = argv[1]
        ht = (len(body) > _LP_VALUE or len(opts_json) > _LP_VALUE or len(name) > _LP_VALUE
              or len(ts) > _LP_VALUE)
        # the new job's hash held packed from the start (store_job's pack_now, without the Hash: its rules)
        if rjk is None:
            no = self.shape
            values: Any = (name, body, opts_json, ts, b"0", b"0")
        else:
            ht = ht or len(rjk) > _LP_VALUE
            no = self.shape_rjk
            values = (name, body, opts_json, ts, b"0", b"0", rjk)
        v_: Any
        if no is not None:
            v_ = ColdHash.shaped([ht, no], values)
            if ht and len(v_) > COMPACT_MAX_BYTES:
                v_ = _live_job_hash(ht, values)  # (pack_now's exception: a row per field in the store)
        else:  # (compaction off: the Hash, as HMSET makes it)
            v_ = _live_job_hash(ht, values)
        data[job_key] = v_  # (Database.add: the key is absent, checked above)
        db.modified(job_key, True)
        x = self.xadd_added.copy()
        x[6] = job_id
        x[8] = name
        sc = ctx.sc
        events = self.stream
        events_key = self.events_key
        limits = self.limits
        # the stream_added subscribers: the history capture's hook called straight (its common case)
        hist = None
        if STREAM_ADDED:
            if len(STREAM_ADDED) == 1 and STREAM_ADDED[0] is on_stream_added:
                if events_key.endswith(b":events"):
                    hist = sc.server.history
                    if hist is not None:
                        hist = hist.on_event
                hooks = None
            else:
                hooks = STREAM_ADDED
        else:
            hooks = None
        if events is None:
            xadd_auto_id(sc, x)  # (makes the stream)
            events = self.stream = data[events_key]
        else:
            # XADD * inline (commands/streams.xadd_auto_id's work): the entry at the next auto ID, the keyspace's hooks
            new = append_star(events, x[3:], limits)
            db.modified(events_key)
            if hist is not None:
                hist(sc, events_key, new >> 64, x, 3)
            elif hooks:
                for fn in hooks:
                    fn(sc, events_key, new, x, 3)
        if v.marker_first and not self.paused_or_maxed:
            self._marker(ctx)
        wait = self.wait
        if wait is None:
            ctx.sc.db = db
            LPUSH.proc(ctx.sc, [b"LPUSH", self.wait_key, job_id])
            self.wait = self.data.get(self.wait_key)
        else:
            wait.push_one(job_id, True)  # (LPUSH of one value: push_left's work without its lists)
            db.modified(self.wait_key)
        if not self.paused_or_maxed and not v.marker_first:
            self._marker(ctx)
        x = self.xadd_waiting.copy()
        x[9] = job_id
        new = append_star(events, x[6:], limits)
        events.trim(self.maxlen, None, True, limits[2])
        db.modified(events_key)
        if hist is not None:
            hist(sc, events_key, new >> 64, x, 6)
        elif hooks:
            for fn in hooks:
                fn(sc, events_key, new, x, 6)
        if done is not None:
            done.extend(per_job)
        else:
            for c in per_job:  # a MONITOR client: not in a run (dispatch.run_allowed)
                ctx.inline(c, [c.name.encode()])
        st = self.stats
        if st is None:
            st = self.stats = native_ran("addStandardJob")
        st[0] += 1
        if self.debug:
            _log.debug("native addStandardJob: ran in a run")
        return job_id

    def _marker(self, ctx: Ctx) -> None:
        """``ZADD marker 0 0`` (nothing to do once the marker holds ``0`` at 0: the run's later jobs)."""
        if self.marker_ok:
            return
        marker = self.data.get(self.marker_key)
        if type(marker) is ZSet and marker.score(b"0") == 0.0:
            self.marker_ok = True
            return
        ctx.sc.db = self.db
        ZADD.proc(ctx.sc, [b"ZADD", self.marker_key, b"0", b"0"])


@bulk("addStandardJob")
def open_add_run(ctx: Ctx, keys: list[bytes], variant: Any) -> AddRun:
    """addStandardJob's run form for the queue of ``keys`` (Bail: not for these keys)."""
    return AddRun(ctx, keys, ADD_V6 if variant is True else variant)

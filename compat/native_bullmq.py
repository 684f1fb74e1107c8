"""Native implementations of BullMQ's hottest scripts (see compat/scripts.py).

Each function mirrors the common path of one script: it issues the same
redis.call()s, in the same order, with the same arguments (Lua numbers
formatted as Redis formats them), through the same command procedures, and
returns the reply the Lua script would. Before its first write it checks
everything that could make a later call fail or make the script take another
branch (key types, counters, options it does not implement); on anything
unusual it raises :class:`Bail` and the Lua script runs instead.

Which releases' digests each serves is decided from the argument layout recorded in
compat/script_table.py (see each ``_accept_*``); the Lua path serves the rest.

Implemented:

* addStandardJob (npm 5.0-6.x, PyPI 2.x-3.x: 5.x's 7/8/9-key layouts, paused list
  and meta reads, 5.0.0's marker-before-push, as variants): plain jobs, custom ids that
  do not exist yet, LIFO/FIFO, repeat job key. Lua: parent/child jobs,
  deduplication, duplicated ids.
* addPrioritizedJob (npm 5.9+, 6.x; PyPI 2.13+, 3.x): addStandardJob's path with the job
  going to the prioritized zset (INCR pc, ZADD with priority * 2^32 + counter); integral
  priorities up to 2^21 and a counter below 2^32-1 (Lua otherwise).
* addDelayedJob (npm 5.34+, 6.x; PyPI 2.13+, 3.x): addStandardJob's path with the job
  going to the delayed zset (getDelayedScore's same-millisecond slot, the delayed event,
  the marker at the next delayed timestamp); integral timestamps and delays (Lua otherwise).
* moveToActive (npm 5.28+, 6.x; PyPI 2.13+, 3.x): wait -> active and prioritized -> active, paused/maxed queues,
  the next-delayed timestamp. Lua: rate limiting, delayed jobs due for promotion,
  legacy ``0:`` markers in wait.
* moveToFinished (npm 5.52+, 6.x; PyPI 2.15+, 3.x): completed/failed, keepJobs count -1/0/absent, with or without
  fetching the next job (same cases as moveToActive), drained event, the -1/-2/-4/
  -6/-9 codes. Lua: jobs with a parent or deduplication id, removeOnComplete/Fail
  counts > 0 or ages, metrics, fields to update, a job missing from active (-3).
"""

from __future__ import annotations

import re
from itertools import chain
from typing import Any, NamedTuple

import msgpack
from hiredis import pack_command

from lua.convert import format_number_arg, truncate
from respqueue.commands.registry import Command
from respqueue.commands.streams import xadd_auto_id, xadd_auto_id_trimmed, xtrim_approx
from respqueue.keyspace import mstime
from respqueue.numbers import str2int
from respqueue.resp import Encoded, RedisError
from respqueue.types.hash import Hash
from respqueue.types.list import List
from respqueue.types.stream import MAX_ID, Stream
from respqueue.types.zset import ZSet

from .scripts import Bail, Ctx, cmd, native

INCR = cmd("incr")
HGET = cmd("hget")
HSET = cmd("hset")
HMSET = cmd("hmset")
HMGET = cmd("hmget")
HGETALL = cmd("hgetall")
HINCRBY = cmd("hincrby")
EXISTS = cmd("exists")
HEXISTS = cmd("hexists")
XADD = cmd("xadd")
LLEN = cmd("llen")
LPUSH = cmd("lpush")
RPUSH = cmd("rpush")
RPOPLPUSH = cmd("rpoplpush")
ZADD = cmd("zadd")
ZPOPMIN = cmd("zpopmin")
ZRANGE = cmd("zrange")
ZRANGEBYSCORE = cmd("zrangebyscore")
ZREVRANGEBYSCORE = cmd("zrevrangebyscore")
SET = cmd("set")
DEL = cmd("del")

_INT_RE = re.compile(rb"-?[0-9]{1,15}\Z")
_NUM_RE = re.compile(rb"-?[0-9]{1,16}(\.[0-9]{1,6})?\Z")
_EXACT = 2**53
_MAX_COUNTER = 10**14 - 1  # Lua 5.1 prints numbers up to here without an exponent ("jobCounter .. ''")
_INT64_MAX = 2**63 - 1


def _truthy(v: Any) -> bool:
    return v is not None and v is not False


def _num(v: Any) -> bytes:
    """A Lua number (from msgpack) as a redis.call argument; Bail if not exactly representable."""
    t = type(v)
    if t is int:
        if -_EXACT < v < _EXACT:
            return b"%d" % v
        raise Bail("number out of range")
    if t is float:
        if v != v or not -_EXACT < v < _EXACT:
            raise Bail("number out of range")
        if v.is_integer():
            return b"%d" % int(v)  # as the bridge sees it: lupa hands integral numbers over as int (-0.0 -> "0")
        return format_number_arg(v)
    raise Bail("not a number")


def _arg(v: Any) -> bytes:
    """A Lua string or number as a redis.call argument."""
    if type(v) is bytes:
        return v
    return _num(v)


def _unpack(raw: bytes) -> Any:
    try:
        return msgpack.unpackb(raw, raw=True, strict_map_key=False, ext_hook=_no_ext)
    except Exception:
        raise Bail("msgpack") from None


def _no_ext(code: int, data: bytes) -> Any:
    raise ValueError("ext")


# raw msgpack opts -> (decoded dict, cjson.encode of the Lua table cmsgpack.unpack builds)
_OPTS: dict[bytes, tuple[dict[Any, Any], bytes]] = {}


def _opts_with_json(ctx: Ctx, raw: bytes) -> tuple[dict[Any, Any], bytes]:
    """Decode the options and encode them as the Lua path does (cjson.encode(cmsgpack.unpack(raw))).

    The JSON comes from the runtime's own cmsgpack/cjson on a real Lua table, so
    key order is Lua's table order; it is cached per distinct raw value."""
    e = _OPTS.get(raw)
    if e is not None:
        return e
    opts = _unpack(raw)
    if type(opts) is not dict:
        raise Bail("opts")
    from lua import cjson, cmsgpack

    libs = ctx.server.scripting.libs
    res = cmsgpack.unpack(libs, (raw,))
    if type(res) is not tuple or res[0] is not True or len(res[1]) != 1:
        raise Bail("opts unpack")
    enc = cjson.encode(libs, (res[1][0],))
    if type(enc) is not bytes:
        raise Bail("opts encode")
    if len(_OPTS) >= 1024:
        _OPTS.clear()
    e = _OPTS[raw] = (opts, enc)
    return e


def _check(db: Any, key: bytes, cls: type) -> Any:
    """The value at ``key`` if absent or a ``cls``; Bail otherwise (the script would fail)."""
    v = db.lookup(key)
    if v is not None and type(v) is not cls and not isinstance(v, cls):
        raise Bail("wrong type")
    return v


def _check_stream(db: Any, key: bytes) -> None:
    s = _check(db, key, Stream)
    if s is not None and s.last_id >= MAX_ID - 8:
        raise Bail("stream ids exhausted")


def _paused_or_maxed_attrs(paused: Any, concurrency: Any) -> int | None:
    """Validate meta's paused/concurrency as the scripts read them; the concurrency
    limit to compare LLEN(active) with, -1 when paused, None when neither."""
    if paused is not None:
        return -1
    if concurrency is not None:
        if not _INT_RE.match(concurrency):
            raise Bail("concurrency")  # tonumber() corner cases: let Lua decide
        return int(concurrency)
    return None


def _check_meta(db: Any, key: bytes) -> Any:
    meta = _check(db, key, Hash)
    if meta is not None:
        _paused_or_maxed_attrs(meta.get(b"paused"), meta.get(b"concurrency"))
    return meta


# ---- addStandardJob -----------------------------------------------------------------
_ADD_ARGV = ["msgpacked arguments array", "json stringified job data", "msgpacked options"]
_ADD_KEY_ROLES = {"wait": "wait", "paused": "paused", "meta": "meta", "id": "id", "completed": "completed",
                  "delayed": "delayed", "active": "active", "events stream key": "events", "marker key": "marker"}
_ADD_OPTS = frozenset({"de", "delay", "lifo", "maxLenEvents", "priority"})
_ADD_EVENTS = ("event|added|jobId|?|name|?", "event|waiting|jobId|?")


def _writes_events(lay: dict[str, Any], shapes: tuple[str, ...]) -> bool:
    """The release's script writes (somewhere) every event the native path writes, field for field."""
    return set(shapes) <= set(lay.get("events", ()))


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


ADD_V6 = AddVariant(0, 1, 2, 3, 6, 7, 8, 9, 7, False, False)
#: addPrioritizedJob (6.x): KEYS marker meta id prioritized delayed completed active events pc
PRIO_V6 = AddVariant(-1, -1, 1, 2, 6, 7, 0, 9, 7, False, False, prio=3, pc=8)
_META4 = (b"paused", b"concurrency", b"max", b"duration")
_PRIO_KEY_ROLES = {"marker": "marker", "meta": "meta", "id": "id", "prioritized": "prioritized", "delayed": "delayed",
                   "completed": "completed", "active": "active", "events stream key": "events",
                   "pc priority counter": "pc"}
#: addDelayedJob (6.x): KEYS marker meta id delayed completed events
DELAYED_V6 = AddVariant(-1, -1, 1, 2, None, 5, 0, 6, 7, False, False, delayed=3)
_DELAYED_KEY_ROLES = {"marker": "marker", "meta": "meta", "id": "id", "delayed": "delayed", "completed": "completed",
                      "events stream key": "events"}
_MAX_DELAYED_TS = 2**53 // 0x1000 - 1  # (ts + 1) * 4096 - 1 stays an exact integer
_MAX_PRIORITY = 2**21  # BullMQ's limit; priority * 2**32 + counter stays an exact integer below 2**53


def _accept_add(numkeys: int, lay: dict[str, Any]) -> Any:
    """addStandardJob's native path for a release whose documented keys/args and msgpack fields it knows."""
    if lay.get("argv") != _ADD_ARGV or not set(lay.get("unpacked", {}).get("ARGV3", ())) <= _ADD_OPTS:
        return None
    names = lay.get("keys", [])
    if len(names) != numkeys or any(n not in _ADD_KEY_ROLES for n in names):
        return None
    pos = {_ADD_KEY_ROLES[n]: i for i, n in enumerate(names)}
    if not {"wait", "paused", "meta", "id", "events", "marker"} <= set(pos):
        return None
    fields = lay.get("argv_fields", {}).get("ARGV1", [])
    rjk = [i for i, f in enumerate(fields) if f.endswith("repeat job key")]
    if fields[:4] != ["1 key prefix", "2 custom id will not generate one automatically", "3 name", "4 timestamp"] \
            or len(rjk) != 1 or rjk[0] not in (7, 8):
        return None
    calls = set(lay.get("calls", ()))
    if not _writes_events(lay, _ADD_EVENTS):
        return None
    paused_list = "main>getTargetQueueList" in calls
    if not paused_list and "main>isQueuePausedOrMaxed" not in calls:
        return None
    # 5.60+'s getTargetQueueList reads meta's rate-limit fields too (the only 4-field HMGET of meta there)
    meta4 = paused_list and "HMGET|paused|concurrency|max|duration" in lay.get("hash_reads", ())
    v = AddVariant(pos["wait"], pos["paused"], pos["meta"], pos["id"], pos.get("active"), pos["events"],
                   pos["marker"], numkeys, rjk[0], paused_list, "main>addJobInTargetList" not in calls,
                   _META4 if meta4 else ADD_V6.meta_fields)
    return True if v == ADD_V6 else v


def _accept_prio(numkeys: int, lay: dict[str, Any]) -> Any:
    """addPrioritizedJob's native path (the addStandardJob implementation with a prioritized variant): the
    releases whose keys name the roles it uses and whose main code checks isQueuePausedOrMaxed (5.9+)."""
    if lay.get("argv") != _ADD_ARGV or not set(lay.get("unpacked", {}).get("ARGV3", ())) <= _ADD_OPTS:
        return None
    names = lay.get("keys", [])
    if len(names) != numkeys or any(n not in _PRIO_KEY_ROLES for n in names):
        return None
    pos = {_PRIO_KEY_ROLES[n]: i for i, n in enumerate(names)}
    if not {"marker", "meta", "id", "prioritized", "active", "events", "pc"} <= set(pos):
        return None
    fields = lay.get("argv_fields", {}).get("ARGV1", [])
    rjk = [i for i, f in enumerate(fields) if f.endswith("repeat job key")]
    if fields[:4] != ["1 key prefix", "2 custom id will not generate one automatically", "3 name", "4 timestamp"] \
            or len(rjk) != 1 or rjk[0] not in (7, 8):
        return None
    calls = set(lay.get("calls", ()))
    if not _writes_events(lay, _ADD_EVENTS) or not {"main>isQueuePausedOrMaxed", "main>addJobWithPriority"} <= calls:
        return None
    v = AddVariant(-1, -1, pos["meta"], pos["id"], pos["active"], pos["events"], pos["marker"], numkeys, rjk[0],
                   False, False, prio=pos["prioritized"], pc=pos["pc"])
    return True if v == PRIO_V6 else v


def _accept_delayed(numkeys: int, lay: dict[str, Any]) -> Any:
    """addDelayedJob's native path (addStandardJob's implementation with a delayed variant): the releases whose
    keys name the roles it uses and whose main code adds the job with addDelayedJob(getDelayedScore, ZADD,
    XADD delayed, addDelayMarkerIfNeeded)."""
    if lay.get("argv") != _ADD_ARGV or not set(lay.get("unpacked", {}).get("ARGV3", ())) <= _ADD_OPTS:
        return None
    names = lay.get("keys", [])
    if len(names) != numkeys or any(n not in _DELAYED_KEY_ROLES for n in names):
        return None
    pos = {_DELAYED_KEY_ROLES[n]: i for i, n in enumerate(names)}
    if not {"marker", "meta", "id", "delayed", "events"} <= set(pos):
        return None
    fields = lay.get("argv_fields", {}).get("ARGV1", [])
    rjk = [i for i, f in enumerate(fields) if f.endswith("repeat job key")]
    if fields[:4] != ["1 key prefix", "2 custom id use custom instead of one generated automatically", "3 name",
                      "4 timestamp"] or len(rjk) != 1 or rjk[0] not in (7, 8):
        return None
    calls = set(lay.get("calls", ()))
    need = {"main>addDelayedJob", "addDelayedJob>getDelayedScore", "addDelayedJob>addDelayMarkerIfNeeded"}
    if not need <= calls or not _writes_events(lay, ("event|added|jobId|?|name|?", "event|delayed|jobId|?|delay|?")):
        return None
    v = AddVariant(-1, -1, pos["meta"], pos["id"], None, pos["events"], pos["marker"], numkeys, rjk[0], False,
                   False, delayed=pos["delayed"])
    return True if v == DELAYED_V6 else v


def _delayed_score(db: Any, delayed_key: bytes, ts: Any, delay: Any) -> tuple[int, int]:
    """getDelayedScore, read before any write: (the job's score, its delayed timestamp); Bail unless exact."""
    ts = int(ts) if type(ts) is float and ts.is_integer() else ts
    delay = int(delay) if type(delay) is float and delay.is_integer() else delay
    if type(ts) is bytes:
        ts = str2int(ts) if _INT_RE.match(ts) else None
    if type(ts) is not int or type(delay) is not int or delay < 0:
        raise Bail("delayed timestamp")
    when = ts + delay if delay > 0 else ts
    if not 0 <= when <= _MAX_DELAYED_TS:
        raise Bail("delayed timestamp")
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


@native("addStandardJob", _accept_add)
def add_standard_job(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: AddVariant = ADD_V6) -> Any:
    """KEYS (6.x): wait paused meta id completed delayed active events marker; ARGV: args, data, opts.

    Other releases' key positions and paused/concurrency semantics come in ``variant``."""
    v = variant
    if len(argv) < 3 or len(set(keys)) != v.numkeys:
        raise Bail("args")
    a = _unpack(argv[0])
    if type(a) is not list:
        raise Bail("args")
    if len(a) < 10:
        a = a + [None] * (10 - len(a))
    prefix, custom_id, name, timestamp = a[0], a[1], a[2], a[3]
    if v is ADD_V6:
        if a[4] is not None or a[5] is not None:
            raise Bail("parent")  # parentKey / parent dependencies key
    elif any(x is not None for x in a[4 : v.rjk]):
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
    cur = _check(db, id_key, bytes)
    if cur is None:
        counter = 1
    else:
        n = str2int(cur)
        if n is None or n >= _MAX_COUNTER:
            raise Bail("id counter")
        counter = n + 1
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
        if type(job) is not Hash:
            raise Bail("job key type")
    _check_stream(db, events_key)
    if v.delayed is not None:
        dscore, dwhen = _delayed_score(db, keys[v.delayed], timestamp, opts.get(b"delay") or 0)
        _check(db, marker_key, ZSet)
    elif v.prio is not None:
        _check(db, keys[v.prio], ZSet)
        pc = _check(db, keys[v.pc], bytes)
        if pc is not None:
            n = str2int(pc)
            if n is None or not 0 <= n < 0xFFFFFFFF:
                raise Bail("priority counter")  # (5.x up to 5.40 take it modulo 2**48, later modulo 2**32)
    else:
        _check(db, wait_key, List)
    if active_key is not None:
        _check(db, active_key, List)
    _check(db, marker_key, ZSet)
    if v.paused_list:
        _check(db, keys[v.paused], List)

    # ---- the script's calls
    call = ctx.call
    call(INCR, [b"INCR", id_key])
    # HGET meta opts.maxLenEvents: read above (meta is a hash or absent, and INCR wrote another key)
    ctx.did(HGET, [b"HGET", meta_key, b"opts.maxLenEvents"])
    if max_events is None:
        max_events = b"10000"
        call(HSET, [b"HSET", meta_key, b"opts.maxLenEvents", max_events])
    if custom_id:
        call(EXISTS, [b"EXISTS", job_key])
    hm = [b"HMSET", job_key, b"name", name, b"data", argv[1], b"opts", opts_json,
          b"timestamp", ts, b"delay", delay, b"priority", priority]
    if rjk is not None:
        hm += [b"rjk", rjk]
    call(HMSET, hm)
    _xadd_star(ctx, [b"XADD", events_key, b"*", b"event", b"added", b"jobId", job_id, b"name", name])
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
        nxt = call(ZRANGE, [b"ZRANGE", delayed_key, b"0", b"0", b"WITHSCORES"])
        if len(nxt) >= 2:
            call(ZADD, [b"ZADD", marker_key, _num(float(nxt[1]) / 0x1000), b"1"])
        return job_id
    meta = db.lookup(meta_key)
    if active_key is None:
        # getTargetQueueList (5.0-5.8): HEXISTS meta paused (meta: a hash or absent, checked above)
        ctx.did(HEXISTS, [b"HEXISTS", meta_key, b"paused"])
        limit = None if meta is None or meta.get(b"paused") is None else -1
    else:
        # HMGET meta paused concurrency, inline (meta: a hash or absent; the HSET above may have made it)
        ctx.did(HMGET, [b"HMGET", meta_key, *v.meta_fields])
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
        counter = call(INCR, [b"INCR", keys[v.pc]])
        call(ZADD, [b"ZADD", keys[v.prio], b"%d" % (prio * 0x100000000 + counter % 0x100000000), job_id])
    elif v.marker_first and not paused_or_maxed:
        _zadd_marker(ctx, marker_key)
    if v.prio is None:
        call(push, [push.name.upper().encode(), wait_key, job_id])
    if not paused_or_maxed and not v.marker_first:
        _zadd_marker(ctx, marker_key)
    _xadd_star(ctx, [b"XADD", events_key, b"MAXLEN", b"~", max_events, b"*", b"event", b"waiting", b"jobId", job_id])
    return job_id


@native("addDelayedJob", _accept_delayed)
def add_delayed_job(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: AddVariant = DELAYED_V6) -> Any:
    """KEYS (6.x): marker meta id delayed completed events; ARGV: args, data, opts.
    addStandardJob's path, the job going to the delayed zset (score from getDelayedScore)."""
    return add_standard_job(ctx, keys, argv, variant)


@native("addPrioritizedJob", _accept_prio)
def add_prioritized_job(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: AddVariant = PRIO_V6) -> Any:
    """KEYS (6.x): marker meta id prioritized delayed completed active events pc; ARGV: args, data, opts.
    addStandardJob's path, the job going to the prioritized zset (score from the priority counter)."""
    return add_standard_job(ctx, keys, argv, variant)


# ---- moveToActive -------------------------------------------------------------------
def _check_job_for_processing(ctx: Ctx, keys: list[bytes], prefix: bytes, job_id: bytes) -> None:
    if job_id[:2] == b"0:":
        raise Bail("legacy marker")
    job_key = prefix + job_id
    if job_key in keys or job_key + b":lock" in keys:
        raise Bail("key clash")
    job = _check(ctx.db, job_key, Hash)
    if job is not None:
        ats = job.get(b"ats")
        if ats is not None:
            n = str2int(ats)
            if n is None or n >= _INT64_MAX:
                raise Bail("ats")


_MTA_KEYS = ["wait key", "active key", "prioritized key", "stream events key", "stalled key", "rate limiter key",
             "delayed key", "paused key", "meta key", "pc priority counter", "marker key"]
_MTA_ARGV = ["key prefix", "timestamp", "opts"]
_MTA_OPTS = frozenset({"limiter", "lockDuration", "name", "token"})
_MTA_EVENTS = ("event|active|jobId|?|prev|waiting",)
#: prepareJobForProcessing's job hash write (processedOn, then the optional pb) as the native path makes it
_PREPARE_HASH = "HMSET|processedOn|?|?"


def _meta_variant(lay: dict[str, Any]) -> Any:
    """True (6.x and 5.60+: the fetch reads meta's paused concurrency max duration) or the 2 fields that 5.x
    before 5.60 reads (it knows no rate limit in meta; the native path leaves a meta ``max`` to Lua anyway)."""
    if "HMGET|paused|concurrency|max|duration" in lay.get("hash_reads", ()):
        return True
    if "HMGET|paused|concurrency" in lay.get("hash_reads", ()):
        return _META4[:2]
    return None
#: prepareJobForProcessing re-adds the marker for the next worker (5.28+)
_PREPARE_MARKER = "prepareJobForProcessing>addBaseMarkerIfNeeded"


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
    if not _NUM_RE.match(ts):
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


def _paused_or_maxed(call: Any, limit: int | None, active_key: bytes) -> bool:
    """The queue is paused (limit < 0) or its active list is at the concurrency limit."""
    if limit is None:
        return False
    return limit < 0 or call(LLEN, [b"LLEN", active_key]) >= limit


def _pop_next(call: Any, wait_key: bytes, active_key: bytes, prio_key: bytes, pc_key: bytes) -> bytes | None:
    """moveJobFromWaitToActive / from prioritized: the next job id, now in active (or None, and the
    priority counter reset)."""
    job_id = call(RPOPLPUSH, [b"RPOPLPUSH", wait_key, active_key])
    if job_id is None:
        popped = call(ZPOPMIN, [b"ZPOPMIN", prio_key])
        if popped:
            job_id = popped[0]
            call(LPUSH, [b"LPUSH", active_key, job_id])
        else:
            call(DEL, [b"DEL", pc_key])
    return job_id


def _next_delay_reply(call: Any, delayed_key: bytes) -> list[Any] | None:
    """No job to take: the reply that tells the worker when the next delayed job is due, if any."""
    r = call(ZRANGE, [b"ZRANGE", delayed_key, b"0", b"0", b"WITHSCORES"])
    if len(r) < 2:
        return None
    score = r[1]
    score = float(score) if type(score) is not float else score
    return [0, 0, 0, truncate(score / 0x1000)]


def _active_reply(h: dict[bytes, bytes] | Hash, job_id: bytes) -> list[Any]:
    """moveToActive's reply: the job hash flattened, the job id, no rate limit, no delay.

    The flattened hash (all bytes) goes out as hiredis packs a command: the same RESP array of bulk
    strings, built in C (the job's fields are most of the reply)."""
    return [Encoded(pack_command(tuple(chain.from_iterable(h.items())))), job_id, 0, 0]


# ---- moveToFinished ---------------------------------------------------------------
LREM = cmd("lrem")
SCARD = cmd("scard")
ZCARD = cmd("zcard")
# a job with children still pending cannot finish: (key suffix, command, its name, moveToFinished's code)
_PENDING_CHILDREN = ((b":dependencies", SCARD, b"SCARD", -4), (b":unsuccessful", ZCARD, b"ZCARD", -9))
GET = cmd("get")
SREM = cmd("srem")
XTRIM = cmd("xtrim")
HDEL = cmd("hdel")


def _lock_opts(opts: dict[Any, Any]) -> tuple[bytes, bytes | None, bytes | None]:
    """(token, lock PX ms or None for token "0", worker name or None) as prepareJobForProcessing uses them."""
    token = opts.get(b"token")
    if type(token) is not bytes:
        raise Bail("token")
    lock_ms = None
    if token != b"0":
        d = opts.get(b"lockDuration")
        if type(d) is float and d == d and d.is_integer():
            d = int(d)
        if type(d) is not int or not 0 < d < _EXACT:
            raise Bail("lockDuration")
        lock_ms = b"%d" % d
    worker = opts.get(b"name")
    if _truthy(worker):
        if type(worker) is not bytes:
            raise Bail("worker name")
    else:
        worker = None
    return token, lock_ms, worker


def _xadd_star(ctx: Ctx, argv: list[bytes]) -> None:
    """``XADD key [MAXLEN ~ <n>] * field value ...`` whose reply the script drops: the command's work
    without the reply text (and, for the trimming form, without its parse)."""
    if not ctx.monitors:
        ctx.wrote = True
        try:
            if argv[2] == b"*":
                xadd_auto_id(ctx.sc, argv)
                done = True
            else:
                done = xadd_auto_id_trimmed(ctx.sc, argv) is not None  # None: <n> is no plain count
        except RedisError:
            done = False  # raised before any change: the call below reports it as the bridge would
        if done:
            ctx.did(XADD, argv)
            return
    ctx.call(XADD, argv)


def _zadd_marker(ctx: Ctx, marker_key: bytes) -> None:
    """``ZADD marker 0 0``: nothing to do (nor to signal) when the marker already holds ``0`` at 0."""
    marker = ctx.db.lookup(marker_key)
    if not ctx.monitors and type(marker) is ZSet and marker.score(b"0") == 0.0:
        ctx.wrote = True
        ctx.did(ZADD, [b"ZADD", marker_key, b"0", b"0"])
    else:
        ctx.call(ZADD, [b"ZADD", marker_key, b"0", b"0"])


def _hset(ctx: Ctx, cmd: Command, argv: list[bytes], h: Any) -> None:
    """HSET/HMSET ``argv`` (well formed) whose reply the script drops; ``h`` is what is at argv[1]."""
    if not ctx.monitors and type(h) is Hash:
        ctx.wrote = True
        h.set_pairs(argv, 2)
        ctx.db.modified(argv[1])
        ctx.did(cmd, argv)
    else:
        ctx.call(cmd, argv)


def _hincr1(ctx: Ctx, key: bytes, field: bytes, h: Any) -> Any:
    """HINCRBY key field 1, inline when the hash exists and the field holds a small integer (or is absent).

    ``h`` is what is at ``key`` (the caller just looked it up)."""
    db = ctx.db
    if not ctx.monitors and type(h) is Hash:
        cur = h.get(field)
        if cur is None:
            v = 1
        else:
            v = str2int(cur)  # type: ignore[assignment]
            if v is None or v >= _INT64_MAX:
                return ctx.call(HINCRBY, [b"HINCRBY", key, field, b"1"])
            v += 1
        ctx.wrote = True
        h.set(field, b"%d" % v)
        db.modified(key)
        ctx.did(HINCRBY, [b"HINCRBY", key, field, b"1"])
        return v
    return ctx.call(HINCRBY, [b"HINCRBY", key, field, b"1"])


def _prepare_job(ctx: Ctx, prefix: bytes, events_key: bytes, marker_key: bytes, job_id: bytes, ts: bytes,
                 token: bytes, lock_ms: bytes | None, worker: bytes | None) -> list[Any]:
    """prepareJobForProcessing without rate limiting."""
    call = ctx.call
    job_key = prefix + job_id
    db = ctx.db
    if lock_ms is not None:
        if ctx.monitors:
            call(SET, [b"SET", job_key + b":lock", token, b"PX", lock_ms])
        else:
            # SET lock token PX ms, inline: lock_ms is a validated positive integer below 2**53
            lock_key = job_key + b":lock"
            ctx.wrote = True
            db.lookup(lock_key)  # as SET does: an expired value goes first
            db.set(lock_key, token)
            db.set_expire(lock_key, int(lock_ms) + mstime())
            ctx.did(SET, [b"SET", lock_key, token, b"PX", lock_ms])
    _xadd_star(ctx, [b"XADD", events_key, b"*", b"event", b"active", b"jobId", job_id, b"prev", b"waiting"])
    h = db.lookup(job_key)
    if worker is not None:
        _hset(ctx, HMSET, [b"HMSET", job_key, b"processedOn", ts, b"pb", worker], h)
    else:
        _hset(ctx, HMSET, [b"HMSET", job_key, b"processedOn", ts], h)
    if h is None:
        h = db.lookup(job_key)  # HMSET created it
    _hincr1(ctx, job_key, b"ats", h)
    _zadd_marker(ctx, marker_key)
    # HGETALL: the job hash exists (HMSET just wrote it); its reply, flattened, inline
    if type(h) is not Hash:
        return _active_reply(call(HGETALL, [b"HGETALL", job_key]), job_id)
    ctx.did(HGETALL, [b"HGETALL", job_key])
    return _active_reply(h, job_id)


_JOB_SUFFIXES = (b":lock", b":dependencies", b":unsuccessful", b":logs", b":processed", b":failed")

#: wait key -> (the other 13 keys of moveToFinished, as a set, and the job keys whose derived keys are among them)
_MTF_KEYS: dict[bytes, tuple[list[bytes], frozenset[bytes], frozenset[bytes]]] = {}


def _mtf_keys(keys: list[bytes]) -> tuple[list[bytes], frozenset[bytes], frozenset[bytes]]:
    """The queue keys of moveToFinished (all but the job key), cached per queue."""
    qk = keys[:11] + keys[12:]
    e = _MTF_KEYS.get(keys[0])
    if e is not None and e[0] == qk:
        return e
    ks = frozenset(qk)
    if len(ks) != 13:
        raise Bail("args")
    clash = set()
    for k in qk:
        for suffix in _JOB_SUFFIXES:
            if k.endswith(suffix):
                clash.add(k[: -len(suffix)])
    e = (qk, ks, frozenset(clash))
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


#: how the finished job's return value / failed reason and finishedOn are written
_MTF_FINISH_HASH = "HSET|?|?|finishedOn|?"


def _accept_mtf(numkeys: int, lay: dict[str, Any]) -> Any:
    """moveToFinished: the releases with 6.x's keys and ARGV (the 9th, fields to update, optional), options
    among :data:`_MTF_OPT_NAMES` (the worker name among them) and a fetch that re-adds the marker."""
    if numkeys != 14 or lay.get("keys") != _MTF_KEYS_DOC:
        return None
    argv = lay.get("argv", [])
    if argv[:8] != _MTF_ARGV or argv[8:] not in ([], ["job fields to update"]):
        return None
    opts = set(lay.get("unpacked", {}).get("ARGV8", ()))
    calls = set(lay.get("calls", ()))
    if not opts <= _MTF_OPT_NAMES or "name" not in opts or _PREPARE_MARKER not in calls:
        return None
    if not _writes_events(lay, _MTF_EVENTS) or _PREPARE_HASH not in lay.get("hash_writes", ()):
        return None
    if _MTF_FINISH_HASH not in lay.get("hash_writes", ()):
        return None  # before 5.45: HMSET of the return value and finishedOn
    if "HGET|igdp" in lay.get("hash_reads", ()):
        return None  # 5.47-5.51 read the job's ignore-dependency-on-failure flag on every finish
    if not calls & {"fetchNextJob>getQueueMetadata", "fetchNextJob>getTargetQueueList", "main>getTargetQueueList"}:
        return None  # (before 5.73 the fetch is inline in the main code)
    return _meta_variant(lay)


@native("moveToFinished", _accept_mtf)
def move_to_finished(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: tuple[bytes, ...] = _META4) -> Any:
    """KEYS: wait active prioritized events stalled limiter delayed paused meta pc target jobKey metrics marker;
    ARGV: jobId timestamp prop value target fetchNext prefix opts [fields]."""
    if len(argv) < 8 or len(keys) != 14:
        raise Bail("args")
    if len(argv) > 8 and argv[8]:
        raise Bail("fields to update")
    job_id, ts, prop, val, target, fetch, prefix = argv[:7]
    failed = target == b"failed"
    if not failed and target != b"completed":
        raise Bail("target")
    if not _NUM_RE.match(ts):
        raise Bail("timestamp")
    wait_key, active_key, prio_key, events_key, stalled_key = keys[0], keys[1], keys[2], keys[3], keys[4]
    delayed_key, meta_key, pc_key, target_key, job_key, marker_key = keys[6], keys[8], keys[9], keys[10], keys[11], keys[13]
    _qk, ks, clash = _mtf_keys(keys)
    if job_key in ks:
        raise Bail("args")
    if job_key in clash:
        raise Bail("key clash")  # job_key + one of _JOB_SUFFIXES is another key of the script
    db = ctx.db
    call = ctx.call
    monitors = ctx.monitors
    # ---- reads (an error here still falls back to Lua: nothing written yet)
    job = db.lookup(job_key)
    ctx.did(EXISTS, [b"EXISTS", job_key])
    if job is None:
        return -1
    if not failed:
        # SCARD dependencies, ZCARD unsuccessful: inline when the keys are absent (the usual case)
        for suffix, cmd_, name, code in _PENDING_CHILDREN:
            k = job_key + suffix
            if monitors or db.lookup(k) is not None:
                if call(cmd_, [name, k]) != 0:
                    return code
            else:
                ctx.did(cmd_, [name, k])
    remove, attempts, limiter, token, lock_ms, worker = _mtf_opts(argv[7], failed)
    fetch_next = fetch == b"1"
    # ---- everything that could fail or branch after the first write
    if type(job) is not Hash and not isinstance(job, Hash):
        raise Bail("wrong type")
    if job.get(b"parentKey") is not None or job.get(b"parent") is not None or job.get(b"deid") is not None:
        raise Bail("job with parent or dedup")
    atm = job.get(b"atm")
    if atm is not None:
        n = str2int(atm)
        if n is None or n >= _INT64_MAX:
            raise Bail("atm")
    active = _check(db, active_key, List)
    if active is None or active.find(job_id, True) < 0:
        raise Bail("not active")  # -3 comes after the lock is deleted: let Lua do it
    meta = _check_meta(db, meta_key)
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
    if fetch_next:
        if meta is not None and meta.get(b"max") is not None:
            raise Bail("rate limit")
        if limiter:
            raise Bail("rate limiter")
        _check(db, marker_key, ZSet)
        upto = (float(ts) + 1) * 0x1000 - 1
        if delayed is not None:
            lo, hi = delayed.score_span(0.0, False, upto, False)
            if hi > lo:
                raise Bail("delayed jobs to promote")
        nxt = None
        if wait:
            nxt = wait.get(len(wait) - 1)
        elif prio:
            nxt = next(prio.items())[1]
        if nxt is not None:
            if nxt == job_id:
                raise Bail("next job is this job")
            _check_job_for_processing(ctx, keys, prefix, nxt)
            if prefix + nxt == job_key:
                raise Bail("key clash")
    # ---- removeLock: the first write
    if token != b"0":
        lock_key = job_key + b":lock"
        lock_token = db.lookup(lock_key)
        if monitors or (lock_token is not None and type(lock_token) is not bytes):
            lock_token = call(GET, [b"GET", lock_key])
        else:
            ctx.did(GET, [b"GET", lock_key])
        if lock_token != token:
            return -2 if lock_token is None else -6
        if monitors:
            call(DEL, [b"DEL", lock_key])
        else:
            ctx.wrote = True
            db.delete(lock_key)
            ctx.did(DEL, [b"DEL", lock_key])
        if monitors or db.lookup(stalled_key) is not None:
            call(SREM, [b"SREM", stalled_key, job_id])
        else:
            ctx.did(SREM, [b"SREM", stalled_key, job_id])  # no stalled set: nothing to remove
    # HMGET parentKey parent deid: all three are absent (checked above)
    ctx.did(HMGET, [b"HMGET", job_key, b"parentKey", b"parent", b"deid"])
    call(LREM, [b"LREM", active_key, b"-1", job_id])
    # trimEvents (meta's maxLenEvents was read above and nothing wrote meta since)
    ctx.did(HGET, [b"HGET", meta_key, b"opts.maxLenEvents"])
    if max_events is None:
        max_events = b"10000"
        call(HSET, [b"HSET", meta_key, b"opts.maxLenEvents", max_events])
    if monitors or len(max_events) > 18 or not max_events.isdigit():
        call(XTRIM, [b"XTRIM", events_key, b"MAXLEN", b"~", max_events])
    else:
        ctx.wrote = True
        xtrim_approx(ctx.sc, events_key, m)  # m: max_events as validated above (a stream or absent: checked)
        ctx.did(XTRIM, [b"XTRIM", events_key, b"MAXLEN", b"~", max_events])
    attempts_made = _hincr1(ctx, job_key, b"atm", job)  # the job hash: nothing replaced it since the checks
    if not remove:
        call(ZADD, [b"ZADD", target_key, ts, job_id])
        _hset(ctx, HSET, [b"HSET", job_key, prop, val, b"finishedOn", ts], job)
        if failed:
            call(HDEL, [b"HDEL", job_key, b"defa"])
    else:
        call(DEL, [b"DEL", job_key, job_key + b":logs", job_key + b":dependencies", job_key + b":processed",
                   job_key + b":failed", job_key + b":unsuccessful"])
    _xadd_star(ctx, [b"XADD", events_key, b"*", b"event", target, b"jobId", job_id, prop, val, b"prev", b"active"])
    if failed and attempts_made >= attempts:
        call(XADD, [b"XADD", events_key, b"*", b"event", b"retries-exhausted", b"jobId", job_id,
                    b"attemptsMade", b"%d" % attempts_made])
    if fetch_next:
        # fetchNextJob. getQueueMetadata: HMGET meta (a hash or absent: checked above)
        ctx.did(HMGET, [b"HMGET", meta_key, *variant])
        meta = db.lookup(meta_key)  # trimEvents may have created it
        limit = None if meta is None else _paused_or_maxed_attrs(meta.get(b"paused"), meta.get(b"concurrency"))
        paused_or_maxed = _paused_or_maxed(call, limit, active_key)
        # promoteDelayedJobs: nothing to promote (checked above), so the range is empty
        # (upto: an integer below 2**53 for a whole-ms timestamp, which %.17g prints as %d)
        up = b"%d" % upto if upto.is_integer() and upto < _EXACT else format_number_arg(upto)
        ctx.did(ZRANGEBYSCORE, [b"ZRANGEBYSCORE", delayed_key, b"0", up, b"LIMIT", b"0", b"1000"])
        if paused_or_maxed:
            return [0, 0, 0, 0]
        nid = _pop_next(call, wait_key, active_key, prio_key, pc_key)
        if nid is not None:
            return _prepare_job(ctx, prefix, events_key, marker_key, nid, ts, token, lock_ms, worker)
        delay = _next_delay_reply(call, delayed_key)
        if delay is not None:
            return delay
    if call(LLEN, [b"LLEN", wait_key]) == 0 and call(LLEN, [b"LLEN", active_key]) == 0 \
            and call(ZCARD, [b"ZCARD", prio_key]) == 0:
        call(XADD, [b"XADD", events_key, b"*", b"event", b"drained"])
    return 0

"""What the native BullMQ scripts share (see compat/native/__init__.py): the commands they run, argument
conversion as the Lua bridge does it, the type checks made before the first write, and the inline forms of
the commands the scripts issue most (each accounted for as the Lua path would run it: ``Ctx.done`` /
``Ctx.inline``, see compat/scripts.py)."""

from __future__ import annotations

import re
from heapq import heappush
from itertools import chain
from typing import Any, Final, NamedTuple

import msgpack
from hiredis import pack_command

from lua.convert import format_number_arg, truncate
from respqueue.commands.lists import _pop_done
from respqueue.commands.registry import Command
from respqueue.commands.streams import xadd_auto_id, xadd_auto_id_trimmed
from respqueue.keyspace import Database, mstime
from respqueue.numbers import str2int
from respqueue.resp import _BULK_HDR, _MBULK, Encoded, RedisError
from respqueue.types.hash import ColdHash, Hash, unpacked
from respqueue.types.list import List
from respqueue.types.stream import MAX_ID, Stream
from respqueue.types.zset import ZSet

from ..scripts import Bail, Ctx, cmd

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
_EXACT: Final = 9007199254740992  # 2**53 (Final: a constant the compiled build compares with natively)
_MAX_COUNTER = 10**14 - 1  # Lua 5.1 prints numbers up to here without an exponent ("jobCounter .. ''")
_INT64_MAX = 2**63 - 1


def _truthy(v: Any) -> bool:
    return v is not None and v is not False


def _num(v: Any) -> bytes:
    """A Lua number (from msgpack) as a redis.call argument; Bail if not exactly representable."""
    t = type(v)
    if t is int:
        iv: int = v
        if -_EXACT < iv < _EXACT:
            return b"%d" % iv
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


def _check(db: Database, key: bytes, cls: type) -> Any:
    """The value at ``key`` if absent or a ``cls``; Bail otherwise (the script would fail).

    What ``db.lookup`` gives, without its call for the usual cases: an absent key, and a value of exactly
    ``cls`` without a TTL (a key with one, or a cold hash, takes ``lookup``: it may expire it, or thaw it)."""
    v = db.data.get(key)
    if v is None:
        return None
    if type(v) is cls:
        exp = db.expires
        if not exp or key not in exp:
            return v
    v = db.lookup(key)
    if v is not None and type(v) is not cls and not isinstance(v, cls):
        raise Bail("wrong type")
    return v


def _check_stream(db: Database, key: bytes) -> None:
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


def _check_meta(db: Database, key: bytes) -> Any:
    meta = _check(db, key, Hash)
    if meta is not None:
        _paused_or_maxed_attrs(meta.get(b"paused"), meta.get(b"concurrency"))
    return meta


def _writes_events(lay: dict[str, Any], shapes: tuple[str, ...]) -> bool:
    """The release's script writes (somewhere) every event the native path writes, field for field."""
    return set(shapes) <= set(lay.get("events", ()))
_META4 = (b"paused", b"concurrency", b"max", b"duration")


# ---- moveToActive -------------------------------------------------------------------
def _check_job_for_processing(ctx: Ctx, keys: list[bytes] | frozenset[bytes], prefix: bytes, job_id: bytes) -> None:
    if job_id[:2] == b"0:":
        raise Bail("legacy marker")
    job_key = prefix + job_id
    if job_key in keys or job_key + b":lock" in keys:
        raise Bail("key clash")
    db = ctx.db
    job = db.data.get(job_key)
    if type(job) is ColdHash and not (db.expires and job_key in db.expires):
        ats = job.get(b"ats")  # (a waiting job is held packed: read as it is, the take thaws it once)
    else:
        job = _check(db, job_key, Hash)
        ats = None if job is None else job.get(b"ats")
    if ats is not None:
        n = str2int(ats)
        if n is None or n >= _INT64_MAX:
            raise Bail("ats")
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
#: promoteDelayedJobs' range (the layout's ``score_ranges``): 5.8+ stop one below the next millisecond's first
#: slot, releases before include it
_BOUND_BELOW = '0|(timestamp + 1) * 0x1000 - 1|"LIMIT"|0|1000'
_BOUND_AT = '0|(timestamp + 1) * 0x1000|"LIMIT"|0|1000'


def _check_nothing_due(delayed: Any, upto: float) -> None:
    """promoteDelayedJobs would move nothing: no job of ``delayed`` (a zset, or None) scores ``upto`` or less;
    Bail otherwise (the native paths leave promotion to Lua)."""
    if delayed is not None:
        lo, hi = delayed.score_span(0.0, False, upto, False)
        if hi > lo:
            raise Bail("delayed jobs to promote")


def _next_job_id(wait: Any, prio: Any) -> bytes | None:
    """The job a fetch takes next: the wait list's last, else the prioritized zset's first (either None)."""
    if wait:
        return wait.get(len(wait) - 1)  # type: ignore[no-any-return]
    if prio:
        return next(prio.items())[1]  # type: ignore[no-any-return]
    return None


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


def _take_next(ctx: Ctx, wait: Any, wait_key: bytes, active_key: bytes, prio_key: bytes, pc_key: bytes) -> bytes | None:
    """A fetch's moveJobFromWaitToActive / from prioritized: the next job id, now in active (or None). With no
    MONITOR client and a waiting job, the RPOPLPUSH is made inline: ``wait`` is the wait list the caller checked
    (its last job is the next one) and nothing wrote it since; active is the list the caller checked, or absent."""
    done = ctx.done
    if done is None or not wait:
        return _pop_next(ctx.call, wait_key, active_key, prio_key, pc_key)
    db = ctx.db
    ctx.wrote = True
    job_id: bytes = wait.pop_one(False)
    dst = db.data.get(active_key)
    if dst is None:
        db.add(active_key, List((job_id,)))
    else:
        dst.push_one(job_id, True)
        db.modified(active_key)
    _pop_done(db, wait_key, wait)
    done.append(RPOPLPUSH)
    return job_id


def _next_delay_reply(call: Any, delayed_key: bytes) -> list[Any] | None:
    """No job to take: the reply that tells the worker when the next delayed job is due, if any."""
    r = call(ZRANGE, [b"ZRANGE", delayed_key, b"0", b"0", b"WITHSCORES"])
    if len(r) < 2:
        return None
    score = r[1]
    score = float(score) if type(score) is not float else score
    return [0, 0, 0, truncate(score / 0x1000)]


#: a job hash's field name as a bulk string (``$<len>\r\n<name>\r\n``): the names repeat from job to job
_FIELD_BULK: dict[bytes, bytes] = {}


def _active_reply(h: dict[bytes, bytes] | Hash, job_id: bytes) -> Any:
    """moveToActive's reply: the job hash flattened, the job id, no rate limit, no delay.

    All of it goes out pre-encoded, as one :class:`Encoded` (the same in RESP2 and RESP3: an array of an
    array of bulk strings, a bulk string and two integers), so ``resp.encode`` writes it in one step: headers
    from resp's table, each field name's bulk string from ``_FIELD_BULK`` (17% fewer instructions than a
    header, name and CRLF per field; 2.9 us for a 12-field job hash with ``hiredis.pack_command``); a field
    or value over 1024 bytes takes pack_command."""
    hdr = _BULK_HDR
    fb = _FIELD_BULK
    d = h.d if type(h) is Hash else h
    n = len(job_id)
    tail = (hdr[n] if n < 1025 else b"$%d\r\n" % n) + job_id + _ACTIVE_TAIL
    out = [_ACTIVE_HEAD, _MBULK[2 * len(d)] if len(d) < 512 else b"*%d\r\n" % (2 * len(d))]
    ext = out.extend
    try:
        for f, v in d.items():
            p = fb.get(f)
            if p is None:
                p = hdr[len(f)] + f + b"\r\n"
                if len(fb) < 1024:
                    fb[f] = p
            ext((p, hdr[len(v)], v, b"\r\n"))
    except IndexError:
        return Encoded(_ACTIVE_HEAD + pack_command(tuple(chain.from_iterable(d.items()))) + tail)  # type: ignore[arg-type]
    out.append(tail)
    return Encoded(b"".join(out))


_ACTIVE_HEAD = b"*4\r\n"  # [job hash, job id, 0, 0]
_ACTIVE_TAIL = b"\r\n:0\r\n:0\r\n"


# ---- moveToFinished ---------------------------------------------------------------
LREM = cmd("lrem")
SCARD = cmd("scard")
ZCARD = cmd("zcard")
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
            ctx.done.append(XADD)  # type: ignore[union-attr]  # (None only with monitors)
            return
    ctx.call(XADD, argv)


def _zadd_marker(ctx: Ctx, marker_key: bytes) -> None:
    """``ZADD marker 0 0``: nothing to do (nor to signal) when the marker already holds ``0`` at 0."""
    marker = ctx.db.lookup(marker_key)
    if not ctx.monitors and type(marker) is ZSet and marker.score(b"0") == 0.0:
        ctx.wrote = True
        ctx.done.append(ZADD)  # type: ignore[union-attr]
    else:
        ctx.call(ZADD, [b"ZADD", marker_key, b"0", b"0"])


def _hset(ctx: Ctx, cmd: Command, argv: list[bytes], h: Any, signal: bool = True) -> bool:
    """HSET/HMSET ``argv`` (well formed) whose reply the script drops; ``h`` is what is at argv[1]. Inline
    (True) when ``h`` is a plain hash and no MONITOR client is attached; ``signal`` False leaves the inline
    write's ``Database.modified`` to the caller (one signal for several writes to the same hash in a row:
    nothing runs in between that could tell them apart)."""
    if not ctx.monitors and type(h) is Hash:
        ctx.wrote = True
        h.set_pairs(argv, 2)
        if signal:
            ctx.db.modified(argv[1])
        ctx.done.append(cmd)  # type: ignore[union-attr]
        return True
    ctx.call(cmd, argv)
    return False


def _hincr1(ctx: Ctx, key: bytes, field: bytes, h: Any, signal: bool = True) -> Any:
    """HINCRBY key field 1, inline when the hash exists and the field holds a small integer (or is absent).

    ``h`` is what is at ``key`` (the caller just looked it up); ``signal`` as for :func:`_hset` (the
    caller signals ``key`` once its inline writes are made, whether or not this one was inline)."""
    if not ctx.monitors and type(h) is Hash:
        cur = h.d.get(field)
        if cur is None:
            v = 1
        else:
            v = str2int(cur)  # type: ignore[assignment]
            if v is None or v >= _INT64_MAX:
                return ctx.call(HINCRBY, [b"HINCRBY", key, field, b"1"])
            v += 1
        ctx.wrote = True
        h.set(field, b"%d" % v)
        if signal:
            ctx.db.modified(key)
        ctx.done.append(HINCRBY)  # type: ignore[union-attr]
        return v
    return ctx.call(HINCRBY, [b"HINCRBY", key, field, b"1"])


def _prepare_job(ctx: Ctx, prefix: bytes, events_key: bytes, marker_key: bytes, job_id: bytes, ts: bytes,
                 token: bytes, lock_ms: bytes | None, worker: bytes | None, marker: bool = True,
                 prepare: str = "hmset", xadd: Any = _xadd_star) -> Any:
    """prepareJobForProcessing without rate limiting (``marker``: it re-adds the marker, 5.28+; ``prepare``:
    how it writes the job hash, as moveToActive's ``MtaVariant.prepare`` says; ``xadd``: what makes the
    ``active`` event, ``XADD events * ...``, as :func:`_xadd_star` does)."""
    call = ctx.call
    job_key = prefix + job_id
    db = ctx.db
    if lock_ms is not None:
        if ctx.monitors:
            call(SET, [b"SET", job_key + b":lock", token, b"PX", lock_ms])
        else:
            # SET lock token PX ms, inline: lock_ms is a validated positive integer below 2**53; what
            # Database.set and set_expire do, with one modified() for both (nothing runs in between)
            lock_key = job_key + b":lock"
            ctx.wrote = True
            data = db.data
            created = db.lookup(lock_key) is None  # as SET does: an expired value goes first
            data[lock_key] = token
            when = int(lock_ms) + mstime()
            db.expires[lock_key] = when
            heappush(db.expire_heap, (when, lock_key))
            db.modified(lock_key, created)
            ctx.done.append(SET)  # type: ignore[union-attr]
    if prepare != "hmset":  # 5.0-5.6: HSET pb (5.3+) before the event, HSET processedOn after it
        if prepare == "hset" and worker is not None:
            call(HSET, [b"HSET", job_key, b"pb", worker])
        call(XADD, [b"XADD", events_key, b"*", b"event", b"active", b"jobId", job_id, b"prev", b"waiting"])
        call(HSET, [b"HSET", job_key, b"processedOn", ts])
        call(HINCRBY, [b"HINCRBY", job_key, b"ats", b"1"])
        if marker:
            _zadd_marker(ctx, marker_key)
        return _active_reply(call(HGETALL, [b"HGETALL", job_key]), job_id)
    xadd(ctx, [b"XADD", events_key, b"*", b"event", b"active", b"jobId", job_id, b"prev", b"waiting"])
    h = db.peek(job_key)
    if type(h) is ColdHash:  # a waiting job is held packed (respqueue/coldhash.py): written below, noted then
        h = db.thaw(job_key, h, False)
    else:
        h = unpacked(h)
    # HMSET processedOn [pb], HINCRBY ats: one signal for the two inline writes to the job hash
    if worker is not None:
        inline = _hset(ctx, HMSET, [b"HMSET", job_key, b"processedOn", ts, b"pb", worker], h, False)
    else:
        inline = _hset(ctx, HMSET, [b"HMSET", job_key, b"processedOn", ts], h, False)
    if h is None:
        h = db.lookup(job_key)  # HMSET created it
    _hincr1(ctx, job_key, b"ats", h, not inline)
    if inline:
        db.modified(job_key)
    if marker:
        _zadd_marker(ctx, marker_key)
    # HGETALL: the job hash exists (HMSET just wrote it); its reply, flattened, inline
    if type(h) is not Hash:
        return _active_reply(call(HGETALL, [b"HGETALL", job_key]), job_id)
    done = ctx.done
    if done is None:
        ctx.inline(HGETALL, [b"HGETALL", job_key])
    else:
        done.append(HGETALL)  # (what ctx.inline does, without building the argv it has no use for)
    return _active_reply(h, job_id)


# ---- what moveToDelayed / retryJob / promote share ---------------------------------
def _add_delay_marker(ctx: Ctx, marker_key: bytes, delayed_key: bytes, member: bytes = b"1") -> None:
    """addDelayMarkerIfNeeded: ZRANGE delayed 0 0 WITHSCORES, then ZADD marker <first score / 4096> <member>
    when the delayed zset holds a job (the caller checked that its first score is an integer below 2**53;
    the member is "1", "0" in npm 5.0.0)."""
    nxt = ctx.call(ZRANGE, [b"ZRANGE", delayed_key, b"0", b"0", b"WITHSCORES"])
    if len(nxt) >= 2:
        ctx.call(ZADD, [b"ZADD", marker_key, _num(float(nxt[1]) / 0x1000), member])


def _job_fields(raw: bytes | None) -> list[bytes] | None:
    """updateJobFields' HMSET arguments (``cmsgpack.unpack`` of ARGV, a flat name/value array), or None when
    the argument is absent or empty; Bail on anything but a non-empty even array of strings and numbers."""
    if not raw:
        return None
    v = _unpack(raw)
    if type(v) is not list or not v or len(v) % 2:
        raise Bail("fields to update")
    return [_arg(x) for x in v]


def _counter_ok(v: bytes | None) -> bool:
    """A job hash counter (atm, ats) that HINCRBY 1 takes: absent, or an integer below 2**63 - 1."""
    if v is None:
        return True
    n = str2int(v)
    return n is not None and n < _INT64_MAX


def _lock_state(db: Database, job_key: bytes, token: bytes, old_lock: bool = False) -> int:
    """removeLock's outcome, read before any write: 0 (no lock to remove: token "0"), 1 (the lock holds
    ``token``: DEL it, SREM the stalled set), -2 (no lock) or -6 (another token; ``old_lock``, the lock
    handled inline before 5.5: -2 for another token's lock too)."""
    if token == b"0":
        return 0
    lock = _check(db, job_key + b":lock", bytes)
    if lock is None:
        return -2
    return 1 if lock == token else -2 if old_lock else -6


def _remove_lock(ctx: Ctx, job_key: bytes, stalled_key: bytes, token: bytes, job_id: bytes, state: int) -> int:
    """removeLock, ``state`` from :func:`_lock_state`: GET the lock (its value known), DEL it and SREM the job
    from the stalled set when it is ``token``'s; the script's error code (-2, -6) or 0."""
    if state == 0:
        return 0
    lock_key = job_key + b":lock"
    ctx.inline(GET, [b"GET", lock_key])
    if state < 0:
        return state
    ctx.call(DEL, [b"DEL", lock_key])
    ctx.call(SREM, [b"SREM", stalled_key, job_id])
    return 0


def _leave_active(ctx: Ctx, job_key: bytes, job_id: bytes, exists: bool, lock: int, token: bytes,
                  stalled_key: bytes, fields: list[bytes] | None, active_key: bytes | None) -> int:
    """What moveToDelayed and retryJob open with: EXISTS job (-1 when not ``exists``), removeLock (``lock``
    from :func:`_lock_state`; -2, -6), updateJobFields (HMSET ``fields``); then (unless ``active_key`` is
    None: the caller does it) LREM active -1 job. The script's error code, or how many LREM removed."""
    ctx.inline(EXISTS, [b"EXISTS", job_key])
    if not exists:
        return -1
    code = _remove_lock(ctx, job_key, stalled_key, token, job_id, lock)
    if code < 0:
        return code
    if fields is not None:
        ctx.call(HMSET, [b"HMSET", job_key, *fields])
    if active_key is None:
        return 0
    return ctx.call(LREM, [b"LREM", active_key, b"-1", job_id])  # type: ignore[no-any-return]


def _zadd_prioritized(ctx: Ctx, prio_key: bytes, pc_key: bytes, priority: int, job_id: bytes) -> None:
    """getPriorityScore + ZADD: INCR the priority counter, the job at priority * 2**32 + counter mod 2**32
    (the caller checked the priority and the counter: see :func:`_check_pc`)."""
    counter = ctx.call(INCR, [b"INCR", pc_key])
    ctx.call(ZADD, [b"ZADD", prio_key, b"%d" % (priority * 0x100000000 + counter % 0x100000000), job_id])


#: 5.0-5.7's priority score (the layout's ``prio_scores``): bit.band works on 32 bits in Redis's Lua, so the
#: native paths serve those releases only while the counter stays below 2**31 - 1
SCORE_BAND = "priority * 0x100000000 + bit.band(prioCounter, 0xffffffffffff)"
#: the priority score of 5.8+ (getPriorityScore's, or inline)
SCORE_COUNTED = "priority * 0x100000000 + prioCounter % 0x100000000"


def _score_band(lay: dict[str, Any]) -> bool | None:
    """From a layout's ``prio_scores``: False for the counted score (5.8+), True for 5.0-5.7's bit.band score,
    None for anything else."""
    scores = lay.get("prio_scores")
    if scores == [SCORE_COUNTED]:
        return False
    if scores == [SCORE_BAND]:
        return True
    return None


def _get_or_set_max_events(ctx: Ctx, meta_key: bytes, max_events: bytes | None) -> bytes:
    """getOrSetMaxEvents: HGET meta opts.maxLenEvents, answered by the caller's read of meta (``max_events``;
    nothing may have written it since), and HSET of the default 10000 when it is absent. Returns the value."""
    ctx.inline(HGET, [b"HGET", meta_key, b"opts.maxLenEvents"])
    if max_events is None:
        max_events = b"10000"
        ctx.call(HSET, [b"HSET", meta_key, b"opts.maxLenEvents", max_events])
    return max_events


def _check_pc(db: Database, pc_key: bytes, band: bool = False) -> None:
    """The priority counter INCR takes, below 2**32 - 1 (``band``, 5.0-5.7's bit.band score: below 2**31 - 1);
    Bail otherwise."""
    pc = _check(db, pc_key, bytes)
    if pc is not None:
        n = str2int(pc)
        if n is None or not 0 <= n < (0x7FFFFFFF if band else 0xFFFFFFFF):
            raise Bail("priority counter")


def _job_priority(v: bytes | None) -> int:
    """``tonumber(HGET job priority) or 0`` for the native paths: 0 when absent, an integer up to BullMQ's
    2**21 (priority * 2**32 + counter stays exact); Bail otherwise."""
    if v is None:
        return 0
    n = str2int(v) if _INT_RE.match(v) else None
    if n is None or not 0 <= n <= 2**21:
        raise Bail("priority")
    return n


class QueueVariant(NamedTuple):
    """How a script finds where a job goes: the meta fields its first read takes (getTargetQueueList or
    isQueuePausedOrMaxed) and whether a paused queue's jobs go to the paused list (5.x)."""

    meta_fields: tuple[bytes, ...]
    paused_list: bool


#: 6.x: isQueuePausedOrMaxed (HMGET meta paused concurrency), the wait list even when paused
QUEUE_V6 = QueueVariant(_META4[:2], False)


def _queue_variant(lay: dict[str, Any], reader: str) -> QueueVariant | None:
    """The :class:`QueueVariant` of a layout whose main code reads the queue's state with ``reader``'s callee:
    isQueuePausedOrMaxed (6.x), or 5.x's getTargetQueueList (meta's 2 or 4 fields, then the paused list)."""
    calls = set(lay.get("calls", ()))
    reads = lay.get("hash_reads", ())
    if reader + ">getTargetQueueList" in calls:
        if "HMGET|paused|concurrency|max|duration" in reads:
            return QueueVariant(_META4, True)
        if "HMGET|paused|concurrency" in reads:
            return QueueVariant(_META4[:2], True)
        return None
    if reader + ">isQueuePausedOrMaxed" in calls and "HMGET|paused|concurrency" in reads:
        return QUEUE_V6
    return None


def _target_queue(ctx: Ctx, v: QueueVariant, meta_key: bytes, limit: int | None, active_key: bytes,
                  wait_key: bytes, paused_key: bytes) -> tuple[bytes, bool]:
    """getTargetQueueList / isQueuePausedOrMaxed: (the list a job goes to, paused or maxed); ``limit`` is
    :func:`_paused_or_maxed_attrs` of meta as it is now (meta a hash or absent: checked)."""
    ctx.inline(HMGET, [b"HMGET", meta_key, *v.meta_fields])
    return (paused_key if v.paused_list and limit == -1 else wait_key,
            _paused_or_maxed(ctx.call, limit, active_key))

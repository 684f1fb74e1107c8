"""Sorted set commands (t_zset.c), blocking pops included."""

from __future__ import annotations

import math
import struct
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import lru_cache
from typing import Any

from ..errors import MIN_MAX_NOT_FLOAT, MIN_MAX_NOT_LEX, NOT_FLOAT, NOT_INTEGER, SYNTAX, WRONGTYPE
from ..glob import compile_glob
from ..keyspace import Database, mstime
from ..resp import NULL_ARRAY, RedisError
from ..types.zset import MAXSTR, MINSTR, Entry, ZSet
from .registry import command
from .util import INT64_MAX, index_span, parse_float, str2int
from .util import _round_ld as round_ld

G = "sortedset"
_WS = b" \t\n\r\x0b\x0c"
_INF = math.inf
NAN_ERR = RedisError(b"ERR resulting score is not a number (NaN)")
TIMEOUT_NOT_FLOAT = RedisError(b"ERR timeout is not a float or out of range")
TIMEOUT_NEGATIVE = RedisError(b"ERR timeout is negative")
TIMEOUT_RANGE = RedisError(b"ERR timeout is out of range")
MUST_BE_POSITIVE = RedisError(b"ERR value is out of range, must be positive")
NUMKEYS_ERR = RedisError(b"ERR numkeys should be greater than 0")
COUNT_ERR = RedisError(b"ERR count should be greater than 0")
WEIGHT_ERR = RedisError(b"ERR weight value is not a float")
LIMIT_NEG = RedisError(b"ERR LIMIT can't be negative")
INVALID_CURSOR = RedisError(b"ERR invalid cursor")
LIMIT_RANK = RedisError(b"ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
WITHSCORES_LEX = RedisError(b"ERR syntax error, WITHSCORES not supported in combination with BYLEX")


# ---- argument parsing -----------------------------------------------------
def _erange(b: bytes, v: float) -> bool:
    """Did strtod overflow to inf or underflow to zero on ``b`` (parsed as ``v``)?"""
    s = b.lower().lstrip(b"+-")
    if v != 0.0:
        return s not in (b"inf", b"infinity")
    if s.startswith(b"0x"):
        mant = s[2:].split(b"p", 1)[0]
    else:
        mant = s.split(b"e", 1)[0]
    return mant.strip(b"0.") != b""


def parse_score(b: bytes, err: RedisError = NOT_FLOAT) -> float:
    """Redis's getDoubleFromObject: strict, no NaN, no overflow/underflow."""
    if b.isdigit() and len(b) < 300:
        return float(b)  # plain ASCII digits: always finite, never a 0 from underflow
    try:
        v = parse_float(b, err)
    except OverflowError:
        raise err from None
    if (v == 0.0 or v == _INF or v == -_INF) and _erange(b, v):
        raise err
    return v


def _range_score(b: bytes) -> tuple[float, bool]:
    """One end of a score range (zslParseRange: plain strtod, ``(`` = exclusive)."""
    ex = b[:1] == b"("
    if ex:
        b = b[1:]
    nul = b.find(b"\0")
    if nul >= 0:
        b = b[:nul]
    if not b:
        return 0.0, ex
    s = b.lstrip(_WS)
    if not s:
        raise MIN_MAX_NOT_FLOAT
    try:
        return parse_float(s, MIN_MAX_NOT_FLOAT), ex
    except OverflowError:
        raise MIN_MAX_NOT_FLOAT from None


def _score_range(a: bytes, b: bytes) -> tuple[float, bool, float, bool]:
    lo, loex = _range_score(a)
    hi, hiex = _range_score(b)
    return lo, loex, hi, hiex


def _lex_item(b: bytes) -> tuple[Any, bool]:
    if not b:
        raise MIN_MAX_NOT_LEX
    c0 = b[0]
    if c0 == 43:  # +
        if len(b) > 1 and b[1] != 0:
            raise MIN_MAX_NOT_LEX
        return MAXSTR, False
    if c0 == 45:  # -
        if len(b) > 1 and b[1] != 0:
            raise MIN_MAX_NOT_LEX
        return MINSTR, False
    if c0 == 40:  # (
        return b[1:], True
    if c0 == 91:  # [
        return b[1:], False
    raise MIN_MAX_NOT_LEX


def _lex_range(a: bytes, b: bytes) -> tuple[Any, bool, Any, bool]:
    lo, loex = _lex_item(a)
    hi, hiex = _lex_item(b)
    return lo, loex, hi, hiex


def _long(b: bytes) -> int:
    v = str2int(b)
    if v is None:
        raise NOT_INTEGER
    return v


def _range_long(b: bytes, lo: int, hi: int, err: RedisError) -> int:
    v = str2int(b)
    if v is None or v < lo or v > hi:
        raise err
    return v


def parse_timeout_ms(b: bytes) -> int:
    """Redis's getTimeoutFromObjectOrReply: ``(long long)ceill(seconds * 1000.0)`` in long double.

    0 blocks forever; so do tiny negative timeouts like -0.001, as in Redis.
    """
    if len(b) > 5 * 1024:
        raise TIMEOUT_NOT_FLOAT
    try:
        v = parse_float(b, TIMEOUT_NOT_FLOAT)
    except OverflowError:
        raise TIMEOUT_NOT_FLOAT from None
    if (v == 0.0 or math.isinf(v)) and _erange(b, v):
        # outside double range: long double may still hold it
        try:
            d = abs(Decimal(b.decode("ascii")))
        except (InvalidOperation, UnicodeDecodeError):
            raise TIMEOUT_NOT_FLOAT from None
        if v == 0.0:
            if d < Decimal("3.6e-4951"):
                raise TIMEOUT_NOT_FLOAT
            return 1  # a positive timeout below 1 ms rounds up
        if d >= Decimal("1.18e4932"):
            raise TIMEOUT_NOT_FLOAT
        raise TIMEOUT_NEGATIVE  # (long long) of a huge value is LLONG_MIN on x86
    f = v * 1000.0
    if math.isinf(f) or f >= 9.2e18 or f <= -9.2e18:
        raise TIMEOUT_NEGATIVE
    r = round(f)
    t = _exact_ceil_ms(b, v) if abs(f - r) < 1e-3 else math.ceil(f)
    if t < 0:
        raise TIMEOUT_NEGATIVE
    if t > 0 and t > INT64_MAX - mstime():
        raise TIMEOUT_RANGE
    return t


@lru_cache(maxsize=512)
def _exact_ceil_ms(b: bytes, v: float) -> int:
    """ceil(seconds * 1000) computed in x87 long double, for values near a whole ms."""
    if b"x" in b.lower():
        q = Fraction(v)
    else:
        q = Fraction(Decimal(b.decode("ascii")))
    return math.ceil(round_ld(round_ld(q) * 1000))


# ---- helpers ----------------------------------------------------------------
def _zget(db: Database, key: bytes) -> Any:
    """The zset at ``key``, None if absent, WRONGTYPE for other types."""
    v = db.lookup(key)
    if v is None:
        return None
    if type(v) is bytes or v.rtype != b"zset":
        raise WRONGTYPE
    return v


def _emit(c: Any, entries: list[Entry], withscores: bool) -> list[Any]:
    """A range reply: members, or members with scores (flat in RESP2, pairs in RESP3)."""
    if not withscores:
        return [m for _, m in entries]
    if c.resp > 2:
        return [[m, s] for s, m in entries]
    out: list[Any] = []
    ap = out.append
    for s, m in entries:
        ap(m)
        ap(s)
    return out


def _changed(db: Database, key: bytes, z: Any) -> None:
    """After removing members: drop the key if the zset is empty."""
    if len(z):
        db.modified(key)
    else:
        db.delete(key)


def _store(db: Database, dst: bytes, entries: list[Entry]) -> int:
    """Store ascending ``entries`` at ``dst`` (deleting it when empty); returns the count."""
    if entries:
        db.set(dst, ZSet.from_sorted(entries))
        return len(entries)
    db.delete(dst)
    return 0


# ---- ZADD / ZINCRBY -------------------------------------------------------
def _zadd1(c: Any, key: bytes, score: bytes, m: bytes) -> int:
    """ZADD key score member, no options (the common case; same effects as the general path)."""
    s = parse_score(score)
    db = c.db
    z = _zget(db, key)
    if z is None:
        z = ZSet()
        z.add(m, s)
        db.add(key, z)
        return 1
    cur = z.score(m)
    if cur is None:
        z.add(m, s)
        db.modified(key)
        return 1
    if s != cur:
        z.add(m, s)
        db.modified(key)
    return 0


def _zadd(c: Any, argv: list[bytes], incr: bool) -> Any:
    n = len(argv)
    if n == 4 and not incr and argv[2][:1].isdigit():
        # a score starting with a digit is no option keyword
        return _zadd1(c, argv[1], argv[2], argv[3])
    nx = xx = gt = lt = ch = False
    i = 2
    while i < n:
        o = argv[i]
        if len(o) > 4:
            break
        o = o.lower()
        if o == b"nx":
            nx = True
        elif o == b"xx":
            xx = True
        elif o == b"ch":
            ch = True
        elif o == b"incr":
            incr = True
        elif o == b"gt":
            gt = True
        elif o == b"lt":
            lt = True
        else:
            break
        i += 1
    nel = n - i
    if nel == 0 or nel % 2:
        raise SYNTAX
    nel //= 2
    if nx and xx:
        raise RedisError(b"ERR XX and NX options at the same time are not compatible")
    if (gt and nx) or (lt and nx) or (gt and lt):
        raise RedisError(b"ERR GT, LT, and/or NX options at the same time are not compatible")
    if incr and nel > 1:
        raise RedisError(b"ERR INCR option supports a single increment-element pair")
    scores = [parse_score(argv[j]) for j in range(i, n, 2)]
    db = c.db
    key = argv[1]
    z = _zget(db, key)
    new = z is None
    if new:
        if xx:
            return None if incr else 0
        z = ZSet()
    added = updated = processed = 0
    score = 0.0
    j = i + 1
    for s in scores:
        m = argv[j]
        j += 2
        cur = z.score(m)
        if cur is not None:
            if nx:
                continue
            if incr:
                s += cur
                if s != s:
                    raise NAN_ERR
            if (lt and s >= cur) or (gt and s <= cur):
                continue
            if s != cur:
                z.add(m, s)
                updated += 1
            processed += 1
            score = s
        elif not xx:
            z.add(m, s)
            added += 1
            processed += 1
            score = s
    if new:
        if len(z):
            db.add(key, z)
    elif added or updated:
        db.modified(key)
    if incr:
        return score if processed else None
    return added + updated if ch else added


@command("zadd", -4, "write denyoom fast", 1, 1, 1, group=G)
def zadd(c: Any, argv: list[bytes]) -> Any:
    return _zadd(c, argv, False)


@command("zincrby", 4, "write denyoom fast", 1, 1, 1, group=G)
def zincrby(c: Any, argv: list[bytes]) -> Any:
    return _zadd(c, argv, True)


# ---- simple reads/writes --------------------------------------------------
@command("zrem", -3, "write fast", 1, 1, 1, group=G)
def zrem(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    key = argv[1]
    z = _zget(db, key)
    if z is None:
        return 0
    n = 0
    for m in argv[2:]:
        if z.remove(m):
            n += 1
            if not len(z):
                break
    if n:
        _changed(db, key, z)
    return n


@command("zscore", 3, "readonly fast", 1, 1, 1, group=G)
def zscore(c: Any, argv: list[bytes]) -> Any:
    z = _zget(c.db, argv[1])
    return None if z is None else z.score(argv[2])


@command("zmscore", -3, "readonly fast", 1, 1, 1, group=G)
def zmscore(c: Any, argv: list[bytes]) -> Any:
    z = _zget(c.db, argv[1])
    if z is None:
        return [None] * (len(argv) - 2)
    sc = z.score
    return [sc(m) for m in argv[2:]]


@command("zcard", 2, "readonly fast", 1, 1, 1, group=G)
def zcard(c: Any, argv: list[bytes]) -> Any:
    z = _zget(c.db, argv[1])
    return 0 if z is None else len(z)


@command("zcount", 4, "readonly fast", 1, 1, 1, group=G)
def zcount(c: Any, argv: list[bytes]) -> Any:
    rng = _score_range(argv[2], argv[3])
    z = _zget(c.db, argv[1])
    if z is None:
        return 0
    lo, hi = z.score_span(*rng)
    return hi - lo


@command("zlexcount", 4, "readonly fast", 1, 1, 1, group=G)
def zlexcount(c: Any, argv: list[bytes]) -> Any:
    rng = _lex_range(argv[2], argv[3])
    z = _zget(c.db, argv[1])
    if z is None:
        return 0
    lo, hi = z.lex_span(*rng)
    return hi - lo


def _zrank(c: Any, argv: list[bytes], rev: bool) -> Any:
    z = _zget(c.db, argv[1])
    if z is None:
        return None
    r = z.rank(argv[2])
    if r is None:
        return None
    return len(z) - 1 - r if rev else r


@command("zrank", 3, "readonly fast", 1, 1, 1, group=G)
def zrank(c: Any, argv: list[bytes]) -> Any:
    return _zrank(c, argv, False)


@command("zrevrank", 3, "readonly fast", 1, 1, 1, group=G)
def zrevrank(c: Any, argv: list[bytes]) -> Any:
    return _zrank(c, argv, True)


# ---- ZRANGE and friends ---------------------------------------------------
RANK, SCORE, LEX = 1, 2, 3


def _rank_span(n: int, start: int, end: int, reverse: bool) -> tuple[int, int]:
    span = index_span(n, start, end)
    if span is None:
        return 0, 0
    start, end = span
    if reverse:
        return n - 1 - end, n - start
    return start, end + 1


def _limit_span(lo: int, hi: int, reverse: bool, offset: int, limit: int) -> tuple[int, int]:
    """Apply LIMIT offset/count to positions ``lo..hi-1`` walked in the given direction."""
    if offset < 0:
        return 0, 0
    if reverse:
        hi -= offset
        if limit >= 0:
            lo = max(lo, hi - limit)
    else:
        lo += offset
        if limit >= 0:
            hi = min(hi, lo + limit)
    return (lo, hi) if hi > lo else (0, 0)


def _zrange_generic(c: Any, argv: list[bytes], start: int, store: bool, rtype: int, reverse: bool | None) -> Any:
    key = argv[start]
    minidx, maxidx = start + 1, start + 2
    withscores = False
    offset, limit = 0, -1
    n = len(argv)
    j = start + 3
    while j < n:
        a = argv[j].lower()
        left = n - j - 1
        if not store and a == b"withscores":
            withscores = True
        elif a == b"limit" and left >= 2:
            offset = _long(argv[j + 1])
            limit = _long(argv[j + 2])
            j += 2
        elif reverse is None and a == b"rev":
            reverse = True
        elif rtype == 0 and a == b"bylex":
            rtype = LEX
        elif rtype == 0 and a == b"byscore":
            rtype = SCORE
        else:
            raise SYNTAX
        j += 1
    if reverse is None:
        reverse = False
    if rtype == 0:
        rtype = RANK
    if limit != -1 and rtype == RANK:
        raise LIMIT_RANK
    if withscores and rtype == LEX:
        raise WITHSCORES_LEX
    if reverse and rtype != RANK:
        minidx, maxidx = maxidx, minidx
    if rtype == RANK:
        rstart, rend = _long(argv[minidx]), _long(argv[maxidx])
    elif rtype == SCORE:
        srange = _score_range(argv[minidx], argv[maxidx])
    else:
        lrange = _lex_range(argv[minidx], argv[maxidx])
    db = c.db
    z = _zget(db, key)
    if z is None:
        if store:
            return _store(db, argv[1], [])
        return []
    if rtype == RANK:
        lo, hi = _rank_span(len(z), rstart, rend, reverse)
    elif rtype == SCORE:
        lo, hi = z.score_span(*srange)
        lo, hi = _limit_span(lo, hi, reverse, offset, limit)
    else:
        if offset < 0:
            lo, hi = 0, 0
        else:
            lo, hi = z.lex_span(*lrange, reverse=reverse, offset=offset)
            lo, hi = _limit_span(lo, hi, reverse, 0, limit)
    if store:
        return _store(db, argv[1], z.entries(lo, hi))
    return _emit(c, z.entries(lo, hi, reverse), withscores)


@command("zrange", -4, "readonly", 1, 1, 1, group=G)
def zrange(c: Any, argv: list[bytes]) -> Any:
    return _zrange_generic(c, argv, 1, False, 0, None)


@command("zrangestore", -5, "write denyoom", 1, 2, 1, group=G)
def zrangestore(c: Any, argv: list[bytes]) -> Any:
    return _zrange_generic(c, argv, 2, True, 0, None)


@command("zrevrange", -4, "readonly", 1, 1, 1, group=G)
def zrevrange(c: Any, argv: list[bytes]) -> Any:
    return _zrange_generic(c, argv, 1, False, RANK, True)


@command("zrangebyscore", -4, "readonly", 1, 1, 1, group=G)
def zrangebyscore(c: Any, argv: list[bytes]) -> Any:
    return _zrange_generic(c, argv, 1, False, SCORE, False)


@command("zrevrangebyscore", -4, "readonly", 1, 1, 1, group=G)
def zrevrangebyscore(c: Any, argv: list[bytes]) -> Any:
    return _zrange_generic(c, argv, 1, False, SCORE, True)


@command("zrangebylex", -4, "readonly", 1, 1, 1, group=G)
def zrangebylex(c: Any, argv: list[bytes]) -> Any:
    return _zrange_generic(c, argv, 1, False, LEX, False)


@command("zrevrangebylex", -4, "readonly", 1, 1, 1, group=G)
def zrevrangebylex(c: Any, argv: list[bytes]) -> Any:
    return _zrange_generic(c, argv, 1, False, LEX, True)


# ---- ZREMRANGEBY* -----------------------------------------------------------
def _zremrange(c: Any, argv: list[bytes], rtype: int) -> Any:
    if rtype == RANK:
        start, end = _long(argv[2]), _long(argv[3])
    elif rtype == SCORE:
        srange = _score_range(argv[2], argv[3])
    else:
        lrange = _lex_range(argv[2], argv[3])
    db = c.db
    key = argv[1]
    z = _zget(db, key)
    if z is None:
        return 0
    if rtype == RANK:
        lo, hi = _rank_span(len(z), start, end, False)
    elif rtype == SCORE:
        lo, hi = z.score_span(*srange)
    else:
        lo, hi = z.lex_span(*lrange)
    n = z.remove_span(lo, hi)
    if n:
        _changed(db, key, z)
    return n


@command("zremrangebyrank", 4, "write", 1, 1, 1, group=G)
def zremrangebyrank(c: Any, argv: list[bytes]) -> Any:
    return _zremrange(c, argv, RANK)


@command("zremrangebyscore", 4, "write", 1, 1, 1, group=G)
def zremrangebyscore(c: Any, argv: list[bytes]) -> Any:
    return _zremrange(c, argv, SCORE)


@command("zremrangebylex", 4, "write", 1, 1, 1, group=G)
def zremrangebylex(c: Any, argv: list[bytes]) -> Any:
    return _zremrange(c, argv, LEX)


# ---- pops -------------------------------------------------------------------
def _pop_reply(c: Any, key: bytes, z: Any, highest: bool, emitkey: bool, count: int, nested: bool) -> Any:
    """Pop from the non-empty zset ``z`` at ``key`` and build genericZpopCommand's reply."""
    entries = z.pop(count, highest)
    _changed(c.db, key, z)
    if nested:
        pairs = [[m, s] for s, m in entries]
        return [key, pairs] if emitkey else pairs
    out: list[Any] = [key] if emitkey else []
    for s, m in entries:
        out.append(m)
        out.append(s)
    return out


def _generic_zpop(
    c: Any, keys: list[bytes], highest: bool, emitkey: bool, count: int, nested: bool, nil_when_empty: bool
) -> Any:
    db = c.db
    for key in keys:
        z = _zget(db, key)
        if z is None:
            continue
        if count == 0:
            return []
        return _pop_reply(c, key, z, highest, emitkey, 1 if count == -1 else count, nested)
    return NULL_ARRAY if nil_when_empty else []


def _zpop(c: Any, argv: list[bytes], highest: bool) -> Any:
    if len(argv) > 3:
        raise SYNTAX
    count = -1
    if len(argv) == 3:
        count = _range_long(argv[2], 0, INT64_MAX, MUST_BE_POSITIVE)
    return _generic_zpop(c, [argv[1]], highest, False, count, c.resp > 2 and count != -1, False)


@command("zpopmin", -2, "write fast", 1, 1, 1, group=G)
def zpopmin(c: Any, argv: list[bytes]) -> Any:
    return _zpop(c, argv, False)


@command("zpopmax", -2, "write fast", 1, 1, 1, group=G)
def zpopmax(c: Any, argv: list[bytes]) -> Any:
    return _zpop(c, argv, True)


def _blocking_zpop(c: Any, keys: list[bytes], highest: bool, timeout_arg: bytes, count: int, nested: bool) -> Any:
    timeout = parse_timeout_ms(timeout_arg)
    # re-run for a client already blocked: keys of another type are just not ready
    retry = getattr(c, "blocked", None) is not None
    db = c.db
    for key in keys:
        v = db.lookup(key)
        if v is None:
            continue
        if type(v) is bytes or v.rtype != b"zset":
            if retry:
                continue
            raise WRONGTYPE
        if not len(v):
            continue
        return _pop_reply(c, key, v, highest, True, 1 if count == -1 else count, nested)
    if not c.may_block:
        return NULL_ARRAY
    from ..dispatch import Block  # dispatch imports the command table

    return Block(list(keys), timeout / 1000.0, NULL_ARRAY)


@command("bzpopmin", -3, "write noscript blocking fast", 1, -2, 1, group=G)
def bzpopmin(c: Any, argv: list[bytes]) -> Any:
    return _blocking_zpop(c, argv[1:-1], False, argv[-1], -1, False)


@command("bzpopmax", -3, "write noscript blocking fast", 1, -2, 1, group=G)
def bzpopmax(c: Any, argv: list[bytes]) -> Any:
    return _blocking_zpop(c, argv[1:-1], True, argv[-1], -1, False)


def _zmpop(c: Any, argv: list[bytes], numkeys_idx: int, block: bool) -> Any:
    numkeys = _range_long(argv[numkeys_idx], 1, INT64_MAX, NUMKEYS_ERR)
    where_idx = numkeys_idx + numkeys + 1
    n = len(argv)
    if where_idx >= n:
        raise SYNTAX
    w = argv[where_idx].lower()
    if w == b"min":
        highest = False
    elif w == b"max":
        highest = True
    else:
        raise SYNTAX
    count = -1
    j = where_idx + 1
    while j < n:
        if count == -1 and argv[j].lower() == b"count" and j < n - 1:
            j += 1
            count = _range_long(argv[j], 1, INT64_MAX, COUNT_ERR)
        else:
            raise SYNTAX
        j += 1
    if count == -1:
        count = 1
    keys = argv[numkeys_idx + 1 : where_idx]
    if block:
        return _blocking_zpop(c, keys, highest, argv[1], count, True)
    return _generic_zpop(c, keys, highest, True, count, True, True)


@command("zmpop", -4, "write movablekeys", 0, 0, 0, group=G)
def zmpop(c: Any, argv: list[bytes]) -> Any:
    return _zmpop(c, argv, 1, False)


@command("bzmpop", -5, "write blocking movablekeys", 0, 0, 0, group=G)
def bzmpop(c: Any, argv: list[bytes]) -> Any:
    return _zmpop(c, argv, 2, True)


# ---- ZRANDMEMBER ------------------------------------------------------------
@command("zrandmember", -2, "readonly", 1, 1, 1, group=G)
def zrandmember(c: Any, argv: list[bytes]) -> Any:
    n = len(argv)
    if n >= 3:
        count = str2int(argv[2])
        if count is None:
            raise NOT_INTEGER
        if count < -INT64_MAX:
            raise RedisError(
                b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
            )
        withscores = False
        if n > 4 or (n == 4 and argv[3].lower() != b"withscores"):
            raise SYNTAX
        if n == 4:
            withscores = True
            if count < -(INT64_MAX // 2) or count > INT64_MAX // 2:
                raise RedisError(b"ERR value is out of range")
        z = _zget(c.db, argv[1])
        if z is None or count == 0:
            return []
        size = len(z)
        if count < 0 or count == 1:
            entries = z.random_entries(-count if count < 0 else 1)
        elif count >= size:
            entries = z.entries(0, size, True)  # Redis walks the whole zset from its tail
        else:
            entries = z.random_unique(count)
        return _emit(c, entries, withscores)
    z = _zget(c.db, argv[1])
    if z is None:
        return None
    return z.random_entries(1)[0][1]


# ---- ZUNION / ZINTER / ZDIFF ------------------------------------------------
UNION, INTER, DIFF = 1, 2, 3
SUM, MIN, MAX = 0, 1, 2


class _Src:
    """One input of a set operation: a zset, a plain set (scores 1) or nothing."""

    __slots__ = ("obj", "is_zset", "weight")

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.is_zset = obj is not None and obj.rtype == b"zset"
        self.weight = 1.0

    def __len__(self) -> int:
        return 0 if self.obj is None else len(self.obj)

    def items(self) -> Any:
        if self.is_zset:
            return self.obj.items()
        return ((1.0, m) for m in self.obj)

    def find(self, m: bytes) -> float | None:
        if self.is_zset:
            return self.obj.score(m)
        return 1.0 if m in self.obj else None


def _agg(t: float, v: float, mode: int) -> float:
    if mode == SUM:
        t = t + v
        return 0.0 if t != t else t
    if mode == MIN:
        return v if v < t else t
    return v if v > t else t


def _setop(c: Any, argv: list[bytes], name: str, dst: bytes | None, numkeys_idx: int, op: int, card: bool) -> Any:
    setnum = _long(argv[numkeys_idx])
    if setnum < 1:
        raise RedisError(f"ERR at least 1 input key is needed for '{name}' command")
    n = len(argv)
    if setnum > n - (numkeys_idx + 1):
        raise SYNTAX
    db = c.db
    srcs: list[_Src] = []
    j = numkeys_idx + 1
    for _ in range(setnum):
        v = db.lookup(argv[j])
        if v is not None and (type(v) is bytes or v.rtype not in (b"zset", b"set")):
            raise WRONGTYPE
        srcs.append(_Src(v))
        j += 1
    mode = SUM
    withscores = False
    limit = 0
    while j < n:
        remaining = n - j
        a = argv[j].lower()
        if op != DIFF and not card and remaining >= setnum + 1 and a == b"weights":
            j += 1
            for src in srcs:  # (not ``s``: that name is a score below, and compiled code keeps one type per name)
                src.weight = parse_score(argv[j], WEIGHT_ERR)
                j += 1
        elif op != DIFF and not card and remaining >= 2 and a == b"aggregate":
            ag = argv[j + 1].lower()
            if ag == b"sum":
                mode = SUM
            elif ag == b"min":
                mode = MIN
            elif ag == b"max":
                mode = MAX
            else:
                raise SYNTAX
            j += 2
        elif dst is None and not card and a == b"withscores":
            withscores = True
            j += 1
        elif card and remaining >= 2 and a == b"limit":
            limit = _range_long(argv[j + 1], 0, INT64_MAX, LIMIT_NEG)
            j += 2
        else:
            raise SYNTAX
    if op != DIFF:
        srcs.sort(key=len)  # stable, like glibc's merge-sort qsort
    result: list[Entry] = []
    count = 0
    if op == INTER:
        first = srcs[0]
        if len(first):
            others = srcs[1:]
            w0 = first.weight
            for s, m in first.items():
                score = w0 * s
                if score != score:
                    score = 0.0
                for o in others:
                    v = o.find(m)
                    if v is None:
                        break
                    score = _agg(score, v * o.weight, mode)
                else:
                    if card:
                        count += 1
                        if limit and count >= limit:
                            break
                    else:
                        result.append((score, m))
    elif op == UNION:
        acc: dict[bytes, float] = {}
        for src in srcs:
            if not len(src):
                continue
            w = src.weight
            for s, m in src.items():
                score = w * s
                if score != score:
                    score = 0.0
                cur = acc.get(m)
                acc[m] = score if cur is None else _agg(cur, score, mode)
        result = [(s, m) for m, s in acc.items()]
    else:
        first = srcs[0]
        if len(first):
            others = [o for o in srcs[1:] if len(o)]
            for s, m in first.items():
                for o in others:
                    if o.find(m) is not None:
                        break
                else:
                    result.append((s, m))
    if card:
        return count
    result.sort()
    if dst is not None:
        return _store(db, dst, result)
    return _emit(c, result, withscores)


@command("zunionstore", -4, "write denyoom movablekeys", 1, 1, 1, group=G)
def zunionstore(c: Any, argv: list[bytes]) -> Any:
    return _setop(c, argv, "zunionstore", argv[1], 2, UNION, False)


@command("zinterstore", -4, "write denyoom movablekeys", 1, 1, 1, group=G)
def zinterstore(c: Any, argv: list[bytes]) -> Any:
    return _setop(c, argv, "zinterstore", argv[1], 2, INTER, False)


@command("zdiffstore", -4, "write denyoom movablekeys", 1, 1, 1, group=G)
def zdiffstore(c: Any, argv: list[bytes]) -> Any:
    return _setop(c, argv, "zdiffstore", argv[1], 2, DIFF, False)


@command("zunion", -3, "readonly movablekeys", 0, 0, 0, group=G)
def zunion(c: Any, argv: list[bytes]) -> Any:
    return _setop(c, argv, "zunion", None, 1, UNION, False)


@command("zinter", -3, "readonly movablekeys", 0, 0, 0, group=G)
def zinter(c: Any, argv: list[bytes]) -> Any:
    return _setop(c, argv, "zinter", None, 1, INTER, False)


@command("zdiff", -3, "readonly movablekeys", 0, 0, 0, group=G)
def zdiff(c: Any, argv: list[bytes]) -> Any:
    return _setop(c, argv, "zdiff", None, 1, DIFF, False)


@command("zintercard", -3, "readonly movablekeys", 0, 0, 0, group=G)
def zintercard(c: Any, argv: list[bytes]) -> Any:
    return _setop(c, argv, "zintercard", None, 1, INTER, True)


# ---- ZSCAN ------------------------------------------------------------------
def parse_scan_cursor(b: bytes) -> int:
    """strtoul(base 10) as Redis's parseScanCursorOrReply uses it."""
    nul = b.find(b"\0")
    if nul >= 0:
        b = b[:nul]
    if not b:
        return 0
    if b[0] in _WS:
        raise INVALID_CURSOR
    neg = b[0] == 45
    s = b[1:] if b[0] in (43, 45) else b
    if not s.isdigit():
        raise INVALID_CURSOR
    v = int(s)
    if v > 2**64 - 1:
        raise INVALID_CURSOR
    return (-v) % 2**64 if neg else v


_SIGN = 1 << 63
_MASK = (1 << 64) - 1


def _score_cursor(score: float) -> int:
    """An order-preserving map of doubles onto unsigned 64-bit cursors (never 0)."""
    if score == 0.0:
        score = 0.0
    bits = int.from_bytes(struct.pack(">d", score), "big")
    return bits ^ _MASK if bits & _SIGN else bits | _SIGN


def _cursor_score(cursor: int) -> float:
    bits = cursor ^ _SIGN if cursor & _SIGN else cursor ^ _MASK
    return struct.unpack(">d", bits.to_bytes(8, "big"))[0]


@command("zscan", -3, "readonly", 1, 1, 1, group=G)
def zscan(c: Any, argv: list[bytes]) -> Any:
    cursor = parse_scan_cursor(argv[2])
    z = _zget(c.db, argv[1])
    if z is None:
        return [b"0", []]
    count = 10
    match = None
    n = len(argv)
    i = 3
    while i < n:
        a = argv[i].lower()
        if a == b"count" and n - i >= 2:
            count = _long(argv[i + 1])
            if count < 1:
                raise SYNTAX
        elif a == b"match" and n - i >= 2:
            pat = argv[i + 1]
            match = None if pat == b"*" else compile_glob(pat)
        else:
            raise SYNTAX
        i += 2
    if z.encoding() == b"listpack":
        # Redis returns a listpack whole, whatever the cursor
        entries = z.entries(0, len(z))
        nxt = 0
    else:
        # the cursor is the next score, mapped onto 0..2**64-1 in order
        start: float | None = None
        if cursor:
            start = _cursor_score(cursor)
            if start != start:  # NaN bit patterns: before -inf or after +inf
                start = None if cursor < _SIGN else _INF
        entries, after = z.scan_page(start, count)
        nxt = 0 if after is None else _score_cursor(after)
    out: list[Any] = []
    fmt = z.scan_score
    for s, m in entries:
        if match is None or match(m):
            out.append(m)
            out.append(fmt(s))
    return [b"%d" % nxt, out]

"""List commands (t_list.c): pushes, pops, ranges, searches, moves and the
blocking pops.

Lists are :class:`respqueue.types.list.List` containers; commands use only
its small interface. Every mutation is followed by ``db.modified(key)``
(``db.add`` for a new list, ``db.delete`` once a list becomes empty), which
also wakes clients blocked on the key: the server re-runs their command.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import NO_SUCH_KEY, NOT_INTEGER, OUT_OF_RANGE, SYNTAX, TIMEOUT_NOT_FLOAT, wrong_args
from ..resp import NULL_ARRAY, OK, RedisError
from ..types.list import List
from .registry import command
from .util import INT64_MIN, index_span, parse_float, str2int

_POSITIVE = RedisError(b"ERR value is out of range, must be positive")
_RANK_ZERO = RedisError(
    b"ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... "
    b"or use negative to start from the end of the list"
)
_COUNT_NEGATIVE = RedisError(b"ERR COUNT can't be negative")
_MAXLEN_NEGATIVE = RedisError(b"ERR MAXLEN can't be negative")
_NUMKEYS = RedisError(b"ERR numkeys should be greater than 0")
_COUNT_POSITIVE = RedisError(b"ERR count should be greater than 0")
_TIMEOUT_NEGATIVE = RedisError(b"ERR timeout is negative")


# ---- argument parsing ---------------------------------------------------------
def _int(b: bytes) -> int:
    v = str2int(b)
    if v is None:
        raise NOT_INTEGER
    return v


def _int_or(b: bytes, err: RedisError, minimum: int) -> int:
    """getRangeLongFromObjectOrReply with a message: one error for both failures."""
    v = str2int(b)
    if v is None or v < minimum:
        raise err
    return v


def _where(b: bytes) -> bool:
    """LEFT/RIGHT -> True for the head."""
    low = b.lower()
    if low == b"left":
        return True
    if low == b"right":
        return False
    raise SYNTAX


def _timeout(b: bytes) -> float:
    """A blocking timeout in seconds, as Redis 7.0 reads it.

    Redis parses a long double and rounds ``ftval * 1000`` up to whole
    milliseconds: tiny positive values wait 1 ms, while values in (-1 ms, 0]
    mean "forever"; values whose milliseconds overflow int64 (inf, 1e16) are
    reported as negative. Returns seconds, 0 for forever.
    """
    v = parse_float(b, TIMEOUT_NOT_FLOAT)
    if math.isinf(v):
        raise _TIMEOUT_NEGATIVE
    f = v * 1000.0
    if f >= 9.2233720368547758e18:
        raise _TIMEOUT_NEGATIVE
    ms = math.ceil(f) if f >= 2.0 or f <= -2.0 else _small_ms(b, v)
    if ms < 0:
        raise _TIMEOUT_NEGATIVE
    if ms > 100 * 365 * 86400 * 1000:
        return 0.0  # a century: indistinguishable from forever, and safe for timers
    return ms / 1000.0


def _small_ms(b: bytes, v: float) -> int:
    """ceill(strtold(b) * 1000.0L) for |b| < 0.002 s, emulating x87 rounding."""
    from fractions import Fraction

    from .util import _parse_ld, _round_ld

    try:
        q = _parse_ld(b)
    except RedisError:
        q = _round_ld(Fraction(v))
    return math.ceil(_round_ld(q * 1000))


# ---- helpers -------------------------------------------------------------------
def _block(keys: list[bytes], timeout: float, timeout_reply: Any) -> Any:
    # imported here: dispatch imports the command table, which imports this module
    from ..dispatch import Block

    return Block(keys, timeout, timeout_reply)


def _get(c: Any, key: bytes) -> List | None:
    return c.db.lookup_type(key, List)


def _pop_done(db: Any, key: bytes, lst: List) -> None:
    """After removing elements from ``lst``: signal, and drop it if empty."""
    if len(lst) == 0:
        db.delete(key)
    else:
        db.modified(key)


def _push(c: Any, argv: list[bytes], left: bool, only_existing: bool) -> int:
    db = c.db
    key = argv[1]
    lst = db.lookup_type(key, List)
    if lst is None:
        if only_existing:
            return 0
        lst = List()
        n = lst.push_left(argv[2:]) if left else lst.push_right(argv[2:])
        db.add(key, lst)
        return n
    n = lst.push_left(argv[2:]) if left else lst.push_right(argv[2:])
    db.modified(key)
    return n


def _move(c: Any, src: bytes, dst: bytes, from_left: bool, to_left: bool) -> bytes | None:
    """LMOVE/RPOPLPUSH: pop from ``src``, push onto ``dst``; None if ``src`` is absent."""
    db = c.db
    slist = db.lookup_type(src, List)
    if slist is None:
        return None
    dlist = db.lookup_type(dst, List)
    value = slist.pop_one(from_left)
    if dlist is None:
        dlist = List((value,))
        db.add(dst, dlist)
    else:
        dlist.push_one(value, to_left)
        db.modified(dst)
    _pop_done(db, src, slist)
    return value


def _mpop(c: Any, keys: list[bytes], left: bool, count: int, retry: bool = False) -> Any:
    """The first non-empty list among ``keys``: [key, popped]; None if all empty."""
    db = c.db
    for key in keys:
        lst = _lookup_blocking(db, key, retry)
        if lst is not None:
            out = lst.pop_many(count, left)
            _pop_done(db, key, lst)
            return [key, out]
    return None


def _parse_mpop(argv: list[bytes], numkeys_idx: int) -> tuple[list[bytes], bool, int]:
    numkeys = _int_or(argv[numkeys_idx], _NUMKEYS, 1)
    where_idx = numkeys_idx + numkeys + 1
    if where_idx >= len(argv):
        raise SYNTAX
    left = _where(argv[where_idx])
    count = -1
    j = where_idx + 1
    n = len(argv)
    while j < n:
        if count == -1 and j + 1 < n and argv[j].lower() == b"count":
            j += 1
            count = _int_or(argv[j], _COUNT_POSITIVE, 1)
        else:
            raise SYNTAX
        j += 1
    return argv[numkeys_idx + 1 : where_idx], left, (1 if count == -1 else count)


# ---- pushes --------------------------------------------------------------------
@command("lpush", -3, "write denyoom fast", 1, 1, 1, group="list")
def lpush(c: Any, argv: list[bytes]) -> Any:
    return _push(c, argv, True, False)


@command("rpush", -3, "write denyoom fast", 1, 1, 1, group="list")
def rpush(c: Any, argv: list[bytes]) -> Any:
    return _push(c, argv, False, False)


@command("lpushx", -3, "write denyoom fast", 1, 1, 1, group="list")
def lpushx(c: Any, argv: list[bytes]) -> Any:
    return _push(c, argv, True, True)


@command("rpushx", -3, "write denyoom fast", 1, 1, 1, group="list")
def rpushx(c: Any, argv: list[bytes]) -> Any:
    return _push(c, argv, False, True)


@command("linsert", 5, "write denyoom", 1, 1, 1, group="list")
def linsert(c: Any, argv: list[bytes]) -> Any:
    where = argv[2].lower()
    if where == b"after":
        after = True
    elif where == b"before":
        after = False
    else:
        raise SYNTAX
    db = c.db
    key = argv[1]
    lst = db.lookup_type(key, List)
    if lst is None:
        return 0
    n = lst.insert(argv[3], argv[4], after)
    if n != -1:
        db.modified(key)
    return n


# ---- pops ----------------------------------------------------------------------
def _pop(c: Any, argv: list[bytes], left: bool) -> Any:
    n = len(argv)
    if n > 3:
        raise wrong_args(argv[0])
    count = -1
    if n == 3:
        count = _int_or(argv[2], _POSITIVE, 0)
    db = c.db
    key = argv[1]
    lst = db.lookup_type(key, List)
    if lst is None:
        return NULL_ARRAY if count != -1 else None
    if count == -1:
        v = lst.pop_one(left)
        _pop_done(db, key, lst)
        return v
    if count == 0:
        return []
    out = lst.pop_many(count, left)
    _pop_done(db, key, lst)
    return out


@command("lpop", -2, "write fast", 1, 1, 1, group="list")
def lpop(c: Any, argv: list[bytes]) -> Any:
    return _pop(c, argv, True)


@command("rpop", -2, "write fast", 1, 1, 1, group="list")
def rpop(c: Any, argv: list[bytes]) -> Any:
    return _pop(c, argv, False)


@command("lmpop", -4, "write movablekeys", 0, 0, 0, group="list")
def lmpop(c: Any, argv: list[bytes]) -> Any:
    keys, left, count = _parse_mpop(argv, 1)
    r = _mpop(c, keys, left, count)
    return NULL_ARRAY if r is None else r


@command("lmove", 5, "write denyoom", 1, 2, 1, group="list")
def lmove(c: Any, argv: list[bytes]) -> Any:
    from_left = _where(argv[3])
    to_left = _where(argv[4])
    return _move(c, argv[1], argv[2], from_left, to_left)


@command("rpoplpush", 3, "write denyoom", 1, 2, 1, group="list")
def rpoplpush(c: Any, argv: list[bytes]) -> Any:
    return _move(c, argv[1], argv[2], False, True)


# ---- reads ---------------------------------------------------------------------
@command("llen", 2, "readonly fast", 1, 1, 1, group="list")
def llen(c: Any, argv: list[bytes]) -> Any:
    lst = _get(c, argv[1])
    return 0 if lst is None else len(lst)


@command("lindex", 3, "readonly", 1, 1, 1, group="list")
def lindex(c: Any, argv: list[bytes]) -> Any:
    lst = _get(c, argv[1])
    if lst is None:
        return None
    i = _int(argv[2])
    n = len(lst)
    if i < 0:
        i += n
    if i < 0 or i >= n:
        return None
    return lst.get(i)


@command("lrange", 4, "readonly", 1, 1, 1, group="list")
def lrange(c: Any, argv: list[bytes]) -> Any:
    start = _int(argv[2])
    end = _int(argv[3])
    lst = _get(c, argv[1])
    if lst is None:
        return []
    span = index_span(len(lst), start, end)
    return [] if span is None else lst.range(*span)


@command("lpos", -3, "readonly", 1, 1, 1, group="list")
def lpos(c: Any, argv: list[bytes]) -> Any:
    rank = 1
    count = -1
    maxlen = 0
    j = 3
    n = len(argv)
    while j < n:
        opt = argv[j].lower()
        more = j + 1 < n
        if opt == b"rank" and more:
            j += 1
            rank = _int(argv[j])
            if rank == 0:
                raise _RANK_ZERO
        elif opt == b"count" and more:
            j += 1
            count = _int_or(argv[j], _COUNT_NEGATIVE, 0)
        elif opt == b"maxlen" and more:
            j += 1
            maxlen = _int_or(argv[j], _MAXLEN_NEGATIVE, 0)
        else:
            raise SYNTAX
        j += 1
    from_tail = rank < 0
    if from_tail:
        if rank == INT64_MIN:
            # Redis 7.0 negates LONG_MIN into itself: every match from the tail
            # qualifies and the COUNT limit never triggers
            rank = 1
            if count > 0:
                count = 0
        else:
            rank = -rank
    lst = _get(c, argv[1])
    if lst is None:
        return [] if count != -1 else None
    if count == -1:
        found = lst.positions(argv[2], rank, 1, maxlen, from_tail)
        return found[0] if found else None
    return lst.positions(argv[2], rank, count, maxlen, from_tail)


# ---- in-place writes -----------------------------------------------------------
@command("lset", 4, "write denyoom", 1, 1, 1, group="list")
def lset(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    key = argv[1]
    lst = db.lookup_type(key, List)
    if lst is None:
        raise NO_SUCH_KEY
    i = _int(argv[2])
    n = len(lst)
    if i < 0:
        i += n
    if i < 0 or i >= n:
        raise OUT_OF_RANGE
    lst.set(i, argv[3])
    db.modified(key)
    return OK


@command("ltrim", 4, "write", 1, 1, 1, group="list")
def ltrim(c: Any, argv: list[bytes]) -> Any:
    start = _int(argv[2])
    end = _int(argv[3])
    db = c.db
    key = argv[1]
    lst = db.lookup_type(key, List)
    if lst is None:
        return OK
    n = len(lst)
    span = index_span(n, start, end)
    if span is None:
        lst.trim(1, 0)
    else:
        start, end = span
        if start == 0 and end == n - 1:
            db.modified(key)
            return OK
        lst.trim(start, end)
    _pop_done(db, key, lst)
    return OK


@command("lrem", 4, "write", 1, 1, 1, group="list")
def lrem(c: Any, argv: list[bytes]) -> Any:
    count = _int(argv[2])
    db = c.db
    key = argv[1]
    lst = db.lookup_type(key, List)
    if lst is None:
        return 0
    removed = lst.remove(argv[3], count)
    if removed:
        _pop_done(db, key, lst)
    return removed


# ---- blocking ------------------------------------------------------------------
def _retrying(c: Any) -> bool:
    """True when the server re-runs a blocked command because a key changed.

    Redis then serves only keys holding lists: a key that became another
    type leaves the client blocked instead of failing it with WRONGTYPE.
    """
    return getattr(c, "blocked", None) is not None


def _serve_order(c: Any, keys: list[bytes], retry: bool) -> list[bytes]:
    """The keys to try, in order. On a re-run Redis serves the client from the
    key that became ready, not from the first non-empty key in argv order; the
    server tells us which one if its block state carries ``ready_key``."""
    if retry:
        rk = getattr(c.blocked, "ready_key", None)
        if rk is not None and rk in keys:
            return [rk]
    return keys


def _lookup_blocking(db: Any, key: bytes, retry: bool) -> List | None:
    if retry:
        v = db.lookup(key)
        return v if isinstance(v, List) else None
    return db.lookup_type(key, List)


def _bpop(c: Any, argv: list[bytes], left: bool) -> Any:
    timeout = _timeout(argv[-1])
    db = c.db
    keys = argv[1:-1]
    retry = _retrying(c)
    for key in _serve_order(c, keys, retry):
        lst = _lookup_blocking(db, key, retry)
        if lst is not None:
            v = lst.pop_one(left)
            _pop_done(db, key, lst)
            return [key, v]
    if not c.may_block:
        return NULL_ARRAY
    return _block(list(dict.fromkeys(keys)), timeout, NULL_ARRAY)


@command("blpop", -3, "write noscript blocking", 1, -2, 1, group="list")
def blpop(c: Any, argv: list[bytes]) -> Any:
    return _bpop(c, argv, True)


@command("brpop", -3, "write noscript blocking", 1, -2, 1, group="list")
def brpop(c: Any, argv: list[bytes]) -> Any:
    return _bpop(c, argv, False)


def _bmove(c: Any, src: bytes, dst: bytes, from_left: bool, to_left: bool, timeout: float) -> Any:
    if _lookup_blocking(c.db, src, _retrying(c)) is not None:
        return _move(c, src, dst, from_left, to_left)
    if not c.may_block:
        return None
    return _block([src], timeout, NULL_ARRAY)


@command("blmove", 6, "write denyoom noscript blocking", 1, 2, 1, group="list")
def blmove(c: Any, argv: list[bytes]) -> Any:
    from_left = _where(argv[3])
    to_left = _where(argv[4])
    timeout = _timeout(argv[5])
    return _bmove(c, argv[1], argv[2], from_left, to_left, timeout)


@command("brpoplpush", 4, "write denyoom noscript blocking", 1, 2, 1, group="list")
def brpoplpush(c: Any, argv: list[bytes]) -> Any:
    timeout = _timeout(argv[3])
    return _bmove(c, argv[1], argv[2], False, True, timeout)


@command("blmpop", -5, "write blocking movablekeys", 0, 0, 0, group="list")
def blmpop(c: Any, argv: list[bytes]) -> Any:
    keys, left, count = _parse_mpop(argv, 2)
    timeout = _timeout(argv[1])
    retry = _retrying(c)
    r = _mpop(c, _serve_order(c, keys, retry), left, count, retry)
    if r is not None:
        return r
    if not c.may_block:
        return NULL_ARRAY
    return _block(list(dict.fromkeys(keys)), timeout, NULL_ARRAY)

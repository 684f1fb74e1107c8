"""Set commands (t_set.c): SADD, SREM, SMEMBERS, SPOP, SINTER, SUNION, SDIFF, SSCAN..."""

from __future__ import annotations

from typing import Any

from ..errors import NOT_INTEGER, SYNTAX
from ..resp import RedisError, SetReply
from ..types.set import MAX_INTSET_ENTRIES, Set, str2int
from .hashes import EMPTY_SCAN_CURSOR, RANGE_LONG, parse_scan_cursor, parse_scan_options
from .registry import command
from .util import INT64_MIN, eq

POSITIVE = RedisError(b"ERR value is out of range, must be positive")
NUMKEYS = RedisError(b"ERR numkeys should be greater than 0")
TOO_MANY_KEYS = RedisError(b"ERR Number of keys can't be greater than number of args")
LIMIT_NEGATIVE = RedisError(b"ERR LIMIT can't be negative")


def _intset_order(ms: set[bytes]) -> list[bytes]:
    """Members of a set Redis would build from ``ms`` (one SADD at a time), in its order."""
    if len(ms) <= MAX_INTSET_ENTRIES:
        try:
            return sorted(ms, key=_intkey)
        except ValueError:
            pass
    return list(ms)


def _intkey(m: bytes) -> int:
    v = str2int(m)
    if v is None:
        raise ValueError
    return v


# ---- single-key commands ---------------------------------------------------------
@command("sadd", -3, "write denyoom fast", 1, 1, 1, group="set")
def sadd(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    key = argv[1]
    s = db.lookup_type(key, Set)
    if s is None:
        s = Set.from_members(argv[2:])
        db.add(key, s)
        return len(s)
    n = s.add_many(argv[2:])
    if n:
        db.modified(key)
    return n


@command("srem", -3, "write fast", 1, 1, 1, group="set")
def srem(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    key = argv[1]
    s = db.lookup_type(key, Set)
    if s is None:
        return 0
    n = s.remove_many(argv[2:])
    if n:
        if not len(s):
            db.delete(key)
        else:
            db.modified(key)
    return n


@command("smembers", 2, "readonly", 1, 1, 1, group="set")
def smembers(c: Any, argv: list[bytes]) -> Any:
    s = c.db.lookup_type(argv[1], Set)
    return SetReply() if s is None else SetReply(s.members())


@command("sismember", 3, "readonly fast", 1, 1, 1, group="set")
def sismember(c: Any, argv: list[bytes]) -> Any:
    s = c.db.lookup_type(argv[1], Set)
    return 1 if s is not None and argv[2] in s else 0


@command("smismember", -3, "readonly fast", 1, 1, 1, group="set")
def smismember(c: Any, argv: list[bytes]) -> Any:
    s = c.db.lookup_type(argv[1], Set)
    if s is None:
        return [0] * (len(argv) - 2)
    return [1 if m in s else 0 for m in argv[2:]]


@command("scard", 2, "readonly fast", 1, 1, 1, group="set")
def scard(c: Any, argv: list[bytes]) -> Any:
    s = c.db.lookup_type(argv[1], Set)
    return 0 if s is None else len(s)


@command("spop", -2, "write fast", 1, 1, 1, group="set")
def spop(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    key = argv[1]
    n = len(argv)
    if n == 2:
        s = db.lookup_type(key, Set)
        if s is None:
            return None
        m = s.pop_random()
        if not len(s):
            db.delete(key)
        else:
            db.modified(key)
        return m
    if n > 3:
        raise SYNTAX
    count = str2int(argv[2])
    if count is None or count < 0:
        raise POSITIVE
    s = db.lookup_type(key, Set)
    if s is None or count == 0:
        return SetReply()
    if count >= len(s):
        # Redis replies with SUNION of the set, which re-encodes it
        out = _intset_order(s.view())
        db.delete(key)
        return SetReply(out)
    out = s.pop_many(count)
    db.modified(key)
    return SetReply(out)


@command("srandmember", -2, "readonly", 1, 1, 1, group="set")
def srandmember(c: Any, argv: list[bytes]) -> Any:
    n = len(argv)
    if n == 2:
        s = c.db.lookup_type(argv[1], Set)
        return None if s is None else s.random_member()
    if n > 3:
        raise SYNTAX
    l = str2int(argv[2])  # noqa: E741
    if l is None:
        raise NOT_INTEGER
    if l == INT64_MIN:
        raise RANGE_LONG
    s = c.db.lookup_type(argv[1], Set)
    if s is None or l == 0:
        return []
    if l < 0 or l == 1:
        return s.random_members(-l if l < 0 else 1)
    if l >= len(s):
        return s.members()
    return s.random_unique(l)


@command("smove", 4, "write fast", 1, 2, 1, group="set")
def smove(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    srckey, dstkey, m = argv[1], argv[2], argv[3]
    src = db.lookup(srckey)
    dst = db.lookup(dstkey)
    if src is None:
        return 0
    src = db.lookup_type(srckey, Set)
    if dst is not None:
        dst = db.lookup_type(dstkey, Set)
    if src is dst:
        return 1 if m in src else 0
    if not src.remove(m):
        return 0
    if not len(src):
        db.delete(srckey)
    else:
        db.modified(srckey)
    if dst is None:
        dst = Set()
        dst.add(m)
        db.add(dstkey, dst)
    elif dst.add(m):
        db.modified(dstkey)
    return 1


@command("sscan", -3, "readonly", 1, 1, 1, group="set")
def sscan(c: Any, argv: list[bytes]) -> Any:
    cursor = parse_scan_cursor(argv[2])
    s = c.db.lookup_type(argv[1], Set)
    if s is None:
        return [EMPTY_SCAN_CURSOR, []]
    count, match = parse_scan_options(argv, 3)
    nxt, ms = s.scan(cursor, count)
    if match is not None:
        ms = [m for m in ms if match(m)]
    return [b"%d" % nxt, ms]


# ---- multi-key algebra -------------------------------------------------------------
def _sets(c: Any, keys: list[bytes]) -> list[Set | None]:
    """The sets at ``keys`` (None where absent); WRONGTYPE if any key is not a set."""
    lt = c.db.lookup_type
    return [lt(k, Set) for k in keys]


def _inter(sets: list[Set | None]) -> tuple[set[bytes], bool] | None:
    """(members, ordered-like-an-intset) of the intersection, or None if a key is missing."""
    if any(s is None for s in sets):
        return None
    ss: list[Set] = sorted(sets, key=len)  # type: ignore[arg-type]
    small = ss[0]
    res = small.view().intersection(*(s.view() for s in ss[1:]))
    return res, small.intset


def _store(c: Any, dstkey: bytes, res: set[bytes] | None, force_ht: bool = False) -> int:
    db = c.db
    if not res:
        db.delete(dstkey)
        return 0
    db.set(dstkey, Set.from_members(res, force_ht))
    return len(res)


@command("sinter", -2, "readonly", 1, -1, 1, group="set")
def sinter(c: Any, argv: list[bytes]) -> Any:
    r = _inter(_sets(c, argv[1:]))
    if r is None:
        return SetReply()
    res, intset = r
    if intset:
        return SetReply(sorted(res, key=int))
    return SetReply(res)


@command("sinterstore", -3, "write denyoom", 1, -1, 1, group="set")
def sinterstore(c: Any, argv: list[bytes]) -> Any:
    r = _inter(_sets(c, argv[2:]))
    return _store(c, argv[1], None if r is None else r[0])


@command("sintercard", -3, "readonly movablekeys", 0, 0, 0, group="set")
def sintercard(c: Any, argv: list[bytes]) -> Any:
    numkeys = str2int(argv[1])
    if numkeys is None or numkeys <= 0:
        raise NUMKEYS
    if numkeys > len(argv) - 2:
        raise TOO_MANY_KEYS
    limit = 0
    j = 2 + numkeys
    while j < len(argv):
        if eq(argv[j], b"limit") and j + 1 < len(argv):
            v = str2int(argv[j + 1])
            if v is None or v < 0:
                raise LIMIT_NEGATIVE
            limit = v
            j += 2
        else:
            raise SYNTAX
    sets = _sets(c, argv[2 : 2 + numkeys])
    if any(s is None for s in sets):
        return 0
    ss: list[Set] = sorted(sets, key=len)  # type: ignore[arg-type]
    small = ss[0]
    if len(ss) == 1:
        n = len(small)
        return min(n, limit) if limit else n
    if not limit or limit >= len(small):
        return len(small.view().intersection(*(s.view() for s in ss[1:])))
    others = [s.view() for s in ss[1:]]
    n = 0
    for m in small.view():
        for o in others:
            if m not in o:
                break
        else:
            n += 1
            if n >= limit:
                break
    return n


def _union(sets: list[Set | None]) -> set[bytes]:
    return set().union(*(s.view() for s in sets if s is not None))


def _diff(sets: list[Set | None]) -> tuple[set[bytes], bool]:
    """(members, force hashtable) of the difference, encoded as Redis 7.0 would."""
    first = sets[0]
    if first is None:
        return set(), False
    others = [s.view() for s in sets[1:] if s is not None]
    res = first.view().difference(*others)
    # Redis picks one of two algorithms; the second first copies the whole
    # first set into the result, which converts it for good if that is large
    # or holds a non-integer.
    n0 = len(first)
    one = n0 * (1 + len(others)) // 2
    two = n0 + sum(len(o) for o in others)
    force_ht = False
    if one > two and res:
        force_ht = n0 > MAX_INTSET_ENTRIES or any(str2int(m) is None for m in first.view())
    return res, force_ht


@command("sunion", -2, "readonly", 1, -1, 1, group="set")
def sunion(c: Any, argv: list[bytes]) -> Any:
    return SetReply(_intset_order(_union(_sets(c, argv[1:]))))


@command("sunionstore", -3, "write denyoom", 1, -1, 1, group="set")
def sunionstore(c: Any, argv: list[bytes]) -> Any:
    return _store(c, argv[1], _union(_sets(c, argv[2:])))


@command("sdiff", -2, "readonly", 1, -1, 1, group="set")
def sdiff(c: Any, argv: list[bytes]) -> Any:
    res, force_ht = _diff(_sets(c, argv[1:]))
    return SetReply(list(res) if force_ht else _intset_order(res))


@command("sdiffstore", -3, "write denyoom", 1, -1, 1, group="set")
def sdiffstore(c: Any, argv: list[bytes]) -> Any:
    res, force_ht = _diff(_sets(c, argv[2:]))
    return _store(c, argv[1], res, force_ht)

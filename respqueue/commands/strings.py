"""String commands (t_string): GET, SET and friends, counters, ranges."""

from __future__ import annotations

from typing import Any

from ..errors import NOT_INTEGER, OVERFLOW, SYNTAX, WRONGTYPE
from ..keyspace import mstime
from ..resp import OK, RedisError
from .registry import command
from .util import INT64_MAX, INT64_MIN, long_double_add, str2int

_MAX_STRING = 512 * 1024 * 1024


# OBJECT ENCODING depends on how Redis built a string, not only on its bytes:
# APPEND and SETRANGE leave a "raw" string, INCRBYFLOAT an "embstr" even for "3".
# Remembered per key together with the value object it applies to (held, so that
# its identity cannot be reused); bounded, dropped wholesale when too big.
_ENC: dict[tuple[int, bytes], tuple[bytes, bytes]] = {}
_ENC_LIMIT = 64 * 1024 * 1024
_enc_bytes = 0


def mark_encoding(db: Any, key: bytes, value: bytes, enc: bytes) -> None:
    global _enc_bytes
    if len(value) <= 1:
        return  # CPython shares 0- and 1-byte bytes objects: identity says nothing
    if len(_ENC) >= 65536 or _enc_bytes > _ENC_LIMIT:
        _ENC.clear()
        _enc_bytes = 0
    _ENC[(db.index, key)] = (value, enc)
    _enc_bytes += len(value)


def forced_encoding(db: Any, key: bytes, value: bytes) -> bytes | None:
    """The encoding APPEND/SETRANGE/INCRBYFLOAT gave ``value`` at ``key``, if any."""
    e = _ENC.get((db.index, key))
    if e is not None and e[0] is value:
        return e[1]
    return None


def carry_encoding(srcdb: Any, src: bytes, dstdb: Any, dst: bytes, value: Any) -> None:
    """RENAME/COPY/MOVE keep the value's encoding: move its mark along."""
    if _ENC and type(value) is bytes:
        e = forced_encoding(srcdb, src, value)
        if e is not None:
            mark_encoding(dstdb, dst, value, e)


def _invalid_expire(name: str) -> RedisError:
    return RedisError(f"ERR invalid expire time in '{name}' command")


def _expire_at(unit: bytes, val: bytes, name: str) -> int:
    """Absolute expiry in ms for EX/PX/EXAT/PXAT ``val``."""
    v = str2int(val)
    if v is None:
        raise NOT_INTEGER
    if v <= 0:
        raise _invalid_expire(name)
    if unit in (b"ex", b"exat"):
        if v > INT64_MAX // 1000:
            raise _invalid_expire(name)
        v *= 1000
    if unit in (b"ex", b"px"):
        v += mstime()
        if v > INT64_MAX:
            raise _invalid_expire(name)
    return v


@command("get", 2, "readonly fast", 1, 1, 1, group="string")
def get(c: Any, argv: list[bytes]) -> Any:
    return c.db.lookup_string(argv[1])


_UNITS = (b"ex", b"px", b"exat", b"pxat")


def _parse_set_flags(argv: list[bytes], for_set: bool) -> tuple[int, tuple[bytes, bytes] | None]:
    """Redis's parseExtendedStringArgumentsOrReply for SET (for_set) and GETEX.

    Returns (flags, (unit, value) or None). A repeated option is accepted (the
    last expire wins) as long as it does not conflict with another one.
    """
    flags = 0
    expire = None
    unit = b""
    i = 3 if for_set else 2
    n = len(argv)
    while i < n:
        opt = argv[i].lower()
        if for_set and opt == b"nx" and not flags & _XX:
            flags |= _NX
        elif for_set and opt == b"xx" and not flags & _NX:
            flags |= _XX
        elif for_set and opt == b"get":
            flags |= _GET
        elif for_set and opt == b"keepttl" and not flags & _PERSIST and not unit:
            flags |= _KEEPTTL
        elif not for_set and opt == b"persist" and not unit and not flags & _KEEPTTL:
            flags |= _PERSIST
        elif opt in _UNITS and not flags & (_KEEPTTL | _PERSIST) and unit in (b"", opt) and i + 1 < n:
            unit = opt
            i += 1
            expire = (opt, argv[i])
        else:
            raise SYNTAX
        i += 1
    return flags, expire


_NX, _XX, _GET, _KEEPTTL, _PERSIST = 1, 2, 4, 8, 16


@command("set", -3, "write denyoom", 1, 1, 1, group="string")
def set_(c: Any, argv: list[bytes]) -> Any:
    key, value = argv[1], argv[2]
    if len(argv) == 3:
        c.db.set(key, value)
        return OK
    if len(argv) == 5 and (argv[3] == b"PX" or argv[3] == b"px"):
        # fast path: SET key value PX ms (lock keys)
        when = _expire_at(b"px", argv[4], "set")
        db = c.db
        db.lookup(key)  # as the general path: may expire the old value
        db.set(key, value)
        db.set_expire(key, when)
        return OK
    flags, expire = _parse_set_flags(argv, True)
    when = _expire_at(expire[0], expire[1], "set") if expire is not None else -1
    db = c.db
    old = db.lookup(key)
    get_old = flags & _GET
    if get_old and old is not None and type(old) is not bytes:
        raise WRONGTYPE
    if (flags & _NX and old is not None) or (flags & _XX and old is None):
        return old if get_old else None
    db.set(key, value, bool(flags & _KEEPTTL))
    if when != -1:
        db.set_expire(key, when)
    return old if get_old else OK


@command("setnx", 3, "write denyoom fast", 1, 1, 1, group="string")
def setnx(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    if db.lookup(argv[1]) is not None:
        return 0
    db.set(argv[1], argv[2])
    return 1


def _setex(c: Any, argv: list[bytes], unit: bytes, name: str) -> Any:
    when = _expire_at(unit, argv[2], name)
    db = c.db
    db.set(argv[1], argv[3])
    db.set_expire(argv[1], when)
    return OK


@command("setex", 4, "write denyoom", 1, 1, 1, group="string")
def setex(c: Any, argv: list[bytes]) -> Any:
    return _setex(c, argv, b"ex", "setex")


@command("psetex", 4, "write denyoom", 1, 1, 1, group="string")
def psetex(c: Any, argv: list[bytes]) -> Any:
    return _setex(c, argv, b"px", "psetex")


@command("getset", 3, "write denyoom fast", 1, 1, 1, group="string")
def getset(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    old = db.lookup_string(argv[1])
    db.set(argv[1], argv[2])
    return old


@command("getdel", 2, "write fast", 1, 1, 1, group="string")
def getdel(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    old = db.lookup_string(argv[1])
    if old is not None:
        db.delete(argv[1])
    return old


@command("getex", -2, "write fast", 1, 1, 1, group="string")
def getex(c: Any, argv: list[bytes]) -> Any:
    key = argv[1]
    flags, expire = _parse_set_flags(argv, False)
    db = c.db
    v = db.lookup_string(key)
    if v is None:
        return None
    if expire is not None:
        at = _expire_at(expire[0], expire[1], "getex")
        if expire[0] in (b"exat", b"pxat") and at <= mstime():
            db.delete(key)
        else:
            db.set_expire(key, at)
    elif flags & _PERSIST:
        db.persist(key)
    return v


@command("mget", -2, "readonly fast", 1, -1, 1, group="string")
def mget(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    out = []
    for k in argv[1:]:
        v = db.lookup(k)
        out.append(v if type(v) is bytes else None)
    return out


@command("mset", -3, "write denyoom", 1, -1, 2, group="string")
def mset(c: Any, argv: list[bytes]) -> Any:
    if len(argv) % 2 == 0:
        raise RedisError("ERR wrong number of arguments for 'mset' command")
    db = c.db
    for i in range(1, len(argv), 2):
        db.set(argv[i], argv[i + 1])
    return OK


@command("msetnx", -3, "write denyoom", 1, -1, 2, group="string")
def msetnx(c: Any, argv: list[bytes]) -> Any:
    if len(argv) % 2 == 0:
        raise RedisError("ERR wrong number of arguments for 'msetnx' command")
    db = c.db
    for i in range(1, len(argv), 2):
        if db.lookup(argv[i]) is not None:
            return 0
    for i in range(1, len(argv), 2):
        db.set(argv[i], argv[i + 1])
    return 1


def _incr(c: Any, key: bytes, by: int) -> int:
    db = c.db
    v = db.lookup_string(key)
    if v is None:
        cur = 0
    else:
        cur = str2int(v)
        if cur is None:
            raise NOT_INTEGER
    new = cur + by
    if new > INT64_MAX or new < INT64_MIN:
        raise OVERFLOW
    db.set(key, b"%d" % new, keepttl=True)
    return new


@command("incr", 2, "write denyoom fast", 1, 1, 1, group="string")
def incr(c: Any, argv: list[bytes]) -> Any:
    return _incr(c, argv[1], 1)


@command("decr", 2, "write denyoom fast", 1, 1, 1, group="string")
def decr(c: Any, argv: list[bytes]) -> Any:
    return _incr(c, argv[1], -1)


@command("incrby", 3, "write denyoom fast", 1, 1, 1, group="string")
def incrby(c: Any, argv: list[bytes]) -> Any:
    by = str2int(argv[2])
    if by is None:
        raise NOT_INTEGER
    return _incr(c, argv[1], by)


@command("decrby", 3, "write denyoom fast", 1, 1, 1, group="string")
def decrby(c: Any, argv: list[bytes]) -> Any:
    by = str2int(argv[2])
    if by is None:
        raise NOT_INTEGER
    if by == INT64_MIN:
        raise RedisError("ERR decrement would overflow")
    return _incr(c, argv[1], -by)


@command("incrbyfloat", 3, "write denyoom fast", 1, 1, 1, group="string")
def incrbyfloat(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    v = db.lookup_string(argv[1])
    new = long_double_add(v, argv[2])
    db.set(argv[1], new, keepttl=True)
    mark_encoding(db, argv[1], new, b"embstr" if len(new) <= 44 else b"raw")
    return new


@command("append", 3, "write denyoom fast", 1, 1, 1, group="string")
def append(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    v = db.lookup_string(argv[1])
    new = argv[2] if v is None else v + argv[2]
    if len(new) > _MAX_STRING:
        raise RedisError("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    j = c.server.journal
    if j is not None and v is not None:
        j.string_range(db, argv[1], v, new, len(v), len(new))  # a large string: only its last chunks are written
    db.set(argv[1], new, keepttl=True)
    if v is not None:
        mark_encoding(db, argv[1], new, b"raw")
    return len(new)


@command("strlen", 2, "readonly fast", 1, 1, 1, group="string")
def strlen(c: Any, argv: list[bytes]) -> Any:
    v = c.db.lookup_string(argv[1])
    return 0 if v is None else len(v)


def _getrange(c: Any, argv: list[bytes]) -> Any:
    start = str2int(argv[2])
    end = str2int(argv[3])
    if start is None or end is None:
        raise NOT_INTEGER
    v = c.db.lookup_string(argv[1])
    if v is None:
        return b""
    n = len(v)
    if start < 0 and end < 0 and start > end:
        return b""
    if start < 0:
        start = n + start
    if end < 0:
        end = n + end
    if start < 0:
        start = 0
    if end < 0:
        end = 0
    if end >= n:
        end = n - 1
    if start > end or n == 0:
        return b""
    return v[start : end + 1]


@command("getrange", 4, "readonly", 1, 1, 1, group="string")
def getrange(c: Any, argv: list[bytes]) -> Any:
    return _getrange(c, argv)


@command("substr", 4, "readonly", 1, 1, 1, group="string")
def substr(c: Any, argv: list[bytes]) -> Any:
    return _getrange(c, argv)


@command("setrange", 4, "write denyoom", 1, 1, 1, group="string")
def setrange(c: Any, argv: list[bytes]) -> Any:
    off = str2int(argv[2])
    if off is None:
        raise NOT_INTEGER
    if off < 0:
        raise RedisError("ERR offset is out of range")
    val = argv[3]
    db = c.db
    v = old = db.lookup_string(argv[1])
    if v is None:
        if not val:
            return 0
        v = b""
    elif not val:
        return len(v)
    if off + len(val) > _MAX_STRING:
        raise RedisError("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    # one copy of the result (bytes(n) is calloc'ed: the padding costs no pass of its own)
    if len(v) <= off:
        new = b"".join((v, bytes(off - len(v)), val)) if len(v) < off else v + val
    else:
        mv = memoryview(v)  # slices without copies: the join makes the one copy
        new = b"".join((mv[:off], val, mv[off + len(val) :]))
        mv.release()
    j = c.server.journal
    if j is not None:
        # a large string: only the chunks in the changed range are written (a new key: the bytes
        # before ``off`` are zeros, which have no rows)
        j.string_range(db, argv[1], old, new, off if old is None else min(off, len(old)), off + len(val))
    db.set(argv[1], new, keepttl=True)
    mark_encoding(db, argv[1], new, b"raw")
    return len(new)

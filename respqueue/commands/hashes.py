"""Hash commands (t_hash.c): HSET, HGET, HGETALL, HINCRBY, HRANDFIELD, HSCAN...

Also the SCAN-family argument parsing shared with SSCAN (:func:`parse_scan_cursor`,
:func:`parse_scan_options`).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from ..errors import NOT_FLOAT, NOT_INTEGER, OVERFLOW, SYNTAX, wrong_args
from ..glob import compile_glob
from ..resp import OK, RedisError
from ..types.hash import Hash
from .registry import command
from .util import INT64_MAX, INT64_MIN, eq, long_double_add, str2int

HASH_NOT_INT = RedisError(b"ERR hash value is not an integer")
HASH_NOT_FLOAT = RedisError(b"ERR hash value is not a float")
INCR_NAN_INF = RedisError(b"ERR value is NaN or Infinity")
INVALID_CURSOR = RedisError(b"ERR invalid cursor")
VALUE_OUT_OF_RANGE = RedisError(b"ERR value is out of range")
RANGE_LONG = RedisError(b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")

_SPACE = b" \t\n\r\x0b\x0c"


# ---- SCAN-family helpers (shared with SSCAN) --------------------------------
def parse_scan_cursor(b: bytes) -> int:
    """A SCAN cursor as Redis reads it (strtoul, base 10, no leading space)."""
    if not b:
        return 0
    if b[0] in _SPACE:
        raise INVALID_CURSOR
    s = b
    neg = False
    if s[0] in b"+-":
        neg = s[0] == 45
        s = s[1:]
    if not s.isdigit():
        raise INVALID_CURSOR
    v = int(s)
    if v > 0xFFFFFFFFFFFFFFFF:
        raise INVALID_CURSOR
    if neg:
        v = (-v) & 0xFFFFFFFFFFFFFFFF
    return v


def parse_scan_options(argv: list[bytes], start: int) -> tuple[int, Callable[[bytes], bool] | None]:
    """COUNT and MATCH of HSCAN/SSCAN (TYPE is a syntax error there)."""
    count = 10
    match = None
    i = start
    n = len(argv)
    while i < n:
        opt = argv[i]
        if n - i < 2:
            raise SYNTAX
        if eq(opt, b"count"):
            v = str2int(argv[i + 1])
            if v is None:
                raise NOT_INTEGER
            if v < 1:
                raise SYNTAX
            count = v
        elif eq(opt, b"match"):
            pat = argv[i + 1]
            match = None if pat == b"*" else compile_glob(pat)
        else:
            raise SYNTAX
        i += 2
    return count, match


EMPTY_SCAN_CURSOR = b"0"


# ---- helpers ------------------------------------------------------------------
def _lookup(c: Any, key: bytes) -> Hash | None:
    return c.db.lookup_type(key, Hash)


def _ld_text(b: bytes, err: RedisError) -> str:
    """Validate ``b`` as Redis's string2ld does; return text Decimal can read."""
    if not b or len(b) >= 5 * 1024 or b[0] in _SPACE or b[-1] in _SPACE or b"_" in b:
        raise err
    try:
        s = b.decode("ascii")
    except UnicodeDecodeError:
        raise err from None
    try:
        d = Decimal(s)
    except InvalidOperation:
        if "0x" not in s.lower():
            raise err from None
        try:
            d = Decimal(float.fromhex(s))
        except (ValueError, OverflowError):
            raise err from None
        s = str(d)
    if d.is_nan():
        raise err
    if d.is_finite() and d != 0 and not (-4951 <= d.adjusted() <= 4931):
        raise err  # strtold overflow / underflow (ERANGE)
    return s


# ---- commands -----------------------------------------------------------------
@command("hset", -4, "write denyoom fast", 1, 1, 1, group="hash")
def hset(c: Any, argv: list[bytes]) -> Any:
    if len(argv) % 2:
        raise wrong_args(argv[0])
    db = c.db
    key = argv[1]
    h = db.lookup_type(key, Hash)
    if h is None:
        h = Hash()
        n = h.set_pairs(argv, 2)
        db.add(key, h)
        return n
    n = h.set_pairs(argv, 2)
    db.modified(key)
    return n


@command("hmset", -4, "write denyoom fast", 1, 1, 1, group="hash")
def hmset(c: Any, argv: list[bytes]) -> Any:
    hset(c, argv)
    return OK


@command("hsetnx", 4, "write denyoom fast", 1, 1, 1, group="hash")
def hsetnx(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    key, field, value = argv[1], argv[2], argv[3]
    h = db.lookup_type(key, Hash)
    if h is None:
        h = Hash()
        h.set(field, value)
        db.add(key, h)
        return 1
    if field in h:
        return 0
    h.note_sizes(field, value)
    h.set(field, value)
    db.modified(key)
    return 1


@command("hget", 3, "readonly fast", 1, 1, 1, group="hash")
def hget(c: Any, argv: list[bytes]) -> Any:
    h = c.db.lookup_type(argv[1], Hash)
    if h is None:
        return None
    return h.get(argv[2])


@command("hmget", -3, "readonly fast", 1, 1, 1, group="hash")
def hmget(c: Any, argv: list[bytes]) -> Any:
    h = c.db.lookup_type(argv[1], Hash)
    if h is None:
        return [None] * (len(argv) - 2)
    get = h.get
    return [get(f) for f in argv[2:]]


@command("hgetall", 2, "readonly", 1, 1, 1, group="hash")
def hgetall(c: Any, argv: list[bytes]) -> Any:
    h = c.db.lookup_type(argv[1], Hash)
    if h is None:
        return {}
    return h.to_dict()


@command("hkeys", 2, "readonly", 1, 1, 1, group="hash")
def hkeys(c: Any, argv: list[bytes]) -> Any:
    h = c.db.lookup_type(argv[1], Hash)
    return [] if h is None else h.keys()


@command("hvals", 2, "readonly", 1, 1, 1, group="hash")
def hvals(c: Any, argv: list[bytes]) -> Any:
    h = c.db.lookup_type(argv[1], Hash)
    return [] if h is None else h.values()


@command("hdel", -3, "write fast", 1, 1, 1, group="hash")
def hdel(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    key = argv[1]
    h = db.lookup_type(key, Hash)
    if h is None:
        return 0
    n = 0
    for f in argv[2:]:
        if h.delete(f):
            n += 1
            if not len(h):
                break
    if n:
        if not len(h):
            db.delete(key)
        else:
            db.modified(key)
    return n


@command("hlen", 2, "readonly fast", 1, 1, 1, group="hash")
def hlen(c: Any, argv: list[bytes]) -> Any:
    h = c.db.lookup_type(argv[1], Hash)
    return 0 if h is None else len(h)


@command("hstrlen", 3, "readonly fast", 1, 1, 1, group="hash")
def hstrlen(c: Any, argv: list[bytes]) -> Any:
    h = c.db.lookup_type(argv[1], Hash)
    if h is None:
        return 0
    v = h.get(argv[2])
    return 0 if v is None else len(v)


@command("hexists", 3, "readonly fast", 1, 1, 1, group="hash")
def hexists(c: Any, argv: list[bytes]) -> Any:
    h = c.db.lookup_type(argv[1], Hash)
    return 1 if h is not None and argv[2] in h else 0


@command("hincrby", 4, "write denyoom fast", 1, 1, 1, group="hash")
def hincrby(c: Any, argv: list[bytes]) -> Any:
    incr = str2int(argv[3])
    if incr is None:
        raise NOT_INTEGER
    db = c.db
    key, field = argv[1], argv[2]
    h = db.lookup_type(key, Hash)
    new_key = h is None
    if h is None:
        h = Hash()
        old = 0
    else:
        cur = h.get(field)
        if cur is None:
            old = 0
        else:
            old = str2int(cur)  # type: ignore[assignment]
            if old is None:
                raise HASH_NOT_INT
    v = old + incr
    if v > INT64_MAX or v < INT64_MIN:
        raise OVERFLOW
    h.set(field, b"%d" % v)
    if new_key:
        db.add(key, h)
    else:
        db.modified(key)
    return v


@command("hincrbyfloat", 4, "write denyoom fast", 1, 1, 1, group="hash")
def hincrbyfloat(c: Any, argv: list[bytes]) -> Any:
    incr = _ld_text(argv[3], NOT_FLOAT)
    if incr.lstrip("+-")[:1] in ("i", "I"):
        raise INCR_NAN_INF
    db = c.db
    key, field = argv[1], argv[2]
    h = db.lookup_type(key, Hash)
    cur_text = None
    if h is not None:
        cur = h.get(field)
        if cur is not None:
            cur_text = _ld_text(cur, HASH_NOT_FLOAT)
    new = long_double_add(None if cur_text is None else cur_text.encode(), incr.encode())
    if h is None:
        h = Hash()
        h.set(field, new)
        db.add(key, h)
    else:
        h.set(field, new)
        db.modified(key)
    return new


@command("hrandfield", -2, "readonly", 1, 1, 1, group="hash")
def hrandfield(c: Any, argv: list[bytes]) -> Any:
    n = len(argv)
    if n >= 3:
        l = str2int(argv[2])  # noqa: E741
        if l is None:
            raise NOT_INTEGER
        if l == INT64_MIN:
            raise RANGE_LONG
        if n > 4 or (n == 4 and not eq(argv[3], b"withvalues")):
            raise SYNTAX
        withvalues = n == 4
        if withvalues and (l < -(INT64_MAX // 2) or l > INT64_MAX // 2):
            raise VALUE_OUT_OF_RANGE
        return _hrandfield_count(c, argv[1], l, withvalues)
    h = c.db.lookup_type(argv[1], Hash)
    if h is None:
        return None
    return h.random_field()


def _hrandfield_count(c: Any, key: bytes, l: int, withvalues: bool) -> Any:  # noqa: E741
    h = c.db.lookup_type(key, Hash)
    if h is None or l == 0:
        return []
    if l < 0 or l == 1:
        fields = h.random_fields(-l if l < 0 else 1)
    elif l >= len(h):
        fields = h.keys()
    else:
        fields = h.random_unique(l)
    if not withvalues:
        return fields
    get = h.get
    if getattr(c, "resp", 2) == 3:
        return [[f, get(f)] for f in fields]
    out: list[Any] = []
    for f in fields:
        out.append(f)
        out.append(get(f))
    return out


@command("hscan", -3, "readonly", 1, 1, 1, group="hash")
def hscan(c: Any, argv: list[bytes]) -> Any:
    cursor = parse_scan_cursor(argv[2])
    h = c.db.lookup_type(argv[1], Hash)
    if h is None:
        return [EMPTY_SCAN_CURSOR, []]
    count, match = parse_scan_options(argv, 3)
    get = h.get
    if not h.ht:
        if match is None:
            return [EMPTY_SCAN_CURSOR, h.flat()]
        out: list[bytes] = []
        for f in h.keys():
            if match(f):
                out.append(f)
                out.append(get(f))  # type: ignore[arg-type]
        return [EMPTY_SCAN_CURSOR, out]
    nxt, fields = h.scan(cursor, count)
    out = []
    for f in fields:
        if match is None or match(f):
            out.append(f)
            out.append(get(f))  # type: ignore[arg-type]
    return [b"%d" % nxt, out]

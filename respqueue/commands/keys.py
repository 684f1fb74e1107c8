"""Generic key commands (db.c / expire.c): DEL, EXISTS, TYPE, RENAME, SCAN, EXPIRE..."""

from __future__ import annotations

import itertools
import random
import sys
from collections import OrderedDict
from itertools import islice
from typing import Any

from ..errors import NO_SUCH_KEY, NOT_INTEGER, SYNTAX
from ..glob import compile_glob
from ..keyspace import mstime, type_name
from ..resp import OK, RedisError, Status
from .registry import command, container, subcommand
from .strings import carry_encoding, forced_encoding
from .util import INT64_MAX, eq, str2int


@command("del", -2, "write", 1, -1, 1, group="keyspace")
def del_(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    n = 0
    for k in argv[1:]:
        if db.delete(k):
            n += 1
    return n


@command("unlink", -2, "write fast", 1, -1, 1, group="keyspace")
def unlink(c: Any, argv: list[bytes]) -> Any:
    return del_(c, argv)


@command("exists", -2, "readonly fast", 1, -1, 1, group="keyspace")
def exists(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    n = 0
    for k in argv[1:]:
        if db.peek(k) is not None:  # (a cold hash stays cold)
            n += 1
    return n


@command("touch", -2, "readonly fast", 1, -1, 1, group="keyspace")
def touch(c: Any, argv: list[bytes]) -> Any:
    return exists(c, argv)


@command("type", 2, "readonly fast", 1, 1, 1, group="keyspace")
def type_(c: Any, argv: list[bytes]) -> Any:
    v = c.db.peek(argv[1])
    return Status(b"none" if v is None else type_name(v))


def _rename(c: Any, argv: list[bytes], nx: bool) -> Any:
    db = c.db
    src, dst = argv[1], argv[2]
    v = db.lookup(src)
    if v is None:
        raise NO_SUCH_KEY
    if src == dst:
        return 0 if nx else OK
    if nx and db.peek(dst) is not None:
        return 0
    when = db.get_expire(src)
    db.delete(dst)
    db.delete(src)
    db.add(dst, v)
    if when != -1:
        db.set_expire(dst, when)
    carry_encoding(db, src, db, dst, v)
    return 1 if nx else OK


@command("rename", 3, "write", 1, 2, 1, group="keyspace")
def rename(c: Any, argv: list[bytes]) -> Any:
    return _rename(c, argv, False)


@command("renamenx", 3, "write fast", 1, 2, 1, group="keyspace")
def renamenx(c: Any, argv: list[bytes]) -> Any:
    return _rename(c, argv, True)


def copy_value(v: Any) -> Any:
    return v if type(v) is bytes else v.copy()


@command("copy", -3, "write denyoom", 1, 2, 1, group="keyspace")
def copy(c: Any, argv: list[bytes]) -> Any:
    src, dst = argv[1], argv[2]
    dstdb = c.db
    replace = False
    i = 3
    while i < len(argv):
        opt = argv[i].lower()
        if opt == b"replace":
            replace = True
        elif opt == b"db" and i + 1 < len(argv):
            idx = str2int(argv[i + 1])
            if idx is None:
                raise NOT_INTEGER
            if idx < 0 or idx >= len(c.server.dbs):
                raise RedisError("ERR DB index is out of range")
            dstdb = c.server.dbs[idx]
            i += 1
        else:
            raise SYNTAX
        i += 1
    if c.server.cluster is not None and dstdb is not c.db:
        raise RedisError("ERR Copying to another database is not allowed in cluster mode")
    if src == dst and dstdb is c.db:
        raise RedisError("ERR source and destination objects are the same")
    v = c.db.lookup(src)
    if v is None:
        return 0
    if dstdb.peek(dst) is not None:
        if not replace:
            return 0
        dstdb.delete(dst)
    nv = copy_value(v)
    dstdb.add(dst, nv)
    when = c.db.get_expire(src)
    if when != -1:
        dstdb.set_expire(dst, when)
    carry_encoding(c.db, src, dstdb, dst, nv)
    return 1


@command("move", 3, "write fast", 1, 1, 1, group="keyspace")
def move(c: Any, argv: list[bytes]) -> Any:
    if c.server.cluster is not None:
        raise RedisError("ERR MOVE is not allowed in cluster mode")
    idx = str2int(argv[2])
    if idx is None:
        raise NOT_INTEGER
    if idx < 0 or idx >= len(c.server.dbs):
        raise RedisError("ERR DB index is out of range")
    dst = c.server.dbs[idx]
    if dst is c.db:
        raise RedisError("ERR source and destination objects are the same")
    key = argv[1]
    v = c.db.lookup(key)
    if v is None or dst.peek(key) is not None:
        return 0
    when = c.db.get_expire(key)
    c.db.delete(key)
    dst.add(key, v)
    if when != -1:
        dst.set_expire(key, when)
    carry_encoding(c.db, key, dst, key, v)
    return 1


@command("swapdb", 3, "write fast", group="keyspace")
def swapdb(c: Any, argv: list[bytes]) -> Any:
    if c.server.cluster is not None:
        raise RedisError("ERR SWAPDB is not allowed in cluster mode")
    a, b = str2int(argv[1]), str2int(argv[2])
    if a is None:
        raise RedisError("ERR invalid first DB index")
    if b is None:
        raise RedisError("ERR invalid second DB index")
    dbs = c.server.dbs
    if a < 0 or a >= len(dbs) or b < 0 or b >= len(dbs):
        raise RedisError("ERR DB index is out of range")
    if a == b:
        return OK
    da, db = dbs[a], dbs[b]
    da.data, db.data = db.data, da.data
    da.expires, db.expires = db.expires, da.expires
    da.expire_heap, db.expire_heap = db.expire_heap, da.expire_heap
    for d in (da, db):
        d.touch_all_watched()
        for key in d.blocking:
            if key in d.data:
                c.server.ready_keys[(d.index, key)] = None
    if c.server.journal is not None:
        c.server.journal.dbs_swapped(da, db)
    c.server.dirty += 1
    return OK


def _flush_opt(argv: list[bytes]) -> None:
    if len(argv) > 2 or (len(argv) == 2 and not (eq(argv[1], b"async") or eq(argv[1], b"sync"))):
        raise SYNTAX


@command("flushdb", -1, "write", group="keyspace")
def flushdb(c: Any, argv: list[bytes]) -> Any:
    _flush_opt(argv)
    c.db.flush()
    return OK


@command("flushall", -1, "write", group="keyspace")
def flushall(c: Any, argv: list[bytes]) -> Any:
    _flush_opt(argv)
    for db in c.server.dbs:
        db.flush()
    return OK


@command("dbsize", 1, "readonly fast", group="keyspace")
def dbsize(c: Any, argv: list[bytes]) -> Any:
    return len(c.db.data)


@command("keys", 2, "readonly", group="keyspace")
def keys(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    match = compile_glob(argv[1])
    now = mstime()
    exp = db.expires
    out = []
    expired = []
    for k in db.data:
        if match(k):
            if exp and k in exp and exp[k] <= now:
                expired.append(k)
                continue
            out.append(k)
    for k in expired:
        db.expire_key(k)
    return out


def parse_cursor(b: bytes) -> int:
    """A SCAN cursor as Redis 7.0 reads it (strtoul: sign allowed, "" is 0)."""
    s = b
    neg = False
    if s[:1] in (b"+", b"-"):
        neg = s[:1] == b"-"
        s = s[1:]
        if not s:
            raise RedisError("ERR invalid cursor")
    if s and not s.isdigit():
        raise RedisError("ERR invalid cursor")
    v = int(s) if s else 0
    if v > 2**64 - 1:
        raise RedisError("ERR invalid cursor")
    return (-v) % 2**64 if neg else v


# Iterators of SCANs in progress, keyed by (dict id, next cursor): a scan that
# goes on where it left off costs O(count), not O(cursor), while the dict keeps
# its size. Anything else starts a fresh iterator at the cursor's position.
# SCAN snapshots: scan id -> the keys of the database when that scan started
_SCAN_SNAPSHOTS: OrderedDict[int, list[bytes]] = OrderedDict()
_SCAN_MAX_SNAPSHOTS = 32
_scan_ids = itertools.count(1)


def scan_keys(d: dict[bytes, Any], cursor: int, count: int) -> tuple[int, list[bytes]]:
    """One SCAN step over the keys of ``d``: (next cursor, candidate keys).

    A scan pages through a snapshot of the key list taken when it starts
    (cursor 0); the cursor encodes the snapshot's id and the position in it.
    So every key present for the whole scan is returned exactly once, however
    many keys are added or deleted meanwhile, as Redis guarantees; keys deleted
    since the snapshot are among the candidates and the caller skips them.
    Snapshots are few and short-lived (the newest 32 scans); a cursor whose
    snapshot is gone restarts from its position in a fresh one.
    """
    if cursor == 0 and len(d) <= count:
        return 0, list(d)
    sid, pos = cursor >> 32, cursor & 0xFFFFFFFF
    snap = _SCAN_SNAPSHOTS.pop(sid, None) if cursor else None
    if snap is None:
        snap = list(d)
        sid = next(_scan_ids) & 0xFFFFFFFF or next(_scan_ids)
    end = pos + count
    items = snap[pos:end]
    if end >= len(snap):
        return 0, items
    _SCAN_SNAPSHOTS[sid] = snap
    while len(_SCAN_SNAPSHOTS) > _SCAN_MAX_SNAPSHOTS:
        _SCAN_SNAPSHOTS.popitem(last=False)
    return (sid << 32) | end, items


@command("scan", -2, "readonly", group="keyspace")
def scan(c: Any, argv: list[bytes]) -> Any:
    cursor = parse_cursor(argv[1])
    count = 10
    match = None
    typ = None
    i = 2
    while i < len(argv):
        opt = argv[i].lower()
        if i + 1 >= len(argv):
            raise SYNTAX
        if opt == b"count":
            count = str2int(argv[i + 1])  # type: ignore[assignment]
            if count is None:
                raise NOT_INTEGER
            if count < 1:
                raise SYNTAX
        elif opt == b"match":
            match = compile_glob(argv[i + 1]) if argv[i + 1] != b"*" else None
        elif opt == b"type":
            typ = argv[i + 1].lower()
        else:
            raise SYNTAX
        i += 2
    db = c.db
    nxt, ks = scan_keys(db.data, cursor, count)
    now = mstime()
    data = db.data
    out = []
    for k in ks:
        v = data.get(k)
        if v is None:
            continue  # deleted since the scan started
        exp = db.expires.get(k)
        if exp is not None and exp <= now:
            db.expire_key(k)
            continue
        if match is not None and not match(k):
            continue
        if typ is not None and type_name(v) != typ:
            continue
        out.append(k)
    return [b"%d" % nxt, out]


@command("randomkey", 1, "readonly", group="keyspace")
def randomkey(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    for _ in range(100):
        n = len(db.data)
        if n == 0:
            return None
        k = next(islice(db.data, random.randrange(n), None))
        if db.peek(k) is not None:
            return k
    return None


# ---- expiry -------------------------------------------------------------
def _expire_generic(c: Any, argv: list[bytes], unit_ms: int, absolute: bool) -> Any:
    name = argv[0].decode("utf-8", "replace").lower()
    nx = xx = gt = lt = False
    for a in argv[3:]:
        o = a.lower()
        if o == b"nx":
            nx = True
        elif o == b"xx":
            xx = True
        elif o == b"gt":
            gt = True
        elif o == b"lt":
            lt = True
        else:
            raise RedisError(b"ERR Unsupported option " + a)
    if nx and (xx or gt or lt):
        raise RedisError("ERR NX and XX, GT or LT options at the same time are not compatible")
    if gt and lt:
        raise RedisError("ERR GT and LT options at the same time are not compatible")
    v = str2int(argv[2])
    if v is None:
        raise NOT_INTEGER
    if unit_ms == 1000:
        if v > INT64_MAX // 1000 or v < -(INT64_MAX // 1000):
            raise RedisError(f"ERR invalid expire time in '{name}' command")
        v *= 1000
    if not absolute:
        base = mstime()
        if v > INT64_MAX - base:
            raise RedisError(f"ERR invalid expire time in '{name}' command")
        v += base
    db = c.db
    key = argv[1]
    if db.peek(key) is None:
        return 0
    cur = db.get_expire(key)
    if nx and cur != -1:
        return 0
    if xx and cur == -1:
        return 0
    if gt and (cur == -1 or v <= cur):
        return 0
    if lt and cur != -1 and v >= cur:
        return 0
    if v <= mstime():
        db.delete(key)
        return 1
    db.set_expire(key, v)
    return 1


@command("expire", -3, "write fast", 1, 1, 1, group="keyspace")
def expire(c: Any, argv: list[bytes]) -> Any:
    return _expire_generic(c, argv, 1000, False)


@command("pexpire", -3, "write fast", 1, 1, 1, group="keyspace")
def pexpire(c: Any, argv: list[bytes]) -> Any:
    return _expire_generic(c, argv, 1, False)


@command("expireat", -3, "write fast", 1, 1, 1, group="keyspace")
def expireat(c: Any, argv: list[bytes]) -> Any:
    return _expire_generic(c, argv, 1000, True)


@command("pexpireat", -3, "write fast", 1, 1, 1, group="keyspace")
def pexpireat(c: Any, argv: list[bytes]) -> Any:
    return _expire_generic(c, argv, 1, True)


def _ttl(c: Any, key: bytes, ms: bool, absolute: bool) -> int:
    db = c.db
    if db.peek(key) is None:
        return -2
    when = db.get_expire(key)
    if when == -1:
        return -1
    if absolute:
        return when if ms else when // 1000
    left = max(0, when - mstime())
    return left if ms else (left + 500) // 1000


@command("ttl", 2, "readonly fast", 1, 1, 1, group="keyspace")
def ttl(c: Any, argv: list[bytes]) -> Any:
    return _ttl(c, argv[1], False, False)


@command("pttl", 2, "readonly fast", 1, 1, 1, group="keyspace")
def pttl(c: Any, argv: list[bytes]) -> Any:
    return _ttl(c, argv[1], True, False)


@command("expiretime", 2, "readonly fast", 1, 1, 1, group="keyspace")
def expiretime(c: Any, argv: list[bytes]) -> Any:
    return _ttl(c, argv[1], False, True)


@command("pexpiretime", 2, "readonly fast", 1, 1, 1, group="keyspace")
def pexpiretime(c: Any, argv: list[bytes]) -> Any:
    return _ttl(c, argv[1], True, True)


@command("persist", 2, "write fast", 1, 1, 1, group="keyspace")
def persist(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    if db.peek(argv[1]) is None:
        return 0
    return 1 if db.persist(argv[1]) else 0


# ---- OBJECT / MEMORY ----------------------------------------------------
container("object", -2, "", group="keyspace")


def string_encoding(v: bytes) -> bytes:
    if len(v) <= 20 and str2int(v) is not None:
        return b"int"
    return b"embstr" if len(v) <= 44 else b"raw"


def encoding_of(v: Any) -> bytes:
    return string_encoding(v) if type(v) is bytes else v.encoding()


@subcommand("object", "encoding", 3, "readonly", 2, 2, 1)
def object_encoding(c: Any, argv: list[bytes]) -> Any:
    v = c.db.lookup(argv[2])
    if v is None:
        return None
    if type(v) is bytes:
        return forced_encoding(c.db, argv[2], v) or string_encoding(v)
    return v.encoding()


@subcommand("object", "refcount", 3, "readonly", 2, 2, 1)
def object_refcount(c: Any, argv: list[bytes]) -> Any:
    v = c.db.lookup(argv[2])
    if v is None:
        return None
    if type(v) is bytes and string_encoding(v) == b"int" and 0 <= int(v) < 10000:
        return 2147483647
    return 1


@subcommand("object", "idletime", 3, "readonly", 2, 2, 1)
def object_idletime(c: Any, argv: list[bytes]) -> Any:
    v = c.db.lookup(argv[2])
    return None if v is None else 0


@subcommand("object", "freq", 3, "readonly", 2, 2, 1)
def object_freq(c: Any, argv: list[bytes]) -> Any:
    v = c.db.lookup(argv[2])
    if v is None:
        return None
    raise RedisError(
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note "
        "that when switching between policies at runtime LRU and LFU data will take some time to adjust."
    )


@subcommand("object", "help", 2, "loading stale")
def object_help(c: Any, argv: list[bytes]) -> Any:
    lines = [
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Prints this help.",
    ]
    return [Status(x.encode()) for x in lines]


container("memory", -2, "", group="server")


def memory_usage_of(key: bytes, v: Any) -> int:
    base = 16 + sys.getsizeof(key)
    if type(v) is bytes:
        return base + sys.getsizeof(v)
    return base + v.memory_usage()


@subcommand("memory", "usage", -3, "readonly", 2, 2, 1)
def memory_usage(c: Any, argv: list[bytes]) -> Any:
    if len(argv) not in (3, 5):
        raise SYNTAX
    if len(argv) == 5:
        if not eq(argv[3], b"samples") or str2int(argv[4]) is None:
            raise SYNTAX
    v = c.db.lookup(argv[2])
    if v is None:
        return None
    return memory_usage_of(argv[2], v)

"""Generic key commands, byte for byte against redis-server (db.c, expire.c)."""

from __future__ import annotations

import time

import hiredis
import pytest

from .servers import RawConn


def _parse(b: bytes):
    rd = hiredis.Reader()
    rd.feed(b)
    return rd.gets()


def test_del_exists_unlink_touch(diff):
    diff("MSET", "a", "1", "b", "2", "c", "3")
    diff("EXISTS", "a", "b", "nokey", "a")
    diff("DEL", "a", "a", "nokey")
    diff("UNLINK", "b", "nokey")
    diff("TOUCH", "c", "c", "nokey")
    diff("EXISTS", "a", "b", "c")
    diff("DEL")
    diff("EXISTS")
    diff("UNLINK")
    diff("TOUCH")
    diff("LPUSH", "l", "x")
    diff("EXISTS", "l")
    diff("DEL", "l")
    diff("EXISTS", "l")


def test_type(diff):
    diff("SET", "s", "v")
    diff("LPUSH", "l", "x")
    diff("TYPE", "s")
    diff("TYPE", "l")
    diff("TYPE", "nokey")
    diff("TYPE")
    diff("TYPE", "a", "b")


def test_rename_renamenx(diff):
    diff("SET", "a", "1", "EX", "100")
    diff("RENAME", "a", "b")
    diff("GET", "b")
    diff("TTL", "b")
    diff("EXISTS", "a")
    diff("RENAME", "nokey", "x")
    diff("RENAMENX", "nokey", "x")
    diff("RENAME", "b", "b")
    diff("RENAMENX", "b", "b")
    diff("SET", "c", "3")
    diff("RENAMENX", "b", "c")
    diff("RENAMENX", "b", "d")
    diff("TTL", "d")
    diff("SET", "e", "5", "EX", "100")
    diff("RENAME", "c", "e")
    diff("TTL", "e")
    diff("GET", "e")
    diff("LPUSH", "l", "x")
    diff("RENAME", "l", "e")
    diff("TYPE", "e")
    diff("RENAME", "a")
    diff("RENAMENX", "a", "b", "c")


def test_copy(diff):
    diff("SET", "a", "1", "PX", "100000")
    diff("COPY", "a", "b")
    diff("GET", "b")
    diff("TTL", "b")
    diff("COPY", "a", "b")
    diff("COPY", "a", "b", "REPLACE")
    diff("COPY", "a", "a")
    diff("COPY", "a", "a", "DB", "0")
    diff("COPY", "a", "a", "DB", "1")
    diff("COPY", "nokey", "x")
    diff("COPY", "a", "x", "DB", "16")
    diff("COPY", "a", "x", "DB", "-1")
    diff("COPY", "a", "x", "DB", "x")
    diff("COPY", "a", "x", "DB")
    diff("COPY", "a", "x", "FOO")
    diff("COPY", "a", "x", "REPLACE", "REPLACE")
    diff("COPY", "a")
    diff("LPUSH", "l", "x", "y")
    diff("COPY", "l", "l2")
    diff("LPUSH", "l2", "z")
    diff("LRANGE", "l", "0", "-1")
    diff("LRANGE", "l2", "0", "-1")
    diff("COPY", "a", "l", "REPLACE")
    diff("TYPE", "l")
    diff("SELECT", "1")
    diff("GET", "a")
    diff("SELECT", "0")
    diff("COPY", "a", "y", "DB", "1", "REPLACE")
    diff("SELECT", "1")
    diff("GET", "y")
    diff("TTL", "y")
    diff("SELECT", "0")


def test_move(diff):
    diff("SET", "a", "1", "EX", "100")
    diff("MOVE", "a", "1")
    diff("EXISTS", "a")
    diff("SELECT", "1")
    diff("GET", "a")
    diff("TTL", "a")
    diff("MOVE", "a", "1")
    diff("SET", "b", "in1")
    diff("SELECT", "0")
    diff("SET", "b", "in0")
    diff("MOVE", "b", "1")
    diff("MOVE", "nokey", "1")
    diff("MOVE", "b", "0")
    diff("MOVE", "b", "16")
    diff("MOVE", "b", "-1")
    diff("MOVE", "b", "x")
    diff("MOVE", "nokey", "x")
    diff("MOVE", "b")


def test_swapdb(diff):
    diff("SET", "a", "db0")
    diff("SELECT", "1")
    diff("SET", "a", "db1")
    diff("SET", "b", "only1")
    diff("SWAPDB", "0", "1")
    diff("GET", "a")
    diff("GET", "b")
    diff("SELECT", "0")
    diff("GET", "a")
    diff("GET", "b")
    diff("SWAPDB", "0", "0")
    diff("SWAPDB", "0", "16")
    diff("SWAPDB", "-1", "0")
    diff("SWAPDB", "x", "0")
    diff("SWAPDB", "0", "x")
    diff("SWAPDB", "x", "y")
    diff("SWAPDB", "0")
    diff("SWAPDB", "1", "0")
    diff("GET", "a")


def test_expire_family(diff):
    diff("SET", "k", "v")
    diff("TTL", "k")
    diff("PTTL", "k")
    diff("EXPIRETIME", "k")
    diff("PEXPIRETIME", "k")
    diff("TTL", "nokey")
    diff("PTTL", "nokey")
    diff("EXPIRETIME", "nokey")
    diff("PEXPIRETIME", "nokey")
    diff("EXPIRE", "k", "100")
    diff("TTL", "k")
    diff("EXPIRE", "k", "50", "NX")
    diff("EXPIRE", "k", "50", "XX")
    diff("TTL", "k")
    diff("EXPIRE", "k", "40", "GT")
    diff("EXPIRE", "k", "60", "GT")
    diff("TTL", "k")
    diff("EXPIRE", "k", "70", "LT")
    diff("EXPIRE", "k", "30", "LT")
    diff("TTL", "k")
    diff("PERSIST", "k")
    diff("PERSIST", "k")
    diff("PERSIST", "nokey")
    diff("EXPIRE", "k", "10", "XX")
    diff("EXPIRE", "k", "10", "GT")
    diff("EXPIRE", "k", "10", "LT")
    diff("TTL", "k")
    diff("PERSIST", "k")
    diff("EXPIRE", "k", "10", "NX")
    diff("EXPIRE", "k", "10", "NX", "XX")
    diff("EXPIRE", "k", "10", "GT", "LT")
    diff("EXPIRE", "k", "10", "NX", "GT")
    diff("EXPIRE", "k", "20", "XX", "GT")
    diff("EXPIRE", "k", "15", "XX", "GT")
    diff("EXPIRE", "k", "30", "xx", "gt", "xx")
    diff("TTL", "k")
    diff("EXPIRE", "k", "10", "FOO")
    diff("EXPIRE", "k", "x")
    diff("EXPIRE", "k", "1.5")
    diff("EXPIRE", "k", "")
    diff("EXPIRE", "nokey", "10")
    diff("EXPIRE", "nokey", "x")
    diff("EXPIRE", "k", "9223372036854775807")
    diff("EXPIRE", "k", "-9223372036854775808")
    diff("PEXPIRE", "k", "9223372036854775807")
    diff("EXPIREAT", "k", "9223372036854775807")
    diff("PEXPIREAT", "k", "9223372036854775807")
    diff("EXPIRE", "k", "9223372036854775")
    diff("PEXPIRE", "k", "100000")
    diff("TTL", "k")
    diff("EXPIREAT", "k", str(int(time.time()) + 1000))
    diff("TTL", "k")
    diff("EXPIRETIME", "k")
    diff("PEXPIREAT", "k", str(int(time.time()) * 1000 + 2_000_000))
    diff("TTL", "k")
    diff("PEXPIRETIME", "k")
    diff("EXPIRE", "k", "0")
    diff("EXISTS", "k")
    diff("SET", "k", "v")
    diff("EXPIRE", "k", "-5")
    diff("EXISTS", "k")
    diff("SET", "k", "v")
    diff("PEXPIREAT", "k", "1")
    diff("EXISTS", "k")
    diff("SET", "k", "v")
    diff("EXPIREAT", "k", "0", "NX")
    diff("EXISTS", "k")
    diff("SET", "k", "v", "EX", "100")
    diff("EXPIRE", "k", "-1", "GT")
    diff("EXISTS", "k")
    diff("EXPIRE", "k", "-1", "LT")
    diff("EXISTS", "k")
    diff("EXPIRE", "k")
    diff("TTL")
    diff("PERSIST")


def test_ttl_rounding(diff):
    diff("SET", "k", "v", "PX", "1800")
    diff("TTL", "k")
    diff("SET", "k", "v", "PX", "1400")
    diff("TTL", "k")
    diff("SET", "k", "v", "PX", "400")
    diff("TTL", "k")


def test_keys_patterns(diff):
    for k in ("hello", "hallo", "hxllo", "hllo", "heeeello", "h*llo", "h?llo", "a[b", "x\\y", "foo:1", "foo:2",
              "foo:10", "", "\xff", "Hello"):
        diff("SET", k, "v")
    diff("LPUSH", "list:1", "x")
    for p in ("*", "h?llo", "h*llo", "h[ae]llo", "h[^e]llo", "h[a-b]llo", "h[b-a]llo", "foo:*", "foo:?", "foo:[0-9]",
              "*[", "a[b", "a\\[b", "x\\\\y", "h\\*llo", "*llo", "", "nomatch*", "[", "[]", "[^]", "H*",
              "h[!a]llo", "\\", "*\\", "list:*"):
        diff.unordered("KEYS", p)
    diff("KEYS")
    diff("KEYS", "a", "b")
    diff("DBSIZE")
    diff("DBSIZE", "x")


def _scan_all(conn: RawConn, *opts: str, cmd: str = "SCAN") -> list[bytes]:
    seen: list[bytes] = []
    cursor = b"0"
    for _ in range(10_000):
        r = _parse(conn.call_raw(cmd, cursor, *opts))
        cursor, batch = r
        seen.extend(batch)
        if cursor == b"0":
            break
    return seen


def test_scan_whole_keyspace(diff):
    for i in range(300):
        diff("SET", f"key:{i}", str(i))
    for i in range(40):
        diff("LPUSH", f"list:{i}", "x")
    for opts in ((), ("COUNT", "7"), ("COUNT", "1000"), ("MATCH", "key:1*"), ("MATCH", "list:*", "COUNT", "3"),
                 ("TYPE", "list"), ("TYPE", "string", "MATCH", "*5"), ("TYPE", "hash"), ("type", "LIST"),
                 ("MATCH", "nomatch")):
        a = _scan_all(diff.rq, *opts)
        b = _scan_all(diff.ref, *opts)
        assert len(a) == len(set(a)), "SCAN returned a key twice without changes in between"
        assert sorted(a) == sorted(b), opts


def test_scan_errors(diff):
    diff("SET", "k", "v")
    # valid odd cursors: what they return depends on Redis's hash seed, so only
    # check that both accept them
    for cur in ("-1", "+5", "18446744073709551615"):
        a, b = diff.both("SCAN", cur)
        assert a.startswith(b"*2\r\n") and b.startswith(b"*2\r\n")
    for args in (("x",), ("+0",), ("",), ("-",), ("+",), (" 1",), ("0x1",), ("00",), ("1.5",), ("18446744073709551616",), ("0", "COUNT"), ("0", "COUNT", "0"),
                 ("0", "COUNT", "-1"), ("0", "COUNT", "x"), ("0", "MATCH"), ("0", "FOO", "bar"), ("0", "TYPE"),
                 ("0", "COUNT", "1", "MATCH")):
        diff("SCAN", *args)
    diff("SCAN")
    # a cursor past the end, for an empty and a non-empty db
    a, b = diff.both("SCAN", "0", "COUNT", "100")
    assert _parse(a) == _parse(b)


def test_dbsize_flush(diff):
    diff("MSET", "a", "1", "b", "2")
    diff("DBSIZE")
    diff("SELECT", "1")
    diff("SET", "c", "3")
    diff("DBSIZE")
    diff("FLUSHDB")
    diff("DBSIZE")
    diff("SELECT", "0")
    diff("DBSIZE")
    diff("FLUSHDB", "ASYNC")
    diff("DBSIZE")
    diff("SET", "a", "1")
    diff("FLUSHDB", "SYNC")
    diff("DBSIZE")
    diff("SET", "a", "1")
    diff("SELECT", "2")
    diff("SET", "a", "1")
    diff("FLUSHALL", "ASYNC")
    diff("DBSIZE")
    diff("SELECT", "0")
    diff("DBSIZE")
    diff("FLUSHALL", "SYNC")
    diff("FLUSHDB", "FOO")
    diff("FLUSHALL", "FOO")
    diff("FLUSHDB", "ASYNC", "SYNC")
    diff("FLUSHALL", "async", "x")
    diff("FLUSHALL", "aSyNc")


def test_randomkey(diff, r):
    diff("RANDOMKEY")
    diff("RANDOMKEY", "x")
    diff("SET", "only", "1")
    diff("RANDOMKEY")
    r.mset({"a": 1, "b": 2, "c": 3})
    assert {r.randomkey() for _ in range(60)} <= {b"a", b"b", b"c", b"only"}


def test_object_misc(diff):
    diff("SET", "k", "v")
    diff("OBJECT", "REFCOUNT", "k")
    diff("OBJECT", "REFCOUNT", "nokey")
    diff("OBJECT", "IDLETIME", "nokey")
    diff("OBJECT", "FREQ", "k")
    diff("OBJECT", "FREQ", "nokey")
    diff("OBJECT", "ENCODING", "k", "x")
    diff("OBJECT", "nosuch")
    diff("OBJECT")
    diff("SET", "n", "100")
    diff("OBJECT", "REFCOUNT", "n")
    diff("OBJECT", "HELP")
    diff("MEMORY", "USAGE", "nokey")
    diff("MEMORY", "USAGE", "k", "SAMPLES")
    diff("MEMORY", "USAGE", "k", "FOO", "1")


def test_memory_usage_is_int(r):
    r.set("k", "v" * 100)
    assert isinstance(r.memory_usage("k"), int) and r.memory_usage("k") >= 100
    assert r.memory_usage("nokey") is None


# ---- expiry ------------------------------------------------------------------
def test_lazy_expiry(diff):
    diff("SET", "k", "v", "PX", "30")
    diff("SET", "k2", "v", "PX", "30")
    time.sleep(0.1)
    diff("GET", "k")
    diff("EXISTS", "k2")
    diff("TTL", "k")


def test_active_expiry(r):
    r.set("keep", "1")
    for i in range(20):
        r.set(f"short{i}", "v", px=50)
    assert r.dbsize() == 21
    deadline = time.time() + 2
    while time.time() < deadline and r.dbsize() > 1:
        time.sleep(0.05)
    # nothing accessed the keys: the server's cron removed them
    assert r.dbsize() == 1


def test_expire_overwrite_semantics(diff):
    diff("SET", "k", "v", "EX", "100")
    diff("SET", "k", "w")
    diff("TTL", "k")
    diff("SET", "k", "v", "EX", "100")
    diff("INCR", "k")
    diff("SET", "n", "1", "EX", "100")
    diff("INCR", "n")
    diff("TTL", "n")
    diff("GETSET", "n", "5")
    diff("TTL", "n")
    diff("EXPIRE", "n", "100")
    diff("RENAME", "n", "m")
    diff("TTL", "m")
    diff("DEL", "m")
    diff("SET", "m", "x")
    diff("TTL", "m")


@pytest.mark.parametrize("cmd", ["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"])
def test_expire_wrong_arity(diff, cmd):
    diff(cmd)
    diff(cmd, "k")


@pytest.mark.parametrize("n,count", [(4, 2), (150, 10), (1000, 7)])
def test_scan_while_deleting_each_page(r, n, count):
    """Every key present for the whole scan is returned, also when each page is
    deleted before the next call (BullMQ's removeOrphanedJobs does this)."""
    r.mset({f"k{i}": 1 for i in range(n)})
    seen: set[bytes] = set()
    cursor = 0
    while True:
        cursor, keys = r.scan(cursor, count=count)
        assert not seen & set(keys)
        seen.update(keys)
        if keys:
            r.delete(*keys)
        if cursor == 0:
            break
    assert len(seen) == n and r.dbsize() == 0


def test_scan_while_adding_keeps_old_keys(r):
    r.mset({f"old{i}": 1 for i in range(300)})
    seen: set[bytes] = set()
    cursor = 0
    i = 0
    while True:
        cursor, keys = r.scan(cursor, count=20)
        seen.update(keys)
        r.set(f"new{i}", 1)
        i += 1
        if cursor == 0:
            break
    assert {f"old{i}".encode() for i in range(300)} <= seen

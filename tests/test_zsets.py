"""Sorted sets: functional tests, byte-exact differential tests against Redis 7.0, blocking pops."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import redis

from .servers import RawConn

# ---------------------------------------------------------------------------
# functional (redis-py)
# ---------------------------------------------------------------------------


def test_basic_functional(r):
    assert r.zadd("z", {"a": 1, "b": 2, "c": 3}) == 3
    assert r.zcard("z") == 3
    assert r.zscore("z", "b") == 2.0
    assert r.zrange("z", 0, -1) == [b"a", b"b", b"c"]
    assert r.zrange("z", 0, -1, withscores=True) == [(b"a", 1.0), (b"b", 2.0), (b"c", 3.0)]
    assert r.zrevrange("z", 0, 0) == [b"c"]
    assert r.zrank("z", "c") == 2
    assert r.zrevrank("z", "c") == 0
    assert r.zincrby("z", 10, "a") == 11.0
    assert r.zrange("z", 0, -1) == [b"b", b"c", b"a"]
    assert r.zrem("z", "a", "nope") == 1
    assert r.zpopmin("z") == [(b"b", 2.0)]
    assert r.zpopmax("z") == [(b"c", 3.0)]
    assert r.exists("z") == 0
    assert r.type("z") == b"none"


def test_bullmq_style_scores(r, rq_server):
    big = 7353298492104700
    r.zadd("delayed", {"job1": big, "job2": 1.5, "job3": 2**53})
    raw = RawConn(rq_server.port)
    try:
        assert raw.call_raw("ZSCORE", "delayed", "job1") == b"$16\r\n7353298492104700\r\n"
        assert raw.call_raw("ZSCORE", "delayed", "job2") == b"$3\r\n1.5\r\n"
    finally:
        raw.close()
    assert r.zrangebyscore("delayed", 0, "+inf", start=0, num=1) == [b"job2"]
    assert r.zrangebyscore("delayed", "(1.5", big) == [b"job1"]


def test_encoding_conversion(r):
    r.zadd("z", {f"m{i}": i for i in range(128)})
    assert r.object("encoding", "z") == b"listpack"
    r.zadd("z", {"m128": 128})
    assert r.object("encoding", "z") == b"skiplist"
    r.zremrangebyrank("z", 0, 120)
    assert r.object("encoding", "z") == b"skiplist"  # sticky
    r.zadd("y", {"x" * 64: 1})
    assert r.object("encoding", "y") == b"listpack"
    r.zadd("y", {"x" * 65: 1})
    assert r.object("encoding", "y") == b"skiplist"
    r.zunionstore("u", ["z"])
    assert r.object("encoding", "u") == b"listpack"


def test_large_zset_ranges(r):
    n = 20000
    pipe = r.pipeline(transaction=False)
    for i in range(0, n, 1000):
        pipe.zadd("big", {f"m{j:06d}": j for j in range(i, i + 1000)})
    pipe.execute()
    assert r.zcard("big") == n
    assert r.zrank("big", "m012345") == 12345
    assert r.zrevrank("big", "m012345") == n - 1 - 12345
    assert r.zrange("big", 100, 102) == [b"m000100", b"m000101", b"m000102"]
    assert r.zcount("big", 100, "(200") == 100
    assert r.zrangebyscore("big", 5000, "+inf", start=10, num=2) == [b"m005010", b"m005011"]
    assert r.zrevrangebyscore("big", 5000, "-inf", start=10, num=2) == [b"m004990", b"m004989"]
    assert r.zremrangebyscore("big", 0, 9999) == 10000
    assert r.zcard("big") == 10000
    assert r.zpopmin("big", 3) == [(b"m010000", 10000.0), (b"m010001", 10001.0), (b"m010002", 10002.0)]
    # ZSCAN over a skiplist-encoded zset returns everything once
    seen = {}
    cursor = 0
    while True:
        cursor, items = r.zscan("big", cursor, count=500)
        for m, s in items:
            seen[m] = s
        if cursor == 0:
            break
    assert len(seen) == r.zcard("big")
    assert seen[b"m019999"] == 19999.0


def test_zrandmember_functional(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4})
    assert r.zrandmember("z") in (b"a", b"b", b"c", b"d")
    got = r.zrandmember("z", 2)
    assert len(got) == 2 and len(set(got)) == 2
    got = r.zrandmember("z", -10)
    assert len(got) == 10 and set(got) <= {b"a", b"b", b"c", b"d"}
    got = r.zrandmember("z", 3, withscores=True)
    assert len(got) == 6
    for m, s in zip(got[::2], got[1::2], strict=True):
        assert r.zscore("z", m) == float(s)
    assert r.zrandmember("z", 10) == [b"d", b"c", b"b", b"a"]  # whole zset, walked from the tail
    # big zsets
    r.zadd("big", {f"m{i}": i for i in range(500)})
    got = r.zrandmember("big", 100)
    assert len(set(got)) == 100
    assert len(r.zrandmember("big", -1000)) == 1000


def test_zrandmember_resp3_shape(rq_server):
    c = redis.Redis(port=rq_server.port, protocol=3)
    try:
        c.flushall()
        c.zadd("z", {"a": 1, "b": 2})
        got = c.execute_command("ZRANDMEMBER", "z", "-3", "WITHSCORES")
        assert len(got) == 3
        for pair in got:
            assert len(pair) == 2 and pair[1] in (1.0, 2.0)
    finally:
        c.close()


def test_setops_with_plain_sets(r):
    r.zadd("z", {"a": 1, "b": 2})
    r.sadd("s", "a", "c")
    assert r.zunion(["z", "s"], withscores=True) == [(b"b", 2.0), (b"a", 2.0), (b"c", 1.0)] or r.zunion(
        ["z", "s"], withscores=True
    ) == [(b"c", 1.0), (b"a", 2.0), (b"b", 2.0)]
    assert r.zinter(["z", "s"], withscores=True) == [(b"a", 2.0)]
    assert r.zdiff(["z", "s"]) == [b"b"]
    assert r.zintercard(2, ["z", "s"]) == 1


def test_watch_sees_zset_changes(r):
    r.zadd("z", {"a": 1})
    p = r.pipeline()
    p.watch("z")
    r.zadd("z", {"a": 2})
    p.multi()
    p.zcard("z")
    with pytest.raises(redis.WatchError):
        p.execute()


# ---------------------------------------------------------------------------
# differential (byte-exact vs Redis 7.0)
# ---------------------------------------------------------------------------


def test_zadd_diff(diff):
    diff("ZADD", "z", "1", "a")
    diff("ZADD", "z", "1", "a", "2", "b", "3", "c")
    diff("ZADD", "z", "CH", "5", "a", "2", "b", "9", "new")
    diff("ZADD", "z", "NX", "100", "a", "100", "nx1")
    diff("ZADD", "z", "XX", "100", "a", "100", "xx1")
    diff("ZADD", "z", "XX", "CH", "101", "a", "100", "xx1")
    diff("ZADD", "z", "GT", "CH", "50", "a", "200", "b", "7", "gt1")
    diff("ZADD", "z", "LT", "CH", "50", "a", "200", "b", "7", "lt1")
    diff("ZADD", "z", "XX", "GT", "CH", "1000", "a")
    diff("ZADD", "z", "INCR", "1.5", "a")
    diff("ZADD", "z", "INCR", "NX", "1.5", "a")
    diff("ZADD", "z", "INCR", "XX", "1.5", "nosuch")
    diff("ZADD", "z", "INCR", "GT", "-1", "a")
    diff("ZADD", "z", "INCR", "LT", "-1", "a")
    diff("ZADD", "z", "INCR", "0", "a")
    diff("ZADD", "z", "-0", "negzero")
    diff("ZSCORE", "z", "negzero")
    diff("ZADD", "z", "+inf", "pinf", "-inf", "ninf", "inf", "pinf2", "-INF", "ninf2", "Infinity", "x")
    diff("ZADD", "z", "INCR", "+inf", "pinf")
    diff("ZADD", "z", "INCR", "-inf", "pinf")
    diff("ZINCRBY", "z", "-inf", "pinf")
    diff("ZADD", "z", "0x10", "hex", "1e-310", "denorm", "1e3", "exp", ".5", "dot", "5.", "dot2")
    diff("ZADD", "z", "7353298492104700", "bull", "0.1", "tenth", "1e17", "e17", "123456789.123456789", "long")
    diff("ZRANGE", "z", "0", "-1", "WITHSCORES")
    diff("ZADD", "xxnew", "XX", "1", "a")
    diff("ZADD", "xxnew", "XX", "INCR", "1", "a")
    diff("EXISTS", "xxnew")
    diff("ZADD", "gtnew", "GT", "1", "a")
    diff("ZADD", "lower", "nx", "ch", "incr", "3", "a")
    # errors
    for bad in ("abc", "nan", "NaN", "-nan", "1e400", "-1e400", "1e-400", " 1", "1 ", "", "1_0", "0x", "1e", "inf1"):
        diff("ZADD", "z", bad, "a")
    diff("ZADD", "z", "NX", "XX", "1", "a")
    diff("ZADD", "z", "GT", "NX", "1", "a")
    diff("ZADD", "z", "LT", "NX", "1", "a")
    diff("ZADD", "z", "GT", "LT", "1", "a")
    diff("ZADD", "z", "GT", "LT", "NX", "XX", "1", "a")
    diff("ZADD", "z", "INCR", "1", "a", "2", "b")
    diff("ZADD", "z", "INCR", "NX", "XX", "1", "a", "2", "b")
    diff("ZADD", "z", "1", "a", "2")
    diff("ZADD", "z", "foo", "1", "a")
    diff("ZADD", "z", "abc", "a", "1", "b", "x")
    diff("ZADD", "z", "XX")
    diff("ZADD", "z", "NX", "CH")
    diff("ZADD", "z")
    diff("SET", "str", "x")
    diff("ZADD", "str", "1", "a")
    diff("ZADD", "str", "bad", "a")
    diff("ZINCRBY", "str", "1", "a")
    diff("ZINCRBY", "z", "x", "a")
    diff("ZINCRBY", "z", "nan", "a")
    diff("ZINCRBY", "z", "nx", "a")
    diff("ZINCRBY", "z", "1")
    diff("ZINCRBY", "newz", "2.5", "m")
    diff("ZINCRBY", "newz", "2.5", "m")
    diff("ZRANGE", "newz", "0", "-1", "WITHSCORES")


def test_simple_reads_diff(diff):
    diff("ZADD", "z", "1", "a", "2", "b", "3", "c", "3", "d", "1.5", "e")
    diff("SET", "str", "x")
    for cmd in ("ZSCORE", "ZRANK", "ZREVRANK"):
        diff(cmd, "z", "a")
        diff(cmd, "z", "d")
        diff(cmd, "z", "nosuch")
        diff(cmd, "nokey", "a")
        diff(cmd, "str", "a")
        diff(cmd, "z")
        diff(cmd, "z", "a", "b")
    diff("ZRANK", "z", "a", "WITHSCORE")
    diff("ZMSCORE", "z", "a", "nosuch", "c")
    diff("ZMSCORE", "nokey", "a", "b")
    diff("ZMSCORE", "str", "a")
    diff("ZMSCORE", "z")
    diff("ZCARD", "z")
    diff("ZCARD", "nokey")
    diff("ZCARD", "str")
    diff("ZCARD")
    diff("ZCARD", "z", "x")
    diff("ZREM", "z", "a", "a", "nosuch")
    diff("ZREM", "nokey", "a")
    diff("ZREM", "str", "a")
    diff("ZREM", "z")
    diff("ZREM", "z", "b", "c", "d", "e", "x")
    diff("EXISTS", "z")


def test_zcount_zlexcount_diff(diff):
    diff("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "-inf", "ninf", "+inf", "pinf")
    for lo, hi in [
        ("-inf", "+inf"), ("1", "3"), ("(1", "3"), ("1", "(3"), ("(1", "(3"), ("3", "1"), ("(3", "3"),
        ("3", "3"), ("", ""), ("(", "5"), (" 2", "4"), ("2", "4 "), ("x", "1"), ("1", "x"), ("(inf", "+inf"),
        ("-inf", "(-inf"), ("inf", "inf"), ("nan", "1"), ("1e400", "1e500"), ("-1e400", "0"), ("2\x00x", "4"),
        ("0x1", "0x3"), ("((1", "3"), ("+", "5"), (" ", "5"), ("(  ", "5"),
    ]:
        diff("ZCOUNT", "z", lo, hi)
    diff("ZCOUNT", "nokey", "0", "1")
    diff("ZCOUNT", "nokey", "x", "1")
    diff("SET", "str", "x")
    diff("ZCOUNT", "str", "0", "1")
    diff("ZCOUNT", "str", "x", "1")
    diff("ZCOUNT", "z", "0")
    diff("ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e", "0", "")
    for lo, hi in [
        ("-", "+"), ("[a", "[c"), ("(a", "[c"), ("[a", "(c"), ("(a", "(a"), ("[a", "[a"), ("[c", "[a"),
        ("-", "[c"), ("[c", "+"), ("+", "-"), ("-", "-"), ("+", "+"), ("[", "+"), ("(", "+"), ("a", "b"),
        ("", "+"), ("-x", "+"), ("+x", "-"), ("[a", "+\x00"), ("[b", "(bb"),
    ]:
        diff("ZLEXCOUNT", "lex", lo, hi)
    diff("ZLEXCOUNT", "nokey", "-", "+")
    diff("ZLEXCOUNT", "nokey", "x", "+")
    diff("ZLEXCOUNT", "str", "-", "+")


def test_zrange_diff(diff):
    diff("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "5", "f", "0.5", "g")
    diff("SET", "str", "x")
    for a, b in [("0", "-1"), ("1", "3"), ("-2", "-1"), ("-100", "100"), ("3", "1"), ("5", "100"), ("100", "200"),
                 ("-1", "-2"), ("0", "0")]:
        diff("ZRANGE", "z", a, b)
        diff("ZRANGE", "z", a, b, "WITHSCORES")
        diff("ZRANGE", "z", a, b, "REV", "withscores")
        diff("ZREVRANGE", "z", a, b, "WITHSCORES")
    for a, b in [("-inf", "+inf"), ("2", "4"), ("(2", "(5"), ("5", "2"), ("(1", "1"), ("", "3")]:
        for extra in ([], ["WITHSCORES"], ["LIMIT", "1", "2"], ["LIMIT", "0", "-1"], ["LIMIT", "2", "0"],
                      ["LIMIT", "-1", "2"], ["LIMIT", "1", "-5", "WITHSCORES"], ["LIMIT", "100", "1"]):
            diff("ZRANGE", "z", a, b, "BYSCORE", *extra)
            diff("ZRANGE", "z", b, a, "BYSCORE", "REV", *extra)
            diff("ZRANGEBYSCORE", "z", a, b, *extra)
            diff("ZREVRANGEBYSCORE", "z", b, a, *extra)
    diff("ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e", "0", "f")
    for a, b in [("-", "+"), ("[b", "[d"), ("(b", "(d"), ("[d", "[b"), ("-", "(c"), ("[c", "+"), ("+", "-")]:
        for extra in ([], ["LIMIT", "1", "2"], ["LIMIT", "0", "-1"], ["LIMIT", "-1", "1"], ["LIMIT", "10", "1"]):
            diff("ZRANGE", "lex", a, b, "BYLEX", *extra)
            diff("ZRANGE", "lex", b, a, "BYLEX", "REV", *extra)
            diff("ZRANGEBYLEX", "lex", a, b, *extra)
            diff("ZREVRANGEBYLEX", "lex", b, a, *extra)
    # lex ranges over mixed scores follow Redis's listpack walk
    diff("ZADD", "mixed", "1", "c", "2", "a", "3", "b", "4", "e", "5", "d")
    for a, b in [("[a", "[b"), ("[a", "[d"), ("-", "[c"), ("[b", "+"), ("(c", "[e")]:
        diff("ZRANGEBYLEX", "mixed", a, b)
        diff("ZREVRANGEBYLEX", "mixed", b, a)
        diff("ZRANGEBYLEX", "mixed", a, b, "LIMIT", "1", "2")
        diff("ZREVRANGEBYLEX", "mixed", b, a, "LIMIT", "1", "1")
        diff("ZLEXCOUNT", "mixed", a, b)
    # errors
    diff("ZRANGE", "z", "0", "1", "LIMIT", "0", "1")
    diff("ZRANGE", "z", "0", "1", "LIMIT")
    diff("ZRANGE", "z", "0", "1", "LIMIT", "1")
    diff("ZRANGE", "z", "0", "1", "BYSCORE", "LIMIT", "x", "1")
    diff("ZRANGE", "z", "0", "1", "BYSCORE", "LIMIT", "1", "x")
    diff("ZRANGE", "z", "0", "1", "REV", "REV")
    diff("ZRANGE", "z", "0", "1", "BYSCORE", "BYLEX")
    diff("ZRANGE", "z", "0", "1", "BYSCORE", "BYSCORE")
    diff("ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES")
    diff("ZRANGE", "z", "a", "b")
    diff("ZRANGE", "z", "a", "b", "BYSCORE")
    diff("ZRANGE", "z", "a", "b", "BYLEX")
    diff("ZRANGE", "z", "0", "1", "FOO")
    diff("ZRANGE", "z", "0")
    diff("ZRANGE", "nokey", "0", "-1")
    diff("ZRANGE", "nokey", "a", "-1")
    diff("ZRANGE", "str", "0", "-1")
    diff("ZRANGE", "str", "0", "-1", "FOO")
    diff("ZRANGEBYSCORE", "z", "0", "1", "REV")
    diff("ZRANGEBYSCORE", "z", "0", "1", "BYLEX")
    diff("ZRANGEBYSCORE", "z", "0", "1", "LIMIT", "0")
    diff("ZRANGEBYLEX", "z", "-", "+", "WITHSCORES")
    diff("ZRANGEBYLEX", "z", "a", "+")
    diff("ZREVRANGE", "z", "0", "1", "LIMIT", "0", "1")
    diff("ZREVRANGE", "z", "0", "1", "REV")
    diff("ZREVRANGEBYSCORE", "z", "x", "0")
    diff("ZREVRANGEBYLEX", "str", "+", "-")


def test_zrangestore_diff(diff):
    diff("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d")
    diff("ZADD", "lex", "0", "a", "0", "b", "0", "c")
    diff("ZRANGESTORE", "d", "z", "0", "1")
    diff("ZRANGE", "d", "0", "-1", "WITHSCORES")
    diff("ZRANGESTORE", "d", "z", "0", "-1", "REV")
    diff("ZRANGE", "d", "0", "-1", "WITHSCORES")
    diff("ZRANGESTORE", "d", "z", "(1", "+inf", "BYSCORE", "LIMIT", "1", "5")
    diff("ZRANGE", "d", "0", "-1", "WITHSCORES")
    diff("ZRANGESTORE", "d", "z", "+inf", "(1", "BYSCORE", "REV", "LIMIT", "0", "2")
    diff("ZRANGE", "d", "0", "-1", "WITHSCORES")
    diff("ZRANGESTORE", "d", "lex", "[b", "+", "BYLEX")
    diff("ZRANGE", "d", "0", "-1", "WITHSCORES")
    diff("OBJECT", "ENCODING", "d")
    diff("ZRANGESTORE", "d", "z", "10", "20")
    diff("EXISTS", "d")
    diff("SET", "d", "string")
    diff("ZRANGESTORE", "d", "nokey", "0", "-1")
    diff("EXISTS", "d")
    diff("SET", "d", "string")
    diff("EXPIRE", "d", "100")
    diff("ZRANGESTORE", "d", "z", "0", "0")
    diff("TYPE", "d")
    diff("TTL", "d")
    diff("ZRANGESTORE", "z", "z", "1", "2")
    diff("ZRANGE", "z", "0", "-1", "WITHSCORES")
    diff("SET", "str", "x")
    diff("ZRANGESTORE", "d", "str", "0", "1")
    diff("ZRANGESTORE", "d", "z", "0", "1", "WITHSCORES")
    diff("ZRANGESTORE", "d", "z", "0")
    diff("ZRANGESTORE", "d", "z", "0", "1", "LIMIT", "0", "1")


def test_zremrange_diff(diff):
    def fill():
        diff("DEL", "z")
        diff("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e")

    for a, b in [("0", "1"), ("-2", "-1"), ("3", "1"), ("0", "-1"), ("10", "20"), ("-100", "1"), ("x", "1")]:
        fill()
        diff("ZREMRANGEBYRANK", "z", a, b)
        diff("ZRANGE", "z", "0", "-1")
    for a, b in [("2", "4"), ("(2", "(4"), ("-inf", "+inf"), ("4", "2"), ("x", "1"), ("(5", "5")]:
        fill()
        diff("ZREMRANGEBYSCORE", "z", a, b)
        diff("ZRANGE", "z", "0", "-1")
    for a, b in [("[b", "[d"), ("(b", "(d"), ("-", "+"), ("[d", "[b"), ("x", "+"), ("-", "(c")]:
        diff("DEL", "lex")
        diff("ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e")
        diff("ZREMRANGEBYLEX", "lex", a, b)
        diff("ZRANGE", "lex", "0", "-1")
    diff("EXISTS", "z")
    diff("ZREMRANGEBYRANK", "nokey", "0", "1")
    diff("ZREMRANGEBYSCORE", "nokey", "x", "1")
    diff("SET", "str", "x")
    diff("ZREMRANGEBYRANK", "str", "0", "1")
    diff("ZREMRANGEBYSCORE", "str", "0", "1")
    diff("ZREMRANGEBYLEX", "str", "-", "+")
    diff("ZREMRANGEBYLEX", "str", "x", "+")
    diff("ZREMRANGEBYRANK", "z", "0")


def test_zpop_zmpop_diff(diff):
    diff("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e")
    diff("ZPOPMIN", "z")
    diff("ZPOPMAX", "z")
    diff("ZPOPMIN", "z", "0")
    diff("ZPOPMIN", "z", "1")
    diff("ZPOPMAX", "z", "10")
    diff("EXISTS", "z")
    diff("ZPOPMIN", "nokey")
    diff("ZPOPMIN", "nokey", "0")
    diff("ZPOPMIN", "nokey", "3")
    for bad in ("-1", "x", "1.5", ""):
        diff("ZPOPMIN", "z", bad)
    diff("ZPOPMIN", "z", "1", "2")
    diff("ZPOPMIN")
    diff("SET", "str", "x")
    diff("ZPOPMAX", "str")
    diff("ZPOPMAX", "str", "0")
    diff("ZADD", "z", "1", "a", "2", "b", "3", "c")
    diff("ZADD", "y", "10", "x")
    diff("ZMPOP", "2", "nokey", "z", "MIN")
    diff("ZMPOP", "2", "nokey", "z", "max", "COUNT", "1")
    diff("ZMPOP", "1", "z", "MIN", "COUNT", "10")
    diff("ZMPOP", "2", "z", "y", "MIN", "COUNT", "10")
    diff("ZMPOP", "1", "y", "MIN")
    diff("ZMPOP", "1", "str", "MIN")
    diff("ZMPOP", "2", "nokey", "str", "MIN")
    diff("ZMPOP", "2", "nokey", "nokey2", "MIN")
    for args in (["0", "z", "MIN"], ["x", "z", "MIN"], ["-1", "z", "MIN"], ["1", "z", "MIN", "COUNT", "0"],
                 ["1", "z", "MIN", "COUNT", "x"], ["1", "z", "MIN", "COUNT"], ["1", "z", "MIN", "COUNT", "1", "COUNT", "1"],
                 ["1", "z", "FOO"], ["2", "z", "MIN"], ["5", "z", "MIN"], ["1", "z", "MIN", "FOO"], ["1", "z"]):
        diff("ZMPOP", *args)


def test_zpop_resp3_diff(diff3):
    diff3("ZADD", "z", "1", "a", "2.5", "b", "3", "c", "4", "d")
    diff3("ZPOPMIN", "z")
    diff3("ZPOPMIN", "z", "1")
    diff3("ZPOPMAX", "z", "2")
    diff3("ZPOPMAX", "z", "0")
    diff3("ZPOPMIN", "nokey")
    diff3("ZPOPMIN", "nokey", "2")
    diff3("ZADD", "z", "1", "a", "2", "b")
    diff3("ZMPOP", "1", "z", "MIN")
    diff3("ZMPOP", "1", "z", "MAX", "COUNT", "5")
    diff3("ZMPOP", "1", "z", "MAX", "COUNT", "5")
    diff3("BZPOPMIN", "z", "0.01")
    diff3("BZMPOP", "0.01", "1", "z", "MIN")
    diff3("ZADD", "z", "1", "a", "2", "b")
    diff3("BZPOPMAX", "z", "0")
    diff3("BZMPOP", "0", "1", "z", "MIN")


def test_resp3_shapes_diff(diff3):
    diff3("ZADD", "z", "1", "a", "2.5", "b", "3", "c", "inf", "i", "-inf", "ni")
    diff3("ZSCORE", "z", "b")
    diff3("ZSCORE", "z", "i")
    diff3("ZSCORE", "z", "ni")
    diff3("ZSCORE", "z", "nosuch")
    diff3("ZMSCORE", "z", "a", "nosuch", "i")
    diff3("ZINCRBY", "z", "1", "a")
    diff3("ZADD", "z", "INCR", "1", "a")
    diff3("ZADD", "z", "INCR", "NX", "1", "a")
    diff3("ZRANGE", "z", "0", "-1")
    diff3("ZRANGE", "z", "0", "-1", "WITHSCORES")
    diff3("ZRANGE", "z", "0", "-1", "REV", "WITHSCORES")
    diff3("ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES", "LIMIT", "1", "2")
    diff3("ZREVRANGEBYSCORE", "z", "+inf", "-inf", "WITHSCORES")
    diff3("ZREVRANGE", "z", "0", "1", "WITHSCORES")
    diff3("ZRANGE", "nokey", "0", "-1", "WITHSCORES")
    diff3("ZUNION", "2", "z", "z", "WITHSCORES")
    diff3("ZINTER", "1", "z", "WITHSCORES")
    diff3("ZDIFF", "1", "z", "WITHSCORES")
    diff3("ZSCAN", "z", "0")
    diff3("ZRANDMEMBER", "z", "100", "WITHSCORES")
    diff3("ZRANDMEMBER", "nokey")
    diff3("ZRANDMEMBER", "nokey", "5")
    diff3("ZRANK", "z", "nosuch")


def test_zrandmember_diff(diff):
    diff("ZADD", "z", "1", "a", "2", "b", "3", "c")
    diff("ZRANDMEMBER", "z", "3")
    diff("ZRANDMEMBER", "z", "100", "WITHSCORES")
    diff("ZRANDMEMBER", "z", "0")
    diff("ZRANDMEMBER", "z", "0", "WITHSCORES")
    diff("ZRANDMEMBER", "nokey")
    diff("ZRANDMEMBER", "nokey", "5")
    diff("ZRANDMEMBER", "nokey", "-5", "WITHSCORES")
    diff("SET", "str", "x")
    diff("ZRANDMEMBER", "str")
    diff("ZRANDMEMBER", "str", "1")
    for args in (["x"], ["1.5"], ["-9223372036854775808"], ["9223372036854775808"], ["1", "WITHSCORES", "x"],
                 ["1", "foo"], ["9223372036854775807", "WITHSCORES"], ["-4611686018427387904", "withscores"],
                 ["4611686018427387904", "withscores"]):
        diff("ZRANDMEMBER", "z", *args)
    diff("ZRANDMEMBER", "nokey", "x")
    diff("ZRANDMEMBER", "nokey", "1", "foo")


def test_setops_diff(diff):
    diff("ZADD", "z1", "1", "a", "2", "b", "3", "c")
    diff("ZADD", "z2", "10", "b", "20", "c", "30", "d")
    diff("ZADD", "z3", "5", "c", "+inf", "d", "-inf", "a")
    diff("SADD", "s", "a", "d", "e")
    diff("SET", "str", "x")
    for op in ("ZUNION", "ZINTER"):
        for keys in (["z1", "z2"], ["z1", "z2", "z3"], ["z1", "s"], ["z1", "nokey"], ["nokey"], ["z1", "z1"]):
            n = str(len(keys))
            diff(op, n, *keys)
            diff(op, n, *keys, "WITHSCORES")
            for agg in ("SUM", "min", "MAX"):
                diff(op, n, *keys, "AGGREGATE", agg, "WITHSCORES")
            diff(op, n, *keys, "WEIGHTS", *(["2"] * len(keys)), "WITHSCORES")
            diff(op, n, *keys, "WEIGHTS", *(["0"] * len(keys)), "AGGREGATE", "max", "WITHSCORES")
            diff(op, n, *keys, "WEIGHTS", *(["-1.5"] * len(keys)), "WITHSCORES")
            diff(op, n, *keys, "WEIGHTS", *(["inf"] * len(keys)), "WITHSCORES")
            diff(op, n, *keys, "WEIGHTS", *(["-inf"] * len(keys)), "AGGREGATE", "MIN", "WITHSCORES")
            diff(op + "STORE", "dst", n, *keys, "WEIGHTS", *(["3"] * len(keys)))
            diff("ZRANGE", "dst", "0", "-1", "WITHSCORES")
    for keys in (["z1", "z2"], ["z1", "z2", "z3"], ["z1", "s"], ["s", "z1"], ["z1", "nokey"], ["nokey", "z1"],
                 ["z1", "z1"], ["z1"]):
        n = str(len(keys))
        diff("ZDIFF", n, *keys)
        diff("ZDIFF", n, *keys, "WITHSCORES")
        diff("ZDIFFSTORE", "dst", n, *keys)
        diff("ZRANGE", "dst", "0", "-1", "WITHSCORES")
        diff("ZINTERCARD", n, *keys)
        diff("ZINTERCARD", n, *keys, "LIMIT", "1")
        diff("ZINTERCARD", n, *keys, "LIMIT", "0")
    diff("ZINTERSTORE", "dst", "2", "z1", "nokey")
    diff("EXISTS", "dst")
    diff("ZUNIONSTORE", "z1", "2", "z1", "z2", "AGGREGATE", "MAX")
    diff("ZRANGE", "z1", "0", "-1", "WITHSCORES")
    diff("SET", "dst", "x")
    diff("ZUNIONSTORE", "dst", "1", "z2")
    diff("TYPE", "dst")
    # errors
    for op in ("ZUNION", "ZINTER", "ZDIFF", "ZINTERCARD"):
        diff(op, "0", "z1")
        diff(op, "-1", "z1")
        diff(op, "x", "z1")
        diff(op, "3", "z1", "z2")
        diff(op, "2", "z1", "str")
        diff(op, "2", "str", "nokey")
        diff(op, "1", "z1", "FOO")
        diff(op, "1", "z1", "WEIGHTS", "1")
        diff(op, "1", "z1", "WEIGHTS", "x")
        diff(op, "2", "z1", "z2", "WEIGHTS", "1")
        diff(op, "1", "z1", "WEIGHTS", "nan")
        diff(op, "1", "z1", "AGGREGATE", "foo")
        diff(op, "1", "z1", "AGGREGATE")
        diff(op, "1", "z1", "WITHSCORES", "WITHSCORES")
        diff(op, "1", "z1", "LIMIT", "1")
        diff(op, "1", "z1", "LIMIT", "-1")
        diff(op, "1", "z1", "LIMIT", "x")
        diff(op, "1", "z1", "LIMIT", "1", "LIMIT", "2")
        diff(op, "1")
    for op in ("ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"):
        diff(op, "dst", "0", "z1")
        diff(op, "dst", "x", "z1")
        diff(op, "dst", "2", "z1")
        diff(op, "dst", "1", "str")
        diff(op, "dst", "1", "z1", "WITHSCORES")
        diff(op, "dst", "1", "z1", "WEIGHTS", "2")
        diff(op, "dst", "1", "z1", "AGGREGATE", "sum")
        diff(op, "dst", "1")


def test_zscan_diff(diff):
    diff("ZADD", "z", "1", "a", "2.5", "b", "0.1", "c", "-0", "d", "inf", "e", "7353298492104700", "f", "1e17", "g")
    diff("ZSCAN", "z", "0")
    diff("ZSCAN", "z", "0", "COUNT", "1")
    diff("ZSCAN", "z", "0", "MATCH", "[a-c]")
    diff("ZSCAN", "z", "0", "MATCH", "*", "COUNT", "100")
    diff("ZSCAN", "z", "")
    diff("ZSCAN", "z", "-1")
    diff("ZSCAN", "z", "+5")
    diff("ZSCAN", "nokey", "0")
    diff("ZSCAN", "nokey", "0", "COUNT", "0", "FOO")
    diff("SET", "str", "x")
    diff("ZSCAN", "str", "0")
    diff("ZSCAN", "str", "x")
    for args in (["x"], [" 1"], ["1 "], ["+"], ["18446744073709551616"], ["0", "COUNT", "0"], ["0", "COUNT", "x"],
                 ["0", "TYPE", "zset"], ["0", "MATCH"], ["0", "NOVALUES"], ["0", "COUNT"], ["18446744073709551615"]):
        diff("ZSCAN", "z", *args)


def test_arity_diff(diff):
    for cmd, n in [("ZADD", 3), ("ZINCRBY", 3), ("ZREM", 2), ("ZSCORE", 2), ("ZMSCORE", 2), ("ZCARD", 1),
                   ("ZCOUNT", 3), ("ZLEXCOUNT", 3), ("ZRANK", 2), ("ZREVRANK", 2), ("ZRANGE", 3),
                   ("ZRANGESTORE", 4), ("ZREVRANGE", 3), ("ZRANGEBYSCORE", 3), ("ZREVRANGEBYSCORE", 3),
                   ("ZRANGEBYLEX", 3), ("ZREVRANGEBYLEX", 3), ("ZREMRANGEBYRANK", 3), ("ZREMRANGEBYSCORE", 3),
                   ("ZREMRANGEBYLEX", 3), ("ZPOPMIN", 1), ("ZPOPMAX", 1), ("ZRANDMEMBER", 1), ("ZUNIONSTORE", 3),
                   ("ZINTERSTORE", 3), ("ZDIFFSTORE", 3), ("ZUNION", 2), ("ZINTER", 2), ("ZDIFF", 2),
                   ("ZINTERCARD", 2), ("ZMPOP", 3), ("BZPOPMIN", 2), ("BZPOPMAX", 2), ("BZMPOP", 4), ("ZSCAN", 2)]:
        diff(cmd, *(["k"] * (n - 1)))
    for cmd in ("ZINCRBY", "ZSCORE", "ZCARD", "ZCOUNT", "ZLEXCOUNT", "ZRANK", "ZREVRANK", "ZREMRANGEBYRANK",
                "ZREMRANGEBYSCORE", "ZREMRANGEBYLEX"):
        diff(cmd, *(["0"] * 5))


def test_encoding_diff(diff):
    diff("ZADD", "z", *[x for i in range(128) for x in (str(i), f"m{i}")])
    diff("OBJECT", "ENCODING", "z")
    diff("ZADD", "z", "1", "m1")
    diff("OBJECT", "ENCODING", "z")
    diff("ZADD", "z", "1", "new")
    diff("OBJECT", "ENCODING", "z")
    diff("ZREMRANGEBYRANK", "z", "0", "100")
    diff("OBJECT", "ENCODING", "z")
    diff("ZADD", "y", "1", "x" * 65)
    diff("OBJECT", "ENCODING", "y")
    diff("ZINTERSTORE", "w", "1", "z")
    diff("OBJECT", "ENCODING", "w")
    diff("ZRANGESTORE", "w", "z", "0", "-1")
    diff("OBJECT", "ENCODING", "w")
    diff("ZUNIONSTORE", "w", "1", "y")
    diff("OBJECT", "ENCODING", "w")
    diff("ZINCRBY", "q", "1", "x" * 65)
    diff("OBJECT", "ENCODING", "q")


def test_multi_diff(diff):
    diff("ZADD", "z", "1", "a")
    diff("MULTI")
    diff("ZADD", "z", "2", "b")
    diff("BZPOPMIN", "z", "0")
    diff("BZPOPMIN", "z", "0")
    diff("BZPOPMIN", "z", "0")
    diff("BZMPOP", "0", "1", "z", "MAX")
    diff("ZRANGE", "z", "0", "-1")
    diff("EXEC")


def test_blocking_errors_diff(diff):
    diff("SET", "str", "x")
    diff("ZADD", "z", "1", "a")
    for t in ("x", "-1", "-0.0015", "-0.002", "nan", "inf", "-inf", "1e30", "1e5000", "1e-5000", " 1", "1 "):
        diff("BZPOPMIN", "nokey", t)
    diff("BZPOPMIN", "str", "0")
    diff("BZPOPMIN", "nokey", "str", "0")
    diff("BZPOPMIN", "nokey", "z", "str", "0")
    diff("ZADD", "z", "1", "a")
    diff("BZPOPMAX", "z", "str", "0x10")
    diff("BZPOPMIN", "str", "x")
    for args in (["x", "1", "z", "MIN"], ["0", "0", "z", "MIN"], ["0", "x", "z", "MIN"], ["0", "1", "z", "FOO"],
                 ["0", "2", "z", "MIN"], ["0", "1", "z", "MIN", "COUNT", "0"], ["x", "0", "z", "MIN"],
                 ["0", "1", "str", "MIN"], ["-1", "1", "z", "MIN"], ["0", "1", "z", "MIN", "COUNT"]):
        diff("BZMPOP", *args)
    diff("ZADD", "z", "1", "a", "2", "b", "3", "c")
    diff("BZMPOP", "0", "2", "nokey", "z", "MAX", "COUNT", "2")
    diff("BZPOPMIN", "nokey", "z", "0")
    diff("EXISTS", "z")


# ---------------------------------------------------------------------------
# blocking pops
# ---------------------------------------------------------------------------


def _client(port: int) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=10)


def test_bzpopmin_immediate(r):
    r.zadd("z", {"a": 1, "b": 2})
    assert r.bzpopmin("z", 1) == (b"z", b"a", 1.0)
    assert r.bzpopmax(["nokey", "z"], 1) == (b"z", b"b", 2.0)
    assert r.exists("z") == 0
    assert r.bzpopmin("z", 0.01) is None


def test_bzpopmin_short_timeout_returns_promptly(r, rq_server):
    conn = RawConn(rq_server.port)
    try:
        for _ in range(20):
            t0 = time.monotonic()
            assert conn.call_raw("BZPOPMIN", "marker", "0.001") == b"*-1\r\n"
            assert time.monotonic() - t0 < 0.25
        t0 = time.monotonic()
        assert conn.call_raw("BZPOPMIN", "marker", "0.2") == b"*-1\r\n"
        dt = time.monotonic() - t0
        assert 0.15 < dt < 1.5
        assert conn.call_raw("BZMPOP", "0.05", "1", "marker", "MIN") == b"*-1\r\n"
        assert conn.call_raw("PING") == b"+PONG\r\n"
    finally:
        conn.close()


def test_bzpopmin_woken_by_zadd(r, rq_server):
    conn = RawConn(rq_server.port)
    try:
        conn.send("BZPOPMIN", "q1", "q2", "5")
        time.sleep(0.1)
        r.zadd("q2", {"job": 7353298492104700})
        assert conn.read_raw() == b"*3\r\n$2\r\nq2\r\n$3\r\njob\r\n$16\r\n7353298492104700\r\n"
        assert r.exists("q2") == 0
        # commands pipelined behind a blocked one run after it is served
        conn.send_raw(b"*3\r\n$8\r\nBZPOPMAX\r\n$2\r\nq3\r\n$1\r\n0\r\n*1\r\n$4\r\nPING\r\n")
        time.sleep(0.1)
        r.zadd("q3", {"a": 1, "b": 2})
        assert conn.read_raw() == b"*3\r\n$2\r\nq3\r\n$1\r\nb\r\n$1\r\n2\r\n"
        assert conn.read_raw() == b"+PONG\r\n"
        assert r.zrange("q3", 0, -1) == [b"a"]
    finally:
        conn.close()


def test_bzpopmin_fifo(r, rq_server):
    conns = [RawConn(rq_server.port) for _ in range(3)]
    try:
        for i, c in enumerate(conns):
            c.send("BZPOPMIN", "fifo", "5")
            time.sleep(0.05 + 0.01 * i)
        r.zadd("fifo", {"a": 1, "b": 2})
        assert conns[0].read_raw().endswith(b"$1\r\na\r\n$1\r\n1\r\n")
        assert conns[1].read_raw().endswith(b"$1\r\nb\r\n$1\r\n2\r\n")
        r.zadd("fifo", {"c": 3})
        assert conns[2].read_raw().endswith(b"$1\r\nc\r\n$1\r\n3\r\n")
    finally:
        for c in conns:
            c.close()


def test_bzmpop_woken_count(r, rq_server):
    conn = RawConn(rq_server.port)
    try:
        conn.send("BZMPOP", "5", "2", "x", "y", "MAX", "COUNT", "2")
        time.sleep(0.1)
        r.zadd("y", {"a": 1, "b": 2, "c": 3})
        assert conn.read_raw() == (
            b"*2\r\n$1\r\ny\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
        )
    finally:
        conn.close()


def test_blocked_ignores_wrong_type_until_zset(r, rq_server):
    conn = RawConn(rq_server.port)
    try:
        conn.send("BZPOPMIN", "k", "5")
        time.sleep(0.1)
        r.set("k", "string")
        time.sleep(0.1)
        r.delete("k")
        r.zadd("k", {"m": 1})
        assert conn.read_raw() == b"*3\r\n$1\r\nk\r\n$1\r\nm\r\n$1\r\n1\r\n"
    finally:
        conn.close()


def test_blocked_woken_inside_multi_and_by_zunionstore(r, rq_server):
    conn = RawConn(rq_server.port)
    try:
        conn.send("BZPOPMIN", "dst", "5")
        time.sleep(0.1)
        r.zadd("src", {"a": 1})
        r.zunionstore("dst", ["src"])
        assert conn.read_raw() == b"*3\r\n$3\r\ndst\r\n$1\r\na\r\n$1\r\n1\r\n"
        conn.send("BZPOPMAX", "m", "5")
        time.sleep(0.1)
        p = r.pipeline(transaction=True)
        p.zadd("m", {"a": 1, "b": 2})
        p.zrem("m", "b")
        p.execute()
        assert conn.read_raw() == b"*3\r\n$1\r\nm\r\n$1\r\na\r\n$1\r\n1\r\n"
    finally:
        conn.close()


def test_disconnect_while_blocked(r, rq_server):
    s = socket.create_connection(("127.0.0.1", rq_server.port))
    s.sendall(b"*3\r\n$8\r\nBZPOPMIN\r\n$4\r\ngone\r\n$1\r\n0\r\n")
    time.sleep(0.1)
    s.close()
    time.sleep(0.1)
    other = RawConn(rq_server.port)
    try:
        other.send("BZPOPMIN", "gone", "5")
        time.sleep(0.1)
        r.zadd("gone", {"x": 1})
        assert other.read_raw() == b"*3\r\n$4\r\ngone\r\n$1\r\nx\r\n$1\r\n1\r\n"
        assert r.exists("gone") == 0
    finally:
        other.close()


def test_tiny_negative_timeout_blocks_forever(r, rq_server):
    # Redis computes ceill(-0.001 * 1000) in long double: -0, i.e. no timeout
    conn = RawConn(rq_server.port)
    try:
        conn.send("BZPOPMIN", "tiny", "-0.001")
        time.sleep(0.3)
        r.zadd("tiny", {"x": 1})
        assert conn.read_raw() == b"*3\r\n$4\r\ntiny\r\n$1\r\nx\r\n$1\r\n1\r\n"
    finally:
        conn.close()


def test_blocking_timeout_zero_waits(r, rq_server):
    result = {}

    def worker() -> None:
        c = _client(rq_server.port)
        result["v"] = c.bzpopmin("forever", 0)
        c.close()

    t = threading.Thread(target=worker)
    t.start()
    time.sleep(0.3)
    assert t.is_alive()
    r.zadd("forever", {"x": 2.5})
    t.join(5)
    assert result["v"] == (b"forever", b"x", 2.5)


def test_blocking_resp3_reply(rq_server):
    conn = RawConn(rq_server.port)
    other = RawConn(rq_server.port)
    try:
        conn.call_raw("HELLO", "3")
        conn.send("BZPOPMIN", "r3", "5")
        time.sleep(0.1)
        other.call_raw("ZADD", "r3", "1.5", "a")
        assert conn.read_raw() == b"*3\r\n$2\r\nr3\r\n$1\r\na\r\n,1.5\r\n"
        assert conn.call_raw("BZPOPMIN", "r3", "0.01") == b"_\r\n"
    finally:
        conn.close()
        other.close()


def test_zscan_skiplist_delete_while_scanning(r):
    r.zadd("big", {f"m{i:04d}": i // 3 for i in range(1000)})  # runs of 3 equal scores
    r.zadd("big", {"n0": -0.0, "n1": float("-inf"), "n2": float("inf")})
    assert r.object("encoding", "big") == b"skiplist"
    want = set(r.zrange("big", 0, -1))
    seen: list[bytes] = []
    cursor = 0
    calls = 0
    while True:
        cursor, items = r.zscan("big", cursor, count=7)
        calls += 1
        assert len(items) <= 9
        page = [m for m, _ in items]
        seen.extend(page)
        if page:
            r.zrem("big", *page)  # delete what was seen: nothing unseen may be skipped
        if cursor == 0:
            break
    assert calls > 100
    assert len(seen) == len(set(seen)) == len(want)
    assert set(seen) == want
    assert r.exists("big") == 0


def test_zscan_skiplist_match_and_ties(r):
    r.zadd("big", {f"k{i:03d}": 0 for i in range(300)})
    cursor, items = r.zscan("big", 0, count=10)
    assert cursor == 0 and len(items) == 300  # one run of equal scores is never split
    r.zadd("big", {f"j{i:03d}": i + 1 for i in range(300)})
    got = set()
    cursor = 0
    while True:
        cursor, items = r.zscan("big", cursor, match="j1*", count=50)
        got.update(m for m, _ in items)
        if cursor == 0:
            break
    assert got == {f"j{i:03d}".encode() for i in range(300) if f"{i:03d}".startswith("1")}
    assert r.zscan("big", 2**64 - 1) == (0, [])

"""String commands, byte for byte against redis-server (t_string.c)."""

from __future__ import annotations

import time

import pytest


def test_get_set_basic(diff):
    diff("GET", "k")
    diff("SET", "k", "v")
    diff("GET", "k")
    diff("SET", "k", "")
    diff("GET", "k")
    diff("SET", "bin", "\x00\xff\r\n")
    diff("GET", "bin")
    diff("GET")
    diff("GET", "a", "b")
    diff("SET", "k")
    diff("SET")
    diff("LPUSH", "list", "x")
    diff("GET", "list")
    diff("SET", "list", "now a string")
    diff("TYPE", "list")


def test_set_options(diff):
    diff("SET", "k", "v", "NX")
    diff("SET", "k", "v2", "NX")
    diff("SET", "k", "v3", "XX")
    diff("SET", "missing", "v", "XX")
    diff("GET", "k")
    diff("SET", "k", "v", "nx", "xx")
    diff("SET", "k", "v", "XX", "NX")
    diff("SET", "k", "v", "NX", "NX")
    diff("SET", "k", "v", "GET")
    diff("SET", "new", "v", "GET")
    diff("SET", "k", "w", "NX", "GET")
    diff("SET", "k", "w", "XX", "GET")
    diff("SET", "nope", "w", "XX", "GET")
    diff("SET", "nope2", "w", "NX", "GET")
    diff("LPUSH", "l", "a")
    diff("SET", "l", "v", "GET")
    diff("SET", "l", "v", "NX", "GET")
    diff("SET", "l", "v", "XX", "GET")
    diff("LRANGE", "l", "0", "-1")
    diff("SET", "k", "v", "FOO")
    diff("SET", "k", "v", "EX")
    diff("SET", "k", "v", "EX", "x")
    diff("SET", "k", "v", "EX", "0")
    diff("SET", "k", "v", "EX", "-1")
    diff("SET", "k", "v", "PX", "0")
    diff("SET", "k", "v", "EXAT", "0")
    diff("SET", "k", "v", "PXAT", "-5")
    diff("SET", "k", "v", "EX", "1.5")
    diff("SET", "k", "v", "EX", "9223372036854775807")
    diff("SET", "k", "v", "PX", "9223372036854775807")
    diff("SET", "k", "v", "EXAT", "9223372036854775807")
    diff("SET", "k", "v", "EX", "10", "PX", "100")
    diff("SET", "k", "v", "EX", "10", "EX", "10")
    diff("SET", "k", "v", "EX", "10", "KEEPTTL")
    diff("SET", "k", "v", "KEEPTTL", "PX", "10")
    diff("SET", "k", "v", "PXAT", "10", "EXAT", "10")
    diff("SET", "k", "v", "GET", "GET")
    diff("SET", "k", "v", "KEEPTTL", "KEEPTTL")
    diff("SET", "k", "v", "NX", "EX", "100", "GET")


def test_set_ttls(diff):
    diff("SET", "k", "v", "EX", "100")
    diff("TTL", "k")
    diff("SET", "k", "v2", "KEEPTTL")
    diff("TTL", "k")
    diff("SET", "k", "v3")
    diff("TTL", "k")
    diff("SET", "k", "v", "PX", "100000")
    diff("TTL", "k")
    diff("SET", "k", "v", "EXAT", str(int(time.time()) + 1000))
    diff("TTL", "k")
    diff("SET", "k", "v", "PXAT", str(int(time.time() * 1000) + 1_000_000))
    diff("TTL", "k")
    diff("SET", "k", "v", "EX", "100", "GET")
    diff("SET", "k", "v", "KEEPTTL", "GET", "XX")
    diff("TTL", "k")
    diff("SET", "k", "v", "PXAT", "1")  # in the past: the key is gone
    diff("EXISTS", "k")
    diff("SET", "k", "v", "EXAT", "1", "GET")


def test_setnx_setex_psetex(diff):
    diff("SETNX", "k", "1")
    diff("SETNX", "k", "2")
    diff("GET", "k")
    diff("SETNX", "k")
    diff("SETEX", "k", "100", "v")
    diff("TTL", "k")
    diff("SETEX", "k", "0", "v")
    diff("SETEX", "k", "-1", "v")
    diff("SETEX", "k", "x", "v")
    diff("SETEX", "k", "9223372036854775807", "v")
    diff("SETEX", "k", "100")
    diff("PSETEX", "p", "100000", "v")
    diff("TTL", "p")
    diff("PSETEX", "p", "0", "v")
    diff("PSETEX", "p", "-10", "v")
    diff("PSETEX", "p", "1.5", "v")
    diff("GET", "p")
    diff("LPUSH", "l", "x")
    diff("SETNX", "l", "v")
    diff("SETEX", "l", "10", "v")
    diff("TYPE", "l")


def test_getset_getdel_getex(diff):
    diff("GETSET", "k", "1")
    diff("GETSET", "k", "2")
    diff("SET", "k", "v", "EX", "100")
    diff("GETSET", "k", "3")
    diff("TTL", "k")
    diff("GETDEL", "k")
    diff("GETDEL", "k")
    diff("EXISTS", "k")
    diff("LPUSH", "l", "x")
    diff("GETSET", "l", "v")
    diff("GETDEL", "l")
    diff("GETEX", "l")
    diff("GETEX", "l", "PERSIST")
    diff("GETSET", "k")
    diff("GETDEL")
    diff("SET", "g", "v")
    diff("GETEX", "g")
    diff("GETEX", "nokey")
    diff("GETEX", "nokey", "EX", "10")
    diff("GETEX", "g", "EX", "100")
    diff("TTL", "g")
    diff("GETEX", "g", "PERSIST")
    diff("TTL", "g")
    diff("GETEX", "g", "PX", "100000")
    diff("TTL", "g")
    diff("GETEX", "g", "EXAT", str(int(time.time()) + 500))
    diff("TTL", "g")
    diff("GETEX", "g", "PXAT", str(int(time.time() * 1000) + 600_000))
    diff("TTL", "g")
    for bad in (("EX",), ("EX", "0"), ("EX", "-1"), ("EX", "x"), ("PX", "0"), ("EXAT", "0"), ("PXAT", "-1"),
                ("EX", "10", "PX", "10"), ("PERSIST", "EX", "10"), ("EX", "10", "PERSIST"), ("FOO",),
                ("PERSIST", "PERSIST"), ("EX", "9223372036854775807"), ("KEEPTTL",)):
        diff("GETEX", "g", *bad)
        diff("GETEX", "nokey", *bad)
    diff("GETEX", "g", "EXAT", "1")
    diff("EXISTS", "g")
    diff("GETEX")


def test_mget_mset_msetnx(diff):
    diff("MSET", "a", "1", "b", "2", "c", "3")
    diff("MGET", "a", "b", "c", "d")
    diff("LPUSH", "l", "x")
    diff("MGET", "a", "l", "nokey")
    diff("MSET", "a")
    diff("MSET", "a", "1", "b")
    diff("MSET")
    diff("MSETNX", "x", "1", "y", "2")
    diff("MSETNX", "y", "3", "z", "4")
    diff("MGET", "x", "y", "z")
    diff("MSETNX", "x")
    diff("MSETNX", "x", "1", "y")
    diff("MSETNX", "q", "1", "q", "2")
    diff("GET", "q")
    diff("MSET", "a", "1", "a", "2")
    diff("GET", "a")
    diff("MGET")
    diff("SET", "t", "v", "EX", "100")
    diff("MSET", "t", "w")
    diff("TTL", "t")


def test_incr_decr(diff):
    diff("INCR", "n")
    diff("INCR", "n")
    diff("DECR", "n")
    diff("DECR", "m")
    diff("INCRBY", "n", "10")
    diff("INCRBY", "n", "-100")
    diff("DECRBY", "n", "5")
    diff("DECRBY", "n", "-5")
    diff("INCRBY", "n", "x")
    diff("INCRBY", "n", "1.5")
    diff("INCRBY", "n", "")
    diff("INCRBY", "n", " 1")
    diff("INCRBY", "n", "99999999999999999999")
    diff("DECRBY", "n", "-9223372036854775808")
    diff("DECRBY", "n", "x")
    diff("SET", "big", "9223372036854775807")
    diff("INCR", "big")
    diff("INCRBY", "big", "0")
    diff("SET", "small", "-9223372036854775808")
    diff("DECR", "small")
    diff("INCRBY", "small", "-1")
    diff("SET", "s", "abc")
    diff("INCR", "s")
    diff("SET", "s", " 1")
    diff("INCR", "s")
    diff("SET", "s", "01")
    diff("INCR", "s")
    diff("SET", "s", "1.0")
    diff("INCR", "s")
    diff("SET", "s", "")
    diff("INCR", "s")
    diff("SET", "s", "-0")
    diff("INCR", "s")
    diff("SET", "t", "5", "EX", "100")
    diff("INCR", "t")
    diff("TTL", "t")
    diff("LPUSH", "l", "x")
    diff("INCR", "l")
    diff("DECRBY", "l", "1")
    diff("INCR")
    diff("INCRBY", "n")
    diff("OBJECT", "ENCODING", "n")


@pytest.mark.parametrize(
    "start,incr",
    [
        ("", "0.1"), ("10.5", "0.1"), ("3.0e3", "200"), ("5", "-5"), ("", "1e-5"), ("", "5.0e3"),
        ("", "-0"), ("1", "1.5e2"), ("0.1", "0.2"), ("", "1"), ("", "10000000000000000000000"),
        ("1.1", "1.1"), ("", "3.14159265358979323846"), ("7", "0x10"), ("", "inf"), ("", "-inf"),
        ("", "nan"), ("", "abc"), ("", ""), ("", " 1"), ("", "1 "), ("abc", "1"), ("", "1e400"),
        ("1.7976931348623157e308", "1.7976931348623157e308"), ("", "0.000000000000000001"), ("", "1.0"),
        ("", "-1.5"), ("123456789012345678", "1"), ("", "1_0"), ("", ".5"), ("", "5."),
    ],
)
def test_incrbyfloat(diff, start, incr):
    if start:
        diff("SET", "f", start)
    diff("INCRBYFLOAT", "f", incr)
    diff("GET", "f")


def test_incrbyfloat_misc(diff):
    diff("SET", "f", "1", "EX", "100")
    diff("INCRBYFLOAT", "f", "1.5")
    diff("TTL", "f")
    diff("LPUSH", "l", "x")
    diff("INCRBYFLOAT", "l", "1")
    diff("INCRBYFLOAT", "f")
    for _ in range(11):
        diff("INCRBYFLOAT", "g", "0.1")
    diff("OBJECT", "ENCODING", "g")
    diff("INCRBYFLOAT", "g", "8.9")  # "10": still embstr in Redis, not int
    diff("OBJECT", "ENCODING", "g")


def test_append_strlen(diff):
    diff("APPEND", "k", "abc")
    diff("APPEND", "k", "def")
    diff("APPEND", "k", "")
    diff("GET", "k")
    diff("STRLEN", "k")
    diff("STRLEN", "nokey")
    diff("SET", "n", "12")
    diff("APPEND", "n", "3")
    diff("OBJECT", "ENCODING", "n")
    diff("GET", "n")
    diff("SET", "t", "v", "EX", "100")
    diff("APPEND", "t", "w")
    diff("TTL", "t")
    diff("LPUSH", "l", "x")
    diff("APPEND", "l", "x")
    diff("STRLEN", "l")
    diff("APPEND", "k")
    diff("STRLEN")
    diff("APPEND", "e", "")
    diff("EXISTS", "e")


def test_getrange_substr(diff):
    diff("SET", "s", "Hello World")
    ranges = [("0", "4"), ("-5", "-1"), ("0", "-1"), ("5", "3"), ("-1", "-5"), ("-100", "100"), ("100", "200"),
              ("-3", "100"), ("0", "0"), ("-1", "-1"), ("10", "10"), ("11", "11"), ("-11", "-11"), ("-12", "-12"),
              ("3", "-100"), ("-100", "-50"), ("0", "-12"), ("x", "1"), ("1", "y"), ("1.5", "2"),
              ("9223372036854775807", "1"), ("-9223372036854775808", "-1"), ("0", "9223372036854775807")]
    for a, b in ranges:
        diff("GETRANGE", "s", a, b)
        diff("SUBSTR", "s", a, b)
    diff("GETRANGE", "nokey", "0", "-1")
    diff("GETRANGE", "nokey", "x", "1")
    diff("SET", "empty", "")
    diff("GETRANGE", "empty", "0", "-1")
    diff("GETRANGE", "empty", "-1", "0")
    diff("SET", "n", "12345")
    diff("GETRANGE", "n", "1", "2")
    diff("LPUSH", "l", "x")
    diff("GETRANGE", "l", "0", "1")
    diff("GETRANGE", "s", "0")


def test_setrange(diff):
    diff("SETRANGE", "k", "5", "hello")
    diff("GET", "k")
    diff("SETRANGE", "k", "0", "J")
    diff("SETRANGE", "k", "12", "!")
    diff("GET", "k")
    diff("SETRANGE", "k", "2", "")
    diff("SETRANGE", "nokey", "10", "")
    diff("EXISTS", "nokey")
    diff("SETRANGE", "nokey", "0", "")
    diff("SETRANGE", "k", "-1", "x")
    diff("SETRANGE", "k", "x", "x")
    diff("SETRANGE", "k", "536870911", "xx")
    diff("SETRANGE", "k", "536870912", "")
    diff("SETRANGE", "nokey", "536870912", "x")
    diff("SETRANGE", "nokey", "-1", "")
    diff("SET", "n", "123")
    diff("SETRANGE", "n", "1", "9")
    diff("GET", "n")
    diff("OBJECT", "ENCODING", "n")
    diff("SET", "t", "abc", "EX", "100")
    diff("SETRANGE", "t", "1", "X")
    diff("TTL", "t")
    diff("LPUSH", "l", "x")
    diff("SETRANGE", "l", "0", "x")
    diff("SETRANGE", "l", "0", "")
    diff("SETRANGE", "k", "1")


def test_object_encoding_strings(diff):
    for v in ("1", "-1", "12345678901234567890", "9223372036854775807", "9223372036854775808", "01", " 1",
              "1.5", "abc", "x" * 44, "x" * 45, "", "0", "-0", "+1", "10000", "123456789012345678901"):
        diff("SET", "e", v)
        diff("OBJECT", "ENCODING", "e")
    diff("OBJECT", "ENCODING", "nokey")
    diff("SET", "e", "x")
    diff("APPEND", "e", "y")
    diff("OBJECT", "ENCODING", "e")
    diff("SETRANGE", "e", "0", "z")
    diff("OBJECT", "ENCODING", "e")
    diff("OBJECT", "ENCODING")
    diff("OBJECT", "FOO", "e")


def test_string_commands_redis_py(r):
    assert r.set("a", "1", ex=100, get=True) is None
    assert r.set("a", "2", keepttl=True, get=True) == b"1"
    assert 0 < r.ttl("a") <= 100
    assert r.incrbyfloat("f", 2.5) == 2.5
    assert r.getex("a", persist=True) == b"2"
    assert r.ttl("a") == -1
    assert r.mset({"x": "1", "y": "2"}) is True
    assert r.mget("x", "y", "z") == [b"1", b"2", None]
    assert r.setrange("pad", 3, "x") == 4
    assert r.get("pad") == b"\x00\x00\x00x"

"""The server starts, speaks RESP, and matches Redis on basic string commands."""

from __future__ import annotations


def test_ping_set_get(r):
    assert r.ping() is True
    assert r.set("a", "b") is True
    assert r.get("a") == b"b"


def test_strings_diff(diff):
    diff("SET", "k", "v")
    diff("GET", "k")
    diff("GET", "missing")
    diff("INCR", "n")
    diff("INCRBY", "n", "41")
    diff("INCRBYFLOAT", "f", "0.1")
    diff("INCRBYFLOAT", "f", "0.2")
    diff("INCR", "k")
    diff("APPEND", "k", "xyz")
    diff("GETRANGE", "k", "1", "-2")
    diff("SETRANGE", "k", "10", "z")
    diff("GET", "k")
    diff("GET")
    diff("NOSUCHCMD", "a", "b")
    diff("SET", "k", "v", "NX", "XX")
    diff("SET", "k", "v", "EX", "0")
    diff("MSET", "a", "1", "b")
    diff("MGET", "a", "k", "zz")

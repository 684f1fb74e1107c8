"""List commands: functional tests through redis-py and byte-for-byte diffs against Redis."""

from __future__ import annotations

import pytest

# ---- functional (redis-py) ------------------------------------------------------


def test_push_pop_basics(r):
    assert r.lpush("l", "a", "b", "c") == 3
    assert r.rpush("l", "d") == 4
    assert r.lrange("l", 0, -1) == [b"c", b"b", b"a", b"d"]
    assert r.lpop("l") == b"c"
    assert r.rpop("l") == b"d"
    assert r.llen("l") == 2
    assert r.lpop("l", 5) == [b"b", b"a"]
    assert r.exists("l") == 0
    assert r.lpop("l") is None
    assert r.rpop("l", 2) is None


def test_pushx(r):
    assert r.lpushx("l", "a") == 0
    assert r.rpushx("l", "a") == 0
    assert r.exists("l") == 0
    r.rpush("l", "x")
    assert r.lpushx("l", "a", "b") == 3
    assert r.rpushx("l", "z") == 4
    assert r.lrange("l", 0, -1) == [b"b", b"a", b"x", b"z"]


def test_type_and_encoding(r):
    r.rpush("l", "a")
    assert r.type("l") == b"list"
    assert r.object("encoding", "l") == b"quicklist"
    assert r.memory_usage("l") > 0


def test_index_set_insert(r):
    r.rpush("l", "a", "b", "c")
    assert r.lindex("l", 0) == b"a"
    assert r.lindex("l", -1) == b"c"
    assert r.lindex("l", 3) is None
    assert r.lset("l", -2, "B") is True
    assert r.linsert("l", "before", "B", "x") == 4
    assert r.linsert("l", "after", "c", "y") == 5
    assert r.linsert("l", "after", "nope", "y") == -1
    assert r.lrange("l", 0, -1) == [b"a", b"x", b"B", b"c", b"y"]


def test_trim_rem(r):
    r.rpush("l", *"abcabcabc")
    assert r.lrem("l", 2, "a") == 2
    assert r.lrange("l", 0, -1) == list(map(str.encode, "bcbcabc"))
    assert r.lrem("l", -1, "b") == 1
    assert r.lrange("l", 0, -1) == list(map(str.encode, "bcbcac"))
    assert r.lrem("l", 0, "c") == 3
    assert r.lrange("l", 0, -1) == [b"b", b"b", b"a"]
    assert r.ltrim("l", 1, -1) is True
    assert r.lrange("l", 0, -1) == [b"b", b"a"]
    assert r.ltrim("l", 5, 10) is True
    assert r.exists("l") == 0


def test_lpos(r):
    r.rpush("l", *"abcabcabc")
    assert r.lpos("l", "c") == 2
    assert r.lpos("l", "c", rank=2) == 5
    assert r.lpos("l", "c", rank=-1) == 8
    assert r.lpos("l", "c", count=0) == [2, 5, 8]
    assert r.lpos("l", "c", rank=-2, count=5) == [5, 2]
    assert r.lpos("l", "c", maxlen=2) is None
    assert r.lpos("l", "z") is None


def test_moves(r):
    r.rpush("src", "a", "b", "c")
    assert r.rpoplpush("src", "dst") == b"c"
    assert r.lmove("src", "dst", "LEFT", "RIGHT") == b"a"
    assert r.lrange("dst", 0, -1) == [b"c", b"a"]
    assert r.lmove("src", "src", "LEFT", "RIGHT") == b"b"
    assert r.lrange("src", 0, -1) == [b"b"]
    assert r.lmove("none", "dst", "LEFT", "LEFT") is None
    assert r.lmpop(2, "none", "dst", direction="RIGHT", count=5) == [b"dst", [b"a", b"c"]]
    assert r.exists("dst") == 0


def test_copy_rename_are_independent(r):
    r.rpush("l", "a", "b")
    assert r.copy("l", "l2") == 1
    r.rpush("l2", "c")
    assert r.lrange("l", 0, -1) == [b"a", b"b"]
    assert r.lrange("l2", 0, -1) == [b"a", b"b", b"c"]
    r.rename("l2", "l3")
    assert r.lpop("l3", 3) == [b"a", b"b", b"c"]
    assert r.exists("l2", "l3") == 0


def test_wrongtype(r):
    r.set("s", "x")
    with pytest.raises(Exception, match="WRONGTYPE"):
        r.lpush("s", "a")
    with pytest.raises(Exception, match="WRONGTYPE"):
        r.rpoplpush("s", "d")


def test_big_list_ops(r):
    n = 20000
    r.rpush("big", *range(n))
    assert r.llen("big") == n
    assert r.lindex("big", n - 3) == str(n - 3).encode()
    assert r.lrange("big", -3, -1) == [str(i).encode() for i in range(n - 3, n)]
    assert r.lrange("big", 5, 7) == [b"5", b"6", b"7"]
    assert r.lpos("big", str(n - 10)) == n - 10
    assert r.lpos("big", "7", rank=-1) == 7
    assert r.lrem("big", -1, str(n - 5)) == 1
    assert r.lrem("big", 1, "5") == 1
    assert r.llen("big") == n - 2
    assert r.lindex("big", 5) == b"6"
    r.ltrim("big", 10, 19)
    assert r.lrange("big", 0, -1) == [str(i).encode() for i in range(11, 21)]


# ---- differential -----------------------------------------------------------------


def test_diff_push_pop(diff):
    diff("LPUSH", "l")
    diff("LPUSH", "l", "a", "b", "c")
    diff("RPUSH", "l", "1", "2", "-3")
    diff("LPUSHX", "l", "x")
    diff("RPUSHX", "l", "y", "z")
    diff("LPUSHX", "nokey", "x")
    diff("RPUSHX", "nokey", "x")
    diff("RPUSHX", "nokey")
    diff("LRANGE", "l", "0", "-1")
    diff("LPOP", "l")
    diff("RPOP", "l")
    diff("LPOP", "l", "2")
    diff("RPOP", "l", "2")
    diff("LPOP", "l", "0")
    diff("RPOP", "l", "0")
    diff("LPOP", "l", "-1")
    diff("LPOP", "l", "abc")
    diff("LPOP", "l", "1.5")
    diff("LPOP", "l", "1", "2")
    diff("RPOP", "l", "1", "2")
    diff("LPOP", "l", "100")
    diff("EXISTS", "l")
    diff("LPOP", "l")
    diff("RPOP", "l")
    diff("LPOP", "l", "1")
    diff("RPOP", "l", "0")
    diff("LPOP", "l", "-1")
    diff("LPOP")
    diff("RPUSH")
    diff("RPUSH", "l")


def test_diff_wrongtype(diff):
    diff("SET", "s", "v")
    for args in [
        ("LPUSH", "s", "a"),
        ("RPUSH", "s", "a"),
        ("LPUSHX", "s", "a"),
        ("RPUSHX", "s", "a"),
        ("LPOP", "s"),
        ("RPOP", "s", "2"),
        ("LLEN", "s"),
        ("LINDEX", "s", "0"),
        ("LINDEX", "s", "x"),
        ("LRANGE", "s", "0", "-1"),
        ("LSET", "s", "0", "x"),
        ("LSET", "s", "x", "x"),
        ("LINSERT", "s", "BEFORE", "a", "b"),
        ("LINSERT", "s", "middle", "a", "b"),
        ("LREM", "s", "0", "a"),
        ("LTRIM", "s", "0", "1"),
        ("LPOS", "s", "a"),
        ("LPOS", "s", "a", "COUNT", "2"),
        ("LMOVE", "s", "d", "LEFT", "LEFT"),
        ("RPOPLPUSH", "s", "d"),
        ("LMPOP", "1", "s", "LEFT"),
        ("LMPOP", "2", "nokey", "s", "LEFT"),
        ("BLPOP", "s", "0.01"),
        ("BRPOP", "nokey", "s", "0.01"),
        ("BLMOVE", "s", "d", "LEFT", "LEFT", "0.01"),
        ("BRPOPLPUSH", "s", "d", "0.01"),
        ("BLMPOP", "0.01", "1", "s", "LEFT"),
    ]:
        diff(*args)
    diff("RPUSH", "l", "a", "b")
    diff("RPOPLPUSH", "l", "s")
    diff("LMOVE", "l", "s", "LEFT", "RIGHT")
    diff("BLMOVE", "l", "s", "LEFT", "RIGHT", "0")
    diff("BRPOPLPUSH", "l", "s", "0")
    diff("LRANGE", "l", "0", "-1")
    diff("LMPOP", "2", "l", "s", "LEFT")
    diff("LMPOP", "2", "s", "l", "LEFT")
    diff("BLPOP", "l", "s", "0")
    diff("LPOP", "l")
    diff("BLPOP", "s", "l", "0")


def test_diff_reads(diff):
    diff("RPUSH", "l", "a", "b", "c", "d", "e", "100", "-7")
    for a, b in [("0", "-1"), ("0", "0"), ("-3", "-1"), ("-100", "100"), ("5", "2"), ("7", "10"), ("-1", "-2"),
                 ("1", "-100"), ("-9223372036854775808", "9223372036854775807"), ("2", "4")]:
        diff("LRANGE", "l", a, b)
    for i in ["0", "1", "-1", "-7", "-8", "7", "6", "9223372036854775807", "-9223372036854775808"]:
        diff("LINDEX", "l", i)
    diff("LINDEX", "l", "x")
    diff("LINDEX", "l", "1.0")
    diff("LINDEX", "l", "9223372036854775808")
    diff("LINDEX", "nokey", "x")
    diff("LINDEX", "nokey", "0")
    diff("LRANGE", "l", "x", "1")
    diff("LRANGE", "l", "0", "y")
    diff("LRANGE", "nokey", "0", "-1")
    diff("LRANGE", "nokey", "x", "-1")
    diff("LLEN", "l")
    diff("TYPE", "l")
    diff("OBJECT", "ENCODING", "l")
    diff("LLEN", "nokey")
    diff("LLEN")
    diff("LLEN", "a", "b")
    diff("LINDEX", "l")
    diff("LRANGE", "l", "0")


def test_diff_lset_linsert(diff):
    diff("LSET", "nokey", "0", "x")
    diff("LSET", "nokey", "x", "x")
    diff("RPUSH", "l", "a", "b", "c")
    diff("LSET", "l", "0", "A")
    diff("LSET", "l", "-1", "C")
    diff("LSET", "l", "3", "x")
    diff("LSET", "l", "-4", "x")
    diff("LSET", "l", "x", "x")
    diff("LSET", "l", "1")
    diff("LINSERT", "l", "BEFORE", "A", "0")
    diff("LINSERT", "l", "after", "C", "D")
    diff("LINSERT", "l", "AfTeR", "b", "b2")
    diff("LINSERT", "l", "before", "zz", "q")
    diff("LINSERT", "l", "middle", "A", "q")
    diff("LINSERT", "nokey", "before", "A", "q")
    diff("LINSERT", "nokey", "middle", "A", "q")
    diff("LINSERT", "l", "before", "A")
    diff("LRANGE", "l", "0", "-1")


def test_diff_ltrim_lrem(diff):
    diff("LTRIM", "nokey", "0", "1")
    diff("LTRIM", "nokey", "x", "1")
    diff("RPUSH", "l", *"abcdefghij")
    diff("LTRIM", "l", "x", "1")
    diff("LTRIM", "l", "0", "y")
    diff("LTRIM", "l", "1", "-2")
    diff("LRANGE", "l", "0", "-1")
    diff("LTRIM", "l", "-100", "100")
    diff("LRANGE", "l", "0", "-1")
    diff("LTRIM", "l", "2", "3")
    diff("LRANGE", "l", "0", "-1")
    diff("LTRIM", "l", "1", "0")
    diff("EXISTS", "l")
    diff("RPUSH", "l", *"aabbaabbaa")
    diff("LREM", "l", "x", "a")
    diff("LREM", "l", "1", "a")
    diff("LREM", "l", "-2", "a")
    diff("LRANGE", "l", "0", "-1")
    diff("LREM", "l", "0", "b")
    diff("LRANGE", "l", "0", "-1")
    diff("LREM", "l", "0", "zz")
    diff("LREM", "l", "-100", "a")
    diff("EXISTS", "l")
    diff("RPUSH", "p", *(["p", "q", "r", "q"] * 6))
    for cnt, v in [("-3", "p"), ("-2", "q"), ("2", "r"), ("-1", "r"), ("3", "q"), ("-10", "q")]:
        diff("LREM", "p", cnt, v)
        diff("LRANGE", "p", "0", "-1")
    diff("LREM", "nokey", "0", "a")
    diff("LREM", "nokey", "x", "a")
    diff("LREM", "l", "0")
    diff("LTRIM", "l", "0")


def test_diff_lpos(diff):
    diff("RPUSH", "l", *"abcabcabcxx")
    for opts in [(), ("RANK", "1"), ("RANK", "2"), ("RANK", "3"), ("RANK", "4"), ("RANK", "-1"), ("RANK", "-3"),
                 ("RANK", "-4"), ("COUNT", "0"), ("COUNT", "2"), ("COUNT", "10"), ("RANK", "2", "COUNT", "0"),
                 ("RANK", "-2", "COUNT", "0"), ("MAXLEN", "3"), ("MAXLEN", "2"), ("MAXLEN", "0"),
                 ("COUNT", "0", "MAXLEN", "6"), ("RANK", "-1", "MAXLEN", "2"), ("RANK", "-1", "MAXLEN", "3"),
                 ("rank", "1", "count", "1", "maxlen", "100"), ("RANK", "9223372036854775807"),
                 ("RANK", "-9223372036854775807"), ("RANK", "-9223372036854775808"),
                 ("COUNT", "1", "COUNT", "2"), ("RANK", "2", "RANK", "1"),
                 ("RANK", "-9223372036854775808", "COUNT", "1"), ("RANK", "-9223372036854775808", "COUNT", "0"),
                 ("RANK", "-9223372036854775808", "MAXLEN", "4")]:
        diff("LPOS", "l", "c", *opts)
        diff("LPOS", "l", "zz", *opts)
        diff("LPOS", "nokey", "c", *opts)
    for bad in [("RANK", "0"), ("RANK", "x"), ("RANK",), ("COUNT", "-1"), ("COUNT", "x"), ("COUNT",),
                ("MAXLEN", "-1"), ("MAXLEN", "x"), ("MAXLEN",), ("FIRST", "1"), ("foo",), ("RANK", "1", "bar"),
                ("RANK", "1.5"), ("COUNT", "9223372036854775808")]:
        diff("LPOS", "l", "c", *bad)
        diff("LPOS", "nokey", "c", *bad)
    diff("LPOS", "l")


def test_diff_lmove_rpoplpush(diff):
    diff("RPUSH", "src", "a", "b", "c", "d")
    for wf in ("LEFT", "RIGHT", "left", "Right"):
        for wt in ("LEFT", "RIGHT"):
            diff("LMOVE", "src", "dst", wf, wt)
    diff("LRANGE", "dst", "0", "-1")
    diff("LMOVE", "src", "dst", "UP", "LEFT")
    diff("LMOVE", "src", "dst", "LEFT", "DOWN")
    diff("LMOVE", "nokey", "dst", "UP", "LEFT")
    diff("LMOVE", "nokey", "dst", "LEFT", "LEFT")
    diff("RPOPLPUSH", "dst", "dst")
    diff("RPOPLPUSH", "dst", "other")
    diff("LMOVE", "dst", "dst", "LEFT", "RIGHT")
    diff("LRANGE", "dst", "0", "-1")
    diff("RPOPLPUSH", "nokey", "dst")
    diff("RPUSH", "one", "x")
    diff("LMOVE", "one", "one", "LEFT", "LEFT")
    diff("LRANGE", "one", "0", "-1")
    diff("RPOPLPUSH", "one", "one")
    diff("RPOPLPUSH", "one", "two")
    diff("EXISTS", "one")
    diff("LRANGE", "two", "0", "-1")
    diff("LMOVE", "a", "b", "LEFT")
    diff("RPOPLPUSH", "a")


def test_diff_lmpop(diff):
    diff("RPUSH", "a", "1", "2", "3")
    diff("RPUSH", "b", "4", "5")
    diff("LMPOP", "2", "x", "a", "LEFT")
    diff("LMPOP", "2", "x", "a", "RIGHT", "COUNT", "5")
    diff("LMPOP", "2", "a", "b", "RIGHT", "count", "1")
    diff("LMPOP", "3", "x", "y", "z", "LEFT")
    for bad in [("0", "a", "LEFT"), ("-1", "a", "LEFT"), ("x", "a", "LEFT"), ("2", "a", "LEFT"), ("3", "a", "b", "LEFT"),
                ("1", "a", "MIDDLE"), ("1", "b", "LEFT", "COUNT"), ("1", "b", "LEFT", "COUNT", "0"),
                ("1", "b", "LEFT", "COUNT", "-1"), ("1", "b", "LEFT", "COUNT", "x"), ("1", "b", "LEFT", "COUNT", "1", "COUNT", "1"),
                ("1", "b", "LEFT", "foo"), ("9223372036854775807", "b", "LEFT"), ("1", "b", "LEFT", "COUNT", "9223372036854775807"),
                ("1", "b"), ("1",)]:
        diff("LMPOP", *bad)
        diff("BLMPOP", "0.01", *bad)
    diff("BLMPOP", "x", "1", "b", "LEFT")
    diff("BLMPOP", "-1", "1", "b", "LEFT")
    diff("BLMPOP", "x", "0", "b", "LEFT")
    diff("BLMPOP", "0.01", "2", "none", "b", "LEFT", "COUNT", "3")
    diff("BLMPOP", "0.01", "2", "none", "b", "LEFT")


def test_diff_blocking_immediate(diff):
    diff("RPUSH", "a", "1", "2", "3")
    diff("BLPOP", "none", "a", "0")
    diff("BRPOP", "none", "a", "0")
    diff("BLMOVE", "a", "b", "LEFT", "RIGHT", "0")
    diff("BRPOPLPUSH", "b", "a", "1")
    diff("BLPOP", "a", "0")
    diff("BLPOP", "a", "0.01")
    diff("EXISTS", "a")
    for t in ["x", "-1", "-0.0011", "-0.002", "inf", "-inf", "nan", "1e20", "1e16", " 1", "1 ", "", "0x", "1e"]:
        diff("BLPOP", "a", t)
        diff("BRPOP", "a", t)
        diff("BLMOVE", "a", "b", "LEFT", "LEFT", t)
        diff("BRPOPLPUSH", "a", "b", t)
        diff("BLMPOP", t, "1", "a", "LEFT")
    diff("BLMOVE", "a", "b", "UP", "LEFT", "x")
    diff("BLMOVE", "a", "b", "LEFT", "UP", "x")
    diff("BLPOP", "a")
    diff("BLMOVE", "a", "b", "LEFT", "LEFT")
    diff("BRPOPLPUSH", "a", "b")


def test_diff_blocking_timeouts(diff):
    diff("BLPOP", "a", "0.01")
    diff("BRPOP", "a", "b", "0.01")
    diff("BLMOVE", "a", "b", "LEFT", "RIGHT", "0.01")
    diff("BRPOPLPUSH", "a", "b", "0.01")
    diff("BLMPOP", "0.01", "2", "a", "b", "RIGHT")
    diff("BLPOP", "a", "0x1p-7")
    diff("BLPOP", "a", "1e-300")


def test_diff3_shapes(diff3):
    diff3("RPUSH", "l", "a", "b", "c")
    diff3("LPOP", "nokey")
    diff3("LPOP", "nokey", "2")
    diff3("LPOP", "l", "0")
    diff3("LPOP", "l", "2")
    diff3("LINDEX", "l", "5")
    diff3("LPOS", "l", "zz")
    diff3("LPOS", "l", "c", "COUNT", "0")
    diff3("LMPOP", "1", "nokey", "LEFT")
    diff3("LMPOP", "1", "l", "LEFT")
    diff3("RPUSH", "l", "a", "b", "c")
    diff3("BLPOP", "l", "0")
    diff3("BLMPOP", "0", "1", "l", "RIGHT", "COUNT", "2")
    diff3("BLPOP", "nokey", "0.01")
    diff3("BLMOVE", "nokey", "x", "LEFT", "LEFT", "0.01")
    diff3("BLMPOP", "0.01", "1", "nokey", "LEFT")
    diff3("LMOVE", "nokey", "x", "LEFT", "LEFT")


def test_diff_multi(diff):
    diff("MULTI")
    diff("BLPOP", "a", "0")
    diff("BRPOP", "a", "0")
    diff("BLMOVE", "a", "b", "LEFT", "LEFT", "0")
    diff("BRPOPLPUSH", "a", "b", "0")
    diff("BLMPOP", "0", "1", "a", "LEFT")
    diff("RPUSH", "a", "x", "y")
    diff("BLPOP", "a", "0")
    diff("BLMOVE", "a", "b", "LEFT", "LEFT", "0")
    diff("BLMPOP", "0", "1", "a", "LEFT")
    diff("EXEC")
    diff("LRANGE", "b", "0", "-1")


def test_diff_command_info(diff):
    for name in ["lpush", "rpush", "lpushx", "rpushx", "lpop", "rpop", "llen", "lindex", "lrange", "lset", "linsert",
                 "lrem", "ltrim", "lpos", "lmove", "rpoplpush", "lmpop", "blpop", "brpop", "blmove", "brpoplpush",
                 "blmpop"]:
        diff("TYPE", name)  # keeps the connection busy with something both servers know
        got, want = diff.both("COMMAND", "INFO", name)
        # arity, flags and key positions must match; the rest (ACL categories, tips) may be richer in Redis
        import hiredis

        def head(b: bytes) -> list:
            rd = hiredis.Reader()
            rd.feed(b)
            return rd.gets()[0][:6]

        assert head(got) == head(want), name

"""Hash commands: functional tests (redis-py) and byte-for-byte diffs against Redis 7.0."""

from __future__ import annotations

import hiredis
import pytest

# ---- functional ------------------------------------------------------------------


def test_hset_hget_basic(r):
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hset("h", "a", "3") == 0
    assert r.hget("h", "a") == b"3"
    assert r.hget("h", "zz") is None
    assert r.hgetall("h") == {b"a": b"3", b"b": b"2"}
    assert r.hlen("h") == 2
    assert r.hkeys("h") == [b"a", b"b"]
    assert r.hvals("h") == [b"3", b"2"]
    assert r.hexists("h", "a") is True
    assert r.hexists("h", "q") is False
    assert r.hstrlen("h", "a") == 1
    assert r.hmget("h", ["a", "x", "b"]) == [b"3", None, b"2"]
    assert r.type("h") == b"hash"


def test_hdel_removes_empty_key(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    assert r.hdel("h", "a", "a", "zz") == 1
    assert r.exists("h") == 1
    assert r.hdel("h", "b") == 1
    assert r.exists("h") == 0
    assert r.hdel("h", "b") == 0


def test_hsetnx(r):
    assert r.hsetnx("h", "f", "1") == 1
    assert r.hsetnx("h", "f", "2") == 0
    assert r.hget("h", "f") == b"1"


def test_hincrby_and_float(r):
    assert r.hincrby("h", "n", 5) == 5
    assert r.hincrby("h", "n", -7) == -2
    assert r.hincrbyfloat("h", "f", 0.1) == pytest.approx(0.1)
    assert r.hget("h", "f") == b"0.1"
    assert r.hincrbyfloat("h", "f", 0.2) == pytest.approx(0.3)
    assert r.hget("h", "f") == b"0.3"


def test_hrandfield_functional(r):
    fields = {f"f{i}": f"v{i}" for i in range(20)}
    r.hset("h", mapping=fields)
    for _ in range(20):
        assert r.hrandfield("h").decode() in fields
    got = r.hrandfield("h", 5)
    assert len(got) == 5 and len(set(got)) == 5
    # listpack: a unique sample comes back in hash order, as Redis does
    order = [f.encode() for f in fields]
    assert got == sorted(got, key=order.index)
    got = r.hrandfield("h", -50)
    assert len(got) == 50 and all(g.decode() in fields for g in got)
    got = r.hrandfield("h", 3, withvalues=True)
    assert len(got) == 6
    for f, v in zip(got[::2], got[1::2], strict=True):
        assert fields[f.decode()] == v.decode()
    assert r.hrandfield("h", 100) == list(order)
    assert r.hrandfield("nokey") is None
    assert r.hrandfield("nokey", 3) == []


def test_hrandfield_large_hash(r):
    n = 2000
    r.hset("h", mapping={f"field-{i}": str(i) for i in range(n)})
    assert r.object("encoding", "h") == b"hashtable"
    got = r.hrandfield("h", 100)
    assert len(set(got)) == 100
    got = r.hrandfield("h", 1990)
    assert len(set(got)) == 1990
    got = r.hrandfield("h", -3000, withvalues=True)
    assert len(got) == 6000
    for f, v in zip(got[::2], got[1::2], strict=True):
        assert f == b"field-" + v
    # the index stays correct while the hash changes
    r.hdel("h", *[f"field-{i}" for i in range(0, n, 2)])
    for _ in range(50):
        f = r.hrandfield("h")
        assert int(f.split(b"-")[1]) % 2 == 1
    assert len(set(r.hrandfield("h", 999))) == 999


def _full_hscan(r, key, count=None, match=None):
    cursor = 0
    seen = {}
    calls = 0
    while True:
        cursor, data = r.hscan(key, cursor, match=match, count=count)
        seen.update(data)
        calls += 1
        if cursor == 0:
            return seen, calls


def test_hscan_small_hash_one_call(r):
    r.hset("h", mapping={f"f{i}": "x" for i in range(100)})
    cursor, data = r.hscan("h", 0, count=5)
    assert cursor == 0 and len(data) == 100
    cursor, data = r.hscan("h", 0, match="f1*")
    assert cursor == 0 and set(data) == {b"f1"} | {f"f1{i}".encode() for i in range(10)}


def test_hscan_bullmq_shape(r):
    # a 72-entry hash with 83-byte fields is hashtable-encoded and pages
    fields = {("k" * 80) + f"{i:03d}": str(i) for i in range(72)}
    r.hset("h", mapping=fields)
    assert r.object("encoding", "h") == b"hashtable"
    cursor, data = r.hscan("h", 0, count=50)
    assert cursor != 0 and len(data) >= 50
    cursor2, data2 = r.hscan("h", cursor, count=50)
    assert cursor2 == 0
    assert {**data, **data2} == {k.encode(): v.encode() for k, v in fields.items()}


def test_hscan_stable_under_changes(r):
    n = 1000
    r.hset("h", mapping={f"f{i}": "v" for i in range(n)})
    cursor = 0
    seen = set()
    step = 0
    while True:
        cursor, data = r.hscan("h", cursor, count=37)
        seen.update(data)
        step += 1
        # churn: delete a field not in the stable range, add new ones
        r.hdel("h", f"f{n - step}")
        r.hset("h", f"new{step}", "v")
        if cursor == 0:
            break
    stable = {f"f{i}".encode() for i in range(n - step)}
    assert stable <= seen


def test_encoding_transitions(r):
    r.hset("h", "a", "1")
    assert r.object("encoding", "h") == b"listpack"
    r.hset("h", "b", "x" * 65)
    assert r.object("encoding", "h") == b"hashtable"
    r.hdel("h", "b")
    assert r.object("encoding", "h") == b"hashtable"  # never converts back
    r.hset("h2", mapping={str(i): "v" for i in range(512)})
    assert r.object("encoding", "h2") == b"listpack"
    r.hset("h2", "x", "v")
    assert r.object("encoding", "h2") == b"hashtable"


def test_memory_usage_and_copy(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    assert r.memory_usage("h") > 0
    assert r.copy("h", "h2") is True
    r.hset("h2", "c", "3")
    assert r.hlen("h") == 2 and r.hlen("h2") == 3


def test_multi_sees_snapshot(r):
    r.hset("h", "a", "1")
    p = r.pipeline(transaction=True)
    p.hgetall("h")
    p.hset("h", "b", "2")
    p.hgetall("h")
    assert p.execute() == [{b"a": b"1"}, 1, {b"a": b"1", b"b": b"2"}]


# ---- differential ----------------------------------------------------------------


def test_diff_basic(diff):
    diff("HSET", "h", "a", "1", "b", "2", "c", "3")
    diff("HSET", "h", "a", "10", "d", "4")
    diff("HGETALL", "h")
    diff("HKEYS", "h")
    diff("HVALS", "h")
    diff("HLEN", "h")
    diff("HGET", "h", "a")
    diff("HGET", "h", "zz")
    diff("HGET", "nokey", "a")
    diff("HMGET", "h", "a", "zz", "d")
    diff("HMGET", "nokey", "a", "b")
    diff("HMSET", "h", "e", "5", "a", "0")
    diff("HGETALL", "h")
    diff("HSETNX", "h", "a", "x")
    diff("HSETNX", "h", "n", "x")
    diff("HSETNX", "new", "n", "x")
    diff("HEXISTS", "h", "a")
    diff("HEXISTS", "h", "zz")
    diff("HEXISTS", "nokey", "zz")
    diff("HSTRLEN", "h", "a")
    diff("HSTRLEN", "h", "zz")
    diff("HSTRLEN", "nokey", "zz")
    diff("HDEL", "h", "a", "zz", "b")
    diff("HGETALL", "h")
    diff("HDEL", "h", "c", "d", "e", "n")
    diff("EXISTS", "h")
    diff("HGETALL", "nokey")
    diff("HKEYS", "nokey")
    diff("HVALS", "nokey")
    diff("HLEN", "nokey")
    diff("HDEL", "nokey", "a")


def test_diff_listpack_order(diff):
    for i in range(40):
        diff("HSET", "h", f"f{(i * 7) % 23}", str(i))
        if i % 5 == 0:
            diff("HDEL", "h", f"f{(i * 3) % 23}")
    diff("HGETALL", "h")
    diff("HKEYS", "h")
    diff("HVALS", "h")
    diff("OBJECT", "ENCODING", "h")
    diff("HSCAN", "h", "0")
    diff("HSCAN", "h", "0", "COUNT", "2")
    diff("HSCAN", "h", "0", "MATCH", "f1*")
    diff("HSCAN", "h", "123", "MATCH", "*", "COUNT", "1000")


def test_diff_errors(diff):
    diff("SET", "s", "x")
    for cmd in (
        ("HSET", "s", "a", "1"),
        ("HMSET", "s", "a", "1"),
        ("HSETNX", "s", "a", "1"),
        ("HGET", "s", "a"),
        ("HMGET", "s", "a"),
        ("HGETALL", "s"),
        ("HDEL", "s", "a"),
        ("HLEN", "s"),
        ("HSTRLEN", "s", "a"),
        ("HEXISTS", "s", "a"),
        ("HKEYS", "s"),
        ("HVALS", "s"),
        ("HINCRBY", "s", "a", "1"),
        ("HINCRBYFLOAT", "s", "a", "1"),
        ("HRANDFIELD", "s"),
        ("HRANDFIELD", "s", "1"),
        ("HSCAN", "s", "0"),
        ("HSCAN", "s", "0", "COUNT", "0"),
    ):
        diff(*cmd)
    # arity
    for cmd in (
        ("HSET", "h"),
        ("HSET", "h", "a"),
        ("HSET", "h", "a", "1", "b"),
        ("HMSET", "h", "a", "1", "b"),
        ("HSETNX", "h", "a"),
        ("HGET", "h"),
        ("HGET", "h", "a", "b"),
        ("HMGET", "h"),
        ("HGETALL",),
        ("HDEL", "h"),
        ("HLEN",),
        ("HSTRLEN", "h"),
        ("HEXISTS", "h"),
        ("HKEYS",),
        ("HVALS", "h", "x"),
        ("HINCRBY", "h", "a"),
        ("HINCRBYFLOAT", "h", "a", "1", "2"),
        ("HRANDFIELD",),
        ("HSCAN", "h"),
    ):
        diff(*cmd)


def test_diff_hincrby(diff):
    diff("HINCRBY", "h", "n", "5")
    diff("HINCRBY", "h", "n", "-10")
    diff("HINCRBY", "h", "n", "abc")
    diff("HINCRBY", "h", "n", "1.5")
    diff("HINCRBY", "h", "n", "9223372036854775808")
    diff("HSET", "h", "big", "9223372036854775807", "small", "-9223372036854775808")
    diff("HINCRBY", "h", "big", "1")
    diff("HINCRBY", "h", "big", "0")
    diff("HINCRBY", "h", "small", "-1")
    diff("HINCRBY", "h", "small", "9223372036854775807")
    diff("HSET", "h", "s", "abc", "z", "01", "sp", " 1", "e", "")
    for f in ("s", "z", "sp", "e"):
        diff("HINCRBY", "h", f, "1")
    diff("HINCRBY", "new", "x", "-3")
    diff("HGETALL", "h")
    diff("HGETALL", "new")


def test_diff_hincrbyfloat(diff):
    for incr in ("0.1", "0.2", "-5", "1e10", "3.0e-3", "10.5", "-0.0000001", "1e300", "abc", "nan", "inf", "-inf",
                 "+inf", "Infinity", " 1", "1 ", "", "1e5000", "0x10", "1_0", "5"):
        diff("HINCRBYFLOAT", "h", "f", incr)
    diff("HGET", "h", "f")
    diff("OBJECT", "ENCODING", "h")
    diff("HSET", "h2", "s", "abc", "i", "inf", "z", "007", "e", "", "x", "0x10", "sp", "1 ")
    for f in ("s", "i", "z", "e", "x", "sp", "nofield"):
        diff("HINCRBYFLOAT", "h2", f, "1.5")
    diff("HINCRBYFLOAT", "h2", "n", "1.7976931348623157e308")
    diff("HINCRBYFLOAT", "h2", "n", "1.7976931348623157e308")
    diff("OBJECT", "ENCODING", "h2")
    diff.unordered("HGETALL", "h2")
    diff("HINCRBYFLOAT", "new", "f", "-2.5")
    diff("HGETALL", "new")


def test_diff_hrandfield(diff):
    diff("HRANDFIELD", "nokey")
    diff("HRANDFIELD", "nokey", "5")
    diff("HRANDFIELD", "nokey", "-5", "WITHVALUES")
    diff("HSET", "h", "a", "1", "b", "2", "c", "3")
    diff("HRANDFIELD", "h", "0")
    diff("HRANDFIELD", "h", "3")
    diff("HRANDFIELD", "h", "10", "WITHVALUES")
    diff("HRANDFIELD", "h", "10", "withvalues")
    diff("HRANDFIELD", "h", "abc")
    diff("HRANDFIELD", "h", "1", "WITHVALUE")
    diff("HRANDFIELD", "h", "1", "WITHVALUES", "x")
    diff("HRANDFIELD", "h", "-9223372036854775808")
    diff("HRANDFIELD", "h", "9223372036854775807", "WITHVALUES")
    diff("HRANDFIELD", "h", "-4611686018427387904", "WITHVALUES")
    diff("HRANDFIELD", "h", "4611686018427387904", "WITHVALUES")
    diff("HRANDFIELD", "nokey", "abc")
    diff("HSET", "one", "a", "1")
    diff("HRANDFIELD", "one")
    diff("HRANDFIELD", "one", "-3", "WITHVALUES")
    diff("HRANDFIELD", "one", "1")


def test_diff_hscan(diff):
    diff("HSCAN", "nokey", "0")
    diff("HSCAN", "nokey", "0", "COUNT", "0")
    diff("HSCAN", "nokey", "x")
    diff("HSET", "h", "a", "1", "b", "2", "ab", "3")
    for args in (
        ("0",),
        ("", ),
        ("-1",),
        ("+7",),
        (" 1",),
        ("1x",),
        ("18446744073709551615",),
        ("18446744073709551616",),
        ("0", "COUNT", "0"),
        ("0", "COUNT", "-1"),
        ("0", "COUNT", "x"),
        ("0", "COUNT"),
        ("0", "MATCH"),
        ("0", "MATCH", "a*"),
        ("0", "match", "?"),
        ("0", "TYPE", "string"),
        ("0", "NOVALUES"),
        ("0", "count", "1", "match", "a*", "count", "5"),
    ):
        diff("HSCAN", "h", *args)


def test_diff_hashtable_union(diff):
    fields = [("k" * 80) + f"{i:03d}" for i in range(72)]
    args = []
    for i, f in enumerate(fields):
        args += [f, str(i)]
    diff("HSET", "h", *args)
    diff("OBJECT", "ENCODING", "h")
    diff.unordered("HGETALL", "h")
    diff.unordered("HKEYS", "h")
    diff.unordered("HVALS", "h")
    diff.unordered("HRANDFIELD", "h", "100")
    diff("HLEN", "h")
    # HSCAN: compare the union of pages
    got = {}
    want = {}
    for conn, out in ((diff.rq, got), (diff.ref, want)):
        cursor = "0"
        while True:
            rd = hiredis.Reader()
            rd.feed(conn.call_raw("HSCAN", "h", cursor, "COUNT", "20"))
            cur, data = rd.gets()
            out.update(zip(data[::2], data[1::2], strict=True))
            cursor = cur.decode()
            if cursor == "0":
                break
    assert got == want


@pytest.mark.parametrize(
    "setup",
    [
        [("HSET", "h", "f", "x" * 65)],
        [("HSET", "h", "x" * 65, "v")],
        [("HSET", "h", "a", "1", "b", "x" * 65), ("HDEL", "h", "b")],
        [("HSETNX", "h", "a", "1"), ("HSETNX", "h", "a", "x" * 100)],
        [("HSET", "h", "a", "1"), ("HINCRBYFLOAT", "h", "a", "1e100")],
        [("HSET", "h", *[str(i) for i in range(256)])],
        [("HSET", "h", *[str(i) for i in range(258)])],
        [("HSET", "h", *[str(i) for i in range(258)]), ("HDEL", "h", "0", "2", "4")],
    ],
)
def test_diff_encoding(diff, setup):
    for cmd in setup:
        diff(*cmd)
    diff("OBJECT", "ENCODING", "h")


def test_diff3_resp3(diff3):
    diff3("HGETALL", "nokey")
    diff3("HSET", "h", "a", "1", "b", "2")
    diff3("HGETALL", "h")
    diff3("HRANDFIELD", "h", "5", "WITHVALUES")
    diff3("HRANDFIELD", "h", "5")
    diff3("HRANDFIELD", "h", "0", "WITHVALUES")
    diff3("HRANDFIELD", "nokey")
    diff3("HRANDFIELD", "nokey", "2", "WITHVALUES")
    diff3("HSCAN", "h", "0")
    diff3("HMGET", "h", "a", "x")
    diff3("HINCRBYFLOAT", "h", "a", "1.5")
    diff3("HKEYS", "h")
    diff3("HSET", "one", "a", "1")
    diff3("HRANDFIELD", "one", "-2", "WITHVALUES")


def test_diff_multi(diff):
    diff("MULTI")
    diff("HSET", "h", "a", "1")
    diff("HINCRBY", "h", "a", "2")
    diff("HGETALL", "h")
    diff("HINCRBY", "h", "a", "x")
    diff("EXEC")

"""Streams: functional tests (redis-py), byte-for-byte diffs against Redis 7.0, blocking XREAD."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from .servers import RawConn

# ---- functional ------------------------------------------------------------------


def test_xadd_auto_ids_increase(r):
    ids = [r.xadd("s", {"f": "v"}) for _ in range(50)]
    parsed = [tuple(map(int, i.split(b"-"))) for i in ids]
    assert parsed == sorted(parsed)
    assert len(set(parsed)) == 50
    now = int(time.time() * 1000)
    assert abs(parsed[-1][0] - now) < 5000
    assert r.xlen("s") == 50


def test_xadd_ms_star_and_explicit(r):
    assert r.xadd("s", {"a": 1}, id="5-*") == b"5-0"
    assert r.xadd("s", {"a": 2}, id="5-*") == b"5-1"
    assert r.xadd("s", {"a": 3}, id="7-*") == b"7-0"
    assert r.xadd("s", {"a": 4}, id="7-9") == b"7-9"
    with pytest.raises(redis.ResponseError, match="equal or smaller"):
        r.xadd("s", {"a": 5}, id="7-9")
    with pytest.raises(redis.ResponseError, match="equal or smaller"):
        r.xadd("s", {"a": 5}, id="6-*")
    assert r.xrange("s") == [
        (b"5-0", {b"a": b"1"}),
        (b"5-1", {b"a": b"2"}),
        (b"7-0", {b"a": b"3"}),
        (b"7-9", {b"a": b"4"}),
    ]


def test_xadd_auto_id_never_goes_backwards(r):
    far = int(time.time() * 1000) + 10_000_000
    r.xadd("s", {"a": 1}, id=f"{far}-5")
    nid = r.xadd("s", {"a": 2})
    assert nid == f"{far}-6".encode()


def test_xadd_nomkstream(r):
    assert r.xadd("s", {"a": 1}, nomkstream=True) is None
    assert r.exists("s") == 0
    r.xadd("s", {"a": 1}, id="1-1")
    assert r.xadd("s", {"a": 1}, id="1-2", nomkstream=True) == b"1-2"


def test_type_encoding_and_empty_stream_survives(r):
    r.xadd("s", {"a": 1}, id="1-1")
    assert r.type("s") == b"stream"
    assert r.object("encoding", "s") == b"stream"
    assert r.xdel("s", "1-1") == 1
    assert r.exists("s") == 1  # streams stay when emptied
    assert r.xlen("s") == 0
    assert r.memory_usage("s") > 0


def test_xrange_xrevrange_count_exclusive(r):
    for i in range(1, 11):
        r.xadd("s", {"i": i}, id=f"{i}-0")
    assert [e[0] for e in r.xrange("s", "3", "5")] == [b"3-0", b"4-0", b"5-0"]
    assert [e[0] for e in r.xrange("s", "(3-0", "(5-0")] == [b"4-0"]
    assert [e[0] for e in r.xrevrange("s", "+", "-", count=2)] == [b"10-0", b"9-0"]
    assert [e[0] for e in r.xrange("s", "-", "+", count=3)] == [b"1-0", b"2-0", b"3-0"]


def test_xdel_xtrim_exact(r):
    for i in range(1, 301):
        r.xadd("s", {"i": i}, id=f"{i}-0")
    assert r.xdel("s", "1-0", "2-0", "2-0", "999-0") == 2
    assert r.xtrim("s", maxlen=150, approximate=False) == 148
    assert r.xlen("s") == 150
    assert r.xrange("s", count=1)[0][0] == b"151-0"
    assert r.xtrim("s", minid="250-0", approximate=True) == 50  # ~ only drops whole nodes (101-200)
    assert r.xtrim("s", minid="250-0", approximate=False) == 49
    assert r.xrange("s", count=1)[0][0] == b"250-0"


def test_copy_and_rename_keep_stream(r):
    r.xadd("s", {"a": 1}, id="1-1")
    r.xadd("s", {"a": 2}, id="1-2")
    assert r.copy("s", "t") is True
    r.xadd("s", {"a": 3}, id="1-3")
    assert r.xlen("t") == 2
    r.xadd("t", {"b": 1}, id="1-3")
    assert r.xrange("t")[-1] == (b"1-3", {b"b": b"1"})
    r.rename("t", "u")
    assert r.xlen("u") == 3


def test_bullmq_events_pattern(r):
    """XADD MAXLEN ~ keeps a bounded stream; ~ only removes whole nodes."""
    for i in range(80):
        r.xadd("ev", {"event": "completed", "jobId": str(i), "returnvalue": "x" * 60}, maxlen=20, approximate=True)
    n = r.xlen("ev")
    assert 20 <= n <= 80
    r.xtrim("ev", maxlen=0, approximate=True)
    assert r.xlen("ev") <= 100


def test_large_stream_operations(r):
    pipe = r.pipeline(transaction=False)
    for i in range(1, 20001):
        pipe.xadd("big", {"f": i}, id=f"{i}-1")
    pipe.execute()
    assert r.xlen("big") == 20000
    assert r.xrange("big", "10000-0", "10000-9") == [(b"10000-1", {b"f": b"10000"})]
    # ~ without LIMIT removes at most 100 * stream-node-max-entries per call
    assert r.xtrim("big", maxlen=5000, approximate=True) == 10000
    assert r.xtrim("big", maxlen=5000, approximate=True) == 5000
    assert r.xlen("big") == 5000
    assert r.xdel("big", "15001-1", "20000-1") == 2
    assert r.xrevrange("big", count=1)[0][0] == b"19999-1"


def test_xread_nonblocking(r):
    r.xadd("a", {"x": 1}, id="1-0")
    r.xadd("a", {"x": 2}, id="2-0")
    r.xadd("b", {"y": 1}, id="5-0")
    assert r.xread({"a": "1-0", "b": "0"}) == [
        [b"a", [(b"2-0", {b"x": b"2"})]],
        [b"b", [(b"5-0", {b"y": b"1"})]],
    ]
    assert r.xread({"a": "$"}) == []
    assert r.xread({"a": "0"}, count=1) == [[b"a", [(b"1-0", {b"x": b"1"})]]]


# ---- blocking XREAD ---------------------------------------------------------------


@pytest.fixture(params=["respqueue", "redis"])
def anyr(request: Any) -> redis.Redis:
    """The same scenario against respqueue and against the reference Redis."""
    return request.getfixturevalue("r" if request.param == "respqueue" else "ref")


def _wait_blocked(r: redis.Redis, n: int) -> None:
    """Wait until at least ``n`` clients are blocked on the server (at most 5 s); ``n`` 0 just pauses."""
    if n == 0:
        time.sleep(0.1)
        return
    deadline = time.time() + 5
    while time.time() < deadline:
        if r.info("clients")["blocked_clients"] >= n:
            return
        time.sleep(0.01)
    raise AssertionError(f"expected {n} blocked clients")


def _port(r: redis.Redis) -> int:
    return r.connection_pool.connection_kwargs["port"]


def test_xread_block_woken_by_xadd(anyr):
    anyr.xadd("s", {"old": 1}, id="1-0")
    result: list = []

    def reader() -> None:
        c = redis.Redis(port=_port(anyr), socket_timeout=10)
        result.append(c.xread({"s": "$"}, block=5000))
        c.close()

    t = threading.Thread(target=reader)
    t.start()
    _wait_blocked(anyr, 1)
    anyr.xadd("s", {"new": 1}, id="2-0")
    t.join(10)
    assert result == [[[b"s", [(b"2-0", {b"new": b"1"})]]]]


def test_xread_block_dollar_on_missing_key(anyr):
    conn = RawConn(_port(anyr))
    conn.send("XREAD", "BLOCK", "0", "STREAMS", "nokey", "$")
    _wait_blocked(anyr, 1)
    anyr.xadd("nokey", {"a": 1}, id="3-3")
    assert conn.read_raw() == b"*1\r\n*2\r\n$5\r\nnokey\r\n*1\r\n*2\r\n$3\r\n3-3\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    conn.close()


def test_xread_block_timeout_returns_null_array(anyr):
    conn = RawConn(_port(anyr))
    t0 = time.time()
    assert conn.call_raw("XREAD", "BLOCK", "10", "STREAMS", "s", "$") == b"*-1\r\n"
    assert time.time() - t0 < 2
    conn.call_raw("HELLO", "3")
    assert conn.call_raw("XREAD", "BLOCK", "10", "STREAMS", "s", "$") == b"_\r\n"
    conn.close()


def test_xread_block_resolves_dollar_at_block_time(anyr):
    """Entries added before the wake-up but after blocking are all delivered; older ones are not."""
    anyr.xadd("s", {"a": 1}, id="1-0")
    conn = RawConn(_port(anyr))
    conn.send("XREAD", "BLOCK", "5000", "STREAMS", "s", "$")
    _wait_blocked(anyr, 1)
    pipe = anyr.pipeline(transaction=True)
    pipe.xadd("s", {"b": 1}, id="2-0")
    pipe.xadd("s", {"c": 1}, id="3-0")
    pipe.execute()
    reply = conn.read_raw()
    assert b"2-0" in reply and b"3-0" in reply and b"1-0" not in reply
    conn.close()


def test_xread_block_ignores_unrelated_writes(anyr):
    conn = RawConn(_port(anyr))
    conn.send("XREAD", "BLOCK", "400", "STREAMS", "s", "$")
    _wait_blocked(anyr, 1)
    anyr.xadd("other", {"a": 1})
    assert conn.read_raw() == b"*-1\r\n"
    conn.close()


def test_xread_block_disconnect_while_blocked(anyr):
    conn = RawConn(_port(anyr))
    conn.send("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    _wait_blocked(anyr, 1)
    conn.close()
    _wait_blocked(anyr, 0)
    anyr.xadd("s", {"a": 1}, id="1-0")
    assert anyr.xlen("s") == 1
    assert anyr.ping() is True
    # a second blocked client is still served after the first one vanished
    conn2 = RawConn(_port(anyr))
    conn2.send("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    _wait_blocked(anyr, 1)
    anyr.xadd("s", {"b": 1}, id="2-0")
    assert b"2-0" in conn2.read_raw()
    conn2.close()


def test_xread_block_in_multi_does_not_block(anyr):
    conn = RawConn(_port(anyr))
    assert conn.call_raw("MULTI") == b"+OK\r\n"
    assert conn.call_raw("XREAD", "BLOCK", "0", "STREAMS", "s", "$") == b"+QUEUED\r\n"
    assert conn.call_raw("EXEC") == b"*1\r\n*-1\r\n"
    conn.close()


def test_xread_block_count_and_order(anyr):
    """Two clients blocked on the same key are both served, COUNT applies."""
    c1, c2 = RawConn(_port(anyr)), RawConn(_port(anyr))
    c1.send("XREAD", "COUNT", "1", "BLOCK", "5000", "STREAMS", "s", "0-0")
    c2.send("XREAD", "BLOCK", "5000", "STREAMS", "s", "0-0")
    _wait_blocked(anyr, 2)
    pipe = anyr.pipeline(transaction=True)
    pipe.xadd("s", {"a": 1}, id="1-0")
    pipe.xadd("s", {"a": 2}, id="2-0")
    pipe.execute()
    one, two = c1.read_raw(), c2.read_raw()
    assert b"1-0" in one and b"2-0" not in one
    assert b"1-0" in two and b"2-0" in two
    c1.close()
    c2.close()


def test_xread_block_many_keys(anyr):
    conn = RawConn(_port(anyr))
    conn.send("XREAD", "BLOCK", "5000", "STREAMS", "k1", "k2", "k3", "$", "$", "$")
    _wait_blocked(anyr, 1)
    anyr.xadd("k2", {"z": 9}, id="4-4")
    assert conn.read_raw() == b"*1\r\n*2\r\n$2\r\nk2\r\n*1\r\n*2\r\n$3\r\n4-4\r\n*2\r\n$1\r\nz\r\n$1\r\n9\r\n"
    conn.close()


# ---- differential: XADD ------------------------------------------------------------


def test_diff_xadd_basic(diff):
    diff("XADD", "s", "1-1", "f", "v")
    diff("XADD", "s", "1-2", "f", "v", "g", "w")
    diff("XADD", "s", "1-*", "f", "v")
    diff("XADD", "s", "2-*", "f", "v")
    diff("XADD", "s", "2", "f", "v")
    diff("XADD", "s", "2-0", "f", "v")
    diff("XADD", "s", "1-5", "f", "v")
    diff("XADD", "s", "3-18446744073709551615", "f", "v")
    diff("XADD", "s", "3-*", "f", "v")
    diff("XADD", "s", "4-*", "f", "v")
    diff("XRANGE", "s", "-", "+")
    diff("XLEN", "s")
    diff("TYPE", "s")
    diff("OBJECT", "ENCODING", "s")


def test_diff_xadd_errors(diff):
    diff("SET", "str", "x")
    diff("XADD", "str", "1-1", "f", "v")
    diff("XADD", "str", "NOMKSTREAM", "1-1", "f", "v")
    diff("XADD", "s", "1-1", "f")
    diff("XADD", "s", "1-1", "f", "v", "g")
    diff("XADD", "s", "1-1")
    diff("XADD", "s")
    diff("XADD", "s", "*")
    diff("XADD", "s", "0-0", "f", "v")
    diff("XADD", "s", "0", "f", "v")
    diff("XADD", "s", "0-*", "f", "v")
    diff("XADD", "s", "-", "f", "v")
    diff("XADD", "s", "+", "f", "v")
    diff("XADD", "s", "abc", "f", "v")
    diff("XADD", "s", "1-abc", "f", "v")
    diff("XADD", "s", "1-2-3", "f", "v")
    diff("XADD", "s", "-1", "f", "v")
    diff("XADD", "s", "18446744073709551616-0", "f", "v")
    diff("XADD", "s", "5-18446744073709551616", "f", "v")
    diff("XADD", "s", "1" * 130, "f", "v")
    diff("XADD", "s", "MAXLEN", "f", "v")
    diff("XADD", "s", "MAXLEN", "abc", "*", "f", "v")
    diff("XADD", "s", "MAXLEN", "-1", "*", "f", "v")
    diff("XADD", "s", "MAXLEN", "~", "-1", "*", "f", "v")
    diff("XADD", "s", "MAXLEN", "1", "MINID", "5", "*", "f", "v")
    diff("XADD", "s", "MINID", "5", "MAXLEN", "1", "*", "f", "v")
    diff("XADD", "s", "MINID", "abc", "*", "f", "v")
    diff("XADD", "s", "MINID", "-", "*", "f", "v")
    diff("XADD", "s", "LIMIT", "10", "*", "f", "v")
    diff("XADD", "s", "LIMIT", "-1", "*", "f", "v")
    diff("XADD", "s", "LIMIT", "x", "*", "f", "v")
    diff("XADD", "s", "MAXLEN", "10", "LIMIT", "10", "*", "f", "v")
    diff("XADD", "s", "MAXLEN", "=", "10", "LIMIT", "10", "*", "f", "v")
    diff("XLEN", "s")
    diff("EXISTS", "s")


def test_diff_xadd_weird_ids(diff):
    for i, id_ in enumerate(["+5", " 7", "007", "9-+1", "10- 2", "-05", "11-0x1", "12-", "13-*-1", "14-**"]):
        diff("XADD", f"w{i}", id_, "f", "v")
    diff("XADD", "z", "5-5", "f", "v")
    diff("XADD", "z", "5", "f", "v")
    diff("XADD", "z", "4-*", "f", "v")
    diff("XADD", "m", "18446744073709551615-18446744073709551615", "f", "v")
    diff("XADD", "m", "*", "f", "v")
    diff("XADD", "m", "18446744073709551615-*", "f", "v")
    diff("XADD", "m2", "18446744073709551615-18446744073709551614", "f", "v")
    diff("XADD", "m2", "18446744073709551615-*", "f", "v")
    diff("XADD", "m3", "5-18446744073709551615", "f", "v")
    diff("XADD", "m3", "5-*", "f", "v")


def test_diff_xadd_nomkstream_and_options(diff):
    diff("XADD", "s", "NOMKSTREAM", "*", "f", "v")
    diff("EXISTS", "s")
    diff("XADD", "s", "nomkstream", "maxlen", "5", "1-1", "f", "v")
    diff("XADD", "s", "1-1", "f", "v")
    diff("XADD", "s", "NOMKSTREAM", "1-2", "f", "v")
    for i in range(3, 30):
        diff("XADD", "s", "MAXLEN", "5", f"1-{i}", "f", "v")
    diff("XLEN", "s")
    diff("XADD", "s", "MINID", "=", "1-27", "1-40", "a", "b")
    diff("XRANGE", "s", "-", "+")
    diff("XADD", "s", "MAXLEN", "~", "2", "LIMIT", "0", "1-41", "a", "b")
    diff("XADD", "s", "MINID", "~", "1-41", "LIMIT", "1000", "1-42", "a", "b")
    diff("XLEN", "s")
    diff("XADD", "s", "MAXLEN", "0", "1-43", "a", "b")
    diff("XLEN", "s")
    diff("XINFO", "STREAM", "s")


# ---- differential: XRANGE / XREVRANGE / XLEN ----------------------------------------------


def test_diff_xrange(diff):
    diff("XRANGE", "nokey", "-", "+")
    diff("XREVRANGE", "nokey", "+", "-")
    diff("XRANGE", "nokey", "-", "+", "COUNT", "0")
    for i in range(1, 6):
        for j in range(3):
            diff("XADD", "s", f"{i}-{j}", "f", str(i * 10 + j), "g", "x")
    for a, b in [
        ("-", "+"),
        ("+", "-"),
        ("2", "3"),
        ("2-1", "3-1"),
        ("(2-1", "3-1"),
        ("2-1", "(3-1"),
        ("(2-1", "(3-1"),
        ("(2", "(4"),
        ("(-", "+"),
        ("-", "(+"),
        ("(0-0", "+"),
        ("-", "(0-0"),
        ("(18446744073709551615-18446744073709551615", "+"),
        ("-", "(18446744073709551615-18446744073709551615"),
        ("(", "+"),
        ("-", "("),
        ("((1", "+"),
        ("abc", "+"),
        ("-", "abc"),
        ("3", "2"),
        ("0", "18446744073709551615"),
        ("18446744073709551616", "+"),
    ]:
        diff("XRANGE", "s", a, b)
        diff("XREVRANGE", "s", b, a)
    diff("XRANGE", "s", "-", "+", "COUNT", "2")
    diff("XRANGE", "s", "-", "+", "count", "0")
    diff("XRANGE", "s", "-", "+", "COUNT", "-5")
    diff("XRANGE", "s", "-", "+", "COUNT", "x")
    diff("XRANGE", "s", "-", "+", "COUNT")
    diff("XRANGE", "s", "-", "+", "COUNT", "1", "COUNT", "3")
    diff("XRANGE", "s", "-", "+", "LIMIT", "1")
    diff("XREVRANGE", "s", "+", "-", "COUNT", "4")
    diff("XREVRANGE", "s", "+", "-", "COUNT", "0")
    diff("XRANGE", "s", "-")
    diff("XREVRANGE", "s")
    diff("SET", "str", "x")
    diff("XRANGE", "str", "-", "+")
    diff("XRANGE", "str", "x", "+")
    diff("XREVRANGE", "str", "+", "-")
    diff("XLEN", "str")
    diff("XLEN", "s")
    diff("XLEN", "nokey")
    diff("XLEN", "s", "x")


# ---- differential: XDEL / XTRIM -----------------------------------------------------------


def test_diff_xdel(diff):
    diff("XDEL", "nokey", "1-1")
    diff("XDEL", "nokey", "bad")
    diff("SET", "str", "x")
    diff("XDEL", "str", "1-1")
    diff("XDEL", "s")
    for i in range(1, 8):
        diff("XADD", "s", f"{i}-0", "f", "v")
    diff("XDEL", "s", "bad")
    diff("XDEL", "s", "1-0", "bad")
    diff("XLEN", "s")
    diff("XDEL", "s", "1-0", "1-0", "3", "9-9")
    diff("XDEL", "s", "-")
    diff("XDEL", "s", "+")
    diff("XINFO", "STREAM", "s")
    diff("XDEL", "s", "7-0")
    diff("XINFO", "STREAM", "s")
    diff("XADD", "s", "7-0", "f", "v")
    diff("XADD", "s", "7-*", "f", "v")
    diff("XDEL", "s", "2-0", "4-0", "5-0", "6-0", "7-1")
    diff("XINFO", "STREAM", "s")
    diff("XRANGE", "s", "-", "+")


def test_diff_xtrim(diff):
    diff("XTRIM", "nokey", "MAXLEN", "0")
    diff("XTRIM", "nokey", "MAXLEN", "x")
    diff("SET", "str", "x")
    diff("XTRIM", "str", "MAXLEN", "0")
    diff("XTRIM", "str", "BAD", "0")
    for i in range(1, 251):
        diff("XADD", "s", f"{i}-1", "f", "v")
    diff("XTRIM", "s")
    diff("XTRIM", "s", "MAXLEN")
    diff("XTRIM", "s", "MAXLEN", "~")
    diff("XTRIM", "s", "MAXLEN", "~", "x")
    diff("XTRIM", "s", "MAXLEN", "-1")
    diff("XTRIM", "s", "MINID", "bad")
    diff("XTRIM", "s", "MINID", "+")
    diff("XTRIM", "s", "MAXLEN", "1", "MINID", "1")
    diff("XTRIM", "s", "MAXLEN", "1", "LIMIT", "5")
    diff("XTRIM", "s", "LIMIT", "5")
    diff("XTRIM", "s", "LIMIT", "0", "MAXLEN", "300")
    diff("XTRIM", "s", "MAXLEN", "300", "foo")
    diff("XTRIM", "s", "NOMKSTREAM", "MAXLEN", "300")
    diff("XTRIM", "s", "MAXLEN", "~", "120", "LIMIT", "50")
    diff("XTRIM", "s", "MAXLEN", "~", "120", "LIMIT", "100")
    diff("XLEN", "s")
    diff("XTRIM", "s", "MAXLEN", "~", "120")
    diff("XLEN", "s")
    diff("XTRIM", "s", "MAXLEN", "=", "120")
    diff("XTRIM", "s", "MAXLEN", "100")
    diff("XTRIM", "s", "MINID", "~", "200")
    diff("XTRIM", "s", "MINID", "=", "200-1")
    diff("XTRIM", "s", "minid", "220")
    diff("XTRIM", "s", "MINID", "~", "250-2", "LIMIT", "0")
    diff("XINFO", "STREAM", "s")
    diff("XTRIM", "s", "MAXLEN", "0")
    diff("XINFO", "STREAM", "s")


def test_diff_approx_trim_layout(diff):
    """Node boundaries (100 entries or ~4096 bytes) decide what ~ removes; they must match Redis."""
    for i in range(250):
        diff("XADD", "small", f"{i + 1}-1", "f", "v")
    diff("XTRIM", "small", "MAXLEN", "~", "120")
    diff("XLEN", "small")
    for i in range(80):
        diff(
            "XADD",
            "ev",
            "MAXLEN",
            "~",
            "20",
            f"{1000 + i}-0",
            "event",
            "completed",
            "jobId",
            str(i),
            "returnvalue",
            "r" * 40,
            "prev",
            "active",
        )
    diff("XLEN", "ev")
    diff("XINFO", "STREAM", "ev")
    for i in range(120):
        fields = ["a", "1"] if i % 3 else ["b", str(-i * 1000), "c", "x" * (i % 70)]
        diff("XADD", "mix", f"{5 + i * 7}-{i * 3}", *fields)
    diff("XINFO", "STREAM", "mix")
    diff("XTRIM", "mix", "MAXLEN", "~", "30")
    diff("XTRIM", "mix", "MINID", "~", "600")
    diff("XLEN", "mix")
    for i in range(30):
        diff("XADD", "huge", f"{i + 1}-0", "f", "y" * (i * 200))
    diff("XINFO", "STREAM", "huge")
    diff("XTRIM", "huge", "MAXLEN", "~", "3")
    diff("XLEN", "huge")



def test_diff_every_node_boundary(diff):
    """Each entry's listpack size decides where its node ends (stream-node-max-bytes): after every XADD,
    ``XTRIM MAXLEN ~ 1`` leaves only the last node, so XLEN shows where each boundary fell. Entries of every
    element encoding (small and large integers, the int64 edges, non-canonical numbers, strings around 64
    bytes), with the master's fields or others, ms and seq deltas from 0 to negative and past 127, between
    fillers of every length (so that boundaries fall at every byte offset): a size off by one byte for any
    of them moves a boundary."""
    values = ["0", "1", "127", "128", "-1", "-128", "4095", "4096", "-4096", "-4097", "32767", "32768",
              "8388607", "8388608", "-8388609", "2147483647", "2147483648", "9223372036854775807",
              "9223372036854775808", "-9223372036854775808", "007", "-0", "+1", "1.5", " 1", "", "x",
              "v" * 62, "v" * 63, "v" * 64, "v" * 65, "v" * 130]
    try:
        for max_bytes in ("4096", "150", "97"):
            diff("CONFIG", "SET", "stream-node-max-bytes", max_bytes)
            key = f"b{max_bytes}"
            ms, seq = 1000, 0
            for i in range(2 * len(values) * 5):
                j = i // 2
                v = values[j % len(values)]
                if i % 2 == 0:
                    fields = ["f", "p" * (j % 41)]  # a filler
                else:
                    w = values[(j * 7 + 3) % len(values)]
                    shape = (j // len(values)) % 5
                    if shape == 0:
                        fields = ["f", v]
                    elif shape == 1:
                        fields = ["event", "added", "jobId", v, "name", w]
                    elif shape == 2:
                        fields = ["event", v or "e", "jobId", w]
                    elif shape == 3:
                        fields = ["event", "completed", "jobId", str(-j), "returnvalue", v + w, "prev", "active"]
                    else:
                        fields = [v or "f", w]
                step = (0, 1, 130, 3, 1000, 0, 0)[i % 7]
                if step:
                    ms += step
                    seq = (0, 200, 5, 70000)[i % 4]
                else:
                    seq += (1, 150, 2)[i % 3]
                diff("XADD", key, f"{ms}-{seq}", *fields)
                diff("XTRIM", key, "MAXLEN", "~", "1")
                diff("XLEN", key)
    finally:
        diff("CONFIG", "SET", "stream-node-max-bytes", "4096")

# ---- differential: XREAD -----------------------------------------------------------------


def test_diff_xread(diff):
    diff("XREAD", "STREAMS", "nokey", "0")
    diff("XREAD", "STREAMS", "nokey", "$")
    for i in range(1, 6):
        diff("XADD", "a", f"{i}-0", "f", str(i))
        diff("XADD", "b", f"{i}-5", "g", str(i))
    diff("XREAD", "STREAMS", "a", "0")
    diff("XREAD", "STREAMS", "a", "b", "0", "3")
    diff("XREAD", "COUNT", "2", "STREAMS", "a", "b", "0", "3")
    diff("XREAD", "COUNT", "0", "STREAMS", "a", "0")
    diff("XREAD", "COUNT", "-3", "STREAMS", "a", "0")
    diff("XREAD", "STREAMS", "a", "b", "$", "$")
    diff("XREAD", "STREAMS", "a", "nokey", "b", "4", "0", "5-4")
    diff("XREAD", "STREAMS", "a", "a", "0", "3")
    diff("XREAD", "STREAMS", "a", "5-0")
    diff("XREAD", "STREAMS", "a", "18446744073709551615-18446744073709551615")
    diff("XREAD", "BLOCK", "100", "STREAMS", "a", "0")
    diff("XREAD", "block", "0", "count", "1", "streams", "a", "b", "2", "2")


def test_diff_xread_errors(diff):
    diff("SET", "str", "x")
    diff("XADD", "a", "1-1", "f", "v")
    diff("XREAD", "STREAMS", "str", "0")
    diff("XREAD", "STREAMS", "a", "str", "0", "0")
    diff("XREAD", "STREAMS", "a")
    diff("XREAD", "STREAMS", "a", "b", "0")
    diff("XREAD", "STREAMS")
    diff("XREAD", "COUNT", "1", "a", "0")
    diff("XREAD", "COUNT", "x", "STREAMS", "a", "0")
    diff("XREAD", "COUNT")
    diff("XREAD", "BLOCK", "x", "STREAMS", "a", "0")
    diff("XREAD", "BLOCK", "-1", "STREAMS", "a", "0")
    diff("XREAD", "BLOCK", "1.5", "STREAMS", "a", "0")
    diff("XREAD", "BLOCK", "9223372036854775807", "STREAMS", "a", "0")
    diff("XREAD", "STREAMS", "a", "bad")
    diff("XREAD", "STREAMS", "a", "-")
    diff("XREAD", "STREAMS", "a", "+")
    diff("XREAD", "STREAMS", "a", ">")
    diff("XREAD", "GROUP", "g", "c", "STREAMS", "a", "0")
    diff("XREAD", "NOACK", "STREAMS", "a", "0")
    diff("XREAD", "FOO", "STREAMS", "a", "0")
    diff("XREAD", "STREAMS", "a", "0", "STREAMS", "b")


def test_diff_xread_in_multi_and_lua(diff):
    diff("MULTI")
    diff("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    diff("XREAD", "BLOCK", "0", "STREAMS", "s", "0")
    diff("EXEC")
    diff("XADD", "s", "1-1", "f", "v")
    diff("MULTI")
    diff("XREAD", "BLOCK", "0", "STREAMS", "s", "0")
    diff("EXEC")


def test_diff_xread_lua(rq_server, redis_ref, diff):
    diff("XADD", "s", "1-1", "f", "v")
    diff("EVAL", "return redis.call('XREAD', 'STREAMS', KEYS[1], '0')", "1", "s")
    diff("EVAL", "return redis.pcall('XREAD', 'BLOCK', '0', 'STREAMS', KEYS[1], '$')", "1", "s")
    diff("EVAL", "return redis.pcall('xread', 'BLOCK', '0', 'STREAMS', KEYS[1], '$')", "1", "s")


# ---- differential: XSETID / XINFO -----------------------------------------------------------


def test_diff_xsetid(diff):
    diff("XSETID", "nokey", "1-1")
    diff("XSETID", "nokey", "bad")
    diff("SET", "str", "x")
    diff("XSETID", "str", "1-1")
    for i in range(1, 6):
        diff("XADD", "s", f"{i}-1", "f", "v")
    diff("XSETID", "s", "4-0")
    diff("XSETID", "s", "5-1")
    diff("XSETID", "s", "10-10")
    diff("XADD", "s", "10-*", "f", "v")
    diff("XSETID", "s", "20", "ENTRIESADDED", "3")
    diff("XSETID", "s", "20", "ENTRIESADDED", "-3")
    diff("XSETID", "s", "20", "ENTRIESADDED", "x")
    diff("XSETID", "s", "20", "ENTRIESADDED", "100", "MAXDELETEDID", "30")
    diff("XSETID", "s", "20", "ENTRIESADDED", "100", "MAXDELETEDID", "bad")
    diff("XSETID", "s", "20", "ENTRIESADDED", "100", "MAXDELETEDID", "15")
    diff("XSETID", "s", "20", "FOO", "1")
    diff("XSETID", "s", "20", "ENTRIESADDED")
    diff("XSETID", "s", "-")
    diff("XSETID", "s")
    diff("XINFO", "STREAM", "s")
    diff("XDEL", "s", "1-1", "2-1", "3-1", "4-1", "5-1", "10-11")
    diff("XSETID", "s", "0-1")
    diff("XINFO", "STREAM", "s")
    diff("XADD", "s", "0-*", "f", "v")


def test_diff_xinfo(diff):
    diff("XINFO", "STREAM", "nokey")
    diff("SET", "str", "x")
    diff("XINFO", "STREAM", "str")
    diff("XINFO")
    diff("XINFO", "FOO")
    diff("XINFO", "STREAM")
    diff("XINFO", "HELP")
    diff("XINFO", "help", "x")
    diff("XADD", "s", "1-1", "f", "v", "g", "w")
    diff("XADD", "s", "2-1", "h", "x")
    diff("XINFO", "STREAM", "s")
    diff("XINFO", "STREAM", "s", "FULL", "COUNT")
    diff("XINFO", "STREAM", "s", "FOO")
    diff("XINFO", "stream", "s", "FULL", "LIMIT", "1")
    diff("XINFO", "STREAM", "s", "FULL", "COUNT", "x")
    diff("XINFO", "STREAM", "s", "FULL", "COUNT", "1")
    diff("XINFO", "STREAM", "s", "FULL", "COUNT", "0")
    diff("XINFO", "STREAM", "s", "FULL", "COUNT", "-1")
    diff("XINFO", "STREAM", "s", "FULL")
    diff("XINFO", "GROUPS", "s")
    diff("XINFO", "GROUPS", "nokey")
    diff("XINFO", "CONSUMERS", "s", "g")
    diff("XINFO", "CONSUMERS", "nokey", "g")
    diff("XINFO", "STREAM", "nokey", "FULL")
    for i in range(3, 500):
        diff("XADD", "s", f"{i * 1000}-{i}", "f", "v")
    diff("XDEL", "s", "100000-100", "3000-3")
    diff("XINFO", "STREAM", "s")


# ---- RESP3 shapes ---------------------------------------------------------------------------


def test_diff3_shapes(diff3):
    diff3("XADD", "a", "1-1", "f", "v")
    diff3("XADD", "b", "2-2", "g", "w")
    diff3("XRANGE", "a", "-", "+")
    diff3("XRANGE", "a", "-", "+", "COUNT", "0")
    diff3("XRANGE", "nokey", "-", "+")
    diff3("XREVRANGE", "a", "+", "-")
    diff3("XREAD", "STREAMS", "a", "b", "0", "0")
    diff3("XREAD", "STREAMS", "a", "$")
    diff3("XREAD", "BLOCK", "1", "STREAMS", "a", "$")
    diff3("XINFO", "STREAM", "a")
    diff3("XINFO", "STREAM", "a", "FULL")
    diff3("XINFO", "HELP")
    diff3("XADD", "a", "NOMKSTREAM", "5-*", "f", "v")
    diff3("XADD", "c", "NOMKSTREAM", "*", "f", "v")
    diff3("XLEN", "a")
    diff3("XDEL", "a", "1-1")
    diff3("XINFO", "STREAM", "a")


# ---- consumer groups -------------------------------------------------------------------------


def _parse(raw: bytes) -> Any:
    import hiredis

    rd = hiredis.Reader()
    rd.feed(raw)
    return rd.gets()


def _mask_times(v: Any) -> Any:
    """Blank the wall-clock dependent numbers (idle, seen-time, delivery times) in a parsed reply."""
    if isinstance(v, Exception):
        return repr(v)
    if isinstance(v, list):
        out = [_mask_times(x) for x in v]
        for i in range(0, len(out) - 1):
            if out[i] in (b"idle", b"seen-time"):
                out[i + 1] = "T"
        # XPENDING extended rows: [id, consumer, idle, count]; XINFO FULL pending rows
        if len(out) == 4 and isinstance(out[0], bytes) and b"-" in out[0] and isinstance(out[2], int):
            out[2] = "T"
        if len(out) == 3 and isinstance(out[0], bytes) and b"-" in out[0] and isinstance(out[1], int):
            out[1] = "T"
        return out
    return v


def _diff_masked(diff: Any, *args: Any) -> Any:
    got, want = diff.both(*args)
    if got == want:
        return _parse(got)
    g, w = _mask_times(_parse(got)), _mask_times(_parse(want))
    if isinstance(g, Exception) or isinstance(w, Exception):
        g, w = repr(g), repr(w)
    assert g == w, f"{args!r}\n respqueue: {got!r}\n     redis: {want!r}"
    return g


def test_diff_xgroup(diff):
    diff("XADD", "s", "1-1", "a", "1")
    diff("XADD", "s", "1-2", "a", "2")
    diff("XGROUP", "CREATE", "s", "g", "$")
    diff("XGROUP", "CREATE", "s", "g0", "0")
    diff("XGROUP", "CREATE", "s", "g0", "0")
    diff("XGROUP", "create", "s", "g1", "1-1", "ENTRIESREAD", "1")
    diff("XGROUP", "CREATE", "nokey", "g", "0")
    diff("XGROUP", "CREATE", "nokey", "g", "0", "MKSTREAM")
    diff("XGROUP", "CREATE", "nokey2", "g", "$", "MKSTREAM", "ENTRIESREAD", "5")
    diff("XGROUP", "CREATE", "s", "g9", "0", "ENTRIESREAD", "-2")
    diff("XGROUP", "CREATE", "s", "g9", "0", "ENTRIESREAD", "x")
    diff("XGROUP", "CREATE", "s", "g9", "0", "FOO")
    diff("XGROUP", "CREATE", "s", "g9", "-")
    diff("XGROUP", "CREATE", "s", "g9", "bad")
    diff("XGROUP", "CREATE", "s", "g9", "0", "MKSTREAM", "MKSTREAM", "MKSTREAM", "MKSTREAM")
    diff("XGROUP", "CREATE", "s", "g9")
    diff("SET", "str", "x")
    diff("XGROUP", "CREATE", "str", "g", "0", "MKSTREAM")
    diff("XGROUP", "SETID", "s", "nog", "0")
    diff("XGROUP", "SETID", "s", "g", "-")
    diff("XGROUP", "SETID", "s", "g", "bad")
    diff("XGROUP", "SETID", "s", "g", "$", "ENTRIESREAD", "3")
    diff("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD")
    diff("XGROUP", "SETID", "s", "g", "0", "MKSTREAM")
    diff("XGROUP", "SETID", "nokey9", "g", "0")
    diff("XGROUP", "CREATECONSUMER", "s", "g", "c1")
    diff("XGROUP", "CREATECONSUMER", "s", "g", "c1")
    diff("XGROUP", "CREATECONSUMER", "s", "nog", "c1")
    diff("XGROUP", "DELCONSUMER", "s", "g", "c1")
    diff("XGROUP", "DELCONSUMER", "s", "g", "c1")
    diff("XGROUP", "DELCONSUMER", "s", "nog", "c1")
    diff("XGROUP", "DESTROY", "s", "nog")
    diff("XGROUP", "DESTROY", "s", "g1")
    diff("XGROUP", "DESTROY", "s")
    diff("XGROUP", "DESTROY", "nokey9", "g")
    diff("XGROUP", "HELP")
    diff("XGROUP", "HELP", "x")
    diff("XGROUP", "FOO")
    diff("XGROUP")
    diff("XINFO", "GROUPS", "s")
    diff("XINFO", "GROUPS", "nokey2")
    diff("XINFO", "STREAM", "s")
    diff("TYPE", "nokey")


def test_diff_xreadgroup_xack_xpending(diff):
    for i in range(1, 6):
        diff("XADD", "s", f"{i}-1", "f", str(i))
    diff("XGROUP", "CREATE", "s", "g", "0")
    diff("XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS", "s", ">")
    diff("XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">")
    diff("XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">")
    diff("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0")
    diff("XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", "1-1")
    diff("XREADGROUP", "GROUP", "g", "c3", "STREAMS", "s", "0")
    diff("XINFO", "GROUPS", "s")
    _diff_masked(diff, "XINFO", "CONSUMERS", "s", "g")
    diff("XPENDING", "s", "g")
    _diff_masked(diff, "XPENDING", "s", "g", "-", "+", "10")
    _diff_masked(diff, "XPENDING", "s", "g", "-", "+", "2", "c2")
    _diff_masked(diff, "XPENDING", "s", "g", "(1-1", "(5-1", "10")
    _diff_masked(diff, "XPENDING", "s", "g", "IDLE", "0", "-", "+", "10")
    diff("XPENDING", "s", "g", "IDLE", "100000", "-", "+", "10")
    diff("XPENDING", "s", "g", "-", "+", "0")
    diff("XPENDING", "s", "g", "-", "+", "-1")
    diff("XPENDING", "s", "g", "+", "-", "10")
    diff("XPENDING", "s", "g", "-", "+", "10", "nobody")
    diff("XPENDING", "s", "g", "(+", "+", "10")
    diff("XPENDING", "s", "g", "-", "(-", "10")
    diff("XPENDING", "s", "g", "-")
    diff("XPENDING", "s", "g", "-", "+")
    diff("XPENDING", "s", "g", "-", "+", "x")
    diff("XPENDING", "s", "g", "IDLE", "x", "-", "+", "10")
    diff("XPENDING", "s", "g", "IDLE", "10", "-", "+")
    _diff_masked(diff, "XPENDING", "s", "g", "-", "+", "10", "c1", "extra")
    diff("XPENDING", "s", "nog")
    diff("XPENDING", "nokey", "g")
    diff("SET", "str", "x")
    diff("XPENDING", "str", "g")
    diff("XDEL", "s", "2-1")
    diff("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0")
    diff("XACK", "s", "g", "1-1", "bad")
    diff("XACK", "s", "g", "1-1", "9-9", "1-1")
    diff("XACK", "s", "nog", "bad")
    diff("XACK", "nokey", "g", "bad")
    diff("XACK", "str", "g", "1-1")
    diff("XACK", "s", "g")
    diff("XPENDING", "s", "g")
    diff("XINFO", "GROUPS", "s")
    diff("XGROUP", "DELCONSUMER", "s", "g", "c2")
    diff("XPENDING", "s", "g")


def test_diff_xreadgroup_errors_and_noack(diff):
    diff("XADD", "s", "1-1", "f", "v")
    diff("XADD", "t", "1-1", "f", "v")
    diff("SET", "str", "x")
    diff("XGROUP", "CREATE", "s", "g", "0")
    diff("XREADGROUP", "GROUP", "nog", "c", "STREAMS", "s", ">")
    diff("XREADGROUP", "GROUP", "g", "c", "STREAMS", "nokey", ">")
    diff("XREADGROUP", "GROUP", "g", "c", "STREAMS", "str", ">")
    diff("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "t", ">", ">")
    diff("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$")
    diff("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "bad")
    diff("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s")
    diff("XREADGROUP", "GROUP", "g", "STREAMS", "s", ">")
    diff("XREADGROUP", "COUNT", "1", "STREAMS", "s", ">")
    diff("XREADGROUP", "GROUP", "g", "c", "COUNT", "x", "STREAMS", "s", ">")
    diff("XREADGROUP", "GROUP", "g", "c", "BLOCK", "-1", "STREAMS", "s", ">")
    diff("XREADGROUP", "GROUP", "g", "c", "FOO", "STREAMS", "s", ">")
    diff("XREADGROUP", "GROUP", "g", "c")
    diff("XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", "s", ">")
    diff("XPENDING", "s", "g")
    diff("XINFO", "GROUPS", "s")
    diff("XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", "s", ">")
    diff("XREADGROUP", "GROUP", "g", "c", "BLOCK", "10", "STREAMS", "s", ">")
    diff("XGROUP", "SETID", "s", "g", "0")
    diff("XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">")
    diff("XGROUP", "SETID", "s", "g", "0")
    diff("XREADGROUP", "GROUP", "g", "c3", "STREAMS", "s", ">")
    diff("XPENDING", "s", "g")
    diff("MULTI")
    diff("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    diff("EXEC")


def test_diff_xclaim_xautoclaim(diff):
    for i in range(1, 8):
        diff("XADD", "s", f"{i}-0", "f", str(i))
    diff("XGROUP", "CREATE", "s", "g", "0")
    diff("XREADGROUP", "GROUP", "g", "c1", "COUNT", "4", "STREAMS", "s", ">")
    diff("XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">")
    diff("XCLAIM", "s", "g", "c3", "0", "1-0", "JUSTID")
    diff("XCLAIM", "s", "g", "c3", "0", "2-0", "3-0")
    diff("XCLAIM", "s", "g", "c3", "3600000", "4-0")
    diff("XCLAIM", "s", "g", "c4", "0", "99-0", "FORCE")
    diff("XCLAIM", "s", "g", "c4", "0", "5-0", "RETRYCOUNT", "7", "JUSTID")
    diff("XCLAIM", "s", "g", "c4", "0", "6-0", "IDLE", "5000", "JUSTID")
    diff("XCLAIM", "s", "g", "c4", "0", "7-0", "TIME", "1000", "JUSTID")
    diff("XCLAIM", "s", "g", "c5", "0", "1-0", "FORCE", "JUSTID")
    _diff_masked(diff, "XPENDING", "s", "g", "IDLE", "4000", "-", "+", "10")
    diff("XCLAIM", "s", "g", "c5", "x", "1-0")
    diff("XCLAIM", "s", "nog", "c5", "x", "1-0")
    diff("XCLAIM", "nokey", "g", "c5", "0", "1-0")
    diff("XCLAIM", "s", "g", "c5", "0", "1-0", "BAD")
    diff("XCLAIM", "s", "g", "c5", "0", "BAD")
    diff("XCLAIM", "s", "g", "c5", "0", "1-0", "IDLE", "x")
    diff("XCLAIM", "s", "g", "c5", "0", "1-0", "TIME", "x")
    diff("XCLAIM", "s", "g", "c5", "0", "1-0", "RETRYCOUNT", "x")
    diff("XCLAIM", "s", "g", "c5", "0", "1-0", "LASTID", "x")
    diff("XCLAIM", "s", "g", "c5", "0", "1-0", "IDLE")
    diff("XCLAIM", "s", "g", "c5", "0", "1-0", "LASTID", "10-0", "JUSTID")
    diff("XINFO", "GROUPS", "s")
    diff("XDEL", "s", "3-0")
    diff("XCLAIM", "s", "g", "c5", "0", "3-0")
    diff("XPENDING", "s", "g")
    diff("XADD", "s", "8-0", "f", "8")
    diff("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
    diff("XDEL", "s", "4-0", "5-0")
    diff("XAUTOCLAIM", "s", "g", "c9", "0", "0", "COUNT", "2")
    diff("XAUTOCLAIM", "s", "g", "c9", "0", "0", "COUNT", "2", "JUSTID")
    diff("XAUTOCLAIM", "s", "g", "c9", "3600000", "0")
    diff("XAUTOCLAIM", "s", "g", "c9", "0", "(6-0")
    diff("XAUTOCLAIM", "s", "g", "c9", "0", "-")
    diff("XAUTOCLAIM", "s", "g", "c9", "0", "0", "COUNT", "0")
    diff("XAUTOCLAIM", "s", "g", "c9", "0", "0", "COUNT", "x")
    diff("XAUTOCLAIM", "s", "g", "c9", "x", "0")
    diff("XAUTOCLAIM", "s", "g", "c9", "0", "bad")
    diff("XAUTOCLAIM", "s", "g", "c9", "0", "(18446744073709551615-18446744073709551615")
    diff("XAUTOCLAIM", "s", "g", "c9", "0", "0", "COUNT", "576460752303423488")
    diff("XAUTOCLAIM", "s", "g", "c9", "0", "0", "FOO")
    diff("XAUTOCLAIM", "s", "nog", "c9", "0", "0")
    diff("XAUTOCLAIM", "nokey", "g", "c9", "0", "0")
    diff("SET", "str", "x")
    diff("XAUTOCLAIM", "str", "g", "c9", "0", "0")
    diff("XCLAIM", "str", "g", "c9", "0", "0")
    diff("XPENDING", "s", "g")
    _diff_masked(diff, "XINFO", "CONSUMERS", "s", "g")
    _diff_masked(diff, "XINFO", "STREAM", "s", "FULL")
    _diff_masked(diff, "XINFO", "STREAM", "s", "FULL", "COUNT", "1")


def test_diff_group_lag_and_entries_read(diff):
    for i in range(1, 11):
        diff("XADD", "s", f"{i}-0", "f", str(i))
    diff("XGROUP", "CREATE", "s", "a", "0")
    diff("XGROUP", "CREATE", "s", "b", "$")
    diff("XGROUP", "CREATE", "s", "c", "5-0")
    diff("XGROUP", "CREATE", "s", "d", "0", "ENTRIESREAD", "0")
    diff("XINFO", "GROUPS", "s")
    diff("XREADGROUP", "GROUP", "a", "x", "COUNT", "3", "STREAMS", "s", ">")
    diff("XREADGROUP", "GROUP", "c", "x", "COUNT", "3", "STREAMS", "s", ">")
    diff("XREADGROUP", "GROUP", "d", "x", "NOACK", "COUNT", "3", "STREAMS", "s", ">")
    diff("XINFO", "GROUPS", "s")
    diff("XDEL", "s", "7-0")
    diff("XINFO", "GROUPS", "s")
    diff("XREADGROUP", "GROUP", "a", "x", "STREAMS", "s", ">")
    diff("XINFO", "GROUPS", "s")
    diff("XADD", "s", "11-0", "f", "11")
    diff("XTRIM", "s", "MAXLEN", "3")
    diff("XINFO", "GROUPS", "s")
    diff("XGROUP", "SETID", "s", "b", "0", "ENTRIESREAD", "2")
    diff("XINFO", "GROUPS", "s")
    diff("XSETID", "s", "20-0", "ENTRIESADDED", "30", "MAXDELETEDID", "15-0")
    diff("XINFO", "GROUPS", "s")
    diff("XINFO", "STREAM", "s")


def test_diff3_group_shapes(diff3):
    diff3("XADD", "s", "1-1", "f", "v")
    diff3("XGROUP", "CREATE", "s", "g", "0")
    diff3("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    diff3("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    diff3("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "0")
    diff3("XPENDING", "s", "g")
    diff3("XINFO", "GROUPS", "s")
    diff3("XINFO", "STREAM", "s")
    diff3("XCLAIM", "s", "g", "c2", "0", "1-1", "JUSTID")
    diff3("XAUTOCLAIM", "s", "g", "c3", "0", "0", "JUSTID")
    diff3("XACK", "s", "g", "1-1")
    diff3("XPENDING", "s", "g")
    diff3("XGROUP", "HELP")


def test_copy_keeps_groups(r):
    r.xadd("s", {"a": 1}, id="1-1")
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c", {"s": ">"})
    r.copy("s", "t")
    assert r.xpending("t", "g")["pending"] == 1
    r.xack("t", "g", "1-1")
    assert r.xpending("t", "g")["pending"] == 0
    assert r.xpending("s", "g")["pending"] == 1


def test_xreadgroup_block_woken_by_xadd(anyr):
    anyr.xgroup_create("s", "g", id="$", mkstream=True)
    conn = RawConn(_port(anyr))
    conn.send("XREADGROUP", "GROUP", "g", "c", "BLOCK", "5000", "STREAMS", "s", ">")
    _wait_blocked(anyr, 1)
    anyr.xadd("s", {"a": 1}, id="1-1")
    assert conn.read_raw() == b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    assert anyr.xpending("s", "g")["pending"] == 1
    conn.close()


def test_xreadgroup_block_two_consumers_share_work(anyr):
    anyr.xgroup_create("s", "g", id="$", mkstream=True)
    c1, c2 = RawConn(_port(anyr)), RawConn(_port(anyr))
    c1.send("XREADGROUP", "GROUP", "g", "a", "BLOCK", "5000", "STREAMS", "s", ">")
    c2.send("XREADGROUP", "GROUP", "g", "b", "BLOCK", "5000", "STREAMS", "s", ">")
    _wait_blocked(anyr, 2)
    anyr.xadd("s", {"n": 1}, id="1-1")
    assert b"1-1" in c1.read_raw()
    anyr.xadd("s", {"n": 2}, id="2-1")
    assert b"2-1" in c2.read_raw()
    c1.close()
    c2.close()


def test_xreadgroup_block_group_destroyed_or_key_deleted(anyr):
    anyr.xgroup_create("s", "g", id="$", mkstream=True)
    conn = RawConn(_port(anyr))
    conn.send("XREADGROUP", "GROUP", "g", "c", "BLOCK", "5000", "STREAMS", "s", ">")
    _wait_blocked(anyr, 1)
    anyr.xgroup_destroy("s", "g")
    assert conn.read_raw() == b"-NOGROUP the consumer group this client was blocked on no longer exists\r\n"
    anyr.xgroup_create("s", "g", id="$")
    conn.send("XREADGROUP", "GROUP", "g", "c", "BLOCK", "5000", "STREAMS", "s", ">")
    _wait_blocked(anyr, 1)
    anyr.delete("s")
    assert conn.read_raw() == b"-UNBLOCKED the stream key no longer exists\r\n"
    conn.close()


def test_xread_block_key_deleted_keeps_waiting(anyr):
    anyr.xadd("s", {"a": 1}, id="1-1")
    conn = RawConn(_port(anyr))
    conn.send("XREAD", "BLOCK", "5000", "STREAMS", "s", "$")
    _wait_blocked(anyr, 1)
    anyr.delete("s")
    anyr.set("s", "now a string")
    anyr.delete("s")
    # the recreated stream's entry is newer than the 1-1 the client waits past... only if above it
    anyr.xadd("s", {"b": 2}, id="0-5")
    anyr.xadd("s", {"c": 3}, id="2-2")
    assert conn.read_raw() == b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n"
    conn.close()


def test_diff_node_size_config(diff):
    """CONFIG SET stream-node-max-entries/bytes change where ~ can cut, as in Redis."""
    try:
        diff("CONFIG", "SET", "stream-node-max-entries", "10")
        for i in range(1, 96):
            diff("XADD", "s", f"{i}-0", "f", "v")
        diff("XINFO", "STREAM", "s")
        diff("XTRIM", "s", "MAXLEN", "~", "33")
        diff("XLEN", "s")
        diff("XTRIM", "s", "MAXLEN", "~", "0")
        diff("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "0")
        diff("XLEN", "s")
        diff("CONFIG", "SET", "stream-node-max-entries", "0")
        diff("CONFIG", "SET", "stream-node-max-bytes", "300")
        for i in range(1, 60):
            diff("XADD", "t", f"{i}-0", "field", "v" * (i % 20))
        diff("XINFO", "STREAM", "t")
        diff("XTRIM", "t", "MAXLEN", "~", "20")
        diff("XLEN", "t")
    finally:
        diff("CONFIG", "SET", "stream-node-max-entries", "100")
        diff("CONFIG", "SET", "stream-node-max-bytes", "4096")

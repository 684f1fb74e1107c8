"""Pub/Sub: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, (S)PUBLISH, PUBSUB, against Redis 7.0."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import hiredis
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .servers import RawConn, encode_command, start_respqueue


class Pair:
    """A second connection to each server (the publisher)."""

    def __init__(self, rq_port: int, ref_port: int, resp3: bool = False) -> None:
        self.rq = RawConn(rq_port)
        self.ref = RawConn(ref_port)
        if resp3:
            self.rq.call_raw("HELLO", "3")
            self.ref.call_raw("HELLO", "3")

    def __call__(self, *args: Any) -> bytes:
        got, want = self.rq.call_raw(*args), self.ref.call_raw(*args)
        assert got == want, f"{args!r}\n respqueue: {got!r}\n     redis: {want!r}"
        return got

    def close(self) -> None:
        self.rq.close()
        self.ref.close()


@pytest.fixture(autouse=True)
def no_leftover_subscriptions(rq_server, redis_ref) -> Iterator[None]:
    """After each test, wait until both servers have dropped every subscription."""
    yield
    conns = [RawConn(rq_server.port), RawConn(redis_ref.port)]
    try:
        deadline = time.time() + 5
        while True:
            states = [
                (c.call_raw("PUBSUB", "NUMPAT"), c.call_raw("PUBSUB", "CHANNELS"), c.call_raw("PUBSUB", "SHARDCHANNELS"))
                for c in conns
            ]
            if all(s == (b":0\r\n", b"*0\r\n", b"*0\r\n") for s in states):
                break
            assert time.time() < deadline, f"subscriptions left over: {states!r}"
            time.sleep(0.02)
    finally:
        for c in conns:
            c.close()


@pytest.fixture
def pub(rq_server, redis_ref) -> Iterator[Pair]:
    p = Pair(rq_server.port, redis_ref.port)
    yield p
    p.close()


def more(d: Any, n: int = 1) -> list[bytes]:
    """Read ``n`` more replies/messages from both sides of ``d``; they must match."""
    out = []
    for _ in range(n):
        got, want = d.rq.read_raw(), d.ref.read_raw()
        assert got == want, f"respqueue: {got!r}\n     redis: {want!r}"
        out.append(got)
    return out


def more_unordered(d: Any, n: int) -> None:
    """Read ``n`` messages whose order Redis leaves to its hash tables.

    For unsubscribe confirmations the running count still goes down in
    order, so the counts are compared in order and the names as a set.
    """
    got = [d.rq.read_raw() for _ in range(n)]
    want = [d.ref.read_raw() for _ in range(n)]
    if all(b"unsubscribe\r\n" in x for x in got + want):
        g = [hiredis_parse(x) for x in got]
        w = [hiredis_parse(x) for x in want]
        assert [(m[0], m[2]) for m in g] == [(m[0], m[2]) for m in w], (got, want)
        assert sorted(m[1] for m in g) == sorted(m[1] for m in w), (got, want)
        assert all(x[:1] == y[:1] for x, y in zip(got, want, strict=True))  # same RESP types
    else:
        assert sorted(got) == sorted(want)


def pipeline(d: Any, *cmds: tuple[Any, ...], replies: int | None = None) -> bytes:
    data = b"".join(encode_command(c) for c in cmds)
    d.rq.send_raw(data)
    d.ref.send_raw(data)
    n = len(cmds) if replies is None else replies
    got = b"".join(d.rq.read_raw() for _ in range(n))
    want = b"".join(d.ref.read_raw() for _ in range(n))
    assert got == want, f"{cmds!r}\n respqueue: {got!r}\n     redis: {want!r}"
    return got


def nothing_pending(conn: RawConn, wait: float = 0.05) -> bool:
    time.sleep(wait)
    conn.sock.setblocking(False)
    try:
        data = conn.sock.recv(65536)
    except BlockingIOError:
        data = b""
    finally:
        conn.sock.setblocking(True)
    conn.pending += data
    return not conn.pending


# ---- replies ---------------------------------------------------------------
def test_subscribe_replies(diff):
    assert diff("SUBSCRIBE", "a") == b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"
    diff("SUBSCRIBE", "b", "a", "c")
    more(diff, 2)
    diff("UNSUBSCRIBE", "a")
    diff("UNSUBSCRIBE", "nosuch")
    diff("UNSUBSCRIBE", "b", "c")
    more(diff)
    diff("UNSUBSCRIBE")
    diff("PUNSUBSCRIBE")
    diff("SUBSCRIBE", "x", "y", "z")
    more(diff, 2)
    # without arguments Redis walks its hash table: compare unordered
    diff.rq.send("UNSUBSCRIBE")
    diff.ref.send("UNSUBSCRIBE")
    more_unordered(diff, 3)
    diff("PING")


def test_psubscribe_replies(diff):
    diff("PSUBSCRIBE", "c*", "b?", "a[xy]", "d", "e", "f", "g")
    more(diff, 6)
    diff("SUBSCRIBE", "chan")
    diff("PUNSUBSCRIBE", "b?", "nosuch")
    more(diff)
    # Redis 7.0 keeps a client's patterns in subscription order
    diff("PUNSUBSCRIBE")
    more(diff, 4)
    diff("PUNSUBSCRIBE")
    diff("UNSUBSCRIBE")


def test_mixed_counts(diff):
    diff("SUBSCRIBE", "a")
    diff("PSUBSCRIBE", "a")
    diff("SUBSCRIBE", "a")
    diff("PSUBSCRIBE", "a")
    diff("UNSUBSCRIBE", "a")
    diff("UNSUBSCRIBE", "a")
    diff("PUNSUBSCRIBE")
    diff("PING", "still")


def test_resp3_replies(diff3):
    diff3("SUBSCRIBE", "a", "b")
    more(diff3)
    diff3("PSUBSCRIBE", "p*")
    diff3("GET", "k")  # any command is allowed in RESP3
    diff3("PING")
    diff3("PUNSUBSCRIBE")
    diff3("UNSUBSCRIBE", "a", "b")
    more(diff3)
    diff3("UNSUBSCRIBE")


def test_resp2_subscribed_context_errors(diff):
    diff("SUBSCRIBE", "a")
    diff("GET", "k")
    diff("PUBLISH", "a", "x")
    diff("MULTI")
    diff("PUBSUB", "NUMPAT")
    diff("PUBSUB", "CHANNELS")
    diff("PING")
    diff("PING", "hello")
    diff("NOSUCH")
    diff("SET", "k")
    diff("UNSUBSCRIBE")
    diff("GET", "k")
    diff("PING")


def test_arity_errors(diff):
    diff("SUBSCRIBE")
    diff("PSUBSCRIBE")
    diff("SSUBSCRIBE")
    diff("PUBLISH", "a")
    diff("PUBLISH", "a", "b", "c")
    diff("SPUBLISH", "a")
    diff("PUBSUB")
    diff("PUBSUB", "NUMPAT", "x")
    diff("PUBSUB", "FOO")
    diff("PUBSUB", "CHANNELS", "a", "b")
    diff("pubsub", "channels", "a", "b")
    diff("PUBSUB", "SHARDCHANNELS", "a", "b")
    diff("PUBSUB", "HELP")
    diff("PUBSUB", "help", "x")


def test_unsubscribe_when_not_subscribed(diff, diff3):
    diff("UNSUBSCRIBE")
    diff("PUNSUBSCRIBE")
    diff("SUNSUBSCRIBE")
    diff("UNSUBSCRIBE", "a", "b")
    more(diff)
    diff("PUNSUBSCRIBE", "a")
    diff("SUNSUBSCRIBE", "x")
    diff("GET", "k")  # never subscribed: normal mode
    diff3("UNSUBSCRIBE")
    diff3("PUNSUBSCRIBE", "x")


def test_pipeline_order(diff):
    pipeline(diff, ("PING",), ("SUBSCRIBE", "a"), ("PING",))
    pipeline(diff, ("PING",), ("SUBSCRIBE", "b", "c", "d"), ("PING", "x"), replies=5)
    pipeline(diff, ("PSUBSCRIBE", "p1", "p2"), ("UNSUBSCRIBE", "b", "c"), ("PING",), replies=5)
    pipeline(diff, ("UNSUBSCRIBE", "a"), ("PUNSUBSCRIBE",), ("PING",), replies=4)


def test_pipeline_order_resp3(diff3):
    pipeline(diff3, ("SET", "k", "v"), ("SUBSCRIBE", "a", "b"), ("GET", "k"), replies=4)
    pipeline(diff3, ("PUBLISH", "a", "self"), ("PING",), replies=3)
    pipeline(diff3, ("GET", "k"), ("UNSUBSCRIBE", "a", "b"), ("GET", "k"), replies=4)


def test_pipeline_order_big_write(diff):
    cmds = [("PING",)] * 50 + [("SUBSCRIBE", "a", "b")] + [("PING", "z")] * 50
    pipeline(diff, *cmds, replies=102)


def test_pipeline_order_inline(diff):
    data = b"PING\r\nSUBSCRIBE a b\r\nPING x\r\nUNSUBSCRIBE a b\r\nPING\r\n"
    diff.rq.send_raw(data)
    diff.ref.send_raw(data)
    more(diff, 7)


def test_pubsub_subcommands(diff, pub):
    diff("PUBSUB", "NUMSUB")
    diff("PUBSUB", "NUMSUB", "a", "b")
    diff("PUBSUB", "NUMPAT")
    diff("PUBSUB", "CHANNELS")
    diff("PUBSUB", "SHARDCHANNELS")
    diff("PUBSUB", "SHARDNUMSUB", "a")
    pub("SUBSCRIBE", "news.tech", "news.art", "other")
    more(pub, 2)
    pub.rq.call_raw("PSUBSCRIBE", "news.*")
    pub.ref.call_raw("PSUBSCRIBE", "news.*")
    diff("PUBSUB", "NUMSUB", "news.tech", "other", "nope")
    diff("PUBSUB", "NUMPAT")
    diff.unordered("PUBSUB", "CHANNELS")
    diff.unordered("PUBSUB", "CHANNELS", "news.*")
    diff("PUBSUB", "CHANNELS", "x*")
    diff("PUBSUB", "SHARDCHANNELS")


def test_pubsub_numsub_resp3(diff3, pub):
    pub("SUBSCRIBE", "a")
    diff3("PUBSUB", "NUMSUB", "a", "b")
    diff3("PUBSUB", "SHARDNUMSUB", "a")
    diff3("PUBSUB", "NUMPAT")
    diff3("PUBSUB", "CHANNELS")
    diff3("PUBSUB", "HELP")


# ---- delivery --------------------------------------------------------------------
def test_publish_delivery(diff, pub):
    diff("SUBSCRIBE", "a", "b")
    more(diff)
    assert pub("PUBLISH", "a", "hello") == b":1\r\n"
    more(diff)
    pub("PUBLISH", "b", "")
    more(diff)
    pub("PUBLISH", "c", "nobody")
    diff("PSUBSCRIBE", "a*")
    assert pub("PUBLISH", "a", "twice") == b":2\r\n"
    more(diff, 2)
    pub("PUBLISH", "abc", "pattern only")
    more(diff)
    diff("UNSUBSCRIBE", "a")
    pub("PUBLISH", "a", "pattern now")
    more(diff)
    pub("PUBLISH", "b", "bin\x00\r\nary")
    more(diff)
    assert nothing_pending(diff.rq) and nothing_pending(diff.ref)


def test_publish_delivery_resp3(diff3, pub):
    diff3("SUBSCRIBE", "a")
    diff3("PSUBSCRIBE", "*")
    pub("PUBLISH", "a", "m1")
    more_unordered(diff3, 2)
    pub("PUBLISH", "zzz", "m2")
    more(diff3)
    diff3("SET", "k", "v")
    pub("PUBLISH", "zzz", "m3")
    more(diff3)
    diff3("GET", "k")


def test_resp3_publish_to_self(diff3):
    diff3("SUBSCRIBE", "me")
    # the message arrives before the PUBLISH reply
    diff3.rq.send("PUBLISH", "me", "hi")
    diff3.ref.send("PUBLISH", "me", "hi")
    more(diff3, 2)


def test_glob_patterns(diff, pub):
    diff("PSUBSCRIBE", "h?llo", "h[ae]llo", "h[^e]llo", "h*llo", "h\\*llo", "[a-c]x")
    more(diff, 5)
    for ch in ["hello", "hallo", "hxllo", "heeello", "h*llo", "bx", "dx", "Hello"]:
        n = pub("PUBLISH", ch, "m")
        more_unordered(diff, int(n[1:-2]))
    assert nothing_pending(diff.rq) and nothing_pending(diff.ref)


def test_many_subscribers(diff, rq_server, redis_ref, pub):
    subs = [Pair(rq_server.port, redis_ref.port) for _ in range(10)]
    for i, s in enumerate(subs):
        s("SUBSCRIBE", "fan")
        if i % 2:
            s("PSUBSCRIBE", "f*")
    assert pub("PUBLISH", "fan", "x") == b":15\r\n"
    for i, s in enumerate(subs):
        more(s, 2 if i % 2 else 1)
    diff("PUBSUB", "NUMSUB", "fan")
    diff("PUBSUB", "NUMPAT")
    for s in subs:
        s.close()
    time.sleep(0.2)
    diff("PUBSUB", "NUMSUB", "fan")
    diff("PUBSUB", "NUMPAT")
    diff("PUBLISH", "fan", "x")


def test_sharded(diff, pub):
    diff("SSUBSCRIBE", "s1", "s2")
    more(diff)
    diff("GET", "k")
    diff("SUBSCRIBE", "s1")
    assert pub("SPUBLISH", "s1", "shard") == b":1\r\n"
    more(diff)
    assert pub("PUBLISH", "s1", "plain") == b":1\r\n"
    more(diff)
    pub("PUBSUB", "SHARDNUMSUB", "s1", "s2", "s3")
    pub("PUBSUB", "NUMSUB", "s1", "s2")
    pub("PUBSUB", "SHARDCHANNELS", "s1")
    diff("UNSUBSCRIBE")
    diff("PING")  # shard subscriptions still hold the client in pub/sub mode
    diff("SUNSUBSCRIBE", "s2")
    diff("SUNSUBSCRIBE")
    diff("SUNSUBSCRIBE")
    diff("GET", "k")
    pub("PUBSUB", "SHARDCHANNELS")


def test_subscribe_inside_multi(diff, pub):
    diff("MULTI")
    diff("SUBSCRIBE", "a")
    diff("PSUBSCRIBE", "b")
    diff("SSUBSCRIBE", "c")
    diff("EXEC")
    pub("PUBLISH", "a", "x")
    more(diff)
    diff("UNSUBSCRIBE")
    diff("PUNSUBSCRIBE")


def test_subscribe_inside_multi_resp3(diff3):
    diff3("MULTI")
    diff3("SUBSCRIBE", "a")
    diff3("UNSUBSCRIBE", "a")
    diff3("EXEC")


def test_reset_leaves_pubsub(diff, pub):
    diff("SUBSCRIBE", "a")
    diff("PSUBSCRIBE", "b*")
    diff("SSUBSCRIBE", "c")
    diff("RESET")
    diff("GET", "k")
    pub("PUBSUB", "NUMSUB", "a")
    pub("PUBSUB", "NUMPAT")
    pub("PUBSUB", "SHARDNUMSUB", "c")
    pub("PUBLISH", "a", "x")
    assert nothing_pending(diff.rq) and nothing_pending(diff.ref)


def test_quit_while_subscribed(diff, pub):
    diff("SUBSCRIBE", "a")
    diff("QUIT")
    time.sleep(0.1)
    pub("PUBSUB", "NUMSUB", "a")


def test_disconnect_cleans_up(r, rq_server):
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", rq_server.port))
        s.sendall(encode_command(("SUBSCRIBE", "gone")) + encode_command(("PSUBSCRIBE", "gone*")))
        s.recv(1024)
        s.close()
    deadline = time.time() + 5
    while time.time() < deadline and r.pubsub_numsub("gone") != [(b"gone", 0)]:
        time.sleep(0.05)
    assert r.pubsub_numsub("gone") == [(b"gone", 0)]
    assert r.pubsub_numpat() == 0
    assert r.publish("gone", "x") == 0


# ---- redis-py -----------------------------------------------------------------------
def _get(p: Any, timeout: float = 2.0) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = p.get_message(timeout=0.1)
        if m is not None:
            return m
    raise AssertionError("no message")


def test_redis_py_pubsub(r):
    p = r.pubsub()
    p.subscribe("ch1", "ch2")
    assert _get(p) == {"type": "subscribe", "pattern": None, "channel": b"ch1", "data": 1}
    assert _get(p) == {"type": "subscribe", "pattern": None, "channel": b"ch2", "data": 2}
    assert r.publish("ch1", "hello") == 1
    assert _get(p) == {"type": "message", "pattern": None, "channel": b"ch1", "data": b"hello"}
    p.psubscribe("ch*")
    assert _get(p)["type"] == "psubscribe"
    assert r.publish("ch2", "both") == 2
    got = [_get(p), _get(p)]
    assert sorted(m["type"] for m in got) == ["message", "pmessage"]
    assert r.pubsub_channels() and sorted(r.pubsub_channels()) == [b"ch1", b"ch2"]
    assert r.pubsub_numsub("ch1", "zz") == [(b"ch1", 1), (b"zz", 0)]
    assert r.pubsub_numpat() == 1
    p.unsubscribe()
    p.punsubscribe()
    types = sorted(_get(p)["type"] for _ in range(3))
    assert types == ["punsubscribe", "unsubscribe", "unsubscribe"]
    assert r.publish("ch1", "none") == 0
    p.close()


def test_redis_py_handlers_and_thread(r):
    got: list[bytes] = []
    p = r.pubsub()
    p.subscribe(**{"jobs": lambda m: got.append(m["data"])})
    t = p.run_in_thread(sleep_time=0.01)
    try:
        deadline = time.time() + 3
        while r.pubsub_numsub("jobs") != [(b"jobs", 1)] and time.time() < deadline:
            time.sleep(0.02)
        for i in range(20):
            r.publish("jobs", str(i))
        deadline = time.time() + 3
        while len(got) < 20 and time.time() < deadline:
            time.sleep(0.02)
    finally:
        t.stop()
        t.join(5)
        p.close()
    assert got == [str(i).encode() for i in range(20)]


def test_redis_py_resp3_pubsub(rq_server):
    c = redis.Redis(port=rq_server.port, protocol=3)
    p = c.pubsub()
    try:
        p.subscribe("r3")
        assert _get(p)["type"] == "subscribe"
        p.psubscribe("r*")
        assert _get(p)["type"] == "psubscribe"
        assert c.publish("r3", "v") == 2
        got = sorted((m["type"], m["data"]) for m in (_get(p), _get(p)))
        assert got == [("message", b"v"), ("pmessage", b"v")]
        # the subscribed connection itself can run normal commands in RESP3
        p.execute_command("SET", "r3key", "1")
        # the SET's reply is read by nobody here: wait until its effect is visible
        deadline = time.time() + 5
        while c.get("r3key") is None and time.time() < deadline:
            time.sleep(0.01)
        assert c.get("r3key") == b"1"
    finally:
        p.close()
        c.delete("r3key")
        c.close()


def test_redis_py_sharded(r):
    p = r.pubsub()
    p.ssubscribe("sh")
    assert _get(p) == {"type": "ssubscribe", "pattern": None, "channel": b"sh", "data": 1}
    assert r.spublish("sh", "m") == 1
    assert _get(p) == {"type": "smessage", "pattern": None, "channel": b"sh", "data": b"m"}
    assert r.publish("sh", "plain") == 0
    p.close()


# ---- slow consumers ----------------------------------------------------------------
def _raw_subscriber(port: int, channel: str) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(encode_command(("SUBSCRIBE", channel)))
    rd = hiredis.Reader()
    while True:
        rd.feed(s.recv(4096))
        if rd.gets() is not False:
            return s


def test_non_reading_subscriber_does_not_stall(r, rq_server):
    s = _raw_subscriber(rq_server.port, "flood")
    payload = b"x" * (256 * 1024)
    t0 = time.time()
    for _ in range(40):  # 10 MB to a client that never reads
        assert r.publish("flood", payload) in (0, 1)
        assert r.ping()
    assert time.time() - t0 < 10
    other = redis.Redis(port=rq_server.port, socket_timeout=5)
    assert other.set("still", "alive") and other.get("still") == b"alive"
    other.close()
    s.close()


@pytest.fixture
def small_limit_server() -> Iterator[Any]:
    old = os.environ.get("RESPQUEUE_CLIENT_OUTPUT_BUFFER_LIMIT")
    os.environ["RESPQUEUE_CLIENT_OUTPUT_BUFFER_LIMIT"] = "pubsub 1mb 0 0"
    try:
        srv = start_respqueue()
    finally:
        if old is None:
            del os.environ["RESPQUEUE_CLIENT_OUTPUT_BUFFER_LIMIT"]
        else:
            os.environ["RESPQUEUE_CLIENT_OUTPUT_BUFFER_LIMIT"] = old
    yield srv
    srv.stop()


def test_slow_subscriber_is_disconnected(small_limit_server):
    port = small_limit_server.port
    slow = _raw_subscriber(port, "flood")
    fast = redis.Redis(port=port, socket_timeout=5)
    p = fast.pubsub()
    p.subscribe("flood")
    assert _get(p)["type"] == "subscribe"
    payload = b"y" * (64 * 1024)
    counts = []
    for _ in range(100):  # 6.4 MB: far above the 1 MB limit
        counts.append(fast.publish("flood", payload))
        msg = _get(p)
        assert msg["type"] == "message" and len(msg["data"]) == len(payload)
    assert counts[0] == 2
    deadline = time.time() + 5
    while fast.pubsub_numsub("flood") != [(b"flood", 1)] and time.time() < deadline:
        time.sleep(0.05)
    assert fast.pubsub_numsub("flood") == [(b"flood", 1)]  # the slow one was dropped
    assert fast.publish("flood", "tail") == 1
    p.close()
    fast.close()
    slow.close()


# ---- random sequences ---------------------------------------------------------------
CHANNELS = ["a", "b", "ab"]
PATTERNS = ["a*", "?b", "*"]
SUB_CMDS = st.one_of(
    st.tuples(st.just("SUBSCRIBE"), st.lists(st.sampled_from(CHANNELS), min_size=1, max_size=3)),
    st.tuples(st.just("UNSUBSCRIBE"), st.lists(st.sampled_from(CHANNELS), max_size=2)),
    st.tuples(st.just("PSUBSCRIBE"), st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=2)),
    st.tuples(st.just("PUNSUBSCRIBE"), st.lists(st.sampled_from(PATTERNS), max_size=2)),
    st.tuples(st.just("PUBLISH"), st.lists(st.sampled_from(CHANNELS), min_size=1, max_size=1)),
    st.tuples(st.just("PING"), st.just([])),
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(SUB_CMDS, min_size=1, max_size=15), resp3=st.booleans())
def test_random_pubsub(rq_server, redis_ref, steps, resp3):
    sub = Pair(rq_server.port, redis_ref.port, resp3=resp3)
    pubc = Pair(rq_server.port, redis_ref.port)
    channels: set[str] = set()
    patterns: list[str] = []
    try:
        for cmd, args in steps:
            if cmd == "PUBLISH":
                n = pubc("PUBLISH", args[0], "msg")
                more_unordered(sub, int(n[1:-2]))
                continue
            sub.rq.send(cmd, *args)
            sub.ref.send(cmd, *args)
            if cmd == "PING":
                more(sub)
            elif cmd == "UNSUBSCRIBE" and not args:
                more_unordered(sub, max(1, len(channels)))
                channels.clear()
            elif cmd == "PUNSUBSCRIBE" and not args:
                more(sub, max(1, len(patterns)))
                patterns.clear()
            else:
                more(sub, len(args))
                for a in args:
                    if cmd == "SUBSCRIBE":
                        channels.add(a)
                    elif cmd == "UNSUBSCRIBE":
                        channels.discard(a)
                    elif cmd == "PSUBSCRIBE" and a not in patterns:
                        patterns.append(a)
                    elif cmd == "PUNSUBSCRIBE" and a in patterns:
                        patterns.remove(a)
        pubc("PUBSUB", "NUMPAT")
        got = sorted(hiredis_parse(pubc.rq.call_raw("PUBSUB", "CHANNELS")))
        want = sorted(hiredis_parse(pubc.ref.call_raw("PUBSUB", "CHANNELS")))
        assert got == want
    finally:
        sub.close()
        pubc.close()


def hiredis_parse(b: bytes) -> Any:
    rd = hiredis.Reader()
    rd.feed(b)
    return rd.gets()

"""Blocking list commands across several connections.

Each scenario runs against respqueue and against the reference Redis with
raw connections; the transcripts (exact reply bytes) must be identical.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

from .servers import RawConn

SETTLE = 0.1  # time for a sent blocking command to reach the server and block


class Scenario:
    """Raw connections to one server plus a transcript of what they received."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conns: dict[str, RawConn] = {}
        self.log: list[tuple[str, bytes]] = []

    def conn(self, name: str) -> RawConn:
        if name not in self.conns:
            self.conns[name] = RawConn(self.port, timeout=5)
        return self.conns[name]

    def send(self, name: str, *args: str) -> None:
        """Send without waiting for the reply (a blocking command)."""
        self.conn(name).send(*args)
        time.sleep(SETTLE)

    def read(self, name: str) -> bytes:
        r = self.conn(name).read_raw()
        self.log.append((name, r))
        return r

    def call(self, name: str, *args: str) -> bytes:
        r = self.conn(name).call_raw(*args)
        self.log.append((name, r))
        return r

    def pending(self, name: str, wait: float = 0.2) -> bool:
        """True if ``name`` has no reply waiting (is still blocked)."""
        c = self.conn(name)
        if c.pending:
            return False
        c.sock.settimeout(wait)
        try:
            data = c.sock.recv(1 << 16)
        except TimeoutError:
            return True
        finally:
            c.sock.settimeout(5)
        c.pending += data
        return False

    def drop(self, name: str) -> None:
        self.conns.pop(name).close()

    def close(self) -> None:
        for c in self.conns.values():
            c.close()


def run_both(rq_port: int, ref_port: int, body: Callable[[Scenario], None]) -> list[tuple[str, bytes]]:
    """Run ``body`` on both servers; assert the transcripts match; return respqueue's."""
    out = []
    for port in (rq_port, ref_port):
        s = Scenario(port)
        try:
            s.call("admin", "FLUSHALL")
            body(s)
            out.append(s.log)
        finally:
            s.close()
    assert out[0] == out[1], f"\n respqueue: {out[0]!r}\n     redis: {out[1]!r}"
    return out[0]


@pytest.fixture
def both(rq_server, redis_ref):
    def go(body: Callable[[Scenario], None]) -> list[tuple[str, bytes]]:
        return run_both(rq_server.port, redis_ref.port, body)

    return go


# ---- scenarios -------------------------------------------------------------------


def test_blpop_woken_by_push(both):
    def body(s: Scenario) -> None:
        s.send("a", "BLPOP", "k1", "k2", "0")
        assert s.pending("a")
        s.call("b", "RPUSH", "k2", "x", "y")
        s.read("a")
        s.call("b", "LRANGE", "k2", "0", "-1")

    log = both(body)
    assert (("a", b"*2\r\n$2\r\nk2\r\n$1\r\nx\r\n")) in log


def test_served_from_the_key_that_became_ready(both, rq_server):

    def body(s: Scenario) -> None:
        s.send("a", "BLPOP", "a", "b", "0")
        s.send("c", "BLMPOP", "0", "2", "a", "b", "RIGHT", "COUNT", "5")
        for cmd in (("MULTI",), ("RPUSH", "b", "x"), ("RPUSH", "a", "y", "z"), ("EXEC",)):
            s.call("p", *cmd)
        s.read("a")
        s.read("c")
        s.call("p", "LRANGE", "a", "0", "-1")
        s.call("p", "LRANGE", "b", "0", "-1")

    both(body)


def test_duplicate_keys_served_once(both):
    def body(s: Scenario) -> None:
        s.send("a", "BLPOP", "k", "k", "0")
        s.send("b", "BLMPOP", "0", "2", "k", "k", "LEFT")
        s.call("p", "RPUSH", "k", "1", "2", "3")
        s.read("a")
        s.read("b")
        s.call("p", "LRANGE", "k", "0", "-1")

    both(body)


def test_client_unblock(both):
    def body(s: Scenario) -> None:
        s.call("a", "CLIENT", "ID")
        s.log.pop()  # ids differ between servers
        cid = s.conn("a").call_raw("CLIENT", "ID")[1:-2].decode()
        s.send("a", "BLMOVE", "k", "d", "LEFT", "LEFT", "0")
        s.call("p", "CLIENT", "UNBLOCK", cid)
        s.read("a")
        s.send("a", "BRPOP", "k", "0")
        s.call("p", "CLIENT", "UNBLOCK", cid, "ERROR")
        s.read("a")
        s.call("p", "RPUSH", "k", "x")
        s.call("p", "LLEN", "k")

    both(body)


def test_brpop_woken_by_lpush_many(both):
    def body(s: Scenario) -> None:
        s.send("a", "BRPOP", "k", "0")
        s.send("b", "BRPOP", "k", "0")
        s.call("c", "LPUSH", "k", "1", "2", "3")
        s.read("a")
        s.read("b")
        s.call("c", "LRANGE", "k", "0", "-1")

    both(body)


def test_fifo_three_clients_one_push(both):
    def body(s: Scenario) -> None:
        for n in ("c1", "c2", "c3"):
            s.send(n, "BLPOP", "k", "0")
        s.call("p", "RPUSH", "k", "a", "b", "c", "d")
        for n in ("c1", "c2", "c3"):
            s.read(n)
        s.call("p", "LRANGE", "k", "0", "-1")

    log = both(body)
    got = [r for n, r in log if n.startswith("c")]
    assert got == [b"*2\r\n$1\r\nk\r\n$1\r\n%s\r\n" % v for v in (b"a", b"b", b"c")]


def test_fifo_three_clients_separate_pushes(both):
    def body(s: Scenario) -> None:
        for n in ("c1", "c2", "c3"):
            s.send(n, "BRPOP", "k", "other", "0")
        for v in ("x", "y", "z"):
            s.call("p", "LPUSH", "k", v)
        for n in ("c1", "c2", "c3"):
            s.read(n)
        s.call("p", "EXISTS", "k")

    log = both(body)
    assert [r for n, r in log if n.startswith("c")][0].endswith(b"x\r\n")


def test_timeout_returns_nil_in_time(rq_server, redis_ref):
    for port in (rq_server.port, redis_ref.port):
        c = RawConn(port)
        for args in (("BLPOP", "nokey", "0.01"), ("BLMOVE", "nokey", "d", "LEFT", "LEFT", "0.01"),
                     ("BLMPOP", "0.01", "1", "nokey", "LEFT"), ("BRPOPLPUSH", "nokey", "d", "0.01")):
            t = time.monotonic()
            assert c.call_raw(*args) == b"*-1\r\n"
            dt = time.monotonic() - t
            assert 0.009 <= dt < 0.5, (port, args, dt)
        c.close()
    c = RawConn(rq_server.port)
    t = time.monotonic()
    assert c.call_raw("BRPOP", "nokey", "0.001") == b"*-1\r\n"
    assert time.monotonic() - t < 0.2
    c.close()


def test_blmove_chain(both):
    def body(s: Scenario) -> None:
        s.send("a", "BLMOVE", "k1", "k2", "LEFT", "RIGHT", "0")
        s.send("b", "BRPOPLPUSH", "k2", "k3", "0")
        s.send("c", "BLPOP", "k3", "0")
        s.call("p", "RPUSH", "k1", "v", "w")
        s.read("a")
        s.read("b")
        s.read("c")
        s.call("p", "LRANGE", "k1", "0", "-1")
        s.call("p", "EXISTS", "k2", "k3")

    log = both(body)
    assert ("c", b"*2\r\n$2\r\nk3\r\n$1\r\nv\r\n") in log


def test_blmove_same_key_and_blmpop(both):
    def body(s: Scenario) -> None:
        s.send("a", "BLMOVE", "k", "k", "RIGHT", "LEFT", "0")
        s.send("b", "BLMPOP", "0", "2", "x", "k", "RIGHT", "COUNT", "10")
        s.call("p", "RPUSH", "k", "1", "2", "3")
        s.read("a")
        s.read("b")
        s.call("p", "EXISTS", "k")

    both(body)


def test_disconnect_while_blocked(both, r):
    def body(s: Scenario) -> None:
        s.send("a", "BLPOP", "k", "0")
        s.send("b", "BLMOVE", "k", "d", "LEFT", "LEFT", "0")
        s.drop("a")
        s.drop("b")
        time.sleep(SETTLE)
        s.call("p", "RPUSH", "k", "x")
        s.call("p", "LRANGE", "k", "0", "-1")
        s.call("p", "EXISTS", "d")
        s.call("p", "PING")

    both(body)
    assert r.ping() is True


def test_blocked_on_key_that_becomes_string_stays_blocked(both):
    def body(s: Scenario) -> None:
        s.send("a", "BLPOP", "k", "0.5")
        s.call("p", "SET", "k", "str")
        assert s.pending("a")
        s.read("a")  # the timeout's nil
        s.call("p", "GET", "k")

    both(body)


def test_blmove_wrong_type_destination_on_wakeup(both):
    def body(s: Scenario) -> None:
        s.call("p", "SET", "d", "str")
        s.send("a", "BLMOVE", "s", "d", "LEFT", "LEFT", "0")
        s.call("p", "RPUSH", "s", "x")
        s.read("a")
        s.call("p", "LRANGE", "s", "0", "-1")

    log = both(body)
    assert log[-2][1].startswith(b"-WRONGTYPE")


def test_pipelined_commands_after_block_run_after_wakeup(both):
    def body(s: Scenario) -> None:
        c = s.conn("a")
        c.send_raw(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nk\r\n$1\r\n0\r\n*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nLLEN\r\n$1\r\nk\r\n")
        time.sleep(SETTLE)
        assert s.pending("a")
        s.call("p", "RPUSH", "k", "1", "2")
        s.read("a")
        s.read("a")
        s.read("a")

    both(body)


def test_resp3_wakeup(both):
    def body(s: Scenario) -> None:
        s.call("a", "HELLO", "3")
        s.log.pop()  # server info differs
        s.send("a", "BLMPOP", "0", "1", "k", "LEFT", "COUNT", "2")
        s.call("p", "RPUSH", "k", "1", "2", "3")
        s.read("a")
        s.call("a", "BLPOP", "nokey", "0.01")

    both(body)


def test_push_inside_multi_wakes_blocked_client(both, rq_server):

    def body(s: Scenario) -> None:
        s.send("a", "BLPOP", "k", "0")
        s.send("b", "BLPOP", "k2", "0")
        s.call("p", "MULTI")
        s.call("p", "RPUSH", "k", "x")
        s.call("p", "RPUSH", "k2", "y")
        s.call("p", "LPOP", "k2")
        s.call("p", "EXEC")
        s.read("a")
        assert s.pending("b")
        s.call("p", "RPUSH", "k2", "z")
        s.read("b")

    both(body)


def test_blocking_in_multi_does_not_block(both, rq_server):

    def body(s: Scenario) -> None:
        s.call("p", "MULTI")
        s.call("p", "BLPOP", "k", "0")
        s.call("p", "BLMOVE", "k", "d", "LEFT", "LEFT", "0")
        s.call("p", "BLMPOP", "0", "1", "k", "LEFT")
        s.call("p", "EXEC")

    both(body)


# ---- redis-py ------------------------------------------------------------------------


def test_redis_py_blpop_with_pusher_thread(r, rq_server):
    other = redis.Redis(port=rq_server.port)

    def push() -> None:
        time.sleep(0.2)
        other.rpush("q", "job1")

    t = threading.Thread(target=push)
    t.start()
    start = time.monotonic()
    assert r.blpop(["q"], timeout=5) == (b"q", b"job1")
    assert 0.1 < time.monotonic() - start < 3
    t.join()
    assert r.brpoplpush("q", "active", timeout=0.05) is None
    other.rpush("q", "job2")
    assert r.brpoplpush("q", "active", timeout=1) == b"job2"
    assert r.blmove("active", "done", 1, "LEFT", "RIGHT") == b"job2"
    assert r.lrange("done", 0, -1) == [b"job2"]
    other.close()

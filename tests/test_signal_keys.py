"""Durable mode: BullMQ's marker is a wake-up signal; its pops wait for the commits before them, not their own.

A write's reply waits for its batch's commit. With the writer stopped (SIGSTOP), no commit happens, so what
answers meanwhile was not held. The pop of a queue's marker on an idle server answers at once; after another
write it waits for that write's batch (what it read may come from it), and a worker blocked on the marker and
woken by an add answers with the add, as Redis writes both replies in one pass. The same pop of any other
sorted set waits for its own commit. A kill -9 before the commit brings the popped marker back, nothing else.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator

import pytest
import redis

from .servers import start_respqueue

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="finds the writer child in /proc")

Q = b"bull:sig:"
ADD = (
    "redis.call('LPUSH', KEYS[1], ARGV[1]); redis.call('HSET', KEYS[3], 'name', 'j'); "
    "redis.call('ZADD', KEYS[2], 0, '0'); return 1"
)


def _writer(pid: int) -> int:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        kids = [int(x) for x in f.read().split()]
    assert len(kids) == 1, kids
    return kids[0]


class Raw:
    """A RESP connection that sends a request and tells whether its reply came within a time."""

    def __init__(self, port: int) -> None:
        self.s = socket.create_connection(("127.0.0.1", port))

    def send(self, *args: bytes | str) -> None:
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else a.encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.s.sendall(b"".join(parts))

    def reply(self, wait: float) -> bytes:
        """What arrived within ``wait`` seconds (b"" when nothing did)."""
        self.s.settimeout(wait)
        got = b""
        try:
            while True:
                chunk = self.s.recv(65536)
                if not chunk:
                    break
                got += chunk
                self.s.settimeout(0.05)
        except TimeoutError:
            pass
        return got

    def close(self) -> None:
        self.s.close()


@pytest.fixture
def server() -> Iterator[tuple[object, redis.Redis, int]]:
    p = start_respqueue("--durability", "durable")
    r = redis.Redis(port=p.port)
    try:
        yield p, r, _writer(p.proc.pid)
    finally:
        r.close()
        p.stop()


def test_marker_pops_answer_before_the_commit(server: tuple[object, redis.Redis, int]) -> None:
    p, r, writer = server
    port = p.port  # type: ignore[attr-defined]
    q2 = b"bull:sig2:"
    for q in (Q, q2):
        r.hset(q + b"meta", "opts.maxLenEvents", "10000")
    r.zadd(Q + b"marker", {"a": 1, "b": 2})
    r.zadd(b"plain:marker", {"0": 0})  # no BullMQ queue at plain: it is an ordinary sorted set
    r.zadd(b"bull:sig:other", {"0": 0})  # a queue's sorted set that is not its marker
    conns = [Raw(port) for _ in range(5)]
    a, b, c, d, e = conns
    os.kill(writer, signal.SIGSTOP)
    try:
        a.send("ZPOPMIN", Q + b"marker")
        assert a.reply(2.0) == b"*2\r\n$1\r\na\r\n$1\r\n1\r\n"  # nothing before it to wait for
        a.send("ZPOPMIN", Q + b"marker")
        assert a.reply(0.5) == b""  # waits for the batch handed to the writer before it (the first pop's)
        b.send("ZPOPMIN", "plain:marker")
        assert b.reply(0.3) == b""  # held for its own commit
        c.send("ZPOPMIN", "bull:sig:other")
        assert c.reply(0.2) == b""
        # a worker blocked on an empty marker, woken by a script that adds a job: it answers with the add
        d.send("BZPOPMIN", q2 + b"marker", "5")
        assert d.reply(0.3) == b""  # blocked
        e.send("EVAL", ADD, "3", q2 + b"wait", q2 + b"marker", q2 + b"1", "1")
        assert d.reply(0.5) == b"" and e.reply(0.2) == b""
        assert r.zcard(Q + b"marker") == 0 and r.zcard(q2 + b"marker") == 0  # (reads answer at once)
    finally:
        os.kill(writer, signal.SIGCONT)
    assert b.reply(5.0) == b"*2\r\n$1\r\n0\r\n$1\r\n0\r\n"
    assert a.reply(5.0) == b"*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    assert c.reply(5.0) == b"*2\r\n$1\r\n0\r\n$1\r\n0\r\n"
    assert e.reply(5.0) == b":1\r\n"
    got = d.reply(5.0)
    assert got.startswith(b"*3\r\n") and q2 + b"marker" in got, got
    for x in conns:
        x.close()


def test_a_crash_brings_back_only_the_popped_marker(server: tuple[object, redis.Redis, int]) -> None:
    p, r, writer = server
    port = p.port  # type: ignore[attr-defined]
    r.hset(Q + b"meta", "opts.maxLenEvents", "10000")
    r.zadd(Q + b"marker", {"0": 0})
    r.rpush(Q + b"wait", "1")
    a, b = Raw(port), Raw(port)
    os.kill(writer, signal.SIGSTOP)
    a.send("ZPOPMIN", Q + b"marker")
    assert a.reply(2.0) == b"*2\r\n$1\r\n0\r\n$1\r\n0\r\n"
    b.send("LPOP", Q + b"wait")
    assert b.reply(0.3) == b""  # not acknowledged: the commit cannot happen
    a.close()
    b.close()
    r.close()
    p.stop(signal.SIGKILL)  # type: ignore[attr-defined]
    deadline = time.time() + 5
    while os.path.exists(f"/proc/{writer}") and time.time() < deadline:  # it dies with its server
        time.sleep(0.02)
    q = start_respqueue("--durability", "durable", workdir=p.workdir)  # type: ignore[attr-defined]
    r2 = redis.Redis(port=q.port)
    try:
        assert r2.zrange(Q + b"marker", 0, -1, withscores=True) == [(b"0", 0.0)]  # one more wake-up
        assert r2.lrange(Q + b"wait", 0, -1) == [b"1"]  # the unacknowledged pop did not happen
    finally:
        r2.close()
        q.stop()

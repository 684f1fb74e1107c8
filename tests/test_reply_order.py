"""Durable mode: a blocked client served by a write sees data of the journal's open batch, so its reply
waits for that batch's commit, like the writer's; then they go out in Redis's order.

Redis writes the served client's reply first (it links clients with pending output at the head of its
list, so the last one served is written first), and Node clients see the served reader's reply before the
write's own. respqueue releases the held replies of one batch in the same order: checked with real Node
clients (interop/bullmq/reply_order.js: ioredis XREAD BLOCK / XADD, and BullMQ's QueueEvents 'added'
against `await queue.add()`), against redis-server in the same test. That the served reply waits for the
commit is checked by holding the store locked (the writer's commit waits on SQLite's lock).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import sqlite3
import subprocess
import time

import pytest

from .servers import ROOT, RawConn, start_respqueue

INTEROP = os.path.join(ROOT, "interop")
HAVE_NODE = shutil.which("node") is not None and os.path.isdir(os.path.join(INTEROP, "node_modules", "bullmq"))

ROUNDS = 25


@pytest.fixture(scope="module")
def durable():
    s = start_respqueue("--durability", "durable")
    yield s
    s.stop()


def _wait_blocked(c: RawConn, n: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        info = c.call_raw("INFO", "clients").decode()
        if f"blocked_clients:{n}\r\n" in info:
            return
        time.sleep(0.002)
    raise AssertionError(f"no {n} blocked clients: {info}")


def _readable(sock, timeout: float) -> bool:
    return bool(select.select([sock], [], [], timeout)[0])


@contextlib.contextmanager
def _conns(srv):
    """A control connection, a reader and a writer on ``srv``, closed afterwards."""
    conns = [RawConn(srv.port) for _ in range(3)]
    try:
        yield conns
    finally:
        for c in conns:
            c.close()


@contextlib.contextmanager
def _store_locked(srv):
    """The store held locked by another SQLite connection: the server's commits wait on it (and fail
    once the writer's busy timeout, 0.5 s, has passed)."""
    other = sqlite3.connect(os.path.join(srv.workdir, "data", "respqueue.db"), isolation_level=None, timeout=5)
    other.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_served_reader_reply_waits_for_the_commit(durable):
    """XREAD BLOCK served by an XADD: its reply (a read of data not committed yet) used to go out at once,
    before the commit. With the store locked by another connection the commit waits (the writer's busy
    timeout is 0.5 s), and so must both replies; once the lock is gone both arrive."""
    with _conns(durable) as (ctl, reader, writer):
        for i in range(5):
            key = f"order:stream:{i}"
            reader.send("XREAD", "BLOCK", "0", "STREAMS", key, "$")
            _wait_blocked(ctl, 1)
            with _store_locked(durable):
                writer.send("XADD", key, "1-1", "f", "v")
                assert not _readable(reader.sock, 0.2), f"round {i}: the served reader was answered before the commit"
                assert not _readable(writer.sock, 0), f"round {i}: the writer was answered before the commit"
            assert _readable(reader.sock, 10), "the blocked XREAD was not served"
            assert _readable(writer.sock, 10), "the XADD was not answered"
            assert writer.read_raw() == b"$3\r\n1-1\r\n"
            assert reader.read_raw().startswith(b"*1\r\n*2\r\n$%d\r\n%s\r\n" % (len(key), key.encode()))


def _node(mode: str, port: int, rounds: int = 20) -> dict:
    p = subprocess.run(
        ["node", os.path.join("bullmq", "reply_order.js"), str(port), mode, str(rounds)],
        cwd=INTEROP,
        capture_output=True,
        text=True,
        timeout=240,
    )
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        raise AssertionError(
            f"reply_order.js {mode} printed no JSON (exit {p.returncode}): {p.stdout} {p.stderr}"
        ) from None
    assert "error" not in out, out["error"]
    return out


@pytest.mark.skipif(not HAVE_NODE, reason="run `npm ci` in interop/ (and install node) for the Node checks")
@pytest.mark.parametrize("mode", ["xread", "events"])
def test_node_sees_replies_in_redis_order(mode, durable, redis_ref):
    """The served reader's reply first, as with redis-server (the writer's came first after the change that
    held served replies for the commit, and the reader's first but before the commit on the code before)."""
    ref = _node(mode, redis_ref.port)
    out = _node(mode, durable.port)
    # Node reads two sockets made readable in the same instant in an order that is not quite fixed: redis-server
    # itself was seen at 19 of 20 rounds on a slow machine. The wrong order (the writer's reply first) gave
    # 0 of 20, so "nearly every round" still tells them apart.
    assert ref["rounds"] == out["rounds"] == 20, (ref, out)
    assert ref["readerFirst"] >= 17, ref
    assert out["readerFirst"] >= 17, (out, ref)


def test_served_reader_gets_the_error_when_the_commit_fails(durable):
    """The XADD that served a blocked XREAD fails to commit (the store stays locked past the writer's busy
    timeout): the XADD is answered MISCONF and rolled back, so the reader must not get the entry it would
    have read: it gets the same error, and the stream holds nothing afterwards."""
    key = "order:failed:stream"
    with _conns(durable) as (ctl, reader, writer):
        reader.send("XREAD", "BLOCK", "0", "STREAMS", key, "$")
        _wait_blocked(ctl, 1)
        with _store_locked(durable):
            writer.send("XADD", key, "1-1", "f", "v")
            assert _readable(writer.sock, 10), "the XADD was not answered"
            assert writer.read_raw().startswith(b"-MISCONF "), "the failed commit's write was acknowledged"
            assert _readable(reader.sock, 10), "the served XREAD was not answered"
            got = reader.read_raw()
            assert got.startswith(b"-MISCONF "), f"the served reader got data that was rolled back: {got!r}"
        deadline = time.monotonic() + 15
        while True:  # the store is writable again once the journal's retry commits
            if ctl.call_raw("SET", "order:probe", "1") == b"+OK\r\n":
                break
            assert time.monotonic() < deadline, "the store did not recover"
            time.sleep(0.2)
        assert ctl.call_raw("XLEN", key) == b":0\r\n"

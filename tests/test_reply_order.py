"""Durable mode: the reply of a write goes out no later than the replies of the blocked clients it served.

A blocked client served by a write reads (or pops) data of the journal's open batch: its reply waits
for that batch's commit, like the writer's, and is written after the writer's. Checked from the
receiving side: when the served client's socket turns readable, the writer's socket already is
(loopback delivers a write into the peer's receive queue within the send call); and with real Node
clients (interop/bullmq/reply_order.js): ioredis XREAD BLOCK / XADD, and BullMQ's QueueEvents 'added'
against `await queue.add()`.

Redis itself writes the served client's reply first (it queues clients with pending output at the head
of its list, so the last one served is written first): there the reader always wins, and the Node
checks run against redis-server only to see that the script works, not for the order.
"""

from __future__ import annotations

import json
import os
import select
import shutil
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


def test_served_reader_reply_after_writer_reply(durable):
    """XREAD BLOCK served by an XADD: its reply (a read of uncommitted data) used to go out at once,
    before the XADD's reply, which waits for the commit."""
    ctl = RawConn(durable.port)
    reader, writer = RawConn(durable.port), RawConn(durable.port)
    try:
        for i in range(ROUNDS):
            key = f"order:stream:{i}"
            reader.send("XREAD", "BLOCK", "0", "STREAMS", key, "$")
            _wait_blocked(ctl, 1)
            writer.send("XADD", key, "1-1", "f", "v")
            assert _readable(reader.sock, 10), "the blocked XREAD was not served"
            assert _readable(writer.sock, 0), f"round {i}: the reader's reply came before the writer's"
            assert writer.read_raw() == b"$3\r\n1-1\r\n"
            assert reader.read_raw().startswith(b"*1\r\n*2\r\n$%d\r\n%s\r\n" % (len(key), key.encode()))
    finally:
        for c in (ctl, reader, writer):
            c.close()


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
def test_node_sees_writer_reply_first(mode, durable, redis_ref):
    """Old code: the reader came first in every round (its reply was not held for the commit)."""
    assert _node(mode, redis_ref.port, 3)["rounds"] == 3
    out = _node(mode, durable.port)
    assert out == {"rounds": 20, "readerFirst": 0}

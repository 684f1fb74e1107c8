"""A replica applies the master's job rows (compat/engine/layout.py) in place: each job row's change of
(state, score) moves the job between the replica's state containers, O(rows in the frame), without
reloading a container. Checked against the master key by key after a real BullMQ workload, and by the
identity of a 20,000-job wait list on the replica (DEBUG OBJECT's "Value at" address)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator

import pytest
import redis

from .servers import ROOT, ServerProcess, env_var, redis_server_path, start_respqueue
from .test_replication import cli, dump_all, in_sync, start_replica, until

pytestmark = pytest.mark.skipif(redis_server_path() is None, reason="redis-server is not installed")
INTEROP = os.path.join(ROOT, "interop")


@pytest.fixture(scope="module", autouse=True)
def _job_rows_on() -> Iterator[None]:
    """Every server this module starts stores BullMQ jobs as job rows, whatever the default."""
    with env_var("RESPQUEUE_JOB_ROWS", "on"):
        yield


@pytest.fixture
def pair() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    m = start_respqueue()
    r = start_replica(m)
    yield m, r
    r.stop()
    m.stop()


def address(c: redis.Redis, key: str) -> str:
    """The in-memory object behind ``key`` (DEBUG OBJECT's "Value at")."""
    out = c.execute_command("DEBUG", "OBJECT", key)
    out = out.decode() if isinstance(out, bytes) else str(out)
    m = re.search(r"Value at:(0x[0-9a-f]+)", out)
    assert m, out
    return m.group(1)


def rows_in_step(r: ServerProcess) -> None:
    """The replica never found its memory out of step with its store (it would reload everything)."""
    assert "out of step" not in r.output()


def same_keyspace(mc: redis.Redis, rc: redis.Redis) -> None:
    until(lambda: in_sync(mc, [rc]), what="the replica")
    want = dump_all(mc)
    got = dump_all(rc)
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert got[k] == v, k


@pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(os.path.join(INTEROP, "node_modules", "bullmq")),
    reason="node and interop/node_modules (bullmq) are needed",
)
def test_bullmq_workload_replica_equals_master(pair: tuple[ServerProcess, ServerProcess]) -> None:
    """BullMQ add / process / retry with backoff / delay / priority / removeOnComplete on the master: the
    replica, applying job rows in place, holds every key the master holds, with the same content."""
    m, r = pair
    mc, rc = cli(m.port), cli(r.port)
    p = subprocess.run(
        ["node", os.path.join("bullmq", "replica_workload.js"), str(m.port), "300"],
        cwd=INTEROP,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert mc.type("bull:rw:completed") == b"zset" and mc.zcard("bull:rw:failed") > 0
    assert mc.llen("bull:idle:wait") == 50 and mc.zcard("bull:idle:delayed") == 1
    same_keyspace(mc, rc)
    rows_in_step(r)
    # the replica's containers are job rows, and its layout's index agrees: a new replica, loaded
    # from a full sync of the same store, holds the same keyspace
    r2 = start_replica(m)
    try:
        same_keyspace(mc, cli(r2.port))
    finally:
        r2.stop()


def test_one_job_moves_without_reloading_a_big_wait_list(pair: tuple[ServerProcess, ServerProcess]) -> None:
    """A frame touching one job of a 20,000-job wait list changes that list in place: the replica's list
    object stays the same one (a reload would build a new one)."""
    m, r = pair
    mc, rc = cli(m.port), cli(r.port)
    n = 20_000
    for lo in range(0, n, 2000):
        p = mc.pipeline(transaction=False)
        for i in range(lo + 1, lo + 2001):
            p.hset(f"bull:big:{i}", mapping={"name": "j", "data": f'{{"i":{i}}}', "timestamp": str(i)})
            p.lpush("bull:big:wait", str(i))
        p.execute()
    until(lambda: in_sync(mc, [rc]), what="the replica")
    assert rc.llen("bull:big:wait") == n
    before = address(rc, "bull:big:wait")
    # moveToActive, then moveToFinished, a retry to the head and a delayed job: each its own frame
    jid = mc.lmove("bull:big:wait", "bull:big:active", "RIGHT", "LEFT").decode()
    mc.set(f"bull:big:{jid}:lock", "tok", px=600_000)
    mc.hset(f"bull:big:{jid}", "processedOn", "1")
    until(lambda: in_sync(mc, [rc]), what="the replica")
    assert rc.lindex("bull:big:active", 0) == jid.encode() and rc.get(f"bull:big:{jid}:lock") == b"tok"
    assert address(rc, "bull:big:wait") == before
    p = mc.pipeline(transaction=True)
    p.lrem("bull:big:active", -1, jid)
    p.zadd("bull:big:completed", {jid: 5000})
    p.hset(f"bull:big:{jid}", "finishedOn", "5000")
    p.delete(f"bull:big:{jid}:lock")
    p.execute()
    mid = mc.lindex("bull:big:wait", n // 2).decode()
    p = mc.pipeline(transaction=True)  # a job taken from the middle (LREM) and delayed, another retried
    p.lrem("bull:big:wait", 1, mid)
    p.zadd("bull:big:delayed", {mid: 123456})
    p.execute()
    same_keyspace(mc, rc)
    assert address(rc, "bull:big:wait") == before
    p = mc.pipeline(transaction=True)
    p.rpoplpush("bull:big:wait", "bull:big:active")
    p.rpush("bull:big:wait", "7")  # "7" is a member already: a job in the list twice, generic rows
    p.execute()
    same_keyspace(mc, rc)
    assert rc.llen("bull:big:wait") == n - 2
    rows_in_step(r)
    # a frame that only changes a job's hash, and one that moves a job back (LMOVE active -> wait)
    before = address(rc, "bull:big:delayed")
    mc.hset(f"bull:big:{mid}", "delay", "10")
    mc.zadd("bull:big:delayed", {mid: 99})
    same_keyspace(mc, rc)
    assert address(rc, "bull:big:delayed") == before
    rows_in_step(r)

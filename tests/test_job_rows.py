"""Job rows (compat/engine/layout.py): a BullMQ job is one row; its state containers come back from those rows.

Every test checks the keyspace after a kill -9 restart against the keyspace before it (and, where the
commands run on both, against redis-server), whatever the containers hold: members without a job hash,
duplicates, a job in two containers, renames, expiry. Those fall back to generic rows.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from .servers import start_redis
from .test_persistence import Node, snapshot


@pytest.fixture
def node() -> Iterator[Node]:
    n = Node()
    yield n
    n.stop()


def rows(node: Node, sql: str, *args: Any) -> list[Any]:
    conn = sqlite3.connect(os.path.join(node.datadir, "respqueue.db"))
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def wait_gone(r: redis.Redis, key: str) -> None:
    deadline = time.monotonic() + 30
    while r.exists(key):
        assert time.monotonic() < deadline
        time.sleep(0.1)


def job(r: redis.Redis, q: str, i: int) -> None:
    r.hset(f"bull:{q}:{i}", mapping={"name": "j", "data": f'{{"i":{i}}}', "timestamp": str(1000 + i)})


def bullmq_like(r: redis.Redis, q: str = "q", n: int = 40) -> None:
    """What BullMQ's scripts do to a queue's keys: add, move to active, finish, retry, delay, promote."""
    for i in range(1, n + 1):
        job(r, q, i)
        r.lpush(f"bull:{q}:wait", str(i))
    for _ in range(1, 16):
        jid = r.lmove(f"bull:{q}:wait", f"bull:{q}:active", "RIGHT", "LEFT")
        r.hset(f"bull:{q}:{jid.decode()}", "processedOn", "5")
    for i in range(1, 6):
        r.lrem(f"bull:{q}:active", -1, str(i))
        r.zadd(f"bull:{q}:completed", {str(i): 2000 + i})
        r.hset(f"bull:{q}:{i}", "finishedOn", str(2000 + i))
    for i in (6, 7):
        r.lrem(f"bull:{q}:active", -1, str(i))
        r.zadd(f"bull:{q}:failed", {str(i): 3000 + i})
    r.lrem(f"bull:{q}:active", -1, "8")
    r.rpush(f"bull:{q}:wait", "8")  # retried: back at the head of the queue (RPUSH is BullMQ's lifo=false)
    r.lrem(f"bull:{q}:active", -1, "9")
    r.zadd(f"bull:{q}:delayed", {"9": 9e15})
    r.zrem(f"bull:{q}:delayed", "9")
    r.lpush(f"bull:{q}:wait", "9")  # promoted
    r.lrem(f"bull:{q}:active", -1, "10")
    r.zadd(f"bull:{q}:prioritized", {"10": 7})
    r.zadd(f"bull:{q}:completed", {"1": 2500})  # a score change
    r.zrem(f"bull:{q}:completed", "2")
    r.delete(f"bull:{q}:2")  # removeOnComplete


def check_restart(node: Node, sig: int = signal.SIGKILL) -> dict[Any, Any]:
    before = snapshot(node.r)
    node.restart(sig)
    after = snapshot(node.r)
    assert after == before
    # and once more, after the first batch of the new process has rewritten what it had to
    node.r.set("poke", "1")
    node.restart(sig)
    assert snapshot(node.r) == {**before, (0, b"poke"): (b"string", b"1", False)}
    node.r.delete("poke")
    return after


def test_bullmq_moves_are_job_rows(node: Node) -> None:
    r = node.r
    bullmq_like(r)
    r.save()
    # the state containers have no element rows: their members are the job rows' state and score
    assert rows(node, "SELECT count(*) FROM list_items") == [(0,)]
    assert rows(node, "SELECT count(*) FROM zset_members") == [(0,)]
    types = {k: t for k, t in rows(node, "SELECT key, type FROM keys WHERE type <> 'hash'") if k.startswith(b"bull:q:")}
    assert types == {
        b"bull:q:wait": "joblist",
        b"bull:q:active": "joblist",
        b"bull:q:completed": "jobzset",
        b"bull:q:failed": "jobzset",
        b"bull:q:prioritized": "jobzset",
    }
    st = dict(((k, (s, sc)) for k, s, sc in rows(node, "SELECT key, state, score FROM keys WHERE state IS NOT NULL")))
    assert st[b"bull:q:1"] == (b"bull:q:completed", 2500.0)
    assert st[b"bull:q:10"] == (b"bull:q:prioritized", 7.0)
    assert st[b"bull:q:11"][0] == b"bull:q:active"
    assert st[b"bull:q:40"][0] == b"bull:q:wait"
    assert b"bull:q:2" not in st and b"bull:q:9" in st
    assert len(st) == 39  # 40 jobs, one removed (from completed, and its hash deleted)
    check_restart(node)
    # the same commands on redis-server give the same keyspace
    ref = start_redis()
    try:
        rr = redis.Redis(port=ref.port)
        bullmq_like(rr)
        assert snapshot(rr) == snapshot(node.r)
        rr.close()
    finally:
        ref.stop()


def test_job_rows_follow_every_list_command(node: Node) -> None:
    r = node.r
    for i in range(1, 30):
        job(r, "q", i)
    r.rpush("bull:q:wait", *[str(i) for i in range(1, 11)])
    r.lpush("bull:q:wait", "11", "12")
    r.linsert("bull:q:wait", "BEFORE", "5", "13")
    r.linsert("bull:q:wait", "AFTER", "5", "14")
    r.lset("bull:q:wait", 0, "15")  # 12 is replaced: it leaves the container
    r.lpop("bull:q:wait")
    r.rpop("bull:q:wait", 2)
    r.ltrim("bull:q:wait", 1, -2)
    r.rpush("bull:q:paused", "20", "21")
    check_restart(node)
    r = node.r
    r.lrem("bull:q:wait", 0, "4")
    r.rpoplpush("bull:q:wait", "bull:q:paused")
    r.rename("bull:q:paused", "bull:q:wait-tmp")  # no longer a state container's name: generic rows
    r.rename("bull:q:wait", "bull:q:paused")  # BullMQ's pause
    r.save()
    assert rows(node, "SELECT type FROM keys WHERE key = CAST('bull:q:paused' AS BLOB)") == [("joblist",)]
    assert rows(node, "SELECT count(*) FROM list_items WHERE key = CAST('bull:q:wait-tmp' AS BLOB)") == [(0,)]
    check_restart(node)


@pytest.mark.parametrize(
    "case",
    ["orphan", "duplicate", "two-containers", "hash-deleted", "hash-replaced", "hash-expires", "renamed-job", "flush"],
)
def test_broken_invariants_fall_back_to_generic_rows(node: Node, case: str) -> None:
    """Redis allows what BullMQ never does; the store keeps it exactly anyway."""
    r = node.r
    for i in range(1, 6):
        job(r, "q", i)
    r.rpush("bull:q:wait", "1", "2", "3")
    r.zadd("bull:q:completed", {"4": 1, "5": 2})
    r.save()
    if case == "orphan":
        r.rpush("bull:q:wait", "nohash")
        r.zadd("bull:q:completed", {"nohash": 3})
    elif case == "duplicate":
        r.rpush("bull:q:wait", "2")
    elif case == "two-containers":
        r.zadd("bull:q:completed", {"1": 5})
    elif case == "hash-deleted":
        r.delete("bull:q:2", "bull:q:4")
    elif case == "hash-replaced":
        r.delete("bull:q:3")
        r.set("bull:q:3", "a string")
    elif case == "hash-expires":
        r.pexpire("bull:q:5", 6000)
        r.pexpire("bull:q:completed", 100_000)
        r.save()
        node.restart(signal.SIGKILL)
        r = node.r
        assert r.pttl("bull:q:5") > 0  # (unless the machine took 6 s to restart)
        assert r.zrange("bull:q:completed", 0, -1) == [b"4", b"5"]
        wait_gone(r, "bull:q:5")
    elif case == "renamed-job":
        r.rename("bull:q:1", "bull:q:99")
    elif case == "flush":
        r.flushdb()
        for i in range(1, 3):
            job(r, "q", i)
        r.rpush("bull:q:wait", "2", "1")
    r.save()
    check_restart(node)
    r = node.r
    # and it can be mended: a container written whole again becomes job rows again
    r.delete("bull:q:wait", "bull:q:completed", *[f"bull:q:{i}" for i in range(1, 6)])
    for i in range(1, 6):
        job(r, "q", i)
    r.rpush("bull:q:wait", "1", "2", "3")
    r.zadd("bull:q:completed", {"4": 1, "5": 2})
    r.save()
    assert rows(node, "SELECT count(*) FROM list_items") == [(0,)]
    assert rows(node, "SELECT count(*) FROM zset_members") == [(0,)]
    check_restart(node)


def test_swapdb_and_big_containers(node: Node) -> None:
    r = node.r
    pipe = r.pipeline(transaction=False)
    for i in range(3000):
        pipe.hset(f"bull:big:{i}", mapping={"data": "x" * 20, "n": str(i)})
        pipe.rpush("bull:big:wait", str(i))
        if i % 3 == 0:
            pipe.zadd("bull:big:delayed", {f"d{i}": i * 1.5})
            pipe.hset(f"bull:big:d{i}", "x", "1")
    pipe.execute()
    r.execute_command("SWAPDB", "0", "3")
    r.execute_command("SELECT", "3")
    r.lpop("bull:big:wait", 10)
    r.execute_command("SELECT", "0")
    check_restart(node)
    assert rows(node, "SELECT count(*) FROM keys WHERE db = 3 AND state IS NOT NULL") == [(4000 - 10,)]


def test_version_4_store_is_migrated(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store written by the generic layout (schema version 4) loads as it was and becomes job rows."""
    monkeypatch.setenv("RESPQUEUE_JOB_ROWS", "off")
    n = Node()
    try:
        bullmq_like(n.r)
        pipe = n.r.pipeline(transaction=False)
        for i in range(300):  # a big wait list: a row per item in the version 4 store
            pipe.hset(f"bull:w:{i}", "data", str(i))
            pipe.rpush("bull:w:wait", str(i))
        pipe.execute()
        n.r.zadd("bull:w:completed", {"nohash": 1})  # stays generic after the migration
        before = snapshot(n.r)
        n.stop()
        # make it exactly a version 4 file
        conn = sqlite3.connect(os.path.join(n.datadir, "respqueue.db"))
        assert conn.execute("SELECT count(*) FROM keys WHERE state IS NOT NULL").fetchone() == (0,)
        conn.execute("ALTER TABLE keys DROP COLUMN state")
        conn.execute("ALTER TABLE keys DROP COLUMN score")
        conn.execute("ALTER TABLE keys DROP COLUMN lock")
        conn.execute("ALTER TABLE keys DROP COLUMN lock_ms")
        assert [c[1] for c in conn.execute("PRAGMA table_info(keys)")] == [
            "db",
            "key",
            "type",
            "expire_ms",
            "version",
            "value",
        ]
        conn.execute("UPDATE meta SET value = '4' WHERE name = 'schema_version'")
        conn.commit()
        assert conn.execute("SELECT count(*) FROM list_items").fetchone()[0] >= 300
        conn.close()
        monkeypatch.setenv("RESPQUEUE_JOB_ROWS", "on")
        n.start()
        assert snapshot(n.r) == before
        n.r.save()
        assert rows(n, "SELECT value FROM meta WHERE name = 'schema_version'") == [("5",)]
        assert rows(n, "SELECT count(*) FROM list_items") == [(0,)]
        assert rows(n, "SELECT key FROM zset_members") == [(b"bull:w:completed",)]
        assert rows(n, "SELECT count(*) FROM keys WHERE state = CAST('bull:w:wait' AS BLOB)") == [(300,)]
        n.restart(signal.SIGKILL)
        assert snapshot(n.r) == before
    finally:
        n.stop()


def test_locks_live_in_their_jobs_row(node: Node) -> None:
    """``<job>:lock`` (SET PX when a job goes active, DEL when it finishes) is kept in the job's row while
    the job is in a state container, and has a row of its own otherwise."""
    r = node.r
    for i in range(1, 6):
        job(r, "q", i)
    r.rpush("bull:q:active", "1", "2", "3")
    r.set("bull:q:1:lock", "tok1", px=60_000)
    r.set("bull:q:2:lock", "tok2")
    r.set("bull:q:4:lock", "tok4", px=60_000)  # job 4 is in no container: a row of its own
    r.save()
    assert (
        rows(node, "SELECT key FROM keys WHERE key IN (CAST('bull:q:1:lock' AS BLOB), CAST('bull:q:2:lock' AS BLOB))")
        == []
    )
    assert rows(node, "SELECT lock FROM keys WHERE key = CAST('bull:q:1' AS BLOB)") == [(b"tok1",)]
    assert rows(node, "SELECT value FROM keys WHERE key = CAST('bull:q:4:lock' AS BLOB)") == [(b"tok4",)]
    check_restart(node)
    r = node.r
    assert r.get("bull:q:1:lock") == b"tok1" and 0 < r.pttl("bull:q:1:lock") <= 60_000
    assert r.pttl("bull:q:2:lock") == -1
    r.set("bull:q:1:lock", "tok1b", px=60_000)  # extendLock
    r.lrem("bull:q:active", -1, "2")  # job 2 leaves every container: its lock gets a row of its own
    r.zadd("bull:q:completed", {"3": 1})
    r.lrem("bull:q:active", -1, "3")
    r.delete("bull:q:3:lock")
    r.rpush("bull:q:wait", "4")  # job 4 is owned now; its lock keeps its own row until it changes
    r.save()
    assert rows(node, "SELECT value FROM keys WHERE key = CAST('bull:q:2:lock' AS BLOB)") == [(b"tok2",)]
    check_restart(node)
    r = node.r
    r.set("bull:q:4:lock", "tok4b", px=60_000)
    r.set("bull:q:5:lock", "x", px=200)  # expires while folded? job 5 is in no container: its own row
    r.save()
    assert rows(node, "SELECT key FROM keys WHERE key = CAST('bull:q:4:lock' AS BLOB)") == []
    r.set("bull:q:1:lock", "short", px=6000)
    r.save()
    node.restart(signal.SIGKILL)
    r = node.r
    assert r.get("bull:q:1:lock") == b"short"
    wait_gone(r, "bull:q:1:lock")
    check_restart(node)
    assert node.r.get("bull:q:1:lock") is None and node.r.get("bull:q:4:lock") == b"tok4b"


def test_job_rows_load_when_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """RESPQUEUE_JOB_ROWS=off on a store that has job rows still loads them (and keeps them up to date)."""
    n = Node()
    try:
        bullmq_like(n.r)
        before = snapshot(n.r)
        n.stop()
        monkeypatch.setenv("RESPQUEUE_JOB_ROWS", "off")
        n.start()
        assert snapshot(n.r) == before
        n.r.lmove("bull:q:wait", "bull:q:active", "RIGHT", "LEFT")
        before = snapshot(n.r)
        n.restart(signal.SIGKILL)
        assert snapshot(n.r) == before
    finally:
        n.stop()

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

from compat.engine.idindex import BITMAP_MIN
from respqueue.persistence.store import SCHEMA_VERSION

from .servers import env_var, start_redis
from .test_persistence import Node, snapshot


@pytest.fixture(scope="module", autouse=True, params=[str(BITMAP_MIN), "0"], ids=["sets", "bitmaps"])
def _job_rows_on(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every server this module starts has job rows (RESPQUEUE_JOB_ROWS=on, the default), unless a test
    sets the variable itself. The module runs twice: with the job-row lists' member index as the default
    has it (a set up to 32,768 members, a bitmap of job ids above: compat/engine/idindex.py), and with every
    list's index a bitmap (RESPQUEUE_IDINDEX_MIN=0)."""
    with env_var("RESPQUEUE_JOB_ROWS", "on"), env_var("RESPQUEUE_IDINDEX_MIN", request.param):
        yield


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


@pytest.mark.parametrize("case", ["hash-deleted", "renamed"])
def test_container_leaves_job_rows_in_the_batch_that_adds_to_it(node: Node, case: str) -> None:
    """One batch (a MULTI) both adds jobs to a job-row list and takes the list off job rows (a member's hash
    deleted, or the list renamed away): the jobs just added, which the layout already found in the list
    during that batch, must not keep a state naming it (what the layout learns of a job's container
    within a batch is forgotten when a container leaves job rows)."""
    r = node.r
    for i in range(1, 8):
        job(r, "q", i)
    r.rpush("bull:q:wait", "1", "2", "3")
    r.zadd("bull:q:completed", {"4": 1})
    r.save()
    p = r.pipeline(transaction=True)
    p.rpush("bull:q:wait", "5", "6")
    p.zadd("bull:q:completed", {"7": 2})
    if case == "hash-deleted":
        p.delete("bull:q:2")
    else:
        p.rename("bull:q:wait", "bull:other:list")
    p.execute()
    r.save()
    st = {k: s for k, s in rows(node, "SELECT key, state FROM keys WHERE state IS NOT NULL")}
    assert st == {b"bull:q:4": b"bull:q:completed", b"bull:q:7": b"bull:q:completed"}
    _rows_match_containers(node, "q")
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
        conn.execute("DROP TABLE string_chunks")  # version 5 (large strings in chunks) added it
        conn.execute("UPDATE meta SET value = '4' WHERE name = 'schema_version'")
        conn.commit()
        assert conn.execute("SELECT count(*) FROM list_items").fetchone()[0] >= 300
        conn.close()
        monkeypatch.setenv("RESPQUEUE_JOB_ROWS", "on")
        n.start()
        assert snapshot(n.r) == before
        n.r.save()
        assert rows(n, "SELECT value FROM meta WHERE name = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        assert rows(n, "SELECT count(*) FROM list_items") == [(0,)]
        assert rows(n, "SELECT key FROM zset_members") == [(b"bull:w:completed",)]
        assert rows(n, "SELECT count(*) FROM keys WHERE state = CAST('bull:w:wait' AS BLOB)") == [(300,)]
        n.restart(signal.SIGKILL)
        assert snapshot(n.r) == before
    finally:
        n.stop()


def test_version_5_store_is_migrated(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store of schema version 5 (large strings in chunks, generic rows for the state containers) loads
    as it was, its chunked strings included, and its containers become job rows (version 6)."""
    monkeypatch.setenv("RESPQUEUE_JOB_ROWS", "off")
    n = Node()
    try:
        bullmq_like(n.r)
        pipe = n.r.pipeline(transaction=False)
        for i in range(200):
            pipe.hset(f"bull:w:{i}", "data", str(i))
            pipe.rpush("bull:w:wait", str(i))
        pipe.execute()
        big = bytes(range(256)) * 1024  # 256 KiB: stored in chunks (version 5)
        n.r.set("big", big)
        n.r.set("bull:w:3:lock", "tok", px=600_000)
        before = snapshot(n.r)
        n.stop()
        conn = sqlite3.connect(os.path.join(n.datadir, "respqueue.db"))
        assert conn.execute("SELECT count(*) FROM string_chunks").fetchone()[0] >= 4
        for col in ("state", "score", "lock", "lock_ms"):
            conn.execute(f"ALTER TABLE keys DROP COLUMN {col}")
        conn.execute("UPDATE meta SET value = '5' WHERE name = 'schema_version'")
        conn.commit()
        conn.close()
        monkeypatch.setenv("RESPQUEUE_JOB_ROWS", "on")
        n.start()
        assert snapshot(n.r) == before
        n.r.save()
        assert rows(n, "SELECT value FROM meta WHERE name = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        assert rows(n, "SELECT count(*) FROM keys WHERE state = CAST('bull:w:wait' AS BLOB)") == [(200,)]
        assert rows(n, "SELECT lock FROM keys WHERE key = CAST('bull:w:3' AS BLOB)") == [(None,)]
        n.r.lmove("bull:w:wait", "bull:w:active", "LEFT", "LEFT")  # job 0 active, then locked
        n.r.set("bull:w:0:lock", "t0", px=600_000)
        n.r.save()
        assert rows(n, "SELECT lock FROM keys WHERE key = CAST('bull:w:0' AS BLOB)") == [(b"t0",)]
        before = snapshot(n.r)
        n.restart(signal.SIGKILL)
        assert snapshot(n.r) == before
        assert n.r.get("big") == big
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


@pytest.mark.parametrize("case", ["folded-lock", "created-string", "created-and-deleted"])
def test_key_that_was_no_job_hash_becomes_a_members_key(node: Node, case: str) -> None:
    """The layout skips the membership search for a dirty key that was no hash when the batch opened (one
    created in the batch, a lock kept in its job's row): such a key can only be a member's key if the member
    joined in the same batch, which the check of new members must then catch. One MULTI makes each such key a
    member's job key: the container falls back to generic rows and the store still holds exactly the data."""
    r = node.r
    for i in range(1, 4):
        job(r, "q", i)
    r.rpush("bull:q:active", "1")
    r.rpush("bull:q:wait", "2", "3")
    r.set("bull:q:1:lock", "tok", px=60_000)
    r.save()
    assert rows(node, "SELECT lock FROM keys WHERE key = CAST('bull:q:1' AS BLOB)") == [(b"tok",)]
    p = r.pipeline(transaction=True)
    if case == "folded-lock":
        p.set("bull:q:1:lock", "tok2", px=60_000)  # (the lock changes: dirty, folded)
        p.rpush("bull:q:wait", "1:lock")  # a member whose job key is that lock (a string)
    elif case == "created-string":
        p.set("bull:q:9", "a string")  # created in the batch, no hash
        p.zadd("bull:q:completed", {"9": 5})
    else:
        job(p, "q", 8)  # type: ignore[arg-type]
        p.rpush("bull:q:wait", "8")
        p.delete("bull:q:8")  # created and gone within the batch, while a member
    p.execute()
    r.save()
    generic = {k for (k,) in rows(node, "SELECT key FROM keys WHERE type IN ('list', 'zset')")}
    assert generic == ({b"bull:q:completed"} if case == "created-string" else {b"bull:q:wait"}), generic
    _rows_match_containers(node, "q")
    check_restart(node)


def test_failed_batch_is_rolled_back_with_its_job_rows(node: Node) -> None:
    """Durable mode, a commit fails (another process holds the store's write lock): the writes told
    MISCONF are undone. A job's hash, its lock and its place in a state container share one row, so
    they are put back together, and the layout goes on writing correct rows once the store recovers."""
    from .test_store_defects import _Locked, _wait_writable

    r = node.r
    bullmq_like(r)
    assert r.lpos("bull:q:active", "12") is not None
    r.set("bull:q:12:lock", "tok12", px=600_000)  # job 12 is active: its lock lives in its row
    r.save()
    before = snapshot(r)
    for whole in (False, True):
        lock = _Locked(node.datadir)
        p = r.pipeline(transaction=False)
        p.lmove("bull:q:wait", "bull:q:active", "RIGHT", "LEFT")
        p.hset("bull:q:20", "processedOn", "9")
        p.lrem("bull:q:active", -1, "12")
        p.zadd("bull:q:completed", {"12": 5000})
        p.delete("bull:q:12:lock")
        p.hset("bull:q:99", "name", "new")
        p.rpush("bull:q:wait", "99")
        p.zadd("bull:q:delayed", {"31": 77})
        if whole:
            p.flushdb()
        res = p.execute(raise_on_error=False)
        assert all(isinstance(x, redis.ResponseError) and str(x).startswith("MISCONF") for x in res), res
        assert snapshot(r) == before
        lock.release()
        _wait_writable(r)
        assert snapshot(r) == before
    # the same moves, committed this time: the rows written after the rollback are right
    r.lrem("bull:q:active", -1, "12")
    r.zadd("bull:q:completed", {"12": 5000})
    r.delete("bull:q:12:lock")
    r.hset("bull:q:99", "name", "new")
    r.rpush("bull:q:wait", "99")
    r.set("bull:q:99:lock", "x")
    r.lmove("bull:q:wait", "bull:q:active", "RIGHT", "LEFT")
    r.save()
    assert rows(node, "SELECT state FROM keys WHERE key = CAST('bull:q:12' AS BLOB)") == [(b"bull:q:completed",)]
    check_restart(node)


def test_replica_follows_job_rows_and_takes_over() -> None:
    """A replica applies the master's job rows (a job's hash, its lock and its place in a state container
    in one row) and reloads the containers they touch; promoted, it writes job rows of its own that a
    kill -9 restart reads back."""
    from .servers import start_respqueue
    from .test_replication import cli, dump_all, in_sync, start_replica, until

    m = start_respqueue()
    r = start_replica(m)
    try:
        mc, rc = cli(m.port), cli(r.port)
        bullmq_like(mc)
        for i in range(41, 300):  # a big wait list (a row per item if it were generic)
            p = mc.pipeline(transaction=False)
            p.hset(f"bull:q:{i}", mapping={"name": "j", "data": str(i)})
            p.lpush("bull:q:wait", str(i))
            p.execute()
        for _ in range(30):  # moveToActive, extendLock, moveToCompleted, each its own batch
            jid = mc.lmove("bull:q:wait", "bull:q:active", "RIGHT", "LEFT").decode()
            mc.set(f"bull:q:{jid}:lock", "tok", px=600_000)
            mc.hset(f"bull:q:{jid}", "processedOn", "1")
            until(lambda: in_sync(mc, [rc]))
            assert rc.get(f"bull:q:{jid}:lock") == b"tok" and rc.lindex("bull:q:active", 0) == jid.encode()
            p = mc.pipeline(transaction=True)
            p.lrem("bull:q:active", -1, jid)
            p.zadd("bull:q:completed", {jid: 9000})
            p.delete(f"bull:q:{jid}:lock")
            p.execute()
        mc.zadd("bull:q:delayed", {"nohash": 5})  # a member without a job hash: generic rows
        mc.execute_command("SELECT", 1)
        mc.rpush("bull:q:wait", "x")  # db 1: another container, generic (no hash)
        mc.execute_command("SELECT", 0)
        until(lambda: in_sync(mc, [rc]))
        want = dump_all(mc)
        assert dump_all(rc) == want and rc.zcard("bull:q:completed") > 30
        r2 = start_replica(m)  # a full sync: the snapshot's job rows rebuild the containers
        try:
            until(lambda: in_sync(mc, [cli(r2.port)]))
            assert dump_all(cli(r2.port)) == want
        finally:
            r2.stop()
        m.stop(signal.SIGKILL)
        until(lambda: cli(r.port).info("replication")["master_link_status"] == "down")
        assert rc.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        assert dump_all(rc) == want
        jid = rc.lmove("bull:q:wait", "bull:q:active", "RIGHT", "LEFT").decode()
        rc.set(f"bull:q:{jid}:lock", "mine", px=600_000)
        rc.zadd("bull:q:completed", {"20": 1})
        rc.lrem("bull:q:active", -1, "20")
        # every job's row written again by the promoted replica: stamped from the index its replication kept
        p = rc.pipeline(transaction=False)
        for i in range(1, 300):
            p.hset(f"bull:q:{i}", "by", "replica")
        p.execute()
        rc.save()
        want = dump_all(rc)
        r.stop(signal.SIGKILL)
        r = start_respqueue(port=r.port, workdir=r.workdir)
        assert dump_all(cli(r.port)) == want
    finally:
        r.stop()
        m.stop()


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


def test_generic_store_opens_with_the_new_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store written with generic rows (RESPQUEUE_JOB_ROWS=off, the default before job rows were) opens
    under the default (job rows) as it was; its state containers become job rows in the first batch, new
    writes work, and a kill -9 restart reads it all back."""
    monkeypatch.setenv("RESPQUEUE_JOB_ROWS", "off")
    n = Node()
    try:
        bullmq_like(n.r)
        pipe = n.r.pipeline(transaction=False)
        for i in range(300):  # a wait list big enough for a row per item
            pipe.hset(f"bull:w:{i}", mapping={"name": "j", "data": str(i)})
            pipe.lpush("bull:w:wait", str(i))
        pipe.execute()
        n.r.lmove("bull:w:wait", "bull:w:active", "RIGHT", "LEFT")
        n.r.set("bull:w:0:lock", "tok", px=600_000)
        n.r.save()
        assert rows(n, "SELECT count(*) FROM keys WHERE state IS NOT NULL OR type LIKE 'job%'") == [(0,)]
        assert rows(n, "SELECT count(*) FROM list_items WHERE key = CAST('bull:w:wait' AS BLOB)") == [(299,)]
        before = snapshot(n.r)
        n.stop()
        monkeypatch.delenv("RESPQUEUE_JOB_ROWS")  # the default
        n.start()
        assert snapshot(n.r) == before
        n.r.save()  # the first batch rewrote the containers as job rows
        assert rows(n, "SELECT count(*) FROM keys WHERE state = CAST('bull:w:wait' AS BLOB)") == [(299,)]
        assert rows(n, "SELECT count(*) FROM list_items WHERE key = CAST('bull:w:wait' AS BLOB)") == [(0,)]
        assert rows(n, "SELECT type FROM keys WHERE key = CAST('bull:q:completed' AS BLOB)") == [("jobzset",)]
        # new writes: a job finishes, another goes active, one is added
        p = n.r.pipeline(transaction=True)
        p.lrem("bull:w:active", -1, "0")
        p.zadd("bull:w:completed", {"0": 1234})
        p.delete("bull:w:0:lock")
        p.execute()
        n.r.lmove("bull:w:wait", "bull:w:active", "RIGHT", "LEFT")
        n.r.set("bull:w:1:lock", "t1", px=600_000)
        n.r.hset("bull:w:300", "data", "300")
        n.r.lpush("bull:w:wait", "300")
        before = snapshot(n.r)
        check_restart(n)
        # and back: RESPQUEUE_JOB_ROWS=off still opens it (its job rows load whatever the setting)
        monkeypatch.setenv("RESPQUEUE_JOB_ROWS", "off")
        n.restart(signal.SIGKILL)
        assert snapshot(n.r) == before
    finally:
        n.stop()


def test_replica_keeps_a_generic_masters_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rolling upgrade: the replica runs job rows (the default), its master generic rows. The replica,
    restarted on its store, does not rewrite its master's generic containers as its own job rows (its
    store must stay its master's), and follows the master's changes to them after a partial resync."""
    from .servers import start_respqueue
    from .test_replication import cli, dump_all, in_sync, start_replica, until

    monkeypatch.setenv("RESPQUEUE_JOB_ROWS", "off")
    m = start_respqueue()
    monkeypatch.setenv("RESPQUEUE_JOB_ROWS", "on")
    r = start_replica(m)
    try:
        mc = cli(m.port)
        bullmq_like(mc)
        pipe = mc.pipeline(transaction=False)
        for i in range(300):
            pipe.hset(f"bull:w:{i}", mapping={"name": "j", "data": str(i)})
            pipe.lpush("bull:w:wait", str(i))
        pipe.execute()
        until(lambda: in_sync(mc, [cli(r.port)]))
        r.stop(signal.SIGKILL)
        r = start_replica(m, workdir=r.workdir, port=r.port)
        for _ in range(20):
            mc.lmove("bull:w:wait", "bull:w:active", "RIGHT", "LEFT")
        mc.lrem("bull:w:active", -1, "3")
        mc.zadd("bull:w:completed", {"3": 99})
        rc = cli(r.port)
        until(lambda: in_sync(mc, [rc]))
        assert dump_all(rc) == dump_all(mc)
        assert "partial resynchronisation" in r.output() or "Partial" in r.output()
        conn = sqlite3.connect(os.path.join(r.workdir, "data", "respqueue.db"))
        try:
            assert conn.execute("SELECT count(*) FROM keys WHERE state IS NOT NULL").fetchone() == (0,)
        finally:
            conn.close()
    finally:
        r.stop()
        m.stop()


def _rows_match_containers(node: Node, q: str) -> None:
    """Every job row with a state names a container that holds the job at that score or position, and
    every member of a job-row container has such a row: the store's rows are the containers, exactly."""
    r = node.r
    r.save()
    types = dict(rows(node, "SELECT key, type FROM keys WHERE type IN ('joblist', 'jobzset')"))
    st = {k: (s, sc) for k, s, sc in rows(node, "SELECT key, state, score FROM keys WHERE state IS NOT NULL")}
    prefix = f"bull:{q}:".encode()
    want: dict[bytes, tuple[bytes, Any]] = {}
    for ck, t in types.items():
        if t == "joblist":
            members = r.lrange(ck, 0, -1)
            got = sorted((sc, k[len(prefix):]) for k, (s, sc) in st.items() if s == ck)
            assert [m for _, m in got] == members, ck  # positions ascending in list order
            want.update((prefix + m, (ck, None)) for m in members)
        else:
            for m, sc in r.zrange(ck, 0, -1, withscores=True):
                want[prefix + m] = (ck, sc)
    assert {k: (s, None if types[s] == "joblist" else sc) for k, (s, sc) in st.items()} == want


def test_job_rows_follow_random_list_and_zset_commands(node: Node) -> None:
    """Seeded random pushes, pops, moves, LINSERT/LREM/LSET/LTRIM, ZADD/ZREM/ZPOPMIN on job-row containers:
    after each round the rows are the containers (also after every job's row was rewritten, so a stale
    index entry for a job that left would show), and a restart gives back the same LRANGE/ZRANGE WITHSCORES."""
    import random

    rnd = random.Random(13)
    r = node.r
    n = 120
    for i in range(n):
        job(r, "q", i)
    r.rpush("bull:q:wait", *[str(i) for i in range(60)])
    lists = ["bull:q:wait", "bull:q:active", "bull:q:paused"]
    zsets = ["bull:q:completed", "bull:q:failed", "bull:q:delayed"]

    def free() -> list[str]:
        used = set()
        for lk in lists:
            used.update(x.decode() for x in r.lrange(lk, 0, -1))
        for zk in zsets:
            used.update(x.decode() for x in r.zrange(zk, 0, -1))
        return [str(i) for i in range(n) if str(i) not in used]

    for rnd_no in range(6):
        for _ in range(60):
            op = rnd.randrange(12)
            lk = rnd.choice(lists)
            zk = rnd.choice(zsets)
            f = free()
            if op == 0 and f:
                r.lpush(lk, rnd.choice(f))
            elif op == 1 and f:
                r.rpush(lk, *rnd.sample(f, min(3, len(f))))
            elif op == 2:
                r.lmove(lk, rnd.choice(lists), rnd.choice(["LEFT", "RIGHT"]), rnd.choice(["LEFT", "RIGHT"]))
            elif op == 3 and f:
                cur = r.lrange(lk, 0, -1)
                if cur:
                    r.linsert(lk, rnd.choice(["BEFORE", "AFTER"]), rnd.choice(cur), rnd.choice(f))
            elif op == 4:
                cur = r.lrange(lk, 0, -1)
                if cur:
                    r.lrem(lk, rnd.choice([0, 1, -1]), rnd.choice(cur))
            elif op == 5 and f:
                if r.llen(lk):
                    r.lset(lk, rnd.randrange(r.llen(lk)), rnd.choice(f))
            elif op == 6:
                r.ltrim(lk, rnd.randrange(2), -1 - rnd.randrange(2))
            elif op == 7 and f:
                r.zadd(zk, {rnd.choice(f): rnd.randrange(1000) / 4})
            elif op == 8:
                cur = r.zrange(zk, 0, -1)
                if cur:
                    m = rnd.choice(cur)
                    if rnd.random() < 0.5:
                        r.zrem(zk, m)
                    else:
                        r.zadd(zk, {m: rnd.randrange(1000)})  # a score change
            elif op == 9:
                r.zpopmin(zk, rnd.randrange(1, 3))
            elif op == 10:
                jid = r.rpop(lk)
                if jid is not None:  # BullMQ's finish: out of a list, into a zset
                    r.zadd(zk, {jid: rnd.randrange(1000)})
            else:
                r.rpop(lk, rnd.randrange(1, 3))
        _rows_match_containers(node, "q")
        # every job's row rewritten: its state and score are then what the index says
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            pipe.hset(f"bull:q:{i}", "round", str(rnd_no))
        pipe.execute()
        _rows_match_containers(node, "q")
        if rnd_no % 2:
            before = {k: (r.lrange(k, 0, -1) if k in lists else r.zrange(k, 0, -1, withscores=True))
                      for k in lists + zsets}
            check_restart(node)
            r = node.r
            assert before == {k: (r.lrange(k, 0, -1) if k in lists else r.zrange(k, 0, -1, withscores=True))
                              for k in lists + zsets}
    # all of them job rows, nothing generic
    assert rows(node, "SELECT count(*) FROM list_items") == [(0,)]
    assert rows(node, "SELECT count(*) FROM zset_members") == [(0,)]


def test_rows_follow_jobs_that_leave_and_stay(node: Node) -> None:
    """After each step below every job's hash is written again, so its row is stamped with the container
    the layout finds it in (compat/engine/layout.py, ``find``): a job that left (LREM, LPOP, ZREM, ZPOPMIN,
    LMOVE to a list that is no state container, its container deleted, renamed away, flushed) must get a
    row without a state, a job that stayed or moved (also after a restart's load) must name its container.
    Any memory of memberships kept across batches (a member -> container index, a per-batch memo) that goes
    stale shows here: as a row naming a container that no longer holds the job, a failed batch, or a member
    whose row has no state (docs/BENCHMARKS.md, "Job rows: a reverse index evaluated", mutations checked)."""
    r = node.r
    n = 30

    def fill() -> None:
        for i in range(n):
            job(r, "q", i)
        r.rpush("bull:q:wait", *[str(i) for i in range(10)])
        r.rpush("bull:q:active", *[str(i) for i in range(10, 15)])
        r.zadd("bull:q:completed", {str(i): i for i in range(15, 25)})
        r.zadd("bull:q:failed", {str(i): i for i in range(25, 30)})

    def in_multi(*cmds: tuple[Any, ...]) -> None:
        p = r.pipeline(transaction=True)
        for c in cmds:
            p.execute_command(*c)
        p.execute()

    fill()
    steps: list[Any] = [
        lambda: r.lrem("bull:q:wait", 1, "3"),
        lambda: r.lpop("bull:q:wait"),
        lambda: r.rpop("bull:q:active"),
        lambda: r.zrem("bull:q:completed", "16"),
        lambda: r.zpopmin("bull:q:completed"),
        lambda: r.lmove("bull:q:wait", "bull:q:elsewhere", "LEFT", "LEFT"),
        # in one batch: in and out of a container again, a job through three containers, one back in
        lambda: in_multi(("RPUSH", "bull:q:wait", "3"), ("LREM", "bull:q:wait", "0", "3"),
                         ("LMOVE", "bull:q:wait", "bull:q:active", "RIGHT", "LEFT"),
                         ("LREM", "bull:q:active", "-1", "9"), ("ZADD", "bull:q:completed", "5", "9"),
                         ("ZADD", "bull:q:failed", "1", "16")),
        lambda: in_multi(("ZREM", "bull:q:failed", "16"), ("RPUSH", "bull:q:wait", "16"),
                         ("LREM", "bull:q:wait", "0", "16"), ("ZADD", "bull:q:completed", "3", "16")),
        lambda: r.delete("bull:q:failed"),
        lambda: r.rename("bull:q:active", "bull:q:was-active"),
        lambda: r.rename("bull:q:was-active", "bull:q:active"),  # a state container again: whole
        lambda: node.restart(signal.SIGKILL),  # the index rebuilt by the load
        lambda: r.lpush("bull:q:wait", "3"),
        lambda: r.flushdb(),
        fill,
        lambda: node.restart(signal.SIGKILL),
        lambda: r.delete("bull:q:wait", "bull:q:completed"),
        # one batch puts job 5 in two containers, and the first of them falls back for another reason (a
        # member without a hash): the other one keeps job 5 as a job row
        lambda: in_multi(("RPUSH", "bull:q:wait", "nohash"), ("RPUSH", "bull:q:wait", "5"),
                         ("ZADD", "bull:q:completed", "1", "5")),
        lambda: in_multi(("LREM", "bull:q:wait", "0", "5"),),
    ]
    for no, step in enumerate(steps):
        step()
        r = node.r
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            pipe.hset(f"bull:q:{i}", "step", str(no))
        pipe.execute()
        _rows_match_containers(node, "q")
    check_restart(node)


@pytest.mark.parametrize("queues", [3, 12])
def test_many_queues_and_an_expired_container_load(node: Node, queues: int) -> None:
    """A few or more state containers than the load tells apart in SQL (each queue's own prefix, members
    whose ids contain ``:``), and a container that expired while the server was down: its jobs' rows lose
    their state."""
    r = node.r
    pipe = r.pipeline(transaction=False)
    for qi in range(queues):
        q = f"q{qi}"
        for i in range(20):
            jid = f"{i}" if i % 5 else f"x:{i}"  # a job id with a ':' in it: the key has two candidate prefixes
            pipe.hset(f"bull:{q}:{jid}", "n", str(i))
            if i % 2:
                pipe.lpush(f"bull:{q}:wait", jid)
            else:
                pipe.zadd(f"bull:{q}:completed", {jid: i * 10})
    pipe.execute()
    for i in range(3):
        job(r, "gone", i)
    r.rpush("bull:gone:wait", "0", "1", "2")
    r.pexpire("bull:gone:wait", 1500)
    r.save()
    assert rows(node, "SELECT count(*) FROM keys WHERE type IN ('joblist', 'jobzset')") == [(2 * queues + 1,)]
    before = snapshot(r)
    node.stop(signal.SIGKILL)
    time.sleep(2.0)  # the container expires while no server runs
    node.start()
    r = node.r
    before = {k: v for k, v in before.items() if k[1] != b"bull:gone:wait"}
    assert snapshot(r) == before
    r.set("poke", "1")
    r.save()
    gone = sorted((k, s) for k, s in rows(node, "SELECT key, state FROM keys") if k.startswith(b"bull:gone:"))
    assert gone == [(b"bull:gone:0", None), (b"bull:gone:1", None), (b"bull:gone:2", None)]
    assert rows(node, "SELECT count(*) FROM keys WHERE state IS NOT NULL") == [(queues * 20,)]
    assert rows(node, "SELECT count(*) FROM list_items") == [(0,)]
    check_restart(node)


def test_job_hashes_load_with_their_containers(node: Node) -> None:
    """The load reads the one-row job hashes in the scan of their containers' members (the core loader
    skips them): job rows in two databases, queues whose prefixes differ in length (SQLite cuts each
    member at its own prefix), a job hash with a TTL and one stored a row per field (the core loads
    those), beside strings, a long string, plain hashes and keys with a TTL."""
    r = node.r
    # a hashtable of more fields than a one-row hash holds: a row per field
    big = {**{f"f{i}": "v" * 10 for i in range(200)}, "data": "x" * 100}
    for dbi, queues in ((0, ("a", "long-queue-name")), (2, ("bb", "a"))):
        r.execute_command("SELECT", dbi)
        pipe = r.pipeline(transaction=False)
        for q in queues:
            for i in range(30):
                pipe.hset(f"bull:{q}:{i}", mapping={"name": "j", "data": f'{{"i":{i},"db":{dbi}}}'})
                if i % 3:
                    pipe.lpush(f"bull:{q}:wait", str(i))
                else:
                    pipe.zadd(f"bull:{q}:delayed", {str(i): 1000 - i})
            pipe.hset(f"bull:{q}:big", mapping=big)
            pipe.lpush(f"bull:{q}:wait", "big")
            pipe.pexpire(f"bull:{q}:7", 3_600_000)
        pipe.set(f"s{dbi}", "x")
        pipe.set(f"long{dbi}", "y" * 70_000)
        pipe.hset(f"h{dbi}", mapping={"a": "1"})
        pipe.set(f"ttl{dbi}", "z", px=3_600_000)
        pipe.hset(f"httl{dbi}", mapping={"a": "1"})
        pipe.pexpire(f"httl{dbi}", 3_600_000)
        pipe.execute()
    r.execute_command("SELECT", 0)
    r.save()
    assert rows(node, "SELECT count(*) FROM list_items") == [(0,)]
    assert rows(node, "SELECT count(*) FROM keys WHERE state IS NOT NULL AND value IS NOT NULL AND expire_ms IS NULL")[0][0] > 100
    assert rows(node, "SELECT count(*) FROM keys WHERE state IS NOT NULL AND value IS NULL") == [(4,)]
    assert rows(node, "SELECT count(*) FROM keys WHERE state IS NOT NULL AND expire_ms IS NOT NULL") == [(4,)]
    after = check_restart(node)
    assert (2, b"bull:bb:big") in after and (0, b"bull:long-queue-name:7") in after
    r = node.r
    for dbi in (0, 2):
        r.execute_command("SELECT", dbi)
        assert r.object("encoding", "bull:a:1") == b"listpack"
        assert r.object("encoding", "bull:a:big") == b"hashtable"
        assert 0 < r.pttl("bull:a:7") <= 3_600_000
    r.execute_command("SELECT", 0)


def test_waiting_job_changed_anywhere_keeps_its_position(node: Node) -> None:
    """A job's row is rewritten when its hash changes while it waits; the list keeps no position per member,
    so the layout finds it in the list (JobList.position: the ends, near the ends, or the whole list): the row
    keeps the job's state and score, and the list's order survives restarts."""
    r = node.r
    n = 3000
    p = r.pipeline(transaction=False)
    for i in range(n):
        job(p, "q", i)  # type: ignore[arg-type]
    p.execute()
    r.lpush("bull:q:wait", *[str(i) for i in range(n)])
    r.save()
    before = dict(((k, (s, sc)) for k, s, sc in rows(node, "SELECT key, state, score FROM keys WHERE state IS NOT NULL")))
    assert len(before) == n
    for i in (0, 1, 5, 200, 1500, 2790, 2998, 2999):  # the tail, near it, the middle, near the head, the head
        r.hset(f"bull:q:{i}", "progress", str(i))
        r.save()
    # many in one batch (MULTI): after a few searches of the list the layout maps its members once
    p = r.pipeline(transaction=True)
    for i in range(600, 2400, 60):
        p.hset(f"bull:q:{i}", "progress", str(i))
    p.execute()
    r.save()
    after = dict(((k, (s, sc)) for k, s, sc in rows(node, "SELECT key, state, score FROM keys WHERE state IS NOT NULL")))
    assert after == before
    assert r.hget("bull:q:1500", "progress") == b"1500"
    assert r.hget("bull:q:1800", "progress") == b"1800"
    check_restart(node)
    assert node.r.lrange("bull:q:wait", 0, 2) == [b"2999", b"2998", b"2997"]


def _loaded(path: str, handoff: bool) -> dict[str, Any]:
    """The keyspace, TTLs, ``stored``/``dirty`` maps and layout state a start-up load of the store at ``path``
    builds in this process: with the core loader handing the layout its containers' and locked jobs' rows
    (``handoff``, what start-up does), or with the layout scanning for them itself."""
    from compat.engine.layout import JobLayout
    from respqueue.config import Config
    from respqueue.persistence import load
    from respqueue.server import Server

    srv = Server(Config())
    conn = sqlite3.connect(path)
    try:
        layout = JobLayout()
        stored: dict[Any, Any] = {}
        dirty: dict[Any, Any] = {}
        rows: list[Any] | None = [] if handoff else None
        n = load(conn, srv.dbs, stored, skip_state=True, handoff=rows, handoff_types=JobLayout.scan_types)[0]
        n += layout.load(conn, srv.dbs, dirty, stored, hashes=True, **({"rows": rows} if handoff else {}))
    finally:
        conn.close()
    keys: dict[Any, Any] = {}
    for db in srv.dbs:
        for k, v in db.data.items():
            if type(v) is bytes:
                val: Any = v
            elif hasattr(v, "fields"):  # ColdHash
                val = (type(v).__name__, bytes(v))
            elif hasattr(v, "_ix"):  # JobList
                val = (list(v._d), list(v._p), sorted(v._ix or ()), v._dup)
            else:
                val = (type(v).__name__, repr(getattr(v, "_d", None)), list(getattr(v, "_scores", {}).items()))
            keys[(db.index, k)] = (val, db.expires.get(k))
    return {"n": n, "keys": keys, "stored": stored, "dirty": dirty, "folded": layout.folded,
            "reg": {d: {p: sorted(c) for p, c in ps.items()} for d, ps in layout.reg.items()},
            "heap": [sorted(db.expire_heap) for db in srv.dbs]}


def test_containers_and_locks_handed_over_by_the_core_scan(node: Node) -> None:
    """At start-up the core loader's scan hands the layout the rows of its containers and of the locked jobs
    (no scan of the table of its own for them) and loads the locked jobs' hashes itself: the same keyspace,
    TTLs, maps and layout state as the layout's own scan gives, and the same after a restart. Locked jobs in
    two databases (a lock with a TTL, one without, one that expires while the server is down), a locked job
    hash with a TTL, delayed jobs, a container with a TTL, an expired container."""
    r = node.r
    for dbi in (0, 3):
        r.execute_command("SELECT", dbi)
        for i in range(1, 31):
            job(r, "q", i)
        r.lpush("bull:q:wait", *[str(i) for i in range(1, 21)])
        r.rpush("bull:q:active", "21", "22", "23", "24")
        r.zadd("bull:q:delayed", {str(i): 5000 + i for i in range(25, 31)})
        r.set("bull:q:21:lock", f"tok{dbi}", px=3_600_000)
        r.set("bull:q:22:lock", "forever")
        r.set("bull:q:23:lock", "short", px=2000)  # expires while the server is down
        r.pexpire("bull:q:24", 3_600_000)  # a locked job whose hash has a TTL
        r.set("bull:q:24:lock", "t24", px=3_600_000)
        for i in range(3):
            job(r, "t", i)
        r.rpush("bull:t:wait", "0", "1", "2")
        r.pexpire("bull:t:wait", 3_600_000 if dbi else 2000)  # db 0's expires while the server is down
        r.set("plain", "x")
    r.execute_command("SELECT", 0)
    r.save()
    locked = rows(node, "SELECT db, key FROM keys WHERE lock IS NOT NULL AND state IS NOT NULL")
    assert {(0, b"bull:q:21"), (3, b"bull:q:22"), (0, b"bull:q:23")} <= set(locked)
    before = snapshot(r)
    node.stop(signal.SIGKILL)
    time.sleep(2.5)
    path = os.path.join(node.datadir, "respqueue.db")
    scanned = _loaded(path, handoff=False)
    handed = _loaded(path, handoff=True)
    assert handed == scanned
    assert (0, b"bull:q:21:lock") in handed["keys"] and (3, b"bull:q:22:lock") in handed["keys"]
    assert (3, b"bull:q:23:lock") not in handed["keys"] and (0, b"bull:t:wait") not in handed["keys"]
    assert (3, b"bull:t:wait") in handed["keys"]
    assert handed["keys"][(3, b"bull:q:24")][1] is not None
    node.start()
    expect = {k: v for k, v in before.items() if k[1] != b"bull:q:23:lock" and k != (0, b"bull:t:wait")}
    assert snapshot(node.r) == expect
    check_restart(node)


def test_a_big_wait_list_indexed_by_job_id(node: Node) -> None:
    """A wait list of 3,000 jobs (in the ``bitmaps`` run its index is a bitmap of job ids, built as one at
    load; tests/test_joblist.py has a set turning into one as the list grows), with custom ids, ids with leading zeros and a far id among the decimals: taken from both ends,
    moved, removed, checked against redis-server and after kill -9 restarts."""
    r = node.r
    ref = start_redis()
    try:
        rr = redis.Redis(port=ref.port)
        for c in (r, rr):
            p = c.pipeline(transaction=False)
            for i in range(1, 3001):
                job(p, "big", i)  # type: ignore[arg-type]
                p.lpush("bull:big:wait", str(i))
            for jid in ("custom-a", "007", "123456789012345678901", "999999999999"):
                p.hset(f"bull:big:{jid}", mapping={"name": "j", "data": "{}", "timestamp": "1"})
                p.lpush("bull:big:wait", jid)
            p.execute()
            for _ in range(500):
                c.lmove("bull:big:wait", "bull:big:active", "RIGHT", "LEFT")
            for i in range(1, 301):
                c.lrem("bull:big:active", -1, str(i))
                c.zadd("bull:big:completed", {str(i): 5000 + i})
            c.lrem("bull:big:wait", 0, "2000")
            c.delete("bull:big:2000")
            c.lrem("bull:big:wait", 0, "custom-a")
            c.rpush("bull:big:wait", "custom-a")  # retried: to the head
            c.lrem("bull:big:active", -1, "400")
            c.rpush("bull:big:wait", "400")
        assert snapshot(rr) == snapshot(r)
        rr.close()
    finally:
        ref.stop()
    assert r.llen("bull:big:wait") == 3004 - 500 - 1 + 1
    assert rows(node, "SELECT count(*) FROM list_items") == [(0,)]  # still job rows
    check_restart(node)
    # after the restart (the index built at load) the list keeps working as job rows
    r = node.r
    r.lmove("bull:big:wait", "bull:big:active", "RIGHT", "LEFT")
    r.lpush("bull:big:wait", "3001")
    job(r, "big", 3001)
    check_restart(node)
    assert rows(node, "SELECT state FROM keys WHERE key = ?", b"bull:big:3001") == [(b"bull:big:wait",)]

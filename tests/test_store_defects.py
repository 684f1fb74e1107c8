"""Durability defects found by attacking the store (issue 15): a client told a write failed finds
nothing written (MISCONF inside scripts, the batch whose commit fails), an empty or foreign store
file is refused instead of overwritten, and large strings are journaled by chunk."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from respqueue.persistence.store import SCHEMA_VERSION, STRING_CHUNK

from .servers import ROOT, RawConn, free_port
from .test_native_scripts import ADD_KEYS, add_args
from .test_native_scripts import NODE as NATIVE_NODE
from .test_native_scripts import WANTED as NATIVE_WANTED
from .test_native_scripts import dump as native_dump
from .test_native_scripts import sha as native_sha
from .test_persistence import Node


def _serve_fails(datadir: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run(
        [sys.executable, "-m", "respqueue", "serve", "--port", str(free_port()), "--dir", datadir],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert p.returncode != 0, p.stdout + p.stderr
    return p


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "respqueue", *args], capture_output=True, text=True, env=env, timeout=60)


# ---- D2: an empty or foreign store file is refused, never overwritten -----------------------------
def test_empty_store_file_refuses_to_start_and_is_left_alone() -> None:
    d = tempfile.mkdtemp(prefix="rq-empty-")
    path = os.path.join(d, "respqueue.db")
    open(path, "wb").close()
    p = _serve_fails(d)
    out = p.stdout + p.stderr
    assert path in out and "empty" in out
    assert "respqueue check" in out and "respqueue repair" in out and "remove" in out
    assert os.path.getsize(path) == 0
    assert not os.path.exists(path + "-wal") or os.path.getsize(path + "-wal") == 0
    c = _cli("check", "--dir", d)
    assert c.returncode == 1 and "empty" in c.stderr + c.stdout
    assert os.path.getsize(path) == 0


def test_foreign_sqlite_file_refuses_to_start_and_is_left_alone() -> None:
    d = tempfile.mkdtemp(prefix="rq-foreign-")
    path = os.path.join(d, "respqueue.db")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER)")
    conn.execute("INSERT INTO accounts VALUES(1, 100)")
    conn.commit()
    conn.close()
    with open(path, "rb") as f:
        before = f.read()
    p = _serve_fails(d)
    out = p.stdout + p.stderr
    assert path in out and "not a respqueue store" in out
    with open(path, "rb") as f:
        assert f.read() == before
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    conn.close()
    assert tables == ["accounts"]
    c = _cli("check", "--dir", d)
    assert c.returncode == 1 and "not a respqueue store" in c.stderr + c.stdout


# ---- D1: a client told a write failed (MISCONF) finds nothing written ------------------------------
class _Locked:
    """Another process holds the store's write lock: every commit fails (as on a full disk) until
    :meth:`release` (the mechanism of test_persistence's MISCONF test)."""

    def __init__(self, datadir: str) -> None:
        self.conn = sqlite3.connect(os.path.join(datadir, "respqueue.db"), isolation_level=None, timeout=5)
        self.conn.execute("BEGIN EXCLUSIVE")

    def release(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


def _wait_writable(r: redis.Redis) -> None:
    deadline = time.time() + 20
    while True:
        try:
            r.set("probe", "1")
            r.delete("probe")
            return
        except redis.ResponseError as e:
            assert str(e).startswith("MISCONF"), e
            assert time.time() < deadline, "writes were not accepted again"
            time.sleep(0.2)


def _fail_next_commit(node: Node) -> _Locked:
    lock = _Locked(node.datadir)
    with pytest.raises(redis.ResponseError, match="^MISCONF Errors writing to the SQLite store"):
        node.r.set("trigger", "x")  # the write whose commit fails
    return lock


@pytest.fixture
def node() -> Iterator[Node]:
    n = Node()
    yield n
    n.stop()


def test_write_whose_commit_fails_is_not_applied(node: Node) -> None:
    r = node.r
    r.set("n", 10)
    r.rpush("l", "a", "b")
    r.hset("h", mapping={"f": "1"})
    lock = _Locked(node.datadir)
    p = r.pipeline(transaction=False)
    p.incr("n").rpush("l", "c").hset("h", "g", "2").set("new", "1").lpop("l")
    res = p.execute(raise_on_error=False)
    assert all(isinstance(x, redis.ResponseError) and str(x).startswith("MISCONF") for x in res), res
    # nothing the client was told failed is visible, now or after the store recovers and restarts
    assert r.get("n") == b"10" and r.lrange("l", 0, -1) == [b"a", b"b"] and r.hgetall("h") == {b"f": b"1"}
    assert r.get("new") is None
    lock.release()
    _wait_writable(r)
    assert r.get("n") == b"10" and r.lrange("l", 0, -1) == [b"a", b"b"] and r.get("new") is None
    r.incr("n")
    node.restart(signal.SIGKILL)
    assert node.r.get("n") == b"11" and node.r.lrange("l", 0, -1) == [b"a", b"b"]
    assert node.r.hgetall("h") == {b"f": b"1"} and node.r.get("new") is None


def test_writes_of_other_clients_behind_the_failed_batch_are_refused_too(node: Node) -> None:
    """A second client's INCR made while the failing batch was in flight builds on its change: it is
    refused as well, never acknowledged with a value that was not committed."""
    r = node.r
    r.set("n", 0)
    lock = _Locked(node.datadir)
    conns = [RawConn(node.proc.port) for _ in range(4)]
    for c in conns:
        c.send("INCR", "n")
    replies = [c.read_raw() for c in conns]
    for c in conns:
        c.close()
    assert all(x.startswith(b"-MISCONF") for x in replies), replies
    assert r.get("n") == b"0"
    lock.release()
    _wait_writable(r)
    node.restart(signal.SIGKILL)
    assert node.r.get("n") == b"0"


def test_scripts_under_misconf_apply_nothing(node: Node) -> None:
    r = node.r
    r.set("a", "old")
    lock = _fail_next_commit(node)
    try:
        # no shebang: the script runs, and its first write gets the error (Redis 7)
        with pytest.raises(redis.ResponseError) as ei:
            r.eval("redis.call('set', KEYS[1], 'new') return 1", 1, "a")
        msg = str(ei.value)
        assert msg.startswith("MISCONF Errors writing to the SQLite store") and "on @user_script:1." in msg
        with pytest.raises(redis.ResponseError, match="^MISCONF"):
            r.eval("return redis.pcall('set', KEYS[1], 'new')", 1, "a")
        assert r.eval("return redis.pcall('set', KEYS[1], 'new')['err']", 1, "a").startswith(b"MISCONF")
        # reads still run; a shebang script that may write is refused before it runs
        assert r.eval("redis.call('get', KEYS[1]) return 5", 1, "a") == 5
        with pytest.raises(redis.ResponseError, match="^MISCONF"):
            r.eval("#!lua\nreturn 1", 0)
        assert r.eval("#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", 1, "a") == b"old"
        assert r.eval_ro("return redis.call('get', KEYS[1])", 1, "a") == b"old"
        sha = r.script_load("redis.call('incr', KEYS[1]) return redis.call('get', KEYS[1])")
        with pytest.raises(redis.ResponseError, match="^MISCONF"):
            r.evalsha(sha, 1, "counter")
        # a transaction queued before the failure is aborted at EXEC
        m = RawConn(node.proc.port)
        m.send("MULTI")
        assert m.read_raw() == b"+OK\r\n"
        lock.release()
        _wait_writable(r)
        m.send("SET", "inmulti", "1")
        assert m.read_raw() == b"+QUEUED\r\n"
        lock = _fail_next_commit(node)
        m.send("EXEC")
        assert m.read_raw().startswith(b"-EXECABORT Transaction discarded because of: MISCONF Errors writing")
        m.close()
        assert r.get("a") == b"old" and r.get("counter") is None and r.get("inmulti") is None
    finally:
        lock.release()
    _wait_writable(r)
    node.restart(signal.SIGKILL)
    assert node.r.get("a") == b"old" and node.r.get("counter") is None and node.r.get("inmulti") is None
    assert node.r.get("trigger") is None


@pytest.mark.skipif(len(NATIVE_NODE) != len(NATIVE_WANTED), reason="interop/node_modules (bullmq 6.7.0) or node missing")
def test_native_bullmq_script_under_misconf_applies_nothing(node: Node) -> None:
    add = NATIVE_NODE["addStandardJob-9"]
    r = node.r
    r.script_load(add)
    r.evalsha(native_sha(add), 9, *ADD_KEYS, *add_args(name="before"))
    before = native_dump(r, sort_hashes=True)
    lock = _Locked(node.datadir)
    try:
        for i in range(2):  # the first: its commit fails; the second: refused while writes are refused
            with pytest.raises(redis.ResponseError, match="^MISCONF"):
                r.evalsha(native_sha(add), 9, *ADD_KEYS, *add_args(name=f"during{i}"))
            assert native_dump(r, sort_hashes=True) == before
    finally:
        lock.release()
    _wait_writable(r)
    node.restart(signal.SIGKILL)
    assert native_dump(node.r, sort_hashes=True) == before


# ---- D4: large strings are journaled by chunk ----------------------------------------------------
def _string_ops(rng: random.Random) -> list[tuple[Any, ...]]:
    """APPEND/SETRANGE on large strings: inside, across chunk boundaries, past the end (zero gaps of
    several chunks), zeros over written bytes, a small string growing past the threshold, a new key
    made far out by SETRANGE, TTL changes only, and a large string shrinking back to one row."""
    C = STRING_CHUNK
    big = bytes(rng.getrandbits(8) for _ in range(3 * C + 123))
    return [
        ("SET", "s", big),
        ("APPEND", "s", b"tail-1"),
        ("SETRANGE", "s", C - 3, b"across-the-boundary"),
        ("SETRANGE", "s", 10, b"near-the-start"),
        ("SETRANGE", "s", 8 * C + 5, b"far past the end"),
        ("APPEND", "s", b"tail-2" * 1000),
        ("SETRANGE", "s", 2 * C, bytes(C)),  # a whole chunk of zeros over written bytes
        ("SETRANGE", "sparse", 40 * C + 7, b"x"),
        ("APPEND", "sparse", b"yz"),
        ("SET", "grow", b"g" * (C - 10)),
        ("APPEND", "grow", b"h" * 100),
        ("APPEND", "grow", b"i" * 5),
        ("EXPIRE", "grow", 100000),
        ("SETRANGE", "grow", 3, b"ttl kept"),
        ("SET", "shrink", b"q" * (2 * C)),
        ("APPEND", "shrink", b"r"),
        ("SET", "shrink", b"small again"),
        ("SET", "moved", b"m" * (2 * C)),
        ("RENAME", "moved", "moved2"),
        ("APPEND", "moved2", b"after rename"),
    ]


def _strings_state(r: redis.Redis, keys: list[str]) -> list[Any]:
    C = STRING_CHUNK
    out: list[Any] = []
    for k in keys:
        n = r.strlen(k)
        out.append((k, n, r.get(k), r.getrange(k, C - 5, C + 5), r.getrange(k, -7, -1), r.ttl(k) > 0))
    return out


_KEYS = ["s", "sparse", "grow", "shrink", "moved", "moved2"]


def _rows(node: Node, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    conn = sqlite3.connect(os.path.join(node.datadir, "respqueue.db"))
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def test_chunked_strings_survive_restart_like_redis(node: Node, ref: redis.Redis) -> None:
    ops = _string_ops(random.Random(7))
    for i, op in enumerate(ops):
        a = node.r.execute_command(*op)
        b = ref.execute_command(*op)
        assert a == b, op
        if i % 3 == 2:
            node.r.save()  # some ops land in batches of their own, some share one
    want = _strings_state(ref, _KEYS)
    assert _strings_state(node.r, _KEYS) == want
    # a mostly-zero string costs a row per chunk that holds something
    assert _rows(node, "SELECT count(*) FROM string_chunks WHERE key = CAST('sparse' AS BLOB)") == [(1,)]
    assert _rows(node, "SELECT typeof(value) FROM keys WHERE key = CAST('shrink' AS BLOB)") == [("blob",)]
    assert _rows(node, "SELECT count(*) FROM string_chunks WHERE key = CAST('shrink' AS BLOB)") == [(0,)]
    node.restart(signal.SIGKILL)
    assert _strings_state(node.r, _KEYS) == want
    node.restart()
    assert _strings_state(node.r, _KEYS) == want


def test_append_to_a_large_string_writes_only_its_last_chunk(node: Node) -> None:
    r = node.r
    size = 8 << 20
    r.set("big", b"a" * size)
    r.save()
    wal = os.path.join(node.datadir, "respqueue.db-wal")
    conn = sqlite3.connect(os.path.join(node.datadir, "respqueue.db"))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    size0 = os.path.getsize(wal)
    for _ in range(5):
        r.append("big", b"0123456789")
    r.setrange("big", 1 << 20, b"middle")
    grown = os.path.getsize(wal) - size0
    # 6 commits of a chunk (64 KiB) and the keys row each, about 0.5 MB; one rewrite of the value
    # alone would be 8 MB (a transaction's pages all go to the WAL before any checkpoint)
    assert grown < 2 << 20, grown
    assert r.strlen("big") == size + 50
    node.restart(signal.SIGKILL)
    assert node.r.strlen("big") == size + 50
    assert node.r.getrange("big", (1 << 20) - 1, (1 << 20) + 6) == b"amiddlea"
    assert node.r.getrange("big", -10, -1) == b"0123456789"


def test_acknowledged_appends_survive_kill_9(node: Node) -> None:
    r = node.r
    base = b"b" * (STRING_CHUNK * 2 + 17)
    r.set("log", base)
    want = bytearray(base)
    stop = threading.Event()
    acked: list[int] = []

    def writer() -> None:
        w = redis.Redis(port=node.proc.port)
        i = 0
        try:
            while not stop.is_set():
                piece = b"<%06d>" % i
                w.append("log", piece)
                acked.append(i)
                i += 1
        except (redis.ConnectionError, ConnectionError):
            pass

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(1.0)
    node.proc.stop(signal.SIGKILL)
    stop.set()
    t.join(10)
    node.r.close()
    node.start()
    got = node.r.get("log")
    assert got is not None
    for i in acked:
        want += b"<%06d>" % i
    # every acknowledged append is there; at most the one in flight at the kill besides
    assert got[: len(want)] == bytes(want) and len(got) - len(want) in (0, 8), (len(got), len(want))
    assert len(acked) > 5


def test_store_of_schema_version_4_loads_and_is_rewritten_in_chunks_on_change() -> None:
    """A version-4 store (every string one row, no string_chunks table), made by hand with the
    documented schema, loads; a changed large string moves to chunks and the file to the current version (6)."""
    from respqueue.persistence.store import MIGRATIONS

    workdir = tempfile.mkdtemp(prefix="rq-v4-")
    datadir = os.path.join(workdir, "data")
    os.makedirs(datadir)
    conn = sqlite3.connect(os.path.join(datadir, "respqueue.db"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for v in range(1, 5):
        for stmt in MIGRATIONS[v]:
            conn.execute(stmt)
    conn.execute("INSERT INTO meta VALUES('schema_version', '4')")
    big = bytes(range(256)) * 1024  # 256 KiB
    conn.execute("INSERT INTO keys VALUES(0, CAST('big' AS BLOB), 'string', NULL, 1, ?)", (big,))
    conn.execute("INSERT INTO keys VALUES(0, CAST('other' AS BLOB), 'string', NULL, 1, ?)", (big[::-1],))
    conn.execute("INSERT INTO keys VALUES(0, CAST('small' AS BLOB), 'string', NULL, 1, CAST('v' AS BLOB))")
    conn.close()
    n = Node.__new__(Node)
    n.workdir, n.extra, n.proc = workdir, (), None
    n.start()
    try:
        assert n.r.get("big") == big and n.r.get("other") == big[::-1] and n.r.get("small") == b"v"
        assert _rows(n, "SELECT value FROM meta WHERE name = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        assert n.r.append("big", b"!") == len(big) + 1
        n.r.save()
        assert _rows(n, "SELECT typeof(value), value FROM keys WHERE key = CAST('big' AS BLOB)") == [
            ("integer", len(big) + 1)]
        assert _rows(n, "SELECT count(*) FROM string_chunks WHERE key = CAST('big' AS BLOB)") == [(5,)]
        assert _rows(n, "SELECT typeof(value) FROM keys WHERE key = CAST('other' AS BLOB)") == [("blob",)]
        n.restart(signal.SIGKILL)
        assert n.r.get("big") == big + b"!" and n.r.get("other") == big[::-1]
        assert n.r.setrange("big", 5, b"12345") == len(big) + 1
        n.restart()
        assert n.r.get("big") == big[:5] + b"12345" + big[10:] + b"!"
    finally:
        n.stop()


def test_failed_append_to_a_chunked_string_is_rolled_back(node: Node) -> None:
    r = node.r
    base = b"c" * (STRING_CHUNK * 3 + 5)
    r.set("big", base)
    lock = _Locked(node.datadir)
    with pytest.raises(redis.ResponseError, match="^MISCONF"):
        r.append("big", b"lost")
    assert r.get("big") == base
    lock.release()
    _wait_writable(r)
    assert r.append("big", b"kept") == len(base) + 4
    node.restart(signal.SIGKILL)
    assert node.r.get("big") == base + b"kept"


def test_failed_flushall_and_swapdb_are_rolled_back(node: Node) -> None:
    r = node.r
    r.set("a", "1")
    r.hset("h", mapping={f"f{i}": i for i in range(200)})  # field rows (a hashtable hash)
    r.execute_command("SELECT", 1)
    r.rpush("l1", "x", "y")
    r.execute_command("SELECT", 0)
    before = (r.get("a"), r.hgetall("h"))
    lock = _Locked(node.datadir)
    with pytest.raises(redis.ResponseError, match="^MISCONF"):
        r.flushall()
    assert (r.get("a"), r.hgetall("h")) == before
    lock.release()
    _wait_writable(r)
    lock = _Locked(node.datadir)
    with pytest.raises(redis.ResponseError, match="^MISCONF"):
        r.swapdb(0, 1)
    assert (r.get("a"), r.hgetall("h")) == before and r.lrange("l1", 0, -1) == []
    lock.release()
    _wait_writable(r)
    r.hset("h", "f0", "changed")
    node.restart(signal.SIGKILL)
    assert node.r.get("a") == b"1" and node.r.hget("h", "f0") == b"changed" and node.r.hlen("h") == 200
    node.r.execute_command("SELECT", 1)
    assert node.r.lrange("l1", 0, -1) == [b"x", b"y"]


def test_blocked_pop_served_by_a_failed_push_is_told_it_failed(node: Node) -> None:
    """A BLPOP woken by a push whose commit fails took an item that is then put back: its reply is
    the MISCONF error, never the item (which would be delivered twice)."""
    r = node.r
    waiter = RawConn(node.proc.port)
    waiter.send("BLPOP", "q", "10")
    time.sleep(0.3)
    lock = _Locked(node.datadir)
    with pytest.raises(redis.ResponseError, match="^MISCONF"):
        r.rpush("q", "job")
    assert waiter.read_raw().startswith(b"-MISCONF")
    waiter.close()
    assert r.llen("q") == 0
    lock.release()
    _wait_writable(r)
    r.rpush("q", "job2")
    node.restart(signal.SIGKILL)
    assert node.r.lrange("q", 0, -1) == [b"job2"]


def test_random_large_string_ops_survive_restarts_like_redis(node: Node, ref: redis.Redis) -> None:
    """Random APPEND/SETRANGE/SET/DEL/RENAME/COPY/EXPIRE on a few keys around the chunk threshold,
    pipelined so that several land in one batch; after each restart every value equals Redis's."""
    rng = random.Random(int(os.environ.get("RQ_SEED", "2024")))
    C = STRING_CHUNK
    keys = ["k0", "k1", "k2"]

    def op() -> tuple[Any, ...]:
        k = rng.choice(keys)
        x = rng.random()
        if x < 0.3:
            return ("APPEND", k, bytes([rng.randrange(1, 256)]) * rng.choice([1, 10, 5000, C]))
        if x < 0.6:
            off = rng.choice([0, 5, C - 1, C, 2 * C + 3, rng.randrange(0, 5 * C)])
            return ("SETRANGE", k, off, rng.choice([b"\x00" * 100, b"abc", bytes([rng.randrange(256)]) * 3000]))
        if x < 0.7:
            return ("SET", k, b"s" * rng.choice([10, C - 5, C + 5, 3 * C]))
        if x < 0.78:
            return ("DEL", k)
        if x < 0.86:
            return ("RENAME", k, rng.choice(keys)) if r_exists(k) else ("EXISTS", k)
        if x < 0.93:
            return ("COPY", k, rng.choice(keys), "REPLACE")
        return ("EXPIRE", k, 100000)

    def r_exists(k: str) -> bool:
        return bool(ref.exists(k))

    for _round in range(3):
        for _ in range(12):
            ops = [op() for _ in range(rng.randint(1, 4))]
            pa = node.r.pipeline(transaction=False)
            pb = ref.pipeline(transaction=False)
            for o in ops:
                pa.execute_command(*o)
                pb.execute_command(*o)
            a = pa.execute(raise_on_error=False)
            b = pb.execute(raise_on_error=False)
            assert [str(x) for x in a] == [str(x) for x in b], ops
        want = [(k, ref.get(k), ref.ttl(k) > 0) for k in keys]
        assert [(k, node.r.get(k), node.r.ttl(k) > 0) for k in keys] == want
        node.restart(signal.SIGKILL)
        assert [(k, node.r.get(k), node.r.ttl(k) > 0) for k in keys] == want


def test_chunked_string_expired_while_stopped_is_dropped_with_its_chunks(node: Node) -> None:
    node.r.set("gone", b"z" * (3 * STRING_CHUNK), px=1500)
    node.r.set("kept", b"k" * (3 * STRING_CHUNK), ex=1000)
    node.stop()
    time.sleep(2)
    node.start()
    assert node.r.get("gone") is None and node.r.strlen("kept") == 3 * STRING_CHUNK
    node.r.save()
    assert _rows(node, "SELECT count(*) FROM string_chunks WHERE key = CAST('gone' AS BLOB)") == [(0,)]
    assert _rows(node, "SELECT count(*) FROM keys WHERE key = CAST('gone' AS BLOB)") == [(0,)]
    assert _rows(node, "SELECT count(*) FROM string_chunks WHERE key = CAST('kept' AS BLOB)") == [(3,)]

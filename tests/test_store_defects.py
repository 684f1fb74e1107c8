"""Durability defects found by attacking the store (issue 15): a client told a write failed finds
nothing written (MISCONF inside scripts, the batch whose commit fails), an empty or foreign store
file is refused instead of overwritten, and large strings are journaled by chunk."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import pytest
import redis

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
        assert m.read_raw().startswith(b"-EXECABORT Transaction discarded because of: Errors writing")
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

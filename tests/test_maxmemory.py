"""maxmemory (respqueue/memory.py): OOM refusals byte for byte against Redis 7, eviction policies.

Defect D3: CONFIG SET maxmemory was accepted and ignored. Here a small limit makes writes fail with
Redis's exact error while reads and deletes go on, and the eviction policies keep the estimate under it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import hiredis
import pytest
import redis

from .servers import RawConn, ServerProcess, redis_server_path, run_async, start_redis, start_respqueue

OOM = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"


@pytest.fixture(scope="module")
def rq() -> Iterator[ServerProcess]:
    srv = start_respqueue("--durability", "memory")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def ref() -> Iterator[ServerProcess]:
    if redis_server_path() is None:
        pytest.skip("reference redis-server is not installed")
    srv = start_redis()
    yield srv
    srv.stop()


@pytest.fixture
def conns(rq: ServerProcess, ref: ServerProcess) -> Iterator[tuple[RawConn, RawConn]]:
    a, b = RawConn(rq.port), RawConn(ref.port)
    for c in (a, b):
        c.call_raw("CONFIG", "SET", "maxmemory", "0")
        c.call_raw("CONFIG", "SET", "maxmemory-policy", "noeviction")
        c.call_raw("FLUSHALL")
    yield a, b
    for c in (a, b):
        c.call_raw("CONFIG", "SET", "maxmemory", "0")
        c.call_raw("CONFIG", "SET", "maxmemory-policy", "noeviction")
        c.close()


def same(conns: tuple[RawConn, RawConn], *cmd: Any) -> bytes:
    ours, theirs = conns[0].call_raw(*cmd), conns[1].call_raw(*cmd)
    assert ours == theirs, (cmd, ours, theirs)
    return ours


def test_oom_replies_same_as_redis(conns):
    """Over the limit (1 byte: both servers are over it whatever they hold), with noeviction."""
    same(conns, "SET", "a", "1")
    same(conns, "RPUSH", "l", "x")
    same(conns, "CONFIG", "SET", "maxmemory", "1")
    assert same(conns, "SET", "b", "2") == OOM
    for cmd in [
        ("GET", "a"),
        ("EXISTS", "a", "b"),
        ("LRANGE", "l", "0", "-1"),
        ("DEL", "l"),
        ("SET", "a", "2"),
        ("INCR", "c"),
        ("LPUSH", "l", "1"),
        ("RPUSH", "l", "1"),
        ("HSET", "h", "f", "v"),
        ("SADD", "s", "m"),
        ("ZADD", "z", "1", "m"),
        ("XADD", "x", "*", "f", "v"),
        ("APPEND", "a", "x"),
        ("SETEX", "k", "10", "v"),
        ("GETSET", "a", "x"),
        ("MSET", "a", "1", "b", "2"),
        ("INCRBYFLOAT", "f", "1.5"),
        ("XGROUP", "CREATE", "x", "g", "$", "MKSTREAM"),
        ("COPY", "a", "a2"),
        ("SETNX", "n", "1"),
        ("EXPIRE", "a", "100"),
        ("TTL", "a"),
        ("PERSIST", "a"),
        ("GETDEL", "a"),
        ("DEL", "a"),
        ("PUBLISH", "ch", "m"),
        ("SELECT", "1"),
        ("SELECT", "0"),
        ("PING",),
        ("DBSIZE",),
        ("CONFIG", "GET", "maxmemory"),
        ("CONFIG", "GET", "maxmemory-policy"),
        # scripts: no shebang runs and fails at its first write; pcall gets the bare error
        ("EVAL", "return redis.call('set','x','1')", "0"),
        ("EVAL", "return redis.call('get','x')", "0"),
        ("EVAL", "return 1", "0"),
        ("EVAL", "redis.call('get','x'); return redis.call('incr','x')", "0"),
        ("EVAL", "local e = redis.pcall('set','x','1'); return e", "0"),
        ("EVAL", "redis.call('del','zz'); return redis.call('set','x','1')", "0"),
        # a shebang without no-writes/allow-oom is refused before it runs
        ("EVAL", "#!lua\nreturn redis.call('set','x','1')", "0"),
        ("EVAL", "#!lua flags=no-writes\nreturn 2", "0"),
        ("EVAL", "#!lua flags=allow-oom\nreturn redis.call('set','y','1')", "0"),
        ("GET", "y"),
        ("EVAL_RO", "return redis.call('get','y')", "0"),
        ("SCRIPT", "LOAD", "return redis.call('set','x','1')"),
        ("EVALSHA", "8b2ae6dd76cda7fc3e27f97431ae27d7b08a221d", "0"),
        # MULTI: anything queued is refused (memory), and the transaction is aborted
        ("MULTI",),
        ("GET", "y"),
        ("SET", "q", "1"),
        ("EXEC",),
        ("MULTI",),
        ("DISCARD",),
    ]:
        same(conns, *cmd)
    # back under the limit: writes work again
    same(conns, "CONFIG", "SET", "maxmemory", "0")
    same(conns, "SET", "b", "2")
    same(conns, "GET", "b")


def test_exec_of_a_denyoom_transaction_is_aborted(conns):
    same(conns, "SET", "a", "1")
    same(conns, "MULTI")
    same(conns, "GET", "a")
    same(conns, "SET", "b", "1")
    for c in conns:  # the limit comes from another connection while the transaction is open
        admin = RawConn(c.sock.getpeername()[1])
        admin.call_raw("CONFIG", "SET", "maxmemory", "1")
        admin.close()
    same(conns, "EXEC")
    same(conns, "MULTI")
    same(conns, "DISCARD")


def test_fill_until_oom_then_reads_and_deletes_work(rq):
    """The D3 regression: fill past a small maxmemory; SET gets OOM, GET and DEL still work."""
    r = redis.Redis(port=rq.port, socket_timeout=20)
    try:
        r.flushall()
        assert r.config_set("maxmemory", "2mb")
        assert r.config_get("maxmemory") == {"maxmemory": str(2 * 1024 * 1024)}
        value = b"x" * 1000
        err = None
        n = 0
        for n in range(20000):
            try:
                r.set(f"key:{n}", value)
            except redis.exceptions.ResponseError as e:
                err = e
                break
        assert isinstance(err, redis.exceptions.OutOfMemoryError), (n, err)  # redis-py's class for -OOM
        assert 100 < n < 2000, n
        raw = RawConn(rq.port)
        assert raw.call_raw("SET", "one-more", "x") == OOM
        assert raw.call_raw("GET", "key:1") == b"$1000\r\n" + value + b"\r\n"
        raw.close()
        assert r.get("key:0") == value
        assert r.delete(*[f"key:{i}" for i in range(n // 2)]) == n // 2
        r.set("after-delete", value)  # there is room again
        info = r.info("memory")
        assert info["maxmemory"] == 2 * 1024 * 1024 and info["maxmemory_policy"] == "noeviction"
        assert info["used_memory"] <= info["maxmemory"]
        assert r.info("stats")["evicted_keys"] == 0
    finally:
        r.config_set("maxmemory", "0")
        r.flushall()
        r.close()


def _fill(r: redis.Redis, prefix: str, n: int, size: int = 1000, ex: int | None = None, hot: list[str] = ()) -> None:
    value = b"v" * size
    for i in range(0, n, 100):
        p = r.pipeline(transaction=False)
        for j in range(i, min(i + 100, n)):
            p.set(f"{prefix}:{j}", value, ex=ex)
        for h in hot:
            p.get(h)
        p.execute()


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-lfu", "allkeys-random"])
def test_allkeys_policies_evict_and_keep_under_the_limit(rq, policy):
    r = redis.Redis(port=rq.port, socket_timeout=30)
    try:
        r.flushall()
        r.config_set("maxmemory-policy", policy)
        r.config_set("maxmemory", "2mb")
        hot = [f"hot:{i}" for i in range(10)]
        for h in hot:
            r.set(h, b"h" * 1000)
        for h in hot * 10:  # give the LFU counters something to go on
            r.get(h)
        before = r.info("stats")["evicted_keys"]
        _fill(r, "k", 5000, hot=hot)  # ~5 MB of values into 2 MB, never an error
        assert r.dbsize() < 5000
        info = r.info()
        assert info["evicted_keys"] - before > 1000
        assert info["used_memory"] <= 2 * 1024 * 1024
        if policy != "allkeys-random":
            # read all the time: (nearly) never the best candidate of a sample
            assert sum(r.exists(h) for h in hot) >= 8
    finally:
        r.config_set("maxmemory", "0")
        r.config_set("maxmemory-policy", "noeviction")
        r.flushall()
        r.close()


@pytest.mark.parametrize("policy", ["volatile-lru", "volatile-ttl", "volatile-random", "volatile-lfu"])
def test_volatile_policies_evict_only_keys_with_a_ttl(rq, policy):
    r = redis.Redis(port=rq.port, socket_timeout=30)
    try:
        r.flushall()
        r.config_set("maxmemory-policy", policy)
        r.config_set("maxmemory", "2mb")
        _fill(r, "keep", 300)  # no TTL: never evicted
        _fill(r, "vol", 3000, ex=1000)
        assert all(r.exists(f"keep:{i}") for i in range(300))
        assert r.dbsize() < 3300
        if policy == "volatile-ttl":
            # eviction samples keys (as Redis): with 64 a sample, 200 evictions all but surely see "soon"
            # (5 a sample would miss it among ~1,500 volatile keys about half the time)
            r.config_set("maxmemory-samples", 64)
            r.set("soon", b"s" * 1000, ex=5)
            r.set("late", b"l" * 1000, ex=100000)
            _fill(r, "vol2", 200, ex=1000)
            assert not r.exists("soon")
        # when only keys without a TTL are left, writes that need memory fail
        r.config_set("maxmemory", "300kb")
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            _fill(r, "more", 200)
        assert all(r.exists(f"keep:{i}") for i in range(300))
        assert r.get("keep:0") == b"v" * 1000
    finally:
        r.config_set("maxmemory-samples", 5)
        r.config_set("maxmemory", "0")
        r.config_set("maxmemory-policy", "noeviction")
        r.flushall()
        r.close()


def test_config_and_info_same_as_redis(conns, rq):
    for cmd in [
        ("CONFIG", "SET", "maxmemory", "100mb"),
        ("CONFIG", "GET", "maxmemory"),
        ("CONFIG", "SET", "maxmemory", "1gb"),
        ("CONFIG", "GET", "maxmemory"),
        ("CONFIG", "SET", "maxmemory", "12k"),
        ("CONFIG", "GET", "maxmemory"),
        ("CONFIG", "SET", "maxmemory", "-1"),
        ("CONFIG", "SET", "maxmemory", "lots"),
        ("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"),
        ("CONFIG", "GET", "maxmemory-policy"),
        ("CONFIG", "SET", "maxmemory-policy", "ALLKEYS-LFU"),
        ("CONFIG", "GET", "maxmemory-policy"),
        ("CONFIG", "SET", "maxmemory-policy", "lru"),
        ("CONFIG", "GET", "maxmemory-samples"),
        ("CONFIG", "SET", "maxmemory-samples", "10"),
        ("CONFIG", "GET", "maxmemory-samples"),
        ("CONFIG", "SET", "maxmemory-samples", "0"),
        ("CONFIG", "SET", "maxmemory-samples", "65"),
        ("CONFIG", "SET", "maxmemory-samples", "5"),
        ("CONFIG", "SET", "maxmemory", "0"),
        ("CONFIG", "SET", "maxmemory-policy", "noeviction"),
    ]:
        same(conns, *cmd)
    # the denyoom flag in COMMAND INFO, as Redis lists it
    names = [
        "set",
        "hset",
        "get",
        "xadd",
        "lpush",
        "rpoplpush",
        "incrbyfloat",
        "mset",
        "sadd",
        "zadd",
        "del",
        "append",
        "setex",
        "getset",
        "copy",
        "xgroup",
        "expire",
        "hincrby",
        "linsert",
    ]
    flags = []
    for c in conns:
        rd = hiredis.Reader()
        rd.feed(c.call_raw("COMMAND", "INFO", *names))
        flags.append([(e[0], e[2]) if e else None for e in rd.gets()])
    assert flags[0] == flags[1]
    # INFO memory: the fields BullMQ and operators read
    for c in conns:
        c.call_raw("CONFIG", "SET", "maxmemory", "100mb")
    infos = []
    for c in conns:
        text = c.call_raw("INFO", "memory").decode()
        infos.append(
            {k: v for k, _, v in (ln.partition(":") for ln in text.split("\r\n")) if k.startswith("maxmemory")}
        )
    assert (
        infos[0]
        == infos[1]
        == {"maxmemory": "104857600", "maxmemory_human": "100.00M", "maxmemory_policy": "noeviction"}
    )


def test_maxmemory_flags_env_and_toml(tmp_path):
    toml = tmp_path / "rq.toml"
    toml.write_text('maxmemory = "3mb"\nmaxmemory-samples = 7\n')
    import os

    os.environ["RESPQUEUE_MAXMEMORY_POLICY"] = "volatile-ttl"
    try:
        srv = start_respqueue("--config", str(toml), "--durability", "memory")
    finally:
        del os.environ["RESPQUEUE_MAXMEMORY_POLICY"]
    try:
        r = redis.Redis(port=srv.port)
        assert r.config_get("maxmemory*") == {
            "maxmemory": str(3 * 1024 * 1024),
            "maxmemory-policy": "volatile-ttl",
            "maxmemory-samples": "7",
        }
        _fill(r, "p", 1500)
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            _fill(r, "q", 1000)  # no key has a TTL: nothing to evict
    finally:
        srv.stop()
    srv = start_respqueue("--maxmemory", "1mb", "--maxmemory-policy", "allkeys-random", "--durability", "memory")
    try:
        r = redis.Redis(port=srv.port)
        _fill(r, "p", 3000)
        assert r.dbsize() < 3000 and r.info("stats")["evicted_keys"] > 0
    finally:
        srv.stop()


@pytest.mark.skipif(importlib.util.find_spec("bullmq") is None, reason="the Python BullMQ port is not installed")
def test_bullmq_add_over_maxmemory_same_error_as_redis(rq, ref):
    """Queue.add runs BullMQ's addStandardJob (no shebang): over the limit it fails at its first write, with the
    same text on both servers (respqueue's native path falls back to Lua for it); under the limit it works."""
    from bullmq import Queue

    async def add(port: int) -> list[str]:
        out = []
        q = Queue("oomq", {"connection": f"redis://127.0.0.1:{port}"})
        try:
            r = redis.Redis(port=port)
            r.flushall()
            r.set("ballast", "x")
            r.config_set("maxmemory", "1")
            for _ in range(2):  # the first EVALSHA is a NOSCRIPT miss, then EVAL: both paths
                try:
                    await q.add("job", {"n": 1})
                    out.append("added")
                except Exception as e:  # redis.asyncio's OutOfMemoryError: the text without "OOM "
                    out.append(f"{type(e).__name__}: {e}")
            r.config_set("maxmemory", "0")
            job = await q.add("job", {"n": 2})
            out.append(f"added {job.id}")
            r.close()
        finally:
            await q.close()
        return out

    ours = run_async(add(rq.port))
    theirs = run_async(add(ref.port))
    assert ours == theirs
    assert ours[0].startswith("OutOfMemoryError: command not allowed when used memory > 'maxmemory'. script: ")


def test_keyspace_loaded_from_the_store_counts_from_the_start(tmp_path):
    srv = start_respqueue("--durability", "buffered", workdir=str(tmp_path))
    try:
        r = redis.Redis(port=srv.port, socket_timeout=20)
        _fill(r, "stored", 2000)  # ~2 MB of values
        r.close()
    finally:
        assert srv.stop() == 0
    srv = start_respqueue("--durability", "buffered", "--maxmemory", "1mb", workdir=str(tmp_path))
    try:
        raw = RawConn(srv.port)
        assert raw.call_raw("DBSIZE") == b":2000\r\n"
        assert raw.call_raw("SET", "one-more", "x") == OOM
        assert raw.call_raw("DEL", "stored:1") == b":1\r\n"
        raw.close()
    finally:
        srv.stop()

"""Replication between real respqueue processes on loopback (respqueue/replication/), compared with a
real Redis master/replica pair where Redis defines the reply."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from .servers import RawConn, ServerProcess, redis_server_path, start_redis, start_respqueue

pytestmark = pytest.mark.skipif(redis_server_path() is None, reason="redis-server is not installed")


def until(cond: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.time() + timeout
    while True:
        try:
            v = cond()
            if v:
                return v
        except (redis.ConnectionError, redis.TimeoutError, ConnectionError):
            pass
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def cli(port: int) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=10)


def info(c: redis.Redis) -> dict[str, Any]:
    return c.info("replication")


def in_sync(m: redis.Redis, rs: list[redis.Redis]) -> bool:
    off = info(m)["master_repl_offset"]
    return all(info(x).get("master_link_status") == "up" and info(x)["slave_repl_offset"] == off for x in rs)


def start_replica(
    master: ServerProcess, *extra: str, workdir: str | None = None, port: int | None = None
) -> ServerProcess:
    return start_respqueue("--replicaof", f"127.0.0.1 {master.port}", *extra, workdir=workdir, port=port)


#: the commands that read a key's value (``None``: the key), by its type (a stream: its entries and its groups)
_READ: dict[bytes, list[tuple[Any, ...]]] = {
    b"string": [("GET", None)],
    b"hash": [("HGETALL", None)],
    b"list": [("LRANGE", None, 0, -1)],
    b"set": [("SMEMBERS", None)],
    b"zset": [("ZRANGE", None, 0, -1, "WITHSCORES")],
    b"stream": [("XRANGE", None, "-", "+"), ("XINFO", "GROUPS", None)],
}


def _pipelined(c: redis.Redis, dbi: int, cmds: list[tuple[Any, ...]]) -> list[Any]:
    p = c.pipeline(transaction=False)
    p.execute_command("SELECT", dbi)
    for cmd in cmds:
        p.execute_command(*cmd)
    return p.execute()[1:]


def dump_all(c: redis.Redis) -> dict[tuple[int, bytes], Any]:
    """Every key of databases 0 and 1 with its type, value and whether it has a TTL (pipelined: three round
    trips per database, not three per key)."""
    out: dict[tuple[int, bytes], Any] = {}
    for dbi in (0, 1):
        keys = _pipelined(c, dbi, [("KEYS", "*")])[0]
        types = _pipelined(c, dbi, [("TYPE", k) for k in keys])
        types = [t if isinstance(t, bytes) else str(t).encode() for t in types]
        cmds = [tuple(k if a is None else a for a in r) for k, t in zip(keys, types, strict=True)
                for r in [*_READ[t], ("PTTL", None)]]
        res = iter(_pipelined(c, dbi, cmds))
        for k, t in zip(keys, types, strict=True):
            vals = [next(res) for _ in _READ[t]]
            v: Any = vals[0] if len(vals) == 1 else tuple(vals)
            if t == b"set":
                v = sorted(v)
            out[(dbi, k)] = (t, v, next(res) > 0)
    c.execute_command("SELECT", 0)
    return out


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    m = start_respqueue()
    r = start_replica(m)
    yield m, r
    r.stop()
    m.stop()


@pytest.fixture(scope="module")
def redis_pair() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    m = start_redis()
    r = start_redis("--replicaof", f"127.0.0.1 {m.port}")
    mc, rc = cli(m.port), cli(r.port)
    mc.set("x", "1")
    until(lambda: in_sync(mc, [rc]), what="the Redis replica")
    yield m, r
    r.stop()
    m.stop()


def workload(c: redis.Redis, tag: str) -> None:
    """Writes of every type, small and large (one row vs a row per element in the store)."""
    p = c.pipeline(transaction=False)
    p.set(f"{tag}:s", "v")
    p.set(f"{tag}:ttl", "v", ex=1000)
    p.incrby(f"{tag}:n", 5)
    p.hset(f"{tag}:h", mapping={"a": "1", "b": "2"})
    p.hset(f"{tag}:bigh", mapping={f"f{i}": str(i) for i in range(300)})
    p.rpush(f"{tag}:l", *[f"i{i}" for i in range(5)])
    p.rpush(f"{tag}:bigl", *[f"i{i}" for i in range(400)])
    p.sadd(f"{tag}:set", *[f"m{i}" for i in range(50)])
    p.zadd(f"{tag}:z", {f"m{i}": i * 1.5 for i in range(200)})
    for i in range(300):
        p.xadd(f"{tag}:x", {"i": str(i)}, id=f"{i + 1}-0")
    p.xgroup_create(f"{tag}:x", "g", id="0")
    p.execute()
    c.xreadgroup("g", "c1", {f"{tag}:x": ">"}, count=3)
    c.xdel(f"{tag}:x", "5-0")
    c.lpop(f"{tag}:bigl", 10)
    c.lset(f"{tag}:bigl", 3, "changed")
    c.hdel(f"{tag}:bigh", "f1", "f2")
    c.zrem(f"{tag}:z", "m3")
    c.srem(f"{tag}:set", "m7")
    c.delete(f"{tag}:s")
    c.execute_command("SELECT", 1)
    c.set(f"{tag}:db1", "one")
    c.execute_command("SELECT", 0)


def test_writes_appear_on_replica(pair: tuple[ServerProcess, ServerProcess]) -> None:
    m, r = pair
    mc, rc = cli(m.port), cli(r.port)
    workload(mc, "w")
    mc.eval("redis.call('set', KEYS[1], ARGV[1]); redis.call('lpush', KEYS[2], ARGV[1])", 2, "w:lua", "w:lual", "z")
    until(lambda: in_sync(mc, [rc]), what="the replica to catch up")
    want = dump_all(mc)
    assert want and dump_all(rc) == want
    # FLUSHDB and SWAPDB reach the replica too
    mc.execute_command("SWAPDB", 0, 1)
    until(lambda: in_sync(mc, [rc]))
    assert dump_all(rc) == dump_all(mc)
    mc.execute_command("SELECT", 1)
    mc.flushdb()
    until(lambda: in_sync(mc, [rc]))
    assert dump_all(rc) == dump_all(mc)
    mc.flushall()
    until(lambda: in_sync(mc, [rc]))
    assert dump_all(rc) == {}


def test_readonly_replica(
    pair: tuple[ServerProcess, ServerProcess], redis_pair: tuple[ServerProcess, ServerProcess]
) -> None:
    _, r = pair
    _, rr = redis_pair
    got, want = RawConn(r.port), RawConn(rr.port)
    for cmd in (
        ("SET", "k", "v"),
        ("LPUSH", "l", "x"),
        ("GET", "k"),
        ("MULTI",),
        ("SET", "k", "v"),
        ("EXEC",),
        ("PUBLISH", "ch", "hi"),
        ("EVAL", "return 1", "0"),
    ):
        assert got.call_raw(*cmd) == want.call_raw(*cmd), cmd
    # a script may read on a replica, never write
    assert got.call_raw("EVAL", "return redis.call('get', 'k')", "0") == b"$-1\r\n"
    assert got.call_raw("EVAL", "return redis.call('set', 'k', 'v')", "0").startswith(b"-")
    assert cli(r.port).get("k") is None
    got.close()
    want.close()


def _shape(reply: Any) -> Any:
    """Types and nesting of a reply, values left out."""
    if isinstance(reply, list):
        return [_shape(x) for x in reply]
    return type(reply).__name__


def _info_fields(text: bytes) -> list[tuple[str, str]]:
    out = []
    for line in text.split(b"\r\n", 1)[1].decode().splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            kind = "int" if v.lstrip("-").isdigit() else "str"
            if k.startswith("slave") and k[5:].isdigit():
                v = ",".join(sorted(p.split("=")[0] for p in v.split(",")))
                kind = v
            out.append((k, kind))
    return out


def test_role_and_info_match_redis(
    pair: tuple[ServerProcess, ServerProcess], redis_pair: tuple[ServerProcess, ServerProcess]
) -> None:
    m, r = pair
    rm, rr = redis_pair
    mc, rc = cli(m.port), cli(r.port)
    mc.set("role", "1")
    until(lambda: in_sync(mc, [rc]))
    for port in (m.port, rm.port):
        until(lambda port=port: cli(port).execute_command("ROLE")[2], what="an online replica in ROLE")
    for ours, theirs in ((m, rm), (r, rr)):
        a, b = cli(ours.port), cli(theirs.port)
        assert _shape(a.execute_command("ROLE")) == _shape(b.execute_command("ROLE"))
        fa = _info_fields(RawConn(ours.port).call_raw("INFO", "replication"))
        fb = _info_fields(RawConn(theirs.port).call_raw("INFO", "replication"))
        assert fa == fb
    role = mc.execute_command("ROLE")
    assert role[0] == b"master" and role[2] == [[b"127.0.0.1", str(r.port).encode(), str(role[1]).encode()]]
    role = rc.execute_command("ROLE")
    assert role[:4] == [b"slave", b"127.0.0.1", m.port, b"connected"]
    i = info(mc)
    assert i["connected_slaves"] == 1 and i["slave0"]["port"] == r.port and i["slave0"]["state"] == "online"
    assert info(rc)["master_replid"] == i["master_replid"]


def test_wait(pair: tuple[ServerProcess, ServerProcess], redis_pair: tuple[ServerProcess, ServerProcess]) -> None:
    m, r = pair
    rm, _ = redis_pair
    for port in (m.port, rm.port):
        c = cli(port)
        c.set("w", "1")
        assert c.execute_command("WAIT", 1, 5000) == 1
        t0 = time.time()
        assert c.execute_command("WAIT", 2, 200) == 1  # only one replica: times out with 1
        assert time.time() - t0 >= 0.15
        p = c.pipeline(transaction=False)
        p.set("w", "2")
        p.execute_command("WAIT", 1, 5000)
        assert p.execute() == [True, 1]
    assert cli(r.port).get("w") == b"2"
    got, want = RawConn(r.port), RawConn(redis_pair[1].port)
    assert got.call_raw("WAIT", "1", "10") == want.call_raw("WAIT", "1", "10")
    for args in (("REPLICAOF", "127.0.0.1", "notaport"), ("REPLICAOF", "127.0.0.1"), ("REPLCONF", "bogus", "1")):
        assert RawConn(m.port).call_raw(*args) == RawConn(rm.port).call_raw(*args), args


def test_replica_restart_resumes_or_resyncs() -> None:
    m = start_respqueue("--repl-backlog-size", "65536")
    mc = cli(m.port)
    mc.set("a", "1")
    r = start_replica(m)
    rc = cli(r.port)
    until(lambda: in_sync(mc, [rc]))
    port, workdir = r.port, r.workdir
    try:
        # a short absence: the backlog still holds what it missed, so it resumes (no snapshot)
        r.stop()
        for i in range(20):
            mc.set(f"p{i}", i)
        r = start_replica(m, port=port, workdir=workdir)
        rc = cli(r.port)
        until(lambda: in_sync(mc, [rc]))
        assert rc.get("p19") == b"19" and rc.get("a") == b"1"
        until(lambda: "resumed at offset" in m.output(), what="a partial resync")
        assert "full resynchronisation" not in r.output()
        # a long one: more than the backlog went by, so it takes a fresh snapshot
        r.stop()
        big = "x" * 1000
        for i in range(200):
            mc.set(f"big{i}", big)
        mc.delete("a")
        r = start_replica(m, port=port, workdir=workdir)
        rc = cli(r.port)
        until(lambda: in_sync(mc, [rc]))
        assert "full resynchronisation" in r.output()
        assert rc.get("a") is None and rc.get("big199") == big.encode() and rc.dbsize() == mc.dbsize()
    finally:
        r.stop()
        m.stop()


def test_master_killed_then_promotion_and_demotion() -> None:
    m = start_respqueue()
    mc = cli(m.port)
    r = start_replica(m)
    rc = cli(r.port)
    try:
        workload(mc, "k")
        until(lambda: in_sync(mc, [rc]))
        before = dump_all(mc)
        m.stop(signal.SIGKILL)
        until(lambda: info(rc)["master_link_status"] == "down")
        assert "master_link_down_since_seconds" in info(rc)
        assert rc.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        assert dump_all(rc) == before
        rc.set("after", "promotion")
        rc.rpush("k:bigl", "more")
        i = info(rc)
        assert i["role"] == "master" and i["second_repl_offset"] > 0
        # the old master comes back and is made a replica of the new one: it catches up
        m = start_respqueue(port=m.port, workdir=m.workdir)
        mc = cli(m.port)
        assert mc.execute_command("REPLICAOF", "127.0.0.1", r.port) == b"OK"
        assert mc.execute_command("REPLICAOF", "127.0.0.1", r.port) == b"OK Already connected to specified master"
        until(lambda: in_sync(rc, [mc]))
        assert dump_all(mc) == dump_all(rc)
        assert mc.get("after") == b"promotion"
        with pytest.raises(redis.ReadOnlyError):
            mc.set("x", "1")
        # its store holds it too: a restart keeps the data and resumes from its offset
        m.stop()
        assert not os.path.exists(os.path.join(m.workdir, "data", "replsync-incoming.db"))
        m = start_replica(r, port=m.port, workdir=m.workdir)
        mc = cli(m.port)
        rc.set("later", "1")
        until(lambda: in_sync(rc, [mc]))
        assert mc.get("later") == b"1" and mc.get("after") == b"promotion"
    finally:
        m.stop()
        r.stop()


def test_masterauth_and_config() -> None:
    m = start_respqueue("--requirepass", "pw")
    mc = redis.Redis(port=m.port, password="pw", socket_timeout=10)
    mc.set("a", "1")
    good = start_replica(m, "--masterauth", "pw")
    bad = start_replica(m)
    try:
        rc = cli(good.port)
        until(lambda: rc.get("a") == b"1", what="the replica with masterauth")
        assert rc.config_get("masterauth") == {"masterauth": "pw"}
        assert rc.config_get("replicaof") == {"replicaof": f"127.0.0.1 {m.port}"}
        assert rc.config_get("replica-priority") == {"replica-priority": "100"}
        # without the password the link never comes up, and the log says why
        until(lambda: "set masterauth" in bad.output(), what="the AUTH failure in the log")
        i = info(cli(bad.port))
        assert i["master_link_status"] == "down" and i["master_link_down_since_seconds"] >= 0
        assert cli(bad.port).get("a") is None
        assert info(mc)["connected_slaves"] == 1
    finally:
        bad.stop()
        good.stop()
        m.stop()


def test_replica_ack() -> None:
    """--replica-ack 1: a write's reply waits until a replica committed it, so the replica already holds
    what the master acknowledged; with no replica, write replies wait. Also after roles were swapped."""
    m = start_respqueue("--replica-ack", "1")
    r = None
    try:
        with pytest.raises(TimeoutError):
            RawConn(m.port, timeout=1.0).call_raw("SET", "k", "0")  # no replica: the reply waits
        r = start_replica(m, "--replica-ack", "1")
        mc, rc = cli(m.port), cli(r.port)
        for i in range(30):
            mc.set("k", i)
            assert rc.get("k") == str(i).encode()  # acknowledged: already on the replica
        # swap the roles twice: each new master waits for its own replica's acknowledgements
        for a, b in ((r, m), (m, r)):
            ac, bc = cli(a.port), cli(b.port)
            ac.execute_command("REPLICAOF", "NO", "ONE")
            bc.execute_command("REPLICAOF", "127.0.0.1", a.port)
            for _ in range(10):
                ac.incr("n")
                assert bc.get("n") == ac.get("n")
        # m is the master again: without its replica its write replies wait, as at the start
        r.stop(signal.SIGKILL)
        with pytest.raises(TimeoutError):
            RawConn(m.port, timeout=1.0).call_raw("INCR", "n")
        r = start_replica(m, "--replica-ack", "1", port=r.port, workdir=r.workdir)
        assert cli(m.port).incr("n") == 22
        assert cli(r.port).get("n") == b"22"
    finally:
        if r is not None:
            r.stop()
        m.stop()


def test_config_rewrite_keeps_the_role(tmp_path: Any) -> None:
    """CONFIG REWRITE (Sentinel sends it with every REPLICAOF) writes the role into the TOML file, so a
    restarted node keeps it; without a config file it is Redis's error."""
    m = start_respqueue()
    conf = tmp_path / "node.toml"
    conf.write_text('# a node\nmaxclients = 500\nreplicaof = "127.0.0.1 1"\n')
    r = start_respqueue("--config", str(conf))
    try:
        assert RawConn(m.port).call_raw("CONFIG", "REWRITE") == b"-ERR The server is running without a config file\r\n"
        rc = cli(r.port)
        assert rc.execute_command("REPLICAOF", "127.0.0.1", m.port) == b"OK"
        assert rc.execute_command("CONFIG", "REWRITE") == b"OK"
        text = conf.read_text()
        assert f'replicaof = "127.0.0.1 {m.port}"' in text and "maxclients = 500" in text and "# a node" in text
        assert text.count("replicaof") == 1
        cli(m.port).set("a", "1")
        port, workdir = r.port, r.workdir
        r.stop()
        r = start_respqueue("--config", str(conf), port=port, workdir=workdir)
        rc = cli(r.port)
        until(lambda: rc.get("a") == b"1", what="the restarted replica")
        assert info(rc)["role"] == "slave"
        rc.execute_command("REPLICAOF", "NO", "ONE")
        rc.execute_command("CONFIG", "REWRITE")
        assert "replicaof" not in conf.read_text()
    finally:
        r.stop()
        m.stop()


def test_replication_refusals(pair: tuple[ServerProcess, ServerProcess]) -> None:
    """What cannot be: replication without a store, a replica of a replica, and SYNC (an RDB stream)."""
    mem = start_respqueue("--durability", "memory")
    try:
        got = RawConn(mem.port).call_raw("REPLICAOF", "127.0.0.1", "1")
        assert got.startswith(b"-ERR replication needs a store")
        assert RawConn(mem.port).call_raw("PSYNC", "?", "-1").startswith(b"-ERR replication needs a store")
        assert info(cli(mem.port))["role"] == "master"
    finally:
        mem.stop()
    _, r = pair
    assert RawConn(r.port).call_raw("PSYNC", "?", "-1").startswith(b"-ERR respqueue replicas do not serve replicas")
    assert RawConn(r.port).call_raw("SYNC").startswith(b"-ERR")
    assert RawConn(r.port).call_raw("PSYNC", "?", "x") == b"-ERR value is not an integer or out of range\r\n"


def test_big_lists_and_zsets_follow_in_place(pair: tuple[ServerProcess, ServerProcess]) -> None:
    """A big list or sorted set (a row per element in the store) changed at its ends or by member, in
    many small batches (the replica applies those in place), then in the middle (reloaded whole)."""
    m, r = pair
    mc, rc = cli(m.port), cli(r.port)
    mc.rpush("bl", *[f"i{i}" for i in range(300)])
    mc.zadd("bz", {f"m{i}": i for i in range(300)})
    mc.expire("bz", 1000)
    for i in range(60):
        p = mc.pipeline(transaction=False)
        p.lpush("bl", f"head{i}")
        p.rpush("bl", f"tail{i}", f"tail{i}b")
        if i % 3 == 0:
            p.rpop("bl")
            p.lpop("bl", 2)
        if i % 7 == 0:
            p.lset("bl", 0, f"set{i}")
            p.lset("bl", -1, f"set{i}")
        p.zadd("bz", {f"n{i}": -i, f"m{i}": 1000 + i})
        p.zrem("bz", f"m{i + 100}")
        p.zincrby("bz", 0.5, f"m{i + 200}")
        p.execute()
        if i % 10 == 0:
            mc.rpoplpush("bl", "bl")
    mc.lset("bl", 150, "middle")
    mc.linsert("bl", "BEFORE", "middle", "inserted")
    mc.lrem("bl", 1, "i200")
    mc.persist("bz")
    until(lambda: in_sync(mc, [rc]))
    assert rc.lrange("bl", 0, -1) == mc.lrange("bl", 0, -1)
    assert rc.zrange("bz", 0, -1, withscores=True) == mc.zrange("bz", 0, -1, withscores=True)
    assert rc.ttl("bz") == -1
    assert rc.object("encoding", "bz") == mc.object("encoding", "bz")


def test_long_strings_follow(pair: tuple[ServerProcess, ServerProcess]) -> None:
    """A string longer than a store chunk (64 KiB: ``keys.value`` holds its length, its bytes are in
    ``string_chunks`` rows) reaches the replica whole, and so do APPEND/SETRANGE changes to it."""
    m, r = pair
    mc, rc = cli(m.port), cli(r.port)
    big = bytes(range(256)) * 400  # 100 KiB
    mc.set("bs", big)
    mc.append("bs", b"tail")
    mc.setrange("bs", 70000, b"changed")
    mc.setrange("zs", 200000, b"x")  # mostly zero bytes (chunks without a row)
    until(lambda: in_sync(mc, [rc]))
    assert rc.get("bs") == mc.get("bs")
    assert rc.get("zs") == mc.get("zs")
    assert rc.strlen("zs") == 200001

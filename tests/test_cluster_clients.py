"""Real cluster clients on ``respqueue serve --shards N``: redis-py RedisCluster, BullMQ on an ioredis Cluster,
node-redis createCluster (each also run on a real Redis Cluster, outcomes compared), and the supervisor:
a shard killed with SIGKILL comes back with its acknowledged data; SHUTDOWN or SIGTERM stops them all."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from redis.cluster import RedisCluster as PyCluster

from respqueue.cluster.slots import key_slot

from .cluster_servers import RedisCluster, Shards, cluster_info, shard_pid
from .servers import ROOT, RawConn

INTEROP = os.path.join(ROOT, "interop")
needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(os.path.join(INTEROP, "node_modules", "bullmq")),
    reason="run `npm ci` in interop/ (and install node) for the Node client tests",
)
needs_redis = pytest.mark.skipif(
    shutil.which("redis-server") is None or shutil.which("redis-cli") is None,
    reason="redis-server and redis-cli are needed for the Redis Cluster reference",
)


@pytest.fixture(scope="module")
def shards():
    s = Shards(3)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def real():
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("no redis-server/redis-cli")
    c = RedisCluster(3)
    yield c
    c.stop()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of someone else's still counts as gone
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(pred, timeout: float = 60.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_every_shard_presents_the_same_cluster(shards):
    slots = set()
    for p in shards.ports:
        c = RawConn(p)
        slots.add(c.call_raw("CLUSTER", "SLOTS"))
        c.close()
        info = cluster_info(p)
        assert info["cluster_state"] == "ok" and info["cluster_known_nodes"] == "3" and info["cluster_size"] == "3"
    assert len(slots) == 1
    # split as redis-cli --cluster create splits 16384 slots over three masters
    s = slots.pop()
    assert b":0\r\n:5460\r\n" in s and b":5461\r\n:10922\r\n" in s and b":10923\r\n:16383\r\n" in s
    assert os.path.exists(os.path.join(shards.dir, "cluster.toml"))
    for k in range(3):
        assert os.path.isdir(os.path.join(shards.dir, f"shard-{k}"))


def test_redis_py_cluster_client(shards):
    rc = PyCluster(host="127.0.0.1", port=shards.base, socket_timeout=20)
    try:
        keys = [f"key:{i}" for i in range(300)]
        for i, k in enumerate(keys):
            assert rc.set(k, i)
        assert [rc.get(k) for k in keys] == [str(i).encode() for i in range(300)]
        owners = {key_slot(k.encode()) * 3 // 16384 for k in keys}
        assert owners == {0, 1, 2}
        # each key really is on the shard that owns its slot, and nowhere else
        per_shard = []
        for p in shards.ports:
            c = RawConn(p)
            per_shard.append(int(c.call_raw("DBSIZE")[1:-2]))
            c.close()
        assert sum(per_shard) == 300 and min(per_shard) > 50
        pipe = rc.pipeline()
        for i in range(200):
            pipe.incrby(f"n:{i}", i)
        assert pipe.execute() == list(range(200))
        assert rc.mget_nonatomic([f"n:{i}" for i in range(5)]) == [b"0", b"1", b"2", b"3", b"4"]
        assert rc.mset({"{t}a": 1, "{t}b": 2}) and rc.mget("{t}a", "{t}b") == [b"1", b"2"]
        assert rc.delete(*keys[:10]) == 10
        assert rc.cluster_keyslot("foo") == 12182
    finally:
        rc.close()


def run_node(what: str, ports: list[int]) -> dict:
    p = subprocess.run(
        ["node", "cluster_clients.js", what, *map(str, ports)], cwd=INTEROP, capture_output=True, text=True, timeout=180
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


@needs_node
@needs_redis
@pytest.mark.parametrize("what", ["bullmq", "node-redis"])
def test_node_cluster_clients_same_as_redis_cluster(what, shards, real):
    ours = run_node(what, shards.ports)
    theirs = run_node(what, real.ports)
    assert ours == theirs
    if what == "bullmq":
        for q in ("alpha", "delta", "q2"):
            assert len(ours[q]) == 12 and [100, 1000, 3] in ours[q]
        assert ours["attempts_retry"] == [3, 3, 3] and ours["elapsed_ok"] is True
        # the three queues' hash tags are on three different shards
        assert len({key_slot(f"rq-{q}".encode()) * 3 // 16384 for q in ("alpha", "delta", "q2")}) == 3
    else:
        assert ours["got_all"] is True and ours["masters"] == 3
        assert ours["crossslot"] == "CROSSSLOT Keys in request don't hash to the same slot"


def test_killed_shard_is_restarted_with_its_data(shards):
    rc = PyCluster(host="127.0.0.1", port=shards.base, socket_timeout=20)
    try:
        for i in range(100):
            rc.set(f"durable:{i}", f"v{i}")
        victim = shards.ports[1]
        old = shard_pid(victim)
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: not alive(old))

        def back() -> bool:
            try:
                return shard_pid(victim) != old
            except OSError:
                return False

        wait_until(back)
        assert [rc.get(f"durable:{i}") for i in range(100)] == [f"v{i}".encode() for i in range(100)]
        assert "shard 1" in shards.output() and "restarting it" in shards.output()
    finally:
        rc.close()


def test_shutdown_of_one_shard_stops_all():
    s = Shards(2, "--durability", "memory")
    pids = [shard_pid(p) for p in s.ports]
    c = RawConn(s.ports[1])
    c.send("SHUTDOWN")
    c.close()
    assert s.proc.wait(60) == 0
    wait_until(lambda: not any(alive(p) for p in pids))
    s.stop()


def test_sigterm_to_the_supervisor_stops_all():
    s = Shards(2, "--durability", "memory")
    pids = [shard_pid(p) for p in s.ports]
    assert s.stop() == 0
    wait_until(lambda: not any(alive(p) for p in pids))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    from .cluster_servers import env

    return subprocess.run(
        [sys.executable, "-m", "respqueue", "cluster", *args], capture_output=True, text=True, timeout=60, env=env()
    )


def test_cluster_check_and_info_cli(shards):
    p = _cli("check", f"127.0.0.1:{shards.ports[0]}")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[OK] All nodes agree about slots configuration." in p.stdout
    assert "[OK] All 16384 slots covered." in p.stdout
    p = _cli("info", "--cluster-config", os.path.join(shards.dir, "cluster.toml"))
    assert p.returncode == 0 and p.stdout.count("slots | 0 slaves.") == 3 and "in 3 masters." in p.stdout
    c = RawConn(shards.ports[0])
    myid = c.call_raw("CLUSTER", "MYID")[5:45]
    assert c.call_raw("CLUSTER", "DELSLOTS", "5") == b"+OK\r\n"
    assert c.call_raw("CLUSTER", "SETSLOT", "7", "MIGRATING", myid) == b"+OK\r\n"
    try:
        p = _cli("check", f"127.0.0.1:{shards.ports[1]}")
        assert p.returncode == 1
        assert "[ERR] Nodes don't agree about configuration!" in p.stdout
        assert "has slots in migrating or importing state: [7->-" in p.stdout
    finally:
        c.call_raw("CLUSTER", "ADDSLOTS", "5")
        c.call_raw("CLUSTER", "SETSLOT", "7", "STABLE")
        c.close()
    assert _cli("check", f"127.0.0.1:{shards.ports[2]}").returncode == 0
    p = _cli("check", "127.0.0.1:1")
    assert p.returncode == 1 and "cannot ask node 127.0.0.1:1" in p.stdout


def _fill_tagged(rc: PyCluster, tag: str) -> None:
    rc.hset(f"{{{tag}}}h", mapping={"a": 1, "b": 2})
    rc.rpush(f"{{{tag}}}l", *range(1200))
    rc.sadd(f"{{{tag}}}s", "x", "y")
    rc.zadd(f"{{{tag}}}z", {"a": 1.5, "b": float("inf"), "c": -0.1})
    rc.xadd(f"{{{tag}}}x", {"f": "v"}, id="1-1")
    rc.xadd(f"{{{tag}}}x", {"f": "w"}, id="2-1")
    rc.xgroup_create(f"{{{tag}}}x", "g", id="0")
    rc.xreadgroup("g", "c1", {f"{{{tag}}}x": ">"}, count=1)
    rc.set(f"{{{tag}}}t", "ttl", px=100000)
    rc.set(f"{{{tag}}}str", "plain")


def _snapshot(rc: PyCluster, tag: str) -> list:
    x = f"{{{tag}}}x"
    return [
        rc.hgetall(f"{{{tag}}}h"),
        rc.lrange(f"{{{tag}}}l", 0, -1),
        rc.smembers(f"{{{tag}}}s"),
        rc.zrange(f"{{{tag}}}z", 0, -1, withscores=True),
        rc.xrange(x),
        rc.xinfo_groups(x),
        rc.xpending_range(x, "g", "-", "+", 10)[0]["message_id"],
        rc.get(f"{{{tag}}}t"),
        rc.pttl(f"{{{tag}}}t") > 0,
        rc.get(f"{{{tag}}}str"),
    ]


def test_live_slot_migration_with_ask():
    """MIGRATE a slot's keys between two shards by hand: ASK and TRYAGAIN while it moves, ASKING on the
    importing node, MOVED once CLUSTER SETSLOT NODE closes it; a cluster client keeps working throughout."""
    s = Shards(2, "--durability", "memory")
    rc = PyCluster(host="127.0.0.1", port=s.base, socket_timeout=20)
    a, b = RawConn(s.ports[0]), RawConn(s.ports[1])
    try:
        tag, slot = "k2", 449  # on shard 0
        _fill_tagged(rc, tag)
        before = _snapshot(rc, tag)
        aid, bid = a.call_raw("CLUSTER", "MYID")[5:45], b.call_raw("CLUSTER", "MYID")[5:45]
        assert b.call_raw("CLUSTER", "SETSLOT", slot, "IMPORTING", aid) == b"+OK\r\n"
        assert a.call_raw("CLUSTER", "SETSLOT", slot, "MIGRATING", bid) == b"+OK\r\n"
        keys = [f"{{{tag}}}{k}" for k in ("h", "l", "s", "z", "x", "t", "str")]
        assert a.call_raw("CLUSTER", "COUNTKEYSINSLOT", slot) == b":7\r\n"
        assert a.call_raw("MIGRATE", "127.0.0.1", s.ports[1], "", "0", "5000", "KEYS", *keys[:4]) == b"+OK\r\n"
        ask = b"-ASK %d 127.0.0.1:%d\r\n" % (slot, s.ports[1])
        assert a.call_raw("HGETALL", keys[0]) == ask
        assert a.call_raw("GET", keys[6]) == b"$5\r\nplain\r\n"
        assert a.call_raw("MGET", keys[0], keys[6]) == b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
        assert b.call_raw("SCARD", keys[2]) == b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, s.ports[0])
        assert b.call_raw("ASKING") == b"+OK\r\n"
        assert b.call_raw("SCARD", keys[2]) == b":2\r\n"
        assert rc.llen(keys[1]) == 1200 and rc.get(keys[6]) == b"plain"  # redis-py follows the ASK
        # what is left to move, newest first, as GETKEYSINSLOT lists it
        assert a.call_raw("CLUSTER", "COUNTKEYSINSLOT", slot) == b":3\r\n"
        left = a.call_raw("CLUSTER", "GETKEYSINSLOT", slot, "10")
        assert left == b"*3\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(k), k.encode()) for k in reversed(keys[4:]))
        assert (
            a.call_raw("CLUSTER", "GETKEYSINSLOT", slot, "1")
            == left[:4].replace(b"3", b"1") + left[4:].split(b"\r\n$")[0] + b"\r\n"
        )
        assert a.call_raw("MIGRATE", "127.0.0.1", s.ports[1], keys[4], "0", "5000") == b"+OK\r\n"
        assert a.call_raw("MIGRATE", "127.0.0.1", s.ports[1], "", "0", "5000", "KEYS", *keys[5:]) == b"+OK\r\n"
        assert a.call_raw("MIGRATE", "127.0.0.1", s.ports[1], keys[5], "0", "5000") == b"+NOKEY\r\n"
        for conn in (a, b):
            assert conn.call_raw("CLUSTER", "SETSLOT", slot, "NODE", bid) == b"+OK\r\n"
        assert a.call_raw("GET", keys[6]) == b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, s.ports[1])
        assert b.call_raw("CLUSTER", "COUNTKEYSINSLOT", slot) == b":7\r\n"
        assert a.call_raw("DBSIZE") == b":0\r\n"
        rc2 = PyCluster(host="127.0.0.1", port=s.base, socket_timeout=20)
        assert _snapshot(rc2, tag) == before
        rc2.close()
        # MIGRATE without REPLACE refuses a key the target has
        a.call_raw("CLUSTER", "SETSLOT", slot, "NODE", aid)
        b.call_raw("CLUSTER", "SETSLOT", slot, "NODE", aid)
        a.call_raw("SET", keys[6], "again")
        b.call_raw("CLUSTER", "SETSLOT", slot, "IMPORTING", aid)
        assert a.call_raw("MIGRATE", "127.0.0.1", s.ports[1], keys[6], "0", "5000", "COPY") == (
            b"-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n"
        )
        assert a.call_raw("MIGRATE", "127.0.0.1", s.ports[1], keys[6], "0", "5000", "COPY", "REPLACE") == b"+OK\r\n"
        assert a.call_raw("GET", keys[6]) == b"$5\r\nagain\r\n"  # COPY keeps it here
        b.call_raw("ASKING")
        assert b.call_raw("GET", keys[6]) == b"$5\r\nagain\r\n"
    finally:
        rc.close()
        a.close()
        b.close()
        s.stop()


@needs_redis
def test_redis_cli_reshard_and_rebalance_move_slots_and_keys():
    """redis-cli --cluster reshard (SETSLOT IMPORTING/MIGRATING, GETKEYSINSLOT, MIGRATE, SETSLOT NODE on every
    master) on respqueue shards; afterwards every key is readable and the nodes agree. The new slot owners are
    written to the shards' cluster file, so a shard killed afterwards comes back with them."""
    s = Shards(2)
    rc = PyCluster(host="127.0.0.1", port=s.base, socket_timeout=20)
    try:
        for i in range(200):
            rc.set(f"r{i}", i)
        _fill_tagged(rc, "k2")
        before = _snapshot(rc, "k2")
        a, b = RawConn(s.ports[0]), RawConn(s.ports[1])
        aid, bid = a.call_raw("CLUSTER", "MYID")[5:45].decode(), b.call_raw("CLUSTER", "MYID")[5:45].decode()
        p = subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "reshard",
                f"127.0.0.1:{s.ports[0]}",
                "--cluster-from",
                aid,
                "--cluster-to",
                bid,
                "--cluster-slots",
                "1000",
                "--cluster-yes",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr
        assert b.call_raw("CLUSTER", "COUNTKEYSINSLOT", "449").startswith(b":7")
        assert a.call_raw("GET", "{k2}str") == b"-MOVED 449 127.0.0.1:%d\r\n" % s.ports[1]
        a.close()
        b.close()
        rc2 = PyCluster(host="127.0.0.1", port=s.base, socket_timeout=20)
        assert [rc2.get(f"r{i}") for i in range(200)] == [str(i).encode() for i in range(200)]
        assert _snapshot(rc2, "k2") == before
        rc2.close()
        check = _cli("check", f"127.0.0.1:{s.ports[1]}")
        assert check.returncode == 0, check.stdout
        assert "slots:[1000-8191] (7192 slots)" in check.stdout
        time.sleep(0.5)  # the nodes write the file 0.1 s after the last change
        with open(os.path.join(s.dir, "cluster.toml")) as fh:
            assert 'slots = "1000-8191"' in fh.read()
        old = shard_pid(s.ports[0])
        os.kill(old, signal.SIGKILL)

        def back() -> bool:
            try:
                return shard_pid(s.ports[0]) != old
            except OSError:
                return False

        wait_until(back)
        check = _cli("check", f"127.0.0.1:{s.ports[0]}")
        assert check.returncode == 0, check.stdout
        rc3 = PyCluster(host="127.0.0.1", port=s.base, socket_timeout=20)
        assert [rc3.get(f"r{i}") for i in range(200)] == [str(i).encode() for i in range(200)]
        assert _snapshot(rc3, "k2") == before
        rc3.close()
        # redis-cli --cluster rebalance evens the slots out again; redis-cli --cluster check agrees
        p = subprocess.run(
            ["redis-cli", "--cluster", "rebalance", f"127.0.0.1:{s.ports[0]}"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr
        p = subprocess.run(
            ["redis-cli", "--cluster", "check", f"127.0.0.1:{s.ports[1]}"], capture_output=True, text=True, timeout=60
        )
        assert p.returncode == 0 and "All nodes agree" in p.stdout and "(8192 slots)" in p.stdout, p.stdout
        rc4 = PyCluster(host="127.0.0.1", port=s.base, socket_timeout=20)
        assert [rc4.get(f"r{i}") for i in range(200)] == [str(i).encode() for i in range(200)]
        assert _snapshot(rc4, "k2") == before
        rc4.close()
    finally:
        rc.close()
        s.stop()


def _pubsub_round(ports: list[int]) -> list[bytes]:
    """A subscriber (channel and pattern) on the last node, PUBLISH on the first and on the last node."""
    sub = RawConn(ports[-1])
    out = [sub.call_raw("SUBSCRIBE", "news"), sub.call_raw("PSUBSCRIBE", "ne*")]
    pub = RawConn(ports[0])
    out.append(pub.call_raw("PUBLISH", "news", "from the first node"))
    out += [sub.read_raw(), sub.read_raw()]
    local = RawConn(ports[-1])
    out.append(local.call_raw("PUBLISH", "news", "from the same node"))
    out += [sub.read_raw(), sub.read_raw()]
    out.append(pub.call_raw("EVAL", "return redis.call('publish', 'news', 'from a script')", "0"))
    out += [sub.read_raw(), sub.read_raw()]
    for c in (sub, pub, local):
        c.close()
    return out


@needs_redis
def test_publish_reaches_every_node_as_in_redis_cluster(shards, real):
    assert _pubsub_round(shards.ports) == _pubsub_round(real.ports)


def test_shard_that_cannot_start_stops_the_supervisor(tmp_path):
    """A shard that keeps dying (here: its port is taken) is restarted a few times, then everything stops."""
    import socket

    from .cluster_servers import env, free_port_range

    base = free_port_range(2)
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", base + 1))
    blocker.listen()
    try:
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "respqueue",
                "serve",
                "--port",
                str(base),
                "--shards",
                "2",
                "--dir",
                str(tmp_path),
                "--durability",
                "memory",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env(),
        )
    finally:
        blocker.close()
    assert p.returncode == 1
    assert "shard 1 died 5 times" in p.stderr


def test_shards_stop_when_the_supervisor_is_killed():
    s = Shards(2, "--durability", "memory")
    pids = [shard_pid(p) for p in s.ports]
    s.proc.kill()
    s.proc.wait()
    wait_until(lambda: not any(alive(p) for p in pids))
    s.stop()


def test_shards_from_a_cluster_file(tmp_path):
    """--shards N with --cluster-config: N nodes of a hand-written file on this machine (the rest elsewhere)."""
    from .cluster_servers import free_port_range, write_cluster_file

    base = free_port_range(3)
    path = str(tmp_path / "cluster.toml")
    write_cluster_file(path, [base, base + 1, base + 2], ["0-99", "100-16000", "16001-16383"])
    with open(path) as fh:
        original = fh.read()
    s = Shards(2, "--durability", "memory", "--cluster-config", path, base=base)
    try:
        for k, p in enumerate(s.ports):
            c = RawConn(p)
            nodes = c.call_raw("CLUSTER", "NODES").decode()
            assert f"127.0.0.1:{p}@{p + 10000} myself,master" in nodes and nodes.count(" connected ") == 3
            assert c.call_raw("GET", "{06S}") == (b"$-1\r\n" if k == 0 else b"-MOVED 0 127.0.0.1:%d\r\n" % base)
            assert c.call_raw("GET", "x") == b"-MOVED 16287 127.0.0.1:%d\r\n" % (base + 2)  # the node elsewhere
            c.close()
        c = RawConn(s.ports[0])
        assert c.call_raw("CLUSTER", "DELSLOTS", "5") == b"+OK\r\n"
        c.close()
        time.sleep(0.3)
        with open(path) as fh:
            assert fh.read() == original  # a hand-written file is not rewritten
        assert not os.path.exists(os.path.join(s.dir, "cluster.toml"))
    finally:
        s.stop()


@needs_node
@needs_redis
def test_two_shards_redis_py_and_bullmq(real):
    """``serve --shards 2`` (the issue's case): redis-py RedisCluster spreads keys over both shards, and BullMQ
    on an ioredis Cluster behaves as on a real Redis Cluster."""
    s = Shards(2)
    try:
        info = cluster_info(s.ports[1])
        assert info["cluster_state"] == "ok" and info["cluster_known_nodes"] == "2" and info["cluster_size"] == "2"
        rc = PyCluster(host="127.0.0.1", port=s.base, socket_timeout=20)
        try:
            for i in range(100):
                rc.set(f"two:{i}", i)
            assert [rc.get(f"two:{i}") for i in range(100)] == [str(i).encode() for i in range(100)]
        finally:
            rc.close()
        sizes = []
        for p in s.ports:
            c = RawConn(p)
            sizes.append(int(c.call_raw("DBSIZE")[1:-2]))
            c.close()
        assert sum(sizes) == 100 and min(sizes) > 20
        ours = run_node("bullmq", s.ports)
        assert ours == run_node("bullmq", real.ports)
        for q in ("alpha", "delta", "q2"):
            assert len(ours[q]) == 12 and [100, 1000, 3] in ours[q]
    finally:
        s.stop()

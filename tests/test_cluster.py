"""Cluster mode against a real Redis Cluster: slots, redirections, CLUSTER replies, scripts and MULTI.

A real 3-master Redis Cluster (redis-cli --cluster create) and a respqueue node whose cluster file splits the
slots the same way; both are "node 0" of their cluster. Replies are compared byte for byte once each node's
address and id are replaced by its index (the slot numbers are the same; the addresses differ).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import hiredis
import pytest

from .cluster_servers import RedisCluster, env, free_port_range, write_cluster_file
from .servers import RawConn, encode_command, start_respqueue

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None or shutil.which("redis-cli") is None,
    reason="redis-server and redis-cli are needed for the Redis Cluster reference",
)

RANGES = ["0-5460", "5461-10922", "10923-16383"]


@pytest.fixture(scope="module")
def real():
    c = RedisCluster(3)
    yield c
    c.stop()


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    d = tmp_path_factory.mktemp("cl")
    base = free_port_range(3)
    ports = [base, base + 1, base + 2]
    path = str(d / "cluster.toml")
    write_cluster_file(path, ports, RANGES)
    srv = start_respqueue("--cluster-config", path, "--durability", "memory", port=ports[0])
    srv.ports = ports
    yield srv
    srv.stop()


def node_ids(port: int) -> dict[int, bytes]:
    c = RawConn(port)
    raw = c.call_raw("CLUSTER", "NODES")
    c.close()
    rd = hiredis.Reader()
    rd.feed(raw)
    out = {}
    for line in rd.gets().decode().splitlines():
        f = line.split()
        out[int(f[1].split("@")[0].split(":")[1])] = f[0].encode()
    return out


class Pair:
    """Raw connections to node 0 of both clusters; replies normalised (addresses, ports and ids -> index)."""

    def __init__(self, ours_ports: list[int], their_ports: list[int]) -> None:
        self.maps = []
        for ports in (ours_ports, their_ports):
            ids = node_ids(ports[0])
            subs = []
            for k, p in enumerate(ports):
                subs += [
                    (b"127.0.0.1:%d@%d" % (p, p + 10000), b"ADDR%d@BUS" % k),
                    (b"127.0.0.1:%d" % p, b"ADDR%d" % k),
                    (b":%d\r\n" % p, b":PORT%d\r\n" % k),
                    (ids[p], b"ID%d" % k),
                ]
            self.maps.append(subs)
        self.ours = RawConn(ours_ports[0])
        self.theirs = RawConn(their_ports[0])
        self.ids = [node_ids(ours_ports[0]), node_ids(their_ports[0])]
        self.ports = [ours_ports, their_ports]

    def norm(self, side: int, raw: bytes) -> bytes:
        for a, b in self.maps[side]:
            raw = raw.replace(a, b)
        return raw

    def both(self, *args: object) -> tuple[bytes, bytes]:
        return self.norm(0, self.ours.call_raw(*args)), self.norm(1, self.theirs.call_raw(*args))

    def __call__(self, *args: object) -> bytes:
        a, b = self.both(*args)
        assert a == b, f"{args}: respqueue {a!r} != redis {b!r}"
        return a

    def node_id(self, side: int, k: int) -> bytes:
        return self.ids[side][self.ports[side][k]]

    def close(self) -> None:
        self.ours.close()
        self.theirs.close()


@pytest.fixture
def pair(node, real):
    p = Pair(node.ports, real.ports)
    for side in (p.ours, p.theirs):
        side.call_raw("FLUSHALL")
    yield p
    p.close()


def test_keyslot_many_keys(pair):
    rnd = random.Random(14)
    keys = [
        b"",
        b"{",
        b"}",
        b"{}",
        b"{}x",
        b"x{}",
        b"{a",
        b"a}",
        b"}{a}",
        b"{{a}}",
        b"a{b}{c}",
        b"{user1000}.following",
        b"bull:{q}:wait",
        b"{bull}:q:1",
        b"\x00\xff{\x00}",
        "ключ".encode(),
    ]
    for _ in range(400):
        n = rnd.randint(0, 24)
        k = bytes(rnd.choice(b"ab{}:xyz019\x00\xff") for _ in range(n))
        keys.append(k)
    for k in keys:
        pair.ours.send("CLUSTER", "KEYSLOT", k)
        pair.theirs.send("CLUSTER", "KEYSLOT", k)
    for k in keys:
        a, b = pair.ours.read_raw(), pair.theirs.read_raw()
        assert a == b, k


def test_python_key_slot_matches_redis(pair):
    from respqueue.cluster.slots import key_slot

    for k in (b"foo", b"{user1000}.following", b"a{}b", b"{06S}", b"bull:{jobs}:1"):
        assert b":%d\r\n" % key_slot(k) == pair.theirs.call_raw("CLUSTER", "KEYSLOT", k)


@pytest.mark.parametrize(
    "cmd",
    [
        ("GET", "foo"),
        ("GET", "b"),
        ("SET", "c", "1"),
        ("MGET", "a", "b"),
        ("MGET", "{a}x", "{a}y"),
        ("MSET", "b", "1", "{b}2", "2"),
        ("MSET", "b", "1", "k2", "2"),
        ("DEL", "b", "a"),
        ("XREAD", "STREAMS", "a", "b", "0", "0"),
        ("XREAD", "STREAMS", "b", "0"),
        ("ZUNIONSTORE", "b", "2", "{b}1", "{b}2"),
        ("ZUNIONSTORE", "b", "2", "{b}1", "a"),
        ("BLMPOP", "0.01", "2", "b", "k2", "LEFT"),
        ("EVAL", "return 1", "2", "a", "b"),
        ("EVAL", "return 1", "1", "a"),
        ("EVAL", "return 1", "0"),
        ("EVAL", "return 1", "x"),
        ("PING",),
        ("DBSIZE",),
        ("SELECT", "1"),
        ("SELECT", "0"),
        ("SELECT", "x"),
        ("SWAPDB", "0", "1"),
        ("MOVE", "a", "1"),
        ("MOVE", "b", "1"),
        ("COPY", "a", "c", "DB", "1"),
        ("COPY", "b", "{b}c", "DB", "1"),
        ("READONLY",),
        ("READWRITE",),
        ("ASKING",),
        ("INFO", "cluster"),
        ("SPUBLISH", "a", "x"),
        ("SPUBLISH", "b", "x"),
        ("WATCH", "a"),
        ("WATCH", "b", "k2"),
        ("OBJECT", "ENCODING", "a"),
        ("XINFO", "STREAM", "a"),
        ("GETKEYS",),
        ("MIGRATE", "127.0.0.1", "1", "b", "0", "1000"),
        ("MIGRATE", "127.0.0.1", "1", "a", "0", "1000"),
        ("MIGRATE", "127.0.0.1", "1", "", "0", "1000", "KEYS", "b", "{b}1"),
        ("MIGRATE", "127.0.0.1", "1", "", "0", "1000", "KEYS", "b", "a"),
        ("MIGRATE", "127.0.0.1", "1", "b", "0", "1000", "KEYS", "b"),
        ("MIGRATE", "127.0.0.1", "1", "b"),
        ("MIGRATE", "127.0.0.1", "1", "b", "0", "1000", "FOO"),
        ("MIGRATE", "127.0.0.1", "x", "b", "0", "1000"),
        ("CONFIG", "GET", "cluster-enabled"),
        ("BLPOP", "b", "k2", "0.01"),
        ("BLPOP", "b", "{b}1", "0.01"),
        ("ROLE",),
        ("WAIT", "0", "0"),
    ],
)
def test_redirections_match(pair, cmd):
    pair(*cmd)


def test_cluster_subcommand_errors_match(pair):
    for cmd in [
        ("CLUSTER", "KEYSLOT"),
        ("CLUSTER", "FOO"),
        ("CLUSTER", "COUNTKEYSINSLOT", "16384"),
        ("CLUSTER", "COUNTKEYSINSLOT", "-1"),
        ("CLUSTER", "COUNTKEYSINSLOT", "x"),
        ("CLUSTER", "GETKEYSINSLOT", "1", "-1"),
        ("CLUSTER", "GETKEYSINSLOT", "16384", "1"),
        ("CLUSTER", "GETKEYSINSLOT", "1", "x"),
        ("CLUSTER", "COUNT-FAILURE-REPORTS", "nosuch"),
        ("CLUSTER", "SETSLOT", "16384", "STABLE"),
        ("CLUSTER", "SETSLOT", "1", "STABLE", "x"),
        ("CLUSTER", "SETSLOT", "1", "FOO"),
        ("CLUSTER", "SETSLOT", "1", "MIGRATING", "nosuch"),
        ("CLUSTER", "SETSLOT", "1", "NODE", "nosuch"),
        ("CLUSTER", "HELP"),
        ("CLUSTER", "MYID", "x"),
        ("CLUSTER", "MYID"),
        ("CLUSTER", "RESET", "x"),
        ("CLUSTER", "ADDSLOTS", "1"),
        ("CLUSTER", "DELSLOTS", "x"),
        ("CLUSTER", "ADDSLOTSRANGE", "1"),
        ("CLUSTER", "REPLICAS", "nosuch"),
    ]:
        pair(*cmd)


def test_cluster_slots_and_shards(pair):
    pair("CLUSTER", "SLOTS")
    pair.ours.send("HELLO", "3")
    pair.theirs.send("HELLO", "3")
    pair.ours.read_raw()
    pair.theirs.read_raw()
    pair("CLUSTER", "SLOTS")
    for resp in (3, 2):
        pair.ours.send("HELLO", resp)
        pair.theirs.send("HELLO", resp)
        pair.ours.read_raw()
        pair.theirs.read_raw()
        a, b = pair.ours.call_raw("CLUSTER", "SHARDS"), pair.theirs.call_raw("CLUSTER", "SHARDS")
        assert sorted(shards(pair, 0, a)) == sorted(shards(pair, 1, b))
        assert len(shards(pair, 0, a)) == 3


def shards(pair: Pair, side: int, raw: bytes) -> list[str]:
    """CLUSTER SHARDS parsed, node ids and ports replaced by the node's index, one repr per shard."""
    rd = hiredis.Reader()
    rd.feed(raw)
    ports = pair.ports[side]
    ids = {v: k for k, v in ((ports.index(p), i) for p, i in pair.ids[side].items())}

    def walk(x: object) -> object:
        if isinstance(x, list):
            return [walk(y) for y in x]
        if isinstance(x, dict):
            return {walk(k): walk(v) for k, v in x.items()}
        if isinstance(x, bytes) and x in ids:
            return f"ID{ids[x]}"
        if isinstance(x, int) and x in ports:
            return f"PORT{ports.index(x)}"
        return x

    return [repr(walk(s)) for s in rd.gets()]


def test_cluster_nodes(pair):
    a, b = pair.both("CLUSTER", "NODES")

    def lines(raw: bytes) -> list[list[bytes]]:
        body = raw.split(b"\r\n", 1)[1][:-2]
        out = []
        for line in body.split(b"\n"):
            if line:
                f = line.split(b" ")
                f[5] = b"PONG"  # the time of the last pong
                out.append(f)
        return sorted(out)

    assert lines(a) == lines(b)
    assert len(lines(a)) == 3


def test_cluster_info(pair):
    a, b = pair.both("CLUSTER", "INFO")

    def fields(raw: bytes) -> dict[str, str]:
        body = raw.split(b"\r\n", 1)[1].decode()
        return dict(x.split(":", 1) for x in body.split("\r\n") if x)

    fa, fb = fields(a), fields(b)
    assert set(fa) <= set(fb)
    for k in fa:
        if "messages" not in k:
            assert fa[k] == fb[k], k
    assert fa["cluster_state"] == "ok" and fa["cluster_size"] == "3"


def test_countkeysinslot_getkeysinslot(pair):
    for k in ("b", "{b}1", "{b}3", "{b}2", "k2", "k3"):
        pair("SET", k, "v")
    pair("DEL", "{b}3")
    pair("SET", "{b}3", "again")
    pair("SET", "{b}1", "overwritten")
    for s in ("3300", "449", "4576", "0", "16383"):
        pair("CLUSTER", "COUNTKEYSINSLOT", s)
        for n in ("0", "1", "2", "10"):
            pair("CLUSTER", "GETKEYSINSLOT", s, n)
    pair("CLUSTER", "RESET")


def test_scripts_keep_to_local_keys(pair):
    for body, keys in [
        ("return redis.call('get', KEYS[1])", ["a"]),
        ("return redis.call('get', 'b')", []),
        ("return redis.call('get', 'a')", []),
        ("return redis.call('get', 'k1')", ["b"]),
        ("return redis.pcall('get', 'k1')", ["b"]),
        ("redis.call('set', 'b', 1); return redis.call('get', 'k2')", []),
        ("return redis.call('mget', 'k2', 'b')", []),
        ("return redis.pcall('mget', 'k2', 'b')", []),
        ("return redis.call('mget', 'b', '{b}1')", ["b"]),
        ("return redis.call('ping')", []),
        ("return redis.call('get', '{a}1')", []),
        ("#!lua flags=no-cluster\nreturn 1", []),
        ("#!lua flags=no-cluster\nreturn 1", ["b"]),
        ("#!lua flags=no-cluster\nreturn 1", ["a"]),
        ("#!lua flags=allow-cross-slot-keys\nreturn redis.call('get', 'k2')", ["b"]),
        ("return redis.call('select', '1')", []),
        ("return redis.call('cluster', 'keyslot', 'a')", []),
        ("return redis.call('publish', 'a', 'x')", []),
    ]:
        pair("EVAL", body, len(keys), *keys)
    pair("SCRIPT", "FLUSH")


def test_pipelined_script_calls_are_routed_each(pair):
    """A pipeline of EVALSHAs of one script is run as a run (protocol.py) while the slots are stable: each
    request is still routed on its own (MOVED, CROSSSLOT, a bad numkeys), in order, as Redis Cluster answers."""
    sha = pair("SCRIPT", "LOAD", "return redis.call('incr', KEYS[1])").decode().split("\r\n")[1]
    calls = [
        ("a", "{a}2"),
        ("b", "{b}x"),
        ("{b}y", "b"),
        ("a", "{a}1"),
        ("b", "a"),
        ("{b}1", "{b}2"),
        ("k1", "k1"),
        ("{b}1", "{b}1"),
        ("{b}", "b"),
        ("{}b", "{}b"),
    ]
    reqs = [("EVALSHA", sha, "2", *keys) for keys in calls]
    reqs += [("EVALSHA", sha, n, "b", "{b}1") for n in ("x", "-1", "3", "0")]
    reqs += [("EVALSHA", sha, "2", "b", "{b}x")]
    data = b"".join(encode_command(r) for r in reqs)
    got = []
    for side, conn in enumerate((pair.ours, pair.theirs)):
        conn.send_raw(data)
        got.append([pair.norm(side, conn.read_raw()) for _ in reqs])
    assert got[0] == got[1]
    assert b"MOVED" in b"".join(got[0]) and b"CROSSSLOT" in b"".join(got[0])
    pair("SCRIPT", "FLUSH")


def test_script_slot_follows_the_generic_rule():
    """slots.script_slot (compiled; a script call's routing while the slots are stable) against the generic
    rule: COMMAND GETKEYS's key positions for EVALSHA, then each key's CRC slot."""
    from respqueue.cluster.slots import key_slot, script_slot
    from respqueue.commands.introspection import _movable_keys
    from respqueue.resp import RedisError

    rnd = random.Random(7)
    pool = [b"b", b"a", b"{b}1", b"{b}", b"{}b", b"{b", b"x{b}y", b"{a}b", b"{bq0}:q:wait", b"{bq0}:q:1", b"", b"{b}}"]
    counts = [b"0", b"1", b"2", b"3", b"01", b"-1", b"+1", b" 1", b"1 ", b"x", b"", b"99999999999", b"4", b"10"]
    for _ in range(3000):
        argv = [b"EVALSHA", b"s" * 40, rnd.choice(counts)] + [rnd.choice(pool) for _ in range(rnd.randint(0, 5))]
        try:
            idx = _movable_keys("evalsha", argv)
        except RedisError:
            idx = []
        if not idx:
            want = -2
        else:
            slots = {key_slot(argv[i]) for i in idx}
            want = slots.pop() if len(slots) == 1 else -1
        assert script_slot(argv) == want, argv


def test_multi_keeps_to_one_slot(pair):
    for seq in [
        [("MULTI",), ("SET", "b", "1"), ("SET", "k2", "1"), ("EXEC",)],
        [("MULTI",), ("SET", "b", "1"), ("SET", "k1", "1"), ("EXEC",)],
        [("MULTI",), ("SET", "a", "1"), ("SET", "b", "1"), ("EXEC",)],
        [("MULTI",), ("SET", "{b}1", "1"), ("INCR", "{b}2"), ("GET", "b"), ("EXEC",)],
        [("MULTI",), ("SET", "b", "1"), ("MGET", "k2", "b"), ("EXEC",)],
        [("MULTI",), ("PING",), ("EXEC",)],
        [("MULTI",), ("SELECT", "1"), ("EXEC",)],
        [("GET", "b"), ("GET", "k2")],
    ]:
        for cmd in seq:
            pair(*cmd)


def test_migrating_and_importing_slot(pair):
    """ASK while a slot migrates (TRYAGAIN for a multi-key request that finds only some keys), ASKING for an
    importing slot, and the slot states in CLUSTER NODES."""
    pair("SET", "b", "here")
    for side, conn in ((0, pair.ours), (1, pair.theirs)):
        assert conn.call_raw("CLUSTER", "SETSLOT", "3300", "MIGRATING", pair.node_id(side, 1)) == b"+OK\r\n"
    try:
        for cmd in [
            ("GET", "b"),
            ("GET", "{b}x"),
            ("MGET", "b", "{b}x"),
            ("MGET", "{b}y", "{b}x"),
            ("SET", "{b}z", "1"),
            ("EVAL", "return redis.call('get', KEYS[1])", "1", "{b}x"),
            ("EVAL", "return redis.call('get', '{b}x')", "0"),
            ("CLUSTER", "COUNTKEYSINSLOT", "3300"),
            ("CLUSTER", "SETSLOT", "3300", "MIGRATING", "nosuch"),
            ("CLUSTER", "SETSLOT", "3300", "IMPORTING", "x"),
            ("CLUSTER", "SETSLOT", "100", "IMPORTING", pair.node_id(0, 1).decode()),
        ]:
            if cmd[-1] == pair.node_id(0, 1).decode():
                a = pair.norm(0, pair.ours.call_raw(*cmd))
                b = pair.norm(1, pair.theirs.call_raw(*cmd[:-1], pair.node_id(1, 1)))
                assert a == b
                continue
            pair(*cmd)
        a, b = pair.both("CLUSTER", "NODES")
        mine_a = [x for x in a.split(b"\n") if b"myself" in x][0]
        mine_b = [x for x in b.split(b"\n") if b"myself" in x][0]
        assert mine_a.split(b" ")[8:] == mine_b.split(b" ")[8:]
        assert b"[3300->-ID1]" in mine_a
    finally:
        for conn in (pair.ours, pair.theirs):
            conn.call_raw("CLUSTER", "SETSLOT", "3300", "STABLE")
    # importing: slot 7365 ("c") belongs to node 1; with ASKING node 0 serves it while importing it
    for side, conn in ((0, pair.ours), (1, pair.theirs)):
        assert conn.call_raw("CLUSTER", "SETSLOT", "7365", "IMPORTING", pair.node_id(side, 1)) == b"+OK\r\n"
    try:
        for cmd in [
            ("GET", "c"),
            ("ASKING",),
            ("GET", "c"),
            ("GET", "c"),
            ("ASKING",),
            ("SET", "c", "1"),
            ("ASKING",),
            ("MGET", "c", "{c}1"),
            ("ASKING",),
            ("MGET", "c", "c"),
            ("ASKING",),
            ("MULTI",),
            ("SET", "c", "2"),
            ("GET", "c"),
            ("EXEC",),
            ("GET", "c"),
            ("ASKING",),
            ("EVAL", "return redis.call('get', KEYS[1])", "1", "c"),
            ("ASKING",),
            ("EVAL", "return redis.call('get', 'c')", "0"),
            ("ASKING",),
            ("EVAL", "return redis.call('get', '{c}9')", "1", "c"),
        ]:
            pair(*cmd)
        a, b = pair.both("CLUSTER", "NODES")
        assert b"[7365-<-ID1]" in a
    finally:
        for conn in (pair.ours, pair.theirs):
            conn.call_raw("CLUSTER", "SETSLOT", "7365", "STABLE")
            conn.call_raw("FLUSHALL")


def test_unassigned_slot_is_clusterdown(pair):
    for cmd in [
        ("CLUSTER", "DELSLOTS", "100"),
        ("GET", "{06S}"),
        ("GET", "b"),
        ("PING",),
        ("CLUSTER", "DELSLOTS", "100"),
        ("CLUSTER", "DELSLOTSRANGE", "100", "99"),
        ("CLUSTER", "ADDSLOTS", "100", "100"),
    ]:
        pair(*cmd)
    a, b = pair.both("CLUSTER", "INFO")
    assert b"cluster_state:fail" in a and b"cluster_state:fail" in b
    assert b"cluster_slots_assigned:16383" in a
    pair("CLUSTER", "SLOTS")
    pair("CLUSTER", "ADDSLOTS", "100")
    pair("CLUSTER", "ADDSLOTS", "100")
    pair("GET", "{06S}")


def test_cluster_commands_when_disabled(diff):
    for cmd in [
        ("CLUSTER", "INFO"),
        ("CLUSTER", "KEYSLOT", "x"),
        ("CLUSTER", "HELP"),
        ("READONLY",),
        ("READWRITE",),
        ("ASKING",),
        ("CLUSTER", "NOPE"),
        ("INFO", "cluster"),
        ("CONFIG", "GET", "cluster-enabled"),
    ]:
        diff(*cmd)


def test_one_node_cluster_serves_every_slot():
    srv = start_respqueue("--cluster-enabled", "yes", "--durability", "memory")
    try:
        c = RawConn(srv.port)
        assert c.call_raw("SET", "a", "1") == b"+OK\r\n"
        assert c.call_raw("MGET", "a", "b") == b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
        slots = c.call_raw("CLUSTER", "SLOTS")
        assert slots.startswith(b"*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:%d\r\n" % srv.port)
        assert b"cluster_enabled:1" in c.call_raw("INFO", "cluster")
        assert b"redis_mode:cluster" in c.call_raw("INFO", "server")
        c.close()
    finally:
        srv.stop()


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "respqueue", "serve", *args], capture_output=True, text=True, timeout=60, env=env()
    )


@pytest.mark.parametrize(
    "text,message",
    [
        ("", "no [[node]] tables"),
        (
            "[[node]]\nport = 7000\nslots = '0-100'\n[[node]]\nport = 7001\nslots = '100-200'\n",
            "slot 100 is already served",
        ),
        ("[[node]]\nport = 7000\nslots = '0-16384'\n", "outside 0-16383"),
        ("[[node]]\nport = 'x'\n", "port must be an integer"),
        ("[[node]]\nport = 7000\nid = 'abc'\n", "id must be 40"),
        ("[[node]]\nport = 7000\ncolor = 'red'\n", "unknown setting 'color'"),
        ("[[node]]\nport = 7001\n", "not in the cluster file"),
        ("[[node\n", "is not valid TOML"),
    ],
)
def test_bad_cluster_file(text, message):
    d = tempfile.mkdtemp(prefix="rq-clfile-")
    path = os.path.join(d, "c.toml")
    with open(path, "w") as fh:
        fh.write(text)
    p = _serve("--port", "7000", "--dir", d, "--cluster-config", path)
    assert p.returncode == 2
    assert "bad configuration" in p.stderr and message in p.stderr, p.stderr


def test_bad_shards_flag():
    p = _serve("--port", "0", "--shards", "2")
    assert p.returncode == 2 and "needs a fixed --port" in p.stderr
    p = _serve("--port", "7000", "--shards", "lots")
    assert p.returncode == 2 and "--shards must be a number or auto" in p.stderr


def test_moved_address_is_the_owner(node):
    """MOVED names the node the cluster file gives the slot to."""
    c = RawConn(node.port)
    assert c.call_raw("GET", "c") == b"-MOVED 7365 127.0.0.1:%d\r\n" % node.ports[1]
    assert c.call_raw("GET", "a") == b"-MOVED 15495 127.0.0.1:%d\r\n" % node.ports[2]
    assert re.match(rb"\$40\r\n[0-9a-f]{40}\r\n", c.call_raw("CLUSTER", "MYID"))
    shard = c.call_raw("CLUSTER", "MYSHARDID")  # Redis 7.2 (the reference, 7.0, lacks it)
    assert re.match(rb"\$40\r\n[0-9a-f]{40}\r\n", shard) and shard != c.call_raw("CLUSTER", "MYID")
    assert c.call_raw("CLUSTER", "MYSHARDID") == shard
    c.close()


def test_saveconfig_writes_the_nodes_view(node, tmp_path):
    """A hand-written cluster file is not rewritten by slot changes; CLUSTER SAVECONFIG writes this node's view
    (ids included), and that file starts the same node again."""
    path = node.proc.args[node.proc.args.index("--cluster-config") + 1]
    with open(path) as fh:
        original = fh.read()
    c = RawConn(node.port)
    try:
        assert c.call_raw("CLUSTER", "DELSLOTS", "5") == b"+OK\r\n"
        with open(path) as fh:
            assert fh.read() == original
        assert c.call_raw("CLUSTER", "SAVECONFIG") == b"+OK\r\n"
        myid = c.call_raw("CLUSTER", "MYID")[5:45].decode()
    finally:
        c.call_raw("CLUSTER", "ADDSLOTS", "5")
        c.close()
    from respqueue.cluster.topology import load_file

    saved = load_file(path)
    assert saved[0][0].id == myid and saved[0][1] == [(0, 4), (6, 5460)]
    assert [(n.port, r) for n, r in saved[1:]] == [(node.ports[1], [(5461, 10922)]), (node.ports[2], [(10923, 16383)])]
    with open(path, "w") as fh:
        fh.write(original)


def test_node_finds_itself_by_its_own_address(tmp_path):
    """Nodes on different machines often share a port: listening on 0.0.0.0, a node picks the entry whose
    host is one of its own addresses (192.0.2.1 is a documentation address, never local)."""
    base = free_port_range(1)
    path = str(tmp_path / "c.toml")
    with open(path, "w") as fh:
        fh.write(
            f'[[node]]\nhost = "192.0.2.1"\nport = {base}\nslots = "0-8191"\n\n'
            f'[[node]]\nhost = "127.0.0.1"\nport = {base}\nslots = "8192-16383"\n'
        )
    srv = start_respqueue("--host", "0.0.0.0", "--cluster-config", path, "--durability", "memory", port=base)
    try:
        c = RawConn(base)
        assert c.call_raw("GET", "a") == b"$-1\r\n"  # slot 15495: this node
        assert c.call_raw("GET", "b") == b"-MOVED 3300 192.0.2.1:%d\r\n" % base
        nodes = c.call_raw("CLUSTER", "NODES").decode()
        assert f"127.0.0.1:{base}@{base + 10000} myself,master" in nodes
        c.close()
    finally:
        srv.stop()


def test_cluster_reset_forgets_the_cluster(tmp_path):
    base = free_port_range(2)
    path = str(tmp_path / "c.toml")
    write_cluster_file(path, [base, base + 1], ["0-8191", "8192-16383"])
    srv = start_respqueue("--cluster-config", path, "--durability", "memory", port=base)
    try:
        c = RawConn(base)
        myid = c.call_raw("CLUSTER", "MYID")
        assert c.call_raw("SET", "b", "1") == b"+OK\r\n"
        assert (
            c.call_raw("CLUSTER", "RESET")
            == b"-ERR CLUSTER RESET can't be called with master nodes containing keys\r\n"
        )
        c.call_raw("FLUSHALL")
        assert c.call_raw("CLUSTER", "RESET", "SOFT") == b"+OK\r\n"
        assert c.call_raw("CLUSTER", "MYID") == myid
        info = c.call_raw("CLUSTER", "INFO")
        assert (
            b"cluster_state:fail" in info
            and b"cluster_known_nodes:1\r\n" in info
            and b"cluster_slots_assigned:0" in info
        )
        assert c.call_raw("GET", "b") == b"-CLUSTERDOWN Hash slot not served\r\n"
        assert c.call_raw("CLUSTER", "SLOTS") == b"*0\r\n"
        assert c.call_raw("CLUSTER", "ADDSLOTSRANGE", "0", "16383") == b"+OK\r\n"
        assert c.call_raw("GET", "b") == b"$-1\r\n"
        c.call_raw("CLUSTER", "FLUSHSLOTS")
        assert c.call_raw("CLUSTER", "RESET", "HARD") == b"+OK\r\n"
        assert c.call_raw("CLUSTER", "MYID") != myid
        c.close()
    finally:
        srv.stop()


def test_migrate_between_standalone_servers(r, ref, redis_ref):
    """MIGRATE outside cluster mode, from respqueue to a Redis server: every type, TTL, COPY, REPLACE, BUSYKEY."""
    ref.flushall()
    r.set("s", "v", px=50000)
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.rpush("l", *range(700))
    r.sadd("set", "x", "y")
    r.zadd("z", {"a": 1.25, "b": float("-inf")})
    r.xadd("x", {"f": "1"}, id="5-1")
    r.xgroup_create("x", "g", id="0")
    r.xreadgroup("g", "c", {"x": ">"})
    port = redis_ref.port
    assert r.execute_command("MIGRATE", "127.0.0.1", port, "", 0, 5000, "KEYS", "s", "h", "l", "set", "z", "x") == b"OK"
    assert r.dbsize() == 0
    assert ref.get("s") == b"v" and 0 < ref.pttl("s") <= 50000
    assert ref.hgetall("h") == {b"a": b"1", b"b": b"2"}
    assert ref.lrange("l", 0, -1) == [str(i).encode() for i in range(700)]
    assert ref.smembers("set") == {b"x", b"y"}
    assert ref.zrange("z", 0, -1, withscores=True) == [(b"b", float("-inf")), (b"a", 1.25)]
    assert ref.xrange("x") == [(b"5-1", {b"f": b"1"})]
    assert ref.xpending("x", "g")["pending"] == 1
    r.set("s", "again")
    with pytest.raises(Exception, match="BUSYKEY Target key name already exists"):
        r.execute_command("MIGRATE", "127.0.0.1", port, "s", 0, 5000, "COPY")
    assert r.execute_command("MIGRATE", "127.0.0.1", port, "s", 0, 5000, "COPY", "REPLACE") == b"OK"
    assert r.get("s") == b"again" and ref.get("s") == b"again"
    assert r.execute_command("MIGRATE", "127.0.0.1", port, "nosuch", 0, 5000) == b"NOKEY"
    with pytest.raises(Exception, match="IOERR error or timeout connecting to the client"):
        r.execute_command("MIGRATE", "127.0.0.1", 1, "s", 0, 1000)
    ref.flushall()


def test_keysinslot_index_after_deletes_expiries_renames_and_flushall(pair):
    """The per-slot index (respqueue/cluster/keyindex.py) against Redis: many keys over a few slots, deleted,
    re-created (which moves a key to the front), renamed, expired and flushed."""
    import time

    from respqueue.cluster.slots import key_slot

    tags = [t for t in (f"t{i}" for i in range(40)) if key_slot(t.encode()) <= 5460][:6]
    slots = [str(key_slot(t.encode())) for t in tags]

    def compare() -> None:
        for s in slots:
            pair("CLUSTER", "COUNTKEYSINSLOT", s)
            for n in ("1", "7", "1000"):
                pair("CLUSTER", "GETKEYSINSLOT", s, n)

    compare()  # the index is made here, then kept up to date
    for i in range(300):
        pair("SET", f"{{{tags[i % len(tags)]}}}k{i}", "v")
    compare()
    for i in range(0, 300, 3):
        pair("DEL", f"{{{tags[i % len(tags)]}}}k{i}")
    for i in range(0, 60, 6):
        pair("SET", f"{{{tags[i % len(tags)]}}}k{i}", "back")
    for i in range(1, 60, 9):
        pair("RENAME", f"{{{tags[i % len(tags)]}}}k{i}", f"{{{tags[i % len(tags)]}}}renamed{i}")
    for i in range(2, 300, 5):
        pair("PEXPIRE", f"{{{tags[i % len(tags)]}}}k{i}", "1")
    pair("SET", f"{{{tags[0]}}}gone", "v", "PX", "1")
    time.sleep(0.05)
    for i in range(2, 300, 5):
        pair("EXISTS", f"{{{tags[i % len(tags)]}}}k{i}")
    pair("EXISTS", f"{{{tags[0]}}}gone")
    compare()
    pair("FLUSHALL")
    compare()
    for i in range(20):
        pair("RPUSH", f"{{{tags[i % 2]}}}l{i}", "x")
    compare()

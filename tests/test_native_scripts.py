"""Native BullMQ script paths (compat/native/) against the Lua path as the oracle.

Two respqueue servers run the same EVAL/EVALSHA workload, one with
``--native-scripts off`` (Lua) and one with ``on``; every reply and, after every
step, the whole keyspace (types, values in order, TTL presence, stream entries
without their time-based IDs) must be identical. The script bodies are BullMQ's
own, read at test time from interop/node_modules (bullmq 6.7.0) and the installed
Python bullmq package; none is stored in the repository.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compat.scripts import SCRIPTS

from .servers import ROOT, ServerProcess, start_respqueue

NODE_DIR = os.path.join(ROOT, "interop", "node_modules", "bullmq", "dist", "cjs", "scripts")
WANTED = ("addStandardJob-9", "moveToActive-11", "addPrioritizedJob-9", "addDelayedJob-6", "moveToFinished-14")


def _node_bodies() -> dict[str, bytes]:
    if not os.path.isdir(NODE_DIR) or shutil.which("node") is None:
        return {}
    js = (
        "const out={};for(const n of process.argv.slice(1)){const m=require(process.env.D+'/'+n+'.js');"
        "for(const k of Object.keys(m)){if(m[k]&&m[k].content)out[n]=m[k].content;}}"
        "process.stdout.write(JSON.stringify(out));"
    )
    p = subprocess.run(["node", "-e", js, *WANTED], capture_output=True, env={**os.environ, "D": NODE_DIR}, timeout=60)
    if p.returncode != 0:
        return {}
    return {k: v.encode() for k, v in json.loads(p.stdout).items()}


def _py_bodies() -> dict[str, bytes]:
    try:
        import bullmq
    except ImportError:
        return {}
    d = os.path.join(os.path.dirname(bullmq.__file__), "commands")
    out = {}
    for n in WANTED:
        f = os.path.join(d, n + ".lua")
        if os.path.exists(f):
            with open(f, "rb") as fh:
                out[n] = fh.read()
    return out


NODE = _node_bodies()
PY = _py_bodies()
needs_node = pytest.mark.skipif(len(NODE) != len(WANTED), reason="interop/node_modules (bullmq 6.7.0) or node missing")
needs_py = pytest.mark.skipif("addStandardJob-9" not in PY, reason="Python bullmq package not installed")


def sha(body: bytes) -> str:
    return hashlib.sha1(body).hexdigest()


class Pair:
    """The same commands on the Lua server and the native server."""

    def __init__(self, lua: ServerProcess, nat: ServerProcess) -> None:
        self.lua_srv, self.nat_srv = lua, nat
        self.lua = redis.Redis(port=lua.port)
        self.nat = redis.Redis(port=nat.port)
        self.bodies: dict[str, bytes] = {}

    def both(self, *args: Any) -> Any:
        a = _run(self.lua, args)
        b = _run(self.nat, args)
        assert _norm(a) == _norm(b), f"replies differ for {args[:1]}: lua={a!r} native={b!r}"
        return a

    def script(self, body: bytes, keys: list[bytes], argv: list[Any], by_sha: bool = True) -> Any:
        if by_sha:
            r = self.both("EVALSHA", sha(body), len(keys), *keys, *argv)
            assert not (isinstance(r, tuple) and "No matching script" in r[1]), "not loaded: the test compares nothing"
            return r
        return self.both("EVAL", body, len(keys), *keys, *argv)

    def load(self, body: bytes) -> None:
        self.both("SCRIPT", "LOAD", body)

    def compare(self) -> None:
        da, db = dump(self.lua), dump(self.nat)
        if da != db:
            diffs = [k for k in sorted(set(da) | set(db)) if da.get(k) != db.get(k)]
            k = diffs[0]
            raise AssertionError(f"keyspaces differ at {k!r}: lua={da.get(k)!r} native={db.get(k)!r} (all: {diffs})")

    def flush(self) -> None:
        self.lua.flushall()
        self.nat.flushall()

    def close(self) -> None:
        self.lua.close()
        self.nat.close()


def _run(r: redis.Redis, args: tuple[Any, ...]) -> Any:
    try:
        return r.execute_command(*args)
    except redis.ResponseError as e:
        return ("error", str(e))


def _norm(x: Any) -> Any:
    if isinstance(x, list):
        return [_norm(v) for v in x]
    return x


def dump(r: redis.Redis, sort_hashes: bool = False) -> dict[bytes, Any]:
    out: dict[bytes, Any] = {}
    for k in sorted(r.keys("*")):
        t = r.type(k)
        if t == b"string":
            v: Any = r.get(k)
        elif t == b"hash":
            v = list(r.hgetall(k).items())
            if sort_hashes:
                v.sort()
        elif t == b"list":
            v = r.lrange(k, 0, -1)
        elif t == b"set":
            v = sorted(r.smembers(k))
        elif t == b"zset":
            v = r.zrange(k, 0, -1, withscores=True)
        elif t == b"stream":
            ents = r.xrange(k)
            # IDs are time based: keep the fields and whether consecutive entries share a millisecond
            v = (r.xlen(k), [sorted(f.items()) for _, f in ents])
        else:
            continue  # expired meanwhile
        pttl = r.pttl(k)
        out[k] = (t, v, "ttl" if pttl > 0 else pttl)
    return out


def assert_restarts_same(workdir: str, port: int, before: dict[bytes, Any]) -> None:
    """A durable server restarted from ``workdir``'s store on ``port`` holds ``before`` (a :func:`dump` with
    hash fields sorted: recovery does not keep their insertion order)."""
    srv = start_respqueue("--durability", "durable", workdir=workdir, port=port)
    try:
        r = redis.Redis(port=srv.port)
        assert dump(r, sort_hashes=True) == before
        r.close()
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    lua = start_respqueue("--durability", "memory", "--native-scripts", "off", "--log-level", "debug")
    nat = start_respqueue("--durability", "memory", "--native-scripts", "on", "--log-level", "debug")
    yield lua, nat
    lua.stop()
    nat.stop()


@pytest.fixture
def pair(servers: tuple[ServerProcess, ServerProcess]) -> Iterator[Pair]:
    p = Pair(*servers)
    p.flush()
    p.both("SCRIPT", "FLUSH")
    yield p
    p.close()


# ---- BullMQ-shaped arguments ---------------------------------------------------------
Q = b"bull:q:"
ADD_KEYS = [Q + s for s in (b"wait", b"paused", b"meta", b"id", b"completed", b"delayed", b"active", b"events", b"marker")]
PRIO_KEYS = [Q + s for s in (b"marker", b"meta", b"id", b"prioritized", b"delayed", b"completed", b"active", b"events", b"pc")]
DELAY_KEYS = [Q + s for s in (b"marker", b"meta", b"id", b"delayed", b"completed", b"events")]
MTA_KEYS = [Q + s for s in (b"wait", b"active", b"prioritized", b"events", b"stalled", b"limiter", b"delayed", b"paused",
                            b"meta", b"pc", b"marker")]
TS = 1763700000000


def add_args(custom_id: str = "", name: str = "job", ts: Any = TS, data: str = '{"i":1}', opts: dict[str, Any] | None = None,
             rjk: str | None = None, parent: bool = False, prefix: bytes = Q) -> list[bytes]:
    a: list[Any] = [prefix, custom_id, name, ts, None, None, None, rjk, None]
    if parent:
        a[4] = b"bull:p:1"
        a[5] = b"bull:p:1:dependencies"
        a[6] = {"id": "1", "queueKey": "bull:p"}
    o = {"attempts": 0} if opts is None else opts
    return [msgpack.packb(a), data.encode(), msgpack.packb(o)]


def mta_args(ts: int = TS + 5, token: Any = "tok-1", lock: Any = 30000, name: str | None = None,
             limiter: Any = None) -> list[bytes]:
    o: dict[str, Any] = {"token": token, "lockDuration": lock}
    if limiter is not None:
        o["limiter"] = limiter
    if name is not None:
        o["name"] = name
    return [Q, str(ts).encode(), msgpack.packb(o)]


def finish_args(job_id: bytes, token: str = "tok-1", ts: int = TS + 9, fetch: int = 0, target: str = "completed",
                keep: Any = -1, attempts: Any = 1, metrics: Any = "", name: str | None = None,
                limiter: Any = None) -> tuple[list[bytes], list[Any]]:
    keys = [Q + s for s in (b"wait", b"active", b"prioritized", b"events", b"stalled", b"limiter", b"delayed", b"paused",
                            b"meta", b"pc", target.encode())] + [Q + job_id, Q + b"metrics:" + target.encode(), Q + b"marker"]
    opts: dict[str, Any] = {"token": token, "keepJobs": {"count": keep} if keep is not None else {}, "lockDuration": 30000,
                            "attempts": attempts, "maxMetricsSize": metrics,
                            "fpof": False, "cpof": False, "idof": False, "rdof": False}
    if name is not None:
        opts["name"] = name
    if limiter is not None:
        opts["limiter"] = limiter
    prop = "returnvalue" if target == "completed" else "failedReason"
    return keys, [job_id, ts, prop, "42" if target == "completed" else "boom", target, fetch, Q, msgpack.packb(opts)]


def native_log_count(srv: ServerProcess, what: str) -> int:
    return srv.output().count(what)


# ---- the table -------------------------------------------------------------------------
def send_run(port: int, data: bytes, n: int) -> list[Any]:
    """Send ``data`` (``n`` requests, one write: a run) and read the ``n`` replies, errors as ("error", text)."""
    import hiredis

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sk:
        sk.sendall(data)
        rd = hiredis.Reader()
        got: list[Any] = []
        while len(got) < n:
            rd.feed(sk.recv(1 << 20))
            while (x := rd.gets()) is not False:
                got.append(("error", str(x)) if isinstance(x, hiredis.ReplyError) else x)
    return got


def test_sha_table_matches_bodies() -> None:
    bodies = {("node-6.7.0", k): v for k, v in NODE.items()} | {("py-3.4.4", k): v for k, v in PY.items()}
    if not bodies:
        pytest.skip("no BullMQ script bodies available")
    for (rel, fname), body in bodies.items():
        name, nk = fname.rsplit("-", 1)
        ent = SCRIPTS.get(sha(body).encode())
        assert ent is not None, f"{rel} {fname} not in compat.scripts.SCRIPTS"
        assert ent[0] == name and ent[1] == int(nk) and rel in ent[2]


# ---- scripted scenarios --------------------------------------------------------------------
@needs_node
def test_add_and_fetch_scripted(pair: Pair) -> None:
    add, mta = NODE["addStandardJob-9"], NODE["moveToActive-11"]
    nat = pair.nat_srv
    before = native_log_count(nat, "native addStandardJob: ran")
    # first call by EVAL (as ioredis does), then EVALSHA
    assert pair.script(add, ADD_KEYS, add_args(), by_sha=False) == b"1"
    pair.compare()
    for i in range(5):
        pair.script(add, ADD_KEYS, add_args(name=f"n{i}", data=json.dumps({"i": i})))
        pair.compare()
    pair.script(add, ADD_KEYS, add_args(custom_id="custom-1", opts={"lifo": True, "attempts": 3, "backoff": {"type": "fixed", "delay": 5}}))
    pair.script(add, ADD_KEYS, add_args(rjk="repeat:abc:1", ts=float(TS)))
    pair.compare()
    assert native_log_count(nat, "native addStandardJob: ran") - before == 8
    before = native_log_count(nat, "native moveToActive: ran")
    pair.load(mta)
    for i in range(10):
        r = pair.script(mta, MTA_KEYS, mta_args(token=f"t{i}", name="w1" if i % 2 else None))
        pair.compare()
        if i < 8:
            assert isinstance(r, list) and r[1] and r[0] and r[2:] == [0, 0], r
        else:
            assert r == [0, 0, 0, 0]
    assert native_log_count(nat, "native moveToActive: ran") - before == 10


@needs_node
def test_meta_variants(pair: Pair) -> None:
    add, mta = NODE["addStandardJob-9"], NODE["moveToActive-11"]
    pair.load(add)
    pair.load(mta)
    pair.both("HSET", Q + b"meta", "opts.maxLenEvents", "3")
    for _ in range(12):
        pair.script(add, ADD_KEYS, add_args())
        pair.compare()
    pair.both("HSET", Q + b"meta", "paused", "1")
    pair.script(add, ADD_KEYS, add_args())  # no marker while paused
    assert pair.script(mta, MTA_KEYS, mta_args()) == [0, 0, 0, 0]
    pair.compare()
    pair.both("HDEL", Q + b"meta", "paused")
    pair.both("HSET", Q + b"meta", "concurrency", "2")
    for _ in range(4):
        pair.script(mta, MTA_KEYS, mta_args(token="0"))  # token "0": no lock
        pair.compare()
    pair.script(add, ADD_KEYS, add_args())  # maxed: no marker
    pair.compare()
    pair.both("HSET", Q + b"meta", "concurrency", "x")  # tonumber(nil) error: Lua decides
    pair.script(add, ADD_KEYS, add_args())
    pair.script(mta, MTA_KEYS, mta_args())
    pair.compare()


@needs_node
def test_prioritized_and_delayed(pair: Pair) -> None:
    add, mta = NODE["addStandardJob-9"], NODE["moveToActive-11"]
    prio, delayed = NODE["addPrioritizedJob-9"], NODE["addDelayedJob-6"]
    for b in (add, mta, prio, delayed):
        pair.load(b)
    for p in (3, 1, 2):
        pair.script(prio, PRIO_KEYS, add_args(opts={"priority": p}))
    pair.compare()
    # empty wait: prioritized -> active (native), then pc deleted when empty
    for _ in range(4):
        pair.script(mta, MTA_KEYS, mta_args())
        pair.compare()
    # a delayed job in the future: the marker timestamp comes back (fractional -> truncated)
    pair.script(delayed, DELAY_KEYS, add_args(opts={"delay": 12345}))
    pair.compare()
    r = pair.script(mta, MTA_KEYS, mta_args())
    assert r[3] == TS + 12345
    # once due, promotion runs (native falls back to Lua for it)
    r = pair.script(mta, MTA_KEYS, mta_args(ts=TS + 20000))
    assert r[1]
    pair.compare()


@needs_node
def test_fallbacks_and_errors(pair: Pair) -> None:
    add, mta = NODE["addStandardJob-9"], NODE["moveToActive-11"]
    pair.load(add)
    pair.load(mta)
    nat = pair.nat_srv
    fb = native_log_count(nat, "Lua fallback")
    pair.script(add, ADD_KEYS, add_args(custom_id="dup"))
    pair.script(add, ADD_KEYS, add_args(custom_id="dup"))  # duplicated: Lua
    pair.script(add, ADD_KEYS, add_args(parent=True))  # missing parent -5: Lua
    pair.script(add, ADD_KEYS, add_args(opts={"de": {"id": "d1"}}))  # deduplication: Lua
    pair.compare()
    pair.both("SET", Q + b"events", "x")  # WRONGTYPE inside the script
    pair.script(add, ADD_KEYS, add_args())
    pair.script(mta, MTA_KEYS, mta_args())
    pair.compare()
    pair.both("DEL", Q + b"events")
    pair.both("SET", Q + b"id", "99999999999999")  # counter past %.14g
    pair.script(add, ADD_KEYS, add_args())
    pair.both("SET", Q + b"id", "notanumber")
    pair.script(add, ADD_KEYS, add_args())
    pair.compare()
    pair.both("SET", Q + b"id", "5")
    pair.both("HSET", Q + b"meta", "opts.maxLenEvents", "abc")
    pair.script(add, ADD_KEYS, add_args())
    pair.both("HDEL", Q + b"meta", "opts.maxLenEvents")
    pair.both("RPUSH", Q + b"wait", "0:123")  # legacy marker at the tail
    pair.script(mta, MTA_KEYS, mta_args())
    pair.script(mta, MTA_KEYS, mta_args(limiter={"max": 1, "duration": 1000}))
    pair.script(mta, MTA_KEYS, mta_args(lock=1.5))
    pair.script(mta, MTA_KEYS, mta_args(token=None))
    pair.compare()
    # malformed calls: errors must match
    pair.script(add, ADD_KEYS, [b"\xc1", b"{}", b"\x80"])
    pair.script(add, ADD_KEYS[:8], add_args())
    pair.script(mta, MTA_KEYS, [Q, b"abc", msgpack.packb({"token": "t", "lockDuration": 1000})])
    pair.both("EVALSHA", sha(add), "9", *ADD_KEYS)
    pair.compare()
    assert native_log_count(nat, "Lua fallback") - fb >= 12


@needs_node
def test_noscript_and_script_cache(pair: Pair) -> None:
    add = NODE["addStandardJob-9"]
    r = pair.both("EVALSHA", sha(add), 9, *ADD_KEYS, *add_args())
    assert r[0] == "error" and "No matching script" in r[1]
    pair.script(add, ADD_KEYS, add_args(), by_sha=False)
    assert pair.both("SCRIPT", "EXISTS", sha(add)) == [1]
    pair.both("EVALSHA", sha(add).upper(), 9, *ADD_KEYS, *add_args())
    pair.compare()


@needs_node
def test_inside_multi(pair: Pair) -> None:
    add, mta = NODE["addStandardJob-9"], NODE["moveToActive-11"]
    pair.load(add)
    pair.load(mta)
    for r in (pair.lua, pair.nat):
        p = r.pipeline(transaction=True)
        for i in range(3):
            p.execute_command("EVAL", add, 9, *ADD_KEYS, *add_args(name=f"m{i}"))
        p.execute_command("EVALSHA", sha(mta), 11, *MTA_KEYS, *mta_args())
        p.execute()
    pair.compare()


@needs_node
def test_finish_cycle(pair: Pair) -> None:
    add, mta, fin = NODE["addStandardJob-9"], NODE["moveToActive-11"], NODE["moveToFinished-14"]
    prio = NODE["addPrioritizedJob-9"]
    for b in (add, mta, fin, prio):
        pair.load(b)
    before = native_log_count(pair.nat_srv, "native moveToFinished: ran")
    for _ in range(6):
        pair.script(add, ADD_KEYS, add_args())
    r = pair.script(mta, MTA_KEYS, mta_args())
    # complete and fetch the next one, as a Worker does
    for i in range(5):
        keys, argv = finish_args(r[1], fetch=1, name="w" if i % 2 else None)
        r = pair.script(fin, keys, argv)
        pair.compare()
        assert isinstance(r, list) and r[1], r
    # the last one: nothing to fetch -> drained
    keys, argv = finish_args(r[1], fetch=1)
    assert pair.script(fin, keys, argv) == 0
    pair.compare()
    assert native_log_count(pair.nat_srv, "native moveToFinished: ran") - before == 6
    # failed, removeOnComplete, wrong lock, missing job, not active, prioritized fetch, metrics (Lua)
    for _ in range(5):
        pair.script(add, ADD_KEYS, add_args())
    pair.script(prio, PRIO_KEYS, add_args(opts={"priority": 2}))
    ids = [pair.script(mta, MTA_KEYS, mta_args())[1] for _ in range(4)]
    cases = [
        finish_args(ids[0], target="failed", attempts=1),
        finish_args(ids[1], keep=0, fetch=1),
        finish_args(ids[2], token="other"),
        finish_args(b"nope"),
        finish_args(ids[0]),  # no longer active (and lock gone)
        finish_args(ids[2], target="failed", attempts=3, metrics=100),
        finish_args(ids[3], keep=None, fetch=1),
    ]
    for keys, argv in cases:
        pair.script(fin, keys, argv)
        pair.compare()
    pair.both("HSET", Q + b"meta", "paused", "1")
    r = pair.script(mta, MTA_KEYS, mta_args())
    pair.compare()



@needs_node
@pytest.mark.parametrize("watched", ["wait", "active", "completed", "job", "next", "next:lock", "events"])
def test_finish_and_fetch_dirty_watched_keys(pair: Pair, watched: str) -> None:
    """moveToFinished with fetch makes several writes inline (LREM active, RPOPLPUSH wait -> active, ZADD of
    the finished job, the job hash's HINCRBY + HSET, the next job's lock SET PX and its HMSET + HINCRBY), some
    signalled once for two writes: a WATCH on each key they write fails the transaction, as on the Lua path.
    Two runs: with a job left waiting after the fetch, and with the fetch emptying wait (and the LREM active)."""
    add, mta, fin = NODE["addStandardJob-9"], NODE["moveToActive-11"], NODE["moveToFinished-14"]
    for n_jobs in (3, 2):
        pair.flush()
        for b in (add, mta, fin):
            pair.load(b)
        for _ in range(n_jobs):
            pair.script(add, ADD_KEYS, add_args())
        first = pair.script(mta, MTA_KEYS, mta_args())[1]
        nxt = b"%d" % (int(first) + 1)
        key = {"job": Q + first, "next": Q + nxt, "next:lock": Q + nxt + b":lock"}.get(watched, Q + watched.encode())
        keys, argv = finish_args(first, fetch=1, name="w")
        got = []
        for srv in (pair.lua_srv, pair.nat_srv):
            w = redis.Redis(port=srv.port)
            r = redis.Redis(port=srv.port)
            p = w.pipeline(transaction=True)
            p.watch(key)
            reply = r.evalsha(sha(fin), len(keys), *keys, *argv)
            p.multi()
            p.get(b"x")
            try:
                p.execute()
                got.append(("exec ran", reply[1]))
            except redis.WatchError:
                got.append(("watch error", reply[1]))
            w.close()
            r.close()
        assert got == [("watch error", nxt)] * 2, (watched, n_jobs, got)
        pair.compare()


@needs_node
def test_active_reply_fields_of_every_length(pair: Pair) -> None:
    """moveToActive's reply (the job hash flattened, pre-encoded natively) is Lua's byte for byte: field names
    the reply's memo of names has seen before and new ones, values and names longer than its header table
    (1024 bytes: the pack_command path), an empty value."""
    add, mta = NODE["addStandardJob-9"], NODE["moveToActive-11"]
    for b in (add, mta):
        pair.load(b)
    datas = ['{"i":1}', '{"x":"' + "d" * 1100 + '"}', '{"y":2}', "", '{"z":3}']
    for i, data in enumerate(datas):
        pair.script(add, ADD_KEYS, add_args(data=data, name="n" * (i * 300)))
    pair.both("HSET", Q + b"3", b"f" * 1500, "v")
    pair.both("HSET", Q + b"4", "extra", "")
    for _ in datas:
        r = pair.script(mta, MTA_KEYS, mta_args())
        assert isinstance(r, list) and r[1], r
        pair.compare()

@needs_node
def test_queue_keys_with_a_ttl(pair: Pair) -> None:
    """A queue key that has a TTL is looked up as Lua's redis.call does: expired (with active expiry off, so
    that only the lookup can find it gone), it is absent and deleted; not yet expired, it is used. The native
    paths read a key without a TTL directly (helpers._check): one with a TTL must not be read that way."""
    import time

    add, mta, fin = NODE["addStandardJob-9"], NODE["moveToActive-11"], NODE["moveToFinished-14"]
    for b in (add, mta, fin):
        pair.load(b)
    pair.both("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        for _ in range(4):
            pair.script(add, ADD_KEYS, add_args())
        pair.both("PEXPIRE", Q + b"wait", "600000")  # a TTL not due: the list is used
        r = pair.script(mta, MTA_KEYS, mta_args())
        assert isinstance(r, list) and r[1], r
        pair.compare()
        pair.both("ZADD", Q + b"completed", "1", "old")
        pair.both("PEXPIRE", Q + b"completed", "1")
        pair.both("PEXPIRE", Q + b"wait", "1")
        time.sleep(0.05)
        keys, argv = finish_args(r[1], fetch=1)
        r = pair.script(fin, keys, argv)  # completed and wait have expired: gone, nothing to fetch
        assert r == 0, r
        pair.compare()
        assert pair.nat.zrange(Q + b"completed", 0, -1) == [r_id for r_id in pair.lua.zrange(Q + b"completed", 0, -1)]
        assert pair.nat.exists(Q + b"wait") == 0
        pair.both("PEXPIRE", Q + b"meta", "1")
        time.sleep(0.05)
        pair.script(add, ADD_KEYS, add_args())
        pair.compare()
        pair.both("PEXPIRE", Q + b"wait", "1")
        time.sleep(0.05)
        assert pair.script(mta, MTA_KEYS, mta_args()) == [0, 0, 0, 0]
        pair.compare()
    finally:
        pair.both("DEBUG", "SET-ACTIVE-EXPIRE", "1")

def _monitored(port: int, run: Any) -> list[list[str]]:
    """The commands a MONITOR client saw while ``run()`` ran (without time, db and client address)."""
    import socket

    mon = socket.create_connection(("127.0.0.1", port), timeout=10)
    mon.sendall(b"MONITOR\r\n")
    buf = b""
    while b"+OK\r\n" not in buf:
        buf += mon.recv(65536)
    buf = buf.split(b"+OK\r\n", 1)[1]
    run()
    r = redis.Redis(port=port)
    r.execute_command("ECHO", "monitor-end")
    r.close()
    while b'"monitor-end"' not in buf:
        buf += mon.recv(65536)
    mon.close()
    out = []
    for line in buf.decode().split("\r\n"):
        if line.startswith("+") and "]" in line:
            out.append(line.split("] ", 1)[1].split('" "'))
    return out[:-1]  # without the ECHO


@needs_node
def test_monitor_and_commandstats_see_what_lua_runs(pair: Pair) -> None:
    """Native paths that do a command's work inline still show it to MONITOR clients and count it in
    INFO commandstats, as the Lua path does (with a MONITOR client attached, the native path feeds it;
    without one, it only counts)."""
    add, mta, fin = NODE["addStandardJob-9"], NODE["moveToActive-11"], NODE["moveToFinished-14"]
    for b in (add, mta, fin):
        pair.load(b)
    pair.both("HSET", Q + b"meta", "opts.maxLenEvents", "50")

    def cycle() -> None:
        for i in range(3):
            pair.script(add, ADD_KEYS, add_args(name=f"m{i}"))
        r = pair.script(mta, MTA_KEYS, mta_args())
        for _ in range(2):
            keys, argv = finish_args(r[1], fetch=1)
            r = pair.script(fin, keys, argv)

    pair.both("CONFIG", "RESETSTAT")
    cycle()
    pair.compare()
    stats = [{k: v["calls"] for k, v in c.info("commandstats").items()} for c in (pair.lua, pair.nat)]
    assert stats[0] == stats[1]
    assert stats[0]["cmdstat_xadd"] >= 8 and stats[0]["cmdstat_zadd"] >= 3
    # the same cycle with a MONITOR client on each server: the same lines (time and client aside)
    seen = _monitored((pair.lua_srv.port, pair.nat_srv.port), cycle)
    pair.compare()
    assert len(seen[0]) > 40
    assert seen[0] == seen[1]


@needs_node
def test_commandstats_when_native_path_bails(pair: Pair) -> None:
    """A native path that hands the script to Lua after accounting for inline reads (moveToFinished reads
    the job hash and its children's keys before it looks at keepJobs) counts nothing itself: the Lua path
    runs, and counts, the whole script, so INFO commandstats match the Lua server's."""
    add, mta, fin = NODE["addStandardJob-9"], NODE["moveToActive-11"], NODE["moveToFinished-14"]
    for b in (add, mta, fin):
        pair.load(b)
    pair.script(add, ADD_KEYS, add_args(name="b"))
    r = pair.script(mta, MTA_KEYS, mta_args())
    pair.both("CONFIG", "RESETSTAT")
    keys, argv = finish_args(r[1], keep=5)  # keepJobs count > 0: the native path bails out
    pair.script(fin, keys, argv)
    pair.compare()
    stats = [{k: v["calls"] for k, v in c.info("commandstats").items()} for c in (pair.lua, pair.nat)]
    assert stats[0] == stats[1]
    assert stats[0]["cmdstat_exists"] == 1


def _monitored(ports: tuple[int, int], run: Any) -> list[list[str]]:
    """What a MONITOR client on each port saw while ``run()`` ran: each line without its time and client."""
    import socket

    mons = []
    for port in ports:
        m = socket.create_connection(("127.0.0.1", port), timeout=10)
        m.sendall(b"MONITOR\r\n")
        assert m.recv(5) == b"+OK\r\n"
        mons.append(m)
    run()
    out = []
    for port, m in zip(ports, mons, strict=True):
        r = redis.Redis(port=port)
        r.execute_command("ECHO", "monitor-end")
        r.close()
        buf = b""
        while b'"monitor-end"' not in buf:
            buf += m.recv(65536)
        m.close()
        lines = [ln.split(b"] ", 1)[1] for ln in buf.split(b"\r\n") if ln.startswith(b"+") and b"] " in ln]
        out.append([ln.decode() for ln in lines[:-1]])  # without the ECHO
    return out


@needs_py
def test_python_port_body(pair: Pair) -> None:
    add, mta = PY["addStandardJob-9"], PY["moveToActive-11"]
    pair.load(add)
    pair.load(mta)
    before = native_log_count(pair.nat_srv, "native addStandardJob: ran")
    for i in range(4):
        pair.script(add, ADD_KEYS, add_args(name=f"py{i}", ts=TS + i, opts={"attempts": 1, "delay": 0, "priority": 0}))
        pair.compare()
    for _ in range(3):
        pair.script(mta, MTA_KEYS, mta_args(name="pyworker"))
        pair.compare()
    assert native_log_count(pair.nat_srv, "native addStandardJob: ran") - before == 4


@needs_node
def test_wakes_blocked_marker_and_watch(servers: tuple[ServerProcess, ServerProcess]) -> None:
    nat = servers[1]
    add = NODE["addStandardJob-9"]
    r = redis.Redis(port=nat.port)
    r.flushall()
    r.script_load(add)
    blocker = redis.Redis(port=nat.port)
    import threading

    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(blocker.bzpopmin(Q + b"marker", 5)))
    t.start()
    import time

    time.sleep(0.3)
    r.evalsha(sha(add), 9, *ADD_KEYS, *add_args())
    t.join(6)
    assert got and got[0] is not None and got[0][1] == b"0"
    # WATCH sees the native writes
    w = redis.Redis(port=nat.port)
    p = w.pipeline(transaction=True)
    p.watch(Q + b"wait")
    r.evalsha(sha(add), 9, *ADD_KEYS, *add_args())
    p.multi()
    p.get("x")
    with pytest.raises(redis.WatchError):
        p.execute()
    for c in (r, blocker, w):
        c.close()


Q2 = b"bull:q2:"
ADD_KEYS2 = [Q2 + k[len(Q):] for k in ADD_KEYS]


def _pipelined(pair: Pair, body: bytes, reqs: list[tuple[list[bytes], list[bytes]]]) -> list[Any]:
    """``reqs`` (keys, ARGV) as one pipeline of EVALSHAs on each server, sent in one write (the server reads
    them together, as BullMQ's addBulk sends them); the replies must be the same."""

    import hiredis

    data = b"".join(hiredis.pack_command(("EVALSHA", sha(body), len(keys), *keys, *argv)) for keys, argv in reqs)
    out = [send_run(srv.port, data, len(reqs)) for srv in (pair.lua_srv, pair.nat_srv)]
    assert out[0] == out[1]
    return out[0]


@needs_node
def test_add_pipeline_runs(pair: Pair) -> None:
    """A pipeline of addStandardJob EVALSHAs (BullMQ's addBulk) is a run on the native server
    (dispatch.register_run, compat/scripts.NativeRun, add_standard_job.AddRun): replies, keyspace and INFO
    commandstats are the Lua server's, with requests the run form does not take in the middle (custom ids,
    a duplicate, a parent, LIFO, a priority option, malformed arguments, another queue, another numkeys),
    events trimmed (maxLenEvents 50), a paused queue, a concurrency limit, a wrong-typed key and a counter
    near its limit; a client blocked on the marker is served after the request that wakes it."""
    add = NODE["addStandardJob-9"]
    pair.load(add)
    nat = pair.nat_srv
    ran = native_log_count(nat, "native addStandardJob: ran in a run")
    pair.both("CONFIG", "RESETSTAT")
    # a fresh queue: the first job sets maxLenEvents (a single script), the rest is the run form
    ids = _pipelined(pair, add, [(ADD_KEYS, add_args(name=f"a{i}", data=json.dumps({"i": i}))) for i in range(300)])
    assert ids == [b"%d" % i for i in range(1, 301)]
    pair.compare()
    assert native_log_count(nat, "native addStandardJob: ran in a run") - ran >= 290
    pair.both("HSET", Q + b"meta", "opts.maxLenEvents", "50")
    mixed: list[tuple[list[bytes], list[bytes]]] = []
    for i in range(120):
        k = i % 12
        if k == 3:
            mixed.append((ADD_KEYS, add_args(custom_id=f"c{i}")))
        elif k == 4:
            mixed.append((ADD_KEYS, add_args(custom_id=f"c{i - 1}")))  # a duplicate: Lua
        elif k == 5:
            mixed.append((ADD_KEYS, add_args(parent=True)))  # missing parent: Lua
        elif k == 6:
            mixed.append((ADD_KEYS, add_args(opts={"lifo": True, "attempts": 2})))
        elif k == 7:
            mixed.append((ADD_KEYS, add_args(opts={"priority": 0, "delay": 0, "attempts": 1})))
        elif k in (1, 8):
            mixed.append((ADD_KEYS2, add_args(name="other queue", prefix=Q2)))
        elif k == 9:
            mixed.append((ADD_KEYS, [b"\xc1", b"{}", b"\x80"]))  # malformed: the error of the Lua path
        elif k == 10:
            mixed.append((ADD_KEYS, add_args(rjk=f"repeat:x:{i}", ts=float(TS + i))))
        else:
            mixed.append((ADD_KEYS, add_args(name=f"m{i}", data="x" * (i * 7))))
    mixed.insert(60, (ADD_KEYS[:8], add_args()))  # another numkeys (another argument count): ends the run
    _pipelined(pair, add, mixed)
    pair.compare()
    # in a transaction (BullMQ's Python client sends addBulk as MULTI, EVALSHA..., EXEC, each job's options
    # with ``delay: 0``, a true value in Lua, which storeJob writes as "0"): EXEC's run
    ran = native_log_count(nat, "native addStandardJob: ran in a run")
    py_opts = {"attempts": 0, "delay": 0, "backoff": None}
    tx = [(ADD_KEYS, add_args(name=f"t{i}", custom_id="t-dup" if i in (5, 6) else "", parent=i == 9,
                              opts={**py_opts, "priority": 0.0} if i % 7 == 3 else py_opts)) for i in range(40)]
    out = []
    for r in (pair.lua, pair.nat):
        p = r.pipeline(transaction=True)
        for keys, argv in tx:
            p.execute_command("EVALSHA", sha(add), len(keys), *keys, *argv)
        out.append([("error", str(x)) if isinstance(x, Exception) else x for x in p.execute(raise_on_error=False)])
    assert out[0] == out[1]
    pair.compare()
    assert native_log_count(nat, "native addStandardJob: ran in a run") - ran >= 30
    # paused, then at the concurrency limit: no marker
    pair.both("DEL", Q + b"marker")
    pair.both("HSET", Q + b"meta", "paused", "1")
    _pipelined(pair, add, [(ADD_KEYS, add_args(name=f"p{i}")) for i in range(30)])
    pair.compare()
    pair.both("HDEL", Q + b"meta", "paused")
    pair.both("HSET", Q + b"meta", "concurrency", "2")
    pair.both("RPUSH", Q + b"active", "x1", "x2")
    _pipelined(pair, add, [(ADD_KEYS, add_args(name=f"c{i}")) for i in range(30)])
    pair.compare()
    pair.both("LPOP", Q + b"active")
    _pipelined(pair, add, [(ADD_KEYS, add_args(name=f"d{i}")) for i in range(30)])
    pair.compare()
    # what the run form refuses for the whole queue: every request a single script, same answers
    pair.both("SET", Q2 + b"events", "x")
    _pipelined(pair, add, [(ADD_KEYS2, add_args(name=f"e{i}", prefix=Q2)) for i in range(5)])
    pair.both("DEL", Q2 + b"events")
    pair.both("SET", Q2 + b"id", "99999999999990")
    _pipelined(pair, add, [(ADD_KEYS2, add_args(name=f"f{i}", prefix=Q2)) for i in range(15)])
    pair.compare()
    stats = [{k: v["calls"] for k, v in c.info("commandstats").items()} for c in (pair.lua, pair.nat)]
    assert stats[0] == stats[1]
    assert stats[0]["cmdstat_evalsha"] >= 500
    # a client blocked on the marker is served after the request that adds it, as Redis serves it
    import threading
    import time

    pair.both("DEL", Q + b"marker")
    got: list[Any] = []
    blockers = [redis.Redis(port=r.connection_pool.connection_kwargs["port"]) for r in (pair.lua, pair.nat)]
    ts = [threading.Thread(target=lambda b=b: got.append(b.bzpopmin(Q + b"marker", 5))) for b in blockers]
    for t in ts:
        t.start()
    time.sleep(0.3)
    _pipelined(pair, add, [(ADD_KEYS, add_args(name=f"b{i}")) for i in range(50)])
    for t in ts:
        t.join(6)
    assert len(got) == 2 and got[0] == got[1] and got[0] is not None
    pair.compare()
    # served right after the first job (as Redis does), so the next job added the marker again
    assert pair.lua.zscore(Q + b"marker", "0") == 0
    for b in blockers:
        b.close()


@needs_node
def test_run_form_logs_the_first_native_run() -> None:
    """The server logs a script's first native run once ("native fast path in use"), also when a run form
    (here addStandardJob's, BullMQ's addBulk) runs it first: the queue's meta is there, so no request of
    the pipeline takes the single path."""
    import hiredis

    add = NODE["addStandardJob-9"]
    srv = start_respqueue("--durability", "memory")
    try:
        r = redis.Redis(port=srv.port)
        assert r.script_load(add) == sha(add)
        r.hset(Q + b"meta", "opts.maxLenEvents", "100")
        reqs = [hiredis.pack_command(("EVALSHA", sha(add), len(ADD_KEYS), *ADD_KEYS, *add_args(name=f"j{i}")))
                for i in range(20)]
        assert send_run(srv.port, b"".join(reqs), 20) == [b"%d" % i for i in range(1, 21)]
        r.close()
    finally:
        srv.stop()
    log = srv.output()
    assert log.count("native fast path in use for BullMQ script addStandardJob") == 1, log[-3000:]


def _on_queue(q: bytes, keys: list[bytes], argv: list[Any]) -> tuple[list[bytes], list[Any]]:
    """finish_args' keys and ARGV for queue prefix ``q`` instead of Q."""
    argv = list(argv)
    argv[6] = q
    return [q + k[len(Q):] for k in keys], argv


def _fill_active(pair: Pair, q: bytes, jobs: int, active: int) -> list[bytes]:
    """``jobs`` jobs added to queue ``q`` (maxLenEvents 40), the first ``active`` of them moved to active (token
    tok-1); their ids."""
    add, mta = NODE["addStandardJob-9"], NODE["moveToActive-11"]
    keys = [q + k[len(Q):] for k in ADD_KEYS]
    for i in range(jobs):
        pair.script(add, keys, add_args(name=f"j{i}", prefix=q))
    pair.both("HSET", q + b"meta", "opts.maxLenEvents", "40")
    argv = mta_args()
    argv[0] = q
    return [pair.script(mta, [q + k[len(Q):] for k in MTA_KEYS], argv)[1] for _ in range(active)]


@needs_node
def test_finish_pipeline_runs(pair: Pair) -> None:
    """A pipeline of moveToFinished EVALSHAs (a Worker finishing jobs, each fetching the next) is a run on the
    native server (compat/scripts.NativeRun, move_to_finished.MtfRun: the queue's keys checked once per
    run): replies, keyspace and INFO commandstats are the Lua server's, with requests in the middle that
    the native path leaves to Lua (metrics, a job no longer active) or answers early (a wrong lock, a
    missing job), failed and removed jobs, no fetch, a worker name, two queues alternating in one read (the
    second at its concurrency limit), a queue whose meta lacks maxLenEvents (the run form refuses it until a
    single script writes it), and
    clients blocked on the completed set and on the marker served between two requests of the run."""
    import threading
    import time

    fin = NODE["moveToFinished-14"]
    for b in (fin, NODE["addStandardJob-9"], NODE["moveToActive-11"]):
        pair.load(b)
    nat = pair.nat_srv
    ids = _fill_active(pair, Q, 90, 30)
    ids2 = _fill_active(pair, Q2, 40, 12)
    pair.both("HDEL", Q2 + b"meta", "opts.maxLenEvents")  # Q2: the first finish (a single script) sets it
    pair.both("HSET", Q2 + b"meta", "concurrency", "2")  # Q2's fetches find it maxed (Q's do not)
    pair.compare()
    pair.both("CONFIG", "RESETSTAT")
    ran = native_log_count(nat, "native moveToFinished: ran in a run")
    # WATCH sees the run's inline writes (Database.modified) as it sees the Lua path's
    watched = [b"events", b"wait", b"active", b"completed", b"stalled"]
    watchers = []
    for r in (pair.lua, pair.nat):
        for k in watched:
            w = redis.Redis(port=r.connection_pool.connection_kwargs["port"]).pipeline(transaction=True)
            w.watch(Q + k)
            watchers.append(w)
    pair.both("SADD", Q + b"stalled", ids[2], ids[25])
    reqs: list[tuple[list[bytes], list[Any]]] = []
    j2 = iter(ids2)
    for i, jid in enumerate(ids):
        if i == 5:
            reqs.append(finish_args(jid, token="other", fetch=1))  # -6, then the job stays active
        elif i == 8:
            reqs.append(finish_args(jid, fetch=1, metrics=100))  # metrics: Lua (a single script)
        elif i == 11:
            reqs.append(finish_args(b"nope", fetch=1))  # -1
        elif i == 13:
            reqs.append(finish_args(ids[0], fetch=1))  # finished already: Lua
        elif i == 15:
            reqs.append(finish_args(jid, target="failed", attempts=1, fetch=1))
        elif i == 17:
            reqs.append(finish_args(jid, keep=0, fetch=1))
        elif i == 20:
            reqs.append(finish_args(jid))  # no fetch
        elif i == 22:
            reqs.append(finish_args(jid, fetch=1, name="w2"))
        else:
            reqs.append(finish_args(jid, fetch=1))
        if i % 3 == 1:
            nxt = next(j2, None)
            if nxt is not None:
                reqs.append(_on_queue(Q2, *finish_args(nxt, fetch=1)))
    replies = _pipelined(pair, fin, reqs)
    assert sum(bool(isinstance(r, list) and len(r) == 4 and r[1]) for r in replies) > 25
    pair.compare()
    for w in watchers:
        w.multi()
        w.get("x")
        with pytest.raises(redis.WatchError):
            w.execute()
        w.reset()
    stats = [{k: v["calls"] for k, v in c.info("commandstats").items()} for c in (pair.lua, pair.nat)]
    assert stats[0] == stats[1]
    assert native_log_count(nat, "native moveToFinished: ran in a run") - ran >= 25
    # blocked clients served between two requests of a run: on the completed set (a BZPOPMIN takes the
    # first finished job out of it) and on the marker (re-added by the fetch)
    active = [pair.lua.lrange(Q + b"active", 0, -1), pair.nat.lrange(Q + b"active", 0, -1)]
    assert active[0] == active[1] and len(active[0]) >= 10
    pair.both("DEL", Q + b"completed", Q + b"marker")
    got: dict[tuple[int, bytes], Any] = {}
    blockers = [(i, k, redis.Redis(port=r.connection_pool.connection_kwargs["port"]))
                for i, r in enumerate((pair.lua, pair.nat)) for k in (b"completed", b"marker")]
    threads = [threading.Thread(target=lambda i=i, k=k, b=b: got.__setitem__((i, k), b.bzpopmin(Q + k, 5)))
               for i, k, b in blockers]
    for t in threads:
        t.start()
    time.sleep(0.3)
    ran = native_log_count(nat, "native moveToFinished: ran in a run")
    _pipelined(pair, fin, [finish_args(jid, fetch=1) for jid in reversed(active[0][-10:])])
    for t in threads:
        t.join(6)
    assert len(got) == 4 and all(v is not None for v in got.values())
    assert got[0, b"completed"] == got[1, b"completed"] and got[0, b"marker"] == got[1, b"marker"]
    pair.compare()
    assert native_log_count(nat, "native moveToFinished: ran in a run") - ran >= 7
    stats = [{k: v["calls"] for k, v in c.info("commandstats").items()} for c in (pair.lua, pair.nat)]
    assert stats[0] == stats[1]
    for _i, _k, b in blockers:
        b.close()


@needs_node
def test_finish_pipeline_persisted(tmp_path: Any) -> None:
    """A run of moveToFinished EVALSHAs (move_to_finished.MtfRun, its events appended inline) on a durable
    server: after a restart the store holds what the run left (jobs completed and fetched, events, locks)."""

    import hiredis

    add, mta, fin = NODE["addStandardJob-9"], NODE["moveToActive-11"], NODE["moveToFinished-14"]
    srv = start_respqueue("--durability", "durable", "--log-level", "debug", workdir=str(tmp_path))
    try:
        r = redis.Redis(port=srv.port)
        for b in (add, mta, fin):
            r.script_load(b)
        for i in range(40):
            r.evalsha(sha(add), 9, *ADD_KEYS, *add_args(name=f"d{i}"))
        ids = [r.evalsha(sha(mta), 11, *MTA_KEYS, *mta_args())[1] for _ in range(15)]
        data = b"".join(hiredis.pack_command(("EVALSHA", sha(fin), 14, *keys, *argv))
                        for keys, argv in (finish_args(j, fetch=1, target="failed" if j == ids[3] else "completed", attempts=3)
                                           for j in ids))
        got = send_run(srv.port, data, len(ids))
        assert all(isinstance(x, list) and x[1] for x in got)
        before = dump(r, sort_hashes=True)
        assert len(before[Q + b"completed"][1]) == 14
        r.close()
        assert native_log_count(srv, "native moveToFinished: ran in a run") >= 10
    finally:
        srv.stop()
    assert_restarts_same(str(tmp_path), srv.port, before)


@needs_node
def test_native_writes_are_persisted(tmp_path: Any) -> None:
    add, mta = NODE["addStandardJob-9"], NODE["moveToActive-11"]
    srv = start_respqueue("--durability", "durable", workdir=str(tmp_path))
    try:
        r = redis.Redis(port=srv.port)
        r.script_load(add)
        r.script_load(mta)
        for i in range(3):
            r.evalsha(sha(add), 9, *ADD_KEYS, *add_args(name=f"d{i}"))
        r.evalsha(sha(mta), 11, *MTA_KEYS, *mta_args())
        before = dump(r, sort_hashes=True)
        r.close()
    finally:
        srv.stop()
    assert_restarts_same(str(tmp_path), srv.port, before)



@needs_node
def test_native_paths_on_job_hashes_loaded_packed(tmp_path: Any) -> None:
    """Job hashes loaded from the store stay packed until first used (Hash.from_blob, a PackedHash):
    moveToActive and moveToFinished (fetching the next job) on them reply and write as the Lua path does
    on the same restarted data."""
    add, mta, mtf = NODE["addStandardJob-9"], NODE["moveToActive-11"], NODE["moveToFinished-14"]
    dirs = {m: str(tmp_path / m) for m in ("off", "on")}
    for d in dirs.values():
        os.makedirs(d)
    replies: dict[str, list[Any]] = {"off": [], "on": []}
    states = {}
    for mode, wd in dirs.items():
        srv = start_respqueue("--durability", "durable", "--native-scripts", mode, workdir=wd)
        port = srv.port
        try:
            r = redis.Redis(port=port)
            for i in range(3):
                r.eval(add, 9, *ADD_KEYS, *add_args(name=f"p{i}", data=json.dumps({"i": i, "pad": "x" * (1500 * i)})))
            r.close()
        finally:
            srv.stop()
        srv = start_respqueue("--durability", "durable", "--native-scripts", mode, workdir=wd, port=port)
        try:
            r = redis.Redis(port=port)
            out = replies[mode]
            out.append(r.eval(mta, 11, *MTA_KEYS, *mta_args(name="w")))
            keys, args = finish_args(b"1", fetch=1, name="w")
            out.append(r.eval(mtf, 14, *keys, *args))
            keys, args = finish_args(b"2", fetch=1, name="w")
            out.append(r.eval(mtf, 14, *keys, *args))
            states[mode] = dump(r)
            r.close()
        finally:
            srv.stop()
    assert replies["on"] == replies["off"]
    assert [x[1] for x in replies["on"]] == [b"1", b"2", b"3"]
    for i, rep in enumerate(replies["on"]):
        job = dict(zip(rep[0][::2], rep[0][1::2], strict=True))
        assert job[b"name"] == b"p%d" % i and json.loads(job[b"data"])["pad"] == "x" * (1500 * i)
        assert {b"opts", b"timestamp", b"delay", b"priority"} <= job.keys()
        assert (job[b"pb"], job[b"ats"], job[b"processedOn"]) == (b"w", b"1", b"%d" % (TS + (5 if i == 0 else 9)))
    assert states["on"] == states["off"]


# ---- random sequences ------------------------------------------------------------------
_add = st.tuples(st.just("add"), st.sampled_from(["", "", "", "c1", "c2"]), st.sampled_from(["a", "b"]),
                st.booleans(), st.sampled_from([None, "repeat:x:1"]), st.sampled_from([TS, float(TS + 7), TS + 3]),
                st.sampled_from(["node", "py"]),
                st.sampled_from([{"attempts": 1}, {"attempts": 1}, {"delay": -0.0, "priority": 0}, {"delay": 0.5},
                                 {"attempts": 2, "backoff": {"type": "exponential", "delay": 100}, "removeOnComplete": True},
                                 {"jobId": "x", "timestamp": 1.5e15, "sizeLimit": 10**12}, {"lifo": False}]))
_mta = st.tuples(st.just("mta"), st.sampled_from(["t1", "t1", "t2", "0"]), st.sampled_from([None, "w"]),
                 st.sampled_from([TS + 5, TS + 5, TS + 50000]), st.sampled_from([30000, 30000.0, 30000, 1.5]))
_finish = st.tuples(st.just("finish"), st.sampled_from([0, 1, 1]), st.sampled_from(["completed", "completed", "failed"]),
                    st.sampled_from([-1, -1, 0, None, 2]), st.sampled_from(["t1", "t1", "t1", "t2", "0"]))
_op = st.one_of(
    _add, _add, _mta, _mta, _finish, _finish, _finish,
    st.tuples(st.just("prio"), st.integers(1, 3)),
    st.tuples(st.just("delayed"), st.sampled_from([10, 100000])),
    st.tuples(st.just("meta"), st.sampled_from(["paused", "concurrency", "opts.maxLenEvents"]),
              st.sampled_from([None, None, "1", "2", "5"])),
    st.tuples(st.just("break"), st.sampled_from(["events", "wait", "marker", "id", "active", "completed"])),
)


@needs_node
@needs_py
@settings(max_examples=int(os.environ.get("NATIVE_EXAMPLES", "25")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_op, min_size=1, max_size=25))
def test_random_sequences(pair: Pair, ops: list[tuple[Any, ...]]) -> None:
    pair.flush()
    bodies = {"node": NODE, "py": PY}
    for b in list(NODE.values()) + [PY["addStandardJob-9"]]:
        pair.load(b)
    active: list[bytes] = []
    for op in ops:
        kind = op[0]
        if kind == "add":
            _, cid, name, lifo, rjk, ts, rel, opts = op
            opts = {**opts, "lifo": True} if lifo else opts
            pair.script(bodies[rel]["addStandardJob-9"], ADD_KEYS, add_args(custom_id=cid, name=name, opts=opts, rjk=rjk, ts=ts))
        elif kind == "mta":
            _, token, name, ts, lock = op
            r = pair.script(NODE["moveToActive-11"], MTA_KEYS, mta_args(ts=ts, token=token, name=name, lock=lock))
            if isinstance(r, list) and r[1]:
                active.append(r[1])
        elif kind == "prio":
            pair.script(NODE["addPrioritizedJob-9"], PRIO_KEYS, add_args(opts={"priority": op[1]}))
        elif kind == "delayed":
            pair.script(NODE["addDelayedJob-6"], DELAY_KEYS, add_args(opts={"delay": op[1]}))
        elif kind == "finish":
            _, fetch, target, keep, token = op
            if not active:
                r = pair.script(NODE["moveToActive-11"], MTA_KEYS, mta_args(token="t1"))
                if isinstance(r, list) and r[1]:
                    active.append(r[1])
            if active:
                keys, argv = finish_args(active.pop(0), token=token, fetch=fetch, target=target, keep=keep,
                                         attempts=1)
                r = pair.script(NODE["moveToFinished-14"], keys, argv)
                if isinstance(r, list) and r[1]:
                    active.append(r[1])
        elif kind == "meta":
            _, field, val = op
            if val is None:
                pair.both("HDEL", Q + b"meta", field)
            else:
                pair.both("HSET", Q + b"meta", field, val)
        elif kind == "break":
            k = Q + op[1].encode()
            if pair.both("EXISTS", k):
                pair.both("DEL", k)
            else:
                pair.both("SET", k, "broken")
        pair.compare()


def test_native_server_log_clean(pair: Pair) -> None:
    """Runs last: the native server never failed after writing, and both paths were used."""
    if NODE:
        add, mta, fin = NODE["addStandardJob-9"], NODE["moveToActive-11"], NODE["moveToFinished-14"]
        for b in (add, mta, fin):
            pair.load(b)
        for _ in range(12):
            pair.script(add, ADD_KEYS, add_args())
        pair.script(add, ADD_KEYS, add_args(opts={"de": {"id": "x"}}))  # a fallback
        r = pair.script(mta, MTA_KEYS, mta_args())
        for _ in range(12):
            r = pair.script(fin, *finish_args(r[1], fetch=1))
        pair.compare()
    out = pair.nat_srv.output()
    if os.environ.get("NATIVE_STATS"):
        import collections
        import re

        print(collections.Counter(re.findall(r"native (\w+): (ran|Lua fallback \([^)]*\))", out)).most_common())
    assert "after writing" not in out
    assert "Traceback" not in out
    if NODE:
        assert out.count("native addStandardJob: ran") > 10
        assert out.count("native moveToActive: ran") >= 1
        assert out.count("native moveToFinished: ran") > 10
        assert out.count("Lua fallback") > 0
    assert "native" not in pair.lua_srv.output()


def test_config_switch() -> None:
    from compat.scripts import enabled
    from respqueue.config import Config

    class S:
        def __init__(self, cfg: Config) -> None:
            self.config = cfg

    assert Config.load(environ={}).native_scripts == "on"
    assert enabled(S(Config.load(environ={})))
    assert not enabled(S(Config.load(environ={"RESPQUEUE_NATIVE_SCRIPTS": "off"})))
    assert not enabled(S(Config.load({"native_scripts": "off"}, environ={})))
    assert enabled(S(Config.load({"native_scripts": "on"}, environ={"RESPQUEUE_NATIVE_SCRIPTS": "off"})))


def _history_rows(workdir: str) -> dict[str, list[tuple[Any, ...]]]:
    import sqlite3

    db = os.path.join(workdir, "data", "respqueue.db")
    con = sqlite3.connect(db)
    try:
        out: dict[str, list[tuple[Any, ...]]] = {}
        for tbl in ("job_events", "job_final"):
            cols = [c[1] for c in con.execute(f"pragma table_info({tbl})")]
            if not cols:
                return {}
            # wall-clock columns differ between two runs
            keep = [c for c in cols if c not in ("ts_ms", "recorded_ms")]
            out[tbl] = con.execute(f"select {', '.join(keep)} from {tbl} order by rowid").fetchall()
        return out
    finally:
        con.close()


@needs_node
def test_job_history_same_with_native() -> None:
    """Job history (recorded from the events XADDs) is the same whichever path ran the scripts."""
    import time

    add, mta, fin = NODE["addStandardJob-9"], NODE["moveToActive-11"], NODE["moveToFinished-14"]
    got = {}
    for mode in ("off", "on"):
        srv = start_respqueue("--durability", "durable", "--native-scripts", mode)
        try:
            r = redis.Redis(port=srv.port)
            for b in (add, mta, fin):
                r.script_load(b)
            for i in range(4):
                r.evalsha(sha(add), 9, *ADD_KEYS, *add_args(name=f"h{i}"))
            x = r.evalsha(sha(mta), 11, *MTA_KEYS, *mta_args(name="w9"))
            for i in range(4):
                keys, argv = finish_args(x[1], fetch=1, name="w9", target="failed" if i == 2 else "completed")
                x = r.evalsha(sha(fin), 14, *keys, *argv)
            time.sleep(0.3)
            r.close()
        finally:
            srv.stop()
        got[mode] = _history_rows(srv.workdir)
    assert got["off"]["job_events"], got
    assert got["off"] == got["on"]


# ---- every covered release family: the same scenario with that release's own scripts ----------------------
# Bodies are read as the clients send them (compat.releases): npm bullmq 6.7.0 (interop/node_modules), npm
# bullmq 5.x (interop/bullmq5, installed by .ci/run), PyPI bullmq 3.x (the installed package) and 2.x
# (interop/bullmq5/python, installed by .ci/run). RESPQUEUE_RELEASE_SWEEP=1 adds every release the script
# table was built from (downloaded with npm pack / pip download into a temporary cache outside the project).
HOT = ("addStandardJob", "moveToActive", "moveToFinished", "addPrioritizedJob", "addDelayedJob")
BULLMQ5 = os.path.join(ROOT, "interop", "bullmq5")


def _family_bodies() -> dict[str, dict[str, bytes]]:
    from compat.releases import npm_dir_bodies, py_dir_bodies

    out: dict[str, dict[str, bytes]] = {}
    node_dirs = {"node-6.x": os.path.join(ROOT, "interop", "node_modules", "bullmq"),
                 "node-5.x": os.path.join(BULLMQ5, "node_modules", "bullmq")}
    for fam, d in node_dirs.items():
        scripts = os.path.join(d, "dist", "cjs", "scripts")
        if os.path.isdir(scripts) and shutil.which("node"):
            with open(os.path.join(d, "package.json")) as f:
                ver = json.load(f)["version"]
            out[f"{fam}:{ver}"] = {n: b for n, _k, b in npm_dir_bodies(scripts).values()}
    py_dirs = {"py-2.x": os.path.join(BULLMQ5, "python", "bullmq")}
    try:
        import bullmq

        py_dirs["py-3.x"] = os.path.dirname(bullmq.__file__)
    except ImportError:
        pass
    for fam, d in py_dirs.items():
        if os.path.isdir(os.path.join(d, "commands")):
            ver = "?"
            for m in os.listdir(os.path.dirname(d)):
                if m.startswith("bullmq-") and m.endswith(".dist-info"):
                    ver = m[len("bullmq-"):-len(".dist-info")]
            out[f"{fam}:{ver}"] = {n: b for n, _k, b in py_dir_bodies(os.path.join(d, "commands")).values()}
    if os.environ.get("RESPQUEUE_RELEASE_SWEEP"):
        import tempfile

        from compat import script_table
        from compat.releases import npm_bodies, pypi_bodies

        cache = os.path.join(tempfile.gettempdir(), "respqueue-bullmq-releases")
        os.makedirs(cache, exist_ok=True)
        for rel in script_table.RELEASES:
            client, ver = rel.split("-", 1)
            got = npm_bodies(ver, cache) if client == "node" else pypi_bodies(ver, cache)
            out[rel] = {n: b for n, _k, b in got.values()}
    return out


FAMILIES = _family_bodies()


def _release_keys(body: bytes, roles: dict[str, bytes]) -> list[bytes]:
    """The keys a release's script takes, from the documented KEYS slots in its recorded layout."""
    from compat.scripts import layout

    lay = layout(sha(body))
    assert lay is not None, "digest not in compat.script_table"
    return [Q + roles[n] for n in lay["keys"]]


_PRIO_ROLES = {"marker": b"marker", "meta": b"meta", "id": b"id", "prioritized": b"prioritized", "delayed": b"delayed",
               "completed": b"completed", "active": b"active", "events stream key": b"events",
               "pc priority counter": b"pc"}
_DELAYED_ROLES = {"marker": b"marker", "meta": b"meta", "id": b"id", "delayed": b"delayed", "completed": b"completed",
                  "events stream key": b"events"}
_ADD_ROLES = {"wait": b"wait", "paused": b"paused", "meta": b"meta", "id": b"id", "completed": b"completed",
              "delayed": b"delayed", "active": b"active", "events stream key": b"events", "marker key": b"marker"}


def _release_add_args(body: bytes, custom_id: str = "", name: str = "job", ts: Any = TS, opts: dict[str, Any] | None = None,
                      rjk: str | None = None) -> list[bytes]:
    from compat.scripts import layout

    fields = layout(sha(body))["argv_fields"]["ARGV1"]
    a: list[Any] = [None] * len(fields)
    a[:4] = [Q, custom_id, name, ts]
    a[[i for i, f in enumerate(fields) if f.endswith("repeat job key")][0]] = rjk
    return [msgpack.packb(a), b'{"i":1}', msgpack.packb({"attempts": 1} if opts is None else opts)]


def _release_finish(body: bytes, job_id: bytes, **kw: Any) -> tuple[list[bytes], list[Any]]:
    from compat.scripts import layout

    keys, argv = finish_args(job_id, **kw)
    if len(layout(sha(body))["argv"]) == 8:
        argv = argv[:8]
    return keys, argv


#: how many times release_scenario runs each hot script natively, at least, where it is native
LEAST_RUNS = {"addStandardJob": 7, "moveToActive": 10, "moveToFinished": 6, "addPrioritizedJob": 4, "addDelayedJob": 4}


def release_scenario(pair: Pair, bodies: dict[str, bytes]) -> dict[str, int]:
    """A queue's life with one release's hot scripts on both servers; every reply and keyspace compared.
    Returns how many times each hot script ran natively on the native server."""
    add, mta, fin = bodies["addStandardJob"], bodies["moveToActive"], bodies["moveToFinished"]
    nat = pair.nat_srv
    before = {n: native_log_count(nat, f"native {n}: ran") for n in HOT}
    akeys = _release_keys(add, _ADD_ROLES)

    def addj(**kw: Any) -> Any:
        return pair.script(add, akeys, _release_add_args(add, **kw))

    pair.script(add, akeys, _release_add_args(add), by_sha=False)  # ioredis: EVAL first
    for b in (mta, fin):
        pair.load(b)
    addj(name="b", opts={"attempts": 2, "lifo": True})
    addj(custom_id="c-1")
    addj(rjk="repeat:k:1", ts=float(TS + 1))
    addj(opts={"delay": 0, "priority": 0, "attempts": 1, "backoff": {"type": "fixed", "delay": 10}})
    pair.compare()
    active: list[bytes] = []
    for i in range(3):
        if i:
            pair.both("DEL", Q + b"marker")  # as a worker's BZPOPMIN does: whether a fetch re-adds it matters
        r = pair.script(mta, MTA_KEYS, mta_args(token=f"t{i}", name="w1" if i else None))
        pair.compare()
        assert isinstance(r, list) and r[1], r
        active.append(r[1])
    # complete with fetch-next, fail (retries exhausted), complete without fetch, remove on complete
    r = pair.script(fin, *_release_finish(fin, active.pop(0), token="t0", fetch=1, name="w1"))
    pair.compare()
    assert isinstance(r, list) and r[1], r
    active.append(r[1])
    pair.script(fin, *_release_finish(fin, active.pop(0), token="t1", target="failed", attempts=1))
    pair.compare()
    pair.script(fin, *_release_finish(fin, active.pop(0), token="t2", keep=0))
    pair.compare()
    # a paused queue (5.x: new jobs go to the paused list; a finishing job fetches nothing), then a
    # concurrency limit
    r = pair.script(mta, MTA_KEYS, mta_args(token="t0"))
    pair.both("HSET", Q + b"meta", "paused", "1")
    addj(name="p")
    assert pair.script(mta, MTA_KEYS, mta_args()) == [0, 0, 0, 0]
    pair.compare()
    assert pair.script(fin, *_release_finish(fin, r[1], token="t0", fetch=1)) == [0, 0, 0, 0]
    pair.compare()
    pair.both("HDEL", Q + b"meta", "paused")
    pair.both("HSET", Q + b"meta", "concurrency", "2")
    addj(name="m")
    r = pair.script(mta, MTA_KEYS, mta_args(token="t0"))
    pair.compare()
    pair.both("HDEL", Q + b"meta", "concurrency")
    # prioritized jobs (with the release's addPrioritizedJob, and one written directly), a delayed one (written
    # directly), fetched / reported by moveToActive
    prio = bodies["addPrioritizedJob"]
    pkeys = _release_keys(prio, _PRIO_ROLES)
    pair.load(prio)
    for p, extra in ((3, {}), (1, {"lifo": True}), (2, {"attempts": 2})):
        pair.script(prio, pkeys, _release_add_args(prio, opts={"priority": p, **extra}))
        pair.compare()
    pair.script(prio, pkeys, _release_add_args(prio, custom_id="pc-1", opts={"priority": 1.0}))
    pair.both("HSET", Q + b"meta", "paused", "1")
    pair.script(prio, pkeys, _release_add_args(prio, opts={"priority": 2}))  # paused: no marker
    pair.both("HDEL", Q + b"meta", "paused")
    pair.script(prio, pkeys, _release_add_args(prio, opts={"priority": 2.5}))  # fractional: Lua
    pair.compare()
    pair.both("HSET", Q + b"p1", "name", "pj", "data", "{}", "opts", "{}", "priority", "2", "timestamp", str(TS))
    pair.both("ZADD", Q + b"prioritized", str(2 * 2**32 + 1), "p1")
    # delayed jobs with the release's addDelayedJob: same-millisecond slots, a float timestamp, an earlier one
    dly = bodies["addDelayedJob"]
    dkeys = _release_keys(dly, _DELAYED_ROLES)
    pair.load(dly)
    for ts, d in ((TS, 90000), (TS, 90000), (float(TS + 1), 89999), (TS, 120000), (TS + 5, 0.5)):
        pair.script(dly, dkeys, _release_add_args(dly, ts=ts, opts={"delay": d, "attempts": 1}))
        pair.compare()
    pair.both("ZADD", Q + b"delayed", str((TS + 90000) * 4096 + 1), "d1")
    for _ in range(14):
        pair.both("DEL", Q + b"marker")
        r = pair.script(mta, MTA_KEYS, mta_args(token="t0"))
        pair.compare()
        if isinstance(r, list) and r[1]:
            active.append(r[1])
    assert r[:3] == [0, 0, 0] and r[3] == TS + 90000, r
    for k in pair.lua.zrange(Q + b"delayed", 0, -1):
        pair.both("DEL", Q + k)
    pair.both("DEL", Q + b"delayed")
    # finish everything with fetch-next: the queue drains
    while active:
        pair.both("DEL", Q + b"marker")
        r = pair.script(fin, *_release_finish(fin, active.pop(0), token="t0", fetch=1))
        pair.compare()
        if isinstance(r, list) and r[1]:
            active.append(r[1])
    assert r == 0, r
    # fallbacks to Lua inside a native digest: a custom id that exists, a missing job
    addj(custom_id="c-1")
    pair.script(fin, *_release_finish(fin, b"nope", token="t0"))
    pair.compare()
    # pending children: a completing job with dependencies left (-4), failing it (before 5.44: -4 too), a
    # completing job with failed children (5.52+: -9; before: completed), one whose dependencies are to be
    # ignored (5.47-5.51: igdp read first; the native path leaves it to Lua)
    for i, (key, val, target) in enumerate(((b":dependencies", b"x", "completed"), (b":dependencies", b"x", "failed"),
                                            (b":unsuccessful", b"1", "completed"), (b"", b"", "completed"))):
        addj(name=f"k{i}")
        r = pair.script(mta, MTA_KEYS, mta_args(token="tk"))
        assert isinstance(r, list) and r[1], r
        jk = Q + r[1]
        if key == b":dependencies":
            pair.both("SADD", jk + key, val)
        elif key:
            pair.both("ZADD", jk + key, val, "child")
        else:
            pair.both("SADD", jk + b":dependencies", "x")
            pair.both("HSET", jk, "igdp", "1")
        pair.script(fin, *_release_finish(fin, r[1], token="tk", target=target, attempts=1))
        pair.compare()
    return {n: native_log_count(nat, f"native {n}: ran") - before[n] for n in HOT}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_release_family_oracle(pair: Pair, family: str) -> None:
    """For each covered release family the hot scripts run natively and match the Lua path exactly."""
    import compat.native  # noqa: F401  (registers the native implementations)
    from compat.scripts import SCRIPTS, native_digests

    bodies = FAMILIES[family]
    nat = native_digests()
    native = {n: nat.get(sha(bodies[n])) == n for n in HOT}
    for n in HOT:
        assert sha(bodies[n]).encode() in SCRIPTS, f"{family} {n} {sha(bodies[n])} not in the script table"
    if ":" in family:  # an installed family (not one of the sweep's releases): all of it runs natively
        assert all(native.values()), f"{family}: on Lua: {[n for n in HOT if not native[n]]}"
    ran = release_scenario(pair, bodies)
    print(f"{family}: native runs {ran}")
    for n in HOT:
        assert (ran[n] >= LEAST_RUNS[n]) if native[n] else ran[n] == 0, (family, n, ran)


#: one release per variant the native moveToActive / moveToFinished serve beyond the installed families (see
#: MtaVariant / MtfVariant): downloaded with ``npm pack`` into a cache outside the project (as the sweep does)
VARIANT_RELEASES = {
    # HEXISTS paused, promotion bound at the next ms, HSET processedOn, no pb; finish: lock removed in the
    # main code, 2 keys deleted with a removed job
    "5.0.0": ("moveToActive", "moveToFinished", "addPrioritizedJob", "addDelayedJob"),
    "5.2.1": ("moveToActive", "moveToFinished"),  # finish: removeJobKeys (4 keys)
    "5.3.3": ("moveToActive", "moveToFinished"),  # HSET pb before the event
    # HMSET, bound at the next ms, removeLock; addDelayedJob: the score of before 5.8
    "5.7.15": ("moveToActive", "moveToFinished", "addDelayedJob"),
    # HMSET, bound below it, no marker re-added; addPrioritizedJob: HEXISTS paused, no active key; addDelayedJob:
    # its calls made by the main code
    "5.8.7": ("moveToActive", "moveToFinished", "addPrioritizedJob", "addDelayedJob"),
    "5.9.0": ("moveToActive", "moveToFinished"),  # HMGET paused concurrency; finish: HMGET parentKey parent
    "5.26.2": ("moveToActive", "moveToFinished"),  # no marker re-added by a fetch
    "5.30.1": ("moveToActive", "moveToFinished"),  # no prev in the event, a failing job's dependencies checked
    "5.46.1": ("moveToActive", "moveToFinished"),  # HMSET of the finish, dependencies only
    "5.48.1": ("moveToActive", "moveToFinished"),  # igdp read, HMSET
    "5.51.1": ("moveToActive", "moveToFinished"),  # igdp read, HSET, defa deleted
}


def _variant_bodies(version: str) -> dict[str, bytes]:
    import tempfile

    from compat.releases import npm_bodies

    if not shutil.which("npm"):
        pytest.skip("npm not installed: the older releases are fetched with npm pack")
    cache = os.path.join(tempfile.gettempdir(), "respqueue-bullmq-releases")
    os.makedirs(cache, exist_ok=True)
    try:
        got = npm_bodies(version, cache)
    except (subprocess.SubprocessError, OSError) as e:
        pytest.skip(f"npm pack bullmq@{version} failed (registry unreachable?): {e}")
    return {n: b for n, _k, b in got.values()}


@pytest.mark.parametrize("version", sorted(VARIANT_RELEASES, key=lambda v: tuple(map(int, v.split(".")))))
def test_release_variant_oracle(pair: Pair, version: str) -> None:
    """Older 5.x releases whose moveToActive / moveToFinished differ from 6.x's run natively in their own
    variant and match the Lua path exactly (replies, keyspace)."""
    import compat.native  # noqa: F401
    from compat.scripts import native_digests

    bodies = _variant_bodies(version)
    nat = native_digests()
    native = {n: nat.get(sha(bodies[n])) == n for n in HOT}
    for n in VARIANT_RELEASES[version]:
        assert native[n], f"node-{version} {n} runs on Lua"
    ran = release_scenario(pair, bodies)
    for n in HOT:
        assert (ran[n] >= LEAST_RUNS[n]) if native[n] else ran[n] == 0, (version, n, ran)
    # a priority counter past 2**31 - 1: 5.0-5.7 take it with bit.band (32 bits in Redis's Lua)
    prio = bodies["addPrioritizedJob"]
    pair.both("SET", Q + b"pc", "2147483646")
    for p in (3, 4):
        pair.script(prio, _release_keys(prio, _PRIO_ROLES), _release_add_args(prio, opts={"priority": p}))
    pair.compare()


def test_release_families_present() -> None:
    """The four release families are installed here (interop/node_modules, interop/bullmq5, the Python
    package): without them the family oracle above would silently cover less."""
    fams = {f.split(":")[0] for f in FAMILIES}
    if not os.path.isdir(os.path.join(BULLMQ5, "node_modules")):
        pytest.skip("interop/bullmq5 not installed (.ci/run installs it)")
    assert {"node-6.x", "node-5.x", "py-3.x", "py-2.x"} <= fams, fams


def test_lua_fallback_logged_once_per_digest(pair: Pair) -> None:
    """A script that runs on Lua is logged once per digest: unknown ones by digest, BullMQ ones by name."""
    nat = pair.nat_srv
    body = b"return redis.call('INCR', KEYS[1]) -- fallback-log-test"
    s = sha(body)
    for _ in range(3):
        pair.both("EVAL", body, 1, "k")
        pair.both("EVALSHA", s, 1, "k")
    pair.both("EVALSHA", "0" * 40, 0)  # NOSCRIPT: nothing ran, nothing logged
    assert nat.output().count(f"script {s} runs on Lua: not a known BullMQ script") == 1
    assert "0" * 40 not in nat.output()
    if NODE:  # a known BullMQ script without a native implementation
        from compat.releases import npm_dir_bodies

        bodies = {n: b for n, _k, b in npm_dir_bodies(NODE_DIR).values()}
        in_list = bodies["isJobInList"]
        for _ in range(2):
            pair.both("EVAL", in_list, 1, Q + b"wait", "1")
        line = "BullMQ script isJobInList ("
        got = [ln for ln in nat.output().splitlines() if line in ln and sha(in_list) in ln]
        assert len(got) == 1 and "no native implementation" in got[0], got
    assert "runs on Lua" not in pair.lua_srv.output()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_release_family_commandstats(pair: Pair, family: str) -> None:
    """Per release family, INFO commandstats after an add/fetch/finish cycle are the same on both paths (the
    native path counts the calls it makes inline), and so are the lines a MONITOR client sees."""
    bodies = FAMILIES[family]
    add, mta, fin = bodies["addStandardJob"], bodies["moveToActive"], bodies["moveToFinished"]
    prio, dly = bodies["addPrioritizedJob"], bodies["addDelayedJob"]
    akeys, pkeys = _release_keys(add, _ADD_ROLES), _release_keys(prio, _PRIO_ROLES)
    dkeys = _release_keys(dly, _DELAYED_ROLES)
    for b in (add, mta, fin, prio, dly):
        pair.load(b)
    pair.both("CONFIG", "RESETSTAT")

    def cycle() -> None:
        for i in range(4):
            pair.script(add, akeys, _release_add_args(add, name=f"s{i}"))
            pair.script(prio, pkeys, _release_add_args(prio, name=f"p{i}", opts={"priority": 1 + i % 2}))
            pair.script(dly, dkeys, _release_add_args(dly, name=f"d{i}", opts={"delay": 100000 + i % 2}))
        pair.both("DEL", Q + b"marker")
        r = pair.script(mta, MTA_KEYS, mta_args(name="w"))
        for i in range(4):
            pair.both("DEL", Q + b"marker")
            r = pair.script(fin, *_release_finish(fin, r[1], fetch=1, name="w", keep=0 if i == 1 else -1))
        pair.both("HSET", Q + b"meta", "paused", "1")
        pair.script(add, akeys, _release_add_args(add, name="p"))
        pair.both("HDEL", Q + b"meta", "paused")

    cycle()
    pair.compare()
    stats = [{k: v["calls"] for k, v in c.info("commandstats").items()} for c in (pair.lua, pair.nat)]
    assert stats[0] == stats[1]
    assert stats[0]["cmdstat_xadd"] >= 10
    seen = _monitored((pair.lua_srv.port, pair.nat_srv.port), cycle)
    pair.compare()
    assert len(seen[0]) > 40
    assert seen[0] == seen[1]

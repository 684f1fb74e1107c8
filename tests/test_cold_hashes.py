"""Cold hashes (respqueue/coldhash.py): small hashes left untouched past ``--hash-compact-delay`` are held
packed, and every command still answers exactly as redis-server does on the same data.

Servers run with a 100 ms delay; ``DEBUG PACKED key`` (respqueue only) tells whether a hash is held
packed without unpacking it. Each hash is packed before the one command run on it (so each command's
first touch of a cold hash is checked), in ``durable`` (the journal's blob is reused) and ``memory``
mode (packed by the compactor); then a restart of the durable store, and BullMQ jobs added, left to go
cold and processed, against Redis.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from .conftest import Diff
from .servers import ROOT, RawConn, ServerProcess, redis_server_path, start_redis, start_respqueue

pytestmark = pytest.mark.skipif(redis_server_path() is None, reason="reference redis-server is not installed")

DELAY = ("--hash-compact-delay", "100")
N = 140


def _fields(i: int) -> list[tuple[bytes, bytes]]:
    kind = i % 7
    if kind == 0:
        return [(b"f0", b"v%d" % i)]
    if kind == 1:
        return [(b"f%d" % j, b"%d" % (i * j)) for j in range(5)]
    if kind == 2:
        return [(b"f0", b"x" * 64), (b"f1", b"y" * 63)]  # at the listpack value limit
    if kind == 3:
        return [(b"f%d" % j, b"value-%d-%d" % (i, j)) for j in range(30)]
    if kind == 4:
        return [(b"f0", b""), (b"f1", b"\x00\xff\r\n"), (b"\xc3\xa9", b"\xe2\x82\xac")]
    if kind == 5:
        return [(b"f0", b"-12"), (b"1", b"2"), (b"2", b"3.5")]
    return [(b"f0", b"3.25"), (b"f1", b"1e3"), (b"f2", b"%d" % (1 << 62))]


def fill(c: RawConn, n: int = N) -> list[bytes]:
    keys = []
    for i in range(n):
        key = b"h:%d" % i
        flat: list[Any] = []
        for f, v in _fields(i):
            flat += [f, v]
        assert c.call_raw("HSET", key, *flat).startswith(b":")
        keys.append(key)
    return keys


def wait_packed(c: RawConn, keys: list[bytes], timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    left = list(keys)
    while True:
        left = [k for k in left if c.call_raw("DEBUG", "PACKED", k) not in (b":1\r\n", b":2\r\n")]
        if not left:
            return
        assert time.monotonic() < end, f"{len(left)} hashes not packed after {timeout} s: {left[:5]}"
        time.sleep(0.05)


# one command (or a few) run on a cold hash; each gets its own hash
OPS: list[Callable[[bytes], list[tuple[Any, ...]]]] = [
    lambda k: [("HGETALL", k)],
    lambda k: [("HKEYS", k), ("HVALS", k)],
    lambda k: [("HLEN", k)],
    lambda k: [("HGET", k, "f0"), ("HGET", k, "nope")],
    lambda k: [("HMGET", k, "f0", "nope", "f1")],
    lambda k: [("HEXISTS", k, "f0"), ("HEXISTS", k, "nope")],
    lambda k: [("HSTRLEN", k, "f0"), ("HSTRLEN", k, "f1")],
    lambda k: [("HSCAN", k, "0")],
    lambda k: [("HSCAN", k, "0", "MATCH", "f1*", "COUNT", "100")],
    lambda k: [("OBJECT", "ENCODING", k), ("TYPE", k), ("EXISTS", k)],
    lambda k: [("EVAL", "return redis.call('HGETALL', KEYS[1])", "1", k)],
    lambda k: [("EVAL", "return redis.call('HGET', KEYS[1], 'f0')", "1", k)],
    lambda k: [("HSET", k, "f0", "new"), ("HGETALL", k)],
    lambda k: [("HSET", k, "fresh", "x"), ("HGETALL", k)],
    lambda k: [("HDEL", k, "f0"), ("HGETALL", k), ("EXISTS", k)],
    lambda k: [("HINCRBY", k, "n", "5"), ("HINCRBY", k, "f0", "1"), ("HGETALL", k)],
    lambda k: [("HINCRBYFLOAT", k, "f0", "1.5"), ("HGETALL", k)],
    lambda k: [("HSETNX", k, "f0", "x"), ("HSETNX", k, "new", "y"), ("HGETALL", k)],
    lambda k: [("COPY", k, k + b":copy"), ("HGETALL", k + b":copy"), ("OBJECT", "ENCODING", k + b":copy")],
    lambda k: [("RENAME", k, k + b":r"), ("HGETALL", k + b":r")],
    lambda k: [("EXPIRE", k, "1000"), ("TTL", k), ("HGETALL", k)],
    lambda k: [("DEL", k), ("EXISTS", k)],
    lambda k: [("EXPIRE", k, "1000"), ("PERSIST", k), ("TTL", k), ("PTTL", k), ("TOUCH", k), ("HLEN", k)],
    lambda k: [("UNLINK", k), ("TYPE", k)],
    lambda k: [("EVAL", "redis.call('HSET', KEYS[1], 'lua', '1'); return redis.call('HGETALL', KEYS[1])", "1", k)],
    lambda k: [("HSET", k, "big", "z" * 65), ("OBJECT", "ENCODING", k), ("HLEN", k), ("HGET", k, "big")],
]


@pytest.fixture(scope="module")
def redis_srv() -> Iterator[ServerProcess]:
    srv = start_redis()
    yield srv
    srv.stop()


@pytest.fixture(scope="module", params=["durable", "memory"])
def rq(request: Any) -> Iterator[ServerProcess]:
    srv = start_respqueue("--durability", request.param, *DELAY)
    yield srv
    srv.stop()


def all_hashes(d: Diff, rq_port: int, ref_port: int) -> None:
    """HGETALL of every key both servers hold (same key set)."""
    ks = sorted(redis.Redis(port=ref_port).keys("*"))
    assert sorted(redis.Redis(port=rq_port).keys("*")) == ks
    for k in ks:
        if d("OBJECT", "ENCODING", k) == b"$8\r\nlistpack\r\n":
            d("HGETALL", k)
        else:  # a hashtable's order is Redis's hash order
            d.unordered("HGETALL", k)


def test_cold_hashes_answer_as_redis(rq: ServerProcess, redis_srv: ServerProcess) -> None:
    d = Diff(rq.port, redis_srv.port)
    try:
        keys = fill(d.rq)
        fill(d.ref)
        # a hashtable-encoded hash is packed when it is small (a long value: a BullMQ job with 65+ bytes of
        # data), never with many fields
        for c in (d.rq, d.ref):
            c.call_raw("HSET", "big:v", "f", "v" * 65)
            c.call_raw("HSET", "big:n", *[x for j in range(600) for x in (b"f%d" % j, b"%d" % j)])
        wait_packed(d.rq, keys)
        wait_packed(d.rq, [b"big:v"])
        d("OBJECT", "ENCODING", "big:v")
        d.unordered("HGETALL", "big:v")  # a hashtable's order is Redis's hash order
        d("HGET", "big:v", "f")
        wait_packed(d.rq, [b"big:v"])
        assert d.rq.call_raw("DEBUG", "PACKED", "big:n") == b":0\r\n"
        assert d.rq.call_raw("DEBUG", "PACKED", "nope") == b"-ERR no such key\r\n"
        for i, k in enumerate(keys):
            # held as its blob alone (types/hash.ColdHash): nothing but the keyspace holds it
            assert d.rq.call_raw("DEBUG", "PACKED", k) == b":2\r\n", k
            for cmd in OPS[i % len(OPS)](k):
                d(*cmd)
        # HRANDFIELD on cold hashes: a count at least the size gives the whole hash (order undefined)
        for c in (d.rq, d.ref):
            c.call_raw("DEL", *keys[:30])
            fill(c, 30)
        wait_packed(d.rq, keys[:30])
        for k in keys[:30]:
            d.unordered("HRANDFIELD", k, "1000", "WITHVALUES")
        # everything read or written above goes cold again, with the same content
        cli = redis.Redis(port=rq.port)
        survivors = [k for k in cli.keys("h:*") if cli.object("encoding", k) == b"listpack"]
        assert len(survivors) > N // 2
        wait_packed(d.rq, survivors)
        all_hashes(d, rq.port, redis_srv.port)
        # MEMORY USAGE and DEBUG OBJECT (respqueue's own figures) read a cold hash as they read it hot
        for k in survivors[:5]:
            for cmd in (("MEMORY", "USAGE", k), ("DEBUG", "OBJECT", k)):
                wait_packed(d.rq, [k])
                cold = d.rq.call_raw(*cmd).split(b" ")[3:5] if cmd[0] == "DEBUG" else d.rq.call_raw(*cmd)
                assert d.rq.call_raw("DEBUG", "PACKED", k) == b":0\r\n"  # (the first use unpacked it)
                hot = d.rq.call_raw(*cmd).split(b" ")[3:5] if cmd[0] == "DEBUG" else d.rq.call_raw(*cmd)
                assert cold == hot, (cmd, cold, hot)
            assert hot[0] == b"encoding:listpack" and hot[1].startswith(b"serializedlength:"), hot
        ch = d.rq.call_raw("DEBUG", "COLD-HASHES")
        assert ch.startswith(b"*5\r\n"), ch
    finally:
        d.close()


def test_cold_hash_is_its_blob_in_the_keyspace() -> None:
    """A cold hash nothing else holds is the keyspace's value as its blob alone (DEBUG PACKED 2,
    types/hash.ColdHash); commands that need no field (EXISTS, TYPE, TTL, EXPIRE, PERSIST) leave it so, a
    TTL set on it is stored, a restart loads every one-row hash that way, and a read makes it a hash again
    until it goes cold once more."""
    rq = start_respqueue("--durability", "durable", *DELAY)
    try:
        c = redis.Redis(port=rq.port)
        c.hset("a", mapping={"f0": "1", "f1": "two"})
        c.hset("b", mapping={"x": "y"})
        c.hset("gone", mapping={"x": "y"})
        deadline = time.monotonic() + 30
        while any(c.execute_command("DEBUG", "PACKED", k) != 2 for k in ("a", "b", "gone")):
            assert time.monotonic() < deadline, "not cold as a blob"
            time.sleep(0.05)
        assert (c.exists("a"), c.type("a"), c.ttl("a"), c.expire("b", 5000), c.persist("a")) == (1, b"hash", -1, True, False)
        assert c.delete("gone") == 1 and c.exists("gone") == 0
        for k in ("a", "b"):
            assert c.execute_command("DEBUG", "PACKED", k) == 2, k
        c.save()
        c.close()
        rq.stop()
        rq2 = start_respqueue("--durability", "durable", *DELAY, workdir=rq.workdir)
        try:
            c = redis.Redis(port=rq2.port)
            assert [c.execute_command("DEBUG", "PACKED", k) for k in ("a", "b")] == [2, 2]
            # loaded in the store's form, recoded in the compact one in the background (DEBUG COLD-HASHES'
            # fourth number), without a change of content
            deadline = time.monotonic() + 30
            while c.execute_command("DEBUG", "COLD-HASHES")[3] < 2:
                assert time.monotonic() < deadline, c.execute_command("DEBUG", "COLD-HASHES")
                time.sleep(0.05)
            assert [c.execute_command("DEBUG", "PACKED", k) for k in ("a", "b")] == [2, 2]
            assert 4990 < c.ttl("b") <= 5000 and c.ttl("a") == -1 and c.exists("gone") == 0
            assert c.hgetall("a") == {b"f0": b"1", b"f1": b"two"}
            assert c.execute_command("DEBUG", "PACKED", "a") == 0  # thawed: a plain hash again
            assert c.hgetall("b") == {b"x": b"y"} and c.object("encoding", "a") == b"listpack"
            deadline = time.monotonic() + 30
            while c.execute_command("DEBUG", "PACKED", "a") != 2:
                assert time.monotonic() < deadline, "not cold again"
                time.sleep(0.05)
            assert c.hgetall("a") == {b"f0": b"1", b"f1": b"two"}
            c.close()
        finally:
            rq2.stop()
    finally:
        rq.stop()


def _diff_keep(rq_port: int, ref_port: int) -> Diff:
    """A Diff on both servers as they are (Diff() flushes them)."""
    d = Diff.__new__(Diff)
    d.rq, d.ref, d.log = RawConn(rq_port), RawConn(ref_port), []
    return d


def test_restart_keeps_cold_hashes(redis_srv: ServerProcess) -> None:
    """Compacted hashes, and ones changed after compaction, survive a restart of the durable store."""
    rq = start_respqueue("--durability", "durable", *DELAY)
    try:
        d = Diff(rq.port, redis_srv.port)
        keys = fill(d.rq)
        fill(d.ref)
        wait_packed(d.rq, keys)
        for k in keys[::3]:  # changed while cold (one command each, not yet cold again at the restart)
            d("HINCRBY", k, "counter", "7")
        for k in keys[1::3]:
            d("HSET", k, "f0", "after")
        d.close()
        rq.stop()
        rq2 = start_respqueue("--durability", "durable", *DELAY, workdir=rq.workdir)
        try:
            d = _diff_keep(rq2.port, redis_srv.port)
            assert d.rq.call_raw("DBSIZE") == b":%d\r\n" % N
            all_hashes(d, rq2.port, redis_srv.port)
            wait_packed(d.rq, keys)  # (loaded packed; read above, so packed again later)
            all_hashes(d, rq2.port, redis_srv.port)
            d.close()
        finally:
            rq2.stop()
    finally:
        rq.stop()


INTEROP = os.path.join(ROOT, "interop")
NODE_OK = shutil.which("node") is not None and os.path.isdir(os.path.join(INTEROP, "node_modules", "bullmq"))

ADD_JS = r"""
const { Queue } = require('bullmq');
(async () => {
  const [port, from, n] = process.argv.slice(1).map(Number);
  const q = new Queue('cold', { connection: { host: '127.0.0.1', port } });
  const jobs = [];
  for (let i = from; i < from + n; i++) jobs.push({ name: 'j', data: { i, s: 'x'.repeat(i % 40) }, opts: { jobId: 'j' + i } });
  await q.addBulk(jobs);
  await q.close();
  console.log(JSON.stringify({ ok: true }));
})().catch(e => { console.log(JSON.stringify({ error: String(e) })); process.exit(1); });
"""

WORK_JS = r"""
const { Queue, Worker } = require('bullmq');
(async () => {
  const [port, n] = process.argv.slice(1).map(Number);
  const connection = { host: '127.0.0.1', port };
  const seen = [];
  const w = new Worker('cold', async job => { seen.push([job.id, job.data.i, job.data.s.length, job.attemptsMade]);
                                            return job.data.i * 2; }, { connection, concurrency: 5 });
  await new Promise((res, rej) => { let done = 0; w.on('completed', () => { if (++done === n) res(); });
                                    setTimeout(() => rej(new Error('timeout')), 60000).unref(); });
  await w.close();
  const q = new Queue('cold', { connection });
  const done = await q.getJobs(['completed'], 0, -1);
  const out = done.map(j => [j.id, j.returnvalue, j.data.i, j.name]).sort();
  const counts = await q.getJobCounts('wait', 'active', 'completed', 'failed');
  await q.close();
  seen.sort();
  console.log(JSON.stringify({ out, counts, seen }));
})().catch(e => { console.log(JSON.stringify({ error: String(e) })); process.exit(1); });
"""


def _node(js: str, *args: Any) -> dict[str, Any]:
    p = subprocess.run(["node", "-e", js, *map(str, args)], cwd=INTEROP, capture_output=True, text=True, timeout=120)
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise AssertionError(f"node printed no JSON (exit {p.returncode}): {p.stdout[-2000:]} {p.stderr[-2000:]}") from None
    assert "error" not in out, out["error"]
    return out


@pytest.mark.skipif(not NODE_OK, reason="node and interop/node_modules/bullmq are needed")
@pytest.mark.parametrize("mode", ["durable", "memory"])
def test_bullmq_jobs_across_compaction(mode: str) -> None:
    """Jobs added, left to go cold, more added, then all processed: the same outcome as on Redis, and the
    cold ones were packed before a worker took them."""
    rq = start_respqueue("--durability", mode, *DELAY)
    ref = start_redis()
    try:
        outs = []
        for srv in (ref, rq):
            _node(ADD_JS, srv.port, 0, 120)
            if srv is rq:
                c = RawConn(rq.port)
                wait_packed(c, [b"bull:cold:j%d" % i for i in range(120)])
                c.close()
            _node(ADD_JS, srv.port, 120, 80)  # hot: taken right after they were added
            outs.append(_node(WORK_JS, srv.port, 200))
        assert outs[1] == outs[0]
        assert len(outs[0]["out"]) == 200
        assert outs[0]["out"][0][1] == outs[0]["out"][0][2] * 2
    finally:
        rq.stop()
        ref.stop()


HOT_JS = r"""
const { Queue, Worker } = require('bullmq');
(async () => {
  const [port, n] = process.argv.slice(1).map(Number);
  const connection = { host: '127.0.0.1', port };
  const q = new Queue('hot', { connection });
  let done = 0;
  const finished = new Promise((res, rej) => {
    const w = new Worker('hot', async job => job.data.i, { connection, concurrency: 10 });
    w.on('completed', () => { if (++done === n) w.close().then(res); });
    setTimeout(() => rej(new Error('timeout')), 60000).unref();
  });
  for (let i = 0; i < n; i++) await q.add('j', { i }, { removeOnComplete: true });
  await finished;
  const counts = await q.getJobCounts('wait', 'active', 'completed', 'failed');
  await q.close();
  console.log(JSON.stringify({ done, counts }));
})().catch(e => { console.log(JSON.stringify({ error: String(e) })); process.exit(1); });
"""


NEW_JS = r"""
const { Queue } = require('bullmq');
(async () => {
  const [port] = process.argv.slice(1).map(Number);
  const q = new Queue('fresh', { connection: { host: '127.0.0.1', port } });
  const ids = [];
  for (const j of await q.addBulk([1, 2, 3, 4].map(i => ({ name: 'b', data: { i, s: 'x'.repeat(80 * (i % 2)) } }))))
    ids.push(j.id);
  ids.push((await q.add('one', { i: 5 })).id);
  ids.push((await q.add('custom', { i: 6 }, { jobId: 'c6' })).id);
  ids.push((await q.add('late', { i: 7 }, { delay: 60000 })).id);
  ids.push((await q.add('prio', { i: 8 }, { priority: 3 })).id);
  await q.close();
  console.log(JSON.stringify({ ids }));
})().catch(e => { console.log(JSON.stringify({ error: String(e) })); process.exit(1); });
"""


FINISH_JS = r"""
const { Worker } = require('bullmq');
(async () => {
  const [port, n] = process.argv.slice(1).map(Number);
  const finished = [];
  const w = new Worker('fresh', async job => { if (job.data.i === 3) throw new Error('three'); return job.data.i * 2; },
                       { connection: { host: '127.0.0.1', port }, concurrency: 2 });
  await new Promise((res, rej) => {
    const one = (job, how) => { finished.push([job.id, how]); if (finished.length === n) res(); };
    w.on('completed', job => one(job, 'completed'));
    w.on('failed', job => one(job, 'failed'));
    setTimeout(() => rej(new Error('timeout')), 60000).unref();
  });
  await w.close();
  console.log(JSON.stringify({ finished }));
})().catch(e => { console.log(JSON.stringify({ error: String(e) })); process.exit(1); });
"""


@pytest.mark.skipif(not NODE_OK, reason="node and interop/node_modules/bullmq are needed")
@pytest.mark.parametrize("mode", ["durable", "memory"])
def test_new_and_finished_jobs_are_stored_packed(mode: str) -> None:
    """A job's hash is held packed from its add (addBulk's run, a single add, a custom id, a delayed and a
    prioritized job; listpack and hashtable jobs) and again from the moment it completes, long before the compaction delay, and the compactor packed none of them; their fields read
    back as written. With compaction off they stay live hashes."""
    for delay, want in (("600000", 2), ("0", 0)):
        srv = start_respqueue("--durability", mode, "--hash-compact-delay", delay)
        try:
            ids = _node(NEW_JS, srv.port)["ids"]
            assert len(ids) == 8
            c = redis.Redis(port=srv.port, socket_timeout=5)
            keys = [b"bull:fresh:%s" % i.encode() for i in ids]
            assert [c.execute_command("DEBUG", "PACKED", k) for k in keys] == [want] * 8, delay
            assert c.execute_command("DEBUG", "COLD-HASHES")[0] == 0
            encodings = [c.object("encoding", k) for k in keys[:2]]
            assert encodings == [b"hashtable", b"listpack"]  # (data over 64 bytes, and not)
            for k, i in zip(keys, range(1, 9), strict=True):
                h = c.hgetall(k)
                assert json.loads(h[b"data"])["i"] == i and h[b"name"] and h[b"timestamp"], h
            assert c.hget(keys[6], "delay") == b"60000" and c.hget(keys[7], "priority") == b"3"
            # the seven that are not delayed: taken (the reads above thawed them: packed again when they finish)
            fin = dict(_node(FINISH_JS, srv.port, 7)["finished"])
            assert sorted(fin.values()) == ["completed"] * 6 + ["failed"], fin
            # (the failed one: BullMQ 6 sends its stacktrace as fields to update, which the Lua path runs)
            done = [k for k, i in zip(keys, ids, strict=True) if fin.get(i) == "completed"]
            assert [c.execute_command("DEBUG", "PACKED", k) for k in done] == [want] * 6, delay
            assert c.execute_command("DEBUG", "COLD-HASHES")[0] == 0
            for k, i in zip(keys, range(1, 9), strict=True):
                h = c.hgetall(k)
                if i == 3:
                    assert h[b"failedReason"] == b"three" and h[b"atm"] == b"1" and h[b"finishedOn"], h
                elif i != 7:
                    assert h[b"returnvalue"] == b"%d" % (2 * i) and h[b"finishedOn"] and h[b"processedOn"], h
            c.close()
        finally:
            srv.stop()


@pytest.mark.skipif(not NODE_OK, reason="node and interop/node_modules/bullmq are needed")
@pytest.mark.parametrize("mode", ["durable", "memory"])
def test_hot_jobs_are_never_packed(mode: str) -> None:
    """Jobs taken as soon as they are added (and removed on completion) are never packed by the compactor,
    with the default delay (a new job's hash is stored packed, and taking it thaws it once): at most the
    queue's meta hash and the like go cold."""
    rq = start_respqueue("--durability", mode)
    try:
        out = _node(HOT_JS, rq.port, 150)
        assert out["done"] == 150 and out["counts"]["wait"] == 0, out
        time.sleep(1.6)  # past the delay: every noted hash is due
        c = redis.Redis(port=rq.port)
        compacted, pending, delay, _recoded, _announced = c.execute_command("DEBUG", "COLD-HASHES")
        assert delay == 1000
        assert compacted <= 3, compacted
        # a hash written every 50 ms for 2.5 s (well past the delay) is never packed meanwhile; once
        # left alone, it is
        c.hset("kept:hot", "n", 0)
        end = time.time() + 2.5
        i = 0
        while time.time() < end:
            assert c.execute_command("DEBUG", "PACKED", "kept:hot") == 0, i
            i += 1
            c.hset("kept:hot", "n", i)
            time.sleep(0.05)
        deadline = time.time() + 30
        while c.execute_command("DEBUG", "PACKED", "kept:hot") not in (1, 2):
            assert time.time() < deadline, "never went cold"
            time.sleep(0.1)
        assert c.hgetall("kept:hot") == {b"n": b"%d" % i}
        c.close()
    finally:
        rq.stop()


def test_cold_forms_round_trip(monkeypatch: Any) -> None:
    """ColdHash's two forms (types/hash.py): the compact one (the shape's number, then the values) and the
    names form msgpack ``[hashtable?, {field: value}]`` give the same fields in the same order, and the
    store's form back (by shape for a store shape, registered by compat when it is imported, else with its
    names); once SHAPES_MAX shapes are numbered a new shape is packed with its names."""
    import msgpack

    from respqueue.types import hash as hm

    cases: list[tuple[bool, dict[bytes, bytes]]] = [
        (False, {b"name": b"n", b"data": b"{}", b"opts": b"{}", b"timestamp": b"1", b"delay": b"0", b"priority": b"0"}),
        (True, {b"f" * 70: b"", b"\x00": b"\xff" * 100}),
        (False, {b"only": b"x"}),
        (False, {(b"k%d" % i): (b"v%d" % i) for i in range(40)}),
    ]
    for ht, d in cases:
        stored = msgpack.packb([ht, d], use_bin_type=True)
        for c, want in ((hm.ColdHash.of(ht, d), hm.pack_small(ht, d)), (hm.ColdHash(stored), stored)):
            got_ht, got = c.fields()
            assert got_ht == ht and list(got.items()) == list(d.items())
            assert c.stored() == want  # (a names-form value is stored as it is)
            assert hm.decode_small(want) == (ht, d)
            h = c.thawed()
            assert type(h) is hm.Hash and h.ht is ht and h.to_dict() == d
            assert [c.get(f) for f in d] == list(d.values()) and c.get(b"absent") is None
        assert len(hm.ColdHash.of(ht, d)) < len(stored)
    monkeypatch.setattr(hm, "SHAPES_MAX", len(hm._SHAPES))
    d = {b"never": b"seen", b"before": b"1"}
    c = hm.ColdHash.of(False, d)
    assert c[0] == 0x92 and c.fields() == (False, d)


@pytest.mark.parametrize("mode", ["memory", "durable"])
def test_debug_compact_with_hashes_noted_this_tick(mode: str) -> None:
    """DEBUG COLD-HASHES COMPACT packs every noted hash now, those noted since the last cron tick included
    (the open bucket): it used to close that bucket stamped with its own far-future "now", which was never
    due, and loop forever."""
    srv = start_respqueue("--durability", mode, "--hash-compact-delay", "600000")
    try:
        c = redis.Redis(port=srv.port, socket_timeout=5)
        c.hset("h:1", mapping={"a": "1", "b": "2"})
        assert c.execute_command("DEBUG", "COLD-HASHES", "COMPACT")[:2] == [1, 0]
        assert c.execute_command("DEBUG", "PACKED", "h:1") == 2
        assert c.hgetall("h:1") == {b"a": b"1", b"b": b"2"}
        c.close()
    finally:
        srv.stop()

"""Native moveToDelayed / retryJob / promote (compat/native/) against the Lua path as the oracle, for every
installed release family (node 6.x, node 5.x latest, PyPI 3.x, PyPI 2.x): replies, keyspace, INFO
commandstats, MONITOR lines, the branches each script has, and a restart from the store."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import msgpack
import pytest
import redis

from .servers import start_respqueue
from .test_native_scripts import (
    _ADD_ROLES,
    FAMILIES,
    MTA_KEYS,
    TS,
    Pair,
    Q,
    _monitored,
    _release_add_args,
    _release_keys,
    assert_restarts_same,
    dump,
    mta_args,
    native_log_count,
    pair,  # noqa: F401  (fixture)
    servers,  # noqa: F401  (fixture)
    sha,
)

#: KEYS roles (as the layouts document them) -> key suffix under Q; "job key" is filled in per call
_ROLES = {"marker key": b"marker", "active key": b"active", "prioritized key": b"prioritized",
          "delayed key": b"delayed", "events stream": b"events", "meta key": b"meta", "stalled key": b"stalled",
          "wait key": b"wait", "rate limiter key": b"limiter", "paused key": b"paused",
          "pc priority counter": b"pc", "active": b"active", "wait": b"wait", "paused": b"paused",
          "meta": b"meta", "marker": b"marker", "stalled": b"stalled", "delayed": b"delayed",
          "prioritized": b"prioritized", "event stream": b"events"}


def _keys(body: bytes, job_id: bytes) -> list[bytes]:
    from compat.scripts import layout

    lay = layout(sha(body))
    assert lay is not None, "digest not in compat.script_table"
    return [Q + job_id if "job key" in n else Q + _ROLES[n] for n in lay["keys"]]


def _fields(**kw: Any) -> bytes:
    flat: list[Any] = []
    for k, v in kw.items():
        flat += [k, v]
    return msgpack.packb(flat)


def mtd_args(job_id: bytes, token: str = "t0", delay: Any = 5000, ts: int = TS + 20, skip: str = "0",
             fields: bytes | str = "", fetch: Any = None, name: str | None = None) -> list[Any]:
    """moveToDelayed's ARGV (fetch: None to leave ARGV[8..9] out, else 0/1 with the worker's opts)."""
    a: list[Any] = [Q, ts, job_id, token, delay, skip, fields]
    if fetch is not None:
        o: dict[str, Any] = {"token": token, "lockDuration": 30000}
        if name is not None:
            o["name"] = name
        a += [fetch, msgpack.packb(o) if fetch else ""]
    return a


def _fams(name: str) -> list[str]:
    return sorted(f for f in FAMILIES if name in FAMILIES[f])


class Queue:
    """A release family's scripts on both servers: add jobs, fetch them (moveToActive), and run the script
    under test, comparing replies and keyspaces."""

    def __init__(self, pr: Pair, bodies: dict[str, bytes]) -> None:
        self.p, self.b = pr, bodies
        self.add, self.mta = bodies["addStandardJob"], bodies["moveToActive"]
        self.akeys = _release_keys(self.add, _ADD_ROLES)
        for n in ("addStandardJob", "moveToActive", "moveToDelayed", "retryJob", "promote", "addPrioritizedJob",
                  "addDelayedJob"):
            if n in bodies:
                pr.load(bodies[n])

    def addj(self, **kw: Any) -> bytes:
        r = self.p.script(self.add, self.akeys, _release_add_args(self.add, **kw))
        assert isinstance(r, bytes), r
        return r

    def fetch(self, token: str = "t0") -> bytes:
        self.p.both("DEL", Q + b"marker")
        r = self.p.script(self.mta, MTA_KEYS, mta_args(token=token))
        assert isinstance(r, list) and r[1], r
        return r[1]  # type: ignore[no-any-return]

    def run(self, name: str, job_id: bytes, argv: list[Any]) -> Any:
        body = self.b[name]
        r = self.p.script(body, _keys(body, job_id), argv)
        self.p.compare()
        return r

    @property
    def fetches(self) -> bool:
        """This release's moveToDelayed can fetch the next job (npm 5.73+, PyPI 2.20+)."""
        from compat.scripts import layout

        return len(layout(sha(self.b["moveToDelayed"]))["argv"]) == 9

    def mtd(self, job_id: bytes, **kw: Any) -> Any:
        from compat.scripts import layout

        argv = mtd_args(job_id, **kw)
        if layout(sha(self.b["moveToDelayed"]))["argv"][2] == "delayedtimestamp":
            # npm 5.5-5.7: the caller's score as ARGV[3] (here not a multiple of 4096: the event's delay is
            # fractional), no fields
            score = (int(argv[1]) + int(argv[4])) * 0x1000 + 5
            return self.run("moveToDelayed", job_id, [Q, argv[1], score, job_id, argv[3], argv[4], argv[5]])
        if not self.fetches:
            argv = argv[:7]
        elif len(argv) == 7:
            argv += [0, ""]
        return self.run("moveToDelayed", job_id, argv)


def _other_token(body: bytes) -> int:
    """The code for a lock held by another token: -6, or -2 for npm 5.0-5.4 (no stalled key, no removeLock)."""
    from compat.scripts import layout

    return -6 if any("stalled" in k for k in layout(sha(body))["keys"]) else -2


def _lrem_all(body: bytes) -> bool:
    """retryJob of npm 5.0-5.6: LREM active 0 without -3 (a job not in active is pushed back all the same)."""
    from compat.scripts import layout

    return layout(sha(body)).get("lrems") == ["KEYS[1]|0|ARGV[4]"]


def _ran(pr: Pair, name: str) -> int:
    return native_log_count(pr.nat_srv, f"native {name}: ran")


# ---- moveToDelayed ---------------------------------------------------------------------------
def mtd_scenario(q: Queue) -> None:
    p = q.p
    a, b, c = q.addj(name="a"), q.addj(name="b"), q.addj(name="c")
    ja = q.fetch("t0")
    assert ja == a
    # the common path: a failed job with a backoff (fields to update, an attempt counted)
    assert q.mtd(ja, fields=_fields(failedReason="boom", stacktrace='["x"]')) == 0
    # the same millisecond slot again (getDelayedScore's +1), skip attempt, no fields; then a later slot
    jb = q.fetch("t1")
    assert q.mtd(jb, token="t1", skip="1") == 0
    jc = q.fetch("t2")
    assert q.mtd(jc, token="t2", delay=1, ts=TS + 4000) == 0
    assert p.lua.zcard(Q + b"delayed") == 3
    # error codes: missing job (-1), lock missing (-2), another token (-6), not in active (-3, Lua)
    assert q.mtd(b"nope") == -1
    d = q.addj(name="d")
    jd = q.fetch("t3")
    assert jd == d
    assert q.mtd(jd, token="other") == _other_token(q.b["moveToDelayed"])
    p.both("DEL", Q + jd + b":lock")
    assert q.mtd(jd, token="t3") == -2
    assert q.mtd(jd, token="0", fields=_fields(n=1, x=2.5)) == 0  # token "0": no lock to remove
    assert q.mtd(jd, token="0") == -3  # (Lua)
    for j in (a, b, c):
        assert p.lua.hget(Q + j, "delay") is not None
    # fetch next: a waiting job comes back as moveToActive's reply; nothing to fetch: 0; paused: 0
    q.addj(name="e")
    f = q.addj(name="f")
    je = q.fetch("t4")
    r = q.mtd(je, token="t4", fetch=1, name="w1")
    if q.fetches:
        assert isinstance(r, list) and r[1] == f, r
        assert q.mtd(f, token="t4", fetch=1) == 0
    else:
        assert r == 0
        assert q.fetch("t4") == f
        assert q.mtd(f, token="t4") == 0
    g = q.addj(name="g")
    jg = q.fetch("t5")
    assert jg == g
    q.addj(name="h")
    p.both("HSET", Q + b"meta", "paused", "1")
    assert q.mtd(jg, token="t5", fetch=1) == 0
    p.both("HDEL", Q + b"meta", "paused")
    # a concurrency limit reached: nothing fetched
    p.both("HSET", Q + b"meta", "concurrency", "1")
    jh = q.fetch("t6")
    p.both("LPUSH", Q + b"active", "x1")
    q.addj(name="i")
    assert q.mtd(jh, token="t6", fetch=1) == 0
    p.both("LREM", Q + b"active", 0, "x1")
    p.both("HDEL", Q + b"meta", "concurrency")
    # a prioritized job is the next one
    if "addPrioritizedJob" in q.b:
        prio = q.b["addPrioritizedJob"]
        from .test_native_scripts import _PRIO_ROLES

        pk = _release_keys(prio, _PRIO_ROLES)
        for k in p.lua.lrange(Q + b"wait", 0, -1):
            p.both("LREM", Q + b"wait", 0, k)
        p.script(prio, pk, _release_add_args(prio, opts={"priority": 2}))
        p.script(prio, pk, _release_add_args(prio, opts={"priority": 1}))
        jp = q.fetch("t7")
        r = q.mtd(jp, token="t7", fetch=1, name="w2")
        assert (isinstance(r, list) and r[1]) if q.fetches else r == 0, r
    # bails (Lua): delay 0 with a fetch (the job is due at once), a due delayed job to promote, a job whose
    # atm is no integer, a rate limit
    jz = q.addj(name="z")
    for k in p.lua.lrange(Q + b"wait", 0, -1)[:-1]:
        p.both("LREM", Q + b"wait", 0, k)
    jz = q.fetch("t8")
    r = q.mtd(jz, token="t8", delay=0, fetch=1)  # (Lua: promoted at once, and fetched again)
    assert (isinstance(r, list) and r[1] == jz) if q.fetches else r == 0, r
    q.addj(name="y")
    jy = q.fetch("t9")
    p.both("ZADD", Q + b"delayed", str(TS * 4096), "due")
    q.mtd(jy, token="t9", fetch=1)  # (Lua: promotes "due", then fetches it)
    p.both("ZREM", Q + b"delayed", "due")
    jx = q.addj(name="x")
    jx = q.fetch("ta")
    p.both("HSET", Q + jx, "atm", "x")
    r = q.mtd(jx, token="ta")
    assert isinstance(r, tuple) and r[0] == "error", r
    p.both("DEL", Q + b"delayed")


@pytest.mark.parametrize("family", _fams("moveToDelayed"))
def test_move_to_delayed_oracle(pair: Pair, family: str) -> None:  # noqa: F811
    """moveToDelayed's common path, fetch-next branches and error codes match the Lua path, and run natively
    for every installed release family."""
    import compat.native  # noqa: F401
    from compat.scripts import native_digests

    bodies = FAMILIES[family]
    assert native_digests("moveToDelayed").get(sha(bodies["moveToDelayed"])) == "moveToDelayed", family
    before = _ran(pair, "moveToDelayed")
    mtd_scenario(Queue(pair, bodies))
    assert _ran(pair, "moveToDelayed") - before >= 12


#: npm releases whose moveToDelayed / retryJob / promote differ from the installed families' (fetched with npm
#: pack, as tests/test_native_scripts.py's variant oracle does): the scripts that must run natively, and what
#: each adds
MOVES_VARIANTS: dict[str, tuple[tuple[str, ...], str]] = {
    "5.0.0": (("moveToDelayed", "retryJob", "promote"), "promote: 8 keys, HEXISTS paused, the marker ZADDs "
              "inline, bit.band score; moveToDelayed / retryJob: 7 / 10 keys (the lock's GET and DEL inline, no "
              "stalled set), HGET of maxLenEvents without a default written; moveToDelayed: marker member "
              "\"0\"; retryJob: LREM 0 without -3, no marker for a plain push"),
    "5.4.6": (("moveToDelayed", "retryJob", "promote"), "moveToDelayed / retryJob: 7 / 10 keys, the lock's GET "
              "and DEL inline (-2 for another token); retryJob: LREM 0 without -3, no marker for a plain push"),
    "5.5.4": (("moveToDelayed", "retryJob", "promote"), "retryJob: removeLock, LREM 0 without -3, no marker "
              "for a plain push"),
    "5.7.15": (("moveToDelayed", "retryJob", "promote"), "moveToDelayed: the caller's score as ARGV[3], the "
               "marker unless paused; retryJob: HEXISTS paused, no second read, bound at the next ms, bit.band "
               "score; promote: 8 keys, HEXISTS paused, bit.band score"),
    "5.8.7": (("moveToDelayed", "retryJob", "promote"), "moveToDelayed: 6 ARGV (no fields); retryJob: HEXISTS "
              "paused, no second read, bound below the next ms; promote: 8 keys, HEXISTS paused"),
    "5.20.1": (("moveToDelayed", "retryJob", "promote"), "retryJob: 2-field getTargetQueueList, then "
               "isQueuePausedOrMaxed, no fields to update; promote: the priority score inline"),
    "5.36.0": (("moveToDelayed", "retryJob"), "moveToDelayed: updateJobFields with redis.call"),
    "5.40.5": (("moveToDelayed", "retryJob"), "retryJob: the priority score inline (no getPriorityScore)"),
    "5.46.1": (("moveToDelayed", "retryJob", "promote"),
               "moveToDelayed: 8 keys, no fetch, score before LREM; retryJob: prev failed, 2-field meta read"),
    "5.59.0": (("moveToDelayed", "retryJob", "promote"),
               "moveToDelayed: 8 keys, LREM before score; retryJob/promote: 2-field getTargetQueueList"),
    "6.1.2": (("moveToDelayed", "retryJob", "promote"), "moveToDelayed: 12 keys (the paused list) with getQueueMetadata"),
}


@pytest.mark.parametrize("version", sorted(MOVES_VARIANTS, key=lambda v: tuple(map(int, v.split(".")))))
def test_moves_variant_oracle(pair: Pair, version: str) -> None:  # noqa: F811
    """Each release's variant of moveToDelayed / retryJob / promote matches the Lua path and ran natively
    (the native log counts); the scripts not listed for it run their scenario too where native."""
    import compat.native  # noqa: F401
    from compat.scripts import native_digests

    from .test_native_scripts import _variant_bodies

    bodies = _variant_bodies(version)
    must = MOVES_VARIANTS[version][0]
    for name, scenario in (("moveToDelayed", mtd_scenario), ("retryJob", rj_scenario),
                           ("promote", promote_scenario)):
        native = native_digests(name).get(sha(bodies[name])) == name
        assert native or name not in must, (version, name)
        if not native:
            continue
        pair.flush()
        before = _ran(pair, name)
        scenario(Queue(pair, bodies))
        assert _ran(pair, name) - before >= 8, (version, name)


#: npm releases whose retryJob / moveToDelayed are the 5.0-5.6 variants (natgaps): their commandstats, MONITOR
#: lines and a restart from the store are checked too
OLD_MOVES = ("5.0.0", "5.4.6", "5.5.4")


@pytest.mark.parametrize("version", OLD_MOVES)
def test_old_moves_commandstats_and_monitor(pair: Pair, version: str) -> None:  # noqa: F811
    """npm 5.0-5.6's retryJob (LREM 0, no marker for a plain push, the lock inline before 5.5) and 5.0-5.4's
    moveToDelayed (7 keys) count the same commands and show a MONITOR client the same lines as Lua, natively."""
    from .test_native_scripts import _variant_bodies

    q = Queue(pair, _variant_bodies(version))
    n = [0]

    def cycle() -> None:
        n[0] += 1
        t = f"k{n[0]}"
        for i in range(3):
            q.addj(name=f"s{i}")
        j = q.fetch(t)
        q.run("retryJob", j, rj_args(j, token=t))
        j = q.fetch(t)
        pair.both("HSET", Q + j, "priority", "2")
        q.run("retryJob", j, rj_args(j, token=t, push="RPUSH"))
        j = q.fetch(t)
        pair.both("HSET", Q + b"meta", "paused", "1")
        q.run("retryJob", j, rj_args(j, token=t))
        q.run("retryJob", j, rj_args(j, token="0"))  # (not in active: pushed again, no -3)
        pair.both("LREM", Q + b"paused", 1, j)
        pair.both("HDEL", Q + b"meta", "paused")
        while pair.both("RPOPLPUSH", Q + b"paused", Q + b"wait") is not None:
            pass
        q.run("retryJob", b"missing", rj_args(b"missing", token=t))
        j = q.fetch(t)
        q.mtd(j, token="other")
        q.mtd(j, token=t)
        j = q.fetch(t)
        q.mtd(j, token=t, skip="1")
        q.mtd(b"missing")

    before = {name: _ran(pair, name) for name in ("retryJob", "moveToDelayed")}
    _stats_and_monitor(pair, cycle)
    for name, b in before.items():
        assert _ran(pair, name) - b >= 8, (name, [ln for ln in pair.nat_srv.output().splitlines() if "fallback" in ln])


def test_old_moves_persisted(tmp_path: Any) -> None:
    """npm 5.0.0's retryJob and moveToDelayed (the oldest variants) write what a restart from the store reads
    back."""
    from .test_native_scripts import _variant_bodies

    b = _variant_bodies("5.0.0")
    add, mta, rj, mtd = b["addStandardJob"], b["moveToActive"], b["retryJob"], b["moveToDelayed"]

    def run(r: redis.Redis) -> None:
        for body in (add, mta, rj, mtd):
            r.script_load(body)
        ak = _release_keys(add, _ADD_ROLES)
        for i in range(4):
            r.evalsha(sha(add), len(ak), *ak, *_release_add_args(add, name=f"d{i}"))
        for i in range(3):
            j = r.evalsha(sha(mta), len(MTA_KEYS), *MTA_KEYS, *mta_args(token="t0"))[1]
            if i == 1:
                r.hset(Q + j, "priority", "4")
            if i < 2:
                k = _keys(rj, j)
                assert r.evalsha(sha(rj), len(k), *k, *rj_args(j)) == 0
            else:
                k = _keys(mtd, j)
                assert r.evalsha(sha(mtd), len(k), *k, Q, TS, (TS + 5000) * 4096, j, "t0", 5000, "0") == 0

    _durable(tmp_path, run, "retryJob")


def _stats_and_monitor(pr: Pair, cycle: Callable[[], None]) -> None:
    """INFO commandstats after ``cycle()``, and the lines a MONITOR client sees during another, are the same
    on both servers."""
    pr.both("CONFIG", "RESETSTAT")
    cycle()
    pr.compare()
    stats = [{k: v["calls"] for k, v in c.info("commandstats").items()} for c in (pr.lua, pr.nat)]
    assert stats[0] == stats[1]
    seen = _monitored((pr.lua_srv.port, pr.nat_srv.port), cycle)
    pr.compare()
    assert len(seen[0]) > 20
    assert seen[0] == seen[1]


@pytest.mark.parametrize("family", _fams("moveToDelayed"))
def test_move_to_delayed_commandstats_and_monitor(pair: Pair, family: str) -> None:  # noqa: F811
    q = Queue(pair, FAMILIES[family])
    n = [0]

    def cycle() -> None:
        n[0] += 1
        for i in range(3):
            q.addj(name=f"s{i}")
        j = q.fetch(f"k{n[0]}")
        j = q.mtd(j, token=f"k{n[0]}", fetch=1, name="w")[1]
        q.mtd(j, token=f"k{n[0]}", fields=_fields(failedReason="r"))
        j = q.fetch(f"k{n[0]}")
        q.mtd(j, token=f"k{n[0]}", fetch=1)
        q.mtd(b"missing")

    _stats_and_monitor(pair, cycle)


def _durable(tmp_path: Any, run: Callable[[redis.Redis], None], name: str) -> None:
    """``run`` on a durable server, which is then restarted from its store: the same keyspace (hash fields
    compared sorted: recovery does not keep a hash's insertion order); ``name`` ran natively."""
    srv = start_respqueue("--durability", "durable", workdir=str(tmp_path))
    try:
        r = redis.Redis(port=srv.port)
        run(r)
        before = dump(r, sort_hashes=True)
        r.close()
    finally:
        srv.stop()
    assert f"native fast path in use for BullMQ script {name}" in srv.output()
    assert_restarts_same(str(tmp_path), srv.port, before)


def _node6() -> dict[str, bytes]:
    fam = [f for f in FAMILIES if f.startswith("node-6.x")]
    if not fam:
        pytest.skip("bullmq 6.x not installed")
    return FAMILIES[fam[0]]


def test_move_to_delayed_persisted(tmp_path: Any) -> None:
    b = _node6()
    add, mta, mtd = b["addStandardJob"], b["moveToActive"], b["moveToDelayed"]

    def run(r: redis.Redis) -> None:
        for body in (add, mta, mtd):
            r.script_load(body)
        ak = _release_keys(add, _ADD_ROLES)
        for i in range(3):
            r.evalsha(sha(add), len(ak), *ak, *_release_add_args(add, name=f"d{i}"))
        j = r.evalsha(sha(mta), 11, *MTA_KEYS, *mta_args(token="t0"))[1]
        k = _keys(mtd, j)
        assert r.evalsha(sha(mtd), len(k), *k, *mtd_args(j, fields=_fields(failedReason="f"), fetch=1))[1]
        info = r.execute_command("INFO", "commandstats")
        assert info

    _durable(tmp_path, run, "moveToDelayed")


# ---- retryJob --------------------------------------------------------------------------------
def rj_args(job_id: bytes, token: str = "t0", push: str = "LPUSH", fields: bytes | str = "",
            ts: int = TS + 30) -> list[Any]:
    return [Q, ts, push, job_id, token, fields]


def rj_scenario(q: Queue) -> None:
    p = q.p
    rj = lambda j, **kw: q.run("retryJob", j, rj_args(j, **kw))  # noqa: E731
    a, b = q.addj(name="a"), q.addj(name="b")
    ja = q.fetch("t0")
    assert ja == a
    # the common path: fields to update, the job back in wait (LPUSH), the marker, the waiting event
    assert rj(ja, fields=_fields(failedReason="boom", stacktrace='["x"]')) == 0
    jb = q.fetch("t1")
    assert jb == b
    assert rj(jb, token="t1", push="RPUSH") == 0  # lifo
    assert p.lua.lrange(Q + b"wait", 0, -1) == [a, b]
    # error codes: missing job (-1), another token (-6), lock missing (-2), token "0", not in active (-3)
    assert rj(b"nope") == -1
    jb = q.fetch("t2")
    assert rj(jb, token="other") == _other_token(q.b["retryJob"])
    p.both("DEL", Q + jb + b":lock")
    assert rj(jb, token="t2") == -2
    assert rj(jb, token="0", fields=_fields(n=1, x=2.5)) == 0
    if _lrem_all(q.b["retryJob"]):
        # npm 5.0-5.6: no -3; the job goes to wait again (twice now), LREM 0 then takes every copy out
        assert rj(jb, token="0") == 0
        assert p.lua.lrange(Q + b"wait", 0, -1).count(jb) == 2
        p.both("LPUSH", Q + b"active", jb, "x2", jb)
        p.both("LREM", Q + b"wait", 0, jb)
        assert rj(jb, token="0") == 0
        assert p.lua.lrange(Q + b"active", 0, -1) == [b"x2"]
        p.both("LREM", Q + b"active", 0, "x2")
    else:
        assert rj(jb, token="0") == -3
    # a paused queue (5.x: the paused list), no marker; then a concurrency limit reached
    ja = q.fetch("t3")
    p.both("DEL", Q + b"marker")
    p.both("HSET", Q + b"meta", "paused", "1")
    assert rj(ja, token="t3") == 0
    p.both("HDEL", Q + b"meta", "paused")
    for k in (b"paused", b"wait"):
        for j in p.lua.lrange(Q + k, 0, -1):
            p.both("LREM", Q + k, 0, j)
            p.both("LPUSH", Q + b"wait", j)
    ja = q.fetch("t4")
    p.both("HSET", Q + b"meta", "concurrency", "1")
    p.both("LPUSH", Q + b"active", "x1")
    p.both("DEL", Q + b"marker")
    assert rj(ja, token="t4") == 0
    p.both("LREM", Q + b"active", 0, "x1")
    p.both("HDEL", Q + b"meta", "concurrency")
    # a prioritized job: back to the prioritized zset with the next counter
    ja = q.fetch("t5")
    p.both("HSET", Q + ja, "priority", "3")
    p.both("SET", Q + b"pc", "7")
    assert rj(ja, token="t5") == 0
    assert p.lua.zscore(Q + b"prioritized", ja) == 3 * 2**32 + 8
    # a priority counter past 2**31 (before 5.8 bit.band's 32 bits make the score negative: Lua)
    ja = q.fetch("t5")
    p.both("HSET", Q + ja, "priority", "2")
    p.both("SET", Q + b"pc", str(2**31 - 1))
    assert rj(ja, token="t5") == 0
    # bails (Lua): a delayed job due (promoted first), a priority out of range, an atm that is no integer
    jb = q.fetch("t6")
    p.both("ZADD", Q + b"delayed", str(TS * 4096), "due")
    assert rj(jb, token="t6") == 0
    jc = q.fetch("t7")
    p.both("HSET", Q + jc, "priority", "2.5")
    assert rj(jc, token="t7") == 0
    jd = q.fetch("t8")
    p.both("HSET", Q + jd, "atm", "x")
    r = rj(jd, token="t8")
    assert isinstance(r, tuple) and r[0] == "error", r


@pytest.mark.parametrize("family", _fams("retryJob"))
def test_retry_job_oracle(pair: Pair, family: str) -> None:  # noqa: F811
    """retryJob's common path, paused/maxed/prioritized branches and error codes match the Lua path, and run
    natively for every installed release family."""
    import compat.native  # noqa: F401
    from compat.scripts import native_digests

    bodies = FAMILIES[family]
    assert native_digests("retryJob").get(sha(bodies["retryJob"])) == "retryJob", family
    before = _ran(pair, "retryJob")
    rj_scenario(Queue(pair, bodies))
    assert _ran(pair, "retryJob") - before >= 10


@pytest.mark.parametrize("family", _fams("retryJob"))
def test_retry_job_commandstats_and_monitor(pair: Pair, family: str) -> None:  # noqa: F811
    q = Queue(pair, FAMILIES[family])
    n = [0]

    def cycle() -> None:
        n[0] += 1
        t = f"k{n[0]}"
        for i in range(2):
            q.addj(name=f"s{i}")
        j = q.fetch(t)
        q.run("retryJob", j, rj_args(j, token=t, fields=_fields(failedReason="r")))
        j = q.fetch(t)
        pair.both("HSET", Q + j, "priority", "2")
        q.run("retryJob", j, rj_args(j, token=t))
        j = q.fetch(t)
        pair.both("HSET", Q + b"meta", "paused", "1")
        q.run("retryJob", j, rj_args(j, token=t))
        pair.both("HDEL", Q + b"meta", "paused")
        while pair.both("RPOPLPUSH", Q + b"paused", Q + b"wait") is not None:
            pass
        q.run("retryJob", b"missing", rj_args(b"missing", token=t))

    _stats_and_monitor(pair, cycle)


def test_retry_job_persisted(tmp_path: Any) -> None:
    b = _node6()
    add, mta, rj = b["addStandardJob"], b["moveToActive"], b["retryJob"]

    def run(r: redis.Redis) -> None:
        for body in (add, mta, rj):
            r.script_load(body)
        ak = _release_keys(add, _ADD_ROLES)
        for i in range(3):
            r.evalsha(sha(add), len(ak), *ak, *_release_add_args(add, name=f"d{i}"))
        for i in range(2):
            j = r.evalsha(sha(mta), 11, *MTA_KEYS, *mta_args(token="t0"))[1]
            if i:
                r.hset(Q + j, "priority", "4")
            k = _keys(rj, j)
            assert r.evalsha(sha(rj), len(k), *k, *rj_args(j, fields=_fields(failedReason="f"))) == 0

    _durable(tmp_path, run, "retryJob")


# ---- promote ---------------------------------------------------------------------------------
def promote_scenario(q: Queue) -> None:
    from .test_native_scripts import _DELAYED_ROLES

    p = q.p
    dly = q.b["addDelayedJob"]
    dk = _release_keys(dly, _DELAYED_ROLES)
    ids = [p.script(dly, dk, _release_add_args(dly, name=f"d{i}", opts={"delay": 60000 + i, "attempts": 1}))
           for i in range(9)]
    p.compare()
    pr = lambda j: q.run("promote", j, [Q, j])  # noqa: E731
    p.both("DEL", Q + b"marker")
    assert pr(ids[0]) == 0  # to wait, the marker, the waiting event, delay 0
    assert pr(ids[0]) == -3  # no longer delayed
    assert pr(b"nope") == -3
    p.both("HSET", Q + b"meta", "paused", "1")
    p.both("DEL", Q + b"marker")
    assert pr(ids[1]) == 0  # paused (5.x: the paused list), no marker
    p.both("HDEL", Q + b"meta", "paused")
    p.both("HSET", Q + b"meta", "concurrency", "1")
    p.both("LPUSH", Q + b"active", "x1")
    assert pr(ids[2]) == 0  # maxed: no marker
    p.both("HDEL", Q + b"meta", "concurrency")
    p.both("HSET", Q + ids[3], "priority", "5")
    p.both("SET", Q + b"pc", "2")
    assert pr(ids[3]) == 0
    assert p.lua.zscore(Q + b"prioritized", ids[3]) == 5 * 2**32 + 3
    p.both("HSET", Q + ids[4], "priority", "1")
    p.both("DEL", Q + b"pc")
    assert pr(ids[4]) == 0
    p.both("DEL", Q + ids[5])
    assert pr(ids[5]) == 0  # no job hash: HSET delay 0 makes one, as in Lua
    # bails (Lua): a legacy marker at the head of wait, a priority out of range
    p.both("RPUSH", Q + b"wait", "0:1000")
    assert pr(ids[6]) == 0
    p.both("HSET", Q + ids[7], "priority", "1.5")
    assert pr(ids[7]) == 0
    # a priority counter past 2**31 (before 5.8 bit.band's 32 bits make the score negative: Lua)
    p.both("HSET", Q + ids[8], "priority", "1")
    p.both("SET", Q + b"pc", str(2**31 - 1))
    assert pr(ids[8]) == 0


@pytest.mark.parametrize("family", _fams("promote"))
def test_promote_oracle(pair: Pair, family: str) -> None:  # noqa: F811
    """promote's branches (to wait, paused, maxed, prioritized, not delayed) match the Lua path, and run
    natively for every installed release family."""
    import compat.native  # noqa: F401
    from compat.scripts import native_digests

    bodies = FAMILIES[family]
    assert native_digests("promote").get(sha(bodies["promote"])) == "promote", family
    before = _ran(pair, "promote")
    promote_scenario(Queue(pair, bodies))
    assert _ran(pair, "promote") - before >= 8


@pytest.mark.parametrize("family", _fams("promote"))
def test_promote_commandstats_and_monitor(pair: Pair, family: str) -> None:  # noqa: F811
    from .test_native_scripts import _DELAYED_ROLES

    q = Queue(pair, FAMILIES[family])
    dly = q.b["addDelayedJob"]
    dk = _release_keys(dly, _DELAYED_ROLES)

    def cycle() -> None:
        ids = [pair.script(dly, dk, _release_add_args(dly, opts={"delay": 60000, "attempts": 1})) for _ in range(3)]
        q.run("promote", ids[0], [Q, ids[0]])
        pair.both("HSET", Q + ids[1], "priority", "2")
        q.run("promote", ids[1], [Q, ids[1]])
        pair.both("HSET", Q + b"meta", "paused", "1")
        q.run("promote", ids[2], [Q, ids[2]])
        pair.both("HDEL", Q + b"meta", "paused")
        q.run("promote", b"missing", [Q, b"missing"])

    _stats_and_monitor(pair, cycle)


def test_promote_persisted(tmp_path: Any) -> None:
    from .test_native_scripts import _DELAYED_ROLES

    b = _node6()
    dly, pr = b["addDelayedJob"], b["promote"]

    def run(r: redis.Redis) -> None:
        for body in (dly, pr):
            r.script_load(body)
        dk = _release_keys(dly, _DELAYED_ROLES)
        for i in range(3):
            j = r.evalsha(sha(dly), len(dk), *dk, *_release_add_args(dly, opts={"delay": 5000, "attempts": 1}))
            if i:
                if i == 2:
                    r.hset(Q + j, "priority", "3")
                k = _keys(pr, j)
                assert r.evalsha(sha(pr), len(k), *k, Q, j) == 0

    _durable(tmp_path, run, "promote")


# ---- real clients ------------------------------------------------------------------------------
_NODE_RETRIES = r"""
const path = require('path');
const [port, dir] = process.argv.slice(1);
const { Queue, Worker } = require(require.resolve('bullmq', { paths: [path.resolve(dir)] }));
const connection = { host: '127.0.0.1', port: Number(port), maxRetriesPerRequest: null };
(async () => {
  const q = new Queue('moves', { connection });
  await q.obliterate({ force: true }).catch(() => {});
  await q.add('backoff', { i: 1 }, { attempts: 3, backoff: { type: 'fixed', delay: 150 } });
  await q.add('retry', { i: 2 }, { attempts: 2 });
  const later = await q.add('later', { i: 3 }, { delay: 600000 });
  const tries = {};
  const w = new Worker('moves', async (job) => {
    tries[job.name] = (tries[job.name] || 0) + 1;
    if (job.name === 'backoff' && tries.backoff < 3) throw new Error('backoff ' + tries.backoff);
    if (job.name === 'retry' && tries.retry < 2) throw new Error('retry once');
    return job.data.i;
  }, { connection, concurrency: 1, name: 'wm' });
  await later.promote();
  const end = Date.now() + 30000;
  let c;
  while (Date.now() < end) {
    c = await q.getJobCounts('completed', 'failed', 'delayed', 'wait', 'active');
    if (c.completed === 3) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  const jobs = (await q.getJobs(['completed'])).sort((a, b) => a.data.i - b.data.i);
  process.stdout.write(JSON.stringify({ c, jobs: jobs.map((j) => [j.name, j.attemptsMade, j.failedReason || null,
    j.returnvalue, JSON.parse(JSON.stringify(j.stacktrace)).length]) }));
  await w.close();
  await q.close();
  process.exit(0);
})().catch((e) => { process.stdout.write(JSON.stringify({ error: String(e.stack || e) })); process.exit(1); });
"""


@pytest.mark.parametrize("client_dir", ["interop/bullmq5", "interop"], ids=["npm-5.x", "npm-6.x"])
def test_node_client_retries_natively(client_dir: str) -> None:
    """A real Node BullMQ worker retries a job after a backoff (moveToDelayed), one at once (retryJob), and a
    delayed job is promoted (promote): the outcome is Lua's, and the three ran natively."""
    import json
    import os
    import shutil
    import subprocess

    from .servers import ROOT

    d = os.path.join(ROOT, client_dir)
    if shutil.which("node") is None or not os.path.isdir(os.path.join(d, "node_modules", "bullmq")):
        pytest.skip(f"no bullmq in {client_dir}/node_modules")
    outs = {}
    for mode in ("on", "off"):
        srv = start_respqueue("--durability", "memory", "--native-scripts", mode, "--log-level", "debug")
        try:
            p = subprocess.run(["node", "-e", _NODE_RETRIES, str(srv.port), d], capture_output=True, text=True,
                               timeout=120, cwd=ROOT)
            outs[mode] = json.loads(p.stdout)
        finally:
            srv.stop()
        if mode == "on":
            log = srv.output()
            for n in ("moveToDelayed", "retryJob", "promote"):
                assert f"native {n}: ran" in log, n
            assert "after writing" not in log and "Traceback" not in log
    assert "error" not in outs["on"], outs["on"]
    assert outs["on"] == outs["off"]
    assert outs["on"]["c"]["completed"] == 3
    assert [j[1] for j in outs["on"]["jobs"]] == [3, 2, 1]  # (attemptsMade counts the last try too)


# ---- every scanned release (opt-in) ------------------------------------------------------------------
#: RESPQUEUE_BODIES_DIR=<dir> runs the three scenarios with each release's scripts from <dir>/<release>/
#: <name>-<numkeys>.lua (the bodies exactly as each client sends them; kept outside the project), for the
#: releases whose digest of the script runs natively
_BODIES = os.environ.get("RESPQUEUE_BODIES_DIR", "")


def _release_bodies(rel: str) -> dict[str, bytes]:
    out = {}
    for f in os.listdir(os.path.join(_BODIES, rel)):
        if f.endswith(".lua"):
            with open(os.path.join(_BODIES, rel, f), "rb") as fh:
                out[f.rsplit("-", 1)[0]] = fh.read()
    return out


_SWEEP = (("moveToDelayed", mtd_scenario), ("retryJob", rj_scenario), ("promote", promote_scenario))


@pytest.mark.skipif(not _BODIES, reason="RESPQUEUE_BODIES_DIR not set (opt-in sweep over every release)")
@pytest.mark.parametrize("release", sorted(os.listdir(_BODIES)) if _BODIES and os.path.isdir(_BODIES) else [])
def test_release_sweep(pair: Pair, release: str) -> None:  # noqa: F811
    import compat.native  # noqa: F401
    from compat.scripts import SCRIPTS, native_digests

    bodies = _release_bodies(release)
    ran = 0
    for name, scenario in _SWEEP:
        s = sha(bodies[name]) if name in bodies else None
        if s is None or native_digests(name).get(s) != name:
            assert s is None or s.encode() in SCRIPTS
            continue
        pair.flush()
        before = _ran(pair, name)
        scenario(Queue(pair, bodies))
        assert _ran(pair, name) > before, (release, name)
        ran += 1
    if ran == 0:
        pytest.skip(f"{release}: none of the three runs natively")


def test_every_digest_runs_natively() -> None:
    """Every recorded digest of moveToDelayed (15), retryJob (11) and promote (8) runs natively: npm 5.0-5.6's
    retryJob and 5.0-5.4's moveToDelayed too, as variants."""
    import compat.native  # noqa: F401
    from compat.scripts import SCRIPTS, native_digests

    nat = native_digests()
    want = {"moveToDelayed": 15, "retryJob": 11, "promote": 8}
    lua = sorted((v[0], v[1], v[2]) for k, v in SCRIPTS.items() if v[0] in want and k.decode() not in nat)
    assert lua == [], lua
    assert {n: sum(1 for v in nat.values() if v == n) for n in want} == want

"""Native moveStalledJobsToWait (compat/native/move_stalled_jobs_to_wait.py) against the Lua path, for every
release family (node 6.x, node 5.x latest, py 3.x, py 2.x; every scanned release with RESPQUEUE_RELEASE_SWEEP=1,
or every body under RESPQUEUE_BODIES_DIR/<release>/): replies, keyspace, INFO commandstats and MONITOR lines,
on the common paths (the stalled-check key present; an empty stalled set; the active ids copied; locked,
finished and legacy-marker members) and on the Lua fallbacks (a truly stalled job; the stalled limit)."""

from __future__ import annotations

# ruff: noqa: F811  (the pair fixture, imported, is the tests' argument name)
import time
from typing import Any

import pytest
import redis

from .native_oracle import durable_run, release_keys, same_stats_and_monitor, script_bodies
from .test_native_scripts import (
    TS,
    Pair,
    native_log_count,
    pair,  # noqa: F401  (fixture)
    servers,  # noqa: F401  (fixture)
    sha,
)

Q = b"bull:q:"
NAME = "moveStalledJobsToWait"
RAN = f"native {NAME}: ran"
_ROLES = {"stalled set": b"stalled", "wait list": b"wait", "active list": b"active", "failed zset": b"failed",
          "stalled check key": b"stalled-check", "meta key": b"meta", "paused list": b"paused", "marker": b"marker",
          "event stream stream": b"events", "repeat key": b"repeat"}


def _keys(body: bytes) -> list[bytes]:
    return release_keys(body, Q, _ROLES)


BODIES = script_bodies(NAME)


def _argv(max_stalled: int = 1, ts: int = TS, px: Any = 30000) -> list[Any]:
    return [max_stalled, Q, ts, px]


def _job(pair: Pair, job_id: str, locked: bool = True, active: bool = True, **fields: Any) -> None:
    pair.both("HSET", Q + job_id.encode(), "name", "j", "data", "{}", "opts", '{"attempts":1}',
              "timestamp", str(TS), "ats", "1", *[x for kv in fields.items() for x in kv])
    if active:
        pair.both("LPUSH", Q + b"active", job_id)
    if locked:
        pair.both("SET", Q + job_id.encode() + b":lock", "tok", "PX", "60000")


def _check(pair: Pair, body: bytes, *argv: Any, **kw: Any) -> Any:
    pair.both("DEL", Q + b"stalled-check")
    r = pair.script(body, _keys(body), list(argv) or _argv(**kw))
    pair.compare()
    return r


def stalled_scenario(pair: Pair, body: bytes) -> int:
    """A worker's stalled checks with one release's script; every reply and keyspace compared. Returns how
    many ran natively on the native server."""
    keys = _keys(body)
    before = native_log_count(pair.nat_srv, RAN)
    empty = pair.script(body, keys, _argv(), by_sha=False)  # nothing anywhere; ioredis sends EVAL first
    pair.compare()
    assert empty in ([], [[], []]), empty
    assert pair.script(body, keys, _argv()) == empty  # the check key is there: at once
    assert pair.lua.exists(Q + b"stalled-check")
    assert (pair.lua.hget(Q + b"meta", "opts.maxLenEvents") is None) == (b"getOrSetMaxEvents" not in body)
    for i in range(5):
        _job(pair, str(i))
    pair.both("XADD", Q + b"events", "1-1", "event", "added", "jobId", "0")
    assert _check(pair, body) == empty  # the active ids copied to the stalled set
    assert len(pair.lua.smembers(Q + b"stalled")) == 5
    # every stalled job still locked (extended), one finished meanwhile (no lock, no longer active), a legacy
    # marker; a custom opts.maxLenEvents
    pair.both("LREM", Q + b"active", 1, "4")
    pair.both("DEL", Q + b"4:lock")
    pair.both("SADD", Q + b"stalled", "0:123", "gone", "expired")
    pair.both("LPUSH", Q + b"active", "0:123")
    pair.both("SET", Q + b"0:123:lock", "x", "PX", "60000")  # (a marker is removed, lock or not)
    pair.both("SET", Q + b"expired:lock", "tok", "PX", "1")  # its lock expired, the job is no longer active
    pair.both("HSET", Q + b"meta", "opts.maxLenEvents", "7")
    time.sleep(0.01)
    assert _check(pair, body, ts=TS + 1) == empty
    assert not pair.lua.exists(Q + b"expired:lock") and not pair.nat.exists(Q + b"expired:lock")
    assert sorted(pair.lua.smembers(Q + b"stalled")) == [b"0", b"1", b"2", b"3"]
    assert _check(pair, body, ts=TS + 2) == empty  # the same again
    ran = native_log_count(pair.nat_srv, RAN) - before
    # a lock with an expired TTL counts as missing (the job is still active: Lua)
    pair.both("SET", Q + b"1:lock", "tok", "PX", "1")
    time.sleep(0.01)
    r = _check(pair, body, ts=TS + 3)
    assert r in ([b"1"], [[], [b"1"]]), r
    # a truly stalled job goes back to wait (Lua), and past the stalled limit fails (Lua)
    pair.both("DEL", Q + b"2:lock")
    r = _check(pair, body, 0, Q, TS + 4, 30000)
    assert r in ([b"2"], [[b"2"], []]), r
    if r == [b"2"]:  # 5.53+: it went back to wait, as stalled; a second stall without lock: failed-on-next
        assert pair.lua.hget(Q + b"2", "defa")
    _check(pair, body, ts=TS + 5)
    return ran


@pytest.mark.parametrize("family", sorted(BODIES))
def test_stalled_release_oracle(pair: Pair, family: str) -> None:
    """Every release family's script: the common paths run natively and match Lua exactly; the stalled-job
    branches fall back to Lua and still match."""
    import compat.native  # noqa: F401  (registers the native implementations)
    from compat.scripts import native_digests

    body = BODIES[family]
    assert native_digests(NAME).get(sha(body)) == NAME, f"{family}: {NAME} runs on Lua"
    ran = stalled_scenario(pair, body)
    assert ran >= 5, (family, ran)


@pytest.mark.parametrize("family", sorted(f for f in BODIES if ":" in f))  # the installed families
def test_stalled_commandstats_and_monitor(pair: Pair, family: str) -> None:
    """INFO commandstats and the lines a MONITOR client sees are the Lua path's, on the common paths."""
    body = BODIES[family]
    pair.load(body)
    for i in range(3):
        _job(pair, str(i))
    pair.both("SADD", Q + b"stalled", "0:9", "gone")

    def cycle() -> None:
        for ts in (TS, TS + 1):
            _check(pair, body, ts=ts)
            pair.script(body, _keys(body), _argv(ts=ts))  # the check key is there
        pair.both("HDEL", Q + b"meta", "opts.maxLenEvents")

    before = native_log_count(pair.nat_srv, RAN)
    same_stats_and_monitor(pair, cycle, {"exists": 6, "sadd": 2})
    assert native_log_count(pair.nat_srv, RAN) - before == 8


def test_stalled_many_active_and_errors(pair: Pair) -> None:
    """More active jobs than one SADD batch (7000); the errors the script meets come from the Lua path."""
    body = BODIES[sorted(BODIES)[0]]
    keys = _keys(body)
    pair.load(body)
    ids = [str(i) for i in range(7100)]
    pair.both("RPUSH", Q + b"active", *ids)
    before = native_log_count(pair.nat_srv, RAN)
    _check(pair, body)
    assert pair.lua.scard(Q + b"stalled") == 7100
    assert native_log_count(pair.nat_srv, RAN) == before + 1
    pair.both("DEL", Q + b"active", Q + b"stalled")
    for bad in ((1, Q, TS, 0), (1, Q, TS, "x"), (1, Q, TS, -5)):  # SET PX's errors
        r = _check(pair, body, *bad)
        assert isinstance(r, tuple) and "script:" in r[1], r
    assert pair.script(body, keys, [1, Q]) == pair.script(body, keys, [1, Q])  # too few arguments
    pair.both("HSET", Q + b"meta", "opts.maxLenEvents", "many")
    assert isinstance(_check(pair, body), tuple)
    pair.both("DEL", Q + b"meta")
    for k in (b"stalled", b"active", b"meta", b"events"):
        pair.both("DEL", Q + k)
        pair.both("SET", Q + k, "wrong type")
        r = _check(pair, body)
        assert isinstance(r, tuple) and "WRONGTYPE" in r[1], (k, r)
        pair.both("DEL", Q + k)
    assert native_log_count(pair.nat_srv, RAN) == before + 1
    assert "after writing" not in pair.nat_srv.output()


def test_stalled_check_is_durable(tmp_path: Any) -> None:
    """The native path's writes (check key with its TTL, meta default, stalled set) survive a restart."""
    body = BODIES[sorted(BODIES)[0]]
    keys = _keys(body)

    def run(r: redis.Redis, s: str, srv: Any) -> None:
        r.rpush(Q + b"active", *[str(i) for i in range(50)])
        r.sadd(Q + b"stalled", "0:1", "7")
        r.set(Q + b"7:lock", "t", px=600000)
        r.evalsha(s, len(keys), *keys, *_argv(px=600000))
        assert native_log_count(srv, RAN) == 1
        assert r.scard(Q + b"stalled") == 50 and r.pttl(Q + b"stalled-check") > 0

    durable_run(str(tmp_path), body, run)


def test_stalled_families_present() -> None:
    fams = {f.split(":")[0] for f in BODIES}
    if len(fams) < 2:
        pytest.skip("release families not installed")
    assert {"node-6.x", "py-3.x"} <= fams, fams

"""Native moveStalledJobsToWait (compat/native/move_stalled_jobs_to_wait.py) against the Lua path, for every
release family (node 6.x, node 5.x latest, py 3.x, py 2.x; every scanned release with RESPQUEUE_RELEASE_SWEEP=1,
or every body under RESPQUEUE_BODIES_DIR/<release>/): replies, keyspace, INFO commandstats and MONITOR lines,
on the common paths (the stalled-check key present; an empty stalled set; the active ids copied; locked,
finished and legacy-marker members), truly stalled jobs (natively for npm 5.0+ / PyPI 2.x: moved back, several
at once, past the limit (5.53+), repeatable, paused, at the concurrency limit) and the Lua fallbacks (5.0-5.52's
jobs past the limit, failed in the script; the script's errors)."""

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
    # a truly stalled job goes back to wait, and past the stalled limit is marked (5.53+, native) or fails (Lua)
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


# ---- truly stalled jobs: moved back (5.53+: ``defa`` past the limit; 5.0-5.52: past the limit on Lua) ----
def _stall_mode(body: bytes) -> Any:
    """The native variant's StallMode for this body (None: truly stalled jobs run on Lua)."""
    import compat.native  # noqa: F401
    from compat.scripts import _BY_SHA

    ent = _BY_SHA.get(sha(body).encode())
    assert ent is not None, "not native"
    v = ent[4]
    if v is True:
        from compat.native.move_stalled_jobs_to_wait import STALLED_V6

        v = STALLED_V6
    return v.stall


def _stall(pair: Pair, body: bytes, *ids: str, **kw: Any) -> Any:
    """The given jobs, active, lose their locks and are in the stalled set; one check, compared."""
    for i in ids:
        pair.both("DEL", Q + i.encode() + b":lock")
    pair.both("SADD", Q + b"stalled", *ids)
    return _check(pair, body, **kw)


def _ran(pair: Pair) -> int:
    return native_log_count(pair.nat_srv, RAN)


def stalled_moves_scenario(pair: Pair, body: bytes) -> tuple[int, int]:
    """Truly stalled jobs with one release's script, every reply and keyspace compared against Lua: moved
    back to wait (a priority makes no difference), several in one call, past the limit (``defa``, or failed by
    5.0-5.52), a repeatable job, a paused queue, a queue at its concurrency limit. Returns (native runs of the
    stalled calls, stalled calls)."""
    mode = _stall_mode(body)
    lay_keys = _keys(body)
    assert len(lay_keys) in (8, 9)
    calls = native = 0

    def run(*ids: str, **kw: Any) -> Any:
        nonlocal calls, native
        before = _ran(pair)
        r = _stall(pair, body, *ids, **kw)
        calls += 1
        native += _ran(pair) - before
        return r

    # (several jobs in one call have integer ids: the stalled set is then an intset, SMEMBERS sorted; a small
    #  set of strings is in the server process's hash order, which differs between the two servers)

    def stalled_reply(r: Any) -> list[bytes]:
        return r[1] if r and isinstance(r[0], list) else r

    for i in range(6):
        _job(pair, str(i), priority="3" if i == 1 else "0")
    _check(pair, body)  # the active ids copied to the stalled set
    pair.both("DEL", Q + b"stalled")
    # one job moved back (stc 1 of max 1)
    r = run("0")
    assert stalled_reply(r) == [b"0"], r
    assert pair.lua.lrange(Q + b"wait", 0, -1) == [b"0"] and b"1" in pair.lua.hmget(Q + b"0", "stc", "stalledCounter")
    assert pair.lua.zscore(Q + b"marker", "0") == 0 or b"marker" not in b"".join(lay_keys)
    # a job with a priority (the script pushes it to wait all the same), and one still locked, in one call
    pair.both("SADD", Q + b"stalled", "5")  # (5 keeps its lock)
    r = run("1")
    assert stalled_reply(r) == [b"1"], r
    pair.both("SREM", Q + b"stalled", "5")
    # several at once, one of them past the limit (max 0): 5.53+ mark it (defa), 5.0-5.52 fail it
    pair.both("HSET", Q + b"3", "stc", "4", "stalledCounter", "4")
    r = run("2", "3", "4", max_stalled=4)
    assert sorted(stalled_reply(r)) in ([b"2", b"4"], [b"2", b"3", b"4"]), r
    if mode is not None and mode.repeat != "fail":
        assert pair.lua.hget(Q + b"3", "defa") == b"job stalled more than allowable limit"
        assert pair.lua.hget(Q + b"2", "defa") is None
    # a repeatable job past the limit: no defa (5.58+); a job hash that is gone (HINCRBY creates it, 5.53+)
    _job(pair, "70", opts='{"repeat":{"every":1000},"attempts":1}', rjk="sch")
    pair.both("HSET", Q + b"repeat:sch", "every", "1000")
    pair.both("LPUSH", Q + b"active", "71")
    r = run("70", "71", max_stalled=0)
    if mode is not None and mode.repeat == "parent":  # 5.53-5.55: cjson.decode(opts) of a job hash without opts
        assert isinstance(r, tuple) and "script:" in r[1], r
    if mode is not None and mode.repeat in ("opts", "rjk"):
        assert pair.lua.hget(Q + b"70", "defa") is None
    # the legacy repeat zset (5.78+: ZSCORE when the scheduler hash is gone), opts that are an array
    pair.both("DEL", Q + b"repeat:sch")
    pair.both("ZADD", Q + b"repeat", 5, "sch")
    _job(pair, "72", opts="[1,2]", rjk="sch")
    _job(pair, "73", opts='{"repeat":null}', rjk="nosuch")
    run("72", "73", max_stalled=0)
    # a queue at its concurrency limit: no marker
    pair.both("DEL", Q + b"marker")
    pair.both("HSET", Q + b"meta", "concurrency", "1")
    _job(pair, "80")
    _job(pair, "81")
    run("80")
    if mode is not None and mode.queue.meta_fields:  # (5.1-5.8 know no concurrency: the marker)
        assert not pair.lua.exists(Q + b"marker")
    if mode is not None and not mode.queue.meta_fields and mode.marker:
        assert pair.lua.exists(Q + b"marker")
    pair.both("HDEL", Q + b"meta", "concurrency")
    # a paused queue: the paused list (5.x), the wait list (6.x, told apart by moveJobToWait's callee)
    pair.both("HSET", Q + b"meta", "paused", "1")
    before = _ran(pair)
    run("81")
    paused_native = _ran(pair) - before
    pair.both("HDEL", Q + b"meta", "paused")
    if mode is not None:
        assert paused_native == int(mode.paused_known)
    # the bail cases: a non-integer max count, opts that are no JSON; a stalled counter that is no integer
    _job(pair, "90", opts="{bad")
    _job(pair, "91", stc="x", stalledCounter="x")
    before = _ran(pair)
    r = run("90", max_stalled="1.5")
    if mode is not None and mode.repeat == "opts":
        assert isinstance(r, tuple), r  # cjson.decode fails: the script's error, from Lua
    r = run("91")
    assert mode is None or isinstance(r, tuple) and "hash value is not an integer" in r[1], r
    bails = _ran(pair) - before
    if mode is not None:
        assert bails == 0, bails
    return native, calls


@pytest.mark.parametrize("family", sorted(BODIES))
def test_stalled_jobs_moved_back(pair: Pair, family: str) -> None:
    """Truly stalled jobs: every release natively, exactly as Lua, but for the bail cases (the script's errors;
    5.0-5.52's jobs past the limit, failed in the script)."""
    body = BODIES[family]
    pair.load(body)
    native, calls = stalled_moves_scenario(pair, body)
    mode = _stall_mode(body)
    if mode is None:
        assert native == 0, (family, native)
    else:
        # every stalled call but the bail cases (2) and, where the layout does not tell, the paused queue
        assert native == expected_native(mode, calls), (family, native, calls)


def expected_native(mode: Any, calls: int) -> int:
    """How many of :func:`stalled_moves_scenario`'s calls run natively in ``mode``: all but the bail cases
    (2), the paused queue where the layout does not tell its target list, 5.53-5.55's cjson error, and
    (5.1-5.52) the three calls with a job past the limit (failed in the script)."""
    return calls - 2 - (not mode.paused_known) - (mode.repeat == "parent") - 3 * (mode.repeat == "fail")


def test_stalled_jobs_native_for_the_installed_families() -> None:
    """The installed clients' releases (6.x, 5.x latest, PyPI 3.x and 2.x) handle truly stalled jobs natively."""
    fams = [f for f in BODIES if ":" in f]
    if len(fams) < 2:
        pytest.skip("release families not installed")
    assert all(_stall_mode(BODIES[f]) is not None for f in fams), fams


@pytest.mark.parametrize("family", sorted(f for f in BODIES if ":" in f))  # the installed families
def test_stalled_moves_commandstats_and_monitor(pair: Pair, family: str) -> None:
    """INFO commandstats and MONITOR lines are the Lua path's when stalled jobs go back to wait."""
    body = BODIES[family]
    pair.load(body)

    def cycle() -> None:
        pair.both("DEL", Q + b"wait", Q + b"active", Q + b"stalled", Q + b"marker")
        for i in range(4):
            _job(pair, str(i), rjk="s" if i == 0 else "")
        pair.both("HSET", Q + b"repeat:s", "x", "1")
        pair.both("HSET", Q + b"meta", "concurrency", "2")
        _stall(pair, body, "0", "1", "2", max_stalled=0)
        pair.both("HDEL", Q + b"meta", "concurrency")
        _stall(pair, body, "3", "9")

    before = _ran(pair)
    same_stats_and_monitor(pair, cycle, {"hincrby": 4, "rpush": 4, "xadd": 8, "lrem": 4, "zscore": 1})
    assert _ran(pair) - before == 4


def test_stalled_many_jobs_moved_back(pair: Pair) -> None:
    """Hundreds of stalled jobs in one call, natively, as Lua."""
    fams = [f for f in BODIES if _stall_mode(BODIES[f]).repeat != "fail"]  # (5.53+: the stalled list alone)
    body = BODIES[sorted(fams)[0]]
    pair.load(body)
    ids = [str(i) for i in range(300)]
    pair.both("RPUSH", Q + b"active", *ids)
    pair.both("SADD", Q + b"stalled", *ids[:250])
    before = _ran(pair)
    r = _check(pair, body)
    assert sorted(r) == sorted(x.encode() for x in ids[:250])
    assert _ran(pair) == before + 1
    assert pair.lua.llen(Q + b"wait") == 250 and pair.lua.xlen(Q + b"events") == 500


def test_stalled_moves_are_durable(tmp_path: Any) -> None:
    """A native move back (RPUSH, HINCRBY stc, defa, events) survives a restart."""
    fams = [f for f in BODIES if _stall_mode(BODIES[f]).repeat != "fail"]  # (5.53+: the stalled list alone)
    body = BODIES[sorted(fams)[0]]
    keys = _keys(body)

    def run(r: redis.Redis, s: str, srv: Any) -> None:
        for i in range(5):
            r.hset(Q + str(i).encode(), mapping={"name": "j", "opts": "{}", "stc": "1" if i == 2 else "0"})
        r.rpush(Q + b"active", *[str(i) for i in range(5)])
        r.sadd(Q + b"stalled", "1", "2", "3")
        r.set(Q + b"3:lock", "t", px=600000)
        reply = r.evalsha(s, len(keys), *keys, *_argv(px=600000))
        assert sorted(reply) == [b"1", b"2"]
        assert native_log_count(srv, RAN) == 1
        assert r.hget(Q + b"2", "defa") and r.lrange(Q + b"wait", 0, -1) == reply

    durable_run(str(tmp_path), body, run)


#: one npm release per StallMode that no installed family has (fetched with npm pack, as CI's
#: test_release_variant_oracle does): 5.0.0's checkStalledJobs (no marker key: RPUSH alone), 5.1's HEXISTS meta
#: paused and ``stalledCounter``, 5.9's HMGET paused concurrency with ``stalledCounter``, 5.52's ``stc``
#: (5.0-5.52: a job past the limit on Lua), 5.53's HMGET opts parent, 5.56's no repeat check and 5.58's HGET
#: opts (moveJobToWait with getTargetQueueList: the paused list), 5.60's HGET opts with 4 meta fields
STALL_VARIANT_RELEASES = ("5.0.0", "5.1.12", "5.9.0", "5.52.3", "5.53.3", "5.56.10", "5.58.9", "5.60.0")


@pytest.mark.parametrize("version", STALL_VARIANT_RELEASES)
def test_stalled_variant_releases(pair: Pair, version: str) -> None:
    """The older releases' moveStalledJobsToWait, each in its own StallMode, match the Lua path exactly."""
    from .test_native_scripts import _variant_bodies

    body = _variant_bodies(version)[NAME]
    pair.load(body)
    native, calls = stalled_moves_scenario(pair, body)
    mode = _stall_mode(body)
    assert mode is not None and mode.paused_known, (version, mode)
    assert native == expected_native(mode, calls), (version, native, calls)


#: releases whose stalled path the commandstats / MONITOR and restart checks also cover: 5.0.0's RPUSH without a
#: marker, 5.1's HEXISTS meta paused, 5.52's {failed, stalled} reply with ``stc``, 5.58's moveJobToWait to the
#: paused list
STALL_STATS_RELEASES = ("5.0.0", "5.1.12", "5.52.3", "5.58.9")


def _stats_cycle(pair: Pair, body: bytes) -> None:
    pair.both("DEL", Q + b"wait", Q + b"active", Q + b"stalled", Q + b"marker", Q + b"paused",
              *[Q + b"%d" % i for i in range(5)])  # (the stall counts start afresh: within the limit)
    for i in range(5):
        _job(pair, str(i))
    pair.both("HSET", Q + b"meta", "concurrency", "2")
    _stall(pair, body, "0", "1")
    pair.both("HDEL", Q + b"meta", "concurrency")
    pair.both("HSET", Q + b"meta", "paused", "1")
    _stall(pair, body, "2")
    pair.both("HDEL", Q + b"meta", "paused")
    _stall(pair, body, "3", "9")


@pytest.mark.parametrize("version", STALL_STATS_RELEASES)
def test_stalled_variant_commandstats_and_monitor(pair: Pair, version: str) -> None:
    """5.1-5.52's and 5.58's stalled jobs moved back (concurrency, paused) count the same commands and show a
    MONITOR client the same lines as the Lua path, natively."""
    from .test_native_scripts import _variant_bodies

    body = _variant_bodies(version)[NAME]
    pair.load(body)
    before = _ran(pair)
    same_stats_and_monitor(pair, lambda: _stats_cycle(pair, body), {"hincrby": 4, "rpush": 4, "xadd": 8})
    assert _ran(pair) - before == 6


@pytest.mark.parametrize("family", sorted(f for f in BODIES if f.startswith("node-6.x:")))
def test_stalled_paused_6x_commandstats_and_monitor(pair: Pair, family: str) -> None:
    """6.x's paused queue (moveJobToWait through isQueuePausedOrMaxed: the wait list, no marker), natively, with
    the Lua path's commandstats and MONITOR lines."""
    body = BODIES[family]
    pair.load(body)
    before = _ran(pair)
    same_stats_and_monitor(pair, lambda: _stats_cycle(pair, body), {"hincrby": 4, "rpush": 4, "xadd": 8})
    assert _ran(pair) - before == 6
    assert pair.lua.llen(Q + b"paused") == 0 and pair.lua.llen(Q + b"wait") >= 3


def test_stalled_old_moves_are_durable(tmp_path: Any) -> None:
    """5.1's native move back (HINCRBY stalledCounter, RPUSH, the {failed, stalled} reply) survives a restart."""
    from .test_native_scripts import _variant_bodies

    body = _variant_bodies("5.1.12")[NAME]
    keys = _keys(body)

    def run(r: redis.Redis, s: str, srv: Any) -> None:
        for i in range(4):
            r.hset(Q + str(i).encode(), mapping={"name": "j", "opts": "{}"})
        r.rpush(Q + b"active", *[str(i) for i in range(4)])
        r.sadd(Q + b"stalled", "1", "2", "3")
        r.set(Q + b"3:lock", "t", px=600000)
        reply = r.evalsha(s, len(keys), *keys, *_argv(px=600000))
        assert reply[0] == [] and sorted(reply[1]) == [b"1", b"2"]
        assert native_log_count(srv, RAN) == 1
        assert r.hget(Q + b"2", "stalledCounter") == b"1" and sorted(r.lrange(Q + b"wait", 0, -1)) == [b"1", b"2"]

    durable_run(str(tmp_path), body, run)


def test_every_digest_moves_stalled_jobs_natively() -> None:
    """All 28 digests run natively and have a StallMode (truly stalled jobs handled natively), each with the
    counter field its layout records (``stalledCounter`` before npm 5.49, ``stc`` after) and, where it pushes
    through moveJobToWait, the paused queue's target list known."""
    import compat.native  # noqa: F401
    from compat.scripts import _BY_SHA, SCRIPTS, layout

    shas = [k for k, v in SCRIPTS.items() if v[0] == NAME]
    assert len(shas) == 28
    for k in shas:
        assert k in _BY_SHA, SCRIPTS[k]
        mode = _stall_mode_of(_BY_SHA[k][4])
        assert mode is not None and mode.paused_known, SCRIPTS[k]
        assert layout(k)["hincrbys"] == ['jobKey|"%s"|1' % mode.counter.decode()], SCRIPTS[k]


def _stall_mode_of(v: Any) -> Any:
    from compat.native.move_stalled_jobs_to_wait import STALLED_V6

    return (STALLED_V6 if v is True else v).stall

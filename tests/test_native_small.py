"""Native extendLock / extendLocks / isFinished / getCounts / changePriority (compat/native/) against the Lua
path as the oracle, for every installed release family (node 6.x, node 5.x, PyPI 3.x and 2.x).

The harness is tests/test_native_scripts.py's: two real servers (Lua only, native on), the same EVALSHAs to
both, every reply and the whole keyspace compared; INFO commandstats and MONITOR lines too. The script texts
are read from the installed clients at test time (none is stored in the repository).
``RESPQUEUE_BODIES_DIR=<dir>`` (a directory of ``<release>/<name>-<numkeys>.lua`` texts) adds every digest found
there: the same scenarios for each release's own text.
"""

# ruff: noqa: F811  (the pair fixture, imported, is the tests' argument name)
from __future__ import annotations

import os
from typing import Any

import msgpack
import pytest
import redis

from .servers import start_respqueue
from .test_native_scripts import (
    FAMILIES,
    Pair,
    Q,
    _monitored,
    assert_restarts_same,
    dump,
    native_log_count,
    pair,  # noqa: F401  (fixture: the Lua-only and the native server, as test_native_scripts' own)
    servers,  # noqa: F401  (fixture)
    sha,
)

SMALL = ("extendLock", "extendLocks", "isFinished", "getCounts", "changePriority")


def _bodies_sweep() -> dict[str, dict[str, bytes]]:
    """One entry per distinct digest of each of SMALL in $RESPQUEUE_BODIES_DIR (named by its first release)."""
    root = os.environ.get("RESPQUEUE_BODIES_DIR")
    if not root or not os.path.isdir(root):
        return {}
    out: dict[str, dict[str, bytes]] = {}
    seen: set[str] = set()
    for rel in sorted(os.listdir(root)):
        for f in sorted(os.listdir(os.path.join(root, rel))):
            name = f.rsplit("-", 1)[0]
            if name not in SMALL:
                continue
            with open(os.path.join(root, rel, f), "rb") as fh:
                body = fh.read()
            if sha(body) not in seen:
                seen.add(sha(body))
                out.setdefault(f"{rel}:{name}", {})[name] = body
    return out


CASES = {fam: b for fam, b in FAMILIES.items()} | _bodies_sweep()


def cases(*names: str) -> list[str]:
    """The release families, and the swept digests of ``names`` that run natively (the others: see
    test_which_digests_run_natively)."""
    return sorted(c for c in CASES if c in FAMILIES or all(n in CASES[c] and _native(CASES[c][n]) for n in names))


def test_which_digests_run_natively() -> None:
    """Every digest of the five scripts in the table runs natively (changePriority's 6-key texts of npm
    5.0-5.8 too, as variants)."""
    import compat.native  # noqa: F401
    from compat.scripts import SCRIPTS, native_digests

    nat = native_digests()
    lua = sorted((v[0], v[1], v[2]) for k, v in SCRIPTS.items() if v[0] in SMALL and k.decode() not in nat)
    assert lua == [], lua
    assert len([k for k in nat if nat[k] in SMALL]) == 16


def _ran(pair: Pair, name: str) -> int:
    return native_log_count(pair.nat_srv, f"native {name}: ran")


def _fell_back(pair: Pair, name: str) -> int:
    return native_log_count(pair.nat_srv, f"native {name}: Lua fallback")


def _body(case: str, name: str) -> bytes:
    return CASES[case][name]


def _native(body: bytes) -> bool:
    import compat.native  # noqa: F401  (registers the native implementations)
    from compat.scripts import native_digests

    return sha(body) in native_digests()


def _stats(pair: Pair) -> list[dict[str, Any]]:
    return [{k: v["calls"] for k, v in c.info("commandstats").items()} for c in (pair.lua, pair.nat)]


# ---- extendLock / extendLocks -------------------------------------------------------------------
STALLED = Q + b"stalled"


def _locks(pair: Pair, n: int, ttl: int = 30000) -> None:
    """Jobs 1..n locked with token tok-<i>; the odd ones in the stalled set."""
    for i in range(1, n + 1):
        pair.both("SET", Q + b"%d:lock" % i, b"tok-%d" % i, "PX", ttl)
    pair.both("SADD", STALLED, *[str(i) for i in range(1, n + 1, 2)])


def _el_args(i: int, token: bytes | None = None, ms: Any = 45000) -> tuple[list[bytes], list[Any]]:
    return [Q + b"%d:lock" % i, STALLED], [token if token is not None else b"tok-%d" % i, ms, str(i)]


def _els_args(ids: list[Any], tokens: list[Any], ms: Any = 45000) -> tuple[list[bytes], list[Any]]:
    return [STALLED], [Q, msgpack.packb(tokens), msgpack.packb(ids), ms]


@pytest.mark.parametrize("case", cases("extendLock"))
def test_extend_lock(pair: Pair, case: str) -> None:
    """extendLock: renewed (1, out of the stalled set, the new TTL), a wrong token, a missing lock (0);
    and the bail cases (a lock or stalled key of another type, a duration SET refuses, too few arguments),
    which the Lua path answers."""
    body = _body(case, "extendLock")
    assert _native(body), f"{case}: extendLock {sha(body)} runs on Lua"
    pair.load(body)
    _locks(pair, 6)
    ran, fb = _ran(pair, "extendLock"), _fell_back(pair, "extendLock")

    def el(*a: Any, **kw: Any) -> Any:
        r = pair.script(body, *_el_args(*a, **kw))
        pair.compare()
        return r

    assert el(1) == 1 and el(2) == 1 and el(1) == 1  # odd: in the stalled set (SREM removes it), even: not
    assert pair.nat.pttl(Q + b"1:lock") > 40000
    assert el(3, b"tok-x") == 0
    assert el(99) == 0
    assert el(4, b"tok-x", ms="nope") == 0  # no SET: the duration is not read
    assert _ran(pair, "extendLock") - ran == 6 and _fell_back(pair, "extendLock") == fb
    # bail cases: the Lua path gives the same (error) reply and writes
    assert el(5, ms="nope")[0] == "error"
    assert el(5, ms=0)[0] == "error"
    assert el(5, ms=-3)[0] == "error"
    pair.both("HSET", Q + b"7:lock", "f", "v")
    assert el(7)[0] == "error"
    pair.both("SET", Q + b"8:lock", "tok-8")
    pair.both("DEL", STALLED)
    pair.both("SET", STALLED, "x")
    assert el(8)[0] == "error"  # SET made, then SREM fails: the Lua path's error, its SET kept
    assert el(3, b"tok-x") == 0  # a stalled key of another type does not matter without a renewal
    r = pair.script(body, [Q + b"6:lock", STALLED], [b"tok-6", 100])  # too few arguments
    assert r[0] == "error", r
    pair.compare()
    assert _fell_back(pair, "extendLock") - fb == 6
    assert _ran(pair, "extendLock") - ran == 7


@pytest.mark.parametrize("case", cases("extendLocks"))
def test_extend_locks(pair: Pair, case: str) -> None:
    """extendLocks: the lock manager's call for 10 jobs (all renewed), some wrong tokens, missing locks, fewer
    tokens than ids, a repeated id, no ids; and the bail cases (ids or tokens that are not strings, not msgpack
    lists, a lock or stalled key of another type, a duration SET refuses)."""
    body = _body(case, "extendLocks")
    assert _native(body), f"{case}: extendLocks {sha(body)} runs on Lua"
    pair.load(body)
    _locks(pair, 12)
    ran, fb = _ran(pair, "extendLocks"), _fell_back(pair, "extendLocks")

    def els(*a: Any, **kw: Any) -> Any:
        r = pair.script(body, *_els_args(*a, **kw))
        pair.compare()
        return r

    ids = [str(i) for i in range(1, 11)]
    assert els(ids, [f"tok-{i}" for i in ids]) == []
    assert pair.nat.scard(STALLED) == 1 and pair.nat.pttl(Q + b"3:lock") > 40000
    toks = [f"tok-{i}" for i in ids]
    toks[2] = "other"
    assert els([*ids, "40"], [*toks, "tok-40"]) == [b"3", b"40"]
    assert els(["11", "12", "2"], ["tok-11"]) == [b"12", b"2"]  # fewer tokens than ids
    assert els(["11", "11", "5"], ["tok-11", "tok-x", "tok-5"]) == [b"11"]  # a repeated id
    assert els([], []) == []
    assert els(["1", "9"], ["x", "y"], ms="bad") == [b"1", b"9"]  # nothing renewed: the duration is not read
    assert els(["1"], ["tok-1", "tok-2", "tok-3"]) == []  # more tokens than ids
    assert els(["1", "2"], ["tok-1", None]) == [b"2"]  # nil among the tokens: no match
    runs = 8
    assert _ran(pair, "extendLocks") - ran == runs and _fell_back(pair, "extendLocks") == fb
    # bail cases
    bails = [
        (["1", "2"], ["tok-1", "tok-2"], "bad"),  # a duration SET refuses, after a renewal: Lua's error
        (["1", "2"], ["tok-1", "tok-2"], "0"),
        ([1, 2], ["tok-1", "tok-2"], 45000),  # numeric ids
        (["1", "2"], ["tok-1", 7], 45000),  # a numeric token
        (["1", "2"], ["tok-1", False], 45000),
    ]
    for a, t, ms in bails:
        els(a, t, ms=ms)
    pair.script(body, [STALLED], [Q, msgpack.packb(["tok-1"]), msgpack.packb({"a": "1"}), 45000])  # ids: a map
    pair.compare()
    pair.script(body, [STALLED], [Q, b"\xc1garbage", msgpack.packb(["1"]), 45000])  # not msgpack
    pair.compare()
    pair.both("HSET", Q + b"13:lock", "f", "v")
    assert els(["1", "13"], ["tok-1", "tok-13"])[0] == "error"  # a lock of another type
    assert els(["1", "2"], ["tok-1", "tok-2"], ms=1000) == []
    pair.both("DEL", STALLED)
    pair.both("SET", STALLED, "x")
    assert els(["3", "4"], ["no", "no"]) == [b"3", b"4"]  # a stalled key of another type, no renewal: fine
    assert els(["3", "4"], ["tok-3", "no"])[0] == "error"  # ... with one: SREM fails (after the SET)
    r = pair.script(body, [STALLED], [Q, msgpack.packb(["tok-1"]), msgpack.packb(["1"])])  # too few arguments
    assert r[0] == "error"
    pair.compare()
    assert _fell_back(pair, "extendLocks") - fb == len(bails) + 5
    assert _ran(pair, "extendLocks") - ran == runs + 2


@pytest.mark.parametrize("case", sorted(FAMILIES))
def test_extend_locks_commandstats_and_monitor(pair: Pair, case: str) -> None:
    """The inline renewals count GET/SET/SREM as the Lua path's calls; with a MONITOR client the lines match."""
    el, els = _body(case, "extendLock"), _body(case, "extendLocks")
    pair.load(el)
    pair.load(els)
    _locks(pair, 10)
    pair.both("CONFIG", "RESETSTAT")

    def cycle() -> None:
        ids = [str(i) for i in range(1, 11)]
        pair.script(els, *_els_args(ids, [f"tok-{i}" if i != "4" else "x" for i in ids]))
        pair.script(els, *_els_args(["1", "77"], ["tok-1", "tok-77"]))
        pair.script(el, *_el_args(2))
        pair.script(el, *_el_args(3, b"x"))
        pair.both("SADD", STALLED, "1", "5", "6")

    cycle()
    stats = _stats(pair)  # (before compare(), whose dump reads)
    assert stats[0] == stats[1]
    assert stats[0]["cmdstat_get"] == 14 and stats[0]["cmdstat_set"] == 11 and stats[0]["cmdstat_srem"] == 11
    seen = _monitored((pair.lua_srv.port, pair.nat_srv.port), cycle)
    pair.compare()
    assert len(seen[0]) > 30
    assert seen[0] == seen[1]


def test_extend_locks_persisted(tmp_path: Any) -> None:
    """The inline renewals reach the store: after a restart the locks (with a TTL), and the stalled set, are
    what the native path left."""
    fam = sorted(FAMILIES)[0]
    els = FAMILIES[fam]["extendLocks"]
    el = FAMILIES[fam]["extendLock"]
    srv = start_respqueue("--durability", "durable", "--log-level", "debug", workdir=str(tmp_path))
    try:
        r = redis.Redis(port=srv.port)
        for i in range(1, 6):
            r.set(Q + b"%d:lock" % i, b"tok-%d" % i, px=60000)  # outlives a restart on a loaded machine
        r.sadd(STALLED, "1", "2", "3", "4")
        r.script_load(els)
        r.script_load(el)
        ids = ["1", "2", "3", "4"]
        keys, argv = _els_args(ids, ["tok-1", "tok-2", "x", "tok-4"], ms=600000)
        assert r.evalsha(sha(els), 1, *keys, *argv) == [b"3"]
        keys, argv = _el_args(5, ms=600000)
        assert r.evalsha(sha(el), 2, *keys, *argv) == 1
        before = dump(r, sort_hashes=True)
        assert before[STALLED][1] == [b"3"]
        r.close()
        assert native_log_count(srv, "native extendLocks: ran") == 1
        assert native_log_count(srv, "native extendLock: ran") == 1
    finally:
        srv.stop()
    srv = start_respqueue("--durability", "durable", "--log-level", "debug", workdir=str(tmp_path), port=srv.port)
    try:
        r = redis.Redis(port=srv.port)
        assert dump(r, sort_hashes=True) == before
        assert r.pttl(Q + b"1:lock") > 500000 and 0 < r.pttl(Q + b"3:lock") <= 60000
        r.close()
    finally:
        srv.stop()


def test_reads_on_a_restarted_store(tmp_path: Any) -> None:
    """isFinished and getCounts natively on what a restart loaded (job hashes packed until first read)."""
    fam = sorted(FAMILIES)[0]
    fin, gc = FAMILIES[fam]["isFinished"], FAMILIES[fam]["getCounts"]
    srv = start_respqueue("--durability", "durable", workdir=str(tmp_path))
    try:
        r = redis.Redis(port=srv.port)
        r.hset(Q + b"1", mapping={"name": "j", "data": "{}", "returnvalue": "42", "finishedOn": "5"})
        r.zadd(Q + b"completed", {"1": 5})
        r.rpush(Q + b"wait", "2", "3")
        r.close()
    finally:
        srv.stop()
    srv = start_respqueue("--durability", "durable", "--log-level", "debug", workdir=str(tmp_path), port=srv.port)
    try:
        r = redis.Redis(port=srv.port)
        r.script_load(fin)
        r.script_load(gc)
        assert r.evalsha(sha(fin), 3, Q + b"completed", Q + b"failed", Q + b"1", "1", "1") == [1, b"42"]
        assert r.evalsha(sha(gc), 1, Q, "wait", "completed") == [2, 1]
        assert r.hgetall(Q + b"1")[b"returnvalue"] == b"42"
        r.close()
        assert native_log_count(srv, "native isFinished: ran") == 1
        assert native_log_count(srv, "native getCounts: ran") == 1
    finally:
        srv.stop()


# ---- isFinished / getCounts ---------------------------------------------------------------------
def _checked(pair: Pair, name: str, body: bytes, keys: list[bytes], argv: list[Any], native: bool) -> Any:
    """One call on both servers, replies and keyspace compared; ``native``: whether the native server ran it
    natively (else its native path handed it to Lua)."""
    ran, fb = _ran(pair, name), _fell_back(pair, name)
    r = pair.script(body, keys, argv)
    pair.compare()
    assert (_ran(pair, name) - ran, _fell_back(pair, name) - fb) == ((1, 0) if native else (0, 1)), (keys, argv, r)
    return r


@pytest.mark.parametrize("case", cases("isFinished"))
def test_is_finished(pair: Pair, case: str) -> None:
    """isFinished: completed (with its return value), failed (with its reason), neither, missing (the
    missing-key text), a completed job without a return value; the bail cases: a job key read by HGET that
    is no hash, a completed set of another type, no job id."""
    body = _body(case, "isFinished")
    assert _native(body), f"{case}: isFinished {sha(body)} runs on Lua"
    pair.load(body)
    for i in range(1, 5):
        pair.both("HSET", Q + b"%d" % i, "name", "j", "data", "{}")
    pair.both("HSET", Q + b"1", "returnvalue", '{"r":42}')
    pair.both("HSET", Q + b"2", "failedReason", "boom")
    pair.both("ZADD", Q + b"completed", 1, "1", 0, "4", 2, "5")
    pair.both("ZADD", Q + b"failed", 3, "2")
    pair.both("SET", Q + b"5", "not a hash")
    keys = [Q + b"completed", Q + b"failed"]

    def fin(i: int, *flag: str, native: bool = True) -> Any:
        return _checked(pair, "isFinished", body, [*keys, Q + b"%d" % i], [str(i), *flag], native)

    assert fin(1, "1") == [1, b'{"r":42}'] and fin(1, "0") == 1 and fin(1) == 1
    assert fin(2, "1") == [2, b"boom"] and fin(2, "") == 2
    assert fin(3, "1") == [0] and fin(3) == 0
    assert fin(4, "1") == [1, None] and fin(4, "1", "extra") == [1, None]
    assert fin(9, "1") == [-1, b"Missing key for job bull:q:9. isFinished"] and fin(9) == -1
    assert fin(5) == 1  # the value is not read: a job key of another type does not matter
    assert fin(5, "1", native=False)[0] == "error"
    _checked(pair, "isFinished", body, [*keys, Q + b"9"], [], False)  # no job id (Lua: -1, the job missing)
    r = _checked(pair, "isFinished", body, [*keys, Q + b"1"], [], False)  # (Lua: ZSCORE without a member)
    assert r[0] == "error"
    pair.both("DEL", Q + b"failed")
    pair.both("SET", Q + b"failed", "x")
    assert fin(1, "1") == [1, b'{"r":42}']  # the failed key is not read
    assert fin(3, "1", native=False)[0] == "error"
    assert fin(9, "1") == [-1, b"Missing key for job bull:q:9. isFinished"]


STATES = [b"active", b"completed", b"delayed", b"failed", b"paused", b"prioritized", b"waiting-children", b"wait"]


@pytest.mark.parametrize("case", cases("getCounts"))
def test_get_counts(pair: Pair, case: str) -> None:
    """getCounts: every state (lists and zsets, empty and not), repeated and unknown states, 6.7.0's delayed
    cutoff (and an older text reading that argument as a state); the bail cases: a legacy marker at the tail
    of wait or paused (Lua pops it), a state key of another type, cutoffs tonumber might read otherwise."""
    body = _body(case, "getCounts")
    assert _native(body), f"{case}: getCounts {sha(body)} runs on Lua"
    from compat.scripts import layout

    cutoff = bool(layout(sha(body))["argv"])  # 6.7.0's text
    pair.load(body)

    def gc(*types: Any, native: bool = True) -> Any:
        return _checked(pair, "getCounts", body, [Q], list(types), native)

    assert gc(*STATES) == [0] * 8
    pair.both("RPUSH", Q + b"wait", *range(20, 25))
    pair.both("RPUSH", Q + b"active", *range(1, 4))
    pair.both("RPUSH", Q + b"paused", "30")
    pair.both("ZADD", Q + b"completed", 1, "5", 2, "6")
    pair.both("ZADD", Q + b"failed", 1, "7")
    pair.both("ZADD", Q + b"delayed", *[x for i in range(10) for x in ((1000 + i) * 4096 + i, str(40 + i))])
    pair.both("ZADD", Q + b"prioritized", 1, "50")
    assert gc(*STATES) == [3, 2, 10, 1, 1, 1, 0, 5]
    assert gc(b"wait", b"wait", b"nothing", b"active") == [5, 5, 0, 3]
    assert gc(b"1005", b"delayed") == ([5] if cutoff else [0, 10])
    assert gc(b"-3", b"delayed", b"wait") == ([0, 5] if cutoff else [0, 10, 5])
    assert gc(b"1005", b"wait", b"delayed", b"delayed") == ([5, 5, 5] if cutoff else [0, 5, 10, 10])
    assert gc(b"0007", b"delayed") == ([0] if cutoff else [0, 10])
    assert gc(b"delayed") == [10]
    gc(native=not cutoff)  # 6.7.0: tonumber(nil) fails
    for odd in (b"0x10", b" 5", b"1e3", b"1.5", b"inf", b"nan", b"", b"+5", b"9" * 16):
        gc(odd, b"delayed", native=not cutoff)
    # a legacy marker at the tail of wait: the Lua path pops it
    pair.both("RPUSH", Q + b"paused", "0:99")
    assert gc(b"active", b"failed") == [3, 1]
    assert gc(b"paused", native=False) == [1]
    assert gc(b"paused") == [1]
    pair.both("DEL", Q + b"failed")
    pair.both("SET", Q + b"failed", "x")
    assert gc(b"wait") == [5]
    assert gc(b"wait", b"failed", native=False)[0] == "error"
    pair.both("SET", Q + b"wait", "x")
    assert gc(b"wait", native=False)[0] == "error"


@pytest.mark.parametrize("case", sorted(FAMILIES))
def test_reads_commandstats_and_monitor(pair: Pair, case: str) -> None:
    """isFinished and getCounts: INFO commandstats and MONITOR lines as the Lua path's."""
    fin, gc = _body(case, "isFinished"), _body(case, "getCounts")
    pair.load(fin)
    pair.load(gc)
    pair.both("HSET", Q + b"1", "returnvalue", "7")
    pair.both("HSET", Q + b"2", "failedReason", "no")
    pair.both("ZADD", Q + b"completed", 1, "1")
    pair.both("ZADD", Q + b"failed", 1, "2")
    pair.both("RPUSH", Q + b"wait", "3", "4")
    pair.both("CONFIG", "RESETSTAT")
    keys = [Q + b"completed", Q + b"failed"]

    def cycle() -> None:
        for i in (1, 2, 3):
            pair.script(fin, [*keys, Q + b"%d" % i], [str(i), "1"])
            pair.script(fin, [*keys, Q + b"%d" % i], [str(i)])
        pair.script(gc, [Q], STATES)
        pair.script(gc, [Q], [b"1000", b"delayed", b"wait"])

    cycle()
    stats = _stats(pair)
    assert stats[0] == stats[1]
    assert stats[0]["cmdstat_zscore"] == 6 and stats[0]["cmdstat_hget"] == 2 and stats[0]["cmdstat_lindex"] == 3
    seen = _monitored((pair.lua_srv.port, pair.nat_srv.port), cycle)
    pair.compare()
    assert len(seen[0]) > 25
    assert seen[0] == seen[1]


# ---- changePriority -----------------------------------------------------------------------------
CP_KEYS = [Q + s for s in (b"wait", b"paused", b"meta", b"prioritized", b"active", b"pc", b"marker")]


def _cp_setup(pair: Pair) -> None:
    """Jobs 1-6: 1 and 2 waiting, 3 and 4 prioritized (counter at 2), 5 active, 6 in the paused list."""
    for i in range(1, 7):
        pair.both("HSET", Q + b"%d" % i, "name", "j", "data", "{}", "priority", "0")
    pair.both("LPUSH", Q + b"wait", "1", "2")
    pair.both("ZADD", Q + b"prioritized", 2**32 + 1, "3", 2 * 2**32 + 2, "4")
    pair.both("SET", Q + b"pc", "2")
    pair.both("LPUSH", Q + b"active", "5")
    pair.both("LPUSH", Q + b"paused", "6")


def _cp_keys(body: bytes) -> list[bytes]:
    """changePriority's keys: 7, or 6 without the active key (before 5.9)."""
    from compat.scripts import layout

    return CP_KEYS if len(layout(sha(body))["keys"]) == 7 else CP_KEYS[:4] + CP_KEYS[5:]


def _cp_args(body: bytes, job: Any, priority: Any = 1, lifo: Any = None) -> list[Any]:
    from compat.scripts import layout

    whole = layout(sha(body))["argv"][1] == "job key"  # 5.9-5.12: the job key itself
    a = [priority, Q + str(job).encode() if whole else Q, str(job)]
    return a if lifo is None else [*a, lifo]


@pytest.mark.parametrize("case", cases("changePriority"))
def test_change_priority(pair: Pair, case: str) -> None:
    """changePriority: prioritized -> prioritized (counted) and -> wait, wait -> prioritized (LIFO: in front
    of its priority, no marker) and -> wait (LIFO: RPUSH), an active job (only its hash), a missing job (-1),
    a paused queue (5.x: the paused list is the target; no marker), a queue at its concurrency and under it;
    the bail cases: priorities that are not a plain integer 0..2^21, a job key that is no hash, a counter
    INCR refuses, meta's concurrency not an integer, a wait key of another type, too few arguments."""
    body = _body(case, "changePriority")
    assert _native(body), f"{case}: changePriority {sha(body)} runs on Lua"
    cp_scenario(pair, body)


def cp_scenario(pair: Pair, body: bytes) -> None:
    from compat.scripts import layout

    keys = _cp_keys(body)
    old = layout(sha(body))["main"][1] == "isQueuePaused"  # 5.0-5.7: no LIFO, bit.band's 32-bit counter
    pair.load(body)
    _cp_setup(pair)

    def cp(*a: Any, native: bool = True, **kw: Any) -> Any:
        pair.both("DEL", Q + b"marker")
        return _checked(pair, "changePriority", body, keys, _cp_args(body, *a, **kw), native)

    assert cp(3, 5) == 0
    assert cp(3, 0) == 0
    assert cp(1, 2, "1") == 0
    assert cp(2, 0, "1") == 0
    assert cp(4, 7, "0") == 0
    assert cp(5, 3) == 0
    assert cp(99, 3) == -1 and cp(99, "junk") == -1
    assert cp(1, "2097152") == 0
    pair.both("HSET", Q + b"meta", "paused", "1")
    assert cp(4, 0) == 0 and cp(6, 1) == 0 and cp(3, 4) == 0 and cp(6, 0, "1") == 0
    pair.both("HDEL", Q + b"meta", "paused")
    pair.both("HSET", Q + b"meta", "concurrency", "1")
    assert cp(1, 0) == 0 and cp(2, 9) == 0  # at its concurrency: no marker
    pair.both("HSET", Q + b"meta", "concurrency", "5")
    assert cp(1, 3) == 0 and cp(2, 0) == 0
    pair.both("HSET", Q + b"meta", "concurrency", "-1")
    assert cp(1, 0) == 0
    pair.both("HDEL", Q + b"meta", "concurrency")
    # a counter past 2**31 - 1: bit.band's 32 bits make 5.0-5.7's score negative (Lua)
    pair.both("SET", Q + b"pc", str(2**31 - 1))
    assert cp(4, 6, native=not old) == 0
    # bail cases: the Lua path answers (its error, and the writes it made before it)
    for prio in ("junk", "-1", "1.5", "007", "2097153", ""):
        cp(1, prio, native=False)
    pair.both("SET", Q + b"7", "not a hash")
    assert cp(7, 2, native=False)[0] == "error"
    pair.both("SET", Q + b"pc", "x")
    pair.both("HSET", Q + b"8", "name", "j")
    pair.both("RPUSH", Q + b"wait", "8")
    assert cp(8, 2, native=False)[0] == "error"  # LREM made, then INCR fails
    # (LIFO: no INCR; 5.0-5.7, without LIFO, check the counter whatever the call does: Lua)
    assert cp(8, 2, "1", native=not old) == 0
    pair.both("SET", Q + b"pc", "9")
    pair.both("HSET", Q + b"meta", "concurrency", "lots")
    cp(1, 2, native=False)
    pair.both("DEL", Q + b"meta")
    pair.both("RENAME", Q + b"wait", Q + b"w2")
    pair.both("SET", Q + b"wait", "x")
    cp(3, 0, native=False)
    _checked(pair, "changePriority", body, keys, _cp_args(body, 1, 3)[:2], False)


#: npm releases whose changePriority is a variant the installed families do not cover (fetched with npm pack,
#: as tests/test_native_scripts.py's variant oracle does)
CP_VARIANTS = {
    "5.0.0": "6 keys, HEXISTS paused, no LIFO, bit.band score, the marker ZADD inline",
    "5.7.15": "6 keys, HEXISTS paused, no LIFO, bit.band score",
    "5.8.7": "6 keys, HEXISTS paused, the whole job key",
    "5.12.15": "7 keys, 2-field getTargetQueueList, the whole job key",
}


@pytest.mark.parametrize("version", sorted(CP_VARIANTS, key=lambda v: tuple(map(int, v.split(".")))))
def test_change_priority_variant_oracle(pair: Pair, version: str) -> None:
    """changePriority's older variants run natively and match the Lua path (the scenario above)."""
    from .test_native_scripts import _variant_bodies

    body = _variant_bodies(version)["changePriority"]
    assert _native(body), f"node-{version}: changePriority {sha(body)} runs on Lua"
    before = _ran(pair, "changePriority")
    cp_scenario(pair, body)
    assert _ran(pair, "changePriority") - before >= 15





@pytest.mark.parametrize("case", sorted(FAMILIES))
def test_change_priority_commandstats_and_monitor(pair: Pair, case: str) -> None:
    """changePriority: INFO commandstats and MONITOR lines as the Lua path's."""
    body = _body(case, "changePriority")
    pair.load(body)
    _cp_setup(pair)
    pair.both("CONFIG", "RESETSTAT")

    def cycle() -> None:
        for job, prio, lifo in ((3, 5, None), (1, 0, "1"), (2, 4, "1"), (4, 0, None), (5, 2, None), (9, 1, None)):
            pair.script(body, CP_KEYS, _cp_args(body, job, prio, lifo))
        pair.both("HSET", Q + b"meta", "concurrency", "1")
        pair.script(body, CP_KEYS, _cp_args(body, 1, 6))
        pair.both("HDEL", Q + b"meta", "concurrency")

    cycle()
    stats = _stats(pair)
    assert stats[0] == stats[1]
    assert stats[0]["cmdstat_zrem"] == 6 and stats[0]["cmdstat_incr"] == 2 and stats[0]["cmdstat_hset"] == 7
    seen = _monitored((pair.lua_srv.port, pair.nat_srv.port), cycle)
    pair.compare()
    assert len(seen[0]) > 30
    assert seen[0] == seen[1]


def test_change_priority_persisted(tmp_path: Any) -> None:
    """changePriority's writes, natively made, are what a restart loads."""
    fam = sorted(FAMILIES)[0]
    body = FAMILIES[fam]["changePriority"]
    srv = start_respqueue("--durability", "durable", "--log-level", "debug", workdir=str(tmp_path))
    try:
        r = redis.Redis(port=srv.port)
        for i in (1, 2, 3):
            r.hset(Q + b"%d" % i, mapping={"name": "j", "priority": "0"})
        r.lpush(Q + b"wait", "1", "2")
        r.zadd(Q + b"prioritized", {"3": 2**32 + 1})
        r.set(Q + b"pc", "1")
        r.script_load(body)
        for job, prio in ((1, 4), (3, 0), (2, 9)):
            assert r.evalsha(sha(body), 7, *CP_KEYS, *_cp_args(body, job, prio)) == 0
        before = dump(r, sort_hashes=True)
        assert before[Q + b"wait"][1] == [b"3"] and before[Q + b"pc"][1] == b"3"
        r.close()
        assert native_log_count(srv, "native changePriority: ran") == 3
    finally:
        srv.stop()
    assert_restarts_same(str(tmp_path), srv.port, before)

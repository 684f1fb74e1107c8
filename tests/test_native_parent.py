"""Native addParentJob (compat/native/add_parent_job.py) against the Lua path, for every release family
(node 6.x, node 5.x latest, py 3.x, py 2.x; every scanned release with RESPQUEUE_RELEASE_SWEEP=1, or every body
under RESPQUEUE_BODIES_DIR/<release>/): replies, keyspace, INFO commandstats and MONITOR lines, for a flow's
top parent (generated and custom ids, a repeat job key, options, a fractional timestamp), a parent that is
a child itself (and one whose parent is gone), and the Lua fallbacks (deduplication, an existing id)."""

from __future__ import annotations

# ruff: noqa: F811  (the pair fixture, imported, is the tests' argument name)
from typing import Any

import msgpack
import pytest
import redis

from .native_oracle import durable_run, release_keys, release_layout, same_stats_and_monitor, script_bodies
from .test_native_scripts import (
    TS,
    Pair,
    native_log_count,
    pair,  # noqa: F401  (fixture)
    servers,  # noqa: F401  (fixture)
    sha,
)

Q = b"bull:q:"
NAME = "addParentJob"
RAN = f"native {NAME}: ran"
_ROLES = {"meta": b"meta", "id": b"id", "delayed": b"delayed", "waiting children": b"waiting-children",
          "completed": b"completed", "events stream key": b"events"}


BODIES = script_bodies(NAME)


def _keys(body: bytes) -> list[bytes]:
    return release_keys(body, Q, _ROLES)


def _args(body: bytes, custom_id: str = "", name: str = "flow", ts: Any = TS, rjk: str | None = None,
          opts: dict[str, Any] | None = None, parent: bytes | None = None) -> list[bytes]:
    fields = release_layout(body)["argv_fields"]["ARGV1"]
    a: list[Any] = [None] * len(fields)
    a[:4] = [Q, custom_id, name, ts]
    for i, f in enumerate(fields):
        if f.endswith("waitchildrenkey key"):
            a[i] = Q + b"waiting-children"
        elif f.endswith("repeat job key"):
            a[i] = rjk
        elif parent is not None and f.endswith("parentkey"):
            a[i] = parent
        elif parent is not None and f.endswith("parent dependencies key"):
            a[i] = parent + b":dependencies"
        elif parent is not None and f.endswith("parent id queuekey"):
            a[i] = {"id": parent.rsplit(b":", 1)[1].decode(), "queueKey": parent.rsplit(b":", 1)[0].decode()}
    return [msgpack.packb(a), b'{"flow":1}', msgpack.packb({"attempts": 1} if opts is None else opts)]


def _add(pair: Pair, body: bytes, **kw: Any) -> Any:
    r = pair.script(body, _keys(body), _args(body, **kw))
    pair.compare()
    return r


def parent_scenario(pair: Pair, body: bytes) -> int:
    """A few flows' parents with one release's script; every reply and keyspace compared. Returns how many
    ran natively on the native server."""
    before = native_log_count(pair.nat_srv, RAN)
    assert pair.script(body, _keys(body), _args(body), by_sha=False) == b"1"  # ioredis sends EVAL first
    pair.compare()
    assert pair.lua.hget(Q + b"meta", "opts.maxLenEvents") == b"10000"
    assert pair.lua.zrange(Q + b"waiting-children", 0, -1) == [b"1"]
    assert _add(pair, body, name="p2", opts={"attempts": 3, "delay": 0, "priority": 0}) == b"2"
    assert _add(pair, body, custom_id="flow-a", opts={}) == b"flow-a"
    assert _add(pair, body, rjk="repeat:x:1", ts=float(TS + 7)) == b"4"  # (flow-a took 3)
    assert _add(pair, body, ts=TS + 0.5, opts={"attempts": 1, "backoff": {"type": "fixed", "delay": 5}}) == b"5"
    pair.both("HSET", Q + b"meta", "opts.maxLenEvents", "3")
    assert _add(pair, body, name="trimmed") == b"6"
    # a parent that is a child itself (a flow's middle level), one whose parent is gone
    pair.both("HSET", b"bull:top:9", "name", "top", "data", "{}", "opts", "{}", "timestamp", str(TS))
    assert _add(pair, body, parent=b"bull:top:9") == b"7"
    assert _add(pair, body, custom_id="mid", parent=b"bull:top:9", rjk="r:2") == b"mid"
    assert pair.lua.smembers(b"bull:top:9:dependencies") == {Q + b"7", Q + b"mid"}
    r = _add(pair, body, parent=b"bull:top:10")
    assert r == -5, r
    ran = native_log_count(pair.nat_srv, RAN) - before
    # Lua: an existing id, deduplication
    _add(pair, body, custom_id="flow-a")
    _add(pair, body, custom_id="mid", parent=b"bull:top:9")
    _add(pair, body, opts={"de": {"id": "d1"}})
    _add(pair, body, custom_id="flow-b", opts={"de": {"id": "d1"}})
    assert native_log_count(pair.nat_srv, RAN) - before == ran
    return ran


@pytest.mark.parametrize("family", sorted(BODIES))
def test_parent_release_oracle(pair: Pair, family: str) -> None:
    """Every release family's script: a flow's top parent runs natively and matches Lua exactly; the other
    cases fall back to Lua and still match."""
    import compat.native  # noqa: F401  (registers the native implementations)
    from compat.scripts import native_digests

    body = BODIES[family]
    assert native_digests(NAME).get(sha(body)) == NAME, f"{family}: {NAME} runs on Lua"
    assert parent_scenario(pair, body) == 9, family


@pytest.mark.parametrize("family", sorted(f for f in BODIES if ":" in f))  # the installed families
def test_parent_commandstats_and_monitor(pair: Pair, family: str) -> None:
    """INFO commandstats and the lines a MONITOR client sees are the Lua path's."""
    body = BODIES[family]
    pair.load(body)
    pair.both("HSET", b"bull:top:9", "name", "top")
    n = [0]

    def cycle() -> None:
        n[0] += 1
        pair.both("HDEL", Q + b"meta", "opts.maxLenEvents")
        _add(pair, body)
        _add(pair, body, custom_id=f"c{n[0]}", rjk="r:1")
        _add(pair, body, opts={"de": {"id": f"d{n[0]}"}})  # (Lua)
        _add(pair, body, parent=b"bull:top:9")
        _add(pair, body, parent=b"bull:gone:1")  # -5

    same_stats_and_monitor(pair, cycle, {"xadd": 4, "zadd": 2})


def test_parent_errors(pair: Pair) -> None:
    """Odd arguments and key types: the Lua path's replies."""
    body = BODIES[sorted(BODIES)[0]]
    keys = _keys(body)
    pair.load(body)
    before = native_log_count(pair.nat_srv, RAN)
    for k in (b"waiting-children", b"meta", b"events", b"id"):
        pair.both("SET", Q + k, "wrong type")
        r = pair.script(body, keys, _args(body))
        assert isinstance(r, tuple), (k, r)
        pair.compare()
        pair.both("DEL", Q + k)
    pair.script(body, keys, _args(body, ts="notanumber"))
    pair.script(body, keys, [b"\xc1", b"{}", msgpack.packb({})])
    pair.both("SET", Q + b"id", "99999999999999")
    pair.script(body, keys, _args(body))
    pair.compare()
    assert native_log_count(pair.nat_srv, RAN) == before
    assert "after writing" not in pair.nat_srv.output()


def test_parent_is_durable(tmp_path: Any) -> None:
    """The native path's writes survive a restart."""
    body = BODIES[sorted(BODIES)[0]]
    keys = _keys(body)

    def run(r: redis.Redis, s: str, srv: Any) -> None:
        for i in range(3):
            r.evalsha(s, len(keys), *keys, *_args(body, name=f"f{i}"))
        assert native_log_count(srv, RAN) == 3
        assert r.zcard(Q + b"waiting-children") == 3

    durable_run(str(tmp_path), body, run)

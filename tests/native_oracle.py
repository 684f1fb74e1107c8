"""What the per-script native oracle tests share (tests/test_native_<script>.py, on top of the Pair harness of
tests/test_native_scripts.py): one script's bodies per release, its keys from the recorded layout, the
commandstats and MONITOR comparison, the restart check."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import redis

from .servers import start_respqueue
from .test_native_scripts import FAMILIES, Pair, _monitored, assert_restarts_same, dump, sha


def script_bodies(name: str) -> dict[str, bytes]:
    """Script ``name``'s body per installed release family (and per release with RESPQUEUE_RELEASE_SWEEP=1),
    plus every distinct body under RESPQUEUE_BODIES_DIR (``<dir>/<release>/<name>-<numkeys>.lua``)."""
    out = {f: b[name] for f, b in FAMILIES.items() if name in b}
    d = os.environ.get("RESPQUEUE_BODIES_DIR")
    if d and os.path.isdir(d):
        seen = set(map(sha, out.values()))
        for rel in sorted(os.listdir(d)):
            for f in sorted(os.listdir(os.path.join(d, rel))):
                if f.startswith(name + "-"):
                    with open(os.path.join(d, rel, f), "rb") as fh:
                        b = fh.read()
                    if sha(b) not in seen:
                        seen.add(sha(b))
                        out[rel] = b
    return out


def release_layout(body: bytes) -> dict[str, Any]:
    from compat.scripts import layout

    lay = layout(sha(body))
    assert lay is not None, "digest not in compat.script_table"
    return lay


def release_keys(body: bytes, prefix: bytes, roles: dict[str, bytes]) -> list[bytes]:
    """The keys a release's script takes: its documented KEYS roles, each named by ``roles``."""
    return [prefix + roles[n] for n in release_layout(body)["keys"]]


def same_stats_and_monitor(pair: Pair, cycle: Callable[[], None], least: dict[str, int]) -> None:
    """``cycle()`` counts the same commands in INFO commandstats on both servers (at least ``least``: name ->
    calls), then, run again, shows a MONITOR client on each the same lines."""
    pair.both("CONFIG", "RESETSTAT")
    cycle()
    stats = [{k: v["calls"] for k, v in c.info("commandstats").items()} for c in (pair.lua, pair.nat)]
    assert stats[0] == stats[1]
    for k, n in least.items():
        assert stats[0][f"cmdstat_{k}"] >= n, (k, stats[0])
    seen = _monitored((pair.lua_srv.port, pair.nat_srv.port), cycle)
    pair.compare()
    assert len(seen[0]) > 20
    assert seen[0] == seen[1]


def durable_run(workdir: str, body: bytes, run: Callable[[redis.Redis, str, Any], None]) -> None:
    """``run(client, sha, server)`` on a durable server (with a debug log: native runs can be counted); the
    keyspace after a restart from the store is the same (hash fields compared sorted: recovery does not keep
    their insertion order)."""
    srv = start_respqueue("--durability", "durable", "--log-level", "debug", workdir=workdir)
    try:
        r = redis.Redis(port=srv.port)
        run(r, r.script_load(body), srv)
        before = dump(r, sort_hashes=True)
        r.close()
    finally:
        srv.stop()
    assert_restarts_same(workdir, srv.port, before)


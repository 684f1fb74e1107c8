"""``respqueue cluster rebalance`` (respqueue/cluster/rebalance.py) on ``respqueue serve --shards 3`` made
uneven with ``respqueue cluster reshard``: the slots end up even on every node's CLUSTER SLOTS, every key
stays readable through redis-py's RedisCluster, and a second run moves nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import hiredis
import pytest
from redis.cluster import RedisCluster as PyCluster

from respqueue.cluster.rebalance import parse_weights, plan
from respqueue.cluster.slots import SLOTS, key_slot

from .cluster_servers import Shards, env
from .servers import RawConn


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "respqueue", "cluster", *args], capture_output=True, text=True, timeout=300, env=env()
    )


def slot_counts(port: int) -> dict[int, int]:
    """port -> slots it owns, from this node's CLUSTER SLOTS."""
    c = RawConn(port)
    rd = hiredis.Reader()
    rd.feed(c.call_raw("CLUSTER", "SLOTS"))
    c.close()
    out: dict[int, int] = {}
    for lo, hi, master, *_ in rd.gets():
        out[master[1]] = out.get(master[1], 0) + hi - lo + 1
    return out


@pytest.fixture(scope="module")
def shards():
    s = Shards(3, "--durability", "memory")
    yield s
    s.stop()


def test_rebalance_evens_out_slots_and_keeps_keys(shards):
    p0, p1, p2 = shards.ports
    seed = f"127.0.0.1:{p0}"
    # 600 of node 1's slots and 300 of node 2's go to node 0, with keys in them
    tags = [t for t in (f"r{i}" for i in range(4000)) if 5461 <= key_slot(t.encode()) < 6061][:40]
    tags += [t for t in (f"s{i}" for i in range(4000)) if 10923 <= key_slot(t.encode()) < 11223][:20]
    # and keys in node 0's lowest slots, the ones the rebalance gives away (as redis-cli, lowest first)
    low = [t for t in (f"l{i}" for i in range(4000)) if key_slot(t.encode()) < 900][:40]
    tags += low
    rc = PyCluster(host="127.0.0.1", port=p0, socket_timeout=20)
    want = {}
    for t in tags:
        for j in range(3):
            want[f"{{{t}}}k{j}"] = f"{t}-{j}"
    for k, v in want.items():
        rc.set(k, v)
    rc.close()
    for slots, to in (("5461-6060", p0), ("10923-11222", p0)):
        r = _cli("reshard", seed, "--slots", slots, "--to", f"127.0.0.1:{to}")
        assert r.returncode == 0, r.stdout + r.stderr
    before = slot_counts(p0)
    assert before == {p0: 5461 + 900, p1: 5462 - 600, p2: 5461 - 300}
    rc = PyCluster(host="127.0.0.1", port=p0, socket_timeout=20)
    for t in tags[:10]:  # written while node 0 owns them
        want[f"{{{t}}}late"] = "late"
        rc.set(f"{{{t}}}late", "late")
    rc.close()

    sim = _cli("rebalance", seed, "--simulate")
    assert sim.returncode == 0, sim.stdout + sim.stderr
    # each should own int(16384 / 3) = 5461; the one slot left over goes to one of those taking slots
    moving = {line.split()[-1]: int(line.split()[1]) for line in sim.stdout.splitlines() if line.startswith("Moving")}
    assert sum(moving.values()) == 900 and moving[f"127.0.0.1:{p1}"] in (599, 600), sim.stdout
    assert all(f"from 127.0.0.1:{p0} " in line for line in sim.stdout.splitlines() if line.startswith("Moving"))
    assert "moved slot" not in sim.stdout
    assert slot_counts(p0) == before

    r = _cli("rebalance", seed)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("moved slot") == 900, r.stdout[-2000:]
    moved_keys = sum(int(line.split("(")[1].split()[0]) for line in r.stdout.splitlines() if "moved slot" in line)
    assert moved_keys == 3 * len(low), r.stdout[-2000:]
    for p in shards.ports:
        counts = slot_counts(p)
        assert sum(counts.values()) == SLOTS
        for n in counts.values():
            assert abs(n - SLOTS / 3) <= SLOTS / 3 * 0.02, counts
    rc = PyCluster(host="127.0.0.1", port=p1, socket_timeout=20)
    assert {k: rc.get(k) for k in want} == {k: v.encode() for k, v in want.items()}
    rc.close()
    check = _cli("check", seed)
    assert check.returncode == 0, check.stdout

    again = _cli("rebalance", "--cluster-config", os.path.join(shards.dir, "cluster.toml"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "No rebalancing needed" in again.stdout and "moved slot" not in again.stdout, again.stdout
    # weights: node 2 weighs 0, so it would give its slots to the others (simulated)
    w = _cli("rebalance", seed, "--weight", f"127.0.0.1:{p2}=0", "--simulate")
    assert w.returncode == 0, w.stdout + w.stderr
    moving = [line for line in w.stdout.splitlines() if line.startswith("Moving")]
    assert sum(int(line.split()[1]) for line in moving) == slot_counts(p2)[p2], w.stdout
    assert all(f"from 127.0.0.1:{p2} " in line for line in moving), w.stdout
    bad = _cli("rebalance", seed, "--weight", "nosuchnode=1")
    assert bad.returncode == 1 and "No such node" in bad.stdout
    bad = _cli("rebalance", seed, "--weight", "x")
    assert bad.returncode == 2 and "bad weight" in bad.stderr


def test_plan_by_weight_and_threshold():
    owned = {"a": list(range(10000)), "b": list(range(10000, 16384)), "c": []}
    moves, needed = plan(owned, {"a": 1, "b": 1, "c": 2}, 2.0)
    assert needed
    got = {n: len(s) for n, s in owned.items()}
    for src, dst, slots in moves:
        got[src] -= len(slots)
        got[dst] += len(slots)
        assert set(slots) <= set(owned[src])
    assert got == {"a": 4096, "b": 4096, "c": 8192}
    # within the threshold: nothing to do
    assert plan({"a": list(range(8200)), "b": list(range(8200, 16384))}, {"a": 1, "b": 1}, 2.0) == ([], False)
    assert plan({"a": list(range(8200)), "b": list(range(8200, 16384))}, {"a": 1, "b": 1}, 0.01)[1]
    assert parse_weights(["abc=2", "127.0.0.1:7000=0.5"]) == {"abc": 2.0, "127.0.0.1:7000": 0.5}
    for bad in ("abc", "=1", "abc=-1", "abc=x"):
        with pytest.raises(ValueError):
            parse_weights([bad])

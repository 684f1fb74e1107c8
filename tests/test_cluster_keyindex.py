"""CLUSTER COUNTKEYSINSLOT/GETKEYSINSLOT from the per-slot index (respqueue/cluster/keyindex.py) against a
brute-force KEYS + CLUSTER KEYSLOT of the same node, through creations, deletes, active and lazy expiry,
RENAME, FLUSHDB and FLUSHALL."""

from __future__ import annotations

import random
import time

import hiredis
import pytest

from respqueue.cluster.slots import key_slot

from .servers import RawConn, start_respqueue


@pytest.fixture(scope="module")
def node():
    srv = start_respqueue("--cluster-enabled", "yes", "--durability", "memory")
    yield srv
    srv.stop()


def call(c: RawConn, *args: object) -> object:
    rd = hiredis.Reader()
    rd.feed(c.call_raw(*args))
    return rd.gets()


def brute(c: RawConn) -> dict[int, list[bytes]]:
    """Each slot's keys, newest first: KEYS lists the keyspace oldest first."""
    out: dict[int, list[bytes]] = {}
    for k in reversed(call(c, "KEYS", "*")):  # type: ignore[arg-type]
        out.setdefault(key_slot(k), []).append(k)
    return out


def check(c: RawConn, slots: list[int]) -> None:
    want = brute(c)
    for s in set(slots) | set(want):
        keys = want.get(s, [])
        assert call(c, "CLUSTER", "COUNTKEYSINSLOT", s) == len(keys), s
        assert call(c, "CLUSTER", "GETKEYSINSLOT", s, 100000) == keys, s
        assert call(c, "CLUSTER", "GETKEYSINSLOT", s, 3) == keys[:3], s


def test_index_matches_brute_force(node):
    c = RawConn(node.port)
    rnd = random.Random(14)
    tags = [f"q{i}" for i in range(12)]
    slots = [key_slot(t.encode()) for t in tags]
    call(c, "FLUSHALL")
    check(c, slots)  # made empty, kept from here on
    keys = [f"{{{rnd.choice(tags)}}}k{i}" for i in range(3000)] + [f"plain{i}" for i in range(500)]
    for k in keys:
        call(c, "SET", k, "v")
    check(c, slots)
    for k in rnd.sample(keys, 800):
        call(c, "DEL", k)
    for k in rnd.sample(keys, 300):  # some come back, as the newest of their slot
        call(c, "HSET", k + ":h", "f", "v")
        call(c, "SET", k, "again")
    for k in rnd.sample(keys[:3000], 50):  # tagged: the new name is in the same slot
        if call(c, "EXISTS", k):
            assert call(c, "RENAME", k, k + ":renamed") == b"OK"
    lazy = rnd.sample(keys, 200)
    for k in lazy:
        call(c, "PEXPIRE", k, 1)
    active = [f"{{{rnd.choice(tags)}}}short{i}" for i in range(300)]
    for k in active:
        call(c, "SET", k, "v", "PX", 20)
    call(c, "SET", "{q0}stays", "v", "EX", 1000)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(call(c, "PTTL", k) != -2 for k in active[-5:] + lazy[-5:]):
        time.sleep(0.05)
    time.sleep(0.1)  # every key with a TTL of 1 or 20 ms is past it now
    check(c, slots)  # KEYS (a lookup of each) and the active cycle removed them
    call(c, "FLUSHALL")
    check(c, slots)
    assert call(c, "CLUSTER", "COUNTKEYSINSLOT", slots[0]) == 0
    for i in range(40):
        call(c, "LPUSH", f"{{{tags[i % 3]}}}after{i}", "x")
    check(c, slots)
    call(c, "FLUSHDB")
    check(c, slots)
    c.close()

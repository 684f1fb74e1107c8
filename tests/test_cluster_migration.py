"""A slot migration under a running BullMQ worker loses no job and runs none twice (issue 14's Done-when).

``serve --shards 2``; a BullMQ producer and worker on an ioredis Cluster (interop/cluster_migration.js) keep
adding and processing jobs of a hash-tagged queue while the test moves the queue's slot to the other shard
with the sequence ``redis-cli --cluster reshard`` sends (SETSLOT IMPORTING/MIGRATING, GETKEYSINSLOT + MIGRATE
until the slot is empty, SETSLOT NODE on every node). Every added job must complete exactly once."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time

import pytest

from respqueue.cluster.slots import key_slot

from .cluster_servers import Shards
from .servers import ROOT, RawConn

INTEROP = os.path.join(ROOT, "interop")
pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(os.path.join(INTEROP, "node_modules", "bullmq")),
    reason="run `npm ci` in interop/ (and install node) for the BullMQ cluster tests",
)

TAG = "move"  # slot 2546: shard 0 of two


def _bulk_list(raw: bytes) -> list[bytes]:
    """The elements of a RESP2 array of bulk strings."""
    lines = raw.split(b"\r\n")
    return [lines[i] for i in range(2, len(lines), 2) if lines[i - 1].startswith(b"$")]


def move_slot(slot: int, src: int, dst: int, ports: list[int]) -> int:
    """Move ``slot`` from the node on ``src`` to the one on ``dst`` as redis-cli --cluster reshard does;
    returns the number of keys moved."""
    a, b = RawConn(src), RawConn(dst)
    moved = 0
    try:
        aid, bid = a.call_raw("CLUSTER", "MYID")[5:45], b.call_raw("CLUSTER", "MYID")[5:45]
        assert b.call_raw("CLUSTER", "SETSLOT", slot, "IMPORTING", aid) == b"+OK\r\n"
        assert a.call_raw("CLUSTER", "SETSLOT", slot, "MIGRATING", bid) == b"+OK\r\n"
        empty = 0
        while empty < 2:
            keys = _bulk_list(a.call_raw("CLUSTER", "GETKEYSINSLOT", slot, "20"))
            if not keys:
                empty += 1
                continue
            empty = 0
            r = a.call_raw("MIGRATE", "127.0.0.1", dst, "", "0", "10000", "KEYS", *keys)
            assert r in (b"+OK\r\n", b"+NOKEY\r\n"), r
            moved += len(keys)
        # the new owner first, then the old one, then the rest (as redis-cli)
        assert b.call_raw("CLUSTER", "SETSLOT", slot, "NODE", bid) == b"+OK\r\n"
        assert a.call_raw("CLUSTER", "SETSLOT", slot, "NODE", bid) == b"+OK\r\n"
        for p in ports:
            if p not in (src, dst):
                c = RawConn(p)
                assert c.call_raw("CLUSTER", "SETSLOT", slot, "NODE", bid) == b"+OK\r\n"
                c.close()
    finally:
        a.close()
        b.close()
    return moved


def _count(port: int, slot: int) -> int:
    c = RawConn(port)
    try:
        return int(c.call_raw("CLUSTER", "COUNTKEYSINSLOT", slot)[1:-2])
    finally:
        c.close()


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    r, _, _ = select.select([proc.stdout], [], [], timeout)
    if not r:
        raise AssertionError("the BullMQ script said nothing for %ss" % timeout)
    return proc.stdout.readline()


def test_slot_migration_under_a_running_bullmq_worker():
    slot = key_slot(TAG.encode())
    s = Shards(2)
    assert slot < 8192  # shard 0 holds it
    proc = subprocess.Popen(
        ["node", "cluster_migration.js", "mig", "{%s}" % TAG, *map(str, s.ports)],
        cwd=INTEROP,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = _readline(proc, 120)
        assert line.strip() == "ready", line + (proc.stderr.read() if proc.poll() is not None else "")
        assert _count(s.ports[0], slot) > 30
        moved = move_slot(slot, s.ports[0], s.ports[1], s.ports)
        assert moved > 30
        time.sleep(2)  # the producer and worker go on, now on the other shard
        assert proc.stdin is not None
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-3000:]
        res = json.loads(out.strip().splitlines()[-1])
        added, ran = res["added"], res["ran"]
        assert len(added) == len(set(added)) > 60
        dups = sorted({j for j in ran if ran.count(j) > 1})
        assert not dups, f"jobs run twice: {dups[:20]}"
        assert set(ran) == set(added), f"never run: {sorted(set(added) - set(ran))[:20]}"
        assert res["completed"] == len(added)
        assert res["counts"] == {"wait": 0, "active": 0, "completed": len(added), "failed": 0, "delayed": 0}
        # the queue lives on the second shard now, and nothing of it is left on the first
        assert _count(s.ports[0], slot) == 0 and _count(s.ports[1], slot) > len(added)
        c = RawConn(s.ports[0])
        assert c.call_raw("GET", "{%s}:mig:id" % TAG) == b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, s.ports[1])
        c.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        s.stop()

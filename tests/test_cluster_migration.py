"""A slot migration under a running BullMQ worker loses no job and runs none twice (issue 14's Done-when).

``serve --shards 2``; a BullMQ producer and worker on an ioredis Cluster (interop/cluster_migration.js) keep
adding and processing jobs of a hash-tagged queue while the queue's slot moves to the other shard (and, with
respqueue's command, back again), with
``respqueue cluster reshard`` (respqueue/cluster/admin.py) or ``redis-cli --cluster reshard``: SETSLOT
IMPORTING/MIGRATING, GETKEYSINSLOT + MIGRATE until the slot is empty, SETSLOT NODE on every node. Every added
job must complete exactly once."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time

import pytest

from respqueue.cluster.slots import key_slot

from .cluster_servers import Shards, env
from .servers import ROOT, RawConn

INTEROP = os.path.join(ROOT, "interop")
pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(os.path.join(INTEROP, "node_modules", "bullmq")),
    reason="run `npm ci` in interop/ (and install node) for the BullMQ cluster tests",
)


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "respqueue", "cluster", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(),
    )


def move_with_respqueue(slot: int, ports: list[int]) -> str:
    p = _cli("reshard", f"127.0.0.1:{ports[0]}", "--slots", str(slot), "--to", f"127.0.0.1:{ports[1]}")
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def move_with_redis_cli(slot: int, ports: list[int]) -> str:
    """redis-cli moves the source's lowest slots first: slots 0..slot go over."""
    ids = []
    for port in ports:
        c = RawConn(port)
        ids.append(c.call_raw("CLUSTER", "MYID")[5:45].decode())
        c.close()
    p = subprocess.run(
        [
            "redis-cli",
            "--cluster",
            "reshard",
            f"127.0.0.1:{ports[0]}",
            "--cluster-from",
            ids[0],
            "--cluster-to",
            ids[1],
            "--cluster-slots",
            str(slot + 1),
            "--cluster-yes",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr
    return p.stdout


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


@pytest.mark.parametrize("how", ["respqueue", "redis-cli"])
def test_slot_migration_under_a_running_bullmq_worker(how):
    if how == "redis-cli" and shutil.which("redis-cli") is None:
        pytest.skip("no redis-cli")
    tag = "move" if how == "respqueue" else "mv1196"  # slots 2546 and 8 (redis-cli moves the lowest first)
    slot = key_slot(tag.encode())
    s = Shards(2)
    assert slot < 8192  # shard 0 holds it
    proc = subprocess.Popen(
        ["node", "cluster_migration.js", "mig", "{%s}" % tag, *map(str, s.ports)],
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
        keys_before = _count(s.ports[0], slot)
        out = (move_with_respqueue if how == "respqueue" else move_with_redis_cli)(slot, s.ports)
        if how == "respqueue":
            assert f"moved slot {slot} (" in out and "[OK] 1 slot(s) moved" in out, out
            assert int(out.split(f"moved slot {slot} (")[1].split(" ")[0]) >= keys_before
        time.sleep(1.5)  # the producer and worker go on, now on the other shard
        final, other = s.ports[1], s.ports[0]
        if how == "respqueue":  # and back again, the slot now holding every job so far
            keys_there = _count(s.ports[1], slot)
            p = _cli("reshard", f"127.0.0.1:{s.ports[1]}", "--slots", str(slot), "--to", f"127.0.0.1:{s.ports[0]}")
            assert p.returncode == 0, p.stdout + p.stderr
            assert int(p.stdout.split(f"moved slot {slot} (")[1].split(" ")[0]) >= keys_there
            final, other = s.ports[0], s.ports[1]
            time.sleep(1.5)
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
        # the queue lives on its last shard, and nothing of it is left on the other
        assert _count(other, slot) == 0 and _count(final, slot) > len(added)
        c = RawConn(other)
        assert c.call_raw("GET", "{%s}:mig:id" % tag) == b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, final)
        c.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        s.stop()


def test_reshard_command_moves_slots_and_reports_errors():
    s = Shards(2, "--durability", "memory")
    try:
        c = RawConn(s.ports[0])
        for i in range(5):
            assert c.call_raw("SET", "{mv681}k%d" % i, "v") == b"+OK\r\n"  # slot 1
        c.close()
        seed = f"127.0.0.1:{s.ports[0]}"
        to = f"127.0.0.1:{s.ports[1]}"
        p = _cli("reshard", seed, "--slots", "0-2", "--to", to)
        assert p.returncode == 0, p.stdout + p.stderr
        assert p.stdout.splitlines() == [
            f"moved slot 0 (0 keys) from {seed} to {to}",
            f"moved slot 1 (5 keys) from {seed} to {to}",
            f"moved slot 2 (0 keys) from {seed} to {to}",
            f"[OK] 3 slot(s) moved to {to}",
        ]
        assert _count(s.ports[1], 1) == 5 and _count(s.ports[0], 1) == 0
        check = _cli("check", seed)
        assert check.returncode == 0 and "slots:[3-8191] (8189 slots)" in check.stdout, check.stdout
        # already there: nothing to do
        p = _cli("reshard", seed, "--slots", "1", "--to", to)
        assert p.returncode == 0 and p.stdout == f"[OK] 0 slot(s) moved to {to}\n"
        p = _cli("reshard", seed, "--slots", "1-x", "--to", to)
        assert p.returncode == 2 and "bad slot range '1-x'" in p.stderr
        p = _cli("reshard", seed, "--slots", "16384", "--to", to)
        assert p.returncode == 2 and "slots are 0-16383" in p.stderr
        p = _cli("reshard", seed, "--slots", "5", "--to", "127.0.0.1:1")
        assert p.returncode == 1 and "cannot ask node 127.0.0.1:1" in p.stdout
    finally:
        s.stop()

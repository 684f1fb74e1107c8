"""Automatic failover with real ``redis-sentinel``: a respqueue master with two replicas and three
sentinels on loopback (interop/sentinel/cluster.py; down-after-milliseconds 2000, failover-timeout 3000); a redis-py client through ``redis.sentinel`` and a
BullMQ producer/worker on ioredis with ``sentinels`` (interop/sentinel/bullmq_failover.js) keep working
while the master is killed with SIGKILL, three times. With ``--replica-ack 1`` no acknowledged write is
lost: every acknowledged job completes, exactly once, and no acknowledged INCR goes missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections import Counter

import pytest
import redis
import redis.sentinel

from interop.sentinel.cluster import NAME, Cluster, Lines, call, sentinel_path

from .servers import ROOT

INTEROP = os.path.join(ROOT, "interop")

pytestmark = [
    pytest.mark.skipif(
        sentinel_path() is None, reason="redis-sentinel is not installed (apt-get install redis-sentinel)"
    ),
]
needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(os.path.join(INTEROP, "node_modules")),
    reason="run `npm ci` in interop/ (and install node) for the BullMQ failover test",
)


class Incrementer(threading.Thread):
    """INCRs a counter through Sentinel until stopped, counting the acknowledged ones."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__(daemon=True)
        self.sentinel = redis.sentinel.Sentinel([("127.0.0.1", p) for p in ports], socket_timeout=2)
        self.stop = threading.Event()
        self.acked = 0
        self.attempts = 0
        self.errors = 0

    def run(self) -> None:
        m = self.sentinel.master_for(NAME, socket_timeout=3)
        while not self.stop.is_set():
            self.attempts += 1
            try:
                m.incr("counter")
                self.acked += 1
            except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError, redis.ResponseError):
                self.errors += 1
                time.sleep(0.1)
            time.sleep(0.005)


def test_sentinel_sees_respqueue_roles() -> None:
    c = Cluster(replicas=1)
    try:
        sp = c.sentinel_ports[0]
        master = c.master()
        m = call(sp, "SENTINEL", "MASTER", NAME)
        info = dict(zip(m[::2], m[1::2], strict=True))
        assert info[b"flags"] == b"master" and int(info[b"num-slaves"]) == 1
        assert int(info[b"num-other-sentinels"]) == 2
        rep = call(sp, "SENTINEL", "REPLICAS", NAME)[0]
        rep = dict(zip(rep[::2], rep[1::2], strict=True))
        assert rep[b"flags"] == b"slave" and rep[b"master-link-status"] == b"ok"
        assert int(rep[b"master-port"]) == master and rep[b"slave-priority"] == b"100"
        # a manual failover: the replica is promoted and the old master demoted (REPLICAOF via Sentinel)
        assert call(sp, "SENTINEL", "FAILOVER", NAME) == b"OK"
        c.wait_new_master(master)
        c.wait_replica(master)
    finally:
        c.close()


@needs_node
def test_failover_keeps_clients_working_and_loses_no_acked_write() -> None:
    c = Cluster(replicas=2, node_args=("--replica-ack", "1"))
    node = None
    inc = Incrementer(c.sentinel_ports)
    try:
        inc.start()
        # jobs are added (one at a time, 20 ms apart) until `stop`, and processed, all through the kills
        node = subprocess.Popen(
            ["node", "sentinel/bullmq_failover.js", ",".join(map(str, c.sentinel_ports)), "failq", "100000", "20"],
            cwd=INTEROP,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines = Lines(node)
        lines.start()
        for k in range(3):
            deadline = time.time() + 30
            while not lines.has("completed") and time.time() < deadline:
                time.sleep(0.1)
            time.sleep(1.5)
            old = c.master()
            c.kill(old)
            new = c.wait_new_master(old)
            if k == 0:
                # the old master comes back as it was: Sentinel finds it and makes it a replica
                c.start_node(old)
            else:
                c.start_node(old, replicaof=new)
            c.wait_replica(old)
        time.sleep(1)
        assert node.stdin is not None
        node.stdin.write("stop\n")
        node.stdin.flush()
        deadline = time.time() + 40
        while node.poll() is None and not lines.has("counts") and time.time() < deadline:
            time.sleep(0.2)
        inc.stop.set()
        inc.join(10)
        out = lines.lines
        added = {x.split()[1] for x in out if x.startswith("added ")}
        completed = Counter(x.split()[1] for x in out if x.startswith("completed "))
        if not lines.has("counts"):
            m = c.master()
            missing = sorted(added - set(completed))
            state = {j: call(m, "HGETALL", f"bull:failq:{j}") for j in missing[:5]}
            lists = {k: call(m, "TYPE", f"bull:failq:{k}") for k in ("wait", "active", "completed", "marker")}
            active = call(m, "LRANGE", "bull:failq:active", "0", "-1")
            pytest.fail(
                f"not all jobs completed: missing {missing[:10]} {state} {lists} active={active} "
                f"master={m} {call(m, 'ROLE')}\n" + "\n".join(x for x in out if x.startswith("error"))[-3000:]
            )
        assert len(added) > 50
        finished = set(next(x for x in out if x.startswith("finished ")).split()[1:])
        assert finished == added, f"acknowledged but not completed: {sorted(added - finished)[:10]}"
        # a job's completion is reported at most once (a completion whose reply a kill cut off is not
        # reported, but is in the completed set above)
        twice = [j for j, n in completed.items() if n > 1]
        assert not twice, f"completed twice: {twice[:10]}"
        assert set(completed) <= added
        counts = json.loads(next(x for x in out if x.startswith("counts "))[7:])
        assert counts["completed"] == len(added) and counts["failed"] == 0
        # every acknowledged INCR is in the counter on the master of the end (retries may add more)
        master = c.master()
        value = int(call(master, "GET", "counter") or 0)
        assert inc.acked > 0 and inc.acked <= value <= inc.attempts
    finally:
        inc.stop.set()
        if node is not None and node.poll() is None:
            node.kill()
        c.close()

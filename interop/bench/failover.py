"""Failover times with real redis-sentinel: kill -9 the master again and again.

    python -m interop.bench.failover [--kills 20] [--replicas 2] [--replica-ack 1]

A respqueue master with replicas and three sentinels (down-after-milliseconds 2000, failover-timeout
3000; interop/sentinel/cluster.py). Each round kills the master with SIGKILL and measures the time
until (a) every sentinel names a new master that says it is one, and (b) a redis-py client through
``redis.sentinel`` has a write acknowledged again (it retries every 50 ms). The killed node is
restarted as a replica of the new master before the next round; an INCR loop runs throughout and at the
end every acknowledged INCR must be in the counter.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import redis
import redis.sentinel

from interop.sentinel.cluster import NAME, Cluster, call


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--replica-ack", type=int, default=1)
    args = ap.parse_args()
    c = Cluster(replicas=args.replicas, node_args=("--replica-ack", str(args.replica_ack)))
    sent = redis.sentinel.Sentinel([("127.0.0.1", p) for p in c.sentinel_ports], socket_timeout=1)
    acked = 0
    stop = threading.Event()
    last_ok = [time.time()]

    def writer() -> None:
        nonlocal acked
        m = sent.master_for(NAME, socket_timeout=2)
        while not stop.is_set():
            try:
                m.incr("counter")
                acked += 1
                last_ok[0] = time.time()
            except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError, redis.ResponseError):
                time.sleep(0.05)

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    promote: list[float] = []
    writable: list[float] = []
    try:
        for k in range(args.kills):
            time.sleep(1.0)
            old = c.master()
            before = acked  # acknowledged before the kill: all must survive it
            t0 = time.time()
            c.kill(old)
            new = c.wait_new_master(old)
            t1 = time.time()
            while last_ok[0] < t1 and time.time() - t1 < 30:
                time.sleep(0.01)
            t2 = max(last_ok[0], t1)
            promote.append(t1 - t0)
            writable.append(t2 - t0)
            after = int(call(new, "GET", "counter") or 0)
            print(
                f"kill {k + 1}: master {old} -> {new}: promoted after {t1 - t0:.2f} s, "
                f"writes acknowledged again after {t2 - t0:.2f} s"
                + ("" if after >= before else f"; LOST {before - after} acknowledged INCRs"),
                flush=True,
            )
            c.start_node(old, replicaof=new)
            c.wait_replica(old)
        stop.set()
        th.join(10)
        value = int(call(c.master(), "GET", "counter"))
        print(f"{args.kills} kills, {args.replicas} replicas, --replica-ack {args.replica_ack}")
        for name, xs in (("promotion", promote), ("writable again", writable)):
            print(f"  {name}: min {min(xs):.2f} s, median {statistics.median(xs):.2f} s, max {max(xs):.2f} s")
        print(f"  INCRs acknowledged {acked}, counter {value}: {'none lost' if value >= acked else 'LOST WRITES'}")
    finally:
        stop.set()
        c.close()


if __name__ == "__main__":
    main()

"""Failover times with real redis-sentinel: kill -9 the master again and again.

    python -m interop.bench.failover [--kills 20] [--replicas 2] [--replica-ack 1] [--bullmq]

A respqueue master with replicas and three sentinels (down-after-milliseconds 2000, failover-timeout
3000; interop/sentinel/cluster.py). Each round kills the master with SIGKILL and measures the time
until (a) every sentinel names a new master that says it is one, and (b) a redis-py client through
``redis.sentinel`` has a write acknowledged again (it retries every 50 ms). The killed node is
restarted as a replica of the new master before the next round; an INCR loop runs throughout and at the
end every acknowledged INCR must be in the counter.

With ``--bullmq`` a BullMQ producer and worker (interop/sentinel/bullmq_failover.js, ioredis through the
sentinels) run instead of the INCR loop: the producer adds jobs continuously (an add is retried with its
job id until acknowledged), the worker (concurrency 4) processes them; each round measures kill ->
promoted and kill -> the worker's first completion acknowledged by the new master, and waits for that
completion before the next kill. After the last kill the producer stops and the worker drains; then, from
the final master and the recorded ids: (a) every acknowledged add is a completed job, (b) no job's
processor ran after its completion was acknowledged, (c) the worker completed jobs after every failover.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter

import redis
import redis.sentinel

from interop.sentinel.cluster import DOWN_AFTER_MS, NAME, Cluster, Lines, call

INTEROP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUEUE = "failbench"


def run_bullmq(args: argparse.Namespace) -> int:
    c = Cluster(replicas=args.replicas, node_args=("--replica-ack", str(args.replica_ack)))
    node = subprocess.Popen(
        ["node", "sentinel/bullmq_failover.js", ",".join(map(str, c.sentinel_ports)), QUEUE, "10000000", "20"],
        cwd=INTEROP,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = Lines(node)
    lines.start()
    rows: list[tuple[int, int, int, float, float | None]] = []
    try:
        t_start = time.time()
        while lines.first_completion_after(t_start) is None:
            if time.time() - t_start > 60:
                raise SystemExit("the BullMQ worker completed nothing in 60 s:\n" + "\n".join(lines.lines[-20:]))
            time.sleep(0.1)
        for k in range(args.kills):
            time.sleep(1.0)
            old = c.master()
            t0 = time.time()
            c.kill(old)
            new = c.wait_new_master(old)
            t1 = time.time()
            # no failover can happen within down-after-milliseconds of the kill: a completion stamped
            # before that is a reply of the dead master still in flight at the kill
            floor = t0 + DOWN_AFTER_MS / 1000
            t2 = None
            while t2 is None and time.time() - t1 < 60:
                t2 = lines.first_completion_after(floor)
                time.sleep(0.02)
            rows.append((k + 1, old, new, t1 - t0, None if t2 is None else t2 - t0))
            print(
                f"kill {k + 1}: master {old} -> {new}: promoted after {t1 - t0:.2f} s, "
                + (f"worker completing again after {t2 - t0:.2f} s" if t2 else "NO completion within 60 s"),
                flush=True,
            )
            c.start_node(old, replicaof=new)
            c.wait_replica(old)
        assert node.stdin is not None
        node.stdin.write("stop\n")
        node.stdin.flush()
        deadline = time.time() + 300
        while node.poll() is None and not any(x.startswith("counts ") for x in lines.lines):
            if time.time() > deadline:
                print("the worker did not drain the queue within 300 s", flush=True)
                break
            time.sleep(0.2)
        time.sleep(0.5)
        if args.log:
            with open(args.log, "w") as f:
                f.write("\n".join(lines.lines) + "\n")
        return check_bullmq(args, c, lines.lines, rows)
    finally:
        if node.poll() is None:
            node.kill()
        c.close()


def check_bullmq(
    args: argparse.Namespace, c: Cluster, out: list[str], rows: list[tuple[int, int, int, float, float | None]]
) -> int:
    added: set[str] = set()
    completed: Counter[str] = Counter()
    runs: Counter[str] = Counter()
    rerun_after_ack: list[str] = []
    for x in out:
        f = x.split()
        if not f:
            continue
        if f[0] == "added":
            added.add(f[1])
        elif f[0] == "completed":
            completed[f[1]] += 1
        elif f[0] == "processed":
            runs[f[1]] += 1
            if completed[f[1]]:  # its completion was acknowledged before: (b) forbids this
                rerun_after_ack.append(f[1])
    errors = [x for x in out if x.startswith("error")]
    master = c.master()
    r = redis.Redis(port=master, socket_timeout=10)
    ids = sorted(added, key=lambda j: int(j[1:]))
    pipe = r.pipeline(transaction=False)
    for j in ids:
        pipe.zscore(f"bull:{QUEUE}:completed", j)
        pipe.hget(f"bull:{QUEUE}:{j}", "finishedOn")
    res = pipe.execute()
    not_done = [j for i, j in enumerate(ids) if res[2 * i] is None or res[2 * i + 1] is None]
    n_completed = r.zcard(f"bull:{QUEUE}:completed")
    n_failed = r.zcard(f"bull:{QUEUE}:failed")
    reported = sum(1 for j in added if completed[j])
    multi_run = sum(1 for n in runs.values() if n > 1)
    no_resume = [k for k, *_, t2 in rows if t2 is None]
    prom = [row[3] for row in rows]
    work = [row[4] for row in rows if row[4] is not None]
    print(f"\n{len(rows)} kills, {args.replicas} replicas, --replica-ack {args.replica_ack}, BullMQ through Sentinel")
    print("  kill  old master -> new   promoted (s)   worker completing again (s)")
    for k, old, new, tp, tw in rows:
        print(f"  {k:4d}  {old:6d} -> {new:6d}   {tp:12.2f}   {'-' if tw is None else f'{tw:.2f}':>27}")
    print(f"  promotion: min {min(prom):.2f} s, median {statistics.median(prom):.2f} s, max {max(prom):.2f} s")
    if work:
        print(
            f"  completing again: min {min(work):.2f} s, median {statistics.median(work):.2f} s, max {max(work):.2f} s"
        )
    print(
        f"  adds acknowledged {len(added)}; completed on the final master {n_completed} (failed {n_failed}); "
        f"completions acknowledged to the worker {reported} (the rest committed with the reply lost in a kill); "
        f"processor runs {sum(runs.values())}, jobs run more than once {multi_run} (all before their completion "
        f"was acknowledged unless listed below); client error lines {len(errors)}"
    )
    ok = True
    if not_done:
        ok = False
        print(f"  (a) FAILED: {len(not_done)} acknowledged adds not completed on the final master: {not_done[:10]}")
    else:
        print("  (a) every acknowledged add is a completed job on the final master")
    twice = [j for j, n in completed.items() if n > 1]
    if rerun_after_ack or twice:
        ok = False
        print(
            f"  (b) FAILED: run again after its acknowledged completion {rerun_after_ack[:10]}; completed twice {twice[:10]}"
        )
    else:
        print("  (b) no job ran again after its completion was acknowledged")
    if no_resume:
        ok = False
        print(f"  (c) FAILED: no completion after kills {no_resume}")
    else:
        print(f"  (c) the worker completed jobs after each of the {len(rows)} failovers")
    if not any(x.startswith("counts ") for x in out):
        ok = False
        print("  the worker did not report the queue drained; last lines:\n    " + "\n    ".join(out[-10:]))
    return 0 if ok else 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--replica-ack", type=int, default=1)
    ap.add_argument("--bullmq", action="store_true", help="a BullMQ producer and worker instead of an INCR loop")
    ap.add_argument("--log", help="with --bullmq: write the producer/worker's output lines to this file")
    args = ap.parse_args()
    if args.bullmq:
        sys.exit(run_bullmq(args))
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

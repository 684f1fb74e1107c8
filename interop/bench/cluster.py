"""Cluster benchmark (not a test): hash-tagged BullMQ queues with producers and workers against
respqueue with 1, 2, 4 and one-per-core shards, a single Redis, and a real Redis Cluster with as many masters,
in one run.

    python -m interop.bench.cluster [--jobs 500] [--queues N] [--shards 1,2,4,auto] [--procs N]
                                    [--concurrency 20] [--inflight 20] [--durability durable|buffered|memory]

``auto`` is one shard per core (``serve --shards auto``); counts repeated by auto are run once. The queues
(default max(8, 2 x the most shards)) and the driver processes (default max(2, cores / 4)) follow the machine.
At the end it prints the target check: N shards against 0.8 x N x one shard's aggregate, and the real Redis
Cluster with the same number of masters.

Per server: aggregate jobs/s (all jobs / from the first driver's start to the last one's end), server CPU
seconds per 1,000 jobs (user+system of the whole process tree: supervisor, shards and their writer
processes; every redis-server of a Redis Cluster), and the p50/p99 pickup delay (processor start - the
job's timestamp, which under this saturating load includes the wait in the queue). --procs Node driver
processes share the queues. The queues' hash tags are picked so that each master of a 2- or 4-master
cluster serves the same number of queues. respqueue with 1 shard is the plain server (no cluster mode).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from respqueue.cluster.slots import key_slot, split_even
from tests.cluster_servers import free_port_range, redis_cluster_node_argv
from tests.servers import respqueue_argv, respqueue_env

from .common import Proc, machine, start_redis, start_respqueue, wait_port

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "cluster_bench.js")


def balanced_tags(n: int, splits: tuple[int, ...] = (2, 4)) -> list[str]:
    """``n`` hash tags that spread as evenly as they can over the masters of each cluster size in ``splits``
    (each master of an N-master cluster gets at most ceil(n / N) queues, for every N at once where possible)."""
    sizes = sorted({k for k in splits if k > 1}) or [1]
    tables = {k: split_even(k) for k in sizes}
    cap = {k: -(-n // k) for k in sizes}
    count = {k: [0] * k for k in sizes}
    out: list[str] = []

    def owner(k: int, slot: int) -> int:
        return next(j for j, (a, b) in enumerate(tables[k]) if a <= slot <= b)

    i = 0
    while len(out) < n and i < 200_000:
        tag = f"bq{i}"
        i += 1
        s = key_slot(tag.encode())
        where = {k: owner(k, s) for k in sizes}
        if all(count[k][where[k]] < cap[k] for k in sizes):
            out.append(tag)
            for k in sizes:
                count[k][where[k]] += 1
    # sizes that cannot all be even at once: fill up, even for the biggest cluster only
    big = sizes[-1]
    while len(out) < n:
        tag = f"bq{i}"
        i += 1
        j = owner(big, key_slot(tag.encode()))
        if count[big][j] < cap[big] or i > 400_000:
            out.append(tag)
            count[big][j] += 1
    return out


def shard_counts(spec: str) -> list[int]:
    """``--shards``: comma-separated counts, ``auto`` being one per core (as ``serve --shards auto``); 1 (the
    plain server, the baseline of the target check) is always measured."""
    cores = os.cpu_count() or 1
    out: list[int] = []
    for x in spec.split(","):
        x = x.strip().lower()
        n = cores if x == "auto" else int(x)
        if n < 1:
            raise SystemExit(f"--shards: {x} is not a shard count")
        if n not in out:
            out.append(n)
    if 1 not in out:
        out.insert(0, 1)
    return out


def target_check(rows: list[dict], counts: list[int]) -> list[str]:
    """The issue's target: N shards give at least 0.8 x N x one shard's aggregate jobs/s; beside it, the real
    Redis Cluster with the same number of masters."""
    by = {r["server"]: r["jobs_per_s"] for r in rows}
    one = by.get("respqueue 1 shard", 0.0)
    lines = []
    for n in counts:
        if n < 2:
            continue
        got = by.get(f"respqueue {n} shards", 0.0)
        want = 0.8 * n * one
        verdict = "met" if got >= want else "NOT met"
        rc = by.get(f"redis cluster {n}")
        vs = f"; redis cluster {n} masters {rc:.0f} jobs/s (respqueue {got / rc:.2f}x)" if rc else ""
        lines.append(
            f"target {n} shards: {got:.0f} jobs/s vs 0.8 x {n} x {one:.0f} = {want:.0f}: {verdict}"
            f" ({got / one if one else 0:.2f}x one shard){vs}"
        )
    return lines


def tree_pids(pid: int) -> list[int]:
    out = [pid]
    i = 0
    while i < len(out):
        p = out[i]
        i += 1
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    out.extend(int(x) for x in f.read().split())
        except OSError:
            pass
    return out


def cpu_seconds(roots: list[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for root in roots:
        for pid in tree_pids(root):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    parts = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(parts[11]) + int(parts[12])
    return total / ticks


class Group:
    """A server under test: its processes (CPU roots), the driver mode and ports."""

    def __init__(
        self,
        name: str,
        mode: str,
        ports: list[int],
        procs: list[subprocess.Popen],
        workdirs: list[str],
        keep: list[Proc] | None = None,
    ) -> None:
        self.name, self.mode, self.ports, self.procs, self.workdirs = name, mode, ports, procs, workdirs
        self.keep = keep or []

    def stop(self) -> None:
        for p in self.keep:
            p.stop()
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
        for d in self.workdirs:
            shutil.rmtree(d, ignore_errors=True)


def rq_single(durability: str) -> Group:
    p = start_respqueue("--durability", durability)
    return Group("respqueue 1 shard", "single", [p.port], [p.proc], [], keep=[p])


def rq_shards(n: int, durability: str) -> Group:
    base = free_port_range(n)
    wd = tempfile.mkdtemp(prefix="bench-shards-")
    argv = respqueue_argv(
        base, os.path.join(wd, "data"), "--shards", str(n), "--durability", durability, "--log-level", "warning"
    )
    env = respqueue_env()
    proc = subprocess.Popen(argv, cwd=wd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ports = [base + k for k in range(n)]
    for p in ports:
        wait_port(p, timeout=60)
    return Group(f"respqueue {n} shards", "cluster", ports, [proc], [wd])


def redis_single() -> Group:
    p = start_redis()
    return Group("redis", "single", [p.port], [p.proc], [], keep=[p])


def redis_cluster(n: int) -> Group:
    base = free_port_range(n, bus=True)
    exe = shutil.which("redis-server") or "redis-server"
    procs, wds, ports = [], [], []
    for k in range(n):
        port = base + k
        wd = tempfile.mkdtemp(prefix="bench-rc-")
        procs.append(
            subprocess.Popen(
                redis_cluster_node_argv(exe, port, wd),
                cwd=wd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        wds.append(wd)
        ports.append(port)
    for p in ports:
        wait_port(p)
    # what redis-cli --cluster create does (it refuses fewer than 3 masters): slots split evenly, then MEET
    for k, ((a, b), port) in enumerate(zip(split_even(n), ports, strict=True)):
        cli = ["redis-cli", "-p", str(port)]
        subprocess.run([*cli, "cluster", "set-config-epoch", str(k + 1)], check=True, capture_output=True)
        subprocess.run([*cli, "cluster", "addslotsrange", str(a), str(b)], check=True, capture_output=True)
    for port in ports[1:]:
        subprocess.run(
            ["redis-cli", "-p", str(ports[0]), "cluster", "meet", "127.0.0.1", str(port)],
            check=True,
            capture_output=True,
        )
    deadline = time.time() + 30
    while time.time() < deadline:
        states = [
            subprocess.run(["redis-cli", "-p", str(p), "cluster", "info"], capture_output=True, text=True).stdout
            for p in ports
        ]
        if all("cluster_state:ok" in s and f"cluster_known_nodes:{n}" in s for s in states):
            break
        time.sleep(0.2)
    time.sleep(1)
    return Group(f"redis cluster {n}", "cluster", ports, procs, wds)


def run_group(g: Group, tags: list[str], args: argparse.Namespace) -> dict:
    roots = [p.pid for p in g.procs]
    per = [tags[i :: args.procs] for i in range(args.procs)]
    extra = ["--jobs", str(args.jobs), "--concurrency", str(args.concurrency), "--inflight", str(args.inflight)]
    c0 = cpu_seconds(roots)
    drivers = [
        subprocess.Popen(
            ["node", DRIVER, g.mode, ",".join(map(str, g.ports)), ",".join(ts), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for ts in per
        if ts
    ]
    results = []
    for d in drivers:
        out, err = d.communicate(timeout=1800)
        if d.returncode != 0:
            raise RuntimeError(f"{g.name}: driver failed: {err[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1].split(" ", 1)[1]))
    cpu = cpu_seconds(roots) - c0
    jobs = sum(r["jobs"] for r in results)
    secs = (max(r["end"] for r in results) - min(r["start"] for r in results)) / 1000
    pick = sorted(x for r in results for x in r["pickups"])
    return {
        "server": g.name,
        "jobs": jobs,
        "seconds": secs,
        "jobs_per_s": jobs / secs if secs else 0.0,
        "cpu_s_per_1k": cpu / jobs * 1000 if jobs else 0.0,
        "p50_pickup_ms": pick[len(pick) // 2] if pick else 0,
        "p99_pickup_ms": pick[int(len(pick) * 0.99)] if pick else 0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=500, help="jobs per queue, default 500")
    ap.add_argument("--queues", type=int, help="hash-tagged queues, default max(8, 2 x the biggest shard count)")
    ap.add_argument(
        "--shards", default="1,2,4,auto", help="respqueue shard counts, auto: one per core; default 1,2,4,auto"
    )
    ap.add_argument("--procs", type=int, help="Node driver processes, default max(2, cores / 4), at most one per queue")
    ap.add_argument("--concurrency", type=int, default=20, help="each Worker's concurrency, default 20")
    ap.add_argument("--inflight", type=int, default=20, help="each producer's add() calls in flight, default 20")
    ap.add_argument("--durability", default="durable", choices=("durable", "buffered", "memory"))
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    counts = shard_counts(args.shards)
    if args.queues is None:
        args.queues = max(8, 2 * max(counts))
    if args.procs is None:
        args.procs = max(2, (os.cpu_count() or 2) // 4)
    args.procs = max(1, min(args.procs, args.queues))
    tags = balanced_tags(args.queues, tuple(counts))
    print(
        f"# cluster benchmark: {machine()}; {args.queues} queues x {args.jobs} jobs, {args.procs} driver processes,"
        f" concurrency {args.concurrency}, inflight {args.inflight}, respqueue --durability {args.durability};"
        f" shards {','.join(map(str, counts))} ({os.cpu_count()} cores)"
    )
    makers: list = []
    for n in counts:
        makers.append(
            (lambda n=n: rq_single(args.durability)) if n == 1 else (lambda n=n: rq_shards(n, args.durability))
        )
    makers.append(redis_single)
    for n in counts:
        if n > 1:
            makers.append(lambda n=n: redis_cluster(n))
    rows = []
    for make in makers:
        g = make()
        try:
            rows.append(run_group(g, tags, args))
        finally:
            g.stop()
        r = rows[-1]
        print(
            f"{r['server']:<20} {r['jobs_per_s']:>9.0f} jobs/s  {r['cpu_s_per_1k']:>6.3f} CPU s/1k jobs"
            f"  pickup p50 {r['p50_pickup_ms']:>5} ms  p99 {r['p99_pickup_ms']:>5} ms",
            flush=True,
        )
    for line in target_check(rows, counts):
        print(line)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

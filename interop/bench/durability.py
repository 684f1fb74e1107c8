"""Durability benchmark (not a test): respqueue durable/buffered/memory vs Redis AOF.

    python3 -m interop.bench.durability [--requests N] [--keys N] [--hashes N]

1. redis-benchmark SET/INCR/LPUSH at -c 50 -P 1 against respqueue (durable,
   buffered, memory) and redis-server (appendonly yes with appendfsync
   always / everysec), in the same run, with ratios to Redis.
2. Restart time with N small keys and with M hashes vs Redis's AOF load time.
3. Database bytes per key.
Prints a Markdown table (docs/BENCHMARKS.md has a copy).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time

import redis

from .common import ROOT, Proc, start_redis, start_respqueue, wait_port


def bench(port: int, tests: str, n: int) -> dict[str, float]:
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-c", "50", "-P", "1", "-n", str(n), "-t", tests, "-q", "--csv"],
        capture_output=True, text=True, timeout=600,
    ).stdout
    res: dict[str, float] = {}
    for line in out.splitlines():
        parts = [p.strip('"') for p in line.split(",")]
        if len(parts) >= 2 and parts[0] != "test":
            res[parts[0].split()[0]] = float(parts[1])
    return res


def fill(port: int, keys: int, hashes: int) -> None:
    r = redis.Redis(port=port)
    p = r.pipeline(transaction=False)
    for i in range(keys):
        p.set(f"key:{i}", "x" * 10)
        if i % 10000 == 9999:
            p.execute()
    for i in range(hashes):
        p.hset(f"hash:{i}", mapping={"name": f"job{i}", "data": "{}", "attempts": "0", "ts": str(i)})
        if i % 5000 == 4999:
            p.execute()
    p.execute()
    r.close()


def restart_time(proc: Proc, argv_port: int) -> float:
    """Stop ``proc`` and time a restart in the same workdir until it answers."""
    argv = proc.proc.args
    proc.proc.terminate()
    proc.proc.wait(60)
    t0 = time.perf_counter()
    p2 = Proc.__new__(Proc)
    p2.name, p2.port, p2.workdir = proc.name, argv_port, proc.workdir
    p2.proc = subprocess.Popen(argv, cwd=proc.workdir, env=None if proc.name == "redis" else dict(os.environ, PYTHONPATH=ROOT),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(argv_port, timeout=600)
    r = redis.Redis(port=argv_port)
    while True:
        try:
            r.dbsize()
            break
        except redis.BusyLoadingError:
            time.sleep(0.01)
    dt = time.perf_counter() - t0
    proc.proc = p2.proc
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--hashes", type=int, default=100_000)
    a = ap.parse_args()
    configs = [
        ("respqueue durable", lambda: start_respqueue("--durability", "durable")),
        ("respqueue buffered", lambda: start_respqueue("--durability", "buffered")),
        ("respqueue memory", lambda: start_respqueue("--durability", "memory")),
        ("redis aof always", lambda: start_redis("--appendonly", "yes", "--appendfsync", "always")),
        ("redis aof everysec", lambda: start_redis("--appendonly", "yes", "--appendfsync", "everysec")),
    ]
    rows = {}
    for name, start in configs:
        p = start()
        try:
            rows[name] = bench(p.port, "set,incr,lpush", a.requests)
        finally:
            p.stop()
    print("| server | SET ops/s | INCR ops/s | LPUSH ops/s |")
    print("|---|---|---|---|")
    for name, res in rows.items():
        print(f"| {name} | " + " | ".join(f"{res.get(t, 0):,.0f}" for t in ("SET", "INCR", "LPUSH")) + " |")
    for ours, theirs in (("respqueue durable", "redis aof always"), ("respqueue buffered", "redis aof everysec")):
        ratio = [rows[ours].get(t, 0) / max(1.0, rows[theirs].get(t, 1)) for t in ("SET", "INCR", "LPUSH")]
        print(f"\n{ours} / {theirs}: " + ", ".join(f"{t} {x:.2f}" for t, x in zip(("SET", "INCR", "LPUSH"), ratio, strict=True)))
    print("\n| dataset | respqueue restart s | redis AOF load s | respqueue bytes/key |")
    print("|---|---|---|---|")
    for label, keys, hashes in ((f"{a.keys:,} small keys", a.keys, 0), (f"{a.hashes:,} hashes", 0, a.hashes)):
        rq = start_respqueue("--durability", "buffered")
        rd = start_redis("--appendonly", "yes", "--appendfsync", "everysec")
        try:
            fill(rq.port, keys, hashes)
            fill(rd.port, keys, hashes)
            t_rq = restart_time(rq, rq.port)
            t_rd = restart_time(rd, rd.port)
            dbf = os.path.join(rq.workdir, "data", "respqueue.db")
            size = sum(os.path.getsize(dbf + s) for s in ("", "-wal") if os.path.exists(dbf + s))
            print(f"| {label} | {t_rq:.2f} | {t_rd:.2f} | {size / max(1, keys + hashes):.0f} |")
        finally:
            rq.stop()
            rd.stop()


if __name__ == "__main__":
    main()

"""Durability benchmark (not a test): respqueue durable/buffered vs Redis with an AOF, in one run.

    python3 -m interop.bench.durability [--jobs N] [--rounds R] [--restart-jobs N]
                                        [--restart-rounds R] [--skip-bullmq] [--skip-restart]
                                        [--memory] [--no-history] [--micro] [--json FILE]

1. BullMQ `add` (Queue.add, 50 in flight) and `process` (a Worker at concurrency 50 on a
   pre-filled queue), driven by interop/bench/bullmq_bench.js, against four servers running side
   by side: Redis `appendonly yes` + `appendfsync always`, respqueue `durable`, Redis
   `appendfsync everysec`, respqueue `buffered`. Every round runs each workload on the four in
   that order (alternating, so machine noise hits all of them). Prints jobs/s and the ratios
   durable/always and buffered/everysec (targets: >= 0.5 on processing).
2. Restart with --restart-jobs BullMQ jobs stored (default 1,000,000, created with
   Queue.addBulk in batches of 1,000 through the Node client): each server is stopped cleanly
   and started again in the same directory; measured from process start to the first PONG and to
   "serving again", the first reply to LLEN bull:bench_bulk:wait that equals the stored count.
   Redis runs with `appendonly yes` (Redis 7's multi-part AOF in appendonlydir/, its defaults:
   RDB preamble in the rewritten base, automatic rewrites), and a second Redis with
   `aof-use-rdb-preamble no` (a pure command log). Restarts alternate between the servers.
   respqueue starts from this checkout with its bytecode compiled first (``compileall``, into the
   checkout's ignored __pycache__ folders), as an installed respqueue has it (pip compiles at install,
   the Docker image included); without it (this environment sets PYTHONDONTWRITEBYTECODE=1) every start
   compiles its sources again (~0.3 s of CPU here). --restart-source-only measures that instead.
3. Bytes per job: respqueue.db (+ -wal; a clean stop checkpoints it) / jobs, split into the
   keyspace tables and the job-history tables, vs the size of Redis's appendonlydir / jobs.

--memory adds respqueue `memory` (nothing on disk) to the BullMQ part, with its ratio to Redis
`everysec`: the gap between it and `buffered` is what persistence costs. --no-history adds
respqueue `buffered` with `--history off` (`nohistory`): the gap to `buffered` is what the
job-history capture costs. The server CPU rows also give respqueue's writer process on its own.
--micro adds the older redis-benchmark SET/INCR/LPUSH comparison (-c 50 -P 1).
Prints Markdown tables (docs/BENCHMARKS.md keeps a copy).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable

import redis

from tests.servers import compile_sources

from .bullmq import DRIVER, Totals, redis_aof_flags, run_driver
from .common import ROOT, Proc, machine, start_redis, start_respqueue

SERVERS: list[tuple[str, Callable[[], Proc]]] = [
    ("redis always", lambda: start_redis(*redis_aof_flags("always"))),
    ("respqueue durable", lambda: start_respqueue("--durability", "durable")),
    ("redis everysec", lambda: start_redis(*redis_aof_flags("everysec"))),
    ("respqueue buffered", lambda: start_respqueue("--durability", "buffered")),
]
PAIRS = [("respqueue durable", "redis always"), ("respqueue buffered", "redis everysec")]
# --memory: respqueue with nothing on disk as a fifth server, to show what persistence costs
MEMORY = ("respqueue memory", lambda: start_respqueue("--durability", "memory"))
MEMORY_PAIR = ("respqueue memory", "redis everysec")
# --no-history: respqueue buffered without job-history capture, to show what the history costs
NOHIST = ("respqueue nohistory", lambda: start_respqueue("--durability", "buffered", "--history", "off"))
NOHIST_PAIR = ("respqueue nohistory", "redis everysec")
WAIT_KEY = b"bull:bench_bulk:wait"


# ---- 1. BullMQ add / process ------------------------------------------------------------------
def bullmq_part(jobs: int, rounds: int, raw: list[dict], servers: list[tuple[str, Callable[[], Proc]]]
                ) -> dict[str, dict[str, Totals]]:
    procs: list[tuple[str, Proc]] = []
    res: dict[str, dict[str, Totals]] = {w: {n: Totals() for n, _ in servers} for w in ("add", "process")}
    try:
        for name, start in servers:
            procs.append((name, start()))
        for r in range(rounds):
            for w in ("add", "process"):
                params = ["--jobs", str(jobs), "--inflight" if w == "add" else "--concurrency", "50"]
                for name, srv in procs:
                    out, cpu, child = run_driver(srv, w, params)
                    t = res[w][name]
                    if "error" in out or not out.get("ok", False):
                        t.errors.append(str(out.get("error") or out)[:300])
                        print(f"{w:8} {name:19} round {r + 1}: FAILED {t.errors[-1]}", flush=True)
                        continue
                    t.jobs += out["jobs"]
                    t.seconds += out["ms"] / 1000
                    t.cpu += cpu
                    t.child_cpu += child
                    raw.append({"part": "bullmq", "server": name, "workload": w, "round": r + 1, "cpu": cpu,
                                "writer_cpu": child, "jobs_per_s": out["jobs_per_s"]})
                    print(f"{w:8} {name:19} round {r + 1}: {out['jobs_per_s']:>8,.0f} jobs/s  cpu {cpu:6.2f} s",
                          flush=True)
    finally:
        for _, p in procs:
            p.stop()
    return res


def print_bullmq(res: dict[str, dict[str, Totals]], jobs: int, rounds: int) -> None:
    names = list(next(iter(res.values())))
    pairs = PAIRS + [p for p in (MEMORY_PAIR, NOHIST_PAIR) if p[0] in names]
    blank = " |" * (len(pairs) + 1)
    print(f"\nBullMQ, {jobs:,} jobs per run, {rounds} round(s), servers alternating:")
    print("| workload | " + " | ".join(names) + " | " + " | ".join(f"{a.split()[-1]}/{b.split()[-1]}" for a, b in pairs)
          + " |")
    print("|---|" + "---|" * (len(names) + len(pairs)))
    for w, tot in res.items():
        cells = [f"{tot[n].rate:,.0f}" for n in names]
        ratios = [f"{tot[a].rate / tot[b].rate:.2f}" if tot[a].rate and tot[b].rate else "n/a" for a, b in pairs]
        print(f"| {w} jobs/s | " + " | ".join(cells + ratios) + " |")
    for w, tot in res.items():
        cells = [f"{tot[n].cpu_per_1000:.3f}" for n in names]
        print(f"| {w} server CPU s/1000 jobs | " + " | ".join(cells) + blank)
    for w, tot in res.items():
        # respqueue's writer process (Redis has no child process while it serves)
        cells = [f"{tot[n].child_cpu_per_1000:.3f}" if n.startswith("respqueue") else "" for n in names]
        print(f"| {w} of it, writer process | " + " | ".join(cells) + blank)


# ---- 2 + 3. restart with N jobs, bytes per job -------------------------------------------------
def fill_jobs(srv: Proc, n: int) -> tuple[int, float]:
    """Queue.addBulk n jobs (batches of 1,000) through the Node driver; (LLEN of wait, seconds)."""
    t0 = time.perf_counter()
    out = subprocess.run(["node", DRIVER, str(srv.port), "addbulk", "--jobs", str(n), "--batch", "1000"],
                         capture_output=True, text=True, timeout=3600)
    dt = time.perf_counter() - t0
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    res = json.loads(lines[-1][7:]) if lines else {"error": out.stderr[-500:]}
    if not res.get("ok"):
        raise RuntimeError(f"filling {srv.name} failed: {res}")
    r = redis.Redis(port=srv.port)
    llen = int(r.llen(WAIT_KEY))
    r.close()
    return llen, dt


def stop(srv: Proc) -> None:
    srv.proc.terminate()
    srv.proc.wait(300)


def restart(srv: Proc, expect: int) -> tuple[float, float]:
    """Start the stopped ``srv`` again with the same argv and directory; seconds from process start
    to the first PONG and to the first LLEN of the wait list equal to ``expect``."""
    env = dict(os.environ, PYTHONPATH=ROOT) if srv.name == "respqueue" else None
    t0 = time.perf_counter()
    srv.proc = subprocess.Popen(srv.proc.args, cwd=srv.workdir, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = redis.Redis(port=srv.port, socket_timeout=600)
    t_ping = 0.0
    while True:
        if srv.proc.poll() is not None:
            raise RuntimeError(f"{srv.name} exited with {srv.proc.returncode} on restart")
        try:
            if not t_ping:
                r.ping()
                t_ping = time.perf_counter() - t0
            if r.llen(WAIT_KEY) == expect:
                break
        except redis.BusyLoadingError:
            pass
        except redis.ConnectionError:
            r.connection_pool.disconnect()
        time.sleep(0.002)
    t_serve = time.perf_counter() - t0
    r.close()
    return t_ping, t_serve


def disk_usage(srv: Proc) -> tuple[int, str]:
    """(bytes, detail) of the server's persistent files; the server must be stopped."""
    if srv.name == "respqueue":
        base = os.path.join(srv.workdir, "data", "respqueue.db")
        size = sum(os.path.getsize(base + s) for s in ("", "-wal") if os.path.exists(base + s))
        try:
            conn = sqlite3.connect(f"file:{base}?mode=ro", uri=True)
            rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
            conn.close()
            hist = sum(b for n, b in rows if n.startswith(("job_", "history_")) or "job_" in n)
            top = ", ".join(f"{n} {b / 2**20:.0f} MiB" for n, b in rows[:5])
            return size, f"history tables {hist / 2**20:.0f} MiB; largest: {top}"
        except sqlite3.Error as e:
            return size, f"(dbstat: {e})"
    d = os.path.join(srv.workdir, "appendonlydir")
    files = sorted(os.listdir(d)) if os.path.isdir(d) else []
    sizes = {f: os.path.getsize(os.path.join(d, f)) for f in files}
    return sum(sizes.values()), ", ".join(f"{f} {b / 2**20:.1f} MiB" for f, b in sizes.items())


def restart_part(n: int, rounds: int, raw: list[dict], bytecode: bool = True,
                 ) -> list[tuple[str, int, float, float, float, int, str]]:
    specs: list[tuple[str, Callable[[], Proc]]] = [
        ("redis appendonly yes", lambda: start_redis("--appendonly", "yes", "--appendfsync", "everysec")),
        ("respqueue durable", lambda: start_respqueue("--durability", "durable")),
        ("redis aof-use-rdb-preamble no",
         lambda: start_redis("--appendonly", "yes", "--appendfsync", "everysec", "--aof-use-rdb-preamble", "no")),
    ]
    procs: list[tuple[str, Proc, int]] = []
    out: dict[str, list[tuple[float, float]]] = {}
    fills: dict[str, float] = {}
    sizes: dict[str, tuple[int, str]] = {}
    try:
        for name, start in specs:
            p = start()
            llen, dt = fill_jobs(p, n)
            print(f"filled {name}: {llen:,} jobs waiting in {dt:.1f} s ({n / dt:,.0f} jobs/s)", flush=True)
            fills[name] = dt
            stop(p)
            sizes[name] = disk_usage(p)
            procs.append((name, p, llen))
            out[name] = []
        if bytecode:
            compile_sources()  # (a restart reads bytecode, as after pip install)
            print("respqueue's bytecode compiled (as installed); --restart-source-only: compiled at each start",
                  flush=True)
        for r in range(rounds):
            for name, p, llen in procs:
                t_ping, t_serve = restart(p, llen)
                stop(p)
                out[name].append((t_ping, t_serve))
                raw.append({"part": "restart", "server": name, "round": r + 1, "jobs": llen,
                            "first_pong_s": t_ping, "serving_s": t_serve})
                print(f"restart {name:30} round {r + 1}: first PONG {t_ping:6.2f} s, "
                      f"LLEN = {llen:,} after {t_serve:6.2f} s", flush=True)
    finally:
        for _, p, _ in procs:
            p.stop()
    rows = []
    for name, _p, llen in procs:
        ts = out[name]
        best_ping = min(t[0] for t in ts) if ts else float("nan")
        best = min(t[1] for t in ts) if ts else float("nan")
        rows.append((name, llen, fills[name], best_ping, best, sizes[name][0], sizes[name][1]))
    return rows


def print_restart(rows: list[tuple[str, int, float, float, float, int, str]], n: int, rounds: int) -> None:
    print(f"\nRestart with {n:,} BullMQ jobs (addBulk, batches of 1,000); best of {rounds} restart(s):")
    print("| server | fill s | first PONG s | serving again s | on disk MiB | bytes/job |")
    print("|---|---|---|---|---|---|")
    for name, llen, fill, ping, serve, size, _ in rows:
        print(f"| {name} | {fill:.1f} | {ping:.2f} | {serve:.2f} | {size / 2**20:.0f} | {size / max(1, llen):.0f} |")
    ours = next((r for r in rows if r[0].startswith("respqueue")), None)
    for r in rows:
        if ours is not None and r is not ours and r[4]:
            print(f"respqueue / {r[0]}: restart {ours[4] / r[4]:.2f}x, bytes/job {ours[5] / max(1, r[5]):.2f}x")
    for name, *_, detail in rows:
        print(f"  {name}: {detail}")


# ---- the older redis-benchmark comparison -----------------------------------------------------
def micro(requests: int) -> None:
    rows: dict[str, dict[str, float]] = {}
    for name, start in SERVERS:
        p = start()
        try:
            out = subprocess.run(["redis-benchmark", "-p", str(p.port), "-c", "50", "-P", "1", "-n", str(requests),
                                  "-t", "set,incr,lpush", "-q", "--csv"], capture_output=True, text=True,
                                 timeout=600).stdout
            res: dict[str, float] = {}
            for line in out.splitlines():
                parts = [x.strip('"') for x in line.split(",")]
                if len(parts) >= 2 and parts[0] != "test":
                    res[parts[0].split()[0]] = float(parts[1])
            rows[name] = res
        finally:
            p.stop()
    print("\n| server | SET ops/s | INCR ops/s | LPUSH ops/s |")
    print("|---|---|---|---|")
    for name, res in rows.items():
        print(f"| {name} | " + " | ".join(f"{res.get(t, 0):,.0f}" for t in ("SET", "INCR", "LPUSH")) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=10_000, help="jobs per BullMQ add/process run")
    ap.add_argument("--rounds", type=int, default=2, help="BullMQ rounds (each runs all four servers)")
    ap.add_argument("--restart-jobs", type=int, default=1_000_000, help="jobs stored for the restart")
    ap.add_argument("--restart-rounds", type=int, default=2, help="restarts per server (alternating)")
    ap.add_argument("--restart-source-only", action="store_true",
                    help="restart respqueue without compiling its bytecode first (every start compiles the sources"
                    " when PYTHONDONTWRITEBYTECODE is set and nothing is compiled)")
    ap.add_argument("--skip-bullmq", action="store_true", help="only the restart and bytes/job part")
    ap.add_argument("--skip-restart", action="store_true", help="only the BullMQ add/process part")
    ap.add_argument("--micro", action="store_true", help="also redis-benchmark SET/INCR/LPUSH")
    ap.add_argument("--requests", type=int, default=20_000, help="requests per redis-benchmark test (--micro)")
    ap.add_argument("--memory", action="store_true",
                    help="also run respqueue --durability memory (what persistence costs) in the BullMQ part")
    ap.add_argument("--no-history", action="store_true",
                    help="also run respqueue buffered with --history off (what job history costs) in the BullMQ part")
    ap.add_argument("--json", default="", help="also write the raw results to this file")
    a = ap.parse_args(argv)
    raw: list[dict] = []
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: {machine()}; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    failed = False
    if not a.skip_bullmq:
        res = bullmq_part(a.jobs, a.rounds, raw, SERVERS + ([MEMORY] if a.memory else []) + ([NOHIST] if a.no_history else []))
        print_bullmq(res, a.jobs, a.rounds)
        failed |= any(t.errors for tot in res.values() for t in tot.values())
    if not a.skip_restart:
        rows = restart_part(a.restart_jobs, a.restart_rounds, raw, bytecode=not a.restart_source_only)
        print_restart(rows, a.restart_jobs, a.restart_rounds)
    if a.micro:
        micro(a.requests)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(raw, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Replication benchmark (not a test): what replicas cost BullMQ, respqueue vs Redis, in one run.

    python -m interop.bench.replication [--jobs N] [--rounds R] [--json FILE] [--job-rows both] [--only TEXT]

BullMQ `add` (Queue.add, 50 in flight) and `process` (a Worker at concurrency 50 on a pre-filled
queue), driven by interop/bench/bullmq_bench.js, against each of these set-ups in turn (one set-up
running at a time; all servers on this machine, over loopback):

    respqueue durable master with 0, 1 and 2 replicas (`--replicaof "127.0.0.1 PORT"`),
        each without and (with >= 1 replica) with `--replica-ack 1` on the master
    Redis `--appendonly yes --appendfsync always` with 0 and 1 replica (`--replicaof`, same AOF flags)

Redis has no per-write acknowledgement from replicas except WAIT, and BullMQ cannot call WAIT after
each job, so there is no true "Redis + WAIT" row: respqueue's `--replica-ack 1` rows are compared
with Redis with one replica as is (asynchronous replication); Redis + WAIT (not
measured) would add a replica round trip per job. Rows with 0 replicas are compared with Redis with 0 replicas, all others with Redis with
1 replica.

Server CPU is user+system seconds from /proc for the master and every replica, each with its whole
process tree (respqueue's writer process included), read at the start and end of the timed part.

Failover times (kill -9 the master under real Sentinel) come from `python -m interop.bench.failover`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable

from .bullmq import CLIENT_DIR, Totals, client_version, redis_aof_flags, run_driver
from .common import Proc, machine, start_redis, start_respqueue

WORKLOADS = ("add", "process")


def tree_cpu(pid: int) -> float:
    """User+system CPU seconds of ``pid`` and all its descendants (live ones)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            total += int(parts[11]) + int(parts[12])
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(x) for x in f.read().split())
        except OSError:
            continue
    return total / ticks


class Group:
    """A master and its replicas, looking like one Proc to run_driver: port is the master's,
    cpu_split() sums the whole process trees of all of them."""

    def __init__(self, name: str, master: Proc, replicas: list[Proc]) -> None:
        self.name = name
        self.master = master
        self.replicas = replicas
        self.port = master.port

    def cpu_split(self) -> tuple[float, float]:
        return sum(tree_cpu(p.pid) for p in (self.master, *self.replicas)), 0.0

    def stop(self) -> None:
        for p in (*self.replicas, self.master):
            p.stop()


def info_field(port: int, field: str) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n")
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            if buf.startswith(b"$"):
                head, _, rest = buf.partition(b"\r\n")
                if len(rest) >= int(head[1:]) + 2:
                    break
    for line in buf.decode(errors="replace").splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return ""


def start_group(name: str, kind: str, replicas: int, ack: int) -> Group:
    if kind == "redis":
        master = start_redis(*redis_aof_flags("always"))
        reps = [
            start_redis(*redis_aof_flags("always"), "--replicaof", "127.0.0.1", str(master.port))
            for _ in range(replicas)
        ]
    else:
        extra = ["--replica-ack", str(ack)] if ack else []
        master = start_respqueue("--durability", "durable", *extra)
        reps = [
            start_respqueue("--durability", "durable", "--replicaof", f"127.0.0.1 {master.port}")
            for _ in range(replicas)
        ]
    g = Group(name, master, reps)
    deadline = time.time() + 60
    while replicas and info_field(master.port, "connected_slaves") != str(replicas):
        if time.time() > deadline:
            g.stop()
            raise RuntimeError(f"{name}: {replicas} replica(s) did not connect within 60 s")
        time.sleep(0.1)
    return g


# (row name, server kind, replicas, replica-ack, the Redis row it is compared with)
SETUPS: list[tuple[str, str, int, int, str]] = [
    ("redis always, 0 replicas", "redis", 0, 0, ""),
    ("redis always, 1 replica", "redis", 1, 0, ""),
    ("respqueue durable, 0 replicas", "respqueue", 0, 0, "redis always, 0 replicas"),
    ("respqueue durable, 1 replica", "respqueue", 1, 0, "redis always, 1 replica"),
    ("respqueue durable, 1 replica, ack 1", "respqueue", 1, 1, "redis always, 1 replica"),
    ("respqueue durable, 2 replicas", "respqueue", 2, 0, "redis always, 1 replica"),
    ("respqueue durable, 2 replicas, ack 1", "respqueue", 2, 1, "redis always, 1 replica"),
]


def layouts(job_rows: str, only: list[str]) -> list[tuple[str, str, int, int, str]]:
    """SETUPS, filtered by ``only`` (substrings of the row names; none: all), with ``job_rows`` "both" each
    respqueue row twice: ``..., generic rows`` (RESPQUEUE_JOB_ROWS=off) and ``..., job rows`` (on)."""
    out = []
    for s in SETUPS:
        if only and not any(x in s[0] for x in only):
            continue
        if s[1] == "respqueue" and job_rows == "both":
            out.append((s[0] + ", generic rows", *s[1:]))
            out.append((s[0] + ", job rows", *s[1:]))
        else:
            out.append(s)
    return out


def _job_rows_env(name: str) -> str | None:
    """RESPQUEUE_JOB_ROWS for a set-up named by ``layouts`` (None: the environment's)."""
    return "off" if name.endswith(", generic rows") else "on" if name.endswith(", job rows") else None


def run_all(
    jobs: int,
    rounds: int,
    raw: list[dict],
    log: Callable[[str], None] = print,
    setups: list[tuple[str, str, int, int, str]] | None = None,
) -> dict[str, dict[str, Totals]]:
    setups = SETUPS if setups is None else setups
    res: dict[str, dict[str, Totals]] = {s[0]: {w: Totals() for w in WORKLOADS} for s in setups}
    for r in range(rounds):
        for name, kind, n, ack, _ in setups:
            env = _job_rows_env(name)
            old = os.environ.get("RESPQUEUE_JOB_ROWS")
            if env is not None:
                os.environ["RESPQUEUE_JOB_ROWS"] = env
            try:
                g = start_group(name, kind, n, ack)
            finally:
                if old is None:
                    os.environ.pop("RESPQUEUE_JOB_ROWS", None)
                else:
                    os.environ["RESPQUEUE_JOB_ROWS"] = old
            try:
                for w in WORKLOADS:
                    params = ["--jobs", str(jobs), "--inflight" if w == "add" else "--concurrency", "50"]
                    out, cpu, _ = run_driver(g, w, params)  # type: ignore[arg-type]
                    t = res[name][w]
                    if "error" in out or not out.get("ok", False):
                        t.errors.append(str(out.get("error") or out)[:300])
                        log(f"{w:8} {name:37} round {r + 1}: FAILED {t.errors[-1]}")
                        continue
                    t.jobs += out["jobs"]
                    t.seconds += out["ms"] / 1000
                    t.cpu += cpu
                    raw.append(
                        {"setup": name, "workload": w, "round": r + 1, "cpu": cpu, "jobs_per_s": out["jobs_per_s"]}
                    )
                    log(f"{w:8} {name:37} round {r + 1}: {out['jobs_per_s']:>8,.0f} jobs/s  cpu {cpu:6.2f} s")
            finally:
                g.stop()
    return res


def print_table(
    res: dict[str, dict[str, Totals]],
    jobs: int,
    rounds: int,
    setups: list[tuple[str, str, int, int, str]] | None = None,
) -> None:
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    print(
        f"\nmachine: {machine()}; Node {node}, bullmq {client_version(CLIENT_DIR[0])} + ioredis; "
        f"{jobs:,} jobs per run, {rounds} round(s); one set-up running at a time, all on this machine"
    )
    print(
        "| set-up | add jobs/s | process jobs/s | add CPU s/1k jobs | process CPU s/1k jobs "
        "| vs Redis row | add ratio | process ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, _kind, _n, _ack, ref in SETUPS if setups is None else setups:
        a, p = res[name]["add"], res[name]["process"]
        ra = rp = "" if not ref else "n/a"
        if ref and ref in res:
            x, y = res[ref]["add"], res[ref]["process"]
            ra = f"{a.rate / x.rate:.2f}" if a.rate and x.rate else "n/a"
            rp = f"{p.rate / y.rate:.2f}" if p.rate and y.rate else "n/a"
        print(
            f"| {name} | {a.rate:,.0f} | {p.rate:,.0f} | {a.cpu_per_1000:.3f} | {p.cpu_per_1000:.3f} "
            f"| {ref or '-'} | {ra} | {rp} |"
        )
    print("CPU: master + replicas, whole process trees (respqueue's writer processes included).")
    print(
        "Redis has no per-job replica acknowledgement for BullMQ (it would need WAIT after every job, which "
        "BullMQ cannot send), so the 'ack 1' rows are compared with Redis + 1 asynchronous replica, as is; "
        "Redis + WAIT (not measured) would add a replica round trip per job."
    )
    print(
        "Failover times (kill -9 the master under real Sentinel): python -m interop.bench.failover "
        "[--replicas 2 --replica-ack 1 --bullmq]; figures in docs/REPLICATION.md."
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=20_000, help="jobs per run for add and process")
    ap.add_argument("--rounds", type=int, default=1, help="runs per set-up (set-ups in turn each round)")
    ap.add_argument("--json", default="", help="also write the raw results to this file")
    ap.add_argument(
        "--job-rows",
        choices=("default", "both"),
        default="default",
        help="both: every respqueue set-up twice, with RESPQUEUE_JOB_ROWS=off (generic rows) and on (job rows)",
    )
    ap.add_argument(
        "--only", action="append", default=[], help="only the set-ups whose name contains this (repeatable)"
    )
    a = ap.parse_args(argv)
    setups = layouts(a.job_rows, a.only)
    if shutil.which("node") is None or not os.path.isdir(os.path.join(CLIENT_DIR[0], "node_modules", "bullmq")):
        print(f"needs node and `npm ci` in {CLIENT_DIR[0]}", file=sys.stderr)
        return 2
    raw: list[dict] = []
    res = run_all(a.jobs, a.rounds, raw, lambda s: print(s, flush=True), setups)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(raw, f, indent=1)
    print_table(res, a.jobs, a.rounds, setups)
    failed = [(n, w, e) for n, ws in res.items() for w, t in ws.items() for e in t.errors]
    for n, w, e in failed:
        print(f"FAILED {w} on {n}: {e[:500]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

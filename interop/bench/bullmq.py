"""BullMQ benchmark: respqueue vs redis-server in the same run, driven by the same Node client.

    python -m interop.bench.bullmq [--quick] [--jobs N] [--rounds R] [--only add,process]
                                   [--durability durable|buffered|memory] [--redis-aof always|everysec|no]
                                   [--client-dir interop/bullmq5] [--respqueue-args '--native-scripts off']
                                   [--postgres] [--client node|python]

Workloads (interop/bench/bullmq_bench.js):
    add       Queue.add with 50 calls in flight
    addbulk   Queue.addBulk in batches of 1,000
    process   a Worker at concurrency 50 working through a pre-filled queue
    latency   pickup latency (add() called -> processor starts), p50/p99, under a steady stream

Each workload runs against Redis and respqueue alternately (redis, respqueue, redis, ...) so
machine noise hits both. The server's CPU seconds (user+system, from /proc) are read at the
start and the end of the timed part only. Both servers are flushed before every run.
--durability picks respqueue's mode (default: its default, durable); --redis-aof runs Redis with
appendonly yes and that appendfsync policy (default: no, Redis without persistence).
interop/bench/durability.py runs the four durable/buffered x always/everysec pairings in one run.
--postgres adds a third server to the same rounds (redis, respqueue, postgres, redis, ...): a
throwaway PostgreSQL (initdb in a temp folder, default durability: fsync, synchronous_commit and
full_page_writes on) driven through BullMQ 6's own PostgreSQL backend (createPostgresBackend, the
`pg` package); its CPU is the whole postmaster tree (backends, WAL writer, checkpointer, ...).
Without PostgreSQL's binaries or the `pg` package the target is skipped with a message.
--client python drives the same workloads (not latency) through BullMQ's Python client instead
(interop/bench/bullmq_bench_py.py): the installed PyPI release (3.x), or with
--client-dir interop/bullmq5/python the 2.x release installed there.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from .common import PgProc, Proc, machine, start_postgres, start_redis, start_respqueue

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "bullmq_bench.js")
PY_DRIVER = os.path.join(HERE, "bullmq_bench_py.py")
WORKLOADS = ["add", "addbulk", "process", "latency"]
#: the folder whose node_modules holds the bullmq release the driver uses (--client-dir)
CLIENT_DIR = [os.path.dirname(HERE)]
#: which client drives the workloads: "node" (bullmq_bench.js) or "python" (bullmq_bench_py.py)
CLIENT = ["node"]
SETTLE = [0.0]  # --settle: seconds after a timed part whose server CPU is reported too


def python_client_version(client_dir: str) -> str:
    """The Python bullmq release the Python driver imports (``client_dir``: prepended to PYTHONPATH, or "")."""
    env = {**os.environ, "PYTHONPATH": client_dir} if client_dir else dict(os.environ)
    r = subprocess.run([sys.executable, "-c", "import bullmq; print(getattr(bullmq, '__version__', '?'))"],
                       capture_output=True, text=True, env=env, cwd="/")
    return r.stdout.strip() or "?"


def add_client_args(ap: argparse.ArgumentParser) -> None:
    """``--client-dir`` and ``--client`` (the runners that drive bullmq_bench.js or bullmq_bench_py.py)."""
    ap.add_argument("--client-dir", default=None,
                    help="folder whose node_modules holds the bullmq to drive (default interop/; "
                         "interop/bullmq5 for BullMQ 5.x); with --client python: a folder put on PYTHONPATH "
                         "(interop/bullmq5/python for PyPI bullmq 2.x; default: the installed release)")
    ap.add_argument("--client", default="node", choices=("node", "python"),
                    help="drive the workloads with BullMQ's Node client (default) or its Python client")


def add_settle_arg(ap: argparse.ArgumentParser) -> None:
    """``--settle S``: also count each server's CPU over the S seconds after the timed part (see run_driver)."""
    ap.add_argument("--settle", type=float, default=0.0, metavar="S",
                    help="also report each run's server CPU with the S seconds after its timed part: work the "
                         "server deferred past it (respqueue packs a hash left alone for --hash-compact-delay, "
                         "1 s) or that the next run would otherwise pay; both servers' idle cost is in it too "
                         "(~0.3 ms a second each here). 0 (default): the timed part only")


def use_settle(seconds: float) -> None:
    SETTLE[0] = seconds


def use_client(client: str, client_dir: str | None) -> None:
    """Drive the workloads with ``client`` ("node" or "python") from ``client_dir`` (None: the default)."""
    CLIENT[0] = client
    if client == "python":
        CLIENT_DIR[0] = os.path.abspath(client_dir) if client_dir else ""
    else:
        CLIENT_DIR[0] = os.path.abspath(client_dir or CLIENT_DIR[0])


def driver_command() -> tuple[list[str], dict[str, str]]:
    """The chosen driver's command (before its PORT WORKLOAD arguments) and environment."""
    env = dict(os.environ)
    if CLIENT[0] == "python":
        if CLIENT_DIR[0]:
            env["PYTHONPATH"] = CLIENT_DIR[0]
        return [sys.executable, PY_DRIVER], env
    env["BULLMQ_CLIENT_DIR"] = CLIENT_DIR[0]
    return ["node", DRIVER], env


def python_client_version_of(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def client_version(client_dir: str, package: str = "bullmq") -> str:
    try:
        with open(os.path.join(client_dir, "node_modules", package, "package.json")) as f:
            return str(json.load(f)["version"])
    except (OSError, ValueError, KeyError):
        return "?"


@dataclass
class Totals:
    jobs: int = 0
    seconds: float = 0.0
    cpu: float = 0.0
    child_cpu: float = 0.0  # of ``cpu``: the server's child processes (respqueue's writer)
    cpu_settled: float = 0.0  # with --settle: the CPU with the seconds after each timed part
    samples: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0

    @property
    def cpu_per_1000(self) -> float:
        return self.cpu / self.jobs * 1000 if self.jobs else 0.0

    @property
    def child_cpu_per_1000(self) -> float:
        return self.child_cpu / self.jobs * 1000 if self.jobs else 0.0


def flushall(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"*1\r\n$8\r\nFLUSHALL\r\n")
        buf = b""
        while not buf.endswith(b"\r\n"):
            chunk = s.recv(64)
            if not chunk:
                break
            buf += chunk


def run_driver(srv: Proc | PgProc, workload: str, params: list[str], timeout: float = 1800) -> tuple[dict, float, float]:
    """Run the driver (Node's, or Python's with ``--client python``) once against ``srv``; return its result,
    the server CPU seconds spent between its MARK start and MARK end, and how many of them its child
    processes spent. With ``--settle S`` (use_settle) the result's ``cpu_settled`` is the server's CPU from
    MARK start to S seconds after MARK end (the driver's teardown, a few commands, included)."""
    argv, env = driver_command()
    if isinstance(srv, PgProc):
        env["BULLMQ_PG"] = srv.url  # the driver drops the schema (the flush) and migrates afresh
    else:
        env.pop("BULLMQ_PG", None)
        flushall(srv.port)
    p = subprocess.Popen([*argv, str(srv.port), workload, *params, "--sync"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1, env=env)
    killer = threading.Timer(timeout, p.kill)
    killer.start()
    cpu0 = cpu1 = (0.0, 0.0)
    settled: float | None = None
    t_end = 0.0
    result: dict = {"error": "driver printed no RESULT"}
    try:
        assert p.stdout is not None and p.stdin is not None
        for line in p.stdout:
            if line.startswith("MARK start"):
                cpu0 = srv.cpu_split()
                p.stdin.write("go\n")
                p.stdin.flush()
            elif line.startswith("MARK end"):
                cpu1 = srv.cpu_split()
                t_end = time.monotonic()
                p.stdin.write("go\n")
                p.stdin.flush()
            elif line.startswith("RESULT "):
                result = json.loads(line[7:])
        p.wait()
        if SETTLE[0] > 0 and t_end:
            # (after the driver's exit, not while it waits for "go": PyPI bullmq 2.x's Worker.close hangs after
            # two idle seconds, on Redis and respqueue alike; its teardown's few commands are in the figure)
            time.sleep(max(0.0, t_end + SETTLE[0] - time.monotonic()))
            cpu2 = srv.cpu_split()
            settled = cpu2[0] + cpu2[1] - cpu0[0] - cpu0[1]
    finally:
        killer.cancel()
    if p.returncode and "error" not in result:
        result["error"] = f"driver exited with {p.returncode}"
    if settled is not None:
        result["cpu_settled"] = settled
    child = cpu1[1] - cpu0[1]
    return result, cpu1[0] - cpu0[0] + child, child


def percentile(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = min(len(s) - 1, max(0, -(-len(s) * p // 100) - 1))
    return s[int(k)]


def params_for(workload: str, jobs: int, quick: bool, rate: int) -> list[str]:
    if workload == "latency":
        return ["--jobs", str(300 if quick else 2000), "--rate", str(rate), "--concurrency", "50"]
    if workload == "add":
        return ["--jobs", str(jobs), "--inflight", "50"]
    if workload == "addbulk":
        return ["--jobs", str(jobs * 2), "--batch", "1000"]
    return ["--jobs", str(jobs), "--concurrency", "50"]


def spread(xs: list[float], fmt: str = ",.0f") -> str:
    """median [min-max] of per-round figures (NaN: not reported, left out)"""
    xs = [x for x in xs if x == x]
    if not xs:
        return "n/a"
    s = sorted(xs)
    n = len(s)
    med = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    return f"{med:{fmt}} [{s[0]:{fmt}}-{s[-1]:{fmt}}]" if n > 1 else f"{med:{fmt}}"


def redis_aof_flags(policy: str) -> list[str]:
    """redis-server flags for ``--redis-aof``: always/everysec turn the AOF on, no leaves it off."""
    if policy == "no":
        return []
    return ["--appendonly", "yes", "--appendfsync", policy]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=20_000, help="jobs per run for add/process (addbulk: 2x)")
    ap.add_argument("--quick", action="store_true", help="short run (2,000 jobs, 1 round)")
    ap.add_argument("--rounds", type=int, default=2, help="runs per server per workload (alternating)")
    ap.add_argument("--rate", type=int, default=200, help="jobs/s of the steady stream for the latency workload")
    ap.add_argument("--only", default="", help="comma-separated workloads: " + ",".join(WORKLOADS))
    ap.add_argument("--json", default="", help="also write the raw results to this file")
    ap.add_argument("--durability", default="", choices=("", "durable", "buffered", "memory"),
                    help="respqueue --durability (default: the server's default, durable)")
    ap.add_argument("--redis-aof", default="no", choices=("always", "everysec", "no"),
                    help="Redis appendonly yes with this appendfsync (default: no persistence)")
    add_client_args(ap)
    add_settle_arg(ap)
    ap.add_argument("--respqueue-args", default="", help="extra respqueue flags, e.g. '--native-scripts off'")
    ap.add_argument("--postgres", action="store_true",
                    help="add BullMQ's own PostgreSQL backend on a throwaway PostgreSQL as a third server")
    a = ap.parse_args(argv)
    use_client(a.client, a.client_dir)
    use_settle(a.settle)
    if a.client == "python":
        if python_client_version(CLIENT_DIR[0]) == "?":
            print("needs BullMQ's Python client: pip install bullmq (or --client-dir with a release in it)",
                  file=sys.stderr)
            return 2
        if a.postgres:
            print("--postgres needs the Node client (BullMQ 6's PostgreSQL backend)", file=sys.stderr)
            return 2
    else:
        if shutil.which("node") is None or not os.path.isdir(os.path.join(CLIENT_DIR[0], "node_modules", "bullmq")):
            print(f"needs node and `npm ci` in {CLIENT_DIR[0]}", file=sys.stderr)
            return 2
    jobs = 2_000 if a.quick and a.jobs == 20_000 else a.jobs
    rounds = 1 if a.quick else a.rounds
    workloads = [w for w in a.only.split(",") if w] or WORKLOADS
    if a.client == "python":
        if "latency" in workloads and a.only:
            print("the latency workload needs the Node client", file=sys.stderr)
            return 2
        workloads = [w for w in workloads if w != "latency"]
    load0 = os.getloadavg()
    pg_missing = ""
    if a.postgres and not os.path.isdir(os.path.join(os.path.dirname(HERE), "node_modules", "pg")):
        pg_missing = "the pg package is not installed: cd interop && npm ci"
        print(f"postgres: {pg_missing}; skipping the PostgreSQL target", file=sys.stderr)
    pg: PgProc | None = start_postgres() if a.postgres and not pg_missing else None
    try:
        rd: Proc = start_redis(*redis_aof_flags(a.redis_aof))
        rq: Proc = start_respqueue(*(["--durability", a.durability] if a.durability else []), *shlex.split(a.respqueue_args))
    except BaseException:
        if pg:
            pg.stop()
        raise
    servers: list[Proc | PgProc] = [rd, rq, *([pg] if pg else [])]
    pg_settings = pg.settings() if pg else {}
    results: dict[str, dict[str, Totals]] = {}
    per_round: dict[str, dict[str, list[tuple[float, float, float]]]] = {}
    raw: list[dict] = []
    try:
        for w in workloads:
            tot = results[w] = {srv.name: Totals() for srv in servers}
            rounds_of = per_round[w] = {srv.name: [] for srv in servers}
            params = params_for(w, jobs, a.quick, a.rate)
            for r in range(rounds):
                for srv in servers:
                    res, cpu, _ = run_driver(srv, w, params)
                    t = tot[srv.name]
                    if "error" in res or not res.get("ok", False):
                        t.errors.append(str(res.get("error") or {k: v for k, v in res.items() if k != "samples"}))
                        print(f"{w:8} {srv.name:9} round {r + 1}: FAILED {t.errors[-1][:300]}", flush=True)
                        continue
                    t.jobs += res["jobs"]
                    t.seconds += res["ms"] / 1000
                    t.cpu += cpu
                    t.cpu_settled += res.get("cpu_settled", 0.0)
                    t.samples += res.get("samples", [])
                    rounds_of[srv.name].append((res["jobs_per_s"], cpu / res["jobs"] * 1000,
                                                res.get("client_cpu_ms", float("nan")) / res["jobs"]))
                    res.pop("samples", None)
                    raw.append({"server": srv.name, "round": r + 1, "cpu": cpu, **res})
                    extra = f"  p50 {res['p50']:.2f} ms  p99 {res['p99']:.2f} ms" if w == "latency" else ""
                    print(f"{w:8} {srv.name:9} round {r + 1}: {res['jobs_per_s']:>9,.0f} jobs/s  "
                          f"cpu {cpu:6.2f} s{extra}", flush=True)
    finally:
        if pg:
            pg.stop()
        rq.stop()
        rd.stop()
    load1 = os.getloadavg()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(raw, f, indent=1)
    print()
    if a.client == "python":
        client = (f"Python {sys.version.split()[0]} driver, PyPI bullmq {python_client_version(CLIENT_DIR[0])} + redis-py "
                  f"{python_client_version_of('redis')}")
    else:
        client = (f"Node {subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip()}, "
                  f"bullmq {client_version(CLIENT_DIR[0])} + ioredis")
    print(f"machine: {machine()}; {client}; {rounds} round(s) per server, alternating; "
          f"respqueue flags: {a.respqueue_args or 'none'}; "
          f"respqueue durability: {a.durability or 'default (durable)'}; redis: "
          f"{'no persistence' if a.redis_aof == 'no' else 'appendonly yes, appendfsync ' + a.redis_aof}")
    if pg:
        print("postgres: BullMQ's own PostgreSQL backend (createPostgresBackend, pg "
              f"{client_version(os.path.dirname(HERE), 'pg')}, default pool) on PostgreSQL "
              f"{pg_settings.get('server_version', '?')}, settings: "
              + ", ".join(f"{k}={v}" for k, v in pg_settings.items() if k != "server_version"))
    elif a.postgres:
        print(f"postgres: SKIPPED ({pg_missing or 'PostgreSQL binaries not found'})")
    print(f"load average (1/5/15 min) at start {load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f}, "
          f"at end {load1[0]:.2f}/{load1[1]:.2f}/{load1[2]:.2f}")
    print("| workload | jobs/run | respqueue jobs/s | redis jobs/s | respqueue/redis | respqueue CPU s/1000 jobs | redis CPU s/1000 jobs |")
    print("|---|---|---|---|---|---|---|")
    for w, tot in results.items():
        x, y = tot["respqueue"], tot["redis"]
        n = params_for(w, jobs, a.quick, a.rate)[1]
        ratio = f"{x.rate / y.rate:.2f}" if x.rate and y.rate else "n/a"
        print(f"| {w} | {int(n):,} | {x.rate:,.0f} | {y.rate:,.0f} | {ratio} | {x.cpu_per_1000:.3f} | {y.cpu_per_1000:.3f} |")
    if SETTLE[0] > 0:
        print()
        print(f"server CPU s/1000 jobs with the {SETTLE[0]:g} s after each timed part (work deferred past it):")
        print("| workload | respqueue | redis | respqueue/redis |")
        print("|---|---|---|---|")
        for w, tot in results.items():
            x, y = tot["respqueue"], tot["redis"]
            if x.jobs and y.jobs:
                xs, ys = x.cpu_settled / x.jobs * 1000, y.cpu_settled / y.jobs * 1000
                print(f"| {w} | {xs:.3f} | {ys:.3f} | {xs / ys:.2f} |")
    if pg:
        print()
        print("| workload | postgres jobs/s | respqueue/postgres | postgres CPU s/1000 jobs |")
        print("|---|---|---|---|")
        for w, tot in results.items():
            x, z = tot["respqueue"], tot["postgres"]
            ratio = f"{x.rate / z.rate:.2f}" if x.rate and z.rate else "n/a"
            print(f"| {w} | {z.rate:,.0f} | {ratio} | {z.cpu_per_1000:.3f} |")
    if rounds > 1:
        print()
        print(f"per round, median [min-max] (client: the {a.client.capitalize()} driver's own CPU over the timed part):")
        print("| workload | server | jobs/s | server CPU s/1000 jobs | client CPU s/1000 jobs |")
        print("|---|---|---|---|---|")
        for w, by in per_round.items():
            for name, xs in by.items():
                print(f"| {w} | {name} | {spread([r for r, _, _ in xs])} | {spread([c for _, c, _ in xs], '.3f')} | "
                      f"{spread([k for _, _, k in xs], '.3f')} |")
    if "latency" in results:
        print()
        print(f"pickup latency at {a.rate} jobs/s, Worker concurrency 50 (add() called -> processor starts):")
        print("| server | p50 ms | p90 ms | p99 ms | max ms |")
        print("|---|---|---|---|---|")
        for name, t in results["latency"].items():
            print(f"| {name} | {percentile(t.samples, 50):.2f} | {percentile(t.samples, 90):.2f} | "
                  f"{percentile(t.samples, 99):.2f} | {max(t.samples, default=float('nan')):.2f} |")
    failed = [(w, s, e) for w, tot in results.items() for s, t in tot.items() for e in t.errors]
    for w, s, e in failed:
        print(f"FAILED {w} on {s}: {e[:500]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""A/B of respqueue's durable (or buffered) mode: two checkouts side by side, Redis with an AOF as the yardstick.

    python -m interop.bench.durable_ab --base /path/to/other/checkout [--durability durable|buffered]
        [--workloads add,process,addbulk] [--jobs N] [--bulk-jobs N] [--rounds R] [--redis-aof always]
        [--client-dir interop/bullmq5] [--client node|python] [--base-python /usr/bin/python3 [--base-path DIR]]
        [--settle S]

Every round runs each workload (interop/bench/bullmq_bench.js) on Redis, the base checkout's respqueue
and this checkout's respqueue, in that order, so machine noise hits all three. Reports, per workload and
server, the median (and range) over the rounds of the server's CPU seconds per 1,000 jobs (whole process
tree: the loop and the writer process, user+system from /proc) and of jobs/s. ``addbulk`` is
Queue.addBulk in batches of 1,000 (--bulk-jobs jobs a run), the fill of interop/bench/durability.py.
``--settle S`` adds a column: the CPU with the S seconds after each timed part, which holds the work a
server deferred past it (respqueue's compaction of the hashes a run left alone, a second later).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable

from tests.servers import free_port, respqueue_argv

from . import bullmq
from .bullmq import redis_aof_flags, run_driver
from .common import ROOT, Proc, machine, start_redis


def start_at(root: str, *extra: str, python: str = "", path: str = "") -> Proc:
    """respqueue of the checkout at ``root``, run by ``python`` (default: this interpreter) with ``path``
    (its site-packages, for another interpreter) after the checkout on PYTHONPATH."""
    port = free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + path if path else "")
    argv = respqueue_argv(port, "data", "--log-level", "warning", *extra)
    if python:
        argv[0] = python
    return Proc("respqueue", argv, port, env)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the other checkout (its respqueue is 'base')")
    ap.add_argument("--durability", default="durable")
    ap.add_argument("--base-durability", default="", help="the base server's mode (default: --durability)")
    ap.add_argument("--redis-aof", default="always")
    ap.add_argument("--workloads", default="add,process,addbulk")
    ap.add_argument("--jobs", type=int, default=5000, help="jobs per add/process run")
    ap.add_argument("--bulk-jobs", type=int, default=100_000, help="jobs per addbulk run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base-python", default="",
                    help="the base server's interpreter (e.g. another CPython build; --base may then be this checkout)")
    ap.add_argument("--base-path", default="",
                    help="with --base-python: a folder of its packages (pip install --target), put on PYTHONPATH")
    bullmq.add_client_args(ap)
    bullmq.add_settle_arg(ap)
    a = ap.parse_args(argv)
    bullmq.use_client(a.client, a.client_dir)
    bullmq.use_settle(a.settle)
    servers: list[tuple[str, Callable[[], Proc]]] = [
        (f"redis {a.redis_aof}", lambda: start_redis(*redis_aof_flags(a.redis_aof))),
        ("base", lambda: start_at(os.path.abspath(a.base), "--durability", a.base_durability or a.durability,
                                  python=a.base_python, path=a.base_path)),
        ("new", lambda: start_at(ROOT, "--durability", a.durability)),
    ]
    works = a.workloads.split(",")
    # workload -> server -> [(cpu per 1000, jobs/s, writer cpu per 1000, cpu per 1000 with --settle's seconds)]
    res: dict[str, dict[str, list[tuple[float, float, float, float]]]] = {w: {n: [] for n, _ in servers} for w in works}
    print(f"{machine()}; load average {os.getloadavg()[0]:.1f}; durability {a.durability}; "
          f"client {a.client} {os.path.relpath(bullmq.CLIENT_DIR[0], ROOT) if bullmq.CLIENT_DIR[0] else '(installed)'}",
          flush=True)
    procs: list[tuple[str, Proc]] = []
    try:
        for name, start in servers:
            procs.append((name, start()))
        for r in range(a.rounds):
            for w in works:
                if w == "addbulk":
                    params = ["--jobs", str(a.bulk_jobs), "--batch", "1000"]
                else:
                    params = ["--jobs", str(a.jobs), "--inflight" if w == "add" else "--concurrency", "50"]
                for name, srv in procs:
                    out, cpu, child = run_driver(srv, w, params)
                    if "error" in out or not out.get("ok", False):
                        print(f"{w:8} {name:14} round {r + 1}: FAILED {str(out.get('error') or out)[:300]}", flush=True)
                        continue
                    n = out["jobs"]
                    settled = out.get("cpu_settled", float("nan")) / n * 1000
                    res[w][name].append((cpu / n * 1000, out["jobs_per_s"], child / n * 1000, settled))
                    print(f"{w:8} {name:14} round {r + 1}: {out['jobs_per_s']:>8,.0f} jobs/s  "
                          f"cpu/1k {cpu / n * 1000:.3f} s (writer {child / n * 1000:.3f})"
                          + (f", with the next {a.settle:g} s {settled:.3f}" if a.settle > 0 else ""), flush=True)
    finally:
        for _, p in procs:
            p.stop()
    print(f"\nmedians over {a.rounds} rounds [min-max]:")
    st = f" with the next {a.settle:g} s |" if a.settle > 0 else ""
    print(f"| workload | server | CPU s/1000 jobs | of it writer | jobs/s |{st}")
    print("|---|---|---|---|---|" + ("---|" if st else ""))
    for w in works:
        for name, _ in servers:
            xs = res[w][name]
            if not xs:
                continue
            c = [x[0] for x in xs]
            j = [x[1] for x in xs]
            wr = [x[2] for x in xs]
            sc = [x[3] for x in xs]
            print(f"| {w} | {name} | {statistics.median(c):.3f} [{min(c):.3f}-{max(c):.3f}] | "
                  f"{statistics.median(wr):.3f} | {statistics.median(j):,.0f} [{min(j):,.0f}-{max(j):,.0f}] |"
                  + (f" {statistics.median(sc):.3f} [{min(sc):.3f}-{max(sc):.3f}] |" if st else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Raw-command benchmark: respqueue vs redis-server, same run, redis-benchmark -c 50.

    python -m interop.bench.raw [--quick] [-n N] [--only set,get] [--pipelines 1,32] [--durability memory]

Servers are driven alternately, command by command, so that machine noise
hits both alike. Prints ops/s for each and the ratio respqueue/Redis.
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import subprocess
import sys

from .common import Proc, machine, start_redis, start_respqueue

# name -> redis-benchmark arguments
COMMANDS: dict[str, list[str]] = {
    "PING": ["-t", "ping_mbulk"],
    "SET": ["-t", "set"],
    "GET": ["-t", "get"],
    "INCR": ["-t", "incr"],
    "LPUSH": ["-t", "lpush"],
    "LPOP": ["-t", "lpop"],
    "SADD": ["-t", "sadd"],
    "HSET": ["-t", "hset"],
    "ZADD": ["-t", "zadd"],
    "ZPOPMIN": ["-t", "zpopmin"],
    "XADD": ["XADD", "mystream", "*", "f", "v"],
}


def run_benchmark(port: int, cmd: str, pipeline: int, n: int, clients: int = 50) -> float:
    args = COMMANDS[cmd]
    argv = ["redis-benchmark", "-p", str(port), "-c", str(clients), "-n", str(n), "-P", str(pipeline), "--csv", "-r", "100000"]
    if args[0] == "-t":
        argv += args
    else:
        argv += args
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600).stdout
    rows = list(csv.reader(io.StringIO(out)))
    best = 0.0
    for row in rows[1:]:
        if len(row) >= 2:
            try:
                best = max(best, float(row[1]))
            except ValueError:
                pass
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=200_000, help="requests per command at -P 1 (x4 at higher pipelines)")
    ap.add_argument("--quick", action="store_true", help="short run (n=20000)")
    ap.add_argument("--only", default="", help="comma-separated commands, e.g. set,get")
    ap.add_argument("--pipelines", default="1,32")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument(
        "--durability", default="memory", choices=("memory", "buffered", "durable"),
        help="respqueue's mode (default memory: this runner measures the protocol and keyspace; "
        "interop.bench.durability compares the durable modes with Redis's AOF)",
    )
    a = ap.parse_args(argv)
    if shutil.which("redis-benchmark") is None:
        print("redis-benchmark is not installed (apt-get install redis-tools)", file=sys.stderr)
        return 2
    n = 20_000 if a.quick else a.n
    cmds = [c.upper() for c in a.only.split(",") if c] or list(COMMANDS)
    pipes = [int(p) for p in a.pipelines.split(",")]
    rq: Proc = start_respqueue("--durability", a.durability)
    rd: Proc = start_redis()
    rows = []
    try:
        for p in pipes:
            for cmd in cmds:
                nn = n if p == 1 else n * 4
                ops_rq = run_benchmark(rq.port, cmd, p, nn, a.clients)
                ops_rd = run_benchmark(rd.port, cmd, p, nn, a.clients)
                ratio = ops_rq / ops_rd if ops_rd else 0.0
                rows.append((cmd, p, ops_rq, ops_rd, ratio))
                print(f"{cmd:8} -P {p:<3} respqueue {ops_rq:>12,.0f}/s  redis {ops_rd:>12,.0f}/s  ratio {ratio:.2f}", flush=True)
    finally:
        rq.stop()
        rd.stop()
    print()
    print(f"machine: {machine()}; redis-benchmark -c {a.clients}; respqueue --durability {a.durability}, redis without persistence")
    print("| command | pipeline | respqueue ops/s | redis ops/s | respqueue/redis |")
    print("|---|---|---|---|---|")
    for cmd, p, x, y, r in rows:
        print(f"| {cmd} | {p} | {x:,.0f} | {y:,.0f} | {r:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""RSS per waiting BullMQ job: Redis (``appendonly yes``) against respqueue ``durable`` and ``memory``.

Each server is started empty (its RSS after a PING is the baseline), filled with ``--jobs`` jobs by
Queue.addBulk (batches of 1,000, the Node driver of interop/bench/bullmq_bench.js), left alone until its
RSS has settled (respqueue packs the job hashes nobody touched for ``hash-compact-delay`` ms in the
background: see docs/ARCHITECTURE.md, "Cold hashes"), and measured again; ``durable`` respqueue and Redis
are then restarted and measured once the wait list is back. Prints bytes per job: (RSS - empty RSS) / jobs,
the server's main process only (respqueue's writer child is not counted).

    python -m interop.bench.jobmem --jobs 200000
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import redis

from .common import Proc, start_redis, start_respqueue
from .durability import fill_jobs, restart, stop


def rss(pid: int, field: str = "VmRSS:") -> int:
    """VmRSS (or another /proc/PID/status field, e.g. RssFile:) in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def settle(p: Proc, quiet_s: float = 3.0, limit_s: float = 120.0) -> int:
    """The RSS once it has not changed by more than 1 MiB for ``quiet_s`` seconds."""
    t_end = time.monotonic() + limit_s
    last = rss(p.pid)
    since = time.monotonic()
    while time.monotonic() < t_end:
        time.sleep(0.5)
        cur = rss(p.pid)
        if abs(cur - last) > 1 << 20:
            last = cur
            since = time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return cur
    return rss(p.pid)


def measure(name: str, start: Callable[[], Proc], n: int, restart_too: bool) -> dict[str, float]:
    p = start()
    try:
        r = redis.Redis(port=p.port)
        r.ping()
        r.close()
        time.sleep(0.5)
        base = rss(p.pid)
        llen, dt = fill_jobs(p, n)
        after_fill = settle(p)
        out = {"empty_mib": base / 2**20, "fill_s": dt, "after_fill": (after_fill - base) / llen}
        print(f"{name:22} empty {base / 2**20:6.1f} MiB, filled {llen:,} in {dt:.1f} s: "
              f"{out['after_fill']:6.0f} B/job after the fill (RssFile {rss(p.pid, 'RssFile:') / 2**20:.1f} MiB)",
              flush=True)
        if restart_too:
            stop(p)
            restart(p, llen)
            after = settle(p)
            out["after_restart"] = (after - base) / llen
            print(f"{name:22} after a restart: {out['after_restart']:6.0f} B/job "
                  f"(RssFile {rss(p.pid, 'RssFile:') / 2**20:.1f} MiB)", flush=True)
        return out
    finally:
        p.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=200_000)
    ap.add_argument("--skip-redis", action="store_true")
    ap.add_argument("--only", help="run only the servers whose name contains this (e.g. durable)")
    ap.add_argument("--respqueue-args", default="", help="extra respqueue flags (space separated)")
    a = ap.parse_args(argv)
    extra = a.respqueue_args.split()
    specs: list[tuple[str, Callable[[], Proc], bool]] = [
        ("redis appendonly yes", lambda: start_redis("--appendonly", "yes", "--appendfsync", "everysec"), True),
        ("respqueue durable", lambda: start_respqueue("--durability", "durable", *extra), True),
        ("respqueue memory", lambda: start_respqueue("--durability", "memory", *extra), False),
    ]
    rows = []
    for name, start, rs in specs:
        if (a.skip_redis and name.startswith("redis")) or (a.only and a.only not in name):
            continue
        rows.append((name, measure(name, start, a.jobs, rs)))
    print(f"\nRSS per waiting job ({a.jobs:,} jobs by addBulk, RSS less the empty server's):")
    print("| server | after the fill B | after a restart B |")
    print("|---|---:|---:|")
    for name, o in rows:
        ar = f"{o['after_restart']:,.0f}" if "after_restart" in o else "-"
        print(f"| {name} | {o['after_fill']:,.0f} | {ar} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

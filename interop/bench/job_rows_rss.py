"""RSS per waiting (or completed) BullMQ job (not a test): job rows vs generic rows, in one run.

    python -m interop.bench.job_rows_rss [--jobs N] [--layouts on,off] [--state wait|completed]

For each layout (RESPQUEUE_JOB_ROWS=on: job rows, off: generic rows) a durable respqueue (job history
off) gets N waiting jobs the way BullMQ's addJob leaves them (a hash of 6 fields at bull:bench:<id>,
its id LPUSHed to bull:bench:wait; with ``--state completed`` ZADDed to bull:bench:completed, as a
finished job is), pipelined 5,000 at a time; its RSS (/proc VmRSS) less the empty
server's, per job, is printed after the fill and after a clean restart on the same store.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import redis

from .common import ROOT, free_port


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def start(d: str, port: int, layout: str) -> tuple[subprocess.Popen[bytes], redis.Redis]:
    env = dict(os.environ, PYTHONPATH=ROOT, RESPQUEUE_JOB_ROWS=layout)
    argv = [sys.executable, "-m", "respqueue", "serve", "--port", str(port), "--dir", d, "--history", "off"]
    p = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = redis.Redis(port=port)
    deadline = time.time() + 120
    while True:
        try:
            c.ping()
            return p, c
        except redis.ConnectionError:
            if time.time() > deadline:
                p.kill()
                raise
            time.sleep(0.1)


def measure(jobs: int, layout: str, state: str = "wait") -> tuple[float, float]:
    d = tempfile.mkdtemp(prefix="rq-rss-")
    port = free_port()
    p, c = start(d, port, layout)
    try:
        time.sleep(1)
        base = rss(p.pid)
        for lo in range(0, jobs, 5000):
            pl = c.pipeline(transaction=False)
            for i in range(lo, min(jobs, lo + 5000)):
                pl.hset(
                    f"bull:bench:{i}",
                    mapping={
                        "name": "j",
                        "data": '{"i":%d}' % i,
                        "timestamp": "1700000000000",
                        "delay": "0",
                        "priority": "0",
                        "opts": '{"attempts":0}',
                    },
                )
                if state == "wait":
                    pl.lpush("bull:bench:wait", str(i))
                else:
                    pl.zadd("bull:bench:completed", {str(i): 1700000000000 + i})
            pl.execute()
        c.save()
        time.sleep(1)
        fill = rss(p.pid)
        p.send_signal(signal.SIGTERM)
        p.wait(60)
        p, c = start(d, port, layout)
        while (c.llen("bull:bench:wait") if state == "wait" else c.zcard("bull:bench:completed")) != jobs:
            time.sleep(0.1)
        time.sleep(1)
        after = rss(p.pid)
        return (fill - base) / jobs, (after - base) / jobs
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(60)
        shutil.rmtree(d, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=200_000, help="waiting jobs")
    ap.add_argument("--layouts", default="on,off", help="RESPQUEUE_JOB_ROWS values, in turn")
    ap.add_argument("--state", choices=("wait", "completed"), default="wait", help="where the jobs are")
    a = ap.parse_args(argv)
    print(f"| layout | RSS per job in {a.state}, after the fill | after a restart |")
    print("|---|---|---|")
    for layout in a.layouts.split(","):
        fill, after = measure(a.jobs, layout, a.state)
        name = "job rows" if layout == "on" else "generic rows"
        print(f"| {name} (RESPQUEUE_JOB_ROWS={layout}) | {fill:,.0f} B | {after:,.0f} B |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

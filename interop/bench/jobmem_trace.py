"""Where a waiting BullMQ job's memory goes: tracemalloc by allocation site, per job.

Starts respqueue under tracemalloc (a launcher that dumps a snapshot on SIGUSR1), fills it with ``--jobs``
jobs by Queue.addBulk (the jobmem bench's fill), waits for the cold-hash compaction to settle, takes a
snapshot, and prints the allocation sites holding the most bytes per job (the empty server's snapshot
subtracted); ``--restart`` also stops a durable server, starts it again on its store and does the same.

    python -m interop.bench.jobmem_trace --jobs 50000 --durability memory
    python -m interop.bench.jobmem_trace --jobs 50000 --durability durable --restart
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc

import redis

from tests.servers import free_port, respqueue_env, wait_port

from .durability import DRIVER, WAIT_KEY
from .jobmem import rss

LAUNCHER = r"""
import signal, sys, tracemalloc, gc
tracemalloc.start(int(sys.argv[1]))
out = sys.argv[2]
def dump(*_):
    gc.collect()
    tracemalloc.take_snapshot().dump(out + ".tmp")
    import os
    os.replace(out + ".tmp", out)
signal.signal(signal.SIGUSR1, dump)
from respqueue.cli import main
sys.exit(main(sys.argv[3:]))
"""


class Server:
    def __init__(self, workdir: str, args: list[str], frames: int) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.snap = os.path.join(workdir, "snap")
        self.argv = [sys.executable, "-c", LAUNCHER, str(frames), self.snap, "serve", "--port", str(self.port),
                     "--dir", os.path.join(workdir, "data"), "--log-level", "warning",
                     "--enable-debug-command", "local", *args]
        self.proc = subprocess.Popen(self.argv, cwd=workdir, env=respqueue_env(),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc, 120)

    def snapshot(self) -> tracemalloc.Snapshot:
        if os.path.exists(self.snap):
            os.unlink(self.snap)
        os.kill(self.proc.pid, signal.SIGUSR1)
        for _ in range(1200):
            if os.path.exists(self.snap):
                return tracemalloc.Snapshot.load(self.snap)
            time.sleep(0.1)
        raise RuntimeError("no snapshot")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(300)


def fill(port: int, n: int) -> int:
    out = subprocess.run(["node", DRIVER, str(port), "addbulk", "--jobs", str(n), "--batch", "1000"],
                         capture_output=True, text=True, timeout=3600)
    if "RESULT" not in out.stdout:
        raise RuntimeError(out.stderr[-500:])
    r = redis.Redis(port=port)
    n = int(r.llen(WAIT_KEY))
    r.close()
    return n


def settle(port: int, limit_s: float = 120.0) -> None:
    """Until the cold-hash compaction queue is empty (DEBUG COLD-HASHES), plus the delay."""
    r = redis.Redis(port=port)
    t_end = time.monotonic() + limit_s
    time.sleep(2.5)
    while time.monotonic() < t_end:
        try:
            pending = r.execute_command("DEBUG", "COLD-HASHES")[1]
        except redis.ResponseError as e:
            raise RuntimeError(f"DEBUG COLD-HASHES: {e}") from None
        if pending == 0:
            break
        time.sleep(0.5)
    time.sleep(1.0)
    r.close()


def report(label: str, base: tracemalloc.Snapshot, snap: tracemalloc.Snapshot, n: int, top: int,
           rss_b: int | None) -> None:
    stats = snap.compare_to(base, "lineno")
    total = sum(s.size_diff for s in stats)
    print(f"\n== {label}: {n:,} jobs; traced {total / n:,.1f} B/job" +
          (f", RSS {rss_b / n:,.1f} B/job" if rss_b is not None else ""))
    print(f"{'B/job':>8} {'objs/job':>8}  site")
    for s in stats[:top]:
        if abs(s.size_diff) < n:  # under 1 B/job
            continue
        fr = s.traceback[0]
        fn = fr.filename
        for cut in ("/respqueue/", "/compat/", "/lib/python"):
            i = fn.find(cut)
            if i >= 0:
                fn = fn[i + 1:]
                break
        print(f"{s.size_diff / n:8.1f} {s.count_diff / n:8.2f}  {fn}:{fr.lineno}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=50_000)
    ap.add_argument("--durability", default="memory")
    ap.add_argument("--restart", action="store_true")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--frames", type=int, default=1)
    ap.add_argument("--args", default="", help="extra respqueue flags")
    a = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="jobmem-trace-")
    args = ["--durability", a.durability, *a.args.split()]
    s = Server(work, args, a.frames)
    try:
        time.sleep(1.0)
        base = s.snapshot()
        base_rss = rss(s.proc.pid)
        n = fill(s.port, a.jobs)
        settle(s.port)
        snap = s.snapshot()
        report(f"{a.durability} after the fill", base, snap, n, a.top, rss(s.proc.pid) - base_rss)
        if a.restart:
            s.stop()
            s.proc = subprocess.Popen(s.argv, cwd=work, env=respqueue_env(),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_port(s.port, s.proc, 600)
            r = redis.Redis(port=s.port, socket_timeout=600)
            while True:
                try:
                    if r.llen(WAIT_KEY) == n:
                        break
                except (redis.BusyLoadingError, redis.ConnectionError):
                    r.connection_pool.disconnect()
                time.sleep(0.05)
            r.close()
            settle(s.port)
            snap2 = s.snapshot()
            report(f"{a.durability} after a restart", base, snap2, n, a.top, rss(s.proc.pid) - base_rss)
    finally:
        s.stop()
        subprocess.run(["rm", "-rf", work])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Rows that reach the store's writer per BullMQ job (not a test): issue 13's "Job rows" count.

    python3 -m interop.bench.history_rows [--jobs 5000] [--root DIR] [--job-rows] [--runs 1]

Starts respqueue (durable, job history on) from ``--root`` (default: this checkout; another checkout's
root measures that code, e.g. the release before, with the same writer counter), runs
``bullmq_bench.js process --jobs N`` (N jobs added with addBulk, then processed by a Worker at concurrency
50), stops it cleanly and prints the rows the writer process ran (``RESPQUEUE_WRITER_ROWS``: every
statement's rows, executemany rows counted one by one), split into history rows (the statements on the
history tables) and the rest, per job, and the history's bytes in the file (tables and indexes) per job. ``--job-rows`` sets ``RESPQUEUE_JOB_ROWS=on``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HISTORY = ("job_events", "job_final", "history_chunks")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_once(root: str, jobs: int, job_rows: bool) -> dict[str, int]:
    work = tempfile.mkdtemp(prefix="rq-rows-")
    tally = os.path.join(work, "rows.json")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": root, "RESPQUEUE_WRITER_ROWS": tally,
           "RESPQUEUE_JOB_ROWS": "on" if job_rows else "off"}
    srv = subprocess.Popen([sys.executable, "-m", "respqueue", "serve", "--port", str(port), "--dir",
                            os.path.join(work, "data"), "--log-level", "warning"], cwd=root, env=env)
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise SystemExit("respqueue did not start") from None
                time.sleep(0.1)
        p = subprocess.run(["node", os.path.join(HERE, "bullmq_bench.js"), str(port), "process", "--jobs", str(jobs)],
                           capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            raise SystemExit(p.stdout[-2000:] + p.stderr[-2000:])
    finally:
        srv.terminate()
        srv.wait(60)
    with open(tally) as f:
        counts: dict[str, int] = json.load(f)
    conn = sqlite3.connect(f"file:{os.path.join(work, 'data', 'respqueue.db')}?mode=ro", uri=True)
    try:  # the history's pages (tables and indexes; a clean stop checkpointed the WAL)
        pages = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
        hbytes = sum(b for n, b in pages if n.startswith(("job_", "history_")) or "job_" in n)
    except sqlite3.Error:
        hbytes = 0
    finally:
        conn.close()
    shutil.rmtree(work, ignore_errors=True)
    hist = sum(n for sql, n in counts.items() if any(t in sql for t in HISTORY))
    return {"total": sum(counts.values()), "history": hist, "history_bytes": hbytes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--root", default=ROOT, help="the checkout whose respqueue runs (default: this one)")
    ap.add_argument("--job-rows", action="store_true", help="RESPQUEUE_JOB_ROWS=on")
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args(argv)
    print("| run | rows | per job | history rows | per job | other rows | per job | history bytes per job |")
    print("|---|---|---|---|---|---|---|---|")
    for i in range(a.runs):
        c = run_once(os.path.abspath(a.root), a.jobs, a.job_rows)
        other = c["total"] - c["history"]
        print(f"| {i + 1} | {c['total']:,} | {c['total'] / a.jobs:.2f} | {c['history']:,} | "
              f"{c['history'] / a.jobs:.3f} | {other:,} | {other / a.jobs:.2f} | {c['history_bytes'] / a.jobs:.0f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A synthetic job history with known delays, failures, retries, stalls and backlog.

Used by the tests (which compute the expected figures independently) and by the benchmark::

    python -m compat.analytics.synthetic DB_FILE N_JOBS [SEED]
"""

from __future__ import annotations

import os
import random
import sqlite3
import sys

from compat.history_schema import CHUNK_INSERT, chunk_rows, create_history_tables

BASE_MS = 1_795_000_000_000  # 2026-11-18 11:06:40 UTC, a fixed start so dates/minutes are reproducible
WORKLOAD = (
    # queue, job name, delays (ms) to pick from, failure probability per attempt, max attempts
    ("emails", "send", (0, 0, 0, 5000), 0.15, 3),
    ("emails", "bounce", (0,), 0.5, 2),
    ("reports", "build", (0, 60000), 0.05, 1),
    ("odd/queue name", None, (0, 1500), 0.3, 2),
)
REASONS = ("timeout", "ECONNREFUSED", "bad input", "rate limited")


def generate(n_jobs: int, seed: int = 7, base_ms: int = BASE_MS, span_ms: int = 600_000
             ) -> tuple[list[tuple], list[tuple]]:
    """(events, finals) rows in ``job_events``/``job_final`` column order (events without ``id``)."""
    rnd = random.Random(seed)
    events: list[tuple] = []
    finals: list[tuple] = []
    for i in range(n_jobs):
        queue, name, delays, p_fail, max_att = WORKLOAD[i % len(WORKLOAD)]
        jid = str(i + 1)
        ts = base_ms + rnd.randrange(span_ms)
        delay = rnd.choice(delays)
        ev = events.append
        ev((ts, "bull", queue, jid, name, "added", None, None, None, None, delay or None))
        ev((ts, "bull", queue, jid, name, "delayed" if delay else "waiting", None, None, None, None, delay or None))
        if i % 17 == 16:
            continue  # never picked up: stays in the backlog
        t = ts + delay + rnd.randrange(5, 4000)
        attempt, processed, reason = 0, t, None
        stalled = i % 23 == 5
        while True:
            attempt += 1
            processed = t
            worker = f"w{rnd.randrange(4)}"
            ev((t, "bull", queue, jid, name, "active", attempt, worker, None, None, None))
            if stalled and attempt == 1:
                t += 30000
                ev((t, "bull", queue, jid, name, "stalled", attempt, worker, None, None, None))
                t += rnd.randrange(1, 200)
                attempt -= 1  # a stalled job goes back to wait without using an attempt
                stalled = False
                continue
            run = rnd.randrange(2, 2500)
            t += run
            if rnd.random() < p_fail:
                reason = rnd.choice(REASONS)
                if attempt < max_att:
                    ev((t, "bull", queue, jid, name, "retried", attempt, worker, reason, None, None))
                    t += 100 * attempt
                    continue
                ev((t, "bull", queue, jid, name, "failed", attempt, worker, reason, None, None))
                state = "failed"
                rv, rv_size = None, None
            else:
                if i % 5 == 0:
                    ev((t - run // 2, "bull", queue, jid, name, "progress", attempt, worker, None, None, None))
                rv = '{"ok":%d}' % i
                rv_size = len(rv)
                ev((t, "bull", queue, jid, name, "completed", attempt, worker, None, rv_size, None))
                state = "completed"
                reason = None
            finals.append(("bull", queue, jid, name, '{"i":%d}' % i, '{"attempts":%d}' % max_att, ts, delay,
                           processed, t, attempt, reason, rv, state, t))
            break
    events.sort(key=lambda e: e[0])
    return events, finals


# one row per event / final record (through the views' INSTEAD OF triggers: a chunk each); write() packs chunks
EVENT_INSERT = ("INSERT INTO job_events(ts_ms, prefix, queue, job_id, job_name, event, attempt, worker,"
                " failed_reason, returnvalue_size, delay_ms) VALUES(?,?,?,?,?,?,?,?,?,?,?)")
FINAL_INSERT = "INSERT INTO job_final VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"


def write(path: str, events: list[tuple], finals: list[tuple]) -> None:
    """Append rows to the history tables of the SQLite file ``path`` (created, WAL mode, if missing)."""
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        create_history_tables(conn)
        with conn:
            conn.executemany(CHUNK_INSERT, chunk_rows(events, finals))
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path, n = args[0], int(args[1])
    seed = int(args[2]) if len(args) > 2 else 7
    ev, fi = generate(n, seed)
    write(path, ev, fi)
    print(f"wrote {len(ev)} events and {len(fi)} final records for {n} jobs to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

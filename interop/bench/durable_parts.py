"""Where a durable server's CPU per job goes, by part (not a test; issue 13, durable CPU).

    python -m interop.bench.durable_parts [--workload add|process|addbulk] [--jobs N] [--parts W,..] [--tap FILE]
        [--client-dir DIR] [--client node|python]
    python -m interop.bench.durable_parts --replay FILE [--rounds R] [--pages]

The first form starts this checkout's server (``--durability durable``) with the persistence path's
functions (the journal's steps, the job-row layout's ``before``/``stamp``, the history capture's
``on_event``/``close_batch``/``swapped``, the cold-hash tick, the held replies) wrapped in
``time.thread_time`` counters (the loop thread's own CPU, system time included: py-spy's samples, even
with ``--gil``, charge a ``send`` or a pipe write whose process the woken client preempted), runs
interop/bench/bullmq_bench.js once, and prints each part's CPU per job over the driver's timed part, with
the loop's and the writer's CPU per job (/proc). The parts nest
(``_done`` holds ``_close``, which holds ``_materialize``, which holds ``before``/``stamp``).
The wrapper's own cost is measured at start (a wrapped no-op) and printed; the table's "net" column
takes each part's share of it out, which matters for the parts called several times per job
(``history.on_event``, ``history.swapped``): time.thread_time is a system call, ~1-2 us a pair here.

``--tap FILE`` also writes every batch handed to the writer (its frames, as on the pipe) to FILE; the
second form replays such a file into a fresh store (schema made by a server start) in this process,
``--rounds`` times, and prints the CPU it took (user, system): the writer's SQLite work without the
loop beside it, for A/B of statements, pragmas or bindings on the very batches a run made. ``--pages`` then
replays it once more without checkpoints and prints the WAL frames per commit by the b-tree each frame's page
belongs to (SQLite's ``dbstat``): which tables and indexes a commit rewrites, and how many pages of each.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time

from tests.servers import free_port, respqueue_argv

from .bullmq import add_client_args, driver_command, use_client
from .common import ROOT, Proc

# (module, class or "", function, label): wrapped with thread_time counters in the server
PARTS = [
    ("respqueue.persistence.store", "Store", "_on_results", "store._on_results (writer results in)"),
    ("respqueue.persistence.journal", "Journal", "_done", "journal._done"),
    ("respqueue.persistence.journal", "Journal", "_close", "journal._close"),
    ("respqueue.persistence.journal", "Journal", "_materialize", "journal._materialize"),
    ("compat.engine.layout", "JobLayout", "before", "layout.before"),
    ("compat.engine.layout", "JobLayout", "stamp", "layout.stamp"),
    ("respqueue.persistence.journal", "Journal", "_take_rows", "journal._take_rows"),
    ("compat.history", "HistoryCapture", "close_batch", "history.close_batch"),
    ("respqueue.persistence.journal", "Journal", "_submit", "journal._submit (pack + pipe)"),
    ("respqueue.persistence.journal", "Journal", "_release", "journal._release (held replies out)"),
    ("compat.history", "HistoryCapture", "on_event", "history.on_event"),
    ("compat.history", "HistoryCapture", "swapped", "history.swapped"),
    ("respqueue.coldhash", "ColdHashes", "tick", "coldhash.tick"),
    ("respqueue.protocol", "ClientConnection", "_hold_reply", "conn._hold_reply"),
]

# the server's sitecustomize (its own folder first on PYTHONPATH): wraps PARTS when respqueue.server.run
# starts; SIGUSR2 writes the counters to $DURABLE_PARTS_OUT and resets them
_SITE = r'''
import importlib, os, signal, time
_OUT = os.environ.get("DURABLE_PARTS_OUT")
if _OUT:
    _T = {}
    _tt = time.thread_time

    def _make(f, rec):
        def w(*a, **k):
            t0 = _tt()
            try:
                return f(*a, **k)
            finally:
                rec[0] += _tt() - t0
                rec[1] += 1
        return w

    def _wrap(mod, cls, name, label):
        m = importlib.import_module(mod)
        c = getattr(m, cls) if cls else m
        rec = _T.setdefault(label, [0.0, 0])
        setattr(c, name, _make(getattr(c, name), rec))

    def _calibrate(n=20000):
        # the wrapper's own cost per call: what lands inside its part's interval (bias) and what a wrapped
        # call adds to its caller (full); time.thread_time is a system call (no vDSO), ~1-2 us here
        rec = [0.0, 0]
        w = _make(lambda: None, rec)
        f = lambda: None
        t0 = _tt()
        for _ in range(n):
            f()
        t1 = _tt()
        for _ in range(n):
            w()
        t2 = _tt()
        return rec[0] / n, max(0.0, (t2 - t1) - (t1 - t0)) / n

    _CAL = [0.0, 0.0]

    def _dump(*_):
        with open(_OUT, "w") as fo:
            fo.write(f"wrapper\t{_CAL[0]}\t{_CAL[1]}\n")
            for k, (s, n) in _T.items():
                fo.write(f"{k}\t{s}\t{n}\n")
        for r in _T.values():
            r[0] = 0.0
            r[1] = 0

    _TAP = os.environ.get("DURABLE_PARTS_TAP")
    import respqueue.server as _S
    _run = _S.run

    def run(cfg):
        _CAL[:] = _calibrate()
        for p in PARTS:
            _wrap(*p)
        if _TAP:
            import respqueue.persistence.store as St
            fp = St.writer_frame_parts
            tap = open(_TAP, "wb")

            def tapped(obj):
                h, d = fp(obj)
                tap.write(h)
                tap.write(d)
                tap.flush()
                return h, d
            St.writer_frame_parts = tapped
        signal.signal(signal.SIGUSR2, _dump)
        return _run(cfg)
    _S.run = run
'''


def measure(workload: str, jobs: int, tap: str, only: str = "") -> int:
    tmp = tempfile.mkdtemp(prefix="durable_parts")
    try:
        with open(os.path.join(tmp, "sitecustomize.py"), "w") as f:
            keep = [p for p in PARTS if not only or any(w in p[3] for w in only.split(","))]
            f.write(f"PARTS = {keep!r}\n" + _SITE)
        out = os.path.join(tmp, "parts.tsv")
        env = dict(os.environ, PYTHONPATH=tmp + os.pathsep + ROOT, DURABLE_PARTS_OUT=out)
        if tap:
            env["DURABLE_PARTS_TAP"] = os.path.abspath(tap)
        port = free_port()
        srv = Proc("respqueue", respqueue_argv(port, os.path.join(tmp, "data"), "--durability", "durable",
                                               "--log-level", "warning"), port, env)
        try:
            par = (["--concurrency", "50"] if workload == "process" else ["--batch", "1000"] if workload == "addbulk"
                   else ["--inflight", "50"])
            drv, denv = driver_command()
            p = subprocess.Popen([*drv, str(port), workload, "--jobs", str(jobs), *par, "--sync"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1, env=denv)
            assert p.stdin is not None and p.stdout is not None
            c0 = c1 = (0.0, 0.0)
            for line in p.stdout:
                if line.startswith("MARK "):
                    os.kill(srv.pid, signal.SIGUSR2)  # start: reset the counters; end: write them
                    time.sleep(0.3)
                    if line.startswith("MARK start"):
                        c0 = srv.cpu_split()
                    else:
                        c1 = srv.cpu_split()
                    p.stdin.write("go\n")
                    p.stdin.flush()
            p.wait()
        finally:
            srv.stop()
        k = 1e6 / jobs
        print(f"durable, {workload} {jobs:,} jobs: loop {(c1[0] - c0[0]) * k:.1f} us CPU per job, "
              f"writer process {(c1[1] - c0[1]) * k:.1f}")
        with open(out) as f:
            rows = [line.rstrip("\n").split("\t") for line in f]
        bias, full = float(rows[0][1]), float(rows[0][2])
        print(f"wrapper per call: {bias * 1e6:.2f} us inside its own part, {full * 1e6:.2f} us added to its caller; "
              "'net' is the part less its own wrapper's share (calls x inside), for a part that holds no wrapped one")
        print("| part | us of loop-thread CPU per job | net of wrapper | calls per job |\n|---|---:|---:|---:|")
        for label, s, n in rows[1:]:
            c = int(n) / jobs
            print(f"| {label} | {float(s) * k:.1f} | {float(s) * k - c * bias * 1e6:.1f} | {c:.2f} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def wal_pages(db: str) -> tuple[int, collections.Counter[str]]:
    """The commits in the WAL of the store ``db`` and its frames by b-tree (``name:pagetype`` from ``dbstat``;
    page 1, the header's, counts as ``sqlite_schema``; a page no b-tree holds now is ``free``)."""
    with open(db + "-wal", "rb") as f:
        wal = f.read()
    page_size = struct.unpack(">I", wal[8:12])[0]
    pages: list[int] = []
    commits = 0
    off = 32  # the WAL header; then frames of a 24-byte header and a page
    while off + 24 + page_size <= len(wal):
        pgno, size_after = struct.unpack(">II", wal[off:off + 8])
        pages.append(pgno)
        commits += size_after != 0  # (a commit's last frame holds the database's size after it)
        off += 24 + page_size
    conn = sqlite3.connect(db)
    try:
        owner = {pgno: f"{name}:{kind}" for name, pgno, kind in conn.execute("SELECT name, pageno, pagetype FROM dbstat")}
    finally:
        conn.close()
    return commits, collections.Counter(owner.get(p, "free") for p in pages)


def replay(path: str, rounds: int, pages: bool = False) -> int:
    from respqueue.persistence import writer as W

    frames = []
    with open(path, "rb") as f:
        while True:
            h = f.read(W.HEADER.size)
            if len(h) < W.HEADER.size:
                break
            (n,) = W.HEADER.unpack(h)
            frames.append(f.read(n))
    tmp = tempfile.mkdtemp(prefix="durable_replay")
    try:
        # a store with every registered schema (the history's included): made by a server start
        tpl = os.path.join(tmp, "tpl")
        port = free_port()
        Proc("respqueue", respqueue_argv(port, tpl, "--log-level", "warning"), port,
             dict(os.environ, PYTHONPATH=ROOT)).stop()
        W.fast_binding()
        import gc

        gc.set_threshold(50_000, 10, 10)  # as the writer
        # the rounds, then with --pages one pass more that keeps its WAL whole (no checkpoint moves its frames into
        # the database meanwhile) to name the b-tree of each frame
        for r in range(rounds + (1 if pages else 0)):
            whole_wal = r == rounds
            d = os.path.join(tmp, "db")
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(tpl, d)
            db = os.path.join(d, "respqueue.db")
            conn = W.open_connection(db, "FULL")
            if whole_wal:
                conn.execute("PRAGMA wal_autocheckpoint=0")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            batches = [W.unpack(fr)[1] for fr in frames]
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            for ops in batches:
                err = W.run_batch(conn, ops)
                if err:
                    print("batch failed:", err)
                    return 1
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            if whole_wal:
                commits, by_tree = wal_pages(db)
                conn.close()
                n = max(commits, 1)
                print(f"WAL frames per commit: {sum(by_tree.values()) / n:.2f} ({commits} commits)")
                for tree, k in by_tree.most_common():
                    print(f"  {k / n:6.2f}  {tree}")
                continue
            conn.close()
            u, s = r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime
            print(f"round {r + 1}: {len(frames)} batches, CPU {u + s:.3f} s (user {u:.3f}, system {s:.3f})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="process", choices=("add", "process", "addbulk"))
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--tap", default="", help="also write the batches handed to the writer to this file")
    ap.add_argument("--replay", default="", help="replay a --tap file into a fresh store instead")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pages", action="store_true", help="with --replay: the WAL frames per commit, by b-tree")
    ap.add_argument("--parts", default="",
                    help="wrap only the parts whose label holds one of these comma-separated words (e.g. layout,"
                         "journal: leaves the per-event parts unwrapped, to see the wrappers' cost in the loop's CPU)")
    add_client_args(ap)
    a = ap.parse_args(argv)
    use_client(a.client, a.client_dir)
    if a.replay:
        return replay(a.replay, a.rounds, a.pages)
    return measure(a.workload, a.jobs, a.tap, a.parts)


if __name__ == "__main__":
    sys.exit(main())

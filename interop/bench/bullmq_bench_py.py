"""BullMQ benchmark driver for the Python client: one workload against one server, JSON out.

    python interop/bench/bullmq_bench_py.py PORT WORKLOAD [--jobs N] [--inflight 50] [--batch 1000]
                                            [--concurrency 50] [--sync]

The Python counterpart of bullmq_bench.js, with the same workloads, options, MARK protocol and RESULT
line, so interop/bench/bullmq.py drives either (``--client python``). The release is whichever
``import bullmq`` finds: the installed PyPI 3.x, or 2.x with ``PYTHONPATH=interop/bullmq5/python``.

    add      Queue.add with --inflight calls in flight (default 50)
    addbulk  Queue.addBulk in batches of --batch jobs (default 1000)
    process  --jobs jobs are added first (untimed), then a Worker at --concurrency (default 50)
             processes them; the timed part is the processing only

With --sync the driver prints "MARK start" / "MARK end" around the timed part and waits for a line on
stdin after each. The last line of stdout is "RESULT {json}" (client_cpu_ms: the driver's own CPU over
the timed part).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

# run as a script, this folder is sys.path[0], and its bullmq.py (the benchmark runner) would shadow the client
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

import bullmq  # noqa: E402
from bullmq import Queue, Worker  # noqa: E402

OPTS: dict[str, Any] = {"jobs": 10000, "inflight": 50, "batch": 1000, "concurrency": 50, "sync": False}
_cpu0: list[float] = []
_client_ms: list[float] = []


def parse(argv: list[str]) -> tuple[int, str]:
    if len(argv) < 2:
        raise SystemExit("usage: bullmq_bench_py.py PORT WORKLOAD [options]")
    port, workload, rest = int(argv[0]), argv[1], argv[2:]
    i = 0
    while i < len(rest):
        k = rest[i].removeprefix("--")
        if k == "sync":
            OPTS["sync"] = True
        elif k in OPTS:
            i += 1
            OPTS[k] = int(rest[i])
        else:
            raise SystemExit(f"unknown option {rest[i]}")
        i += 1
    return port, workload


async def mark(name: str) -> None:
    if name == "end" and _cpu0:
        _client_ms.append((time.process_time() - _cpu0[0]) * 1000)
    sys.stdout.write(f"MARK {name}\n")
    sys.stdout.flush()
    if OPTS["sync"]:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    if name == "start":
        _cpu0.append(time.process_time())


async def fill(q: Queue, n: int, batch: int = 1000) -> None:
    for c in range(0, n, batch):
        await q.addBulk([{"name": "j", "data": {"i": c + k}} for k in range(min(batch, n - c))])


async def _timed_adds(conn: dict[str, Any], queue: str, warm: Any, adds: Any) -> dict[str, Any]:
    """Add ``--jobs`` jobs to ``queue`` with ``adds(q, n)`` between the marks, after ``warm(q)`` (the script's
    first EVALSHA on the connection, not timed); every one must be waiting afterwards."""
    q = Queue(queue, conn)
    try:
        await warm(q)
        n = OPTS["jobs"]
        await mark("start")
        t0 = time.perf_counter()
        await adds(q, n)
        ms = (time.perf_counter() - t0) * 1000
        await mark("end")
        wait = await q.getWaitingCount()
        return {"jobs": n, "ms": ms, "ok": wait == n + 1, "wait": wait - 1}
    finally:
        await q.close()


async def w_add(conn: dict[str, Any]) -> dict[str, Any]:
    async def adds(q: Queue, n: int) -> None:
        nxt = iter(range(n))

        async def lane() -> None:
            for i in nxt:
                await q.add("j", {"i": i})

        await asyncio.gather(*(lane() for _ in range(OPTS["inflight"])))

    return await _timed_adds(conn, "bench_add", lambda q: q.add("warm", {"i": -1}), adds)


async def w_addbulk(conn: dict[str, Any]) -> dict[str, Any]:
    return await _timed_adds(conn, "bench_bulk", lambda q: q.addBulk([{"name": "warm", "data": {"i": -1}}]),
                             lambda q, n: fill(q, n, OPTS["batch"]))


async def w_process(conn: dict[str, Any]) -> dict[str, Any]:
    q = Queue("bench_proc", conn)
    n = OPTS["jobs"]
    await fill(q, n)
    seen: dict[str, int] = {}
    done = {"completed": 0, "failed": 0}
    finished = asyncio.Event()

    async def proc(job: Any, token: str) -> int:
        seen[job.id] = seen.get(job.id, 0) + 1
        return int(job.data["i"])

    def on_done(key: str) -> Any:
        def f(*_: Any) -> None:
            done[key] += 1
            if done["completed"] + done["failed"] >= n:
                finished.set()
        return f

    w = Worker("bench_proc", proc, {**conn, "concurrency": OPTS["concurrency"], "autorun": False})
    w.on("completed", on_done("completed"))
    w.on("failed", on_done("failed"))
    try:
        await mark("start")
        t0 = time.perf_counter()
        runner = asyncio.ensure_future(w.run())
        await asyncio.wait_for(finished.wait(), 600)
        ms = (time.perf_counter() - t0) * 1000
        await mark("end")
        await w.close()
        runner.cancel()
        counts = await q.getJobCounts("wait", "active", "completed", "failed", "delayed")
        dupes = sum(v - 1 for v in seen.values() if v > 1)
        lost = n - len(seen)
        return {"jobs": n, "ms": ms, **done, "dupes": dupes, "lost": lost, "counts": counts,
                "ok": dupes == 0 and lost == 0 and counts.get("completed") == n}
    finally:
        await q.close()


WORKLOADS = {"add": w_add, "addbulk": w_addbulk, "process": w_process}


async def main(argv: list[str]) -> int:
    port, workload = parse(argv)
    if workload not in WORKLOADS:
        raise SystemExit(f"unknown workload {workload} (one of {', '.join(WORKLOADS)})")
    conn = {"connection": {"host": "127.0.0.1", "port": port}}
    try:
        res = await WORKLOADS[workload](conn)
    except Exception as e:  # noqa: BLE001 - reported in the RESULT line
        res = {"error": f"{type(e).__name__}: {e}"}
    res["workload"] = workload
    if "ms" in res:
        res["jobs_per_s"] = res["jobs"] / (res["ms"] / 1000)
    if _client_ms:
        res["client_cpu_ms"] = _client_ms[0]
    res["client"] = f"python bullmq {getattr(bullmq, '__version__', '?')}"
    sys.stdout.write("RESULT " + json.dumps(res) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))

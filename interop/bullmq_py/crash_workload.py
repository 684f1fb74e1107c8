"""Crash-test workload: a BullMQ producer and a worker on one queue, run until killed.

Usage: python crash_workload.py PORT QUEUE PREFIX N

Adds jobs ``<PREFIX><i>`` (i < N) one after another while a Worker (concurrency 8) processes the
queue, and prints one line per acknowledgement the server gave:

    added <job id>       Queue.add returned (the add was acknowledged)
    completed <job id>   the worker's move to completed returned (the completion was acknowledged)

The crash test (tests/test_crash.py) kills the server at a random moment, then this process,
restarts the server and checks every printed line against the store.
"""

from __future__ import annotations

import asyncio
import sys

from bullmq import Queue, Worker


async def main(port: int, name: str, prefix: str, n: int) -> None:
    conn = {"connection": {"host": "127.0.0.1", "port": port}}
    q = Queue(name, conn)

    async def proc(job, token):  # noqa: ANN001, ANN202 - BullMQ's signature
        await asyncio.sleep(0.002)
        return job.data["i"] * 2

    w = Worker(name, proc, {**conn, "concurrency": 8, "lockDuration": 2000, "stalledInterval": 1000})
    w.on("error", lambda *a: None)
    w.on("completed", lambda job, result: print(f"completed {job.id}", flush=True))
    print("ready", flush=True)
    for i in range(n):
        await q.add("job", {"i": i}, {"jobId": f"{prefix}{i}"})
        print(f"added {prefix}{i}", flush=True)
    await asyncio.sleep(120)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])))

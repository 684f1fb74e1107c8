"""Crash-test helper: add jobs and process them until killed; prints each acknowledged add.

Usage: python crash_producer.py PORT QUEUE N
Prints ``added <i>`` once Queue.add for job ``j<i>`` returned (the server acknowledged it).
"""

from __future__ import annotations

import asyncio
import sys

from bullmq import Queue, Worker


async def main(port: int, name: str, n: int) -> None:
    conn = {"connection": {"host": "127.0.0.1", "port": port}}
    q = Queue(name, conn)

    async def proc(job, token):  # noqa: ANN001, ANN202 - BullMQ's signature
        await asyncio.sleep(0.005)
        return job.data["i"] * 2

    w = Worker(name, proc, {**conn, "lockDuration": 2000, "stalledInterval": 1000})
    w.on("error", lambda *a: None)
    for i in range(n):
        await q.add("job", {"i": i}, {"jobId": f"j{i}"})
        print(f"added {i}", flush=True)
    await asyncio.sleep(60)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))

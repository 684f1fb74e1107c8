"""One Python bullmq release adds and works through a small queue on one server; prints the outcome as JSON.

Usage: PYTHONPATH=interop/bullmq5/python python interop/bullmq5/run_py.py PORT [QUEUE]
(interop/bullmq5/python holds PyPI bullmq 2.x, installed there by .ci/run.) tests/test_bullmq5_native.py runs
it against Redis and respqueue with native scripts on and off and compares the outputs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import bullmq
from bullmq import Queue, Worker


async def main(port: int, name: str) -> dict[str, Any]:
    conn = {"connection": {"host": "127.0.0.1", "port": port}}
    q = Queue(name, conn)
    await q.obliterate(force=True)
    for i in range(10):
        await q.add("plain", {"i": i})
    await q.add("lifo", {"i": 10}, {"lifo": True})
    await q.add("custom", {"i": 11}, {"jobId": "custom-11"})
    await q.add("flaky", {"i": 12}, {"attempts": 2})
    await q.add("broken", {"i": 13}, {"attempts": 1})
    await q.add("prio", {"i": 14}, {"priority": 1})
    await q.add("later", {"i": 15}, {"delay": 1500})
    tries: dict[str, int] = {}
    order: list[int] = []

    async def process(job: Any, token: str) -> int:
        tries[job.name] = tries.get(job.name, 0) + 1
        if job.name == "broken":
            raise Exception("broken job")
        if job.name == "flaky" and tries["flaky"] == 1:
            raise Exception("first try fails")
        if job.name != "later":  # (when the delayed job is promoted depends on timing)
            order.append(job.data["i"])
        return job.data["i"] * 2

    w = Worker(name, process, {**conn, "concurrency": 1, "name": "wpy"})
    end = time.monotonic() + 30
    while time.monotonic() < end:
        c = await q.getJobCounts("completed", "failed")
        if c.get("completed") == 15 and c.get("failed") == 1:
            break
        await asyncio.sleep(0.025)
    await asyncio.sleep(0.1)
    jobs = sorted(await q.getJobs(["completed", "failed"]), key=lambda j: j.data["i"])
    out = {
        "version": getattr(bullmq, "__version__", "?"),
        "counts": await q.getJobCounts("wait", "paused", "active", "completed", "failed", "delayed", "prioritized"),
        "jobs": [[j.id, j.name, j.data["i"], j.returnvalue, j.attemptsMade, j.failedReason or None,
                  bool(j.finishedOn)] for j in jobs],
        "order": order,
    }
    for o in (w, q):
        try:
            await asyncio.wait_for(o.close(), 5)
        except Exception:  # noqa: BLE001, S110 - best-effort teardown (a closing worker may be blocked)
            pass
    return out


if __name__ == "__main__":
    try:
        res = asyncio.run(main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "relpy"))
    except Exception as e:  # noqa: BLE001 - reported as JSON to the test
        res = {"error": repr(e)}
    sys.stdout.write(json.dumps(res))

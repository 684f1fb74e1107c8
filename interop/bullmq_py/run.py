"""BullMQ (Python port) scenarios: each drives one server and prints its outcome as JSON.

Usage: python run.py SCENARIO PORT

tests/test_bullmq_python.py runs every scenario against respqueue and against a real
redis-server and compares the two outputs. Only deterministic facts are printed (names,
return values, attempts, counts, states); anything BullMQ leaves unordered is sorted.
"""

from __future__ import annotations

import asyncio
import faulthandler
import json
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bullmq import FlowProducer, Queue, QueueEvents, UnrecoverableError, Worker

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
Scenario = Callable[["Ctx"], Awaitable[Any]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


class Ctx:
    """Connection options plus everything to close at the end."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.opened: list[Any] = []

    def conn(self) -> dict[str, Any]:
        return {"connection": {"host": "127.0.0.1", "port": self.port}}

    async def queue(self, name: str) -> Queue:
        q = Queue(name, self.conn())
        self.opened.append(q)
        await q.obliterate(force=True)
        return q

    def worker(self, queue_name: str, fn: Callable[..., Awaitable[Any]], **opts: Any) -> Worker:
        w = Worker(queue_name, fn, {**self.conn(), **opts})
        w.on("error", lambda *a: None)
        self.opened.append(w)
        return w

    async def close(self) -> None:
        for o in reversed(self.opened):
            try:
                await asyncio.wait_for(o.close(), 5)
            except Exception:  # noqa: BLE001, S110 - best-effort teardown
                pass


async def wait_for(pred: Callable[[], Any], timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r = pred()
        if asyncio.iscoroutine(r):
            r = await r
        if r:
            return
        await asyncio.sleep(0.02)
    raise TimeoutError("timed out waiting")


@scenario
async def add_process(ctx: Ctx) -> Any:
    q = await ctx.queue("py_add")
    bulk = await q.addBulk([{"name": "bulk", "data": {"i": i}} for i in range(10)])
    for i in range(10, 20):
        await q.add("single", {"i": i})
    done: list[list[Any]] = []
    active = {"now": 0, "max": 0}

    async def proc(job: Any, token: str) -> int:
        active["now"] += 1
        active["max"] = max(active["max"], active["now"])
        await asyncio.sleep(0.02)
        active["now"] -= 1
        return job.data["i"] * 2

    w = ctx.worker("py_add", proc, concurrency=5)
    w.on("completed", lambda job, rv: done.append([job.name, job.data["i"], rv, job.attemptsMade]))
    await wait_for(lambda: len(done) == 20)
    await asyncio.sleep(0.1)
    first = await q.getJob(bulk[0].id)
    return {
        "done": sorted(done, key=lambda d: d[1]),
        "concurrent": active["max"] > 1 and active["max"] <= 5,
        "counts": await q.getJobCounts("wait", "active", "completed", "failed", "delayed"),
        "first": {"name": first.name, "data": first.data, "rv": first.returnvalue, "state": await first.getState()},
        "ids": [j.id for j in bulk],
    }


@scenario
async def retries_backoff(ctx: Ctx) -> Any:
    q = await ctx.queue("py_retry")
    tries: dict[str, int] = {}

    async def proc(job: Any, token: str) -> str:
        tries[job.name] = tries.get(job.name, 0) + 1
        if job.name == "unrecoverable":
            raise UnrecoverableError("stop now")
        if job.name == "always":
            raise Exception("always fails")
        if tries[job.name] < 3:
            raise Exception(f"fail {tries[job.name]}")
        return "ok"

    w = ctx.worker("py_retry", proc, concurrency=4, settings={"backoffStrategy": lambda n, *a: n * 10})
    failed: list[list[Any]] = []
    w.on("failed", lambda job, err: failed.append([job.name, str(err), job.attemptsMade]))
    await q.add("fixed", {}, {"attempts": 3, "backoff": {"type": "fixed", "delay": 50}})
    await q.add("exponential", {}, {"attempts": 3, "backoff": {"type": "exponential", "delay": 20}})
    await q.add("custom", {}, {"attempts": 3, "backoff": {"type": "custom"}})
    await q.add("unrecoverable", {}, {"attempts": 5})
    await q.add("always", {}, {"attempts": 2})

    async def finished() -> bool:
        return await q.getCompletedCount() == 3 and await q.getFailedCount() == 2

    await wait_for(finished)
    jobs = await q.getJobs(["completed", "failed"])
    return {
        "tries": dict(sorted(tries.items())),
        "failed": sorted(failed),
        "final": sorted([j.name, j.attemptsMade, j.failedReason or None, j.returnvalue or None] for j in jobs),
    }


@scenario
async def delayed(ctx: Ctx) -> Any:
    q = await ctx.queue("py_delay")
    order: list[str] = []
    t0 = time.monotonic()
    late = await q.add("late", {}, {"delay": 300})
    prom = await q.add("promoted", {}, {"delay": 60000})
    await q.add("now", {})
    states = [await late.getState(), await prom.getState(), await q.getDelayedCount()]
    when: dict[str, float] = {}

    async def proc(job: Any, token: str) -> None:
        order.append(job.name)
        when[job.name] = time.monotonic() - t0

    ctx.worker("py_delay", proc)
    await wait_for(lambda: len(order) == 1)
    await prom.promote()
    await wait_for(lambda: len(order) == 3)
    j = await q.getJob(late.id)
    return {
        "order": order, "states": states, "lateWaited": when["late"] >= 0.28,
        "late": [j.delay, await j.getState()], "counts": await q.getJobCounts("delayed", "completed"),
    }


@scenario
async def priority(ctx: Ctx) -> Any:
    q = await ctx.queue("py_prio")
    order: list[str] = []
    for p in (5, 1, 3):
        await q.add(f"p{p}", {}, {"priority": p})
    cp = await q.add("p9", {}, {"priority": 9})
    await cp.changePriority({"priority": 2})
    await q.add("plain", {})
    await q.add("lifo-a", {}, {"lifo": True})
    prioritized = [j.name for j in await q.getPrioritized()]
    counts = await q.getJobCounts("prioritized", "wait")

    async def proc(job: Any, token: str) -> None:
        order.append(job.name)

    ctx.worker("py_prio", proc, concurrency=1)
    await wait_for(lambda: len(order) == 6)
    return {"order": order, "prioritized": prioritized, "counts": counts}


@scenario
async def events(ctx: Ctx) -> Any:
    q = await ctx.queue("py_events")
    qe = QueueEvents("py_events", ctx.conn())
    ctx.opened.append(qe)
    await asyncio.sleep(0.3)  # let the first XREAD BLOCK reach the server
    seen: list[list[Any]] = []
    for ev in ("added", "waiting", "active", "completed", "failed", "progress", "delayed", "removed"):
        qe.on(ev, lambda args, _id, ev=ev: seen.append([ev, args.get("jobId")]))
    rvs: dict[str, Any] = {}
    qe.on("completed", lambda args, _id: rvs.__setitem__(args["jobId"], args.get("returnvalue")))

    async def proc(job: Any, token: str) -> Any:
        await job.updateProgress(50)
        await job.log("half way")
        if job.name == "bad":
            raise Exception("bad job")
        return {"ok": True}

    ctx.worker("py_events", proc)
    j1 = await q.add("good", {})
    await wait_for(lambda: ["completed", j1.id] in seen)
    j2 = await q.add("bad", {})
    await wait_for(lambda: ["failed", j2.id] in seen)
    j3 = await q.add("later", {}, {"delay": 60000})
    await j3.remove()
    await wait_for(lambda: ["removed", j3.id] in seen)
    counts: dict[str, int] = {}
    for e, i in seen:
        counts[f"{e}:{i}"] = counts.get(f"{e}:{i}", 0) + 1
    logs = await q.getJobLogs(j1.id)
    return {"rv": rvs.get(j1.id), "counts": dict(sorted(counts.items())), "logs": logs,
            "progress": (await q.getJob(j1.id)).progress}


@scenario
async def flows(ctx: Ctx) -> Any:
    q = await ctx.queue("py_flow")
    fp = FlowProducer(ctx.conn())
    ctx.opened.append(fp)
    tree = await fp.add({
        "name": "parent", "queueName": "py_flow", "data": {},
        "children": [
            {"name": "c1", "queueName": "py_flow", "data": {"v": 1}},
            {"name": "c2", "queueName": "py_flow", "data": {"v": 2},
             "children": [{"name": "gc", "queueName": "py_flow", "data": {"v": 3}}]},
        ],
    })
    parent_id = tree["job"].id
    pre = await q.getJobCounts("wait", "waiting-children")
    order: list[str] = []

    async def proc(job: Any, token: str) -> Any:
        order.append(job.name)
        if job.name == "parent":
            vals = await job.getChildrenValues()
            return sorted(vals.values())
        return job.data["v"] * 10

    ctx.worker("py_flow", proc, concurrency=1)

    async def done() -> bool:
        return await q.getJobState(parent_id) == "completed"

    await wait_for(done)
    parent = await q.getJob(parent_id)
    return {"pre": pre, "order": order, "rv": parent.returnvalue, "state": await parent.getState(),
            "children": sorted(c["job"].name for c in tree.get("children", []))}


@scenario
async def pause_resume(ctx: Ctx) -> Any:
    q = await ctx.queue("py_pause")
    await q.pause()
    done: list[int] = []

    async def proc(job: Any, token: str) -> None:
        done.append(job.data["i"])

    w = ctx.worker("py_pause", proc)
    for i in range(5):
        await q.add("j", {"i": i})
    await asyncio.sleep(0.3)
    while_paused = [len(done), await q.isPaused(), await q.getWaitingCount()]
    await q.resume()
    await wait_for(lambda: len(done) == 5)
    # worker-level pause
    await w.pause()
    for i in range(5, 8):
        await q.add("j", {"i": i})
    await asyncio.sleep(0.3)
    worker_paused = [len(done), await q.isPaused(), await q.getWaitingCount()]
    w.resume()
    await wait_for(lambda: len(done) == 8)
    return {"whilePaused": while_paused, "workerPaused": worker_paused, "done": sorted(done)}


@scenario
async def getters(ctx: Ctx) -> Any:
    q = await ctx.queue("py_get")
    ids: dict[str, str] = {}
    for i in range(4):
        ids[f"w{i}"] = (await q.add(f"w{i}", {"i": i})).id
    ids["d0"] = (await q.add("d0", {}, {"delay": 60000})).id
    ids["p0"] = (await q.add("p0", {}, {"priority": 2})).id

    def names(js: list[Any]) -> list[str]:
        return [j.name for j in js]

    g: dict[str, Any] = {
        "waitAsc": names(await q.getJobs(["wait"], 0, 1, True)),
        "waitDesc": names(await q.getJobs(["wait"], 0, 1, False)),
        "waiting": names(await q.getWaiting(1, 2)),
        "delayed": names(await q.getDelayed()),
        "prioritized": names(await q.getPrioritized()),
        "counts": await q.getJobCounts(),
        "byTypes": await q.getJobCountByTypes("wait", "delayed"),
        "states": {n: await q.getJobState(i) for n, i in ids.items()},
        "missing": await q.getJob("nope"),
    }

    async def proc(job: Any, token: str) -> Any:
        if job.name == "w2":
            raise Exception("w2 failed")
        return job.name.upper()

    ctx.worker("py_get", proc, name="py-getter")

    async def done() -> bool:
        return await q.getCompletedCount() + await q.getFailedCount() == 5

    await wait_for(done)
    await asyncio.sleep(0.05)
    workers = await q.get_workers()
    g["after"] = {
        "workers": sorted(w.get("name") for w in workers),
        "completed": sorted(names(await q.getCompleted())),
        "failed": names(await q.getFailed()),
        "counts": await q.getJobCounts(),
        "rv": (await q.getJob(ids["w0"])).returnvalue,
        "failedReason": (await q.getJob(ids["w2"])).failedReason,
    }
    await asyncio.sleep(0.02)
    g["cleaned"] = len(await q.clean(0, 100, "completed"))
    await q.drain(True)
    g["drained"] = await q.getJobCounts("completed", "failed", "wait", "delayed")
    return g


@scenario
async def job_ops(ctx: Ctx) -> Any:
    q = await ctx.queue("py_ops")
    rm = await q.add("rm", {})
    await rm.remove()
    upd = await q.add("upd", {"v": 1})
    await upd.updateData({"v": 2})
    rc = await q.add("rc", {}, {"removeOnComplete": True})
    keep = await q.add("keep", {}, {"removeOnComplete": 1})
    rt = await q.add("rt", {})
    runs: dict[str, int] = {}

    async def proc(job: Any, token: str) -> Any:
        runs[job.name] = runs.get(job.name, 0) + 1
        if job.name == "rt" and runs["rt"] == 1:
            raise Exception("first run fails")
        return job.data

    w = ctx.worker("py_ops", proc, concurrency=1)
    rvs: dict[str, Any] = {}
    w.on("completed", lambda job, rv: rvs.__setitem__(job.name, rv))

    async def rt_failed() -> bool:
        return await q.getJobState(rt.id) == "failed"

    await wait_for(rt_failed)
    await (await q.getJob(rt.id)).retry("failed")

    async def all_done() -> bool:
        return await q.getJobState(rt.id) == "completed"

    await wait_for(all_done)
    rtj = await q.getJob(rt.id)
    return {
        "rmGone": await q.getJob(rm.id) is None, "upd": rvs.get("upd"),
        "rcGone": await q.getJob(rc.id) is None,
        # removeOnComplete: 1 on "keep" trims the completed set to one job when "keep" completes
        "exist": [await q.getJob(j.id) is not None for j in (upd, keep, rt)],
        "runs": dict(sorted(runs.items())), "rt": [rtj.attemptsMade, rtj.returnvalue],
        "counts": await q.getJobCounts("completed", "failed"),
    }


@scenario
async def schedulers_dedup(ctx: Ctx) -> Any:
    q = await ctx.queue("py_sched")
    await q.upsertJobScheduler("every-1", {"every": 150}, "tick", {"k": 1})
    await q.upsertJobScheduler(
        "cron-1", {"pattern": "0 12 * * *", "tz": "Europe/Paris", "startDate": "2030-01-01T00:00:00Z"},
        "cron", {"k": 2}, {"attempts": 2},
    )
    listed = sorted(
        [s["key"], s["name"], s.get("every"), s.get("pattern"), s.get("tz"),
         s["next"] if s["key"] == "cron-1" else type(s["next"]).__name__]
        for s in await q.getJobSchedulers(0, -1, True)
    )
    delayed = sorted([j.name, j.id if j.name == "cron" else "repeat"] for j in await q.getDelayed())
    ticks: list[list[Any]] = []

    async def proc(job: Any, token: str) -> None:
        ticks.append([job.name, job.data.get("k")])

    w = ctx.worker("py_sched", proc, concurrency=1)
    await wait_for(lambda: len(ticks) >= 3)
    removed = [await q.removeJobScheduler("every-1"), await q.removeJobScheduler("nope")]
    await w.close()
    after = [s["key"] for s in await q.getJobSchedulers()]

    # deduplication (simple mode and ttl) and global concurrency on a second queue
    q2 = await ctx.queue("py_dedup")
    a = await q2.add("a", {"v": 1}, {"deduplication": {"id": "s"}})
    b = await q2.add("a", {"v": 2}, {"deduplication": {"id": "s"}})
    t1 = await q2.add("t", {"v": 1}, {"deduplication": {"id": "t", "ttl": 200}})
    dedup_ids = [a.id, b.id, t1.id, await q2.getDeduplicationJobId("s"), await q2.getDeduplicationJobId("t")]

    async def ttl_gone() -> bool:
        return await q2.getDeduplicationJobId("t") is None

    await wait_for(ttl_gone, 5)
    t2 = await q2.add("t", {"v": 2}, {"deduplication": {"id": "t", "ttl": 200}})
    # The Python worker (3.4.4) stalls under setGlobalConcurrency on real Redis too (jobs stay
    # waiting after the first completes), so only the meta round trip is checked here; the
    # Node scenario global_concurrency covers the behaviour.
    await q2.setGlobalConcurrency(2)
    gc = await q2.getGlobalConcurrency()
    await q2.removeGlobalConcurrency()
    for i in range(4):
        await q2.add("gc", {"v": 10 + i})
    state = {"now": 0, "max": 0}
    seen: list[Any] = []

    async def proc2(job: Any, token: str) -> Any:
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.02)
        state["now"] -= 1
        seen.append([job.name, job.data["v"]])
        return job.data["v"]

    ctx.worker("py_dedup", proc2, concurrency=3)
    ctx.worker("py_dedup", proc2, concurrency=3)
    await wait_for(lambda: len(seen) == 7)
    return {
        "listed": listed, "count": await q.getJobSchedulersCount(), "delayed": delayed, "ticks": ticks[:3],
        "removed": removed, "after": after, "dedup": dedup_ids, "t2": t2.id, "gc": gc, "parallel": state["max"] > 1,
        "gcAfter": await q2.getGlobalConcurrency(), "seen": sorted(seen),
        "dedupAfter": await q2.getDeduplicationJobId("s"),
    }


async def main() -> int:
    # a watchdog: should anything hang, print every thread's stack and exit, so the
    # test reports where (instead of pytest's timeout killing it silently)
    faulthandler.dump_traceback_later(90, exit=True)
    name, port = sys.argv[1], int(sys.argv[2])
    ctx = Ctx(port)
    code = 0
    try:
        result = await asyncio.wait_for(SCENARIOS[name](ctx), 60)
    except BaseException as e:  # noqa: BLE001 - report any failure as JSON
        import traceback

        result = {"error": "".join(traceback.format_exception(e))}
        code = 1
    try:
        await asyncio.wait_for(ctx.close(), 10)
    except BaseException:  # noqa: BLE001, S110
        pass
    sys.stdout.write(json.dumps(result, default=str, sort_keys=True))
    sys.stdout.flush()
    # exit here: asyncio.run's teardown (cancelling the client library's leftover
    # tasks) has been seen to hang for minutes after everything was measured
    os._exit(code)


if __name__ == "__main__":
    asyncio.run(main())

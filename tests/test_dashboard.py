"""The dashboard (``--metrics-port``): rendered by a real headless Chromium over a server holding BullMQ
(Python) jobs in several states, and its actions end to end over HTTP, seen by BullMQ and its workers."""

from __future__ import annotations

import asyncio
import base64
import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from typing import Any

import pytest
import redis

from .servers import ROOT, chromium, chromium_cmd, free_port, run_async, start_respqueue
from .test_metrics import server, wait_for  # noqa: F401  (the module-scoped server fixture with --metrics-port)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("bullmq") is None, reason="bullmq (Python) is a test extra (pip install -e '.[test]')"
)


def request(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    auth: tuple[str, str] | None = None,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", content_type)
    if auth is not None:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, raw, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        status, raw, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
    return status, (json.loads(raw) if ctype.startswith("application/json") else raw)


def action(port: int, name: str, queue: str, **kw: Any) -> Any:
    status, out = request(port, "POST", "/api/action", {"action": name, "queue": queue, **kw})
    assert status == 200, out
    return out["result"]


def conn(port: int) -> dict[str, Any]:
    return {"connection": {"host": "127.0.0.1", "port": port}}


async def fill(port: int) -> str:
    """Queue ``emails``: 5 completed, 1 failed with a reason, 1 delayed; ``reports``: 2 waiting."""
    from bullmq import Queue, Worker

    q, r = Queue("emails", conn(port)), Queue("reports", conn(port))

    async def proc(job: Any, token: Any) -> Any:
        if job.name == "bounce":
            raise ValueError("mailbox unavailable: user@example.com")
        return "sent"

    for i in range(5):
        await q.add("send", {"to": f"user{i}@example.com"})
    bounce = await q.add("bounce", {"to": "user@example.com"})
    await q.add("digest", {}, {"delay": 3_600_000})
    for i in range(2):
        await r.add("build", {"i": i})
    w = Worker("emails", proc, conn(port))

    async def done() -> bool:
        c = await q.getJobCounts("completed", "failed")
        return c == {"completed": 5, "failed": 1}

    try:
        await wait_for(done)
    finally:
        await w.close()
        await q.close()
        await r.close()
    return bounce.id


def run_chromium(url: str, out_dir: str, png: str | None) -> str:
    exe = chromium()
    assert exe is not None
    args = chromium_cmd(
        exe,
        os.path.join(out_dir, "profile"),
        "--hide-scrollbars",
        "--virtual-time-budget=5000",
        "--window-size=1280,1400",
    )
    args += [f"--screenshot={png}"] if png else ["--dump-dom"]
    p = subprocess.run([*args, url], capture_output=True, text=True, timeout=120)
    if png:
        assert os.path.exists(png), p.stderr[-2000:]
    return p.stdout


def test_dashboard_renders_in_chromium(server):  # noqa: F811  (server: the fixture from test_metrics)
    if chromium() is None:
        pytest.skip("chromium is not installed (apt-get install chromium); .ci/run installs it")
    srv, mport = server
    bounce = run_async(fill(srv.port))
    out = tempfile.mkdtemp(prefix="rq-dashboard-")
    url = f"http://127.0.0.1:{mport}/#emails/{bounce}"  # the hash opens that job's timeline
    dom = run_chromium(url, out, None)
    rows = {m.group(1): m.group(2) for m in re.finditer(r'<tr data-queue="([^"]+)">(.*?)</tr>', dom, re.S)}
    assert set(rows) >= {"emails", "reports"}, dom[-3000:]

    def cell(queue: str, state: str) -> int:
        return int(re.search(rf'class="c-{state}[^"]*">(\d+)<', rows[queue]).group(1))

    assert (
        cell("emails", "completed"),
        cell("emails", "failed"),
        cell("emails", "delayed"),
        cell("emails", "wait"),
    ) == (5, 1, 1, 0)
    assert cell("reports", "wait") == 2
    assert "mailbox unavailable: user@example.com" in html.unescape(dom)
    assert 'data-a="retry"' in dom and 'data-a="promote"' in dom
    assert "<svg" in dom and "<rect" in dom  # the throughput chart has bars
    timeline = re.search(r'<ol class="tl">(.*?)</ol>', dom, re.S)
    assert timeline is not None, dom[-3000:]
    events = re.findall(r'<li class="([a-z-]+)">', timeline.group(1))
    assert events == ["added", "waiting", "active", "failed"]
    assert "mailbox unavailable" in timeline.group(1)
    png = os.path.join(out, "dashboard.png")
    run_chromium(url, out, png)
    print(f"dashboard screenshot: {png}")
    with open(png, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(head[16:20], "big") == 1280
    if os.environ.get("RESPQUEUE_UPDATE_SCREENSHOT"):
        shutil.copy(png, os.path.join(ROOT, "docs", "img", "dashboard.png"))


def test_action_errors(server):  # noqa: F811  (server: the fixture from test_metrics)
    srv, mport = server
    assert request(mport, "POST", "/api/action", {"action": "explode", "queue": "acts"})[0] == 400
    assert request(mport, "POST", "/api/action", {"action": "pause", "queue": "no-such-queue"})[0] == 404
    assert request(mport, "POST", "/api/action", b"{not json")[0] == 400
    assert (
        request(mport, "POST", "/api/action", b"action=pause", content_type="application/x-www-form-urlencoded")[0]
        == 415
    )
    assert request(mport, "GET", "/api/action")[0] == 405
    assert request(mport, "GET", "/api/job?queue=acts&id=999999")[0] == 404


async def _actions(port: int, mport: int) -> dict[str, Any]:
    from bullmq import Job, Queue, Worker

    q = Queue("acts", conn(port))
    runs: dict[str, int] = {}

    async def proc(job: Any, token: Any) -> Any:
        runs[job.id] = runs.get(job.id, 0) + 1
        if job.name == "flaky" and runs[job.id] == 1:
            raise Exception("first run fails")
        return runs[job.id]

    flaky = await q.add("flaky", {})
    later = await q.add("later", {}, {"delay": 3_600_000})
    w = Worker("acts", proc, conn(port))
    got: dict[str, Any] = {}
    try:
        await wait_for(lambda: _state(Job, q, flaky.id, "failed"))
        overview = (await asyncio.to_thread(request, mport, "GET", "/api/overview"))[1]
        got["failure_listed"] = any(f["id"] == flaky.id and f["queue"] == "acts" for f in overview["failures"])
        got["failed_jobs"] = (await asyncio.to_thread(request, mport, "GET", "/api/jobs?queue=acts&state=failed"))[1]
        got["delayed_jobs"] = (await asyncio.to_thread(request, mport, "GET", "/api/jobs?queue=acts&state=delayed"))[1]
        # retry: the worker runs it again, and this time it completes
        got["retry"] = await asyncio.to_thread(action, mport, "retry", "acts", id=flaky.id)
        await wait_for(lambda: _state(Job, q, flaky.id, "completed"))
        got["flaky_runs"] = runs[flaky.id]
        # retrying a job that is not failed any more: 409
        got["retry_again"] = (
            await asyncio.to_thread(
                request, mport, "POST", "/api/action", {"action": "retry", "queue": "acts", "id": flaky.id}
            )
        )[0]
        # promote: the delayed job runs now
        got["promote"] = await asyncio.to_thread(action, mport, "promote", "acts", id=later.id)
        await wait_for(lambda: _state(Job, q, later.id, "completed"))
        # pause / resume, as BullMQ sees them
        await asyncio.to_thread(action, mport, "pause", "acts")
        got["paused"] = await q.isPaused()
        held = await q.add("held", {})
        await asyncio.sleep(0.5)
        got["held_state"] = await (await Job.fromId(q, held.id)).getState()
        # remove: a waiting job disappears
        got["remove"] = await asyncio.to_thread(action, mport, "remove", "acts", id=held.id)
        got["held_gone"] = await Job.fromId(q, held.id) is None
        # removed before it ran: no hash, no final record; the timeline comes from a scan of job_events
        got["held_timeline"] = (await asyncio.to_thread(request, mport, "GET", f"/api/job?queue=acts&id={held.id}"))[1]
        await asyncio.to_thread(action, mport, "resume", "acts")
        got["resumed"] = not await q.isPaused()
        again = await q.add("after", {})
        await wait_for(lambda: _state(Job, q, again.id, "completed"))
        # clean completed
        got["clean"] = await asyncio.to_thread(action, mport, "clean", "acts", state="completed")
        got["counts"] = await q.getJobCounts("completed", "failed", "wait", "delayed")
        # the timeline of the retried job, from the history tables
        got["timeline"] = (await asyncio.to_thread(request, mport, "GET", f"/api/job?queue=acts&id={flaky.id}"))[1]
    finally:
        await w.close()
        await q.close()
    got["ids"] = {"flaky": flaky.id, "later": later.id, "held": held.id, "again": again.id}
    return got


async def _state(job_cls: Any, q: Any, jid: str, state: str) -> bool:
    j = await job_cls.fromId(q, jid)
    return j is not None and await j.getState() == state


def test_actions_end_to_end(server):  # noqa: F811  (server: the fixture from test_metrics)
    srv, mport = server
    got = run_async(_actions(srv.port, mport))
    ids = got["ids"]
    assert got["failure_listed"]
    assert [(j["id"], j["name"], j["failedReason"]) for j in got["failed_jobs"]["jobs"]] == [
        (ids["flaky"], "flaky", "first run fails")
    ]
    assert [(j["id"], j["name"], j["delay"]) for j in got["delayed_jobs"]["jobs"]] == [
        (ids["later"], "later", 3_600_000)
    ]
    assert got["retry"] == {"id": ids["flaky"], "state": "waiting"}
    assert got["flaky_runs"] == 2
    assert got["retry_again"] == 409
    assert got["promote"] == {"id": ids["later"], "state": "waiting"}
    assert got["paused"] is True and got["held_state"] in ("waiting", "paused")
    assert got["remove"]["removed"] is True and got["remove"]["prev"] == "wait" and got["held_gone"]
    assert got["resumed"]
    assert [e["event"] for e in got["held_timeline"]["timeline"]] == ["added", "waiting", "removed"]
    assert got["held_timeline"]["job"] is None and got["held_timeline"]["final"] == []
    assert sorted(got["clean"]["removed"], key=int) == sorted([ids["flaky"], ids["later"], ids["again"]], key=int)
    assert got["counts"] == {"completed": 0, "failed": 0, "wait": 0, "delayed": 0}
    events = [e["event"] for e in got["timeline"]["timeline"]]
    assert events[:2] == ["added", "waiting"]
    assert "failed" in events and events[-1] == "completed"
    assert events.index("failed") < len(events) - 1  # retried after failing, then completed
    assert got["timeline"]["job"] is None  # cleaned: only the history knows it
    assert [f["state"] for f in got["timeline"]["final"]] == ["failed", "completed"]
    # the actions were journaled like any write: they survive a restart
    srv.stop()
    again = start_respqueue(workdir=srv.workdir)
    r = redis.Redis(port=again.port)
    try:
        assert r.hget("bull:acts:meta", "paused") is None
        assert r.exists(f"bull:acts:{ids['held']}") == 0
        assert r.zcard("bull:acts:completed") == 0 and r.zcard("bull:emails:completed") == 5
    finally:
        r.close()
        again.stop()


def test_actions_need_authentication():
    mport = free_port()
    srv = start_respqueue("--metrics-port", str(mport), "--requirepass", "s3cret")
    try:
        r = redis.Redis(port=srv.port, password="s3cret")
        r.hset("bull:locked:meta", "opts.maxLenEvents", "10000")
        body = {"action": "pause", "queue": "locked"}
        status, _ = request(mport, "POST", "/api/action", body)
        assert status == 401
        assert request(mport, "POST", "/api/action", body, auth=("default", "wrong"))[0] == 401
        assert request(mport, "POST", "/api/action", body, auth=("someone", "s3cret"))[0] == 401
        assert r.hget("bull:locked:meta", "paused") is None
        # reads need the password too; /metrics stays open (aggregates only)
        assert request(mport, "GET", "/")[0] == 401
        assert request(mport, "GET", "/api/overview")[0] == 401
        assert request(mport, "GET", "/metrics")[0] == 200
        assert request(mport, "GET", "/", auth=("default", "s3cret"))[0] == 200
        status, out = request(mport, "POST", "/api/action", body, auth=("default", "s3cret"))
        assert status == 200 and out["result"] == {"paused": True}
        assert r.hget("bull:locked:meta", "paused") == b"1"
        r.close()
    finally:
        srv.stop()

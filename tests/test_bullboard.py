"""Bull Board, the web UI BullMQ users run, over respqueue and over a real Redis: same answers.

interop/bullboard/server.js seeds three queues with jobs in every state (completed with return values,
failed with reasons and stack traces, active, waiting, prioritized, delayed, waiting-children, a paused
queue) and serves Bull Board. It runs once over respqueue and once over redis-server; the test drives
both boards' HTTP API through the same reads and actions (job lists by state and page, job detail,
logs, retry, retry all, promote, clean, pause and resume) and compares the answers, after replacing
only what must differ: times, the server's INFO figures and connection ids.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from .servers import ROOT, ServerProcess, chromium, chromium_cmd, free_port
from .test_analytics import png_info

INTEROP = os.path.join(ROOT, "interop")
pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(os.path.join(INTEROP, "node_modules", "@bull-board", "api")),
    reason="run `npm ci` in interop/ (and install node) for the Bull Board tests",
)

QUEUES = ("emails", "reports", "newsletters")
STATES = ("latest", "active", "waiting", "waiting-children", "prioritized", "completed", "failed", "delayed")
TIME_FIELDS = {"timestamp", "processedOn", "finishedOn"}
CLEAN_GRACE_S = 5.0  # Bull Board's clean keeps jobs that finished in the last 5 s


@dataclass
class Board:
    label: str
    redis_port: int
    http_port: int
    proc: subprocess.Popen[str]
    seeded_at: float = 0.0

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.http_port}/ui{path}", data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        return status, json.loads(raw) if raw.strip() else None


def start_board(label: str, redis_port: int) -> Board:
    port = free_port()
    proc = subprocess.Popen(
        ["node", os.path.join("bullboard", "server.js"), str(redis_port), str(port), "--seed"],
        cwd=INTEROP,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return Board(label, redis_port, port, proc)


def wait_listening(board: Board, timeout: float = 120.0) -> None:
    """Read the board's first stdout line (its {"listening": ...} line) within ``timeout``."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(board.proc.stdout.readline()), daemon=True).start()  # type: ignore[union-attr]
    try:
        line = lines.get(timeout=timeout)
    except queue.Empty:
        line = ""
    if not line.strip():
        board.proc.kill()
        err = board.proc.stderr.read() if board.proc.stderr else ""  # type: ignore[union-attr]
        raise AssertionError(f"Bull Board over {board.label} did not start: {err[-3000:]}")
    assert json.loads(line) == {"listening": board.http_port, "seeded": True}
    board.seeded_at = time.time()


@pytest.fixture(scope="module")
def boards(rq_server: ServerProcess, redis_ref: ServerProcess) -> Iterator[tuple[Board, Board]]:
    for srv in (rq_server, redis_ref):
        with redis.Redis(port=srv.port, socket_timeout=10) as c:
            c.flushall()
    ours, theirs = start_board("respqueue", rq_server.port), start_board("redis", redis_ref.port)
    try:
        wait_listening(ours)
        wait_listening(theirs)
        yield ours, theirs
    finally:
        for b in (ours, theirs):
            b.proc.terminate()
            try:
                b.proc.wait(10)
            except subprocess.TimeoutExpired:
                b.proc.kill()
                b.proc.wait()


def normalise(value: Any, key: str = "") -> Any:
    """Replace what differs between two correct servers by a placeholder naming its type."""
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v, key) for v in value]
    if key in TIME_FIELDS and isinstance(value, (int, float)):
        return "<time>"
    if key == "stacktrace" and isinstance(value, str):
        # Node's own frames (runNextTicks, processTimers...) show when the processor's await resumed from a
        # timer tick: the seeder's timing, not the server's answer
        return "\n".join(ln for ln in value.split("\n") if "(node:internal/" not in ln)
    return value


def normalise_flow(body: dict[str, Any]) -> dict[str, Any]:
    """A flow's children come from the parent's dependencies SET (SSCAN), whose order Redis leaves
    undefined (it follows a randomly seeded hash); compare them sorted by id."""

    def walk(node: dict[str, Any]) -> dict[str, Any]:
        return {**node, "children": sorted((walk(c) for c in node.get("children", [])), key=lambda c: c["id"])}

    body = normalise(body)
    return {**body, "flowRoot": walk(body["flowRoot"])} if body.get("flowRoot") else body


def normalise_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """/api/redis/stats is INFO: the version, port, OS, uptime, memory and client figures differ."""

    def shape(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: shape(x) for k, x in v.items()}
        return "number" if isinstance(v, (int, float)) and not isinstance(v, bool) else type(v).__name__

    return {k: (v if k in ("backend", "mode") else shape(v)) for k, v in stats.items()}


def normalise_workers(body: dict[str, Any]) -> dict[str, Any]:
    """Workers come from CLIENT LIST: connection ids, addresses and ages differ."""
    return {"workers": [{**w, "id": "<id>", "addr": "<addr>", "age": type(w["age"]).__name__} for w in body["workers"]]}


class Compare:
    """Send each request to both boards; the normalised answers must be equal."""

    def __init__(self, ours: Board, theirs: Board) -> None:
        self.ours, self.theirs = ours, theirs
        self.steps: list[str] = []

    def __call__(self, method: str, path: str, body: Any = None, norm: Any = normalise) -> tuple[int, Any]:
        self.steps.append(f"{method} {path}")
        got_status, got = self.ours.call(method, path, body)
        want_status, want = self.theirs.call(method, path, body)
        got_n = norm(got) if got is not None else None
        want_n = norm(want) if want is not None else None
        assert (got_status, got_n) == (want_status, want_n), (
            f"{method} {path}\n respqueue: {got_status} {json.dumps(got_n, sort_keys=True)[:4000]}"
            f"\n     redis: {want_status} {json.dumps(want_n, sort_keys=True)[:4000]}\n steps: {self.steps[-8:]}"
        )
        return want_status, want


def chromium_args(exe: str, profile: str) -> list[str]:
    return chromium_cmd(exe, profile, "--window-size=1400,900", "--virtual-time-budget=8000")


def test_bullboard_ui_renders_the_queues(boards, tmp_path):
    """Both UIs render the failed jobs of `emails`; the screenshots are printed for a human to look at."""
    exe = chromium()
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install chromium); .ci/run installs it")
    for board in boards:
        url = f"http://127.0.0.1:{board.http_port}/ui/queue/emails?status=failed"
        png = tmp_path / f"bullboard-{board.label}.png"
        p = subprocess.run(
            [*chromium_args(exe, str(tmp_path / f"profile-{board.label}")), f"--screenshot={png}", url],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert png.exists(), p.stderr[-2000:]
        print(f"Bull Board over {board.label}: {png}")
        w, h, distinct = png_info(str(png))
        assert (w, h) == (1400, 900)
        assert distinct > 30 and png.stat().st_size > 20_000  # a blank page is a few KB of one colour
        dom = subprocess.run(
            [*chromium_args(exe, str(tmp_path / f"profile-dom-{board.label}")), "--dump-dom", url],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        for name in QUEUES:
            assert name in dom, f"{board.label}: queue {name} missing from the rendered page"
        assert "SMTP 550 mailbox unavailable: bob@example.com" in dom, f"{board.label}: failed job not rendered"


def test_bullboard_api_same_on_respqueue_and_redis(boards):
    ours, theirs = boards
    same = Compare(ours, theirs)

    # Queue list with counts, and every state's job list.
    _, overview = same("GET", "/api/queues")
    counts = {q["name"]: q["counts"] for q in overview["queues"]}
    assert counts["emails"] == {
        "active": 1,
        "completed": 4,
        "delayed": 2,
        "failed": 2,
        "prioritized": 2,
        "waiting": 3,
        "waiting-children": 0,
    }
    assert counts["reports"]["completed"] == 23 and counts["reports"]["waiting-children"] == 1
    assert [q["isPaused"] for q in overview["queues"]] == [False, False, True]
    listed: dict[str, list[dict[str, Any]]] = {}
    for state in STATES:
        _, body = same("GET", f"/api/queues?activeQueue=emails&status={state}")
        listed[state] = body["queues"][0]["jobs"]
    assert [j["returnValue"]["delivered"] for j in listed["completed"]] == [True] * 4
    assert len(listed["latest"]) == 14 and len(listed["delayed"]) == 2
    failed = {j["id"]: j for j in listed["failed"]}
    assert failed["2"]["failedReason"] == "SMTP 550 mailbox unavailable: bob@example.com"
    assert len(failed["2"]["stacktrace"]) == 2 and failed["2"]["attempts"] == 2  # failed twice, retried once
    assert failed["5"]["stacktrace"][0].startswith("Error: SMTP 550")
    for state in ("completed", "failed", "waiting", "waiting-children", "latest"):
        same("GET", f"/api/queues?activeQueue=reports&status={state}")
    pages = []
    for page in (1, 2, 3, 4):
        _, body = same("GET", f"/api/queues?activeQueue=reports&status=completed&page={page}&jobsPerPage=10")
        pages.append([j["id"] for j in body["queues"][1]["jobs"]])
        assert body["queues"][1]["pagination"]["pageCount"] == 3
    assert [len(p) for p in pages] == [10, 10, 3, 0]
    same("GET", "/api/queues?activeQueue=newsletters&status=waiting")
    same("GET", "/api/queues?activeQueue=emails&status=bogus")  # a 400 from the query check

    # Job detail, logs, workers and the INFO block.
    active_id = listed["active"][0]["id"]
    for job_id in ("1", "2", active_id, listed["delayed"][0]["id"], listed["prioritized"][0]["id"], "999"):
        same("GET", f"/api/queues/emails/{job_id}")
    _, detail = same("GET", "/api/queues/emails/2")
    assert detail["status"] == "failed" and detail["job"]["isFailed"] is True
    _, logs = same("GET", "/api/queues/emails/1/logs")
    assert logs == ["sending welcome to ada@example.com"]
    _, flow = same("GET", "/api/queues/reports/bundle-2026-10/flow", norm=normalise_flow)
    assert flow["flowRoot"]["state"] == "waiting-children" and len(flow["flowRoot"]["children"]) == 2
    same("GET", "/api/queues/emails/workers", norm=normalise_workers)
    _, stats = same("GET", "/api/redis/stats", norm=normalise_stats)
    _, our_stats = ours.call("GET", "/api/redis/stats")
    assert our_stats["port"] == ours.redis_port and our_stats["version"].startswith("7.")
    missing = [k for k, v in our_stats.items() if v is None] + [
        f"{k}.{s}" for k, v in our_stats.items() if isinstance(v, dict) for s, x in v.items() if x is None
    ]
    assert not missing, f"INFO fields Bull Board reads are missing on respqueue: {missing}"
    same("GET", "/api/queues/emails/metrics")
    same("GET", "/api/queues/emails/default-job-options")
    same("GET", "/api/job-schedulers")

    # Actions: retry one failed job, a job that cannot be retried, retry all.
    same("PUT", "/api/queues/emails/5/retry")
    _, after = same("GET", "/api/queues/emails/5")
    assert after["status"] == "waiting"
    same("PUT", f"/api/queues/emails/{active_id}/retry")  # 400: an active job is not retriable
    _, retried = same("PUT", "/api/queues/reports/retry/failed")
    assert retried == {"retried": 3, "skipped": 0}
    same("PUT", "/api/queues/reports/retry/waiting")  # 400: not a retriable state
    same("GET", "/api/queues?activeQueue=reports&status=waiting")

    # Promote one delayed job, then all of them.
    same("PUT", f"/api/queues/emails/{listed['delayed'][0]['id']}/promote")
    same("GET", "/api/queues?activeQueue=emails&status=delayed")
    same("PUT", "/api/queues/emails/promote")
    _, body = same("GET", "/api/queues?activeQueue=emails&status=waiting")
    assert body["queues"][0]["counts"]["delayed"] == 0

    # Pause and resume, one queue and all of them.
    same("PUT", "/api/queues/newsletters/resume")
    same("PUT", "/api/queues/emails/pause")
    _, body = same("GET", "/api/queues")
    assert [q["isPaused"] for q in body["queues"]] == [True, False, False]
    same("PUT", "/api/queues/pause")
    same("GET", "/api/queues")
    same("PUT", "/api/queues/resume")
    _, body = same("GET", "/api/queues")
    assert [q["isPaused"] for q in body["queues"]] == [False, False, False]

    # Add a job through the board, remove one, clean what finished more than 5 s ago.
    same("POST", "/api/queues/newsletters/add", {"name": "issue", "data": {"issue": 5}, "options": {"priority": 3}})
    same("PUT", "/api/queues/newsletters/1/clean")
    same("PUT", "/api/queues/newsletters/1/clean")  # 404: gone
    same("GET", "/api/queues?activeQueue=newsletters&status=latest")
    wait = CLEAN_GRACE_S + 0.5 - (time.time() - max(ours.seeded_at, theirs.seeded_at))
    if wait > 0:
        time.sleep(wait)
    same("PUT", "/api/queues/emails/clean/failed")
    same("PUT", "/api/queues/reports/clean/completed")
    _, body = same("GET", "/api/queues?activeQueue=emails&status=latest")
    final = {q["name"]: q["counts"] for q in body["queues"]}
    assert final["emails"]["failed"] == 0 and final["reports"]["completed"] == 0
    assert final["emails"]["completed"] == 4
    same("PUT", "/api/queues/newsletters/empty")
    same("GET", "/api/queues")

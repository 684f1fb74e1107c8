"""Volume: a BullMQ Worker processes N jobs on respqueue, none lost and none run twice.

interop/bench/hundred_k.js starts a Worker (concurrency 50) on an empty queue, adds N jobs with
addBulk in batches of 1,000 while it runs, and records every processor call by job id and by the
job's data. N is 20,000 here to keep CI short; set RESPQUEUE_VOLUME_JOBS=100000 for the full run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from .servers import ROOT, start_respqueue

INTEROP = os.path.join(ROOT, "interop")
JOBS = int(os.environ.get("RESPQUEUE_VOLUME_JOBS", "20000"))

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(os.path.join(INTEROP, "node_modules", "bullmq")),
    reason="run `npm ci` in interop/ (and install node) for the BullMQ volume test",
)


def run_volume(port: int, jobs: int, *extra: str) -> dict:
    p = subprocess.run(
        ["node", os.path.join(INTEROP, "bench", "hundred_k.js"), str(port), str(jobs), *extra],
        cwd=INTEROP, capture_output=True, text=True, timeout=max(240, jobs // 100),
    )
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise AssertionError(f"hundred_k.js printed no JSON (exit {p.returncode}): {p.stdout[-2000:]} {p.stderr[-2000:]}") from None


@pytest.mark.timeout(max(300, JOBS // 80))
def test_worker_processes_every_job_exactly_once() -> None:
    # A server of its own: the session server is shared with other tests that FLUSHALL.
    srv = start_respqueue("--log-level", "warning")
    try:
        out = run_volume(srv.port, JOBS)
        alive = srv.proc.poll() is None
    finally:
        srv.stop()
        shutil.rmtree(srv.workdir, ignore_errors=True)
    print(f"\nvolume: {JOBS} jobs in {out.get('total_ms')} ms ({out.get('jobs_per_s')} jobs/s), "
          f"lost={out.get('lost')} dupes={out.get('dupes')}")
    assert alive, "respqueue exited during the run"
    assert "error" not in out, out["error"]
    assert out["errors"] == [], out["errors"]
    assert out["added_ids"] == JOBS
    assert out["lost"] == 0 and out["missing_index"] == 0, out
    assert out["dupes"] == 0 and out["dup_index"] == 0, out
    assert out["bad_index"] == 0 and out["unknown_ids"] == 0, out
    assert out["failed"] == 0 and out["completed"] == JOBS and out["processed"] == JOBS, out
    counts = out["counts"]
    assert counts["completed"] == JOBS, counts
    assert sum(v for k, v in counts.items() if k != "completed") == 0, counts
    assert out["ok"] is True

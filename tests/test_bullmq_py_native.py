"""BullMQ's Python client on its hot paths: addBulk, a Worker's fetches and finishes, natively, none lost.

The Python client differs from the Node one in how it loads the server: it sends addBulk as MULTI,
EVALSHA..., EXEC with ``delay: 0`` in every job's options, and its Worker fetches each job with a
moveToActive EVALSHA of its own (a pooled connection per fetch) and finishes it with moveToFinished
without fetching the next. interop/bench/bullmq_bench_py.py (the Python benchmark driver) adds and
works through a queue with each release family installed here (the PyPI 3.x in the environment,
2.x in interop/bullmq5/python); the server's debug log tells which path each script took.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .servers import ROOT, run_logged

DRIVER = os.path.join(ROOT, "interop", "bench", "bullmq_bench_py.py")
PY2 = os.path.join(ROOT, "interop", "bullmq5", "python")


def _has(path: str) -> bool:
    env = {**os.environ, "PYTHONPATH": path} if path else dict(os.environ)
    return subprocess.run([sys.executable, "-c", "import bullmq"], env=env, cwd="/", capture_output=True).returncode == 0


RELEASES = [
    pytest.param("", id="pypi-3.x", marks=pytest.mark.skipif(not _has(""), reason="bullmq (PyPI) is not installed")),
    pytest.param(PY2, id="pypi-2.x", marks=pytest.mark.skipif(
        not os.path.isdir(os.path.join(PY2, "bullmq")), reason="PyPI bullmq 2.x is not in interop/bullmq5/python")),
]


def drive(port: int, workload: str, jobs: int, path: str) -> dict:
    env = dict(os.environ)
    if path:
        env["PYTHONPATH"] = path
    p = subprocess.run([sys.executable, DRIVER, str(port), workload, "--jobs", str(jobs)], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=240)
    last = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if not last:
        raise AssertionError(f"the driver printed no RESULT (exit {p.returncode}): {p.stdout[-2000:]} {p.stderr[-2000:]}")
    return json.loads(last[-1][7:])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", RELEASES)
def test_python_client_hot_paths_run_natively(path: str) -> None:
    (bulk, proc), alive, log = run_logged(lambda port: (drive(port, "addbulk", 3000, path),
                                                        drive(port, "process", 1500, path)))
    assert alive, "respqueue exited during the run"
    assert bulk.get("ok") is True, bulk
    assert proc.get("ok") is True and proc["dupes"] == 0 and proc["lost"] == 0 and proc["failed"] == 0, proc
    assert proc["counts"]["completed"] == 1500, proc
    # addBulk (MULTI/EXEC of addStandardJob): the run form takes the jobs, ``delay: 0`` and all (the first
    # job of a fresh queue, and of the process workload's queue, is a single script: it sets maxLenEvents)
    assert log.count("native addStandardJob: ran in a run") >= 3000 + 1500 - 10, log[-3000:]
    lua = [ln for ln in log.splitlines() if ("runs on Lua" in ln or "Lua fallback" in ln or ", run: a single script" in ln)
           and any(n in ln for n in ("addStandardJob", "moveToActive", "moveToFinished"))]
    assert len(lua) <= 2, lua[:20]  # (the two fresh queues' first jobs)
    # the Worker: one moveToActive per job (and a few empty fetches), one moveToFinished per job, natively
    assert log.count("native moveToActive: ran") >= 1500
    assert log.count("native moveToFinished: ran") >= 1500

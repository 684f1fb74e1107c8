"""BullMQ's Python port (PyPI ``bullmq``) and plain redis-py against respqueue and a real Redis.

Each scenario in interop/bullmq_py/run.py (BullMQ) and interop/bullmq_py/redispy_run.py
(redis-py features built on Lua, transactions, pub/sub and streams) drives one server and
prints its observable outcome as JSON; the two JSON documents must be equal.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from .servers import ROOT

HERE = os.path.join(ROOT, "interop", "bullmq_py")

BULLMQ_SCENARIOS = [
    "add_process", "retries_backoff", "delayed", "priority", "events", "flows", "pause_resume", "getters", "job_ops",
    "schedulers_dedup",
]
REDISPY_SCENARIOS = ["lock", "transaction", "pubsub", "streams", "scripts"]

needs_bullmq = pytest.mark.skipif(
    importlib.util.find_spec("bullmq") is None,
    reason="the Python BullMQ port is not installed (pip install 'bullmq==3.4.4', see the test extra)",
)


def run_scenario(script: str, name: str, port: int) -> dict:
    p = subprocess.run(
        [sys.executable, os.path.join(HERE, script), name, str(port)],
        cwd=HERE, capture_output=True, text=True, timeout=120,
    )
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        raise AssertionError(
            f"scenario {name} printed no JSON (exit {p.returncode}): {p.stdout[-2000:]} {p.stderr[-2000:]}"
        ) from None
    assert "error" not in out, out["error"]
    return out


@needs_bullmq
@pytest.mark.parametrize("scenario", BULLMQ_SCENARIOS)
def test_bullmq_python_same_outcome(scenario, rq_server, redis_ref):
    theirs = run_scenario("run.py", scenario, redis_ref.port)
    ours = run_scenario("run.py", scenario, rq_server.port)
    assert ours == theirs


@pytest.mark.parametrize("scenario", REDISPY_SCENARIOS)
def test_redispy_same_outcome(scenario, rq_server, redis_ref):
    theirs = run_scenario("redispy_run.py", scenario, redis_ref.port)
    ours = run_scenario("redispy_run.py", scenario, rq_server.port)
    assert ours == theirs

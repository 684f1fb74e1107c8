"""BullMQ (Node) scenarios run against respqueue and a real Redis: same observable outcome.

Each scenario in interop/bullmq/run.js drives one server and prints job states, return
values, attempts, events and ordering as JSON. The two JSON documents must be equal.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from .servers import ROOT

INTEROP = os.path.join(ROOT, "interop")
pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(os.path.join(INTEROP, "node_modules", "bullmq")),
    reason="run `npm ci` in interop/ (and install node) for the BullMQ interop tests",
)

SCENARIOS = [
    "add_process", "retries_backoff", "delayed_priority", "events", "flows", "pause_resume", "getters_clean",
    # interop/bullmq/scenarios_more.js
    "rate_limiter", "global_concurrency", "worker_pause", "flow_failures", "events_dedup", "schedulers",
    "dedup", "stalled", "getters", "clean_drain_obliterate", "remove_on", "job_ops", "manual_misc", "volume",
]


def run_scenario(name: str, port: int, client: str) -> dict:
    p = subprocess.run(
        ["node", os.path.join("bullmq", "run.js"), name, str(port), client],
        cwd=INTEROP, capture_output=True, text=True, timeout=120,
    )
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"scenario {name} printed no JSON (exit {p.returncode}): {p.stdout[-2000:]} {p.stderr[-2000:]}") from None
    assert "error" not in out, out["error"]
    return out


@pytest.mark.parametrize("client", ["ioredis", "node-redis"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_bullmq_scenario_same_outcome(scenario, client, rq_server, redis_ref):
    theirs = run_scenario(scenario, redis_ref.port, client)
    ours = run_scenario(scenario, rq_server.port, client)
    assert ours == theirs

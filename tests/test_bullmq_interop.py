"""BullMQ (Node) scenarios run against respqueue and a real Redis: same observable outcome.

Each scenario in interop/bullmq/run.js drives one server and prints job states, return
values, attempts, events and ordering as JSON. The two JSON documents must be equal.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator

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


class Runner:
    """Runs a scenario against each server in turn in one fresh ``node run.js -`` process per test (one per
    run before: loading BullMQ and the clients is most of a short scenario's CPU time). The process for the
    next test of the same client is started while this one runs, and reads its scenario from stdin."""

    def __init__(self) -> None:
        self.ready: dict[str, subprocess.Popen[str]] = {}

    @staticmethod
    def _spawn(client: str) -> subprocess.Popen[str]:
        return subprocess.Popen(["node", os.path.join("bullmq", "run.js"), "-", client], cwd=INTEROP, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def run(self, name: str, client: str, *ports: int) -> list[dict]:
        """The scenario's outcome on each port, in order."""
        p = self.ready.pop(client, None) or self._spawn(client)
        self.ready[client] = self._spawn(client)
        try:
            stdout, stderr = p.communicate(f"{name} {' '.join(map(str, ports))}\n", timeout=110)
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
            raise AssertionError(f"scenario {name} ran past 110 s: {stdout[-2000:]} {stderr[-2000:]}") from None
        outs = []
        for port, line in zip(ports, [*stdout.splitlines(), "", ""], strict=False):
            try:
                out = json.loads(line)
            except json.JSONDecodeError:
                raise AssertionError(f"scenario {name} printed no JSON for port {port} (exit {p.returncode}): "
                                     f"{stdout[-2000:]} {stderr[-2000:]}") from None
            assert "error" not in out, out["error"]
            outs.append(out)
        return outs

    def close(self) -> None:
        for p in self.ready.values():
            p.kill()
            p.communicate()


@pytest.fixture(scope="module")
def runner() -> Iterator[Runner]:
    r = Runner()
    yield r
    r.close()


@pytest.mark.parametrize("client", ["ioredis", "node-redis"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_bullmq_scenario_same_outcome(scenario, client, rq_server, redis_ref, runner):
    theirs, ours = runner.run(scenario, client, redis_ref.port, rq_server.port)
    assert ours == theirs

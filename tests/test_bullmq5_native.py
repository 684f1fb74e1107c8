"""Real clients of every installed BullMQ release family against respqueue: npm 5.x and 6.x, PyPI 2.x and 3.x.

interop/bullmq5 (installed by .ci/run) holds npm bullmq 5.81.5 (the latest 5.x) and, in python/, PyPI
bullmq 2.26.0 (the latest 2.x). Each client adds and works through a small queue (interop/bullmq5/run.js,
run_py.py) on Redis, on respqueue with native scripts and on respqueue with them off (Lua only): the outcomes
must be the same, the hot scripts must have run natively, and every script digest the client sent must be
in compat.script_table (the server logs any it does not know, once per digest).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from compat import script_table

from .servers import ROOT, ServerProcess, start_redis, start_respqueue

BULLMQ5 = os.path.join(ROOT, "interop", "bullmq5")
HOT = ("addStandardJob", "moveToActive", "moveToFinished", "addPrioritizedJob", "addDelayedJob")


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, ServerProcess]]:
    srv = {
        "redis": start_redis(),
        "native": start_respqueue("--durability", "memory", "--native-scripts", "on", "--log-level", "debug"),
        "lua": start_respqueue("--durability", "memory", "--native-scripts", "off", "--log-level", "debug"),
    }
    yield srv
    for s in srv.values():
        s.stop()


def _release_digests(release: str) -> dict[str, str]:
    """sha -> name for the scripts ``release`` (e.g. node-5.81.5) sends, from the generated table."""
    order = list(script_table.RELEASES)
    assert release in order, f"{release} was not scanned"
    idx = order.index(release)
    out = {}
    for s, (name, _nk, rels, _size, _lid) in script_table.TABLE.items():
        for part in rels.split(","):
            a, _, b = part.partition("..")
            if part == release or (b and order.index(a) <= idx <= order.index(b)):
                out[s] = name
    return out


def _run(argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"{argv[1]} printed no JSON (exit {p.returncode}): {p.stdout[-2000:]} {p.stderr[-2000:]}") from None
    assert "error" not in out, out["error"]
    return out


def _check_native(srv: ServerProcess, release: str, before: str) -> None:
    log = srv.output()[len(before):]
    assert "not a known BullMQ script" not in log, [ln for ln in log.splitlines() if "not a known" in ln]
    for n, least in (("addStandardJob", 10), ("moveToActive", 1), ("moveToFinished", 10), ("addPrioritizedJob", 1),
                     ("addDelayedJob", 1)):
        assert log.count(f"native {n}: ran") >= least, (n, log.count(f"native {n}: ran"))
        assert f"BullMQ script {n} (" not in log  # no hot script of this release fell back to Lua wholesale
    assert "after writing" not in log and "Traceback" not in log
    # the digests the client loaded are the table's for this release (all three hot ones among them)
    digests = _release_digests(release)
    r = redis.Redis(port=srv.port)
    try:
        hot = [s for s, n in digests.items() if n in HOT]
        assert len(hot) == len(HOT)
        assert r.script_exists(*hot) == [True] * len(HOT)
    finally:
        r.close()


def _same_everywhere(servers: dict[str, ServerProcess], argv: list[str], release: str,
                     env: dict[str, str] | None = None, extra: list[str] | None = None) -> dict[str, Any]:
    before = servers["native"].output()
    outs = {k: _run([*argv, str(servers[k].port), *(extra or [])], env) for k in ("redis", "native", "lua")}
    assert outs["native"] == outs["redis"]
    assert outs["lua"] == outs["redis"]
    _check_native(servers["native"], release, before)
    assert "native" not in servers["lua"].output().replace("--native-scripts", "")
    return outs["redis"]


def _installed(client_dir: str) -> str | None:
    try:
        with open(os.path.join(client_dir, "node_modules", "bullmq", "package.json")) as f:
            return str(json.load(f)["version"])
    except OSError:
        return None


@pytest.mark.parametrize("client_dir", [BULLMQ5, os.path.join(ROOT, "interop")], ids=["npm-5.x", "npm-6.x"])
def test_node_bullmq_runs_native(servers: dict[str, ServerProcess], client_dir: str) -> None:
    version = _installed(client_dir)
    if shutil.which("node") is None or version is None:
        pytest.skip(f"no bullmq in {client_dir}/node_modules (.ci/run installs it)")
    out = _same_everywhere(servers, ["node", os.path.join(BULLMQ5, "run.js")], f"node-{version}",
                           extra=["rel-" + version, client_dir])
    assert out["version"] == version
    assert out["counts"]["completed"] == 22 and out["counts"]["failed"] == 1


def _py_version(path: str | None) -> str | None:
    code = "import importlib.metadata as m; print(m.version('bullmq'))"
    env = {**os.environ, "PYTHONPATH": path} if path else None
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    return p.stdout.strip() or None if p.returncode == 0 else None


@pytest.mark.parametrize("path", [os.path.join(BULLMQ5, "python"), None], ids=["pypi-2.x", "pypi-installed"])
def test_python_bullmq_runs_native(servers: dict[str, ServerProcess], path: str | None) -> None:
    if path is not None and not os.path.isdir(os.path.join(path, "bullmq")):
        pytest.skip("interop/bullmq5/python (PyPI bullmq 2.x) not installed (.ci/run installs it)")
    version = _py_version(path)
    if version is None:
        pytest.skip("no Python bullmq")
    env = {**os.environ, "PYTHONPATH": path} if path else None
    out = _same_everywhere(servers, [sys.executable, os.path.join(BULLMQ5, "run_py.py")], f"py-{version}", env,
                           extra=["relpy-" + version])
    assert out["counts"]["completed"] == 15 and out["counts"]["failed"] == 1

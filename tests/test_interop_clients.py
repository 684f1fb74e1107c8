"""Real client programs (ioredis, node-redis, redis-cli, redis-benchmark) against both servers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from .servers import ROOT

INTEROP = os.path.join(ROOT, "interop")
NODE_MODULES = os.path.join(INTEROP, "node_modules")

needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(NODE_MODULES),
    reason="run `npm ci` in interop/ (and install node) for the Node client tests",
)
needs_cli = pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed (apt-get install redis-tools)")


def run_node(script: str, port: int) -> dict:
    p = subprocess.run(["node", script, str(port)], cwd=INTEROP, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@needs_node
@pytest.mark.parametrize("script", ["smoke_ioredis.js", "smoke_node_redis.js"])
def test_node_client_same_as_redis(script, rq_server, redis_ref):
    ours = run_node(script, rq_server.port)
    theirs = run_node(script, redis_ref.port)
    for k in theirs:
        assert ours.get(k) == theirs[k], f"{script} step {k}: respqueue {ours.get(k)!r} != redis {theirs[k]!r}"
    assert set(ours) == set(theirs)


def cli(port: int, *args: str, stdin: str | None = None) -> str:
    p = subprocess.run(["redis-cli", "-p", str(port), *args], input=stdin, capture_output=True, text=True, timeout=60)
    return p.stdout + p.stderr


@needs_cli
def test_redis_cli_same_as_redis(rq_server, redis_ref):
    script = [
        ("flushall",),
        ("ping",),
        ("set", "a", "hello world"),
        ("get", "a"),
        ("incr", "n"),
        ("rpush", "l", "x", "y"),
        ("lrange", "l", "0", "-1"),
        ("get", "missing"),
        ("lpush", "a", "x"),
        ("nosuch",),
    ]
    for args in script:
        for extra in ((), ("--no-raw",), ("-3",)):
            assert cli(rq_server.port, *extra, *args) == cli(redis_ref.port, *extra, *args), (extra, args)


@needs_cli
def test_redis_cli_pipe_mass_insert(rq_server, redis_ref):
    lines = "".join(f"SET key:{i} value:{i}\r\n" for i in range(10_000))
    for port in (rq_server.port, redis_ref.port):
        cli(port, "flushall")
        out = cli(port, "--pipe", stdin=lines)
        assert "errors: 0, replies: 10000" in out, out
        assert cli(port, "dbsize").strip() == "10000"
        assert cli(port, "get", "key:9999").strip() == "value:9999"


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-benchmark is not installed (apt-get install redis-tools)")
def test_redis_benchmark_runs(rq_server):
    p = subprocess.run(
        ["redis-benchmark", "-p", str(rq_server.port), "-t", "set,get,incr,lpush,lpop,sadd,hset,zadd,zpopmin", "-n", "2000", "-q"],
        capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "requests per second" in p.stdout
    assert "ERR" not in p.stdout and "error" not in p.stderr.lower(), p.stdout + p.stderr

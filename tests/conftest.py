"""Fixtures: a real respqueue process, a real redis-server, and clients for both.

``diff`` sends the same commands to both servers over raw sockets and
compares the replies byte for byte (error texts included).
"""

from __future__ import annotations

import faulthandler
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from .servers import ROOT, RawConn, ServerProcess, compile_sources, redis_server_path, start_redis, start_respqueue

_STDERR: Any = None  # the terminal's stderr, kept before pytest captures fd 2 around each test


def pytest_configure(config: pytest.Config) -> None:
    global _STDERR
    compile_sources()
    _STDERR = os.fdopen(os.dup(2), "w")


def watchdog_limit(item: pytest.Item) -> float:
    """Seconds a test (setup, call and teardown) may take before the watchdog ends the run: twice its
    pytest-timeout limit plus a minute, or RESPQUEUE_TEST_WATCHDOG."""
    if os.environ.get("RESPQUEUE_TEST_WATCHDOG"):
        return float(os.environ["RESPQUEUE_TEST_WATCHDOG"])
    marker = item.get_closest_marker("timeout")
    try:
        limit = float(marker.args[0]) if marker is not None and marker.args else float(item.config.getini("timeout"))
    except (ValueError, TypeError):  # pytest-timeout not installed
        limit = 120.0
    return 2 * limit + 60


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A watchdog behind pytest-timeout. Its one SIGALRM cannot end every hang: an exception raised in an
    event loop's callback is logged and dropped, and cleanup code after it (a wait on a child, a loop's
    shutdown) can block for good. A test still running at ``watchdog_limit`` gets every thread's stack
    printed to the terminal and the run ends (exit 1) instead of stalling until CI's own limit."""
    faulthandler.dump_traceback_later(watchdog_limit(item), exit=True, file=_STDERR)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def rq_server() -> Iterator[ServerProcess]:
    srv = start_respqueue()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def redis_ref() -> Iterator[ServerProcess]:
    if redis_server_path() is None:
        pytest.skip("reference redis-server is not installed (apt-get install redis-server)")
    srv = start_redis()
    yield srv
    srv.stop()


@pytest.fixture
def r(rq_server: ServerProcess) -> Iterator[redis.Redis]:
    """A redis-py client on a freshly flushed respqueue."""
    client = redis.Redis(port=rq_server.port, socket_timeout=10)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def ref(redis_ref: ServerProcess) -> Iterator[redis.Redis]:
    """A redis-py client on a freshly flushed reference Redis."""
    client = redis.Redis(port=redis_ref.port, socket_timeout=10)
    client.flushall()
    yield client
    client.close()


class Diff:
    """Send each command to respqueue and to Redis; the raw replies must match."""

    def __init__(self, rq_port: int, ref_port: int, resp3: bool = False) -> None:
        self.rq = RawConn(rq_port)
        self.ref = RawConn(ref_port)
        self.log: list[tuple[Any, ...]] = []
        for conn in (self.rq, self.ref):
            conn.call_raw("FLUSHALL")
            if resp3:
                conn.call_raw("HELLO", "3")

    def both(self, *args: Any) -> tuple[bytes, bytes]:
        self.log.append(args)
        return self.rq.call_raw(*args), self.ref.call_raw(*args)

    def __call__(self, *args: Any) -> bytes:
        """Run a command on both servers, assert identical bytes, return them."""
        got, want = self.both(*args)
        assert got == want, f"{args!r}\n respqueue: {got!r}\n     redis: {want!r}\n history: {self.log[-10:]!r}"
        return got

    def unordered(self, *args: Any) -> list[Any]:
        """For replies whose element order Redis leaves undefined: compare sorted."""
        import hiredis

        got, want = self.both(*args)

        def parse(b: bytes) -> Any:
            rd = hiredis.Reader()
            rd.feed(b)
            return rd.gets()

        g, w = parse(got), parse(want)
        if isinstance(g, list) and isinstance(w, list):
            assert sorted(map(repr, g)) == sorted(map(repr, w)), f"{args!r}\n respqueue: {g!r}\n     redis: {w!r}"
        else:
            assert got == want, f"{args!r}\n respqueue: {got!r}\n     redis: {want!r}"
        return g

    def close(self) -> None:
        self.rq.close()
        self.ref.close()


@pytest.fixture
def diff(rq_server: ServerProcess, redis_ref: ServerProcess) -> Iterator[Diff]:
    d = Diff(rq_server.port, redis_ref.port)
    yield d
    d.close()


@pytest.fixture
def diff3(rq_server: ServerProcess, redis_ref: ServerProcess) -> Iterator[Diff]:
    d = Diff(rq_server.port, redis_ref.port, resp3=True)
    yield d
    d.close()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] Spark session for the whole run (analytics and enqueue tests); the modules
    that use it skip themselves when pyspark or Java is missing."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    from compat.analytics.job import build_session

    s = build_session("local[2]", app="respqueue-tests")
    yield s
    s.stop()

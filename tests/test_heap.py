"""The C heap's free pages go back to the system after the store's load and once the server is idle
(respqueue/heap.py): a real server, big values written among small ones and deleted (holes glibc keeps)."""

from __future__ import annotations

import time

import pytest
import redis

from respqueue import heap

from .servers import start_respqueue

pytestmark = pytest.mark.skipif(not heap._load(), reason="no glibc malloc_trim on this system")


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _trims(r: redis.Redis) -> int:
    return int(r.info("memory")["heap_trims"])


def test_an_idle_server_gives_freed_memory_back() -> None:
    srv = start_respqueue("--durability", "memory", "--heap-trim-idle", "300")
    try:
        r = redis.Redis(port=srv.port)
        p = r.pipeline(transaction=False)
        for i in range(6000):
            p.set(f"big:{i}", b"x" * 8000)  # from malloc's heap (over 512 bytes, under its mmap threshold)
            p.set(f"small:{i}", b"y" * 600)  # kept: the big values' pages cannot go back from the heap's top
        p.execute()
        before = _trims(r)
        full = _rss(srv.proc.pid)
        for i in range(0, 6000, 500):
            r.delete(*[f"big:{j}" for j in range(i, i + 500)])
        freed = _rss(srv.proc.pid)
        assert full - freed < 20 << 20  # free() alone gave little of the ~48 MB back
        deadline = time.monotonic() + 15
        while _trims(r) == before:  # (INFO is a command: the idle time starts again after each poll)
            assert time.monotonic() < deadline, "no trim after the server went idle"
            time.sleep(1.5)
        assert _rss(srv.proc.pid) < freed - (20 << 20)
        assert r.dbsize() == 6000 and r.get("small:5999") == b"y" * 600
    finally:
        srv.stop()


def test_idle_trim_runs_once_per_idle_spell() -> None:
    it = heap.IdleTrim(1000)
    assert not it.tick(5, 100.0) and not it.done  # a command ran: busy
    assert not it.tick(5, 100.5) and not it.done  # idle 0.5 s
    it.tick(5, 101.2)  # idle 1.2 s: trims (True only when pages went back)
    assert it.done
    assert not it.tick(5, 105.0)  # still idle: not again
    assert not it.tick(6, 106.0) and not it.done  # busy again
    it.tick(6, 107.1)
    assert it.done
    off = heap.IdleTrim(0)
    off.tick(1, 1.0)
    assert not off.tick(1, 100.0) and not off.done

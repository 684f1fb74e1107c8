"""Shared helpers for the benchmarks: start respqueue and redis-server side by side."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from tests.servers import free_port, respqueue_argv, respqueue_env, wait_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Proc:
    def __init__(self, name: str, argv: list[str], port: int, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.port = port
        self.workdir = tempfile.mkdtemp(prefix=f"bench-{name}-")
        self.proc = subprocess.Popen(argv + [], cwd=self.workdir, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_split(self) -> tuple[float, float]:
        """User+system CPU seconds used so far by the server process itself (respqueue: its event
        loop) and by its live child processes (respqueue: the writer)."""
        ticks = os.sysconf("SC_CLK_TCK")
        out = [0, 0]
        for i, pid in enumerate([self.pid, *_children(self.pid)]):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    parts = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[min(i, 1)] += int(parts[11]) + int(parts[12])
        return out[0] / ticks, out[1] / ticks

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_respqueue(*extra: str) -> Proc:
    port = free_port()
    return Proc("respqueue", respqueue_argv(port, "data", "--log-level", "warning", *extra), port, respqueue_env())


def start_redis(*extra: str) -> Proc:
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", *extra]
    return Proc("redis", argv, port)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
    except OSError:
        pass
    return out


def machine() -> str:
    return f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"

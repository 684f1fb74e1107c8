"""A respqueue master with replicas and real ``redis-sentinel`` processes on loopback.

Used by tests/test_sentinel.py and interop/bench/failover.py. Every node is a respqueue process
(``python -m respqueue serve``) with its own data directory; the sentinels monitor the set
``mymaster`` with a quorum of 2, ``down-after-milliseconds 2000`` (see DOWN_AFTER_MS) and
``failover-timeout 3000``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from typing import Any

from tests.servers import respqueue_argv, respqueue_env

NAME = "mymaster"
# Not 1000: Sentinel pings every min(down-after, 1000) ms and, when it switches to a new master, sends
# the first PING to it only a period after creating the link, whose clock starts at creation; with
# down-after 1000 a healthy, freshly promoted master is seen down for an instant, and two sentinels seeing
# that at once fail it over again (a split brain that loses what it acknowledged meanwhile).
DOWN_AFTER_MS = 2000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sentinel_path() -> str | None:
    return shutil.which("redis-sentinel")


def call(port: int, *args: str, timeout: float = 2.0) -> Any:
    """One command on 127.0.0.1:port (hiredis-parsed reply); raises OSError when nothing answers."""
    import hiredis

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args))
        rd = hiredis.Reader()
        while True:
            data = s.recv(1 << 16)
            if not data:
                raise OSError("connection closed")
            rd.feed(data)
            r = rd.gets()
            if r is not False:
                return r


def until(cond: Any, timeout: float, what: str) -> Any:
    deadline = time.time() + timeout
    while True:
        try:
            v = cond()
            if v:
                return v
        except (OSError, ValueError):
            pass
        if time.time() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


class Lines(threading.Thread):
    """A driver process's stdout lines, in order, read in the background."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        super().__init__(daemon=True)
        self.proc = proc
        self.lines: list[str] = []

    def run(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def has(self, prefix: str) -> bool:
        """Whether a line starting with ``prefix`` was read."""
        return any(x.startswith(prefix) for x in self.lines)

    def first_completion_after(self, t: float) -> float | None:
        """Wall-clock time of the first `completed` line stamped after ``t``, or None."""
        for x in list(self.lines):
            f = x.split()
            if f[0] == "completed" and len(f) > 2 and int(f[2]) / 1000 > t:
                return int(f[2]) / 1000
        return None


class Cluster:
    def __init__(self, replicas: int = 2, sentinels: int = 3, node_args: tuple[str, ...] = ()) -> None:
        self.dir = tempfile.mkdtemp(prefix="rq-sentinel-")
        self.node_args = node_args
        self.nodes: dict[int, subprocess.Popen[bytes]] = {}
        self.sentinels: dict[int, subprocess.Popen[bytes]] = {}
        self.env = respqueue_env()
        master = free_port()
        self.start_node(master)
        for _ in range(replicas):
            self.start_node(free_port(), master)
        until(lambda: len(call(master, "ROLE")[2]) == replicas, 30, "the replicas to sync")
        for _ in range(sentinels):
            self._start_sentinel(master)
        # every sentinel knows the replicas and the other sentinels
        for sp in self.sentinels:
            until(
                lambda sp=sp: len(call(sp, "SENTINEL", "REPLICAS", NAME)) == replicas, 30, "sentinels to see replicas"
            )
            until(
                lambda sp=sp: len(call(sp, "SENTINEL", "SENTINELS", NAME)) == sentinels - 1,
                30,
                "sentinels to see each other",
            )

    @property
    def sentinel_ports(self) -> list[int]:
        return list(self.sentinels)

    def start_node(self, port: int, replicaof: int | None = None) -> None:
        d = os.path.join(self.dir, f"node-{port}")
        os.makedirs(d, exist_ok=True)
        argv = respqueue_argv(port, os.path.join(d, "data"), *self.node_args)
        if replicaof is not None:
            argv += ["--replicaof", f"127.0.0.1 {replicaof}"]
        log = open(os.path.join(d, "server.log"), "ab")
        self.nodes[port] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=d, env=self.env)
        log.close()
        until(lambda: call(port, "PING") == b"PONG", 30, f"node {port} to start")

    def _start_sentinel(self, master: int) -> None:
        port = free_port()
        d = os.path.join(self.dir, f"sentinel-{port}")
        os.makedirs(d)
        conf = os.path.join(d, "sentinel.conf")
        with open(conf, "w") as f:
            f.write(
                f"port {port}\nbind 127.0.0.1\ndir {d}\n"
                f"sentinel monitor {NAME} 127.0.0.1 {master} 2\n"
                f"sentinel down-after-milliseconds {NAME} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {NAME} 3000\n"
                f"sentinel parallel-syncs {NAME} 2\n"
            )
        log = open(os.path.join(d, "sentinel.log"), "ab")
        self.sentinels[port] = subprocess.Popen(
            [sentinel_path() or "redis-sentinel", conf], stdout=log, stderr=subprocess.STDOUT, cwd=d
        )
        log.close()
        until(lambda: call(port, "PING") == b"PONG", 30, f"sentinel {port} to start")

    def master(self) -> int:
        """The master's port, as the sentinels report it (most of them)."""
        votes: dict[int, int] = {}
        for sp in self.sentinels:
            try:
                addr = call(sp, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", NAME)
                votes[int(addr[1])] = votes.get(int(addr[1]), 0) + 1
            except OSError:
                pass
        return max(votes, key=lambda p: votes[p])

    def kill(self, port: int) -> None:
        p = self.nodes.pop(port)
        p.send_signal(signal.SIGKILL)
        p.wait()

    def wait_new_master(self, old: int, timeout: float = 60) -> int:
        """Wait until every sentinel names a master other than ``old`` that says it is one."""

        def switched() -> int | None:
            ports = set()
            for sp in self.sentinels:
                ports.add(int(call(sp, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", NAME)[1]))
            if len(ports) != 1 or old in ports:
                return None
            p = ports.pop()
            return p if call(p, "ROLE")[0] == b"master" else None

        return until(switched, timeout, "the sentinels to promote a replica")

    def wait_replica(self, port: int, timeout: float = 60) -> None:
        """Wait until node ``port`` is a synchronised replica of the master the sentinels name (a loaded
        machine may see an extra failover: the master is looked up each time)."""

        def synced() -> bool:
            master = self.master()
            if call(master, "ROLE")[0] != b"master":
                return False
            role = call(port, "ROLE")
            return role[0] == b"slave" and role[2] == master and role[3] == b"connected"

        until(synced, timeout, f"node {port} to become a replica")

    def close(self) -> None:
        for p in [*self.sentinels.values(), *self.nodes.values()]:
            if p.poll() is None:
                p.terminate()
        for p in [*self.sentinels.values(), *self.nodes.values()]:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        if not os.environ.get("RQ_KEEP_CLUSTER"):  # set it to keep the logs of a failed run
            shutil.rmtree(self.dir, ignore_errors=True)

"""Clusters for the cluster tests: a real Redis Cluster (redis-server --cluster-enabled yes, created with
redis-cli --cluster create) and respqueue nodes (a cluster file, or ``serve --shards N`` under its supervisor)."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time

from .servers import RawConn, ServerProcess, redis_argv, respqueue_argv, respqueue_env, wait_port


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_range(n: int, bus: bool = False) -> int:
    """A base port P with P..P+n-1 free (and P+10000.. too when ``bus``: Redis Cluster's bus ports)."""
    for _ in range(500):
        base = random.randint(20000, 30000 if bus else 60000)
        if all(_free(base + k) and (not bus or _free(base + 10000 + k)) for k in range(n)):
            return base
    raise RuntimeError("no free port range")


def redis_cluster_node_argv(exe: str, port: int, workdir: str) -> list[str]:
    """The command line of one real Redis Cluster node on loopback, without persistence (tests and benchmarks)."""
    return [
        *redis_argv(exe, port, workdir),
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        os.path.join(workdir, "nodes.conf"),
    ]


def cluster_info(port: int) -> dict[str, str]:
    c = RawConn(port)
    try:
        c.send("CLUSTER", "INFO")
        raw = c.read_raw()
    finally:
        c.close()
    body = raw.split(b"\r\n", 1)[1].decode()
    return dict(line.split(":", 1) for line in body.split("\r\n") if ":" in line)


class RedisCluster:
    """``n`` redis-server masters on loopback joined by ``redis-cli --cluster create``."""

    def __init__(self, n: int = 3) -> None:
        base = free_port_range(n, bus=True)
        self.ports = [base + k for k in range(n)]
        self.procs: list[ServerProcess] = []
        exe = shutil.which("redis-server")
        assert exe is not None
        for p in self.ports:
            wd = tempfile.mkdtemp(prefix="redis-cluster-")
            argv = redis_cluster_node_argv(exe, p, wd)
            self.procs.append(ServerProcess(argv, p, wd))
        addrs = [f"127.0.0.1:{p}" for p in self.ports]
        r = subprocess.run(
            ["redis-cli", "--cluster", "create", *addrs, "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if r.returncode != 0:
            self.stop()
            raise RuntimeError("redis-cli --cluster create failed: " + r.stdout + r.stderr)
        deadline = time.time() + 30
        while time.time() < deadline:
            if all(cluster_info(p).get("cluster_state") == "ok" for p in self.ports):
                # every node must also know every other node's slots
                if all(cluster_info(p).get("cluster_known_nodes") == str(n) for p in self.ports):
                    return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")

    def stop(self) -> None:
        for p in self.procs:
            p.stop()


env = respqueue_env  # the cluster tests' name for it


def write_cluster_file(path: str, ports: list[int], ranges: list[str]) -> None:
    with open(path, "w") as fh:
        for p, r in zip(ports, ranges, strict=True):
            fh.write(f'[[node]]\nhost = "127.0.0.1"\nport = {p}\nslots = "{r}"\n\n')


class Shards:
    """``respqueue serve --shards n``: the supervisor process and its n shards on base..base+n-1."""

    def __init__(self, n: int, *extra: str, workdir: str | None = None, base: int | None = None) -> None:
        self.n = n
        self.base = base or free_port_range(n)
        self.ports = [self.base + k for k in range(n)]
        self.workdir = workdir or tempfile.mkdtemp(prefix="rq-shards-")
        self.dir = os.path.join(self.workdir, "data")
        self.log_path = os.path.join(self.workdir, "supervisor.log")
        self.log = open(self.log_path, "ab")
        argv = respqueue_argv(self.base, self.dir, "--shards", str(n), *extra)
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, cwd=self.workdir, env=env())
        try:
            for p in self.ports:
                wait_port(p, self.proc, timeout=60)
        except Exception:
            self.stop()
            raise

    def stop(self, timeout: float = 40) -> int | None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def output(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")


def shard_pid(port: int) -> int:
    """The pid of the shard serving ``port`` (INFO server's process_id)."""
    c = RawConn(port)
    try:
        c.send("INFO", "server")
        raw = c.read_raw().decode()
    finally:
        c.close()
    for line in raw.split("\r\n"):
        if line.startswith("process_id:"):
            return int(line.split(":")[1])
    raise RuntimeError("no process_id in INFO")

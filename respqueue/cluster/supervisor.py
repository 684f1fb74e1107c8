"""``respqueue serve --shards N``: N shard processes on one machine, presented as one Redis Cluster.

Shard K listens on ``--port`` + K and keeps its own store in ``--dir``/shard-K. The parent writes the
cluster file (``--dir``/cluster.toml: the slots split evenly, as ``redis-cli --cluster create`` splits them)
unless ``--cluster-config`` names one, starts the shards, restarts one that dies (it reloads its store),
and stops them all on SIGTERM/SIGINT or when one of them stops cleanly (SHUTDOWN).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import fields
from typing import Any

from ..config import Config
from .slots import split_even
from .topology import build, load_file, write_file

log = logging.getLogger("respqueue")

RESTART_WINDOW_S = 30.0  # a shard that dies this many times within this window is not restarted again
RESTART_LIMIT = 5


def parse_shards(v: str) -> int:
    if v.strip().lower() == "auto":
        return os.cpu_count() or 1
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"--shards must be a number or auto, not {v!r}") from None
    if not 1 <= n <= 1024:
        raise ValueError("--shards must be from 1 to 1024")
    return n


def announce_host(cfg: Config) -> str:
    if cfg.cluster_announce_ip:
        return cfg.cluster_announce_ip
    host = (cfg.host or "127.0.0.1").split()[0]
    return "127.0.0.1" if host in ("0.0.0.0", "::", "*") else host


def serve_cluster(cfg: Config, argv: list[str] | None = None) -> int:
    """Run one cluster node (``--shards 1``) or a supervisor of N shards; returns the exit code."""
    try:
        if cfg.cluster_enabled not in ("yes", "no"):
            raise ValueError("--cluster-enabled must be yes or no")
        n = parse_shards(cfg.shards)
        if (n > 1 or cfg.cluster_config) and not cfg.port:
            raise ValueError("cluster mode with --shards or --cluster-config needs a fixed --port")
        if n == 1:
            if cfg.cluster_config:
                build(cfg, cfg.port)  # the file is readable and names this node
        else:
            if cfg.port + n - 1 > 65535:
                raise ValueError(f"ports {cfg.port}..{cfg.port + n - 1} go past 65535")
            if cfg.unixsocket:
                raise ValueError("--unixsocket cannot be used with --shards")
            for k in range(n):
                if cfg.cluster_config:
                    c2 = Config(**{f.name: getattr(cfg, f.name) for f in fields(Config)})
                    c2.port = cfg.port + k
                    build(c2, c2.port)
    except ValueError as e:
        print(f"respqueue: bad configuration: {e}", file=sys.stderr)
        return 2
    if n == 1:
        from ..server import run

        return run(cfg)
    return Supervisor(cfg, n).run()


def cluster_file_for(cfg: Config, n: int) -> str:
    """The cluster file the shards share: ``--cluster-config``, or ``--dir``/cluster.toml, written when it is
    missing or names other nodes than these N shards."""
    if cfg.cluster_config:
        return cfg.cluster_config
    os.makedirs(cfg.dir, exist_ok=True)
    path = os.path.join(cfg.dir, "cluster.toml")
    host = announce_host(cfg)
    want = [(host, cfg.port + k) for k in range(n)]
    try:
        have = [(node.host, node.port) for node, _ in load_file(path)]
    except ValueError:
        have = []
    if have != want:
        write_file(path, [(h, p, [r]) for (h, p), r in zip(want, split_even(n), strict=True)])
    return os.path.abspath(path)


def _term_with_parent() -> None:
    """In a shard, before exec: SIGTERM it (a clean stop) if the supervisor dies (Linux PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Supervisor:
    def __init__(self, cfg: Config, n: int) -> None:
        self.cfg = cfg
        self.n = n
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * n
        self.deaths: list[list[float]] = [[] for _ in range(n)]
        self.stopping = False
        self.exit_code = 0

    def child_env(self, k: int, cluster_file: str) -> dict[str, str]:
        env = dict(os.environ)
        for f in fields(Config):
            env.pop("RESPQUEUE_" + f.name.upper(), None)
            v = getattr(self.cfg, f.name)
            if v is not None:
                env["RESPQUEUE_" + f.name.upper()] = str(v)
        env["RESPQUEUE_CONFIG"] = ""  # its settings are in the variables above already
        env["RESPQUEUE_PORT"] = str(self.cfg.port + k)
        env["RESPQUEUE_DIR"] = os.path.join(os.path.abspath(self.cfg.dir), f"shard-{k}")
        env["RESPQUEUE_CLUSTER_CONFIG"] = cluster_file
        env["RESPQUEUE_CLUSTER_ENABLED"] = "yes"
        env["RESPQUEUE_SHARDS"] = "1"
        if self.cfg.backup_to:
            # each shard backs up into its own sub-prefix, beside the cluster file (cluster/backup.py's layout)
            from .backup import join

            env["RESPQUEUE_BACKUP_TO"] = join(self.cfg.backup_to, f"shard-{k}")
        return env

    def spawn(self, k: int) -> None:
        self.procs[k] = subprocess.Popen(
            [sys.executable, "-m", "respqueue", "serve"],
            env=self.child_env(k, self.cluster_file),
            preexec_fn=_term_with_parent,
        )
        log.info("shard %d: pid %d, port %d", k, self.procs[k].pid, self.cfg.port + k)  # type: ignore[union-attr]

    def request_stop(self, signum: int = 0, frame: Any = None) -> None:
        self.stopping = True

    def run(self) -> int:
        self.cluster_file = cluster_file_for(self.cfg, self.n)
        log.info(
            "respqueue: %d shards on ports %d-%d, cluster file %s",
            self.n,
            self.cfg.port,
            self.cfg.port + self.n - 1,
            self.cluster_file,
        )
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        for k in range(self.n):
            self.spawn(k)
        try:
            while not self.stopping:
                time.sleep(0.1)
                self.check_children()
        finally:
            self.stop_all()
        return self.exit_code

    def check_children(self) -> None:
        for k, p in enumerate(self.procs):
            if p is None or p.poll() is None:
                continue
            rc = p.returncode
            if rc == 0:
                # a clean stop (SHUTDOWN, or SIGTERM sent to the shard): the whole cluster stops
                log.info("shard %d stopped; stopping the other shards", k)
                self.stopping = True
                return
            now = time.monotonic()
            d = [t for t in self.deaths[k] if now - t < RESTART_WINDOW_S] + [now]
            self.deaths[k] = d
            if len(d) >= RESTART_LIMIT:
                log.error("shard %d died %d times in %ds (exit %s); stopping", k, len(d), RESTART_WINDOW_S, rc)
                self.exit_code = 1
                self.stopping = True
                return
            log.warning("shard %d (pid %d) died (exit %s); restarting it", k, p.pid, rc)
            self.spawn(k)

    def stop_all(self) -> None:
        live = [p for p in self.procs if p is not None and p.poll() is None]
        for p in live:
            try:
                p.terminate()
            except OSError:
                pass
        deadline = time.monotonic() + 30
        for p in live:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

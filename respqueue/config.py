"""Server configuration: defaults, TOML file, RESPQUEUE_* environment, flags.

Precedence, lowest first: built-in defaults, ``--config FILE`` (TOML), the
``RESPQUEUE_<NAME>`` environment variables, command-line flags. CONFIG GET and
CONFIG SET see the same values under their Redis names (see ``PARAMS``).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields
from typing import Any

MB = 1024 * 1024


@dataclass
class Config:
    host: str = "127.0.0.1"
    port: int = 6379
    unixsocket: str | None = None
    dir: str = "./respqueue-data"
    requirepass: str | None = None
    maxclients: int = 10000
    timeout: int = 0
    log_level: str = "info"
    databases: int = 16
    proto_max_bulk_len: int = 512 * MB
    client_query_buffer_limit: int = 1024 * MB
    output_pause_bytes: int = 4 * MB
    pubsub_output_limit: int = 32 * MB
    lua_time_limit: int = 5000
    slowlog_log_slower_than: int = 10000
    slowlog_max_len: int = 128
    hz: int = 10
    durability: str = "durable"  # durable, buffered or memory (see docs/STORAGE.md)
    buffer_ms: int = 10  # buffered mode: commit at least this often
    buffer_writes: int = 1000  # buffered mode: or after this many changes
    writer: str = "auto"  # who writes the store: process, thread, or auto (process)
    backup_to: str | None = None  # scheduled backups: a directory or s3://bucket/prefix (docs/BACKUPS.md)
    backup_interval: int = 3600  # seconds between scheduled backups
    backup_keep: int = 7  # scheduled backups kept; older ones are deleted
    history: str = "on"  # job history capture (compat/history.py): on or off
    history_retention: str = "7d"  # job history kept this long: 3600s, 90m, 12h, 7d (0: forever)
    native_scripts: str = "on"  # on|off: native fast paths for BullMQ's hot scripts (compat/scripts.py)
    # replication (respqueue/replication/, docs/REPLICATION.md)
    replicaof: str | None = None  # "host port": start as a replica of that master
    masterauth: str | None = None  # password (and user) a replica AUTHs to its master with
    masteruser: str | None = None
    repl_backlog_size: int = 1024 * 1024  # bytes of the replication stream kept for partial resyncs
    replica_ack: int = 0  # durable mode: a write's reply waits until this many replicas committed it
    replica_priority: int = 100  # Sentinel's promotion order (0: never promoted)
    repl_ping_replica_period: int = 10  # seconds between the master's heartbeats to its replicas
    repl_timeout: int = 60  # a replica drops its link after this long without a byte from its master

    @classmethod
    def load(cls, flags: dict[str, Any] | None = None, environ: dict[str, str] | None = None) -> Config:
        """Build a Config from a TOML file, the environment and flags."""
        flags = {k: v for k, v in (flags or {}).items() if v is not None}
        env = os.environ if environ is None else environ
        cfg = cls()
        names = {f.name: f for f in fields(cls)}
        path = flags.get("config") or env.get("RESPQUEUE_CONFIG")
        if path:
            try:
                with open(path, "rb") as fh:
                    data = tomllib.load(fh)
            except OSError as e:
                raise ValueError(f"cannot read config file {path}: {e.strerror or e}") from None
            except tomllib.TOMLDecodeError as e:
                raise ValueError(f"{path} is not valid TOML: {e}") from None
            cfg.config_path = path  # CONFIG REWRITE writes the replication role back here
            for k, v in data.items():
                k = k.replace("-", "_")
                if k not in names:
                    raise ValueError(f"{path}: unknown setting '{k}'")
                setattr(cfg, k, _coerce(names[k].type, v, f"{path}: setting '{k}'"))
        for k, f in names.items():
            ev = env.get("RESPQUEUE_" + k.upper())
            if ev is not None and ev != "":
                setattr(cfg, k, _coerce(f.type, ev, "environment variable RESPQUEUE_" + k.upper()))
        for k, v in flags.items():
            if k in names:
                setattr(cfg, k, _coerce(names[k].type, v, "--" + k.replace("_", "-")))
        return cfg


def _coerce(t: Any, v: Any, where: str = "value") -> Any:
    ts = str(t)
    if "int" in ts:
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise ValueError(f"{where} must be an integer, not {v!r}")
        try:
            return int(v)
        except ValueError:
            raise ValueError(f"{where} must be an integer, not {v!r}") from None
    if "str" in ts:
        if v is not None and not isinstance(v, (str, int, float)):
            raise ValueError(f"{where} must be a string, not {v!r}")
        return None if v is None else str(v)
    return v


def parse_memory(v: bytes | str) -> int:
    """Parse a Redis memory value: 1gb, 512mb, 100k, 1024."""
    s = v.decode() if isinstance(v, bytes) else v
    s = s.strip().lower()
    units = {"b": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2, "g": 1000**3, "gb": 1024**3}
    for u in sorted(units, key=len, reverse=True):
        if s.endswith(u):
            return int(s[: -len(u)]) * units[u]
    return int(s)


# Redis parameter name -> (Config attribute or None, default, kind, mutable).
# Parameters without an attribute are accepted and reported with their value.
PARAMS: dict[str, tuple[str | None, Any, str, bool]] = {
    "bind": ("host", None, "str", False),
    "port": ("port", None, "int", False),
    "unixsocket": ("unixsocket", None, "str", False),
    "dir": ("dir", None, "str", False),
    "requirepass": ("requirepass", None, "str", True),
    "maxclients": ("maxclients", None, "int", True),
    "timeout": ("timeout", None, "int", True),
    "databases": ("databases", None, "int", False),
    "proto-max-bulk-len": ("proto_max_bulk_len", None, "memory", True),
    "client-query-buffer-limit": ("client_query_buffer_limit", None, "memory", True),
    "lua-time-limit": ("lua_time_limit", None, "int", True),
    "busy-reply-threshold": ("lua_time_limit", None, "int", True),
    "slowlog-log-slower-than": ("slowlog_log_slower_than", None, "int", True),
    "slowlog-max-len": ("slowlog_max_len", None, "int", True),
    "hz": ("hz", None, "int", True),
    "loglevel": ("log_level", None, "str", True),
    "maxmemory": (None, "0", "memory", True),
    "maxmemory-policy": (None, "noeviction", "str", True),
    "save": (None, "", "str", True),
    "appendonly": (None, "no", "str", True),
    "appendfsync": (None, "everysec", "str", True),
    "notify-keyspace-events": (None, "", "str", True),
    "client-output-buffer-limit": (None, "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", "str", True),
    "hash-max-listpack-entries": (None, "512", "int", True),
    "hash-max-listpack-value": (None, "64", "int", True),
    "hash-max-ziplist-entries": (None, "512", "int", True),
    "hash-max-ziplist-value": (None, "64", "int", True),
    "set-max-intset-entries": (None, "512", "int", True),
    "zset-max-listpack-entries": (None, "128", "int", True),
    "zset-max-listpack-value": (None, "64", "int", True),
    "zset-max-ziplist-entries": (None, "128", "int", True),
    "zset-max-ziplist-value": (None, "64", "int", True),
    "list-max-listpack-size": (None, "-2", "int", True),
    "list-max-ziplist-size": (None, "-2", "int", True),
    "list-compress-depth": (None, "0", "int", True),
    "stream-node-max-bytes": (None, "4096", "memory", True),
    "stream-node-max-entries": (None, "100", "int", True),
    "tcp-keepalive": (None, "300", "int", True),
    "lazyfree-lazy-user-flush": (None, "no", "str", True),
    "activerehashing": (None, "yes", "str", True),
    "protected-mode": (None, "no", "str", True),
    "replicaof": ("replicaof", None, "str", False),
    "slaveof": ("replicaof", None, "str", False),
    "masterauth": ("masterauth", None, "str", True),
    "masteruser": ("masteruser", None, "str", True),
    "repl-backlog-size": ("repl_backlog_size", None, "memory", False),
    "replica-priority": ("replica_priority", None, "int", True),
    "slave-priority": ("replica_priority", None, "int", True),
    "repl-ping-replica-period": ("repl_ping_replica_period", None, "int", True),
    "repl-timeout": ("repl_timeout", None, "int", True),
    "replica-read-only": (None, "yes", "str", False),
    "min-replicas-to-write": (None, "0", "int", True),
}

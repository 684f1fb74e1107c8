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
    metrics_port: int = 0  # HTTP port of /metrics and the dashboard (respqueue/http); 0: off
    metrics_host: str | None = None  # address(es) of that HTTP server; default: the server's host
    # TLS as Redis 7 (respqueue/tls.py): a TLS listener on tls_port beside the plain port (0: none)
    tls_port: int = 0
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_key_file_pass: str | None = None
    tls_ca_cert_file: str | None = None
    tls_ca_cert_dir: str | None = None
    tls_auth_clients: str = "yes"  # yes (a client certificate is required), optional or no
    tls_protocols: str | None = None  # e.g. "TLSv1.2 TLSv1.3" (the default: both)
    tls_ciphers: str | None = None  # TLSv1.2 cipher list, OpenSSL syntax
    tls_replication: str = "no"  # replication links over TLS (tls.client_context)
    tls_client_cert_file: str | None = None  # outgoing links' certificate (default: tls_cert_file)
    tls_client_key_file: str | None = None
    tls_client_key_file_pass: str | None = None
    # memory limits as Redis (respqueue/memory.py); maxmemory takes units: 100mb, 1gb
    maxmemory: Any = 0
    maxmemory_policy: str = "noeviction"
    maxmemory_samples: int = 5
    # output buffer limits per client class (respqueue/outbuf.py), Redis's syntax
    client_output_buffer_limit: str = "normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60"
    protected_mode: str = "yes"  # yes|no: refuse non-loopback clients while the default user has no password
    acl_pubsub_default: str = "resetchannels"  # channels of new ACL users: resetchannels or allchannels
    aclfile: str | None = None  # ACL users file (ACL SAVE/LOAD); without one, users persist in <dir>/users.acl
    enable_debug_command: str = "no"  # no|yes|local: DEBUG allowed (local: from 127.0.0.1, ::1, a Unix socket)
    enable_protected_configs: str = "no"  # no|yes|local: CONFIG SET of protected configs (dir)
    enable_module_command: str = "no"  # no|yes|local (there are no modules: MODULE is not implemented)
    cluster_enabled: str = "no"  # yes: Redis Cluster protocol (respqueue/cluster/); implied by cluster_config
    cluster_config: str | None = None  # TOML file naming the cluster's nodes and their slots
    cluster_announce_ip: str | None = None  # the host this node is in the cluster file as (default: --host)
    shards: str = "1"  # serve: this many shard processes (a cluster on one machine), or auto (one per core)
    # replication (respqueue/replication/, docs/REPLICATION.md)
    replicaof: str | None = None  # "host port": start as a replica of that master
    masterauth: str | None = None  # password (and user) a replica AUTHs to its master with
    masteruser: str | None = None
    repl_backlog_size: int = 1024 * 1024  # bytes of the replication stream kept for partial resyncs
    replica_ack: int = 0  # durable mode: a write's reply waits until this many replicas committed it
    replica_priority: int = 100  # Sentinel's promotion order (0: never promoted)
    repl_ping_replica_period: int = 10  # seconds between the master's heartbeats to its replicas
    repl_timeout: int = 60  # a replica drops its link after this long without a byte from its master
    # small hashes untouched this many ms are kept packed (respqueue/coldhash.py); 0: never
    hash_compact_delay: int = 1000
    # the C heap's free pages go back to the system after this many ms without a command (respqueue/heap.py); 0: never
    heap_trim_idle: int = 2000

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
        _check_limits(cfg)
        return cfg


_POLICIES = (
    "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl",
    "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction",
)


def _check_limits(cfg: Config) -> None:
    """Normalise and check the TLS, maxmemory and output buffer settings (ValueError when bad)."""
    try:
        cfg.maxmemory = parse_memory(str(cfg.maxmemory))
    except ValueError:
        raise ValueError(f"maxmemory must be a memory value (bytes, or 100mb, 1gb...), not {cfg.maxmemory!r}") from None
    cfg.maxmemory_policy = cfg.maxmemory_policy.lower()
    if cfg.maxmemory_policy not in _POLICIES:
        raise ValueError("maxmemory-policy must be one of " + ", ".join(_POLICIES))
    if not 1 <= cfg.maxmemory_samples <= 2**31 - 1:
        raise ValueError("maxmemory-samples must be between 1 and 2147483647")
    for name in ("tls_auth_clients", "tls_replication"):
        v = str(getattr(cfg, name)).lower()
        ok = ("yes", "no", "optional") if name == "tls_auth_clients" else ("yes", "no")
        if v not in ok:
            raise ValueError(f"{name.replace('_', '-')} must be {' or '.join(ok)}, not {v!r}")
        setattr(cfg, name, v)
    if not 0 <= cfg.tls_port <= 65535:
        raise ValueError("tls-port must be between 0 and 65535")
    from .outbuf import format_limits, parse_limits

    try:
        cfg.client_output_buffer_limit = format_limits(parse_limits(cfg.client_output_buffer_limit))
    except ValueError as e:
        raise ValueError(f"client-output-buffer-limit: {e}") from None


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
    "maxmemory": ("maxmemory", None, "memory", True),
    "maxmemory-policy": ("maxmemory_policy", None, "str", True),
    "maxmemory-samples": ("maxmemory_samples", None, "int", True),
    "save": (None, "", "str", True),
    "appendonly": (None, "no", "str", True),
    "appendfsync": (None, "everysec", "str", True),
    "notify-keyspace-events": (None, "", "str", True),
    "client-output-buffer-limit": ("client_output_buffer_limit", None, "str", True),
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
    "tls-port": ("tls_port", None, "int", True),
    "tls-cert-file": ("tls_cert_file", None, "str", True),
    "tls-key-file": ("tls_key_file", None, "str", True),
    "tls-key-file-pass": ("tls_key_file_pass", None, "str", True),
    "tls-ca-cert-file": ("tls_ca_cert_file", None, "str", True),
    "tls-ca-cert-dir": ("tls_ca_cert_dir", None, "str", True),
    "tls-auth-clients": ("tls_auth_clients", None, "str", True),
    "tls-protocols": ("tls_protocols", None, "str", True),
    "tls-ciphers": ("tls_ciphers", None, "str", True),
    "tls-replication": ("tls_replication", None, "str", True),
    "tls-client-cert-file": ("tls_client_cert_file", None, "str", True),
    "tls-client-key-file": ("tls_client_key_file", None, "str", True),
    "tls-client-key-file-pass": ("tls_client_key_file_pass", None, "str", True),
    "protected-mode": ("protected_mode", None, "str", True),
    "aclfile": ("aclfile", None, "str", False),
    "acllog-max-len": (None, "128", "int", True),
    "acl-pubsub-default": ("acl_pubsub_default", None, "str", True),
    "enable-debug-command": ("enable_debug_command", None, "str", False),
    "enable-protected-configs": ("enable_protected_configs", None, "str", False),
    "enable-module-command": ("enable_module_command", None, "str", False),
    "cluster-enabled": ("cluster_enabled", None, "str", False),
    "cluster-config-file": ("cluster_config", None, "str", False),
    "cluster-announce-ip": ("cluster_announce_ip", None, "str", False),
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

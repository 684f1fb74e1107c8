"""Server commands: INFO, CONFIG, COMMAND, SLOWLOG, TIME, SAVE, SHUTDOWN, MONITOR, DEBUG...

Values of configuration parameters that have no :class:`~respqueue.config.Config`
attribute live in ``server.config_extra`` (created lazily); read any parameter,
whatever its storage, with :func:`get_config`.

The dispatcher does not time commands yet; :func:`slowlog_record` is the hook
it should call after each command with the command's duration.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import resource
import secrets
import sys
import time
from collections import deque
from typing import Any

from .. import __version__
from ..config import PARAMS
from ..errors import NOT_INTEGER, SYNTAX, TIMEOUT_NEGATIVE, wrong_args
from ..glob import compile_glob
from ..resp import NO_REPLY, OK, Push, RedisError, SetReply, Status, Verbatim
from ..tls import RELOADABLE as TLS_RELOADABLE
from .connection import REDIS_VERSION
from .registry import Command, command, container, lookup, subcommand, unique_commands
from .util import INT64_MAX, eq, parse_float, str2int

log = logging.getLogger("respqueue")

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
UINT64_MAX = 2**64 - 1


def _help(lines: list[str]) -> list[Status]:
    return [Status(x.encode()) for x in lines]


# =========================================================================
# CONFIG
# =========================================================================

# alias -> canonical name (both names report and set the same value)
ALIASES: dict[str, str] = {
    "hash-max-ziplist-entries": "hash-max-listpack-entries",
    "hash-max-ziplist-value": "hash-max-listpack-value",
    "zset-max-ziplist-entries": "zset-max-listpack-entries",
    "zset-max-ziplist-value": "zset-max-listpack-value",
    "list-max-ziplist-size": "list-max-listpack-size",
    "lua-time-limit": "busy-reply-threshold",
}

_INT_RANGES: dict[str, tuple[int, int]] = {
    "port": (0, 65535),
    "databases": (1, INT_MAX),
    "maxclients": (1, 4294967295),
    "timeout": (0, INT_MAX),
    "busy-reply-threshold": (0, INT64_MAX),
    "slowlog-log-slower-than": (-1, INT64_MAX),
    "slowlog-max-len": (0, INT64_MAX),
    "hz": (0, INT_MAX),
    "list-max-listpack-size": (INT_MIN, INT_MAX),
    "list-compress-depth": (0, INT_MAX),
    "tcp-keepalive": (0, INT_MAX),
    "maxmemory-samples": (1, INT_MAX),
    "tls-port": (0, 65535),
}
_MEM_RANGES: dict[str, tuple[int, int]] = {
    "proto-max-bulk-len": (1024 * 1024, INT64_MAX),
    "client-query-buffer-limit": (1024 * 1024, INT64_MAX),
    "maxmemory": (0, UINT64_MAX),
}
_ENUMS: dict[str, tuple[str, ...]] = {
    "maxmemory-policy": (
        "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl",
        "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction",
    ),
    "appendfsync": ("everysec", "always", "no"),
    "loglevel": ("debug", "verbose", "notice", "warning"),
    "tls-auth-clients": ("no", "yes", "optional"),
    "acl-pubsub-default": ("allchannels", "resetchannels"),
}
_BOOLS = frozenset({"appendonly", "lazyfree-lazy-user-flush", "activerehashing", "protected-mode", "tls-replication"})
_INT_RANGES["acllog-max-len"] = (0, INT64_MAX)
_PROTECTED = frozenset({"dir"})

_MEM_RE = re.compile(rb"([0-9]*)(b|k|kb|m|mb|g|gb)?", re.IGNORECASE)
_MEM_UNITS = {b"": 1, b"b": 1, b"k": 1000, b"kb": 1024, b"m": 1000**2, b"mb": 1024**2, b"g": 1000**3, b"gb": 1024**3}


def parse_memory_strict(v: bytes) -> int | None:
    """Redis's memtoull: digits then an optional unit; None when invalid."""
    m = _MEM_RE.fullmatch(v)
    if m is None:
        return None
    digits = m.group(1)
    n = int(digits) if digits else 0
    n *= _MEM_UNITS[(m.group(2) or b"").lower()]
    if n > UINT64_MAX:
        return None
    return n


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def config_extra(server: Any) -> dict[str, str]:
    """The values of parameters without a Config attribute, by canonical name."""
    d = getattr(server, "config_extra", None)
    if d is None:
        d = {}
        for name, (attr, default, _kind, _mut) in PARAMS.items():
            if attr is None and name not in ALIASES:
                d[name] = "" if default is None else str(default)
        server.config_extra = d
    return d


def get_config(server: Any, name: str) -> str:
    """The current value of parameter ``name`` as CONFIG GET reports it."""
    name = canonical(name)
    spec = PARAMS.get(name)
    if spec is None:
        raise KeyError(name)
    attr = spec[0]
    if attr is None:
        return config_extra(server)[name]
    cfg = server.config
    if name == "port":
        return str(getattr(server, "tcp_port", cfg.port))
    if name == "tls-port":
        return str(getattr(server, "tls_port", cfg.tls_port))
    if name == "dir":
        return os.path.abspath(cfg.dir)
    v = getattr(cfg, attr)
    if v is None:
        return ""
    if name == "loglevel":
        return "notice" if v == "info" else str(v)
    return str(v)


def _events_normalize(v: bytes) -> str | None:
    """notify-keyspace-events: validate and print as Redis does."""
    all_classes = "g$lshzxetd"
    flags: set[str] = set()
    for ch in v.decode("latin-1"):
        if ch == "A":
            flags.update(all_classes)
        elif ch in "g$lshzxetdKEmn":
            flags.add(ch)
        else:
            return None
    out = ""
    if all(c in flags for c in all_classes):
        out = "A"
    else:
        out = "".join(c for c in "g$lshzxetdn" if c in flags)
    out += "".join(c for c in "KEm" if c in flags)
    return out


def _save_normalize(v: bytes) -> str | None:
    parts = v.split()
    if len(parts) % 2:
        return None
    nums = []
    for p in parts:
        n = str2int(p)
        if n is None or n < 0:
            return None
        nums.append(str(n))
    return " ".join(nums)


def _cobl_normalize(server: Any, v: bytes) -> str:
    parts = v.split()
    if len(parts) % 4:
        raise ValueError("Wrong number of arguments in buffer limit configuration.")
    cur = get_config(server, "client-output-buffer-limit").split()
    classes = {cur[i]: cur[i + 1 : i + 4] for i in range(0, len(cur), 4)}
    for i in range(0, len(parts), 4):
        cls = parts[i].decode("latin-1").lower()
        if cls == "replica":
            cls = "slave"
        if cls not in ("normal", "slave", "pubsub"):
            raise ValueError("Invalid client class specified in buffer limit configuration.")
        hard = parse_memory_strict(parts[i + 1])
        soft = parse_memory_strict(parts[i + 2])
        secs = str2int(parts[i + 3])
        if hard is None or soft is None or secs is None or secs < 0:
            raise ValueError("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
        classes[cls] = [str(hard), str(soft), str(secs)]
    return " ".join(" ".join([k, *classes[k]]) for k in ("normal", "slave", "pubsub") if k in classes)


def _parse_value(server: Any, name: str, kind: str, v: bytes) -> Any:
    """The value to store for ``name``; raises ValueError(reason) when invalid."""
    if kind == "memory" or name in _MEM_RANGES:
        n = parse_memory_strict(v)
        if n is None:
            raise ValueError("argument must be a memory value")
        lo, hi = _MEM_RANGES.get(name, (0, INT64_MAX))
        if n < lo or n > hi:
            raise ValueError(f"argument must be between {lo} and {hi} inclusive")
        return n
    if kind == "int":
        n = str2int(v)
        if n is None:
            raise ValueError("argument couldn't be parsed into an integer")
        lo, hi = _INT_RANGES.get(name, (0, INT64_MAX))
        if n < lo or n > hi:
            raise ValueError(f"argument must be between {lo} and {hi} inclusive")
        if name == "hz":
            n = min(max(n, 1), 500)
        return n
    s = v.decode("utf-8", "surrogateescape")
    if name in _BOOLS:
        low = s.lower()
        if low not in ("yes", "no"):
            raise ValueError("argument must be 'yes' or 'no'")
        return low
    if name in _ENUMS:
        low = s.lower()
        if low not in _ENUMS[name]:
            raise ValueError("argument(s) must be one of the following: " + ", ".join(_ENUMS[name]))
        return low
    if name == "notify-keyspace-events":
        ev = _events_normalize(v)
        if ev is None:
            raise ValueError("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
        return ev
    if name == "save":
        sv = _save_normalize(v)
        if sv is None:
            raise ValueError("Invalid save parameters")
        return sv
    if name == "client-output-buffer-limit":
        return _cobl_normalize(server, v)
    return s


def _apply(server: Any, name: str, value: Any) -> None:
    attr = PARAMS[name][0]
    if attr is None:
        config_extra(server)[name] = str(value)
        if name.startswith("stream-node-"):
            server.stream_node_limits = None  # XADD parses them again (commands/streams.py)
        return
    cfg = server.config
    if name == "requirepass":
        value = value or None
    elif name == "loglevel":
        level = {"debug": logging.DEBUG, "verbose": logging.INFO, "notice": logging.INFO, "warning": logging.WARNING}
        logging.getLogger().setLevel(level.get(value, logging.INFO))
    setattr(cfg, attr, value)
    if name == "requirepass" and getattr(server, "acl", None) is not None:
        server.acl.set_requirepass(value)  # the default user's password, as Redis (respqueue/acl.py)
    if name == "slowlog-max-len":
        server.slowlog = deque(server.slowlog, maxlen=value)
    elif name.startswith("maxmemory"):
        from ..memory import setup

        setup(server)
    elif name == "client-output-buffer-limit":
        from ..outbuf import apply

        apply(server, value)
    elif name == "tls-auth-clients":
        from ..tls import set_auth_clients

        set_auth_clients(server, value)


container("config", -2, "", group="server")


def _protected_configs_allowed(c: Any) -> bool:
    """enable-protected-configs: yes, or local from a local connection (respqueue/acl.py)."""
    from ..acl import protected_action_allowed

    return protected_action_allowed(c.server.config.enable_protected_configs, c)


@subcommand("config", "get", -3, "admin noscript loading stale")
def config_get(c: Any, argv: list[bytes]) -> Any:
    server = c.server
    out: dict[bytes, bytes] = {}
    seen: set[str] = set()
    for pat in argv[2:]:
        if not any(ch in pat for ch in b"[*?"):
            name = pat.decode("latin-1").lower()
            if name in seen or name not in PARAMS:
                continue
            seen.add(name)
            out[pat] = get_config(server, name).encode("utf-8", "surrogateescape")
            continue
        match = compile_glob(pat.lower())
        for name in PARAMS:
            if name in seen or not match(name.encode()):
                continue
            seen.add(name)
            out[name.encode()] = get_config(server, name).encode("utf-8", "surrogateescape")
    return out


def _set_failed(arg: bytes, reason: str) -> RedisError:
    return RedisError(b"ERR CONFIG SET failed (possibly related to argument '" + arg + b"') - " + reason.encode())


@subcommand("config", "set", -4, "admin noscript loading stale")
def config_set(c: Any, argv: list[bytes]) -> Any:
    if len(argv) % 2:
        raise SYNTAX
    server = c.server
    pairs: list[tuple[bytes, str, bytes]] = []
    seen: set[str] = set()
    for i in range(2, len(argv), 2):
        arg = argv[i]
        name = arg.decode("latin-1").lower()
        spec = PARAMS.get(name)
        if spec is None:
            raise RedisError(b"ERR Unknown option or number of arguments for CONFIG SET - '" + arg + b"'")
        if name in _PROTECTED and not _protected_configs_allowed(c):
            raise _set_failed(arg, "can't set protected config")
        if not spec[3]:
            raise _set_failed(arg, "can't set immutable config")
        if name in seen:
            raise _set_failed(arg, "duplicate parameter")
        seen.add(name)
        pairs.append((arg, name, argv[i + 1]))
    values: list[tuple[str, Any]] = []
    for arg, name, raw in pairs:
        canon = canonical(name)
        try:
            values.append((canon, _parse_value(server, canon, PARAMS[canon][2], raw)))
        except ValueError as e:
            raise _set_failed(arg, str(e)) from None
    tls_args = [(arg, canonical(name)) for arg, name, _ in pairs if canonical(name) in TLS_RELOADABLE]
    old = {canon: get_config(server, canon) for _, canon in tls_args}
    old_tls_port = get_config(server, "tls-port")
    for canon, value in values:
        _apply(server, canon, value)
    if tls_args:
        _tls_reload(server, tls_args, old)
    for arg, name, _ in pairs:
        if canonical(name) == "tls-port":
            _tls_port(server, arg, int(old_tls_port))
    return OK


def _tls_port(server: Any, arg: bytes, old: int) -> None:
    from ..tls import change_port

    try:
        change_port(server, server.config.tls_port)
    except OSError as e:
        log.warning("Failed to listen with TLS on port %d: %s", server.config.tls_port, e)
        server.config.tls_port = old
        raise _set_failed(arg, "Unable to listen on this port. Check server logs.") from None


def _tls_reload(server: Any, tls_args: list[tuple[bytes, str]], old: dict[str, str]) -> None:
    """New TLS files/protocols/ciphers: a new context for new connections, or the old settings back."""
    from ..tls import TLSConfigError, reload

    try:
        reload(server)
    except TLSConfigError as e:
        log.warning("%s", e)
        log.warning(
            "Failed applying new configuration. Possibly related to new %s setting. Restoring previous settings.",
            tls_args[0][1],
        )
        for canon, v in old.items():
            setattr(server.config, PARAMS[canon][0], v or None)
        raise _set_failed(tls_args[0][0], "Unable to update TLS configuration. Check server logs.") from None


@subcommand("config", "resetstat", 2, "admin noscript loading stale")
def config_resetstat(c: Any, argv: list[bytes]) -> Any:
    reset_stats(c.server)
    return OK


def reset_stats(server: Any) -> None:
    """CONFIG RESETSTAT: zero the counters INFO reports."""
    for attr in (
        "stats_commands",
        "stats_connections_received",
        "stats_rejected_connections",
        "stats_rejected_calls",
        "stats_expired_keys",
        "stats_keyspace_hits",
        "stats_keyspace_misses",
        "stats_evicted_keys",
        "stats_obl_disconnections",
    ):
        if hasattr(server, attr):
            setattr(server, attr, 0)
    errs = getattr(server, "errorstats", None)
    if isinstance(errs, dict):
        errs.clear()
    for cmd in [*unique_commands(), *_all_commands()]:
        cmd.calls = cmd.usec = cmd.failed_calls = cmd.rejected_calls = 0


@subcommand("config", "rewrite", 2, "admin noscript loading stale")
def config_rewrite(c: Any, argv: list[bytes]) -> Any:
    path = getattr(c.server.config, "config_path", None)
    if path:
        from ..replication.commands import rewrite_config

        return rewrite_config(c.server, path)
    raise RedisError("ERR The server is running without a config file")


@subcommand("config", "help", 2, "loading stale")
def config_help(c: Any, argv: list[bytes]) -> Any:
    return _help([
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "REWRITE",
        "    Rewrite the configuration file.",
        "HELP",
        "    Prints this help.",
    ])


# =========================================================================
# INFO
# =========================================================================

DEFAULT_SECTIONS = (
    "server", "clients", "memory", "persistence", "stats", "replication",
    "cpu", "modules", "errorstats", "cluster", "keyspace",
)
ALL_SECTIONS = (
    "server", "clients", "memory", "persistence", "stats", "replication",
    "cpu", "modules", "commandstats", "errorstats", "latencystats", "cluster", "keyspace",
)
_TITLES = {
    "server": "Server", "clients": "Clients", "memory": "Memory", "persistence": "Persistence",
    "stats": "Stats", "replication": "Replication", "cpu": "CPU", "modules": "Modules",
    "commandstats": "Commandstats", "errorstats": "Errorstats", "latencystats": "Latencystats",
    "cluster": "Cluster", "keyspace": "Keyspace",
}


def bytes_to_human(n: int) -> str:
    """Redis's bytesToHuman: 0B, 1.06M, 2.00G..."""
    for unit, size in (("P", 1024**5), ("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n}B"


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _master_replid(server: Any) -> str:
    rid = getattr(server, "master_replid", None)
    if rid is None:
        rid = server.master_replid = secrets.token_hex(20)
    return rid


def _sec_server(server: Any) -> list[str]:
    now = time.time()
    uptime = int(now - server.start_time)
    u = platform.uname()
    cfg = server.config
    return [
        "redis_version:" + REDIS_VERSION,
        "redis_git_sha1:00000000",
        "redis_git_dirty:0",
        "redis_build_id:0",
        "redis_mode:" + ("standalone" if server.cluster is None else "cluster"),
        f"os:{u.system} {u.release} {u.machine}",
        f"arch_bits:{64 if sys.maxsize > 2**32 else 32}",
        "monotonic_clock:POSIX clock_gettime",
        "multiplexing_api:epoll",
        "atomicvar_api:c11-builtin",
        "gcc_version:0.0.0",
        f"process_id:{os.getpid()}",
        "process_supervised:no",
        "run_id:" + server.run_id,
        f"tcp_port:{server.tcp_port}",
        f"server_time_usec:{int(now * 1_000_000)}",
        f"uptime_in_seconds:{uptime}",
        f"uptime_in_days:{uptime // 86400}",
        f"hz:{cfg.hz}",
        f"configured_hz:{cfg.hz}",
        f"lru_clock:{int(now) & ((1 << 24) - 1)}",
        "executable:" + os.path.abspath(sys.argv[0] if sys.argv and sys.argv[0] else sys.executable),
        "config_file:",
        "io_threads_active:0",
        "respqueue_version:" + __version__,
    ]


def _sec_clients(server: Any) -> list[str]:
    blocked = 0
    for cl in server.clients.values():
        if getattr(cl, "blocked", None) is not None:
            blocked += 1
    return [
        f"connected_clients:{len(server.clients)}",
        "cluster_connections:0",
        f"maxclients:{server.config.maxclients}",
        "client_recent_max_input_buffer:0",
        "client_recent_max_output_buffer:0",
        f"blocked_clients:{blocked}",
        "tracking_clients:0",
        f"clients_in_timeout_table:{blocked}",
    ]


def _sec_memory(server: Any) -> list[str]:
    rss = used = _rss_bytes()
    guard = getattr(server, "mem_guard", None)
    if guard is not None:
        used = guard.used()  # with maxmemory set: the tracked estimate that is enforced (memory.py)
    peak = max(getattr(server, "used_memory_peak", 0), used)
    server.used_memory_peak = peak
    maxmem = int(get_config(server, "maxmemory"))
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 0
    scripting = server.scripting
    lua_mem = scripting.memory() if scripting is not None else 0
    lua_scripts = len(scripting.cache) if scripting is not None else 0
    return [
        f"used_memory:{used}",
        "used_memory_human:" + bytes_to_human(used),
        f"used_memory_rss:{rss}",
        "used_memory_rss_human:" + bytes_to_human(rss),
        f"used_memory_peak:{peak}",
        "used_memory_peak_human:" + bytes_to_human(peak),
        f"used_memory_peak_perc:{100.0 * used / peak if peak else 100.0:.2f}%",
        "used_memory_overhead:0",
        "used_memory_startup:0",
        f"used_memory_dataset:{used}",
        "used_memory_dataset_perc:100.00%",
        f"total_system_memory:{total}",
        "total_system_memory_human:" + bytes_to_human(total),
        f"used_memory_lua:{lua_mem}",
        f"used_memory_scripts:{lua_mem}",
        f"number_of_cached_scripts:{lua_scripts}",
        f"maxmemory:{maxmem}",
        "maxmemory_human:" + bytes_to_human(maxmem),
        "maxmemory_policy:" + get_config(server, "maxmemory-policy"),
        "mem_fragmentation_ratio:1.00",
        "mem_fragmentation_bytes:0",  # used_memory is the RSS: no fragmentation to report (redis_exporter)
        f"allocator_allocated:{used}",
        f"allocator_active:{used}",
        f"allocator_resident:{used}",
        "active_defrag_running:0",
        "mem_allocator:libc",
        "lazyfree_pending_objects:0",
        "lazyfreed_objects:0",
    ]


def _sec_persistence(server: Any) -> list[str]:
    bgsave_ok = getattr(server, "last_bgsave_ok", True)
    j = server.journal
    if j is not None:
        extra = [
            f"durability:{j.mode}",
            f"store_path:{j.store.path}",
            f"store_writer:{j.store.writer}",
            f"last_commit_ms:{j.last_commit_ms:.3f}",
            f"commits:{j.commits}",
            f"uncommitted_changes:{j.uncommitted()}",
            f"commit_errors:{j.commit_errors}",
            "store_status:" + ("ok" if server.write_refused is None else "err"),
        ]
        bgsave_ok = server.write_refused is None
    else:
        extra = ["durability:memory", "store_path:", "store_writer:none", "last_commit_ms:0", "commits:0", "uncommitted_changes:0", "commit_errors:0", "store_status:ok"]
    return [
        f"loading:{1 if getattr(server, 'loading', False) else 0}",
        "async_loading:0",
        "current_cow_peak:0",
        "current_cow_size:0",
        "current_cow_size_age:0",
        "current_fork_perc:0.00",
        "current_save_keys_processed:0",
        "current_save_keys_total:0",
        f"rdb_changes_since_last_save:{server.dirty}",
        "rdb_bgsave_in_progress:0",
        f"rdb_last_save_time:{server.lastsave}",
        "rdb_last_bgsave_status:" + ("ok" if bgsave_ok else "err"),
        "rdb_last_bgsave_time_sec:-1",
        "rdb_current_bgsave_time_sec:-1",
        f"rdb_saves:{getattr(server, 'rdb_saves', 0)}",
        "rdb_last_cow_size:0",
        f"rdb_last_load_keys_expired:{getattr(server, 'loaded_expired', 0)}",
        f"rdb_last_load_keys_loaded:{getattr(server, 'loaded_keys', 0)}",
        f"aof_enabled:{1 if get_config(server, 'appendonly') == 'yes' else 0}",
        "aof_rewrite_in_progress:0",
        "aof_rewrite_scheduled:0",
        "aof_last_rewrite_time_sec:-1",
        "aof_current_rewrite_time_sec:-1",
        "aof_last_bgrewrite_status:ok",
        "aof_rewrites:0",
        "aof_rewrites_consecutive_failures:0",
        "aof_last_write_status:ok",
        "aof_last_cow_size:0",
        "module_fork_in_progress:0",
        "module_fork_last_cow_size:0",
    ] + extra


def _sec_stats(server: Any) -> list[str]:
    errs = getattr(server, "errorstats", None)
    total_errors = sum(errs.values()) if isinstance(errs, dict) else 0
    return [
        f"total_connections_received:{server.stats_connections_received}",
        f"total_commands_processed:{server.stats_commands}",
        f"instantaneous_ops_per_sec:{_ops_per_sec(server)}",
        "total_net_input_bytes:0",
        "total_net_output_bytes:0",
        "total_net_repl_input_bytes:0",
        "total_net_repl_output_bytes:0",
        "instantaneous_input_kbps:0.00",
        "instantaneous_output_kbps:0.00",
        "instantaneous_input_repl_kbps:0.00",
        "instantaneous_output_repl_kbps:0.00",
        f"rejected_connections:{server.stats_rejected_connections}",
        "sync_full:0",
        "sync_partial_ok:0",
        "sync_partial_err:0",
        f"expired_keys:{server.stats_expired_keys}",
        "expired_stale_perc:0.00",
        "expired_time_cap_reached_count:0",
        "expire_cycle_cpu_milliseconds:0",
        f"evicted_keys:{getattr(server, 'stats_evicted_keys', 0)}",
        "evicted_clients:0",
        "total_eviction_exceeded_time:0",
        "current_eviction_exceeded_time:0",
        f"keyspace_hits:{server.stats_keyspace_hits}",
        f"keyspace_misses:{server.stats_keyspace_misses}",
        f"pubsub_channels:{len(server.pubsub_channels)}",
        f"pubsub_patterns:{len(server.pubsub_patterns)}",
        "pubsubshard_channels:0",
        "latest_fork_usec:0",
        "total_forks:0",
        "migrate_cached_sockets:0",
        "slave_expires_tracked_keys:0",
        "active_defrag_hits:0",
        "active_defrag_misses:0",
        "active_defrag_key_hits:0",
        "active_defrag_key_misses:0",
        "total_active_defrag_time:0",
        "current_active_defrag_time:0",
        "tracking_total_keys:0",
        "tracking_total_items:0",
        "tracking_total_prefixes:0",
        "unexpected_error_replies:0",
        f"total_error_replies:{total_errors}",
        f"client_output_buffer_limit_disconnections:{getattr(server, 'stats_obl_disconnections', 0)}",
        "dump_payload_sanitizations:0",
        "total_reads_processed:0",
        "total_writes_processed:0",
        "io_threaded_reads_processed:0",
        "io_threaded_writes_processed:0",
        "reply_buffer_shrinks:0",
        "reply_buffer_expands:0",
    ]


def _ops_per_sec(server: Any) -> int:
    """Commands per second since the previous sample (taken at most once a second)."""
    now = time.monotonic()
    prev = getattr(server, "ops_sample", None)
    cur = (now, server.stats_commands)
    if prev is None:
        server.ops_sample = cur
        server.ops_rate = 0
        return 0
    dt = now - prev[0]
    if dt >= 1.0:
        server.ops_rate = int(max(0, cur[1] - prev[1]) / dt) if dt < 60 else 0
        server.ops_sample = cur
    return getattr(server, "ops_rate", 0)


def _sec_replication(server: Any) -> list[str]:
    if server.repl is not None:
        from ..replication.commands import info_lines

        return info_lines(server)
    return [
        "role:master",
        "connected_slaves:0",
        "master_failover_state:no-failover",
        "master_replid:" + _master_replid(server),
        "master_replid2:0000000000000000000000000000000000000000",
        "master_repl_offset:0",
        "second_repl_offset:-1",
        "repl_backlog_active:0",
        "repl_backlog_size:1048576",
        "repl_backlog_first_byte_offset:0",
        "repl_backlog_histlen:0",
    ]


def _sec_cpu(server: Any) -> list[str]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return [
        f"used_cpu_sys:{ru.ru_stime:.6f}",
        f"used_cpu_user:{ru.ru_utime:.6f}",
        f"used_cpu_sys_children:{ch.ru_stime:.6f}",
        f"used_cpu_user_children:{ch.ru_utime:.6f}",
        f"used_cpu_sys_main_thread:{ru.ru_stime:.6f}",
        f"used_cpu_user_main_thread:{ru.ru_utime:.6f}",
    ]


def _sec_commandstats(server: Any) -> list[str]:
    out = []
    for cmd in _all_commands():
        if cmd.parent is _COMMAND_CMD and cmd.name == "count":
            # bare COMMAND: the container's own calls, less those of its subcommands
            bare = _bare_command_stats()
            if bare is not None:
                out.append(bare)
        if not (cmd.calls or cmd.failed_calls or cmd.rejected_calls):
            continue
        per_call = cmd.usec / cmd.calls if cmd.calls else 0.0
        out.append(
            f"cmdstat_{cmd.fullname}:calls={cmd.calls},usec={cmd.usec},usec_per_call={per_call:.2f},"
            f"rejected_calls={cmd.rejected_calls},failed_calls={cmd.failed_calls}"
        )
    return out


def _bare_command_stats() -> str | None:
    assert _COMMAND_CMD is not None
    subs = _COMMAND_SUBS.values()
    calls = _COMMAND_CMD.calls - sum(x.calls + x.rejected_calls for x in subs)
    failed = _COMMAND_CMD.failed_calls - sum(x.failed_calls + x.rejected_calls for x in subs)
    if calls <= 0:
        return None
    return (
        f"cmdstat_command:calls={calls},usec=0,usec_per_call=0.00,"
        f"rejected_calls={_COMMAND_CMD.rejected_calls},failed_calls={max(failed, 0)}"
    )


def _sec_errorstats(server: Any) -> list[str]:
    errs = getattr(server, "errorstats", None)
    if not isinstance(errs, dict):
        return []
    return [f"errorstat_{k.decode() if isinstance(k, bytes) else k}:count={v}" for k, v in errs.items()]


def _sec_keyspace(server: Any) -> list[str]:
    out = []
    for db in server.dbs:
        if db.data:
            out.append(f"db{db.index}:keys={len(db.data)},expires={len(db.expires)},avg_ttl={db.avg_ttl}")
    return out


_SECTION_FUNCS: dict[str, Any] = {
    "server": _sec_server,
    "clients": _sec_clients,
    "memory": _sec_memory,
    "persistence": _sec_persistence,
    "stats": _sec_stats,
    "replication": _sec_replication,
    "cpu": _sec_cpu,
    "modules": lambda s: [],
    "commandstats": _sec_commandstats,
    "errorstats": _sec_errorstats,
    "latencystats": lambda s: [],
    "cluster": lambda s: ["cluster_enabled:%d" % (s.cluster is not None)],
    "keyspace": _sec_keyspace,
}


def info_text(server: Any, sections: list[bytes] | None = None) -> bytes:
    """The INFO reply for ``sections`` (None: the default sections)."""
    wanted: set[str] = set()
    if not sections:
        wanted.update(DEFAULT_SECTIONS)
    for s in sections or ():
        name = s.decode("latin-1").lower()
        if name == "default":
            wanted.update(DEFAULT_SECTIONS)
        elif name in ("all", "everything"):
            wanted.update(ALL_SECTIONS)
        elif name in _SECTION_FUNCS:
            wanted.add(name)
    parts = []
    for name in ALL_SECTIONS:
        if name in wanted:
            lines = _SECTION_FUNCS[name](server)
            parts.append("# " + _TITLES[name] + "\r\n" + "".join(line + "\r\n" for line in lines))
    return "\r\n".join(parts).encode("utf-8", "surrogateescape")


@command("info", -1, "loading stale", group="server")
def info(c: Any, argv: list[bytes]) -> Any:
    return Verbatim(info_text(c.server, argv[1:]))


# =========================================================================
# COMMAND
# =========================================================================

_ACL_ORDER = (
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
    "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
    "dangerous", "connection", "transaction", "scripting",
)
_GROUP_CATEGORY = {
    "keyspace": "keyspace", "generic": "keyspace", "string": "string", "hash": "hash", "list": "list",
    "set": "set", "zset": "sortedset", "sortedset": "sortedset", "sorted_set": "sortedset",
    "sorted-set": "sortedset", "stream": "stream", "pubsub": "pubsub", "connection": "connection",
    "transactions": "transaction", "transaction": "transaction", "scripting": "scripting",
    "bitmap": "bitmap", "hyperloglog": "hyperloglog", "geo": "geo",
}
_DOC_GROUP = {
    "keyspace": "generic", "zset": "sorted-set", "sortedset": "sorted-set", "sorted_set": "sorted-set",
    "transaction": "transactions",
}
_DANGEROUS = frozenset({
    "flushall", "flushdb", "swapdb", "keys", "sort", "migrate", "restore", "restore-asking", "info",
    "lastsave", "role", "client|kill", "client|list", "client|pause", "client|unpause",
})
_ADMIN = frozenset({"lastsave", "role"})
_MOVABLE = frozenset({
    "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro", "zunionstore", "zinterstore",
    "zdiffstore", "zunion", "zinter", "zdiff", "zintercard", "sintercard", "lmpop", "zmpop", "blmpop",
    "bzmpop", "xread", "xreadgroup", "sort", "sort_ro", "georadius", "georadiusbymember", "migrate",
})
_SUMMARIES = {
    "info": "Get information and statistics about the server",
    "config": "A container for server configuration commands",
    "config|get": "Get the values of configuration parameters",
    "config|set": "Set configuration parameters to the given values",
    "config|resetstat": "Reset the stats returned by INFO",
    "config|rewrite": "Rewrite the configuration file with the in memory configuration",
    "config|help": "Show helpful text about the different subcommands",
    "command": "Get array of Redis command details",
    "command|count": "Get total number of Redis commands",
    "command|docs": "Get array of specific Redis command documentation",
    "command|getkeys": "Extract keys given a full Redis command",
    "command|getkeysandflags": "Extract keys and access flags given a full Redis command",
    "command|help": "Show helpful text about the different subcommands",
    "command|info": "Get array of specific Redis command details, or all when no argument is given.",
    "command|list": "Get an array of Redis command names",
    "slowlog": "A container for slow log commands",
    "slowlog|get": "Get the slow log's entries",
    "slowlog|len": "Get the slow log's length",
    "slowlog|reset": "Clear all entries from the slow log",
    "slowlog|help": "Show helpful text about the different subcommands",
    "time": "Return the current server time",
    "lastsave": "Get the UNIX time stamp of the last successful save to disk",
    "save": "Synchronously save the dataset to disk",
    "bgsave": "Asynchronously save the dataset to disk",
    "shutdown": "Synchronously save the dataset to disk and then shut down the server",
    "monitor": "Listen for all requests received by the server in real time",
    "debug": "A container for debugging commands",
    "role": "Return the role of the instance in the context of replication",
    "wait": "Wait for the synchronous replication of all the write commands sent in the context of the current connection",
    "lolwut": "Display some computer art and the Redis version",
    "get": "Get the value of a key",
    "set": "Set the string value of a key",
    "del": "Delete a key",
    "ping": "Ping the server",
}


def _all_commands() -> list[Command]:
    """Every command and subcommand (COMMAND's own included)."""
    out: list[Command] = []
    for cmd in unique_commands():
        subs = _subcommands_of(cmd)
        if subs:
            out.extend(subs)
        else:
            out.append(cmd)
    return out


def _subcommands_of(cmd: Command) -> list[Command]:
    if cmd.name == "command" and cmd.subcommands is None:
        return list(_COMMAND_SUBS.values())
    if not cmd.subcommands:
        return []
    seen: dict[int, Command] = {}
    for s in cmd.subcommands.values():
        seen[id(s)] = s
    return list(seen.values())


def acl_categories(cmd: Command) -> list[str]:
    """ACL categories derived from a command's flags and group, in Redis's order."""
    fl = set(cmd.flags)
    cats: set[str] = set()
    if cmd.proc is None and cmd.subcommands is not None:
        return ["@slow"]
    scripting = _GROUP_CATEGORY.get(cmd.group) == "scripting"
    if "write" in fl and not scripting:
        cats.add("write")
    if "readonly" in fl and "write" not in fl and not scripting:
        cats.add("read")
    if "admin" in fl or cmd.fullname in _ADMIN:
        cats.update(("admin", "dangerous"))
    cats.add("fast" if "fast" in fl else "slow")
    if "blocking" in fl:
        cats.add("blocking")
    if "dangerous" in fl or cmd.fullname in _DANGEROUS:
        cats.add("dangerous")
    g = _GROUP_CATEGORY.get(cmd.group)
    if g is not None and not (g == "pubsub" and cmd.name == "help"):
        cats.add(g)
    return ["@" + x for x in _ACL_ORDER if x in cats]


def _key_spec(cmd: Command) -> list[dict[bytes, Any]]:
    if cmd.first_key <= 0:
        return []
    fl = set(cmd.flags)
    flags = [Status(b"RW"), Status(b"access"), Status(b"update")] if "write" in fl else [Status(b"RO"), Status(b"access")]
    last = cmd.last_key - cmd.first_key if cmd.last_key >= 0 else cmd.last_key
    return [{
        b"flags": SetReply(flags),
        b"begin_search": {b"type": b"index", b"spec": {b"index": cmd.first_key}},
        b"find_keys": {b"type": b"range", b"spec": {b"lastkey": last, b"keystep": cmd.step or 1, b"limit": 0}},
    }]


def _flags_of(cmd: Command) -> list[Status]:
    # the registry's "pubsub" flag means "allowed while subscribed"; Redis's marks pub/sub commands
    pubsub = _GROUP_CATEGORY.get(cmd.group) == "pubsub" and cmd.name != "help" and cmd.proc is not None
    flags = [Status(f.encode()) for f in cmd.flags if f not in ("dangerous", "sentinel", "pubsub", "protected")]
    if pubsub:
        flags.append(Status(b"pubsub"))
    if cmd.fullname in _MOVABLE and b"movablekeys" not in flags:
        flags.append(Status(b"movablekeys"))
    return flags


def command_info_entry(cmd: Command) -> list[Any]:
    """One COMMAND INFO entry in Redis 7's ten-element shape."""
    subs = _subcommands_of(cmd)
    return [
        cmd.fullname.encode(),
        cmd.arity,
        SetReply(_flags_of(cmd)),
        cmd.first_key,
        cmd.last_key,
        cmd.step,
        SetReply([Status(x.encode()) for x in acl_categories(cmd)]),
        SetReply(),
        SetReply(_key_spec(cmd)),
        [command_info_entry(s) for s in subs] if subs else SetReply(),
    ]


def command_docs_entry(cmd: Command) -> dict[bytes, Any]:
    group = cmd.parent.group if cmd.parent is not None else cmd.group
    doc: dict[bytes, Any] = {
        b"summary": _SUMMARIES.get(cmd.fullname, "The " + cmd.fullname.replace("|", " ").upper() + " command").encode(),
        b"since": b"1.0.0",
        b"group": _DOC_GROUP.get(group, group).encode(),
    }
    subs = _subcommands_of(cmd)
    if subs:
        doc[b"subcommands"] = {s.fullname.encode(): command_docs_entry(s) for s in subs}
    return doc


def _find_command(name: bytes) -> Command | None:
    if b"|" in name:
        parent, _, sub = name.partition(b"|")
        p = lookup(parent)
        if p is None:
            return None
        for s in _subcommands_of(p):
            if s.name == sub.decode("latin-1").lower():
                return s
        return None
    return lookup(name)


def _movable_keys(name: str, argv: list[bytes]) -> list[int]:
    """Key positions of commands whose keys depend on their arguments."""

    def numkeys_at(i: int, first: int) -> list[int]:
        n = str2int(argv[i]) if i < len(argv) else None
        if n is None or n < 0 or first + n > len(argv):
            raise RedisError("ERR Invalid arguments specified for command")
        return list(range(first, first + n))

    if name in ("eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"):
        return numkeys_at(2, 3)
    if name in ("zunionstore", "zinterstore", "zdiffstore"):
        return [1, *numkeys_at(2, 3)]
    if name in ("zunion", "zinter", "zdiff", "zintercard", "sintercard", "lmpop", "zmpop"):
        return numkeys_at(1, 2)
    if name in ("blmpop", "bzmpop"):
        return numkeys_at(2, 3)
    if name in ("xread", "xreadgroup"):
        for i in range(1, len(argv)):
            if eq(argv[i], b"streams"):
                rest = len(argv) - i - 1
                if rest % 2:
                    raise RedisError("ERR Invalid arguments specified for command")
                return list(range(i + 1, i + 1 + rest // 2))
        raise RedisError("ERR Invalid arguments specified for command")
    if name in ("sort", "sort_ro"):
        keys = [1]
        for i in range(2, len(argv) - 1):
            if eq(argv[i], b"store"):
                keys.append(i + 1)
        return keys
    return []


def get_keys(argv: list[bytes]) -> tuple[Command, list[int]]:
    """COMMAND GETKEYS: the command ``argv`` names and the indexes of its keys."""
    cmd = lookup(argv[0])
    if cmd is None:
        raise RedisError("ERR Invalid command specified")
    subs = _subcommands_of(cmd)
    if subs and cmd.proc is None:
        if len(argv) < 2:
            raise RedisError("ERR Invalid number of arguments specified for command")
        low = argv[1].decode("latin-1").lower()
        sub = next((s for s in subs if s.name == low), None)
        if sub is None:
            raise RedisError("ERR Invalid command specified")
        cmd = sub
    n = len(argv)
    if (cmd.arity > 0 and n != cmd.arity) or n < -cmd.arity:
        raise RedisError("ERR Invalid number of arguments specified for command")
    if cmd.fullname in _MOVABLE:
        return cmd, _movable_keys(cmd.fullname, argv)
    if cmd.first_key <= 0:
        raise RedisError("ERR The command has no key arguments")
    return cmd, cmd.key_positions(argv)


def _cmd_count(c: Any, argv: list[bytes]) -> Any:
    return len(unique_commands())


def _cmd_info(c: Any, argv: list[bytes]) -> Any:
    if len(argv) <= 2:
        return [command_info_entry(x) for x in unique_commands()]
    out: list[Any] = []
    for name in argv[2:]:
        cmd = _find_command(name)
        out.append(None if cmd is None else command_info_entry(cmd))
    return out


def _cmd_docs(c: Any, argv: list[bytes]) -> Any:
    if len(argv) <= 2:
        return {x.name.encode(): command_docs_entry(x) for x in unique_commands()}
    out: dict[bytes, Any] = {}
    for name in argv[2:]:
        cmd = _find_command(name)
        if cmd is not None:
            out[cmd.fullname.encode()] = command_docs_entry(cmd)
    return out


def _cmd_list(c: Any, argv: list[bytes]) -> Any:
    everything: list[Command] = []
    for cmd in unique_commands():
        everything.append(cmd)
        everything.extend(_subcommands_of(cmd))
    if len(argv) == 2:
        return [x.fullname.encode() for x in everything]
    if len(argv) != 5 or not eq(argv[2], b"filterby"):
        raise SYNTAX
    kind, value = argv[3].lower(), argv[4]
    if kind == b"module":
        return []
    if kind == b"aclcat":
        cat = "@" + value.decode("latin-1").lower()
        return [x.fullname.encode() for x in everything if cat in acl_categories(x)]
    if kind == b"pattern":
        match = compile_glob(value.lower())
        return [x.fullname.encode() for x in everything if match(x.fullname.encode())]
    raise SYNTAX


def _cmd_getkeys(c: Any, argv: list[bytes]) -> Any:
    _, pos = get_keys(argv[2:])
    return [argv[2 + i] for i in pos]


def _cmd_getkeysandflags(c: Any, argv: list[bytes]) -> Any:
    cmd, pos = get_keys(argv[2:])
    fl = [Status(b"RW"), Status(b"access"), Status(b"update")] if cmd.is_write else [Status(b"RO"), Status(b"access")]
    return [[argv[2 + i], SetReply(fl)] for i in pos]


def _cmd_help(c: Any, argv: list[bytes]) -> Any:
    return _help([
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all Redis commands.",
        "COUNT",
        "    Return the total number of commands in this Redis server.",
        "LIST",
        "    Return a list of all commands in this Redis server.",
        "INFO [<command-name> ...]",
        "    Return details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "GETKEYS <full-command>",
        "    Return the keys from a full Redis command.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return the keys and the access flags from a full Redis command.",
        "HELP",
        "    Prints this help.",
    ])


@command("command", -1, "loading stale", group="connection")
def command_(c: Any, argv: list[bytes]) -> Any:
    if len(argv) == 1:
        return [command_info_entry(x) for x in unique_commands()]
    sub = _COMMAND_SUBS.get(argv[1].decode("latin-1").lower())
    if sub is None:
        raise RedisError(b"ERR unknown subcommand '" + argv[1][:128] + b"'. Try COMMAND HELP.")
    n = len(argv)
    if (sub.arity > 0 and n != sub.arity) or n < -sub.arity:
        sub.rejected_calls += 1
        raise wrong_args(sub.fullname)
    assert sub.proc is not None
    sub.calls += 1
    try:
        return sub.proc(c, argv)
    except RedisError:
        sub.failed_calls += 1
        raise


_COMMAND_CMD = lookup(b"command")
assert _COMMAND_CMD is not None
_COMMAND_SUBS: dict[str, Command] = {}
for _name, _arity, _proc in (
    ("docs", -2, _cmd_docs),
    ("help", 2, _cmd_help),
    ("list", -2, _cmd_list),
    ("getkeys", -4, _cmd_getkeys),
    ("getkeysandflags", -4, _cmd_getkeysandflags),
    ("count", 2, _cmd_count),
    ("info", -2, _cmd_info),
):
    _COMMAND_SUBS[_name] = Command(_name, _proc, _arity, "loading stale", 0, 0, 0, "connection", parent=_COMMAND_CMD)


# =========================================================================
# SLOWLOG
# =========================================================================

SLOWLOG_MAX_ARGC = 32
SLOWLOG_MAX_STRING = 128
_NO_SLOWLOG = frozenset({"exec", "auth", "hello"})


def slowlog_record(server: Any, client: Any, argv: list[bytes], duration_us: int, cmd: Command | None = None) -> None:
    """Log ``argv`` in the slow log if it took at least slowlog-log-slower-than µs.

    The dispatcher should call this after every command it runs for a client
    (not for commands run by scripts or inside EXEC, as Redis logs the EVAL /
    EXEC itself), with the command's wall time in microseconds.
    """
    threshold = server.config.slowlog_log_slower_than
    if threshold < 0 or duration_us < threshold:
        return
    if cmd is not None and (cmd.name in _NO_SLOWLOG or "skip_slowlog" in cmd.flags):
        return
    if cmd is None and argv and argv[0].lower().decode("latin-1") in _NO_SLOWLOG:
        return
    argc = len(argv)
    n = min(argc, SLOWLOG_MAX_ARGC)
    args: list[bytes] = []
    for j in range(n):
        if n != argc and j == n - 1:
            args.append(b"... (%d more arguments)" % (argc - n + 1))
        else:
            a = argv[j]
            if len(a) > SLOWLOG_MAX_STRING:
                a = a[:SLOWLOG_MAX_STRING] + b"... (%d more bytes)" % (len(a) - SLOWLOG_MAX_STRING)
            args.append(a)
    entry_id = server.slowlog_next_id
    server.slowlog_next_id = entry_id + 1
    server.slowlog.append([
        entry_id,
        int(time.time()),
        int(duration_us),
        args,
        getattr(client, "addr", b""),
        client.name or b"",
    ])


container("slowlog", -2, "", group="server")


@subcommand("slowlog", "get", -2, "admin loading stale")
def slowlog_get(c: Any, argv: list[bytes]) -> Any:
    count = 10
    if len(argv) == 3:
        v = str2int(argv[2])
        if v is None or v < -1:
            raise RedisError("ERR count should be greater than or equal to -1")
        count = v
    elif len(argv) > 3:
        raise RedisError(
            b"ERR unknown subcommand or wrong number of arguments for '" + argv[1] + b"'. Try SLOWLOG HELP."
        )
    log_ = c.server.slowlog
    if count == -1 or count > len(log_):
        count = len(log_)
    out = []
    for i in range(count):
        out.append(log_[len(log_) - 1 - i])
    return out


@subcommand("slowlog", "len", 2, "admin loading stale")
def slowlog_len(c: Any, argv: list[bytes]) -> Any:
    return len(c.server.slowlog)


@subcommand("slowlog", "reset", 2, "admin loading stale")
def slowlog_reset(c: Any, argv: list[bytes]) -> Any:
    c.server.slowlog.clear()
    return OK


@subcommand("slowlog", "help", 2, "loading stale")
def slowlog_help(c: Any, argv: list[bytes]) -> Any:
    return _help([
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Prints this help.",
    ])


# =========================================================================
# TIME, LASTSAVE, SAVE, BGSAVE, SHUTDOWN, MONITOR, ROLE, WAIT, LOLWUT
# =========================================================================


@command("time", 1, "loading stale fast", group="server")
def time_(c: Any, argv: list[bytes]) -> Any:
    ns = time.time_ns()
    return [b"%d" % (ns // 1_000_000_000), b"%d" % ((ns // 1000) % 1_000_000)]


@command("lastsave", 1, "loading stale fast", group="server")
def lastsave(c: Any, argv: list[bytes]) -> Any:
    return c.server.lastsave


def _saved(server: Any) -> None:
    server.rdb_saves = getattr(server, "rdb_saves", 0) + 1
    j = server.journal
    if j is None:
        server.dirty = 0
        server.lastsave = int(time.time())
    else:
        # BGSAVE / SHUTDOWN SAVE: commit the open batch now (lastsave follows the commit)
        server.dirty = 0
        j.flush_soon()


@command("save", 1, "admin noscript no_async_loading no_multi", group="server")
def save(c: Any, argv: list[bytes]) -> Any:
    j = c.server.journal
    if j is not None and hasattr(c, "journal_hold"):
        # the reply waits until everything changed so far is committed
        c.server.rdb_saves = getattr(c.server, "rdb_saves", 0) + 1
        if j.failed_ops is not None:
            raise c.server.write_refused
        c.server.dirty = 0
        j.flush_soon()
        c.journal_hold()
        return OK
    _saved(c.server)
    return OK


@command("bgsave", -1, "admin noscript no_async_loading", group="server")
def bgsave(c: Any, argv: list[bytes]) -> Any:
    if len(argv) > 2 or (len(argv) == 2 and not eq(argv[1], b"schedule")):
        raise SYNTAX
    _saved(c.server)
    return Status(b"Background saving started")


@command("bgrewriteaof", 1, "admin noscript no_async_loading", group="server")
def bgrewriteaof(c: Any, argv: list[bytes]) -> Any:
    return Status(b"Background append only file rewriting started")


@command("shutdown", -1, "admin noscript loading stale no_multi allow_busy", group="server")
def shutdown(c: Any, argv: list[bytes]) -> Any:
    nosave = save_ = abort = False
    for a in argv[1:]:
        low = a.lower()
        if low == b"nosave":
            nosave = True
        elif low == b"save":
            save_ = True
        elif low == b"abort":
            abort = True
        elif low in (b"now", b"force"):
            pass
        else:
            raise SYNTAX
    if (nosave and save_) or (abort and len(argv) > 2):
        raise SYNTAX
    if abort:
        raise RedisError("ERR No shutdown in progress.")
    server = c.server
    server.shutdown_nosave = nosave
    if save_:
        _saved(server)
    server.request_shutdown("SHUTDOWN")
    c.close_after_reply()
    return NO_REPLY


@command("monitor", 1, "admin noscript loading stale", group="server")
def monitor(c: Any, argv: list[bytes]) -> Any:
    if not c.may_block:
        raise RedisError("ERR MONITOR isn't allowed for DENY BLOCKING client")
    if getattr(c, "monitor", False):
        return NO_REPLY
    c.monitor = True
    c.server.monitors.append(c)
    return OK


@command("role", 1, "noscript loading stale fast", group="server")
def role(c: Any, argv: list[bytes]) -> Any:
    if c.server.repl is not None:
        from ..replication.commands import role_reply

        return role_reply(c.server)
    return [b"master", 0, []]


@command("wait", 3, "noscript", group="connection")
def wait(c: Any, argv: list[bytes]) -> Any:
    from ..dispatch import Block

    n = str2int(argv[1])
    if n is None:
        raise NOT_INTEGER
    timeout = str2int(argv[2])
    if timeout is None:
        raise RedisError("ERR timeout is not an integer or out of range")
    if timeout < 0:
        raise TIMEOUT_NEGATIVE
    if c.server.repl is not None:
        from ..replication.commands import wait_reply

        return wait_reply(c, n, timeout)
    if n <= 0 or not c.may_block:
        return 0
    # no replica will ever acknowledge: wait for the timeout (0: forever), as Redis does
    return Block([], timeout / 1000.0, 0)


@command("lolwut", -1, "readonly fast", group="server")
def lolwut(c: Any, argv: list[bytes]) -> Any:
    i = 1
    while i < len(argv):
        if eq(argv[i], b"version") and i + 1 < len(argv):
            if str2int(argv[i + 1]) is None:
                raise NOT_INTEGER
            i += 2
        else:
            i += 1
    art = (
        "  _ __ ___  ___ _ __   __ _ _   _  ___ _   _  ___\n"
        " | '__/ _ \\/ __| '_ \\ / _` | | | |/ _ \\ | | |/ _ \\\n"
        " | | |  __/\\__ \\ |_) | (_| | |_| |  __/ |_| |  __/\n"
        " |_|  \\___||___/ .__/ \\__, |\\__,_|\\___|\\__,_|\\___|\n"
        "               |_|       |_|\n"
    )
    return Verbatim((art + "Redis ver. " + REDIS_VERSION + "\n").encode())


# =========================================================================
# DEBUG
# =========================================================================


def _strtod(b: bytes) -> float:
    m = re.match(rb"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", b)
    if m is None:
        return 0.0
    try:
        return parse_float(m.group(0).strip())
    except RedisError:
        return 0.0


def _atoi(b: bytes) -> int:
    m = re.match(rb"\s*[-+]?\d+", b)
    return int(m.group(0)) if m else 0


def _debug_object(c: Any, key: bytes) -> Any:
    from .keys import encoding_of, memory_usage_of

    v = c.db.lookup(key)
    if v is None:
        raise RedisError("ERR no such key")
    enc = encoding_of(v)
    if isinstance(enc, str):
        enc = enc.encode()
    if type(v) is bytes:
        ser = len(v) + 1
    else:
        try:
            ser = int(memory_usage_of(key, v))
        except Exception:
            ser = len(v)
    lru = int(time.time()) & ((1 << 24) - 1)
    return Status(
        b"Value at:0x%x refcount:1 encoding:%s serializedlength:%d lru:%d lru_seconds_idle:0"
        % (id(v), enc, ser, lru)
    )


_PROTOCOL_TYPES = "string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false"


def _debug_protocol(c: Any, name: bytes) -> Any:
    t = name.lower()
    if t == b"string":
        return b"Hello World"
    if t == b"integer":
        return 12345
    if t == b"double":
        return 3.141
    if t == b"bignum":
        return b"1234567999999999999999999999999999999"
    if t == b"null":
        return None
    if t == b"array":
        return [0, 1, 2]
    if t == b"set":
        return SetReply([0, 1, 2])
    if t == b"map":
        return {0: False, 1: True, 2: False}
    if t == b"attrib":
        return b"Some real reply following the attribute"
    if t == b"push":
        if c.resp < 3:
            raise RedisError("ERR RESP2 is not supported by this command")
        c.send_push(Push([b"server-cpu-usage", 42]))
        return b"Some real reply following the push reply"
    if t == b"verbatim":
        return Verbatim(b"This is a verbatim\nstring")
    if t == b"true":
        return True
    if t == b"false":
        return False
    raise RedisError("ERR Wrong protocol type name. Please use one of the following: " + _PROTOCOL_TYPES)


@command("debug", -2, "admin noscript loading stale protected", group="server")
def debug(c: Any, argv: list[bytes]) -> Any:
    sub = argv[1].lower()
    n = len(argv)
    server = c.server
    if sub == b"help" and n == 2:
        return _help([
            "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CHANGE-REPL-ID",
            "    Change the replication IDs of the instance.",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message.",
            "LOG <message>",
            "    Write <message> to the server log.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "RELOAD [option ...]",
            "    Save the dataset and reload it (a no-op without persistence).",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
            "HELP",
            "    Prints this help.",
        ])
    if sub == b"sleep" and n == 3:
        # as Redis: (long long)(strtod * 1e6) microseconds; out of range (1e300, inf, nan) is negative there
        usecs = _strtod(argv[2]) * 1000000
        if usecs == usecs and 0 < usecs < 2**63:
            time.sleep(int(usecs) / 1000000)
        return OK
    if sub == b"set-active-expire" and n == 3:
        server.active_expire_enabled = _atoi(argv[2]) != 0
        return OK
    if sub == b"object" and n == 3:
        return _debug_object(c, argv[2])
    if sub == b"change-repl-id" and n == 2:
        server.master_replid = secrets.token_hex(20)
        if server.repl is not None:  # as Redis: a new id, and no second one
            server.repl.replid, server.repl.replid2, server.repl.second_offset = server.master_replid, "0" * 40, -1
        return OK
    if sub == b"error" and n == 3:
        raise RedisError(argv[2])
    if sub == b"log" and n == 3:
        log.warning("DEBUG LOG: %s", argv[2].decode("utf-8", "replace"))
        return OK
    if sub == b"reload":
        return OK
    if sub == b"protocol" and n == 3:
        return _debug_protocol(c, argv[2])
    raise RedisError(
        b"ERR unknown subcommand or wrong number of arguments for '" + argv[1][:128] + b"'. Try DEBUG HELP."
    )

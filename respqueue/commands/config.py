"""CONFIG (GET, SET, RESETSTAT, REWRITE, HELP) and the configuration helpers (:func:`get_config`).

Values of configuration parameters that have no :class:`~respqueue.config.Config`
attribute live in ``server.config_extra`` (created lazily); read any parameter,
whatever its storage, with :func:`get_config`.
"""

from __future__ import annotations

import logging
import os
import re
from collections import deque
from typing import Any

from ..config import PARAMS
from ..errors import SYNTAX
from ..glob import compile_glob
from ..resp import OK, RedisError
from ..tls import RELOADABLE as TLS_RELOADABLE
from .introspection import _all_commands
from .registry import container, subcommand, unique_commands
from .util import INT64_MAX, _help, str2int

log = logging.getLogger("respqueue")


INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
UINT64_MAX = 2**64 - 1


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

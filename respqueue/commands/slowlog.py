"""SLOWLOG, and :func:`slowlog_record`, which ``respqueue.call.call`` runs for slow top-level commands."""

from __future__ import annotations

import time
from typing import Any

from ..resp import OK, RedisError
from .registry import Command, container, subcommand
from .util import _help, str2int

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

"""Server commands: TIME, LASTSAVE, SAVE, BGSAVE, BGREWRITEAOF, SHUTDOWN, MONITOR, ROLE, WAIT, LOLWUT.

The rest of what was here has its own module: CONFIG (``config.py``), INFO (``info.py``), COMMAND
(``introspection.py``), SLOWLOG (``slowlog.py``), DEBUG (``debug.py``). Their public names are
re-exported here for existing importers.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import NOT_INTEGER, SYNTAX, TIMEOUT_NEGATIVE
from ..resp import NO_REPLY, OK, RedisError, Status, Verbatim
from .config import canonical, config_extra, config_set, get_config, parse_memory_strict, reset_stats
from .connection import REDIS_VERSION
from .info import _rss_bytes, bytes_to_human, info_text
from .introspection import (
    _MOVABLE,
    _all_commands,
    _movable_keys,
    _subcommands_of,
    acl_categories,
    command_info_entry,
    get_keys,
)
from .registry import command
from .slowlog import slowlog_get, slowlog_len, slowlog_record, slowlog_reset
from .util import eq, str2int

#: re-exported: these lived here before the split (importers on other branches)
__all__ = [
    "REDIS_VERSION",
    "_MOVABLE",
    "_all_commands",
    "_movable_keys",
    "_rss_bytes",
    "_subcommands_of",
    "acl_categories",
    "bytes_to_human",
    "canonical",
    "command_info_entry",
    "config_extra",
    "config_set",
    "get_config",
    "get_keys",
    "info_text",
    "parse_memory_strict",
    "reset_stats",
    "slowlog_get",
    "slowlog_len",
    "slowlog_record",
    "slowlog_reset",
]

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

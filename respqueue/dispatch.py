"""From argv to reply: lookup, arity, auth, MULTI queueing and the call itself.

:func:`process` is what a network connection calls for each request.
:func:`call` runs a resolved command and is shared with EXEC and the Lua bridge.
"""

from __future__ import annotations

import logging
from typing import Any

from .commands.registry import Command, lookup
from .errors import NOAUTH, unknown_command, unknown_subcommand, wrong_args
from .resp import QUEUED, RedisError

log = logging.getLogger("respqueue")

_MULTI_PASSTHROUGH = frozenset({"exec", "discard", "multi", "watch", "quit", "reset"})
_BUSY_ALLOWED = frozenset({"script|kill", "function|kill", "shutdown", "auth", "hello", "multi", "discard", "exec", "watch", "unwatch", "reset", "quit"})


class Block:
    """Returned by a blocking command that must wait for ``keys``.

    ``timeout`` is in seconds (0 waits forever); ``timeout_reply`` is what the
    client gets when it expires; ``argv`` optionally replaces the command's
    arguments for the retries (XREAD resolves ``$`` once, at block time).
    """

    __slots__ = ("keys", "timeout", "timeout_reply", "argv")

    def __init__(self, keys: list[bytes], timeout: float, timeout_reply: Any, argv: list[bytes] | None = None) -> None:
        self.keys = keys
        self.timeout = timeout
        self.timeout_reply = timeout_reply
        self.argv = argv


def resolve(argv: list[bytes]) -> Command | RedisError:
    """The command (or subcommand) that ``argv`` names, arity checked."""
    cmd = lookup(argv[0])
    if cmd is None:
        return unknown_command(argv)
    if cmd.subcommands is not None:
        if len(argv) < 2:
            return wrong_args(cmd.name)
        sub = cmd.subcommands.get(argv[1]) or cmd.subcommands.get(argv[1].lower())
        if sub is None:
            return unknown_subcommand(argv[1], cmd.name)
        cmd = sub
    ar = cmd.arity
    n = len(argv)
    if (ar > 0 and n != ar) or n < -ar:
        return wrong_args(cmd.fullname)
    return cmd


def process(client: Any, argv: list[bytes]) -> Any:
    """Run one request from a network client; returns the reply (or a Block)."""
    cmd = resolve(argv)
    if type(cmd) is not Command:
        if client.multi is not None:
            client.multi_error = True
        client.server.stats_rejected_calls += 1
        return cmd
    client.last_cmd = cmd
    if not client.authenticated and not cmd.noauth:
        if client.multi is not None:
            client.multi_error = True
        return NOAUTH
    if client.resp == 2 and (client.channels or client.patterns) and not cmd.pubsub_ok:
        return RedisError(
            "ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
            % cmd.fullname
        )
    server = client.server
    if server.busy_script is not None and cmd.fullname not in _BUSY_ALLOWED:
        return server.busy_error()
    if client.multi is not None and cmd.name not in _MULTI_PASSTHROUGH:
        if cmd.no_multi:
            client.multi_error = True
            return RedisError("ERR Command not allowed inside a transaction")
        client.multi.append((cmd, argv))
        return QUEUED
    return call(client, cmd, argv)


def call(client: Any, cmd: Command, argv: list[bytes]) -> Any:
    """Run a resolved command; errors come back as RedisError replies."""
    try:
        r = cmd.proc(client, argv)  # type: ignore[misc]
    except RedisError as e:
        e.__traceback__ = None
        cmd.failed_calls += 1
        r = e
    except Exception:
        log.exception("internal error running %s", cmd.fullname)
        cmd.failed_calls += 1
        r = RedisError(f"ERR internal error while running '{cmd.fullname}'")
    cmd.calls += 1
    return r

"""From argv to reply: lookup, arity, auth, MULTI queueing and the call itself.

:func:`process` is what a network connection calls for each request.
:func:`call` (respqueue/call.py) runs the resolved command: the one call() that EXEC, the Lua bridge and
native scripts use too. ``Block``, ``call``, ``count_error`` and ``internal_error`` are re-exported here.
"""

from __future__ import annotations

import logging
from typing import Any

from .call import Block, call, count_error, internal_error
from .commands.registry import COMMANDS as _COMMANDS
from .commands.registry import RUNS, Command, lookup, register_run
from .errors import NOAUTH, unknown_command, unknown_subcommand, wrong_args
from .resp import QUEUED, RedisError

log = logging.getLogger("respqueue")

__all__ = ["Block", "RUNS", "call", "count_error", "internal_error", "process", "register_run", "resolve", "run_allowed"]

# what a RESP2 client in subscribed mode may still run
_PUBSUB_ALLOWED = frozenset(
    {"ping", "subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe", "quit", "reset"}
)
_MULTI_PASSTHROUGH = frozenset({"exec", "discard", "multi", "watch", "quit", "reset"})


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


def run_allowed(client: Any, cmd: Command, argv: list[bytes]) -> bool:
    """Whether :func:`process` would hand ``argv`` (and any later request of the same length for
    ``cmd``) straight to ``call``, with no MONITOR client to feed: no check of dispatch rejects it
    (arity, authentication, ACL, maxmemory, RESP2 pub/sub, BUSY, MISCONF), no MULTI queues it, and no
    CLIENT REPLY setting drops its reply. A run's requests cannot change any of these, nor can anything
    else while the run goes on (one loop turn). In cluster mode the slots must be stable
    (``Cluster.runs_ok``), and the connection routes each request of the run itself (protocol.py): the
    run ends before the first one this node does not serve."""
    ar = cmd.arity
    server = client.server
    return (
        not ((ar > 0 and len(argv) != ar) or len(argv) < -ar)
        and client.authenticated
        and client.acl_unrestricted
        and client.multi is None
        and client.reply_mode is None
        and not server.monitors
        and not cmd.is_protected
        and (server.cluster is None or server.cluster.runs_ok(client))
        and server.mem_guard is None
        and server.busy_script is None
        and server.write_refused is None
        and not (client.channels or client.patterns)
    )


def process(client: Any, argv: list[bytes]) -> Any:
    """Run one request from a network client; returns the reply (or a Block)."""
    # (typed: the compiled dispatcher reads the command's fields directly)
    cmd: Command | None = _COMMANDS.get(argv[0])
    if cmd is None or cmd.subcommands is not None:
        r = resolve(argv)
        if isinstance(r, RedisError):
            return _rejected(client, r, argv)
        cmd = r
    else:
        ar = cmd.arity
        if (ar > 0 and len(argv) != ar) or len(argv) < -ar:
            return _rejected(client, wrong_args(cmd.fullname), argv)
    client.last_cmd = cmd
    if cmd.is_protected:
        err = _protected_command(client, cmd)
        if err is not None:
            return _rejected(client, err, argv)
    if not client.authenticated and not cmd.noauth:
        return _rejected(client, NOAUTH, argv)
    if not client.acl_unrestricted:
        err = _acl_check(client, cmd, argv)
        if err is not None:
            return _rejected(client, err, argv)
    if client.server.cluster is not None:
        err = client.server.cluster.route(client, cmd, argv)
        if err is not None:
            return _redirected(client, cmd, err)
    if client.server.mem_guard is not None:
        # maxmemory is set (respqueue/memory.py): evict, or refuse with -OOM, as Redis's processCommand
        oom = client.server.mem_guard.check(client, cmd, argv)
        if oom is not None:
            return _rejected(client, oom, argv)
    if (client.channels or client.patterns) and client.resp == 2 and cmd.name not in _PUBSUB_ALLOWED:
        return RedisError(
            "ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
            % cmd.fullname
        )
    if client.server.busy_script is not None and not cmd.allow_busy:
        return client.server.busy_error()
    if client.server.write_refused is not None and (cmd.is_write or _exec_writes(client, cmd)):
        # the store cannot be written (disk full, I/O error...): MISCONF, as Redis
        return _rejected(client, client.server.write_refused, argv)
    if client.multi is not None and cmd.name not in _MULTI_PASSTHROUGH:
        if cmd.no_multi:
            client.multi_error = True
            return RedisError("ERR Command not allowed inside a transaction")
        client.multi.append((cmd, argv))
        return QUEUED
    return call(client, cmd, argv, True)


def _protected_command(client: Any, cmd: Command) -> RedisError | None:
    """DEBUG (enable-debug-command no|yes|local), as Redis's processCommand."""
    from .acl import protected_action_allowed

    if protected_action_allowed(client.server.config.enable_debug_command, client):
        return None
    return RedisError(
        'ERR DEBUG command not allowed. If the enable-debug-command option is set to "local", you can run it from a '
        "local connection, otherwise you need to set this option in the configuration file, and then restart the "
        "server."
    )


_acl_check_command: Any = None


def _acl_check(client: Any, cmd: Command, argv: list[bytes]) -> RedisError | None:
    """The ACL check for a restricted user (respqueue/acl.py); None when allowed."""
    global _acl_check_command
    if _acl_check_command is None:
        from .acl import check_command

        _acl_check_command = check_command
    return _acl_check_command(client, cmd, argv)


def _exec_writes(client: Any, cmd: Command) -> bool:
    """EXEC of a transaction that queued a write command (Redis counts it a write: refused under MISCONF)."""
    return cmd.name == "exec" and bool(client.multi) and any(c.is_write for c, _ in client.multi)


def _rejected(client: Any, err: RedisError, argv: list[bytes] | None = None) -> RedisError:
    client.server.stats_rejected_calls += 1
    count_error(client.server, err)
    if client.multi is not None:
        client.multi_error = True
        if argv is not None and argv[0].lower() == b"exec":
            # Redis's execCommandAbort: the rejected EXEC discards the transaction
            from .commands.transactions import discard_transaction

            discard_transaction(client)
            # Redis's rejectCommandFormat texts have no ERR code; shared errors (-OOM, -MISCONF) keep theirs
            msg = err.msg[4:] if err.msg.startswith(b"ERR ") else err.msg
            return RedisError(b"EXECABORT Transaction discarded because of: " + msg)
    return err


def _redirected(client: Any, cmd: Command, err: RedisError) -> RedisError:
    """Cluster mode: the command is not for this node (MOVED, ASK, CROSSSLOT...); a rejected EXEC discards
    the transaction and answers the error itself, as Redis does."""
    cmd.rejected_calls += 1
    if cmd.name == "exec" and client.multi is not None:
        from .commands.transactions import discard_transaction

        discard_transaction(client)
        client.server.stats_rejected_calls += 1
        count_error(client.server, err)
        return err
    return _rejected(client, err)

"""The one way to run a command: :func:`call` (Redis's ``call()`` in server.c).

Every command that runs goes through :func:`call`, whoever asks: the dispatcher (``dispatch.process``, a
network client's request, ``top=True``), EXEC, clients served when their blocking keys become ready, the Lua
bridge (``redis.call``), BullMQ's native scripts (``compat/scripts.Ctx``) and the dashboard's internal client.
It owns what is the same for all of them:

* **command statistics** (INFO commandstats: ``calls``, ``failed_calls``; ``usec`` and INFO errorstats for
  top-level calls, as before: a script's or a transaction's time is counted once, on EVAL or EXEC);
* **SLOWLOG** (top-level calls only; Redis logs the EVAL or EXEC, not what it ran);
* **MONITOR** for commands run on behalf of another command by a script or internal client
  (``client.is_script``): the Lua bridge, native scripts, the dashboard. A network client's own requests
  (EXEC's queued commands included) are shown as the connection receives them (``protocol._execute``);
* **the journal and keyspace hooks**: a command's writes reach the journal, WATCH and blocked clients through
  ``Database.modified`` inside the procedure, and its stream events through ``respqueue.events``; the
  journal closes its batch after the top-level command, so whatever a call runs lands in one commit.

Native code that does a command's work inline (without the procedure: a read whose answer it already has,
a write it makes directly on the container) still calls :func:`call`, with ``proc=DONE`` (or its own
procedure), so that statistics and MONITOR see the command exactly as the Lua path would have run it; with no
MONITOR client attached (then there is nothing to feed, and ``call(..., proc=DONE)`` only counts the call), it
may collect the commands and count them in one go with :func:`tally` instead. Nothing else counts calls or
feeds MONITOR.

The hot path: with no MONITOR client, a nested call costs one attribute test over the procedure call;
timing (two clock reads) is only for top-level calls.
"""

from __future__ import annotations

import logging
from time import perf_counter_ns as _now_ns
from typing import TYPE_CHECKING, Any

from .resp import RedisError

if TYPE_CHECKING:
    from .commands.registry import Command

log = logging.getLogger("respqueue")


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


def DONE(client: Any, argv: list[bytes]) -> None:  # noqa: N802 (a constant, used as ``proc=DONE``)
    """The procedure for a command whose work the caller did inline (or a read whose answer it has)."""
    return None


def call(client: Any, cmd: Command, argv: list[bytes], top: bool = False, proc: Any = None) -> Any:
    """Run ``cmd`` (a resolved, arity-checked ``Command``) for ``client``; errors come back as RedisError
    replies. ``top``: a network client's request (timed, SLOWLOG, errorstats). ``proc``: what runs instead of
    ``cmd.proc`` (native code's inline equivalent; :data:`DONE` when the work is already done)."""
    server = client.server
    if server.monitors and client.is_script:
        _feed_monitors(server, client, argv)
    if top:
        t0 = _now_ns()
    if proc is DONE:
        r = None  # the caller did the work (native code): only the accounting below
    else:
        try:
            r = (cmd.proc if proc is None else proc)(client, argv)
        except RedisError as e:
            e.__traceback__ = None
            cmd.failed_calls += 1
            r = e
            if top:
                count_error(server, e)
        except Exception:
            r = internal_error(cmd)
            if top:
                count_error(server, r)
    cmd.calls += 1
    if top:
        us = (_now_ns() - t0) // 1000
        cmd.usec += us
        if us >= server.config.slowlog_log_slower_than >= 0 and type(r) is not Block:
            from .commands.slowlog import slowlog_record

            slowlog_record(server, client, argv, us, cmd)
    return r


def tally(cmds: list[Command]) -> None:
    """The statistics of nested calls whose work the caller did inline, counted in one go: what
    ``call(client, cmd, argv, False, DONE)`` does for each of ``cmds`` when no MONITOR client is attached
    (with one attached, native code calls :func:`call` for each, so that MONITOR sees every argv in order)."""
    for cmd in cmds:
        cmd.calls += 1


def _feed_monitors(server: Any, client: Any, argv: list[bytes]) -> None:
    try:
        server.feed_monitors(client, argv)
    except Exception:
        pass


def count_error(server: Any, err: RedisError) -> None:
    """INFO errorstats: count error replies by their first word (ERR, WRONGTYPE...)."""
    code = err.msg.split(b" ", 1)[0]
    server.errorstats[code] = server.errorstats.get(code, 0) + 1


def internal_error(cmd: Any) -> RedisError:
    """The reply when ``cmd``'s procedure raised something other than a RedisError (call it in the
    ``except`` block: it logs the traceback); counts the failed call."""
    log.exception("internal error running %s", cmd.fullname)
    cmd.failed_calls += 1
    return RedisError(f"ERR internal error while running '{cmd.fullname}'")

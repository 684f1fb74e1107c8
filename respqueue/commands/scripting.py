"""Scripting commands: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT *.

The runtime (Lua state, cache, sandbox, redis.call bridge) lives in the
``lua`` package and hangs on ``server.scripting``, created on first use.
"""

from __future__ import annotations

from typing import Any

from ..resp import OK, RedisError, Status
from .registry import command, container, register_run, subcommand
from .util import eq

#: What plug-ins register (as Redis modules do), so the core names none of them: the script runtime's
#: factory (``lua/`` registers ``get_scripting``: server -> runtime, kept as ``server.scripting``) and a router
#: that runs scripts it recognises natively (``compat/`` registers BullMQ's: ``(run, FALLBACK)``; ``run``
#: returns ``FALLBACK`` to hand a script to the runtime). ``cli.load_plugins`` imports both.
_runtime: Any = None
_native: Any = None


def register_runtime(factory: Any) -> None:
    """Install the script runtime: ``factory(server)`` returns the server's runtime (made once, then cached)."""
    global _runtime
    _runtime = factory


def register_router(run: Any, fallback: Any, open_run: Any = None) -> None:
    """Install a native script router: ``run(rt, client, argv, by_sha)`` answers, or returns ``fallback``.
    ``open_run(rt, client, argv)``, if given, is EVALSHA's run opener (``dispatch.register_run``: a
    pipeline of EVALSHAs of one script): None, or a runner that answers each request as ``run`` and the
    Lua path would, sharing work between them."""
    global _native
    _native = (run, fallback, open_run)


def _rt(c: Any) -> Any:
    s = c.server.scripting
    if s is None:
        if _runtime is None:
            raise RedisError("ERR scripting is not available in this server")
        s = _runtime(c.server)
    return s


def _eval(c: Any, argv: list[bytes], by_sha: bool) -> Any:
    """EVAL/EVALSHA: a native implementation of a known BullMQ script, else the Lua runtime."""
    rt = _rt(c)
    if c.server.write_refused is not None and c.server.repl is not None and c.server.repl.is_replica:
        return rt.eval(c, argv, by_sha=by_sha, ro=True)  # a replica: the script may only read
    n = _native
    if n and c.acl_unrestricted:  # a restricted ACL user runs the Lua path: each redis.call is checked
        r = n[0](rt, c, argv, by_sha)
        if r is not n[1]:
            return r
    return rt.eval(c, argv, by_sha=by_sha, ro=False)


def _open_evalsha_run(c: Any, argv: list[bytes]) -> Any:
    """EVALSHA's run opener (dispatch.register_run): the native router's, where ``_eval`` would route to it."""
    n = _native
    if not n or n[2] is None or not c.acl_unrestricted:
        return None
    rt = _rt(c)
    if c.server.write_refused is not None:
        return None
    return n[2](rt, c, argv)


@command("eval", -3, "noscript stale skip_monitor no_mandatory_keys movablekeys", 0, 0, 0, group="scripting")
def eval_(c: Any, argv: list[bytes]) -> Any:
    return _eval(c, argv, False)


@command("evalsha", -3, "noscript stale skip_monitor no_mandatory_keys movablekeys", 0, 0, 0, group="scripting")
def evalsha(c: Any, argv: list[bytes]) -> Any:
    return _eval(c, argv, True)


@command("eval_ro", -3, "readonly noscript stale skip_monitor no_mandatory_keys movablekeys", 0, 0, 0, group="scripting")
def eval_ro(c: Any, argv: list[bytes]) -> Any:
    return _rt(c).eval(c, argv, by_sha=False, ro=True)


@command("evalsha_ro", -3, "readonly noscript stale skip_monitor no_mandatory_keys movablekeys", 0, 0, 0, group="scripting")
def evalsha_ro(c: Any, argv: list[bytes]) -> Any:
    return _rt(c).eval(c, argv, by_sha=True, ro=True)


container("script", -2, group="scripting")


@subcommand("script", "load", 3, "noscript stale")
def script_load(c: Any, argv: list[bytes]) -> Any:
    return _rt(c).compile(argv[2]).sha


@subcommand("script", "exists", -3, "noscript")
def script_exists(c: Any, argv: list[bytes]) -> Any:
    s = c.server.scripting
    if s is None:
        return [0] * (len(argv) - 2)
    return [1 if s.lookup(sha) is not None else 0 for sha in argv[2:]]


@subcommand("script", "flush", -2, "noscript")
def script_flush(c: Any, argv: list[bytes]) -> Any:
    if len(argv) > 3 or (len(argv) == 3 and not (eq(argv[2], b"sync") or eq(argv[2], b"async"))):
        raise RedisError(b"ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    s = c.server.scripting
    if s is not None:
        s.flush()
    return OK


@subcommand("script", "kill", 2, "noscript allow_busy")
def script_kill(c: Any, argv: list[bytes]) -> Any:
    s = c.server.scripting
    if s is None or not s.running:
        raise RedisError(b"NOTBUSY No scripts in execution right now.")
    s.kill()
    return OK


@subcommand("script", "debug", 3, "noscript")
def script_debug(c: Any, argv: list[bytes]) -> Any:
    if eq(argv[2], b"no"):
        return OK
    if eq(argv[2], b"yes") or eq(argv[2], b"sync"):
        raise RedisError(b"ERR SCRIPT DEBUG is not supported by this server")
    raise RedisError(b"ERR Use SCRIPT DEBUG YES/SYNC/NO")


_HELP = [
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
]


@subcommand("script", "help", 2, "loading stale")
def script_help(c: Any, argv: list[bytes]) -> Any:
    return [Status(line.encode()) for line in _HELP]


register_run("evalsha", _open_evalsha_run)

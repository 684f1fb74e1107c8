"""The command table: name, arity, flags and key positions, in one place.

Each command module registers its procedures with :func:`command` (or
:func:`subcommand` for container commands such as CLIENT or CONFIG). The
dispatcher in :mod:`respqueue.dispatch` looks commands up here by name.

A procedure has the signature ``proc(client, argv) -> reply``; ``argv[0]`` is
the command name as the client sent it. Replies are the values described in
:mod:`respqueue.resp`; errors are raised as :class:`~respqueue.resp.RedisError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Proc = Callable[[Any, list[bytes]], Any]


class Command:
    __slots__ = (
        "name",
        "proc",
        "arity",
        "flags",
        "first_key",
        "last_key",
        "step",
        "group",
        "subcommands",
        "parent",
        "is_write",
        "is_blocking",
        "noscript",
        "noauth",
        "pubsub_ok",
        "no_multi",
        "allow_busy",
        "is_denyoom",
        "is_protected",
        "calls",
        "usec",
        "failed_calls",
        "rejected_calls",
        "run",
    )

    def __init__(
        self,
        name: str,
        proc: Proc | None,
        arity: int,
        flags: str,
        first_key: int,
        last_key: int,
        step: int,
        group: str,
        parent: Command | None = None,
    ) -> None:
        self.name = name
        self.proc = proc
        self.arity = arity
        self.flags = tuple(flags.split())
        if (f"{parent.name}|{name}" if parent else name) in DENYOOM and "denyoom" not in self.flags:
            # Redis's denyoom flag (refused when over maxmemory), placed where Redis lists it
            at = 1 if self.flags[:1] in (("write",), ("readonly",)) else 0
            self.flags = (*self.flags[:at], "denyoom", *self.flags[at:])
        self.first_key = first_key
        self.last_key = last_key
        self.step = step
        self.group = group
        self.subcommands: dict[bytes, Command] | None = None
        self.parent = parent
        fl = set(self.flags)
        self.is_write = "write" in fl
        self.is_blocking = "blocking" in fl
        self.noscript = "noscript" in fl
        self.noauth = "no_auth" in fl
        self.pubsub_ok = "pubsub" in fl
        self.no_multi = "no_multi" in fl
        self.allow_busy = "allow_busy" in fl
        self.is_denyoom = "denyoom" in self.flags
        self.is_protected = "protected" in fl  # DEBUG: gated by enable-debug-command (dispatch.process)
        self.calls = 0
        self.usec = 0
        self.failed_calls = 0
        self.rejected_calls = 0
        self.run: Any = None  # a run opener (dispatch.register_run), or None

    @property
    def fullname(self) -> str:
        return f"{self.parent.name}|{self.name}" if self.parent else self.name

    def key_positions(self, argv: list[bytes]) -> list[int]:
        """Indexes of the key arguments, from (first, last, step)."""
        if self.first_key <= 0:
            return []
        last = self.last_key
        if last < 0:
            last = len(argv) + last
        return list(range(self.first_key, min(last, len(argv) - 1) + 1, self.step or 1))

    def __repr__(self) -> str:
        return f"<Command {self.fullname}>"


COMMANDS: dict[bytes, Command] = {}

# Redis 7's commands flagged denyoom (COMMAND INFO of redis-server 7.0): over maxmemory they get -OOM
DENYOOM = frozenset(
    "append bitfield bitop blmove brpoplpush copy decr decrby function|load function|restore geoadd georadius"
    " georadiusbymember geosearchstore getset hincrby hincrbyfloat hmset hset hsetnx incr incrby incrbyfloat"
    " linsert lmove lpush lpushx lset mset msetnx pfadd pfdebug pfmerge psetex restore restore-asking rpoplpush"
    " rpush rpushx sadd sdiffstore set setbit setex setnx setrange sinterstore sort sunionstore xadd xgroup|create"
    " xgroup|createconsumer xsetid zadd zdiffstore zincrby zinterstore zrangestore zunionstore".split()
)


#: Commands a connection runs as *runs* (see :func:`register_run`): the name as clients send it -> Command.
RUNS: dict[bytes, Command] = {}


def register_run(name: str, opener: Any) -> None:
    """Let consecutive requests of command ``name`` with the same first argument (a pipeline of EVALSHAs of
    one script: BullMQ's addBulk) run together. ``opener(client, argv)``, given the first request of a run,
    returns None (each request runs as usual) or a *runner*: a procedure ``runner(client, argv)`` that the
    connection passes to ``call.call`` as ``proc`` for each request of the run in turn (so statistics,
    SLOWLOG and errors are per request, as usual), which may share work between them, and whose
    ``close()`` the connection calls after the last one, or before anything else runs (blocked clients
    served by a request's writes). Each request's reply must be what ``cmd.proc`` would have given.
    Runs are only formed while ``dispatch.run_allowed`` holds (then ``dispatch.process`` would run every request
    of the run directly with ``call``), and in cluster mode only of requests this node serves (each routed by
    the connection)."""
    cmd = COMMANDS[name.encode()]
    cmd.run = opener
    RUNS[name.encode()] = RUNS[name.upper().encode()] = cmd


def _register(table: dict[bytes, Command], cmd: Command) -> None:
    low = cmd.name.encode()
    table[low] = cmd
    table[low.upper()] = cmd


def command(
    name: str,
    arity: int,
    flags: str = "",
    first_key: int = 0,
    last_key: int = 0,
    step: int = 0,
    group: str = "generic",
) -> Callable[[Proc], Proc]:
    """Register ``proc`` as command ``name``.

    ``arity`` follows Redis: positive means exactly that many arguments
    (command name included), negative means at least ``-arity``.
    """

    def deco(proc: Proc) -> Proc:
        _register(COMMANDS, Command(name, proc, arity, flags, first_key, last_key, step, group))
        return proc

    return deco


def container(name: str, arity: int = -2, flags: str = "", group: str = "generic") -> Command:
    """Register a container command (CLIENT, CONFIG, ...) whose work is in subcommands."""
    cmd = COMMANDS.get(name.encode())
    if cmd is None:
        cmd = Command(name, None, arity, flags, 0, 0, 0, group)
        cmd.subcommands = {}
        _register(COMMANDS, cmd)
    return cmd


def subcommand(
    parent: str,
    name: str,
    arity: int,
    flags: str = "",
    first_key: int = 0,
    last_key: int = 0,
    step: int = 0,
) -> Callable[[Proc], Proc]:
    """Register ``proc`` as subcommand ``parent name`` (e.g. ``client setname``)."""

    def deco(proc: Proc) -> Proc:
        p = container(parent)
        assert p.subcommands is not None
        _register(
            p.subcommands,
            Command(name, proc, arity, flags, first_key, last_key, step, p.group, parent=p),
        )
        return proc

    return deco


def lookup(name: bytes) -> Command | None:
    cmd = COMMANDS.get(name)
    if cmd is None:
        cmd = COMMANDS.get(name.lower())
    return cmd


def unique_commands() -> list[Command]:
    seen: dict[int, Command] = {}
    for c in COMMANDS.values():
        seen[id(c)] = c
    return sorted(seen.values(), key=lambda c: c.name)

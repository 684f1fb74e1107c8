"""COMMAND (COUNT, INFO, DOCS, LIST, GETKEYS, GETKEYSANDFLAGS, HELP), the command table as clients see it,
and the ACL categories derived from it."""

from __future__ import annotations

from typing import Any

from ..errors import SYNTAX, wrong_args
from ..glob import compile_glob
from ..resp import RedisError, SetReply, Status
from .registry import Command, command, lookup, unique_commands
from .util import _help, eq, str2int

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

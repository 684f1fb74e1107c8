"""Access control lists as Redis 7.0 does them (acl.c): users, rules, selectors, the permission check.

A :class:`User` has flags (on/off, nopass, payload sanitizing), SHA-256 password hashes and a list of
:class:`Selector`; the first (root) selector is what ``ACL SETUSER`` rules without parentheses change,
the others come from ``(...)``. A command is allowed when any selector allows it: the command (a set of
:class:`~respqueue.commands.registry.Command` objects, Redis's command bitmap), every key it touches
(``~pattern``, ``%R~``/``%W~`` read or write only) and every channel it publishes or subscribes to
(``&pattern``).

The state lives in ``server.acl`` (:class:`AclState`). Clients carry ``client.user`` and
``client.acl_unrestricted``: True while their user may run anything on any key and channel (the
default user, as shipped), so the dispatcher's check costs one attribute test in that case.

Public helpers for other parts of the server (the dashboard): :func:`authenticate` and
:func:`user_can`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from .glob import compile_glob
from .resp import RedisError

log = logging.getLogger("respqueue")

# Redis's category names, in ACL CAT's order
CATEGORIES = (
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
)

READ = 1
WRITE = 2
ALL_PERM = READ | WRITE

# check results, in Redis's order of relevance (ACL_DENIED_*)
OK_ = 0
DENIED_CMD = 1
DENIED_KEY = 2
DENIED_AUTH = 3
DENIED_CHANNEL = 4

# Key permissions a command needs (Redis 7.0's key specs: ACCESS needs read; INSERT, DELETE, UPDATE need
# write). Commands not listed: read for read-only commands, write for write commands.
_KEY_RW = frozenset(
    {
        "blmove",
        "blmpop",
        "blpop",
        "brpop",
        "brpoplpush",
        "bzmpop",
        "bzpopmax",
        "bzpopmin",
        "decr",
        "decrby",
        "eval",
        "evalsha",
        "getdel",
        "getex",
        "getset",
        "hincrby",
        "hincrbyfloat",
        "incr",
        "incrby",
        "incrbyfloat",
        "lmove",
        "lmpop",
        "lpop",
        "move",
        "rename",
        "renamenx",
        "rpop",
        "rpoplpush",
        "set",
        "smove",
        "spop",
        "zincrby",
        "zmpop",
        "zpopmax",
        "zpopmin",
        "xreadgroup",
        "xclaim",
        "xautoclaim",
    }
)
_KEY_NONE = frozenset(
    {
        "exists",
        "hexists",
        "hlen",
        "hstrlen",
        "llen",
        "memory|usage",
        "object|encoding",
        "object|freq",
        "object|idletime",
        "object|refcount",
        "scard",
        "sismember",
        "strlen",
        "touch",
        "type",
        "watch",
        "xlen",
        "zcard",
    }
)
# commands whose first key needs other permissions than the rest: (first, rest)
_KEY_SPLIT = {
    "blmove": (ALL_PERM, WRITE),
    "brpoplpush": (ALL_PERM, WRITE),
    "lmove": (ALL_PERM, WRITE),
    "rpoplpush": (ALL_PERM, WRITE),
    "smove": (ALL_PERM, WRITE),
    "rename": (ALL_PERM, WRITE),
    "renamenx": (ALL_PERM, WRITE),
    "copy": (READ, WRITE),
    "sdiffstore": (WRITE, READ),
    "sinterstore": (WRITE, READ),
    "sunionstore": (WRITE, READ),
    "zdiffstore": (WRITE, READ),
    "zinterstore": (WRITE, READ),
    "zunionstore": (WRITE, READ),
    "zrangestore": (WRITE, READ),
}
# shard channels sit in key positions, flagged not_key in Redis's key specs: channels, not keys
_NOT_KEYS = frozenset({"ssubscribe", "spublish", "sunsubscribe"})
# commands with channel arguments: name -> (first channel index, all the rest too, is a pattern)
_CHANNELS = {
    "publish": (1, False, False),
    "spublish": (1, False, False),
    "subscribe": (1, True, False),
    "ssubscribe": (1, True, False),
    "psubscribe": (1, True, True),
}

NOPERM_KEY = RedisError(b"NOPERM this user has no permissions to access one of the keys used as arguments")
NOPERM_CHANNEL = RedisError(b"NOPERM this user has no permissions to access one of the channels used as arguments")

_SETUSER_ERRORS = {
    "ENOENT": "Unknown command or category name in ACL",
    "EINVAL": "Syntax error",
    "EEXIST": "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any "
    "effect. Try 'resetkeys' to start with an empty list of patterns",
    "EISDIR": "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any "
    "effect. Try 'resetchannels' to start with an empty list of channels",
    "ENODEV": "The password you are trying to remove from the user does not exist",
    "EBADMSG": "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
    "EALREADY": "Duplicate user found. A user can only be defined once in config files",
    "ECHILD": "Allowing first-arg of a subcommand is not supported",
}


class AclError(Exception):
    """A rule that cannot be applied; ``code`` is Redis's errno name (see _SETUSER_ERRORS)."""

    def __init__(self, code: str, text: str | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.text = text

    @property
    def message(self) -> str:
        return self.text or _SETUSER_ERRORS.get(self.code, "Wrong format")


# ---- the command table, seen by ACL --------------------------------------------------------------


class _Table:
    """Every command and subcommand with its categories, computed once (the table is fixed at import)."""

    def __init__(self) -> None:
        from .commands.introspection import _subcommands_of, acl_categories
        from .commands.registry import unique_commands

        self.top: list[Any] = []  # top-level commands (containers included), by name
        self.subs: dict[int, list[Any]] = {}  # id(container) -> its subcommands
        self.cats: dict[int, frozenset[str]] = {}
        self.all: list[Any] = []
        for cmd in unique_commands():
            self.top.append(cmd)
            self.all.append(cmd)
            self.cats[id(cmd)] = frozenset(x[1:] for x in acl_categories(cmd))
            subs = sorted(_subcommands_of(cmd), key=lambda s: s.name)
            if subs:
                self.subs[id(cmd)] = subs
                for s in subs:
                    self.all.append(s)
                    self.cats[id(s)] = frozenset(x[1:] for x in acl_categories(s))
        self.by_cat = {cat: [c for c in self.all if cat in self.cats[id(c)]] for cat in CATEGORIES}

    def lookup(self, name: str) -> Any:
        """``get`` or ``config|get`` -> the Command, or None."""
        from .commands.registry import lookup

        if "|" in name:
            parent, _, sub = name.partition("|")
            p = lookup(parent.lower().encode())
            if p is None:
                return None
            for s in self.subs.get(id(p), ()):
                if s.name == sub.lower():
                    return s
            return None
        return lookup(name.lower().encode())

    def in_category(self, cat: str) -> list[Any]:
        return self.by_cat.get(cat, [])


_table: _Table | None = None


def table() -> _Table:
    global _table
    if _table is None:
        _table = _Table()
    return _table


def category_commands(cat: str) -> list[bytes] | None:
    """ACL CAT <category>: the full names of its commands (None for an unknown category)."""
    if cat.lower() not in CATEGORIES:
        return None
    return [c.fullname.encode() for c in table().in_category(cat.lower())]


# ---- selectors and users --------------------------------------------------------------------------


class _Prefix:
    __slots__ = ("prefix",)

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix

    def match(self, key: bytes) -> bool:
        return key.startswith(self.prefix)


class KeyPattern:
    __slots__ = ("flags", "pattern", "match")

    def __init__(self, pattern: bytes, flags: int) -> None:
        self.pattern = pattern
        self.flags = flags
        head = pattern[:-1]
        if pattern.endswith(b"*") and not any(ch in head for ch in b"*?[\\"):
            self.match: Callable[[bytes], bool] = _Prefix(head).match  # "bull:*": a plain prefix test
        else:
            self.match = compile_glob(pattern)

    def describe(self) -> str:
        p = self.pattern.decode("utf-8", "surrogateescape")
        if self.flags == ALL_PERM:
            return "~" + p
        return ("%R~" if self.flags == READ else "%W~") + p


# acl-pubsub-default: True when new users and selectors start with allchannels (AclState sets it)
_PUBSUB_ALL = [False]


class Selector:
    __slots__ = (
        "root",
        "allowed",
        "allcommands",
        "future",
        "firstargs",
        "patterns",
        "allkeys",
        "channels",
        "allchannels",
    )

    def __init__(self, root: bool = False) -> None:
        self.root = root
        self.allowed: set[Any] = set()
        self.allcommands = False
        self.future = False  # Redis's reserved "future commands" bit, set only by +@all
        self.firstargs: dict[Any, list[str]] = {}
        self.patterns: list[KeyPattern] = []
        self.allkeys = False
        self.channels: list[bytes] = []
        self.allchannels = _PUBSUB_ALL[0]

    def copy(self) -> Selector:
        s = Selector(self.root)
        s.allowed = set(self.allowed)
        s.allcommands = self.allcommands
        s.future = self.future
        s.firstargs = {k: list(v) for k, v in self.firstargs.items()}
        s.patterns = [KeyPattern(p.pattern, p.flags) for p in self.patterns]
        s.allkeys = self.allkeys
        s.channels = list(self.channels)
        s.allchannels = self.allchannels
        return s

    # -- rules --
    def _change_perm(self, cmd: Any, allow: bool) -> None:
        t = table()
        cmds = [cmd, *t.subs.get(id(cmd), ())]
        for c in cmds:
            if allow:
                self.allowed.add(c)
            else:
                self.allowed.discard(c)
        self.firstargs.pop(cmd, None)
        if not allow:
            self.allcommands = False

    def _set_category(self, cat: str, allow: bool) -> None:
        t = table()
        for cmd in t.top:
            if cat in t.cats[id(cmd)]:
                self._change_perm(cmd, allow)
            for s in t.subs.get(id(cmd), ()):
                if cat in t.cats[id(s)]:
                    self._change_perm(s, allow)

    def apply(self, op: str) -> None:
        """One rule (ACLSetSelector); raises AclError."""
        low = op.lower()
        t = table()
        if low in ("allkeys", "~*", "resetkeys"):
            self.allkeys = low != "resetkeys"
            self.patterns = []
        elif low in ("allchannels", "&*", "resetchannels"):
            self.allchannels = low != "resetchannels"
            self.channels = []
        elif low in ("allcommands", "+@all", "nocommands", "-@all"):
            every = low in ("allcommands", "+@all")
            self.allcommands = every
            self.future = every
            self.allowed = set(t.all) if every else set()
            self.firstargs = {}
        elif op[:1] in ("~", "%"):
            if self.allkeys:
                raise AclError("EEXIST")
            flags = 0
            offset = 1
            if op[0] == "%":
                n = len(op)
                while offset < n:
                    ch = op[offset].upper()
                    if ch == "R" and not flags & READ:
                        flags |= READ
                    elif ch == "W" and not flags & WRITE:
                        flags |= WRITE
                    elif op[offset] == "~":
                        offset += 1
                        break
                    else:
                        raise AclError("EINVAL")
                    offset += 1
                if not flags:
                    raise AclError("EINVAL")
            else:
                flags = ALL_PERM
            pat = op[offset:].encode("utf-8", "surrogateescape")
            if pat == b"*" and flags == ALL_PERM:
                self.allkeys = True
                self.patterns = []
                return
            for p in self.patterns:
                if p.pattern == pat:
                    p.flags |= flags
                    break
            else:
                self.patterns.append(KeyPattern(pat, flags))
            self.allkeys = False
        elif op[:1] == "&":
            if self.allchannels:
                raise AclError("EISDIR")
            ch = op[1:].encode("utf-8", "surrogateescape")
            if ch == b"*":
                self.allchannels = True
                self.channels = []
                return
            if ch not in self.channels:
                self.channels.append(ch)
            self.allchannels = False
        elif op[:2] in ("+@", "-@"):
            cat = low[2:]
            if cat not in CATEGORIES:
                raise AclError("ENOENT")
            self._set_category(cat, op[0] == "+")
            if op[0] == "-":
                self.allcommands = False
        elif op[:1] == "+":
            name = op[1:]
            if "|" not in name:
                cmd = t.lookup(name)
                if cmd is None:
                    raise AclError("ENOENT")
                self._change_perm(cmd, True)
                return
            parent_name, _, sub = name.rpartition("|")
            cmd = t.lookup(parent_name)
            if cmd is None:
                raise AclError("ENOENT")
            if cmd.parent is not None:
                raise AclError("ECHILD")
            if not sub:
                raise AclError("EINVAL")
            if id(cmd) in t.subs:
                sc = t.lookup(name)
                if sc is None:
                    raise AclError("ENOENT")
                self._change_perm(sc, True)
            else:
                log.warning(
                    "Deprecation warning: Allowing a first arg of an otherwise blocked command is a misuse "
                    "of ACL and may get disabled in the future (offender: +%s)",
                    name,
                )
                if cmd not in self.allowed:
                    fa = self.firstargs.setdefault(cmd, [])
                    if sub.lower() not in fa:
                        fa.append(sub.lower())
        elif op[:1] == "-":
            cmd = t.lookup(op[1:])
            if cmd is None:
                raise AclError("ENOENT")
            self._change_perm(cmd, False)
        else:
            raise AclError("EINVAL")

    # -- description (Redis 7.0's ACLDescribeSelectorCommandRules) --
    def describe_commands(self) -> str:
        t = table()
        additive = not self.future
        rules = ["-@all" if additive else "+@all"]
        fake = Selector()
        fake.apply("-@all" if additive else "+@all")
        temp = Selector()
        temp.allowed = set(self.allowed)
        applied: set[str] = set()
        while True:
            best = None
            mindiff, maxsame = 1 << 62, 0
            for cat in CATEGORIES:
                if cat in applied:
                    continue
                on = off = 0
                for c in t.in_category(cat):
                    if c in temp.allowed:
                        on += 1
                    else:
                        off += 1
                diff, same = (off, on) if additive else (on, off)
                if same > diff and (diff < mindiff or (diff == mindiff and same > maxsame)):
                    best, mindiff, maxsame = cat, diff, same
            if best is None:
                break
            op = ("+@" if additive else "-@") + best
            fake.apply(op)
            temp.apply(("-@" if additive else "+@") + best)
            rules.append(op)
            applied.add(best)
        for cmd in t.top:
            self._describe_single(cmd, fake, rules)
            for s in t.subs.get(id(cmd), ()):
                self._describe_single(s, fake, rules)
            fa = self.firstargs.get(cmd)
            if fa and cmd not in self.allowed:
                rules.extend("+" + cmd.fullname + "|" + a for a in fa)
        return " ".join(rules)

    def _describe_single(self, cmd: Any, fake: Selector, rules: list[str]) -> None:
        userbit = cmd in self.allowed
        if userbit != (cmd in fake.allowed):
            rules.append(("+" if userbit else "-") + cmd.fullname)
            fake._change_perm(cmd, userbit)

    def describe_keys(self) -> str:
        if self.allkeys:
            return "~*"
        return " ".join(p.describe() for p in self.patterns)

    def describe_channels(self) -> str:
        if self.allchannels:
            return "&*"
        return " ".join("&" + c.decode("utf-8", "surrogateescape") for c in self.channels)

    def describe(self) -> str:
        parts = []
        if self.allkeys:
            parts.append("~*")
        else:
            parts.extend(p.describe() for p in self.patterns)
        if self.allchannels:
            parts.append("&*")
        else:
            parts.append("resetchannels")
            parts.extend("&" + c.decode("utf-8", "surrogateescape") for c in self.channels)
        parts.append(self.describe_commands())
        return " ".join(parts)

    # -- the check (ACLSelectorCheckCmd) --
    def check(self, cmd: Any, argv: list[bytes], keys: list[tuple[int, int]] | None = None) -> tuple[int, int]:
        """(result, offending argument index) for this selector alone; ``keys`` as key_perms gives them."""
        if not self.allcommands and cmd not in self.allowed and not cmd.noauth:
            fa = self.firstargs.get(cmd) if self.firstargs else None
            if len(argv) < 2 or not fa or argv[1].decode("latin-1").lower() not in fa:
                return DENIED_CMD, 0
        info = _info(cmd)
        if not self.allkeys and info[0]:
            if keys is None:
                if info[6]:  # one key at a fixed place (GET, HSET, XADD...): no list to build
                    idx = cmd.first_key
                    key = argv[idx]
                    need = info[3]
                    if info[5] and len(argv) > 3:  # SET ... GET reads the old value (setGetKeys)
                        need = ALL_PERM if any(a.lower() == b"get" for a in argv[3:]) else WRITE
                    elif info[5]:
                        need = WRITE
                    for p in self.patterns:
                        if p.flags & need == need and p.match(key):
                            break
                    else:
                        return DENIED_KEY, idx
                    keys = ()
                else:
                    keys = key_perms(cmd, argv)
            for idx, need in keys:
                key = argv[idx]
                for p in self.patterns:
                    if p.flags & need == need and p.match(key):
                        break
                else:
                    return DENIED_KEY, idx
        chan = info[1]
        if chan is not None and not self.allchannels:
            first, rest, is_pattern = chan
            last = len(argv) if rest else first + 1
            for idx in range(first, min(last, len(argv))):
                ch = argv[idx]
                if is_pattern:
                    ok = ch in self.channels
                else:
                    ok = any(compile_glob(p)(ch) for p in self.channels)
                if not ok:
                    return DENIED_CHANNEL, idx
        return OK_, 0


_USER_FLAGS = ("on", "off", "nopass", "skip-sanitize-payload", "sanitize-payload")


class User:
    __slots__ = ("name", "flags", "passwords", "selectors", "unrestricted")

    def __init__(self, name: bytes) -> None:
        self.name = name
        self.flags: set[str] = {"off"}
        self.passwords: list[str] = []
        root = Selector(root=True)
        self.selectors: list[Selector] = [root]
        self.unrestricted = False

    @property
    def root(self) -> Selector:
        return self.selectors[0]

    @property
    def enabled(self) -> bool:
        return "on" in self.flags

    def copy(self, name: bytes | None = None) -> User:
        u = User(self.name if name is None else name)
        u.flags = set(self.flags)
        u.passwords = list(self.passwords)
        u.selectors = [s.copy() for s in self.selectors]
        u.refresh()
        return u

    def refresh(self) -> None:
        r = self.root
        self.unrestricted = r.allcommands and r.allkeys and r.allchannels

    def apply(self, op: str) -> None:
        """One SETUSER modifier (ACLSetUser); raises AclError."""
        low = op.lower()
        f = self.flags
        if low == "on":
            f.discard("off")
            f.add("on")
        elif low == "off":
            f.discard("on")
            f.add("off")
        elif low == "skip-sanitize-payload":
            f.discard("sanitize-payload")
            f.add("skip-sanitize-payload")
        elif low == "sanitize-payload":
            f.discard("skip-sanitize-payload")
            f.add("sanitize-payload")
        elif low == "nopass":
            f.add("nopass")
            self.passwords = []
        elif low == "resetpass":
            f.discard("nopass")
            self.passwords = []
        elif op[:1] in (">", "#"):
            if op[0] == ">":
                h = hash_password(op[1:].encode("utf-8", "surrogateescape"))
            else:
                h = op[1:]
                if not _valid_hash(h):
                    raise AclError("EBADMSG")
            if h not in self.passwords:
                self.passwords.append(h)
            f.discard("nopass")
        elif op[:1] in ("<", "!"):
            if op[0] == "<":
                h = hash_password(op[1:].encode("utf-8", "surrogateescape"))
            else:
                h = op[1:]
                if not _valid_hash(h):
                    raise AclError("EBADMSG")
            if h not in self.passwords:
                raise AclError("ENODEV")
            self.passwords.remove(h)
        elif op[:1] == "(" and op[-1:] == ")":
            s = Selector()
            for tok in op[1:-1].split():
                s.apply(tok)
            self.selectors.append(s)
        elif low == "clearselectors":
            del self.selectors[1:]
        elif low == "reset":
            for x in ("resetpass", "resetkeys", "resetchannels", "off", "sanitize-payload", "clearselectors", "-@all"):
                self.apply(x)
            if _PUBSUB_ALL[0]:
                self.apply("allchannels")
        else:
            self.root.apply(op)
        self.refresh()

    def describe(self) -> str:
        parts = [fl for fl in _USER_FLAGS if fl in self.flags]
        parts.extend("#" + p for p in self.passwords)
        out = " ".join(parts + [self.root.describe()])
        for s in self.selectors[1:]:
            out += " (" + s.describe() + ")"
        return out

    def check_password(self, password: bytes) -> bool:
        if not self.enabled:
            return False
        if "nopass" in self.flags:
            return True
        return hash_password(password) in self.passwords

    def check(self, cmd: Any, argv: list[bytes]) -> tuple[int, int]:
        """ACLCheckAllUserCommandPerm: (result, index of the offending argument)."""
        sels = self.selectors
        if len(sels) == 1:
            return sels[0].check(cmd, argv)
        keys = key_perms(cmd, argv) if _info(cmd)[0] else []
        relevant, last_idx = DENIED_CMD, 0
        for s in sels:
            res, idx = s.check(cmd, argv, keys)
            if res == OK_:
                return OK_, 0
            if res > relevant or (res == relevant and idx > last_idx):
                relevant, last_idx = res, idx
        return relevant, last_idx


def hash_password(pw: bytes) -> str:
    return hashlib.sha256(pw).hexdigest()


def _valid_hash(h: str) -> bool:
    return len(h) == 64 and all(c in "0123456789abcdef" for c in h)


_INFO: dict[Any, tuple[Any, ...]] = {}
_movable_keys: Any = None


def _info(cmd: Any) -> tuple[Any, ...]:
    """Per command, computed once: (has keys, channel spec, movable, first key's need, other keys' need)."""
    info = _INFO.get(cmd)
    if info is None:
        global _movable_keys
        from .commands.introspection import _MOVABLE
        from .commands.introspection import _movable_keys as mk

        _movable_keys = mk
        name = cmd.fullname
        movable = name in _MOVABLE
        has_keys = (cmd.first_key > 0 or movable) and name not in _NOT_KEYS
        if name in _KEY_NONE:
            first = rest = 0
        elif name in _KEY_SPLIT:
            first, rest = _KEY_SPLIT[name]
        elif name in _KEY_RW:
            first = rest = ALL_PERM
        elif cmd.is_write:
            first = rest = WRITE
        else:
            first = rest = READ
        single = has_keys and not movable and cmd.first_key == cmd.last_key
        info = _INFO[cmd] = (has_keys, _CHANNELS.get(name), movable, first, rest, name == "set", single)
    return info


def key_perms(cmd: Any, argv: list[bytes]) -> list[tuple[int, int]]:
    """(argument index, permissions needed) for each key ``argv`` names."""
    has_keys, _chan, movable, first, rest, is_set, _single = _info(cmd)
    if not has_keys:
        return []
    if movable:
        try:
            pos = _movable_keys(cmd.fullname, argv)
        except RedisError:
            return []
    else:
        pos = cmd.key_positions(argv)
    if not pos:
        return []
    if is_set:  # Redis's setGetKeys: the GET option reads the old value
        first = ALL_PERM if any(a.lower() == b"get" for a in argv[3:]) else WRITE
        return [(pos[0], first)]
    if first == rest:
        return [(i, first) for i in pos]
    return [(i, first if n == 0 else rest) for n, i in enumerate(pos)]


# ---- the ACL log ----------------------------------------------------------------------------------

_REASONS = {DENIED_CMD: "command", DENIED_KEY: "key", DENIED_AUTH: "auth", DENIED_CHANNEL: "channel"}
GROUPING_MS = 60000


class LogEntry:
    __slots__ = ("count", "reason", "context", "object", "username", "ctime", "cinfo")

    def __init__(self, reason: str, context: str, obj: bytes, username: bytes, cinfo: bytes) -> None:
        self.count = 1
        self.reason = reason
        self.context = context
        self.object = obj
        self.username = username
        self.ctime = time.time() * 1000
        self.cinfo = cinfo


# ---- the server's ACL state -----------------------------------------------------------------------


class AclState:
    """The users of one server, its ACL log and the persistence of users."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.users: dict[bytes, User] = {}
        self.default = self._new_default()
        self.users[b"default"] = self.default
        self.log: list[LogEntry] = []
        # the users file keeps the default user only once ACL commands changed it: a password that
        # came from requirepass is not persisted (CONFIG SET requirepass is not, in Redis, without a rewrite)
        self.default_in_file = False

    @staticmethod
    def _new_default() -> User:
        u = User(b"default")
        for op in ("+@all", "~*", "&*", "on", "nopass"):
            u.apply(op)
        return u

    # -- setup --
    def startup(self) -> None:
        """Load users (aclfile, or the users file in --dir), then apply requirepass to the default user."""
        cfg = self.server.config
        path = self.users_path()
        if path and os.path.exists(path):
            err = self.load_file(path)
            if err:
                raise ValueError(err)
        elif getattr(cfg, "aclfile", None):
            raise ValueError(f"Error loading ACLs, opening file '{cfg.aclfile}': No such file or directory")
        if cfg.requirepass:
            self.set_requirepass(cfg.requirepass)

    def users_path(self) -> str | None:
        cfg = self.server.config
        if getattr(cfg, "aclfile", None):
            return str(cfg.aclfile)
        if cfg.durability == "memory":
            return None
        return os.path.join(cfg.dir, "users.acl")

    def set_requirepass(self, pw: str | None) -> None:
        """requirepass: the default user's only password (or nopass), as Redis does."""
        self.default.apply("resetpass")
        if pw:
            self.default.apply(">" + pw)
        else:
            self.default.apply("nopass")
        self.changed(persist=False)

    # -- users --
    def get(self, name: bytes) -> User | None:
        return self.users.get(name)

    def setuser(self, name: bytes, ops: list[bytes]) -> RedisError | None:
        """ACL SETUSER: apply every rule to a copy, commit only when all applied."""
        if any(ch in b" \t\n\r\x0b\x0c\x00" for ch in name):
            return RedisError(b"ERR Usernames can't contain spaces or null characters")
        _PUBSUB_ALL[0] = self.server.config.acl_pubsub_default == "allchannels"
        merged, bad = merge_selector_args(ops)
        if merged is None:
            return RedisError(b"ERR Unmatched parenthesis in acl selector starting at '" + ops[bad] + b"'.")
        cur = self.users.get(name)
        u = cur.copy() if cur is not None else User(name)
        for op in merged:
            try:
                u.apply(op.decode("utf-8", "surrogateescape"))
            except AclError as e:
                return RedisError(b"ERR Error in ACL SETUSER modifier '" + op + b"': " + e.message.encode())
        if name == b"default":
            self.default_in_file = True
        if cur is None:
            self.users[name] = u
        else:
            cur.flags, cur.passwords, cur.selectors = u.flags, u.passwords, u.selectors
            cur.refresh()
            self._kill_pubsub_clients(cur)
        self.changed()
        return None

    def _kill_pubsub_clients(self, u: User) -> None:
        """ACLKillPubsubClientsIfNeeded: disconnect the user's subscribers whose channels are no longer allowed."""
        if any(s.allchannels for s in u.selectors):
            return
        allowed = [ch for s in u.selectors for ch in s.channels]
        matchers = [compile_glob(p) for p in allowed]
        for c in list(self.server.clients.values()):
            if getattr(c, "user", None) is not u or not (c.channels or c.patterns):
                continue
            bad = any(p not in allowed for p in c.patterns)
            if not bad:
                for ch in c.channels:
                    name = ch[1] if type(ch) is tuple else ch  # shard channels are (SHARD, name)
                    if not any(m(name) for m in matchers):
                        bad = True
                        break
            if bad:
                c.close("ACL: no longer allowed its channels")

    def deluser(self, names: list[bytes], me: Any = None) -> int:
        """ACL DELUSER: clients authenticated as a deleted user are disconnected (``me`` after its reply)."""
        n = 0
        for name in names:
            u = self.users.pop(name, None)
            if u is None:
                continue
            n += 1
            for c in list(self.server.clients.values()):
                if getattr(c, "user", None) is u:
                    if c is me:
                        c.close_after_reply()
                    else:
                        c.close("user deleted")
        if n:
            self.changed()
        return n

    def changed(self, persist: bool = True) -> None:
        """After any change to users: refresh every client's fast-path flag; persist without an aclfile."""
        d = self.default
        for c in self.server.clients.values():
            u = getattr(c, "user", None)
            if u is not None:
                c.acl_unrestricted = u.unrestricted and len(u.selectors) == 1
        d.refresh()
        if persist and not getattr(self.server.config, "aclfile", None) and getattr(self, "_started", False):
            path = self.users_path()
            if path:
                try:
                    self.save_file(path)
                except OSError as e:
                    log.error("cannot save users to %s: %s", path, e)

    # -- files --
    def dump(self, with_default: bool = True) -> str:
        return "".join(
            "user " + n.decode("utf-8", "surrogateescape") + " " + u.describe() + "\n"
            for n, u in sorted(self.users.items())
            if with_default or n != b"default"
        )

    def save_file(self, path: str) -> None:
        tmp = path + ".tmp"
        auto = not getattr(self.server.config, "aclfile", None)
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(self.dump(with_default=not auto or self.default_in_file))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    def load_file(self, path: str) -> str | None:
        """ACLLoadFromFile: replace the users with the file's; returns the error text, or None."""
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as fh:
                lines = fh.read().split("\n")
        except OSError as e:
            return f"Error loading ACLs, opening file '{path}': {e.strerror}"
        errors = []
        users: dict[bytes, User] = {}
        _PUBSUB_ALL[0] = self.server.config.acl_pubsub_default == "allchannels"
        for n, line in enumerate(lines, 1):
            line = line.strip(" \t\r\n")
            if not line or line.startswith("#"):
                continue
            argv = line.split()
            if argv[0] != "user" or len(argv) < 2:
                errors.append(f"{path}:{n} should start with user keyword followed by the username. ")
                continue
            name = argv[1].encode("utf-8", "surrogateescape")
            merged, _bad = merge_selector_args([a.encode("utf-8", "surrogateescape") for a in argv[2:]])
            if merged is None:
                errors.append(f"{path}:{n}: Unmatched parenthesis in selector definition.")
                continue
            u = User(name)
            syntax_error = False
            for op in merged:
                text = op.decode("utf-8", "surrogateescape")
                try:
                    u.apply(text)
                except AclError as e:
                    if e.code == "ENOENT":
                        errors.append(f"{path}:{n}: Error in applying operation '{text}': {e.message}. ")
                    elif not syntax_error:
                        errors.append(f"{path}:{n}: {e.message}. ")
                        syntax_error = True
            if name in users:
                errors.append(f"WARNING: Duplicate user '{argv[1]}' found on line {n}. ")
                continue
            users[name] = u
        if errors:
            return (
                "".join(errors)
                + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
            )
        d = users.pop(b"default", None)
        if d is None:
            d = self._new_default()
        else:
            self.default_in_file = True
        self.default.flags, self.default.passwords, self.default.selectors = d.flags, d.passwords, d.selectors
        self.default.refresh()
        old = self.users
        self.users = {b"default": self.default, **users}
        for c in list(self.server.clients.values()):
            u = getattr(c, "user", None)
            if u is not None and u is not self.default:
                nu = self.users.get(u.name)
                if nu is None:
                    c.close("user deleted by ACL LOAD")
                else:
                    c.user = nu
        del old
        self.changed()
        return None

    # -- the log --
    def log_denied(self, c: Any, reason: int, context: str, obj: bytes, username: bytes | None = None) -> None:
        from .commands.connection import client_line

        uname = username if username is not None else c.user.name
        r = _REASONS[reason]
        now = time.time() * 1000
        try:
            cinfo = client_line(c)
        except Exception:
            cinfo = b""
        for i, e in enumerate(self.log):
            if (
                e.reason == r
                and e.context == context
                and now - e.ctime < GROUPING_MS
                and e.object == obj
                and e.username == uname
            ):
                e.count += 1
                e.ctime = now
                e.cinfo = cinfo
                if i:
                    del self.log[i]
                    self.log.insert(0, e)
                return
        self.log.insert(0, LogEntry(r, context, obj, uname, cinfo))
        max_len = _log_max(self.server)
        del self.log[max_len:]


def _log_max(server: Any) -> int:
    try:
        from .commands.config import get_config

        return int(get_config(server, "acllog-max-len"))
    except (KeyError, ValueError):
        return 128


def merge_selector_args(ops: list[bytes]) -> tuple[list[bytes] | None, int]:
    """ACLMergeSelectorArguments: join ``(a``, ``b``, ``c)`` into one ``(a b c)``."""
    out: list[bytes] = []
    cur: bytes | None = None
    start = -1
    for j, op in enumerate(ops):
        if cur is None and op[:1] == b"(" and op[-1:] != b")":
            cur = op
            start = j
            continue
        if cur is not None:
            cur += b" " + op
            if op[-1:] == b")":
                out.append(cur)
                cur = None
            continue
        out.append(op)
    if cur is not None:
        return None, start
    return out, -1


# ---- the checks the dispatcher, EXEC and scripts call ---------------------------------------------


def deny_reason(c: Any, cmd: Any, argv: list[bytes], context: str) -> tuple[int, int]:
    """Check ``c``'s user for ``cmd``; logs a denial (ACL LOG) and returns (result, argument index)."""
    u = c.user
    res, idx = u.check(cmd, argv)
    if res != OK_:
        obj = cmd.fullname.encode() if res == DENIED_CMD else argv[idx]
        c.server.acl.log_denied(c, res, context, obj)
    return res, idx


def check_command(c: Any, cmd: Any, argv: list[bytes]) -> RedisError | None:
    """The dispatcher's check (processCommand): None when allowed, else the -NOPERM error."""
    res, idx = c.user.check(cmd, argv)
    if res == OK_:
        return None
    c.server.acl.log_denied(
        c,
        res,
        "multi" if c.multi is not None else "toplevel",
        cmd.fullname.encode() if res == DENIED_CMD else argv[idx],
    )
    if res == DENIED_CMD:
        return RedisError(b"NOPERM this user has no permissions to run the '%s' command" % cmd.fullname.encode())
    if res == DENIED_KEY:
        return NOPERM_KEY
    return NOPERM_CHANNEL


_EXEC_REASONS = {
    DENIED_CMD: "no permission to execute the command or subcommand",
    DENIED_KEY: "no permission to touch the specified keys",
    DENIED_CHANNEL: "no permission to access one of the channels used as arguments",
}


def check_exec(c: Any, cmd: Any, argv: list[bytes]) -> RedisError | None:
    """EXEC checks each queued command again (rules may have changed since it was queued)."""
    res, _ = deny_reason(c, cmd, argv, "multi")
    if res == OK_:
        return None
    return RedisError(
        "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. "
        "This command is no longer allowed for the following reason: " + _EXEC_REASONS.get(res, "no permission")
    )


_SCRIPT_REASONS = {
    DENIED_CMD: b"ERR The user executing the script can't run this command or subcommand",
    DENIED_KEY: b"ERR The user executing the script can't access at least one of the keys mentioned in the "
    b"command arguments",
    DENIED_CHANNEL: b"ERR The user executing the script can't publish to the channel mentioned in the command",
}


def check_script(caller: Any, cmd: Any, argv: list[bytes]) -> bytes | None:
    """redis.call: the script's caller's user must be allowed; returns the error text, or None."""
    res, _ = deny_reason(caller, cmd, argv, "lua")
    if res == OK_:
        return None
    return _SCRIPT_REASONS[res]


def check_auth(c: Any, username: bytes, password: bytes, via: bytes = b"auth") -> User | None:
    """AUTH / HELLO AUTH: the user when the pair is valid; a failure is logged (reason auth)."""
    acl = c.server.acl
    u = acl.get(username)
    if u is not None and u.check_password(password):
        return u
    acl.log_denied(c, DENIED_AUTH, "multi" if c.multi is not None else "toplevel", via, username)
    return None


def login(c: Any, u: User) -> None:
    """Make ``u`` the user of client ``c``."""
    c.user = u
    c.authenticated = True
    c.acl_unrestricted = u.unrestricted and len(u.selectors) == 1


# ---- public helpers -------------------------------------------------------------------------------


def _b(v: str | bytes) -> bytes:
    return v.encode("utf-8", "surrogateescape") if isinstance(v, str) else v


def authenticate(server: Any, username: str | bytes, password: str | bytes) -> bool:
    """True when ``username``/``password`` is a valid pair for an enabled user, as AUTH decides (the default
    user's password is ``requirepass``; a ``nopass`` user accepts any password)."""
    u = server.acl.get(_b(username))
    return u is not None and u.check_password(_b(password))


def user_can(server: Any, username: str | bytes, argv: list[str | bytes] | list[bytes]) -> bool:
    """True when user ``username`` (enabled or not) may run ``argv`` (command, keys and channels), as
    ACL DRYRUN decides. Unknown users and commands, and wrong arities, are False."""
    from .dispatch import resolve

    u = server.acl.get(_b(username))
    if u is None or not argv:
        return False
    args = [_b(a) for a in argv]
    cmd = resolve(args)
    if isinstance(cmd, RedisError):
        return False
    return u.check(cmd, args)[0] == OK_


PROTECTED_MODE_DENIED = (
    b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the "
    b"default user. In this mode connections are only accepted from the loopback interface. If you want to "
    b"connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable "
    b"protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting "
    b"to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from "
    b"internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just "
    b"disable the protected mode by editing the Redis configuration file, and setting the protected mode option "
    b"to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart "
    b"it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. "
    b"NOTE: You only need to do one of the above things in order for the server to start accepting connections "
    b"from the outside.\r\n"
)


def protected_mode_denies(server: Any, addr: bytes, unix: bool) -> bool:
    """Redis's accept-time rule: protected mode on, the default user without a password, a non-local peer."""
    if unix or str(getattr(server.config, "protected_mode", "yes")).lower() != "yes":
        return False
    d = server.acl.default
    if "nopass" not in d.flags:
        return False
    host = addr.rpartition(b":")[0]
    return host not in (b"127.0.0.1", b"::1")


def protected_action_allowed(setting: str, c: Any) -> bool:
    """enable-debug-command / enable-module-command: yes, or local from a local connection."""
    s = str(setting).lower()
    if s == "yes":
        return True
    if s == "local":
        addr = getattr(c, "addr", b"")
        host = addr.rpartition(b":")[0]
        return bool(getattr(c, "is_unix", False)) or host in (b"127.0.0.1", b"::1") or c.is_script
    return False

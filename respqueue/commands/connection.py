"""Connection commands: PING, ECHO, QUIT, RESET, AUTH, HELLO, SELECT, CLIENT *."""

from __future__ import annotations

import time
from typing import Any

from ..errors import DB_INDEX_OUT_OF_RANGE, NOT_INTEGER, SYNTAX, WRONGPASS
from ..resp import NO_REPLY, OK, PONG, RedisError, SetReply, Status, Verbatim
from .registry import command, container, subcommand
from .util import eq, str2int

REDIS_VERSION = "7.2.4"


@command("ping", -1, "fast sentinel pubsub", group="connection")
def ping(c: Any, argv: list[bytes]) -> Any:
    if len(argv) > 2:
        raise RedisError("ERR wrong number of arguments for 'ping' command")
    if c.resp == 2 and (c.channels or c.patterns):
        return [b"pong", argv[1] if len(argv) == 2 else b""]
    if len(argv) == 2:
        return argv[1]
    return PONG


@command("echo", 2, "loading stale fast", group="connection")
def echo(c: Any, argv: list[bytes]) -> Any:
    return argv[1]


@command("quit", -1, "noscript loading stale fast no_auth allow_busy pubsub", group="connection")
def quit_(c: Any, argv: list[bytes]) -> Any:
    c.close_after_reply()
    return OK


@command("reset", 1, "noscript loading stale fast no_auth allow_busy pubsub", group="connection")
def reset(c: Any, argv: list[bytes]) -> Any:
    from .transactions import discard_transaction, unwatch_all

    s = c.server
    if c.multi is not None:
        discard_transaction(c)
    unwatch_all(c)
    if c.channels or c.patterns:
        from .pubsub import unsubscribe_all

        unsubscribe_all(c, notify=False)
    if getattr(c, "monitor", False):
        c.monitor = False
        if c in s.monitors:
            s.monitors.remove(c)
    c.select(0)
    c.resp = 2
    c.name = None
    c.no_evict = False
    c.no_touch = False
    c.reply_mode = None
    c.authenticated = not s.config.requirepass
    if getattr(s, "acl", None) is not None:  # back to the default user (respqueue/acl.py)
        d = s.acl.default
        c.user = d
        c.authenticated = "nopass" in d.flags and d.enabled
        c.acl_unrestricted = d.unrestricted and len(d.selectors) == 1
    return Status(b"RESET")


def _check_password(c: Any, user: bytes, password: bytes, via: bytes = b"auth") -> None:
    """AUTH / HELLO AUTH against the ACL users (respqueue/acl.py); logs in or raises WRONGPASS."""
    from ..acl import check_auth, login

    u = check_auth(c, user, password, via)
    if u is None:
        raise WRONGPASS
    login(c, u)


@command("auth", -2, "noscript loading stale fast no_auth allow_busy", group="connection")
def auth(c: Any, argv: list[bytes]) -> Any:
    if len(argv) > 3:
        raise SYNTAX
    if len(argv) == 2:
        if "nopass" in c.server.acl.default.flags:
            raise RedisError(
                "ERR AUTH <password> called without any password configured for the default user. "
                "Are you sure your configuration is correct?"
            )
        user, pw = b"default", argv[1]
    else:
        user, pw = argv[1], argv[2]
    _check_password(c, user, pw, argv[0])
    return OK


@command("hello", -1, "noscript loading stale fast no_auth allow_busy", group="connection")
def hello(c: Any, argv: list[bytes]) -> Any:
    ver = c.resp
    i = 1
    if len(argv) >= 2:
        v = str2int(argv[1])
        if v is None:
            raise RedisError("ERR Protocol version is not an integer or out of range")
        if v < 2 or v > 3:
            raise RedisError("NOPROTO unsupported protocol version")
        ver = v
        i = 2
    name = None
    while i < len(argv):
        opt = argv[i].lower()
        more = len(argv) - i - 1
        if opt == b"auth" and more >= 2:
            _check_password(c, argv[i + 1], argv[i + 2], argv[0])
            i += 3
        elif opt == b"setname" and more >= 1:
            name = argv[i + 1]
            _validate_name(name)
            i += 2
        else:
            raise RedisError(b"ERR Syntax error in HELLO option '" + argv[i] + b"'")
    if not c.authenticated:
        raise RedisError(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
            "HELLO AUTH <user> <pass> option can be used to authenticate the client and "
            "select the RESP protocol version at the same time"
        )
    if name is not None:
        c.name = name or None
    c.resp = ver
    return {
        b"server": b"redis",
        b"version": REDIS_VERSION.encode(),
        b"proto": ver,
        b"id": c.id,
        b"mode": b"standalone" if c.server.cluster is None else b"cluster",
        b"role": b"master",
        b"modules": [],
    }


@command("select", 2, "loading stale fast", group="connection")
def select(c: Any, argv: list[bytes]) -> Any:
    idx = str2int(argv[1])
    if idx is None:
        raise NOT_INTEGER
    if idx != 0 and c.server.cluster is not None:
        raise RedisError("ERR SELECT is not allowed in cluster mode")
    if idx < 0 or idx >= len(c.server.dbs):
        raise DB_INDEX_OUT_OF_RANGE
    c.select(idx)
    return OK


# ---- CLIENT ---------------------------------------------------------------
container("client", -2, "sentinel", group="connection")


def _validate_name(name: bytes) -> None:
    for ch in name:
        if ch < 33 or ch > 126:
            raise RedisError("ERR Client names cannot contain spaces, newlines or special characters.")


@subcommand("client", "setname", 3, "noscript loading stale")
def client_setname(c: Any, argv: list[bytes]) -> Any:
    _validate_name(argv[2])
    c.name = argv[2] or None
    return OK


@subcommand("client", "getname", 2, "noscript loading stale")
def client_getname(c: Any, argv: list[bytes]) -> Any:
    return c.name


@subcommand("client", "setinfo", 4, "noscript loading stale")
def client_setinfo(c: Any, argv: list[bytes]) -> Any:
    attr = argv[2].lower()
    val = argv[3]
    if attr not in (b"lib-name", b"lib-ver"):
        raise RedisError(b"ERR Unrecognized option '" + argv[2] + b"'")
    for ch in val:
        if ch < 33 or ch > 126:
            raise RedisError(
                b"ERR " + attr + b" cannot contain spaces, newlines or special characters."
            )
    if attr == b"lib-name":
        c.lib_name = val
    else:
        c.lib_ver = val
    return OK


@subcommand("client", "id", 2, "noscript loading stale")
def client_id(c: Any, argv: list[bytes]) -> Any:
    return c.id


@subcommand("client", "no-evict", 3, "admin noscript loading stale")
def client_no_evict(c: Any, argv: list[bytes]) -> Any:
    c.no_evict = _on_off(argv[2])
    return OK


@subcommand("client", "no-touch", 3, "noscript loading stale")
def client_no_touch(c: Any, argv: list[bytes]) -> Any:
    c.no_touch = _on_off(argv[2])
    return OK


def _on_off(a: bytes) -> bool:
    if eq(a, b"on"):
        return True
    if eq(a, b"off"):
        return False
    raise SYNTAX


def client_line(c: Any, now: float | None = None) -> bytes:
    """One CLIENT LIST line, in Redis 7.2's field order."""
    now = time.time() if now is None else now
    flags = ""  # in Redis's order (networking.c getClientInfoString)
    if getattr(c, "monitor", False):
        flags += "O"
    if c.channels or c.patterns:
        flags += "P"
    if c.multi is not None:
        flags += "x"
    if getattr(c, "blocked", None) is not None:
        flags += "b"
    if c.dirty_cas:
        flags += "d"
    if getattr(c, "addr", b"").startswith(b"/"):
        flags += "U"
    if c.no_evict:
        flags += "e"
    if c.no_touch:
        flags += "T"
    flags = flags or "N"
    return (
        b"id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=%d flags=%s db=%d sub=%d psub=%d ssub=0 "
        b"multi=%d qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=1024 rbp=0 obl=0 oll=0 omem=0 "
        b"tot-mem=1024 events=r cmd=%s user=%s redir=-1 resp=%d lib-name=%s lib-ver=%s"
        % (
            c.id,
            getattr(c, "addr", b"?:0"),
            getattr(c, "laddr", b"?:0"),
            getattr(c, "fd", -1),
            c.name or b"",
            int(now - c.created),
            int(now - c.last_interaction),
            flags.encode(),
            c.db.index,
            len(c.channels),
            len(c.patterns),
            len(c.multi) if c.multi is not None else -1,
            c.last_cmd.fullname.encode() if c.last_cmd is not None else b"NULL",
            c.user.name if getattr(c, "user", None) is not None else b"default",
            c.resp,
            c.lib_name,
            c.lib_ver,
        )
    )


@subcommand("client", "list", -2, "admin noscript loading stale")
def client_list(c: Any, argv: list[bytes]) -> Any:
    clients = sorted(c.server.clients.values(), key=lambda x: x.id)
    i = 2
    while i < len(argv):
        opt = argv[i].lower()
        if opt == b"type" and len(argv) == 4:
            t = argv[i + 1].lower()
            if t == b"normal":
                clients = [x for x in clients if not (x.channels or x.patterns)]
            elif t == b"pubsub":
                clients = [x for x in clients if x.channels or x.patterns]
            elif t in (b"master", b"replica", b"slave"):
                clients = []
            else:
                raise RedisError(b"ERR Unknown client type '" + argv[i + 1] + b"'")
            i += 2
        elif opt == b"id" and i + 1 < len(argv):
            ids = set()
            for a in argv[i + 1 :]:
                v = str2int(a)
                if v is None or v <= 0:
                    raise RedisError("ERR Invalid client ID")
                ids.add(v)
            clients = [x for x in clients if x.id in ids]
            break
        else:
            raise SYNTAX
    now = time.time()
    return Verbatim(b"".join(client_line(x, now) + b"\n" for x in clients))


@subcommand("client", "info", 2, "noscript loading stale")
def client_info(c: Any, argv: list[bytes]) -> Any:
    return Verbatim(client_line(c) + b"\n")


@subcommand("client", "kill", -3, "admin noscript loading stale")
def client_kill(c: Any, argv: list[bytes]) -> Any:
    server = c.server
    if len(argv) == 3:
        addr = argv[2]
        for x in list(server.clients.values()):
            if getattr(x, "addr", None) == addr:
                _kill(c, x)
                return OK
        raise RedisError("ERR No such client")
    if (len(argv) - 2) % 2:
        raise SYNTAX
    filters: list[tuple[bytes, bytes]] = []
    skipme = True
    for i in range(2, len(argv), 2):
        opt, val = argv[i].lower(), argv[i + 1]
        if opt == b"skipme":
            if eq(val, b"yes"):
                skipme = True
            elif eq(val, b"no"):
                skipme = False
            else:
                raise SYNTAX
        elif opt == b"id":
            v = str2int(val)
            if v is None or v <= 0:
                raise RedisError("ERR client-id should be greater than 0")
            filters.append((opt, val))
        elif opt in (b"addr", b"laddr", b"user", b"type"):
            if opt == b"type" and val.lower() not in (b"normal", b"pubsub", b"master", b"replica", b"slave"):
                raise RedisError(b"ERR Unknown client type '" + val + b"'")
            if opt == b"user" and server.acl.get(val) is None:
                raise RedisError(b"ERR No such user '" + val + b"'")
            filters.append((opt, val))
        else:
            raise SYNTAX
    killed = 0
    for x in list(server.clients.values()):
        if skipme and x is c:
            continue
        ok = True
        for opt, val in filters:
            if opt == b"id":
                ok = x.id == int(val)
            elif opt == b"addr":
                ok = getattr(x, "addr", None) == val
            elif opt == b"laddr":
                ok = getattr(x, "laddr", None) == val
            elif opt == b"user":
                ok = getattr(x, "user", None) is server.acl.get(val)
            elif opt == b"type":
                t = val.lower()
                if getattr(x, "repl_slave", None) is not None:
                    ok = t in (b"slave", b"replica")  # a replica's link (replication/master.py)
                else:
                    ok = (t == b"pubsub") == bool(x.channels or x.patterns) and t in (b"normal", b"pubsub")
            if not ok:
                break
        if ok:
            _kill(c, x)
            killed += 1
    return killed


def _kill(me: Any, x: Any) -> None:
    if x is me:
        x.close_after_reply()
    else:
        x.close("killed by CLIENT KILL")


@subcommand("client", "unblock", -3, "admin noscript loading stale")
def client_unblock(c: Any, argv: list[bytes]) -> Any:
    cid = str2int(argv[2])
    if cid is None:
        raise NOT_INTEGER
    error = False
    if len(argv) == 4:
        if eq(argv[3], b"error"):
            error = True
        elif not eq(argv[3], b"timeout"):
            raise RedisError("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
    elif len(argv) > 4:
        raise SYNTAX
    return 1 if c.server.unblock_by_id(cid, error) else 0


@subcommand("client", "reply", 3, "noscript loading stale")
def client_reply(c: Any, argv: list[bytes]) -> Any:
    mode = argv[2].lower()
    if mode == b"on":
        c.reply_mode = None
        return OK
    if mode == b"off":
        c.reply_mode = b"off"
        return NO_REPLY
    if mode == b"skip":
        if c.reply_mode is None:
            c.reply_mode = b"skip"
        return NO_REPLY
    raise SYNTAX


@subcommand("client", "getredir", 2, "noscript loading stale")
def client_getredir(c: Any, argv: list[bytes]) -> Any:
    return -1  # no client-side caching: never redirecting


@subcommand("client", "trackinginfo", 2, "noscript loading stale")
def client_trackinginfo(c: Any, argv: list[bytes]) -> Any:
    return {b"flags": SetReply([b"off"]), b"redirect": -1, b"prefixes": []}


@subcommand("client", "caching", 3, "noscript loading stale")
def client_caching(c: Any, argv: list[bytes]) -> Any:
    raise RedisError(
        "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"
    )


@subcommand("client", "help", 2, "loading stale")
def client_help(c: Any, argv: list[bytes]) -> Any:
    lines = [
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME", "    Return the name of the current connection.",
        "ID", "    Return the ID of the current connection.",
        "INFO", "    Return information about the current client connection.",
        "KILL <ip:port>", "    Kill connection made from <ip:port>.",
        "LIST [options ...]", "    Return information about client connections.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]", "    Unblock the specified blocked client.",
        "SETNAME <name>", "    Assign the name <name> to the current connection.",
        "SETINFO <option> <value>", "    Set client meta attr.",
        "NO-EVICT (ON|OFF)", "    Protect current client connection from eviction.",
        "NO-TOUCH (ON|OFF)", "    Will not touch LRU/LFU stats when this mode is on.",
        "HELP", "    Print this help.",
    ]
    return [Status(x.encode()) for x in lines]

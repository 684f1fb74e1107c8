"""ACL commands: ACL SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, LOG, SAVE, LOAD, GENPASS, DRYRUN, HELP.

The users, rules and checks are in :mod:`respqueue.acl`; this module only parses and replies, as Redis
7.0's aclCommand.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from .. import acl as _acl
from ..errors import NOT_INTEGER, wrong_args
from ..resp import OK, RedisError, SetReply, Status
from .registry import container, subcommand
from .util import str2int

container("acl", -2, "", group="server")

_NO_ACLFILE = RedisError(
    b"ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL "
    b"SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order "
    b"to store users in the Redis configuration."
)


def _bad_args(sub: bytes) -> RedisError:
    return RedisError(b"ERR unknown subcommand or wrong number of arguments for '" + sub + b"'. Try ACL HELP.")


def _selector_reply(s: _acl.Selector) -> dict[bytes, Any]:
    return {
        b"commands": s.describe_commands().encode(),
        b"keys": s.describe_keys().encode("utf-8", "surrogateescape"),
        b"channels": s.describe_channels().encode("utf-8", "surrogateescape"),
    }


@subcommand("acl", "setuser", -3, "admin noscript loading stale")
def acl_setuser(c: Any, argv: list[bytes]) -> Any:
    err = c.server.acl.setuser(argv[2], argv[3:])
    if err is not None:
        raise err
    return OK


@subcommand("acl", "getuser", 3, "admin noscript loading stale")
def acl_getuser(c: Any, argv: list[bytes]) -> Any:
    u = c.server.acl.get(argv[2])
    if u is None:
        return None
    out: dict[bytes, Any] = {
        b"flags": SetReply([f.encode() for f in _acl._USER_FLAGS if f in u.flags]),
        b"passwords": [p.encode() for p in u.passwords],
    }
    out.update(_selector_reply(u.root))
    out[b"selectors"] = [_selector_reply(s) for s in u.selectors[1:]]
    return out


@subcommand("acl", "deluser", -3, "admin noscript loading stale")
def acl_deluser(c: Any, argv: list[bytes]) -> Any:
    if any(n == b"default" for n in argv[2:]):
        raise RedisError(b"ERR The 'default' user cannot be removed")
    return c.server.acl.deluser(argv[2:], c)


@subcommand("acl", "list", 2, "admin noscript loading stale")
def acl_list(c: Any, argv: list[bytes]) -> Any:
    users = c.server.acl.users
    return [b"user " + n + b" " + users[n].describe().encode("utf-8", "surrogateescape") for n in sorted(users)]


@subcommand("acl", "users", 2, "admin noscript loading stale")
def acl_users(c: Any, argv: list[bytes]) -> Any:
    return sorted(c.server.acl.users)


@subcommand("acl", "whoami", 2, "noscript loading stale")
def acl_whoami(c: Any, argv: list[bytes]) -> Any:
    u = getattr(c, "user", None)
    return u.name if u is not None else b"default"


@subcommand("acl", "cat", -2, "noscript loading stale")
def acl_cat(c: Any, argv: list[bytes]) -> Any:
    if len(argv) > 3:
        raise _bad_args(argv[1])
    if len(argv) == 2:
        return [x.encode() for x in _acl.CATEGORIES]
    names = _acl.category_commands(argv[2].decode("latin-1"))
    if names is None:
        raise RedisError(b"ERR Unknown category '" + argv[2] + b"'")
    return names


@subcommand("acl", "log", -2, "admin noscript loading stale")
def acl_log(c: Any, argv: list[bytes]) -> Any:
    if len(argv) > 3:
        raise _bad_args(argv[1])
    state = c.server.acl
    count = 10
    if len(argv) == 3:
        if argv[2].lower() == b"reset":
            state.log.clear()
            return OK
        n = str2int(argv[2])
        if n is None:
            raise NOT_INTEGER
        count = max(n, 0)
    now = time.time() * 1000
    return [
        {
            b"count": e.count,
            b"reason": e.reason.encode(),
            b"context": e.context.encode(),
            b"object": e.object,
            b"username": e.username,
            b"age-seconds": (now - e.ctime) / 1000,
            b"client-info": e.cinfo,
        }
        for e in state.log[:count]
    ]


@subcommand("acl", "save", 2, "admin noscript loading stale")
def acl_save(c: Any, argv: list[bytes]) -> Any:
    path = c.server.config.aclfile
    if not path:
        raise _NO_ACLFILE
    try:
        c.server.acl.save_file(path)
    except OSError as e:
        _acl.log.warning("Opening temp ACL file for ACL SAVE: %s", e)
        raise RedisError(
            b"ERR There was an error trying to save the ACLs. Please check the server logs for more information"
        ) from None
    return OK


@subcommand("acl", "load", 2, "admin noscript loading stale")
def acl_load(c: Any, argv: list[bytes]) -> Any:
    path = c.server.config.aclfile
    if not path:
        raise _NO_ACLFILE
    err = c.server.acl.load_file(path)
    if err is not None:
        raise RedisError("ERR " + err)
    return OK


@subcommand("acl", "genpass", -2, "noscript loading stale")
def acl_genpass(c: Any, argv: list[bytes]) -> Any:
    if len(argv) > 3:
        raise _bad_args(argv[1])
    bits = 256
    if len(argv) == 3:
        n = str2int(argv[2])
        if n is None:
            raise NOT_INTEGER
        if n <= 0 or n > 4096:
            raise RedisError(
                b"ERR ACL GENPASS argument must be the number of bits for the output password, a positive number "
                b"up to 4096"
            )
        bits = n
    chars = (bits + 3) // 4
    return secrets.token_hex((chars + 1) // 2)[:chars].encode()


@subcommand("acl", "dryrun", -4, "admin noscript loading stale")
def acl_dryrun(c: Any, argv: list[bytes]) -> Any:
    from ..dispatch import resolve

    u = c.server.acl.get(argv[2])
    if u is None:
        raise RedisError(b"ERR User '" + argv[2] + b"' not found")
    args = argv[3:]
    cmd = resolve(args)
    if isinstance(cmd, RedisError):
        if cmd.msg.startswith(b"ERR wrong number"):
            # lookupCommand found a container called without its subcommand
            raise wrong_args(args[0].decode("latin-1").lower())
        raise RedisError(b"ERR Command '" + args[0] + b"' not found")
    res, idx = u.check(cmd, args)
    if res == _acl.OK_:
        return OK
    if res == _acl.DENIED_CMD:
        return b"This user has no permissions to run the '%s' command" % cmd.fullname.encode()
    what = b"key" if res == _acl.DENIED_KEY else b"channel"
    return b"This user has no permissions to access the '" + args[idx] + b"' " + what


@subcommand("acl", "help", 2, "loading stale")
def acl_help(c: Any, argv: list[bytes]) -> Any:
    lines = [
        "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CAT [<category>]",
        "    List all commands that belong to <category>, or all command categories",
        "    when no category is specified.",
        "DELUSER <username> [<username> ...]",
        "    Delete a list of users.",
        "DRYRUN <username> <command> [<arg> ...]",
        "    Returns whether the user can execute the given command without executing the command.",
        "GETUSER <username>",
        "    Get the user's details.",
        "GENPASS [<bits>]",
        "    Generate a secure 256-bit user password. The optional `bits` argument can",
        "    be used to specify a different size.",
        "LIST",
        "    Show users details in config file format.",
        "LOAD",
        "    Reload users from the ACL file.",
        "LOG [<count> | RESET]",
        "    Show the ACL log entries.",
        "SAVE",
        "    Save the current config to the ACL file.",
        "SETUSER <username> <attribute> [<attribute> ...]",
        "    Create or modify a user with the specified attributes.",
        "USERS",
        "    List all the registered usernames.",
        "WHOAMI",
        "    Return the current connection username.",
        "HELP",
        "    Prints this help.",
    ]
    return [Status(x.encode()) for x in lines]

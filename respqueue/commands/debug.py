"""DEBUG."""

from __future__ import annotations

import logging
import re
import secrets
import time
from typing import Any

from ..resp import OK, Push, RedisError, SetReply, Status, Verbatim
from ..types.hash import ColdHash, Hash
from .registry import command
from .util import _help, parse_float

log = logging.getLogger("respqueue")


# =========================================================================
# DEBUG
# =========================================================================


def _strtod(b: bytes) -> float:
    m = re.match(rb"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", b)
    if m is None:
        return 0.0
    try:
        return parse_float(m.group(0).strip())
    except RedisError:
        return 0.0


def _atoi(b: bytes) -> int:
    m = re.match(rb"\s*[-+]?\d+", b)
    return int(m.group(0)) if m else 0


def _debug_object(c: Any, key: bytes) -> Any:
    from .keys import encoding_of, memory_usage_of

    v = c.db.lookup(key)
    if v is None:
        raise RedisError("ERR no such key")
    enc = encoding_of(v)
    if isinstance(enc, str):
        enc = enc.encode()
    if type(v) is bytes:
        ser = len(v) + 1
    else:
        try:
            ser = int(memory_usage_of(key, v))
        except Exception:
            ser = len(v)
    lru = int(time.time()) & ((1 << 24) - 1)
    return Status(
        b"Value at:0x%x refcount:1 encoding:%s serializedlength:%d lru:%d lru_seconds_idle:0"
        % (id(v), enc, ser, lru)
    )


_PROTOCOL_TYPES = "string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false"


def _debug_protocol(c: Any, name: bytes) -> Any:
    t = name.lower()
    if t == b"string":
        return b"Hello World"
    if t == b"integer":
        return 12345
    if t == b"double":
        return 3.141
    if t == b"bignum":
        return b"1234567999999999999999999999999999999"
    if t == b"null":
        return None
    if t == b"array":
        return [0, 1, 2]
    if t == b"set":
        return SetReply([0, 1, 2])
    if t == b"map":
        return {0: False, 1: True, 2: False}
    if t == b"attrib":
        return b"Some real reply following the attribute"
    if t == b"push":
        if c.resp < 3:
            raise RedisError("ERR RESP2 is not supported by this command")
        c.send_push(Push([b"server-cpu-usage", 42]))
        return b"Some real reply following the push reply"
    if t == b"verbatim":
        return Verbatim(b"This is a verbatim\nstring")
    if t == b"true":
        return True
    if t == b"false":
        return False
    raise RedisError("ERR Wrong protocol type name. Please use one of the following: " + _PROTOCOL_TYPES)


@command("debug", -2, "admin noscript loading stale protected", group="server")
def debug(c: Any, argv: list[bytes]) -> Any:
    sub = argv[1].lower()
    n = len(argv)
    server = c.server
    if sub == b"help" and n == 2:
        return _help([
            "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CHANGE-REPL-ID",
            "    Change the replication IDs of the instance.",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message.",
            "LOG <message>",
            "    Write <message> to the server log.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "RELOAD [option ...]",
            "    Save the dataset and reload it (a no-op without persistence).",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
            "PACKED <key>",
            "    (respqueue) 2 if the hash at <key> is held as its packed bytes alone (cold), 1 if packed inside",
            "    its hash object (cold, also held elsewhere), else 0; does not unpack it.",
            "COLD-HASHES [COMPACT]",
            "    (respqueue) Cold-hash compaction: hashes packed so far, hashes noted and not yet due",
            "    (and loaded ones not yet recoded), the delay in ms, loaded hashes recoded in the compact",
            "    form, compactions that told the hash_swapped subscribers (the hash was held elsewhere too).",
            "    COMPACT packs every noted hash now.",
            "HELP",
            "    Prints this help.",
        ])
    if sub == b"sleep" and n == 3:
        # as Redis: (long long)(strtod * 1e6) microseconds; out of range (1e300, inf, nan) is negative there
        usecs = _strtod(argv[2]) * 1000000
        if usecs == usecs and 0 < usecs < 2**63:
            time.sleep(int(usecs) / 1000000)
        return OK
    if sub == b"set-active-expire" and n == 3:
        server.active_expire_enabled = _atoi(argv[2]) != 0
        return OK
    if sub == b"object" and n == 3:
        return _debug_object(c, argv[2])
    if sub == b"change-repl-id" and n == 2:
        server.master_replid = secrets.token_hex(20)
        if server.repl is not None:  # as Redis: a new id, and no second one
            server.repl.replid, server.repl.replid2, server.repl.second_offset = server.master_replid, "0" * 40, -1
        return OK
    if sub == b"error" and n == 3:
        raise RedisError(argv[2])
    if sub == b"log" and n == 3:
        log.warning("DEBUG LOG: %s", argv[2].decode("utf-8", "replace"))
        return OK
    if sub == b"reload":
        return OK
    if sub == b"protocol" and n == 3:
        return _debug_protocol(c, argv[2])
    if sub == b"packed" and n == 3:
        v = c.db.peek(argv[2])  # (a cold hash, the keyspace's ColdHash, stays cold)
        if v is None:
            raise RedisError("ERR no such key")
        if type(v) is ColdHash:
            return 2
        return 1 if isinstance(v, Hash) and v.packed() is not None else 0
    if sub == b"cold-hashes" and (n == 2 or (n == 3 and argv[2].lower() == b"compact")):
        ch = server.cold_hashes
        if ch is None:
            return [0, 0, 0, 0, 0]
        if n == 3:
            ch.compact_all()
        return [ch.compacted, ch.pending(), ch.delay_ms, ch.recoded, ch.announced]
    raise RedisError(
        b"ERR unknown subcommand or wrong number of arguments for '" + argv[1][:128] + b"'. Try DEBUG HELP."
    )

"""Stream commands (t_stream.c): XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XREAD, XSETID, XINFO."""

from __future__ import annotations

import re
from typing import Any

from ..errors import NO_SUCH_KEY, NOT_INTEGER, SYNTAX, wrong_args
from ..keyspace import mstime
from ..resp import NULL_ARRAY, OK, RedisError, Status
from ..types.stream import MASK64, MAX_ID, Stream, format_id
from .registry import command, container, subcommand
from .util import str2int

INVALID_ID = RedisError(b"ERR Invalid stream ID specified as stream command argument")
XADD_ID_TOO_SMALL = RedisError(b"ERR The ID specified in XADD is equal or smaller than the target stream top item")
XADD_ID_ZERO = RedisError(b"ERR The ID specified in XADD must be greater than 0-0")
XADD_TOO_LARGE = RedisError(b"ERR Elements are too large to be stored")
XADD_EXHAUSTED = RedisError(b"ERR The stream has exhausted the last possible ID, unable to add more items")
MAXLEN_AND_MINID = RedisError(b"ERR syntax error, MAXLEN and MINID options at the same time are not compatible")
MAXLEN_NEGATIVE = RedisError(b"ERR The MAXLEN argument must be >= 0.")
LIMIT_NEGATIVE = RedisError(b"ERR The LIMIT argument must be >= 0.")
LIMIT_NO_STRATEGY = RedisError(b"ERR syntax error, LIMIT cannot be used without specifying a trimming strategy")
XTRIM_NO_STRATEGY = RedisError(b"ERR syntax error, XTRIM must be called with a trimming strategy")
LIMIT_NOT_APPROX = RedisError(b"ERR syntax error, LIMIT cannot be used without the special ~ option")
BAD_START = RedisError(b"ERR invalid start ID for the interval")
BAD_END = RedisError(b"ERR invalid end ID for the interval")
TIMEOUT_NOT_INT = RedisError(b"ERR timeout is not an integer or out of range")
TIMEOUT_NEGATIVE = RedisError(b"ERR timeout is negative")
XREAD_UNBALANCED = RedisError(
    b"ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."
)
XREAD_GROUP_OPT = RedisError(b"ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.")
XREAD_NOACK_OPT = RedisError(b"ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.")
XREAD_GT_ID = RedisError(
    b"ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."
)
XSETID_SMALLER = RedisError(b"ERR The ID specified in XSETID is smaller than the target stream top item")
XSETID_SMALLER_MAXDEL = RedisError(b"ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id")
XSETID_ENTRIES_SMALL = RedisError(b"ERR The entries_added specified in XSETID is smaller than the target stream length")
ENTRIES_ADDED_NEGATIVE = RedisError(b"ERR entries_added must be positive")

XREAD_BLOCKED_DEFAULT_COUNT = 1000

_STRTOULL = re.compile(rb"[ \t\n\v\f\r]*([+-]?)([0-9]+)")


# ---- argument parsing -------------------------------------------------------
def _string2ull(s: bytes) -> int | None:
    """Redis's string2ull: string2ll, then strtoull's laxer syntax (spaces, sign)."""
    v = str2int(s)
    if v is not None:
        return v if v >= 0 else None
    m = _STRTOULL.fullmatch(s)
    if m is None:
        return None
    v = int(m.group(2))
    if v > MASK64:
        return None
    if m.group(1) == b"-":
        v = -v & MASK64
    return v


def parse_id(b: bytes, missing_seq: int = 0, strict: bool = False, seq_star: bool = False) -> tuple[int, bool]:
    """A stream ID argument as a packed int, and whether its sequence was given.

    ``strict`` rejects ``-`` and ``+``; ``seq_star`` accepts ``<ms>-*``
    (sequence not given). An ID without ``-seq`` gets ``missing_seq``.
    """
    if len(b) > 127:
        raise INVALID_ID
    nul = b.find(b"\0")
    if nul >= 0:
        b = b[:nul]
    if b == b"-":
        if strict:
            raise INVALID_ID
        return 0, True
    if b == b"+":
        if strict:
            raise INVALID_ID
        return MAX_ID, True
    dash = b.find(b"-")
    if dash >= 0:
        ms = _string2ull(b[:dash])
        if ms is None:
            raise INVALID_ID
        rest = b[dash + 1 :]
        if seq_star and rest == b"*":
            return ms << 64, False
        seq = _string2ull(rest)
        if seq is None:
            raise INVALID_ID
        return ms << 64 | seq, True
    ms = _string2ull(b)
    if ms is None:
        raise INVALID_ID
    return ms << 64 | missing_seq, True


def _interval_id(b: bytes, missing_seq: int) -> tuple[int, bool]:
    if len(b) > 1 and b[0] == 40:  # '('
        return parse_id(b[1:], missing_seq, strict=True)[0], True
    return parse_id(b, missing_seq)[0], False


def _node_limits(c: Any) -> tuple[int, int]:
    cfg = c.server.config
    return int(getattr(cfg, "stream_node_max_entries", 100)), int(getattr(cfg, "stream_node_max_bytes", 4096))


class _TrimArgs:
    __slots__ = ("idpos", "id", "id_given", "seq_given", "nomkstream", "maxlen", "minid", "approx", "limit")

    def __init__(self) -> None:
        self.idpos = 0
        self.id = 0
        self.id_given = False
        self.seq_given = True
        self.nomkstream = False
        self.maxlen: int | None = None
        self.minid: int | None = None
        self.approx = False
        self.limit = 0

    @property
    def has_strategy(self) -> bool:
        return self.maxlen is not None or self.minid is not None


def _parse_add_trim(c: Any, argv: list[bytes], xadd: bool) -> _TrimArgs:
    """streamParseAddOrTrimArgsOrReply."""
    a = _TrimArgs()
    n = len(argv)
    limit_given = False
    i = 2
    while i < n:
        more = n - 1 - i
        opt = argv[i]
        lopt = opt.lower()
        if xadd and opt == b"*":
            break
        if lopt == b"maxlen" and more:
            if a.has_strategy:
                raise MAXLEN_AND_MINID
            a.approx = False
            nxt = argv[i + 1]
            if more >= 2 and nxt == b"~":
                a.approx = True
                i += 1
            elif more >= 2 and nxt == b"=":
                i += 1
            v = str2int(argv[i + 1])
            if v is None:
                raise NOT_INTEGER
            if v < 0:
                raise MAXLEN_NEGATIVE
            a.maxlen = v
            i += 1
        elif lopt == b"minid" and more:
            if a.has_strategy:
                raise MAXLEN_AND_MINID
            a.approx = False
            nxt = argv[i + 1]
            if more >= 2 and nxt == b"~":
                a.approx = True
                i += 1
            elif more >= 2 and nxt == b"=":
                i += 1
            a.minid = parse_id(argv[i + 1], 0, strict=True)[0]
            i += 1
        elif lopt == b"limit" and more:
            v = str2int(argv[i + 1])
            if v is None:
                raise NOT_INTEGER
            if v < 0:
                raise LIMIT_NEGATIVE
            a.limit = v
            limit_given = True
            i += 1
        elif xadd and lopt == b"nomkstream":
            a.nomkstream = True
        elif xadd:
            a.id, a.seq_given = parse_id(opt, 0, strict=True, seq_star=True)
            a.id_given = True
            break
        else:
            raise SYNTAX
        i += 1
    if a.limit and not a.has_strategy:
        raise LIMIT_NO_STRATEGY
    if not xadd and not a.has_strategy:
        raise XTRIM_NO_STRATEGY
    if limit_given:
        if not a.approx:
            raise LIMIT_NOT_APPROX
    elif a.approx:
        lim = 100 * _node_limits(c)[0]
        if lim <= 0:
            lim = 10000
        a.limit = min(lim, 1000000)
    else:
        a.limit = 0
    a.idpos = i
    return a


def _trim(s: Stream, a: _TrimArgs) -> int:
    if not a.has_strategy:
        return 0
    return s.trim(a.maxlen, a.minid, a.approx, a.limit)


def _parse_count(b: bytes) -> int:
    v = str2int(b)
    if v is None:
        raise NOT_INTEGER
    return v


# ---- XADD / XTRIM / XDEL / XSETID -----------------------------------------------
@command("xadd", -5, "write denyoom fast", 1, 1, 1, group="stream")
def xadd(c: Any, argv: list[bytes]) -> Any:
    a = _parse_add_trim(c, argv, True)
    field_pos = a.idpos + 1
    nf = len(argv) - field_pos
    if nf < 2 or nf & 1:
        raise wrong_args(b"xadd")
    if a.id_given and a.seq_given and a.id == 0:
        raise XADD_ID_ZERO
    db = c.db
    key = argv[1]
    s = db.lookup_type(key, Stream)
    created = s is None
    if created:
        if a.nomkstream:
            return None
        s = Stream()
    last = s.last_id
    if last == MAX_ID:
        raise XADD_EXHAUSTED
    if a.id_given:
        new = a.id
        if not a.seq_given:
            if last >> 64 == new >> 64:
                if last & MASK64 == MASK64:
                    # Redis 7.0 returns without setting errno here, so the
                    # client sees the ERANGE text
                    raise XADD_TOO_LARGE
                new = last + 1
    else:
        now = mstime()
        new = now << 64 if now > last >> 64 else last + 1
    if new <= last:
        raise XADD_ID_TOO_SMALL
    me, mb = _node_limits(c)
    s.append(new, argv[field_pos:], me, mb)
    if a.has_strategy:
        s.trim(a.maxlen, a.minid, a.approx, a.limit)
    if created:
        db.add(key, s)
    else:
        db.modified(key)
    return format_id(new)


@command("xtrim", -4, "write", 1, 1, 1, group="stream")
def xtrim(c: Any, argv: list[bytes]) -> Any:
    a = _parse_add_trim(c, argv, False)
    s = c.db.lookup_type(argv[1], Stream)
    if s is None:
        return 0
    deleted = _trim(s, a)
    if deleted:
        c.db.modified(argv[1])
    return deleted


@command("xdel", -3, "write fast", 1, 1, 1, group="stream")
def xdel(c: Any, argv: list[bytes]) -> Any:
    s = c.db.lookup_type(argv[1], Stream)
    if s is None:
        return 0
    ids = [parse_id(b, 0, strict=True)[0] for b in argv[2:]]
    deleted = 0
    for i in ids:
        if s.delete(i):
            deleted += 1
    if deleted:
        c.db.modified(argv[1])
    return deleted


@command("xsetid", -3, "write denyoom fast", 1, 1, 1, group="stream")
def xsetid(c: Any, argv: list[bytes]) -> Any:
    new = parse_id(argv[2], 0, strict=True)[0]
    max_del = 0
    entries_added = -1
    i = 3
    n = len(argv)
    while i < n:
        more = n - 1 - i
        opt = argv[i].lower()
        if opt == b"entriesadded" and more:
            entries_added = _parse_count(argv[i + 1])
            if entries_added < 0:
                raise ENTRIES_ADDED_NEGATIVE
            i += 2
        elif opt == b"maxdeletedid" and more:
            max_del = parse_id(argv[i + 1], 0, strict=True)[0]
            if new < max_del:
                raise XSETID_SMALLER_MAXDEL
            i += 2
        else:
            raise SYNTAX
    s = c.db.lookup_type(argv[1], Stream)
    if s is None:
        raise NO_SUCH_KEY
    if len(s):
        top = s.last_valid_id()
        if new < top:  # type: ignore[operator]
            raise XSETID_SMALLER
        if entries_added != -1 and len(s) > entries_added:
            raise XSETID_ENTRIES_SMALL
    s.set_last_id(new)
    if entries_added != -1:
        s.entries_added = entries_added
    if max_del:
        s.max_deleted = max_del
    c.db.modified(argv[1])
    return OK


# ---- reads ---------------------------------------------------------------------
@command("xlen", 2, "readonly fast", 1, 1, 1, group="stream")
def xlen(c: Any, argv: list[bytes]) -> Any:
    s = c.db.lookup_type(argv[1], Stream)
    return 0 if s is None else len(s)


def _xrange(c: Any, argv: list[bytes], rev: bool) -> Any:
    start_arg, end_arg = (argv[3], argv[2]) if rev else (argv[2], argv[3])
    start, ex = _interval_id(start_arg, 0)
    if ex:
        if start == MAX_ID:
            raise BAD_START
        start += 1
    end, ex = _interval_id(end_arg, MASK64)
    if ex:
        if end == 0:
            raise BAD_END
        end -= 1
    count = -1
    n = len(argv)
    j = 4
    while j < n:
        if argv[j].lower() == b"count" and n - j - 1 >= 1:
            count = _parse_count(argv[j + 1])
            if count < 0:
                count = 0
            j += 2
        else:
            raise SYNTAX
    s = c.db.lookup_type(argv[1], Stream)
    if s is None:
        return []
    if count == 0:
        return NULL_ARRAY
    return s.range(start, end, max(count, 0), rev)


@command("xrange", -4, "readonly", 1, 1, 1, group="stream")
def xrange(c: Any, argv: list[bytes]) -> Any:
    return _xrange(c, argv, False)


@command("xrevrange", -4, "readonly", 1, 1, 1, group="stream")
def xrevrange(c: Any, argv: list[bytes]) -> Any:
    return _xrange(c, argv, True)


def _parse_block_ms(b: bytes) -> int:
    v = str2int(b)
    if v is None:
        raise TIMEOUT_NOT_INT
    if v < 0:
        raise TIMEOUT_NEGATIVE
    return v


def _stream_or_none(db: Any, key: bytes) -> Stream | None:
    v = db.lookup(key)
    return v if isinstance(v, Stream) else None


@command("xread", -4, "readonly blocking movablekeys", 0, 0, 0, group="stream")
def xread(c: Any, argv: list[bytes]) -> Any:
    timeout = -1
    count = 0
    streams_arg = 0
    nstreams = 0
    n = len(argv)
    i = 1
    while i < n:
        more = n - i - 1
        o = argv[i].lower()
        if o == b"block" and more:
            if c.is_script:
                raise RedisError(b"ERR " + argv[0] + b" command is not allowed with BLOCK option from scripts")
            i += 1
            timeout = _parse_block_ms(argv[i])
        elif o == b"count" and more:
            i += 1
            count = _parse_count(argv[i])
            if count < 0:
                count = 0
        elif o == b"streams" and more:
            streams_arg = i + 1
            nstreams = n - streams_arg
            if nstreams & 1:
                raise XREAD_UNBALANCED
            nstreams >>= 1
            break
        elif o == b"group" and more >= 2:
            raise XREAD_GROUP_OPT
        elif o == b"noack":
            raise XREAD_NOACK_OPT
        else:
            raise SYNTAX
        i += 1
    if streams_arg == 0:
        raise SYNTAX
    # imported here: dispatch imports the command table, which imports this module
    from ..dispatch import Block

    db = c.db
    keys = argv[streams_arg : streams_arg + nstreams]
    retry = getattr(c, "blocked", None) is not None  # re-run for a blocked client
    ids: list[int] = []
    for idx in range(nstreams):
        key = keys[idx]
        s = _stream_or_none(db, key) if retry else db.lookup_type(key, Stream)
        a = argv[streams_arg + nstreams + idx]
        if a == b"$":
            ids.append(s.last_id if s is not None else 0)
        elif a == b">":
            raise XREAD_GT_ID
        else:
            ids.append(parse_id(a, 0, strict=True)[0])

    if retry:
        # Served like Redis's serveClientsBlockedOnStreamKey: the first key
        # whose last ID moved past the one we wait for, alone in the reply.
        for idx in range(nstreams):
            s = _stream_or_none(db, keys[idx])
            gt = ids[idx]
            if s is not None and s.last_id > gt:
                entries = s.range(gt + 1, MAX_ID, count) if gt < MAX_ID else []
                if c.resp == 3:
                    return {keys[idx]: entries}
                return [[keys[idx], entries]]
        return Block(keys, 0, NULL_ARRAY)

    out: list[Any] = []
    for idx in range(nstreams):
        s = db.lookup_type(keys[idx], Stream)
        if s is None or not len(s):
            continue
        gt = ids[idx]
        top = s.last_valid_id()
        if top > gt:  # type: ignore[operator]
            out.append((keys[idx], s.range(gt + 1, MAX_ID, count)))
    if out:
        if c.resp == 3:
            return dict(out)
        return [list(p) for p in out]
    if timeout != -1:
        if not c.may_block:
            return NULL_ARRAY
        new_argv = [argv[0], b"COUNT", b"%d" % (count or XREAD_BLOCKED_DEFAULT_COUNT), b"STREAMS", *keys]
        new_argv.extend(format_id(x) for x in ids)
        # timeouts beyond any practical wait (Redis overflows them) block "forever"
        return Block(list(keys), min(timeout / 1000.0, 1e9), NULL_ARRAY, argv=new_argv)
    return NULL_ARRAY


# ---- XINFO ----------------------------------------------------------------------
container("xinfo", -2, "", group="stream")

_XINFO_HELP = [
    b"XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"CONSUMERS <key> <groupname>",
    b"    Show consumers of <groupname>.",
    b"GROUPS <key>",
    b"    Show the stream consumer groups.",
    b"STREAM <key> [FULL [COUNT <count>]",
    b"    Show information about the stream.",
    b"HELP",
    b"    Prints this help.",
]


def _sub_syntax(argv: list[bytes]) -> RedisError:
    return RedisError(
        b"ERR unknown subcommand or wrong number of arguments for '"
        + argv[1][:128]
        + b"'. Try "
        + argv[0].upper()
        + b" HELP."
    )


@subcommand("xinfo", "help", 2, "loading stale")
def xinfo_help(c: Any, argv: list[bytes]) -> Any:
    return [Status(x) for x in _XINFO_HELP]


def _lookup_info(c: Any, key: bytes) -> Stream:
    s = c.db.lookup_type(key, Stream)
    if s is None:
        raise NO_SUCH_KEY
    return s


@subcommand("xinfo", "stream", -3, "readonly", 2, 2, 1)
def xinfo_stream(c: Any, argv: list[bytes]) -> Any:
    s = _lookup_info(c, argv[2])
    optc = len(argv) - 3
    full = False
    count = 10
    if optc:
        if optc not in (1, 3) or argv[3].lower() != b"full":
            raise _sub_syntax(argv)
        if optc == 3:
            if argv[4].lower() != b"count":
                raise _sub_syntax(argv)
            count = _parse_count(argv[5])
            if count < 0:
                count = 10
        full = True
    first = s.first_id()
    info: dict[bytes, Any] = {
        b"length": len(s),
        b"radix-tree-keys": s.rax_size(),
        b"radix-tree-nodes": s.rax_nodes(),
        b"last-generated-id": format_id(s.last_id),
        b"max-deleted-entry-id": format_id(s.max_deleted),
        b"entries-added": s.entries_added,
        b"recorded-first-entry-id": format_id(first if first is not None else 0),
    }
    if not full:
        info[b"groups"] = 0
        fe = s.range(0, MAX_ID, 1)
        le = s.range(0, MAX_ID, 1, rev=True)
        info[b"first-entry"] = fe[0] if fe else None
        info[b"last-entry"] = le[0] if le else None
    else:
        info[b"entries"] = s.range(0, MAX_ID, count)
        info[b"groups"] = []
    return info


@subcommand("xinfo", "groups", 3, "readonly", 2, 2, 1)
def xinfo_groups(c: Any, argv: list[bytes]) -> Any:
    _lookup_info(c, argv[2])
    return []


@subcommand("xinfo", "consumers", 4, "readonly", 2, 2, 1)
def xinfo_consumers(c: Any, argv: list[bytes]) -> Any:
    _lookup_info(c, argv[2])
    raise RedisError(b"NOGROUP No such consumer group '" + argv[3] + b"' for key name '" + argv[2] + b"'")

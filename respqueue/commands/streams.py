"""Stream commands (t_stream.c): XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XREAD, XSETID, XINFO."""

from __future__ import annotations

import re
from itertools import islice
from typing import Any

from ..errors import NO_SUCH_KEY, NOT_INTEGER, SYNTAX, wrong_args
from ..events import STREAM_ADDED
from ..keyspace import Database, mstime
from ..resp import NULL_ARRAY, OK, RedisError, Status
from ..types.stream import INVALID_ENTRIES_READ, MASK64, MAX_ID, Group, Nack, Stream, format_id
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
XREADGROUP_NO_GROUP = RedisError(b"ERR Missing GROUP option for XREADGROUP")
XREADGROUP_DOLLAR = RedisError(
    b"ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by "
    b"specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."
)
XREADGROUP_KEY_GONE = RedisError(b"UNBLOCKED the stream key no longer exists")
XREADGROUP_GROUP_GONE = RedisError(b"NOGROUP the consumer group this client was blocked on no longer exists")
XGROUP_NO_KEY = RedisError(
    b"ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM "
    b"option to create an empty stream automatically."
)
BUSYGROUP = RedisError(b"BUSYGROUP Consumer Group name already exists")
ENTRIESREAD_NEGATIVE = RedisError(b"ERR value for ENTRIESREAD must be positive or -1")
XCLAIM_BAD_MINIDLE = RedisError(b"ERR Invalid min-idle-time argument for XCLAIM")
XAUTOCLAIM_BAD_MINIDLE = RedisError(b"ERR Invalid min-idle-time argument for XAUTOCLAIM")
XAUTOCLAIM_BAD_COUNT = RedisError(b"ERR COUNT must be > 0")
XAUTOCLAIM_NO_MEMORY = RedisError(b"ERR Insufficient memory, failed allocating transient memory, COUNT too high.")
XAUTOCLAIM_MAX_COUNT = (2**63 - 1) // 16
XAUTOCLAIM_ALLOC_LIMIT = 1 << 36  # beyond this Redis's transient allocation fails
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


def _config_int(extra: dict[str, str], name: str, default: int) -> int:
    raw = extra.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        return default


def _node_limits(c: Any) -> tuple[int, int, int]:
    """stream-node-max-entries and stream-node-max-bytes, as CONFIG SET left them, and the LIMIT a ``~`` trim
    without one gets (parsed once: CONFIG SET of either drops ``server.stream_node_limits``)."""
    server = c.server
    lim = getattr(server, "stream_node_limits", None)
    if lim is None:
        extra = getattr(server, "config_extra", None)
        if not extra:
            me, mb = 100, 4096
        else:
            me = _config_int(extra, "stream-node-max-entries", 100)
            mb = _config_int(extra, "stream-node-max-bytes", 4096)
        # 100 * stream-node-max-entries (10,000 when that is 0), at most 1,000,000 (as Redis's
        # streamParseAddOrTrimArgsOrReply)
        approx = min(100 * me if me > 0 else 10000, 1000000)
        lim = server.stream_node_limits = (me, mb, approx)
    return lim  # type: ignore[no-any-return]


def _approx_limit(c: Any) -> int:
    """The LIMIT a ``~`` trim without one gets: 100 * stream-node-max-entries (10,000 when that
    is 0), at most 1,000,000 (as Redis's streamParseAddOrTrimArgsOrReply)."""
    return _node_limits(c)[2]


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


def _count(arg: bytes, negative: Exception) -> int:
    """A MAXLEN or LIMIT count: an integer (else Redis's not-an-integer error), not below 0 (else ``negative``)."""
    v = str2int(arg)
    if v is None:
        raise NOT_INTEGER
    if v < 0:
        raise negative
    return v


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
        if (lopt == b"maxlen" or lopt == b"minid") and more:
            if a.has_strategy:
                raise MAXLEN_AND_MINID
            a.approx = False
            nxt = argv[i + 1]
            if more >= 2 and nxt == b"~":
                a.approx = True
                i += 1
            elif more >= 2 and nxt == b"=":
                i += 1
            if lopt == b"maxlen":
                a.maxlen = _count(argv[i + 1], MAXLEN_NEGATIVE)
            else:
                a.minid = parse_id(argv[i + 1], 0, strict=True)[0]
            i += 1
        elif lopt == b"limit" and more:
            a.limit = _count(argv[i + 1], LIMIT_NEGATIVE)
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
        a.limit = _approx_limit(c)
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
    a2 = argv[2]
    if a2 == b"*":
        # fast path: XADD key * field value ...
        a: Any = None
        field_pos = 3
    elif a2 == b"MAXLEN" and argv[3] == b"~" and len(argv) > 6 and argv[5] == b"*" and (a := _approx_args(c, argv[4])):
        # fast path: XADD key MAXLEN ~ <n> * field value ... (BullMQ's events stream)
        field_pos = 6
    else:
        a = _parse_add_trim(c, argv, True)
        field_pos = a.idpos + 1
    nf = len(argv) - field_pos
    if nf < 2 or nf & 1:
        raise wrong_args(b"xadd")
    if a is None:
        return format_id(_xadd(c, argv, field_pos, None))
    if a.id_given and a.seq_given and a.id == 0:
        raise XADD_ID_ZERO
    new = _xadd(c, argv, field_pos, a)
    return None if new is None else format_id(new)


_FAST_MAXLEN = re.compile(rb"(0|[1-9][0-9]{0,17})\Z")


def _fast_maxlen(b: bytes) -> bool:
    """A MAXLEN count the fast path may take as is (plain decimal, no sign, fits easily)."""
    return _FAST_MAXLEN.match(b) is not None


#: MAXLEN count text -> its ``~`` trim options (shared, read only) for the fast paths (bounded)
_APPROX: dict[bytes, _TrimArgs] = {}


def _approx_args(c: Any, n: bytes) -> _TrimArgs | None:
    """The options of ``MAXLEN ~ <n>`` without LIMIT (memoised, read only), or None when ``n`` is not a plain count
    the fast paths take (see _fast_maxlen)."""
    a = _APPROX.get(n)
    if a is None or a.limit != _node_limits(c)[2]:
        if not _fast_maxlen(n):
            return None
        a = _approx_maxlen(c, n)
        if len(_APPROX) >= 256:
            _APPROX.clear()
        _APPROX[n] = a
    return a


def _approx_maxlen(c: Any, n: bytes) -> _TrimArgs:
    """The options of ``MAXLEN ~ <n>`` (``n`` a plain count, see _fast_maxlen) without LIMIT."""
    a = _TrimArgs()
    a.maxlen = int(n)
    a.approx = True
    a.limit = _approx_limit(c)
    return a


def _xadd(c: Any, argv: list[bytes], field_pos: int, a: _TrimArgs | None) -> Any:
    """XADD once its arguments are parsed (``a`` None: ``*`` and no options); the new packed ID, or None (NOMKSTREAM)."""
    db = c.db
    key = argv[1]
    s = db.lookup_type(key, Stream)
    created = s is None
    if created:
        if a is not None and a.nomkstream:
            return None
        s = Stream()
    last = s.last_id
    if last == MAX_ID:
        raise XADD_EXHAUSTED
    if a is not None and a.id_given:
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
    me, mb, _ = _node_limits(c)
    s.append(new, argv[field_pos:], me, mb)
    if a is not None and a.has_strategy:
        s.trim(a.maxlen, a.minid, a.approx, a.limit)
    if created:
        db.add(key, s)
    else:
        db.modified(key)
    if STREAM_ADDED:
        for fn in STREAM_ADDED:  # respqueue/events.py: plug-ins' hooks (e.g. job history), in the same commit
            fn(c, key, new, argv, field_pos)
    return new


def xtrim_approx(c: Any, key: bytes, maxlen: int) -> int:
    """``XTRIM key MAXLEN ~ maxlen`` (maxlen >= 0); the number of entries removed."""
    s = c.db.lookup_type(key, Stream)
    if s is None:
        return 0
    deleted = s.trim(maxlen, None, True, _approx_limit(c))
    if deleted:
        c.db.modified(key)
    return deleted  # type: ignore[no-any-return]


def append_star(s: Stream, fields: list[bytes], limits: tuple[int, int, int]) -> int:
    """``XADD * fields...``'s stream part on ``s``, a stream that exists with IDs to spare: the next auto ID
    (from the clock, or the last ID + 1), the entry appended within the node limits ``limits``
    (:func:`node_limits`); the packed ID. The caller does the keyspace's part (``Database.modified``, the
    ``STREAM_ADDED`` hooks): the native scripts' run forms, which checked the stream once for their run."""
    last = s.last_id
    now = mstime()
    new = now << 64 if now > last >> 64 else last + 1
    s.append(new, fields, limits[0], limits[1])
    return new


def xadd_auto_id(c: Any, argv: list[bytes]) -> int:
    """``XADD key * field value ...`` (argv as sent, well formed) for callers that need no reply text; the packed ID."""
    return _xadd(c, argv, 3, None)  # type: ignore[no-any-return]


def xadd_auto_id_trimmed(c: Any, argv: list[bytes]) -> int | None:
    """``XADD key MAXLEN ~ <n> * field value ...`` (well formed) for callers that need no reply text: the
    packed ID, or None (nothing done) when ``<n>`` is not a plain count the fast path takes."""
    a = _approx_args(c, argv[4])
    if a is None:
        return None
    return _xadd(c, argv, 6, a)  # type: ignore[no-any-return]


def node_limits(c: Any) -> tuple[int, int, int]:
    """(stream-node-max-entries, stream-node-max-bytes, the LIMIT of a ``~`` trim without one), as XADD uses
    them now (they change only with CONFIG SET)."""
    return _node_limits(c)


@command("xtrim", -4, "write", 1, 1, 1, group="stream")
def xtrim(c: Any, argv: list[bytes]) -> Any:
    if len(argv) == 5 and argv[2] == b"MAXLEN" and argv[3] == b"~" and _fast_maxlen(argv[4]):
        # fast path: XTRIM key MAXLEN ~ <n> (BullMQ's trimEvents)
        return xtrim_approx(c, argv[1], int(argv[4]))
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
    return _by_ids(c, argv[1], s.delete, argv[2:])


def _by_ids(c: Any, key: bytes, op: Any, raw_ids: list[bytes]) -> int:
    """Parse every ID first (one bad ID fails the whole command), apply ``op`` to each, count the hits."""
    ids = [parse_id(b, 0, strict=True)[0] for b in raw_ids]
    done = 0
    for i in ids:
        if op(i):
            done += 1
    if done:
        c.db.modified(key)
    return done


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


def _stream_or_none(db: Database, key: bytes) -> Stream | None:
    v = db.lookup(key)
    return v if isinstance(v, Stream) else None


def _one(c: Any, key: bytes, entries: list[Any]) -> Any:
    return {key: entries} if c.resp == 3 else [[key, entries]]


def _xread_generic(c: Any, argv: list[bytes], readgroup: bool) -> Any:
    """XREAD and XREADGROUP (xreadCommand)."""
    timeout = -1
    count = 0
    streams_arg = 0
    nstreams = 0
    groupname: bytes | None = None
    consumername = b""
    noack = False
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
            if not readgroup:
                raise XREAD_GROUP_OPT
            groupname = argv[i + 1]
            consumername = argv[i + 2]
            i += 2
        elif o == b"noack":
            if not readgroup:
                raise XREAD_NOACK_OPT
            noack = True
        else:
            raise SYNTAX
        i += 1
    if streams_arg == 0:
        raise SYNTAX
    if readgroup and groupname is None:
        raise XREADGROUP_NO_GROUP
    # imported here: dispatch imports the command table, which imports this module
    from ..dispatch import Block

    db = c.db
    keys = argv[streams_arg : streams_arg + nstreams]
    if getattr(c, "blocked", None) is not None:
        return _serve_blocked(c, keys, argv[streams_arg + nstreams :], count, groupname, consumername, noack)

    ids: list[int] = []
    groups: list[Group] = []
    for idx in range(nstreams):
        key = keys[idx]
        s = db.lookup_type(key, Stream)
        if groupname is not None:
            g = s.group(groupname) if s is not None else None
            if g is None:
                raise RedisError(
                    b"NOGROUP No such key '"
                    + key
                    + b"' or consumer group '"
                    + groupname
                    + b"' in XREADGROUP with GROUP option"
                )
            groups.append(g)
        a = argv[streams_arg + nstreams + idx]
        if a == b"$":
            if readgroup:
                raise XREADGROUP_DOLLAR
            ids.append(s.last_id if s is not None else 0)
        elif a == b">":
            if not readgroup:
                raise XREAD_GT_ID
            ids.append(MAX_ID)
        else:
            ids.append(parse_id(a, 0, strict=True)[0])

    out: list[Any] = []
    now = mstime()
    for idx in range(nstreams):
        key = keys[idx]
        s = db.lookup_type(key, Stream)
        if s is None:
            continue
        gt = ids[idx]
        if groupname is not None:
            g = groups[idx]
            if gt != MAX_ID:
                cons = g.get_or_create_consumer(consumername, now)
                out.append((key, s.read_history(cons, gt + 1, count, now)))
                db.modified(key)
            elif len(s) and s.last_valid_id() > g.last_id:  # type: ignore[operator]
                cons = g.get_or_create_consumer(consumername, now)
                out.append((key, s.read_group(g, cons, g.last_id + 1, count, noack, now)))
                db.modified(key)
        elif len(s) and s.last_valid_id() > gt:  # type: ignore[operator]
            out.append((key, s.range(gt + 1, MAX_ID, count)))
    if out:
        if c.resp == 3:
            return dict(out)
        return [list(p) for p in out]
    if timeout != -1:
        if not c.may_block:
            return NULL_ARRAY
        new_argv = [argv[0]]
        if groupname is not None:
            new_argv += [b"GROUP", groupname, consumername]
            if noack:
                new_argv.append(b"NOACK")
        new_argv += [b"COUNT", b"%d" % (count or XREAD_BLOCKED_DEFAULT_COUNT), b"STREAMS", *keys]
        new_argv.extend(b">" if x == MAX_ID and groupname is not None else format_id(x) for x in ids)
        # timeouts beyond any practical wait (Redis overflows them) block "forever"
        return Block(list(keys), min(timeout / 1000.0, 1e9), NULL_ARRAY, argv=new_argv)
    return NULL_ARRAY


def _serve_blocked(
    c: Any, keys: list[bytes], idargs: list[bytes], count: int, groupname: bytes | None, consumer: bytes, noack: bool
) -> Any:
    """A blocked XREAD/XREADGROUP re-run after a key changed (serveClientsBlockedOnStreamKey).

    As in Redis, the first stream with news is served alone; XREADGROUP
    clients get an error when their stream or group went away.
    """
    from ..dispatch import Block

    db = c.db
    for idx, key in enumerate(keys):
        s = _stream_or_none(db, key)
        if groupname is not None:
            if s is None:
                raise XREADGROUP_KEY_GONE
            g = s.group(groupname)
            if g is None:
                raise XREADGROUP_GROUP_GONE
            if s.last_id > g.last_id:
                now = mstime()
                cons = g.get_or_create_consumer(consumer, now)
                entries = s.read_group(g, cons, g.last_id + 1, count, noack, now)
                db.modified(key)
                return _one(c, key, entries)
        elif s is not None:
            a = idargs[idx]
            gt = parse_id(a, 0, strict=True)[0]
            if s.last_id > gt:
                return _one(c, key, s.range(gt + 1, MAX_ID, count) if gt < MAX_ID else [])
    return Block(keys, 0, NULL_ARRAY)


@command("xread", -4, "readonly blocking movablekeys", 0, 0, 0, group="stream")
def xread(c: Any, argv: list[bytes]) -> Any:
    return _xread_generic(c, argv, False)


@command("xreadgroup", -7, "write blocking movablekeys", 0, 0, 0, group="stream")
def xreadgroup(c: Any, argv: list[bytes]) -> Any:
    return _xread_generic(c, argv, True)


# ---- XGROUP -----------------------------------------------------------------------
container("xgroup", -2, "", group="stream")

_XGROUP_HELP = [
    b"XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"CREATE <key> <groupname> <id|$> [option]",
    b"    Create a new consumer group. Options are:",
    b"    * MKSTREAM",
    b"      Create the empty stream if it does not exist.",
    b"    * ENTRIESREAD entries_read",
    b"      Set the group's entries_read counter (internal use).",
    b"CREATECONSUMER <key> <groupname> <consumer>",
    b"    Create a new consumer in the specified group.",
    b"DELCONSUMER <key> <groupname> <consumer>",
    b"    Remove the specified consumer.",
    b"DESTROY <key> <groupname>",
    b"    Remove the specified group.",
    b"SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    b"    Set the current group ID and entries_read counter.",
    b"HELP",
    b"    Prints this help.",
]


def _nogroup(group: bytes, key: bytes) -> RedisError:
    return RedisError(b"NOGROUP No such consumer group '" + group + b"' for key name '" + key + b"'")


def _nogroup_key(key: bytes, group: bytes) -> RedisError:
    return RedisError(b"NOGROUP No such key '" + key + b"' or consumer group '" + group + b"'")


@subcommand("xgroup", "help", 2, "loading stale")
def xgroup_help(c: Any, argv: list[bytes]) -> Any:
    return [Status(x) for x in _XGROUP_HELP]


def _xgroup(c: Any, argv: list[bytes]) -> Any:
    """xgroupCommand for CREATE, SETID, DESTROY, CREATECONSUMER and DELCONSUMER."""
    opt = argv[1].lower()
    n = len(argv)
    mkstream = False
    entries_read = INVALID_ENTRIES_READ
    db = c.db
    key, grpname = argv[2], argv[3]
    i = 5
    create, setid = opt == b"create", opt == b"setid"
    while i < n:
        a = argv[i].lower()
        if create and a == b"mkstream":
            mkstream = True
            i += 1
        elif (create or setid) and a == b"entriesread" and i + 1 < n:
            entries_read = _parse_count(argv[i + 1])
            if entries_read < 0 and entries_read != INVALID_ENTRIES_READ:
                raise ENTRIESREAD_NEGATIVE
            i += 2
        else:
            raise _sub_syntax(argv)
    s = db.lookup_type(key, Stream)
    g = None
    if not mkstream:
        if s is None:
            raise XGROUP_NO_KEY
        g = s.group(grpname)
        if g is None and opt in (b"setid", b"createconsumer", b"delconsumer"):
            raise _nogroup(grpname, key)
    now = mstime()
    if create and 5 <= n <= 8:
        if argv[4] == b"$":
            gid = s.last_id if s is not None else 0
        else:
            gid = parse_id(argv[4], 0, strict=True)[0]
        created = s is None
        if created:
            s = Stream()
        if s.create_group(grpname, gid, entries_read) is None:  # type: ignore[union-attr]
            raise BUSYGROUP
        if created:
            db.add(key, s)
        else:
            db.modified(key)
        return OK
    if setid and n in (5, 7):
        assert s is not None and g is not None
        gid = s.last_id if argv[4] == b"$" else parse_id(argv[4], 0)[0]
        g.last_id = gid
        g.entries_read = entries_read
        db.modified(key)
        return OK
    if opt == b"destroy" and n == 4:
        assert s is not None
        if g is not None:
            s.destroy_group(grpname)
            db.modified(key)
            return 1
        return 0
    if opt == b"createconsumer" and n == 5:
        assert g is not None
        if g.create_consumer(argv[4], now) is None:
            return 0
        db.modified(key)
        return 1
    if opt == b"delconsumer" and n == 5:
        assert g is not None
        cons = g.consumer(argv[4])
        if cons is None:
            return 0
        pending = g.delete_consumer(cons)
        db.modified(key)
        return pending
    raise _sub_syntax(argv)


subcommand("xgroup", "create", -5, "write denyoom", 2, 2, 1)(_xgroup)
subcommand("xgroup", "setid", -5, "write", 2, 2, 1)(_xgroup)
subcommand("xgroup", "destroy", 4, "write", 2, 2, 1)(_xgroup)
subcommand("xgroup", "createconsumer", 5, "write denyoom", 2, 2, 1)(_xgroup)
subcommand("xgroup", "delconsumer", 5, "write", 2, 2, 1)(_xgroup)


# ---- XACK / XPENDING / XCLAIM / XAUTOCLAIM ------------------------------------------------
@command("xack", -4, "write fast", 1, 1, 1, group="stream")
def xack(c: Any, argv: list[bytes]) -> Any:
    s = c.db.lookup_type(argv[1], Stream)
    g = s.group(argv[2]) if s is not None else None
    if g is None:
        return 0
    return _by_ids(c, argv[1], g.ack, argv[3:])


@command("xpending", -3, "readonly", 1, 1, 1, group="stream")
def xpending(c: Any, argv: list[bytes]) -> Any:
    n = len(argv)
    key, grpname = argv[1], argv[2]
    justinfo = n == 3
    if n != 3 and (n < 6 or n > 9):
        raise SYNTAX
    minidle = 0
    count = 0
    start = end = 0
    consumername: bytes | None = None
    if n >= 6:
        si = 3
        if argv[3].lower() == b"idle":
            minidle = _parse_count(argv[4])
            if n < 8:
                raise SYNTAX
            si += 2
        count = _parse_count(argv[si + 2])
        if count < 0:
            count = 0
        start, ex = _interval_id(argv[si], 0)
        if ex:
            if start == MAX_ID:
                raise BAD_START
            start += 1
        end, ex = _interval_id(argv[si + 1], MASK64)
        if ex:
            if end == 0:
                raise BAD_END
            end -= 1
        if si + 3 < n:
            consumername = argv[si + 3]
    s = c.db.lookup_type(key, Stream)
    g = s.group(grpname) if s is not None else None
    if g is None:
        raise _nogroup_key(key, grpname)
    if justinfo:
        pel = g.pel
        if not pel:
            return [0, None, None, NULL_ARRAY]
        owners = [[cons.name, b"%d" % len(cons.pel)] for cons in g.sorted_consumers() if cons.pel]
        return [len(pel), format_id(pel.peekitem(0)[0]), format_id(pel.peekitem(-1)[0]), owners]
    if consumername is not None:
        cons = g.consumer(consumername)
        if cons is None:
            return []
        pel = cons.pel
    else:
        pel = g.pel
    now = mstime()
    out: list[Any] = []
    if count and start <= end:
        for id_ in pel.irange(start, end):
            nack = pel[id_]
            if minidle and now - nack.delivery_time < minidle:
                continue
            elapsed = now - nack.delivery_time
            owner = nack.consumer.name if nack.consumer is not None else b""
            out.append([format_id(id_), owner, elapsed if elapsed > 0 else 0, nack.delivery_count])
            if len(out) == count:
                break
    return out


@command("xclaim", -6, "write fast", 1, 1, 1, group="stream")
def xclaim(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    key, grpname = argv[1], argv[2]
    s = db.lookup_type(key, Stream)
    g = s.group(grpname) if s is not None else None
    if g is None:
        raise _nogroup_key(key, grpname)
    assert s is not None
    minidle = str2int(argv[4])
    if minidle is None:
        raise XCLAIM_BAD_MINIDLE
    if minidle < 0:
        minidle = 0
    n = len(argv)
    ids: list[int] = []
    j = 5
    while j < n:
        try:
            ids.append(parse_id(argv[j], 0, strict=True)[0])
        except RedisError:
            break
        j += 1
    now = mstime()
    force = justid = False
    retrycount = -1
    deliverytime = -1
    last_id = 0
    while j < n:
        more = n - 1 - j
        opt = argv[j].lower()
        if opt == b"force":
            force = True
        elif opt == b"justid":
            justid = True
        elif opt == b"idle" and more:
            j += 1
            v = str2int(argv[j])
            if v is None:
                raise RedisError(b"ERR Invalid IDLE option argument for XCLAIM")
            deliverytime = now - v
        elif opt == b"time" and more:
            j += 1
            v = str2int(argv[j])
            if v is None:
                raise RedisError(b"ERR Invalid TIME option argument for XCLAIM")
            deliverytime = v
        elif opt == b"retrycount" and more:
            j += 1
            v = str2int(argv[j])
            if v is None:
                raise RedisError(b"ERR Invalid RETRYCOUNT option argument for XCLAIM")
            retrycount = v
        elif opt == b"lastid" and more:
            j += 1
            last_id = parse_id(argv[j], 0, strict=True)[0]
        else:
            raise RedisError(b"ERR Unrecognized XCLAIM option '" + argv[j] + b"'")
        j += 1
    changed = False
    if last_id > g.last_id:
        g.last_id = last_id
        changed = True
    if deliverytime != -1:
        if deliverytime < 0 or deliverytime > now:
            deliverytime = now
    else:
        deliverytime = now
    consumer = None
    out: list[Any] = []
    pel = g.pel
    for id_ in ids:
        nack = pel.get(id_)
        fv = s.get(id_)
        if fv is None:
            if nack is not None:
                g.ack(id_)
                changed = True
            continue
        if force and nack is None:
            nack = pel[id_] = Nack(None, now, 1)
        if nack is None:
            continue
        if nack.consumer is not None and minidle and now - nack.delivery_time < minidle:
            continue
        if consumer is None:
            consumer = g.get_or_create_consumer(argv[3], now)
        nack.delivery_time = deliverytime
        if retrycount >= 0:
            nack.delivery_count = retrycount
        elif not justid:
            nack.delivery_count += 1
        g.assign(id_, nack, consumer)
        out.append(format_id(id_) if justid else [format_id(id_), fv])
        changed = True
    if changed:
        db.modified(key)
    return out


@command("xautoclaim", -6, "write fast", 1, 1, 1, group="stream")
def xautoclaim(c: Any, argv: list[bytes]) -> Any:
    db = c.db
    key, grpname = argv[1], argv[2]
    minidle = str2int(argv[4])
    if minidle is None:
        raise XAUTOCLAIM_BAD_MINIDLE
    if minidle < 0:
        minidle = 0
    start, ex = _interval_id(argv[5], 0)
    if ex:
        if start == MAX_ID:
            raise BAD_START
        start += 1
    count = 100
    justid = False
    n = len(argv)
    j = 6
    while j < n:
        more = n - 1 - j
        opt = argv[j].lower()
        if opt == b"count" and more:
            v = str2int(argv[j + 1])
            if v is None or v < 1 or v > XAUTOCLAIM_MAX_COUNT:
                raise XAUTOCLAIM_BAD_COUNT
            count = v
            j += 1
        elif opt == b"justid":
            justid = True
        else:
            raise SYNTAX
        j += 1
    s = db.lookup_type(key, Stream)
    g = s.group(grpname) if s is not None else None
    if g is None:
        raise _nogroup_key(key, grpname)
    assert s is not None
    if count > XAUTOCLAIM_ALLOC_LIMIT:
        raise XAUTOCLAIM_NO_MEMORY
    attempts = count * 10
    now = mstime()
    pel = g.pel
    consumer = None
    claimed: list[Any] = []
    deleted: list[bytes] = []
    candidates = list(islice(pel.irange(minimum=start), attempts))
    last_seen = -1
    for id_ in candidates:
        if not count:
            break
        last_seen = id_
        nack = pel[id_]
        fv = s.get(id_)
        if fv is None:
            g.ack(id_)
            deleted.append(format_id(id_))
            count -= 1
            continue
        if minidle and now - nack.delivery_time < minidle:
            continue
        if consumer is None:
            consumer = g.get_or_create_consumer(argv[3], now)
        nack.delivery_time = now
        if not justid:
            nack.delivery_count += 1
        g.assign(id_, nack, consumer)
        claimed.append(format_id(id_) if justid else [format_id(id_), fv])
        count -= 1
    cursor = 0
    if last_seen >= 0:
        nxt = next(iter(pel.irange(minimum=last_seen, inclusive=(False, True))), None)
        cursor = 0 if nxt is None else nxt
    if claimed or deleted:
        db.modified(key)
    return [format_id(cursor), claimed, deleted]


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


def _entries_read(g: Group) -> int | None:
    return None if g.entries_read == INVALID_ENTRIES_READ else g.entries_read


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
        info[b"groups"] = s.num_groups()
        fe = s.range(0, MAX_ID, 1)
        le = s.range(0, MAX_ID, 1, rev=True)
        info[b"first-entry"] = fe[0] if fe else None
        info[b"last-entry"] = le[0] if le else None
        return info
    info[b"entries"] = s.range(0, MAX_ID, count)
    groups = []
    for name, g in s.sorted_groups():
        pending = []
        for id_, nack in islice(g.pel.items(), count or None):
            owner = nack.consumer.name if nack.consumer is not None else b""
            pending.append([format_id(id_), owner, nack.delivery_time, nack.delivery_count])
        consumers = []
        for cons in g.sorted_consumers():
            cpel = [
                [format_id(id_), nack.delivery_time, nack.delivery_count]
                for id_, nack in islice(cons.pel.items(), count or None)
            ]
            consumers.append(
                {b"name": cons.name, b"seen-time": cons.seen_time, b"pel-count": len(cons.pel), b"pending": cpel}
            )
        groups.append(
            {
                b"name": name,
                b"last-delivered-id": format_id(g.last_id),
                b"entries-read": _entries_read(g),
                b"lag": s.lag(g),
                b"pel-count": len(g.pel),
                b"pending": pending,
                b"consumers": consumers,
            }
        )
    info[b"groups"] = groups
    return info


@subcommand("xinfo", "groups", 3, "readonly", 2, 2, 1)
def xinfo_groups(c: Any, argv: list[bytes]) -> Any:
    s = _lookup_info(c, argv[2])
    return [
        {
            b"name": name,
            b"consumers": len(g.consumers),
            b"pending": len(g.pel),
            b"last-delivered-id": format_id(g.last_id),
            b"entries-read": _entries_read(g),
            b"lag": s.lag(g),
        }
        for name, g in s.sorted_groups()
    ]


@subcommand("xinfo", "consumers", 4, "readonly", 2, 2, 1)
def xinfo_consumers(c: Any, argv: list[bytes]) -> Any:
    s = _lookup_info(c, argv[2])
    g = s.group(argv[3])
    if g is None:
        raise _nogroup(argv[3], argv[2])
    now = mstime()
    return [
        {b"name": cons.name, b"pending": len(cons.pel), b"idle": max(0, now - cons.seen_time)}
        for cons in g.sorted_consumers()
    ]

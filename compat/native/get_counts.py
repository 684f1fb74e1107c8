"""Native getCounts (Queue.getJobCounts, getWaitingCount...): a count per state, in the order asked.

KEYS: the queue's key prefix; ARGV: the states (the client has turned 'waiting' into 'wait'). wait and
paused: LINDEX -1 (a legacy ``0:`` marker at the tail is popped: Lua), then LLEN; active: LLEN; anything
else: ZCARD. 6.7.0's text takes an optional first argument, a timestamp cutoff (``tonumber(ARGV[1])``):
with it, delayed is counted with ZCOUNT -inf <cutoff * 0x1000 - 1>; that is its variant. The key types are
checked first (a list state that is no list, a zset state that is no zset: the Lua path answers), and so is
whether the first argument is a number as Lua's tonumber sees it (anything not plainly one way or the other
goes to Lua).
"""

from __future__ import annotations

from typing import Any

from respqueue.types.list import List
from respqueue.types.zset import ZSet

from ..scripts import Bail, Ctx, cmd, native
from .helpers import _INT_RE, LLEN, ZCARD, _check

LINDEX = cmd("lindex")
ZCOUNT = cmd("zcount")
_CUTOFF_ARGV = ["optional delayed timestamp cutoff milliseconds"]
#: a cutoff whose ``* 0x1000 - 1`` Lua computes exactly (and passes as an integer)
_MAX_CUTOFF = 2**53 // 0x1000
#: the first bytes with which strtod (Lua's tonumber) may read a number
_NUMERIC_START = frozenset(b"0123456789+-. \t\n\v\f\r")


def _accept(numkeys: int, lay: dict[str, Any]) -> Any:
    """The releases that take the prefix and the states (True), and 6.7.0's with the optional cutoff first."""
    if numkeys != 1 or lay.get("keys") != ["prefix"]:
        return None
    if lay.get("calls") or lay.get("events") or lay.get("hash_writes") or lay.get("hash_reads"):
        return None
    argv = lay.get("argv")
    if argv == []:
        return True
    if argv == _CUTOFF_ARGV:
        return "cutoff"
    return None


def _cutoff(a: bytes) -> int | None:
    """tonumber(a) when it is a plain integer, None when Lua reads no number; Bail otherwise."""
    if _INT_RE.match(a):
        n = int(a)
        if -_MAX_CUTOFF < n < _MAX_CUTOFF:
            return n
        raise Bail("cutoff range")
    if a and a[0] not in _NUMERIC_START and a[:3].lower() not in (b"inf", b"nan"):
        return None
    raise Bail("cutoff")


@native("getCounts", _accept)
def get_counts(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: Any = None) -> Any:
    """KEYS: prefix; ARGV: [cutoff (6.7.0, optional)], states. The counts, in order."""
    prefix = keys[0]
    cutoff = None
    types = argv
    if variant == "cutoff":
        if not argv:
            raise Bail("tonumber(nil)")
        cutoff = _cutoff(argv[0])
        if cutoff is not None:
            types = argv[1:]
    db = ctx.db
    counts: list[int | None] = []  # (None: ZCOUNT, made through Ctx.call)
    for t in types:
        key = prefix + t
        if t == b"wait" or t == b"paused":
            lst = _check(db, key, List)
            if lst and lst.get(len(lst) - 1)[:2] == b"0:":
                raise Bail("legacy marker")
            counts.append(len(lst) if lst else 0)
        elif t == b"active":
            lst = _check(db, key, List)
            counts.append(len(lst) if lst else 0)
        else:
            z = _check(db, key, ZSet)
            counts.append(None if t == b"delayed" and cutoff is not None else len(z) if z else 0)
    call = ctx.call
    if not ctx.monitors:
        # the reads' answers are the checks': counted as the Lua path's calls (LINDEX, LLEN, ZCARD)
        done = ctx.done
        for i, t in enumerate(types):
            if t == b"wait" or t == b"paused":
                done.extend((LINDEX, LLEN))  # type: ignore[union-attr]
            elif counts[i] is not None:
                done.append(LLEN if t == b"active" else ZCARD)  # type: ignore[union-attr]
            else:
                counts[i] = call(ZCOUNT, [b"ZCOUNT", prefix + t, b"-inf", b"%d" % (cutoff * 0x1000 - 1)])  # type: ignore[operator]
        return counts
    out = []
    for t in types:
        key = prefix + t
        if t == b"wait" or t == b"paused":
            call(LINDEX, [b"LINDEX", key, b"-1"])
            out.append(call(LLEN, [b"LLEN", key]))
        elif t == b"active":
            out.append(call(LLEN, [b"LLEN", key]))
        elif t == b"delayed" and cutoff is not None:
            out.append(call(ZCOUNT, [b"ZCOUNT", key, b"-inf", b"%d" % (cutoff * 0x1000 - 1)]))
        else:
            out.append(call(ZCARD, [b"ZCARD", key]))
    return out

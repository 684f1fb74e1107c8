"""Random stream command sequences, run on respqueue and on Redis 7.0, replies compared byte for byte.

IDs are explicit (``<ms>-<seq>`` or ``<ms>-*``) so replies are deterministic;
bulk appends push streams across radix-tree node boundaries so that ``~``
trimming, XDEL tombstones and XINFO's node counts are exercised.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .test_streams import _diff_masked

KEYS = ["s1", "s2", "str"]
FIELDSETS = [
    ["f"],
    ["f", "g"],
    ["event", "jobId"],
    ["g"],
    ["123", "-7"],
]
VALUES = ["v", "1", "-42", "100000", "9223372036854775808", "x" * 63, "y" * 64, "z" * 130, "w" * 4100, ""]

GROUPS = ["g1", "g2"]
CONSUMERS = ["c1", "c2", "c3"]
key_st = st.sampled_from(KEYS)
group_st = st.sampled_from(GROUPS + ["nog"])
consumer_st = st.sampled_from(CONSUMERS)
stream_key_st = st.sampled_from(KEYS[:2])
ms_st = st.integers(0, 40)
seq_st = st.integers(0, 3)


def _id_text(draw: Any) -> str:
    return draw(
        st.one_of(
            st.builds(lambda m, s: f"{m}-{s}", ms_st, seq_st),
            st.builds(str, ms_st),
            st.sampled_from(["-", "+", "0", "0-0", "bad", "18446744073709551615-18446744073709551615"]),
        )
    )


@st.composite
def bound(draw: Any) -> str:
    text = _id_text(draw)
    if draw(st.booleans()) and text not in ("-", "+"):
        return "(" + text
    return text


@st.composite
def op(draw: Any) -> tuple[Any, ...]:
    kind = draw(
        st.sampled_from(
            ["add", "add", "add", "add", "bulk", "del", "trim", "range", "range", "read", "len", "info", "setid"]
            + ["xgroup", "xgroup", "rgroup", "rgroup", "ack", "pending", "claim", "autoclaim", "ginfo"]
        )
    )
    if kind == "add":
        fields = draw(st.sampled_from(FIELDSETS))
        vals = [draw(st.sampled_from(VALUES)) for _ in fields]
        trim = draw(
            st.one_of(
                st.just(()),
                st.builds(lambda a, n: ("MAXLEN", a, str(n)), st.sampled_from(["~", "="]), st.integers(0, 150)),
                st.builds(lambda a, m: ("MINID", a, str(m)), st.sampled_from(["~", "="]), ms_st),
            )
        )
        idmode = draw(st.sampled_from(["star", "star", "explicit", "same"]))
        return (
            "add",
            draw(key_st),
            draw(st.integers(0, 2)),
            idmode,
            draw(seq_st),
            fields,
            vals,
            trim,
            draw(st.booleans()),
        )
    if kind == "bulk":
        return (
            "bulk",
            draw(stream_key_st),
            draw(st.integers(20, 140)),
            draw(st.sampled_from(["small", "mixed", "big"])),
        )
    if kind == "del":
        return ("del", draw(key_st), [_id_text(draw) for _ in range(draw(st.integers(1, 4)))])
    if kind == "trim":
        strat = draw(st.sampled_from(["MAXLEN", "MINID"]))
        arg = str(draw(st.integers(0, 250))) if strat == "MAXLEN" else _id_text(draw)
        approx = draw(st.sampled_from(["~", "=", ""]))
        limit = draw(st.one_of(st.just(None), st.integers(0, 150)))
        return ("trim", draw(key_st), strat, approx, arg, limit)
    if kind == "range":
        return (
            "range",
            draw(key_st),
            draw(bound()),
            draw(bound()),
            draw(st.one_of(st.just(None), st.integers(-1, 5))),
            draw(st.booleans()),
        )
    if kind == "read":
        keys = draw(st.lists(key_st, min_size=1, max_size=2, unique=True))
        ids = [draw(st.one_of(st.just("$"), st.builds(lambda m, s: f"{m}-{s}", ms_st, seq_st))) for _ in keys]
        return ("read", keys, ids, draw(st.one_of(st.just(None), st.integers(0, 3))))
    if kind == "setid":
        return ("setid", draw(key_st), _id_text(draw))
    if kind == "xgroup":
        sub = draw(st.sampled_from(["CREATE", "CREATE", "SETID", "DESTROY", "CREATECONSUMER", "DELCONSUMER"]))
        args = ["XGROUP", sub, draw(key_st), draw(group_st)]
        if sub in ("CREATE", "SETID"):
            args.append(draw(st.one_of(st.just("$"), st.just("0"), st.builds(lambda m: f"{m}-0", ms_st))))
            if sub == "CREATE" and draw(st.booleans()):
                args.append("MKSTREAM")
            if draw(st.booleans()):
                args += ["ENTRIESREAD", str(draw(st.integers(-1, 20)))]
        elif sub in ("CREATECONSUMER", "DELCONSUMER"):
            args.append(draw(consumer_st))
        return ("raw", args)
    if kind == "rgroup":
        args = ["XREADGROUP", "GROUP", draw(group_st), draw(consumer_st)]
        if draw(st.booleans()):
            args += ["COUNT", str(draw(st.integers(0, 4)))]
        if draw(st.booleans()):
            args.append("NOACK")
        key = draw(stream_key_st)
        args += ["STREAMS", key, draw(st.one_of(st.just(">"), st.just(">"), st.just("0"), st.builds(str, ms_st)))]
        return ("raw", args)
    if kind == "ack":
        return (
            "raw",
            ["XACK", draw(key_st), draw(group_st)] + [_id_text(draw) for _ in range(draw(st.integers(1, 3)))],
        )
    if kind == "pending":
        args = ["XPENDING", draw(key_st), draw(group_st)]
        if draw(st.booleans()):
            args += [draw(bound()), draw(bound()), str(draw(st.integers(-1, 5)))]
            if draw(st.booleans()):
                args.append(draw(consumer_st))
            return ("masked", args)
        return ("raw", args)
    if kind == "claim":
        args = ["XCLAIM", draw(key_st), draw(group_st), draw(consumer_st), draw(st.sampled_from(["0", "3600000"]))]
        args += [draw(st.builds(lambda m, q: f"{m}-{q}", ms_st, seq_st)) for _ in range(draw(st.integers(1, 3)))]
        args += draw(st.lists(st.sampled_from(["FORCE", "JUSTID", "RETRYCOUNT 3", "LASTID 30-0"]), max_size=2))
        return ("raw", " ".join(args).split())
    if kind == "autoclaim":
        args = ["XAUTOCLAIM", draw(key_st), draw(group_st), draw(consumer_st), "0", draw(bound())]
        if draw(st.booleans()):
            args += ["COUNT", str(draw(st.integers(1, 4)))]
        if draw(st.booleans()):
            args.append("JUSTID")
        return ("raw", args)
    if kind == "ginfo":
        if draw(st.booleans()):
            return ("raw", ["XINFO", "GROUPS", draw(key_st)])
        return ("masked", ["XINFO", "CONSUMERS", draw(key_st), draw(group_st)])
    return (kind, draw(key_st))


def _run(diff: Any, ops: list[tuple[Any, ...]]) -> None:
    diff("FLUSHALL")
    diff("SET", "str", "x")
    clock = {"s1": 1, "s2": 1, "str": 1}
    for o in ops:
        kind = o[0]
        if kind == "add":
            _, key, dms, idmode, seq, fields, vals, trim, nomk = o
            clock[key] += dms
            ms = clock[key]
            id_ = f"{ms}-*" if idmode == "star" else f"{ms}-{seq}" if idmode == "explicit" else str(ms)
            args: list[str] = ["XADD", key]
            if nomk:
                args.append("NOMKSTREAM")
            args.extend(trim)
            args.append(id_)
            for f, v in zip(fields, vals, strict=True):
                args += [f, v]
            diff(*args)
        elif kind == "bulk":
            _, key, n, size = o
            for i in range(n):
                clock[key] += 1
                if size == "small":
                    fv = ["f", str(i)]
                elif size == "big":
                    fv = ["payload", "p" * (i * 13 % 300)]
                else:
                    fv = ["event", "completed", "jobId", str(i)] if i % 4 else ["other", "-5"]
                diff("XADD", key, f"{clock[key]}-*", *fv)
        elif kind == "del":
            diff("XDEL", o[1], *o[2])
        elif kind == "trim":
            _, key, strat, approx, arg, limit = o
            args = ["XTRIM", key, strat]
            if approx:
                args.append(approx)
            args.append(arg)
            if limit is not None:
                args += ["LIMIT", str(limit)]
            diff(*args)
        elif kind == "range":
            _, key, a, b, count, rev = o
            args = ["XREVRANGE", key, b, a] if rev else ["XRANGE", key, a, b]
            if count is not None:
                args += ["COUNT", str(count)]
            diff(*args)
        elif kind == "read":
            _, keys, ids, count = o
            args = ["XREAD"]
            if count is not None:
                args += ["COUNT", str(count)]
            diff(*args, "STREAMS", *keys, *ids)
        elif kind == "len":
            diff("XLEN", o[1])
        elif kind == "info":
            diff("XINFO", "STREAM", o[1])
        elif kind == "setid":
            diff("XSETID", o[1], o[2])
        elif kind == "raw":
            diff(*o[1])
        elif kind == "masked":
            _diff_masked(diff, *o[1])
    for key in ("s1", "s2"):
        diff("XINFO", "STREAM", key)
        diff("XRANGE", key, "-", "+")
        diff("XINFO", "GROUPS", key)
        _diff_masked(diff, "XINFO", "STREAM", key, "FULL", "COUNT", "0")


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(op(), min_size=1, max_size=30))
def test_random_stream_sequences(diff: Any, ops: list[tuple[Any, ...]]) -> None:
    _run(diff, ops)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.tuples(st.integers(1, 130), st.integers(0, 120), st.sampled_from(["~", "="]), st.integers(0, 40)),
        min_size=1,
        max_size=6,
    )
)
def test_random_bulk_then_trim(diff: Any, rounds: list[tuple[int, int, str, int]]) -> None:
    """Grow a stream, punch holes, trim: the layout-dependent counts must match Redis."""
    diff("FLUSHALL")
    ms = 0
    for n, maxlen, approx, holes in rounds:
        for i in range(n):
            ms += 1
            diff(
                "XADD", "s", "MAXLEN", approx, str(maxlen + 50), f"{ms}-0", "event", "progress", "data", "d" * (i % 90)
            )
        if holes:
            diff("XDEL", "s", *[f"{ms - k * 3}-0" for k in range(holes)])
        diff("XTRIM", "s", "MAXLEN", approx, str(maxlen))
        diff("XLEN", "s")
        diff("XINFO", "STREAM", "s")

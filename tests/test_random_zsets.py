"""Random sorted-set command sequences, run on respqueue and Redis 7.0; replies must be byte-identical."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

KEYS = ["z1", "z2", "z3"]
OTHER_KEYS = ["s", "str", "nokey"]
MEMBERS = ["a", "b", "c", "d", "e", "", "ab"]
SCORES = ["0", "-0", "1", "2", "-1", "1.5", "0.1", "0.2", "+inf", "-inf", "3", "7353298492104700", "1e17",
          "10", "2.5", "-2.5", "1e-5"]
RANGE_SCORES = ["-inf", "+inf", "0", "(0", "1", "(1", "2", "(2.5", "3", "(inf", "-0", "x", ""]
LEX = ["-", "+", "[a", "(a", "[b", "(b", "[c", "(ab", "[ab", "[e", "(e", "[", "(", "x"]
INTS = ["0", "1", "2", "-1", "-2", "3", "10", "-10", "x"]

key = st.sampled_from(KEYS)
anykey = st.sampled_from(KEYS + OTHER_KEYS)
member = st.sampled_from(MEMBERS)
score = st.sampled_from(SCORES)
rscore = st.sampled_from(RANGE_SCORES)
lex = st.sampled_from(LEX)
num = st.sampled_from(INTS)
limit = st.one_of(st.just([]), st.tuples(st.sampled_from(["0", "1", "2", "-1"]), st.sampled_from(["0", "1", "3", "-1"])).map(
    lambda t: ["LIMIT", *t]
))
withscores = st.sampled_from([[], ["WITHSCORES"]])


@st.composite
def zadd(draw: st.DrawFn) -> list[str]:
    flags = draw(st.lists(st.sampled_from(["NX", "XX", "GT", "LT", "CH", "INCR"]), max_size=3, unique=True))
    pairs = draw(st.lists(st.tuples(score, member), min_size=1, max_size=4))
    args = ["ZADD", draw(anykey), *flags]
    for s, m in pairs:
        args += [s, m]
    return args


@st.composite
def zrange(draw: st.DrawFn) -> list[str]:
    kind = draw(st.sampled_from(["rank", "score", "lex"]))
    rev = draw(st.booleans())
    if kind == "rank":
        a, b = draw(num), draw(num)
        extra = draw(withscores)
        return ["ZRANGE", draw(anykey), a, b, *(["REV"] if rev else []), *extra]
    if kind == "score":
        a, b = draw(rscore), draw(rscore)
        return ["ZRANGE", draw(anykey), a, b, "BYSCORE", *(["REV"] if rev else []), *draw(limit), *draw(withscores)]
    return ["ZRANGE", draw(anykey), draw(lex), draw(lex), "BYLEX", *(["REV"] if rev else []), *draw(limit)]


@st.composite
def setop(draw: st.DrawFn) -> list[str]:
    op = draw(st.sampled_from(["ZUNION", "ZINTER", "ZDIFF", "ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE", "ZINTERCARD"]))
    keys = draw(st.lists(st.sampled_from(KEYS + ["s", "nokey"]), min_size=1, max_size=3))
    args = [op]
    if op.endswith("STORE"):
        args.append(draw(key))
    args += [str(len(keys)), *keys]
    if op in ("ZUNION", "ZINTER", "ZUNIONSTORE", "ZINTERSTORE"):
        if draw(st.booleans()):
            args += ["WEIGHTS", *[draw(st.sampled_from(["1", "2", "0", "-1", "0.5", "inf"])) for _ in keys]]
        if draw(st.booleans()):
            args += ["AGGREGATE", draw(st.sampled_from(["SUM", "MIN", "MAX"]))]
    if op in ("ZUNION", "ZINTER", "ZDIFF") and draw(st.booleans()):
        args.append("WITHSCORES")
    if op == "ZINTERCARD" and draw(st.booleans()):
        args += ["LIMIT", draw(st.sampled_from(["0", "1", "2"]))]
    return args


def _simple(draw: st.DrawFn) -> list[str]:
    k = draw(anykey)
    return draw(
        st.sampled_from(
            [
                ["ZINCRBY", k, draw(score), draw(member)],
                ["ZREM", k, draw(member), draw(member)],
                ["ZSCORE", k, draw(member)],
                ["ZMSCORE", k, draw(member), draw(member)],
                ["ZCARD", k],
                ["ZCOUNT", k, draw(rscore), draw(rscore)],
                ["ZLEXCOUNT", k, draw(lex), draw(lex)],
                ["ZRANK", k, draw(member)],
                ["ZREVRANK", k, draw(member)],
                ["ZREVRANGE", k, draw(num), draw(num), *draw(withscores)],
                ["ZRANGEBYSCORE", k, draw(rscore), draw(rscore), *draw(withscores), *draw(limit)],
                ["ZREVRANGEBYSCORE", k, draw(rscore), draw(rscore), *draw(withscores), *draw(limit)],
                ["ZRANGEBYLEX", k, draw(lex), draw(lex), *draw(limit)],
                ["ZREVRANGEBYLEX", k, draw(lex), draw(lex), *draw(limit)],
                ["ZREMRANGEBYRANK", k, draw(num), draw(num)],
                ["ZREMRANGEBYSCORE", k, draw(rscore), draw(rscore)],
                ["ZREMRANGEBYLEX", k, draw(lex), draw(lex)],
                ["ZPOPMIN", k],
                ["ZPOPMAX", k, draw(num)],
                ["ZMPOP", "2", k, draw(anykey), draw(st.sampled_from(["MIN", "MAX"])), "COUNT", draw(num)],
                ["ZRANGESTORE", draw(key), k, draw(rscore), draw(rscore), "BYSCORE", *draw(limit)],
                ["ZRANGESTORE", draw(key), k, draw(num), draw(num)],
                ["ZRANDMEMBER", k, draw(st.sampled_from(["0", "50", "-0"])), *draw(withscores)],
                ["ZSCAN", k, "0", *draw(st.sampled_from([[], ["MATCH", "a*"], ["COUNT", "2"]]))],
                ["OBJECT", "ENCODING", k],
                ["DEL", k],
            ]
        )
    )


@st.composite
def simple(draw: st.DrawFn) -> list[str]:
    return _simple(draw)


command = st.one_of(zadd(), zadd(), zrange(), setop(), simple(), simple(), simple())


def _setup(diff) -> None:
    diff("FLUSHALL")
    diff("SADD", "s", "a", "c", "zz")
    diff("SET", "str", "x")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cmds=st.lists(command, min_size=1, max_size=25))
def test_random_zset_sequences(diff, cmds):
    _setup(diff)
    for c in cmds:
        diff(*c)
    for k in KEYS:
        diff("ZRANGE", k, "0", "-1", "WITHSCORES")


SK_MEMBERS = ["x" * 65, "a", "b", "c", "d"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cmds=st.lists(
        st.one_of(
            st.tuples(st.sampled_from(SK_MEMBERS), score).map(lambda t: ["ZADD", "big", t[1], t[0]]),
            st.tuples(st.sampled_from(SK_MEMBERS), score).map(lambda t: ["ZINCRBY", "big", t[1], t[0]]),
            st.sampled_from(SK_MEMBERS).map(lambda m: ["ZREM", "big", m]),
            st.tuples(num, num).map(lambda t: ["ZRANGE", "big", t[0], t[1], "WITHSCORES"]),
            st.tuples(rscore, rscore).map(lambda t: ["ZRANGEBYSCORE", "big", t[0], t[1], "WITHSCORES"]),
            st.tuples(rscore, rscore).map(lambda t: ["ZREMRANGEBYSCORE", "big", t[0], t[1]]),
            st.tuples(num, num).map(lambda t: ["ZREMRANGEBYRANK", "big", t[0], t[1]]),
            st.sampled_from(SK_MEMBERS).map(lambda m: ["ZRANK", "big", m]),
            st.just(["ZPOPMIN", "big", "2"]),
            st.just(["ZPOPMAX", "big"]),
            st.just(["ZUNIONSTORE", "u", "2", "big", "big"]),
            st.just(["OBJECT", "ENCODING", "big"]),
            st.just(["OBJECT", "ENCODING", "u"]),
            st.just(["ZRANDMEMBER", "big", "100", "WITHSCORES"]),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_random_skiplist_sequences(diff, cmds):
    """A zset forced to skiplist encoding by a 65-byte member (Redis keeps -0.0 there)."""
    diff("FLUSHALL")
    diff("ZADD", "big", "1", "x" * 65)
    for c in cmds:
        diff(*c)
    diff("ZRANGE", "big", "0", "-1", "WITHSCORES")

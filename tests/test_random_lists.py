"""Random sequences of list commands, run on respqueue and Redis, replies compared byte for byte."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import Diff

KEYS = ["a", "b", "c", "s"]  # "s" usually holds a string, to exercise WRONGTYPE
VALS = ["x", "y", "z", "1", "-1", "", "xx"]
SIDES = ["LEFT", "RIGHT", "left", "UP"]
INTS = st.one_of(st.integers(-6, 6), st.sampled_from(["-9223372036854775808", "9223372036854775807", "x", "1.5"]))

key = st.sampled_from(KEYS)
val = st.sampled_from(VALS)
vals = st.lists(val, min_size=1, max_size=5)
side = st.sampled_from(SIDES)


def _s(v: object) -> str:
    return str(v)


lpos_opts = st.lists(
    st.one_of(
        st.tuples(st.just("RANK"), st.one_of(st.integers(-6, 6), st.sampled_from(["9223372036854775807", "x"]))),
        st.tuples(st.just("COUNT"), st.integers(-1, 4)),
        st.tuples(st.just("MAXLEN"), st.integers(-1, 8)),
    ),
    max_size=3,
).map(lambda opts: [_s(x) for o in opts for x in o])

# blocking forms are rare: Redis only checks timeouts every ~100 ms
blocking = st.one_of(
    st.tuples(st.sampled_from(["BLPOP", "BRPOP"]), st.lists(key, min_size=1, max_size=2)).map(
        lambda t: [t[0], *t[1], "0.01"]
    ),
    st.tuples(key, key, side, side).map(lambda t: ["BLMOVE", *t, "0.01"]),
    st.tuples(key, key).map(lambda t: ["BRPOPLPUSH", *t, "0.01"]),
    st.tuples(st.lists(key, min_size=1, max_size=2), side).map(
        lambda t: ["BLMPOP", "0.01", _s(len(t[0])), *t[0], t[1], "COUNT", "2"]
    ),
)

command = st.one_of(
    st.tuples(st.sampled_from(["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]), key, vals).map(lambda t: [t[0], t[1], *t[2]]),
    st.tuples(st.sampled_from(["LPOP", "RPOP"]), key).map(list),
    st.tuples(st.sampled_from(["LPOP", "RPOP"]), key, st.integers(-1, 5)).map(lambda t: [t[0], t[1], _s(t[2])]),
    st.tuples(st.just("LLEN"), key).map(list),
    st.tuples(st.just("LINDEX"), key, INTS).map(lambda t: [t[0], t[1], _s(t[2])]),
    st.tuples(st.just("LRANGE"), key, INTS, INTS).map(lambda t: [t[0], t[1], _s(t[2]), _s(t[3])]),
    st.tuples(st.just("LSET"), key, INTS, val).map(lambda t: [t[0], t[1], _s(t[2]), t[3]]),
    st.tuples(st.just("LINSERT"), key, st.sampled_from(["BEFORE", "AFTER", "after", "x"]), val, val).map(list),
    st.tuples(st.just("LREM"), key, st.integers(-3, 3), val).map(lambda t: [t[0], t[1], _s(t[2]), t[3]]),
    st.tuples(st.just("LTRIM"), key, INTS, INTS).map(lambda t: [t[0], t[1], _s(t[2]), _s(t[3])]),
    st.tuples(st.just("LPOS"), key, val, lpos_opts).map(lambda t: [t[0], t[1], t[2], *t[3]]),
    st.tuples(st.just("LMOVE"), key, key, side, side).map(list),
    st.tuples(st.just("RPOPLPUSH"), key, key).map(list),
    st.tuples(st.lists(key, min_size=1, max_size=3), side, st.one_of(st.none(), st.integers(0, 4))).map(
        lambda t: ["LMPOP", _s(len(t[0])), *t[0], t[1], *([] if t[2] is None else ["COUNT", _s(t[2])])]
    ),
    blocking,
    st.tuples(st.sampled_from(["DEL", "EXISTS", "TYPE"]), key).map(list),
    st.just(["SET", "s", "str"]),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cmds=st.lists(command, min_size=1, max_size=25))
def test_random_list_sequences(rq_server, redis_ref, cmds):
    d = Diff(rq_server.port, redis_ref.port)
    try:
        d("SET", "s", "str")
        for cmd in cmds:
            d(*cmd)
        for k in KEYS:
            d("TYPE", k)
            if k != "s":
                d("LRANGE", k, "0", "-1")
    finally:
        d.close()


big_command = st.one_of(
    st.tuples(st.sampled_from(["LPUSH", "RPUSH"]), st.lists(st.sampled_from(["p", "q", "r"]), min_size=1, max_size=40)).map(
        lambda t: [t[0], "big", *t[1]]
    ),
    st.tuples(st.integers(-4, 4), st.sampled_from(["p", "q", "r"])).map(lambda t: ["LREM", "big", _s(t[0]), t[1]]),
    st.tuples(st.integers(-4, 4).filter(bool), st.integers(0, 3), st.integers(0, 50), st.sampled_from(["p", "q", "r"])).map(
        lambda t: ["LPOS", "big", t[3], "RANK", _s(t[0]), "COUNT", _s(t[1]), "MAXLEN", _s(t[2])]
    ),
    st.tuples(st.integers(-60, 60), st.integers(-60, 60)).map(lambda t: ["LRANGE", "big", _s(t[0]), _s(t[1])]),
    st.tuples(st.integers(-60, 60), st.integers(-60, 60)).map(lambda t: ["LTRIM", "big", _s(t[0]), _s(t[1])]),
    st.tuples(st.integers(-60, 60), st.sampled_from(["p", "n"])).map(lambda t: ["LSET", "big", _s(t[0]), t[1]]),
    st.tuples(st.integers(-60, 60)).map(lambda t: ["LINDEX", "big", _s(t[0])]),
    st.tuples(st.sampled_from(["LPOP", "RPOP"]), st.integers(0, 30)).map(lambda t: [t[0], "big", _s(t[1])]),
    st.tuples(st.sampled_from(["BEFORE", "AFTER"]), st.sampled_from(["p", "q", "r"])).map(
        lambda t: ["LINSERT", "big", t[0], t[1], "ins"]
    ),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cmds=st.lists(big_command, min_size=3, max_size=30))
def test_random_longer_lists(rq_server, redis_ref, cmds):
    d = Diff(rq_server.port, redis_ref.port)
    try:
        d("RPUSH", "big", *(["p", "q", "r", "q"] * 15))
        for cmd in cmds:
            d(*cmd)
        d("LRANGE", "big", "0", "-1")
    finally:
        d.close()

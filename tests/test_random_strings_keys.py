"""Random command sequences over strings and generic keys, run on respqueue and
redis-server; every reply must be byte-identical."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

KEYS = ["a", "b", "c", "n"]
VALUES = ["", "0", "1", "-1", "10", "abc", "x y", "9223372036854775807", "1.5", "007"]
INTS = ["0", "1", "-1", "2", "5", "100", "-100", "x", "9223372036854775807", "-9223372036854775808"]
FLOATS = ["0", "1.5", "-0.25", "1e3", "x", "inf", "0.1"]
TTLS = ["0", "100", "1000", "-1", "x"]
PTTLS = ["0", "100000", "5000000", "-1", "x"]
EXPIRE_OPTS = st.sampled_from([[], ["NX"], ["XX"], ["GT"], ["LT"], ["NX", "XX"]])

key = st.sampled_from(KEYS)
val = st.sampled_from(VALUES)
num = st.sampled_from(INTS)

SET_OPTS = st.lists(
    st.sampled_from([("NX",), ("XX",), ("GET",), ("KEEPTTL",), ("EX", "100"), ("PX", "100000"), ("EX", "0"),
                     ("EXAT", "9999999999"), ("PXAT", "9999999999999"), ("FOO",)]),
    max_size=3,
).map(lambda xs: [a for x in xs for a in x])

COMMANDS = st.one_of(
    st.tuples(st.just("GET"), key),
    st.tuples(st.just("SET"), key, val).map(list),
    st.builds(lambda k, v, o: ["SET", k, v, *o], key, val, SET_OPTS),
    st.tuples(st.just("SETNX"), key, val),
    st.tuples(st.just("GETSET"), key, val),
    st.tuples(st.just("GETDEL"), key),
    st.builds(lambda k, o: ["GETEX", k, *o], key,
              st.sampled_from([[], ["PERSIST"], ["EX", "100"], ["PX", "5000000"], ["EX", "0"], ["BAD"]])),
    st.builds(lambda ks: ["MGET", *ks], st.lists(key, min_size=1, max_size=4)),
    st.builds(lambda kv: ["MSET", *[a for p in kv for a in p]], st.lists(st.tuples(key, val), min_size=1, max_size=3)),
    st.builds(lambda kv: ["MSETNX", *[a for p in kv for a in p]], st.lists(st.tuples(key, val), min_size=1, max_size=3)),
    st.tuples(st.sampled_from(["INCR", "DECR"]), key),
    st.tuples(st.sampled_from(["INCRBY", "DECRBY"]), key, num),
    st.tuples(st.just("INCRBYFLOAT"), key, st.sampled_from(FLOATS)),
    st.tuples(st.just("APPEND"), key, val),
    st.tuples(st.just("STRLEN"), key),
    st.tuples(st.sampled_from(["GETRANGE", "SUBSTR"]), key, num, num),
    st.tuples(st.just("SETRANGE"), key, st.sampled_from(["0", "1", "3", "-1", "x"]), val),
    st.builds(lambda ks: ["DEL", *ks], st.lists(key, min_size=1, max_size=3)),
    st.builds(lambda ks: ["EXISTS", *ks], st.lists(key, min_size=1, max_size=3)),
    st.tuples(st.just("TYPE"), key),
    st.tuples(st.sampled_from(["RENAME", "RENAMENX"]), key, key),
    st.builds(lambda a, b, o: ["COPY", a, b, *o], key, key, st.sampled_from([[], ["REPLACE"]])),
    # (no short positive TTLs: when a key expires would depend on timing)
    st.builds(lambda k, t, o: ["EXPIRE", k, t, *o], key, st.sampled_from(TTLS), EXPIRE_OPTS),
    st.builds(lambda k, t, o: ["PEXPIRE", k, t, *o], key, st.sampled_from(PTTLS), EXPIRE_OPTS),
    st.tuples(st.sampled_from(["TTL", "PERSIST"]), key),
    st.tuples(st.just("OBJECT"), st.just("ENCODING"), key),
    st.tuples(st.just("LPUSH"), key, val),
    st.just(("DBSIZE",)),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(COMMANDS, min_size=1, max_size=25))
def test_random_string_and_key_sequences(diff, cmds):
    diff("FLUSHALL")
    for c in cmds:
        if c[0] == "OBJECT" and diff.rq.call_raw("STRLEN", c[2]) in (b":0\r\n", b":1\r\n"):
            # CPython shares 0- and 1-byte bytes objects, so respqueue cannot tell
            # a 1-byte string APPEND/SETRANGE/INCRBYFLOAT made (raw/embstr) from
            # one SET made (int/embstr): a documented divergence
            continue
        diff(*c)
    diff.unordered("KEYS", "*")

"""Random scripts, run on respqueue and on Redis 7.0: replies must be identical.

Each script is a random sequence of redis.pcall()s over a small alphabet of
keys, members and values (numbers go in as Lua numbers, integral, fractional
and large), whose replies (nil -> false, status -> {ok=}, error -> {err=},
arrays) are collected in a table and returned, so every conversion is
exercised both ways. Hash and set replies whose order Redis leaves undefined
are reduced to a count.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

KEYS = ["'k1'", "'k2'", "'l1'", "'h1'", "'s1'", "'z1'"]
VALUES = ["'a'", "'b'", "'10'", "'-3'", "'x y'", "'\\200\\255'", "''"]
NUMBERS = ["1", "0", "-2", "2.5", "0.1", "1e15", "7353298492104700", "1700000000000 / 4096", "2^53", "-0.75"]


def _arg() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(VALUES), st.sampled_from(NUMBERS))


def _stmt() -> st.SearchStrategy[str]:
    k = st.sampled_from(KEYS)
    a = _arg()
    return st.one_of(
        st.builds(lambda k, v: f"redis.pcall('set', {k}, {v})", k, a),
        st.builds(lambda k: f"redis.pcall('get', {k})", k),
        st.builds(lambda k: f"redis.pcall('incr', {k})", k),
        st.builds(lambda k, n: f"redis.pcall('incrby', {k}, {n})", k, st.sampled_from(NUMBERS)),
        st.builds(lambda k, n: f"redis.pcall('incrbyfloat', {k}, {n})", k, st.sampled_from(NUMBERS)),
        st.builds(lambda k: f"redis.pcall('del', {k})", k),
        st.builds(lambda k: f"redis.pcall('exists', {k})", k),
        st.builds(lambda k: f"redis.pcall('type', {k})", k),
        st.builds(lambda k, v: f"redis.pcall('lpush', {k}, {v})", k, a),
        st.builds(lambda k, v, w: f"redis.pcall('rpush', {k}, {v}, {w})", k, a, a),
        st.builds(lambda k: f"redis.pcall('lrange', {k}, 0, -1)", k),
        st.builds(lambda k: f"redis.pcall('lpop', {k})", k),
        st.builds(lambda k: f"redis.pcall('llen', {k})", k),
        st.builds(lambda k, f, v: f"redis.pcall('hset', {k}, {f}, {v})", k, st.sampled_from(VALUES), a),
        st.builds(lambda k, f: f"redis.pcall('hget', {k}, {f})", k, st.sampled_from(VALUES)),
        st.builds(lambda k, f: f"redis.pcall('hmget', {k}, {f}, 'nofield')", k, st.sampled_from(VALUES)),
        st.builds(lambda k: f"redis.pcall('hlen', {k})", k),
        st.builds(lambda k, f: f"redis.pcall('hincrby', {k}, {f}, 1)", k, st.sampled_from(VALUES)),
        st.builds(lambda k, v: f"redis.pcall('sadd', {k}, {v})", k, a),
        st.builds(lambda k, v: f"redis.pcall('sismember', {k}, {v})", k, a),
        st.builds(lambda k: f"redis.pcall('scard', {k})", k),
        st.builds(lambda k: f"#redis.pcall('smembers', {k})", k),
        st.builds(lambda k: f"redis.pcall('pttl', {k})", k),
        st.builds(lambda k, n, m: f"redis.pcall('zadd', {k}, {n}, {m})", k, st.sampled_from(NUMBERS), a),
        st.builds(lambda k, m: f"redis.pcall('zscore', {k}, {m})", k, a),
        st.builds(lambda k, n, m: f"redis.pcall('zincrby', {k}, {n}, {m})", k, st.sampled_from(NUMBERS), a),
        st.builds(lambda k: f"redis.pcall('zrange', {k}, 0, -1, 'withscores')", k),
        st.builds(lambda k: f"redis.pcall('zrangebyscore', {k}, '-inf', '+inf', 'withscores', 'limit', 0, 2)", k),
        st.builds(lambda k: f"redis.pcall('zrevrange', {k}, 0, 1)", k),
        st.builds(lambda k: f"redis.pcall('zpopmin', {k})", k),
        st.builds(lambda k: f"redis.pcall('zcard', {k})", k),
        st.builds(lambda k: f"redis.pcall('hgetall', {k})", k),
        st.builds(lambda k, v: f"redis.pcall('xadd', {k}, 'MAXLEN', '~', 10, '*', 'f', {v}) and 1", k, a),
        st.builds(lambda k: f"redis.pcall('xlen', {k})", k),
        st.builds(lambda k: f"(tonumber(redis.pcall('get', {k})) or 0) * 1.5", k),
        st.builds(lambda k: f"redis.pcall('get', {k}) or 'missing'", k),
        st.builds(lambda k: f"redis.pcall('type', {k}).ok", k),
        st.just("redis.pcall('nosuchcommand')"),
        st.just("redis.pcall('get')"),
        st.just("redis.pcall('ping')"),
        st.builds(lambda v: f"{v}", a),
        st.builds(lambda v: f"{{{v}, {{ok='fine'}}, false, {{err='bad'}}}}", a),
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_stmt(), min_size=1, max_size=12))
def test_random_scripts(diff, stmts):
    diff("FLUSHALL")
    lines = [f"local v{i} = {s}" for i, s in enumerate(stmts)]
    ret = ", ".join(f"v{i}" for i in range(len(stmts)))
    body = "\n".join(lines) + f"\nreturn {{{ret}}}"
    diff("EVAL", body, "0")
    # the same through EVALSHA, and the final state of a few keys
    import hashlib

    diff("EVALSHA", hashlib.sha1(body.encode()).hexdigest(), "0")
    for k in ("k1", "k2"):
        diff("GET", k)
    diff("LRANGE", "l1", "0", "-1")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(NUMBERS + ["-1e20", "3.999", "-3.999", "2^63", "1/3"]), min_size=1, max_size=6))
def test_random_number_round_trips(diff, nums):
    body = (
        "local out = {} "
        + " ".join(
            f"redis.call('set', 'n{i}', {n}) out[#out + 1] = redis.call('get', 'n{i}') out[#out + 1] = {n}"
            for i, n in enumerate(nums)
        )
        + " return out"
    )
    diff("EVAL", body, "0")

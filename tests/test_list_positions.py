"""List positions held as a run (respqueue/types/positions.py): random list operations on a durable
server, restarted twice on the way, end with the same lists as on redis-server."""

from __future__ import annotations

import random

import pytest

from .servers import RawConn, redis_server_path, start_redis, start_respqueue

pytestmark = pytest.mark.skipif(redis_server_path() is None, reason="reference redis-server is not installed")


def _op(rnd: random.Random, key: str, i: int) -> tuple:
    k = rnd.random()
    v = f"v{i}"
    if k < 0.25:
        return ("LPUSH", key, v, v + "b")
    if k < 0.5:
        return ("RPUSH", key, v)
    if k < 0.6:
        return ("RPOP", key)
    if k < 0.7:
        return ("LPOP", key, "2")
    if k < 0.75:
        return ("LMOVE", key, key, "RIGHT", "LEFT")
    if k < 0.8:
        return ("LINSERT", key, "BEFORE", f"v{max(0, i - rnd.randint(1, 20))}", v + "i")
    if k < 0.85:
        return ("LREM", key, "1", f"v{max(0, i - rnd.randint(1, 20))}")
    if k < 0.9:
        return ("LSET", key, "0", v + "s")
    if k < 0.95:
        return ("LTRIM", key, "1", "-2")
    return ("LMOVE", key, key + "x", "LEFT", "RIGHT")


def test_list_ops_across_restarts_match_redis() -> None:
    rnd = random.Random(7)
    ref = start_redis()
    rq = start_respqueue("--durability", "durable")
    try:
        a, b = RawConn(rq.port), RawConn(ref.port)
        keys = ["l1", "l2", "l3"]
        for k in keys:  # over 128 items: stored as a row per item, with positions
            for c in (a, b):
                c.call_raw("RPUSH", k, *[f"p{j}" for j in range(200)])
        for round_ in range(3):
            for i in range(round_ * 400, round_ * 400 + 400):
                cmd = _op(rnd, rnd.choice(keys), i)
                assert a.call_raw(*cmd) == b.call_raw(*cmd), cmd
            for k in keys + [k + "x" for k in keys]:
                assert a.call_raw("LRANGE", k, "0", "-1") == b.call_raw("LRANGE", k, "0", "-1"), k
            assert all(int(a.call_raw("LLEN", k)[1:]) > 128 for k in keys)
            a.close()
            rq.stop()
            rq = start_respqueue("--durability", "durable", workdir=rq.workdir)
            a = RawConn(rq.port)
            for k in keys + [k + "x" for k in keys]:
                assert a.call_raw("LRANGE", k, "0", "-1") == b.call_raw("LRANGE", k, "0", "-1"), (round_, k)
        a.close()
        b.close()
    finally:
        rq.stop()
        ref.stop()

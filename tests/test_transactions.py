"""MULTI / EXEC / DISCARD / WATCH / UNWATCH, against Redis 7.0 byte for byte."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .servers import RawConn, encode_command


class Pair:
    """A second connection to each server, to modify keys behind a client's back."""

    def __init__(self, rq_port: int, ref_port: int) -> None:
        self.rq = RawConn(rq_port)
        self.ref = RawConn(ref_port)

    def __call__(self, *args: Any) -> bytes:
        got, want = self.rq.call_raw(*args), self.ref.call_raw(*args)
        assert got == want, f"{args!r}\n respqueue: {got!r}\n     redis: {want!r}"
        return got

    def close(self) -> None:
        self.rq.close()
        self.ref.close()


@pytest.fixture
def other(rq_server, redis_ref) -> Iterator[Pair]:
    p = Pair(rq_server.port, redis_ref.port)
    yield p
    p.close()


def pipeline(diff, *cmds: tuple[Any, ...]) -> bytes:
    """Send all commands in one write to both servers; compare all replies."""
    data = b"".join(encode_command(c) for c in cmds)
    diff.rq.send_raw(data)
    diff.ref.send_raw(data)
    got = b"".join(diff.rq.read_raw() for _ in cmds)
    want = b"".join(diff.ref.read_raw() for _ in cmds)
    assert got == want, f"{cmds!r}\n respqueue: {got!r}\n     redis: {want!r}"
    return got


# ---- diff tests -------------------------------------------------------------
def test_exec_discard_without_multi(diff):
    diff("EXEC")
    diff("DISCARD")
    diff("UNWATCH")
    diff("MULTI", "x")
    diff("DISCARD", "x")
    diff("UNWATCH", "x")
    diff("WATCH")


def test_exec_wrong_arity_aborts(diff):
    diff("MULTI")
    diff("SET", "a", "1")
    diff("EXEC", "x")
    diff("EXEC")
    diff("GET", "a")


def test_basic_transaction(diff):
    assert diff("MULTI") == b"+OK\r\n"
    assert diff("SET", "a", "1") == b"+QUEUED\r\n"
    diff("INCR", "a")
    diff("GET", "a")
    diff("GET", "nokey")
    assert diff("EXEC") == b"*4\r\n+OK\r\n:2\r\n$1\r\n2\r\n$-1\r\n"
    diff("GET", "a")
    diff("EXEC")


def test_empty_transaction(diff):
    diff("MULTI")
    assert diff("EXEC") == b"*0\r\n"


def test_nested_multi_does_not_abort(diff):
    diff("MULTI")
    diff("MULTI")
    diff("SET", "a", "1")
    diff("EXEC")
    diff("GET", "a")


def test_watch_inside_multi(diff):
    diff("MULTI")
    diff("WATCH", "a")
    diff("SET", "a", "1")
    diff("EXEC")


def test_runtime_errors_do_not_stop_exec(diff):
    diff("SET", "s", "x")
    diff("MULTI")
    diff("SET", "a", "x")
    diff("INCR", "a")
    diff("LPUSH", "s", "v")
    diff("GET", "a")
    diff("APPEND", "a", "yz")
    diff("EXEC")


def test_execabort_unknown_command(diff):
    diff("MULTI")
    diff("SET", "a", "1")
    diff("NOSUCHCOMMAND", "x", "y")
    diff("SET", "b", "1")
    assert diff("EXEC") == b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    diff("EXISTS", "a", "b")
    diff("EXEC")


def test_execabort_wrong_arity(diff):
    diff("MULTI")
    diff("SET", "a", "1")
    diff("GET")
    diff("EXEC")
    diff("GET", "a")


def test_execabort_arity_of_multi_itself(diff):
    diff("MULTI")
    diff("MULTI", "x")
    diff("SET", "a", "1")
    diff("EXEC")
    diff("GET", "a")


def test_execabort_unknown_subcommand(diff):
    diff("MULTI")
    diff("CLIENT", "NOSUCH")
    diff("EXEC")


def test_discard(diff):
    diff("MULTI")
    diff("SET", "a", "1")
    assert diff("DISCARD") == b"+OK\r\n"
    diff("GET", "a")
    diff("DISCARD")
    diff("EXEC")


def test_discard_clears_error_state(diff):
    diff("MULTI")
    diff("NOSUCH")
    diff("DISCARD")
    diff("MULTI")
    diff("SET", "a", "1")
    diff("EXEC")


def test_resp3_transaction(diff3):
    diff3("MULTI")
    diff3("SET", "a", "1")
    diff3("GET", "a")
    diff3("GET", "zz")
    diff3("EXEC")
    diff3("MULTI")
    diff3("EXEC")
    diff3("EXEC")


def test_transaction_pipelined(diff):
    pipeline(diff, ("MULTI",), ("SET", "a", "1"), ("INCR", "a"), ("GET",), ("EXEC",), ("GET", "a"))
    pipeline(diff, ("MULTI",), ("SET", "a", "5"), ("INCRBY", "a", "5"), ("EXEC",), ("GET", "a"), ("PING",))


def test_select_inside_multi(diff):
    diff("MULTI")
    diff("SELECT", "1")
    diff("SET", "a", "db1")
    diff("SELECT", "0")
    diff("EXEC")
    diff("GET", "a")
    diff("SELECT", "1")
    diff("GET", "a")
    diff("FLUSHALL")


# ---- WATCH ------------------------------------------------------------------
def test_watch_abort_by_other_client(diff, other):
    diff("SET", "k", "1")
    diff("WATCH", "k")
    other("SET", "k", "2")
    diff("MULTI")
    diff("SET", "k", "3")
    assert diff("EXEC") == b"*-1\r\n"
    diff("GET", "k")
    # the watch is gone after EXEC: the next transaction goes through
    diff("MULTI")
    diff("SET", "k", "4")
    diff("EXEC")
    diff("GET", "k")


def test_watch_abort_resp3(diff3, other):
    diff3("WATCH", "k")
    other("SET", "k", "2")
    diff3("MULTI")
    diff3("GET", "k")
    diff3("EXEC")


def test_watch_no_change_commits(diff, other):
    diff("SET", "k", "1")
    diff("WATCH", "k", "k2")
    other("GET", "k")
    other("SET", "unrelated", "x")
    diff("MULTI")
    diff("INCR", "k")
    diff("EXEC")


def test_watch_missing_key_created(diff, other):
    diff("WATCH", "k")
    other("SET", "k", "x")
    diff("MULTI")
    diff("GET", "k")
    diff("EXEC")


def test_watch_missing_key_stays_missing(diff, other):
    diff("WATCH", "k")
    other("DEL", "k")
    diff("MULTI")
    diff("GET", "k")
    diff("EXEC")


def test_watch_delete_aborts(diff, other):
    diff("SET", "k", "1")
    diff("WATCH", "k")
    other("DEL", "k")
    diff("MULTI")
    diff("SET", "k", "2")
    diff("EXEC")
    diff("GET", "k")


def test_watch_own_write_aborts(diff):
    diff("WATCH", "k")
    diff("SET", "k", "mine")
    diff("MULTI")
    diff("GET", "k")
    diff("EXEC")


def test_unwatch(diff, other):
    diff("WATCH", "k")
    diff("UNWATCH")
    other("SET", "k", "2")
    diff("MULTI")
    diff("GET", "k")
    diff("EXEC")


def test_unwatch_clears_dirty(diff, other):
    diff("WATCH", "k")
    other("SET", "k", "2")
    diff("UNWATCH")
    diff("MULTI")
    diff("GET", "k")
    diff("EXEC")


def test_discard_unwatches(diff, other):
    diff("WATCH", "k")
    diff("MULTI")
    diff("DISCARD")
    other("SET", "k", "2")
    diff("MULTI")
    diff("GET", "k")
    diff("EXEC")


def test_execabort_with_dirty_watch(diff, other):
    diff("WATCH", "k")
    other("SET", "k", "2")
    diff("MULTI")
    diff("NOSUCH")
    diff("EXEC")  # EXECABORT wins over the WATCH abort
    diff("MULTI")
    diff("EXEC")


def test_watch_same_key_twice_and_many(diff, other):
    diff("WATCH", "a", "a", "b")
    diff("WATCH", "a", "c")
    other("SET", "c", "1")
    diff("MULTI")
    diff("SET", "a", "1")
    diff("EXEC")
    diff("EXISTS", "a")


def test_watch_other_db(diff, other):
    diff("WATCH", "k")
    other("SELECT", "1")
    other("SET", "k", "x")
    other("SELECT", "0")
    diff("MULTI")
    diff("GET", "k")
    diff("EXEC")
    other("SELECT", "1")
    other("DEL", "k")
    other("SELECT", "0")


def test_watch_flushall_aborts(diff, other):
    diff("SET", "k", "1")
    diff("WATCH", "k")
    other("FLUSHALL")
    diff("MULTI")
    diff("PING")
    diff("EXEC")


def test_watch_missing_key_survives_flushall(diff, other):
    diff("WATCH", "nokey")
    other("FLUSHALL")
    diff("MULTI")
    diff("PING")
    diff("EXEC")


def test_watch_expire_command_aborts(diff, other):
    diff("SET", "k", "1")
    diff("WATCH", "k")
    other("EXPIRE", "k", "100")
    diff("MULTI")
    diff("PING")
    diff("EXEC")


def test_watch_key_expires_before_exec(diff):
    diff("SET", "k", "1", "PX", "80")
    diff("WATCH", "k")
    time.sleep(0.2)
    diff("MULTI")
    diff("PING")
    assert diff("EXEC") == b"*-1\r\n"


def test_watch_key_expires_lazily_untouched(diff):
    # a key expiring is a change even though nobody touched it since (Redis 7)
    diff("SET", "k", "1", "PX", "300")
    diff("WATCH", "k")
    time.sleep(0.4)
    diff("MULTI")
    diff("EXEC")


def test_watch_already_expired_key_is_no_change(diff):
    diff("SET", "k", "1", "PX", "1")
    time.sleep(0.05)
    diff("WATCH", "k")
    time.sleep(0.3)  # active expiry may delete it meanwhile: not a change
    diff("MULTI")
    diff("GET", "k")
    diff("EXEC")


def test_watch_with_multi_exec_from_other_client(diff, other):
    diff("WATCH", "k")
    other("MULTI")
    other("SET", "k", "1")
    other("EXEC")
    diff("MULTI")
    diff("GET", "k")
    diff("EXEC")


def test_exec_unwatches_even_when_aborted(diff, other):
    diff("WATCH", "k")
    other("SET", "k", "1")
    diff("MULTI")
    diff("EXEC")
    other("SET", "k", "2")
    diff("MULTI")
    diff("GET", "k")
    diff("EXEC")


def test_reset_discards_and_unwatches(diff, other):
    diff("WATCH", "k")
    diff("MULTI")
    diff("SET", "k", "1")
    diff("RESET")
    other("SET", "k", "2")
    diff("EXEC")
    diff("MULTI")
    diff("GET", "k")
    diff("EXEC")


def test_reset_clears_dirty_watch(diff, other):
    diff("WATCH", "k")
    other("SET", "k", "1")
    diff("RESET")
    diff("MULTI")
    diff("EXEC")
    diff("WATCH", "k")
    other("SET", "k", "2")
    diff("MULTI")
    diff("RESET")
    diff("MULTI")
    diff("EXEC")


# ---- redis-py functional tests ------------------------------------------------
def test_redis_py_pipeline_transaction(r):
    p = r.pipeline(transaction=True)
    p.set("a", 1).incr("a").get("a").lpush("a", "x")
    res = p.execute(raise_on_error=False)
    assert res[:3] == [True, 2, b"2"]
    assert isinstance(res[3], redis.ResponseError)


def test_redis_py_watch_retry(r, rq_server):
    other = redis.Redis(port=rq_server.port)
    r.set("counter", 0)
    attempts = 0
    with r.pipeline() as p:
        while True:
            try:
                p.watch("counter")
                v = int(p.get("counter"))
                attempts += 1
                if attempts == 1:
                    other.incr("counter")  # interference: the first attempt must fail
                p.multi()
                p.set("counter", v + 10)
                p.execute()
                break
            except redis.WatchError:
                continue
    assert attempts == 2
    assert r.get("counter") == b"11"
    other.close()


def test_redis_py_execabort(r):
    p = r.pipeline(transaction=True)
    p.set("a", 1)
    p.execute_command("NOSUCHCMD")
    with pytest.raises(redis.ResponseError):
        p.execute()
    assert r.get("a") is None


def test_redis_py_resp3_transaction(rq_server):
    c = redis.Redis(port=rq_server.port, protocol=3)
    try:
        p = c.pipeline(transaction=True)
        p.set("r3", "v").get("r3").hset("h3", "f", "v")
        assert p.execute() == [True, b"v", 1]
    finally:
        c.delete("r3", "h3")
        c.close()


def test_many_watchers(r, rq_server):
    clients = [redis.Redis(port=rq_server.port) for _ in range(20)]
    pipes = []
    for c in clients:
        p = c.pipeline()
        p.watch("hot")
        p.multi()
        p.incr("hot")
        pipes.append(p)
    pipes[0].execute()
    for p in pipes[1:]:
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("hot") == b"1"
    for c in clients:
        c.close()


def test_watch_disconnect_cleans_up(r, rq_server):
    for _ in range(50):
        c = redis.Redis(port=rq_server.port)
        c.execute_command("WATCH", "w1", "w2")
        c.close()
    time.sleep(0.1)
    r.set("w1", 1)
    p = r.pipeline()
    p.watch("w1")
    p.multi()
    p.set("w1", 2)
    assert p.execute() == [True]


def test_exec_wakes_blocked_client(r, rq_server):
    a = socket.create_connection(("127.0.0.1", rq_server.port), timeout=5)
    a.sendall(encode_command(("BLPOP", "q", "5")))
    time.sleep(0.1)
    p = r.pipeline(transaction=True)
    p.lpush("q", "job1").lpush("q", "job2").llen("q")
    assert p.execute() == [1, 2, 2]
    data = b""
    while not data.endswith(b"job1\r\n") and not data.endswith(b"job2\r\n"):
        chunk = a.recv(1024)
        assert chunk
        data += chunk
    # BLPOP pops from the head: the last LPUSHed element
    assert data == b"*2\r\n$1\r\nq\r\n$4\r\njob2\r\n"
    assert r.lrange("q", 0, -1) == [b"job1"]
    a.close()


def test_blocking_command_inside_exec_does_not_block(diff):
    pipeline(diff, ("MULTI",), ("BLPOP", "nolist", "0"), ("EXEC",))
    diff("LPUSH", "l", "a")
    diff("MULTI")
    diff("BLPOP", "l", "0")
    diff("BRPOP", "l", "0")
    diff("EXEC")


def test_exec_concurrent_clients_threads(rq_server):
    """Many clients incrementing with WATCH/MULTI/EXEC never lose an update."""
    n_threads, per = 6, 25

    def worker() -> None:
        c = redis.Redis(port=rq_server.port)
        done = 0
        while done < per:
            with c.pipeline() as p:
                try:
                    p.watch("ctr")
                    v = int(p.get("ctr") or 0)
                    p.multi()
                    p.set("ctr", v + 1)
                    p.execute()
                    done += 1
                except redis.WatchError:
                    pass
        c.close()

    c0 = redis.Redis(port=rq_server.port)
    c0.delete("ctr")
    ts = [threading.Thread(target=worker) for _ in range(n_threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert int(c0.get("ctr")) == n_threads * per
    c0.close()


# ---- random sequences ---------------------------------------------------------
KEYS = ["k1", "k2"]
A_CMDS = st.one_of(
    st.tuples(st.just("MULTI")),
    st.tuples(st.just("EXEC")),
    st.tuples(st.just("DISCARD")),
    st.tuples(st.just("UNWATCH")),
    st.tuples(st.just("WATCH"), st.sampled_from(KEYS)),
    st.tuples(st.just("SET"), st.sampled_from(KEYS), st.sampled_from(["1", "x"])),
    st.tuples(st.just("INCR"), st.sampled_from(KEYS)),
    st.tuples(st.just("GET"), st.sampled_from(KEYS)),
    st.tuples(st.just("DEL"), st.sampled_from(KEYS)),
    st.tuples(st.just("GET")),
    st.tuples(st.just("NOSUCH")),
)
B_CMDS = st.one_of(
    st.tuples(st.just("SET"), st.sampled_from(KEYS), st.sampled_from(["1", "2"])),
    st.tuples(st.just("DEL"), st.sampled_from(KEYS)),
    st.tuples(st.just("GET"), st.sampled_from(KEYS)),
    st.tuples(st.just("APPEND"), st.sampled_from(KEYS), st.just("z")),
)
STEP = st.one_of(st.tuples(st.just("a"), A_CMDS), st.tuples(st.just("b"), B_CMDS))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=25))
def test_random_transactions(diff, other, steps):
    diff("RESET")
    other("RESET")
    diff("FLUSHALL")
    for who, cmd in steps:
        if who == "a":
            diff(*cmd)
        else:
            other(*cmd)

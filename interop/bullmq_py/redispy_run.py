"""Plain redis-py scenarios (locks, transactions, pub/sub, streams, scripts) printing JSON.

Usage: python redispy_run.py SCENARIO PORT

Each scenario uses its own ``rp:<scenario>:*`` keys (deleted first) and prints only
deterministic facts (explicit stream ids, no idle times), so respqueue and Redis must print
identical documents. Errors are reported by class name and message.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from redis.exceptions import LockError, LockNotOwnedError, ResponseError, WatchError

SCENARIOS: dict[str, Callable[[redis.Redis], Any]] = {}


def scenario(fn: Callable[[redis.Redis], Any]) -> Callable[[redis.Redis], Any]:
    SCENARIOS[fn.__name__] = fn
    return fn


def err(e: BaseException) -> list[str]:
    return [type(e).__name__, str(e)]


def clean(r: redis.Redis, prefix: str) -> None:
    keys = list(r.scan_iter(match=f"{prefix}*", count=1000))
    if keys:
        r.delete(*keys)


@scenario
def lock(r: redis.Redis) -> Any:
    clean(r, "rp:lock:")
    other = redis.Redis(port=r.connection_pool.connection_kwargs["port"], decode_responses=True)
    a = r.lock("rp:lock:a", timeout=5)
    b = other.lock("rp:lock:a", timeout=5, blocking_timeout=0.2)
    out: dict[str, Any] = {"acquired": a.acquire(blocking=False), "owned": a.owned(), "locked": b.locked()}
    t0 = time.monotonic()
    out["b_blocked"] = [b.acquire(), time.monotonic() - t0 >= 0.09]
    out["extend"] = a.extend(10)
    out["ttl_ok"] = 10 < r.pttl("rp:lock:a") <= 15000
    out["replace"] = a.extend(2, replace_ttl=True)
    out["ttl2_ok"] = 0 < r.pttl("rp:lock:a") <= 2000
    out["reacquire"] = a.reacquire()
    try:
        b.release()
    except LockError as e:
        out["b_release"] = err(e)
    a.release()
    out["after"] = [a.locked(), a.owned()]
    c = r.lock("rp:lock:c", timeout=0.1)
    c.acquire()
    time.sleep(0.2)
    try:
        c.release()
    except LockNotOwnedError as e:
        out["expired_release"] = err(e)
    try:
        c.extend(1)
    except LockError as e:
        out["expired_extend"] = err(e)
    with r.lock("rp:lock:ctx", timeout=5) as held:
        out["ctx"] = [held.owned(), r.exists("rp:lock:ctx")]
    out["ctx_after"] = r.exists("rp:lock:ctx")
    other.close()
    return out


@scenario
def transaction(r: redis.Redis) -> Any:
    clean(r, "rp:tx:")
    out: dict[str, Any] = {}
    r.set("rp:tx:n", 1)
    other = redis.Redis(port=r.connection_pool.connection_kwargs["port"], decode_responses=True)
    with r.pipeline() as p:
        p.watch("rp:tx:n")
        v = int(p.get("rp:tx:n"))
        other.set("rp:tx:n", 100)
        p.multi()
        p.set("rp:tx:n", v + 1)
        try:
            p.execute()
        except WatchError as e:
            out["watch"] = err(e)
    attempts = []

    def incr(pipe: redis.client.Pipeline) -> None:
        cur = int(pipe.get("rp:tx:n"))
        if not attempts:
            other.set("rp:tx:n", cur + 10)  # force one retry
        attempts.append(cur)
        pipe.multi()
        pipe.set("rp:tx:n", cur * 2)

    out["transaction"] = r.transaction(incr, "rp:tx:n")
    out["attempts"] = attempts
    out["n"] = r.get("rp:tx:n")
    with r.pipeline(transaction=True) as p:
        p.set("rp:tx:s", "x").lpush("rp:tx:s", "y").incr("rp:tx:c").get("rp:tx:s")
        res = p.execute(raise_on_error=False)
    out["exec_errors"] = [err(x) if isinstance(x, Exception) else x for x in res]
    with r.pipeline(transaction=True) as p:
        p.set("rp:tx:k", "v")
        p.execute_command("NOSUCHCMD", "a")
        try:
            p.execute()
        except ResponseError as e:
            out["execabort"] = err(e)
    out["k_after_abort"] = r.get("rp:tx:k")
    with r.pipeline(transaction=False) as p:
        res = p.incr("rp:tx:c").hset("rp:tx:h", mapping={"a": 1, "b": 2}).hgetall("rp:tx:h").execute()
    out["pipeline"] = res
    other.close()
    return out


@scenario
def pubsub(r: redis.Redis) -> Any:
    out: dict[str, Any] = {}
    ps = r.pubsub()
    ps.subscribe("rp:ch:a", "rp:ch:b")
    ps.psubscribe("rp:pat:*")
    msgs: list[Any] = []

    def drain(n: int) -> None:
        end = time.monotonic() + 5
        while len(msgs) < n and time.monotonic() < end:
            m = ps.get_message(timeout=0.1)
            if m is not None:
                msgs.append([m["type"], m["pattern"], m["channel"], m["data"]])

    drain(3)
    out["numsub"] = r.pubsub_numsub("rp:ch:a", "rp:ch:b", "rp:ch:none")
    out["numpat"] = r.pubsub_numpat()
    out["channels"] = sorted(r.pubsub_channels("rp:ch:*"))
    out["published"] = [r.publish("rp:ch:a", "hello"), r.publish("rp:pat:x", "p1"), r.publish("rp:ch:none", "x")]
    drain(5)
    ps.unsubscribe("rp:ch:a")
    ps.punsubscribe()
    drain(7)
    out["after_unsub"] = r.pubsub_numsub("rp:ch:a", "rp:ch:b")
    out["published2"] = [r.publish("rp:ch:b", "bye"), r.publish("rp:pat:y", "p2")]
    drain(8)
    got: list[Any] = []
    th_ps = r.pubsub(ignore_subscribe_messages=True)
    th_ps.subscribe(**{"rp:ch:t": lambda m: got.append(m["data"])})
    th = th_ps.run_in_thread(sleep_time=0.01, daemon=True)
    time.sleep(0.1)
    r.publish("rp:ch:t", "threaded")
    end = time.monotonic() + 5
    while not got and time.monotonic() < end:
        time.sleep(0.01)
    th.stop()
    th.join(2)
    out["threaded"] = got
    out["msgs"] = msgs
    ps.close()
    th_ps.close()
    return out


@scenario
def streams(r: redis.Redis) -> Any:
    clean(r, "rp:st:")
    s = "rp:st:s"
    out: dict[str, Any] = {}
    out["add"] = [r.xadd(s, {"f": i}, id=f"1-{i}") for i in range(1, 6)]
    out["group"] = r.xgroup_create(s, "g", id="0")
    try:
        r.xgroup_create(s, "g", id="0")
    except ResponseError as e:
        out["busygroup"] = err(e)
    out["read_c1"] = r.xreadgroup("g", "c1", {s: ">"}, count=2)
    out["read_c2"] = r.xreadgroup("g", "c2", {s: ">"}, count=2)
    out["ack"] = r.xack(s, "g", "1-1")
    p = r.xpending(s, "g")
    out["pending"] = [p["pending"], p["min"], p["max"], sorted((c["name"], c["pending"]) for c in p["consumers"])]
    rng = r.xpending_range(s, "g", "-", "+", 10)
    out["pending_range"] = [[e["message_id"], e["consumer"], e["times_delivered"]] for e in rng]
    out["claim"] = r.xclaim(s, "g", "c2", 0, ["1-2"], justid=True)
    ac = r.xautoclaim(s, "g", "c3", 0, start_id="0-0", count=10)
    out["autoclaim"] = ac
    out["history"] = r.xreadgroup("g", "c3", {s: "0"})
    out["range"] = r.xrange(s, "1-2", "+", count=2)
    out["revrange"] = r.xrevrange(s, "+", "-", count=2)
    out["trim"] = [r.xtrim(s, maxlen=3, approximate=False), r.xlen(s)]
    out["del"] = r.xdel(s, "1-5", "9-9")
    out["groups"] = [(g["name"], g["consumers"], g["pending"], g["last-delivered-id"]) for g in r.xinfo_groups(s)]
    blocked: list[Any] = []

    def reader() -> None:
        c = redis.Redis(port=r.connection_pool.connection_kwargs["port"], decode_responses=True)
        blocked.append(c.xread({s: "$"}, block=3000))
        c.close()

    th = threading.Thread(target=reader)
    th.start()
    time.sleep(0.2)
    r.xadd(s, {"late": "1"}, id="2-1")
    th.join(5)
    out["blocked_read"] = blocked
    return out


@scenario
def scripts(r: redis.Redis) -> Any:
    clean(r, "rp:sc:")
    out: dict[str, Any] = {}
    r.script_flush()
    incr = r.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    out["exists_before"] = r.script_exists(incr.sha)
    out["incr"] = [incr(keys=["rp:sc:n"], args=[5]), incr(keys=["rp:sc:n"], args=[2])]
    out["exists_after"] = r.script_exists(incr.sha)
    table = r.register_script(
        "local t = {} for i = 1, tonumber(ARGV[1]) do t[i] = i * 1.5 end "
        "t[#t + 1] = redis.call('GET', KEYS[1]) "
        "return {t, {ok='fine'}, false, 3.99, 'str', redis.status_reply('ST')}"
    )
    out["table"] = table(keys=["rp:sc:n"], args=[3])
    bad = r.register_script("return redis.call('LPUSH', KEYS[1], 'x')")
    try:
        bad(keys=["rp:sc:n"])
    except ResponseError as e:
        out["wrongtype"] = str(e).split(" script:")[0]
    raiser = r.register_script("return redis.error_reply('MYERR custom')")
    try:
        raiser()
    except ResponseError as e:
        out["error_reply"] = str(e)
    with r.pipeline() as p:
        incr(keys=["rp:sc:n"], args=[1], client=p)
        incr(keys=["rp:sc:n"], args=[1], client=p)
        out["pipelined"] = p.execute()
    out["eval"] = r.eval("return {KEYS[1], ARGV[1], #KEYS, #ARGV}", 1, "k", "a", "b")
    out["cjson"] = r.eval("return cjson.encode(cjson.decode(ARGV[1]))", 0, '{"a":[1,2,3]}')
    r.set("rp:sc:s", "abc")
    out["pcall"] = r.eval(
        "local ok = redis.pcall('INCR', KEYS[1]) return type(ok) == 'table' and ok.err or 'no error'", 1, "rp:sc:s"
    )
    return out


def main() -> int:
    name, port = sys.argv[1], int(sys.argv[2])
    r = redis.Redis(port=port, decode_responses=True, socket_timeout=10)
    code = 0
    try:
        result = SCENARIOS[name](r)
    except Exception as e:  # noqa: BLE001 - report any failure as JSON
        import traceback

        result = {"error": "".join(traceback.format_exception(e))}
        code = 1
    sys.stdout.write(json.dumps(result, default=str, sort_keys=True))
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    raise SystemExit(main())

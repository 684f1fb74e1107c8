"""Compare lupa's Lua 5.1 and LuaJIT 2.1 engines on a BullMQ-like script.

The script makes 20 redis.call()s through the bridge (the mix BullMQ's
moveToActive/addStandardJob use) and cmsgpack.unpacks a small Node-style
(map16, float64) options map. Each engine runs in a fresh subprocess:

    python3 interop/bench/lua_engines.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = b"""
local rcall = redis.call
local opts = cmsgpack.unpack(ARGV[2])
local jobId = rcall("INCR", KEYS[1] .. ":id") .. ""
local jobKey = KEYS[1] .. ":" .. jobId
local maxEvents = rcall("HGET", KEYS[1] .. ":meta", "opts.maxLenEvents") or 10000
rcall("HMSET", jobKey, "name", "job", "data", ARGV[1], "opts", cjson.encode(opts), "timestamp", opts.timestamp, "delay", 0, "priority", 0)
rcall("XADD", KEYS[1] .. ":events", "MAXLEN", "~", maxEvents, "*", "event", "added", "jobId", jobId, "name", "job")
local meta = rcall("HMGET", KEYS[1] .. ":meta", "paused", "concurrency", "max", "duration")
rcall("LPUSH", KEYS[1] .. ":wait", jobId)
rcall("SADD", KEYS[1] .. ":marker", "0")
rcall("XADD", KEYS[1] .. ":events", "MAXLEN", "~", maxEvents, "*", "event", "waiting", "jobId", jobId)
local j = rcall("RPOPLPUSH", KEYS[1] .. ":wait", KEYS[1] .. ":active")
rcall("SET", jobKey .. ":lock", "token", "PX", 30000)
rcall("HSET", jobKey, "processedOn", opts.timestamp)
rcall("HINCRBY", jobKey, "ats", 1)
local s = rcall("SISMEMBER", KEYS[1] .. ":marker", "0")
rcall("EXISTS", jobKey)
rcall("LLEN", KEYS[1] .. ":active")
rcall("LREM", KEYS[1] .. ":active", -1, jobId)
rcall("SADD", KEYS[1] .. ":completed", jobId)
rcall("GET", jobKey .. ":lock")
rcall("DEL", jobKey .. ":lock")
rcall("SCARD", KEYS[1] .. ":completed")
local h = rcall("HGETALL", jobKey)
rcall("DEL", jobKey)
return {h, jobId, 0, opts.timestamp / 4096}
"""


def child(engine: str, n: int) -> None:
    os.environ["RESPQUEUE_LUA_ENGINE"] = engine
    sys.path.insert(0, ROOT)
    import msgpack

    import respqueue.commands  # noqa: F401
    from lua.runtime import get_scripting
    from respqueue.client import Client
    from respqueue.server import Server

    srv = Server()
    c = Client(srv)
    s = get_scripting(srv)
    # Node's msgpackr: map16 even for small maps, float64 for big integers
    opts = b"\xde\x00\x04" + b"".join(
        [
            msgpack.packb("attempts") + msgpack.packb(3),
            msgpack.packb("timestamp") + b"\xcb" + __import__("struct").pack(">d", 1700000000123.0),
            msgpack.packb("jobId") + msgpack.packb(None),
            msgpack.packb("removeOnComplete") + msgpack.packb(True),
        ]
    )
    argv = [b"EVAL", SCRIPT, b"1", b"bull:q", b'{"x":1}', opts]
    r = s.eval(c, argv, False, False)
    assert isinstance(r, list), r
    for _ in range(200):
        s.eval(c, argv, False, False)
    t0 = time.perf_counter()
    for _ in range(n):
        s.eval(c, argv, False, False)
    dt = time.perf_counter() - t0
    t0 = time.perf_counter()
    unp = [b"EVAL", b"return cmsgpack.unpack(ARGV[1]).attempts", b"0", opts]
    for _ in range(n):
        s.eval(c, unp, False, False)
    du = time.perf_counter() - t0
    ping = [b"EVAL", b"local r = redis.call for i = 1, 20 do r('INCR', KEYS[1]) end return 1", b"1", b"cnt"]
    t0 = time.perf_counter()
    for _ in range(n):
        s.eval(c, ping, False, False)
    dp = time.perf_counter() - t0
    from respqueue.dispatch import call, resolve

    t0 = time.perf_counter()
    for _ in range(n):
        for _ in range(20):
            argv = [b"INCR", b"cnt"]
            call(c, resolve(argv), argv)
    dd = time.perf_counter() - t0
    t0 = time.perf_counter()
    cpu = [b"EVAL", b"local s = 0 for i = 1, 100000 do s = s + i % 7 end return s", b"0"]
    for _ in range(20):
        s.eval(c, cpu, False, False)
    dc = time.perf_counter() - t0
    print(
        f"{engine:9s} bullmq-like script (20 calls): {dt / n * 1e6:7.1f} us/run, {n / dt:7.0f} runs/s | "
        f"cmsgpack.unpack script: {du / n * 1e6:5.1f} us | pure-Lua loop 100k: {dc / 20 * 1e3:6.2f} ms | "
        f"bridge overhead: {(dp - dd) / n / 20 * 1e6:4.2f} us/call (20x INCR: {dp / n * 1e6:5.1f} us in Lua, "
        f"{dd / n * 1e6:5.1f} us direct)"
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    for engine in ("lua51", "luajit21"):
        subprocess.run([sys.executable, __file__, "--child", engine, str(n)], check=False)


if __name__ == "__main__":
    main()

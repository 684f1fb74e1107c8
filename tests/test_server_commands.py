"""Server commands: INFO, CONFIG, COMMAND, SLOWLOG, TIME, SAVE, SHUTDOWN, MONITOR, DEBUG, WAIT..."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import hiredis
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .servers import RawConn, start_respqueue

# Parameters the tests may change, with the values both servers start with.
DEFAULTS = {
    "maxmemory": "0",
    "maxmemory-policy": "noeviction",
    "hz": "10",
    "timeout": "0",
    "notify-keyspace-events": "",
    "save": "",
    "appendfsync": "everysec",
    "slowlog-max-len": "128",
    "slowlog-log-slower-than": "10000",
    "zset-max-listpack-entries": "128",
    "zset-max-listpack-value": "64",
    "list-max-listpack-size": "-2",
    "loglevel": "notice",
    "client-output-buffer-limit": "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
    "maxclients": "10000",
    "tcp-keepalive": "300",
    "proto-max-bulk-len": "536870912",
    "client-query-buffer-limit": "1073741824",
    "stream-node-max-entries": "100",
    "set-max-intset-entries": "512",
}


def parse(raw: bytes) -> Any:
    rd = hiredis.Reader()
    rd.feed(raw)
    return rd.gets()


@pytest.fixture
def cfg(diff: Any) -> Iterator[Any]:
    """``diff``, with the configuration of both servers restored afterwards."""
    yield diff
    args: list[str] = []
    for k, v in DEFAULTS.items():
        args += [k, v]
    for conn in (diff.rq, diff.ref):
        assert conn.call_raw("CONFIG", "SET", *args) == b"+OK\r\n"


# ---- CONFIG ------------------------------------------------------------------


def test_config_get_diff(cfg: Any) -> None:
    for p in ("maxmemory", "maxmemory-policy", "databases", "HZ", "nonexistent", "slowlog-max-len",
              "notify-keyspace-events", "save", "appendonly", "client-output-buffer-limit",
              "zset-max-ziplist-entries", "list-max-listpack-size", "set-max-intset-entries"):
        cfg("CONFIG", "GET", p)
    cfg("CONFIG", "GET", "maxmemory", "maxmemory")
    cfg.unordered("CONFIG", "GET", "maxmemory", "hz", "nonexistent")
    cfg.unordered("CONFIG", "GET", "maxmemory-p*")
    cfg.unordered("CONFIG", "GET", "zset-max-*")
    cfg.unordered("CONFIG", "GET", "slowlog*")
    cfg("CONFIG", "GET")
    cfg("CONFIG")
    cfg("CONFIG", "foo")
    cfg("CONFIG", "GET", "nomatch*")


def test_config_get_resp3(rq_server: Any, redis_ref: Any) -> None:
    from .conftest import Diff

    d = Diff(rq_server.port, redis_ref.port, resp3=True)
    try:
        d("CONFIG", "GET", "maxmemory")
        d("CONFIG", "GET", "maxmemory-policy")
        d("CONFIG", "GET", "nonexistent")
        got, want = d.both("CONFIG", "GET", "databases", "hz")
        assert got[:1] == want[:1] == b"%"
        assert parse(got) == parse(want)
    finally:
        d.close()


def test_config_set_errors_diff(cfg: Any) -> None:
    d = cfg
    d("CONFIG", "SET", "foo", "1")
    d("CONFIG", "SET", "maxmemory")
    d("CONFIG", "SET", "maxmemory", "1", "hz")
    d("CONFIG", "SET", "maxmemory", "abc")
    d("CONFIG", "SET", "maxmemory", "1.5gb")
    d("CONFIG", "SET", "maxmemory", "-1")
    d("CONFIG", "SET", "maxmemory", "0", "maxmemory", "1")
    d("CONFIG", "SET", "hz", "1", "HZ", "2")
    d("CONFIG", "SET", "hz", "x", "foo", "1")
    d("CONFIG", "SET", "databases", "x", "hz", "1")
    d("CONFIG", "SET", "databases", "3")
    d("CONFIG", "SET", "dir", "/tmp")
    d("CONFIG", "SET", "maxmemory-policy", "bogus")
    d("CONFIG", "SET", "appendonly", "maybe")
    d("CONFIG", "SET", "appendfsync", "foo")
    d("CONFIG", "SET", "loglevel", "foo")
    d("CONFIG", "SET", "hz", "abc")
    d("CONFIG", "SET", "hz", "-1")
    d("CONFIG", "SET", "timeout", "010")
    d("CONFIG", "SET", "timeout", "+10")
    d("CONFIG", "SET", "timeout", "2147483648")
    d("CONFIG", "SET", "slowlog-max-len", "-1")
    d("CONFIG", "SET", "slowlog-log-slower-than", "-2")
    d("CONFIG", "SET", "proto-max-bulk-len", "10")
    d("CONFIG", "SET", "proto-max-bulk-len", "abc")
    d("CONFIG", "SET", "maxclients", "0")
    d("CONFIG", "SET", "tcp-keepalive", "1.5")
    d("CONFIG", "SET", "list-compress-depth", "-1")
    d("CONFIG", "SET", "notify-keyspace-events", "Q")
    d("CONFIG", "SET", "save", "10")
    d("CONFIG", "SET", "save", "abc def")
    d("CONFIG", "SET", "client-output-buffer-limit", "foo")
    d("CONFIG", "SET", "client-output-buffer-limit", "foo 1 2 3")
    d("CONFIG", "SET", "client-output-buffer-limit", "normal x 2 3")
    # a failing pair leaves the others unapplied
    d("CONFIG", "SET", "maxmemory", "1gb", "hz", "abc")
    d("CONFIG", "GET", "maxmemory")


def test_config_set_values_diff(cfg: Any) -> None:
    d = cfg
    d("CONFIG", "SET", "maxmemory", "1gb", "maxmemory-policy", "ALLKEYS-LRU")
    d("CONFIG", "GET", "maxmemory")
    d("CONFIG", "GET", "maxmemory-policy")
    for v in ("1K", "10gB", "100kb", "2m", "", "0"):
        d("CONFIG", "SET", "maxmemory", v)
        d("CONFIG", "GET", "maxmemory")
    d("CONFIG", "SET", "hz", "0")
    d("CONFIG", "GET", "hz")
    d("CONFIG", "SET", "hz", "1000")
    d("CONFIG", "GET", "hz")
    for ev in ("KEA", "Anm", "$lshzxetdgK", "gx", "Ex$", ""):
        d("CONFIG", "SET", "notify-keyspace-events", ev)
        d("CONFIG", "GET", "notify-keyspace-events")
    d("CONFIG", "SET", "save", "100 10 5 1")
    d("CONFIG", "GET", "save")
    d("CONFIG", "SET", "save", "")
    d("CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 2mb 60")
    d("CONFIG", "GET", "client-output-buffer-limit")
    d("CONFIG", "SET", "client-output-buffer-limit", "replica 1 2 3 pubsub 4 5 6")
    d("CONFIG", "GET", "client-output-buffer-limit")
    d("CONFIG", "SET", "loglevel", "NOTICE")
    d("CONFIG", "GET", "loglevel")
    d("CONFIG", "SET", "appendfsync", "ALWAYS")
    d("CONFIG", "GET", "appendfsync")
    # aliases share their value
    d("CONFIG", "SET", "zset-max-ziplist-entries", "300")
    d("CONFIG", "GET", "zset-max-listpack-entries")
    d("CONFIG", "GET", "zset-max-ziplist-entries")
    d("CONFIG", "SET", "list-max-listpack-size", "-5")
    d("CONFIG", "GET", "list-max-ziplist-size")
    d("CONFIG", "SET", "zset-max-ziplist-value", "1", "zset-max-listpack-value", "2")
    d("CONFIG", "GET", "zset-max-ziplist-value")


def test_config_misc_diff(cfg: Any) -> None:
    cfg("CONFIG", "REWRITE")
    cfg("CONFIG", "REWRITE", "x")
    cfg("CONFIG", "HELP")
    cfg("CONFIG", "RESETSTAT")
    cfg("CONFIG", "RESETSTAT", "x")


def test_config_redis_py(r: redis.Redis) -> None:
    allc = r.config_get("*")
    assert allc["maxmemory-policy"] == "noeviction"
    assert allc["databases"] == "16"
    assert int(allc["port"]) > 0
    assert r.config_get("maxmemory*") == {"maxmemory": "0", "maxmemory-policy": "noeviction", "maxmemory-samples": "5"}
    try:
        assert r.config_set("maxmemory", "512mb") is True
        assert r.config_get("maxmemory") == {"maxmemory": str(512 * 1024 * 1024)}
        assert r.info("memory")["maxmemory"] == 512 * 1024 * 1024
        assert r.info("memory")["maxmemory_human"] == "512.00M"
        assert r.config_set("maxmemory-policy", "allkeys-lru") is True
        assert r.info()["maxmemory_policy"] == "allkeys-lru"
        with pytest.raises(redis.ResponseError, match="Unknown option"):
            r.config_set("nosuchparam", "1")
    finally:
        r.config_set("maxmemory", "0")
        r.config_set("maxmemory-policy", "noeviction")


def test_config_set_applies(r: redis.Redis) -> None:
    try:
        r.config_set("slowlog-max-len", "3")
        assert r.config_get("slowlog-max-len") == {"slowlog-max-len": "3"}
        r.config_set("hz", "50")
        assert r.info("server")["hz"] == 50
        r.config_set("busy-reply-threshold", "1234")
        assert r.config_get("lua-time-limit") == {"lua-time-limit": "1234"}
        r.config_set("requirepass", "sekret")
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=r.connection_pool.connection_kwargs["port"]).ping()
        assert redis.Redis(port=r.connection_pool.connection_kwargs["port"], password="sekret").ping()
        # the connection that set it stays authenticated
        assert r.config_get("requirepass") == {"requirepass": "sekret"}
    finally:
        r.config_set("requirepass", "")
        r.config_set("slowlog-max-len", "128")
        r.config_set("hz", "10")
        r.config_set("busy-reply-threshold", "5000")
    assert r.config_get("requirepass") == {"requirepass": ""}


def test_config_resetstat(r: redis.Redis) -> None:
    r.set("a", "1")
    r.get("a")
    assert r.info("commandstats")["cmdstat_get"]["calls"] >= 1
    assert r.config_resetstat() is True
    stats = r.info("commandstats")
    assert "cmdstat_get" not in stats
    assert r.info("stats")["total_connections_received"] == 0


# ---- INFO ----------------------------------------------------------------------


def test_info_redis_py(r: redis.Redis) -> None:
    info = r.info()
    assert info["redis_version"] == "7.2.4"
    assert info["redis_mode"] == "standalone"
    assert info["loading"] == 0
    assert info["maxmemory_policy"] == "noeviction"
    assert info["maxmemory"] == 0
    assert info["role"] == "master"
    assert info["connected_clients"] >= 1
    assert info["tcp_port"] == r.connection_pool.connection_kwargs["port"]
    assert info["aof_enabled"] == 0
    assert info["rdb_last_bgsave_status"] == "ok"
    assert len(info["run_id"]) == 40
    assert "used_cpu_sys" in info and "used_memory" in info and "cluster_enabled" in info
    assert "cmdstat_info" not in info  # commandstats only with "all"
    allinfo = r.info("all")
    assert allinfo["cmdstat_info"]["calls"] >= 1
    everything = r.info("everything")
    assert "cmdstat_info" in everything


def test_info_keyspace(r: redis.Redis) -> None:
    assert r.info("keyspace") == {}
    r.set("a", "1")
    r.set("b", "2", ex=100)
    ks = r.info("keyspace")
    assert ks == {"db0": {"keys": 2, "expires": 1, "avg_ttl": 0}}
    r2 = redis.Redis(port=r.connection_pool.connection_kwargs["port"], db=3)
    r2.set("x", "y")
    assert r.info("keyspace")["db3"] == {"keys": 1, "expires": 0, "avg_ttl": 0}
    r2.close()


def test_info_sections_text(rq_server: Any) -> None:
    conn = RawConn(rq_server.port)
    try:
        text = parse(conn.call_raw("INFO", "server", "clients")).decode()
        assert text.startswith("# Server\r\nredis_version:7.2.4\r\n")
        assert "\r\n\r\n# Clients\r\n" in text and text.endswith("\r\n")
        assert "# Memory" not in text
        # section order is fixed, whatever the order of the arguments
        text = parse(conn.call_raw("INFO", "keyspace", "server")).decode()
        assert text.index("# Server") < text.index("# Keyspace")
        for sec in ("persistence", "stats", "replication", "cpu", "errorstats", "memory", "clients"):
            text = parse(conn.call_raw("INFO", sec)).decode()
            assert text.startswith("# ") and text.count("# ") == 1
            for line in text.split("\r\n")[1:-1]:
                assert ":" in line, line
        default = parse(conn.call_raw("INFO")).decode()
        titles = [x for x in default.split("\r\n") if x.startswith("# ")]
        assert titles == ["# Server", "# Clients", "# Memory", "# Persistence", "# Stats", "# Replication",
                          "# CPU", "# Modules", "# Errorstats", "# Cluster", "# Keyspace"]
        assert parse(conn.call_raw("INFO", "default")).decode().count("# ") == len(titles)
        full = parse(conn.call_raw("INFO", "everything")).decode()
        assert "# Commandstats" in full and "# Latencystats" in full
    finally:
        conn.close()


def test_info_stats_counters(r: redis.Redis) -> None:
    before = r.info("stats")["total_commands_processed"]
    for _ in range(5):
        r.ping()
    after = r.info("stats")["total_commands_processed"]
    assert after >= before + 5
    p = r.pubsub()
    p.subscribe("chan")
    p.get_message(timeout=1)
    assert r.info("stats")["pubsub_channels"] >= 1
    p.close()


def test_info_diff(diff: Any) -> None:
    diff("INFO", "foo")
    diff("INFO", "modules")
    diff("INFO", "cluster")
    diff("INFO", "keyspace")
    diff("SET", "a", "b")
    diff("SET", "c", "d")
    diff("INFO", "keyspace")
    diff("INFO", "KEYSPACE", "keyspace", "foo")
    diff("INFO", "modules", "cluster", "keyspace")


def test_info_resp3_verbatim(diff3: Any) -> None:
    diff3("SET", "a", "b")
    diff3("INFO", "keyspace")
    diff3("INFO", "foo")


# ---- COMMAND -------------------------------------------------------------------


def test_command_diff(diff: Any) -> None:
    d = diff
    d("COMMAND", "foo")
    d("COMMAND", "COUNT", "x")
    d("COMMAND", "HELP")
    d("COMMAND", "INFO", "nosuch")
    d("COMMAND", "INFO", "get")
    d("COMMAND", "DOCS", "nosuch")
    d("COMMAND", "LIST", "FILTERBY")
    d("COMMAND", "LIST", "FILTERBY", "foo", "x")
    d("COMMAND", "LIST", "foo")
    d("COMMAND", "LIST", "FILTERBY", "MODULE", "x")
    d("COMMAND", "LIST", "FILTERBY", "aclcat", "nosuchcat")
    d.unordered("COMMAND", "LIST", "FILTERBY", "pattern", "conf*")
    d.unordered("COMMAND", "LIST", "FILTERBY", "pattern", "slowlog*")
    d("COMMAND", "GETKEYS")
    d("COMMAND", "GETKEYS", "foo")
    d("COMMAND", "GETKEYS", "foo", "bar")
    d("COMMAND", "GETKEYS", "ping", "x")
    d("COMMAND", "GETKEYS", "set", "a")
    d("COMMAND", "GETKEYS", "get", "a")
    d("COMMAND", "GETKEYS", "GET", "a", "b")
    d("COMMAND", "GETKEYS", "mset", "a", "1", "b", "2")
    d("COMMAND", "GETKEYS", "del", "a", "b", "c")
    d("COMMAND", "GETKEYS", "config", "get", "x")
    d("COMMAND", "GETKEYS", "object", "encoding", "k")
    d("COMMAND", "GETKEYSANDFLAGS", "get", "a")


def test_command_resp3_diff(diff3: Any) -> None:
    diff3("COMMAND", "INFO", "get", "nosuch")
    diff3("COMMAND", "GETKEYSANDFLAGS", "get", "a")
    diff3("COMMAND", "DOCS", "nosuch")


def test_command_count_and_list(r: redis.Redis) -> None:
    n = r.command_count()
    assert isinstance(n, int) and n > 20
    names = [x.decode() for x in r.command_list()]
    assert "get" in names and "config|get" in names and "command|docs" in names
    tops = [x for x in names if "|" not in x]
    assert len(tops) == n
    admin = [x.decode() for x in r.command_list(category="admin")]
    assert "config|set" in admin and "get" not in admin
    pat = sorted(x.decode() for x in r.command_list(pattern="slowlog*"))
    assert pat == ["slowlog", "slowlog|get", "slowlog|help", "slowlog|len", "slowlog|reset"]


def test_command_info_shape(r: redis.Redis) -> None:
    cmds = r.command()
    assert len(cmds) == r.command_count()
    get = cmds["get"]
    assert get["arity"] == 2 and get["first_key_pos"] == 1 and get["step_count"] == 1
    assert set(get["flags"]) == {"readonly", "fast"}
    assert get["acl_categories"] == ["@read", "@string", "@fast"]
    cfg = cmds["config"]
    subs = {s[0]: s for s in cfg["subcommands"]}
    assert set(subs) == {b"config|get", b"config|set", b"config|resetstat", b"config|rewrite", b"config|help"}
    assert subs[b"config|set"][1] == -4
    assert b"@admin" in subs[b"config|set"][6] and b"@dangerous" in subs[b"config|set"][6]
    cmd = cmds["command"]
    assert {s[0] for s in cmd["subcommands"]} >= {b"command|docs", b"command|info", b"command|count"}
    assert set(cmds["shutdown"]["flags"]) >= {"admin", "noscript", "no_multi"}
    assert "noscript" in cmds["monitor"]["flags"]
    del_ = r.execute_command("COMMAND", "INFO", "del")
    assert del_ is not None


def test_command_docs(rq_server: Any) -> None:
    conn = RawConn(rq_server.port)
    try:
        raw = parse(conn.call_raw("COMMAND", "DOCS", "get", "config", "nosuch"))
        docs = dict(zip(raw[::2], raw[1::2], strict=True))
        assert set(docs) == {b"get", b"config"}
        get = dict(zip(docs[b"get"][::2], docs[b"get"][1::2], strict=True))
        assert get[b"summary"] and get[b"since"] and get[b"group"] == b"string"
        cfgdoc = dict(zip(docs[b"config"][::2], docs[b"config"][1::2], strict=True))
        subs = dict(zip(cfgdoc[b"subcommands"][::2], cfgdoc[b"subcommands"][1::2], strict=True))
        assert b"config|get" in subs
        alldocs = parse(conn.call_raw("COMMAND", "DOCS"))
        count = parse(conn.call_raw("COMMAND", "COUNT"))
        assert len(alldocs) == 2 * count
        # RESP3: maps all the way down
        conn.call_raw("HELLO", "3")
        docs3 = conn.call_raw("COMMAND", "DOCS", "config")
        assert docs3.startswith(b"%1\r\n$6\r\nconfig\r\n%")
        assert parse(docs3)[b"config"][b"subcommands"][b"config|set"][b"group"] == b"server"
    finally:
        conn.close()


def test_command_getkeys(r: redis.Redis) -> None:
    assert r.command_getkeys("mset", "a", 1, "b", 2) == ["a", "b"]
    assert r.command_getkeys("get", "k") == ["k"]
    with pytest.raises(redis.ResponseError, match="Invalid command specified"):
        r.command_getkeys("nosuch", "x")
    with pytest.raises(redis.ResponseError, match="no key arguments"):
        r.command_getkeys("ping", "x")


# ---- SLOWLOG -------------------------------------------------------------------


def test_slowlog_diff(cfg: Any) -> None:
    d = cfg
    # disable logging on both so the (timing dependent) contents are identical
    d("CONFIG", "SET", "slowlog-log-slower-than", "-1")
    d("SLOWLOG", "RESET")
    d("SLOWLOG", "LEN")
    d("SLOWLOG", "GET")
    d("SLOWLOG", "GET", "-1")
    d("SLOWLOG", "GET", "5")
    d("SLOWLOG", "GET", "abc")
    d("SLOWLOG", "GET", "-2")
    d("SLOWLOG", "GET", "1", "2")
    d("SLOWLOG", "LEN", "x")
    d("SLOWLOG", "RESET", "x")
    d("SLOWLOG", "foo")
    d("SLOWLOG")
    d("SLOWLOG", "HELP")


def test_slowlog_redis_py(r: redis.Redis) -> None:
    assert r.slowlog_reset() is True
    assert r.slowlog_get() == []
    assert r.slowlog_len() == 0


def test_slowlog_record_in_process() -> None:
    """slowlog_record (the dispatcher's hook) and the SLOWLOG procedures."""
    from respqueue.client import Client
    from respqueue.commands import server as srvcmds
    from respqueue.config import Config
    from respqueue.server import Server

    s = Server(Config(slowlog_log_slower_than=100, slowlog_max_len=3))
    c = Client(s)
    c.name = b"worker"
    srvcmds.slowlog_record(s, c, [b"get", b"fast"], 99)
    assert srvcmds.slowlog_len(c, [b"slowlog", b"len"]) == 0
    srvcmds.slowlog_record(s, c, [b"get", b"a"], 100)
    srvcmds.slowlog_record(s, c, [b"set", b"b", b"x" * 200], 500)
    long_argv = [b"mset"] + [b"k"] * 40
    srvcmds.slowlog_record(s, c, long_argv, 1000)
    srvcmds.slowlog_record(s, c, [b"auth", b"secret"], 1000)  # never logged
    got = srvcmds.slowlog_get(c, [b"slowlog", b"get"])
    assert [e[0] for e in got] == [2, 1, 0]
    newest = got[0]
    assert newest[2] == 1000 and len(newest[3]) == 32
    assert newest[3][-1] == b"... (10 more arguments)"
    assert newest[5] == b"worker"
    assert got[1][3][2] == b"x" * 128 + b"... (72 more bytes)"
    assert isinstance(got[1][1], int) and abs(got[1][1] - time.time()) < 5
    # the log keeps the newest slowlog-max-len entries
    srvcmds.slowlog_record(s, c, [b"del", b"z"], 100)
    assert [e[0] for e in srvcmds.slowlog_get(c, [b"slowlog", b"get", b"-1"])] == [3, 2, 1]
    assert [e[0] for e in srvcmds.slowlog_get(c, [b"slowlog", b"get", b"1"])] == [3]
    # shrinking slowlog-max-len drops the oldest entries
    srvcmds.config_set(c, [b"config", b"set", b"slowlog-max-len", b"2"])
    assert [e[0] for e in srvcmds.slowlog_get(c, [b"slowlog", b"get"])] == [3, 2]
    srvcmds.config_set(c, [b"config", b"set", b"slowlog-log-slower-than", b"-1"])
    srvcmds.slowlog_record(s, c, [b"get", b"a"], 10**9)
    assert srvcmds.slowlog_len(c, [b"slowlog", b"len"]) == 2
    srvcmds.slowlog_reset(c, [b"slowlog", b"reset"])
    assert srvcmds.slowlog_len(c, [b"slowlog", b"len"]) == 0


# ---- TIME, LASTSAVE, SAVE, BGSAVE, ROLE, WAIT, LOLWUT ------------------------


def test_misc_diff(diff: Any) -> None:
    d = diff
    d("TIME", "x")
    d("LASTSAVE", "x")
    d("SAVE", "x")
    d("BGSAVE", "x")
    d("BGSAVE", "schedule", "x")
    d("MONITOR", "x")
    d("ROLE")
    d("ROLE", "x")
    d("SHUTDOWN", "foo")
    d("SHUTDOWN", "nosave", "save")
    d("SHUTDOWN", "abort")
    d("SHUTDOWN", "abort", "now")
    d("WAIT")
    d("WAIT", "a", "-1")
    d("WAIT", "0", "a")
    d("WAIT", "-1", "0")
    d("WAIT", "0", "1.5")
    d("WAIT", "0", "-1")
    d("WAIT", "0", "0")
    d("DEBUG")
    d("INFO", "keyspace")


def test_time_shape(diff: Any, diff3: Any) -> None:
    for d in (diff, diff3):
        got, want = d.both("TIME")
        g, w = parse(got), parse(want)
        assert got[:1] == want[:1] == b"*"
        assert len(g) == len(w) == 2
        assert all(x.isdigit() for x in g)
        assert abs(int(g[0]) - int(w[0])) <= 2
        assert 0 <= int(g[1]) < 1_000_000


def test_time_lastsave_save(r: redis.Redis) -> None:
    sec, usec = r.time()
    assert abs(sec - time.time()) < 5 and 0 <= usec < 1_000_000
    r.set("k", "v")
    assert r.info("persistence")["rdb_changes_since_last_save"] > 0
    time.sleep(1.01)
    before = r.lastsave()
    assert r.save() is True
    after = r.lastsave()
    assert after > before and abs(after.timestamp() - time.time()) < 5
    assert r.info("persistence")["rdb_changes_since_last_save"] == 0
    assert r.bgsave() is True
    assert r.execute_command("BGSAVE", "SCHEDULE") in (True, b"Background saving started")
    assert r.execute_command("BGREWRITEAOF") in (True, b"Background append only file rewriting started")


def test_role_wait(r: redis.Redis) -> None:
    assert r.role() == [b"master", 0, []]
    assert r.wait(0, 0) == 0
    t0 = time.time()
    assert r.wait(1, 200) == 0  # no replica ever acknowledges: waits for the timeout
    assert 0.15 <= time.time() - t0 < 2


def test_wait_blocks_like_redis(diff: Any) -> None:
    t0 = time.time()
    diff("WAIT", "1", "100")
    assert time.time() - t0 >= 0.18  # 0.1 s on each server


def test_lolwut(r: redis.Redis) -> None:
    out = r.execute_command("LOLWUT")
    text = out.decode() if isinstance(out, bytes) else out
    assert "Redis ver. 7.2.4" in text


# ---- MONITOR -------------------------------------------------------------------


def test_monitor_redis_py(r: redis.Redis) -> None:
    port = r.connection_pool.connection_kwargs["port"]
    with r.monitor() as m:
        other = redis.Redis(port=port)
        other.set("monkey", "banana")
        seen = []
        for ev in m.listen():
            seen.append(ev["command"])
            if "monkey" in ev["command"]:
                break
        other.close()
    assert "SET monkey banana" in seen


def test_monitor_raw(rq_server: Any) -> None:
    mon = RawConn(rq_server.port)
    other = RawConn(rq_server.port)
    try:
        assert mon.call_raw("MONITOR") == b"+OK\r\n"
        assert other.call_raw("SET", "k1", "v 1") == b"+OK\r\n"
        line = mon.read_raw()
        assert line.startswith(b"+") and line.endswith(b'"SET" "k1" "v 1"\r\n')
        assert b"[0 127.0.0.1:" in line
        info = parse(other.call_raw("INFO", "clients"))
        assert b"connected_clients:" in info
    finally:
        mon.close()
        other.close()


# ---- DEBUG ---------------------------------------------------------------------


def test_debug(r: redis.Redis) -> None:
    assert r.execute_command("DEBUG", "SLEEP", "0") == b"OK"
    t0 = time.time()
    assert r.execute_command("DEBUG", "SLEEP", "0.1") == b"OK"
    assert time.time() - t0 >= 0.09
    r.set("n", "123")
    r.set("s", "hello")
    r.set("big", "x" * 100)
    o = r.execute_command("DEBUG", "OBJECT", "n").decode()
    assert "refcount:1 encoding:int serializedlength:" in o and o.startswith("Value at:0x")
    assert "encoding:embstr" in r.execute_command("DEBUG", "OBJECT", "s").decode()
    assert "encoding:raw" in r.execute_command("DEBUG", "OBJECT", "big").decode()
    with pytest.raises(redis.ResponseError, match="no such key"):
        r.execute_command("DEBUG", "OBJECT", "missing")
    assert r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0") == b"OK"
    assert r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1") == b"OK"
    assert r.execute_command("DEBUG", "CHANGE-REPL-ID") == b"OK"
    with pytest.raises(redis.ResponseError, match="^boom$"):
        r.execute_command("DEBUG", "ERROR", "boom")
    with pytest.raises(redis.ResponseError, match="unknown subcommand or wrong number of arguments for 'FOO'"):
        r.execute_command("DEBUG", "FOO")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'OBJECT'"):
        r.execute_command("DEBUG", "OBJECT")
    assert r.execute_command("DEBUG", "PROTOCOL", "integer") == 12345
    assert r.execute_command("DEBUG", "PROTOCOL", "array") == [0, 1, 2]
    assert isinstance(r.execute_command("DEBUG", "HELP"), list)


def test_debug_change_repl_id(r: redis.Redis) -> None:
    a = r.info("replication")["master_replid"]
    r.execute_command("DEBUG", "CHANGE-REPL-ID")
    b = r.info("replication")["master_replid"]
    assert a != b and len(b) == 40


# ---- SHUTDOWN --------------------------------------------------------------------


def _shutdown_private(*args: str) -> tuple[bytes, int | None]:
    srv = start_respqueue()
    try:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(b"PING\r\n")
        assert s.recv(100) == b"+PONG\r\n"
        argv = ["SHUTDOWN", *args]
        s.sendall(b"*%d\r\n" % len(argv) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a.encode()) for a in argv))
        data = b""
        while True:
            chunk = s.recv(100)
            if not chunk:
                break
            data += chunk
        s.close()
        rc = srv.proc.wait(15)
        return data, rc
    finally:
        srv.stop()


def test_shutdown_stops_server() -> None:
    data, rc = _shutdown_private()
    assert data == b""  # the connection closes without a reply, as Redis does
    assert rc == 0


def test_shutdown_nosave_now() -> None:
    data, rc = _shutdown_private("NOSAVE", "NOW")
    assert data == b""
    assert rc == 0


def test_shutdown_errors_keep_running(r: redis.Redis) -> None:
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("SHUTDOWN", "bogus")
    with pytest.raises(redis.ResponseError, match="No shutdown in progress"):
        r.execute_command("SHUTDOWN", "ABORT")
    assert r.ping() is True


# ---- random sequences ------------------------------------------------------------

_PARAMS = {
    "maxmemory": ["0", "1gb", "10GB", "abc", "-1", "1.5gb", "", "2kk"],
    "maxmemory-policy": ["noeviction", "allkeys-lru", "VOLATILE-TTL", "bogus"],
    "hz": ["10", "0", "1000", "-1", "x"],
    "notify-keyspace-events": ["", "KEA", "Ex", "gx$", "Q", "AKEm", "n"],
    "save": ["", "100 10", "100 10 5", "x y"],
    "appendfsync": ["everysec", "always", "no", "sometimes"],
    "slowlog-max-len": ["128", "0", "5", "-1"],
    "zset-max-ziplist-entries": ["128", "0", "999", "-3"],
    "zset-max-listpack-entries": ["128", "7"],
    "list-max-listpack-size": ["-2", "-5", "8", "abc"],
    "timeout": ["0", "-1", "2147483648", "abc"],
    "maxclients": ["10000", "0", "abc"],
    "databases": ["16", "3"],
    "nosuch": ["1"],
}
_names = sorted(_PARAMS)
_pair = st.sampled_from(_names).flatmap(lambda n: st.tuples(st.just(n), st.sampled_from(_PARAMS[n])))
_op = st.one_of(
    st.builds(lambda ps: ("CONFIG", "SET", *[x for p in ps for x in p]), st.lists(_pair, min_size=1, max_size=3)),
    st.builds(lambda n: ("CONFIG", "GET", n), st.sampled_from(_names + ["HZ", "Save"])),
    st.builds(lambda n: ("CONFIG", "GET", n), st.sampled_from(["zset-max-*", "list-max*", "*events*", "slowlog*"])),
    st.builds(lambda k: ("SET", k, "v"), st.sampled_from(["a", "b", "c"])),
    st.builds(lambda k: ("DEL", k), st.sampled_from(["a", "b", "c"])),
    st.just(("INFO", "keyspace")),
    st.just(("SLOWLOG", "LEN")),
    st.builds(lambda ks: ("COMMAND", "GETKEYS", *ks), st.lists(st.sampled_from(["get", "mset", "del", "a", "b"]), min_size=1, max_size=4)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_op, min_size=1, max_size=12))
def test_random_config_sequences(cfg: Any, ops: list[tuple[str, ...]]) -> None:
    d = cfg
    d.rq.call_raw("FLUSHALL")
    d.ref.call_raw("FLUSHALL")
    for conn in (d.rq, d.ref):
        conn.call_raw("CONFIG", "SET", "slowlog-log-slower-than", "-1")
        conn.call_raw("SLOWLOG", "RESET")
    try:
        for op in ops:
            if op[:2] == ("CONFIG", "GET") and "*" in op[2]:
                d.unordered(*op)
            else:
                d(*op)
    finally:
        args: list[str] = []
        for k, v in DEFAULTS.items():
            args += [k, v]
        for conn in (d.rq, d.ref):
            assert conn.call_raw("CONFIG", "SET", *args) == b"+OK\r\n"


# ---- restrictions: MULTI, scripts --------------------------------------------------


def test_multi_and_script_restrictions_diff(diff: Any) -> None:
    d = diff
    d("MULTI")
    d("SHUTDOWN")
    d("SAVE")
    d("MONITOR")
    d("EXEC")
    d("MULTI")
    d("MONITOR")
    d("WAIT", "1", "0")  # cannot block inside a transaction
    d("CONFIG", "GET", "hz")
    d("EXEC")
    for cmd in ("shutdown", "monitor", "save", "role", "wait','0','0", "debug','sleep','0", "config','get','hz"):
        d("EVAL", "return redis.call('%s')" % cmd, "0")
    d("EVAL", "return redis.call('time')[1] ~= nil", "0")
    d("EVAL", "return redis.call('lastsave') > 0", "0")
    d("SET", "k", "v")
    d("EVAL", "return redis.call('info','keyspace')", "0")


def test_getkeys_movable_diff(diff: Any) -> None:
    d = diff
    d("COMMAND", "GETKEYS", "eval", "return 1", "0")
    d("COMMAND", "GETKEYS", "eval", "return 1", "2", "a", "b", "c")
    d("COMMAND", "GETKEYS", "zunionstore", "d", "2", "a", "b", "weights", "1", "2")
    d("COMMAND", "GETKEYS", "xread", "count", "1", "streams", "a", "b", "0", "0")


def test_commandstats_subcommands(r: redis.Redis) -> None:
    r.config_resetstat()
    r.command_count()
    r.command_list()
    with pytest.raises(redis.ResponseError):
        r.execute_command("COMMAND", "COUNT", "x")
    r.config_get("hz")
    stats = r.info("commandstats")
    assert stats["cmdstat_command|count"]["calls"] == 1
    assert stats["cmdstat_command|count"]["rejected_calls"] == 1
    assert stats["cmdstat_command|list"]["calls"] == 1
    assert stats["cmdstat_config|get"]["calls"] == 1
    assert "cmdstat_command" not in stats
    r.command()
    assert r.info("commandstats")["cmdstat_command"]["calls"] == 1


def test_acl_categories_match_redis(rq_server: Any, redis_ref: Any) -> None:
    """Where our command table agrees with Redis on flags, derived ACL categories must agree too."""
    a, b = RawConn(rq_server.port), RawConn(redis_ref.port)
    try:
        def table(conn: RawConn) -> dict[bytes, Any]:
            out = {}
            for e in parse(conn.call_raw("COMMAND")):
                out[e[0]] = e
                for s in e[9]:
                    out[s[0]] = s
            return out

        ours, theirs = table(a), table(b)
        common = sorted(set(ours) & set(theirs))
        assert len(common) > 50
        compared = 0
        for name in common:
            o, t = ours[name], theirs[name]
            if set(o[2]) != set(t[2]) or o[1] != t[1]:
                continue  # the command table itself differs: not what this test is about
            assert o[6] == t[6], (name, o[6], t[6])
            assert o[3:6] == t[3:6], (name, o[3:6], t[3:6])
            compared += 1
        assert compared > 50
    finally:
        a.close()
        b.close()


def test_slowlog_records_slow_commands(r: redis.Redis) -> None:
    r.client_setname("slowpoke")
    r.slowlog_reset()
    r.execute_command("DEBUG", "SLEEP", "0.03")
    entries = r.slowlog_get()
    assert len(entries) == 1
    e = entries[0]
    assert e["command"] == b"DEBUG SLEEP 0.03"
    assert e["duration"] >= 30000
    assert abs(e["start_time"] - time.time()) < 5
    assert e["client_name"] == b"slowpoke"
    assert e["client_address"].startswith(b"127.0.0.1:")
    assert r.slowlog_len() == 1
    try:
        r.config_set("slowlog-log-slower-than", "-1")
        r.execute_command("DEBUG", "SLEEP", "0.02")
        assert r.slowlog_len() == 1
        r.config_set("slowlog-log-slower-than", "0")
        r.set("quick", "1")
        assert r.slowlog_get(1)[0]["command"] == b"SET quick 1"
    finally:
        r.config_set("slowlog-log-slower-than", "10000")
    assert r.slowlog_reset() is True and r.slowlog_len() == 0
    assert r.info("commandstats")["cmdstat_debug"]["usec"] >= 50000

"""EVAL/EVALSHA/SCRIPT and the Lua runtime, compared byte for byte with Redis 7.0."""

from __future__ import annotations

import hashlib
import threading
import time

import pytest
import redis

from .servers import RawConn, encode_command


def sha(body: str) -> str:
    return hashlib.sha1(body.encode()).hexdigest()


# ---- conversions: command replies -> Lua -> reply -----------------------------
CONVERSIONS = [
    "return 1",
    "return -7",
    "return 3.99",
    "return -3.99",
    "return 0.5",
    "return 1e20",
    "return -1e20",
    "return 0/0",
    "return 1/0",
    "return 2^53",
    "return 2^63",
    "return 'abc'",
    "return ''",
    "return true",
    "return false",
    "return nil",
    "return",
    "return {}",
    "return {1, 2, 3}",
    "return {1, 2, nil, 4}",
    "return {1, false, 3}",
    "return {true, false}",
    "return {nil, nil}",
    "return {1.5, -2.7, 'a', {3.3, {4.9, {}}}}",
    "return {ok='fine'}",
    "return {err='bad thing'}",
    "return {err='-x y'}",
    "return {ok='a', err='b'}",
    "return {err=5}",
    "return {ok=5}",
    "return {a=1}",
    "return {1, {ok='x'}, {err='y'}, {double=1.5}}",
    "return {double=3.5}",
    "return {double=0.1}",
    "return {big_number='123'}",
    "return {verbatim_string={format='txt', string='abc'}}",
    "return {map={a=1}}",
    "return {set={a=true}}",
    "return redis.status_reply('FINE')",
    "return redis.status_reply('')",
    "return redis.error_reply('x y')",
    "return redis.error_reply('-x y')",
    "return redis.error_reply('x')",
    "return redis.error_reply('')",
    "return redis.status_reply()",
    "return redis.error_reply()",
    "return 1, 2",
    "return {1, 2}, 3",
    "return tostring(7353298492104700)",
    "return 7353298492104700 .. ''",
    "return 7353298492104700",
    "return {7353298492104700, 7353298492104700 / 4096}",
    "return 1700000000000 / 4096",
    "return tonumber('1.0')",
    "return math.floor(1700000000123 / 60000)",
    "return #KEYS + #ARGV",
    "return type(unpack)",
    "return _VERSION",
    "return redis.sha1hex('')",
    "return redis.sha1hex(1)",
    "return redis.sha1hex('abc')",
    "return {redis.REPL_ALL, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_NONE}",
    "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}",
    "return redis.replicate_commands()",
    "return redis.set_repl(redis.REPL_ALL)",
    "return redis.log(redis.LOG_WARNING, 'hello from a test')",
    "return redis.setresp(2)",
    "return 'a\\0b'",
]


@pytest.mark.parametrize("body", CONVERSIONS)
def test_return_conversions(diff, body):
    diff("EVAL", body, "0")


CALLS = [
    ("return redis.call('set', KEYS[1], ARGV[1])", "1", "k", "v"),
    ("redis.call('set', KEYS[1], 'v'); return redis.call('get', KEYS[1])", "1", "k"),
    ("return redis.call('get', 'nokey')", "0"),
    ("return type(redis.call('get', 'nokey'))", "0"),
    ("return {redis.call('get', 'nokey')}", "0"),
    ("return {redis.call('get', 'nokey'), 1}", "0"),
    ("return redis.call('incr', 'n')", "0"),
    ("return redis.call('incr', 'n') .. ''", "0"),
    ("return redis.call('ping')", "0"),
    ("return redis.call('ping').ok", "0"),
    ("redis.call('set', 'k', 'v'); return redis.call('type', 'k')", "0"),
    ("redis.call('set', 'k', 'v'); return redis.call('type', 'k')['ok']", "0"),
    ("redis.call('rpush', 'l', 'a', 'b', 'c'); return redis.call('lrange', 'l', 0, -1)", "0"),
    ("redis.call('hset', 'h', 'f1', 'v1'); return redis.call('hgetall', 'h')", "0"),
    ("redis.call('hset', 'h', 'f1', 'v1'); return redis.call('hmget', 'h', 'f1', 'nope', 'f1')", "0"),
    ("redis.call('hset', 'h', 'f1', 'v1'); return {redis.call('hmget', 'h', 'nope', 'f1')}", "0"),
    ("return redis.call('incrbyfloat', 'f', '1.5')", "0"),
    ("return redis.call('mget', 'a', 'b')", "0"),
    ("redis.call('set', 's', 'abc'); return redis.call('incr', 's')", "0"),
    ("redis.call('set', 's', 'abc'); return redis.pcall('incr', 's')", "0"),
    ("redis.call('set', 's', 'abc'); return {redis.pcall('incr', 's')}", "0"),
    ("redis.call('set', 's', 'abc'); local e = redis.pcall('incr', 's'); return e.err", "0"),
    ("redis.call('set', 's', 'abc'); return redis.call('lpush', 's', 'x')", "0"),
    ("redis.call('set', 's', 'abc'); return redis.pcall('lpush', 's', 'x')", "0"),
    ("redis.call('set', 's', 'abc'); local ok, e = pcall(redis.call, 'incr', 's'); return {tostring(ok), e}", "0"),
    ("redis.call('set', 's', 'abc'); local ok, e = pcall(redis.call, 'incr', 's'); return type(e)", "0"),
    ("local ok, e = pcall(redis.call, 'nosuch'); return e", "0"),
    ("return redis.call('nosuch')", "0"),
    ("return redis.pcall('nosuch')", "0"),
    ("return redis.call('get')", "0"),
    ("return redis.call('GET')", "0"),
    ("return redis.pcall('get')", "0"),
    ("return redis.call('set', 'k')", "0"),
    ("return redis.call('client', 'nosuch')", "0"),
    ("return redis.call('client')", "0"),
    ("return redis.call('eval', 'return 1', '0')", "0"),
    ("return redis.pcall('eval', 'return 1', 0)", "0"),
    ("return redis.call('multi')", "0"),
    ("return redis.call('subscribe', 'ch')", "0"),
    ("return redis.call('set', 'k', {})", "0"),
    ("return redis.call('set', 'k', true)", "0"),
    ("return redis.call('set', 'k', nil)", "0"),
    ("return redis.pcall('set', 'k', {})", "0"),
    ("return redis.call({}, 'k')", "0"),
    ("return redis.pcall({}, 'k')", "0"),
    ("return redis.call(1)", "0"),
    ("return redis.call()", "0"),
    ("return redis.pcall()", "0"),
    ("return redis.call('select', '1')", "0"),
    ("redis.call('select', '1'); redis.call('set', 'in1', 'x'); return redis.call('get', 'in1')", "0"),
    ("return redis.call('select', '100')", "0"),
    ("return redis.call('echo', 'a\\128\\255b')", "0"),
    ("return redis.call('echo', ARGV[1])", "0", "\x00\x01\x80\xff"),
    ("return {KEYS[1], ARGV[1], #KEYS, #ARGV}", "1", "a", "b"),
    ("return {KEYS, ARGV}", "2", "k1", "k2", "a1", "a2", "a3"),
]


@pytest.mark.parametrize("case", CALLS, ids=[c[0][:60] for c in CALLS])
def test_call_conversions(diff, case):
    diff("EVAL", *case)


NUMBER_ARGS = [
    "0.1",
    "1.5",
    "7353298492104700",
    "7353298492104700 + 1",
    "1e20",
    "-1e20",
    "1/0",
    "-1/0",
    "123456789012345678",
    "1e-7",
    "2^53 + 1",
    "2^62",
    "3",
    "-3",
    "-0.5",
    "1700000000000 / 4096",
    "1e15",
    "1e16",
    "1e17",
    "99999999999999999",
    "0.30000000000000004",
    "100000000000000000000000000000",
]


@pytest.mark.parametrize("expr", NUMBER_ARGS)
def test_number_arguments(diff, expr):
    diff("EVAL", f"redis.call('set', KEYS[1], {expr}); return redis.call('get', KEYS[1])", "1", "num")


def test_number_arguments_hash_and_list(diff):
    diff("EVAL", "redis.call('hset', 'h', 'f', 1700000000123 * 4096 + 5); return redis.call('hget', 'h', 'f')", "0")
    diff("EVAL", "return redis.call('hincrby', 'h2', 'c', 1)", "0")
    diff("EVAL", "redis.call('rpush', 'l', 1, 2.5, 3); return redis.call('lrange', 'l', 0, -1)", "0")
    diff("EVAL", "return redis.call('lrange', 'l', 0, -1.5)", "0")


# ---- errors ----------------------------------------------------------------------
ERRORS = [
    ("return x", "0"),
    ("x = 1", "0"),
    ("local t = {}; t.x = 1; return t.x", "0"),
    ("return 1 +", "0"),
    ("return +", "0"),
    ("\nreturn x", "0"),
    ("local a = nil; return a + 1", "0"),
    ("local a = nil; return a.b", "0"),
    ("error('boom')", "0"),
    ("error('boom', 0)", "0"),
    ("error('boom', 2)", "0"),
    ("error(5)", "0"),
    ("error({err='My Err'})", "0"),
    ("error({err='my err'})", "0"),
    ("error({err='-my err'})", "0"),
    ("error(redis.error_reply('FOO bar'))", "0"),
    ("local ok, e = pcall(error, 'x'); return e", "0"),
    ("local ok, e = pcall(error, {err='boo'}); return e", "0"),
    ("local ok, e = pcall(function() error('in') end); return e", "0"),
    ("return {pcall(function() return os end)}", "0"),
    ("return redis.sha1hex()", "0"),
    ("return redis.log()", "0"),
    ("return redis.log(1)", "0"),
    ("return redis.log(99, 'x')", "0"),
    ("return redis.setresp()", "0"),
    ("return redis.setresp(4)", "0"),
    ("return redis.set_repl()", "0"),
    ("return redis.set_repl(99)", "0"),
    ("string.foo = 1", "0"),
    ("redis.call = nil", "0"),
    ("rawset(_G, 'x', 1)", "0"),
    ("setmetatable(_G, nil)", "0"),
    ("return os", "0"),
    ("return io", "0"),
    ("return debug", "0"),
    ("return require", "0"),
    ("return loadfile", "0"),
    ("return dofile", "0"),
    ("return getfenv", "0"),
    ("return setfenv", "0"),
    ("return newproxy", "0"),
    ("return print", "0"),
    ("return module", "0"),
    ("return jit", "0"),
    ("return package", "0"),
    ("return loadstring('return 1')()", "0"),
    ("return {loadstring('return +')}", "0"),
    ("return {loadstring(string.dump(function() return 1 end))}", "0"),
    ("return loadstring('x = 5')()", "0"),
    ("return type(getmetatable(_G))", "0"),
    ("return select('#', unpack({}, 1, 7000))", "0"),
    ("return select('#', unpack({}, 1, 7900))", "0"),
    ("return select('#', unpack({}, 1, 8000))", "0"),
    ("return select('#', unpack({}, 1, 100000))", "0"),
    ("return type(KEYS)", "0"),
    ("return '\\x41'", "0"),
    ("for k in pairs(nil) do end", "0"),
    ("for k in ipairs(5) do end", "0"),
    ("return tonumber()", "0"),
    ("return string.sub()", "0"),
    ("return ('x'):nosuch()", "0"),
    ("return #nil", "0"),
    ("return nil .. 'x'", "0"),
    ("return {} < {}", "0"),
    ("local t = setmetatable({}, {__index = function(t, k) return k .. '!' end}) return t.abc", "0"),
    ("return select(-1, 'a', 'b')", "0"),
    ("return assert(false, 'assertion text')", "0"),
    ("return assert(nil)", "0"),
    ("return tostring(nil) .. tostring(true) .. tostring(12.5)", "0"),
    ("local co = coroutine.wrap(function() error('in coroutine') end) co()", "0"),
    ("return string.format('%d', 'x')", "0"),
    ("return math.floor('a')", "0"),
    ("return table.concat({1, {}, 3})", "0"),
    ("return unpack({1, 2, 3})", "0"),
    ("return xpcall(function() error('e') end, function(m) return 'handled: ' .. m end)", "0"),
    ("return {xpcall(function() error('e') end, function(m) return 'handled: ' .. m end)}", "0"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0][:60] for c in ERRORS])
def test_errors_and_sandbox(diff, case):
    diff("EVAL", *case)


def test_globals_list(diff):
    diff(
        "EVAL",
        "local t = {} for _, n in ipairs({'os','io','loadfile','dofile','require','debug','load','loadstring',"
        "'getfenv','setfenv','newproxy','module','collectgarbage','print','gcinfo','coroutine','bit','struct',"
        "'cjson','cmsgpack','_VERSION','xpcall','select','rawset','rawget','rawequal','setmetatable',"
        "'getmetatable','next','unpack','tostring','tonumber','assert','error','pcall','type','ipairs','pairs',"
        "'_G','math','string','table','redis','KEYS','ARGV','jit','package','__redis__err__handler'}) do "
        "table.insert(t, n .. '=' .. type(rawget(_G, n))) end return t",
        "0",
    )


def test_string_rep_is_bounded(r):
    with pytest.raises(redis.ResponseError, match="not enough memory"):
        r.eval("return string.rep('x', 1e10)", 0)
    with pytest.raises(redis.ResponseError, match="not enough memory"):
        r.eval("return ('x'):rep(1e10)", 0)
    assert r.eval("return #string.rep('ab', 1000)", 0) == 2000
    assert r.ping()


def test_unpack_7000_into_a_command(diff):
    diff(
        "EVAL",
        "local t = {} for i = 1, 7000 do t[i] = 'm' .. i end "
        "redis.call('sadd', KEYS[1], unpack(t)) return redis.call('scard', KEYS[1])",
        "1",
        "bigset",
    )
    diff(
        "EVAL",
        "local t = {} for i = 1, 7000 do t[i] = i end "
        "redis.call('rpush', KEYS[1], unpack(t)) return redis.call('llen', KEYS[1])",
        "1",
        "biglist",
    )
    diff("EVAL", "return redis.call('lrange', KEYS[1], 0, -1)", "1", "biglist")


# ---- EVAL / EVALSHA / SCRIPT ----------------------------------------------------------
def test_eval_argument_errors(diff):
    diff("SCRIPT", "FLUSH")
    diff("EVAL", "return 1")
    diff("EVAL", "return 1", "x")
    diff("EVAL", "return 1", "-1")
    diff("EVAL", "return 1", "2", "a")
    diff("EVAL", "return 1", "1")
    diff("EVAL", "return 1", "01")
    diff("EVAL", "return 1", " 1", "a")
    diff("EVAL", "return 1", "1.0", "a")
    diff("EVAL", "return 1", "")
    diff("EVAL", "return 1", "10000000000000000000000")
    diff("EVAL", "return +", "x")
    diff("EVAL", "return +", "-1")
    diff("EVALSHA", "0000000000000000000000000000000000000000", "0")
    diff("EVALSHA", "abc", "0")
    diff("EVALSHA", "nosuchsha", "x")
    diff("EVALSHA", sha("return 1"), "x")
    diff("EVALSHA", sha("return 1"), "-1")
    diff("EVALSHA", sha("return 1"), "0")
    diff("EVALSHA")
    diff("EVALSHA", sha("return 1"))
    diff("EVAL_RO", "return 1")
    diff("EVALSHA_RO", sha("return 1"), "0")


def test_evalsha_after_eval_and_load(diff):
    diff("SCRIPT", "FLUSH")
    body = "return {KEYS[1], ARGV[1]}"
    diff("EVALSHA", sha(body), "1", "k", "a")
    diff("EVAL", body, "1", "k", "a")
    diff("EVALSHA", sha(body), "1", "k2", "b")
    diff("EVALSHA", sha(body).upper(), "1", "k3", "c")
    diff("EVALSHA_RO", sha(body), "1", "k4", "d")
    diff("SCRIPT", "EXISTS", sha(body), sha(body).upper(), "x" * 40, "short")
    diff("SCRIPT", "LOAD", "return 'loaded'")
    diff("EVALSHA", sha("return 'loaded'"), "0")
    diff("SCRIPT", "LOAD", "return +")
    diff("SCRIPT", "LOAD")
    diff("SCRIPT", "LOAD", "a", "b")
    diff("SCRIPT", "EXISTS")
    diff("SCRIPT", "FLUSH", "x")
    diff("SCRIPT", "FLUSH", "async", "x")
    diff("SCRIPT", "FLUSH", "sync")
    diff("SCRIPT", "EXISTS", sha(body), sha("return 'loaded'"))
    diff("EVALSHA", sha(body), "1", "k", "a")
    diff("SCRIPT", "LOAD", body)
    diff("SCRIPT", "FLUSH", "ASYNC")
    diff("SCRIPT", "EXISTS", sha(body))
    diff("SCRIPT", "FLUSH")
    diff("SCRIPT", "KILL")
    diff("SCRIPT", "KILL", "x")
    diff("SCRIPT", "NOSUCH")
    diff("SCRIPT")
    diff("SCRIPT", "HELP")
    diff("SCRIPT", "DEBUG", "no")


def test_eval_ro(diff):
    diff("SET", "k", "v")
    diff("EVAL_RO", "return redis.call('set', 'k', 'v2')", "0")
    diff("EVAL_RO", "return redis.call('get', 'k')", "0")
    diff("EVAL_RO", "return redis.pcall('set', 'k', 'v')", "0")
    diff("EVAL_RO", "return redis.call('incr', 'n')", "0")
    diff("EVAL_RO", "return {redis.pcall('del', 'k'), redis.call('exists', 'k')}", "0")
    diff("GET", "k")
    diff("SCRIPT", "LOAD", "return redis.call('set', 'k', 'ro')")
    diff("EVALSHA_RO", sha("return redis.call('set', 'k', 'ro')"), "0")
    diff("EVALSHA", sha("return redis.call('set', 'k', 'ro')"), "0")
    diff("GET", "k")


def test_shebang(diff):
    diff("EVAL", "#!lua\nreturn 1", "0")
    diff("EVAL", "#!lua flags=no-writes\nreturn redis.call('set','a','b')", "0")
    diff("EVAL", "#!lua flags=no-writes\nreturn redis.call('get','a')", "0")
    diff("EVAL", "#!lua flags=no-writes\nreturn x", "0")
    diff("EVAL", "#!lua flags=bad\nreturn 1", "0")
    diff("EVAL", "#!lu\nreturn 1", "0")
    diff("EVAL", "#!lua name=x\nreturn 1", "0")
    diff("EVAL", "#!lua", "0")


def test_writes_survive_runtime_error(diff):
    diff("EVAL", "redis.call('set', 'a', '1'); redis.call('incr', 'a'); error('late')", "0")
    diff("GET", "a")
    diff("EVAL", "redis.call('set', 'b', '1'); return redis.call('lpush', 'b', 'x')", "0")
    diff("GET", "b")


def test_script_cache_shared_between_connections(r, rq_server):
    body = "return 'shared'"
    r.script_flush()
    other = redis.Redis(port=rq_server.port)
    try:
        assert other.script_load(body) == sha(body)
        assert r.evalsha(sha(body), 0) == b"shared"
        assert r.script_exists(sha(body)) == [True]
    finally:
        other.close()


def test_multi_eval_then_evalsha(diff):
    diff("SCRIPT", "FLUSH")
    body = "return redis.call('incr', KEYS[1])"
    diff("MULTI")
    diff("EVAL", body, "1", "c")
    diff("EVALSHA", sha(body), "1", "c")
    diff("EVAL", "return x", "0")
    diff("EVALSHA", "0" * 40, "0")
    diff("EXEC")
    diff("GET", "c")


def test_pipeline_eval_then_evalsha(diff):
    diff("SCRIPT", "FLUSH")
    body = "redis.call('rpush', KEYS[1], ARGV[1]); return redis.call('llen', KEYS[1])"
    for conn_name in ("rq", "ref"):
        conn: RawConn = getattr(diff, conn_name)
        conn.send_raw(
            b"".join(
                encode_command(a)
                for a in [
                    ("EVAL", body, "1", "pl", "a"),
                    ("EVALSHA", sha(body), "1", "pl", "b"),
                    ("EVALSHA", sha(body), "1", "pl", "c"),
                ]
            )
        )
    got = [diff.rq.read_raw() for _ in range(3)]
    want = [diff.ref.read_raw() for _ in range(3)]
    assert got == want
    diff("LRANGE", "pl", "0", "-1")


def test_redis_py_script_objects(r):
    script = r.register_script("return {KEYS[1], ARGV[1]}")
    r.script_flush()
    assert script(keys=["k"], args=["v"]) == [b"k", b"v"]
    pipe = r.pipeline(transaction=True)
    script(keys=["a"], args=["1"], client=pipe)
    script(keys=["b"], args=["2"], client=pipe)
    assert pipe.execute() == [[b"a", b"1"], [b"b", b"2"]]


def test_select_in_script_does_not_leak(diff):
    diff("EVAL", "redis.call('select', '2'); redis.call('set', 'db2key', 'x'); return 1", "0")
    diff("EXISTS", "db2key")
    diff("SELECT", "2")
    diff("GET", "db2key")
    diff("SELECT", "0")


def test_clock_frozen_during_script(r):
    r.set("exp", "v", px=50)
    # busy-wait well past the TTL inside the script: the key must not expire mid-script
    assert r.eval(
        "local a = redis.call('exists', KEYS[1]) local t = 0 for i = 1, 60000000 do t = t + i end "
        "local b = redis.call('exists', KEYS[1]) return {a, b}",
        1,
        "exp",
    ) in ([1, 1], [0, 0])
    time.sleep(0.1)
    assert r.exists("exp") == 0


# ---- RESP3 -----------------------------------------------------------------------------
RESP3 = [
    "return true",
    "return false",
    "return nil",
    "return {double=3.5}",
    "return {map={a=1}}",
    "return {set={a=true}}",
    "return 3.7",
    "redis.setresp(3); return true",
    # a bare RESP3 false (#f) cannot be read by RawConn (hiredis gives False = incomplete)
    "redis.setresp(3); return {false, true}",
    "redis.setresp(3); return redis.call('get', 'nokey')",
    "redis.setresp(3); return {redis.call('get', 'nokey')}",
    "redis.setresp(3); return type(redis.call('get', 'nokey'))",
    "redis.setresp(3); redis.call('hset', 'h', 'f', 'v'); return redis.call('hgetall', 'h')",
    "redis.setresp(3); redis.call('hset', 'h', 'f', 'v'); return redis.call('hgetall', 'h').map.f",
    "redis.setresp(3); redis.call('sadd', 's', 'm'); return redis.call('smembers', 's')",
    "redis.setresp(3); redis.call('sadd', 's', 'm'); return redis.call('smembers', 's').set.m",
    "redis.setresp(3); return redis.call('incrbyfloat', 'f', '1.5')",
    "redis.setresp(3); return redis.call('ping')",
]


@pytest.mark.parametrize("body", RESP3)
def test_resp3(diff3, body):
    diff3("EVAL", body, "0")


@pytest.mark.parametrize("body", RESP3[:9])
def test_resp3_script_from_resp2_client(diff, body):
    diff("EVAL", body, "0")


# ---- blocking commands and blocked clients --------------------------------------------------
def test_blocking_commands_inside_scripts(diff):
    diff("EVAL", "return redis.call('blpop', 'nolist', '0')", "0")
    diff("EVAL", "return redis.call('brpoplpush', 'nolist', 'x', '0')", "0")
    diff("EVAL", "return redis.call('blmove', 'nolist', 'x', 'left', 'right', '0')", "0")
    diff("EVAL", "return redis.call('blmpop', '0', '1', 'nolist', 'left')", "0")
    diff("EVAL", "return redis.call('xread', 'block', '0', 'streams', 'nostream', '$')", "0")


def test_blocked_client_woken_by_script(rq_server):
    blocker = redis.Redis(port=rq_server.port, socket_timeout=10)
    writer = redis.Redis(port=rq_server.port, socket_timeout=10)
    writer.delete("wakeme")
    result: list[object] = []

    def block() -> None:
        result.append(blocker.blpop(["wakeme"], timeout=5))

    t = threading.Thread(target=block)
    t.start()
    time.sleep(0.2)
    assert writer.eval("return redis.call('lpush', KEYS[1], 'job1')", 1, "wakeme") == 1
    t.join(6)
    assert result == [(b"wakeme", b"job1")]
    blocker.close()
    writer.close()


def test_monitor_sees_script_commands(rq_server):
    mon = RawConn(rq_server.port)
    mon.call_raw("MONITOR")
    c = redis.Redis(port=rq_server.port)
    c.eval("return redis.call('set', 'monkey', 'v')", 0)
    seen = b""
    deadline = time.time() + 3
    while b'"set" "monkey"' not in seen and time.time() < deadline:
        seen += mon.sock.recv(65536)
    assert b'[0 lua] "set" "monkey" "v"' in seen
    mon.close()
    c.close()


# ---- sorted sets ---------------------------------------------------------------------------
def test_zset_conversions(diff):
    diff("EVAL", "redis.call('zadd', 'z', 7353298492104700, 'm'); return redis.call('zscore', 'z', 'm')", "0")
    diff("EVAL", "redis.call('zadd', 'z', 1700000000000 / 4096, 'f'); return redis.call('zscore', 'z', 'f')", "0")
    diff("EVAL", "return redis.call('zrange', 'z', 0, -1, 'withscores')", "0")
    diff("EVAL", "return redis.call('zscore', 'z', 'nope')", "0")
    diff("EVAL", "return type(redis.call('zscore', 'z', 'nope'))", "0")
    diff("EVAL", "return redis.call('zpopmin', 'z')", "0")
    diff("EVAL", "return redis.call('zincrby', 'z', 0.1, 'x')", "0")
    diff("EVAL", "return redis.call('bzpopmin', 'z', '0')", "0")
    diff("EVAL", "return redis.call('bzpopmin', 'nozset', '0.001')", "0")


def test_zset_resp3(diff3):
    diff3("EVAL", "redis.call('zadd', 'z', 1.5, 'x'); redis.setresp(3); return redis.call('zscore', 'z', 'x')", "0")
    diff3("EVAL", "redis.setresp(3); return redis.call('zscore', 'z', 'x').double", "0")


# ---- slow scripts: BUSY, SCRIPT KILL, UNKILLABLE ------------------------------------------
def _run_in_thread(fn):
    out: list[object] = []

    def target() -> None:
        try:
            out.append(fn())
        except Exception as e:  # the reply of the killed script
            out.append(e)

    t = threading.Thread(target=target)
    t.start()
    return t, out


def test_busy_script_and_script_kill(r, rq_server):
    r.config_set("lua-time-limit", 100)
    try:
        slow = RawConn(rq_server.port, timeout=20)
        other = redis.Redis(port=rq_server.port, socket_timeout=5)
        other.ping()
        with pytest.raises(redis.ResponseError, match="NOTBUSY No scripts in execution right now."):
            other.script_kill()
        body = "local i = 0 while true do i = i + 1 end"
        t, out = _run_in_thread(lambda: slow.call_raw("EVAL", body, "0"))
        time.sleep(0.5)
        with pytest.raises(redis.ResponseError, match="^BUSY Redis is busy running a script"):
            other.get("x")
        # a connection opened while the script runs is served too
        late = redis.Redis(port=rq_server.port, socket_timeout=5)
        with pytest.raises(redis.ResponseError, match="^BUSY Redis is busy running a script"):
            late.execute_command("GET", "x")
        assert other.script_kill() is True
        t.join(10)
        assert not t.is_alive()
        assert out == [
            b"-ERR Script killed by user with SCRIPT KILL... script: %s, on @user_script:1.\r\n" % sha(body).encode()
        ]
        assert other.ping() is True
        assert late.ping() is True
        assert late.set("late", "ok") and late.get("late") == b"ok"
        assert slow.call_raw("PING") == b"+PONG\r\n"
        slow.close()
        other.close()
        late.close()
    finally:
        r.config_set("lua-time-limit", 5000)


def test_kill_survives_pcall(r, rq_server):
    r.config_set("lua-time-limit", 100)
    try:
        slow = redis.Redis(port=rq_server.port, socket_timeout=20)
        other = redis.Redis(port=rq_server.port, socket_timeout=5)
        t, out = _run_in_thread(
            lambda: slow.eval("while true do pcall(function() local i = 0 while true do i = i + 1 end end) end", 0)
        )
        time.sleep(0.4)
        assert other.script_kill() is True
        t.join(10)
        assert not t.is_alive()
        assert "Script killed by user with SCRIPT KILL" in str(out[0])
        slow.close()
        other.close()
    finally:
        r.config_set("lua-time-limit", 5000)


def test_unkillable_after_write(r, rq_server):
    r.config_set("lua-time-limit", 100)
    try:
        slow = redis.Redis(port=rq_server.port, socket_timeout=20)
        other = redis.Redis(port=rq_server.port, socket_timeout=5)
        t, out = _run_in_thread(
            lambda: slow.eval(
                "redis.call('set', 'w', '1') local t = 0 for i = 1, 600000000 do t = t + 1 end return t", 0
            )
        )
        time.sleep(0.4)
        with pytest.raises(redis.ResponseError) as ei:
            other.script_kill()
        assert str(ei.value) == (
            "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either "
            "wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."
        )
        t.join(30)
        assert out == [600000000]
        assert other.get("w") == b"1"
        slow.close()
        other.close()
    finally:
        r.config_set("lua-time-limit", 5000)


# ---- sandbox escapes ----------------------------------------------------------------------
ESCAPES = [
    "return tostring(redis.call.__self__)",
    "return redis.call.__globals__",
    "return cjson.encode.__class__",
    "redis.call.x = 1",
    "getmetatable(_G).__index.x = 1",
    "rawset(getmetatable(_G), 'a', 1)",
    "setmetatable(getmetatable(_G), {})",
    "getmetatable('').__index.rep = nil",
    "rawset(string, 'rep', nil)",
    "rawset(redis, 'call', nil)",
    "setmetatable(redis, nil)",
    "getmetatable(redis).__index = nil",
    "return loadstring('return string')().x",
    "loadstring('y = 1')()",
    "return load(function() return nil end) and 1",
    "return getmetatable(redis.call)",
]


@pytest.mark.parametrize("body", ESCAPES)
def test_sandbox_escapes_fail(r, body):
    try:
        r.eval(body, 0)
    except redis.ResponseError:
        pass
    # whatever happened, the next script sees a pristine environment
    assert r.eval("return {type(redis.call), type(string.rep), tostring(rawget(_G, 'x')), tostring(rawget(_G, 'y'))}", 0) == [
        b"function",
        b"function",
        b"nil",
        b"nil",
    ]
    assert r.eval("return redis.call('ping')", 0) == b"PONG"
    assert r.eval("return ('ab'):rep(2)", 0) == b"abab"
    with pytest.raises(redis.ResponseError, match="nonexistent global variable 'x'"):
        r.eval("return x", 0)


def test_blocked_clients_wait_for_the_busy_script(r, rq_server):
    r.config_set("lua-time-limit", 100)
    try:
        r.delete("bl")
        blocker = redis.Redis(port=rq_server.port, socket_timeout=20)
        slow = redis.Redis(port=rq_server.port, socket_timeout=20)
        other = redis.Redis(port=rq_server.port, socket_timeout=5)
        tb, got = _run_in_thread(lambda: blocker.blpop(["bl"], timeout=15))
        time.sleep(0.2)
        ts, out = _run_in_thread(
            lambda: slow.eval(
                "redis.call('rpush', 'bl', 'x') local t = 0 for i = 1, 700000000 do t = t + 1 end "
                "return redis.call('llen', 'bl')",
                0,
            )
        )
        time.sleep(0.4)
        with pytest.raises(redis.ResponseError, match="^BUSY"):
            other.ping()
        ts.join(30)
        tb.join(10)
        assert out == [1]  # the blocked client was not served in the middle of the script
        assert got == [(b"bl", b"x")]
        for c in (blocker, slow, other):
            c.close()
    finally:
        r.config_set("lua-time-limit", 5000)

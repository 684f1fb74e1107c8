"""Connection commands (PING, ECHO, SELECT, AUTH, HELLO, CLIENT ...) against
redis-server, and the server limits: requirepass, maxclients, timeout, unix
socket, signals."""

from __future__ import annotations

import os
import re
import signal
import socket
import tempfile
import time

import pytest
import redis

from .servers import RawConn, start_redis, start_respqueue
from .test_protocol import compare_many, exchange


# ---- PING / ECHO / SELECT ----------------------------------------------------
def test_ping_echo(diff):
    diff("PING")
    diff("PING", "hello")
    diff("PING", "a", "b")
    diff("ping", "")
    diff("ECHO", "x")
    diff("ECHO", "")
    diff("ECHO", "a\r\nb\x00")
    diff("ECHO")
    diff("ECHO", "a", "b")


def test_select(diff):
    diff("SELECT", "1")
    diff("SET", "in1", "v")
    diff("SELECT", "0")
    diff("GET", "in1")
    diff("SELECT", "1")
    diff("GET", "in1")
    for bad in ("16", "-1", "x", "1.5", "", "99999999999999999999", " 1"):
        diff("SELECT", bad)
    diff("SELECT")
    diff("SELECT", "1", "2")
    diff("SELECT", "15")
    diff("FLUSHALL")


# ---- AUTH / HELLO without a password -------------------------------------------
def test_auth_without_password(diff):
    diff("AUTH", "x")
    diff("AUTH", "default", "x")
    diff("AUTH", "nobody", "x")
    diff("AUTH")
    diff("AUTH", "a", "b", "c")
    diff("PING")


def test_hello_errors(diff):
    for args in (("HELLO", "1"), ("HELLO", "4"), ("HELLO", "x"), ("HELLO", "-1"), ("HELLO", "3", "FOO"),
                 ("HELLO", "3", "AUTH", "default"), ("HELLO", "3", "AUTH", "nobody", "pw"),
                 ("HELLO", "2", "SETNAME", "a b"), ("HELLO", "2", "SETNAME")):
        diff(*args)
    diff("CLIENT", "GETNAME")


def _hello_fields(b: bytes) -> bytes:
    b = re.sub(rb"\$7\r\nversion\r\n\$\d+\r\n[0-9.]+\r\n", b"", b)
    return re.sub(rb"\$2\r\nid\r\n:\d+\r\n", b"", b)


def test_hello_reply_shape(diff):
    a, b = diff.both("HELLO")
    assert _hello_fields(a) == _hello_fields(b)
    a, b = diff.both("HELLO", "2", "SETNAME", "n1")
    assert _hello_fields(a) == _hello_fields(b)
    diff("CLIENT", "GETNAME")
    a, b = diff.both("HELLO", "2", "AUTH", "default", "anything")
    assert _hello_fields(a) == _hello_fields(b)


# ---- requirepass ----------------------------------------------------------------
@pytest.fixture(scope="module")
def auth_pair():
    ref = start_redis("--requirepass", "pw")
    rq = start_respqueue("--requirepass", "pw")
    yield rq, ref
    ref.stop()
    rq.stop()


def test_requirepass_matches_redis(auth_pair):
    rq, ref = auth_pair
    a, b = RawConn(rq.port), RawConn(ref.port)
    for cmd in (("PING",), ("GET", "k"), ("SET", "k", "v"), ("NOSUCH",), ("ECHO",), ("AUTH", "wrong"),
                ("AUTH", "default", "wrong"), ("AUTH", "nobody", "pw"), ("CLIENT", "ID"),
                ("HELLO", "3"), ("HELLO", "3", "AUTH", "default", "wrong"), ("HELLO", "2", "AUTH", "default"),
                ("AUTH", "pw"), ("PING",), ("AUTH", "wrong"), ("PING",), ("AUTH", "default", "pw"), ("GET", "k")):
        assert a.call_raw(*cmd) == b.call_raw(*cmd), cmd
    a.close()
    b.close()
    a, b = RawConn(rq.port), RawConn(ref.port)
    ra, rb = a.call_raw("HELLO", "3", "AUTH", "default", "pw"), b.call_raw("HELLO", "3", "AUTH", "default", "pw")
    assert _hello_fields(ra) == _hello_fields(rb)
    assert a.call_raw("PING") == b.call_raw("PING") == b"+PONG\r\n"
    assert a.call_raw("RESET") == b.call_raw("RESET") == b"+RESET\r\n"
    assert a.call_raw("PING") == b.call_raw("PING")
    a.close()
    b.close()


def test_requirepass_redis_py(auth_pair):
    rq, _ = auth_pair
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=rq.port).ping()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=rq.port, password="nope").ping()
    c = redis.Redis(port=rq.port, password="pw")
    assert c.ping() is True
    c.close()
    c3 = redis.Redis(port=rq.port, password="pw", protocol=3)
    assert c3.set("x", "1") is True and c3.get("x") == b"1"
    c3.close()


def test_inline_auth(auth_pair):
    rq, ref = auth_pair
    diffs = compare_many(ref.port, rq.port, [[b"PING\r\nAUTH pw\r\nPING\r\n"], [b"AUTH \"pw\"\r\nECHO 'a b'\r\n"]])
    assert not diffs, "\n".join(diffs)


# ---- maxclients / timeout / unix socket / signals ------------------------------------
def test_maxclients():
    srv = start_respqueue("--maxclients", "2")
    try:
        # the readiness probe's connection may still be counted; wait until it is gone
        a = RawConn(srv.port)
        deadline = time.time() + 5
        while a.call_raw("CLIENT", "LIST").count(b"id=") > 1 and time.time() < deadline:
            time.sleep(0.05)
        b = RawConn(srv.port)
        assert a.call_raw("PING") == b.call_raw("PING") == b"+PONG\r\n"
        got, closed = exchange(srv.port, [b""], expect=b"-ERR max number of clients reached\r\n", expect_close=True)
        assert got == b"-ERR max number of clients reached\r\n" and closed
        a.close()
        deadline = time.time() + 5
        while b.call_raw("CLIENT", "LIST").count(b"id=") > 1 and time.time() < deadline:
            time.sleep(0.05)
        c = RawConn(srv.port)
        assert c.call_raw("PING") == b"+PONG\r\n"
        b.close()
        c.close()
    finally:
        srv.stop()


def test_timeout_closes_idle_client():
    srv = start_respqueue("--timeout", "1")
    try:
        idle = RawConn(srv.port)
        busy = RawConn(srv.port)
        assert idle.call_raw("PING") == b"+PONG\r\n"
        idle.sock.settimeout(5)
        t0 = time.time()
        while time.time() - t0 < 2.5:
            assert busy.call_raw("PING") == b"+PONG\r\n"
            time.sleep(0.2)
        assert idle.sock.recv(100) == b""  # closed by the server
        assert busy.call_raw("PING") == b"+PONG\r\n"
        busy.close()
        idle.close()
    finally:
        srv.stop()


def test_unixsocket():
    path = os.path.join(tempfile.mkdtemp(prefix="rqsock-"), "rq.sock")
    srv = start_respqueue("--unixsocket", path)
    try:
        c = redis.Redis(unix_socket_path=path)
        assert c.set("u", "1") is True
        assert c.get("u") == b"1"
        info = c.client_info()
        assert info["addr"] == info["laddr"] == path + ":0"
        assert info["flags"] == "U"
        c.close()
        got, closed = exchange(0, [b"PING\r\n"], unix=path, expect=b"+PONG\r\n")
        assert got == b"+PONG\r\n" and not closed
    finally:
        srv.stop()
    assert not os.path.exists(path)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_graceful_exit(sig):
    srv = start_respqueue()
    c = RawConn(srv.port)
    assert c.call_raw("SET", "a", "1") == b"+OK\r\n"
    code = srv.stop(sig)
    assert code == 0
    out = srv.output()
    assert "shutdown requested" in out and "SIG" in out and "bye" in out, out
    assert "Traceback" not in out
    c.close()


# ---- CLIENT ---------------------------------------------------------------------------
def test_client_setname_getname(diff):
    diff("CLIENT", "GETNAME")
    diff("CLIENT", "SETNAME", "conn-1")
    diff("CLIENT", "GETNAME")
    diff("CLIENT", "SETNAME", "a b")
    diff("CLIENT", "SETNAME", "a\nb")
    diff("CLIENT", "SETNAME", "é")
    diff("CLIENT", "GETNAME")
    diff("CLIENT", "SETNAME", "")
    diff("CLIENT", "GETNAME")
    diff("CLIENT", "SETNAME")
    diff("CLIENT", "SETNAME", "a", "b")
    diff("CLIENT", "GETNAME", "x")
    diff("CLIENT")
    diff("CLIENT", "NOSUCH")
    diff("client", "nosuch", "x")


def test_client_id_and_misc(diff):
    a, b = diff.both("CLIENT", "ID")
    assert a.startswith(b":") and b.startswith(b":")
    diff("CLIENT", "ID", "x")
    diff("CLIENT", "NO-EVICT", "on")
    diff("CLIENT", "NO-EVICT", "OFF")
    diff("CLIENT", "NO-EVICT", "maybe")
    diff("CLIENT", "NO-EVICT")
    diff("CLIENT", "REPLY")
    diff("CLIENT", "REPLY", "bad")
    diff("CLIENT", "UNBLOCK", "x")
    diff("CLIENT", "UNBLOCK", "999999")
    diff("CLIENT", "UNBLOCK", "999999", "TIMEOUT")
    diff("CLIENT", "UNBLOCK", "999999", "bad")
    diff("CLIENT", "KILL", "1.2.3.4:5")
    diff("CLIENT", "KILL", "ID")
    diff("CLIENT", "KILL", "ID", "x")
    diff("CLIENT", "KILL", "ID", "0")
    diff("CLIENT", "KILL", "ID", "999999")
    diff("CLIENT", "KILL", "TYPE", "bogus")
    diff("CLIENT", "KILL", "SKIPME", "maybe")
    diff("CLIENT", "KILL", "FOO", "bar")
    diff("CLIENT", "LIST", "TYPE", "bogus")
    diff("CLIENT", "LIST", "ID", "x")
    diff("CLIENT", "LIST", "FOO")
    diff("CLIENT", "LIST", "TYPE", "normal", "ID", "1")
    diff("CLIENT", "LIST", "ID", "999999")
    diff("CLIENT", "LIST", "ID", "1", "x")
    diff("CLIENT", "LIST", "TYPE", "master")
    diff("CLIENT", "KILL", "USER", "nobody")
    diff("CLIENT", "KILL", "USER", "default", "SKIPME", "yes")
    diff("CLIENT", "KILL", "MAXAGE", "100")
    diff("CLIENT", "KILL", "LADDR", "1.2.3.4:5")
    diff("CLIENT", "KILL", "ADDR", "1.2.3.4:5", "SKIPME", "yes")
    diff("CLIENT", "KILL", "TYPE", "master")
    diff("CLIENT", "GETREDIR")
    diff("CLIENT", "TRACKINGINFO")
    diff("CLIENT", "CACHING", "yes")


def _fields(line: bytes) -> list[bytes]:
    return [kv.split(b"=", 1)[0] for kv in line.split()]


def test_client_info_and_list_shape(diff):
    diff.both("CLIENT", "SETNAME", "shape")
    a, b = diff.both("CLIENT", "INFO")
    # $<len>\r\n<line>\n\r\n
    ga, gb = a.split(b"\r\n", 1)[1], b.split(b"\r\n", 1)[1]
    assert ga.endswith(b"\n\r\n") and gb.endswith(b"\n\r\n")
    fa, fb = _fields(ga), _fields(gb)
    # respqueue reports Redis 7.2's fields: 7.0's plus lib-name and lib-ver
    assert fa == fb + [b"lib-name", b"lib-ver"], (fa, fb)
    assert b" name=shape " in ga and b" db=0 " in ga and b" cmd=client|info " in ga and b" resp=2 " in ga
    a, b = diff.both("CLIENT", "LIST")
    la = a.split(b"\r\n", 1)[1].rstrip(b"\r\n").split(b"\n")
    lb = b.split(b"\r\n", 1)[1].rstrip(b"\r\n").split(b"\n")
    assert all(_fields(x) == fb + [b"lib-name", b"lib-ver"] for x in la)
    assert all(_fields(x) == fb for x in lb)
    assert any(b"name=shape" in x for x in la)
    a, b = diff.both("CLIENT", "LIST", "TYPE", "normal")
    assert a.startswith(b"$")
    a, b = diff.both("CLIENT", "LIST", "TYPE", "pubsub")
    assert a == b == b"$0\r\n\r\n"


def test_client_list_id_and_kill(r):
    me = r.client_id()
    other = redis.Redis(port=r.connection_pool.connection_kwargs["port"])
    other.client_setname("victim")
    oid = other.client_id()
    lst = r.client_list(client_id=[oid])
    assert len(lst) == 1 and lst[0]["name"] == "victim"
    ids = {int(x["id"]) for x in r.client_list()}
    assert me in ids and oid in ids
    assert r.client_kill_filter(_id=oid) == 1
    assert r.client_kill_filter(_id=oid) == 0
    assert oid not in {int(x["id"]) for x in r.client_list()}
    other.close()
    raw = RawConn(r.connection_pool.connection_kwargs["port"])
    rid = int(raw.call_raw("CLIENT", "ID")[1:-2])
    assert r.client_kill_filter(_id=rid) == 1
    raw.sock.settimeout(5)
    assert raw.sock.recv(10) == b""
    raw.close()
    # kill by address
    third = redis.Redis(port=r.connection_pool.connection_kwargs["port"])
    third.client_setname("third")
    addr = [x for x in r.client_list() if x["name"] == "third"][0]["addr"]
    assert r.client_kill(addr) is True
    with pytest.raises(redis.ResponseError, match="No such client"):
        r.client_kill(addr)
    third.close()
    # CLIENT KILL ID <me> SKIPME no kills the caller itself after replying
    raw = RawConn(r.connection_pool.connection_kwargs["port"])
    myid = int(raw.call_raw("CLIENT", "ID")[1:-2])
    assert raw.call_raw("CLIENT", "KILL", "ID", str(myid), "SKIPME", "no") == b":1\r\n"
    raw.sock.settimeout(5)
    assert raw.sock.recv(10) == b""
    raw.close()


def test_client_setinfo_functional(r):
    # CLIENT SETINFO is Redis 7.2; the 7.0 reference lacks it, so no diff here
    assert r.execute_command("CLIENT", "SETINFO", "LIB-NAME", "mylib") == b"OK"
    assert r.execute_command("CLIENT", "SETINFO", "lib-ver", "1.2.3") == b"OK"
    info = r.execute_command("CLIENT", "INFO").decode()
    assert "lib-name=mylib" in info and "lib-ver=1.2.3" in info
    with pytest.raises(redis.ResponseError, match="Unrecognized option 'foo'"):
        r.execute_command("CLIENT", "SETINFO", "foo", "x")
    with pytest.raises(redis.ResponseError, match="cannot contain spaces"):
        r.execute_command("CLIENT", "SETINFO", "lib-name", "a b")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        r.execute_command("CLIENT", "SETINFO", "lib-name")


def test_client_no_evict_flag(r):
    assert r.execute_command("CLIENT", "NO-EVICT", "on") == b"OK"
    assert "e" in r.client_info()["flags"]
    assert r.execute_command("CLIENT", "NO-EVICT", "off") == b"OK"


def test_reset(diff):
    diff("SELECT", "3")
    diff("CLIENT", "SETNAME", "before")
    diff("RESET")
    diff("CLIENT", "GETNAME")
    diff("SET", "k", "db0")
    diff("SELECT", "3")
    diff("GET", "k")
    diff("RESET", "x")
    diff("SELECT", "0")


def test_quit_with_args(diff):
    rq = RawConn(diff.rq.sock.getpeername()[1])
    assert rq.call_raw("QUIT", "extra") == b"+OK\r\n"
    rq.sock.settimeout(5)
    assert rq.sock.recv(10) == b""
    rq.close()
    s = socket.socket()
    s.close()


def test_client_reply_off_skip_on_same_bytes_as_redis(rq_server, redis_ref):
    """CLIENT REPLY OFF silences replies until ON; SKIP silences only the next one."""
    from .servers import encode_command

    cmds = [
        ("SET", "cr", "1"),
        ("CLIENT", "REPLY", "SKIP"),
        ("INCR", "cr"),
        ("GET", "cr"),
        ("CLIENT", "REPLY", "OFF"),
        ("INCR", "cr"),
        ("GET", "cr"),
        ("CLIENT", "REPLY", "SKIP"),
        ("CLIENT", "REPLY", "ON"),
        ("GET", "cr"),
        ("CLIENT", "REPLY", "BAD"),
        ("DEL", "cr"),
    ]
    payload = b"".join(encode_command(c) for c in cmds)
    outs = []
    for port in (rq_server.port, redis_ref.port):
        s = socket.create_connection(("127.0.0.1", port))
        try:
            s.sendall(payload)
            s.settimeout(2)
            data = b""
            try:
                while not data.endswith(b":1\r\n"):
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except TimeoutError:
                pass
            outs.append(data)
        finally:
            s.close()
    assert outs[0] == outs[1]
    assert outs[0] == b"+OK\r\n$1\r\n2\r\n+OK\r\n$1\r\n3\r\n-ERR syntax error\r\n:1\r\n"

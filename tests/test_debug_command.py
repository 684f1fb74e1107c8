"""DEBUG behind enable-debug-command (defect D5) and protected configs, against a real redis-server."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from .servers import RawConn, redis_server_path, start_redis, start_respqueue
from .test_protected_mode import needs_alias, talk

pytestmark = pytest.mark.skipif(redis_server_path() is None, reason="reference redis-server is not installed")

DENIED = (
    b'-ERR DEBUG command not allowed. If the enable-debug-command option is set to "local", you can run it from a '
    b"local connection, otherwise you need to set this option in the configuration file, and then restart the "
    b"server.\r\n"
)


def test_debug_is_off_on_a_fresh_server() -> None:
    """D5: a server started without flags refuses DEBUG (it used to run it for anyone)."""
    rq = start_respqueue(debug_command=None)
    ref = start_redis(debug_command=None)
    try:
        a, b = RawConn(rq.port), RawConn(ref.port)
        for args in [
            ("DEBUG", "SLEEP", "0"),
            ("DEBUG", "OBJECT", "x"),
            ("DEBUG", "HELP"),
            ("DEBUG",),
            ("CONFIG", "GET", "enable-debug-command"),
            ("CONFIG", "SET", "enable-debug-command", "yes"),
            ("CONFIG", "GET", "enable-protected-configs"),
            ("CONFIG", "GET", "enable-module-command"),
            ("CONFIG", "SET", "enable-protected-configs", "yes"),
            ("CONFIG", "SET", "dir", "/tmp"),
            ("MULTI",),
            ("DEBUG", "SLEEP", "0"),
            ("PING",),
            ("EXEC",),
            ("EVAL", "return redis.pcall('debug', 'sleep', '0')", "0"),
        ]:
            got, want = a.call_raw(*args), b.call_raw(*args)
            assert got == want, (args, got, want)
        assert a.call_raw("DEBUG", "SLEEP", "0") == DENIED
        assert redis.Redis(port=rq.port).config_get("enable-debug-command") == {"enable-debug-command": "no"}
    finally:
        rq.stop()
        ref.stop()


def test_debug_refused_before_auth_check() -> None:
    rq = start_respqueue("--requirepass", "pw", debug_command=None)
    ref = start_redis("--requirepass", "pw", debug_command=None)
    try:
        a, b = RawConn(rq.port), RawConn(ref.port)
        for args in [("DEBUG", "SLEEP", "0"), ("PING",), ("AUTH", "pw"), ("DEBUG", "SLEEP", "0")]:
            assert a.call_raw(*args) == b.call_raw(*args), args
    finally:
        rq.stop()
        ref.stop()


@needs_alias
def test_local_and_yes() -> None:
    for mode, remote_ok in (("local", False), ("yes", True)):
        rq = start_respqueue("--protected-mode", "no", debug_command=mode)
        ref = start_redis("--protected-mode", "no", debug_command=mode)
        try:
            for srv in (rq, ref):
                assert talk(srv.port, "127.0.0.1", b"DEBUG SLEEP 0\r\n") == b"+OK\r\n"
                remote = talk(srv.port, "127.0.0.2", b"DEBUG SLEEP 0\r\n")
                assert remote == (b"+OK\r\n" if remote_ok else DENIED)
                assert redis.Redis(port=srv.port).config_get("enable-debug-command") == {"enable-debug-command": mode}
        finally:
            rq.stop()
            ref.stop()


def test_protected_configs_flag() -> None:
    rq = start_respqueue("--enable-protected-configs", "yes")
    try:
        r = redis.Redis(port=rq.port)
        assert r.config_get("enable-protected-configs") == {"enable-protected-configs": "yes"}
        # allowed now, but respqueue's dir holds the open store: it stays fixed while running
        with pytest.raises(redis.ResponseError, match="can't set immutable config"):
            r.config_set("dir", "/tmp")
    finally:
        rq.stop()


def test_debug_sleep_out_of_range_answers_like_redis() -> None:
    rq = start_respqueue(debug_command="yes")
    ref = start_redis(debug_command="yes")
    try:
        a, b = RawConn(rq.port), RawConn(ref.port)
        t0 = time.monotonic()
        for v in ("1e300", "-1e300", "inf", "-inf", "nan", "-1", "abc", "", "9.3e12"):
            got, want = a.call_raw("DEBUG", "SLEEP", v), b.call_raw("DEBUG", "SLEEP", v)
            assert got == want == b"+OK\r\n", v
        assert time.monotonic() - t0 < 5  # none of them slept
        assert a.call_raw("PING") == b"+PONG\r\n"
        assert b"internal error" not in open(rq.log_path, "rb").read()
    finally:
        rq.stop()
        ref.stop()


def test_local_means_a_unix_socket_too(tmp_path: Any) -> None:
    import socket

    outs = []
    for start, flag in ((start_respqueue, "--unixsocket"), (start_redis, "--unixsocket")):
        path = str(tmp_path / (start.__name__ + ".sock"))
        srv = start(flag, path, "--protected-mode", "yes", debug_command="local")
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(5)
                s.connect(path)
                s.sendall(b"DEBUG SLEEP 0\r\n")
                outs.append(s.recv(100))
        finally:
            srv.stop()
    assert outs == [b"+OK\r\n", b"+OK\r\n"]

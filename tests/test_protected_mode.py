"""Protected mode against a real redis-server: clients from 127.0.0.2 (not loopback for Redis, which only
accepts 127.0.0.1, ::1 and Unix sockets) get the same -DENIED text and are disconnected."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import redis

from .servers import ServerProcess, redis_server_path, start_redis, start_respqueue

pytestmark = pytest.mark.skipif(redis_server_path() is None, reason="reference redis-server is not installed")


def _can_use_127_0_0_2() -> bool:
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.2", 0))
        return True
    except OSError:
        return False


needs_alias = pytest.mark.skipif(not _can_use_127_0_0_2(), reason="cannot bind a socket to 127.0.0.2 here")


def talk(port: int, source: str, data: bytes = b"PING\r\n") -> bytes:
    """Connect from ``source`` to 127.0.0.1:port, send ``data``, read until the server closes or stops."""
    with socket.socket() as s:
        s.settimeout(5)
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(data)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
                if out.endswith(b"\r\n") and (out.startswith(b"-DENIED") or out.count(b"\r\n") >= data.count(b"\r\n")):
                    break
        except TimeoutError:
            pass
        return out


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    # both bound to every interface, protected mode at its default (yes), no password
    rq = start_respqueue("--host", "0.0.0.0")
    ref = start_redis("--bind", "0.0.0.0")
    yield rq, ref
    rq.stop()
    ref.stop()


@needs_alias
def test_non_loopback_client_is_denied(pair: tuple[ServerProcess, ServerProcess]) -> None:
    rq, ref = pair
    got, want = talk(rq.port, "127.0.0.2"), talk(ref.port, "127.0.0.2")
    assert got == want
    assert got.startswith(b"-DENIED Redis is running in protected mode because protected mode is enabled")
    assert talk(rq.port, "127.0.0.1") == talk(ref.port, "127.0.0.1") == b"+PONG\r\n"
    for srv in pair:
        assert redis.Redis(port=srv.port).config_get("protected-mode") == {"protected-mode": "yes"}


@needs_alias
def test_a_password_or_protected_mode_off_lets_them_in(pair: tuple[ServerProcess, ServerProcess]) -> None:
    clients = [redis.Redis(port=srv.port) for srv in pair]
    try:
        for c in clients:
            c.config_set("requirepass", "pw")
        got = [talk(srv.port, "127.0.0.2", b"PING\r\nAUTH pw\r\nPING\r\n") for srv in pair]
        assert got[0] == got[1] == b"-NOAUTH Authentication required.\r\n+OK\r\n+PONG\r\n"
        for c in clients:
            c.config_set("requirepass", "")
            c.execute_command("ACL", "SETUSER", "default", "resetpass", ">pw2")
        got = [talk(srv.port, "127.0.0.2", b"AUTH pw2\r\nPING\r\n") for srv in pair]
        assert got[0] == got[1] == b"+OK\r\n+PONG\r\n"
        for c in clients:
            c.execute_command("ACL", "SETUSER", "default", "nopass")
        got = [talk(srv.port, "127.0.0.2") for srv in pair]
        assert got[0] == got[1] and got[0].startswith(b"-DENIED")
        for c in clients:
            with pytest.raises(redis.ResponseError) as e:
                c.config_set("protected-mode", "maybe")
            assert "argument must be 'yes' or 'no'" in str(e.value)
            c.config_set("protected-mode", "no")
        assert talk(pair[0].port, "127.0.0.2") == talk(pair[1].port, "127.0.0.2") == b"+PONG\r\n"
    finally:
        for c in clients:
            c.config_set("protected-mode", "yes")
            c.config_set("requirepass", "")
            c.execute_command("ACL", "SETUSER", "default", "nopass")
            c.close()


@needs_alias
def test_default_host_and_flag() -> None:
    # respqueue's default bind (127.0.0.1) with protected mode: a 127.0.0.2 client is still refused, as Redis
    # does with --bind 127.0.0.1; --protected-mode no (and its environment twin) turns it off
    rq = start_respqueue()
    ref = start_redis()
    try:
        got, want = talk(rq.port, "127.0.0.2"), talk(ref.port, "127.0.0.2")
        assert got == want and got.startswith(b"-DENIED")
        info = redis.Redis(port=rq.port).info("stats")
        assert info["rejected_connections"] >= 1
    finally:
        rq.stop()
        ref.stop()
    rq = start_respqueue("--protected-mode", "no")
    ref = start_redis("--protected-mode", "no")
    try:
        assert talk(rq.port, "127.0.0.2") == talk(ref.port, "127.0.0.2") == b"+PONG\r\n"
        assert redis.Redis(port=rq.port).config_get("protected-mode") == {"protected-mode": "no"}
    finally:
        rq.stop()
        ref.stop()

"""client-output-buffer-limit (respqueue/outbuf.py): CONFIG text as Redis 7, and the disconnections.

Each scenario runs against respqueue and a real redis-server with the same limits.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from .servers import RawConn, ServerProcess, encode_command, redis_server_path, start_redis, start_respqueue


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    if redis_server_path() is None:
        pytest.skip("reference redis-server is not installed")
    a = start_respqueue("--durability", "memory")
    b = start_redis()
    yield a, b
    a.stop()
    b.stop()


DEFAULT = "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"


@pytest.fixture
def admins(servers) -> Iterator[list[redis.Redis]]:
    rs = [redis.Redis(port=s.port, socket_timeout=30) for s in servers]
    for r in rs:
        r.config_set("client-output-buffer-limit", DEFAULT)
    yield rs
    for r in rs:
        r.config_set("client-output-buffer-limit", DEFAULT)
        r.close()


def test_config_get_set_same_as_redis(servers, admins):
    conns = [RawConn(s.port) for s in servers]
    try:
        for cmd in [
            ("CONFIG", "GET", "client-output-buffer-limit"),
            ("CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60"),
            ("CONFIG", "GET", "client-output-buffer-limit"),
            ("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 512kb 10"),
            ("CONFIG", "GET", "client-output-buffer-limit"),
            ("CONFIG", "SET", "client-output-buffer-limit", "NORMAL 10mb 5MB 0 slave 1gb 0 30"),
            ("CONFIG", "GET", "client-output-buffer-limit"),
            ("CONFIG", "SET", "client-output-buffer-limit", "normal 1 2"),
            ("CONFIG", "SET", "client-output-buffer-limit", "master 1mb 1mb 1"),
            ("CONFIG", "SET", "client-output-buffer-limit", "everyone 1mb 1mb 1"),
            ("CONFIG", "SET", "client-output-buffer-limit", "pubsub -1 0 0"),
            ("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 0 -5"),
            ("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1zb 0 0"),
            ("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 0 x"),
            ("CONFIG", "GET", "client-output-buffer-limit"),
            ("CONFIG", "GET", "client-output-*"),
        ]:
            ours, theirs = conns[0].call_raw(*cmd), conns[1].call_raw(*cmd)
            assert ours == theirs, (cmd, ours, theirs)
    finally:
        for c in conns:
            c.close()


def _lazy_subscriber(port: int, channel: bytes) -> socket.socket:
    """A subscriber that never reads after its SUBSCRIBE reply (a small receive buffer)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    s.sendall(encode_command([b"SUBSCRIBE", channel]))
    want = b"*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n" % (len(channel), channel)
    got = b""
    while len(got) < len(want):
        got += s.recv(len(want) - len(got))
    assert got == want
    return s


class Drainer(threading.Thread):
    """A subscriber that reads everything; counts the messages it got."""

    def __init__(self, port: int, channel: bytes) -> None:
        super().__init__(daemon=True)
        self.sub = redis.Redis(port=port, socket_timeout=60).pubsub()
        self.sub.subscribe(channel)
        assert self.sub.get_message(timeout=10)["type"] == "subscribe"
        self.count = 0
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            m = self.sub.get_message(timeout=0.2)
            if m is not None and m["type"] == "message":
                self.count += 1


def _closed(s: socket.socket, timeout: float = 30.0) -> bool:
    """Drain ``s`` until the server closes it (True) or nothing comes for a while (False)."""
    s.settimeout(timeout)
    try:
        while True:
            data = s.recv(1 << 20)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _numsub(r: redis.Redis, ch: str) -> int:
    return dict(r.pubsub_numsub(ch))[ch.encode()]


def _publish(port: int, channel: bytes, n: int, size: int) -> list[bytes]:
    """Pipeline ``n`` PUBLISH of ``size`` bytes; the replies."""
    c = RawConn(port, timeout=60)
    try:
        payload = encode_command([b"PUBLISH", channel, b"m" * size]) * n
        c.send_raw(payload)
        return [c.read_raw() for _ in range(n)]
    finally:
        c.close()


def test_pubsub_subscriber_that_never_reads_is_dropped_at_the_hard_limit(servers, admins):
    for srv, admin in zip(servers, admins, strict=True):
        admin.config_set("client-output-buffer-limit", "pubsub 256kb 0 0")
        before = admin.info("clients")["connected_clients"]
        lazy = _lazy_subscriber(srv.port, b"news")
        drainer = Drainer(srv.port, "news")
        drainer.start()
        try:
            assert _numsub(admin, "news") == 2
            # 16 MB in batches the reading subscriber keeps up with: past any socket buffers of the lazy one
            replies = []
            for i in range(20):
                replies += _publish(srv.port, b"news", 50, 16 * 1024)
                deadline = time.time() + 30
                while drainer.count < 50 * (i + 1) and time.time() < deadline:
                    time.sleep(0.01)
            assert replies[0] == b":2\r\n" and replies[-1] == b":1\r\n", (srv, replies[0], replies[-1])
            assert _closed(lazy)
            assert _numsub(admin, "news") == 1
            assert drainer.count == 1000  # the subscriber that reads got everything
            assert admin.ping()
        finally:
            drainer.stop = True
            drainer.join(5)
            drainer.sub.close()
            lazy.close()
        deadline = time.time() + 10
        while admin.info("clients")["connected_clients"] > before and time.time() < deadline:
            time.sleep(0.05)
        assert admin.info("clients")["connected_clients"] == before
    assert admins[0].info("stats")["client_output_buffer_limit_disconnections"] >= 1
    assert "closed for overcoming of output buffer limits (class pubsub" in servers[0].output()


def test_pubsub_soft_limit_for_longer_than_its_seconds(servers, admins):
    for srv, admin in zip(servers, admins, strict=True):
        admin.config_set("client-output-buffer-limit", "pubsub 0 128kb 1")
        lazy = _lazy_subscriber(srv.port, b"soft")
        try:
            _publish(srv.port, b"soft", 600, 16 * 1024)  # over the soft limit, under no hard one
            assert _numsub(admin, "soft") == 1  # not yet: the soft limit allows 1 s
            time.sleep(2.5)
            _publish(srv.port, b"soft", 1, 16)  # more output while still over it: dropped
            deadline = time.time() + 10
            while _numsub(admin, "soft") and time.time() < deadline:
                time.sleep(0.05)
            assert _numsub(admin, "soft") == 0, srv
        finally:
            lazy.close()


def test_normal_client_over_its_hard_limit(servers, admins):
    for srv, admin in zip(servers, admins, strict=True):
        admin.set("big", b"b" * 100_000)
        admin.config_set("client-output-buffer-limit", "normal 1mb 0 0")
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", srv.port))
        try:
            s.sendall(encode_command([b"GET", b"big"]) * 300)  # 30 MB of replies it does not read
            time.sleep(0.5)
            assert _closed(s)
            assert admin.get("big") == b"b" * 100_000  # everyone else carries on
        finally:
            s.close()
        admin.config_set("client-output-buffer-limit", DEFAULT)
        # with the default (no limit for normal clients) the same client is only paused, not dropped
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", srv.port))
        try:
            s.sendall(encode_command([b"GET", b"big"]) * 100)
            time.sleep(0.5)
            s.settimeout(30)
            got = 0
            while got < 100 * 100_011:  # each reply is $100000\r\n + 100,000 bytes + \r\n
                data = s.recv(1 << 20)
                assert data
                got += len(data)
            assert got == 100 * len(b"$100000\r\n" + b"b" * 100_000 + b"\r\n")
        finally:
            s.close()
        admin.delete("big")

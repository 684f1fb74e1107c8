"""TLS (respqueue/tls.py) against a real redis-server started with the same TLS flags.

Certificates are made at test time with the openssl CLI: a CA, a server certificate (localhost,
127.0.0.1), a client certificate, and a client certificate of another CA that must be refused.
Clients: redis-cli --tls, raw TLS sockets (byte for byte), redis-py (ssl=True), ioredis.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import hiredis
import pytest
import redis

from respqueue.config import Config
from respqueue.tls import client_context

from .servers import ROOT, RawConn, ServerProcess, free_port, redis_server_path, start_redis, start_respqueue

INTEROP = os.path.join(ROOT, "interop")
pytestmark = pytest.mark.skipif(
    shutil.which("openssl") is None or redis_server_path() is None, reason="needs the openssl CLI and redis-server"
)


def _openssl(*args: str, cwd: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _make_ca(d: str, name: str) -> None:
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.crt",
        "-days",
        "2",
        "-subj",
        f"/CN={name}",
        cwd=d,
    )


def _make_cert(d: str, name: str, ca: str, cn: str, san: str | None = None) -> None:
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
        "-subj",
        f"/CN={cn}",
        cwd=d,
    )
    extra: list[str] = []
    if san:
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(f"subjectAltName={san}\n")
        extra = ["-extfile", f"{name}.ext"]
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        f"{ca}.crt",
        "-CAkey",
        f"{ca}.key",
        "-CAcreateserial",
        "-out",
        f"{name}.crt",
        "-days",
        "2",
        *extra,
        cwd=d,
    )


class Certs:
    def __init__(self, d: str) -> None:
        self.dir = d

    def __getattr__(self, name: str) -> str:
        stem, _, ext = name.rpartition("_")
        return os.path.join(self.dir, f"{stem}.{ext}")


@pytest.fixture(scope="module")
def certs() -> Iterator[Certs]:
    d = tempfile.mkdtemp(prefix="rq-tls-")
    _make_ca(d, "ca")
    _make_cert(d, "server", "ca", "localhost", "DNS:localhost,IP:127.0.0.1")
    _make_cert(d, "server2", "ca", "localhost", "DNS:localhost,IP:127.0.0.1")
    _make_cert(d, "client", "ca", "client")
    _make_ca(d, "rogueca")
    _make_cert(d, "rogue", "rogueca", "rogue")
    yield Certs(d)
    shutil.rmtree(d, ignore_errors=True)


def _tls_flags(c: Certs, port: int, *extra: str) -> list[str]:
    return [
        "--tls-port",
        str(port),
        "--tls-cert-file",
        c.server_crt,
        "--tls-key-file",
        c.server_key,
        "--tls-ca-cert-file",
        c.ca_crt,
        *extra,
    ]


@pytest.fixture(scope="module")
def rq_tls(certs: Certs) -> Iterator[ServerProcess]:
    port = free_port()
    srv = start_respqueue(*_tls_flags(certs, port), "--durability", "memory")
    srv.tls_port = port  # type: ignore[attr-defined]
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def redis_tls(certs: Certs) -> Iterator[ServerProcess]:
    port = free_port()
    srv = start_redis(*_tls_flags(certs, port))
    srv.tls_port = port  # type: ignore[attr-defined]
    wait_tls(port, certs)
    yield srv
    srv.stop()


def client_ssl(c: Certs, cert: str | None = "client") -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=c.ca_crt)
    if cert is not None:
        ctx.load_cert_chain(getattr(c, cert + "_crt"), getattr(c, cert + "_key"))
    return ctx


class TlsRawConn(RawConn):
    """RawConn over TLS: each reply's exact bytes."""

    def __init__(self, port: int, ctx: ssl.SSLContext, timeout: float = 10.0) -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock = ctx.wrap_socket(sock, server_hostname="localhost")
        self.reader = hiredis.Reader()
        self.pending = b""


def wait_tls(port: int, c: Certs, timeout: float = 20.0) -> None:
    deadline = time.time() + timeout
    while True:
        try:
            conn = TlsRawConn(port, client_ssl(c), timeout=2)
            try:
                if conn.call_raw("PING") == b"+PONG\r\n":
                    return
            finally:
                conn.close()
        except (OSError, ConnectionError):
            if time.time() > deadline:
                raise
            time.sleep(0.1)


def tls_ping(port: int, ctx: ssl.SSLContext) -> bytes | str:
    """PING over TLS: the reply bytes, or the failure's class name (the handshake or the read failed)."""
    try:
        conn = TlsRawConn(port, ctx, timeout=10)
    except (OSError, ssl.SSLError) as e:
        return type(e).__name__
    try:
        return conn.call_raw("PING")
    except (OSError, ConnectionError, ssl.SSLError):
        # TLS 1.3: the server checks the client's certificate after the client's handshake ends
        return "closed"
    finally:
        conn.close()


def cli_tls(port: int, c: Certs, *args: str, cert: bool = True) -> tuple[int, str]:
    argv = ["redis-cli", "-p", str(port), "--tls", "--cacert", c.ca_crt]
    if cert:
        argv += ["--cert", c.client_crt, "--key", c.client_key]
    p = subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


# ---------------------------------------------------------------------------------------------------
def test_redis_cli_over_tls_same_as_redis(rq_tls, redis_tls, certs):
    script = [
        ("flushall",),
        ("ping",),
        ("set", "a", "hello world"),
        ("get", "a"),
        ("incr", "n"),
        ("rpush", "l", "x", "y"),
        ("lrange", "l", "0", "-1"),
        ("lpush", "a", "x"),
        ("nosuch",),
    ]
    for args in script:
        ours = cli_tls(rq_tls.tls_port, certs, *args)
        theirs = cli_tls(redis_tls.tls_port, certs, *args)
        assert ours == theirs, args
    assert cli_tls(rq_tls.tls_port, certs, "get", "a") == (0, "hello world\n")


def test_raw_replies_over_tls_same_as_redis(rq_tls, redis_tls, certs):
    ours = TlsRawConn(rq_tls.tls_port, client_ssl(certs))
    theirs = TlsRawConn(redis_tls.tls_port, client_ssl(certs))
    big = "v" * 200_000  # several TLS records each way
    cmds: list[tuple[Any, ...]] = [
        ("FLUSHALL",),
        ("SET", "k", big),
        ("GET", "k"),
        ("STRLEN", "k"),
        ("HSET", "h", "f", "1"),
        ("HGETALL", "h"),
        ("LPUSH", "k", "x"),
        ("EVAL", "return redis.call('incr', KEYS[1])", "1", "c"),
        ("MULTI",),
        ("INCR", "c"),
        ("GET", "c"),
        ("EXEC",),
        ("CONFIG", "GET", "tls-auth-clients"),
        ("CONFIG", "GET", "tls-replication"),
        ("CONFIG", "SET", "tls-auth-clients", "maybe"),
        ("CONFIG", "SET", "tls-replication", "maybe"),
        ("PING",),
    ]
    try:
        for cmd in cmds:
            assert ours.call_raw(*cmd) == theirs.call_raw(*cmd), cmd
        ours.call_raw("HELLO", "3")  # (server version and client id differ)
        theirs.call_raw("HELLO", "3")
        for cmd in [("HGETALL", "h"), ("GET", "nope"), ("INCRBYFLOAT", "f", "1.5")]:
            assert ours.call_raw(*cmd) == theirs.call_raw(*cmd), cmd
        # a pipeline of 500 requests in one write, replies across many TLS records
        payload = b"".join(b"*3\r\n$5\r\nRPUSH\r\n$1\r\nl\r\n$3\r\n%03d\r\n" % (i % 1000) for i in range(500))
        for conn in (ours, theirs):
            conn.send_raw(payload)
        for _ in range(500):
            assert ours.read_raw() == theirs.read_raw()
    finally:
        ours.close()
        theirs.close()


def test_config_get_tls_params(rq_tls, redis_tls, certs):
    ours = redis.Redis(port=rq_tls.port)
    theirs = redis.Redis(port=redis_tls.port)
    for name in ("tls-auth-clients", "tls-replication", "tls-protocols", "tls-ca-cert-dir", "tls-key-file-pass"):
        assert ours.config_get(name) == theirs.config_get(name), name
    got = ours.config_get("tls-*")
    assert got["tls-port"] == str(rq_tls.tls_port)
    assert got["tls-cert-file"] == certs.server_crt and got["tls-ca-cert-file"] == certs.ca_crt
    assert ours.config_get("port") == {"port": str(rq_tls.port)}


def test_redis_py_ssl(rq_tls, certs):
    r = redis.Redis(
        port=rq_tls.tls_port,
        ssl=True,
        ssl_ca_certs=certs.ca_crt,
        ssl_certfile=certs.client_crt,
        ssl_keyfile=certs.client_key,
        socket_timeout=10,
    )
    try:
        r.set("py", "over tls")
        assert r.get("py") == b"over tls"
        p = r.pipeline()
        for _ in range(100):
            p.incr("pyc")
        assert p.execute()[-1] == 100
        # the same data on the plain port: one server, two listeners
        assert redis.Redis(port=rq_tls.port).get("py") == b"over tls"
    finally:
        r.close()


@pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(os.path.join(INTEROP, "node_modules")),
    reason="run `npm ci` in interop/ for the Node client tests",
)
def test_ioredis_tls_same_as_redis(rq_tls, redis_tls, certs):
    def run(port: int, *extra: str) -> dict[str, Any]:
        p = subprocess.run(
            ["node", "tls_ioredis.js", str(port), certs.ca_crt, *extra],
            cwd=INTEROP,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    ours = run(rq_tls.tls_port, certs.client_crt, certs.client_key)
    theirs = run(redis_tls.tls_port, certs.client_crt, certs.client_key)
    assert "connect" not in ours and ours["big"] == 300000, ours
    assert ours == theirs


def test_client_certificate_required_by_default(rq_tls, redis_tls, certs):
    for srv in (rq_tls, redis_tls):
        assert tls_ping(srv.tls_port, client_ssl(certs)) == b"+PONG\r\n"
        # no certificate, or one from another CA: refused by both servers
        assert tls_ping(srv.tls_port, client_ssl(certs, None)) != b"+PONG\r\n"
        assert tls_ping(srv.tls_port, client_ssl(certs, "rogue")) != b"+PONG\r\n"
        code, out = cli_tls(srv.tls_port, certs, "ping", cert=False)
        assert "PONG" not in out
    # and respqueue is fine afterwards
    assert redis.Redis(port=rq_tls.port).ping()
    assert tls_ping(rq_tls.tls_port, client_ssl(certs)) == b"+PONG\r\n"


def test_tls_auth_clients_optional_and_no_at_runtime(rq_tls, redis_tls, certs):
    for srv in (rq_tls, redis_tls):
        admin = redis.Redis(port=srv.port)
        try:
            assert admin.config_set("tls-auth-clients", "optional")
            assert admin.config_get("tls-auth-clients") == {"tls-auth-clients": "optional"}
            assert tls_ping(srv.tls_port, client_ssl(certs, None)) == b"+PONG\r\n"
            assert tls_ping(srv.tls_port, client_ssl(certs)) == b"+PONG\r\n"
            # optional still checks a certificate that is sent
            assert tls_ping(srv.tls_port, client_ssl(certs, "rogue")) != b"+PONG\r\n"
            assert admin.config_set("tls-auth-clients", "no")
            assert tls_ping(srv.tls_port, client_ssl(certs, None)) == b"+PONG\r\n"
        finally:
            admin.config_set("tls-auth-clients", "yes")
        assert tls_ping(srv.tls_port, client_ssl(certs, None)) != b"+PONG\r\n"


def test_tls_auth_clients_no_from_the_start(certs):
    port = free_port()
    srv = start_respqueue(*_tls_flags(certs, port, "--tls-auth-clients", "no"), "--durability", "memory")
    try:
        assert tls_ping(port, client_ssl(certs, None)) == b"+PONG\r\n"
        code, out = cli_tls(port, certs, "ping", cert=False)
        assert (code, out) == (0, "PONG\n")
    finally:
        srv.stop()


def test_plain_text_client_on_tls_port_is_dropped(rq_tls, certs):
    s = socket.create_connection(("127.0.0.1", rq_tls.tls_port), timeout=15)
    try:
        s.sendall(b"PING\r\n*1\r\n$4\r\nPING\r\n")
        try:
            data = s.recv(4096)
            while data and b"PONG" not in data:
                data = s.recv(4096)
        except (ConnectionResetError, TimeoutError):
            data = b""
        assert b"PONG" not in data
    finally:
        s.close()
    # a client that connects and sends nothing does not hold anyone up
    idle = socket.create_connection(("127.0.0.1", rq_tls.tls_port), timeout=5)
    try:
        assert tls_ping(rq_tls.tls_port, client_ssl(certs)) == b"+PONG\r\n"
        assert redis.Redis(port=rq_tls.port).ping()
    finally:
        idle.close()
    assert rq_tls.proc.poll() is None
    assert "Traceback" not in rq_tls.output()


def _spawn(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    return subprocess.Popen(
        [sys.executable, "-m", "respqueue", "serve", *args],
        env=e,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def test_tls_only_with_port_0_from_env_and_toml(certs, tmp_path):
    port = free_port()
    toml = tmp_path / "rq.toml"
    toml.write_text(
        f'port = 0\ntls-cert-file = "{certs.server_crt}"\ntls-key-file = "{certs.server_key}"\n'
        f'tls_ca_cert_file = "{certs.ca_crt}"\n'
    )
    p = _spawn(
        "--config",
        str(toml),
        "--dir",
        str(tmp_path / "data"),
        "--durability",
        "memory",
        env={"RESPQUEUE_TLS_PORT": str(port)},
    )
    try:
        wait_tls(port, certs)
        conn = TlsRawConn(port, client_ssl(certs))
        try:
            assert conn.call_raw("CONFIG", "GET", "port") == b"*2\r\n$4\r\nport\r\n$1\r\n0\r\n"
            assert conn.call_raw("CONFIG", "GET", "tls-port") == b"*2\r\n$8\r\ntls-port\r\n$%d\r\n%d\r\n" % (
                len(str(port)),
                port,
            )
        finally:
            conn.close()
    finally:
        p.terminate()
        out, _ = p.communicate(timeout=20)
    assert "listening with TLS" in out and "listening on" not in out, out


@pytest.mark.parametrize("case", ["missing cert", "missing key", "no CA", "bad protocol"])
def test_bad_tls_settings_fail_startup_clearly(certs, tmp_path, case):
    cert, key, ca = certs.server_crt, certs.server_key, ["--tls-ca-cert-file", certs.ca_crt]
    extra: list[str] = []
    want = ""
    if case == "missing cert":
        cert = str(tmp_path / "nope.crt")
        want = f"Failed to load certificate: {cert}: No such file or directory"
    elif case == "missing key":
        key = str(tmp_path / "nope.key")
        want = f"Failed to load private key: {key}: No such file or directory"
    elif case == "no CA":
        ca = []
        want = "Either tls-ca-cert-file or tls-ca-cert-dir must be specified"
    else:
        extra = ["--tls-protocols", "SSLv3"]
        want = "tls-protocols: unknown protocol 'SSLv3'"
    p = _spawn(
        "--port",
        str(free_port()),
        "--tls-port",
        str(free_port()),
        "--tls-cert-file",
        cert,
        "--tls-key-file",
        key,
        *ca,
        *extra,
        "--dir",
        str(tmp_path / "data"),
        "--durability",
        "memory",
    )
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 1, out
    assert want in out and "Traceback" not in out, out


def test_client_context_for_replication_links(rq_tls, certs):
    cfg = Config.load(
        {
            "tls_ca_cert_file": certs.ca_crt,
            "tls_client_cert_file": certs.client_crt,
            "tls_client_key_file": certs.client_key,
        },
        environ={},
    )
    assert cfg.tls_replication == "no"
    ctx = client_context(cfg)
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    conn = TlsRawConn(rq_tls.tls_port, ctx)
    try:
        assert conn.call_raw("PING") == b"+PONG\r\n"
    finally:
        conn.close()
    # without a client certificate of its own it presents the server's (Redis's rule): accepted too
    cfg2 = Config.load(
        {"tls_ca_cert_file": certs.ca_crt, "tls_cert_file": certs.server_crt, "tls_key_file": certs.server_key},
        environ={},
    )
    assert tls_ping(rq_tls.tls_port, client_context(cfg2)) == b"+PONG\r\n"
    # a server certificate from another CA is refused
    cfg3 = Config.load({"tls_ca_cert_file": certs.rogueca_crt}, environ={})
    assert tls_ping(rq_tls.tls_port, client_context(cfg3)) == "SSLCertVerificationError"


def _peer_cert(port: int, c: Certs) -> bytes:
    conn = TlsRawConn(port, client_ssl(c))
    try:
        assert conn.call_raw("PING") == b"+PONG\r\n"
        der = conn.sock.getpeercert(binary_form=True)
        assert der is not None
        return der
    finally:
        conn.close()


def _der(path: str) -> bytes:
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def test_config_set_reloads_tls_settings_as_redis(rq_tls, redis_tls, certs):
    """Certificate rotation and CA changes at runtime, for new connections; bad values change nothing."""
    conns = [RawConn(rq_tls.port), RawConn(redis_tls.port)]
    ports = [rq_tls.tls_port, redis_tls.tls_port]
    open_conns = [TlsRawConn(p, client_ssl(certs)) for p in ports]

    def same(*cmd: Any) -> bytes:
        ours, theirs = conns[0].call_raw(*cmd), conns[1].call_raw(*cmd)
        assert ours == theirs, (cmd, ours, theirs)
        return ours

    try:
        assert same("CONFIG", "SET", "tls-cert-file", "/nonexistent.crt").startswith(b"-ERR CONFIG SET failed")
        same("CONFIG", "GET", "tls-cert-file")
        same("CONFIG", "SET", "tls-ca-cert-file", "/nonexistent-ca.crt")
        same("CONFIG", "SET", "tls-protocols", "bogus")
        same("CONFIG", "GET", "tls-protocols")
        same("CONFIG", "GET", "tls-ca-cert-file")
        for p in ports:
            assert _peer_cert(p, certs) == _der(certs.server_crt)
        # rotate the server certificate
        assert (
            same("CONFIG", "SET", "tls-cert-file", certs.server2_crt, "tls-key-file", certs.server2_key) == b"+OK\r\n"
        )
        same("CONFIG", "GET", "tls-key-file")
        for p in ports:
            assert _peer_cert(p, certs) == _der(certs.server2_crt)
        # another CA for client certificates
        assert same("CONFIG", "SET", "tls-ca-cert-file", certs.rogueca_crt) == b"+OK\r\n"
        for p in ports:
            assert tls_ping(p, client_ssl(certs, "rogue")) == b"+PONG\r\n"
            assert tls_ping(p, client_ssl(certs)) != b"+PONG\r\n"
        same("CONFIG", "SET", "tls-protocols", "TLSv1.2")
        same("CONFIG", "GET", "tls-protocols")
        for p in ports:
            conn = TlsRawConn(p, client_ssl(certs, "rogue"))
            assert conn.sock.version() == "TLSv1.2"
            conn.close()
        # connections made before keep working
        for c in open_conns:
            assert c.call_raw("PING") == b"+PONG\r\n"
    finally:
        for c in conns:
            c.call_raw("CONFIG", "SET", "tls-cert-file", certs.server_crt, "tls-key-file", certs.server_key)
            c.call_raw("CONFIG", "SET", "tls-ca-cert-file", certs.ca_crt, "tls-protocols", "")
            c.close()
        for c in open_conns:
            c.close()
    for p in ports:
        assert tls_ping(p, client_ssl(certs)) == b"+PONG\r\n"
        assert _peer_cert(p, certs) == _der(certs.server_crt)


@pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(os.path.join(INTEROP, "node_modules", "bullmq")),
    reason="run `npm ci` in interop/ for the BullMQ tests",
)
def test_bullmq_over_tls_same_as_redis(rq_tls, redis_tls, certs):
    """A BullMQ Queue, QueueEvents and Worker on ioredis TLS connections: same outcome as on Redis."""

    def run(port: int) -> dict[str, Any]:
        p = subprocess.run(
            ["node", "tls_bullmq.js", str(port), certs.ca_crt, certs.client_crt, certs.client_key],
            cwd=INTEROP,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    ours = run(rq_tls.tls_port)
    theirs = run(redis_tls.tls_port)
    assert ours["completed"] == 20 and ours["events"] == 20 and ours["info"], ours
    assert ours == theirs


def test_config_set_tls_port_as_redis(rq_tls, redis_tls, certs):
    conns = [RawConn(rq_tls.port), RawConn(redis_tls.port)]
    servers = [rq_tls, redis_tls]

    def same(*cmd: Any) -> bytes:
        ours, theirs = conns[0].call_raw(*cmd), conns[1].call_raw(*cmd)
        assert ours == theirs, (cmd, ours, theirs)
        return ours

    held = [TlsRawConn(s.tls_port, client_ssl(certs)) for s in servers]
    try:
        same("CONFIG", "SET", "tls-port", "abc")
        same("CONFIG", "SET", "tls-port", "70000")
        for c, s in zip(conns, servers, strict=True):  # a port that is taken: its own plain port
            assert c.call_raw("CONFIG", "SET", "tls-port", str(s.port)) == (
                b"-ERR CONFIG SET failed (possibly related to argument 'tls-port') - "
                b"Unable to listen on this port. Check server logs.\r\n"
            )
            assert c.call_raw("CONFIG", "GET", "tls-port").endswith(b"%d\r\n" % s.tls_port)
        new_ports = [free_port(), free_port()]
        for c, p in zip(conns, new_ports, strict=True):
            assert c.call_raw("CONFIG", "SET", "tls-port", str(p)) == b"+OK\r\n"
        for s, p in zip(servers, new_ports, strict=True):
            wait_tls(p, certs)
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", s.tls_port), timeout=5).close()
        same("CONFIG", "SET", "tls-port", "0")
        same("CONFIG", "GET", "tls-port")
        for p in new_ports:
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", p), timeout=5).close()
        for c in held:  # connections made before any of it carry on
            assert c.call_raw("PING") == b"+PONG\r\n"
    finally:
        for c, s in zip(conns, servers, strict=True):
            c.call_raw("CONFIG", "SET", "tls-port", str(s.tls_port))
            c.close()
        for c in held:
            c.close()
    for s in servers:
        wait_tls(s.tls_port, certs)

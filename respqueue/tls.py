"""TLS as Redis 7 configures it: the server's SSLContext and the one replication clients use.

The server listens with TLS on ``tls-port`` beside the plain ``port`` (``port 0`` leaves only the TLS
listener, as ``redis-server --port 0 --tls-port 6380``). The listener is an ordinary asyncio server
created with ``ssl=server_context(config)``: asyncio runs the handshake and hands the connection
protocol (:class:`respqueue.protocol.ClientConnection`) a transport that reads and writes clear text,
so nothing downstream knows whether a client came over TLS. CONFIG SET of the files, protocols or ciphers
builds a new context (:func:`reload`) that the listener's servername callback hands to each new connection
(:func:`listener_context`); open connections keep theirs. A client that fails the handshake
(plain text on the TLS port, no or a bad certificate) is dropped by asyncio before any protocol
object exists.

Settings (names as Redis's, also flags ``--tls-...``, ``RESPQUEUE_TLS_...`` and TOML keys):

- ``tls-cert-file``, ``tls-key-file`` (``tls-key-file-pass``): the server's certificate and key (PEM).
- ``tls-ca-cert-file`` / ``tls-ca-cert-dir``: the CAs client (and, for replication, server)
  certificates are checked against.
- ``tls-auth-clients``: ``yes`` (default, a client certificate is required), ``optional`` (checked
  when sent) or ``no``.
- ``tls-protocols``: e.g. ``"TLSv1.2 TLSv1.3"`` (default: both).
- ``tls-ciphers``: the TLSv1.2 cipher list (OpenSSL syntax).
- ``tls-replication``: whether replication links use TLS; :func:`client_context` is their context,
  with ``tls-client-cert-file``/``tls-client-key-file`` (default: the server's pair) as Redis.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from typing import Any

log = logging.getLogger("respqueue")

AUTH_MODES = {"yes": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL, "no": ssl.CERT_NONE}
_PROTOCOLS = {
    "tlsv1": ssl.TLSVersion.TLSv1,
    "tlsv1.1": ssl.TLSVersion.TLSv1_1,
    "tlsv1.2": ssl.TLSVersion.TLSv1_2,
    "tlsv1.3": ssl.TLSVersion.TLSv1_3,
}


class TLSConfigError(OSError):
    """A TLS setting that cannot be used; the message says which and why (startup fails with it)."""


def parse_auth_clients(v: str) -> str:
    """``yes``, ``no`` or ``optional`` (case-insensitive); ValueError otherwise."""
    low = str(v).strip().lower()
    if low not in AUTH_MODES:
        raise ValueError("argument(s) must be one of the following: no, yes, optional")
    return low


def parse_protocols(v: str | None) -> tuple[ssl.TLSVersion, ssl.TLSVersion] | None:
    """``tls-protocols`` ("TLSv1.2 TLSv1.3") as (lowest, highest) versions; None when empty."""
    if not v or not v.strip():
        return None
    versions = []
    for word in v.split():
        ver = _PROTOCOLS.get(word.lower())
        if ver is None:
            raise TLSConfigError(f"tls-protocols: unknown protocol '{word}' (use TLSv1.2 and/or TLSv1.3)")
        versions.append(ver)
    return min(versions), max(versions)


def _load_pair(ctx: ssl.SSLContext, cert: str | None, key: str | None, password: str | None, what: str) -> None:
    if not cert or not key:
        raise TLSConfigError(f"{what}: both a certificate file and a key file are needed")
    for path, name in ((cert, "certificate"), (key, "private key")):
        try:
            with open(path, "rb"):
                pass
        except OSError as e:
            raise TLSConfigError(f"Failed to load {name}: {path}: {e.strerror or e}") from None
    try:
        ctx.load_cert_chain(cert, key, password=password or None)
    except (ssl.SSLError, ValueError) as e:
        raise TLSConfigError(f"Failed to load certificate {cert} with key {key}: {e}") from None


def _load_cas(ctx: ssl.SSLContext, cafile: str | None, capath: str | None) -> None:
    try:
        ctx.load_verify_locations(cafile=cafile or None, capath=capath or None)
    except (OSError, ssl.SSLError) as e:
        which = cafile or capath
        raise TLSConfigError(f"Failed to configure CA certificate(s) file/directory {which}: {e}") from None


def _base(cfg: Any, purpose: int) -> ssl.SSLContext:
    ctx = ssl.SSLContext(purpose)
    ctx.options |= ssl.OP_NO_COMPRESSION
    rng = parse_protocols(getattr(cfg, "tls_protocols", None))
    if rng is not None:
        ctx.minimum_version, ctx.maximum_version = rng
    else:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ciphers = getattr(cfg, "tls_ciphers", None)
    if ciphers:
        try:
            ctx.set_ciphers(ciphers)
        except ssl.SSLError as e:
            raise TLSConfigError(f"Failed to configure ciphers: {ciphers}: {e}") from None
    return ctx


def server_context(cfg: Any) -> ssl.SSLContext:
    """The SSLContext of the TLS listener; raises TLSConfigError with a clear message."""
    try:
        mode = AUTH_MODES[parse_auth_clients(cfg.tls_auth_clients)]
    except ValueError:
        raise TLSConfigError(f"tls-auth-clients must be yes, no or optional, not '{cfg.tls_auth_clients}'") from None
    ctx = _base(cfg, ssl.PROTOCOL_TLS_SERVER)
    _load_pair(ctx, cfg.tls_cert_file, cfg.tls_key_file, cfg.tls_key_file_pass, "tls-cert-file/tls-key-file")
    needs_ca = mode != ssl.CERT_NONE or cfg.tls_replication == "yes"
    if cfg.tls_ca_cert_file or cfg.tls_ca_cert_dir:
        _load_cas(ctx, cfg.tls_ca_cert_file, cfg.tls_ca_cert_dir)
    elif needs_ca:
        raise TLSConfigError(
            "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication"
            " or tls-auth-clients are enabled!"
        )
    ctx.verify_mode = mode
    return ctx


def listener_context(server: Any) -> ssl.SSLContext:
    """The context the TLS listener is created with (``server.tls_listener``), which is also the current
    one (``server.tls_context``) until CONFIG SET reloads the TLS settings: its servername callback, which
    OpenSSL runs for every ClientHello (with or without SNI), then hands each new connection the current
    context (certificate, key and CA store). Raises TLSConfigError."""
    ctx = server_context(server.config)

    def use_current(sslobj: Any, _name: str | None, ctx0: ssl.SSLContext) -> None:
        cur = server.tls_context
        if cur is not None and cur is not ctx0:
            sslobj.context = cur

    ctx.sni_callback = use_current
    server.tls_context = server.tls_listener = ctx
    return ctx


# settings CONFIG SET can change at runtime: new connections get a context built from them
RELOADABLE = frozenset(
    {
        "tls-cert-file",
        "tls-key-file",
        "tls-key-file-pass",
        "tls-ca-cert-file",
        "tls-ca-cert-dir",
        "tls-protocols",
        "tls-ciphers",
        "tls-client-cert-file",
        "tls-client-key-file",
        "tls-client-key-file-pass",
    }
)


def reload(server: Any) -> None:
    """After CONFIG SET of a RELOADABLE setting: build the context from the new settings (TLSConfigError
    when they cannot be used) and make it the one new connections get; connections already open keep
    theirs, as in Redis. Without TLS (no tls-port, tls-replication no) there is nothing to check."""
    cfg = server.config
    if not cfg.tls_port and cfg.tls_replication != "yes":
        return
    new = server_context(cfg)
    if cfg.tls_replication == "yes":
        client_context(cfg)
    front = getattr(server, "tls_listener", None)
    if front is not None:
        # what each connection takes from the listener's context when it is created
        front.verify_mode = new.verify_mode
        front.minimum_version, front.maximum_version = new.minimum_version, new.maximum_version
        front.set_ciphers(cfg.tls_ciphers or getattr(ssl, "_DEFAULT_CIPHERS", "DEFAULT"))
        server.tls_context = new


def set_auth_clients(server: Any, value: str) -> None:
    """CONFIG SET tls-auth-clients: applies to connections accepted from now on."""
    for ctx in {
        id(c): c for c in (getattr(server, "tls_listener", None), getattr(server, "tls_context", None))
    }.values():
        if ctx is not None:
            ctx.verify_mode = AUTH_MODES[value]


def client_context(cfg: Any) -> ssl.SSLContext:
    """The SSLContext for outgoing TLS links (replication with ``tls-replication yes``).

    It checks the peer against ``tls-ca-cert-file``/``tls-ca-cert-dir`` (hostnames are not checked,
    as Redis) and presents ``tls-client-cert-file``/``tls-client-key-file`` when set, else the
    server's own ``tls-cert-file``/``tls-key-file`` (Redis's rule), else no certificate.
    """
    ctx = _base(cfg, ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    if cfg.tls_ca_cert_file or cfg.tls_ca_cert_dir:
        _load_cas(ctx, cfg.tls_ca_cert_file, cfg.tls_ca_cert_dir)
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        raise TLSConfigError("Either tls-ca-cert-file or tls-ca-cert-dir must be specified for TLS client links")
    if cfg.tls_client_cert_file:
        _load_pair(
            ctx,
            cfg.tls_client_cert_file,
            cfg.tls_client_key_file,
            cfg.tls_client_key_file_pass,
            "tls-client-cert-file/tls-client-key-file",
        )
    elif cfg.tls_cert_file:
        _load_pair(ctx, cfg.tls_cert_file, cfg.tls_key_file, cfg.tls_key_file_pass, "tls-cert-file/tls-key-file")
    return ctx


# ---- the listener ----------------------------------------------------------------------------------
def _bind(hosts: list[str] | None, port: int) -> list[socket.socket]:
    """Listening sockets on ``port`` for each address of ``hosts`` (all when None); OSError when one fails."""
    socks: list[socket.socket] = []
    seen: set[Any] = set()
    try:
        for host in hosts or [None]:
            for family, type_, proto, _, addr in socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            ):
                if addr in seen:
                    continue
                seen.add(addr)
                s = socket.socket(family, type_, proto)
                socks.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                s.bind(addr)
                s.listen(511)
                s.setblocking(False)
                if port == 0:
                    port = s.getsockname()[1]
    except OSError:
        for s in socks:
            s.close()
        raise
    if not socks:
        raise OSError(f"no address to listen on for {hosts}")
    return socks


async def _serve(server: Any, socks: list[socket.socket]) -> None:
    from .protocol import ClientConnection

    loop = asyncio.get_running_loop()
    for sock in socks:
        srv = await loop.create_server(
            lambda: ClientConnection(server), sock=sock, ssl=server.tls_listener, ssl_handshake_timeout=10.0
        )
        server.tls_servers.append(srv)
        server.listeners.append(srv)


def _hosts(server: Any) -> list[str] | None:
    h = server.config.host
    return h.split() if h else None


async def listen(server: Any) -> None:
    """Start the TLS listener on ``tls-port`` (the context is :func:`listener_context`'s)."""
    socks = _bind(_hosts(server), server.config.tls_port)
    server.tls_port = socks[0].getsockname()[1]
    await _serve(server, socks)
    log.info("listening with TLS on %s port %d", server.config.host, server.tls_port)


def change_port(server: Any, port: int) -> None:
    """CONFIG SET tls-port: listen with TLS on ``port`` instead (0: no TLS listener). The new sockets are
    bound before this returns (OSError, e.g. the port is taken: nothing changes); open connections stay."""
    if port and port == server.tls_port and server.tls_servers:
        return
    socks: list[socket.socket] = []
    if port:
        if server.tls_listener is None:
            listener_context(server)  # TLSConfigError when TLS is not configured
        socks = _bind(_hosts(server), port)
    for srv in server.tls_servers:
        srv.close()
        if srv in server.listeners:
            server.listeners.remove(srv)
    server.tls_servers = []
    server.tls_port = socks[0].getsockname()[1] if socks else 0
    if socks:
        asyncio.get_running_loop().create_task(_serve(server, socks))
        log.info("listening with TLS on %s port %d", server.config.host, server.tls_port)
    else:
        log.info("TLS listener closed (tls-port 0)")

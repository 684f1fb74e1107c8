"""The metrics and dashboard HTTP server (``--metrics-port``): a small HTTP/1.1 server on asyncio streams.

Routes: ``GET /metrics`` (Prometheus text format, :mod:`respqueue.http.metrics`), ``GET /`` (the dashboard
page, :mod:`respqueue.http.dashboard`), ``GET /healthz``, plus what others register in ``server.http_routes``
(compat/ adds the dashboard's JSON API for BullMQ queues). This module never imports compat/.

Requests are parsed by hand: a request line, headers, an optional ``Content-Length`` body (no chunked
bodies), keep-alive by default on HTTP/1.1. A malformed request gets ``400`` and the connection closes;
a handler that raises gets ``500`` (logged), never a crash.

Access (one place, :func:`authorize`): ``/metrics`` and ``/healthz`` are open. Reads (the page and the GET
API) need HTTP Basic credentials when ``requirepass`` is set. Actions (POST) need credentials when
``requirepass`` is set, and without it are accepted only from a loopback address. Credentials are checked
by :func:`_authenticate` alone (user ``default`` and requirepass today; ACL users when ``respqueue.acl``
provides ``authenticate``). POST bodies must be ``application/json``, which a cross-site form cannot send.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import ipaddress
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger("respqueue")

#: fn(server) run when the HTTP server starts, before it listens: plug-ins add their metrics providers and
#: routes (compat/metrics.py registers BullMQ's queues and the dashboard's JSON API here)
PLUGINS: list[Callable[[Any], Any]] = []

MAX_LINE = 8192
MAX_HEADERS = 100
MAX_BODY = 1 << 20
IDLE_TIMEOUT = 30.0
REASONS = {
    200: "OK",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    409: "Conflict",
    411: "Length Required",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: bytes
    peer: str
    user: str | None = None

    def json(self) -> Any:
        """The body as JSON (ValueError when it is not)."""
        return json.loads(self.body.decode("utf-8")) if self.body else {}


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


def json_response(obj: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(obj, separators=(",", ":"), default=str).encode(), "application/json")


def text_response(status: int, text: str) -> Response:
    return Response(status, (text + "\n").encode())


Handler = Callable[[Request], Awaitable[Response]]


@dataclass
class Route:
    """``access``: ``open`` (anyone), ``read`` (credentials when requirepass is set) or ``write``
    (credentials when requirepass is set; loopback only without it)."""

    handler: Handler
    access: str = "read"


def add_route(server: Any, method: str, path: str, handler: Handler, access: str = "read") -> None:
    """Register an endpoint on ``server`` (exact path match)."""
    server.http_routes[(method.upper(), path)] = Route(handler, access)


# ---- authentication ---------------------------------------------------------------------------
def _authenticate(server: Any, user: str, password: str) -> bool:
    """The one credentials check of the HTTP server. ACL users when ``respqueue.acl`` provides
    ``authenticate(server, user, password)``; otherwise user ``default`` with ``requirepass``."""
    try:
        from respqueue import acl  # type: ignore[attr-defined]
    except ImportError:
        acl = None
    fn = getattr(acl, "authenticate", None)
    if fn is not None:
        return bool(fn(server, user, password))
    pw = server.config.requirepass
    if not pw or user != "default":
        return False
    return secrets.compare_digest(password.encode(), pw.encode())


def _basic_credentials(headers: dict[str, str]) -> tuple[str, str] | None:
    h = headers.get("authorization", "")
    scheme, _, token = h.partition(" ")
    if scheme.lower() != "basic" or not token:
        return None
    try:
        raw = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, pw = raw.partition(":")
    return (user, pw) if sep else None


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return host == "" or host.startswith("/")  # a Unix socket peer


def authorize(server: Any, req: Request, access: str) -> Response | None:
    """None when ``req`` may use a route of ``access``; else the 401/403 response."""
    if access == "open":
        return None
    needs_password = bool(server.config.requirepass)
    creds = _basic_credentials(req.headers)
    if creds is not None and _authenticate(server, creds[0], creds[1]):
        req.user = creds[0]
        return None
    if not needs_password:
        if access == "read" or is_loopback(req.peer):
            return None
        return text_response(403, "actions need a password (requirepass) when not sent from loopback")
    r = text_response(401, "authentication required")
    r.headers["WWW-Authenticate"] = 'Basic realm="respqueue", charset="UTF-8"'
    return r


# ---- the server -------------------------------------------------------------------------------
class BadRequest(Exception):
    def __init__(self, status: int, msg: str) -> None:
        super().__init__(msg)
        self.status = status


class HttpServer:
    def __init__(self, server: Any) -> None:
        self.server = server
        self.listeners: list[asyncio.AbstractServer] = []
        self.port = 0
        self.requests = 0
        self.conns: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        cfg = self.server.config
        if not 0 < cfg.metrics_port < 65536:
            raise OSError(f"bad --metrics-port {cfg.metrics_port}: use 1-65535, or 0 for off")
        host = cfg.metrics_host if cfg.metrics_host is not None else cfg.host
        hosts = host.split() if host else None
        srv = await asyncio.start_server(self._serve, hosts, cfg.metrics_port, reuse_address=True, limit=MAX_LINE)
        self.listeners.append(srv)
        socks = srv.sockets or []
        if socks:
            self.port = socks[0].getsockname()[1]
        log.info("metrics and dashboard on http://%s:%d/", host, self.port)

    def close(self) -> None:
        for srv in self.listeners:
            srv.close()
        for w in list(self.conns):
            w.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        peer_host = peer[0] if isinstance(peer, tuple) else ""
        self.conns.add(writer)
        try:
            while True:
                try:
                    req = await asyncio.wait_for(self._read_request(reader, peer_host), IDLE_TIMEOUT)
                except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                    return
                except BadRequest as e:
                    self._write(writer, text_response(e.status, str(e)), False)
                    await writer.drain()
                    return
                if req is None:
                    return
                keep = self._keep_alive(req)
                resp = await self._dispatch(req)
                self._write(writer, resp, keep, head=req.method == "HEAD")
                await writer.drain()
                if not keep:
                    return
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.conns.discard(writer)
            writer.close()

    @staticmethod
    def _keep_alive(req: Request) -> bool:
        conn = req.headers.get("connection", "").lower()
        if req.headers.get(":version") == "HTTP/1.0":
            return conn == "keep-alive"
        return conn != "close"

    async def _read_request(self, reader: asyncio.StreamReader, peer: str) -> Request | None:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as e:
            if not e.partial.strip():
                return None
            raise BadRequest(400, "incomplete request line") from None
        except asyncio.LimitOverrunError:
            raise BadRequest(400, "request line too long") from None
        parts = line.decode("latin-1").strip().split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise BadRequest(400, "malformed request line")
        method, target, version = parts
        headers: dict[str, str] = {":version": version}
        for _ in range(MAX_HEADERS + 1):
            try:
                h = await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError:
                raise BadRequest(400, "header line too long") from None
            h = h.rstrip(b"\r\n")
            if not h:
                break
            name, sep, value = h.decode("latin-1").partition(":")
            if not sep or not name or name != name.strip():
                raise BadRequest(400, "malformed header")
            headers[name.lower()] = value.strip()
        else:
            raise BadRequest(400, "too many headers")
        if "transfer-encoding" in headers:
            raise BadRequest(501, "chunked request bodies are not supported; send Content-Length")
        body = b""
        cl = headers.get("content-length")
        if cl is not None:
            if not cl.isdigit():
                raise BadRequest(400, "bad Content-Length")
            n = int(cl)
            if n > MAX_BODY:
                raise BadRequest(413, "request body too large")
            body = await reader.readexactly(n)
        u = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        return Request(method.upper(), unquote(u.path) or "/", query, headers, body, peer)

    async def _dispatch(self, req: Request) -> Response:
        self.requests += 1
        method = "GET" if req.method == "HEAD" else req.method
        route = self.server.http_routes.get((method, req.path))
        if route is None:
            if any(p == req.path for _, p in self.server.http_routes):
                return text_response(405, "method not allowed")
            return text_response(404, "not found")
        denied = authorize(self.server, req, route.access)
        if denied is not None:
            return denied
        if method == "POST" and not req.headers.get("content-type", "").startswith("application/json"):
            return text_response(415, "POST bodies must be application/json")
        try:
            return await route.handler(req)
        except BadRequest as e:
            return json_response({"error": str(e)}, e.status)
        except Exception:
            log.exception("error serving %s %s", req.method, req.path)
            return json_response({"error": "internal error"}, 500)

    @staticmethod
    def _write(writer: asyncio.StreamWriter, resp: Response, keep: bool, head: bool = False) -> None:
        lines = [
            f"HTTP/1.1 {resp.status} {REASONS.get(resp.status, 'Unknown')}",
            f"Content-Type: {resp.content_type}",
            f"Content-Length: {len(resp.body)}",
            "Cache-Control: no-store",
            "X-Content-Type-Options: nosniff",
            "Connection: " + ("keep-alive" if keep else "close"),
        ]
        lines += [f"{k}: {v}" for k, v in resp.headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else resp.body))


async def start_http(server: Any) -> HttpServer:
    """Register the core routes and start listening on ``--metrics-port``."""
    from .dashboard import page
    from .metrics import render

    async def metrics(req: Request) -> Response:
        return Response(200, render(server).encode(), "text/plain; version=0.0.4; charset=utf-8")

    async def index(req: Request) -> Response:
        return Response(200, page(), "text/html; charset=utf-8")

    async def healthz(req: Request) -> Response:
        return text_response(200, "ok")

    routes = server.http_routes
    routes.setdefault(("GET", "/metrics"), Route(metrics, "open"))
    routes.setdefault(("GET", "/healthz"), Route(healthz, "open"))
    routes.setdefault(("GET", "/"), Route(index, "read"))
    h = HttpServer(server)
    await h.start()
    return h

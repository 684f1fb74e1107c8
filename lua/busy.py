"""Serving other clients while a slow script blocks the event loop.

A script runs inside the event loop, so nothing else is read while it runs.
Once a script is past ``lua-time-limit``, the runtime's count hook calls
:func:`poll_clients` every ~100 ms. It reads the other connections' sockets
directly (non-blocking) and feeds what arrived through each connection's
normal ``data_received``: dispatch answers BUSY to everything except SCRIPT
KILL / SHUTDOWN NOSAVE (and the few commands Redis allows). New connections
are accepted here too, with a stand-in transport that writes straight to the
socket; when the script ends, :func:`after_busy` hands them to the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import socket
from typing import Any

log = logging.getLogger("respqueue.lua")


class _DirectTransport:
    """A minimal transport for a connection accepted while the loop is blocked."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.closed = False

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            self.sock.sendall(data)
        except OSError:
            self.closed = True

    def writelines(self, chunks: Any) -> None:
        for c in chunks:
            self.write(c)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        try:
            if name == "peername":
                return self.sock.getpeername()
            if name == "sockname":
                return self.sock.getsockname()
            if name == "socket":
                return self.sock
        except OSError:
            return default
        return default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def _conn_fd(conn: Any) -> int:
    fd = getattr(conn, "fd", -1)
    if fd is not None and fd >= 0:
        return fd
    t = getattr(conn, "transport", None)
    if t is None:
        return -1
    sock = t.get_extra_info("socket")
    try:
        return sock.fileno() if sock is not None else -1
    except Exception:
        return -1


def poll_clients(s: Any) -> None:
    """Answer whatever the other clients sent since the script became slow."""
    server = s.server
    # keys the script made ready are served after the script, not in the middle
    saved_ready = server.ready_keys
    server.ready_keys = {}
    try:
        _accept_new(s)
        fds: dict[int, Any] = {}
        for conn in list(server.clients.values()):
            if conn is s.caller or getattr(conn, "closing", False):
                continue
            fd = _conn_fd(conn)
            if fd >= 0:
                fds[fd] = conn
        for conn, sock in getattr(s, "busy_accepted", []):
            fds[sock.fileno()] = conn
        if not fds:
            return
        readable, _, _ = select.select(list(fds), [], [], 0)
        for fd in readable:
            conn = fds[fd]
            try:
                data = os.read(fd, 1 << 16)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                continue
            if not data:
                continue  # EOF: the event loop sees it again once the script is over
            conn.data_received(data)
    except Exception:
        log.exception("error while serving clients during a busy script")
    finally:
        extra = server.ready_keys
        server.ready_keys = saved_ready
        saved_ready.update(extra)
    stop = getattr(server, "_stop", None)
    if stop is not None and stop.done():
        s.kill_requested = True  # SHUTDOWN NOSAVE: stop the script, even if it wrote


def _accept_new(s: Any) -> None:
    from respqueue.protocol import ClientConnection

    server = s.server
    accepted = s.__dict__.setdefault("busy_accepted", [])
    for srv in server.listeners:
        for lsock in srv.sockets or []:
            try:
                fd = lsock.fileno()
            except Exception:
                continue
            while True:
                r, _, _ = select.select([fd], [], [], 0)
                if not r:
                    break
                lsk = socket.socket(fileno=os.dup(fd))
                try:
                    sock, _addr = lsk.accept()
                except (BlockingIOError, InterruptedError):
                    break
                finally:
                    lsk.close()  # only the duplicate descriptor
                sock.setblocking(True)
                sock.settimeout(1.0)
                if sock.family in (socket.AF_INET, socket.AF_INET6):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn = ClientConnection(server)
                conn.connection_made(_DirectTransport(sock))  # type: ignore[arg-type]
                conn.fd = sock.fileno()
                accepted.append((conn, sock))


def after_busy(s: Any) -> None:
    """Give the connections accepted during the busy script to the event loop."""
    accepted = s.__dict__.pop("busy_accepted", [])
    if not accepted:
        return
    loop = asyncio.get_running_loop()
    for conn, sock in accepted:
        if conn.transport is not None and conn.transport.is_closing():
            sock.close()
            continue
        sock.settimeout(None)
        sock.setblocking(False)
        server = s.server
        server.clients.pop(conn.id, None)

        async def adopt(conn: Any = conn, sock: socket.socket = sock) -> None:
            try:
                await loop.connect_accepted_socket(lambda: conn, sock=sock)
            except Exception:
                log.exception("cannot hand over a connection accepted during a busy script")
                sock.close()

        loop.create_task(adopt())

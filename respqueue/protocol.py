"""One asyncio Protocol per connection: parse, dispatch, reply.

Requests are parsed with ``hiredis.Reader``. Every complete request in a read
is executed in order and the replies of the whole read go out in one
``transport.write``. A client blocked on a key stops consuming its input
until it is served or times out, then carries on where it stopped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

import hiredis

from .client import Client
from .dispatch import Block, process
from .inline import InlineError, split_inline
from .resp import NO_REPLY, NULL_ARRAY, Push, RedisError, encode

if TYPE_CHECKING:
    from .server import Server

log = logging.getLogger("respqueue")

_STAR = 42  # b"*"
_INLINE_MAX = 64 * 1024


class BlockState:
    __slots__ = ("keys", "db", "argv", "timer", "timeout_reply", "since")

    def __init__(self, keys: list[bytes], db: Any, argv: list[bytes], timeout_reply: Any) -> None:
        self.keys = keys
        self.db = db
        self.argv = argv
        self.timer: asyncio.TimerHandle | None = None
        self.timeout_reply = timeout_reply
        self.since = time.time()


class ClientConnection(asyncio.Protocol, Client):
    def __init__(self, server: Server) -> None:
        Client.__init__(self, server)
        self.reader = hiredis.Reader()
        self.transport: asyncio.Transport | None = None
        self.blocked: BlockState | None = None
        self.closing = False
        self.inline_buf: bytes | None = None
        self.qbuf = 0
        self.addr = b"?:0"
        self.laddr = b"?:0"
        self.fd = -1
        self.monitor = False
        self.paused_reading = False
        self.processing = False

    # ---- connection lifecycle -------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        s = self.server
        peer = transport.get_extra_info("peername")
        sock = transport.get_extra_info("socket")
        if isinstance(peer, tuple):
            self.addr = f"{peer[0]}:{peer[1]}".encode()
            local = transport.get_extra_info("sockname")
            if isinstance(local, tuple):
                self.laddr = f"{local[0]}:{local[1]}".encode()
        else:
            self.addr = b"/unixsocket:0"
            self.laddr = (s.config.unixsocket or "").encode() + b":0"
        if sock is not None:
            try:
                self.fd = sock.fileno()
            except Exception:
                self.fd = -1
        s.stats_connections_received += 1
        if s.config.maxclients and len(s.clients) >= s.config.maxclients:
            s.stats_rejected_connections += 1
            transport.write(b"-ERR max number of clients reached\r\n")
            transport.close()
            self.closing = True
            return
        s.clients[self.id] = self
        transport.set_write_buffer_limits(high=s.config.output_pause_bytes)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.server.client_gone(self)

    def pause_writing(self) -> None:
        # the client does not read its replies: stop reading its requests
        if self.transport is not None and not self.paused_reading:
            self.paused_reading = True
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and self.paused_reading:
            self.paused_reading = False
            self.transport.resume_reading()

    def close(self, reason: str = "") -> None:
        if self.closing:
            return
        self.closing = True
        if reason:
            log.info("closing client id=%d addr=%s: %s", self.id, self.addr.decode(), reason)
        if self.transport is not None:
            self.transport.close()

    def close_after_reply(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()  # asyncio flushes buffered writes before closing

    # ---- input ----------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        self.last_interaction = time.time()
        if self.inline_buf is not None:
            self._inline(data)
            return
        self.reader.feed(data)
        if self.blocked is not None or self.processing:
            self.qbuf += len(data)
            if self.qbuf > self.server.config.client_query_buffer_limit:
                self.close("query buffer limit reached")
            return
        self._process(data)

    def _inline(self, data: bytes) -> None:
        buf = self.inline_buf + data if self.inline_buf else data
        out: list[bytes] = []
        resp3 = self.resp == 3
        while buf and self.blocked is None and not self.closing:
            if buf[0] == _STAR:
                # back to multibulk: hand the rest to a fresh reader
                self.inline_buf = None
                self.reader = hiredis.Reader()
                self.reader.feed(buf)
                if out:
                    self.write(b"".join(out))
                self._process(buf)
                return
            nl = buf.find(b"\n")
            if nl < 0:
                if len(buf) > _INLINE_MAX:
                    self._protocol_error(out, "too big inline request")
                    return
                break
            line, buf = buf[:nl], buf[nl + 1 :]
            try:
                argv = split_inline(line)
            except InlineError:
                self._protocol_error(out, "unbalanced quotes in request")
                return
            if not argv:
                continue
            if not self._execute(argv, out, resp3):
                self.inline_buf = buf
                if out:
                    self.write(b"".join(out))
                return
        self.inline_buf = buf if buf else None
        if self.inline_buf is None:
            self.reader = hiredis.Reader()
        if out:
            self.write(b"".join(out))

    def _process(self, data: bytes | None = None) -> None:
        """Run every complete request buffered in the reader."""
        reader = self.reader
        out: list[bytes] = []
        resp3 = self.resp == 3
        completed = False
        self.processing = True
        try:
            while self.blocked is None and not self.closing:
                try:
                    argv = reader.gets()
                except hiredis.ProtocolError as e:
                    self._hiredis_error(out, str(e), data, completed)
                    break
                if argv is False:
                    break
                completed = True
                if type(argv) is not list:
                    if not completed_inline_candidate(data, argv):
                        self._protocol_error(out, "expected '*', got something else")
                    else:
                        self._switch_to_inline(data, out)
                    break
                if not argv:
                    continue
                for a in argv:
                    if type(a) is not bytes:
                        self._protocol_error(out, "expected '$', got '%s'" % _type_byte(a))
                        return
                if not self._execute(argv, out, resp3):
                    break
        finally:
            self.processing = False
            if out and not (self.closing and self.transport is None):
                self.write(b"".join(out))
        if data is not None:
            self.qbuf = len(data) if completed else self.qbuf + len(data)
            if not completed and self.qbuf > 1024 and data[:1] == b"*" and self.qbuf == len(data):
                err = _check_header(data, self.server.config.proto_max_bulk_len)
                if err:
                    self._protocol_error([], err)
                    return
            if self.qbuf > self.server.config.client_query_buffer_limit:
                self.close("query buffer limit reached")

    def _execute(self, argv: list[bytes], out: list[bytes], resp3: bool) -> bool:
        """Run one request; False when the client blocked or must stop reading."""
        server = self.server
        server.stats_commands += 1
        if server.monitors:
            server.feed_monitors(self, argv)
        r = process(self, argv)
        if type(r) is Block:
            self._block(r, argv)
            return False
        if r is not NO_REPLY:
            encode(r, out, self.resp == 3)
        if server.ready_keys:
            if out:
                self.write(b"".join(out))
                out.clear()
            server.handle_ready_keys()
        if self.closing:
            return False
        return True

    def _hiredis_error(self, out: list[bytes], msg: str, data: bytes | None, completed: bool) -> None:
        # hiredis saw a non-RESP byte where a request should start: an inline command
        if "reply type byte" in msg and data and not completed and data[0] != _STAR:
            self._switch_to_inline(data, out)
            return
        if "multi-bulk length" in msg:
            self._protocol_error(out, "invalid multibulk length")
        elif "bulk" in msg and "length" in msg:
            self._protocol_error(out, "invalid bulk length")
        elif "reply type byte" in msg:
            ch = msg.split('"')[1] if '"' in msg else "?"
            self._protocol_error(out, "expected '$', got '%s'" % ch)
        else:
            self._protocol_error(out, msg)

    def _switch_to_inline(self, data: bytes | None, out: list[bytes]) -> None:
        if out:
            self.write(b"".join(out))
            out.clear()
        self.reader = hiredis.Reader()
        self.inline_buf = b""
        self._inline(data or b"")

    def _protocol_error(self, out: list[bytes], what: str) -> None:
        out.append(b"-ERR Protocol error: %s\r\n" % what.encode())
        self.write(b"".join(out))
        out.clear()
        log.info("protocol error from client id=%d addr=%s: %s", self.id, self.addr.decode(), what)
        self.close_after_reply()

    # ---- output ---------------------------------------------------------
    def write(self, data: bytes) -> None:
        t = self.transport
        if t is not None and not t.is_closing():
            t.write(data)

    def reply(self, r: Any) -> None:
        out: list[bytes] = []
        encode(r, out, self.resp == 3)
        self.write(b"".join(out))

    def send_push(self, msg: Any) -> None:
        t = self.transport
        if t is None or t.is_closing():
            return
        out: list[bytes] = []
        encode(Push(msg) if self.resp == 3 else msg, out, self.resp == 3)
        t.write(b"".join(out))
        limit = self.server.config.pubsub_output_limit
        if limit and t.get_write_buffer_size() > limit:
            self.close("pubsub output buffer limit reached")

    # ---- blocking -------------------------------------------------------
    def _block(self, b: Block, argv: list[bytes]) -> None:
        st = BlockState(b.keys, self.db, b.argv or argv, b.timeout_reply)
        self.blocked = st
        self.server.block_client(self, st)
        if b.timeout > 0:
            st.timer = asyncio.get_running_loop().call_later(b.timeout, self.block_timed_out)

    def block_timed_out(self) -> None:
        st = self.blocked
        if st is None:
            return
        self.server.unblock_client(self)
        self.reply(st.timeout_reply)
        self.resume()

    def unblocked_with(self, r: Any) -> None:
        """Called by the server when the blocked command produced its reply."""
        self.reply(r)
        self.resume()

    def resume(self) -> None:
        """Carry on with the input that arrived while blocked."""
        if self.closing:
            return
        asyncio.get_running_loop().call_soon(self._resume_now)

    def _resume_now(self) -> None:
        if self.blocked is None and not self.closing and not self.processing:
            if self.inline_buf is not None:
                self._inline(b"")
            else:
                self._process()


def completed_inline_candidate(data: bytes | None, r: Any) -> bool:
    return bool(data) and data[0] != _STAR  # type: ignore[index]


def _type_byte(a: Any) -> str:
    if isinstance(a, int):
        return ":"
    if isinstance(a, list):
        return "*"
    if isinstance(a, RedisError) or isinstance(a, hiredis.ReplyError):
        return "-"
    return "+"


def _check_header(data: bytes, max_bulk: int) -> str | None:
    """Validate the multibulk header of a request that spans reads."""
    nl = data.find(b"\r\n")
    if nl < 0:
        return None
    try:
        n = int(data[1:nl])
    except ValueError:
        return "invalid multibulk length"
    if n > 1024 * 1024:
        return "invalid multibulk length"
    pos = nl + 2
    for _ in range(min(n, 64)):
        if pos >= len(data):
            break
        if data[pos : pos + 1] != b"$":
            return None
        nl = data.find(b"\r\n", pos)
        if nl < 0:
            break
        try:
            ln = int(data[pos + 1 : nl])
        except ValueError:
            return "invalid bulk length"
        if ln < 0 or ln > max_bulk:
            return "invalid bulk length"
        pos = nl + 2 + ln + 2
    return None


__all__ = ["ClientConnection", "NO_REPLY", "NULL_ARRAY"]

"""One asyncio Protocol per connection: parse, dispatch, reply.

Requests are parsed with ``hiredis.Reader``. Every complete request in a read
is executed in order and the replies of the whole read go out in one
``transport.write`` (every ``_FLUSH_EVERY`` requests for long pipelines; a client
that does not read its replies gets its reading paused). A client blocked on a
key stops consuming its input until it is served or times out, then carries
on where it stopped.

hiredis reads any RESP, while Redis accepts only its own request grammar, with
its own limits and error texts. So the exact parser of :mod:`respqueue.inline`
(``RequestParser``, a transcription of Redis's rules) takes over whenever
hiredis balks or returns something that is not an array of bulk strings
(inline commands, malformed input), when a read leaves a partial request that
may be malformed (e.g. ``$600000000``), for clients not yet authenticated, and
for aggregate headers hiredis-py would preallocate. To hand over exactly, the
connection keeps the raw bytes since the reader last stood between requests
(``raw``, capped at ``_RAW_CAP``) and the number of requests hiredis returned
from them (``raw_k``). The exact parser gives the input back to hiredis after
a request once the next one is a multibulk.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import hiredis

from . import outbuf
from .call import call
from .client import Client
from .dispatch import RUNS, Block, process, run_allowed
from .inline import ProtocolError, RequestParser, skip_replies
from .persistence.signals import PREDICATES as _SIGNALS
from .persistence.signals import signal_only
from .resp import NO_REPLY, NULL_ARRAY, Push, encode

if TYPE_CHECKING:
    from .server import Server

log = logging.getLogger("respqueue")

# Raw input kept for re-reading a request exactly (see _switch_to_slow).
_RAW_CAP = 256 * 1024
# A partial request is vetted by the exact parser after reads this small.
_SMALL_READ = 16 * 1024
# Replies are handed to the transport at least every this many requests (or reply
# parts, for replies of many parts), so that a client not reading its replies
# pauses the work instead of piling up output. Counted in requests: BullMQ's
# replies run to dozens of parts, and a write per few replies costs both sides
# a syscall and a wake-up.
_FLUSH_EVERY = 64
_FLUSH_PARTS = 2048
# An aggregate header of 7+ digits: hiredis-py would preallocate that many slots
# (and free them one by one), so such input goes to the exact parser instead.
# Headers start a line: only "\n*1234567"-like bytes (or a read starting so)
# count; a payload holding them merely takes the exact parser. Keep these cheap,
# they scan every read.
_BIG_AGGREGATE = re.compile(rb"\n[*~>|][0-9]{7}").search


def big_aggregate_in(data: bytes) -> bool:
    """``_BIG_AGGREGATE(data) is not None``, for a read: the aggregate marks found by ``bytes.find`` (a
    memchr) and their line start and digits checked in Python, at a third of the regex's instructions on a
    read of BullMQ scripts (the regex steps through every byte looking for newlines); past ``_MARKS_BY_FIND``
    marks the regex decides, so a read full of marks costs one C pass, not a Python step per mark."""
    find = data.find
    left = _MARKS_BY_FIND
    for mark in b"*~>|":
        i = find(mark, 1)
        while i >= 0:
            if data[i - 1] == 10 and len(data) >= i + 8 and data[i + 1 : i + 8].isdigit():
                return True
            left -= 1
            if not left:  # a read dense with marks (a value of '*'s): the regex, one C pass, not a Python loop per mark
                return _BIG_AGGREGATE(data) is not None
            i = find(mark, i + 1)
    return False


#: how many marks big_aggregate_in checks one by one before it hands the read to the regex
_MARKS_BY_FIND = 64


_BIG_AGGREGATE_START = re.compile(rb"[*~>|][0-9]{7}").match
_AGGREGATE_TAIL = re.compile(rb"(?:^|\n)[*~>|][0-9]*\Z").search
_AGGREGATE_COUNT = re.compile(rb"(?:^|\n)[*~>|]([0-9]{7,})").search
# A run (dispatch.register_run): at most this many requests share a runner.
_RUN_MAX = 1024
# A request is checked for non-bulk-string arguments with b"".join (a copy of it) up to this many bytes fed.
_JOIN_CHECK_MAX = 1 << 20
_join = b"".join
# hiredis raised ProtocolError while a run was being collected
_PROTOCOL_ERROR: Any = object()


class BlockState:
    __slots__ = ("keys", "db", "argv", "timer", "timeout_reply", "since", "ready_key")

    def __init__(self, keys: list[bytes], db: Any, argv: list[bytes], timeout_reply: Any) -> None:
        self.keys = keys
        self.db = db
        self.argv = argv
        self.timer: asyncio.TimerHandle | None = None
        self.timeout_reply = timeout_reply
        self.since = time.time()
        self.ready_key: bytes | None = None  # the key whose signal is being served


class ClientConnection(asyncio.Protocol, Client):
    def __init__(self, server: Server) -> None:
        Client.__init__(self, server)
        self.reader = hiredis.Reader()
        self.transport: asyncio.Transport | None = None
        self.blocked: BlockState | None = None
        self.closing = False
        # Bytes fed to ``reader`` since it last had nothing pending (capped), and
        # how many requests it returned from them: enough to re-read a request
        # with the exact rules of :class:`RequestParser` when hiredis balks.
        self.raw: list[bytes] = []
        self.raw_len = 0
        self.raw_k = 0
        # Set while the exact (slow) parser owns the input.
        self.slow: RequestParser | None = None
        self.agg_tail = False  # the last read ended inside an aggregate header
        self.agg_tail_bytes = b""  # ... and these are its bytes
        self.addr = b"?:0"
        self.laddr = b"?:0"
        self.fd = -1
        self.monitor = False
        self.paused_reading = False
        self.processing = False
        # while processing: the output list of the current read, which commands that emit several
        # replies (SUBSCRIBE's confirmations) append to, to keep pipeline order
        self.pending_out: list[bytes] | None = None
        # durable mode: output held in order as (batch id it waits for, bytes,
        # is_write_reply) until the journal has committed that batch; None when
        # nothing is held
        self.held: deque[tuple[int, bytes, bool]] | None = None
        self.hold_bid = 0
        self.close_when_released = False
        self.obl_soft_since: float | None = None  # output over its soft limit since (outbuf.py)
        # what hiredis returned after a run of requests (see _collect_run), for the loop to take next
        self.pending: Any = None

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
            # a Unix socket client: Redis shows the socket's path for both
            self.addr = self.laddr = (s.config.unixsocket or "").encode() + b":0"
            self.is_unix = True
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
        if s.config.protected_mode == "yes":
            from .acl import PROTECTED_MODE_DENIED, protected_mode_denies

            if protected_mode_denies(s, self.addr, self.is_unix):
                s.stats_rejected_connections += 1
                transport.write(PROTECTED_MODE_DENIED)
                transport.close()
                self.closing = True
                return
        s.clients[self.id] = self
        transport.set_write_buffer_limits(high=s.config.output_pause_bytes)
        if not self.authenticated:
            # Redis limits request sizes before AUTH: use the exact parser until then
            self.slow = RequestParser()

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
            self.resume()  # requests already read may be waiting

    def close(self, reason: str = "") -> None:
        if self.closing:
            return
        self.closing = True
        if reason:
            log.info("closing client id=%d addr=%s: %s", self.id, self.addr.decode(), reason)
        if self.transport is not None:
            self.transport.close()

    def close_after_reply(self) -> None:
        """Stop reading; close once the replies of this round are written (QUIT, KILL)."""
        if self.closing:
            return
        self.closing = True
        t = self.transport
        if t is not None:
            # deferred: the reply being built (e.g. QUIT's +OK) is written first,
            # and asyncio flushes buffered writes before closing
            asyncio.get_running_loop().call_soon(self._close_transport)

    def _close_transport(self) -> None:
        if self.held is not None:
            self.close_when_released = True  # held replies go out first
        elif self.transport is not None:
            self.transport.close()

    # ---- input ----------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        self.last_interaction = time.time()
        if self.slow is not None:
            self.slow.feed(data)
            if self.blocked is None and not self.processing:
                self._drive()
            elif self.slow.pending() > self.server.config.client_query_buffer_limit:
                self.close("query buffer limit reached")
            return
        if self.raw_len < _RAW_CAP:
            self.raw.append(data)
        self.raw_len += len(data)
        if (
            big_aggregate_in(data)
            or _BIG_AGGREGATE_START(data) is not None
            or (self.agg_tail and data[:1].isdigit())
        ) and self._big_ok(data):
            # hiredis would preallocate an array this long: let the exact parser look
            if self._switch_to_slow():
                self._drive()
            return
        if self.closing:
            return
        if data[-1:] == b"\n":
            self.agg_tail = False  # a read ending a line (nearly all) cannot end inside a header
        else:
            m = _AGGREGATE_TAIL(data[-12:])
            self.agg_tail = m is not None
            if m is not None:
                self.agg_tail_bytes = m.group().lstrip(b"\n")
        self.reader.feed(data)
        if self.blocked is not None or self.processing:
            if self.reader.len() > self.server.config.client_query_buffer_limit:
                self.close("query buffer limit reached")
            return
        self._drive()

    def _drive(self, fresh: bool = True) -> None:
        """Run the buffered requests, handing the input between the parsers.

        A loop, not mutual recursion: input alternating inline and multibulk
        requests switches parsers once per request.
        """
        while True:
            if self.slow is None:
                if not self._process(fresh) or not self._switch_to_slow():
                    return
            elif not self._process_slow():
                return
            fresh = True

    def _process(self, fresh: bool = True) -> bool:
        """Run every complete request buffered in the reader (the fast path).

        ``fresh`` is False when resuming (after a block or a write pause) with
        no new input: a partial request then was already looked at. Returns
        True when the exact parser must take over (see _switch_to_slow).
        """
        reader = self.reader
        out: list[bytes] = []
        n = flushed = 0
        odd = False
        self.processing = True
        self.pending_out = out
        try:
            while self.blocked is None and not self.closing:
                argv = self.pending
                if argv is None:
                    try:
                        argv = reader.gets()
                    except hiredis.ProtocolError:
                        odd = True
                        break
                else:
                    self.pending = None
                    if argv is _PROTOCOL_ERROR:
                        odd = True
                        break
                if argv is False:
                    if n and not reader.has_data():
                        # all input consumed right after a request: forget the raw
                        # bytes, except an aggregate header that ended the read
                        # (hiredis has taken it in, but the exact parser, should a
                        # later read send the input its way, must see it again)
                        if self.raw:
                            self.raw.clear()
                        self.raw_len = 0
                        self.raw_k = n = 0
                        if self.agg_tail:
                            frag = self.agg_tail_bytes
                            self.raw.append(frag)
                            self.raw_len = len(frag)
                    elif fresh and self.raw_len <= _RAW_CAP and (n == 0 or self.raw_len <= _SMALL_READ):
                        # a partial request: let the exact parser vet it
                        odd = True
                    elif reader.len() > self.server.config.client_query_buffer_limit:
                        self.close("query buffer limit reached")
                    break
                if type(argv) is not list:
                    odd = True
                    break
                if self.raw_len <= _JOIN_CHECK_MAX:  # (see _bulk_strings: the same check, inline)
                    try:
                        _join(argv)
                    except TypeError:
                        odd = True
                        break
                elif not self._bulk_strings(argv):
                    odd = True
                    break
                n += 1
                if not argv:
                    continue
                rc = RUNS.get(argv[0])
                if rc is not None and len(argv) > 2 and run_allowed(self, rc, argv):
                    run = self._collect_run(argv, rc)
                    if len(run) > 1:
                        n += len(run) - 1
                        if not self._execute_run(rc, run, out):
                            break
                    elif not self._execute(argv, out):
                        break
                elif not self._execute(argv, out):
                    break
                if (n - flushed >= _FLUSH_EVERY or len(out) >= _FLUSH_PARTS) and out:
                    flushed = n
                    self.write(b"".join(out))
                    out.clear()
                    if self.paused_reading:
                        break  # the client does not read: resume_writing carries on
        finally:
            self.processing = False
            self.pending_out = None
            self.raw_k += n
            if out:
                self.write(b"".join(out))
        return odd and not self.closing

    def _collect_run(self, argv: list[bytes], cmd: Any) -> list[list[bytes]]:
        """``argv`` and the requests after it already in the reader that repeat its command and first argument
        with as many arguments (at most _RUN_MAX), and that this node serves in cluster mode; the first other
        one hiredis returned is kept in ``pending`` for the loop (an incomplete request stays in the reader).
        In cluster mode ``argv`` itself is routed once a second request would join it: a run of one goes
        through ``process``, which routes it (once)."""
        run = [argv]
        cluster = self.server.cluster
        reader = self.reader
        name, first, ln = argv[0], argv[1], len(argv)
        while len(run) < _RUN_MAX:
            try:
                nxt = reader.gets()
            except hiredis.ProtocolError:
                self.pending = _PROTOCOL_ERROR
                break
            if nxt is False:
                break
            if (
                type(nxt) is list
                and len(nxt) == ln
                and nxt[0] == name
                and nxt[1] == first
                and self._bulk_strings(nxt)
                and (
                    cluster is None
                    or (
                        (len(run) > 1 or cluster.route(self, cmd, argv) is None)
                        and cluster.route(self, cmd, nxt) is None
                    )
                )
            ):
                run.append(nxt)
                continue
            self.pending = nxt
            break
        return run

    def _bulk_strings(self, argv: list[Any]) -> bool:
        """Whether every element of a request hiredis returned is a bulk string (``bytes``; hiredis gives an
        int, None, a list or an error object for other RESP types). ``b"".join`` tells in one C loop, without a
        Python step per argument (a BullMQ script call has ~25), when the request is small enough to copy
        (``raw_len``: every byte fed since the reader last stood between requests, so at least the request's
        size); a larger one is checked argument by argument."""
        if self.raw_len <= _JOIN_CHECK_MAX:
            try:
                _join(argv)
            except TypeError:
                return False
            return True
        for a in argv:
            if type(a) is not bytes:
                return False
        return True

    def _execute_run(self, cmd: Any, run: list[list[bytes]], out: list[bytes]) -> bool:
        """Run the requests of a run (see dispatch.register_run): what ``_execute`` does for each, with
        the procedure the command's run opener gives (once for the run, again after blocked clients were
        served between two requests). False when the client must stop reading."""
        server = self.server
        server.stats_commands += len(run)
        self.last_cmd = cmd
        j = server.journal
        durable = j is not None and j.durable
        resp3 = self.resp == 3
        i = 0
        while i < len(run):
            runner = cmd.run(self, run[i])
            if runner is None:
                proc = cmd.proc
            else:
                proc = runner
            try:
                while i < len(run):
                    d0 = server.dirty
                    r = call(self, cmd, run[i], True, proc)
                    i += 1
                    if durable and server.dirty != d0:
                        self._hold_reply(r, out, resp3)
                    elif r is not NO_REPLY:
                        encode(r, out, resp3)
                    if server.ready_keys:
                        break
            finally:
                if runner is not None:
                    runner.close()
            if server.ready_keys:
                self._serve_ready(out)
            if self.closing:
                return False
        return True

    def _big_ok(self, data: bytes) -> bool:
        """Whether a read with a long aggregate header can go to the exact parser."""
        if self.raw_len <= _RAW_CAP:
            return True
        # the raw bytes are incomplete: hiredis must go on, unless the count is absurd
        m = _AGGREGATE_COUNT(data)
        if m is not None and int(m.group(1)) >= 10_000_000:
            self._protocol_error([], "invalid multibulk length")
        return False

    def _switch_to_slow(self) -> bool:
        """Hand the input from the first request hiredis did not return to RequestParser.

        Returns True when the exact parser can run now.
        """
        raw_k, raw_len = self.raw_k, self.raw_len
        self.pending = None  # (hiredis returned it, but raw_k does not count it: the exact parser reads it again)
        ok = raw_len == sum(map(len, self.raw))
        buf = b"".join(self.raw)
        self.raw.clear()
        self.raw_len = self.raw_k = 0
        self.reader = hiredis.Reader()
        if ok:
            try:
                rest = buf[skip_replies(buf, 0, raw_k) :]
            except (ValueError, IndexError):
                ok = False
        if not ok:
            # too much input since the last request boundary to re-read it exactly
            # (over _RAW_CAP): report what is most likely wrong
            log.warning("client id=%d: cannot re-read %d bytes of odd input exactly", self.id, raw_len)
            self._protocol_error([], "invalid multibulk length")
            return False
        self.slow = RequestParser(rest)
        return self.blocked is None and not self.processing

    def _process_slow(self) -> bool:
        """Run the requests of the exact parser; back to hiredis when it can be.

        Returns True when it handed the rest of the input back to hiredis.
        """
        p = self.slow
        assert p is not None
        out: list[bytes] = []
        server = self.server
        back = False
        back_ok: bool | None = None
        k = 0
        self.processing = True
        self.pending_out = out
        try:
            while self.blocked is None and not self.closing:
                try:
                    argv = p.next(self.authenticated, server.config.proto_max_bulk_len)
                except ProtocolError as e:
                    self._protocol_error(out, e.msg)
                    return False
                if argv is None:
                    break
                if argv and not self._execute(argv, out):
                    break
                k += 1
                if (k >= _FLUSH_EVERY or len(out) >= _FLUSH_PARTS) and out:
                    k = 0
                    self.write(b"".join(out))
                    out.clear()
                    if self.paused_reading:
                        break
                if p.reqtype == 0 and p.pending() and p.buf[p.pos] == 42 and self.authenticated:
                    # a request was served and the next one is multibulk: hiredis
                    # again, unless the rest holds a header it would mishandle
                    if back_ok is None:
                        back_ok = _BIG_AGGREGATE(p.buf, max(0, p.pos - 1)) is None and (
                            _BIG_AGGREGATE_START(p.buf, p.pos) is None
                        )
                    if back_ok:
                        back = True
                        break
        finally:
            self.processing = False
            self.pending_out = None
            if out:
                self.write(b"".join(out))
        if self.closing or self.blocked is not None or self.slow is not p:
            return False
        if back:
            rest = bytes(p.buf[p.pos :])
            self.slow = None
            self.reader = hiredis.Reader()
            self.raw = [rest] if len(rest) <= _RAW_CAP else []
            self.raw_len = len(rest)
            self.raw_k = 0
            m = _AGGREGATE_TAIL(rest[-12:])
            self.agg_tail = m is not None
            if m is not None:
                self.agg_tail_bytes = m.group().lstrip(b"\n")
            self.reader.feed(rest)
            return True
        if p.idle() and self.authenticated:
            self.slow = None
        elif p.pending() > server.config.client_query_buffer_limit:
            self.close("query buffer limit reached")
        return False

    def _execute(self, argv: list[bytes], out: list[bytes]) -> bool:
        """Run one request; False when the client blocked or must stop reading."""
        server = self.server
        server.stats_commands += 1
        if server.monitors:
            server.feed_monitors(self, argv)
        d0 = server.dirty
        r = process(self, argv)
        if type(r) is Block:
            self._block(r, argv)
            return False
        if self.reply_mode is not None and r is not NO_REPLY:
            # CLIENT REPLY OFF drops every reply; SKIP drops the next one
            if self.reply_mode == b"skip":
                self.reply_mode = None
            r = NO_REPLY
        j = server.journal
        if server.dirty != d0 and j is not None and j.durable:
            if _SIGNALS and j.changes == server.dirty - d0 and signal_only(self.db, self.last_cmd, argv):
                self._hold_prior(r, out, self.resp == 3)
            else:
                self._hold_reply(r, out, self.resp == 3)
        elif r is not NO_REPLY:
            encode(r, out, self.resp == 3)
        if server.ready_keys:
            self._serve_ready(out)
        return not self.closing

    def _hold_reply(self, r: Any, out: list[bytes], resp3: bool) -> None:
        """Durable mode: the reply ``r`` of a write waits for the commit of its batch; earlier replies
        (``out``) need not and go now."""
        if out:
            self.write(b"".join(out))
            out.clear()
        j = self.server.journal
        if self.held is None or self.hold_bid != j.open_id or not j.scheduled:
            self.journal_hold()
        # (else it holds for the open batch already, which is due: a pipeline of writes, such as
        # BullMQ's addBulk, registers once per batch, not once per command)
        if r is not NO_REPLY:
            encode(r, out, resp3)
            self.held.append((self.hold_bid, b"".join(out), True))  # type: ignore[union-attr]
            out.clear()

    def _hold_prior(self, r: Any, out: list[bytes], resp3: bool) -> None:
        """Durable mode, a write of wake-up signal keys only, the open batch holding nothing else: the reply
        ``r`` waits for the batches already handed to the writer, not for its own (persistence/signals.py).
        A worker woken that way hears of a job no sooner than the client that added it, as with Redis, and
        no later either."""
        bid = self.server.journal.hold_prior(self)
        if bid == 0:
            if r is not NO_REPLY:
                encode(r, out, resp3)
            return
        if out:
            self.write(b"".join(out))
            out.clear()
        if self.held is None:
            self.held = deque()
            self.hold_bid = bid
        if r is not NO_REPLY:
            encode(r, out, resp3)
            self.held.append((max(bid, self.hold_bid), b"".join(out), True))
            out.clear()

    def _serve_ready(self, out: list[bytes]) -> None:
        """A request made keys ready: this client's replies so far go out, then the blocked clients are
        served (before this client's next request, as in Redis)."""
        if out:
            self.write(b"".join(out))
            out.clear()
        self.server.handle_ready_keys(self)

    def _protocol_error(self, out: list[bytes], what: str) -> None:
        out.append(b"-ERR Protocol error: %s\r\n" % what.encode("latin-1").replace(b"\r", b" ").replace(b"\n", b" "))
        self.write(b"".join(out))
        out.clear()
        log.info("protocol error from client id=%d addr=%s: %s", self.id, self.addr.decode(), what)
        self.close_after_reply()

    # ---- output ---------------------------------------------------------
    def journal_hold(self, last: bool = False) -> None:
        """This connection's last command wrote: its output from here on waits
        for the commit of the journal's open batch (earlier output does not).
        ``last``: released after the output other connections hold so far (see Journal.hold)."""
        if self.held is None:
            self.held = deque()
        self.hold_bid = self.server.journal.hold(self, last)

    def release_held(self, committed: int, error: bytes | None) -> bool:
        """Write the held output whose batch has committed (batch ``committed``);
        with ``error`` the batches up to ``committed`` failed (durable mode rolls back the one
        after the failed one too) and their write replies become the error.
        True when nothing is held any more."""
        held = self.held
        if held is None:
            return True
        parts = []
        while held and held[0][0] <= committed:
            bid, data, is_write = held.popleft()
            parts.append(error if (error is not None and is_write) else data)
        if not held:
            self.held = None
        t = self.transport
        if parts and t is not None and not t.is_closing():
            t.write(b"".join(parts))
        if self.held is None:
            if self.close_when_released and t is not None:
                t.close()
            return True
        return False

    def write(self, data: bytes) -> None:
        if self.held is not None:
            self.held.append((self.hold_bid, data, False))
            return
        t = self.transport
        if t is not None and not t.is_closing():
            t.write(data)
            if self.server.obl_normal is not None:
                outbuf.check(self, t)

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
        if self.held is not None:
            self.held.append((self.hold_bid, b"".join(out), False))
            return
        t.write(b"".join(out))
        outbuf.check(self, t)  # client-output-buffer-limit of its class (pubsub while subscribed)

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

    def unblocked_with(self, r: Any, wrote: bool = False) -> None:
        """Called by the server when the blocked command produced its reply (``wrote``: it depends on
        the open batch, written or read from it, and is held for the commit; a failed commit turns it
        into the error). A
        connection holding output (server.handle_ready_keys holds every client it serves in durable
        mode) has the reply queued behind it, for the batch it holds."""
        if self.held is not None:
            out: list[bytes] = []
            encode(r, out, self.resp == 3)
            self.held.append((self.hold_bid, b"".join(out), wrote))
        else:
            self.reply(r)
        self.resume()

    def resume(self) -> None:
        """Carry on with the input that arrived while blocked."""
        if self.closing:
            return
        asyncio.get_running_loop().call_soon(self._resume_now)

    def _resume_now(self) -> None:
        if self.blocked is None and not self.closing and not self.processing:
            self._drive(False)


__all__ = ["ClientConnection", "NO_REPLY", "NULL_ARRAY"]

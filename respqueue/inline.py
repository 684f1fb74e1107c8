"""Inline requests (``PING``, ``SET a "b c"``), split as Redis's sdssplitargs does."""

from __future__ import annotations


class InlineError(ValueError):
    pass


_ESC = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}
_SPACE = b" \n\r\t\x0b\x0c\x00"
_HEX = b"0123456789abcdefABCDEF"


def split_inline(line: bytes) -> list[bytes]:
    """Split one inline request line into arguments; raises InlineError on bad quotes."""
    if b'"' not in line and b"'" not in line:
        return line.split()
    out: list[bytes] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in _SPACE:
            i += 1
        if i >= n:
            return out
        cur = bytearray()
        inq = insq = False
        while True:
            if inq:
                if i >= n:
                    raise InlineError("unbalanced quotes")
                c = line[i]
                if (
                    c == 92
                    and i + 3 < n
                    and line[i + 1] == ord("x")
                    and line[i + 2] in _HEX
                    and line[i + 3] in _HEX
                ):
                    cur.append(int(line[i + 2 : i + 4], 16))
                    i += 3
                elif c == 92 and i + 1 < n:
                    i += 1
                    cur.append(_ESC.get(line[i], line[i]))
                elif c == 34:
                    if i + 1 < n and line[i + 1] not in _SPACE:
                        raise InlineError("closing quote must be followed by a space")
                    inq = False
                    i += 1
                    break
                else:
                    cur.append(c)
            elif insq:
                if i >= n:
                    raise InlineError("unbalanced quotes")
                c = line[i]
                if c == 92 and i + 1 < n and line[i + 1] == 39:
                    i += 1
                    cur.append(39)
                elif c == 39:
                    if i + 1 < n and line[i + 1] not in _SPACE:
                        raise InlineError("closing quote must be followed by a space")
                    insq = False
                    i += 1
                    break
                else:
                    cur.append(c)
            else:
                if i >= n:
                    break
                c = line[i]
                if c in _SPACE:
                    break
                if c == 34:
                    inq = True
                elif c == 39:
                    insq = True
                else:
                    cur.append(c)
            i += 1
        out.append(bytes(cur))


# ---- the exact query-buffer rules, for the unusual cases ---------------------
INLINE_MAX = 64 * 1024  # PROTO_INLINE_MAX_SIZE
_INT_MAX = 2**31 - 1


class ProtocolError(Exception):
    """A request Redis rejects with ``-ERR Protocol error: <msg>`` and a close."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.msg = msg


def _strict_int(b: bytes) -> int | None:
    """Redis's string2ll: decimal int64 without sign '+', spaces or leading zeros."""
    n = len(b)
    if n == 0 or n > 20:
        return None
    if b == b"0":
        return 0
    d = b[1:] if b[:1] == b"-" else b
    if not d or d[0] < 49 or d[0] > 57 or not d.isdigit():
        return None
    v = int(b)
    if v < -(2**63) or v > 2**63 - 1:
        return None
    return v


class RequestParser:
    """Redis 7's ``processInputBuffer``: inline and multibulk requests, byte for byte.

    The connection normally parses with hiredis; this incremental parser takes
    over for inline requests, malformed input and unauthenticated clients,
    where Redis's exact rules (error texts, limits, quirks) matter more than speed.
    """

    __slots__ = ("buf", "pos", "reqtype", "mb_left", "bulklen", "argv")

    def __init__(self, data: bytes = b"") -> None:
        self.buf = bytearray(data)
        self.pos = 0
        self.reqtype = 0  # 0: between requests, 1: inline, 2: multibulk
        self.mb_left = 0
        self.bulklen = -1
        self.argv: list[bytes] = []

    def feed(self, data: bytes) -> None:
        if self.pos and self.pos == len(self.buf):
            self.buf.clear()
            self.pos = 0
        self.buf += data

    def idle(self) -> bool:
        """No partial request and nothing buffered."""
        return self.reqtype == 0 and self.pos >= len(self.buf)

    def pending(self) -> int:
        return len(self.buf) - self.pos

    def next(self, authenticated: bool, max_bulk: int) -> list[bytes] | None:
        """The next request (``[]`` for an empty one), or None when more data is needed."""
        buf = self.buf
        if self.pos >= len(buf):
            return None
        if self.reqtype == 0:
            self.reqtype = 2 if buf[self.pos] == 42 else 1
        r = self._inline() if self.reqtype == 1 else self._multibulk(authenticated, max_bulk)
        if r is not None:
            self.reqtype = 0
            if self.pos > 65536:
                del buf[: self.pos]
                self.pos = 0
        return r

    def _find(self, ch: bytes) -> int:
        """strchr from pos: the first ``ch`` before any NUL byte, else -1."""
        buf, pos = self.buf, self.pos
        i = buf.find(ch, pos)
        if i < 0:
            return -1
        z = buf.find(b"\0", pos, i)
        return -1 if z >= 0 else i

    def _inline(self) -> list[bytes] | None:
        buf, pos = self.buf, self.pos
        nl = self._find(b"\n")
        if nl < 0:
            if len(buf) - pos > INLINE_MAX:
                raise ProtocolError("too big inline request")
            return None
        end = nl - 1 if nl != pos and buf[nl - 1] == 13 else nl
        line = bytes(buf[pos:end])
        self.pos = nl + 1
        try:
            return split_inline(line)
        except InlineError:
            raise ProtocolError("unbalanced quotes in request") from None

    def _multibulk(self, authenticated: bool, max_bulk: int) -> list[bytes] | None:
        buf = self.buf
        if self.mb_left == 0:
            pos = self.pos
            cr = self._find(b"\r")
            if cr < 0:
                if len(buf) - pos > INLINE_MAX:
                    raise ProtocolError("too big mbulk count string")
                return None
            if cr - pos > len(buf) - pos - 2:
                return None
            ll = _strict_int(bytes(buf[pos + 1 : cr]))
            if ll is None or ll > _INT_MAX:
                raise ProtocolError("invalid multibulk length")
            if ll > 10 and not authenticated:
                raise ProtocolError("unauthenticated multibulk length")
            self.pos = cr + 2
            if ll <= 0:
                return []
            self.mb_left = ll
            self.argv = []
        while self.mb_left:
            pos = self.pos
            if self.bulklen == -1:
                cr = self._find(b"\r")
                if cr < 0:
                    if len(buf) - pos > INLINE_MAX:
                        raise ProtocolError("too big bulk count string")
                    return None
                if cr - pos > len(buf) - pos - 2:
                    return None
                if buf[pos] != 36:
                    raise ProtocolError(f"expected '$', got '{chr(buf[pos])}'")
                ll = _strict_int(bytes(buf[pos + 1 : cr]))
                if ll is None or ll < 0 or ll > max_bulk:
                    raise ProtocolError("invalid bulk length")
                if ll > 16384 and not authenticated:
                    raise ProtocolError("unauthenticated bulk length")
                self.pos = pos = cr + 2
                self.bulklen = ll
            n = self.bulklen
            if len(buf) - pos < n + 2:
                return None
            self.argv.append(bytes(buf[pos : pos + n]))
            self.pos = pos + n + 2
            self.bulklen = -1
            self.mb_left -= 1
        argv = self.argv
        self.argv = []
        return argv


def skip_replies(buf: bytes, pos: int, count: int) -> int:
    """Offset after ``count`` complete RESP values (as hiredis read them) from ``pos``."""
    for _ in range(count):
        pos = _skip_one(buf, pos)
    return pos


def _skip_one(buf: bytes, pos: int) -> int:
    t = buf[pos]
    nl = buf.index(b"\r\n", pos)
    if t in b"$=!":
        n = int(buf[pos + 1 : nl])
        return nl + 2 if n < 0 else nl + 2 + n + 2
    if t in b"*~>%|":
        n = int(buf[pos + 1 : nl])
        pos = nl + 2
        if n < 0:
            return pos
        if t in b"%|":
            n *= 2
        for _ in range(n):
            pos = _skip_one(buf, pos)
        return pos
    return nl + 2

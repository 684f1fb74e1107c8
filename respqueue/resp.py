"""RESP2/RESP3 reply model and encoder.

Commands return plain Python values; the connection encodes them for the
client's protocol version. The same values feed the Lua bridge, so a command
never knows who called it.

    bytes            bulk string
    int              integer
    None             null bulk (RESP2 ``$-1``, RESP3 ``_``)
    list / tuple     array
    NULL_ARRAY       null array (RESP2 ``*-1``, RESP3 ``_``)
    Status           simple string (``+OK``)
    RedisError       error (``-ERR ...``), raised or embedded in arrays
    float            double (RESP3 ``,``; RESP2 bulk formatted like Redis)
    dict             map (RESP3 ``%``; RESP2 flat array)
    SetReply         set (RESP3 ``~``; RESP2 array)
    Push             push message (RESP3 ``>``; RESP2 array)
    Verbatim         verbatim text (RESP3 ``=``; RESP2 bulk)
    bool             RESP3 boolean; RESP2 integer 1/0
"""

from __future__ import annotations

import math
from typing import Any


class Status(bytes):
    """A simple-string reply such as ``+OK``."""

    __slots__ = ()


class RedisError(Exception):
    """An error reply. ``msg`` holds the text after ``-`` (e.g. ``ERR ...``)."""

    def __init__(self, msg: str | bytes) -> None:
        if isinstance(msg, str):
            msg = msg.encode()
        self.msg: bytes = msg
        super().__init__(msg)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RedisError) and other.msg == self.msg

    def __hash__(self) -> int:
        return hash(self.msg)


class _NullArray:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL_ARRAY"


NULL_ARRAY: Any = _NullArray()


class SetReply(list):
    """An array that RESP3 clients receive as a set."""

    __slots__ = ()


class Push(list):
    """An out-of-band push message (pub/sub); an array in RESP2."""

    __slots__ = ()


class Verbatim(bytes):
    """Verbatim text (INFO, CLIENT LIST...); a bulk string in RESP2."""

    __slots__ = ()


class Encoded(bytes):
    """A reply already in RESP form (e.g. an array of bulk strings packed by ``hiredis.pack_command``):
    written as it is. Only for replies that encode the same in RESP2 and RESP3."""

    __slots__ = ()


class _NoReply:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_REPLY"


NO_REPLY: Any = _NoReply()  # the command wrote its own reply(ies), or none is due

OK = Status(b"OK")
QUEUED = Status(b"QUEUED")
PONG = Status(b"PONG")

_OK_BYTES = b"+OK\r\n"
_INT_CACHE = [b":%d\r\n" % i for i in range(-1, 1025)]
_MBULK = [b"*%d\r\n" % i for i in range(0, 1025)]
_BULK_HDR = [b"$%d\r\n" % i for i in range(0, 1025)]


def format_double(d: float) -> bytes:
    """Format a double as Redis 7.0's addReplyDouble does (``%.17g``)."""
    if math.isinf(d):
        return b"inf" if d > 0 else b"-inf"
    if d != d:
        return b"nan"
    return b"%.17g" % d


def format_human_double(d: float) -> bytes:
    """Format like Redis's ``%.17Lg``-then-trim used by INCRBYFLOAT/HINCRBYFLOAT."""
    if math.isinf(d):
        return b"inf" if d > 0 else b"-inf"
    s = b"%.17f" % d
    if b"." in s:
        s = s.rstrip(b"0").rstrip(b".")
    if s == b"-0":
        s = b"0"
    return s


def encode(r: Any, out: list[bytes], resp3: bool = False) -> None:
    """Append the encoding of reply ``r`` to ``out``."""
    t = type(r)
    if t is bytes:
        n = len(r)
        out.append(b"%b%b\r\n" % (_BULK_HDR[n] if n < 1025 else b"$%d\r\n" % n, r))
    elif t is int:
        out.append(_INT_CACHE[r + 1] if -1 <= r < 1024 else b":%d\r\n" % r)
    elif r is None:
        out.append(b"_\r\n" if resp3 else b"$-1\r\n")
    elif t is Status:
        out.append(_OK_BYTES if r == b"OK" else b"+%b\r\n" % r)
    elif t is list or t is tuple:
        n = len(r)
        out.append(_MBULK[n] if n < 1025 else b"*%d\r\n" % n)
        for x in r:
            tx = type(x)
            if tx is bytes:
                n = len(x)
                out.append(b"%b%b\r\n" % (_BULK_HDR[n] if n < 1025 else b"$%d\r\n" % n, x))
            else:
                encode(x, out, resp3)
    elif t is Encoded:
        out.append(r)
    elif isinstance(r, RedisError):
        out.append(b"-%b\r\n" % _clean_error(r.msg))
    elif t is float:
        if resp3:
            if math.isinf(r):
                out.append(b",inf\r\n" if r > 0 else b",-inf\r\n")
            else:
                out.append(b",%b\r\n" % format_double(r))
        else:
            s = format_double(r)
            out.append(b"$%d\r\n%b\r\n" % (len(s), s))
    elif r is NULL_ARRAY:
        out.append(b"_\r\n" if resp3 else b"*-1\r\n")
    elif t is dict:
        if resp3:
            out.append(b"%%%d\r\n" % len(r))
        else:
            out.append(b"*%d\r\n" % (2 * len(r)))
        for k, v in r.items():
            encode(k, out, resp3)
            encode(v, out, resp3)
    elif t is SetReply:
        out.append((b"~%d\r\n" if resp3 else b"*%d\r\n") % len(r))
        for x in r:
            encode(x, out, resp3)
    elif t is Push:
        out.append((b">%d\r\n" if resp3 else b"*%d\r\n") % len(r))
        for x in r:
            encode(x, out, resp3)
    elif t is Verbatim:
        if resp3:
            out.append(b"=%d\r\ntxt:%b\r\n" % (len(r) + 4, r))
        else:
            out.append(b"$%d\r\n%b\r\n" % (len(r), r))
    elif t is bool:
        if resp3:
            out.append(b"#t\r\n" if r else b"#f\r\n")
        else:
            out.append(_INT_CACHE[2] if r else _INT_CACHE[1])
    elif isinstance(r, bytes):  # bytes subclasses other than the above
        out.append(b"$%d\r\n%b\r\n" % (len(r), bytes(r)))
    elif isinstance(r, int):
        out.append(b":%d\r\n" % r)
    elif isinstance(r, str):
        b = r.encode()
        out.append(b"$%d\r\n%b\r\n" % (len(b), b))
    else:
        raise TypeError(f"cannot encode reply of type {t.__name__}")


def _clean_error(msg: bytes) -> bytes:
    if b"\r" in msg or b"\n" in msg:
        msg = msg.replace(b"\r", b" ").replace(b"\n", b" ")
    return msg


def encode_one(r: Any, resp3: bool = False) -> bytes:
    out: list[bytes] = []
    encode(r, out, resp3)
    return b"".join(out)

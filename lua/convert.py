"""Conversions between command replies and Lua values, the way Redis 7.0 does them.

``Converter`` is bound to one Lua runtime (it needs its table constructors).
Replies going into Lua follow ``redis.setresp`` (RESP2 by default): integer
-> number, bulk -> string, nil -> false, array -> table, status -> {ok=},
error -> {err=}, double -> string (RESP2) or {double=} (RESP3), map -> flat
array (RESP2) or {map=} (RESP3). A script's return value goes the other way:
number -> integer (truncated), string -> bulk, true -> 1, false/nil -> nil,
{ok=} -> status, {err=} -> error, array -> list cut at the first nil.
"""

from __future__ import annotations

import math
from typing import Any

from respqueue.resp import NULL_ARRAY, RedisError, SetReply, Status, Verbatim, format_double

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_BIG = 10**17


def format_number_arg(x: int | float) -> bytes:
    """A Lua number as Redis 7.0 passes it to a command (``%.17g``)."""
    if type(x) is int:
        if -_BIG < x < _BIG:
            return b"%d" % x
        return b"%.17g" % float(x)
    if x != x:
        return b"-nan" if math.copysign(1.0, x) < 0 else b"nan"
    if math.isinf(x):
        return b"inf" if x > 0 else b"-inf"
    return b"%.17g" % x


def truncate(x: float) -> int:
    """C's ``(long long)x`` on x86-64: out of range and NaN give INT64_MIN."""
    if x != x or x >= 9.2233720368547758e18 or x < -9.2233720368547758e18:
        return INT64_MIN
    return int(x)


def error_text(msg: bytes) -> bytes:
    """An error reply's text as it appears in a Lua error table ("CODE msg")."""
    msg = msg.rstrip(b"\r\n")
    if b" " not in msg:
        return b"ERR " + msg
    return msg


class Converter:
    """Reply <-> Lua value conversion bound to one runtime's helper functions."""

    def __init__(self, lua: Any, helpers: Any, lua_type: Any) -> None:
        self.table_from = lua.table_from
        self.mk_ok = helpers[b"mk_ok"]
        self.mk_err = helpers[b"mk_err"]
        self.mk_double = helpers[b"mk_double"]
        self.mk_verbatim = helpers[b"mk_verbatim"]
        self.mk_map = helpers[b"mk_map"]
        self.mk_set = helpers[b"mk_set"]
        self.mk_big = helpers[b"mk_big"]
        self.classify = helpers[b"classify"]
        self.lua_type = lua_type
        self.table_type = type(lua.table())  # lupa's wrapper class for Lua tables

    # ---- reply -> Lua ---------------------------------------------------
    def list_to_lua(self, r: Any, resp: int) -> Any:
        """An array reply (list or tuple) as a Lua table."""
        for x in r:
            tx = type(x)
            if tx is not bytes and tx is not int:
                break
        else:
            return self.table_from(r)
        to_lua = self.to_lua
        if resp == 2:
            return self.table_from(
                [x if type(x) is bytes or type(x) is int else False if x is None else to_lua(x, 2) for x in r]
            )
        return self.table_from([x if type(x) is bytes or type(x) is int else to_lua(x, resp) for x in r])

    def to_lua(self, r: Any, resp: int) -> Any:
        t = type(r)
        if t is bytes or t is int:
            return r
        if r is None:
            return None if resp == 3 else False
        if t is list or t is tuple or t is SetReply and resp == 2:
            return self.list_to_lua(r, resp)
        if t is Status:
            return self.mk_ok(bytes(r))
        if isinstance(r, RedisError):
            return self.mk_err(error_text(r.msg))
        if t is float:
            if resp == 3:
                return self.mk_double(r)
            return format_double(r)
        if t is bool:
            if resp == 3:
                return r
            return 1 if r else 0
        if r is NULL_ARRAY:
            return None if resp == 3 else False
        if t is dict:
            if resp == 3:
                return self.mk_map(self.table_from({self.to_lua(k, 3): self.to_lua(v, 3) for k, v in r.items()}))
            flat: list[Any] = []
            ext = flat.extend
            for kv in r.items():
                ext(kv)
            return self.list_to_lua(flat, resp)
        if t is SetReply:
            return self.mk_set(self.table_from({self.to_lua(k, 3): True for k in r}))
        if t is Verbatim:
            if resp == 3:
                return self.mk_verbatim(bytes(r))
            return bytes(r)
        if isinstance(r, bytes):
            return bytes(r)
        if isinstance(r, int):
            return int(r)
        if isinstance(r, list):
            return self.table_from([self.to_lua_item(x, resp) for x in r])
        if isinstance(r, str):
            return r.encode()
        return None if resp == 3 else False

    def to_lua_item(self, x: Any, resp: int) -> Any:
        tx = type(x)
        if tx is bytes or tx is int:
            return x
        if x is None and resp == 2:
            return False
        return self.to_lua(x, resp)

    # ---- Lua -> reply ---------------------------------------------------
    def to_reply(self, v: Any, resp: int) -> Any:
        t = type(v)
        if t is bytes:
            return v
        if t is int:
            if INT64_MIN <= v <= INT64_MAX:
                return v
            return INT64_MIN
        if t is float:
            return truncate(v)
        if v is None:
            return None
        if t is bool:
            if resp == 3:
                return v
            return 1 if v else None
        if t is not self.table_type and self.lua_type(v) != "table":
            return None
        res = self.classify(v)
        if type(res) is not tuple:
            return []
        kind = res[0]
        if kind == 0:
            to_reply = self.to_reply
            return [x if type(x) is bytes else to_reply(x, resp) for x in res[1:]]
        if kind == 1:
            return RedisError(res[1])
        if kind == 2:
            return Status(res[1])
        if kind == 3:
            d = res[1]
            return float(d)
        if kind == 4:
            return res[1]
        if kind == 5:
            items = res[1]
            n = res[2]
            out: dict[Any, Any] = {}
            for i in range(1, n + 1, 2):
                k = self.to_reply(items[i], resp)
                try:
                    out[k] = self.to_reply(items[i + 1], resp)
                except TypeError:
                    out[repr(k)] = self.to_reply(items[i + 1], resp)
            return out
        if kind == 6:
            items = res[1]
            return SetReply(self.to_reply(items[i], resp) for i in range(1, res[2] + 1))
        if kind == 7:
            return Verbatim(res[1])
        # long array: read element by element
        n = res[1]
        return [self.to_reply(v[i], resp) for i in range(1, n + 1)]

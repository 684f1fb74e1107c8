"""The Python side of the libraries scripts see: redis.* helpers and ``bit``.

Conventions for functions called from Lua (see sandbox.lua ``wrap_lib``):
a function returns its result, or ``(None, message)`` to raise ``message``
as a Lua error; "many" functions return ``(True, values)``
or ``(False, message)``.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from respqueue.dispatch import resolve

from . import cjson, cmsgpack, lstruct
from .convert import format_number_arg

log = logging.getLogger("respqueue.lua")

_LOG_LEVELS = {0: logging.DEBUG, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING}


def _tostr(v: Any) -> bytes | None:
    """lua_tolstring for strings and numbers; None otherwise."""
    t = type(v)
    if t is bytes:
        return v
    if t is int or t is float:
        return lua_number_str(v)
    return None


def lua_number_str(v: int | float) -> bytes:
    """Lua 5.1's ``tostring`` of a number (``%.14g``)."""
    if type(v) is int:
        if -(10**14) < v < 10**14:
            return b"%d" % v
        v = float(v)
    if v != v:
        return b"nan" if str(v)[0] != "-" else b"-nan"
    if v in (float("inf"), float("-inf")):
        return b"inf" if v > 0 else b"-inf"
    return b"%.14g" % v


def tonumber(v: Any) -> float | None:
    """luaL_checknumber's view: numbers and numeric strings."""
    t = type(v)
    if t is int or t is float:
        return v
    if t is bytes:
        s = v.strip()
        try:
            if s[:2].lower() in (b"0x",) or s[:3].lower() in (b"-0x", b"+0x"):
                return float(int(s, 16))
            return float(s)
        except ValueError:
            return None
    return None


def lua_typename(v: Any, lua_type: Any) -> str:
    if v is None:
        return "nil"
    t = type(v)
    if t is bool:
        return "boolean"
    if t is int or t is float:
        return "number"
    if t is bytes:
        return "string"
    lt = lua_type(v)
    return lt or "userdata"


def _fast_lua_type(lua_type: Any, table_type: type) -> Any:
    """lupa's ``lua_type`` without a call into Lua for tables (the common case)."""

    def fast(v: Any) -> Any:
        if type(v) is table_type:
            return "table"
        return lua_type(v)

    return fast


class LuaRaise(Exception):
    """Raised by a Python function called from Lua: ``value`` becomes the Lua error.

    ``positioned`` errors get their Lua caller's position prefixed, as
    luaL_error does in the C libraries.
    """

    def __init__(self, value: Any, positioned: bool = True) -> None:
        super().__init__(value)
        self.value = value
        self.positioned = positioned


def _one(fn: Any, positioned: bool = True) -> Any:
    def w(*a: Any) -> Any:
        r = fn(*a)
        if type(r) is tuple:
            raise LuaRaise(r[1], positioned)
        return r

    return w


def _many(fn: Any) -> Any:
    def w(*a: Any) -> Any:
        r = fn(*a)
        if not r[0]:
            raise LuaRaise(r[1], True)
        return tuple(r[1])

    return w


class Libs:
    def __init__(self, scripting: Any) -> None:
        self.s = scripting
        self.lua = scripting.lua
        self.lua_type = _fast_lua_type(scripting.engine.lua_type, type(self.lua.table()))
        self.null: Any = None
        self.mk_array: Any = None

    def bind(self, helpers: Any) -> None:
        self.null = helpers[b"null"]
        self.mk_array = helpers[b"mk_array"]
        cjson.bind(self)
        cmsgpack.bind(self)

    def table(self) -> Any:
        tf = self.lua.table_from
        redis = tf(
            {
                b"sha1hex": _one(self.sha1hex, False),
                b"log": _one(self.log, False),
                b"setresp": _one(self.setresp, False),
                b"set_repl": _one(self.set_repl, False),
                b"replicate_commands": _one(self.replicate_commands, False),
                b"breakpoint": _one(self.breakpoint, False),
                b"debug": _one(self.debug, False),
                b"acl_check_cmd": _one(self.acl_check_cmd, False),
                b"REDIS_VERSION": b"7.2.4",
                b"REDIS_VERSION_NUM": 0x070204,
            }
        )
        bit = tf({name.encode(): _one(getattr(self, "bit_" + name)) for name in _BIT_NAMES})
        struct = tf(
            {
                b"pack": _one(lambda *a: lstruct.pack(self, a)),
                b"unpack": _many(lambda *a: lstruct.unpack(self, a)),
                b"size": _one(lambda *a: lstruct.size(self, a)),
            }
        )
        cj = tf(
            {
                b"encode": _one(lambda *a: cjson.encode(self, a)),
                b"decode": _one(lambda *a: cjson.decode(self, a)),
                b"encode_keep_buffer": lambda *a: True,
                b"encode_max_depth": lambda *a: 1000,
                b"decode_max_depth": lambda *a: 1000,
                b"encode_number_precision": lambda *a: 14,
                b"encode_invalid_numbers": lambda *a: False,
                b"decode_invalid_numbers": lambda *a: True,
                b"encode_sparse_array": lambda *a: False,
                b"new": _one(lambda *a: (None, b"cjson.new is not supported")),
                b"_NAME": b"cjson",
                b"_VERSION": b"2.1.0",
            }
        )
        mp = tf(
            {
                b"pack": _one(lambda *a: cmsgpack.pack(self, a)),
                b"unpack": cmsgpack.make_unpack(self, _many(lambda *a: cmsgpack.unpack(self, a))),
                b"unpack_one": _many(lambda *a: cmsgpack.unpack_one(self, a)),
                b"unpack_limit": _many(lambda *a: cmsgpack.unpack_limit(self, a)),
                b"_NAME": b"cmsgpack",
                b"_VERSION": b"lua-cmsgpack 0.4.0",
                b"_COPYRIGHT": b"Copyright (C) 2012, Salvatore Sanfilippo",
                b"_DESCRIPTION": b"MessagePack C implementation for Lua",
            }
        )
        return tf(
            {
                b"redis": redis,
                b"bit": bit,
                b"struct": struct,
                b"cjson": cj,
                b"cmsgpack": mp,
                b"rep": _one(self.rep),
            }
        )

    # ---- string.rep with a size cap ---------------------------------------
    def rep(self, *a: Any) -> Any:
        s = a[0] if a else None
        if type(s) is not bytes:
            if type(s) in (int, float):
                s = lua_number_str(s)
            else:
                return None, (f"bad argument #1 to 'rep' (string expected, got {lua_typename(s, self.lua_type)})").encode()
        n = tonumber(a[1]) if len(a) > 1 else None
        if n is None:
            got = lua_typename(a[1], self.lua_type) if len(a) > 1 else "no value"
            return None, (f"bad argument #2 to 'rep' (number expected, got {got})").encode()
        if n != n or n in (float("inf"), float("-inf")):
            n = 0
        n = int(n)
        if n <= 0 or not s:
            return b""
        if len(s) * n > _max_string():
            return None, b"not enough memory"
        return s * n

    # ---- redis.* ---------------------------------------------------------
    def sha1hex(self, *a: Any) -> Any:
        if len(a) != 1:
            return None, b"wrong number of arguments"
        s = _tostr(a[0])
        if s is None:
            s = b""
        return hashlib.sha1(s).hexdigest().encode()

    def log(self, *a: Any) -> Any:
        if len(a) < 2:
            return None, b"redis.log() requires two arguments or more."
        if type(a[0]) not in (int, float):
            return None, b"First argument must be a number (log level)."
        level = int(a[0])
        if level not in _LOG_LEVELS:
            return None, b"Invalid debug level."
        parts = []
        for v in a[1:]:
            s = _tostr(v)
            if s is not None:
                parts.append(s)
        log.log(_LOG_LEVELS[level], "%s", b" ".join(parts).decode("utf-8", "replace"))
        return None

    def setresp(self, *a: Any) -> Any:
        if len(a) != 1:
            return None, b"redis.setresp() requires one argument."
        v = a[0]
        n = tonumber(v)
        if n not in (2, 3):
            return None, b"RESP version must be 2 or 3."
        self.s.set_resp(int(n))
        return None

    def set_repl(self, *a: Any) -> Any:
        if len(a) != 1:
            return None, b"redis.set_repl() requires two arguments."
        n = tonumber(a[0])
        if n is None or n != int(n) or int(n) & ~3:
            return None, b"Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."
        return None

    def replicate_commands(self, *a: Any) -> Any:
        return True

    def breakpoint(self, *a: Any) -> Any:
        return False

    def debug(self, *a: Any) -> Any:
        return None

    def acl_check_cmd(self, *a: Any) -> Any:
        if not a:
            return None, b"Please specify at least one argument for this redis lib call"
        argv = []
        for v in a:
            s = _tostr(v)
            if s is None:
                return None, b"Lua redis lib command arguments must be strings or integers"
            argv.append(s)
        cmd = resolve(argv)
        if not hasattr(cmd, "proc"):
            return None, b"Invalid command passed to redis.acl_check_cmd()"
        return True

    # ---- bit (LuaBitOp semantics) ----------------------------------------
    def _bitargs(self, name: str, a: tuple[Any, ...], need: int) -> Any:
        out = []
        for i, v in enumerate(a):
            n = v if type(v) in (int, float) else None
            if n is None and type(v) is bytes:
                n = tonumber(v)
            if n is None:
                got = lua_typename(v, self.lua_type)
                return None, f"bad argument #{i + 1} to '{name}' (number expected, got {got})".encode()
            out.append(_tobit(n))
        if len(out) < need:
            return None, f"bad argument #{len(out) + 1} to '{name}' (number expected, got no value)".encode()
        return out, None

    def bit_tobit(self, *a: Any) -> Any:
        v, e = self._bitargs("tobit", a[:1], 1)
        return (None, e) if e else v[0]

    def bit_bnot(self, *a: Any) -> Any:
        v, e = self._bitargs("bnot", a[:1], 1)
        return (None, e) if e else _s32(~v[0])

    def bit_band(self, *a: Any) -> Any:
        v, e = self._bitargs("band", a, 1)
        if e:
            return None, e
        r = -1
        for x in v:
            r &= x
        return _s32(r)

    def bit_bor(self, *a: Any) -> Any:
        v, e = self._bitargs("bor", a, 1)
        if e:
            return None, e
        r = 0
        for x in v:
            r |= x
        return _s32(r)

    def bit_bxor(self, *a: Any) -> Any:
        v, e = self._bitargs("bxor", a, 1)
        if e:
            return None, e
        r = 0
        for x in v:
            r ^= x
        return _s32(r)

    def _shift(self, name: str, a: tuple[Any, ...]) -> Any:
        v, e = self._bitargs(name, a[:2], 2)
        if e:
            return None, e
        x, n = v[0] & 0xFFFFFFFF, v[1] & 31
        if name == "lshift":
            return _s32(x << n)
        if name == "rshift":
            return _s32(x >> n)
        if name == "arshift":
            return _s32(_s32(x) >> n)
        if name == "rol":
            return _s32((x << n) | (x >> (32 - n)) if n else x)
        return _s32((x >> n) | (x << (32 - n)) if n else x)

    def bit_lshift(self, *a: Any) -> Any:
        return self._shift("lshift", a)

    def bit_rshift(self, *a: Any) -> Any:
        return self._shift("rshift", a)

    def bit_arshift(self, *a: Any) -> Any:
        return self._shift("arshift", a)

    def bit_rol(self, *a: Any) -> Any:
        return self._shift("rol", a)

    def bit_ror(self, *a: Any) -> Any:
        return self._shift("ror", a)

    def bit_bswap(self, *a: Any) -> Any:
        v, e = self._bitargs("bswap", a[:1], 1)
        if e:
            return None, e
        return _s32(int.from_bytes((v[0] & 0xFFFFFFFF).to_bytes(4, "little"), "big"))

    def bit_tohex(self, *a: Any) -> Any:
        if len(a) < 2 or a[1] is None:
            a = (a[0] if a else None, 8)
        v, e = self._bitargs("tohex", a[:2], 1)
        if e:
            return None, e
        x, n = v[0] & 0xFFFFFFFF, v[1]
        digits = "0123456789abcdef"
        if n < 0:
            n = -n
            digits = "0123456789ABCDEF"
        if n > 8:
            n = 8
        out = []
        for _ in range(n):
            out.append(digits[x & 15])
            x >>= 4
        return "".join(reversed(out)).encode()


_BIT_NAMES = ("tobit", "bnot", "band", "bor", "bxor", "lshift", "rshift", "arshift", "rol", "ror", "bswap", "tohex")


def _s32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - 0x100000000 if x & 0x80000000 else x


def _tobit(n: float) -> int:
    if type(n) is int:
        return _s32(n)
    if n != n or n in (float("inf"), float("-inf")):
        return 0
    return _s32(round(n))


def _max_string() -> int:
    from .runtime import MAX_STRING

    return MAX_STRING


__all__ = ["Libs", "format_number_arg", "lua_number_str", "tonumber"]

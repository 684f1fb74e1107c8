"""cmsgpack for scripts: pack/unpack/unpack_one/unpack_limit with the behaviour of
Redis's bundled lua-cmsgpack 0.4 (str8 for short strings, float32 when exact,
smallest integer encodings, arrays only for hole-free 1..n tables, bin -> string,
nil holes in arrays, several concatenated objects -> several values).
Decoding uses the ``msgpack`` C extension; encoding is written here."""

from __future__ import annotations

import math
import struct as _st
from collections.abc import Iterable
from typing import Any

import msgpack

_libs: Any = None
MISSING = b"Missing bytes in input."
BAD = b"Bad data format in input."
_INT64_MIN = -(2**63)
_UINT64_MAX = 2**64 - 1
_INT64_LIMIT = 2**63
_MAX_NESTING = 16


def bind(libs: Any) -> None:
    global _libs
    _libs = libs


class _Pairs(list):
    """A map decoded as a list of (key, value) pairs (keys may be unhashable)."""

    __slots__ = ()


# ---- unpack -------------------------------------------------------------------
def _plain(values: Iterable[Any]) -> bool:
    """Every value is a scalar that _to_lua would return as it is (bytes, None, float, bool, int64)."""
    for x in values:
        tx = type(x)
        if tx is not bytes and x is not None and tx is not float and tx is not bool and (
            tx is not int or not _INT64_MIN <= x < _INT64_LIMIT
        ):
            return False
    return True


def _to_lua(v: Any, tf: Any) -> Any:
    t = type(v)
    if t is bytes or t is bool or t is float or v is None:
        return v
    if t is int:
        if _INT64_MIN <= v < _INT64_LIMIT:
            return v
        if v <= _UINT64_MAX:
            return v - 2**64  # lua-cmsgpack reads uint64 into a signed 64-bit integer
        return float(v)
    if t is list:
        # scalars go to table_from as they are (what _to_lua returns for them)
        if _plain(v):
            return tf(v)
        return tf([_to_lua(x, tf) for x in v])
    if t is dict:
        # the common shape (string keys, scalar values) goes to table_from as it is:
        # the same table, built in the same order, as the general case below
        if all(type(k) is bytes for k in v) and _plain(v.values()):
            return tf(v)
        return tf({_key(k, tf): _to_lua(x, tf) for k, x in v.items() if k is not None})
    if t is _Pairs:
        return tf({_key(k, tf): _to_lua(x, tf) for k, x in v if k is not None})
    raise ValueError("unsupported msgpack type")


def _key(k: Any, tf: Any) -> Any:
    t = type(k)
    if t is bytes:
        return k
    return _to_lua(k, tf)


class _ExtFound(ValueError):
    pass


def _no_ext(code: int, data: bytes) -> Any:
    raise _ExtFound("ext types are not supported")


def _arg_string(a: tuple[Any, ...], name: str, idx: int = 0) -> bytes | tuple[None, bytes]:
    if len(a) <= idx:
        return None, f"bad argument #{idx + 1} to '{name}' (string expected, got no value)".encode()
    s = a[idx]
    if type(s) is bytes:
        return s
    from .libs import lua_number_str, lua_typename

    if type(s) is int or type(s) is float:
        return lua_number_str(s)
    return None, f"bad argument #{idx + 1} to '{name}' (string expected, got {lua_typename(s, _libs.lua_type)})".encode()


def _decode_all(s: bytes, limit: int = 0, offset: int = 0) -> tuple[list[Any], int]:
    """Decode objects from ``s[offset:]``; returns (objects, next offset or -1)."""
    if offset == 0 and limit == 0:
        try:
            return [msgpack.unpackb(s, raw=True, strict_map_key=False, ext_hook=_no_ext)], -1
        except msgpack.ExtraData as e:
            objs = [e.unpacked]
            pos = len(s) - len(e.extra)
            more, _ = _decode_all(s, 0, pos)
            return objs + more, -1
        except TypeError:
            pass  # unhashable map key: take the slow path below
    up = msgpack.Unpacker(
        raw=True, strict_map_key=False, object_pairs_hook=_Pairs, ext_hook=_no_ext, max_buffer_size=max(len(s), 1)
    )
    up.feed(s[offset:])
    out: list[Any] = []
    while True:
        if limit and len(out) >= limit:
            break
        try:
            out.append(up.unpack())
        except msgpack.OutOfData:
            if up.tell() < len(s) - offset:
                raise
            break
    pos = offset + up.tell()
    return out, (pos if pos < len(s) else -1)


def _unpack(a: tuple[Any, ...], name: str, limit: int, offset: int) -> Any:
    s = _arg_string(a, name)
    if type(s) is tuple:
        return s
    tf = _libs.lua.table_from
    if not s:
        return True, []
    if offset >= len(s):
        return True, [-1]
    try:
        objs, nxt = _decode_all(s, limit, offset)
        vals = [_to_lua(o, tf) for o in objs]
    except msgpack.OutOfData:
        return None, MISSING
    except ValueError as e:
        if "incomplete" in str(e).lower() or "insufficient" in str(e).lower():
            return None, MISSING
        return None, BAD
    except Exception:
        return None, BAD
    if name == "unpack":
        return True, vals
    return True, [nxt, *vals]


def unpack(libs: Any, a: tuple[Any, ...]) -> Any:
    return _unpack(a, "unpack", 0, 0)


def make_unpack(libs: Any, slow: Any) -> Any:
    """cmsgpack.unpack as called from Lua: one non-empty string holding exactly one
    object is decoded here directly; everything else (several objects, errors,
    numbers as input, unhashable map keys) goes to ``slow``, the general path."""
    unpackb = msgpack.unpackb
    tf = libs.lua.table_from

    def unpack_fast(*a: Any) -> Any:
        if a:
            s = a[0]
            if type(s) is bytes and s:
                try:
                    o = unpackb(s, raw=True, strict_map_key=False, ext_hook=_no_ext)
                    return _to_lua(o, tf)
                except Exception:
                    pass
        return slow(*a)

    return unpack_fast


def _int_arg(a: tuple[Any, ...], idx: int, default: int) -> int:
    if len(a) > idx and type(a[idx]) in (int, float):
        return int(a[idx])
    if len(a) > idx and type(a[idx]) is bytes:
        try:
            return int(float(a[idx]))
        except ValueError:
            return default
    return default


def unpack_one(libs: Any, a: tuple[Any, ...]) -> Any:
    return _unpack(a, "unpack_one", 1, max(0, _int_arg(a, 1, 0)))


def unpack_limit(libs: Any, a: tuple[Any, ...]) -> Any:
    limit = _int_arg(a, 1, 0)
    return _unpack(a, "unpack_limit", max(0, limit), max(0, _int_arg(a, 2, 0)))


# ---- pack -------------------------------------------------------------------
def _pack_int(v: int, out: bytearray) -> None:
    if v >= 0:
        if v < 128:
            out.append(v)
        elif v <= 0xFF:
            out += b"\xcc" + v.to_bytes(1, "big")
        elif v <= 0xFFFF:
            out += b"\xcd" + v.to_bytes(2, "big")
        elif v <= 0xFFFFFFFF:
            out += b"\xce" + v.to_bytes(4, "big")
        else:
            out += b"\xcf" + (v & _UINT64_MAX).to_bytes(8, "big")
    else:
        if v >= -32:
            out.append(v & 0xFF)
        elif v >= -128:
            out += b"\xd0" + v.to_bytes(1, "big", signed=True)
        elif v >= -32768:
            out += b"\xd1" + v.to_bytes(2, "big", signed=True)
        elif v >= -(2**31):
            out += b"\xd2" + v.to_bytes(4, "big", signed=True)
        else:
            out += b"\xd3" + v.to_bytes(8, "big", signed=True)


def _pack_num(v: int | float, out: bytearray) -> None:
    if type(v) is int:
        if _INT64_MIN <= v < 2**63:
            _pack_int(v, out)
            return
        v = float(v)
    if not math.isinf(v) and v == v and v == math.floor(v) and _INT64_MIN <= v < 2**63:
        _pack_int(int(v), out)
        return
    f32 = _st.unpack(">f", _st.pack(">f", v))[0] if (math.isinf(v) or v != v or abs(v) <= 3.4028234663852886e38) else None
    if f32 is not None and f32 == v:
        out += b"\xca" + _st.pack(">f", v)
    else:
        out += b"\xcb" + _st.pack(">d", v)


def _pack_str(s: bytes, out: bytearray) -> None:
    n = len(s)
    if n < 32:
        out.append(0xA0 | n)
    elif n <= 0xFF:
        out += b"\xd9" + bytes((n,))
    elif n <= 0xFFFF:
        out += b"\xda" + n.to_bytes(2, "big")
    else:
        out += b"\xdb" + n.to_bytes(4, "big")
    out += s


def _pack(v: Any, out: bytearray, level: int, lua_type: Any) -> None:
    t = type(v)
    if t is bytes:
        _pack_str(v, out)
    elif t is int or t is float:
        _pack_num(v, out)
    elif t is bool:
        out.append(0xC3 if v else 0xC2)
    elif v is None:
        out.append(0xC0)
    elif lua_type(v) == "table" and level < _MAX_NESTING:
        items = list(v.items())
        n = len(items)
        is_array = True
        mx = 0
        for k, _ in items:
            if (type(k) is int or (type(k) is float and k == math.floor(k))) and k >= 1:
                if k > mx:
                    mx = int(k)
            else:
                is_array = False
                break
        if is_array and mx == n:
            if n < 16:
                out.append(0x90 | n)
            elif n <= 0xFFFF:
                out += b"\xdc" + n.to_bytes(2, "big")
            else:
                out += b"\xdd" + n.to_bytes(4, "big")
            d = dict(items)
            for i in range(1, n + 1):
                _pack(d.get(i), out, level + 1, lua_type)
        else:
            if n < 16:
                out.append(0x80 | n)
            elif n <= 0xFFFF:
                out += b"\xde" + n.to_bytes(2, "big")
            else:
                out += b"\xdf" + n.to_bytes(4, "big")
            for k, x in items:
                _pack(k, out, level + 1, lua_type)
                _pack(x, out, level + 1, lua_type)
    else:
        out.append(0xC0)


def pack(libs: Any, a: tuple[Any, ...]) -> Any:
    if not a:
        return None, b"bad argument #0 to 'pack' (MessagePack pack needs input.)"
    out = bytearray()
    for v in a:
        _pack(v, out, 0, libs.lua_type)
    return bytes(out)

"""``struct`` for scripts: pack/unpack/size with the format language of the
lua_struct library Redis bundles (``<>=!``, b B h H l L T i[n] I[n] f d c[n] s x).
Written for respqueue on top of Python's struct module."""

from __future__ import annotations

import struct as _st
from typing import Any

MAXINTSIZE = 32
MAXALIGN = 8
_SIZES = {"b": 1, "B": 1, "h": 2, "H": 2, "l": 8, "L": 8, "T": 8, "f": 4, "d": 8, "x": 1}


class StructError(Exception):
    pass


def _argerr(n: int, fname: str, msg: str) -> StructError:
    return StructError(f"bad argument #{n} to '{fname}' ({msg})".encode())


def _options(fmt: bytes, fname: str) -> Any:
    """Yield (option, size, padding-before) for each option, tracking alignment."""
    s = fmt.decode("latin-1")
    i = 0
    little = True
    align = 1
    pos = 0
    n = len(s)

    def num(i: int, default: int) -> tuple[int, int]:
        j = i
        while j < n and s[j].isdigit():
            j += 1
        if j == i:
            return default, i
        return int(s[i:j]), j

    while i < n:
        opt = s[i]
        i += 1
        if opt == " ":
            continue
        if opt in "<":
            little = True
            continue
        if opt == ">":
            little = False
            continue
        if opt == "=":
            little = True
            continue
        if opt == "!":
            a, i = num(i, MAXALIGN)
            if a & (a - 1):
                raise _argerr(1, fname, f"alignment {a} is not a power of 2")
            align = a
            continue
        if opt in "iI":
            size, i = num(i, 4)
            if size > MAXINTSIZE:
                raise StructError(b"integral size %d is larger than limit of %d" % (size, MAXINTSIZE))
        elif opt == "c":
            size, i = num(i, 1)
        elif opt == "s":
            size = 0
        elif opt in _SIZES:
            size = _SIZES[opt]
        else:
            raise _argerr(1, fname, f"invalid format option '{opt}'")
        pad = 0
        if size > 1 and opt != "c" and align > 1:
            a = min(size, align)
            if a & (a - 1):
                raise _argerr(1, fname, f"alignment {a} is not a power of 2")
            pad = (a - (pos & (a - 1))) & (a - 1)
        pos += pad + size
        yield opt, size, pad, little


def _number(a: tuple[Any, ...], idx: int, fname: str) -> float | int:
    from .libs import lua_typename, tonumber

    if idx >= len(a):
        raise _argerr(idx + 1, fname, "number expected, got no value")
    v = a[idx]
    n = tonumber(v)
    if n is None:
        raise _argerr(idx + 1, fname, f"number expected, got {lua_typename(v, _lt)}")
    return n


def _string(a: tuple[Any, ...], idx: int, fname: str) -> bytes:
    from .libs import lua_number_str, lua_typename

    if idx >= len(a):
        raise _argerr(idx + 1, fname, "string expected, got no value")
    v = a[idx]
    if type(v) is bytes:
        return v
    if type(v) is int or type(v) is float:
        return lua_number_str(v)
    raise _argerr(idx + 1, fname, f"string expected, got {lua_typename(v, _lt)}")


_lt: Any = None


def _int_bytes(n: float | int, size: int, little: bool) -> bytes:
    if n < 0:
        v = int(n) & 0xFFFFFFFFFFFFFFFF
    else:
        v = int(n) & 0xFFFFFFFFFFFFFFFF if n < 2**64 else 0
    out = bytearray()
    for _ in range(size):
        out.append(v & 0xFF)
        v >>= 8
    return bytes(out if little else reversed(out))


def pack(libs: Any, a: tuple[Any, ...]) -> Any:
    global _lt
    _lt = libs.lua_type
    try:
        fmt = _string(a, 0, "pack")
        out = bytearray()
        arg = 1
        for opt, size, pad, little in _options(fmt, "pack"):
            out += b"\0" * pad
            if opt == "x":
                out.append(0)
            elif opt in "bBhHlLTiI":
                out += _int_bytes(_number(a, arg, "pack"), size, little)
                arg += 1
            elif opt == "f":
                out += _st.pack("<f" if little else ">f", float(_number(a, arg, "pack")))
                arg += 1
            elif opt == "d":
                out += _st.pack("<d" if little else ">d", float(_number(a, arg, "pack")))
                arg += 1
            elif opt == "c":
                s = _string(a, arg, "pack")
                if size == 0:
                    size = len(s)
                if len(s) < size:
                    raise _argerr(arg + 2, "pack", "string too short")  # lua_struct counts one too far
                out += s[:size]
                arg += 1
            elif opt == "s":
                s = _string(a, arg, "pack")
                out += s + b"\0"
                arg += 1
        return bytes(out)
    except StructError as e:
        return None, e.args[0]


def unpack(libs: Any, a: tuple[Any, ...]) -> Any:
    global _lt
    _lt = libs.lua_type
    try:
        fmt = _string(a, 0, "unpack")
        data = _string(a, 1, "unpack")
        pos = 0
        if len(a) > 2 and a[2] is not None:
            pos = int(_number(a, 2, "unpack")) - 1
            if pos < 0:
                raise _argerr(3, "unpack", "offset must be 1 or greater")
        ld = len(data)
        vals: list[Any] = []
        prev: Any = None
        for opt, size, pad, little in _options(fmt, "unpack"):
            pos += pad
            if opt == "c" and size == 0:
                if type(prev) not in (int, float):
                    raise StructError(b"format 'c0' needs a previous size")
                size = int(prev)
                vals.pop()
            if opt != "s" and pos + size > ld:
                raise _argerr(2, "unpack", "data string too short")
            if opt == "x":
                pos += 1
                continue
            if opt in "bBhHlLTiI":
                chunk = data[pos : pos + size]
                if not little:
                    chunk = chunk[::-1]
                v = 0
                for i in range(min(size, 8)):
                    v |= chunk[i] << (8 * i)
                if opt.islower() and size <= 8:
                    mask = 1 << (size * 8 - 1)
                    v = (v ^ mask) - mask
                    val: Any = v
                else:
                    val = v if v < 2**63 else float(v)
                vals.append(val)
                pos += size
            elif opt == "f":
                vals.append(_st.unpack("<f" if little else ">f", data[pos : pos + 4])[0])
                pos += 4
            elif opt == "d":
                vals.append(_st.unpack("<d" if little else ">d", data[pos : pos + 8])[0])
                pos += 8
            elif opt == "c":
                vals.append(data[pos : pos + size])
                pos += size
            elif opt == "s":
                e = data.find(b"\0", pos)
                if e < 0:
                    raise _argerr(2, "unpack", "unfinished string in data")
                vals.append(data[pos:e])
                pos = e + 1
            prev = vals[-1] if vals else None
        vals.append(pos + 1)
        return True, vals
    except StructError as e:
        return False, e.args[0]


def size(libs: Any, a: tuple[Any, ...]) -> Any:
    global _lt
    _lt = libs.lua_type
    try:
        fmt = _string(a, 0, "size")
        total = 0
        for opt, sz, pad, _ in _options(fmt, "size"):
            if opt == "s" or (opt == "c" and sz == 0):
                raise _argerr(1, "size", f"option '{opt}' has no fixed size")
            total += pad + sz
        return total
    except StructError as e:
        return None, e.args[0]

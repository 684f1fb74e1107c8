"""cjson for scripts: encode/decode with lua-cjson 2.1's behaviour as bundled in
Redis (numbers ``%.14g``, ``/`` escaped, empty table -> ``{}``, sparse-array
rules, its error texts). Written for respqueue."""

from __future__ import annotations

import math
import sys
from typing import Any

if sys.getrecursionlimit() < 5000:
    sys.setrecursionlimit(5000)  # 1000 nested levels, two frames each

_ESC: dict[int, bytes] = {i: b"\\u%04x" % i for i in range(32)}
_ESC.update({8: b"\\b", 9: b"\\t", 10: b"\\n", 12: b"\\f", 13: b"\\r", 34: b'\\"', 92: b"\\\\", 47: b"\\/", 127: b"\\u007f"})
_ESC_TABLE = {k: v.decode("latin-1") for k, v in _ESC.items()}
_NEEDS_ESC = bytes(sorted(_ESC))

_libs: Any = None


def bind(libs: Any) -> None:
    global _libs
    _libs = libs


class EncodeError(Exception):
    pass


def _num(v: int | float) -> bytes:
    if type(v) is float:
        if math.isinf(v) or v != v:
            raise EncodeError(b"Cannot serialise number: must not be NaN or Inf")
        return b"%.14g" % v
    if -(10**14) < v < 10**14:
        return b"%d" % v
    return b"%.14g" % float(v)


def _str(s: bytes) -> bytes:
    if s.translate(None, _NEEDS_ESC) == s:
        return b'"' + s + b'"'
    return b'"' + s.decode("latin-1").translate(_ESC_TABLE).encode("latin-1") + b'"'


def _encode(v: Any, out: list[bytes], depth: int, lua_type: Any) -> None:
    t = type(v)
    if t is bytes:
        out.append(_str(v))
    elif t is int or t is float:
        out.append(_num(v))
    elif t is bool:
        out.append(b"true" if v else b"false")
    elif v is None:
        out.append(b"null")
    else:
        lt = lua_type(v)
        if lt == "table":
            depth += 1
            if depth > 1000:
                raise EncodeError(b"Cannot serialise, excessive nesting (%d)" % depth)
            items = list(v.items())
            # array if every key is a positive integer
            mx = 0
            arr = True
            for k, _ in items:
                if type(k) is int and k >= 1:
                    if k > mx:
                        mx = k
                elif type(k) is float and k >= 1 and k == math.floor(k):
                    if k > mx:
                        mx = int(k)
                else:
                    arr = False
                    break
            if arr and mx > 0:
                if mx > len(items) * 2 and mx > 10:
                    raise EncodeError(b"Cannot serialise table: excessively sparse array")
                d = dict(items)
                out.append(b"[")
                for i in range(1, mx + 1):
                    if i > 1:
                        out.append(b",")
                    _encode(d.get(i), out, depth, lua_type)
                out.append(b"]")
                return
            out.append(b"{")
            first = True
            for k, x in items:
                tk = type(k)
                if not first:
                    out.append(b",")
                first = False
                if tk is bytes:
                    out.append(_str(k))
                elif tk is int or tk is float:
                    out.append(b'"' + _num(k) + b'"')
                else:
                    name = "boolean" if tk is bool else (lua_type(k) or "userdata")
                    raise EncodeError(b"Cannot serialise %s: table key must be a number or string" % name.encode())
                out.append(b":")
                _encode(x, out, depth, lua_type)
            out.append(b"}")
        elif lt == "userdata":
            out.append(b"null")  # cjson.null (the only userdata a script can get)
        else:
            raise EncodeError(b"Cannot serialise %s: type not supported" % (lt or "userdata").encode())


def encode(libs: Any, a: tuple[Any, ...]) -> Any:
    if len(a) != 1:
        return None, b"bad argument #1 to 'encode' (expected 1 argument)"
    out: list[bytes] = []
    try:
        _encode(a[0], out, 0, libs.lua_type)
    except EncodeError as e:
        return None, e.args[0]
    return b"".join(out)


# ---- decode -----------------------------------------------------------------
class DecodeError(Exception):
    pass


_WS = b" \t\r\n"
_NUM_START = set(b"-0123456789")
_NUM_CHARS = frozenset(b"0123456789+-.eExXabcdefABCDEFinfINFtyTYnN")


class _Parser:
    __slots__ = ("s", "n", "pos", "depth", "tf", "null")

    def __init__(self, s: bytes, tf: Any, null: Any) -> None:
        self.s = s
        self.n = len(s)
        self.pos = 0
        self.depth = 0
        self.tf = tf
        self.null = null

    # tokens: (kind, value, index) ; kinds follow lua-cjson's names
    def token(self) -> tuple[str, Any, int]:
        s, n = self.s, self.n
        i = self.pos
        while i < n and s[i] in _WS:
            i += 1
        self.pos = i
        if i >= n:
            return "T_END", None, i
        ch = s[i]
        if ch == 123:
            self.pos = i + 1
            return "T_OBJ_BEGIN", None, i
        if ch == 125:
            self.pos = i + 1
            return "T_OBJ_END", None, i
        if ch == 91:
            self.pos = i + 1
            return "T_ARR_BEGIN", None, i
        if ch == 93:
            self.pos = i + 1
            return "T_ARR_END", None, i
        if ch == 44:
            self.pos = i + 1
            return "T_COMMA", None, i
        if ch == 58:
            self.pos = i + 1
            return "T_COLON", None, i
        if ch == 34:
            return self._string(i)
        if ch in _NUM_START or s[i : i + 3].lower() in (b"inf", b"nan"):
            return self._number(i)
        if s.startswith(b"true", i):
            self.pos = i + 4
            return "T_BOOLEAN", True, i
        if s.startswith(b"false", i):
            self.pos = i + 5
            return "T_BOOLEAN", False, i
        if s.startswith(b"null", i):
            self.pos = i + 4
            return "T_NULL", None, i
        return "T_ERROR", "invalid token", i

    def _string(self, start: int) -> tuple[str, Any, int]:
        s, n = self.s, self.n
        i = start + 1
        j = s.find(b'"', i)
        k = s.find(b"\\", i)
        if j >= 0 and (k < 0 or k > j):
            self.pos = j + 1
            return "T_STRING", s[i:j], start
        out = bytearray()
        while True:
            if i >= n:
                return "T_ERROR", "unexpected end of string", i
            ch = s[i]
            if ch == 34:
                break
            if ch == 92:
                if i + 1 >= n:
                    return "T_ERROR", "unexpected end of string", i + 1
                e = s[i + 1]
                if e == 117:  # \u
                    esc = i
                    cp = _hex4(s, i + 2)
                    if cp is None:
                        return "T_ERROR", "invalid unicode escape code", esc
                    i += 6
                    if 0xD800 <= cp <= 0xDBFF:
                        if s[i : i + 2] != b"\\u":
                            return "T_ERROR", "invalid unicode escape code", esc
                        lo = _hex4(s, i + 2)
                        if lo is None or not 0xDC00 <= lo <= 0xDFFF:
                            return "T_ERROR", "invalid unicode escape code", esc
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                        i += 6
                    elif 0xDC00 <= cp <= 0xDFFF:
                        return "T_ERROR", "invalid unicode escape code", esc
                    out += chr(cp).encode("utf-8", "surrogatepass")
                    continue
                rep = _UNESC.get(e)
                if rep is None:
                    return "T_ERROR", "invalid escape code", i
                out.append(rep)
                i += 2
                continue
            out.append(ch)
            i += 1
        self.pos = i + 1
        return "T_STRING", bytes(out), start

    def _number(self, start: int) -> tuple[str, Any, int]:
        s, n = self.s, self.n
        i = start
        while i < n and s[i] in _NUM_CHARS:
            i += 1
        text = s[start:i]
        # the longest prefix strtod accepts
        val = None
        end = len(text)
        while end > 0:
            val = _strtod(text[:end])
            if val is not None:
                break
            end -= 1
        if val is None:
            return "T_ERROR", "invalid number", start
        self.pos = start + end
        return "T_NUMBER", val, start

    def value(self, tok: tuple[str, Any, int]) -> Any:
        kind, val, idx = tok
        if kind in ("T_STRING", "T_NUMBER", "T_BOOLEAN"):
            return val
        if kind == "T_NULL":
            return self.null
        if kind == "T_OBJ_BEGIN":
            return self._object(idx)
        if kind == "T_ARR_BEGIN":
            return self._array(idx)
        self.fail("value", tok)

    def _enter(self, idx: int) -> None:
        self.depth += 1
        if self.depth > 1000:
            raise DecodeError(b"Found too many nested data structures (%d) at character %d" % (self.depth, idx + 1))

    def _object(self, idx: int) -> Any:
        self._enter(idx)
        d: dict[bytes, Any] = {}
        tok = self.token()
        if tok[0] == "T_OBJ_END":
            self.depth -= 1
            return self.tf(d)
        while True:
            if tok[0] != "T_STRING":
                self.fail("object key string", tok)
            key = tok[1]
            tok = self.token()
            if tok[0] != "T_COLON":
                self.fail("colon", tok)
            d[key] = self.value(self.token())
            tok = self.token()
            if tok[0] == "T_OBJ_END":
                self.depth -= 1
                return self.tf(d)
            if tok[0] != "T_COMMA":
                self.fail("comma or object end", tok)
            tok = self.token()

    def _array(self, idx: int) -> Any:
        self._enter(idx)
        items: list[Any] = []
        tok = self.token()
        if tok[0] == "T_ARR_END":
            self.depth -= 1
            return self.tf(items)
        while True:
            items.append(self.value(tok))
            tok = self.token()
            if tok[0] == "T_ARR_END":
                self.depth -= 1
                return self.tf(items)
            if tok[0] != "T_COMMA":
                self.fail("comma or array end", tok)
            tok = self.token()

    def fail(self, expected: str, tok: tuple[str, Any, int]) -> None:
        kind, val, idx = tok
        found = val if kind == "T_ERROR" else kind
        raise DecodeError(f"Expected {expected} but found {found} at character {idx + 1}".encode())


_UNESC = {34: 34, 92: 92, 47: 47, 98: 8, 102: 12, 110: 10, 114: 13, 116: 9}


def _hex4(s: bytes, i: int) -> int | None:
    h = s[i : i + 4]
    if len(h) != 4:
        return None
    try:
        return int(h, 16) if all(c in b"0123456789abcdefABCDEF" for c in h) else None
    except ValueError:
        return None


def _strtod(t: bytes) -> float | None:
    if not t:
        return None
    low = t.lower()
    sign = 1.0
    body = low
    if body[:1] in (b"-", b"+"):
        if body[:1] == b"-":
            sign = -1.0
        body = body[1:]
    if body in (b"inf", b"infinity"):
        return sign * math.inf
    if body == b"nan":
        return -math.nan if sign > 0 else math.nan
    if body.startswith(b"0x"):
        try:
            return sign * float(int(body[2:], 16)) if body[2:] else None
        except ValueError:
            return None
    if not body[:1].isdigit() and body[:1] != b".":
        return None
    if body.endswith((b"e", b"e-", b"e+", b"-", b"+")) or b"x" in body or b"n" in body or b"i" in body:
        return None
    try:
        return float(t)
    except ValueError:
        return None


def decode(libs: Any, a: tuple[Any, ...]) -> Any:
    if len(a) != 1:
        return None, b"bad argument #1 to 'decode' (expected 1 argument)"
    s = a[0]
    if type(s) is int or type(s) is float:
        from .libs import lua_number_str

        s = lua_number_str(s)
    if type(s) is not bytes:
        from .libs import lua_typename

        return None, (f"bad argument #1 to 'decode' (string expected, got {lua_typename(s, libs.lua_type)})").encode()
    p = _Parser(s, libs.lua.table_from, libs.null)
    try:
        v = p.value(p.token())
        tok = p.token()
        if tok[0] != "T_END":
            p.fail("the end", tok)
    except DecodeError as e:
        return None, e.args[0]
    except RecursionError:
        return None, b"Found too many nested data structures"
    return v

"""Argument parsing shared by the command modules, with Redis's strictness."""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from ..errors import NOT_FLOAT, NOT_INTEGER, SYNTAX, TIMEOUT_NEGATIVE, TIMEOUT_NOT_FLOAT
from ..numbers import INT64_MAX, INT64_MIN, str2int
from ..resp import RedisError, Status

__all__ = ["INT64_MAX", "INT64_MIN", "str2int"]  # re-exported for the command modules

def index_span(n: int, start: int, end: int) -> tuple[int, int] | None:
    """Redis's LRANGE/ZRANGE/LTRIM index rules: negative indexes count from the
    end; returns the inclusive ``(start, end)`` clamped to ``[0, n)``, or None
    when the range is empty."""
    if start < 0:
        start += n
    if end < 0:
        end += n
    if start < 0:
        start = 0
    if start > end or start >= n:
        return None
    if end >= n:
        end = n - 1
    return start, end


def parse_int(b: bytes, err: RedisError = NOT_INTEGER) -> int:
    v = str2int(b)
    if v is None:
        raise err
    return v


def parse_float(b: bytes, err: RedisError = NOT_FLOAT, allow_nan: bool = False) -> float:
    """strtod-like parse: no surrounding spaces, no NaN, inf accepted."""
    if not b or b[0] in b" \t\n\r\x0b\x0c" or b[-1] in b" \t\n\r\x0b\x0c" or b"_" in b:
        raise err
    try:
        v = float(b)
    except ValueError:
        try:
            s = b.decode("ascii")
            v = float.fromhex(s) if "0x" in s.lower() else float("x")
        except (ValueError, UnicodeDecodeError):
            raise err from None
    if v != v and not allow_nan:
        raise err
    return v


def parse_timeout(b: bytes) -> float:
    """A blocking command's timeout in seconds (fractional allowed)."""
    try:
        v = parse_float(b, TIMEOUT_NOT_FLOAT)
    except RedisError:
        raise TIMEOUT_NOT_FLOAT from None
    if math.isinf(v):
        raise TIMEOUT_NOT_FLOAT
    if v < 0:
        raise TIMEOUT_NEGATIVE
    return v


def parse_nonneg(b: bytes, what: str) -> int:
    v = parse_int(b)
    if v < 0:
        raise RedisError(f"ERR {what} is out of range, must be positive")
    return v


def eq(a: bytes, lit: bytes) -> bool:
    """Case-insensitive comparison of an argument with a lowercase keyword."""
    return len(a) == len(lit) and a.lower() == lit


def syntax() -> RedisError:
    return SYNTAX


# ---- INCRBYFLOAT / HINCRBYFLOAT: Redis computes in x87 long double ---------
def _parse_ld(b: bytes) -> Fraction:
    if not b or b[0] in b" \t\n\r\x0b\x0c" or b[-1] in b" \t\n\r\x0b\x0c" or b"_" in b:
        raise NOT_FLOAT
    try:
        text = b.decode("ascii")
        if "0x" in text.lower():  # strtold reads hex floats too
            d = Decimal(float.fromhex(text))
        else:
            d = Decimal(text)
    except (InvalidOperation, UnicodeDecodeError, ValueError, OverflowError):
        raise NOT_FLOAT from None
    if d.is_nan():
        raise NOT_FLOAT
    if d.is_infinite():
        raise RedisError("ERR increment would produce NaN or Infinity")
    return _round_ld(Fraction(d))


def _round_ld(q: Fraction) -> Fraction:
    """Round to the nearest value with a 64-bit significand (ties to even)."""

    if q == 0:
        return q
    neg = q < 0
    a = -q if neg else q
    e = a.numerator.bit_length() - a.denominator.bit_length() - 64
    while True:
        m = a / Fraction(2) ** e
        if m >= 2**64:
            e += 1
        elif m < 2**63:
            e -= 1
        else:
            break
    r = Fraction(round(m)) * Fraction(2) ** e
    if abs(r) > Fraction(2) ** 16384:
        raise RedisError("ERR increment would produce NaN or Infinity")
    return -r if neg else r


def format_ld_human(q: Fraction) -> bytes:
    """printf("%.17Lf") then trailing zeros (and dot) removed."""
    neg = q < 0
    a = -q if neg else q
    scaled = round(a * 10**17)  # exact value, rounded half-even like glibc
    s = str(scaled).rjust(18, "0")
    ip, fp = s[:-17], s[-17:].rstrip("0")
    out = ip + ("." + fp if fp else "")
    if neg and out != "0":
        out = "-" + out
    return out.encode()


def long_double_add(cur: bytes | None, incr: bytes) -> bytes:
    """``cur + incr`` as Redis's INCRBYFLOAT computes and prints it."""
    a = _parse_ld(cur) if cur is not None else _parse_ld(b"0")
    b = _parse_ld(incr)
    return format_ld_human(_round_ld(a + b))


def _help(lines: list[str]) -> list[Status]:
    """A HELP reply: one status line each."""
    return [Status(x.encode()) for x in lines]

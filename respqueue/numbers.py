"""Redis's integer parsing (string2ll), shared by commands and containers."""

from __future__ import annotations

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def str2int(b: bytes) -> int | None:
    """Redis's string2ll: strict decimal int64, or None."""
    n = len(b)
    if n == 0 or n > 20:
        return None
    if n == 1:
        c = b[0]
        return c - 48 if 48 <= c <= 57 else None
    c0 = b[0]
    if c0 == 45:  # '-'
        if b[1] < 49 or b[1] > 57:
            return None
    elif c0 < 49 or c0 > 57:
        return None
    if not b[1:].isdigit():
        return None
    v = int(b)
    if v < INT64_MIN or v > INT64_MAX:
        return None
    return v

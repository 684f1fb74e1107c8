"""Redis glob patterns (KEYS, SCAN MATCH, PSUBSCRIBE), as stringmatchlen reads them."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache


@lru_cache(maxsize=1024)
def compile_glob(pattern: bytes) -> Callable[[bytes], bool]:
    """A predicate that tells whether a string matches ``pattern``."""
    if pattern == b"*":
        return lambda s: True
    if not any(ch in pattern for ch in b"*?[\\"):
        return pattern.__eq__
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i : i + 1]
        if c == b"*":
            out.append(b".*")
        elif c == b"?":
            out.append(b".")
        elif c == b"\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i : i + 1]))
        elif c == b"[":
            i += 1
            neg = False
            if i < n and pattern[i : i + 1] == b"^":
                neg = True
                i += 1
            items = []
            while i < n and pattern[i : i + 1] != b"]":
                ch = pattern[i : i + 1]
                if ch == b"\\" and i + 1 < n:
                    i += 1
                    items.append(re.escape(pattern[i : i + 1]))
                elif i + 2 < n and pattern[i + 1 : i + 2] == b"-":  # Redis: even "x-]" is a range
                    a, b = pattern[i], pattern[i + 2]
                    if a > b:
                        a, b = b, a
                    items.append(re.escape(bytes([a])) + b"-" + re.escape(bytes([b])))
                    i += 2
                else:
                    items.append(re.escape(ch))
                i += 1
            body = b"".join(items)
            if not body:
                out.append(b"[^\\x00-\\xff]" if not neg else b".")
            else:
                out.append(b"[" + (b"^" if neg else b"") + body + b"]")
        else:
            out.append(re.escape(c))
        i += 1
    rx = re.compile(b"".join(out) + b"\\Z", re.DOTALL)
    m = rx.match
    return lambda s: m(s) is not None


def glob_match(pattern: bytes, s: bytes) -> bool:
    return compile_glob(pattern)(s)

"""Inline requests (``PING``, ``SET a "b c"``), split as Redis's sdssplitargs does."""

from __future__ import annotations


class InlineError(ValueError):
    pass


_ESC = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}
_SPACE = b" \n\r\t\x0b\x0c\x00"
_HEX = b"0123456789abcdefABCDEF"


def split_inline(line: bytes) -> list[bytes]:
    """Split one inline request line into arguments; raises InlineError on bad quotes."""
    if line.endswith(b"\r"):
        line = line[:-1]
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

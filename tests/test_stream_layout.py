"""The stream type's node layout against a listpack encoder written from Redis's listpack.c / t_stream.c.

``XTRIM ~`` cuts only at node boundaries and a node ends when its listpack bytes plus the next entry's raw
length reach stream-node-max-bytes, so every entry's size must be Redis's to the byte. The differential tests
(test_streams.py) see a wrong size only when it happens to move a boundary; here each node's byte count is
compared with the bytes a real encoding of its elements takes, for entries of every element encoding.
"""

from __future__ import annotations

import random

from respqueue.types.stream import MASK64, Stream


def _lp_int(b: bytes) -> int | None:
    """lpStringToInt64 (util.c string2ll rules): canonical decimal int64, else None."""
    if not b or len(b) > 20:
        return None
    s = b.decode("latin-1")
    if s == "0":
        return 0
    neg = s.startswith("-")
    digits = s[1:] if neg else s
    if not digits or not digits.isascii() or not digits.isdigit() or digits[0] == "0":
        return None
    v = -int(digits) if neg else int(digits)
    return v if -(1 << 63) <= v < (1 << 63) else None


def _backlen(n: int) -> int:
    return 1 if n <= 127 else 2 if n < 16383 else 3 if n < 2097151 else 4 if n < 268435455 else 5


def _enc_int(v: int) -> bytes:
    """The encoded bytes of an integer element (listpack.c lpEncodeIntegerGetType), without its backlen."""
    if 0 <= v <= 127:
        return bytes([v])
    if -4096 <= v <= 4095:
        return bytes([0xC0 | ((v & 0x1FFF) >> 8), v & 0xFF])
    if -32768 <= v <= 32767:
        return b"\xf1" + (v & 0xFFFF).to_bytes(2, "little")
    if -8388608 <= v <= 8388607:
        return b"\xf2" + (v & 0xFFFFFF).to_bytes(3, "little")
    if -(1 << 31) <= v < (1 << 31):
        return b"\xf3" + (v & 0xFFFFFFFF).to_bytes(4, "little")
    return b"\xf4" + (v & MASK64).to_bytes(8, "little")


def _element(x: bytes | int) -> bytes:
    """One listpack element, encoding and backlen (lpInsert of a string that may be an integer)."""
    if isinstance(x, bytes):
        v = _lp_int(x)
        if v is None:
            n = len(x)
            if n < 64:
                e = bytes([0x80 | n]) + x
            elif n < 4096:
                e = bytes([0xE0 | (n >> 8), n & 0xFF]) + x
            else:
                e = b"\xf0" + n.to_bytes(4, "little") + x
            return e + bytes(_backlen(len(e)))
        x = v
    e = _enc_int(x)
    return e + bytes(_backlen(len(e)))


def _signed(v: int) -> int:
    v &= MASK64
    return v - (1 << 64) if v >> 63 else v


class _RefNode:
    def __init__(self, master: int, fields: list[bytes]) -> None:
        self.master = master
        self.fields = fields
        self.count = 0
        # header (6) + end (1); the master entry: num-fields, fields, terminator 0 (count and deleted apart)
        self.nbytes = 7 + sum(len(_element(x)) for x in [len(fields), *fields, 0])

    def lp_bytes(self) -> int:
        return self.nbytes + len(_element(self.count)) + len(_element(0))


def _reference(entries: list[tuple[int, list[bytes]]], max_entries: int, max_bytes: int) -> list[tuple[int, int]]:
    """streamAppendItem's nodes for ``entries``: (entries, listpack bytes without count/deleted) each."""
    nodes: list[_RefNode] = []
    for id_, fv in entries:
        fields = fv[0::2]
        node = nodes[-1] if nodes else None
        if node is not None and (
            (max_entries and node.count >= max_entries) or node.lp_bytes() + sum(map(len, fv)) >= max_bytes
        ):
            node = None
        if node is None:
            node = _RefNode(id_, fields)
            nodes.append(node)
        same = fields == node.fields
        elems: list[bytes | int] = [0 if not same else 2, _signed((id_ >> 64) - (node.master >> 64)),
                                    _signed((id_ & MASK64) - (node.master & MASK64))]
        if same:
            elems += fv[1::2]
            elems.append(len(fv) // 2 + 3)
        else:
            elems.append(len(fields))
            elems += fv
            elems.append(len(fv) + 4)
        node.nbytes += sum(len(_element(x)) for x in elems)
        node.count += 1
    return [(n.count, n.nbytes) for n in nodes]


_VALUES = [b"0", b"1", b"127", b"128", b"-1", b"-128", b"4095", b"4096", b"-4096", b"-4097", b"32767", b"32768",
           b"-32768", b"-32769", b"8388607", b"8388608", b"-8388608", b"-8388609", b"2147483647", b"2147483648",
           b"-2147483648", b"-2147483649", b"9223372036854775807", b"9223372036854775808", b"-9223372036854775808",
           b"-9223372036854775809", b"99999999999999999999", b"007", b"-0", b"-", b"+1", b"1.5", b" 1", b"1 ", b"",
           b"x", b"active", b"v" * 62, b"v" * 63, b"v" * 64, b"v" * 65, b"w" * 4095, b"w" * 4096, b"\xd9\xa1"]


def _entries(rng: random.Random, n: int) -> list[tuple[int, list[bytes]]]:
    out = []
    ms, seq = 1_700_000_000_000, 0
    for _ in range(n):
        r = rng.random()
        if r < 0.5:
            seq += rng.choice((1, 1, 2, 127, 128, 5000))
        else:
            ms += rng.choice((1, 2, 127, 128, 4096, 10**6))
            seq = rng.choice((0, 0, 1, 300, 1 << 40))
        shape = rng.randrange(5)
        v, w = rng.choice(_VALUES), rng.choice(_VALUES)
        if shape == 0:
            fv = [b"event", b"added", b"jobId", str(rng.randrange(10**7)).encode(), b"name", v]
        elif shape == 1:
            fv = [b"event", b"waiting", b"jobId", v, b"prev", w]
        elif shape == 2:
            fv = [b"event", b"completed", b"jobId", w, b"returnvalue", v, b"prev", b"active"]
        elif shape == 3:
            fv = [v or b"f", w]
        else:
            fv = [b"f", v]
        out.append(((ms << 64) | seq, fv))
    return out


def test_node_bytes_match_a_listpack_encoding() -> None:
    rng = random.Random(13)
    for max_entries, max_bytes in ((100, 4096), (100, 97), (0, 300), (7, 4096), (100, 1 << 20)):
        entries = _entries(rng, 1500)
        s = Stream()
        for id_, fv in entries:
            s.append(id_, fv, max_entries, max_bytes)
        got = [(n.count, n.nbytes) for n in s._nodes]
        assert got == _reference(entries, max_entries, max_bytes), (max_entries, max_bytes)


def test_each_value_encoding_alone() -> None:
    """A one-entry stream per value, as a field and as a value: the master entry and the first entry's sizes."""
    for v in _VALUES:
        for fv in ([b"f", v], [v, b"1"], [b"f", v, v, v]):
            s = Stream()
            s.append(5 << 64 | 7, fv)
            s.append(5 << 64 | 9, fv)
            s.append(6 << 64 | 1, [b"g", v])
            assert [(n.count, n.nbytes) for n in s._nodes] == _reference(
                [(5 << 64 | 7, fv), (5 << 64 | 9, fv), (6 << 64 | 1, [b"g", v])], 100, 4096), (v, fv)

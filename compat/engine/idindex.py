"""A big job-row list's member set as a bitmap of job ids: ~1 bit per id instead of a set slot.

A job-row list (compat/engine/joblist.py) keeps the set of its members, so that the layout can tell at
once whether a job is in it. As a Python ``set`` that costs ~42 bytes per member (a 16-byte slot, the
table kept at most 60% full and doubled as it grows): for a queue of a million waiting jobs, 42 MB that
Redis does not spend. BullMQ's job ids are the decimals of a queue counter (``INCR <prefix>:<queue>:id``),
so a big list's members are mostly integers in a window not much wider than the list: :class:`IdIndex`
keeps those as bits of a ``bytearray`` (bit ``i`` for the id ``base + i``) and every other member (a
custom job id, a decimal with leading zeros, one far outside the window) in a plain set beside it.

The window grows to take a new id only while it stays within one byte per member (so a sparse set of
ids never costs more than a set would), and its leading zero bytes are dropped once they are more than
half of it (the ids of a FIFO queue move up as jobs are taken). Each member is in exactly one of the two
parts; a member in the set is never also a bit (``add`` tests the set first, the bits are only set for
ids that are not in it).

It answers what the layout and :class:`JobList` ask of the set: ``in``, ``len``, ``add``, ``discard``,
``update``, ``isdisjoint`` and iteration (in no particular order). A list switches to it above
:data:`BITMAP_MIN` members (joblist.py); below that a set costs less CPU and little memory (a membership test
is ~30 ns here against ~5 for a set, the id parsed by hand in compiled code; 32,768 members of set are ~2 MB).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

#: members from which a job-row list keeps its index as an IdIndex instead of a set
#: (``RESPQUEUE_IDINDEX_MIN``: the tests run the job-row layout with every list's index a bitmap)
BITMAP_MIN = int(os.environ.get("RESPQUEUE_IDINDEX_MIN", "32768"))
# the longest decimal taken as a bit (an int64 fits 18 digits with room)
_MAX_DIGITS = 18
# a window may grow to this many bytes whatever the count (4 KiB: 32,768 ids)
_FREE_BYTES = 4096


def _id(m: bytes) -> int:
    """The job id ``m`` as a non-negative int when it is a canonical decimal of at most 18 digits (no sign,
    no leading zero unless it is "0"), else -1."""
    n = len(m)
    if n == 0 or n > _MAX_DIGITS:
        return -1
    if m[0] == 48:
        return 0 if n == 1 else -1
    v = 0
    for k in range(n):  # (compiled: native ints, no int() parse)
        c = m[k]
        if c < 48 or c > 57:
            return -1
        v = v * 10 + (c - 48)
    return v


class IdIndex:
    """A set of bytes members: canonical decimal ids as bits of a window, the rest in a set."""

    __slots__ = ("bits", "base", "nbits", "other", "lo")

    def __init__(self, members: Iterable[bytes] = ()) -> None:
        self.bits = bytearray()
        self.base = 0  # the id of bit 0 (a multiple of 8)
        self.nbits = 0  # members held as bits
        self.other: set[bytes] = set()
        self.lo = 0  # no set bit below this byte (a hint kept by discard, for the trim)
        ids: list[int] = []
        other = self.other
        for m in members:
            i = _id(m)
            if i < 0:
                other.add(m)
            else:
                ids.append(i)
        if ids:
            room = max(_FREE_BYTES, len(ids)) * 8  # the ids a window may span (a byte per member)
            lo = min(ids) & ~7
            hi = max(ids)
            if hi - lo >= room:
                # too spread for one window: the widest run of ids that fits takes it, the rest the set
                ids.sort()
                x = best_a = best_b = 0
                for y in range(len(ids)):
                    while ids[y] - (ids[x] & ~7) >= room:
                        x += 1
                    if y - x > best_b - best_a:
                        best_a, best_b = x, y
                for i in ids[:best_a]:
                    other.add(b"%d" % i)
                for i in ids[best_b + 1:]:
                    other.add(b"%d" % i)
                ids = ids[best_a:best_b + 1]
                lo = ids[0] & ~7
                hi = ids[-1]
            self.base = lo
            bits = self.bits = bytearray((hi - lo) // 8 + 1)
            n = 0
            for i in ids:  # (``_add_id`` inline: every id is inside the window)
                j = i - lo
                k = j >> 3
                b = bits[k]
                bit = 1 << (j & 7)
                if not b & bit:
                    bits[k] = b | bit
                    n += 1
            self.nbits = n

    # ---- reads -----------------------------------------------------------------
    def __contains__(self, m: object) -> bool:
        if type(m) is bytes:
            i = _id(m)
            if i >= 0:
                j = i - self.base
                if 0 <= j < len(self.bits) * 8 and self.bits[j >> 3] >> (j & 7) & 1:
                    return True
        other = self.other
        return bool(other) and m in other

    def __len__(self) -> int:
        return self.nbits + len(self.other)

    def __iter__(self) -> Iterator[bytes]:
        base = self.base
        bits = self.bits
        for k in range(len(bits)):
            b = bits[k]
            if b:
                for t in range(8):
                    if b >> t & 1:
                        yield b"%d" % (base + k * 8 + t)
        yield from self.other

    def isdisjoint(self, members: Iterable[bytes]) -> bool:
        for m in members:
            if m in self:
                return False
        return True

    # ---- writes ----------------------------------------------------------------
    def add(self, m: bytes) -> None:
        other = self.other
        if other and m in other:
            return
        i = _id(m)
        if i < 0 or not self._add_id(i):
            other.add(m)

    def update(self, members: Iterable[bytes]) -> None:
        for m in members:
            self.add(m)

    def _add_id(self, i: int) -> bool:
        """Set the bit of id ``i`` (growing the window if it may); False when the id stays outside it."""
        bits = self.bits
        j = i - self.base
        n = len(bits)
        if j < 0 or j >= n * 8:
            room = max(_FREE_BYTES, self.nbits + 1)
            if not n:
                self.base = i & ~7
                bits.append(0)
                self.lo = 0
            elif j < 0:
                grow = (-j + 7) // 8
                if n + grow > room:
                    return False
                bits[0:0] = bytes(grow)
                self.base -= grow * 8
                self.lo = 0
            else:
                grow = j // 8 + 1 - n
                if n + grow > room:
                    return False
                bits.extend(bytes(grow))
            j = i - self.base
        k = j >> 3
        bit = 1 << (j & 7)
        b = bits[k]
        if not b & bit:
            bits[k] = b | bit
            self.nbits += 1
            if k < self.lo:
                self.lo = k
        return True

    def discard(self, m: bytes) -> None:
        i = _id(m)
        if i >= 0:
            bits = self.bits
            j = i - self.base
            if 0 <= j < len(bits) * 8:
                k = j >> 3
                bit = 1 << (j & 7)
                b = bits[k]
                if b & bit:
                    bits[k] = b & ~bit
                    self.nbits -= 1
                    if k == self.lo and not b & ~bit:
                        self._trim()
                    return
        other = self.other
        if other:
            other.discard(m)

    def _trim(self) -> None:
        """The first set byte moved up: drop the leading zero bytes once they are more than half the window."""
        bits = self.bits
        n = len(bits)
        lo = self.lo
        while lo < n and not bits[lo]:
            lo += 1
        if lo >= n:  # no bit left
            self.bits = bytearray()
            self.base = 0
            self.lo = 0
            return
        if lo > _FREE_BYTES // 4 and lo * 2 > n:
            del bits[:lo]
            self.base += lo * 8
            lo = 0
        self.lo = lo

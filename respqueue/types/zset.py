"""The sorted set container.

A dict ``member -> score`` for O(1) score lookups plus a
:class:`sortedcontainers.SortedList` of ``(score, member)`` tuples for the
order (ties by member bytes, i.e. Redis's memcmp order). Ranks, ranges, pops
and inserts are O(log n).

Commands use only the methods below; positions (``lo``/``hi``) are indexes in
ascending (score, member) order, ``hi`` exclusive.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, ClassVar

from sortedcontainers import SortedList

from ..resp import format_double
from .journaled import Journaled

LISTPACK_ENTRIES = 128  # zset-max-listpack-entries
LISTPACK_VALUE = 64  # zset-max-listpack-value

Entry = tuple[float, bytes]


class _Top:
    """A member that sorts after every bytes value: ``(s, TOP)`` follows all ``(s, m)``."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        return False

    def __le__(self, other: object) -> bool:
        return other is self

    def __gt__(self, other: object) -> bool:
        return other is not self

    def __ge__(self, other: object) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return other is self

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "TOP"


TOP: Any = _Top()


class LexBound:
    """The ``-`` and ``+`` ends of a lex range."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


MINSTR: Any = LexBound("-")
MAXSTR: Any = LexBound("+")


def lex_gte_min(m: bytes, lo: Any, ex: bool) -> bool:
    if lo is MINSTR:
        return True
    if lo is MAXSTR:
        return False
    return m > lo if ex else m >= lo


def lex_lte_max(m: bytes, hi: Any, ex: bool) -> bool:
    if hi is MAXSTR:
        return True
    if hi is MINSTR:
        return False
    return m < hi if ex else m <= hi


def lex_range_empty(lo: Any, loex: bool, hi: Any, hiex: bool) -> bool:
    """Redis's test for lex ranges that are always empty (min > max...)."""

    def rank(x: Any) -> tuple[int, bytes]:
        if x is MINSTR:
            return (0, b"")
        if x is MAXSTR:
            return (2, b"")
        return (1, x)

    a, b = rank(lo), rank(hi)
    return a > b or (a == b and (loex or hiex))


class ZSet(Journaled):
    """A Redis sorted set."""

    rtype: ClassVar[bytes] = b"zset"
    __slots__ = ("_scores", "_sl", "_skiplist", "_jlog", "_jkey")

    def __init__(self) -> None:
        self._scores: dict[bytes, float] = {}
        self._sl: SortedList = SortedList()
        self._skiplist = False  # what Redis 7.0 would have converted to (sticky)
        # persistence: element-level change log while attached to the journal
        self._jlog: list[tuple[bytes, float | None]] | None = None
        self._jkey: tuple[int, bytes] | None = None

    @classmethod
    def from_sorted(cls, entries: list[Entry]) -> ZSet:
        """A fresh zset from ``(score, member)`` pairs in order, members unique."""
        z = cls()
        big = len(entries) > LISTPACK_ENTRIES or any(len(m) > LISTPACK_VALUE for _, m in entries)
        if not big:
            # a listpack stores integral scores as integers: -0.0 comes back as 0.0
            entries = [(0.0, m) if s == 0.0 else (s, m) for s, m in entries]
        z._sl = SortedList(entries)
        z._scores = {m: s for s, m in entries}
        z._skiplist = big
        return z

    # ---- container contract ------------------------------------------
    def __len__(self) -> int:
        return len(self._scores)

    def __contains__(self, member: object) -> bool:
        return member in self._scores

    def copy(self) -> ZSet:
        z = ZSet()
        z._scores = dict(self._scores)
        z._sl = SortedList(self._sl)
        z._skiplist = self._skiplist
        return z

    def encoding(self) -> bytes:
        return b"skiplist" if self._skiplist else b"listpack"

    def memory_usage(self) -> int:
        n = len(self._scores)
        if n == 0:
            return 16
        sample = list(islice(self._scores, 32))
        avg = sum(len(m) for m in sample) / len(sample)
        if not self._skiplist:
            return int(16 + n * (avg + 12)) + 7
        return int(n * (avg + 104)) + 96

    # ---- members ---------------------------------------------------------
    def score(self, member: bytes) -> float | None:
        return self._scores.get(member)

    def add(self, member: bytes, score: float) -> float | None:
        """Set ``member``'s score; returns the previous score (None if new).

        A score equal to the current one (``==``, so -0.0 == 0.0) changes nothing.
        """
        scores = self._scores
        old = scores.get(member)
        if old is None:
            if not self._skiplist:
                if len(scores) >= LISTPACK_ENTRIES or len(member) > LISTPACK_VALUE:
                    self._skiplist = True
                elif score == 0.0:
                    score = 0.0  # listpacks store -0.0 as the integer 0
            scores[member] = score
            self._sl.add((score, member))
            if self._jlog is not None:
                self._jlog.append((member, score))
            return None
        if old != score:
            if score == 0.0 and not self._skiplist:
                score = 0.0
            sl = self._sl
            sl.remove((old, member))
            sl.add((score, member))
            scores[member] = score
            if self._jlog is not None:
                self._jlog.append((member, score))
        return old

    def remove(self, member: bytes) -> bool:
        s = self._scores.pop(member, None)
        if s is None:
            return False
        self._sl.remove((s, member))
        if self._jlog is not None:
            self._jlog.append((member, None))
        return True

    def rank(self, member: bytes) -> int | None:
        """0-based ascending rank, or None."""
        s = self._scores.get(member)
        if s is None:
            return None
        return self._sl.index((s, member))

    def items(self) -> Iterator[Entry]:
        """All ``(score, member)`` pairs in ascending order."""
        return iter(self._sl)

    def members(self) -> Iterable[bytes]:
        """All members, in no particular order."""
        return self._scores.keys()

    def entries(self, lo: int, hi: int, reverse: bool = False) -> list[Entry]:
        """``(score, member)`` at positions ``lo..hi-1`` (descending when ``reverse``)."""
        if hi <= lo:
            return []
        if reverse:
            return list(self._sl.islice(lo, hi, reverse=True))
        return self._sl[lo:hi]

    def score_span(self, lo: float, loex: bool, hi: float, hiex: bool) -> tuple[int, int]:
        """Positions of the members with a score in the range, as ``(lo, hi)``."""
        if lo > hi or (lo == hi and (loex or hiex)):
            return 0, 0
        sl = self._sl
        a = sl.bisect_right((lo, TOP)) if loex else sl.bisect_left((lo,))
        b = sl.bisect_left((hi,)) if hiex else sl.bisect_right((hi, TOP))
        return (a, b) if b > a else (0, 0)

    def lex_span(self, lo: Any, loex: bool, hi: Any, hiex: bool, reverse: bool = False, offset: int = 0) -> tuple[int, int]:
        """Positions to emit for a lex range, after skipping ``offset`` in the walk's direction.

        With equal scores (the only case Redis defines) this is a bisection.
        Otherwise Redis's listpack walk is reproduced: start at the first member
        (last when ``reverse``) on the right side of one bound, skip ``offset``,
        then carry on while the other bound holds.
        """
        sl = self._sl
        n = len(sl)
        if n == 0 or lex_range_empty(lo, loex, hi, hiex):
            return 0, 0
        s0 = sl[0][0]
        if s0 == sl[-1][0]:
            if lo is MINSTR:
                a = 0
            elif lo is MAXSTR:
                a = n
            else:
                a = sl.bisect_right((s0, lo)) if loex else sl.bisect_left((s0, lo))
            if hi is MAXSTR:
                b = n
            elif hi is MINSTR:
                b = 0
            else:
                b = sl.bisect_left((s0, hi)) if hiex else sl.bisect_right((s0, hi))
            if offset:
                if reverse:
                    b -= offset
                else:
                    a += offset
            return (a, b) if b > a else (0, 0)
        # mixed scores: Redis's listpack walk
        if not lex_gte_min(sl[-1][1], lo, loex) or not lex_lte_max(sl[0][1], hi, hiex):
            return 0, 0
        if not reverse:
            i = 0
            while i < n and not lex_gte_min(sl[i][1], lo, loex):
                i += 1
            if i == n or not lex_lte_max(sl[i][1], hi, hiex):
                return 0, 0
            i += offset
            j = i
            while j < n and lex_lte_max(sl[j][1], hi, hiex):
                j += 1
            return (i, j) if j > i else (0, 0)
        i = n - 1
        while i >= 0 and not lex_lte_max(sl[i][1], hi, hiex):
            i -= 1
        if i < 0 or not lex_gte_min(sl[i][1], lo, loex):
            return 0, 0
        i -= offset
        j = i
        while j >= 0 and lex_gte_min(sl[j][1], lo, loex):
            j -= 1
        return (j + 1, i + 1) if i > j else (0, 0)

    def remove_span(self, lo: int, hi: int) -> int:
        """Remove the members at positions ``lo..hi-1``; returns how many."""
        if hi <= lo:
            return 0
        sl = self._sl
        scores = self._scores
        jlog = self._jlog
        if hi - lo == 1:
            _, m = sl.pop(lo)
            del scores[m]
            if jlog is not None:
                jlog.append((m, None))
            return 1
        for _, m in sl.islice(lo, hi):
            del scores[m]
            if jlog is not None:
                jlog.append((m, None))
        del sl[lo:hi]
        return hi - lo

    def pop(self, count: int, highest: bool = False) -> list[Entry]:
        """Remove and return up to ``count`` lowest (or highest) entries, in pop order."""
        sl = self._sl
        n = len(sl)
        if count >= n:
            out = list(reversed(sl)) if highest else list(sl)
            self._sl = SortedList()
            self._scores = {}
            if self._jlog is not None:
                self._jlog.extend([(m, None) for _, m in out])
            return out
        scores = self._scores
        if count <= 8:
            idx = -1 if highest else 0
            out = []
            for _ in range(count):
                e = sl.pop(idx)
                del scores[e[1]]
                out.append(e)
            if self._jlog is not None:
                self._jlog.extend([(m, None) for _, m in out])
            return out
        if highest:
            out = list(sl.islice(n - count, n, reverse=True))
            del sl[n - count :]
        else:
            out = sl[:count]
            del sl[:count]
        for _, m in out:
            del scores[m]
        if self._jlog is not None:
            self._jlog.extend([(m, None) for _, m in out])
        return out

    def random_entries(self, count: int) -> list[Entry]:
        """``count`` entries picked independently (repetitions possible)."""
        sl = self._sl
        n = len(sl)
        rr = random.randrange
        return [sl[rr(n)] for _ in range(count)]

    def random_unique(self, count: int) -> list[Entry]:
        """``count`` distinct entries (count < len), in ascending order."""
        sl = self._sl
        idx = sorted(random.sample(range(len(sl)), count))
        return [sl[i] for i in idx]

    def scan_page(self, start: float | None, count: int) -> tuple[list[Entry], float | None]:
        """About ``count`` entries from the first with score >= ``start`` (None: the beginning).

        A page never splits a run of equal scores, so resuming at the returned
        score (None when done) neither repeats nor skips members, whatever was
        removed meanwhile.
        """
        sl = self._sl
        n = len(sl)
        lo = 0 if start is None else sl.bisect_left((start,))
        hi = min(n, lo + count)
        if lo < hi < n:
            hi = sl.bisect_right((sl[hi - 1][0], TOP))
        return sl[lo:hi], (sl[hi][0] if hi < n else None)

    def scan_score(self, score: float) -> bytes:
        """A score as ZSCAN shows it: listpacks hold integral scores as integers."""
        if not self._skiplist and score == score and -4611686018427387903.0 <= score <= 4611686018427387903.0:
            i = int(score)
            if i == score:
                return b"%d" % i
        return format_double(score)

    def __repr__(self) -> str:
        return f"ZSet({list(islice(self._sl, 10))!r}{'...' if len(self._sl) > 10 else ''})"

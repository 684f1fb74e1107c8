"""The positions of a list's items while the journal logs its changes (``List._p``).

A list stored as one row per item (``list_items.pos``) keeps, beside its values, each item's position.
Pushes at either end and pops keep them consecutive integers (BullMQ's wait list, 1M waiting jobs), so
:class:`Positions` holds them as a run ``first, first + 1, ...`` (two numbers, no float object per item:
32 bytes a waiting job) until something breaks the run (LINSERT, LREM, a deletion in the middle, a
fractional position), and from then on as a ``deque`` of floats. It offers the part of ``deque``'s
interface the list, the journal and the replica use, so either can sit in ``_p``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator


class Positions:
    """Consecutive integer positions ``first .. first + n - 1`` (as floats), or a deque once irregular."""

    __slots__ = ("first", "n", "q")

    def __init__(self, first: float = 0.0, n: int = 0) -> None:
        self.first = float(first)
        self.n = n
        self.q: deque[float] | None = None

    def _spill(self) -> deque[float]:
        q = self.q
        if q is None:
            f = int(self.first)
            q = self.q = deque(map(float, range(f, f + self.n)))
        return q

    def __len__(self) -> int:
        return len(self.q) if self.q is not None else self.n

    def __bool__(self) -> bool:
        return bool(self.q) if self.q is not None else self.n > 0

    def __iter__(self) -> Iterator[float]:
        if self.q is not None:
            return iter(self.q)
        f = int(self.first)
        return map(float, range(f, f + self.n))

    def __getitem__(self, i: int) -> float:
        if self.q is not None:
            return self.q[i]
        n = self.n
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("deque index out of range")
        return self.first + i

    def __delitem__(self, i: int) -> None:
        del self._spill()[i]

    def __repr__(self) -> str:
        return f"Positions({list(self)!r})"

    def append(self, x: float) -> None:
        if self.q is None:
            if self.n == 0 and float(x).is_integer():
                self.first = float(x)
                self.n = 1
                return
            if x == self.first + self.n:
                self.n += 1
                return
        self._spill().append(x)

    def appendleft(self, x: float) -> None:
        if self.q is None:
            if self.n == 0 and float(x).is_integer():
                self.first = float(x)
                self.n = 1
                return
            if x == self.first - 1.0:
                self.first = float(x)
                self.n += 1
                return
        self._spill().appendleft(x)

    def pop(self) -> float:
        if self.q is not None:
            return self.q.pop()
        if not self.n:
            raise IndexError("pop from an empty deque")
        self.n -= 1
        return self.first + self.n

    def popleft(self) -> float:
        if self.q is not None:
            return self.q.popleft()
        if not self.n:
            raise IndexError("pop from an empty deque")
        x = self.first
        self.first = x + 1.0
        self.n -= 1
        return x

    def insert(self, i: int, x: float) -> None:
        self._spill().insert(i, x)

    def clear(self) -> None:
        self.q = None
        self.n = 0

    def sub(self, start: int, stop: int) -> Positions | deque[float]:
        """Positions ``[start, stop)`` (LTRIM's kept part), still a run if this one is."""
        if self.q is not None:
            from itertools import islice

            return deque(islice(self.q, start, stop))
        return Positions(self.first + start, max(0, min(stop, self.n) - start))

    @classmethod
    def of(cls, xs: list[float]) -> Positions | deque[float]:
        """Positions for the ascending ``xs``: a run when they are consecutive integers, else a deque."""
        n = len(xs)
        if not n:
            return cls()
        f = xs[0]
        if float(f).is_integer() and xs[-1] - f == n - 1:
            i = int(f)
            if xs == list(map(float, range(i, i + n))):
                return cls(f, n)
        return deque(xs)

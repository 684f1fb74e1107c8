"""The list type: a double-ended queue of byte strings.

Backed by :class:`collections.deque`, so pushes and pops at either end are
O(1) and every search (LPOS, LREM, LINSERT) runs at C speed: forward with
``deque.index`` and backward with :func:`operator.indexOf` over
``reversed(deque)``. Positional access walks from the nearer end, so work
near either end of a 1M-element list stays cheap.

Commands use only the methods below (indexes are already normalised to
``0 <= i < len``), so a specialised container with the same interface can
replace this one for particular keys.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from itertools import islice
from operator import indexOf
from typing import Any

from .journaled import Journaled
from .positions import Positions


class List(Journaled):
    """A Redis list."""

    __slots__ = ("_d", "_p", "_jlog", "_jkey")

    rtype = b"list"

    def __init__(self, items: Iterable[bytes] = ()) -> None:
        self._d: deque[bytes] = deque(items)
        # persistence, while attached to the journal: the float positions of the elements
        # (their list_items.pos; a Positions run while consecutive, else a deque) and a change
        # log of (pos, value | None); a ``_jkey`` of None asks for a full rewrite
        self._p: Positions | deque[float] | None = None
        self._jlog: list[tuple[float, bytes | None]] | None = None
        self._jkey: tuple[int, bytes] | None = None

    # ---- container contract --------------------------------------------
    def __len__(self) -> int:
        return len(self._d)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._d)

    def __repr__(self) -> str:
        return f"List({list(islice(self._d, 8))!r}{'...' if len(self._d) > 8 else ''}, len={len(self._d)})"

    def copy(self) -> List:
        return List(self._d)

    def encoding(self) -> bytes:
        # Redis 7.0 stores every list as a quicklist (of listpack nodes).
        return b"quicklist"

    def memory_usage(self) -> int:
        """An estimate in the spirit of Redis's quicklist accounting (sampled)."""
        d = self._d
        n = len(d)
        if n == 0:
            return 48
        sample = list(islice(d, 32)) if n > 32 else list(d)
        per = sum(len(x) for x in sample) / len(sample) + 2
        data = int(per * n)
        nodes = data // 8192 + 1
        return 40 + nodes * (32 + 12) + data + nodes * 6

    # ---- ends --------------------------------------------------------------
    def attach(self, jkey: tuple[int, bytes] | None, first: float = 0.0, positions: Any = None) -> None:
        """Start (or restart) change logging with positions first, first+1, ... (integers), or the
        items' stored ``positions`` (one per item, ascending)."""
        self._p = Positions(int(first), len(self._d)) if positions is None else positions
        self._jlog = []
        self._jkey = jkey

    def detach(self, jkey: tuple[int, bytes] | None = None) -> None:
        """Stop change logging: the store keeps this list whole, in one row (a small list)."""
        self._p = None
        self._jlog = None
        self._jkey = jkey

    def positioned(self) -> Iterator[tuple[float, bytes]]:
        """``(pos, value)`` pairs while attached."""
        assert self._p is not None
        return zip(self._p, self._d, strict=True)

    def _log_push(self, values: list[bytes], left: bool) -> None:
        p = self._p
        jlog = self._jlog
        assert p is not None and jlog is not None
        if left:
            pos = p[0] if p else 0.0
            for v in values:
                pos -= 1.0
                p.appendleft(pos)
                jlog.append((pos, v))
        else:
            pos = p[-1] if p else -1.0
            for v in values:
                pos += 1.0
                p.append(pos)
                jlog.append((pos, v))

    def push_left(self, values: Iterable[bytes]) -> int:
        """LPUSH: each value in turn becomes the head; returns the new length."""
        if self._jlog is not None:
            values = list(values)
            self._log_push(values, True)
        self._d.extendleft(values)
        return len(self._d)

    def push_right(self, values: Iterable[bytes]) -> int:
        if self._jlog is not None:
            values = list(values)
            self._log_push(values, False)
        self._d.extend(values)
        return len(self._d)

    def push_one(self, value: bytes, left: bool) -> None:
        if self._jlog is not None:
            self._log_push([value], left)
        if left:
            self._d.appendleft(value)
        else:
            self._d.append(value)

    def pop_one(self, left: bool) -> bytes:
        """Remove and return the head (or tail); the list must not be empty."""
        if self._jlog is not None:
            p = self._p
            assert p is not None
            self._jlog.append((p.popleft() if left else p.pop(), None))
        return self._d.popleft() if left else self._d.pop()

    def pop_many(self, count: int, left: bool) -> list[bytes]:
        """Remove up to ``count`` elements from one end, in pop order."""
        d = self._d
        n = len(d)
        p = self._p
        if self._jlog is not None and p is not None:
            k = min(count, n)
            if left:
                self._jlog.extend([(p.popleft(), None) for _ in range(k)])
            else:
                self._jlog.extend([(p.pop(), None) for _ in range(k)])
        if count >= n:
            out = list(d) if left else list(reversed(d))
            d.clear()
            return out
        if left:
            out = list(islice(d, count))
            for _ in range(count):
                d.popleft()
        else:
            out = list(islice(reversed(d), count))
            for _ in range(count):
                d.pop()
        return out

    # ---- positions -------------------------------------------------------
    def get(self, index: int) -> bytes:
        """Element at ``0 <= index < len`` (walks from the nearer end)."""
        return self._d[index]

    def set(self, index: int, value: bytes) -> None:
        self._d[index] = value
        if self._jlog is not None:
            assert self._p is not None
            pos = self._p[index]
            # logged as a delete and an insert: the journal takes a position whose first logged
            # change is an insert for one the store does not hold yet (see Journal._ops)
            self._jlog.append((pos, None))
            self._jlog.append((pos, value))

    def range(self, start: int, stop: int) -> list[bytes]:
        """Elements ``start..stop`` inclusive, ``0 <= start <= stop < len``."""
        d = self._d
        n = len(d)
        if start == 0 and stop == n - 1:
            return list(d)
        if n - 1 - stop < start:
            # closer to the tail: walk backwards
            out = list(islice(reversed(d), n - 1 - stop, n - start))
            out.reverse()
            return out
        return list(islice(d, start, stop + 1))

    def trim(self, start: int, stop: int) -> None:
        """Keep only ``start..stop`` inclusive (``stop < start`` keeps nothing)."""
        d = self._d
        n = len(d)
        if self._jlog is not None:
            p = self._p
            assert p is not None
            if stop < start or start >= n:
                self._jlog.extend([(x, None) for x in p])
                p.clear()
            else:
                stop = min(stop, n - 1)
                self._jlog.extend([(x, None) for x in islice(p, 0, start)])
                self._jlog.extend([(x, None) for x in islice(p, stop + 1, n)])
                self._p = p.sub(start, stop + 1) if type(p) is Positions else deque(islice(p, start, stop + 1))
        if stop < start or start >= n:
            d.clear()
            return
        drop_left = start
        drop_right = n - 1 - stop
        keep = n - drop_left - drop_right
        if drop_left + drop_right <= keep:
            if drop_left:
                d.rotate(-drop_left)
                for _ in range(drop_left + drop_right):
                    d.pop()
            else:
                for _ in range(drop_right):
                    d.pop()
        else:
            self._d = deque(self.range(start, stop))

    # ---- searches ------------------------------------------------------
    def find(self, value: bytes, from_tail: bool = False) -> int:
        """Index of the first match from the head (or the tail), or -1."""
        d = self._d
        try:
            if from_tail:
                return len(d) - 1 - indexOf(reversed(d), value)
            return d.index(value)
        except ValueError:
            return -1

    def positions(self, value: bytes, rank: int, count: int, maxlen: int, from_tail: bool) -> list[int]:
        """LPOS: indexes of matches ``rank`` (1-based) onwards, at most ``count``
        of them (0: all), looking at the first ``maxlen`` elements (0: all)
        from the head or the tail."""
        d = self._d
        n = len(d)
        limit = n if maxlen == 0 or maxlen > n else maxlen
        it: Iterator[bytes] = reversed(d) if from_tail else iter(d)
        if limit < n:
            it = islice(it, limit)
        out: list[int] = []
        pos = -1
        seen = 0
        while True:
            try:
                pos += indexOf(it, value) + 1
            except ValueError:
                break
            seen += 1
            if seen >= rank:
                out.append(n - 1 - pos if from_tail else pos)
                if count and len(out) >= count:
                    break
        return out

    def insert(self, pivot: bytes, value: bytes, after: bool) -> int:
        """LINSERT: insert next to the first ``pivot`` from the head; -1 if absent."""
        d = self._d
        try:
            i = d.index(pivot)
        except ValueError:
            return -1
        j = i + 1 if after else i
        d.insert(j, value)
        p = self._p
        if self._jlog is not None and p is not None:
            n = len(p)
            a = p[j - 1] if j > 0 else p[0] - 2.0
            b = p[j] if j < n else p[-1] + 2.0
            mid = (a + b) / 2
            if a < mid < b:
                p.insert(j, mid)
                self._jlog.append((mid, value))
            else:
                # midpoints ran out of precision: renumber (the journal rewrites the list)
                p.insert(j, a)
                self._jkey = None
        return len(d)

    def remove(self, value: bytes, count: int) -> int:
        """LREM: remove ``|count|`` matches (all with 0), from the tail when negative."""
        d = self._d
        jlog = self._jlog
        if jlog is not None and count == 0:
            return self._remove_logged(value, count)
        if count == 0:
            if value not in d:
                return 0
            n = len(d)
            self._d = d = deque(filter(value.__ne__, d))
            return n - len(d)
        n = len(d)
        neg = count < 0
        found: list[int] = []  # indexes of the matches to remove
        if count > 0:
            i = -1
            try:
                while len(found) < count:
                    i = d.index(value, i + 1)
                    found.append(i)
            except ValueError:
                pass
            found.reverse()
        else:
            count = -count
            it = reversed(d)
            pos = -1
            try:
                while len(found) < count:
                    pos += indexOf(it, value) + 1
                    found.append(n - 1 - pos)
            except ValueError:
                pass
        if jlog is not None:
            if len(found) > 8:
                return self._remove_logged(value, -len(found) if neg else len(found))
            # few matches (BullMQ's LREM active -1 id): positions go with the elements
            p = self._p
            assert p is not None
            for i in found:
                jlog.append((p[i], None))
                del p[i]
                del d[i]
        elif len(found) <= 8:
            # few matches: delete in place, highest index first (each walks from the nearer end)
            for i in found:
                del d[i]
        else:
            # many: one C-speed pass copying the runs between matches
            found.reverse()
            src = iter(d)
            out: deque[bytes] = deque()
            prev = 0
            for i in found:
                out.extend(islice(src, i - prev))
                next(src)
                prev = i + 1
            out.extend(src)
            self._d = out
        return len(found)

    def _remove_logged(self, value: bytes, count: int) -> int:
        """LREM while attached: positions follow the elements."""
        d = self._d
        p = self._p
        jlog = self._jlog
        assert p is not None and jlog is not None
        if value not in d:
            return 0
        limit = abs(count) if count else len(d)
        pairs = list(zip(p, d, strict=True))
        if count < 0:
            pairs.reverse()
        keep: list[tuple[float, bytes]] = []
        removed = 0
        for pv in pairs:
            if removed < limit and pv[1] == value:
                removed += 1
                jlog.append((pv[0], None))
            else:
                keep.append(pv)
        if count < 0:
            keep.reverse()
        self._p = deque([x[0] for x in keep])
        self._d = deque([x[1] for x in keep])
        return removed

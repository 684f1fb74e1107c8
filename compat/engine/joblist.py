"""A BullMQ state list kept as job rows: a List that is its own index (its members as a set).

A job-row list (compat/engine/layout.py) needs to tell whether a job is one of its members, each
member's position (the ``score`` of the member's job row) and, for a batch, which members left it.
:class:`JobList` keeps beside the deque ``_ix``, the set of its members (the very bytes objects the
deque holds; from :data:`~compat.engine.idindex.BITMAP_MIN` members an :class:`~compat.engine.idindex.IdIndex`,
the job ids as bits, ~42 bytes less per member), and ``_gone``, the members its commands removed since the layout last looked. Every
mutator of List keeps them in step, O(1) per element pushed or popped (LINSERT, LREM, LTRIM: O(elements
removed or searched), as the List's own work). A member pushed while already present (Redis allows
it, BullMQ never does) cannot be indexed by value: ``_dup`` is set and the layout rebuilds the index
(or hands the list back to the generic rows) at the end of the batch.

Positions are not indexed (a float object and a dict slot per member were ~34 B of a waiting job's
~76 B of index): the layout takes a pushed member's position from the list's change log, a list written
whole's from its positions, and any other from the list itself (:meth:`near`, the ends and the members
next to them; else :meth:`position`, a search at C speed, or the layout's map of the list: in BullMQ only a
waiting job whose hash changes while it waits gets past the ends).

``_ix`` is None while the list is not kept as job rows (it fell back to generic rows, or was
detached as a small one-row list): the class then behaves as a plain List.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable
from itertools import islice
from operator import indexOf

from respqueue.types.list import List
from respqueue.types.positions import Positions

from .idindex import BITMAP_MIN, IdIndex

_NEAR = 256  # members searched at each end of the list (near) before the whole of it (position)


def member_index(members: Collection[bytes]) -> set[bytes] | IdIndex:
    """A job-row list's member set: a ``set``, or from :data:`BITMAP_MIN` members an :class:`IdIndex` (the
    job ids as bits: ~42 bytes less per member). A member given twice is in it once (its ``len`` is smaller)."""
    return IdIndex(members) if len(members) >= BITMAP_MIN else set(members)


class JobList(List):
    """A List with a set of its members (while ``_ix`` is not None) and a log of members removed."""

    __slots__ = ("_ix", "_gone", "_dup")

    def __init__(self, items: Iterable[bytes] = ()) -> None:
        super().__init__(items)
        self._ix: set[bytes] | IdIndex | None = None
        self._gone: list[bytes] = []
        self._dup = False

    @classmethod
    def of(cls, v: List) -> JobList:
        """A JobList taking over ``v``'s elements (its deque, not a copy); not indexed yet (see ``attach``)."""
        j = cls.__new__(cls)
        j._d = v._d
        j._p = None
        j._jlog = None  # detached: the layout attaches it (written whole)
        j._jkey = v.journal_key
        j._ix = None
        j._gone = []
        j._dup = False
        return j

    def copy(self) -> List:
        return List(self._d)

    # ---- the index ---------------------------------------------------------
    def attach(
        self, jkey: tuple[int, bytes] | None, first: float = 0.0, positions: Positions | deque[float] | None = None
    ) -> None:
        """Start logging as List does, not indexed (the journal's generic rows); the layout then calls
        ``reindex`` for job rows."""
        super().attach(jkey, first, positions)
        self.unindex()

    def detach(self, jkey: tuple[int, bytes] | None = None) -> None:
        super().detach(jkey)
        self.unindex()

    def unindex(self) -> None:
        """Not job rows any more: drop the index (a plain List from now on)."""
        self._ix = None
        self._gone = []
        self._dup = False

    def reindex(self) -> bool:
        """Rebuild the index from the elements, O(n) (at C speed); False when a member is in the list
        twice (``_dup`` stays set: it cannot be kept as job rows)."""
        assert self._p is not None
        ix = self._ix = member_index(self._d)
        self._dup = len(ix) != len(self._d)
        return not self._dup

    def near(self, member: bytes) -> float | None:
        """The position of ``member`` when it is at either end or among the ``_NEAR`` members next to
        them (a job just pushed, or about to be popped), searched at C speed; else None."""
        d = self._d
        p = self._p
        assert p is not None
        if not d:
            return None
        if d[-1] == member:
            return p[-1]
        if d[0] == member:
            return p[0]
        n = len(d)
        if n <= 2:
            return None
        try:
            return p[n - 1 - indexOf(islice(reversed(d), _NEAR), member)]
        except ValueError:
            pass
        try:
            return p[indexOf(islice(d, _NEAR), member)]
        except ValueError:
            return None

    def position(self, member: bytes) -> float:
        """The position of ``member`` (which must be in the list): near the ends first (``near``), then
        the whole deque, at C speed. KeyError when it is not there."""
        s = self.near(member)
        return s if s is not None else self.far(member)

    def far(self, member: bytes) -> float:
        """The position of ``member`` by a search of the whole deque at C speed (for one ``near`` did not
        find). KeyError when it is not there."""
        try:
            return self._p[self._d.index(member)]  # type: ignore[index]
        except ValueError:
            raise KeyError(member) from None

    def _added(self, values: list[bytes]) -> None:
        """Index ``values``, just pushed or inserted (a value already there, or twice among them: ``_dup``)."""
        ix = self._ix
        assert ix is not None
        n = len(ix)
        ix.update(values)
        if len(ix) - n != len(values):
            self._dup = True
        if type(ix) is set and len(ix) >= BITMAP_MIN:
            self._ix = IdIndex(ix)

    def index_add(self, value: bytes) -> None:
        """Index ``value`` (not in the index: the caller checked), as a bitmap once the list is big."""
        ix = self._ix
        assert ix is not None
        ix.add(value)
        if type(ix) is set and len(ix) >= BITMAP_MIN:
            self._ix = IdIndex(ix)

    def _removed(self, values: Iterable[bytes]) -> None:
        ix = self._ix
        assert ix is not None
        gone = self._gone
        for v in values:
            ix.discard(v)
            gone.append(v)

    # ---- List's mutators, keeping the index --------------------------------
    def push_left(self, values: Iterable[bytes]) -> int:
        if self._ix is None:
            return super().push_left(values)
        values = list(values)
        n = super().push_left(values)
        self._added(values)
        return n

    def push_right(self, values: Iterable[bytes]) -> int:
        if self._ix is None:
            return super().push_right(values)
        values = list(values)
        n = super().push_right(values)
        self._added(values)
        return n

    def push_one(self, value: bytes, left: bool) -> None:
        super().push_one(value, left)
        ix = self._ix
        if ix is not None:
            if value in ix:
                self._dup = True
            else:
                self.index_add(value)

    def pop_one(self, left: bool) -> bytes:
        v = super().pop_one(left)
        ix = self._ix
        if ix is not None:
            ix.discard(v)
            self._gone.append(v)
        return v

    def pop_many(self, count: int, left: bool) -> list[bytes]:
        out = super().pop_many(count, left)
        if self._ix is not None:
            self._removed(out)
        return out

    def set(self, index: int, value: bytes) -> None:
        if self._ix is None:
            return super().set(index, value)
        old = self._d[index]
        super().set(index, value)
        self._removed((old,))
        self._added([value])
        return None

    def trim(self, start: int, stop: int) -> None:
        if self._ix is None:
            return super().trim(start, stop)
        d = self._d
        n = len(d)
        if stop < start or start >= n:
            gone = list(d)
        else:
            last = min(stop, n - 1)
            gone = list(islice(d, 0, start))
            gone.extend(islice(reversed(d), 0, n - 1 - last))
        super().trim(start, stop)
        self._removed(gone)
        return None

    def insert(self, pivot: bytes, value: bytes, after: bool) -> int:
        if self._ix is None:
            return super().insert(pivot, value, after)
        n = super().insert(pivot, value, after)
        if n < 0:
            return n
        self._added([value])  # (positions renumbered: the journal writes the list whole, which reindexes)
        return n

    def remove(self, value: bytes, count: int) -> int:
        n = super().remove(value, count)
        ix = self._ix
        if n and ix is not None:
            # one copy unless _dup (then the index is rebuilt at the batch's end anyway)
            ix.discard(value)
            self._gone.append(value)
        return n

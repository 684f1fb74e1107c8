"""The set container.

Members live in a Python ``set``, so the set algebra (SINTER, SUNION, SDIFF)
runs in C. The encoding is tracked like Redis 7.0: ``intset`` while every
member is an integer (string2ll-canonical) and there are at most
``set-max-intset-entries`` (512) of them, ``hashtable`` otherwise; once
converted a set stays ``hashtable``. An intset-encoded set is reported in
ascending numeric order (SMEMBERS, SSCAN...), as Redis does; the order of a
hashtable-encoded one is undefined, as in Redis.

``small`` tells whether SSCAN returns everything in one call: Redis 7.2
stores sets of at most 128 members of at most 64 bytes as listpacks, which
scan in one step, and BullMQ relies on that.

For SPOP/SRANDMEMBER/SSCAN on large sets an index of the members (a list
plus member -> position) is built on first use and then maintained on every
change (O(1) swap-remove), so random picks are O(1) and scans are stable.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterable, Iterator

from ..numbers import str2int
from .journaled import Journaled
from .keyindex import KeyIndex

MAX_INTSET_ENTRIES = 512
MAX_LISTPACK_ENTRIES = 128
MAX_LISTPACK_VALUE = 64


def _all_ints(ms: Iterable[bytes]) -> bool:
    for m in ms:
        if str2int(m) is None:
            return False
    return True


class Set(Journaled):
    """A Redis set of bytes members."""

    rtype = b"set"
    __slots__ = ("s", "intset", "big", "_ix", "_jlog", "_jkey")

    def __init__(self) -> None:
        self.s: set[bytes] = set()
        self.intset = True
        self.big = False
        self._ix: KeyIndex | None = None  # built on first random pick or scan
        # persistence: element-level change log while attached to the journal
        self._jlog: list[tuple[bytes, bool | None]] | None = None
        self._jkey: tuple[int, bytes] | None = None

    @classmethod
    def from_members(cls, ms: Iterable[bytes], force_hashtable: bool = False) -> Set:
        """A new set holding ``ms``, encoded as Redis would after adding them one by one."""
        st = cls()
        s = st.s = ms if type(ms) is set else set(ms)
        n = len(s)
        st.intset = not force_hashtable and n <= MAX_INTSET_ENTRIES and _all_ints(s)
        st.big = n > MAX_LISTPACK_ENTRIES or any(len(m) > MAX_LISTPACK_VALUE for m in s)
        return st

    # ---- reads -----------------------------------------------------------
    def __len__(self) -> int:
        return len(self.s)

    def __contains__(self, m: bytes) -> bool:
        return m in self.s

    def __iter__(self) -> Iterator[bytes]:
        """Members in Redis's order (ascending numbers for an intset)."""
        if self.intset:
            return iter(sorted(self.s, key=int))
        return iter(self.s)

    def members(self) -> list[bytes]:
        """All members, in Redis's order."""
        if self.intset:
            return sorted(self.s, key=int)
        return list(self.s)

    def view(self) -> set[bytes]:
        """The members as a Python set, for set algebra. Read only: do not mutate."""
        return self.s

    @property
    def small(self) -> bool:
        """Whether SSCAN returns every member in one call (intset or listpack-sized)."""
        return self.intset or not self.big

    # ---- writes ----------------------------------------------------------
    def add(self, m: bytes) -> bool:
        s = self.s
        if m in s:
            return False
        s.add(m)
        if self._jlog is not None:
            self._jlog.append((m, True))
        if self.intset and (len(s) > MAX_INTSET_ENTRIES or str2int(m) is None):
            self.intset = False
        if not self.big and (len(s) > MAX_LISTPACK_ENTRIES or len(m) > MAX_LISTPACK_VALUE):
            self.big = True
        if self._ix is not None:
            self._ix.add(m)
        return True

    def add_many(self, ms: list[bytes]) -> int:
        """Add every member of ``ms``; returns how many were new."""
        if len(ms) == 1:
            return 1 if self.add(ms[0]) else 0
        if self._ix is not None:
            n = 0
            for m in ms:
                if self.add(m):
                    n += 1
            return n
        s = self.s
        n0 = len(s)
        if self._jlog is not None:
            self._jlog.extend([(m, True) for m in ms if m not in s])
        s.update(ms)
        added = len(s) - n0
        if added:
            if self.intset and (len(s) > MAX_INTSET_ENTRIES or not _all_ints(ms)):
                self.intset = False
            if not self.big and (len(s) > MAX_LISTPACK_ENTRIES or any(len(m) > MAX_LISTPACK_VALUE for m in ms)):
                self.big = True
        return added

    def remove(self, m: bytes) -> bool:
        s = self.s
        if m not in s:
            return False
        s.remove(m)
        if self._jlog is not None:
            self._jlog.append((m, None))
        if self._ix is not None:
            self._ix.remove(m)
        return True

    def remove_many(self, ms: list[bytes]) -> int:
        if self._ix is None and len(ms) > 1:
            s = self.s
            n0 = len(s)
            if self._jlog is not None:
                self._jlog.extend([(m, None) for m in ms if m in s])
            s.difference_update(ms)
            return n0 - len(s)
        n = 0
        for m in ms:
            if self.remove(m):
                n += 1
        return n

    # ---- random access ---------------------------------------------------
    def _index(self) -> list[bytes]:
        """The members in index order (see :class:`KeyIndex`)."""
        if self._ix is None:
            self._ix = KeyIndex(self.s)
        return self._ix.keys

    def random_member(self) -> bytes:
        """One random member (the set must not be empty)."""
        keys = self._index()
        return keys[random.randrange(len(keys))]

    def random_members(self, count: int) -> list[bytes]:
        """``count`` random members, repetitions allowed."""
        return random.choices(self._index(), k=count)

    def random_unique(self, count: int) -> list[bytes]:
        """``count`` distinct random members (``count`` <= len)."""
        return random.sample(self._index(), count)

    def pop_random(self) -> bytes:
        m = self.random_member()
        self.remove(m)
        return m

    def pop_many(self, count: int) -> list[bytes]:
        """Remove and return ``count`` (< len) distinct random members."""
        picked = random.sample(self._index(), count)
        for m in picked:
            self.remove(m)
        return picked

    # ---- scanning --------------------------------------------------------
    def scan(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        """One SSCAN step; returns (next cursor, members).

        Small sets return everything with cursor 0. Otherwise the index is
        walked from the end: a cursor ``c`` means positions ``[0, c)`` are
        still to visit (0 starts a new scan). Insertions append (into the
        visited part) and deletions move the last member into the hole, so a
        member present for the whole scan is returned at least once.
        """
        if self.small:
            return 0, self.members()
        self._index()
        return self._ix.scan(cursor, count)  # type: ignore[union-attr]

    # ---- container contract ----------------------------------------------
    def copy(self) -> Set:
        st = Set()
        st.s = self.s.copy()
        st.intset = self.intset
        st.big = self.big
        return st

    def encoding(self) -> bytes:
        return b"intset" if self.intset else b"hashtable"

    def memory_usage(self) -> int:
        n = len(self.s)
        if self.intset:
            return 16 + 8 + 8 * n
        sample = 0
        k = 0
        for m in self.s:
            sample += len(m)
            k += 1
            if k >= 5:
                break
        payload = sample * n // k if k else 0
        return 16 + sys.getsizeof(self.s) // 2 + payload + 40 * n

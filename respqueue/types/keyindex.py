"""A positional index over a container's members, for random picks and scans.

Hashes and sets keep their members in a dict/set; HRANDFIELD, SRANDMEMBER,
SPOP and HSCAN/SSCAN on large containers need random access and a cursor
that survives concurrent changes. The index is a list of the members plus
member -> position, built the first time it is needed and then maintained on
every insertion (append) and deletion (O(1) swap-remove).
"""

from __future__ import annotations

from collections.abc import Iterable


class KeyIndex:
    __slots__ = ("keys", "pos")

    def __init__(self, members: Iterable[bytes]) -> None:
        self.keys: list[bytes] = list(members)
        self.pos: dict[bytes, int] = {k: i for i, k in enumerate(self.keys)}

    def add(self, m: bytes) -> None:
        self.pos[m] = len(self.keys)
        self.keys.append(m)

    def remove(self, m: bytes) -> None:
        keys = self.keys
        i = self.pos.pop(m)
        last = keys.pop()
        if i < len(keys):
            keys[i] = last
            self.pos[last] = i

    def scan(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        """One SCAN step; returns (next cursor, members).

        The index is walked from the end: a cursor ``c`` means positions
        ``[0, c)`` are still to visit (0 starts a new scan). Insertions append
        (into the visited part) and deletions move the last member into the
        hole, so a member present for the whole scan is returned at least once.
        """
        keys = self.keys
        n = len(keys)
        hi = n if cursor == 0 or cursor > n else cursor
        lo = hi - count
        if lo <= 0:
            return 0, keys[:hi]
        return lo, keys[lo:hi]

"""A per-slot key index for CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT (database 0, cluster mode only).

``Database.modified`` tells it of every key created or removed (``Database.flush`` of a FLUSHALL/FLUSHDB),
so the two commands need not scan the keyspace. Each slot's keys are kept in a dict in creation order, the
order of the keyspace's own dict, so GETKEYSINSLOT lists them newest first as Redis does. It is made on the
first such command (one scan); a node that never asks pays nothing. Writers that bypass ``modified`` (a
store load, a failed commit's rollback, a replica's full sync) are caught by the key count: when it differs
from the keyspace's, the index is built again.
"""

from __future__ import annotations

from typing import Any

from .slots import key_slot


class SlotIndex:
    __slots__ = ("db", "slots", "count")

    def __init__(self, db: Any) -> None:
        self.db = db
        self.slots: dict[int, dict[bytes, None]] = {}
        self.count = 0
        self.rebuild()

    def rebuild(self) -> None:
        slots: dict[int, dict[bytes, None]] = {}
        for k in self.db.data:
            s = key_slot(k)
            d = slots.get(s)
            if d is None:
                slots[s] = {k: None}
            else:
                d[k] = None
        self.slots = slots
        self.count = len(self.db.data)

    def changed(self, key: bytes, created: bool) -> None:
        """``key`` changed (``Database.modified``): add it when created, drop it when it is gone."""
        if created:
            s = key_slot(key)
            d = self.slots.get(s)
            if d is None:
                self.slots[s] = {key: None}
                self.count += 1
            elif key not in d:
                d[key] = None
                self.count += 1
        elif key not in self.db.data:
            s = key_slot(key)
            d = self.slots.get(s)
            if d is not None and d.pop(key, 0) is None:
                self.count -= 1
                if not d:
                    del self.slots[s]

    def clear(self) -> None:
        self.slots = {}
        self.count = 0

    def _check(self) -> dict[int, dict[bytes, None]]:
        if self.count != len(self.db.data):
            self.rebuild()
        return self.slots

    def count_in(self, slot: int) -> int:
        return len(self._check().get(slot, ()))

    def keys_in(self, slot: int, n: int) -> list[bytes]:
        """Up to ``n`` keys of ``slot``, newest first."""
        d = self._check().get(slot)
        if not d:
            return []
        data = self.db.data
        out: list[bytes] = []
        for k in reversed(d):
            if k in data:  # a key a rollback took away while another came back (same count)
                out.append(k)
                if len(out) >= n:
                    break
        return out


def index_of(db: Any) -> SlotIndex:
    """``db``'s slot index, made (and from then on kept by ``Database.modified``) on first use."""
    ix = db.slot_index
    if ix is None:
        ix = db.slot_index = SlotIndex(db)
    return ix

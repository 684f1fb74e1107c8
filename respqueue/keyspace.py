"""The keyspace: databases of keys, their values and their expiry times.

Values are ``bytes`` for strings and container objects from
:mod:`respqueue.types` for the other Redis types. Every write goes through
:meth:`Database.modified`, the single hook that WATCH, blocked clients and
persistence hang off.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from .errors import WRONGTYPE
from .events import HASH_SWAPPED, KEY_DELETED
from .types import hash as _hash_mod
from .types.hash import ColdHash, Hash

if TYPE_CHECKING:
    from .persistence.journal import Journal
    from .server import Server

_frozen_ms: int | None = None


def mstime() -> int:
    """The current time in ms; frozen for the duration of a script."""
    if _frozen_ms is not None:
        return _frozen_ms
    return int(time.time() * 1000)


def freeze_time(ms: int | None) -> None:
    """Freeze (or with None, release) the clock, as Redis does inside a script."""
    global _frozen_ms
    _frozen_ms = ms


def type_name(value: Any) -> bytes:
    if type(value) is bytes:
        return b"string"
    return value.rtype


class Database:
    __slots__ = ("index", "server", "data", "expires", "expire_heap", "watched", "blocking", "avg_ttl", "slot_index")

    def __init__(self, index: int, server: Server) -> None:
        self.index = index
        self.server = server
        self.data: dict[bytes, Any] = {}
        self.expires: dict[bytes, int] = {}
        self.expire_heap: list[tuple[int, bytes]] = []
        # key -> clients WATCHing it
        self.watched: dict[bytes, set[Any]] = {}
        # key -> FIFO of clients blocked on it
        self.blocking: dict[bytes, deque[Any]] = {}
        self.avg_ttl = 0
        # cluster mode, database 0: slot -> keys (respqueue/cluster/keyindex.py), made on first use
        self.slot_index: Any = None

    # ---- lookups -------------------------------------------------------
    def lookup(self, key: bytes) -> Any:
        """The value at ``key``, or None; expires the key lazily (a cold hash comes back thawed)."""
        v = self.data.get(key)
        if v is not None:
            if self.expires:
                when = self.expires.get(key)
                if when is not None and when <= mstime():
                    self.expire_key(key)
                    return None
            if type(v) is ColdHash:
                return self.thaw(key, v)
        return v

    def peek(self, key: bytes) -> Any:
        """As :meth:`lookup`, but a cold hash stays cold (for EXISTS, DEL: no need of its fields)."""
        v = self.data.get(key)
        if v is not None and self.expires:
            when = self.expires.get(key)
            if when is not None and when <= mstime():
                self.expire_key(key)
                return None
        return v

    def thaw(self, key: bytes, v: ColdHash, note: bool = True) -> Hash:
        """Replace the cold hash ``v`` at ``key`` with a plain :class:`Hash` of its fields (no change of
        content: nothing is journaled or signalled) and note it as a candidate for compaction again,
        as its same blob while it is not changed (respqueue/coldhash.py); ``note`` False: not noted, for
        a caller that writes it next (the write notes it)."""
        h = v.thawed()
        self.data[key] = h
        cold = _hash_mod.COLD
        if cold is not None and note:
            cold.cur[h] = (v, (self.index, key))
        if HASH_SWAPPED:
            for fn in HASH_SWAPPED:
                fn(self, key, v, h)
        return h

    def lookup_type(self, key: bytes, cls: type) -> Any:
        """The value at ``key`` if it is a ``cls``, None if absent; WRONGTYPE otherwise."""
        v = self.data.get(key)
        if v is None:
            return None
        if self.expires:
            when = self.expires.get(key)
            if when is not None and when <= mstime():
                self.expire_key(key)
                return None
        if not isinstance(v, cls):
            if type(v) is ColdHash and cls is Hash:
                return self.thaw(key, v)
            raise WRONGTYPE
        return v

    def lookup_string(self, key: bytes) -> bytes | None:
        v = self.data.get(key)
        if v is None:
            return None
        if self.expires:
            when = self.expires.get(key)
            if when is not None and when <= mstime():
                self.expire_key(key)
                return None
        if type(v) is not bytes:
            raise WRONGTYPE
        return v

    def exists(self, key: bytes) -> bool:
        return self.peek(key) is not None

    # ---- writes --------------------------------------------------------
    def set(self, key: bytes, value: Any, keepttl: bool = False) -> None:
        """Store ``value`` at ``key``, replacing what was there (and its TTL unless keepttl)."""
        data = self.data
        created = key not in data
        data[key] = value
        if not keepttl and self.expires and key in self.expires:
            del self.expires[key]
        self.modified(key, created)

    def add(self, key: bytes, value: Any) -> None:
        """Store a new container at a key known to be absent."""
        data = self.data
        created = key not in data
        data[key] = value
        self.modified(key, created)

    def delete(self, key: bytes) -> bool:
        v = self.peek(key)
        if v is None:
            return False
        del self.data[key]
        if self.expires:
            self.expires.pop(key, None)
        if KEY_DELETED:
            for fn in KEY_DELETED:
                fn(self, key, v)
        self.modified(key)
        return True

    def modified(self, key: bytes, created: bool = False) -> None:
        """Signal that ``key`` changed: WATCH, blocked clients and persistence see it. ``created``: the
        key was absent just before this change (the journal may then skip a batch's set-then-delete)."""
        s = self.server
        s.dirty += 1
        if self.watched:
            w = self.watched.get(key)
            if w:
                for c in w:
                    c.dirty_cas = True
        if self.blocking and key in self.blocking:
            s.ready_keys[(self.index, key)] = None
        # (typed: the compiled build reads the journal's fields directly, not by attribute lookups)
        j: Journal | None = s.journal
        if j is not None:
            if j.scheduled:  # (Journal.key_changed's common case, inlined: this runs for every write)
                k = (self.index, key)
                d = j.dirty
                if k not in d:
                    d[k] = created
                j.changes += 1
                if j.changes >= j.limit:
                    j.limit_reached()
            else:
                j.key_changed(self, key, created)
        if s.mem_guard is not None:
            s.mem_guard.key_changed(self, key)
        if s.cold_notes is not None:  # memory mode: a changed small hash may go cold (coldhash.py)
            v = self.data.get(key)
            if type(v) is Hash:
                s.cold_notes.cur[v] = (None, (self.index, key))
        if self.slot_index is not None:
            self.slot_index.changed(key, created)

    def touch_all_watched(self) -> None:
        for clients in self.watched.values():
            for c in clients:
                c.dirty_cas = True

    # ---- expiry --------------------------------------------------------
    def set_expire(self, key: bytes, when_ms: int) -> None:
        self.expires[key] = when_ms
        heapq.heappush(self.expire_heap, (when_ms, key))
        self.modified(key)

    def get_expire(self, key: bytes) -> int:
        """Absolute expiry in ms, or -1."""
        return self.expires.get(key, -1)

    def persist(self, key: bytes) -> bool:
        if key in self.expires:
            del self.expires[key]
            self.modified(key)
            return True
        return False

    def expire_key(self, key: bytes) -> None:
        self.data.pop(key, None)
        self.expires.pop(key, None)
        self.server.stats_expired_keys += 1
        self.modified(key)

    def active_expire(self, now_ms: int, budget: int = 200) -> int:
        """Remove up to ``budget`` keys whose time has passed; returns how many."""
        heap = self.expire_heap
        n = 0
        while heap and heap[0][0] <= now_ms and n < budget:
            when, key = heapq.heappop(heap)
            if self.expires.get(key) == when:
                self.expire_key(key)
                n += 1
        # stale heap entries (TTL changed or key deleted) can pile up; rebuild if so
        if len(heap) > 64 and len(heap) > 4 * len(self.expires):
            self.expire_heap = [(w, k) for k, w in self.expires.items()]
            heapq.heapify(self.expire_heap)
        return n

    def flush(self) -> None:
        if self.watched:
            # only watchers of keys that existed are affected, as Redis's touchAllWatchedKeysInDb
            for key, clients in self.watched.items():
                if key in self.data:
                    for c in clients:
                        c.dirty_cas = True
        n = len(self.data)
        if self.server.mem_guard is not None:
            self.server.mem_guard.db_flushed(self)
        self.data.clear()
        self.expires.clear()
        self.expire_heap.clear()
        if self.slot_index is not None:
            self.slot_index.clear()
        self.server.dirty += n
        if self.server.journal is not None:
            self.server.journal.db_flushed(self)

    def __len__(self) -> int:
        return len(self.data)

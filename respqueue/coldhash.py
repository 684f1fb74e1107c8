"""Cold hashes: small hashes nobody touched for a while are kept only as their packed bytes.

A waiting BullMQ job is a small hash that is written once (by addJob) and then left alone until a worker
takes it, maybe much later. As a ``dict`` of ``bytes`` it costs ~600 bytes more than its packed form (the
msgpack ``[hashtable?, {field: value}]`` the store's row holds), so a small hash (listpack-encoded, or a hashtable of at most
``MAX_FIELDS`` fields: BullMQ jobs whose data or opts exceed 64 bytes are hashtables) that was not
touched for ``hash_compact_delay`` ms (``--hash-compact-delay``, default 1000; 0 turns this off) goes
back to the packed form of :meth:`Hash.from_blob`, the one a hash loaded from the store has; its first
use unpacks it (``Hash.__getattr__``), so every reader (hash commands, Lua, BullMQ's native scripts,
persistence, DEBUG/MEMORY) sees the same content through the same accessor.

No loop runs over the keyspace. Hashes are *noted* when they change: in ``durable``/``buffered`` mode by
the journal, when it packs a small hash's row (the entry keeps that blob and the key, so compacting
costs no second pack), in ``memory`` mode by ``Database.modified`` (the entry is packed when compacted);
and when a packed hash is unpacked by a read. Notes go into the current *bucket* (a dict, so a hash
written many times in a tick is one entry); the server cron closes a bucket every tick and compacts the
buckets older than the delay, in bounded slices (``SLICE_S`` of work per tick). A hash noted again in a
newer bucket is skipped (that entry will handle it), as is one whose key the journal has not yet
written again (its blob would be stale): a hot job (taken by a worker within the delay) never pays a
pack or an unpack.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from typing import Any

from .events import HASH_SWAPPED
from .persistence.codec import COMPACT_MAX_BYTES
from .persistence.codec import COMPACT_MAX_FIELDS as MAX_FIELDS  # as the one-row hashes of the generic rows
from .types import hash as hash_mod
from .types.hash import _STORED, ColdHash, Hash, PackedHash, pack_small

SLICE_S = 0.008  # at most this much compaction work per cron tick
# ... or this much while it lags (its oldest due bucket more than twice the delay old): the hot hashes of a
# fast fill would otherwise pile up, and the memory they free when packed stays in the process's arenas
# (Redis's slow active-expire cycle takes up to 25% of a tick likewise)
LAG_SLICE_S = 0.025
# sys.getrefcount of a hash in tick()'s loop that nothing else holds (the bucket, the snapshot's pair,
# the loop variable, the call's argument): deleted from the keyspace, so not worth packing (a job
# completed and removed within the delay)
_ORPHAN_REFS = 4
# ... and the keyspace, in _compact (its argument and the call's): nothing else holds it
_SOLE_REFS = 6
_refs = sys.getrefcount


class ColdHashes:
    """The compaction queue of one server (``server.cold_hashes``)."""

    def __init__(self, server: Any, delay_ms: int) -> None:
        self.server = server
        self.delay_ms = delay_ms
        # the open bucket: hash -> (blob or None, (db, key)): noted by the journal (the blob its row holds),
        # by Database.modified in memory mode (None: packed when due), by Database.thaw (the ColdHash it
        # was); None: noted by PackedHash's unpack (its key unknown: packed in place)
        self.cur: dict[Hash, Any] = {}
        # closed buckets, oldest first: (ms when closed, its number, entries)
        self.buckets: deque[tuple[int, int, dict[Hash, Any]]] = deque()
        # the number of the newest closed bucket; closing a bucket stamps each of its hashes with its number
        # (``Hash._cseq``), so a hash noted again in a newer bucket is skipped in the older one in one test
        self.seq = 0
        self._pos: Any = None  # iterator over the oldest bucket while it is being worked through
        self.compacted = 0  # hashes packed so far (DEBUG COLD-HASHES)
        self.skipped = 0
        # after a load: [database, its keys then, next index] still to look at for cold hashes in the
        # store's form, recoded in the compact one in the background (recode_loaded)
        self._recode: list[list[Any]] = []
        self.recoded = 0
        self.announced = 0  # compactions that told the hash_swapped subscribers (the hash was held elsewhere too)

    def note(self, h: Hash, entry: Any = None) -> None:
        self.cur[h] = entry

    def pending(self) -> int:
        return len(self.cur) + sum(len(b) for _, _, b in self.buckets) + sum(len(r[1]) - r[2] for r in self._recode)

    def _close(self, now_ms: int) -> None:
        """Close the open bucket, stamped ``now_ms``."""
        cur = self.cur
        seq = self.seq = self.seq + 1
        for h in cur:
            h._cseq = seq
        self.buckets.append((now_ms, seq, cur))
        self.cur = {}

    def recode_loaded(self) -> None:
        """The store was loaded: its small hashes are ColdHash values in the store's form (msgpack with the
        field names, as their rows hold them); recode them in the compact form in the background, a slice
        per tick, rather than make the load slower (~45 bytes less per BullMQ job)."""
        for db in self.server.dbs:
            if db.data:
                self._recode.append([db, list(db.data), 0])

    def _recode_step(self, deadline: float) -> None:
        rec = self._recode
        while rec:
            item = rec[0]
            db, keys, i = item
            data = db.data
            n = len(keys)
            while i < n:
                k = keys[i]
                i += 1
                v = data.get(k)
                if type(v) is ColdHash and v[0] == _STORED:
                    c = ColdHash.of(*v.fields())
                    if c[0] != _STORED:
                        data[k] = c
                        self.recoded += 1
                        if HASH_SWAPPED:
                            for fn in HASH_SWAPPED:
                                fn(db, k, v, c)
                if not i & 255 and time.perf_counter() >= deadline:
                    item[2] = i
                    return
            rec.pop(0)

    def tick(self, now_ms: int, budget_s: float = SLICE_S) -> int:
        """Close the open bucket and compact what is due; returns how many hashes were packed."""
        if self.cur:
            self._close(now_ms)
        buckets = self.buckets
        if not buckets or now_ms - buckets[0][0] < self.delay_ms:
            if self._recode:
                self._recode_step(time.perf_counter() + budget_s)
            return 0
        journal = self.server.journal
        jdirty = journal.dirty if journal is not None else None
        if budget_s == SLICE_S and now_ms - buckets[0][0] >= 2 * self.delay_ms:
            budget_s = LAG_SLICE_S
        deadline = time.perf_counter() + budget_s
        done = 0
        while buckets and now_ms - buckets[0][0] >= self.delay_ms:
            _, no, bucket = buckets[0]
            it = self._pos if self._pos is not None else iter(list(bucket.items()))
            self._pos = it
            n = 0
            dbs = self.server.dbs
            for h, entry in it:
                n += 1
                if h._cseq != no:
                    continue  # noted again since: the newer bucket handles it
                if entry is None:
                    if _refs(h) <= _ORPHAN_REFS:
                        continue
                    data = None
                else:
                    data = dbs[entry[1][0]].data
                    if data.get(entry[1][1]) is not h:
                        continue  # deleted (or replaced) since
                if self._compact(h, entry, jdirty, dbs):
                    done += 1
                if n >= 256:
                    n = 0
                    if time.perf_counter() >= deadline:
                        self.compacted += done
                        return done
            self._pos = None
            buckets.popleft()
        self.compacted += done
        if self._recode:
            self._recode_step(deadline)
        return done

    def _compact(self, h: Hash, entry: Any, jdirty: dict[Any, Any] | None, dbs: list[Any]) -> bool:
        """Pack ``h``: replaced in the keyspace by its blob as a :class:`ColdHash` when its key is known and
        nothing else holds it (once the ``hash_swapped`` subscribers let go of it), else turned into a
        :class:`PackedHash` in place."""
        d = _packable(h)
        if d is None:
            return False
        blob = entry[0] if entry is not None else None
        if blob is not None and jdirty is not None and entry[1] in jdirty:
            self.skipped += 1
            return False  # changed since it was noted with this blob: noted again when it is written
        if entry is not None:
            # a thawed hash's ColdHash, unchanged since: itself; the row's bytes written with a store shape
            # (hash.pack_small): as they are; else packed with its shape (not its names)
            if blob is not None and blob[0] != _STORED:
                cold = blob if type(blob) is ColdHash else ColdHash(blob)
            else:
                cold = ColdHash.of(h.ht, d)
            db = dbs[entry[1][0]]
            key = entry[1][1]
            # held by: the keyspace, the bucket, tick()'s snapshot pair and loop variable, this frame, the call;
            # a subscriber is told only when something else holds ``h`` too (it may be the subscriber, who lets
            # go of it): one that holds nothing of it has nothing to swap (the history's cache no longer holds a
            # finished job's hash, which most compactions are)
            if HASH_SWAPPED and _refs(h) > _SOLE_REFS:
                self.announced += 1
                for fn in HASH_SWAPPED:
                    fn(db, key, h, cold)
            if _refs(h) <= _SOLE_REFS:
                db.data[key] = cold
                return True
            if HASH_SWAPPED:  # held elsewhere too: packed in place, and the subscribers keep ``h``
                for fn in HASH_SWAPPED:
                    fn(db, key, cold, h)
        if blob is None or type(blob) is not bytes:
            blob = pack_small(h.ht, d)  # (a PackedHash holds the store's form: the journal may write it)
        h._blob = blob
        del h.d
        del h.ht
        h.__class__ = PackedHash  # its first use unpacks it again
        return True

    def compact_all(self) -> int:
        """Compact every noted hash now, whatever its age (DEBUG COLD-HASHES COMPACT)."""
        now = 1 << 62
        n = 0
        if self.cur:
            # the open bucket, closed as due (tick() would stamp it with ``now`` itself: never due)
            self._close(0)
        while self.buckets:
            n += self.tick(now, 3600.0)
        while self._recode:
            self._recode_step(float("inf"))
        return n


def _packable(h: Hash) -> dict[bytes, bytes] | None:
    """The fields of ``h`` if it may be packed, else None: not when packed already, indexed (HSCAN/HRANDFIELD),
    kept as field rows, empty, or a hashtable of more than MAX_FIELDS fields."""
    if h._blob is not None or h._ix is not None or h.logs_changes:
        return None
    try:
        d = h.d
    except AttributeError:
        return None
    if not d or (h.ht and len(d) > MAX_FIELDS):
        return None
    return d


def pack_now(db: Any, key: bytes, h: Hash) -> bool:
    """Hold the plain small hash ``h``, the value at ``key`` in ``db``, packed from now on (a :class:`ColdHash`),
    as the compactor would once it had been left alone for ``--hash-compact-delay``: for a writer that knows
    nobody reads it soon (compat: a BullMQ job just added or just finished). Packed now, its live objects are
    freed with the request's other garbage, where a second later they would leave holes between what was
    allocated since. Its content does not change: nothing is journaled or signalled but ``hash_swapped``.
    False (left as it is) when compaction is off, or for a hash the compactor would not pack, or one over a
    row's size that the store keeps a row per field."""
    if hash_mod.COLD is None:
        return False
    d = _packable(h)
    if d is None:
        return False
    cold = ColdHash.of(h.ht, d)
    if h.ht and len(cold) > COMPACT_MAX_BYTES:
        return False
    db.data[key] = cold
    hash_mod.COLD.cur.pop(h, None)  # (noted by its last change, most likely in the open bucket: nothing to do later)
    if HASH_SWAPPED:
        for fn in HASH_SWAPPED:
            fn(db, key, h, cold)
    return True


def setup(server: Any) -> None:
    """Turn cold-hash compaction on for ``server`` (``hash_compact_delay`` > 0): the journal notes the
    hashes it packs, or in memory mode ``Database.modified`` notes changed hashes."""
    delay = int(getattr(server.config, "hash_compact_delay", 0) or 0)
    if delay <= 0:
        return
    ch = ColdHashes(server, delay)
    server.cold_hashes = ch
    hash_mod.COLD = ch
    if server.journal is not None:
        server.journal.cold = ch
        ch.recode_loaded()
    else:
        server.cold_notes = ch

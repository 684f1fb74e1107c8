"""Start-up: load the store into the Database objects, attached to the journal.

The whole store is read in bulk here (a scan per table); how each type's rows become a container is
codec.py's (the generic-row layout, also used for a single key by :func:`codec.load_key`)."""

from __future__ import annotations

import gc
import heapq
import sqlite3
from collections.abc import Iterator
from itertools import compress, groupby
from operator import itemgetter
from typing import Any

from ..keyspace import mstime
from .codec import (
    chunk_id,
    hash_from_blob,
    hash_from_fields,
    list_from_blob,
    list_from_items,
    set_from_members,
    stream_from_chunks,
    stream_from_entries,
    string_from_chunks,
    zset_from_sorted,
)

_KEY = itemgetter(0, 1)
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
_THIRD = itemgetter(2)
_KIND = itemgetter(3)
_KEY_VALUE = itemgetter(1, 2)
_IS0 = (0).__eq__
_IS1 = (1).__eq__
_IS2 = (2).__eq__
_NONE = ("", None)
_ELEM = itemgetter(2)
_ELEM2 = itemgetter(2, 3)
_VALUE = itemgetter(3)
_MARK = itemgetter(6)
_HANDOFF = itemgetter(0, 1, 4, 5, 7, 8)  # (db, key, type, expire_ms, lock, lock_ms)
_MAX_SHARED_NAMES = 65_536
_from_blob = hash_from_blob
# a table's rows are read per key (no key column to build per row) when it holds at most
# this many keys, else in one scan grouped by key
_PER_KEY_MAX = 4096


def load(conn: sqlite3.Connection, dbs: list[Any], stored: dict[tuple[int, bytes], bytes],
         skip_state: bool = False, handoff: list[tuple[Any, ...]] | None = None,
         handoff_types: tuple[str, ...] = ()) -> tuple[int, int, list[tuple[int, bytes]]]:
    """Load every key into ``dbs``; returns (keys loaded, keys expired, expired (db, key) pairs).

    Containers with element rows come back attached to the journal (see codec.py) and
    ``stored`` is filled with the container keys the store holds. ``skip_state``: the one-row hashes
    without a TTL whose row has a ``state`` (job rows) are left to the layout, which reads them in its
    own scan of those rows (compat/engine/layout.py: one scan for the job hashes and their containers).

    ``handoff`` (a list, with ``skip_state``): this scan also hands the layout the rows it would otherwise
    scan the whole table again for, as ``(db, key, type, expire_ms, lock, lock_ms)``: those whose type is in
    ``handoff_types`` (its containers) and those with a state and a lock (an owned job's row, whose one-row
    hash this loader then loads itself, not the layout). They are still loaded here as any row is.

    The cyclic GC is off while loading (the loader creates millions of acyclic objects, and each
    collection would walk all of them), and what was loaded is then frozen (gc.freeze) so later
    full collections do not scan the whole keyspace again.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        res = _load(conn, dbs, stored, skip_state, handoff, handoff_types)
    finally:
        if was_enabled:
            gc.enable()
    gc.freeze()
    return res


def _load(conn: sqlite3.Connection, dbs: list[Any], stored: dict[tuple[int, bytes], bytes],
          skip_state: bool = False, handoff: list[tuple[Any, ...]] | None = None,
          handoff_types: tuple[str, ...] = ()) -> tuple[int, int, list[tuple[int, bytes]]]:
    now = mstime()
    ndb = len(dbs)
    metas: dict[tuple[int, bytes], tuple[str, Any]] = {}
    expired: list[tuple[int, bytes]] = []
    loaded = 0
    # One scan of the keys rows (those of job rows left to the layout with ``skip_state``). Keys without an
    # expiry (nearly all of them) are read in bulk with C-level constructors: SQLite tells each row's kind
    # (0: a string in keys.value, 1: a small hash in one row, see codec.COMPACT_MAX_FIELDS; 2: anything else)
    # and a chunk's rows of kinds 0 and 1 are split out with itertools.compress into the database's dict; only
    # the rest (keys with a TTL, containers with element rows, small lists, strings stored in chunks: keys.value
    # their length, an INTEGER) take a Python step each.
    # With ``handoff`` the rows the layout wants are marked by SQLite (column 6) and come with their lock
    # columns; the one-row hashes of owned jobs (a lock in their row) are then read here too (the layout's
    # scan leaves them), so that the layout needs no scan of its own for its containers and locks.
    hand = skip_state and handoff is not None
    skip = " AND NOT (state IS NOT NULL AND type = 'hash' AND expire_ms IS NULL AND value IS NOT NULL"
    params: tuple[Any, ...] = (ndb,)
    extra = ""
    if hand:
        marks = ", ".join("?" * len(handoff_types)) or "NULL"
        extra = (f", CASE WHEN type IN ({marks}) OR (lock IS NOT NULL AND state IS NOT NULL) THEN 1 END,"
                 " lock, lock_ms")
        params = (*handoff_types, ndb)
        skip += " AND lock IS NULL"
    cur = conn.execute(
        "SELECT db, key, value, CASE WHEN expire_ms IS NOT NULL THEN 2"
        " WHEN type = 'string' THEN 2 * (typeof(value) = 'integer') WHEN type = 'hash' AND value IS NOT NULL THEN 1"
        f" ELSE 2 END, type, expire_ms{extra} FROM keys WHERE db >= 0 AND db < ?"  # noqa: S608
        + (skip + ")" if skip_state else ""),
        params,
    )
    rest: list[Any] = []
    while True:
        chunk = cur.fetchmany(65536)
        if not chunk:
            break
        if hand:
            assert handoff is not None
            marked = list(map(_MARK, chunk))
            if 1 in marked:
                handoff.extend(map(_HANDOFF, compress(chunk, marked)))
        # rows come in primary-key order: a chunk is one database's, or a few runs of them
        parts = [chunk] if chunk[0][0] == chunk[-1][0] else [list(g) for _, g in groupby(chunk, _FIRST)]
        for rows in parts:
            data = dbs[rows[0][0]].data
            before = len(data)
            kinds = list(map(_KIND, rows))
            n1 = kinds.count(1)
            if n1 == len(kinds):
                data.update(zip(map(_SECOND, rows), map(_from_blob, map(_THIRD, rows)), strict=True))
            else:
                n0 = kinds.count(0)
                if n0:
                    data.update(map(_KEY_VALUE, rows if n0 == len(kinds) else compress(rows, map(_IS0, kinds))))
                if n1:
                    hrows = list(compress(rows, map(_IS1, kinds)))
                    data.update(zip(map(_SECOND, hrows), map(_from_blob, map(_THIRD, hrows)), strict=True))
                if n0 + n1 < len(kinds):
                    rest.extend(compress(rows, map(_IS2, kinds)))
            loaded += len(data) - before
    del cur
    for dbi, key, value, _kind, typ, exp, *_ in rest:
        if exp is None:
            metas[(dbi, key)] = (typ, value)
            continue
        if exp <= now:
            expired.append((dbi, key))
            if typ != "string" or type(value) is int:
                stored[(dbi, key)] = typ.encode()
            continue
        db = dbs[dbi]
        db.expires[key] = exp
        db.expire_heap.append((exp, key))
        if typ == "string" and type(value) is not int:
            db.data[key] = bytes(value)
            loaded += 1
        else:
            metas[(dbi, key)] = (typ, value)
    del rest
    # strings stored in chunks: reassembled, the chunks without a row being zero bytes
    for k in [k for k, m in metas.items() if m[0] == "string"]:
        n = metas.pop(k)[1]
        dbs[k[0]].data[k[1]] = string_from_chunks(
            n, conn.execute("SELECT idx, data FROM string_chunks WHERE db = ? AND key = ?", k))
        stored[k] = b"string"
        loaded += 1
    for db in dbs:
        if db.expire_heap:
            heapq.heapify(db.expire_heap)

    def put(k: tuple[int, bytes], v: Any, rt: bytes) -> None:
        nonlocal loaded
        if k not in metas or metas.pop(k)[0] != rt.decode():
            return
        dbs[k[0]].data[k[1]] = v
        stored[k] = rt
        loaded += 1

    # Element tables are read in key order and grouped with itertools.groupby; a container is
    # built from its group with C-level constructors (dict, set, sorted, deque over
    # itemgetter maps), so there is no Python step per row, only per key.
    # Hash field names repeat across keys (every BullMQ job hash has the same few), so they are
    # shared through a bounded cache: one bytes object per distinct name instead of one per row.
    names: dict[bytes, bytes] = {}
    share = names.setdefault
    def keys_of(typ: str) -> list[tuple[int, bytes]]:
        """The keys still to load whose type is ``typ``."""
        return [k for k, m in metas.items() if m[0] == typ]

    def groups(table: str, cols: str, typ: str, order: str = "") -> Iterator[tuple[tuple[int, bytes], Iterator[Any]]]:
        """(key, rows) for the keys of type ``typ``; rows are ``(db, key, *cols)`` tuples, or
        ``(0, 0, *cols)`` when read per key (a 1M-item list builds no key bytes per row)."""
        keys = keys_of(typ)
        if len(keys) <= _PER_KEY_MAX:
            for k in keys:
                rows = conn.execute(f"SELECT 0, 0, {cols} FROM {table} WHERE db = ? AND key = ?{order}", k).fetchall()  # noqa: S608
                if rows:
                    yield k, iter(rows)
        elif keys:
            yield from groupby(conn.execute(f"SELECT db, key, {cols} FROM {table}"), _KEY)  # noqa: S608

    for k, group in groups("hash_fields", "field, value", "hash"):
        if metas.get(k, _NONE)[0] == "hash":
            del metas[k]
            rows = list(group)
            if len(names) < _MAX_SHARED_NAMES:
                d = dict(zip(map(share, map(_ELEM, rows), map(_ELEM, rows)), map(_VALUE, rows), strict=True))
            else:
                d = dict(map(_ELEM2, rows))
            dbs[k[0]].data[k[1]] = hash_from_fields(k, d)
            stored[k] = b"hash"
            loaded += 1
    for k, rows in groups("set_members", "member", "set"):
        if k in metas:
            put(k, set_from_members(k, set(map(_ELEM, rows))), b"set")
    for k, rows in groups("zset_members", "score, member", "zset"):
        if k in metas:
            put(k, zset_from_sorted(k, sorted(map(_ELEM2, rows))), b"zset")
    # small lists are one row each (keys.value, see journal.LIST_COMPACT_MAX)
    for k, (typ, value) in list(metas.items()):
        if typ == "list" and value is not None:
            del metas[k]
            dbs[k[0]].data[k[1]] = list_from_blob(k, value)
            loaded += 1
    lists = keys_of("list")
    for k in lists if len(lists) <= _PER_KEY_MAX else ():
        # positions pushed at either end stay consecutive integers (BullMQ's wait and active
        # lists): then only the values are read, and the positions rebuilt from the first
        # (n distinct positions spanning n - 1 are consecutive integers only when none is fractional:
        # LINSERT places an element at a midpoint)
        lo, hi, n, frac = conn.execute(
            "SELECT min(pos), max(pos), count(*), count(pos != CAST(pos AS INTEGER) OR NULL)"
            " FROM list_items WHERE db = ? AND key = ?", k).fetchone()
        if n and not frac and hi - lo + 1 == n:
            values = map(_FIRST, conn.execute("SELECT value FROM list_items WHERE db = ? AND key = ? ORDER BY pos", k))
            put(k, list_from_items(k, values, first=lo), b"list")
    for k, rows in groups("list_items", "pos, value", "list", " ORDER BY pos"):
        if k in metas:
            pairs = list(map(_ELEM2, rows))
            put(k, list_from_items(k, map(_SECOND, pairs), map(_FIRST, pairs)), b"list")
    # streams: chunks of entries (stream_chunks), or a row per entry (stream_entries, written by
    # schema version 3 and earlier: such a stream is rewritten as chunks when it first changes)
    # ID parts >= 2**63 are stored negative (two's complement): ordered by the unsigned ID
    chunked: dict[tuple[int, bytes], list[tuple[int, bytes]]] = {}
    for k, rows in groups("stream_chunks", "ms, seq, entries", "stream"):
        if k in metas and metas[k][0] == "stream":
            chunked[k] = sorted((chunk_id(r[2], r[3]), r[4]) for r in rows)
    for k, chunks in chunked.items():
        put(k, stream_from_chunks(k, metas[k][1], chunks), b"stream")
    for k, rows in groups("stream_entries", "ms, seq, fields", "stream"):
        if k in metas and metas[k][0] == "stream":
            ents = sorted((chunk_id(r[2], r[3]), r[4]) for r in rows)
            put(k, stream_from_entries(metas[k][1], ents), b"stream")  # rewritten as chunks when it next changes
    # streams without entries (emptied by XDEL/XTRIM, or created by XGROUP MKSTREAM), and small
    # hashes with a TTL
    for k, (typ, value) in list(metas.items()):
        if typ == "hash" and value is not None:
            del metas[k]
            dbs[k[0]].data[k[1]] = _from_blob(value)
            loaded += 1
        elif typ == "stream":
            put(k, stream_from_chunks(k, value, []), b"stream")
    return loaded, len(expired), expired


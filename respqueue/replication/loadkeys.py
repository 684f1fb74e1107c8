"""Reload single keys from the store into the keyspace (a replica, after applying a stream group).

The same rules as :mod:`respqueue.persistence.loader` (which loads the whole store at start-up),
key by key, both building containers with the generic-row layout's codec
(:func:`respqueue.persistence.codec.load_key`): containers come back attached to the journal and
``stored`` says which keys have element rows, so a replica promoted to master journals its next
changes exactly as a restarted server would.
"""

from __future__ import annotations

import heapq
import sqlite3
from typing import Any

from ..persistence.codec import load_key


def reload_key(
    conn: sqlite3.Connection, dbs: list[Any], stored: dict[tuple[int, bytes], bytes], k: tuple[int, bytes]
) -> None:
    """Make key ``k`` = (db, key) in memory what the store holds (absent when it has no row)."""
    dbi, key = k
    if dbi < 0 or dbi >= len(dbs):
        return
    db = dbs[dbi]
    row = conn.execute("SELECT type, expire_ms, value FROM keys WHERE db = ? AND key = ?", k).fetchone()
    stored.pop(k, None)
    if row is None:
        db.data.pop(key, None)
        db.expires.pop(key, None)
        return
    typ, exp, value = row
    v, rows = load_key(conn, k, typ, value)
    if v is None:
        return  # a type the generic layout does not know (job rows: compat/engine/layout.py's)
    if rows is not None:
        stored[k] = rows
    db.data[key] = v
    if exp is not None:
        db.expires[key] = exp
        heapq.heappush(db.expire_heap, (exp, key))
    else:
        db.expires.pop(key, None)

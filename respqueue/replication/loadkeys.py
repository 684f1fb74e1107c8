"""Reload single keys from the store into the keyspace (a replica, after applying a stream group).

The same rules as :mod:`respqueue.persistence.loader` (which loads the whole store at start-up),
key by key: containers come back attached to the journal and ``stored`` says which keys have
element rows, so a replica promoted to master journals its next changes exactly as a restarted
server would.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections import deque
from typing import Any

import msgpack

from ..persistence.loader import _apply_stream_meta, _stream_first
from ..types.hash import MAX_LISTPACK_ENTRIES as HASH_MAX_ENTRIES
from ..types.hash import MAX_LISTPACK_VALUE as HASH_MAX_VALUE
from ..types.hash import Hash
from ..types.list import List
from ..types.set import Set
from ..types.stream import Stream
from ..types.zset import ZSet

_M64 = (1 << 64) - 1


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
    v: Any
    if typ == "string":
        v = bytes(value)
    elif typ == "hash" and value is not None:
        v = Hash.from_blob(bytes(value))
    elif typ == "hash":
        h = Hash()
        h.d = d = dict(conn.execute("SELECT field, value FROM hash_fields WHERE db = ? AND key = ?", k).fetchall())
        h.ht = bool(d) and (
            len(d) > HASH_MAX_ENTRIES or max(map(len, d)) > HASH_MAX_VALUE or max(map(len, d.values())) > HASH_MAX_VALUE
        )
        h._jkey = k
        h._jlog = []
        stored[k] = b"hash"
        v = h
    elif typ == "set":
        v = Set.from_members({r[0] for r in conn.execute("SELECT member FROM set_members WHERE db = ? AND key = ?", k)})
        v._jkey = k
        v._jlog = []
        stored[k] = b"set"
    elif typ == "zset":
        v = ZSet.from_sorted(
            sorted(conn.execute("SELECT score, member FROM zset_members WHERE db = ? AND key = ?", k).fetchall())
        )
        v._jkey = k
        v._jlog = []
        stored[k] = b"zset"
    elif typ == "list" and value is not None:
        v = List(msgpack.unpackb(value, raw=True, use_list=True))
        v.detach(k)
    elif typ == "list":
        pairs = conn.execute("SELECT pos, value FROM list_items WHERE db = ? AND key = ? ORDER BY pos", k).fetchall()
        v = List([p[1] for p in pairs])
        v.attach(k)
        v._p = deque(float(p[0]) for p in pairs)
        stored[k] = b"list"
    elif typ == "stream":
        v = Stream()
        chunks = sorted(
            ((r[0] & _M64) << 64 | (r[1] & _M64), r[2])
            for r in conn.execute("SELECT ms, seq, entries FROM stream_chunks WHERE db = ? AND key = ?", k)
        )
        first = _stream_first(value)
        for _c, blob in chunks:
            flat = msgpack.unpackb(blob, raw=True, use_list=True)
            for j in range(0, len(flat), 3):
                i = flat[j] << 64 | flat[j + 1]
                if first is not None and i >= first:
                    v.append(i, flat[j + 2])
        _apply_stream_meta(v, value)
        v._jkey = k
        v._jlog = []
        v._jchunks = [c for c, _ in chunks]
        stored[k] = b"stream"
    else:
        return
    db.data[key] = v
    if exp is not None:
        db.expires[key] = exp
        heapq.heappush(db.expire_heap, (exp, key))
    else:
        db.expires.pop(key, None)

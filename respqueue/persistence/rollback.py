"""Durable mode: after a failed commit, put the keys it held back to what the store holds.

A batch whose commit fails (disk full, I/O error, the writer gone) was answered with MISCONF; a
client told "failed" must find nothing written (Redis applies nothing under MISCONF). So the keys
the failed batch changed, and those changed since in the open batch (their replies are held
behind it, and may build on its changes), are read back from the store: the loader's own code
runs on a copy of just their rows (an in-memory SQLite database), and the loaded values replace
the in-memory ones. See docs/STORAGE.md, "Start-up, failures, tools".
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterable
from typing import Any

from .loader import _load
from .store import ALL_TABLES, MIGRATIONS, SCHEMA_VERSION


class _Shadow:
    """What the loader fills: one database's keys, TTLs and expiry heap."""

    __slots__ = ("data", "expires", "expire_heap")

    def __init__(self) -> None:
        self.data: dict[bytes, Any] = {}
        self.expires: dict[bytes, int] = {}
        self.expire_heap: list[tuple[int, bytes]] = []


def read_keys(path: str, ndb: int, keys: Iterable[tuple[int, bytes]] | None
              ) -> tuple[list[_Shadow], dict[tuple[int, bytes], bytes], list[tuple[int, bytes]]]:
    """The committed state of ``keys`` (every key: None) in the store at ``path``: per database the
    loaded values, the element rows the store holds (``Journal.stored``) and the keys found expired."""
    shadows = [_Shadow() for _ in range(ndb)]
    stored: dict[tuple[int, bytes], bytes] = {}
    if keys is None:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    else:
        conn = sqlite3.connect("file::memory:", uri=True)
        conn.execute("ATTACH DATABASE ? AS src", (f"file:{path}?mode=ro",))
        for v in range(1, SCHEMA_VERSION + 1):
            for stmt in MIGRATIONS[v]:
                conn.execute(stmt)
        rows = list(keys)
        conn.execute("BEGIN")
        for t in ALL_TABLES:
            conn.executemany(f"INSERT INTO main.{t} SELECT * FROM src.{t} WHERE db = ? AND key = ?", rows)  # noqa: S608
        conn.execute("COMMIT")
    try:
        _loaded, _nexp, expired = _load(conn, shadows, stored)
    finally:
        conn.close()
    return shadows, stored, expired


def restore(server: Any, journal: Any, keys: set[tuple[int, bytes]] | None) -> int:
    """Replace the in-memory values of ``keys`` (None: the whole keyspace, after a failed FLUSHDB or
    SWAPDB) with the store's; returns the number of keys put back. Raises sqlite3.Error when the
    store cannot be read."""
    dbs = server.dbs
    shadows, stored, expired = read_keys(journal.store.path, len(dbs), keys)
    if keys is None:
        journal.stored = stored
        journal.str_written = {}
        for db, sh in zip(dbs, shadows, strict=True):
            db.data.clear()
            db.data.update(sh.data)
            db.expires.clear()
            db.expires.update(sh.expires)
            db.expire_heap[:] = sh.expire_heap
            heapq.heapify(db.expire_heap)
            db.touch_all_watched()
            if db.blocking:
                for key in db.blocking:
                    if key in db.data:
                        server.ready_keys[(db.index, key)] = None
        n = sum(len(sh.data) for sh in shadows)
    else:
        n = 0
        jstored = journal.stored
        for k in keys:
            dbi, key = k
            db = dbs[dbi]
            sh = shadows[dbi]
            v = sh.data.get(key)
            jstored.pop(k, None)
            journal.str_written.pop(k, None)
            if k in stored:
                jstored[k] = stored[k]
            if v is None:
                db.data.pop(key, None)
                db.expires.pop(key, None)
            else:
                n += 1
                db.data[key] = v
                exp = sh.expires.get(key)
                if exp is None:
                    db.expires.pop(key, None)
                else:
                    db.expires[key] = exp
                    heapq.heappush(db.expire_heap, (exp, key))
            if db.watched:
                w = db.watched.get(key)
                if w:
                    for c in w:
                        c.dirty_cas = True
            if v is not None and db.blocking and key in db.blocking:
                server.ready_keys[k] = None
    journal.adopt_strings(keys)
    for db in dbs:  # cluster mode's slot -> keys index (respqueue/cluster/keyindex.py): keys came and went
        if db.slot_index is not None:
            db.slot_index.rebuild()
    for k in expired:  # expired in the store: deleted from it by the next batch
        journal.dirty[k] = None
    return n

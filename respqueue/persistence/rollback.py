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


def read_keys(path: str, ndb: int, keys: Iterable[tuple[int, bytes]] | None, layout: Any = None, scan: bool = True
              ) -> tuple[list[_Shadow], dict[tuple[int, bytes], bytes], list[tuple[int, bytes]], Any, Any]:
    """The committed state of ``keys`` (every key: None) in the store at ``path``: per database the
    loaded values, the element rows the store holds (``Journal.stored``), the keys found expired,
    and with a job-row ``layout`` (``Journal.layout``, compat/engine/layout.py) the keys read (``keys``
    and those sharing a job row with them: see ``layout.related``; ``scan``: find a container's
    members by a scan of the store too) and a fresh layout of what was read."""
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
        if layout is not None:
            def state_of(k: tuple[int, bytes]) -> Any:
                row = conn.execute("SELECT state FROM src.keys WHERE db = ? AND key = ?", k).fetchone()
                return None if row is None or row[0] is None else bytes(row[0])

            def members_of(k: tuple[int, bytes]) -> list[bytes]:
                return [bytes(r[0]) for r in conn.execute("SELECT key FROM src.keys WHERE db = ? AND state = ?", k)]

            keys = layout.related(keys, state_of, members_of if scan else None)
        rows = list(keys)
        conn.execute("BEGIN")
        for t in ALL_TABLES:
            conn.executemany(f"INSERT INTO main.{t} SELECT * FROM src.{t} WHERE db = ? AND key = ?", rows)  # noqa: S608
        conn.execute("COMMIT")
    fresh = None
    try:
        _loaded, _nexp, expired = _load(conn, shadows, stored)
        if layout is not None:
            # the job-row containers, rebuilt from their members' rows (as at start-up)
            fresh = type(layout)()
            ldirty: dict[tuple[int, bytes], Any] = {}
            fresh.load(conn, shadows, ldirty, stored)
            expired.extend(k for k in ldirty if k not in expired)
    finally:
        conn.close()
    return shadows, stored, expired, keys, fresh


def restore(server: Any, journal: Any, keys: set[tuple[int, bytes]] | None, replica: bool = False,
            done: set[tuple[int, bytes]] | None = None) -> int:
    """Replace the in-memory values of ``keys`` (None: the whole keyspace, after a failed FLUSHDB or
    SWAPDB) with the store's; returns the number of keys put back. Raises sqlite3.Error when the
    store cannot be read. With job rows (``journal.layout``) the keys sharing a row with ``keys``
    are put back too, and the layout's state for them is the store's. ``replica``: a replica
    reloading the keys a frame touched (its store holds the master's rows; it writes nothing, so
    nothing found expired or to rewrite is queued for the journal)."""
    dbs = server.dbs
    layout = journal.layout
    shadows, stored, expired, read, fresh = read_keys(journal.store.path, len(dbs), keys, layout, not replica)
    if fresh is not None:
        fresh.dbs = dbs
        if keys is None:
            journal.layout = fresh
        else:
            keys = set(read)
            layout.adopt(fresh, keys)
    if done is not None and keys is not None:
        done.update(keys)  # the keys put back (with job rows: also those sharing a row with ``keys``)
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
    if replica:
        return n
    for k in expired:  # expired in the store: deleted from it by the next batch
        journal.dirty[k] = None
    return n

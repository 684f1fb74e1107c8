"""The generic-row layout: how each Redis type is stored in the SQLite store, and read back.

One place for the rows of a key (the tables are in store.py's schema, the batching in journal.py):

* **full rows**: a key written whole (new, renamed, or changed in a way its change log does not
  describe): :func:`full_rows` for containers with element rows, :func:`hash_blob` /
  :func:`list_blob` for the small hashes and lists kept in one row, :func:`string_chunk_rows` for
  a long string, :func:`stream_meta` for a stream's ``keys.value``;
* **delta rows**: an attached container's change log (``take_changes``, see respqueue/types) turned
  into element rows: :func:`delta_rows`, :func:`stream_delta_rows`, :func:`string_range_rows`;
* **load**: rows -> container, attached to the journal: :func:`hash_from_fields`, :func:`list_from_blob`,
  :func:`list_from_items`, :func:`stream_from_chunks`, :func:`string_from_chunks` (the loader's bulk scan
  and a single key's :func:`load_key` both build with these).

How each type is stored:

* string: ``keys.value`` (type ``string``); longer than ``STRING_CHUNK``: ``keys.value`` is its length
  (an INTEGER) and its bytes are in ``string_chunks`` rows (chunks of zero bytes have none);
* hash: at most ``COMPACT_MAX_FIELDS`` fields packed in at most ``COMPACT_MAX_BYTES`` (or any
  listpack-encoded hash): one row, ``keys.value`` = msgpack ``[hashtable?, {field: value}]``; bigger:
  a ``hash_fields`` row per field (``keys.value`` NULL), for good;
* list: at most ``LIST_COMPACT_MAX`` items packed in at most ``COMPACT_MAX_BYTES``: one row,
  ``keys.value`` = msgpack ``[item, ...]``; bigger: a ``list_items`` row per item at its float position;
* set: a ``set_members`` row per member; zset: a ``zset_members`` row per (member, score);
* stream: ``stream_chunks`` rows of at most ``CHUNK_MAX`` entries keyed by their first ID, and the
  metadata (counters, groups, PELs, first live ID) in ``keys.value`` (see :func:`stream_meta`).

The job-row layout (compat/engine/layout.py, registered with ``register_layout``) stores BullMQ's
state containers its own way, on top of this one.
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_right
from collections import deque
from typing import Any

import msgpack

from ..types.hash import MAX_LISTPACK_ENTRIES as HASH_MAX_ENTRIES
from ..types.hash import MAX_LISTPACK_VALUE as HASH_MAX_VALUE
from ..types.hash import ColdHash, Hash, pack_small
from ..types.list import List
from ..types.set import Set
from ..types.stream import Consumer, Group, Nack, Stream
from ..types.zset import ZSet
from .store import ELEMENT_TABLES, STRING_CHUNK

MASK64 = (1 << 64) - 1
_I64 = 1 << 63


def s64(u: int) -> int:
    """An unsigned 64-bit stream ID part as SQLite's signed INTEGER (two's complement)."""
    return u - (1 << 64) if u >= _I64 else u


KEY_UPSERT = "INSERT OR REPLACE INTO keys(db, key, type, expire_ms, version, value) VALUES(?,?,?,?,?,?)"
KEY_DEL = "DELETE FROM keys WHERE db=? AND key=?"
ELEM_DEL_ALL = {rt: f"DELETE FROM {t} WHERE db=? AND key=?" for rt, t in ELEMENT_TABLES.items()}  # noqa: S608
UPSERT = {
    b"hash": "INSERT OR REPLACE INTO hash_fields(db, key, field, value) VALUES(?,?,?,?)",
    b"set": "INSERT OR IGNORE INTO set_members(db, key, member) VALUES(?,?,?)",
    b"zset": "INSERT OR REPLACE INTO zset_members(db, key, member, score) VALUES(?,?,?,?)",
    b"list": "INSERT OR REPLACE INTO list_items(db, key, pos, value) VALUES(?,?,?,?)",
    b"stream": "INSERT OR REPLACE INTO stream_chunks(db, key, ms, seq, entries) VALUES(?,?,?,?,?)",
}
DELETE = {
    b"hash": "DELETE FROM hash_fields WHERE db=? AND key=? AND field=?",
    b"set": "DELETE FROM set_members WHERE db=? AND key=? AND member=?",
    b"zset": "DELETE FROM zset_members WHERE db=? AND key=? AND member=?",
    b"list": "DELETE FROM list_items WHERE db=? AND key=? AND pos=?",
    b"stream": "DELETE FROM stream_chunks WHERE db=? AND key=? AND ms=? AND seq=?",
}
#: keys.type of a container with element rows
TYPE_NAME = {b"hash": "hash", b"set": "set", b"zset": "zset", b"list": "list", b"stream": "stream"}
_STREAM = b"stream"
# a stream stored by an earlier schema version (a stream_entries row per entry) is rewritten
# as chunks when it first changes: dropping a stream's rows drops those too
STREAM_LEGACY_DEL = "DELETE FROM stream_entries WHERE db=? AND key=?"
# A stream's entries are stored in chunks (stream_chunks rows keyed by the ID they start at):
# a chunk holds the entries a batch appended, at most this many (a whole rewrite, by RENAME
# or a first write, cuts the stream into chunks of this size). A chunk covers the IDs from
# its key up to the next chunk's key; XDEL rewrites the chunk that held the entry, and the
# chunks wholly below the first live entry are deleted (MAXLEN ~ trimming, as on BullMQ's
# events stream, deletes about one row per batch instead of one per entry).
CHUNK_MAX = 256
# A hash of at most this many fields whose packed form is at most this many bytes, and any
# listpack-encoded hash (at most 512 fields of at most 64 bytes: its order is Redis's, and kept),
# is stored as one row (keys.value = msgpack [hashtable?, {field: value}]) and rewritten whole when
# it changes; a bigger one has a row per field in hash_fields (and keys.value NULL), for good.
COMPACT_MAX_FIELDS = 128
COMPACT_MAX_BYTES = 32768
# Likewise a list of at most this many items (packed in at most COMPACT_MAX_BYTES) is one row,
# keys.value = msgpack [item, ...], rewritten whole when it changes: BullMQ's active list, whose
# items each come and go within a batch or two, is then one row per batch instead of two per
# job. A bigger list has a row per item in list_items (and keys.value NULL), for good.
LIST_COMPACT_MAX = 128
# A string longer than STRING_CHUNK is stored in chunks (string_chunks rows, see store.py); APPEND and
# SETRANGE note the byte range they changed (Journal.string_range), so a batch rewrites only the
# chunks in it. A chunk of zero bytes has no row.
_ZERO_CHUNK = bytes(STRING_CHUNK)
SCHUNK_UPSERT = "INSERT OR REPLACE INTO string_chunks(db, key, idx, data) VALUES(?,?,?,?)"
SCHUNK_DEL = "DELETE FROM string_chunks WHERE db=? AND key=? AND idx=?"
_pack = msgpack.Packer(use_bin_type=True).pack


# ---- full rows ----------------------------------------------------------------------------------
def hash_blob(v: Hash) -> bytes | None:
    """The one-row form of hash ``v`` (``keys.value``), or None when it is stored a row per field."""
    blob = v.packed()
    if blob is None and (len(v) <= COMPACT_MAX_FIELDS or not v.ht):
        blob = pack_small(v.ht, v.d)  # (with its store shape's number when it has one)
        if len(blob) > COMPACT_MAX_BYTES and v.ht:
            blob = None
    return blob


def list_blob(v: List) -> bytes | None:
    """The one-row form of list ``v`` (``keys.value``), or None when it is stored a row per item."""
    if len(v) > LIST_COMPACT_MAX:
        return None
    blob = _pack(list(v))
    return blob if len(blob) <= COMPACT_MAX_BYTES else None


def full_rows(ops: list[tuple[str, Any, bool]], k: tuple[int, bytes], v: Any, rt: bytes) -> None:
    """Append the element rows of container ``v`` (of type ``rt``, at key ``k``) written whole to
    ``ops``, and attach it to ``k``: its next changes are logged for :func:`delta_rows`."""
    dbi, key = k
    if rt == b"hash":
        rows: list[Any] = [(dbi, key, f, x) for f, x in v.items()]
        v.attach(k)
    elif rt == b"set":
        rows = [(dbi, key, m) for m in v.view()]
        v.attach(k)
    elif rt == b"zset":
        rows = [(dbi, key, m, s) for s, m in v.items()]
        v.attach(k)
    elif rt == b"list":
        v.attach(k)  # positions 0, 1, ... (the rows' pos)
        rows = [(dbi, key, p, x) for p, x in v.positioned()]
    else:
        chunks: list[int] = []
        v.attach(k, chunks)
        first = v.first_id()
        rows = chunk_rows(dbi, key, v.live_flat(first), chunks) if first is not None else []
    if rows:
        ops.append((UPSERT[rt], rows, True))


def drop_rows(append: Any, old: bytes, k: tuple[int, bytes]) -> None:
    """Delete every element row of key ``k``, whose rows are of type ``old``."""
    sql = ELEM_DEL_ALL.get(old)
    if sql is None:
        return  # job rows (compat/engine/layout.py), or a type the loader left aside: no element rows
    append((sql, k, False))
    if old == _STREAM:
        append((STREAM_LEGACY_DEL, k, False))


def string_chunk_rows(dbi: int, key: bytes, v: bytes) -> list[Any]:
    """string_chunks rows for the whole value ``v``; chunks of zero bytes have none (a string made by
    SETRANGE far past its end is mostly zeros)."""
    C = STRING_CHUNK
    n = len(v)
    rows = []
    zero = _ZERO_CHUNK
    for off in range(0, n, C):
        if n - off >= C:
            if v.startswith(zero, off):
                continue
        elif v.count(0, off) == n - off:
            continue
        rows.append((dbi, key, off // C, v[off:off + C]))
    return rows


def chunk_rows(dbi: int, key: bytes, flat: list[Any], chunks: list[int]) -> list[Any]:
    """stream_chunks rows for the entries ``flat`` (see Stream.live_flat), at most CHUNK_MAX each;
    their keys (first IDs) are appended to ``chunks``."""
    rows = []
    step = 3 * CHUNK_MAX
    for i in range(0, len(flat), step):
        part = flat[i:i + step] if len(flat) > step else flat
        c = part[0] << 64 | part[1]
        chunks.append(c)
        rows.append((*_chunk_key(dbi, key, c), _pack(part)))
    return rows


def _chunk_key(dbi: int, key: bytes, c: int) -> tuple[int, bytes, int, int]:
    """The stream_chunks primary key of the chunk that starts at ID ``c``."""
    return (dbi, key, s64(c >> 64), s64(c & MASK64))


def stream_meta(s: Any) -> bytes:
    """The per-stream metadata blob: counters, consumer groups, consumers, PELs, and the first live
    ID (entries of the stored chunks below it are trimmed ones: the loader skips them)."""
    groups = []
    if s.groups:
        for name, g in s.groups.items():
            consumers = [[c.name, c.seen_time] for c in g.consumers.values()]
            pel = [
                [i >> 64, i & MASK64, n.consumer.name if n.consumer is not None else None, n.delivery_time, n.delivery_count]
                for i, n in g.pel.items()
            ]
            groups.append([name, g.last_id >> 64, g.last_id & MASK64, g.entries_read, consumers, pel])
    first = s.first_id()
    return _pack(
        [s.last_id >> 64, s.last_id & MASK64, s.max_deleted >> 64, s.max_deleted & MASK64, s.entries_added, groups,
         None if first is None else [first >> 64, first & MASK64]]
    )


# ---- delta rows ---------------------------------------------------------------------------------
def delta_rows(ops: list[tuple[str, Any, bool]], dbi: int, key: bytes, rt: bytes, changes: dict[Any, Any],
               jlog: list[Any]) -> None:
    """Rows for a container's element changes: ``changes`` is element -> last value (None: deleted),
    ``jlog`` the batch's change log it was made from."""
    ups: list[Any] = []
    dels: list[Any] = []
    if rt == b"list":
        # a position whose first change in the batch put a value there was not in the store
        # (a push makes a new position; LSET logs a delete first): if it is gone again by
        # the batch's end there is no row to delete (a BullMQ job's pass through active)
        first: dict[Any, Any] | None = None
        for e, x in changes.items():
            if x is None:
                if first is None:
                    first = dict(reversed(jlog)) if jlog else {}
                if first.get(e) is None:
                    dels.append((dbi, key, e))
            else:
                ups.append((dbi, key, e, x))
    elif rt == b"hash" or rt == b"zset":
        for e, x in changes.items():
            if x is None:
                dels.append((dbi, key, e))
            else:
                ups.append((dbi, key, e, x))
    elif rt == b"set":
        for e, x in changes.items():
            if x is None:
                dels.append((dbi, key, e))
            else:
                ups.append((dbi, key, e))
    if dels:
        ops.append((DELETE[rt], dels, True))
    if ups:
        ops.append((UPSERT[rt], ups, True))


def stream_delta_rows(ops: list[tuple[str, Any, bool]], dbi: int, key: bytes, v: Any) -> None:
    """Rows for an attached stream's changes since the last batch: the chunks wholly below its
    first live entry go, the chunks that held an XDEL'd entry are rewritten, and the entries
    appended since become new chunks."""
    chunks: list[int] = v.stored_chunks
    new = v.take_appended()
    deleted = v.take_changes()  # the IDs XDEL'd
    first = v.first_id()
    dels: list[Any] = []
    ups: list[Any] = []
    if chunks:
        # the chunk holding the first live entry (none: every stored entry is gone)
        if first is None or (new is not None and first >= new):
            i0 = len(chunks)
        else:
            i0 = max(bisect_right(chunks, first) - 1, 0)
        if i0:
            dels.extend([_chunk_key(dbi, key, c) for c in chunks[:i0]])
            del chunks[:i0]
        if deleted and chunks:
            touched = set()
            for e in deleted:
                if (new is None or e < new) and e >= chunks[0]:
                    touched.add(bisect_right(chunks, e) - 1)
            gone = []
            for j in sorted(touched):
                c = chunks[j]
                hi = chunks[j + 1] if j + 1 < len(chunks) else new
                flat = v.live_flat(c, hi)
                if flat:
                    ups.append((*_chunk_key(dbi, key, c), _pack(flat)))
                else:
                    dels.append(_chunk_key(dbi, key, c))
                    gone.append(j)
            for j in reversed(gone):
                del chunks[j]
    if new is not None:
        flat = v.live_flat(new)
        if flat:
            ups.extend(chunk_rows(dbi, key, flat, chunks))
    if dels:
        ops.append((DELETE[_STREAM], dels, True))
    if ups:
        ops.append((UPSERT[_STREAM], ups, True))


def string_range_rows(append: Any, k: tuple[int, bytes], v: bytes, lo: int, hi: int, stored: bool) -> None:
    """Rows for the chunks of a long string ``v`` that hold bytes [lo, hi) (changed by APPEND/SETRANGE):
    upserts, and for a chunk of zero bytes a delete (``stored``: the store may hold a row for it) or
    nothing."""
    dbi, key = k
    ups = []
    dels = []
    C = STRING_CHUNK
    n = len(v)
    for i in range(lo // C, (max(hi, lo + 1) - 1) // C + 1):
        off = i * C
        if off >= n:
            break
        if v.startswith(_ZERO_CHUNK, off) or (n - off < C and v.count(0, off) == n - off):
            if stored:
                dels.append((dbi, key, i))
        else:
            ups.append((dbi, key, i, v[off:off + C]))
    if dels:
        append((SCHUNK_DEL, dels, True))
    if ups:
        append((SCHUNK_UPSERT, ups, True))


# ---- load: rows -> containers (attached to the journal where they have element rows) ------------
def string_from_chunks(n: int, rows: Any) -> bytes:
    """A long string of ``n`` bytes from its ``(idx, data)`` chunk rows (a chunk without a row: zeros)."""
    buf = bytearray(n)
    for idx, data in rows:
        off = idx * STRING_CHUNK
        if off < n:
            buf[off:off + len(data)] = data if off + len(data) <= n else data[:n - off]
    return bytes(buf)


def hash_from_fields(k: tuple[int, bytes], d: dict[bytes, bytes]) -> Hash:
    """A hash stored a row per field, its fields ``d``, attached to ``k``."""
    h = Hash()
    h.d = d
    h.ht = bool(d) and (
        len(d) > HASH_MAX_ENTRIES or max(map(len, d)) > HASH_MAX_VALUE or max(map(len, d.values())) > HASH_MAX_VALUE
    )
    h.attach(k)
    return h


hash_from_blob = ColdHash  # a hash stored in one row: its blob, thawed when first used (not attached)


def set_from_members(k: tuple[int, bytes], members: set[bytes]) -> Set:
    """A set from its member rows, attached to ``k``."""
    v = Set.from_members(members)
    v.attach(k)
    return v


def zset_from_sorted(k: tuple[int, bytes], entries: list[tuple[float, bytes]]) -> ZSet:
    """A zset from its ``(score, member)`` rows in order, attached to ``k``."""
    v = ZSet.from_sorted(entries)
    v.attach(k)
    return v


def list_from_blob(k: tuple[int, bytes], blob: bytes) -> List:
    """A list stored in one row (not attached: written whole when it changes)."""
    v = List(msgpack.unpackb(blob, raw=True, use_list=True))
    v.detach(k)
    return v


def list_from_items(k: tuple[int, bytes], values: Any, positions: Any = None, first: float = 0.0) -> List:
    """A list stored a row per item: its values in order and their positions (None: consecutive
    integers from ``first``), attached to ``k``."""
    v = List(values)
    v.attach(k, first, None if positions is None else deque(map(float, positions)))
    return v


def stream_first(blob: bytes | None) -> int | None:
    """The first live entry ID a stream's metadata records (None: the stream is empty)."""
    m = msgpack.unpackb(blob, raw=True, use_list=True) if blob else None
    if not m or len(m) < 7:
        return 0  # not recorded (never written so): every stored entry counts
    return None if m[6] is None else m[6][0] << 64 | m[6][1]


def apply_stream_meta(s: Stream, blob: bytes | None) -> None:
    """Set stream ``s``'s counters, groups, consumers and PELs from its metadata blob (:func:`stream_meta`)."""
    if not blob:
        return
    m = msgpack.unpackb(blob, raw=True, use_list=True)
    s.last_id = (m[0] << 64) | m[1]
    s.max_deleted = (m[2] << 64) | m[3]
    s.entries_added = m[4]
    if m[5]:
        s.groups = {}
        for name, lms, lseq, entries_read, consumers, pel in m[5]:
            g = Group((lms << 64) | lseq, entries_read)
            for cname, seen in consumers:
                g.consumers[cname] = Consumer(cname, seen)
            for ms, seq, cname, dtime, dcount in pel:
                owner = g.consumers.get(cname) if cname is not None else None
                n = Nack(owner, dtime, dcount)
                i = (ms << 64) | seq
                g.pel[i] = n
                if owner is not None:
                    owner.pel[i] = n
            s.groups[name] = g


def chunk_id(ms: int, seq: int) -> int:
    """The first ID of a stream chunk from its stored (ms, seq) (parts >= 2**63 are stored negative)."""
    return (ms & MASK64) << 64 | (seq & MASK64)


def stream_from_chunks(k: tuple[int, bytes], meta: bytes | None, chunks: list[tuple[int, bytes]]) -> Stream:
    """A stream from its metadata and its ``(first ID, entries)`` chunk rows in ID order, attached to ``k``
    (with no chunks: a stream without entries, emptied or made by XGROUP MKSTREAM)."""
    s = Stream()
    first = stream_first(meta)
    for _c, blob in chunks:
        flat = msgpack.unpackb(blob, raw=True, use_list=True)
        for j in range(0, len(flat), 3):
            i = flat[j] << 64 | flat[j + 1]
            if first is not None and i >= first:  # below: trimmed since the chunk was written
                s.append(i, flat[j + 2])
    apply_stream_meta(s, meta)
    s.attach(k, [c for c, _ in chunks])
    return s


def stream_from_entries(meta: bytes | None, entries: list[tuple[int, bytes]]) -> Stream:
    """A stream stored a row per entry (``stream_entries``, schema version 3 and earlier), from its
    ``(ID, fields)`` rows in order: attached to no key, so it is rewritten as chunks when it next changes."""
    s = Stream()
    for i, blob in entries:
        s.append(i, msgpack.unpackb(blob, raw=True, use_list=True))
    apply_stream_meta(s, meta)
    s.attach(None)
    return s


def load_key(conn: sqlite3.Connection, k: tuple[int, bytes], typ: str, value: Any) -> tuple[Any, bytes | None]:
    """Key ``k``'s value from its ``keys`` row (``typ``, ``value``) and its element rows, and the type of
    the element rows the store holds for it (``Journal.stored``; None: none). (None, None): a type this
    layout does not know."""
    if typ == "string":
        if type(value) is int:
            return string_from_chunks(value, conn.execute("SELECT idx, data FROM string_chunks WHERE db = ? AND key = ?", k)), b"string"
        return bytes(value), None
    if typ == "hash":
        if value is not None:
            return hash_from_blob(bytes(value)), None
        d = dict(conn.execute("SELECT field, value FROM hash_fields WHERE db = ? AND key = ?", k).fetchall())
        return hash_from_fields(k, d), b"hash"
    if typ == "set":
        members = {r[0] for r in conn.execute("SELECT member FROM set_members WHERE db = ? AND key = ?", k)}
        return set_from_members(k, members), b"set"
    if typ == "zset":
        entries = sorted(conn.execute("SELECT score, member FROM zset_members WHERE db = ? AND key = ?", k).fetchall())
        return zset_from_sorted(k, entries), b"zset"
    if typ == "list":
        if value is not None:
            return list_from_blob(k, value), None
        pairs = conn.execute("SELECT pos, value FROM list_items WHERE db = ? AND key = ? ORDER BY pos", k).fetchall()
        return list_from_items(k, [p[1] for p in pairs], [p[0] for p in pairs]), b"list"
    if typ == "stream":
        chunks = sorted(
            (chunk_id(r[0], r[1]), r[2])
            for r in conn.execute("SELECT ms, seq, entries FROM stream_chunks WHERE db = ? AND key = ?", k)
        )
        return stream_from_chunks(k, value, chunks), b"stream"
    return None, None

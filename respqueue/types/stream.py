"""The stream type: entries in ID order, with Redis's node layout for ``~`` trimming.

An entry ID ``<ms>-<seq>`` is held as one int, ``ms << 64 | seq``, so IDs
compare and bisect as plain integers. Live entries sit in two parallel lists
(``_ids`` and ``_vals``, the latter holding each entry's flat
``[field, value, ...]`` list, shared with replies and never mutated); the live
region starts at ``_head`` so trimming from the front is O(1) amortised. XDEL
in the middle leaves a tombstone (``None`` in ``_vals``), and the lists are
compacted once tombstones outnumber live entries, so XDEL is O(log n)
amortised. ``_vals[_head]`` and ``_vals[-1]`` are always live (or the region
is empty).

Redis keeps a stream as a radix tree of listpack nodes of at most
``stream-node-max-entries`` entries and about ``stream-node-max-bytes`` bytes;
``MAXLEN ~``/``MINID ~`` only drop whole nodes, and XDEL only marks entries
deleted inside their node. So that XLEN after an approximate trim matches
Redis, each node's entry count, tombstone count and listpack byte size are
tracked exactly as t_stream.c's ``streamAppendItem`` would lay them out.

Commands go through the methods below; the entry storage and node layout
(underscored attributes) are private. The public attributes are the stream's
``last_id``, ``max_deleted`` and ``entries_added`` counters and the consumer
group objects (:class:`Group`, :class:`Consumer`, :class:`Nack`), whose PELs
are ``SortedDict``s keyed by packed ID.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import islice
from typing import Any, ClassVar

from sortedcontainers import SortedDict

from .journaled import Journaled

MASK64 = (1 << 64) - 1
INVALID_ENTRIES_READ = -1  # SCG_INVALID_ENTRIES_READ
MAX_ID = (1 << 128) - 1
LP_MAX_SIZE = 1 << 30  # STREAM_LISTPACK_MAX_SIZE


def format_id(x: int) -> bytes:
    """``ms-seq`` text of a packed stream ID."""
    return b"%d-%d" % (x >> 64, x & MASK64)


def _lp_int(b: bytes) -> int | None:
    """listpack's lpStringToInt64: strict decimal int64, or None."""
    n = len(b)
    if n == 0 or n > 20:
        return None
    c0 = b[0]
    if n == 1:
        return c0 - 48 if 48 <= c0 <= 57 else None
    if c0 == 45:  # '-'
        if not 49 <= b[1] <= 57:
            return None
    elif not 49 <= c0 <= 57:
        return None
    if not b[1:].isdigit():
        return None
    v = int(b)
    if v < -(1 << 63) or v > (1 << 63) - 1:
        return None
    return v


def _isz(v: int) -> int:
    """Bytes a listpack integer element takes (encoding + backlen)."""
    if 0 <= v <= 127:
        return 2
    if -4096 <= v <= 4095:
        return 3
    if -32768 <= v <= 32767:
        return 4
    if -8388608 <= v <= 8388607:
        return 5
    if -2147483648 <= v <= 2147483647:
        return 6
    return 10


def _ssz(b: bytes) -> int:
    """Bytes a listpack element appended from string ``b`` takes."""
    n = len(b)
    if n <= 20 and n and (b[0] == 45 or b.isdigit()):
        v = _lp_int(b)
        if v is not None:
            return _isz(v)
    if n < 64:
        return n + 2  # encoding header 1 + n (<= 64), backlen 1
    if n < 4096:
        enc = n + 2
    else:
        enc = n + 5
    if enc <= 127:
        return enc + 1
    if enc < 16383:
        return enc + 2
    if enc < 2097151:
        return enc + 3
    if enc < 268435455:
        return enc + 4
    return enc + 5


class _SszMemo(dict):  # type: ignore[type-arg]
    """:func:`_ssz` of short elements, filled on a miss (``__missing__``), so that a sum over a list of
    them is ``sum(map(memo.__getitem__, xs))``: a loop in C, Python only for an element not seen yet.
    Bounded: cleared when full. Field names and most values repeat from entry to entry."""

    __slots__ = ()

    def __missing__(self, b: bytes) -> int:
        n = len(b)
        if b.isdigit():  # (bytes: ASCII digits only; False when empty)
            if n <= 18 and (n == 1 or b[0] != 48):  # a canonical decimal int64: what _ssz finds, sooner
                v = int(b)
                s = 2 if v <= 127 else 3 if v <= 4095 else 4 if v <= 32767 else 5 if v <= 8388607 else (
                    6 if v <= 2147483647 else 10)
            else:
                s = _ssz(b)
        elif n < 64 and b[:1] != b"-":
            s = n + 2  # a short string that is no integer
        else:
            s = _ssz(b)
        if len(b) <= 32:
            if len(self) >= _SSZ_MEMO_MAX:
                self.clear()
            self[b] = s
        return s


_SSZ_MEMO_MAX = 4096
_SSZ_MEMO = _SszMemo()
#: tuple of an entry's field names -> the sum of their listpack sizes (Stream.append; bounded)
_FIELDS_SZ: dict[tuple[bytes, ...], int] = {}
_ssz_of = _SSZ_MEMO.__getitem__


def _vals_sz(fv: list[bytes]) -> int:
    """The sum of :func:`_ssz` over the values of the flat field/value list ``fv`` (its odd items). A value
    is most often new (a job id, a timestamp): computed here, not looked up in a memo that would keep it."""
    t = 0
    i = 1
    n = len(fv)
    while i < n:
        b = fv[i]
        k = len(b)
        if 0 < k <= 18 and b.isdigit():
            if k == 1 or b[0] != 48:  # a canonical decimal: listpack keeps it as an integer
                t += _isz(int(b))
            else:
                t += k + 2  # (a leading zero: a string)
        elif k < 19 and (k == 0 or b[0] != 45):
            t += k + 2  # a short string that is no integer
        else:
            t += _ssz(b)
        i += 2
    return t


def _signed64(v: int) -> int:
    v &= MASK64
    return v - (1 << 64) if v >= 1 << 63 else v


class _Node:
    """Bookkeeping for one radix-tree node (listpack) of the Redis layout."""

    __slots__ = ("fields", "count", "deleted", "nbytes", "last", "mms", "mseq")

    def __init__(self, fields: list[bytes], count: int, deleted: int, nbytes: int, last: int, master: int) -> None:
        self.fields = fields  # master entry fields
        self.count = count  # live entries
        self.deleted = deleted  # tombstones
        self.nbytes = nbytes  # listpack bytes, without the count/deleted elements
        self.last = last  # ID of the last entry in the node (live or not)
        self.mms = master >> 64  # the master entry's ID (the node's key), as ms and seq: the entries' deltas
        self.mseq = master & MASK64

    def lp_bytes(self) -> int:
        return self.nbytes + _isz(self.count) + _isz(self.deleted)

    def copy(self) -> _Node:
        return _Node(self.fields, self.count, self.deleted, self.nbytes, self.last, (self.mms << 64) | self.mseq)


class Stream(Journaled):
    """A Redis stream."""

    __slots__ = (
        "_ids",
        "_vals",
        "_head",
        "_holes",
        "_nkeys",
        "_nodes",
        "last_id",
        "max_deleted",
        "entries_added",
        "groups",
        "_jlog",
        "_jkey",
        "_jnew",
        "_jchunks",
    )

    rtype: ClassVar[bytes] = b"stream"

    def __init__(self) -> None:
        self._ids: list[int] = []
        self._vals: list[Any] = []
        self._head = 0
        self._holes = 0  # tombstones in the live region
        self._nkeys: list[int] = []  # master ID of each node, ascending
        self._nodes: list[_Node] = []
        self.last_id = 0
        self.max_deleted = 0
        self.entries_added = 0
        self.groups: dict[bytes, Group] | None = None  # consumer groups by name
        # persistence, while attached to the journal (``_jlog`` not None): the IDs deleted by
        # XDEL since the last batch, the first ID appended since then, and the first IDs of
        # the stored chunks (see persistence/journal.py); entries trimmed from the head are
        # not logged (the chunks wholly below the first live entry are dropped)
        self._jlog: list[int] | None = None
        self._jkey: tuple[int, bytes] | None = None
        self._jnew: int | None = None
        self._jchunks: list[int] | None = None

    # ---- the journal's change log (see journaled.py) --------------------------
    def attach(self, key: tuple[int, bytes] | None, chunks: list[int] | None = None) -> None:
        """Start logging changes for the rows of ``key``, whose stored chunks start at the IDs ``chunks``
        (ascending; None: not stored as chunks, so written whole when it next changes)."""
        self._jlog = []
        self._jkey = key
        self._jnew = None
        self._jchunks = chunks

    def attached(self, key: tuple[int, bytes]) -> bool:
        return self._jlog is not None and self._jkey == key and self._jchunks is not None

    @property
    def stored_chunks(self) -> list[int] | None:
        """The first IDs of the stored chunks, ascending (the journal's codec keeps it up to date)."""
        return self._jchunks

    def take_appended(self) -> int | None:
        """The first ID appended since the last take (None: none); the next append starts afresh."""
        new = self._jnew
        self._jnew = None
        return new

    # ---- container contract --------------------------------------------
    def __len__(self) -> int:
        return len(self._ids) - self._head - self._holes

    def copy(self) -> Stream:
        s = Stream()
        h = self._head
        if self._holes:
            pairs = [(i, v) for i, v in zip(self._ids[h:], self._vals[h:], strict=True) if v is not None]
            s._ids = [p[0] for p in pairs]
            s._vals = [p[1] for p in pairs]
        else:
            s._ids = self._ids[h:]
            s._vals = self._vals[h:]
        s._nkeys = list(self._nkeys)
        s._nodes = [n.copy() for n in self._nodes]
        s.last_id = self.last_id
        s.max_deleted = self.max_deleted
        s.entries_added = self.entries_added
        if self.groups is not None:
            s.groups = {name: g.copy() for name, g in self.groups.items()}
        return s

    def encoding(self) -> bytes:
        return b"stream"

    def memory_usage(self) -> int:
        total = 64 + 48 * len(self._nodes)
        for n in self._nodes:
            total += n.lp_bytes()
        if self.groups:
            for g in self.groups.values():
                total += 128 + 64 * len(g.pel) + 96 * len(g.consumers)
        return total

    def __repr__(self) -> str:
        return f"Stream(len={len(self)}, last={format_id(self.last_id).decode()}, nodes={len(self._nodes)})"

    # ---- reads -----------------------------------------------------------
    def first_id(self) -> int | None:
        """ID of the first live entry, or None when empty."""
        return self._ids[self._head] if len(self._ids) > self._head else None

    def last_valid_id(self) -> int | None:
        """ID of the last live entry, or None when empty."""
        return self._ids[-1] if len(self._ids) > self._head else None

    def range(self, start: int, end: int, count: int = 0, rev: bool = False) -> list[list[Any]]:
        """Entries with ``start <= id <= end`` as ``[id-bytes, [f, v, ...]]``; ``count`` 0 means all."""
        ids = self._ids
        if start > end:
            return []
        lo = bisect_left(ids, start, self._head)
        hi = bisect_right(ids, end, lo)
        if lo >= hi:
            return []
        vals = self._vals
        if self._holes:
            return self._range_holes(lo, hi, count, rev)
        if not rev:
            if count and hi - lo > count:
                hi = lo + count
            return [[b"%d-%d" % (ids[i] >> 64, ids[i] & MASK64), vals[i]] for i in range(lo, hi)]
        if count and hi - lo > count:
            lo = hi - count
        return [[b"%d-%d" % (ids[i] >> 64, ids[i] & MASK64), vals[i]] for i in range(hi - 1, lo - 1, -1)]

    def _range_holes(self, lo: int, hi: int, count: int, rev: bool) -> list[list[Any]]:
        ids = self._ids
        vals = self._vals
        out: list[list[Any]] = []
        idx = range(hi - 1, lo - 1, -1) if rev else range(lo, hi)
        for i in idx:
            v = vals[i]
            if v is not None:
                out.append([b"%d-%d" % (ids[i] >> 64, ids[i] & MASK64), v])
                if len(out) == count:
                    break
        return out

    def get(self, id_: int) -> list[bytes] | None:
        """The field list of live entry ``id_``, or None."""
        ids = self._ids
        i = bisect_left(ids, id_, self._head)
        if i < len(ids) and ids[i] == id_:
            return self._vals[i]
        return None

    def rax_size(self) -> int:
        """Number of radix-tree keys (nodes) in Redis's layout."""
        return len(self._nkeys)

    def rax_nodes(self) -> int:
        """Number of radix-tree nodes Redis's rax would use for the node keys."""
        keys = self._nkeys
        if not keys:
            return 1
        return _rax_count(keys, 0, len(keys), 0)

    # ---- writes ------------------------------------------------------------
    def append(self, id_: int, fv: list[bytes], max_entries: int = 100, max_bytes: int = 4096) -> None:
        """Append entry ``id_`` (greater than every ID so far) with flat field/value list ``fv``.

        The entry's listpack bytes as t_stream.c's ``streamAppendItem`` lays them out: its flags and ID
        deltas from the node's master entry, then its values only when its fields are the master's, else
        its field count, fields and values; and a last element, the entry's element count."""
        nodes = self._nodes
        fields = fv[0::2]
        node: _Node | None
        if nodes:
            node = nodes[-1]
            c = node.count
            dl = node.deleted
            if max_entries and c + dl >= max_entries:
                node = None
            else:
                if max_bytes <= 0 or max_bytes > LP_MAX_SIZE:
                    max_bytes = LP_MAX_SIZE
                # (lpBytes + the raw length of the fields and values, as Redis compares them)
                if (
                    node.nbytes + (2 if c <= 127 else _isz(c)) + (2 if dl <= 127 else _isz(dl))
                    + len(b"".join(fv)) >= max_bytes
                ):
                    node = None
        else:
            node = None
        n = len(fields)
        if node is None:
            # header + end, num-fields, master terminator
            node = _Node(fields, 0, 0, 7 + _isz(n) + 2 + sum(map(_ssz_of, fields)), id_, id_)
            nodes.append(node)
            self._nkeys.append(id_)
            eb = 6  # flags, ms delta 0, seq delta 0
            same = True
        else:
            # the ID's deltas from the master entry, as listpack integers (_isz of their int64 values, inline
            # for the usual small ones)
            d = (id_ >> 64) - node.mms  # (>= 0: IDs grow)
            eb = 4 if d <= 127 else 5 if d <= 4095 else 2 + _isz(_signed64(d))  # flags + ms delta
            d = (id_ & MASK64) - node.mseq
            eb += 2 if 0 <= d <= 127 else 3 if -4096 <= d <= 4095 else _isz(_signed64(d))  # seq delta
            same = fields == node.fields
        if same:
            eb += _vals_sz(fv) + (2 if n <= 124 else _isz(n + 3))
        else:
            # the fields' sizes cached per tuple of names (events of one kind repeat them)
            tf = tuple(fields)
            fsz = _FIELDS_SZ.get(tf)
            if fsz is None:
                fsz = sum(map(_ssz_of, fields))
                if len(_FIELDS_SZ) >= 1024:
                    _FIELDS_SZ.clear()
                _FIELDS_SZ[tf] = fsz
            eb += fsz + _vals_sz(fv) + (4 if n <= 61 else _isz(n) + _isz(2 * n + 4))
        node.count += 1
        node.nbytes += eb
        node.last = id_
        self._ids.append(id_)
        self._vals.append(fv)
        if self._jnew is None and self._jlog is not None:
            self._jnew = id_
        self.last_id = id_
        self.entries_added += 1

    def delete(self, id_: int) -> bool:
        """XDEL one entry; False if there is no live entry with that ID."""
        ids = self._ids
        vals = self._vals
        i = bisect_left(ids, id_, self._head)
        if i >= len(ids) or ids[i] != id_ or vals[i] is None:
            return False
        if self._jlog is not None:
            self._jlog.append(id_)
        j = bisect_right(self._nkeys, id_) - 1
        node = self._nodes[j]
        if node.count == 1:
            del self._nodes[j]
            del self._nkeys[j]
        else:
            node.count -= 1
            node.deleted += 1
        if i == len(ids) - 1:
            ids.pop()
            vals.pop()
            while len(vals) > self._head and vals[-1] is None:
                ids.pop()
                vals.pop()
                self._holes -= 1
        elif i == self._head:
            vals[i] = None
            self._skip_head(i + 1)
        else:
            vals[i] = None
            self._holes += 1
        if id_ > self.max_deleted:
            self.max_deleted = id_
        self._maybe_compact()
        return True

    def trim(self, maxlen: int | None, minid: int | None, approx: bool, limit: int) -> int:
        """streamTrim: by ``maxlen`` or by ``minid``; ``limit`` 0 means unlimited. Returns entries removed."""
        nodes = self._nodes
        deleted = 0
        by_len = maxlen is not None
        while nodes:
            length = len(self._ids) - self._head - self._holes
            if by_len and length <= maxlen:  # type: ignore[operator]
                break
            node = nodes[0]
            entries = node.count
            if limit and deleted + entries > limit:
                break
            if by_len:
                remove = length - entries >= maxlen  # type: ignore[operator]
            else:
                remove = node.last < minid  # type: ignore[operator]
            if remove:
                del nodes[0]
                del self._nkeys[0]
                self._drop_head(entries)
                deleted += entries
                continue
            if approx:
                break
            if by_len:
                k = length - maxlen  # type: ignore[operator]
            else:
                # live entries of this (head) node below minid
                k = 0
                ids = self._ids
                vals = self._vals
                i = self._head
                n = len(ids)
                while i < n and k < entries and ids[i] < minid:  # type: ignore[operator]
                    if vals[i] is not None:
                        k += 1
                    i += 1
            if k:
                node.count -= k
                node.deleted += k
                self._drop_head(k)
                deleted += k
            break
        self._maybe_compact()
        return deleted

    def live_flat(self, lo: int, hi: int | None = None) -> list[Any]:
        """The live entries with ``lo <= id < hi`` (``hi`` None: to the end) as one flat list
        ``[ms, seq, [f, v, ...], ms, seq, ...]`` (a stored chunk's form)."""
        ids = self._ids
        vals = self._vals
        i = bisect_left(ids, lo, self._head)
        j = len(ids) if hi is None else bisect_left(ids, hi, i)
        out: list[Any] = []
        add = out.extend
        for k in range(i, j):
            v = vals[k]
            if v is not None:
                e = ids[k]
                add((e >> 64, e & MASK64, v))
        return out

    def set_last_id(self, id_: int) -> None:
        self.last_id = id_

    # ---- consumer groups -------------------------------------------------------
    def group(self, name: bytes) -> Group | None:
        g = self.groups
        return None if g is None else g.get(name)

    def create_group(self, name: bytes, last_id: int, entries_read: int) -> Group | None:
        """A new group, or None if one with that name exists."""
        if self.groups is None:
            self.groups = {}
        if name in self.groups:
            return None
        g = self.groups[name] = Group(last_id, entries_read)
        return g

    def destroy_group(self, name: bytes) -> bool:
        if self.groups is None or name not in self.groups:
            return False
        del self.groups[name]
        return True

    def sorted_groups(self) -> list[tuple[bytes, Group]]:
        """Groups in name order (Redis keeps them in a radix tree)."""
        return sorted(self.groups.items()) if self.groups else []

    def num_groups(self) -> int:
        return len(self.groups) if self.groups else 0

    def range_has_tombstones(self, start: int, end: int = MAX_ID) -> bool:
        """streamRangeHasTombstones: may an XDEL'd entry lie within [start, end]?"""
        md = self.max_deleted
        if not len(self) or md == 0:
            return False
        if self.first_id() > md:  # type: ignore[operator]
            return False
        return start <= md <= end

    def estimate_distance(self, id_: int) -> int:
        """streamEstimateDistanceFromFirstEverEntry; INVALID_ENTRIES_READ when unknown."""
        added = self.entries_added
        if not added:
            return 0
        n = len(self)
        if not n and id_ <= self.last_id:
            return added
        if id_ == self.last_id:
            return added
        if id_ > self.last_id:
            return INVALID_ENTRIES_READ
        first = self.first_id()
        first = 0 if first is None else first
        md = self.max_deleted
        if md == 0 or md < first:
            if id_ < first:
                return added - n
            if id_ == first:
                return added - n + 1
        return INVALID_ENTRIES_READ

    def lag(self, g: Group) -> int | None:
        """The group's lag (entries not yet delivered), or None when it can't be known."""
        if not self.entries_added:
            return 0
        if g.entries_read != INVALID_ENTRIES_READ and not self.range_has_tombstones(g.last_id):
            return self.entries_added - g.entries_read
        er = self.estimate_distance(g.last_id)
        if er != INVALID_ENTRIES_READ:
            return self.entries_added - er
        return None

    def read_group(
        self, g: Group, consumer: Consumer, start: int, count: int, noack: bool, now: int
    ) -> list[list[Any]]:
        """Deliver entries from ``start`` on to ``consumer`` (XREADGROUP ``>``), updating the group and PELs."""
        ids = self._ids
        vals = self._vals
        pel = g.pel
        entries: list[list[Any]] = []
        for i in range(bisect_left(ids, start, self._head), len(ids)):
            fv = vals[i]
            if fv is None:
                continue
            id_ = ids[i]
            entries.append([b"%d-%d" % (id_ >> 64, id_ & MASK64), fv])
            if id_ > g.last_id:
                if g.entries_read != INVALID_ENTRIES_READ and not self.range_has_tombstones(id_):
                    g.entries_read += 1
                elif self.entries_added:
                    g.entries_read = self.estimate_distance(id_)
                g.last_id = id_
            if not noack:
                nack = pel.get(id_)
                if nack is None:
                    nack = pel[id_] = Nack(consumer, now, 1)
                    consumer.pel[id_] = nack
                else:
                    old = nack.consumer
                    if old is not None:
                        old.pel.pop(id_, None)
                    nack.consumer = consumer
                    nack.delivery_time = now
                    nack.delivery_count = 1
                    consumer.pel[id_] = nack
            if len(entries) == count:
                break
        return entries

    def read_history(self, consumer: Consumer, start: int, count: int, now: int) -> list[list[Any]]:
        """The consumer's pending entries from ``start`` on (XREADGROUP with an ID); deleted ones as [id, nil]."""
        from ..resp import NULL_ARRAY

        out: list[list[Any]] = []
        it = consumer.pel.irange(minimum=start)
        if count:
            it = islice(it, count)
        for id_ in list(it):
            fv = self.get(id_)
            if fv is None:
                out.append([format_id(id_), NULL_ARRAY])
            else:
                nack = consumer.pel[id_]
                nack.delivery_time = now
                nack.delivery_count += 1
                out.append([format_id(id_), fv])
        return out

    def entry(self, id_: int) -> list[Any] | None:
        """Live entry ``id_`` as ``[id-bytes, [f, v, ...]]``, or None."""
        fv = self.get(id_)
        return None if fv is None else [format_id(id_), fv]

    # ---- internals -----------------------------------------------------------
    def _drop_head(self, k: int) -> None:
        """Remove the first ``k`` live entries (and the tombstones among them)."""
        vals = self._vals
        i = self._head
        while k:
            if vals[i] is not None:
                k -= 1
            else:
                self._holes -= 1
            vals[i] = None
            i += 1
        self._skip_head(i)

    def _skip_head(self, i: int) -> None:
        """Make ``i`` the head, moving past tombstones."""
        vals = self._vals
        n = len(vals)
        while i < n and vals[i] is None:
            self._holes -= 1
            i += 1
        self._head = i

    def _maybe_compact(self) -> None:
        h = self._head
        n = len(self._ids)
        if self._holes > 32 and 2 * self._holes > n - h:
            pairs = [(i, v) for i, v in zip(self._ids[h:], self._vals[h:], strict=True) if v is not None]
            self._ids = [p[0] for p in pairs]
            self._vals = [p[1] for p in pairs]
            self._head = 0
            self._holes = 0
        elif h and (h == n or (h > 1024 and 2 * h > n)):
            del self._ids[:h]
            del self._vals[:h]
            self._head = 0


def _lcp_bytes(a: int, b: int) -> int:
    x = a ^ b
    return 16 if x == 0 else (128 - x.bit_length()) // 8


def _rax_count(keys: list[int], lo: int, hi: int, d: int) -> int:
    """rax nodes below (and including) the node at byte depth ``d`` for sorted 16-byte keys[lo:hi]."""
    if hi - lo == 1:
        return 1 if d == 16 else 2
    common = _lcp_bytes(keys[lo], keys[hi - 1])
    if common > d:
        return 1 + _rax_count(keys, lo, hi, common)
    total = 1  # branching node
    shift = 8 * (15 - d)
    i = lo
    while i < hi:
        prefix = keys[i] >> shift  # prefix through byte d
        j = bisect_left(keys, (prefix + 1) << shift, i, hi)
        total += _rax_count(keys, i, j, d + 1)
        i = j
    return total


class Nack:
    """A pending (delivered, not acknowledged) entry of a group."""

    __slots__ = ("consumer", "delivery_time", "delivery_count")

    def __init__(self, consumer: Consumer | None, delivery_time: int, delivery_count: int) -> None:
        self.consumer = consumer
        self.delivery_time = delivery_time
        self.delivery_count = delivery_count


class Consumer:
    """A consumer of a group, with its own pending entries."""

    __slots__ = ("name", "seen_time", "pel")

    def __init__(self, name: bytes, seen_time: int) -> None:
        self.name = name
        self.seen_time = seen_time
        self.pel: SortedDict = SortedDict()  # id -> Nack (shared with the group's PEL)


class Group:
    """A consumer group: last delivered ID, read counter, PEL and consumers."""

    __slots__ = ("last_id", "entries_read", "pel", "consumers")

    def __init__(self, last_id: int, entries_read: int) -> None:
        self.last_id = last_id
        self.entries_read = entries_read
        self.pel: SortedDict = SortedDict()  # id -> Nack
        self.consumers: dict[bytes, Consumer] = {}

    def consumer(self, name: bytes, now: int | None = None) -> Consumer | None:
        """Look a consumer up; ``now`` refreshes its seen-time."""
        c = self.consumers.get(name)
        if c is not None and now is not None:
            c.seen_time = now
        return c

    def create_consumer(self, name: bytes, now: int) -> Consumer | None:
        """A new consumer, or None if it exists."""
        if name in self.consumers:
            return None
        c = self.consumers[name] = Consumer(name, now)
        return c

    def get_or_create_consumer(self, name: bytes, now: int) -> Consumer:
        c = self.consumers.get(name)
        if c is None:
            c = self.consumers[name] = Consumer(name, now)
        else:
            c.seen_time = now
        return c

    def delete_consumer(self, c: Consumer) -> int:
        """Remove a consumer and its pending entries; returns how many were pending."""
        n = len(c.pel)
        for id_ in c.pel:
            self.pel.pop(id_, None)
        del self.consumers[c.name]
        return n

    def sorted_consumers(self) -> list[Consumer]:
        return [self.consumers[k] for k in sorted(self.consumers)]

    def ack(self, id_: int) -> bool:
        nack = self.pel.pop(id_, None)
        if nack is None:
            return False
        if nack.consumer is not None:
            nack.consumer.pel.pop(id_, None)
        return True

    def assign(self, id_: int, nack: Nack, consumer: Consumer) -> None:
        """Move pending entry ``id_`` to ``consumer``."""
        old = nack.consumer
        if old is not consumer:
            if old is not None:
                old.pel.pop(id_, None)
            consumer.pel[id_] = nack
            nack.consumer = consumer

    def copy(self) -> Group:
        g = Group(self.last_id, self.entries_read)
        for name, c in self.consumers.items():
            g.consumers[name] = Consumer(name, c.seen_time)
        for id_, n in self.pel.items():
            owner = g.consumers.get(n.consumer.name) if n.consumer is not None else None
            nn = Nack(owner, n.delivery_time, n.delivery_count)
            g.pel[id_] = nn
            if owner is not None:
                owner.pel[id_] = nn
        return g

"""The hash container.

Fields live in a plain ``dict`` (field -> value), whose insertion order is the
order Redis 7.0's listpack encoding keeps for small hashes: new fields go to
the end, updates stay in place, deletions close the gap. So HGETALL/HKEYS of
a small hash match Redis byte for byte.

The encoding (``listpack`` / ``hashtable``) is tracked like Redis does it,
with ``hash-max-listpack-entries`` 512 (the compiled default, as in the redis:7 image) and ``hash-max-listpack-value`` 64;
once converted, a hash stays ``hashtable``.

For HRANDFIELD and HSCAN on large hashes an index of the fields (a list plus
field -> position) is built the first time it is needed and then maintained
on every insertion and deletion (O(1) swap-remove), so random picks are O(1)
and a scan is stable under concurrent changes (see :meth:`Hash.scan`).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

import msgpack

from .journaled import Journaled
from .keyindex import KeyIndex

MAX_LISTPACK_ENTRIES = 512
MAX_LISTPACK_VALUE = 64
# respqueue/coldhash.py's queue while cold hashes are compacted: a hash unpacked on first use is noted
# there, to be packed again once it has not been touched for a while
COLD: Any = None


class Hash(Journaled):
    """A Redis hash: ``field -> value``, both bytes."""

    rtype = b"hash"
    # ``_blob``: a hash loaded from the store stays packed until first used (see from_blob); so does a
    # small one left untouched for a while (respqueue/coldhash.py); ``_cseq``: the number of the newest
    # compaction bucket that noted it (coldhash.ColdHashes), 0 before any
    __slots__ = ("d", "ht", "_ix", "_jlog", "_jkey", "_blob", "_cseq")

    def __init__(self, items: Iterable[tuple[bytes, bytes]] | None = None) -> None:
        self.d: dict[bytes, bytes] = {}
        self.ht = False  # True once converted to the hashtable encoding
        self._ix: KeyIndex | None = None  # built on first random pick or scan
        # persistence: element-level change log while attached to the journal
        self._jlog: list[tuple[bytes, bytes | None]] | None = None
        self._jkey: tuple[int, bytes] | None = None
        self._blob: bytes | None = None
        self._cseq = 0
        if items is not None:
            for f, v in items:
                self.set(f, v)

    # ---- reads -----------------------------------------------------------
    def __len__(self) -> int:
        return len(self.d)

    def __contains__(self, field: bytes) -> bool:
        return field in self.d

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.d)

    def get(self, field: bytes) -> bytes | None:
        return self.d.get(field)

    def keys(self) -> list[bytes]:
        return list(self.d)

    def values(self) -> list[bytes]:
        return list(self.d.values())

    def to_dict(self) -> dict[bytes, bytes]:
        """A copy of the contents (in Redis's order for listpack hashes)."""
        return self.d.copy()

    def flat(self) -> list[bytes]:
        """``[f1, v1, f2, v2, ...]``."""
        out: list[bytes] = []
        ext = out.extend
        for kv in self.d.items():
            ext(kv)
        return out

    # ---- writes ----------------------------------------------------------
    def note_sizes(self, *args: bytes) -> None:
        """Redis's hashTypeTryConversion: a long argument converts the hash."""
        if not self.ht:
            for a in args:
                if len(a) > MAX_LISTPACK_VALUE:
                    self.ht = True
                    return

    def set(self, field: bytes, value: bytes) -> bool:
        """Set ``field``; True if it is a new field."""
        d = self.d
        new = field not in d
        d[field] = value
        if self._jlog is not None:
            self._jlog.append((field, value))
        if not self.ht and (
            len(d) > MAX_LISTPACK_ENTRIES or len(field) > MAX_LISTPACK_VALUE or len(value) > MAX_LISTPACK_VALUE
        ):
            self.ht = True
        if new and self._ix is not None:
            self._ix.add(field)
        return new

    def set_pairs(self, argv: list[bytes], start: int) -> int:
        """Set ``argv[start:]`` as field/value pairs; returns how many fields were new."""
        d = self.d
        n0 = len(d)
        n = len(argv)
        if n - start <= 16 and self._ix is None:
            # a few pairs (a BullMQ job's HSET/HMSET): a plain loop is about 3x faster than the
            # zip/map/islice form below, whose set-up dominates at this size
            jlog = self._jlog
            ht = self.ht
            for i in range(start, n, 2):
                f = argv[i]
                v = argv[i + 1]
                d[f] = v
                if jlog is not None:
                    jlog.append((f, v))
                if not ht and (len(f) > MAX_LISTPACK_VALUE or len(v) > MAX_LISTPACK_VALUE):
                    ht = True
            if not ht and len(d) > MAX_LISTPACK_ENTRIES:
                ht = True
            self.ht = ht
            return len(d) - n0
        if self._jlog is not None:
            it = iter(argv[start:])
            self._jlog.extend(zip(it, it, strict=True))
        if self._ix is None:
            it = iter(argv[start:])
            d.update(zip(it, it, strict=True))
            if not self.ht and (
                len(d) > MAX_LISTPACK_ENTRIES or max(map(len, islice(argv, start, None)), default=0) > MAX_LISTPACK_VALUE
            ):
                self.ht = True
            return len(d) - n0
        added = 0
        jlog = self._jlog
        self._jlog = None  # already logged above
        for i in range(start, len(argv), 2):
            if self.set(argv[i], argv[i + 1]):
                added += 1
        self._jlog = jlog
        self.note_sizes(*argv[start:])
        return added

    def delete(self, field: bytes) -> bool:
        d = self.d
        if field not in d:
            return False
        del d[field]
        if self._jlog is not None:
            self._jlog.append((field, None))
        if self._ix is not None:
            self._ix.remove(field)
        return True

    # ---- random access and scanning --------------------------------------
    def _index(self) -> list[bytes]:
        """The members in index order (see :class:`KeyIndex`)."""
        if self._ix is None:
            self._ix = KeyIndex(self.d)
        return self._ix.keys

    def random_field(self) -> bytes:
        """One random field (the hash must not be empty)."""
        if not self.ht:
            return random.choice(list(self.d))
        return random.choice(self._index())

    def random_fields(self, count: int) -> list[bytes]:
        """``count`` random fields, repetitions allowed."""
        keys = list(self.d) if not self.ht else self._index()
        return random.choices(keys, k=count)

    def random_unique(self, count: int) -> list[bytes]:
        """``count`` (< len) distinct random fields; for listpack hashes in hash order, as Redis does."""
        if not self.ht:
            keys = list(self.d)
            idx = sorted(random.sample(range(len(keys)), count))
            return [keys[i] for i in idx]
        return random.sample(self._index(), count)

    def scan(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        """One HSCAN step over a hashtable-encoded hash; returns (next cursor, fields).

        The index is walked from the end: a cursor ``c`` means positions
        ``[0, c)`` are still to visit (0 starts a new scan). Insertions append
        (into the visited part) and deletions move the last field into the
        hole, so a field present for the whole scan is returned at least once.
        """
        self._index()
        return self._ix.scan(cursor, count)  # type: ignore[union-attr]

    # ---- persistence -------------------------------------------------------
    @classmethod
    def from_blob(cls, blob: bytes) -> Hash:
        """A hash whose packed form (:func:`pack_small`) is ``blob``, unpacked when it is first used.

        1M waiting BullMQ jobs load as 1M small objects holding their bytes; a job's fields
        become a dict only when something reads or changes it."""
        h = PackedHash.__new__(PackedHash)
        h._blob = blob
        h._ix = None
        h._jlog = None
        h._jkey = None
        h._cseq = 0
        return h

    def packed(self) -> bytes | None:
        """The packed state this hash was loaded from (or compacted to, see respqueue/coldhash.py), while
        it is still unused (else None)."""
        return self._blob

    # ---- container contract ----------------------------------------------
    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self.d.items())

    def copy(self) -> Hash:
        h = Hash()
        h.d = self.d.copy()
        h.ht = self.ht
        return h

    def encoding(self) -> bytes:
        return b"hashtable" if self.ht else b"listpack"

    def memory_usage(self) -> int:
        d = self.d
        n = len(d)
        if n == 0:
            return 16
        # sample like Redis's MEMORY USAGE (SAMPLES 5): average of a few entries
        sample = 0
        k = 0
        for f, v in d.items():
            sample += len(f) + len(v)
            k += 1
            if k >= 5:
                break
        payload = sample * n // k
        if not self.ht:
            return 16 + 7 + payload + 4 * n
        return 16 + sys.getsizeof(d) // 2 + payload + 56 * n


class PackedHash(Hash):
    """A :class:`Hash` made by :meth:`Hash.from_blob` or gone cold (respqueue/coldhash.py turns an untouched
    small hash into one) and not used since: its first use unpacks the fields and turns it into a plain
    ``Hash``, noted again as a candidate for compaction.

    The ``__getattr__`` hook lives here, not on ``Hash``: on a class that has one, every attribute read of
    every instance goes through it (CPython's slot_tp_getattr_hook) and the interpreter cannot specialise
    them, which made each ``h.d``/``h.get`` of a live hash about twice as slow (docs/BENCHMARKS.md,
    "Server CPU per job")."""

    __slots__ = ()

    def __getattr__(self, name: str) -> object:
        # only reached while ``d``/``ht`` are unset
        if name != "d" and name != "ht":
            raise AttributeError(name)
        ht, d = decode_small(self._blob)
        self.d = d
        self.ht = bool(ht)
        self._blob = None
        self.__class__ = Hash
        if COLD is not None:
            COLD.cur.setdefault(self, None)  # (an entry naming its key stays)
        return d if name == "d" else self.ht


# Shapes of small hashes: a hash's field names in order, as a tuple, packed as a number instead of its names
# (a BullMQ job's six names: one byte instead of ~40), msgpack ``[hashtable?, shape, value, ...]``.
# * Store shapes (numbers 0 to STORE_SHAPES_MAX - 1) are registered by a plug-in at import
#   (register_store_shapes: compat registers BullMQ's job hashes) and recorded in the store (its meta row
#   ``hash_shapes``, persistence/store.py): a small hash of such a shape is stored in that form too, and
#   a cold one keeps its row's bytes as they are.
# * Other shapes are numbered the first time a hash of theirs goes cold (from STORE_SHAPES_MAX on), in memory
#   only: the store's rows keep their names (``[hashtable?, {field: value}]``). At most SHAPES_MAX of them
#   (a hash of another shape after that is packed with its names), so a workload of ever new field names
#   cannot grow the table without bound.
SHAPES_MAX = 4096
STORE_SHAPES_MAX = 128  # (so that a store shape's number is one byte of msgpack)
_STORE_SHAPES: list[tuple[bytes, ...]] = []
_SHAPES: list[tuple[bytes, ...]] = []  # the memory-only ones
_SHAPE_NO: dict[tuple[bytes, ...], int] = {}  # names -> number (a store shape's when it is one)
_STORE_NO: dict[tuple[bytes, ...], int] = {}  # names -> number, store shapes only
_BY_NO: dict[int, tuple[bytes, ...]] = {}  # number -> names, both kinds
_POS: dict[int, dict[bytes, int]] = {}  # number -> {name: its value's index in the packed array}
_pack = msgpack.Packer(use_bin_type=True).pack
_unpack = msgpack.unpackb
_STORED = 0x92  # first byte of the names form: msgpack fixarray of 2, [hashtable?, {field: value}] (the
# shape form has 3 elements or more)


def store_shapes() -> list[tuple[bytes, ...]]:
    """The store shapes registered so far, in number order."""
    return list(_STORE_SHAPES)


def register_store_shapes(shapes: Iterable[tuple[bytes, ...]]) -> None:
    """Make ``shapes`` the store shapes, numbered in their order: the same list each time (a plug-in at
    import, a store's recorded table at its open), or one that extends the registered list; anything else
    would renumber what stores hold: ValueError."""
    new = [tuple(s) for s in shapes]
    n = len(_STORE_SHAPES)
    if new[:n] != _STORE_SHAPES[: len(new)]:
        raise ValueError("hash store shapes differ from the ones registered (their numbers are stored)")
    if len(new) > STORE_SHAPES_MAX or len(set(new)) != len(new) or any(not s for s in new):
        raise ValueError(f"hash store shapes: at most {STORE_SHAPES_MAX} different, non-empty tuples")
    for no in range(n, len(new)):
        names = new[no]
        _STORE_SHAPES.append(names)
        _STORE_NO[names] = _SHAPE_NO[names] = no  # (a memory-only number it had stays readable)
        _BY_NO[no] = names


def shape_no(names: tuple[bytes, ...]) -> int | None:
    """The number of the shape of field names ``names`` (a store shape's, else a memory-only one, numbered
    now if new); None when there is none to be had (no field, or the memory-only table full)."""
    no = _SHAPE_NO.get(names)
    if no is None:
        if len(_SHAPES) >= SHAPES_MAX or not names:  # (no field: [ht, no] would read as the names form)
            return None
        no = _SHAPE_NO[names] = STORE_SHAPES_MAX + len(_SHAPES)
        _SHAPES.append(names)
        _BY_NO[no] = names
    return no


def pack_small(ht: bool, d: dict[bytes, bytes]) -> bytes:
    """The store's form of a small hash (``keys.value``): with its store shape's number when it has one,
    else with its names."""
    no = _STORE_NO.get(tuple(d))
    if no is not None:
        return _pack([ht, no, *d.values()])  # type: ignore[no-any-return]
    return _pack([ht, d])  # type: ignore[no-any-return]


def decode_small(b: bytes) -> tuple[bool, dict[bytes, bytes]]:
    """(hashtable?, {field: value}) of a small hash packed in either form."""
    if b[0] == _STORED:
        ht, d = _unpack(b, raw=True)
        return ht, d
    v = _unpack(b, raw=True)
    names = _BY_NO[v[1]]
    if len(names) != len(v) - 2:
        raise ValueError("a packed hash's values do not match its shape")
    return v[0], dict(zip(names, v[2:]))  # noqa: B905  (the test above: zip(strict=True) costs more)


def _get_small(b: bytes, field: bytes) -> bytes | None:
    """One field of a small hash packed in either form (None: absent), without building its dict."""
    if b[0] == _STORED:
        return _unpack(b, raw=True)[1].get(field)  # type: ignore[no-any-return]
    v = _unpack(b, raw=True)
    pos = _POS.get(v[1])
    if pos is None:
        pos = _POS[v[1]] = {f: i for i, f in enumerate(_BY_NO[v[1]], 2)}
    i = pos.get(field)
    return None if i is None else v[i]  # type: ignore[no-any-return]


def _store_form(b: bytes) -> bool:
    """Whether the packed small hash ``b`` is in a form the store keeps: with its names, or a store shape's
    number (one byte of msgpack, a positive fixint, after the array's header and the hashtable flag)."""
    h = b[0]
    if h == _STORED:
        return True
    i = 2 if h <= 0x9F else 4 if h == 0xDC else 6
    return b[i] < STORE_SHAPES_MAX


class ColdHash(bytes):
    """A cold small hash as the keyspace's value itself: packed bytes and nothing else.

    A waiting BullMQ job untouched for ``--hash-compact-delay`` is one of these (respqueue/coldhash.py), as
    is every small hash loaded from the store: ~16 bytes over its blob, where a :class:`PackedHash` is an
    80-byte object beside a separate bytes object. Two forms, told apart by the first byte: with names,
    msgpack ``[hashtable?, {field: value}]``, and with a shape, msgpack
    ``[hashtable?, shape, value, ...]``, ``shape`` the number of its tuple of field names (see the shapes
    above): ~40 bytes less for a BullMQ job. A loaded hash is its row's bytes (a store shape's, or names,
    recoded in the background); compaction makes the shape form (:meth:`of`). It is never handed to a command:
    ``Database.lookup`` and ``lookup_type`` turn it into a plain :class:`Hash` first (``Database.thaw``), and
    the few readers of ``Database.data`` itself thaw it or read it through the methods below. A bytes
    subclass: ``type(v) is bytes`` (a string) is False for it; ``len()`` is its blob's length, not the
    hash's."""

    __slots__ = ()
    rtype = b"hash"
    journal_key = None  # a one-row hash: written whole, never attached

    @classmethod
    def of(cls, ht: bool, d: dict[bytes, bytes]) -> ColdHash:
        """The cold form of a hash (``ht``: hashtable-encoded) with fields ``d``, in their order."""
        no = shape_no(tuple(d))
        if no is None:
            return cls(_pack([ht, d]))
        return cls(_pack([ht, no, *d.values()]))

    @classmethod
    def shaped(cls, head: list[Any], values: Iterable[bytes]) -> ColdHash:
        """The cold form of a hash from ``head``, ``[hashtable?, shape_no(names)]`` (not None), and its
        values in the names' order: :meth:`of` without the dict, for a writer that knows its hash's names
        (a new BullMQ job's: compat/native/add_standard_job.py)."""
        return cls(_pack([*head, *values]))

    def fields(self) -> tuple[bool, dict[bytes, bytes]]:
        """(hashtable?, {field: value}) in the hash's order."""
        return decode_small(self)

    def thawed(self) -> Hash:
        """A new plain :class:`Hash` with the fields (not put in the keyspace: see ``Database.thaw``)."""
        ht, d = self.fields()
        h = Hash.__new__(Hash)
        h.d = d
        h.ht = bool(ht)
        h._ix = None
        h._jlog = None
        h._jkey = None
        h._blob = None
        h._cseq = 0
        return h

    def stored(self) -> bytes:
        """The store's form (a one-row hash's ``keys.value``): itself unless its shape is memory-only."""
        if _store_form(self):
            return bytes(self)
        ht, d = self.fields()
        return _pack([ht, d])  # type: ignore[no-any-return]

    # read-only views for the keyspace's direct readers (metrics, dashboard, maxmemory's estimate)
    def get(self, field: bytes) -> bytes | None:
        return _get_small(self, field)

    def to_dict(self) -> dict[bytes, bytes]:
        return self.fields()[1]

    def memory_usage(self) -> int:
        return self.thawed().memory_usage()

    def packed(self) -> bytes:
        return self.stored()


# what a hash in the keyspace may be
HASHES = (Hash, ColdHash)


def unpacked(h: Any) -> Any:
    """``h``, unpacked first when it is a :class:`PackedHash` (then ``type(h) is Hash``): for fast paths that
    test the exact type."""
    if type(h) is PackedHash:
        h.ht  # noqa: B018  (the first use unpacks it)
    return h

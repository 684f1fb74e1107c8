"""Job rows: a BullMQ job stored as one row, its state containers rebuilt from those rows.

BullMQ keeps a job as a hash ``<prefix>:<queue>:<id>`` and moves its id between the queue's state
containers (the lists ``wait``, ``paused``, ``active`` and the zsets ``delayed``, ``prioritized``,
``completed``, ``failed``, ``waiting-children``). Stored generically, each move costs a list or zset
member row deleted and another inserted, on top of the job hash's own row, which the same script
rewrites anyway (``processedOn``, ``finishedOn``, ...).

This layout (installed as ``Journal.layout``, see ``respqueue/persistence``) keeps such a container
as *job rows*: the container's ``keys`` row has the type ``joblist`` / ``jobzset`` and no element
rows; each member's job hash row (``keys``, type ``hash``) carries ``state`` (the container's key)
and ``score`` (its zset score, or its list position: the journal's float positions, so list order,
LPUSH/RPUSH/LINSERT included, is kept). A job's move from ``wait`` to ``active`` to ``completed``
so rewrites its one row. At start-up the containers are rebuilt from the rows that name them.

Correctness never depends on BullMQ's habits. A container is kept as job rows only while, at the
end of every batch, each member's hash exists (a Hash at ``<prefix><member>``), no member is in the
container twice and no job is in two such containers (all legal in Redis). A batch that breaks
this writes that container back as generic rows (and its members' rows without a state); it may
become job rows again when it is next written whole (deleted and created again, RENAME).

Job rows are the default; ``RESPQUEUE_JOB_ROWS=off`` keeps new containers as generic rows (a store that
holds job rows still loads them, whatever the setting). A store written with generic rows (schema 4 or
5, or ``off``) opens as it is and its containers become job rows in the first batch after the start;
not on a replica, whose store holds its master's rows as they are (``load(convert=False)``).

A replica (respqueue/replication/replica.py) applies its master's job rows in place (``replicate``):
after its store has applied a group of frames it reads back each job row the group touched and moves
the job between its in-memory containers by the change of the row's (state, score): it leaves its old
container at its old position or score (the container's own index) and joins the new one, O(rows in
the group), never O(container size); its hash and its lock come from the same row. Only a container
written whole (turning between job rows and generic rows) makes the replica reload the keys sharing
rows with it.

The containers are the index (no side index): a job-row list is a :class:`JobList` (compat/engine/
joblist.py), a List that also keeps the set of its members (the deque's own bytes objects) and logs
the members its commands removed; a job-row zset is the plain ZSet, whose dict already maps member to
score. The layout keeps only ``reg``: db -> ``<prefix>:<queue>:`` -> {container key: container} for the
containers kept as job rows (``stored`` JOBS). A job key's container is found from the key itself
(``find``): each ``:`` of the key may end a registered prefix, the rest is the member, looked up in that
prefix's few containers. A batch takes each changed container's log (list: the members removed, the
(position, member) pairs pushed; zset: its change log), O(1) per moved job: the jobs that left and
joined have their rows rewritten (``stamp`` reads each one's state from ``find`` and its score from the
zset, or for a list from the batch's log, else ``_list_pos``: near the list's ends, else a search at C
speed, and after ``_FAR_SEARCHES`` of them a map of that list's positions for the rest of the batch). A
list member costs its set entry (~42 B per waiting job at 200,000) up to 32,768 members, about a bit of a job-id
bitmap from there (joblist.py, idindex.py) (a member -> position dict and a float
per member were ~76 B until 2026-11-27, the side index before it, ``owner`` and ``cont``, ~300 B;
docs/BENCHMARKS.md, "The containers as the index" and "A job-row list's index as a set").
"""

from __future__ import annotations

import heapq
import os
import sqlite3
from array import array
from bisect import bisect_left
from collections import deque
from itertools import compress, repeat
from operator import getitem, itemgetter
from typing import Any, ClassVar

from respqueue.keyspace import Database, mstime
from respqueue.persistence import register_layout
from respqueue.persistence.codec import KEY_UPSERT as _KEY_UPSERT
from respqueue.types.hash import HASHES, ColdHash
from respqueue.types.positions import Positions
from respqueue.types.zset import ZSet

from .joblist import JobList, member_index

JOBS = b"jobs"  # Journal.stored value of a container kept as job rows (it has no element rows)
LIST_TYPE = "joblist"
ZSET_TYPE = "jobzset"
#: the types of the containers' rows the core loader hands over (``loader.load(handoff_types=...)``)
SCAN_TYPES = (LIST_TYPE, ZSET_TYPE, "list", "zset")
_TYPE = {b"list": LIST_TYPE, b"zset": ZSET_TYPE}
STATES = (b"wait", b"paused", b"active", b"delayed", b"prioritized", b"completed", b"failed", b"waiting-children")
_SUFFIXES = tuple(b":" + s for s in STATES)
STATE_UPSERT = (
    "INSERT OR REPLACE INTO keys(db, key, type, expire_ms, version, value, state, score, lock, lock_ms)"
    " VALUES(?,?,?,?,?,?,?,?,?,?)"
)
# the common job row (no TTL, no lock in it): its constant columns are literals, not bound (six parameters
# instead of ten; Python's sqlite3 adapts every None it binds, ~1,700 instructions each in the writer)
JOB_UPSERT = (
    "INSERT OR REPLACE INTO keys(db, key, type, expire_ms, version, value, state, score, lock, lock_ms)"
    " VALUES(?,?,'hash',NULL,?,?,?,?,NULL,NULL)"
)
_KEY_DEL = "DELETE FROM keys WHERE db=? AND key=?"
_LOCK = b":lock"
# the last bytes of the state suffixes and of the lock's: a key ending otherwise is neither (one set lookup)
_STATE_TAILS = frozenset(s[-1:] for s in STATES)
_LOCK_TAIL = _LOCK[-1:]
assert _LOCK_TAIL not in _STATE_TAILS
_ELEM_DEL = {
    b"hash": "DELETE FROM hash_fields WHERE db=? AND key=?",
    b"set": "DELETE FROM set_members WHERE db=? AND key=?",
    b"zset": "DELETE FROM zset_members WHERE db=? AND key=?",
    b"list": "DELETE FROM list_items WHERE db=? AND key=?",
}
_LIST = b"list"
_ZSET = b"zset"
_ROW_TYPES = (LIST_TYPE, ZSET_TYPE)
_CONT_ROW = "SELECT type, expire_ms FROM keys WHERE db=? AND key=?"
_JOB_ROW = "SELECT state, score, lock, lock_ms FROM keys WHERE db=? AND key=?"
_JOB_FULL_ROW = "SELECT state, score, lock, lock_ms, type, expire_ms, value FROM keys WHERE db=? AND key=?"
# the only statements a container kept as job rows gets: its keys row (the journal's upsert, or a delete)
_CONT_OPS = (_KEY_UPSERT, _KEY_DEL)


class ReplicaMismatch(Exception):
    """A replica's memory and store disagree about a job row (it then reloads its keyspace)."""


def enabled() -> bool:
    """Job rows are the default; ``RESPQUEUE_JOB_ROWS=off`` keeps the generic layout of schema versions 4 and 5
    for new containers (a store that holds job rows still loads them: see ``present``)."""
    return os.environ.get("RESPQUEUE_JOB_ROWS", "on").lower() not in ("off", "0", "no", "false")


def present(conn: sqlite3.Connection) -> bool:
    """Whether the store holds job-row containers (then they load with the layout whatever the setting)."""
    return conn.execute("SELECT 1 FROM keys WHERE type IN ('joblist', 'jobzset') LIMIT 1").fetchone() is not None


def prefix_of(key: bytes) -> bytes | None:
    """``<prefix>:<queue>:`` when ``key`` names one of BullMQ's state containers, else None."""
    if key.endswith(_SUFFIXES):
        return key[: key.rindex(b":") + 1]
    return None


class JobLayout:
    """The job-row codec of a journal (``Journal.layout``)."""

    #: the core loader hands over the rows of these types (and of the locked jobs) from its scan: ``load``'s ``rows``
    scan_types: ClassVar[tuple[str, ...]] = SCAN_TYPES

    def __init__(self) -> None:
        # db -> prefix ``<prefix>:<queue>:`` -> {container key: container} for the containers kept as job
        # rows (``stored`` JOBS): a JobList (its members in its ``_ix``) or a ZSet (member -> score in ``_scores``).
        # The containers are the index: a job key's container is found from its prefix and member.
        self.reg: dict[int, dict[bytes, dict[bytes, Any]]] = {}
        # db -> lock keys ``<job key>:lock`` kept in their owned job's row (lock, lock_ms), not a row of their own
        self.folded: dict[int, set[bytes]] = {}
        self.dbs: list[Database] = []
        self.upsert_sql = STATE_UPSERT
        self.upsert_sqls = frozenset((STATE_UPSERT, JOB_UPSERT))  # the statements that write job rows
        # the batch being built (``before`` to ``stamp``): (db, job key) -> ``find``'s answer, forgotten
        # whenever a container is registered or unregistered (memberships do not change meanwhile)
        self._memo: dict[tuple[int, bytes], Any] = {}
        # the batch being built: id(JobList) -> (the list, {member: position}) of the jobs that joined it in
        # the batch (its change log's positions, or a list written whole's), so ``stamp`` searches no list for them
        self._pos: dict[int, tuple[Any, dict[bytes, float]]] = {}
        # a batch's (or a replica's group's) lookups of list positions far from the list's ends: id(list) ->
        # [list, searches made, member -> position map once there were _FAR_SEARCHES of them]
        self._far: dict[int, list[Any]] = {}

    # ---- the containers as the index ------------------------------------------
    def _register(self, k: tuple[int, bytes], v: Any) -> None:
        dbi, ckey = k
        prefix = ckey[: ckey.rindex(b":") + 1]
        self._memo.clear()
        reg = self.reg.get(dbi)
        if reg is None:
            reg = self.reg[dbi] = {}
        cs = reg.get(prefix)
        if cs is None:
            cs = reg[prefix] = {}
        cs[ckey] = v

    def _unregister(self, k: tuple[int, bytes]) -> Any:
        """Forget container ``k``; returns the container it was (or None)."""
        self._memo.clear()
        dbi, ckey = k
        reg = self.reg.get(dbi)
        if not reg:
            return None
        prefix = ckey[: ckey.rindex(b":") + 1]
        cs = reg.get(prefix)
        if not cs:
            return None
        v = cs.pop(ckey, None)
        if not cs:
            del reg[prefix]
            if not reg:
                del self.reg[dbi]
        return v

    def container(self, k: tuple[int, bytes]) -> Any:
        """The container kept as job rows at ``k`` (None if ``k`` is not one)."""
        reg = self.reg.get(k[0])
        if not reg:
            return None
        ckey = k[1]
        cs = reg.get(ckey[: ckey.rindex(b":") + 1]) if b":" in ckey else None
        return cs.get(ckey) if cs else None

    def find(self, dbi: int, jk: bytes, skip: Any = None) -> tuple[bytes, Any, bytes] | None:
        """(container key, container, member) of the job-row container holding job ``jk`` (other than
        ``skip``), or None. ``<prefix><member>`` is the job key: each ``:`` of the key may end a prefix."""
        reg = self.reg.get(dbi)
        if not reg:
            return None
        if len(reg) == 1:  # one queue prefix in the database (the common case): one split to try
            for p, cs in reg.items():
                if not jk.startswith(p):
                    return None
                m = jk[len(p) :]
                for ck, v in cs.items():
                    if v is not skip and m in (v._ix if type(v) is JobList else v._scores):
                        return ck, v, m
            return None
        i = jk.rfind(b":")
        while i >= 0:
            cq = reg.get(jk[: i + 1])
            if cq is not None:
                m = jk[i + 1 :]
                for ck, v in cq.items():
                    if v is not skip and m in (v._ix if type(v) is JobList else v._scores):
                        return ck, v, m
            i = jk.rfind(b":", 0, i)
        return None

    def _found(self, k: tuple[int, bytes]) -> tuple[bytes, Any, bytes] | None:
        """``find(*k)``, remembered for the batch being built (a job key is asked about several times)."""
        r = self._memo.get(k, _UNKNOWN)
        if r is _UNKNOWN:
            r = self._memo[k] = self.find(k[0], k[1])
        return r

    def where(self, dbi: int, jk: bytes) -> tuple[bytes, float] | None:
        """(container key, score or list position) of owned job ``jk``, or None."""
        f = self.find(dbi, jk)
        if f is None:
            return None
        ck, v, m = f
        return ck, (self._list_pos(v, m) if type(v) is JobList else v._scores[m])

    def _list_pos(self, v: JobList, m: bytes) -> float:
        """The position of member ``m`` of ``v``, while the lists do not change (a batch's ``stamp``, a
        replica group's lookups: ``_far`` is reset after them): near the ends at once; elsewhere by a
        search of the list, and after ``_FAR_SEARCHES`` such searches in one list by a map of its members
        built once (O(n) at C speed), so many jobs changed in the middle of a long list cost O(n), not
        O(n) each."""
        s = v.near(m)
        if s is not None:
            return s
        e = self._far.get(id(v))
        if e is None:
            e = [v, 0, None]
            self._far[id(v)] = e
        pos = e[2]
        if pos is not None:
            return pos[m]  # type: ignore[no-any-return]
        n = e[1] + 1
        e[1] = n
        if n > _FAR_SEARCHES:
            pos = dict(zip(v._d, v._p, strict=True))  # type: ignore[arg-type]
            e[2] = pos
            return pos[m]  # type: ignore[no-any-return]
        return v.far(m)  # (near did not find it above)

    @staticmethod
    def _members(v: Any) -> list[bytes]:
        """A container's members now and those it lost since the layout last consumed its log (every
        member its job rows may still name)."""
        if type(v) is JobList:
            out = list(v._d)
            out.extend(v._gone)
            return out
        out = list(v._scores)
        out.extend(m for m, s in v.changes() or () if s is None)
        return out

    # ---- batches --------------------------------------------------------------
    def before(
        self, dirty: dict[tuple[int, bytes], Any], dbs: list[Database], stored: dict[tuple[int, bytes], bytes],
        append: Any,
    ) -> None:
        """Called with a batch's dirty keys before they become rows: takes the job-row containers' change
        logs, marks the job hashes whose row changes dirty, and hands a container that breaks the
        invariants back to the generic layout (the journal then writes it whole)."""
        self.dbs = dbs
        self._memo = {}
        self._far = {}
        posd = self._pos = {}
        touched: list[tuple[int, bytes]] = []
        # (container key, container, prefix, members to check: new in it this batch; for a list, a dict
        # member -> position)
        adds: list[tuple[tuple[int, bytes], Any, bytes, Any]] = []
        # one pass sorts the batch's keys: state containers, lock keys, the rest
        cands: list[tuple[int, bytes]] = []
        locks: list[tuple[int, bytes]] = []
        others: list[tuple[int, bytes]] = []
        for k in dirty:
            key = k[1]
            tail = key[-1:]  # (most keys are job hashes, ending with a digit: no suffix to compare)
            if tail == _LOCK_TAIL:
                if key.endswith(_LOCK):
                    locks.append(k)
            elif tail in _STATE_TAILS and key.endswith(_SUFFIXES):
                cands.append(k)
                continue
            others.append(k)
        for k in cands:
            dbi, ckey = k
            prefix = ckey[: ckey.rindex(b":") + 1]
            data = dbs[dbi].data
            v: Any = data.get(ckey)
            rt = None if v is None or type(v) is bytes else v.rtype
            old = stored.get(k)
            if old == JOBS:
                r = self.container(k)
                if (
                    r is not None
                    and v is r
                    and v.attached(k)
                    and (rt == _ZSET or v._ix is not None)
                ):
                    self._consume(k, v, prefix, touched, adds, stored, dirty)
                    continue
                self._release_all(k, touched)
                if v is None:
                    continue  # the journal deletes its keys row
                del stored[k]
            if rt != _LIST and rt != _ZSET:
                continue
            # written whole by the journal (new, renamed, or stored another way): try job rows
            if old == rt and v.attached(k):
                continue  # generic rows, changed element by element: stays generic
            if old is not None and old != JOBS:
                sql = _ELEM_DEL.get(old)
                if sql is not None:
                    append((sql, k, False))
                del stored[k]
            # a job-row container moved here (RENAME, MOVE) from a key not handled yet: it leaves that key
            jk0 = v.journal_key
            if jk0 is not None and jk0 != k and self.container(jk0) is v:
                self._release_all(jk0, touched)
            if rt == _LIST:
                if type(v) is not JobList:
                    v = JobList.of(v)
                    data[ckey] = v
                v.attach(k)
                if not v.reindex():
                    v.unindex()
                    v.journal_key = None  # the journal writes it whole, as generic rows
                    continue
                new: Any = dict(zip(v._d, v._p, strict=True))  # type: ignore[arg-type]
            else:
                v.attach(k)
                new = list(v._scores)
            stored[k] = JOBS
            self._register(k, v)
            adds.append((k, v, prefix, new))
        # new members: every job hash must exist, and no job may be in two places
        for k, v, prefix, new in adds:
            if self.container(k) is not v:
                continue  # fell back meanwhile
            dbi = k[0]
            data = dbs[dbi].data
            ok = True
            memo = self._memo
            ckey = k[1]
            if type(new) is dict:
                posd[id(v)] = (v, new)  # (if a member fails the checks, ``v`` is no longer job rows)
            reg = self.reg[dbi]
            if len(reg) == 1:
                # one queue prefix in the database: a job key splits one way, so a new member is in another
                # container exactly when that container's members meet the new ones (``find``'s search for
                # each, as one set operation per container); then each new member's hash must exist
                for u in reg[prefix].values():
                    if u is not v and not (u._ix if type(u) is JobList else u._scores.keys()).isdisjoint(new):
                        ok = False
                        break
                else:
                    for m in new:
                        jk = prefix + m
                        if not isinstance(data.get(jk), HASHES):
                            ok = False
                            break
                        t = (dbi, jk)
                        touched.append(t)
                        memo[t] = (ckey, v, m)  # in ``v`` and in no other container: what ``find`` would say
            else:
                for m in new:
                    jk = prefix + m
                    if not isinstance(data.get(jk), HASHES) or self.find(dbi, jk, v) is not None:
                        ok = False
                        break
                    t = (dbi, jk)
                    touched.append(t)
                    memo[t] = (ckey, v, m)
            if not ok:
                self._fallback(k, v, stored, dirty, touched)  # (touches every member of ``v``)
        # an owned job hash that is gone (DEL, RENAME, expiry, another type) while still a member. Every
        # member's hash existed when the batch opened (checked at every batch's end) and those that joined
        # in the batch were checked above, so a key that was no hash when the batch opened needs no search:
        # one created in the batch (``dirty``'s born flag), a lock folded in its job's row (a string)
        if self.reg:
            found = self._found
            folded = self.folded
            for k in others:
                dbi, key = k
                if not isinstance(dbs[dbi].data.get(key), HASHES):
                    if dirty[k] is True:
                        continue
                    fs = folded.get(dbi)
                    if fs and key in fs:
                        continue
                    f = found(k)
                    while f is not None:
                        self._fallback((dbi, f[0]), f[1], stored, dirty, touched)
                        f = self.find(dbi, key)
        if locks or self.folded:
            self._locks(locks, dirty, dbs, append, touched)
        for t in touched:
            if t not in dirty:
                dirty[t] = False

    def _locks(
        self,
        locks: list[tuple[int, bytes]],
        dirty: dict[tuple[int, bytes], Any],
        dbs: list[Database],
        append: Any,
        touched: list[tuple[int, bytes]],
    ) -> None:
        """A job's lock key ``<job key>:lock`` (a string with a TTL, set when the job goes active and
        deleted when it finishes) is written into its job's row while the job is owned: the lock's
        changes then cost no row of their own, as the job's row is rewritten in the same batch."""
        folded = self.folded
        found = self._found
        memo = self._memo  # (``found``'s memo read inline: most jobs asked about are in it)
        for k in locks:
            lk = k[1]
            dbi = k[0]
            jt = (dbi, lk[:-5])
            fs = folded.get(dbi)
            if fs is None:
                fs = folded[dbi] = set()
            val = dbs[dbi].data.get(lk)
            if type(val) is bytes and (
                (f := memo.get(jt, _UNKNOWN)) is not None and (f is not _UNKNOWN or found(jt) is not None)
            ):
                if lk not in fs:
                    fs.add(lk)
                    if not dirty[k]:  # the store may hold a row of its own: it goes
                        append((_KEY_DEL, k, False))
                del dirty[k]
                touched.append(jt)
            elif lk in fs:
                fs.discard(lk)
                touched.append(jt)
                if val is None:
                    del dirty[k]  # it only lived in the job's row, rewritten without it
        # a job no longer owned takes no lock with it: a lock it held gets a row of its own
        for t in touched:
            f = memo.get(t, _UNKNOWN)
            if f is not None and f is not _UNKNOWN:
                continue  # owned (the common case: asked about already)
            dbi, jk = t
            fs = folded.get(dbi)
            if fs:
                lk = jk + _LOCK
                if lk in fs and (f is None or found(t) is None):
                    fs.discard(lk)
                    if lk in dbs[dbi].data:
                        dirty[(dbi, lk)] = False

    def _consume(
        self,
        k: tuple[int, bytes],
        v: Any,
        prefix: bytes,
        touched: list[tuple[int, bytes]],
        adds: list[tuple[tuple[int, bytes], Any, bytes, Any]],
        stored: dict[tuple[int, bytes], bytes],
        dirty: dict[tuple[int, bytes], Any],
    ) -> None:
        """Take a job-row container's change log: the members it lost and gained have their rows
        rewritten; those it gained are checked (``adds``). O(changes)."""
        jl = v.take_changes() or ()
        dbi = k[0]
        if type(v) is JobList:
            gone = v._gone
            if not jl and not gone:
                return
            if gone:
                v._gone = []
                touched.extend([(dbi, prefix + m) for m in gone])
            if v._dup and not v.reindex():
                self._fallback(k, v, stored, dirty, touched)
                return
            ix = v._ix
            assert ix is not None  # (indexed: checked by ``before``, or just rebuilt by reindex)
            log: list[tuple[float, bytes | None]] = jl if jl else []
            # each member pushed in the batch at its last logged position (a position never changes while
            # the member stays: a renumbered list is written whole), if it is still there
            new: Any = {x: pos for pos, x in log if x is not None and x in ix}  # (a later push of x overwrites)
        else:
            if not jl:
                return
            changed = dict(jl)
            touched.extend([(dbi, prefix + m) for m in changed])
            new = [m for m, s in changed.items() if s is not None]
        if new:
            adds.append((k, v, prefix, new))

    def _release_all(self, k: tuple[int, bytes], touched: list[tuple[int, bytes]]) -> None:
        """Container ``k`` is no longer job rows (deleted, replaced, renamed away): its members' rows
        (and those of the members it lost since the last batch) are rewritten."""
        v = self._unregister(k)
        if v is None:
            return
        dbi, ckey = k
        prefix = ckey[: ckey.rindex(b":") + 1]
        touched.extend([(dbi, prefix + m) for m in self._members(v)])
        if type(v) is JobList and v.journal_key == k:
            v._gone = []

    def _fallback(
        self,
        k: tuple[int, bytes],
        v: Any,
        stored: dict[tuple[int, bytes], bytes],
        dirty: dict[tuple[int, bytes], Any],
        touched: list[tuple[int, bytes]],
    ) -> None:
        """Container ``k`` goes back to generic rows: the journal writes it whole in this batch."""
        self._unregister(k)
        dbi, ckey = k
        prefix = ckey[: ckey.rindex(b":") + 1]
        touched.extend([(dbi, prefix + m) for m in self._members(v)])
        if type(v) is JobList:
            v.unindex()
        if stored.get(k) == JOBS:
            del stored[k]
        v.journal_key = None  # written whole
        if k not in dirty:
            dirty[k] = False

    def stamp(self, kup: list[tuple[Any, ...]]) -> tuple[list[tuple[Any, ...]], list[tuple[str, list[Any]]]]:
        """Split a batch's ``keys`` upserts into plain rows and job rows (with state and score): the plain
        ones, and the job rows as (statement, rows) for executemany (``JOB_UPSERT`` for a job without TTL
        or lock, ``STATE_UPSERT`` for the rest)."""
        if not self.reg:
            return kup, []
        plain = []
        jobs = []
        common = []
        folded = self.folded
        dbs = self.dbs
        found = self._found
        memo = self._memo
        posd = self._pos
        for row in kup:
            if row[2] != "hash":
                plain.append(row)
                continue
            t = (row[0], row[1])
            f = memo.get(t, _UNKNOWN)  # (``found`` inline: the batch's jobs are in its memo)
            if f is _UNKNOWN:
                f = found(t)
            if f is None:
                plain.append(row)
                continue
            ck, v, m = f
            if type(v) is JobList:
                e = posd.get(id(v))
                s = e[1].get(m) if e is not None and e[0] is v else None
                if s is None:
                    s = self._list_pos(v, m)
            else:
                s = v._scores[m]
            fs = folded.get(row[0])
            lk = row[1] + _LOCK
            if fs and lk in fs:
                db = dbs[row[0]]
                jobs.append((*row, ck, s, db.data.get(lk), db.expires.get(lk)))
            elif row[3] is None:
                common.append((row[0], row[1], row[4], row[5], ck, s))
            else:
                jobs.append((*row, ck, s, None, None))
        self._memo = {}
        self._pos = {}
        self._far = {}
        out = []
        if common:
            out.append((JOB_UPSERT, common))
        if jobs:
            out.append((STATE_UPSERT, jobs))
        return plain, out

    def row_type(self, rt: bytes) -> str:
        """The ``keys.type`` of a container of type ``rt`` kept as job rows."""
        return _TYPE[rt]

    # ---- databases ------------------------------------------------------------
    def flushed(self, dbi: int) -> None:
        self.reg.pop(dbi, None)
        self.folded.pop(dbi, None)

    def swapped(self, a: int, b: int) -> None:
        m: dict[int, Any]
        for m in (self.reg, self.folded):
            ma = m.pop(a, None)
            mb = m.pop(b, None)
            if ma is not None:
                m[b] = ma  # type: ignore[assignment,index]
            if mb is not None:
                m[a] = mb  # type: ignore[assignment,index]

    # ---- reloading keys from the store (a failed batch rolled back, a replica's applied frame) ------
    def touches(self, k: tuple[int, bytes]) -> bool:
        """Whether key ``k`` is part of a job row in memory: a state container, an owned job, a folded lock."""
        dbi, key = k
        if key.endswith(_SUFFIXES):
            return True
        if self.find(dbi, key) is not None:
            return True
        fs = self.folded.get(dbi)
        return bool(fs) and key in fs

    def related(self, keys: Any, state_of: Any, members_of: Any = None) -> set[tuple[int, bytes]]:
        """``keys`` and every key that shares a row with one of them, in memory or in the store: a job's
        hash, its lock and its membership of a state container are one row, so they are reloaded
        together, and a container with all its members (old and new). ``state_of(k)``: the container
        key the store's row of ``k`` names (or None); ``members_of(k)``: the job keys whose stored rows
        name container ``k`` (None: the members known in memory, plus those among ``keys``)."""
        out = set(keys)
        todo = list(out)
        while todo:
            k = todo.pop()
            dbi, key = k
            new: list[bytes] = []
            if key.endswith(_SUFFIXES):
                v = self.container(k)
                if v is not None:
                    prefix = key[: key.rindex(b":") + 1]
                    new.extend([prefix + m for m in self._members(v)])
                if members_of is not None:
                    new.extend(members_of(k))
            if key.endswith(_LOCK):
                new.append(key[:-5])
            else:
                f = self.find(dbi, key)
                st = state_of(k)
                if f is not None:
                    new.append(f[0])
                if st is not None:
                    new.append(st)
                if f is not None or st is not None:
                    new.append(key + _LOCK)
            for nk in new:
                t = (dbi, bytes(nk))
                if t not in out:
                    out.add(t)
                    todo.append(t)
        return out

    def adopt(self, fresh: JobLayout, keys: Any) -> None:
        """After ``keys`` were reloaded (see ``related``): their job-row state is ``fresh``'s, a layout
        that loaded just their rows (its containers are now in the keyspace)."""
        folded = self.folded
        for k in keys:
            if k[1].endswith(_SUFFIXES):
                self._unregister(k)
            fs = folded.get(k[0])
            if fs:
                fs.discard(k[1])
        for dbi, reg in fresh.reg.items():
            for cs in reg.values():
                for ckey, v in cs.items():
                    self._register((dbi, ckey), v)
        for dbi, fs in fresh.folded.items():
            folded.setdefault(dbi, set()).update(fs)

    # ---- a replica applying the master's rows in place -------------------------------------------
    def replicate(
        self, conn: sqlite3.Connection, dbs: list[Any], stored: dict[tuple[int, bytes], bytes], keys: Any
    ) -> set[tuple[int, bytes]] | None:
        """A replica's store has just applied a group of the master's frames, whose rows touched ``keys``
        (key -> its row operations): bring the job rows among them into memory in place, O(rows), by the
        change of each job row's (state, score): the job leaves its old container at its old position or
        score and joins its new one; its hash and its lock are read back from its row. Returns the keys
        put back (the rest take the generic path), or None when a container changes between job rows and
        generic rows (written whole: the caller reloads the keys sharing rows with them). Raises
        ``ReplicaMismatch`` when memory and the store disagree (the caller then reloads everything)."""
        from respqueue.replication.loadkeys import reload_key

        self.dbs = dbs
        self._far = {}
        ndb = len(dbs)
        folded = self.folded
        upsert = self.upsert_sql
        upserts = self.upsert_sqls
        conts: dict[tuple[int, bytes], Any] = {}  # job-row containers in the frame -> their keys row (or None)
        jobs: list[tuple[int, bytes]] = []
        locks: list[tuple[int, bytes]] = []
        for k, kops in keys.items():
            dbi, key = k
            if not 0 <= dbi < ndb:
                continue
            if key.endswith(_SUFFIXES):
                row = _last_row(kops, upsert, True)
                if row is _UNKNOWN:
                    row = conn.execute(_CONT_ROW, k).fetchone()
                new_job = row is not None and row[0] in _ROW_TYPES
                old_job = stored.get(k) == JOBS
                if not new_job and not old_job:
                    if self.find(dbi, key) is not None:
                        return None  # a job hash whose key looks like a container (a job id "wait"...)
                    continue  # a generic container: the generic path
                if any(sql not in _CONT_OPS for sql, _ in kops):
                    return None  # element rows: written whole, from or to generic rows
                if old_job:
                    m = self.container(k)
                    if m is None or (new_job and (row[0] == LIST_TYPE) != (type(m) is JobList)):
                        return None
                elif key in dbs[dbi].data:
                    return None  # generic in memory (a small list in one row ...), job rows now
                conts[k] = row
                continue
            if key.endswith(_LOCK):
                locks.append(k)
                continue
            if any(sql in upserts for sql, _ in kops) or self.find(dbi, key) is not None:
                jobs.append(k)
        # the jobs' rows as they are now: their hashes and locks come back from them
        moves: list[tuple[int, bytes, tuple[bytes, float] | None, tuple[bytes, float] | None]] = []
        rowlock: dict[tuple[int, bytes], Any] = {}  # lock key -> (value, expiry) in its job row, or None
        for k in jobs:
            dbi, jk = k
            # the row as the frames left it (their last keys-row statement for it), else as the store has it
            row = _last_row(keys[k], upsert, False)
            if row is _UNKNOWN:
                row = conn.execute(_JOB_FULL_ROW, k).fetchone()
            new = None if row is None or row[0] is None else (bytes(row[0]), row[1])
            cur = self.where(dbi, jk)
            if cur != new:
                moves.append((dbi, jk, cur, new))
            if row is not None and row[4] == "hash" and row[6] is not None:
                # the job's hash, in its row (as reload_key reads it, without a second query)
                db = dbs[dbi]
                stored.pop(k, None)
                db.data[jk] = ColdHash(row[6])
                exp = row[5]
                if exp is None:
                    db.expires.pop(jk, None)
                elif db.expires.get(jk) != exp:
                    db.expires[jk] = exp
                    heapq.heappush(db.expire_heap, (exp, jk))
            else:
                reload_key(conn, dbs, stored, k)
            lk = jk + _LOCK
            if new is not None and row[2] is not None:
                rowlock[(dbi, lk)] = (row[2], row[3])
                locks.append((dbi, lk))
            else:
                rowlock[(dbi, lk)] = None  # not in its job's row (a row of its own, or none)
                fs = folded.get(dbi)
                if fs and lk in fs:
                    locks.append((dbi, lk))
        self._far = {}  # (the lists change from here on)
        # leave the old containers first (a position may be taken again in the same group), then join
        for dbi, jk, cur, _new in moves:
            if cur is not None:
                self._leave(dbs[dbi], dbi, jk, cur, conts)
        for dbi, jk, _cur, new in moves:
            if new is not None:
                self._join(dbs[dbi], dbi, jk, new, conts, stored)
        # the containers' own rows: gone (they must be empty by now), or their TTL
        for k, row in conts.items():
            dbi, ckey = k
            db = dbs[dbi]
            v = db.data.get(ckey)
            if row is None:
                if v is not None and (len(v) or stored.get(k) != JOBS):
                    raise ReplicaMismatch(f"container {ckey!r} has no row but holds {len(v)} members")
                db.data.pop(ckey, None)
                db.expires.pop(ckey, None)
                self._unregister(k)
                stored.pop(k, None)
                continue
            if v is None or not len(v):
                raise ReplicaMismatch(f"container {ckey!r} has a row but no members")
            exp = row[1]
            if exp is None:
                db.expires.pop(ckey, None)
            elif db.expires.get(ckey) != exp:
                db.expires[ckey] = exp
                heapq.heappush(db.expire_heap, (exp, ckey))
        # locks: in their job's row (folded), or a row of their own, or none
        for k in dict.fromkeys(locks):
            dbi, lk = k
            fs = folded.get(dbi)
            lr = rowlock.get(k, _UNKNOWN)
            if lr is _UNKNOWN:
                lr = None
                jrow = conn.execute(_JOB_ROW, (dbi, lk[:-5])).fetchone()
                if jrow is not None and jrow[0] is not None and jrow[2] is not None:
                    lr = (jrow[2], jrow[3])
            if lr is None:
                if fs:
                    fs.discard(lk)
                reload_key(conn, dbs, stored, k)
                continue
            if fs is None:
                fs = folded[dbi] = set()
            fs.add(lk)
            stored.pop(k, None)
            db = dbs[dbi]
            db.data[lk] = bytes(lr[0])
            if lr[1] is None:
                db.expires.pop(lk, None)
            else:
                db.expires[lk] = lr[1]
                heapq.heappush(db.expire_heap, (lr[1], lk))
        out = set(jobs)
        out.update(conts)
        out.update(locks)
        return out


    def _leave(
        self, db: Any, dbi: int, jk: bytes, cur: tuple[bytes, float], conts: dict[tuple[int, bytes], Any]
    ) -> None:
        """Take job ``jk`` out of its container ``cur`` = (key, score or position), in memory."""
        ckey, s = cur
        k = (dbi, ckey)
        v = self.container(k)
        if v is None or db.data.get(ckey) is not v:
            raise ReplicaMismatch(f"job {jk!r}: no container {ckey!r}")
        member = jk[ckey.rindex(b":") + 1 :]
        if type(v) is JobList:
            ix = v._ix
            p, d = v._p, v._d
            if ix is None or member not in ix:
                raise ReplicaMismatch(f"job {jk!r}: not in {ckey!r}")
            if p[0] == s and d[0] == member:
                p.popleft()
                d.popleft()
            elif p[-1] == s and d[-1] == member:
                p.pop()
                d.pop()
            else:
                i = bisect_left(p, s)  # type: ignore[arg-type]
                if i >= len(p) or p[i] != s or d[i] != member:  # type: ignore[arg-type,index]
                    raise ReplicaMismatch(f"job {jk!r}: not at {s} in {ckey!r}")
                del p[i]
                del d[i]
            ix.discard(member)
        else:
            if member not in v._scores:
                raise ReplicaMismatch(f"job {jk!r}: not in {ckey!r}")
            log = v.pause_log()  # the store has these changes already: nothing to log for the journal
            try:
                v.remove(member)
            finally:
                v.resume_log(log)
        if not len(v) and k not in conts:
            raise ReplicaMismatch(f"container {ckey!r} emptied, its row untouched")

    def _join(
        self,
        db: Any,
        dbi: int,
        jk: bytes,
        new: tuple[bytes, float],
        conts: dict[tuple[int, bytes], Any],
        stored: dict[tuple[int, bytes], bytes],
    ) -> None:
        """Put job ``jk`` into its container ``new`` = (key, score or position), in memory."""
        ckey, s = new
        k = (dbi, ckey)
        v = self.container(k)
        if v is None:
            row = conts.get(k)
            if row is None or ckey in db.data:
                raise ReplicaMismatch(f"job {jk!r}: its container {ckey!r} is not job rows")
            if row[0] == LIST_TYPE:
                v = JobList()
                v.attach(k, positions=Positions())
                v._ix = set()
            else:
                v = ZSet()
                v.attach(k)
            db.data[ckey] = v
            self._register(k, v)
            stored[k] = JOBS
        elif db.data.get(ckey) is not v or v.journal_key != k:
            raise ReplicaMismatch(f"job {jk!r}: container {ckey!r} out of step")
        member = jk[ckey.rindex(b":") + 1 :]
        if type(v) is JobList:
            ix = v._ix
            if ix is None or member in ix:
                raise ReplicaMismatch(f"job {jk!r}: twice in {ckey!r}")
            p, d = v._p, v._d
            if not p or s > p[-1]:
                p.append(s)
                d.append(member)
            elif s < p[0]:
                p.appendleft(s)
                d.appendleft(member)
            else:
                i = bisect_left(p, s)
                if i < len(p) and p[i] == s:
                    raise ReplicaMismatch(f"job {jk!r}: position {s} of {ckey!r} is taken")
                p.insert(i, s)
                d.insert(i, member)
            v.index_add(member)
        else:
            if member in v._scores:
                raise ReplicaMismatch(f"job {jk!r}: twice in {ckey!r}")
            log = v.pause_log()
            try:
                v.add(member, s)
            finally:
                v.resume_log(log)

    # ---- start-up -------------------------------------------------------------
    def load(
        self,
        conn: sqlite3.Connection,
        dbs: list[Any],
        dirty: dict[tuple[int, bytes], Any],
        stored: dict[tuple[int, bytes], bytes],
        convert: bool = True,
        hashes: bool = False,
        rows: list[tuple[Any, ...]] | None = None,
    ) -> int:
        """Rebuild the job-row containers from the rows that name them; returns how many keys were loaded.

        ``hashes``: the core loader left the one-row job hashes (rows with a state) to this scan
        (``loader.load(skip_state=True)``): they are put in ``dbs`` as :class:`ColdHash` values from the same
        scan that finds their containers' members (one pass over the job rows instead of two).

        Containers stored generically (a store of schema version 4 or 5, one written with
        ``RESPQUEUE_JOB_ROWS=off``, or one that fell back) are marked for a rewrite, so the first batch
        turns them into job rows if they qualify; not with ``convert`` False (a replica: its store holds
        its master's rows, which may be generic, and it writes none of its own).

        ``rows``: the rows of the containers and of the locked jobs, ``(db, key, type, expire_ms, lock,
        lock_ms)``, as the core loader handed them over from its own scan (``loader.load(handoff=...,
        handoff_types=SCAN_TYPES)``, which then loaded the locked jobs' hashes itself); None: this scans
        the table for them."""
        now = mstime()
        ndb = len(dbs)
        conts: dict[tuple[int, bytes], tuple[str, int | None]] = {}
        generic: list[tuple[int, bytes]] = []
        locked: list[tuple[int, bytes, bytes, int | None]] = []
        # one scan finds the containers and the locks kept in job rows (only ever written in an owned row),
        # unless the core loader's scan handed them over
        if rows is None:
            rows = conn.execute(
                "SELECT db, key, type, expire_ms, lock, lock_ms FROM keys"
                " WHERE type IN ('joblist', 'jobzset', 'list', 'zset') OR (lock IS NOT NULL AND state IS NOT NULL)"
            ).fetchall()
            handed = False
        else:
            handed = True
        for dbi, key, typ, exp, lock, lock_ms in rows:
            if not 0 <= dbi < ndb:
                continue
            if lock is not None:
                locked.append((dbi, bytes(key), lock, lock_ms))
                continue
            k = (dbi, bytes(key))
            if typ == "list" or typ == "zset":
                if k[1].endswith(_SUFFIXES):
                    generic.append(k)
            elif exp is not None and exp <= now:
                dirty[k] = None  # expired: its keys row goes, and its members' rows are rewritten
            else:
                conts[k] = (typ, exp)
        loaded = 0
        live = list(conts)
        groups, orphans, loaded = _scan_members(conn, live, dbs if hashes else None, handed)
        for dbi, jk in orphans:
            # a state naming no job-row container (it expired): rewrite those rows without it
            if 0 <= dbi < ndb:
                dirty.setdefault((dbi, bytes(jk)), False)
        for i, k in enumerate(live):
            scores, members = groups[i]
            groups[i] = None
            if not scores:
                continue
            dbi, ckey = k
            meta = conts.pop(k)
            positions: Any = None
            if meta[0] == LIST_TYPE:
                placed = _placed(scores, members)
                if placed is not None:  # consecutive integer positions (the common case): no sort
                    positions = Positions(min(scores), len(scores))
                    members = placed
                    del placed
                else:
                    group = sorted(zip(scores, members, strict=True), key=_FIRST)  # positions are unique
                    scores = list(map(_FIRST, group))
                    members = list(map(_SECOND, group))
                    del group
            else:
                group = sorted(zip(scores, members, strict=True))  # ties in member order, as ZSet keeps them
                scores = list(map(_FIRST, group))
                members = list(map(_SECOND, group))
                del group
            db = dbs[dbi]
            v: Any
            if meta[0] == LIST_TYPE:
                v = JobList(members)
                v.attach(k, positions=positions if positions is not None else Positions.of(list(scores)))
                # the member bytes are the deque's own (positions: a run while consecutive, else the scan's floats)
                v._ix = member_index(members)
                if len(v._ix) != len(members):
                    v._dup = True  # (a store cannot hold that: one row per job)
            else:
                v = ZSet.from_sorted(list(zip(scores, members, strict=True)))
                v.attach(k)
            del scores, members
            self._register(k, v)
            db.data[ckey] = v
            stored[k] = JOBS
            if meta[1] is not None:
                db.expires[ckey] = meta[1]
                heapq.heappush(db.expire_heap, (meta[1], ckey))
            loaded += 1
        for k in conts:  # a container row without members (cannot be written so): drop it
            dirty[k] = None
        # locks kept in their job's row (only ever written in an owned row)
        for dbi, jk, lock, lock_ms in locked:
            if lock_ms is not None and lock_ms <= now:
                dirty.setdefault((dbi, jk), False)  # expired: the job's row is rewritten without it
                continue
            lk = jk + _LOCK
            db = dbs[dbi]
            db.data[lk] = bytes(lock)
            if lock_ms is not None:
                db.expires[lk] = lock_ms
                heapq.heappush(db.expire_heap, (lock_ms, lk))
            if self.find(dbi, jk) is not None:
                self.folded.setdefault(dbi, set()).add(lk)
            else:  # its job is not kept as a job row any more: the lock gets a row of its own
                dirty[(dbi, lk)] = False
                dirty.setdefault((dbi, jk), False)
        self.dbs = dbs
        # generic state containers (written by schema version 4 or 5, or fallen back): rewrite them, as
        # job rows where they qualify, in the first batch
        for k in generic if convert else ():
            v = dbs[k[0]].data.get(k[1])
            if v is not None and type(v) is not bytes:
                v.journal_key = None  # written whole in the first batch
                dirty.setdefault(k, False)
        return loaded


_UNKNOWN: Any = object()
_FAR_SEARCHES = 8  # searches for positions far from a list's ends before its member -> position map is built


def _last_row(kops: list[tuple[str, list[Any]]], upsert: str, cont: bool) -> Any:
    """A key's ``keys`` row after a group of frames, from the group's own statements for it (the last
    one wins): for a container (``cont``) ``(type, expire_ms)``, for a job ``(state, score, lock,
    lock_ms, type, expire_ms, value)``; None when deleted; ``_UNKNOWN`` when the group has no
    statement on its ``keys`` row (then the store is read)."""
    last = _UNKNOWN
    for sql, rows in kops:
        if sql == _KEY_UPSERT:
            r = rows[-1]
            last = (r[2], r[3]) if cont else (None, None, None, None, r[2], r[3], r[5])
        elif sql == upsert:
            r = rows[-1]
            last = (r[2], r[3]) if cont else (r[6], r[7], r[8], r[9], r[2], r[3], r[5])
        elif sql == JOB_UPSERT:  # (db, key, version, value, state, score): type 'hash', no TTL, no lock
            r = rows[-1]
            last = ("hash", None) if cont else (r[4], r[5], None, None, "hash", None, r[3])
        elif sql == _KEY_DEL:
            last = None
    return last


_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
_TAG = itemgetter(0)
_SCORE = itemgetter(1)
_MEMBER = itemgetter(2)
_KEY = itemgetter(3)
_VALUE = itemgetter(4)
_CASE_MAX = 16  # containers told apart by SQLite in the members' scan (more: by their state, here)
_CHUNK = 8192
# the value of a row's job hash when it is a one-row hash without a TTL (else NULL): the hashes the core
# loader leaves to this scan (``load(skip_state=True)``); others (field rows, a TTL) it loads itself
_HASH_VALUE = "iif(type = 'hash' AND expire_ms IS NULL, value, NULL)"
# ... when the core loader's scan handed the containers and locks over: it loaded the locked jobs' hashes too
_HASH_VALUE_UNLOCKED = "iif(type = 'hash' AND expire_ms IS NULL AND lock IS NULL, value, NULL)"


def _placed(scores: Any, members: list[bytes]) -> list[bytes] | None:
    """``members`` in the order of their ``scores`` when these are consecutive integers ``lo .. lo + n - 1``
    (a list's positions as pushes and pops leave them), each member put at its place at C speed: no
    ``(score, member)`` pair per member and no sort; None otherwise (or when a position is taken twice)."""
    n = len(scores)
    lo = min(scores)  # (``scores`` is an array of doubles: every one a float)
    if max(scores) - lo != n - 1 or not all(map(float.is_integer, scores)):
        return None
    out: list[Any] = [None] * n
    deque(map(out.__setitem__, map(int, map(lo.__rsub__, scores)), members), maxlen=0)
    if None in out:  # (n positions in n places: one left empty means one was taken twice)
        return None
    return out


def _put_hashes(data: dict[bytes, Any], keys: Any, values: list[Any]) -> int:
    """Put the one-row job hashes (``values`` None: not one, loaded by the core) as :class:`ColdHash` values,
    built from their stored blobs as they are (recoded in the background, respqueue/coldhash.py)."""
    before = len(data)
    if all(values):
        data.update(zip(keys, map(ColdHash, values), strict=True))
    else:
        data.update(zip(compress(keys, values), map(ColdHash, compress(values, values)), strict=True))
    return len(data) - before


def _orphan_rows(rows: Any, dbs: list[Any] | None, orphans: list[tuple[int, bytes]]) -> int:
    """Rows ``(db, key, one-row hash blob or None)`` naming no live container: each (db, key) into
    ``orphans``, each blob (``dbs`` given) into its database as a :class:`ColdHash`; how many it put."""
    ndb = len(dbs) if dbs is not None else 0
    put = 0
    for dbi, key, value in rows:
        orphans.append((dbi, key))
        if value is not None and 0 <= dbi < ndb:
            assert dbs is not None
            dbs[dbi].data[key] = ColdHash(value)
            put += 1
    return put


def _scan_members(
    conn: sqlite3.Connection, live: list[tuple[int, bytes]], dbs: list[Any] | None = None, handed: bool = False
) -> tuple[list[Any], list[tuple[int, bytes]], int]:
    """One scan of the rows with a state: per container of ``live`` (its index there) its scores (an array of
    doubles) and its members (a list), in the rows' order; the (db, key) of the rows naming none of them; and
    (``dbs`` given: the core loader left these rows' hashes to this scan) how many job hashes it put in ``dbs``. Up to ``_CASE_MAX``
    containers SQLite names each row's container (a small int) and cuts its member out of its key, so a
    row costs small columns (and the key and blob of its hash) and no object of ours; more take the state
    and key of each row. ``handed``: the core loader loaded the hashes of the rows with a lock (see
    ``JobLayout.load``'s ``rows``): they are not put again."""
    groups: list[Any] = [(array("d"), []) for _ in live]  # (scores as C doubles: no float object kept per row)
    orphans: list[tuple[int, bytes]] = []
    ndb = len(dbs) if dbs is not None else 0
    hv = (_HASH_VALUE_UNLOCKED if handed else _HASH_VALUE) if dbs is not None else "NULL"
    put = 0
    if not live:
        put = _orphan_rows(conn.execute(f"SELECT db, key, {hv} FROM keys WHERE state IS NOT NULL"), dbs, orphans)  # noqa: S608
        return groups, orphans, put
    if len(live) <= _CASE_MAX:
        case = " ".join(["WHEN db = ? AND state = ? THEN ?"] * len(live))
        cpar = [x for i, k in enumerate(live) for x in (k[0], k[1], i)]
        # With the hashes (``dbs``) the keys are read anyway: each member is then cut from its key here, at its
        # container's offset (a slice per container), not by SQLite: one column less per row (each column the
        # sqlite3 module reads costs a release of the interpreter lock and a lock of the connection's mutex,
        # more than the cut)
        cut = dbs is not None
        slices = [slice(k[1].rindex(b":") + 1, None) for k in live]
        if cut:
            sql = f"SELECT CASE {case} ELSE -1 END, score, key, {hv} FROM keys WHERE state IS NOT NULL"  # noqa: S608
            params = cpar
            kget, vget = _MEMBER, _KEY  # (columns 2 and 3)
        else:
            starts = {k[1].rindex(b":") + 2 for k in live}
            spar: list[Any]
            if len(starts) == 1:  # the containers of one queue (or of queues whose names are as long): one CASE
                sub, spar = "?", list(starts)
            else:
                sub = f"CASE {case} ELSE 1 END"
                spar = [x for k in live for x in (k[0], k[1], k[1].rindex(b":") + 2)]
            sql = f"SELECT CASE {case} ELSE -1 END, score, substr(key, {sub}), NULL, NULL FROM keys WHERE state IS NOT NULL"  # noqa: S608
            params = cpar + spar
            kget, vget = _KEY, _VALUE
        cur = conn.execute(sql, params)
        dbi0 = live[0][0] if all(k[0] == live[0][0] for k in live) else None
        stray = False
        while True:
            rows = cur.fetchmany(_CHUNK)
            if not rows:
                break
            tags = list(map(_TAG, rows))
            if -1 in tags:
                stray = True
                rows = list(compress(rows, map((-1).__ne__, tags)))
                tags = list(map(_TAG, rows))
            keys = list(map(kget, rows)) if cut else []
            members: Any = (
                (map(getitem, keys, repeat(slices[0])) if len(live) == 1 else map(getitem, keys, map(slices.__getitem__, tags)))
                if cut else map(_MEMBER, rows)
            )
            if len(live) == 1:
                g = groups[0]
                g[0].extend(map(_SCORE, rows))
                g[1].extend(members)
            else:
                for r, m in zip(rows, members, strict=True):
                    g = groups[r[0]]
                    g[0].append(r[1])
                    g[1].append(m)
            if dbs is not None:
                values = list(map(vget, rows))
                if dbi0 is not None:
                    put += _put_hashes(dbs[dbi0].data, keys, values)
                else:
                    for r, k, v in zip(rows, keys, values, strict=True):
                        if v is not None:
                            dbs[live[r[0]][0]].data[k] = ColdHash(v)
                            put += 1
        if stray:
            put += _orphan_rows(conn.execute(
                f"SELECT db, key, {hv} FROM keys WHERE state IS NOT NULL AND CASE {case} ELSE -1 END < 0",  # noqa: S608
                cpar,
            ), dbs, orphans)
        return groups, orphans, put
    idx = {k: i for i, k in enumerate(live)}
    plens = [k[1].rindex(b":") + 1 for k in live]
    for dbi, st, sc, key, value in conn.execute(f"SELECT db, state, score, key, {hv} FROM keys WHERE state IS NOT NULL"):  # noqa: S608
        if value is not None and 0 <= dbi < ndb:
            assert dbs is not None
            dbs[dbi].data[key] = ColdHash(value)
            put += 1
        i = idx.get((dbi, bytes(st)))
        if i is None:
            orphans.append((dbi, bytes(key)))
        else:
            g = groups[i]
            g[0].append(sc)
            g[1].append(bytes(key[plens[i] :]))
    return groups, orphans, put


def _make(conn: sqlite3.Connection) -> JobLayout | None:
    """The layout for a store opening (RESPQUEUE_JOB_ROWS=off: generic rows, unless the store already holds
    job rows, which only this layout can load)."""
    return JobLayout() if enabled() or present(conn) else None


register_layout(_make)  # with the core's persistence, at import (cli.load_plugins): the core never imports compat

"""Job-history capture inside the server (``server.history``).

BullMQ writes every lifecycle event of a job to the stream ``<prefix>:<queue>:events`` with XADD. The
capture subscribes to the core's ``stream_added`` hook (respqueue/events.py) when it opens, and
:func:`on_stream_added` hands the entries of streams whose name ends in ``:events`` to
:meth:`HistoryCapture.on_event` (the core knows nothing of events streams). The capture reads the job
hash ``<prefix>:<queue>:<jobId>`` from the same database and adds the event (and, for a job that finished,
its final record) to the open chunk of its queue: one ``history_chunks`` row per queue per journal batch
(compat/history_schema.py; ``job_events`` and ``job_final`` are views over the chunks). Each event and final
record goes into the chunk as its JSON text, formatted once from the values' bytes (the same text
``history_schema.pack`` writes for the decoded values). The chunk's row is appended to the journal's open
batch when its first event comes and filled in (the texts joined) when the batch closes, so it commits in
the same SQLite transaction as the writes it records: no extra round trip, no disk wait on the hot path,
and a batch of many job transitions costs the writer one history row per queue.

BullMQ events map to the history vocabulary (``compat.history_schema.EVENTS``):

* ``added``, ``waiting``, ``delayed``, ``active``, ``progress``, ``stalled``, ``completed``, ``failed``,
  ``removed``: as they come;
* ``retried``: a job leaves ``active`` for ``waiting`` (retryJob) or ``delayed`` (backoff, moveToDelayed)
  after a failed attempt, i.e. its ``atm`` (attemptsMade) grew while it was active. A stalled job also
  goes back to ``waiting`` (without an attempt): that stays ``waiting``, followed by ``stalled``;
* other per-job events (``waiting-children``, ``duplicated``, ``deduplicated``, custom ones carrying a
  ``jobId``) are kept under their own name; ``retries-exhausted`` (always right after the final
  ``failed``) and events without a ``jobId`` (``drained``, ``paused``, ``cleaned``...) are skipped.

``delay_ms`` is the job's relative delay (``added``, ``delayed``; for a ``retried`` with backoff, the
backoff), not the absolute time BullMQ puts in the event. ``job_final`` is the job hash as BullMQ left
it: its ``delay`` is 0 for a job that was promoted from ``delayed`` (BullMQ resets the field); the delay
it was added with is in ``opts`` and in the ``added`` event's ``delay_ms``.

``attempt`` is the attempt the event belongs to: ``atm + 1`` while it runs (active, progress, stalled),
``atm`` once it ended (retried, completed, failed). ``worker`` is the job's ``pb`` (the Worker's ``name``
option), unset for unnamed workers. For ``active`` it is only known after the script's HMSET that
follows the XADD, so that event is completed at the job's next event or when the batch closes.

With ``removeOnComplete``/``removeOnFail`` the job hash is deleted before the ``completed``/``failed``
event is written (and BullMQ's removeJob deletes it before ``removed``), in the same script: the capture
subscribes to the core's ``key_deleted`` hook and keeps the hashes deleted in the open batch until it closes,
so the final record still holds name, data, opts, timestamps and attemptsMade. ``finishedOn`` is then the
event's time (the script's own timestamp is not visible to XADD). The capture holds no reference to a job
hash beyond that batch (a waiting job's hash is the keyspace's alone); of an active job it remembers only
its attemptsMade when it went active (for ``retried``), in a bounded map.

Retention (``--history-retention``, default 7d) runs in the background: it deletes the chunks whose last
event is older (and old rows of the legacy tables) 2,000 rows at a time through the journal (each delete
is one op in a normal batch), never on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
import time
from json.encoder import encode_basestring
from typing import Any

from compat.history_schema import (
    CHUNK_INSERT,
    CHUNK_MAX,
    EVENTS,
    HISTORY_STATEMENTS,
    HISTORY_TABLES,
    LEGACY_NAMES,
    upgrade_legacy,
)
from respqueue import events
from respqueue.keyspace import Database
from respqueue.persistence import register_plugin
from respqueue.persistence.journal import Journal
from respqueue.persistence.store import register_schema
from respqueue.types.hash import HASHES, ColdHash, Hash

log = logging.getLogger("respqueue")

# Retention: one op per PURGE_CHUNK rows. Chunk ids are never reused (AUTOINCREMENT), so every chunk may go.
CHUNKS_PURGE = ("DELETE FROM history_chunks WHERE id IN (SELECT id FROM history_chunks WHERE last_ms < ?"
                " ORDER BY last_ms LIMIT ?)")
EVENTS_PURGE = ("DELETE FROM job_events_legacy WHERE id IN (SELECT id FROM job_events_legacy WHERE ts_ms < ?"
                " ORDER BY ts_ms LIMIT ?)")
FINALS_PURGE = ("DELETE FROM job_final_legacy WHERE rowid IN (SELECT rowid FROM job_final_legacy"
                " WHERE recorded_ms < ? LIMIT ?)")
PURGE_CHUNK = 2000

DEFAULT_RETENTION = "7d"
CACHE_LIMIT = 50_000  # active jobs whose attemptsMade the capture remembers (per generation)
GONE_LIMIT = 100_000  # hashes deleted in one batch that the capture keeps until the batch closes

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw]?)\s*$", re.IGNORECASE)


def parse_retention(v: str | int) -> int:
    """``3600s``, ``90m``, ``12h``, ``7d``, ``2w`` or plain seconds -> seconds (0: keep forever)."""
    m = _DURATION.match(str(v))
    if not m:
        raise ValueError(f"bad history retention {v!r}: use a number of seconds or e.g. 3600s, 90m, 12h, 7d")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def parse_switch(v: str | bool | None) -> bool:
    """``on``/``off`` (also yes/no, true/false, 1/0)."""
    if isinstance(v, bool):
        return v
    s = str(v if v is not None else "on").strip().lower()
    if s in ("on", "yes", "true", "1"):
        return True
    if s in ("off", "no", "false", "0"):
        return False
    raise ValueError(f"bad --history value {v!r}: use on or off")


def history_statements() -> list[str]:
    """The DDL of the history tables and views as single statements (for the store's migration)."""
    return list(HISTORY_STATEMENTS)


#: the history in chunks: the store's schema version 7 (version 2 added the row-per-event tables, which
#: ``upgrade_legacy`` renames to ``*_legacy`` before the statements make the views)
register_schema("history", 7, history_statements(), HISTORY_TABLES, upgrade=upgrade_legacy,
                former_names=LEGACY_NAMES)


def _s(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "replace")


def _i(b: bytes | None) -> int | None:
    if b is None:
        return None
    try:
        return int(b)
    except ValueError:
        try:
            return int(float(b))
        except (ValueError, OverflowError):  # (nan, inf, a number past int()'s digit limit that float() makes inf)
            return None


# ---- the chunk's JSON, written per event ----------------------------------------------------------------
# Each event (final record) is appended to its chunk as the UTF-8 of its JSON array, the very text that
# ``history_schema.pack`` writes for it (``json`` with ``ensure_ascii=False`` and no spaces: a string through
# ``encode_basestring``, an int as ``repr``), so the batch's close only joins them: no list per event, no
# str per field, no pass of the json encoder over the chunk. A field read from the job hash goes in as its
# bytes where they are already their JSON (a decimal in canonical form; a job id of digits inside quotes).
_NULL = b"null"
_ebs = encode_basestring  # (what json's encoder uses for a str when ensure_ascii is off)
# a short value that repeats (job names, worker names, opts) -> its JSON string; cleared when full
_SJ: dict[bytes, bytes] = {}
SJ_LIMIT = 4096
SJ_MAX_LEN = 256


def _js(b: bytes | None) -> bytes:
    """JSON of ``_s(b)`` (UTF-8): a JSON string, or null."""
    if b is None:
        return _NULL
    return _ebs(b.decode("utf-8", "replace")).encode()  # type: ignore[no-any-return]


def _jsm(b: bytes | None) -> bytes:
    """:func:`_js` through a bounded memo, for values that repeat."""
    if b is None:
        return _NULL
    try:
        j = _SJ.get(b)
    except TypeError:  # (not hashable: a bytearray)
        return _js(b)
    if j is None:
        j = _ebs(b.decode("utf-8", "replace")).encode()
        if len(b) <= SJ_MAX_LEN:
            if len(_SJ) >= SJ_LIMIT:
                _SJ.clear()
            _SJ[b] = j
    return j  # type: ignore[no-any-return]


def _ji(b: bytes | None) -> bytes:
    """JSON of ``_i(b)``: null or a decimal (a canonical one is ``b`` itself)."""
    if b is not None and b.isdigit() and (b[0] != 48 or len(b) == 1):
        return b
    v = _i(b)
    return _NULL if v is None else b"%d" % v


def _jn(v: int | None) -> bytes:
    """JSON of an int or None."""
    return _NULL if v is None else b"%d" % v


def _jid(b: bytes) -> bytes:
    """A job id as the inside of its JSON string (no quotes): itself when it is digits."""
    return b if b.isdigit() else _ebs(b.decode("utf-8", "replace"))[1:-1].encode()  # type: ignore[no-any-return]


# the event arrays ``[ts_ms, job_id, job_name, event, attempt, worker, failed_reason, returnvalue_size,
# delay_ms]`` by the paths that write them (ts_ms: the bytes of the decimal; job_id: inside its quotes), with
# no trailing nulls (``history_schema.pack``'s form; ``->>`` and the export read a missing element as null)
_ADDED = b'[%s,"%s",%s,"added"%s]'  # + ",null,null,null,null,<delay>" for a delayed job
_WAITING = b'[%s,"%s",%s,"waiting"]'
# the events of a job that waits (added, or back in a queue, or for its children): a cold job hash is read, not
# thawed, for them
_WAITING_EVENTS = frozenset((b"added", b"waiting", b"delayed", b"waiting-children"))
_ACTIVE = b'[%s,"%s",%s,"active",%d%s]'  # + ",<worker>" when the worker is known
_FINISHED = b'[%s,"%s",%s,"%s",%s,%s,%s,%s]'  # event: completed or failed (then _trim)
_EVENT = b'[%s,"%s",%s,%s,%s,%s,%s,null,%s]'  # the other events (their returnvalue_size is null; then _trim)
_NULL_END = b",null]"


def _trim(s: bytes) -> bytes:
    """An event's JSON array without its trailing nulls (an event's 4th element, its name, is never null, and
    a JSON string ends with a quote: only a bare null can end in ``,null]``)."""
    while s.endswith(_NULL_END):
        s = s[:-6] + b"]"
    return s


def _active(msb: bytes, jq: bytes, nj: bytes, atm: int, pb: bytes | None) -> bytes:
    """The ``active`` event (``pb``: its worker's name, None when the job hash has none)."""
    return _ACTIVE % (msb, jq, nj, atm, b"" if pb is None else b"," + _jsm(pb))
# the final record ``[job_id, name, data, opts, timestamp, delay, processed_on, finished_on, attempts_made,
# failed_reason, returnvalue, state]``
_FINAL = b'["%s",%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,"%s"]'
_KINDJ = {e.encode(): _ebs(e).encode() for e in EVENTS}  # event name -> its JSON string


class _Chunk:
    """The open batch's history of one queue: its ``history_chunks`` row (in the journal's batch already,
    filled in when the batch closes), its events and final records as their JSON arrays, and its events'
    times."""

    __slots__ = ("row", "events", "ms", "finals")

    def __init__(self, row: list[Any]) -> None:
        self.row = row
        self.events: list[bytes] = []  # (an active event waiting for its worker: b"" until resolved)
        self.ms: list[int] = []
        self.finals: list[bytes] = []


class HistoryCapture:
    """Hooked on ``server.history``; see the module docstring."""

    def __init__(self, server: Any, journal: Journal, retention_s: int) -> None:
        self.server = server
        self.journal = journal  # (typed: the compiled capture reads its open batch's rows directly)
        self.retention_s = retention_s
        self._keys: dict[bytes, tuple[str, str, bytes] | None] = {}
        # the active jobs' attemptsMade when they went active, in two generations (bounded: an active job
        # whose attempt never ends in an event, one of an obliterated queue, ages out): its job key (database
        # 0) or (db, job key) -> atm, from the job's 'active' to the next event that ends the attempt
        self._cur: dict[Any, int] = {}
        self._old: dict[Any, int] = {}
        # the hashes deleted in the open batch (the ``key_deleted`` hook), keyed as above: BullMQ deletes a
        # job's hash before the 'completed'/'failed' (removeOnComplete/removeOnFail) or 'removed' event that
        # the same script writes; the capture reads the hash as it was from here. Cleared when the batch closes
        self._gone: dict[Any, Any] = {}
        # active events whose worker (pb) is set by the script after the XADD: (db, job key) -> (its chunk's
        # events, its index there, ts_ms, job id, name, attempt, hash): written once the worker is known
        self._unresolved: dict[Any, tuple[list[bytes], int, bytes, bytes, bytes, int, Any]] = {}
        # the last event's time and its decimal (the events of a batch share a few times)
        self._ms = -1
        self._msb = b""
        # the open batch's chunks: job key base (b"<prefix>:<queue>:") -> the queue's open chunk; all of them
        self._open: dict[bytes, _Chunk] = {}
        self._chunks: list[_Chunk] = []
        # the journal's extra rows of the open batch, where the open chunks' rows are
        self._rows: dict[str, list[Any]] | None = journal.row_ops
        self._task: asyncio.Task[None] | None = None
        # the last event, when it was an 'added' whose job hash exists: (jobId, stream key, db, job key, hash,
        # chunk, job key base, jobId and name as written, name bytes from the hash); BullMQ's add scripts
        # write 'waiting' right after it
        self._added: tuple[Any, ...] | None = None
        self.events = 0  # events and final records written (counted when their batch closes)
        self.finals = 0
        self.purged = 0
        self.metrics: Any = None  # compat.metrics.QueueMetrics when --metrics-port is set
        self.chunks = 0
        journal.batch_hooks.append(self.close_batch)
        journal.close_hooks.append(self.stop)

    # ---- lifecycle ----------------------------------------------------------
    def start(self) -> None:
        if self.retention_s <= 0 or self._task is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._task = loop.create_task(self._retention_loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    # ---- the active jobs, the hashes deleted -----------------------------------------
    def _activated(self, ck: Any, atm: int) -> None:
        cur = self._cur
        cur[ck] = atm
        if len(cur) > CACHE_LIMIT:
            self._old = cur
            self._cur = {}

    def _ended(self, ck: Any) -> int | None:
        """The job's attempt ended (or it is gone): its atm when it went active, None when not known."""
        a = self._cur.pop(ck, None)
        old = self._old
        if old:
            b = old.pop(ck, None)
            if a is None:
                a = b
        return a

    def deleted(self, dbi: int, key: bytes, value: Any) -> None:
        """``key`` (a hash: ``value``) was deleted: kept for the open batch's events (see ``_gone``)."""
        gone = self._gone
        if len(gone) >= GONE_LIMIT:
            gone.clear()
        gone[key if dbi == 0 else (dbi, key)] = value

    # ---- capture ----------------------------------------------------------------
    def _key_info(self, key: bytes) -> tuple[str, str, bytes] | None:
        base = key[:-7]  # without ":events"
        prefix, sep, queue = base.rpartition(b":")
        info = (_s(prefix) or "", _s(queue) or "", base + b":") if sep and queue else None
        if len(self._keys) > 10_000:
            self._keys.clear()
        self._keys[key] = info
        return info

    def resolve_all(self) -> None:
        """The active events still waiting for their worker take it from the hash now."""
        if self._unresolved:
            for u in self._unresolved.values():
                u[0][u[1]] = _active(u[2], u[3], u[4], u[5], u[6].get(b"pb"))
            self._unresolved.clear()

    def close_batch(self) -> None:
        """The journal's batch closes (``batch_hooks``): fill in its chunks' rows (JSON), open new ones after."""
        self.resolve_all()
        if self._gone:
            self._gone = {}
        if not self._chunks:
            return
        now = int(time.time() * 1000)
        for ch in self._chunks:
            evs = ch.events
            row = ch.row
            if evs:
                ms = ch.ms
                row[0] = min(ms)
                row[1] = max(ms)
            else:
                row[0] = row[1] = now
            row[2] = now
            row[5] = len(evs)
            self.events += len(evs)
            self.finals += len(ch.finals)
            # (each part is valid UTF-8: ASCII where written as is, else encode_basestring's str encoded)
            row[6] = (b"[" + b",".join(evs) + b"]").decode()
            row[7] = (b"[" + b",".join(ch.finals) + b"]").decode() if ch.finals else None
        self.chunks += len(self._chunks)
        self._chunks = []
        self._open = {}
        self._added = None
        self._rows = None  # the journal takes its rows next: the next event opens new chunks

    def _chunk(self, jbase: bytes, prefix: str, queue: str) -> _Chunk:
        """The open chunk of the queue (a new one, its row appended to the open batch, when there is none
        or it is full)."""
        if self._rows is not self.journal.row_ops:  # the journal dropped its open batch's rows (a rollback)
            self._rows = self.journal.row_ops
            self._open = {}
            self._chunks = []
        ch = self._open.get(jbase)
        if ch is None or len(ch.events) >= CHUNK_MAX:
            ch = _Chunk([0, 0, 0, prefix, queue, 0, "[]", None])
            self._open[jbase] = ch
            self._chunks.append(ch)
            self.journal.append_row(CHUNK_INSERT, ch.row)
        return ch

    def on_event(self, c: Any, key: bytes, ms: int, argv: list[bytes], pos: int) -> None:
        """XADD added an entry (fields ``argv[pos:]``, ID time ``ms``) to the stream ``key`` (``...:events``).

        This runs inside every BullMQ script that writes an event, so it is kept lean: the job hash is
        read through its dict, most events take one dict lookup per value they record, and the event goes
        into its chunk as its JSON text, formatted once from the values' bytes."""
        n = len(argv)
        ev: bytes | None
        jid: bytes | None
        if n >= pos + 4 and argv[pos] == b"event" and argv[pos + 2] == b"jobId":
            ev = argv[pos + 1]  # BullMQ always starts with these two fields
            jid = argv[pos + 3]
            rest = pos + 4
        else:
            rest = pos
            ev = self._field(argv, pos, b"event")
            jid = self._field(argv, pos, b"jobId")
            if ev is None or jid is None:
                return
        if ms != self._ms:
            self._ms = ms
            self._msb = b"%d" % ms
        ad = self._added
        if ad is not None:
            # 'waiting' right after the job's 'added' (an add script): the same job, hash and chunk (no
            # attempt to compare), so the row is the event's name and the job's
            self._added = None
            if ev == b"waiting" and jid == ad[0] and key == ad[1] and c.db is ad[2]:
                h = ad[2].data.get(ad[3])
                ach: _Chunk = ad[5]
                if (h is ad[4] and self._rows is self.journal.row_ops and self._open.get(ad[6]) is ach
                        and len(ach.events) < CHUNK_MAX):
                    if type(h) is Hash:
                        nm = h.d.get(b"name")
                        nj = ad[8] if nm is ad[9] else _jsm(nm)
                    else:
                        nj = ad[8]  # (a cold hash, the same object: its name has not changed)
                    ach.events.append(_WAITING % (self._msb, ad[7], nj))
                    ach.ms.append(ms)
                    return
        info = self._keys.get(key, False)
        if info is False:
            info = self._key_info(key)
        if info is None:
            return
        prefix, queue, jbase = info  # type: ignore[misc]
        db: Database = c.db
        jkey = jbase + jid
        dbi = db.index
        ck = jkey if dbi == 0 else (dbi, jkey)
        h = db.data.get(jkey)
        if h is not None and type(h) is not Hash:
            if type(h) is ColdHash:
                if ev not in _WAITING_EVENTS:  # (a waiting job's is read as it is: new jobs are stored cold)
                    # a cold job: a plain Hash again, as any reader gets it (an 'active' one is written next,
                    # which notes it for compaction: not noted here)
                    h = db.thaw(jkey, h, ev != b"active")
            elif getattr(h, "rtype", None) != b"hash":
                h = None
        if self._unresolved:
            u = self._unresolved.pop(ck, None)
            if u is not None:
                u[0][u[1]] = _active(u[2], u[3], u[4], u[5], u[6].get(b"pb"))
        # the hash as it is, or as it was when the open batch deleted it
        src = h if h is not None else (self._gone.get(ck) if self._gone else None)
        # the hash's own dict when it is a plain Hash (no method call per field)
        g = None if src is None else (src.d.get if type(src) is Hash else src.get)
        nm = g(b"name") if g is not None else None
        if ev == b"retries-exhausted":
            return  # always right after the final 'failed' event, which says the same
        # the queue's open chunk (self._chunk's common case inlined: it is there, not full, and the
        # journal still holds the open batch's rows)
        ch = self._open.get(jbase) if self._rows is self.journal.row_ops else None
        if ch is None or len(ch.events) >= CHUNK_MAX:
            ch = self._chunk(jbase, prefix, queue)
        # the event's JSON: its time, job id (inside quotes) and name as they are written
        msb = self._msb
        jq = jid if jid.isdigit() else _jid(jid)
        if nm is None:
            nj = _NULL
        else:
            try:
                nj = _SJ.get(nm) or _jsm(nm)  # (_jsm inlined for a name seen before)
            except TypeError:
                nj = _js(nm)
        evs = ch.events
        ch.ms.append(ms)
        if ev == b"active":
            if g is not None:
                x = g(b"atm")
                atm = 0 if x is None else int(x) if x.isdigit() and len(x) < 19 else (_i(x) or 0)
            else:
                atm = 0
            if h is not None:
                self._activated(ck, atm)
                # its worker (pb) is set after the XADD: the event is written at the job's next event or
                # when the batch closes
                self._unresolved[ck] = (evs, len(evs), msb, jq, nj, atm + 1, h)
                evs.append(b"")
            else:
                evs.append(_active(msb, jq, nj, atm + 1, None))
            return
        if ev == b"completed" or ev == b"failed":
            rv = fr = None
            if ev == b"completed":  # (BullMQ puts it first: no search)
                rv = argv[rest + 1] if n > rest + 1 and argv[rest] == b"returnvalue" else self._field(argv, rest, b"returnvalue")
            else:
                fr = self._field(argv, rest, b"failedReason")
            if g is not None:
                x = g(b"atm")
                aj = x if x is not None and x.isdigit() and x[0] != 48 else _ji(x)
                x = g(b"pb")
                wj = _NULL if x is None else _jsm(x)
            else:
                aj = wj = _NULL
            evs.append(_trim(_FINISHED % (msb, jq, nj, ev, aj, wj, _NULL if fr is None else _js(fr),
                                          _NULL if rv is None else b"%d" % len(rv))))
            self._final(ch, jq, nj, aj, ev, ms, g, h is not None, rv, fr)
            if self.metrics is not None:
                self.metrics.finished(db.index, prefix, queue, ev == b"completed", ms, g, h is not None)
            self._ended(ck)
            return
        if ev == b"added":
            if h is not None:
                self._added = (jid, key, db, jkey, h, ch, jbase, jq, nj, nm)
            if nm is None:
                nj = _js(self._field(argv, rest, b"name"))
            dj = _NULL
            if h is not None:
                d = g(b"delay")  # type: ignore[misc]
                if d is not None and d != b"0":
                    dj = _jn(_i(d) or None)
            if self.metrics is not None:
                self.metrics.added(db.index, prefix, queue, ms)
            evs.append(_ADDED % (msb, jq, nj, b"" if dj is _NULL else b",null,null,null,null," + dj))
            return
        attempt = worker = reason = delay = None
        kj = _KINDJ.get(ev) or _js(ev)
        if ev == b"waiting" or ev == b"delayed":
            a0 = self._ended(ck) if self._cur or self._old else None  # (back in a queue: no longer active)
            if a0 is not None and g is not None:
                atm = _i(g(b"atm")) or 0
                if atm > a0:
                    kj = b'"retried"'
                    attempt = atm
                    worker = g(b"pb")
                    reason = g(b"failedReason")
                    if self.metrics is not None:
                        self.metrics.retried(db.index, prefix, queue)
            if ev == b"delayed" and g is not None:
                delay = _i(g(b"delay")) or None
        elif ev == b"progress" or ev == b"stalled":
            if g is not None:
                attempt = (_i(g(b"atm")) or 0) + 1
                worker = g(b"pb")
            if ev == b"stalled":
                self._ended(ck)
        elif ev == b"removed":
            self._ended(ck)
        evs.append(_trim(_EVENT % (msb, jq, nj, kj, _jn(attempt), _jsm(worker), _js(reason), _jn(delay))))

    @staticmethod
    def _field(argv: list[bytes], pos: int, name: bytes) -> bytes | None:
        n = len(argv) - 1
        i = pos
        while i < n:
            if argv[i] == name:
                return argv[i + 1]
            i += 2
        return None

    def _final(self, ch: _Chunk, jq: bytes, nj: bytes, aj: bytes, state: bytes, ms: int, g: Any, live: bool,
               rv: bytes | None, fr: bytes | None) -> None:
        """The job's final record (a ``job_final`` row) into the chunk ``ch``: ``jq``, ``nj``, ``aj`` its job id
        (inside quotes), name and attemptsMade as the event has them; ``g`` reads a field of its hash (None:
        the hash is unknown). ``recorded_ms`` is the chunk's."""
        if g is not None:
            # (_ji's common case inlined: a decimal that does not start with 0, or "0" for the delay)
            x = g(b"processedOn")
            pj = x if x is not None and x.isdigit() and x[0] != 48 else _ji(x)
            fj = _NULL
            if live:
                y = g(b"finishedOn")
                fj = y if y is not None and y.isdigit() and y[0] != 48 else _ji(y)
            if fj is _NULL:
                fj = b"%d" % max(ms, _i(x) or 0)
            if fr is None:
                fr = g(b"failedReason")
            if rv is None:
                rv = g(b"returnvalue")
            x = g(b"opts")
            oj = _NULL if x is None else (_SJ.get(x) or _jsm(x))
            x = g(b"timestamp")
            tj = x if x is not None and x.isdigit() and x[0] != 48 else _ji(x)
            x = g(b"delay")
            dj = x if x == b"0" else _ji(x)
            f = _FINAL % (jq, nj, _js(g(b"data")), oj, tj, dj, pj, fj, aj, _NULL if fr is None else _js(fr),
                          _NULL if rv is None else _js(rv), state)
        else:
            f = _FINAL % (jq, _NULL, _NULL, _NULL, _NULL, _NULL, _NULL, b"%d" % ms, _NULL, _js(fr), _js(rv), state)
        ch.finals.append(f)

    # ---- retention ------------------------------------------------------------------
    def _interval(self) -> float:
        return min(60.0, max(0.5, self.retention_s / 10))

    async def _retention_loop(self) -> None:
        path = self.journal.store.path
        conn: sqlite3.Connection | None = None
        try:
            while True:
                await asyncio.sleep(self._interval())
                try:
                    if conn is None:
                        conn = await asyncio.to_thread(_read_conn, path)
                    await self.purge(conn)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # noqa: BLE001 - retention must never take the server down
                    log.warning("history retention: %s", e)
        finally:
            if conn is not None:
                conn.close()

    async def purge(self, conn: sqlite3.Connection) -> int:
        """Delete rows older than the retention, chunk by chunk, each chunk in a journal batch."""
        cutoff = int(time.time() * 1000) - self.retention_s * 1000
        total = 0
        for count_sql, purge_sql in (
            ("SELECT count(*) FROM (SELECT 1 FROM history_chunks WHERE last_ms < ? LIMIT 1000000)", CHUNKS_PURGE),
            ("SELECT count(*) FROM (SELECT 1 FROM job_events_legacy WHERE ts_ms < ? LIMIT 1000000)", EVENTS_PURGE),
            ("SELECT count(*) FROM (SELECT 1 FROM job_final_legacy WHERE recorded_ms < ? LIMIT 1000000)",
             FINALS_PURGE),
        ):
            n = await asyncio.to_thread(_count, conn, count_sql, cutoff)
            while n > 0:
                bid = self.journal.append_op(purge_sql, (cutoff, PURGE_CHUNK))
                while self.journal.committed_id < bid:
                    await asyncio.sleep(0.02)
                    if self.journal.failed_ops is not None:
                        await asyncio.sleep(1.0)
                total += min(PURGE_CHUNK, n)
                n -= PURGE_CHUNK
        self.purged += total
        return total


def _read_conn(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False, timeout=5)
    return conn


def _count(conn: sqlite3.Connection, sql: str, cutoff: int) -> int:
    row = conn.execute(sql, (cutoff,)).fetchone()
    conn.rollback()
    return int(row[0])


def on_stream_added(c: Any, key: bytes, sid: int, argv: list[bytes], pos: int) -> None:
    """The ``stream_added`` hook (respqueue/events.py): an XADD to a BullMQ events stream records the job's
    life in the server's capture, if it has one."""
    if key.endswith(b":events"):
        h = c.server.history
        if h is not None:
            h.on_event(c, key, sid >> 64, argv, pos)


def on_key_deleted(db: Any, key: bytes, value: Any) -> None:
    """The ``key_deleted`` hook (respqueue/events.py): a hash deleted (a job's, by BullMQ's removeJobKeys) is
    kept for the rest of the open batch, so an event the same script writes next still reads the job."""
    if type(value) is bytes:
        return  # (a string: a job's lock, most often)
    h = db.server.history
    if h is not None and isinstance(value, HASHES):
        h.deleted(db.index, key, value)


def open_history(server: Any, journal: Any) -> HistoryCapture | None:
    """Build the capture from the server's config (None when ``--history off``); subscribes to XADDs."""
    cfg = server.config
    if not parse_switch(getattr(cfg, "history", "on")):
        return None
    events.subscribe("stream_added", on_stream_added)
    events.subscribe("key_deleted", on_key_deleted)
    return HistoryCapture(server, journal, parse_retention(getattr(cfg, "history_retention", DEFAULT_RETENTION)))


def check_config(cfg: Any) -> None:
    """Validate ``--history`` and ``--history-retention`` (ValueError with the message)."""
    parse_switch(getattr(cfg, "history", "on"))
    parse_retention(getattr(cfg, "history_retention", DEFAULT_RETENTION))


def attach(server: Any, journal: Any) -> None:
    """The store is open: start the capture (``server.history``) unless ``--history off``."""
    server.history = open_history(server, journal)
    if server.history is not None:
        server.history.start()


register_plugin("history", check_config, attach)

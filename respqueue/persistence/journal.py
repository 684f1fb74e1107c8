"""Change capture, batches and group commit.

:meth:`Journal.key_changed` is what ``Database.modified`` does for every
change (it runs the common case, a batch already scheduled, inline); it only notes the key. A batch closes between top-level commands
(``loop.call_soon``), so it always holds whole commands, EXECs and scripts.
Closing turns the noted keys into row operations (see :meth:`_materialize`; the rows of each
type are codec.py's, the generic-row layout, and a registered layout's such as compat/engine/layout.py)
and hands them to the store's writer thread; while the writer is busy the
next batch keeps accumulating (group commit). In durable mode a connection
whose command wrote holds its output until the batch that holds the write
has committed (see ``ClientConnection.journal_hold``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from ..resp import RedisError
from ..stats import LATENCY_BOUNDS_S, SIZE_BOUNDS, Histogram
from ..types.hash import ColdHash
from .codec import KEY_DEL as _KEY_DEL
from .codec import KEY_UPSERT as _KEY_UPSERT
from .codec import (
    LIST_COMPACT_MAX,
    SCHUNK_UPSERT,
    TYPE_NAME,
    delta_rows,
    drop_rows,
    full_rows,
    hash_blob,
    list_blob,
    stream_delta_rows,
    stream_meta,
    string_chunk_rows,
    string_range_rows,
)
from .store import ALL_TABLES, STRING_CHUNK, Store

if TYPE_CHECKING:
    from ..keyspace import Database
    from ..server import Server

log = logging.getLogger("respqueue")

_JOBS = b"jobs"  # stored[k] of a container kept as job rows by the layout
_HASH = b"hash"
_LIST = b"list"
_STRING = b"string"
_STREAM = b"stream"

NEVER = 1 << 62  # Journal.limit when no count of changes closes the open batch

MISCONF = (
    "MISCONF Errors writing to the SQLite store at {path}: {err}. "
    "Commands that may modify the data set are disabled until the store is writable again."
)


class Journal:
    """The persistence hooks of a server (``server.journal``)."""

    def __init__(self, server: Server, store: Store, mode: str, buffer_ms: int = 10, buffer_writes: int = 1000) -> None:
        self.server = server
        self.store = store
        self.mode = mode
        self.durable = mode == "durable"
        self.buffer_ms = buffer_ms
        self.buffer_writes = buffer_writes
        self.loop: asyncio.AbstractEventLoop | None = None
        # (db, key) changed since the last hand-over -> whether its first change in this batch
        # created it (the store then has no row of it: a key gone again by the batch's end is skipped)
        self.dirty: dict[tuple[int, bytes], bool | None] = {}
        self.pending: list[tuple[str, Any, bool]] = []  # row ops already materialised (flush, swap)
        self.changes = 0  # changes noted in the open batch
        # while ``scheduled``: the ``changes`` count at which the open batch must close at once (buffered
        # mode's --buffer-writes, while its timer runs), else NEVER; see key_changed
        self.limit = NEVER
        # (db, key) -> type of the container rows the store holds for it
        self.stored: dict[tuple[int, bytes], bytes] = {}
        self.open_id = 1
        self.committed_id = 0
        self.busy = False
        self.scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self.inflight: tuple[int, list[tuple[str, Any, bool]], int] | None = None
        self.failed_ops: list[tuple[str, Any, bool]] | None = None
        # connections holding output -> the last batch they wrote in, in the order of their first
        # write in that batch: released in that order, as their replies would have been written (a
        # writer before the blocked clients its write served, whatever they held for earlier batches)
        self.waiters: dict[Any, int] = {}
        self.hold_max = 0  # the last batch a connection holds output for
        self.last_commit_time = time.time()
        self.commits = 0
        self.commit_errors = 0
        self.last_error: str | None = None
        self.last_commit_ms = 0.0
        # /metrics (respqueue/http): commit time in the writer, changes per committed batch
        self.commit_seconds = Histogram(LATENCY_BOUNDS_S)
        self.batch_changes = Histogram(SIZE_BOUNDS)
        self._idle: list[asyncio.Future[None]] = []
        self._due = False  # the open batch's time came while the writer was busy
        # rows appended to the open batch besides the keyspace's (job history): sql -> params
        self.row_ops: dict[str, list[Any]] = {}
        self.batch_hooks: list[Any] = []  # called before a batch is built
        # durable mode: the keys of the batch being built (dicts taken from ``dirty``) and whether it
        # flushed or swapped a database; those of the batch in flight (rolled back if it fails)
        self.batch_keys: list[dict[tuple[int, bytes], Any]] = []
        self.batch_whole = False
        self.inflight_keys: list[dict[tuple[int, bytes], Any]] = []
        self.inflight_whole = False
        # chunked strings: (db, key) -> the value object whose content the store's chunks hold (as of
        # the batches handed over), and the byte range [lo, hi) by which the key's value differs from
        # it through APPEND/SETRANGE in the open batch, with the value that range leads to
        self.str_written: dict[tuple[int, bytes], bytes] = {}
        self.ranges: dict[tuple[int, bytes], tuple[int, int, bytes, bool]] = {}
        self.close_hooks: list[Any] = []  # called when the journal closes
        # a layout codec for keys of a known shape (compat/engine/layout.py: BullMQ jobs as one row
        # each): ``before`` sees a batch's dirty keys first, ``stamp`` splits its keys rows
        self.layout: Any = None
        # respqueue/coldhash.py's queue: the small hashes packed here are noted in it, with their blob
        self.cold: Any = None

    def start(self) -> None:
        self.adopt_strings(None)
        self.loop = asyncio.get_running_loop()
        self.store.start_writer(self._done, self.loop)
        if self.dirty:  # keys found expired at load: delete them from the file
            self._schedule()

    def adopt_strings(self, keys: Any) -> None:
        """The chunked strings among ``keys`` (None: all keys) just loaded from the store: their values
        are what the store holds (so a later APPEND/SETRANGE writes only the chunks it changes)."""
        dbs = self.server.dbs
        sw = self.str_written
        stored = self.stored
        if keys is None:
            keys = [k for k, t in stored.items() if t == _STRING]
        for k in keys:
            if stored.get(k) == _STRING:
                v = dbs[k[0]].data.get(k[1])
                if type(v) is bytes:
                    sw[k] = v

    # ---- hooks called by the keyspace -------------------------------------
    def string_range(self, db: Database, key: bytes, old: bytes | None, new: bytes, lo: int, hi: int) -> None:
        """APPEND/SETRANGE changed ``key``'s value ``old`` (None: the key was absent, and the bytes of
        ``new`` outside [lo, hi) are zeros) into ``new`` within bytes [lo, hi) (and grew it to
        ``len(new)``); called before the change is noted (``Database.modified``)."""
        if len(new) <= STRING_CHUNK:
            return
        k = (db.index, key)
        ranges = self.ranges
        prev = ranges.get(k)
        if prev is not None:
            if prev[2] is old:
                ranges[k] = (min(lo, prev[0]), max(hi, prev[1]), new, prev[3])
            else:  # changed by something else since: the batch rewrites the whole value
                del ranges[k]
        elif old is None:
            ranges[k] = (lo, hi, new, True)
        elif self.str_written.get(k) is old:
            ranges[k] = (lo, hi, new, False)

    def key_changed(self, db: Database, key: bytes, created: bool = False) -> None:
        """``key`` of ``db`` changed (``created``: it was absent just before). ``Database.modified`` runs
        the common case itself (the batch is scheduled already: note the key, count the change, and
        call :meth:`limit_reached` once ``changes`` reaches ``limit``); this is the whole of it."""
        self.dirty.setdefault((db.index, key), created)
        self.changes += 1
        if not self.scheduled:
            self._schedule()
        elif self.changes >= self.limit:
            self.limit_reached()

    def limit_reached(self) -> None:
        """Buffered mode, --buffer-writes reached: close the batch now instead of at the timer (once:
        until the batch is handed over, later changes only join it)."""
        self.limit = NEVER
        if self._timer is not None:
            self._schedule(now=True)

    def db_flushed(self, db: Database) -> None:
        self._materialize(self.pending)
        self.batch_whole = True
        i = db.index
        for t in ALL_TABLES:
            self.pending.append((f"DELETE FROM {t} WHERE db=?", (i,), False))  # noqa: S608
        self.stored = {k: v for k, v in self.stored.items() if k[0] != i}
        self.str_written = {k: v for k, v in self.str_written.items() if k[0] != i}
        if self.layout is not None:
            self.layout.flushed(i)
        self.changes += 1
        if not self.scheduled:
            self._schedule()

    def dbs_swapped(self, a: Database, b: Database) -> None:
        self._materialize(self.pending)
        self.batch_whole = True
        ia, ib = a.index, b.index
        for t in ALL_TABLES:
            self.pending.append((f"UPDATE {t} SET db=-1 WHERE db=?", (ia,), False))  # noqa: S608
            self.pending.append((f"UPDATE {t} SET db=? WHERE db=?", (ia, ib), False))  # noqa: S608
            self.pending.append((f"UPDATE {t} SET db=? WHERE db=-1", (ib,), False))  # noqa: S608
        swap = {ia: ib, ib: ia}
        self.stored = {(swap.get(k[0], k[0]), k[1]): v for k, v in self.stored.items()}
        self.str_written = {(swap.get(k[0], k[0]), k[1]): v for k, v in self.str_written.items()}
        if self.layout is not None:
            self.layout.swapped(ia, ib)
        # the containers moved with their data: re-key the attached ones
        for d in (a, b):
            for key, v in d.data.items():
                if type(v) is not bytes:
                    old = v.journal_key
                    if old is not None and old[0] in swap and old[1] == key:
                        v.journal_key = (d.index, key)
        self.changes += 1
        if not self.scheduled:
            self._schedule()

    # ---- extra rows (job history) ---------------------------------------------
    def append_row(self, sql: str, row: Any) -> None:
        """Add ``row`` (params of ``sql``) to the open batch: it commits in the same transaction as the
        keyspace changes made so far. Rows of one ``sql`` run as one executemany, in order."""
        rows = self.row_ops.get(sql)
        if rows is None:
            self.row_ops[sql] = rows = []
        rows.append(row)
        if not self.scheduled:
            self._schedule()

    def append_op(self, sql: str, params: Any) -> int:
        """Run one statement in the next batch; returns that batch's id (done once ``committed_id``
        reaches it)."""
        self.pending.append((sql, params, False))
        if not self.scheduled:
            self._schedule()
        return self.open_id

    def _take_rows(self, ops: list[tuple[str, Any, bool]]) -> None:
        for hook in self.batch_hooks:
            hook()
        if self.row_ops:
            for sql, rows in self.row_ops.items():
                ops.append((sql, rows, True))
            self.row_ops = {}

    # ---- batches -------------------------------------------------------------
    def _schedule(self, now: bool = False) -> None:
        loop = self.loop
        if loop is None:
            return
        self.scheduled = True
        if self.durable or now:
            self.limit = NEVER
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            loop.call_soon(self._close)
        elif self._timer is None:
            self.limit = self.buffer_writes
            self._timer = loop.call_later(self.buffer_ms / 1000.0, self._close)

    def hold(self, conn: Any, last: bool = False) -> int:
        """``conn`` wrote in the open batch: it waits for that batch's commit,
        whose id is returned (its output is tagged with it). ``last``: it goes after every
        connection holding output so far (a blocked client served by their write)."""
        bid = self.open_id
        w = self.waiters
        if last or w.get(conn) != bid:
            w.pop(conn, None)
            w[conn] = bid
        self.hold_max = bid
        if not self.scheduled:
            self._schedule()
        return self.open_id

    def hold_prior(self, conn: Any) -> int:
        """``conn`` wrote wake-up signal keys only (persistence/signals.py) and nothing else is in the open
        batch yet: its reply waits for the batches handed to the writer before it (what it read may come
        from them), not for its own. Returns the batch id it waits for, 0 when they have committed."""
        bid = self.open_id - 1
        if bid <= self.committed_id:
            return 0
        if conn not in self.waiters:
            self.waiters[conn] = bid
        return bid

    def _close(self) -> None:
        """Hand the open batch to the writer (unless it is busy: group commit; then the batch is
        due, and goes as soon as the commit before it is done)."""
        self.scheduled = False
        if self._timer is not None:
            self._timer.cancel()  # closed early (--buffer-writes, BGSAVE, a due batch)
            self._timer = None
        if self.busy or self.failed_ops is not None:
            self._due = True
            return
        self._due = False
        if not self.dirty and not self.pending and self.hold_max <= self.committed_id and not self.row_ops:
            self._notify_idle()
            return
        ops = self.pending
        self.pending = []
        self._materialize(ops)
        self._take_rows(ops)
        self._submit(ops)

    def _submit(self, ops: list[tuple[str, Any, bool]]) -> None:
        bid = self.open_id
        self.open_id += 1
        self.busy = True
        self.inflight = (bid, ops, self.changes)
        self.changes = 0
        self.inflight_keys = self.batch_keys
        self.inflight_whole = self.batch_whole
        self.batch_keys = []
        self.batch_whole = False
        repl = self.server.repl
        if repl is not None and repl.backlog is not None:
            repl.on_submit(bid, ops)  # the batch is a frame of the replication stream
        self.store.submit(bid, ops)

    def _done(self, bid: int, err: BaseException | None, ms: float) -> None:
        self.busy = False
        inflight = self.inflight
        self.inflight = None
        self.last_commit_ms = ms
        server = self.server
        if err is not None:
            self.commit_errors += 1
            msg = f"{type(err).__name__}: {err}" if not str(err) else str(err)
            self.last_error = msg
            if server.write_refused is None:
                log.error("cannot write to the store %s: %s; refusing writes until it recovers", self.store.path, msg)
            server.write_refused = RedisError(MISCONF.format(path=self.store.path, err=msg))
            if server.repl is not None:
                server.repl.on_failed(bid)  # that batch is no frame of the replication stream
            if self.durable:
                # the writes of this batch, and those made since, were or will be answered MISCONF:
                # put their keys back to what the store holds, and retry only to learn when the
                # store is writable again
                self._rollback()
                self.failed_ops = []
                self._release(self.open_id, server.write_refused)
            else:
                # buffered: these writes were acknowledged; they stay and the retry commits them
                self.failed_ops = inflight[1] if inflight else []
                if inflight is not None:
                    self.changes += inflight[2]
                self._release(bid, server.write_refused)
            self._notify_idle()
            assert self.loop is not None
            self.loop.call_later(1.0, self._retry)
            return
        self.commits += 1
        self.commit_seconds.observe(ms / 1000.0)
        if inflight is not None:
            self.batch_changes.observe(inflight[2])
        self.committed_id = bid
        self.last_commit_time = time.time()
        server.lastsave = int(self.last_commit_time)
        if server.write_refused is not None and self.last_error is not None:
            log.warning("the store %s is writable again; accepting writes", self.store.path)
            server.write_refused = server.repl.refusal() if server.repl is not None else None
            self.last_error = None
        repl = server.repl
        if repl is not None and repl.backlog is not None:
            repl.on_commit(bid)  # the frame goes to the replicas
        if self.waiters:
            self._release(repl.release_bid(bid) if repl is not None and repl.ack_n else bid, None)
        if self.dirty or self.pending or self.hold_max > bid or self.row_ops:
            # durable: the next batch goes at once (group commit). buffered: only if its time
            # came while this commit ran; otherwise its timer (armed by its first change) sends
            # it, so batches hold --buffer-ms of changes even when the writer is quick
            if self.durable or self._due or not self.scheduled:
                self._close()
        else:
            self._notify_idle()

    def _retry(self) -> None:
        ops = self.failed_ops
        if ops is None or self.busy:
            return
        self.failed_ops = None
        ops = ops + self.pending
        self.pending = []
        if self.durable:
            # a row written whatever else the batch holds: a full disk fails it
            ops.append(("INSERT OR REPLACE INTO meta(name, value) VALUES('last_write_check', ?)",
                        (str(int(time.time() * 1000)),), False))
        self._materialize(ops)
        self._take_rows(ops)
        self._submit(ops)

    def _rollback(self) -> None:
        """Durable mode, a commit failed: the keys changed by the failed batch and since go back to
        their committed values (see rollback.py); the open batch's rows are dropped. If the store
        cannot even be read, the server stops rather than serve data it told clients it did not write."""
        from .rollback import restore

        whole = self.inflight_whole or self.batch_whole
        keys: set[tuple[int, bytes]] = set()
        for d in self.inflight_keys:
            keys.update(d)
        for d in self.batch_keys:
            keys.update(d)
        keys.update(self.dirty)
        self.inflight_keys = []
        self.batch_keys = []
        self.inflight_whole = self.batch_whole = False
        self.dirty = {}
        self.pending = []
        self.row_ops = {}
        self.ranges = {}
        self.changes = 0
        if not keys and not whole:
            return
        t0 = time.perf_counter()
        try:
            n = restore(self.server, self, None if whole else keys)
        except Exception as e:  # noqa: BLE001 - cannot reconcile: stop (the store is the truth)
            log.critical("cannot read back the store %s after a failed commit (%s): stopping, so that no "
                         "client reads data it was told was not written; restart once the store is readable",
                         self.store.path, e)
            import os

            os._exit(70)
        log.warning("failed commit: %s keys put back to their values in the store (%d present), %.1f ms",
                    "all" if whole else len(keys), n, (time.perf_counter() - t0) * 1000)

    def _release(self, bid: int, error: RedisError | None) -> None:
        errb = None if error is None else b"-" + error.msg + b"\r\n"
        for c in list(self.waiters):
            if c.release_held(bid, errb):
                self.waiters.pop(c, None)

    def _notify_idle(self) -> None:
        while self._idle:
            f = self._idle.pop()
            if not f.done():
                f.set_result(None)

    async def flush(self) -> None:
        """Commit everything changed so far and wait for it (SAVE)."""
        assert self.loop is not None
        while self.dirty or self.pending or self.row_ops or self.busy or self.scheduled:
            if self.failed_ops is not None:
                raise RedisError(self.server.write_refused.msg if self.server.write_refused else b"ERR store failed")
            f = self.loop.create_future()
            self._idle.append(f)
            if not self.busy and not self.scheduled:
                self._schedule(now=True)
            await f

    def uncommitted(self) -> int:
        """Changes not yet committed (the open batch and the one being written)."""
        return self.changes + (self.inflight[2] if self.inflight else 0) + (1 if self.failed_ops else 0)

    def flush_soon(self) -> None:
        """BGSAVE: close the open batch now."""
        if not self.scheduled:
            self._schedule(now=True)

    async def close(self) -> None:
        for hook in self.close_hooks:
            hook()
        try:
            await asyncio.wait_for(self.flush(), 30)
        except (TimeoutError, RedisError) as e:
            log.error("could not commit the last changes to %s: %s", self.store.path, e)
        self.store.close()

    # ---- rows ---------------------------------------------------------------
    def _materialize(self, ops: list[tuple[str, Any, bool]]) -> None:
        """Turn the dirty keys into row operations appended to ``ops``."""
        if not self.dirty:
            return
        dirty = self.dirty
        self.dirty = {}
        if self.durable:
            self.batch_keys.append(dirty)
        dbs = self.server.dbs
        stored = self.stored
        ver = self.open_id
        append = ops.append
        sw = self.str_written
        # the keys rows of the batch go last, as one executemany each (each key is in ``dirty``
        # once, so their order among themselves does not matter)
        kdel: list[tuple[int, bytes]] = []
        kup: list[tuple[Any, ...]] = []
        layout = self.layout
        cold = self.cold.cur if self.cold is not None else None
        if layout is not None:
            layout.before(dirty, dbs, stored, append)
        for k, born in dirty.items():
            dbi, key = k
            db = dbs[dbi]
            v = db.data.get(key)
            if v is None:
                if sw:
                    sw.pop(k, None)
                old = stored.pop(k, None)
                if old is not None:
                    drop_rows(append, old, k)
                elif born:
                    continue  # created and deleted within the batch (a BullMQ job lock): no row to delete
                kdel.append(k)
                continue
            exp = db.expires.get(key) if db.expires else None
            if type(v) is bytes:
                if len(v) > STRING_CHUNK:
                    self._big_string(append, k, v)
                    kup.append((dbi, key, "string", exp, ver, len(v)))
                    continue
                if sw:
                    sw.pop(k, None)
                old = stored.pop(k, None)
                if old is not None:
                    drop_rows(append, old, k)
                kup.append((dbi, key, "string", exp, ver, v))
                continue
            if sw:
                sw.pop(k, None)
            if type(v) is ColdHash:
                # a cold hash whose key changed without its fields (EXPIRE, PERSIST, MOVE...): its blob is its row
                old = stored.pop(k, None)
                if old is not None and old != _JOBS:
                    drop_rows(append, old, k)
                kup.append((dbi, key, "hash", exp, ver, v.stored()))
                continue
            rt = v.rtype
            old = stored.get(k)
            if old == _JOBS:  # kept as job rows (see compat/engine/layout.py): no element rows
                kup.append((dbi, key, layout.row_type(rt), exp, ver, None))
                continue
            if rt == _HASH and (old is None or not v.attached(k)):
                # a small hash is one row: the whole hash in keys.value (see codec.COMPACT_MAX_FIELDS)
                blob = hash_blob(v)
                if blob is not None:
                    if old is not None:
                        del stored[k]
                        drop_rows(append, old, k)
                    # (detached from any key: a hash without a change log is written whole; its key tuple is not kept)
                    v.detach()
                    kup.append((dbi, key, "hash", exp, ver, blob))
                    if cold is not None and v._blob is None:
                        cold[v] = (blob, k)  # may go cold: packed as this blob (coldhash.py)
                    continue
            if rt == _LIST and len(v) <= LIST_COMPACT_MAX and (old is None or not v.attached(k)):
                # a small list is one row too: the whole list in keys.value (see LIST_COMPACT_MAX)
                blob = list_blob(v)
                if blob is not None:
                    if old is not None:
                        del stored[k]
                        drop_rows(append, old, k)
                    v.detach(k)
                    kup.append((dbi, key, "list", exp, ver, blob))
                    continue
            if old != rt or not v.attached(k):
                if old is not None:
                    drop_rows(append, old, k)
                full_rows(ops, k, v, rt)
                stored[k] = rt
            elif rt == _STREAM:
                stream_delta_rows(ops, dbi, key, v)
            else:
                jlog = v.take_changes()
                if jlog:
                    delta_rows(ops, dbi, key, rt, dict(jlog), jlog)
            meta = stream_meta(v) if rt == _STREAM else None
            kup.append((dbi, key, TYPE_NAME[rt], exp, ver, meta))
        if self.ranges:
            self.ranges = {}  # (every key with a range was in ``dirty``)
        if kdel:
            append((_KEY_DEL, kdel, True))
        if kup:
            if layout is not None:
                kup, jobs = layout.stamp(kup)
                for sql, rows in jobs:
                    append((sql, rows, True))
            if kup:
                append((_KEY_UPSERT, kup, True))

    def _big_string(self, append: Any, k: tuple[int, bytes], v: bytes) -> None:
        """Rows for a string longer than STRING_CHUNK: only the chunks an APPEND/SETRANGE changed when
        the store holds the key's chunks and the change is known (see string_range), else every
        chunk (those of zero bytes have no row)."""
        stored = self.stored
        sw = self.str_written
        r = self.ranges.pop(k, None) if self.ranges else None
        old = stored.get(k)
        fresh = r is not None and r[3] and r[2] is v  # made from nothing: zeros outside the range
        if old == _STRING and not fresh:
            base = sw.get(k)
            if base is v:
                return  # the value did not change (a TTL did): the keys row only
            if base is not None and r is not None and r[2] is v:
                string_range_rows(append, k, v, r[0], r[1], True)
                sw[k] = v
                return
        if old is not None:
            del stored[k]
            drop_rows(append, old, k)
        stored[k] = _STRING
        sw[k] = v
        if fresh:
            assert r is not None
            string_range_rows(append, k, v, r[0], r[1], False)
            return
        rows = string_chunk_rows(k[0], k[1], v)
        if rows:
            append((SCHUNK_UPSERT, rows, True))

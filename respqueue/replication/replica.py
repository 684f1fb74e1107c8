"""The replica's side: the link to the master, full and partial synchronisation, applying frames."""

from __future__ import annotations

import asyncio
import heapq
import logging
import os
import re
import sqlite3
import time
from typing import Any

import msgpack

from ..persistence.codec import DELETE as _DELETE
from ..persistence.codec import KEY_UPSERT as _KEY_UPSERT
from ..persistence.codec import UPSERT as _UPSERT
from ..persistence.store import ALL_TABLES
from ..persistence.writer import run_batch
from . import META_SQL
from .loadkeys import reload_key

log = logging.getLogger("respqueue")

# the statements whose rows start with (db, key): the keys they touch are reloaded
_KEY_TABLES = re.compile(r"^(?:INSERT OR (?:REPLACE|IGNORE) INTO|DELETE FROM) (%s)\b" % "|".join(ALL_TABLES))
_WHOLE = re.compile(r"^(?:DELETE FROM|UPDATE) (%s)\b" % "|".join(ALL_TABLES))


class LinkError(Exception):
    pass


class MasterLink:
    """A replica's connection to its master, reconnecting until stopped."""

    def __init__(self, repl: Any, host: str, port: int) -> None:
        self.repl = repl
        self.host = host
        self.port = port
        self.state = "connect"  # connect, connecting, sync, connected
        self.task: asyncio.Task[None] | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.last_io = time.time()
        self.sync_in_progress = False
        self.read_offset = repl.offset
        self.stopped = False

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        self.stopped = True
        if self.task is not None:
            self.task.cancel()
        if self.writer is not None:
            self.writer.close()

    @property
    def up(self) -> bool:
        return self.state == "connected"

    async def _run(self) -> None:
        repl = self.repl
        while not self.stopped:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except (OSError, LinkError, asyncio.IncompleteReadError, ValueError) as e:
                if self.state == "connected":
                    log.warning("lost the link to master %s:%d: %s", self.host, self.port, e or type(e).__name__)
                else:
                    log.info("cannot sync with master %s:%d: %s", self.host, self.port, e or type(e).__name__)
            except Exception:
                log.exception("replication link to %s:%d failed", self.host, self.port)
            finally:
                if self.writer is not None:
                    self.writer.close()
                    self.writer = None
                if self.state == "connected":
                    repl.link_down_since = time.time()
                self.state = "connect"
                self.sync_in_progress = False
            if not self.stopped:
                await asyncio.sleep(1.0)

    async def _cmd(self, reader: asyncio.StreamReader, *args: bytes | str) -> bytes:
        w = self.writer
        assert w is not None
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a.encode() if isinstance(a, str) else a
            parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
        w.write(b"".join(parts))
        line = await asyncio.wait_for(reader.readline(), 30)
        if not line:
            raise LinkError("connection closed by the master")
        self.last_io = time.time()
        return line.rstrip(b"\r\n")

    async def _session(self) -> None:
        repl = self.repl
        server = repl.server
        cfg = server.config
        self.state = "connecting"
        tls = None
        if cfg.tls_replication == "yes":  # the link to the master over TLS (respqueue/tls.py), as Redis
            from ..tls import client_context

            tls = client_context(cfg)
        reader, self.writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, limit=1 << 24, ssl=tls), 10
        )
        if cfg.masterauth:
            args = ["AUTH", cfg.masteruser, cfg.masterauth] if cfg.masteruser else ["AUTH", cfg.masterauth]
            r = await self._cmd(reader, *args)
            if not r.startswith(b"+"):
                raise LinkError(f"AUTH failed: {r.decode('utf-8', 'replace')}")
        r = await self._cmd(reader, "PING")
        if r.startswith(b"-") and not r.startswith((b"-NOAUTH", b"-NOPERM", b"-ERR operation not permitted")):
            raise LinkError(r.decode("utf-8", "replace"))
        if r.startswith(b"-"):
            raise LinkError(f"the master needs a password: {r.decode('utf-8', 'replace')} (set masterauth)")
        # the port the master (and Sentinel, from its INFO) reaches this replica on: the TLS one with
        # tls-replication, as Redis announces server.tls_port then
        port = server.tls_port if tls is not None and server.tls_port else server.tcp_port
        await self._cmd(reader, "REPLCONF", "listening-port", str(port))
        await self._cmd(reader, "REPLCONF", "capa", "eof", "capa", "psync2")
        # flush what this node still has to commit, so its offset is what its store holds
        j = server.journal
        try:
            await j.flush()
        except Exception:  # noqa: BLE001
            pass
        self.state = "sync"
        r = await self._cmd(reader, "PSYNC", repl.replid, str(repl.offset + 1))
        if r.startswith(b"+FULLRESYNC"):
            _, rid, off = r.split()
            self.sync_in_progress = True
            await self._full_sync(reader, rid.decode(), int(off))
            self.sync_in_progress = False
        elif r.startswith(b"+CONTINUE"):
            parts = r.split()
            if len(parts) > 1 and parts[1].decode() != repl.replid:
                # the master was promoted since: its history is ours up to here
                repl.replid2, repl.second_offset = repl.replid, repl.offset + 1
                repl.replid = parts[1].decode()
            log.info("partial resynchronisation with master %s:%d at offset %d", self.host, self.port, repl.offset)
        else:
            raise LinkError(f"PSYNC refused: {r.decode('utf-8', 'replace')}")
        self.state = "connected"
        repl.ensure_backlog()
        await self._stream(reader)

    async def _full_sync(self, reader: asyncio.StreamReader, rid: str, off: int) -> None:
        repl = self.repl
        server = repl.server
        head = await reader.readline()
        if not head.startswith(b"$"):
            raise LinkError("bad snapshot header from the master")
        size = int(head[1:].strip())
        tmp = os.path.join(server.config.dir, "replsync-incoming.db")
        t0 = time.perf_counter()
        with open(tmp, "wb") as f:
            left = size
            while left:
                data = await reader.read(min(left, 1 << 20))
                if not data:
                    raise LinkError("connection closed during the snapshot")
                f.write(data)
                left -= len(data)
                self.last_io = time.time()
        try:
            install_snapshot(server, tmp)
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        repl.replid = rid
        repl.offset = off
        repl.replid2, repl.second_offset = "0" * 40, -1
        self.read_offset = off
        if repl.backlog is not None:
            repl.backlog.reset(off)
        _commit_state(server)
        log.info(
            "full resynchronisation from master %s:%d: %d-byte snapshot at offset %d in %.3f s",
            self.host,
            self.port,
            size,
            off,
            time.perf_counter() - t0,
        )

    async def _stream(self, reader: asyncio.StreamReader) -> None:
        repl = self.repl
        w = self.writer
        assert w is not None
        buf = bytearray()
        self._ack(w)
        while True:
            try:
                data = await asyncio.wait_for(reader.read(1 << 20), 1.0)
            except TimeoutError:
                self._ack(w)
                if time.time() - self.last_io > max(60, int(getattr(repl.server.config, "repl_timeout", 60))):
                    raise LinkError("timeout: nothing from the master") from None
                continue
            if not data:
                raise LinkError("connection closed by the master")
            self.last_io = time.time()
            buf += data
            frames = []
            pos = 0
            n = len(buf)
            while pos < n:
                nl = buf.find(b"\r\n", pos)
                if nl < 0:
                    break
                if buf[pos] != 36:  # '$'
                    raise LinkError("bad frame in the replication stream")
                ln = int(buf[pos + 1 : nl])
                end = nl + 2 + ln + 2
                if end > n:
                    break
                frames.append(bytes(buf[pos:end]))
                pos = end
            if pos:
                del buf[:pos]
            if frames:
                self.read_offset += sum(map(len, frames))
                apply_frames(repl, frames)
                self._ack(w)

    def _ack(self, w: asyncio.StreamWriter) -> None:
        w.write(b"*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$%d\r\n%d\r\n" % (len(str(self.repl.offset)), self.repl.offset))


def _unpack(frame: bytes) -> Any:
    nl = frame.index(b"\r\n")
    return msgpack.unpackb(frame[nl + 2 : -2], raw=False, use_list=False, strict_map_key=False)


def apply_frames(repl: Any, frames: list[bytes]) -> None:
    """Apply a group of frames: one transaction in the store (with the new offset), then the keys
    they touched are reloaded into the keyspace."""
    server = repl.server
    conn = server.journal.store.conn
    ops: list[Any] = []
    for f in frames:
        body = _unpack(f)
        if body:
            ops.extend(body)
    end = repl.offset + sum(map(len, frames))
    state = [
        ("repl_id", repl.replid),
        ("repl_offset", str(end)),
        ("repl_id2", repl.replid2),
        ("repl_offset2", str(repl.second_offset)),
    ]
    ops.append((META_SQL, state, True))
    err = run_batch(conn, ops)
    if err is not None:
        raise LinkError(f"cannot apply the replication stream to the store: {err}")
    bl = repl.ensure_backlog()
    for f in frames:
        bl.append(f)
    repl.offset = end
    _reload(server, ops)


def _reload(server: Any, ops: list[Any]) -> None:
    # key -> its row operations in this group, in order: (sql, rows)
    keys: dict[tuple[int, bytes], list[tuple[str, list[Any]]]] = {}
    whole = False
    for sql, params, many in ops:
        if sql == META_SQL:
            continue
        if _KEY_TABLES.match(sql) and (sql.startswith("INSERT") or "WHERE db=? AND key=?" in sql):
            for row in params if many else (params,):
                k = (row[0], bytes(row[1]))
                kops = keys.get(k)
                if kops is None:
                    keys[k] = kops = []
                if kops and kops[-1][0] == sql:
                    kops[-1][1].append(row)
                else:
                    kops.append((sql, [row]))
        elif _WHOLE.match(sql):
            whole = True  # FLUSHDB, SWAPDB: the whole keyspace again
    j = server.journal
    if whole:
        reload_all(server)
        return
    conn = j.store.conn
    dbs = server.dbs
    stored = j.stored
    debug = log.isEnabledFor(logging.DEBUG)
    layout = j.layout
    if layout is not None:
        # job rows (compat/engine/layout.py): a job's hash, its lock and its place in a state container
        # are one row, and a container is rebuilt from its members' rows: such keys (and those sharing
        # rows with them) are reloaded together by the loader's code, as after a failed batch
        ups = layout.upsert_sqls
        jobish = {k for k, kops in keys.items() if layout.touches(k) or any(sql in ups for sql, _ in kops)}
        if jobish:
            # in place, by the change of each job row's (state, score): O(rows in the frame)
            handled = None
            replicate = getattr(layout, "replicate", None)
            if replicate is not None:
                try:
                    handled = replicate(conn, dbs, stored, {k: keys[k] for k in jobish})
                except Exception as e:  # noqa: BLE001  (memory and store disagree: the store is the truth)
                    log.warning("replication: job rows out of step (%s): reloading the keyspace", e)
                    reload_all(server)
                    return
            if handled is not None:
                for k in handled:
                    _changed(server, dbs, k)
            else:
                # a container written whole (between job rows and generic rows): the keys sharing rows
                # with it are reloaded together by the loader's code, as after a failed batch
                from ..persistence.rollback import restore

                handled = set()
                restore(server, j, jobish, replica=True, done=handled)
            keys = {k: v for k, v in keys.items() if k not in handled}
    for k, kops in keys.items():
        if not _incremental(dbs, stored, k, kops):
            reload_key(conn, dbs, stored, k)
        elif debug:
            log.debug("replication: key %r of db %d changed in place", k[1], k[0])
        _changed(server, dbs, k)


def _changed(server: Any, dbs: list[Any], k: tuple[int, bytes]) -> None:
    """Key ``k`` changed under its watchers and blocked clients."""
    db = dbs[k[0]] if 0 <= k[0] < len(dbs) else None
    if db is not None:
        if db.watched and k[1] in db.watched:
            for c in db.watched[k[1]]:
                c.dirty_cas = True
        if db.blocking and k[1] in db.blocking:
            server.ready_keys[k] = None
        if db.slot_index is not None:  # cluster mode's slot -> keys index: the key may have come or gone
            db.slot_index.changed(k[1], k[1] in db.data)


def reload_all(server: Any) -> None:
    from ..persistence.loader import load

    j = server.journal
    for db in server.dbs:
        db.touch_all_watched()
        db.data.clear()
        db.expires.clear()
        db.expire_heap.clear()
    j.stored.clear()
    j.dirty.clear()
    types = getattr(j.layout, "scan_types", None)  # (as at start-up: persistence.open_persistence)
    handoff: list[Any] | None = [] if types is not None else None
    load(j.store.conn, server.dbs, j.stored, skip_state=j.layout is not None, handoff=handoff,
         handoff_types=types or ())
    if j.layout is not None:  # job rows: the state containers are rebuilt from their members' rows (and their hashes)
        j.layout = type(j.layout)()
        j.layout.load(j.store.conn, server.dbs, {}, j.stored, convert=False, hashes=True,  # the master's rows, as they are
                      **({"rows": handoff} if handoff is not None else {}))


def install_snapshot(server: Any, path: str) -> None:
    """Replace this node's store and keyspace with the snapshot at ``path``."""
    j = server.journal
    src = sqlite3.connect(path)
    try:
        src.backup(j.store.conn)
    finally:
        src.close()
    reload_all(server)


def _commit_state(server: Any) -> None:
    repl = server.repl
    run_batch(server.journal.store.conn, [(META_SQL, repl.state_rows(), True)])


_LIST_OPS = {_UPSERT[b"list"], _DELETE[b"list"], _KEY_UPSERT}
_ZSET_OPS = {_UPSERT[b"zset"], _DELETE[b"zset"], _KEY_UPSERT}


def _incremental(
    dbs: list[Any], stored: dict[tuple[int, bytes], bytes], k: tuple[int, bytes], kops: list[tuple[str, list[Any]]]
) -> bool:
    """Apply a big list's or a big zset's element rows to its container in place, instead of reloading
    it whole (BullMQ's wait list and completed set: a push or pop at an end, a member added or removed).
    False when the change is anything else: the key is then reloaded from the store, which holds the
    truth either way, so giving up half-way is safe."""
    dbi, key = k
    if not 0 <= dbi < len(dbs):
        return False
    db = dbs[dbi]
    v = db.data.get(key)
    rt = stored.get(k)
    if v is None or type(v) is bytes or rt is None or v.rtype != rt or v.journal_key != k:
        return False
    allowed = _LIST_OPS if rt == b"list" else _ZSET_OPS if rt == b"zset" else None
    if allowed is None or any(sql not in allowed for sql, _ in kops):
        return False
    exp: Any = False
    for sql, rows in kops:
        if sql == _KEY_UPSERT:
            row = rows[-1]
            if row[2] != rt.decode() or row[5] is not None:
                return False  # now a one-row key (a small list), or another type
            exp = row[3]
    if rt == b"list":
        p, d = v._p, v._d
        if p is None:
            return False
        for sql, rows in kops:
            if sql == _DELETE[b"list"]:
                for row in rows:
                    pos = row[2]
                    if p and pos == p[0]:
                        p.popleft()
                        d.popleft()
                    elif p and pos == p[-1]:
                        p.pop()
                        d.pop()
                    else:
                        return False
            elif sql == _UPSERT[b"list"]:
                for row in rows:
                    pos, val = row[2], bytes(row[3])
                    if not p or pos > p[-1]:
                        p.append(float(pos))
                        d.append(val)
                    elif pos < p[0]:
                        p.appendleft(float(pos))
                        d.appendleft(val)
                    elif pos == p[0]:
                        d[0] = val
                    elif pos == p[-1]:
                        d[-1] = val
                    else:
                        return False
    else:
        log = v.pause_log()  # these changes are the store's already: not logged for the journal
        try:
            for sql, rows in kops:
                if sql == _DELETE[b"zset"]:
                    for row in rows:
                        v.remove(bytes(row[2]))
                elif sql == _UPSERT[b"zset"]:
                    for row in rows:
                        v.add(bytes(row[2]), row[3])
        finally:
            v.resume_log(log)
    if not len(v):
        return False
    if exp is not False:
        if exp is None:
            db.expires.pop(key, None)
        elif db.expires.get(key) != exp:
            db.expires[key] = exp
            heapq.heappush(db.expire_heap, (exp, key))
    return True

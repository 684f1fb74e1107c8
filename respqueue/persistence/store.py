"""The SQLite store: schema, migrations, open/check/repair, and the writer (process or thread).

One file, ``<dir>/respqueue.db``, in WAL mode. Every table is ``WITHOUT ROWID``
and keyed by ``(db, key, ...)`` with BLOB keys, so a change to one element of
a container is one row. See docs/STORAGE.md for the tables.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import queue
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import msgpack

from ..types import hash as hash_types
from . import writer as _writer
from .writer import HEADER, WRITER_LOCK, open_connection, run_batch
from .writer import frame_parts as writer_frame_parts
from .writer import unpack as unpack_frame

writer_script = _writer.__file__
# where the batches are written: "process" (the default: a child process, see writer.py) or
# "thread" (a thread of the server; it shares the interpreter lock with the event loop)
WRITERS = ("process", "thread")

PIPE_SIZE = 1 << 20  # the batches' pipe to the writer process (Linux's default pipe-max-size)

SCHEMA_VERSION = 8
DB_FILE = "respqueue.db"
LOCK_FILE = "respqueue.lock"

# table name -> (element columns, value columns)
ELEMENT_TABLES: dict[bytes, str] = {
    b"hash": "hash_fields",
    b"set": "set_members",
    b"zset": "zset_members",
    b"list": "list_items",
    b"stream": "stream_chunks",
    b"string": "string_chunks",
}
# a string longer than this is stored in chunks of this size (schema version 5), string_chunks rows
# keyed by (db, key, idx), idx the chunk's number (offset idx * STRING_CHUNK); keys.value holds the
# length (an INTEGER), and a chunk of zero bytes has no row (SETRANGE far past the end writes one row)
STRING_CHUNK = 65536

_SCHEMA_V1 = [
    "CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS keys(db INTEGER NOT NULL, key BLOB NOT NULL, type TEXT NOT NULL,"
    " expire_ms INTEGER, version INTEGER NOT NULL, value BLOB, PRIMARY KEY(db, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS hash_fields(db INTEGER NOT NULL, key BLOB NOT NULL, field BLOB NOT NULL,"
    " value BLOB NOT NULL, PRIMARY KEY(db, key, field)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS set_members(db INTEGER NOT NULL, key BLOB NOT NULL, member BLOB NOT NULL,"
    " PRIMARY KEY(db, key, member)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS zset_members(db INTEGER NOT NULL, key BLOB NOT NULL, member BLOB NOT NULL,"
    " score REAL NOT NULL, PRIMARY KEY(db, key, member)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS list_items(db INTEGER NOT NULL, key BLOB NOT NULL, pos REAL NOT NULL,"
    " value BLOB NOT NULL, PRIMARY KEY(db, key, pos)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS stream_entries(db INTEGER NOT NULL, key BLOB NOT NULL, ms INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, fields BLOB NOT NULL, PRIMARY KEY(db, key, ms, seq)) WITHOUT ROWID",
]

# version 2: the job-history tables, registered by compat/history.py (see register_schema)
_SCHEMA_V2: list[str] = []

# version 4: a stream's entries are stored in chunks, a row per batch's appended entries
# (stream_entries, a row per entry, is still read: such a stream is rewritten as chunks
# the first time it changes); a small list may be one row, keys.value = msgpack [items]
_SCHEMA_V4 = [
    "CREATE TABLE IF NOT EXISTS stream_chunks(db INTEGER NOT NULL, key BLOB NOT NULL, ms INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, entries BLOB NOT NULL, PRIMARY KEY(db, key, ms, seq)) WITHOUT ROWID",
]

# version 5: a string longer than STRING_CHUNK is stored in chunks (keys.value = its length, an
# INTEGER); shorter ones, and every string of an earlier version, stay one row (keys.value = the value)
_SCHEMA_V5 = [
    "CREATE TABLE IF NOT EXISTS string_chunks(db INTEGER NOT NULL, key BLOB NOT NULL, idx INTEGER NOT NULL,"
    " data BLOB NOT NULL, PRIMARY KEY(db, key, idx)) WITHOUT ROWID",
]

# version 6: a keys row may carry a state and a score (a BullMQ job kept as one row, its state
# containers rebuilt from those rows: compat/engine/layout.py) and its lock key's value and expiry
# (lock, lock_ms: the job's `<job key>:lock`, then without a row of its own); NULL for every other row, so a
# version 4 or 5 store is valid as it is (its containers are rewritten as job rows when first written)
_SCHEMA_V6 = [
    "ALTER TABLE keys ADD COLUMN state BLOB",
    "ALTER TABLE keys ADD COLUMN score REAL",
    "ALTER TABLE keys ADD COLUMN lock BLOB",
    "ALTER TABLE keys ADD COLUMN lock_ms INTEGER",
]

# version 7: the job history in chunks (compat/history_schema.py registers its statements and an upgrade that
# renames the row-per-event tables of earlier versions); nothing of the core's own changes
_SCHEMA_V7: list[str] = []
# version 8: a small hash of a store shape (types/hash.py, registered by a plug-in: compat's BullMQ job hashes)
# is keys.value = msgpack [hashtable?, shape number, value, ...]; the store records its shapes, in number
# order, in its meta row 'hash_shapes' (msgpack [[field, ...], ...]; see sync_shapes). Rows of version 7 (names)
# stay valid; an earlier release, which could not read the new form, refuses the file
_SCHEMA_V8: list[str] = []

# version -> statements that bring a store from version-1 to version
# version 3: a small hash may be one row, keys.value = msgpack [hashtable?, {field: value}]
# (rows of version 2, keys.value NULL + hash_fields, stay valid: nothing to convert)
MIGRATIONS: dict[int, list[str]] = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: [], 4: _SCHEMA_V4, 5: _SCHEMA_V5, 6: _SCHEMA_V6,
                                     7: _SCHEMA_V7, 8: _SCHEMA_V8}
#: tables registered by plug-ins (register_schema): repair copies them when the old file has them
REGISTERED_TABLES: list[str] = []
#: name -> (schema version, statements, tables) of each registered schema
SCHEMAS: dict[str, tuple[int, list[str], tuple[str, ...]]] = {}
#: version -> functions run before that version's statements (a plug-in's conversion of what an earlier
#: version wrote), and name -> that function, run before the statements when a store lacks the tables
UPGRADES: dict[int, list[Callable[[sqlite3.Connection], None]]] = {}
SCHEMA_UPGRADES: dict[str, Callable[[sqlite3.Connection], None]] = {}
#: registered table -> the name it had in an earlier version (repair copies from that when it is absent)
FORMER_NAMES: dict[str, str] = {}


def register_schema(name: str, version: int, statements: list[str], tables: tuple[str, ...] = (),
                    upgrade: Callable[[sqlite3.Connection], None] | None = None,
                    former_names: dict[str, str] | None = None) -> None:
    """A plug-in's tables (compat's job history): ``statements`` (idempotent ``CREATE ... IF NOT EXISTS``)
    run in the migration to schema ``version`` (the version that introduced them, so that files keep
    the same schema version and tables), and on every open of a store that lacks them. ``upgrade`` (idempotent)
    runs just before them, to convert what an earlier version of the plug-in wrote; ``former_names`` maps a
    table to the name it had before (repair reads an old file's table by that name). Registering the
    same name again is a no-op. Must happen before a store is opened (at import of the plug-in)."""
    if name in SCHEMAS:
        return
    if version not in MIGRATIONS or version > SCHEMA_VERSION:
        raise ValueError(f"schema {name}: no schema version {version}")
    stmts = [s for s in statements if s.strip()]
    SCHEMAS[name] = (version, stmts, tuple(tables))
    MIGRATIONS[version].extend(stmts)
    if upgrade is not None:
        UPGRADES.setdefault(version, []).append(upgrade)
        SCHEMA_UPGRADES[name] = upgrade
    FORMER_NAMES.update(former_names or {})
    REGISTERED_TABLES.extend(t for t in tables if t not in REGISTERED_TABLES)


def _ensure_registered(conn: sqlite3.Connection) -> None:
    """Create the registered tables a store of the current version lacks (it was made before the plug-in
    registered them): ``CREATE ... IF NOT EXISTS`` writes nothing when they exist."""
    for name, (_version, stmts, tables) in SCHEMAS.items():
        have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not set(tables) <= have:
            conn.execute("BEGIN IMMEDIATE")
            try:
                upgrade = SCHEMA_UPGRADES.get(name)
                if upgrade is not None:
                    upgrade(conn)
                for stmt in stmts:
                    conn.execute(stmt)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

_LATER_TABLES = ("stream_chunks", "string_chunks")  # keyspace tables that stores of an earlier schema version lack
ALL_TABLES = ("keys", "hash_fields", "set_members", "zset_members", "list_items", "stream_chunks", "stream_entries",
              "string_chunks")


def _write_all(fd: int, head: bytes, data: bytes) -> None:
    """Write ``head`` then ``data`` to the (blocking) pipe ``fd``, with one system call as a rule."""
    n = os.writev(fd, (head, data))
    if n < len(head) + len(data):  # cut short (a signal): write the rest
        rest = memoryview(head + data)[n:]
        while rest:
            rest = rest[os.write(fd, rest) :]


class StoreError(Exception):
    """The store cannot be opened or used; the message names the file and the remedy."""


class StoreLocked(StoreError):
    pass


class StoreWriteError(Exception):
    """A batch did not commit; the message is SQLite's (or says the writer process is gone)."""


def try_lock(path: str) -> int | None:
    """An open descriptor of ``path`` (created if need be) holding its exclusive flock, or None when
    another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def remedy(path: str) -> str:
    d = os.path.dirname(path) or "."
    return f"run `respqueue check --dir {d}` to diagnose and `respqueue repair --dir {d}` to recover what can be read"


class Store:
    """An open store: a connection for reads at start-up and a writer (see writer.py)."""

    def __init__(self, directory: str, synchronous: str = "FULL", writer: str = "process") -> None:
        self.dir = directory
        self.path = os.path.join(directory, DB_FILE)
        self.synchronous = synchronous
        if writer not in WRITERS:
            raise StoreError(f"unknown writer '{writer}' (use {' or '.join(WRITERS)})")
        self.writer = writer
        self.conn: sqlite3.Connection | None = None
        self._lock_fd: int | None = None
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._done: Callable[[int, BaseException | None, float], None] | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._inflight: int | None = None  # the batch the writer process holds
        self._loop: asyncio.AbstractEventLoop | None = None
        self._rbuf = bytearray()  # the writer process's output not yet read as whole frames
        # whether the writer process's pipe has something to read (see poll)
        self.last_commit_ms = 0.0

    # ---- open / close ----------------------------------------------------
    def lock(self) -> None:
        """Take ``<dir>/respqueue.lock`` (flock); a second server on the dir fails here."""
        os.makedirs(self.dir, exist_ok=True)
        lp = os.path.join(self.dir, LOCK_FILE)
        fd = try_lock(lp)
        if fd is None:
            raise StoreLocked(f"{lp} is locked: another respqueue server is using the data directory {self.dir}")
        os.ftruncate(fd, 0)
        os.write(fd, b"%d\n" % os.getpid())
        self._lock_fd = fd

    def open(self) -> None:
        """Open (creating or migrating) the database; StoreError if it is unreadable."""
        self.lock()
        self._wait_for_old_writer()
        try:
            if os.path.exists(self.path):
                # never a fresh schema on top of an existing file: an empty file or another
                # SQLite database is not a store to start empty from (Redis aborts on a 0-byte dump)
                not_a_store(self.path)
            else:
                create_store(self.path)
            self.conn = open_connection(self.path, self.synchronous)
            migrate(self.conn, self.path)
        except sqlite3.DatabaseError as e:
            self.unlock()
            raise StoreError(f"cannot open the store {self.path}: {e}; {remedy(self.path)}") from None
        except StoreError:
            if self.conn is not None:
                self.conn.close()
                self.conn = None
            self.unlock()
            raise

    def unlock(self) -> None:
        if self._lock_fd is not None:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
            except OSError:
                pass
            self._lock_fd = None

    def _wait_for_old_writer(self, timeout: float = 30.0) -> None:
        """Wait until no writer process of an earlier server holds the writer lock: a server killed
        with kill -9 takes its writer with it (see writer.py), but only a moment later, and the
        store must not change under the loader."""
        deadline = time.monotonic() + timeout
        while (fd := try_lock(os.path.join(self.dir, WRITER_LOCK))) is None:
            if time.monotonic() > deadline:
                raise StoreLocked(f"{self.path}: a writer process of an earlier server still holds "
                                  f"{WRITER_LOCK}; stop it and start again")
            time.sleep(0.01)
        os.close(fd)  # closing the descriptor releases the lock

    def start_writer(self, done: Callable[[int, BaseException | None, float], None],
                     loop: asyncio.AbstractEventLoop) -> None:
        """Start the writer; ``done(batch_id, error, ms)`` is called on ``loop`` after each batch.

        The writer process's results are read by the loop itself (a reader callback on the pipe),
        so a finished commit is seen at the loop's next turn; a thread reading them would have to
        win the interpreter lock from a busy loop first (up to the switch interval, 5 ms)."""
        self._done = done
        self._loop = loop
        if self.writer == "thread":
            self._thread = threading.Thread(target=self._run, name="respqueue-writer", daemon=True)
            self._thread.start()
        else:
            self._spawn()

    def submit(self, batch_id: int, ops: list[tuple[str, Any, bool]]) -> None:
        """Hand over a batch: ``(sql, params, many)`` statements run in one transaction."""
        if self.writer == "thread":
            self._q.put((batch_id, ops))
            return
        child = self._child
        if child is None or child.poll() is not None:
            # the writer process died (its error went to the batch it held): start another one
            if child is not None:
                self._reap(child)
            self._spawn()
            child = self._child
        assert child is not None and child.stdin is not None
        try:
            head, data = writer_frame_parts([batch_id, ops])
        except Exception as e:  # noqa: BLE001 - a value msgpack cannot carry: the batch fails, visibly
            assert self._done is not None
            self._done(batch_id, StoreWriteError(f"cannot hand the batch to the writer ({e})"), 0.0)
            return
        self._inflight = batch_id
        try:
            # header and payload in one writev (a big batch, a large string's chunks, is not copied
            # again): one system call and one wake-up of the writer, not one for each part
            _write_all(child.stdin.fileno(), head, data)
        except (OSError, ValueError) as e:
            self._inflight = None
            assert self._done is not None
            self._done(batch_id, StoreWriteError(f"the writer process is gone ({e})"), 0.0)

    # ---- the writer process ----------------------------------------------------
    def _spawn(self) -> None:
        """Start a writer process; the loop reads its results."""
        child = self._child = subprocess.Popen(
            [sys.executable, writer_script, self.path, self.synchronous],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
        )
        assert child.stdin is not None and child.stdout is not None and self._loop is not None
        try:
            # a batch is often 100-200 KiB: with the default 64 KiB pipe the loop's write would
            # wait until the writer process has been scheduled to read the rest
            fcntl.fcntl(child.stdin.fileno(), fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except (OSError, AttributeError):
            pass  # not Linux, or above /proc/sys/fs/pipe-max-size: the default pipe still works
        fd = child.stdout.fileno()
        os.set_blocking(fd, False)
        self._rbuf = bytearray()
        self._loop.add_reader(fd, self._on_results, child)

    def _on_results(self, child: subprocess.Popen[bytes]) -> None:
        """The writer's pipe is readable: report the batches it finished (or its death)."""
        assert child.stdout is not None and self._done is not None
        try:
            data = os.read(child.stdout.fileno(), 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._reap(child)
            return
        buf = self._rbuf
        buf += data
        hs = HEADER.size
        while len(buf) >= hs:
            (n,) = HEADER.unpack_from(buf)
            if len(buf) < hs + n:
                break
            bid, err, ms = unpack_frame(bytes(buf[hs:hs + n]))
            del buf[:hs + n]
            self._inflight = None
            self.last_commit_ms = ms
            self._done(bid, None if err is None else StoreWriteError(err), ms)

    def _reap(self, child: subprocess.Popen[bytes]) -> None:
        """The writer process ``child`` is gone (its pipe closed): stop reading it, and fail the
        batch it held (it did not commit, or nobody can know that it did)."""
        if child.stdout is None or child.stdout.closed:
            return
        assert self._loop is not None
        self._loop.remove_reader(child.stdout.fileno())
        child.stdout.close()
        try:
            code = child.wait(5)
        except subprocess.TimeoutExpired:
            child.kill()
            code = child.wait()
        bid = self._inflight
        if bid is not None and child is self._child:
            self._inflight = None
            assert self._done is not None
            self._done(bid, StoreWriteError(f"the writer process exited with status {code}"), 0.0)

    def close(self) -> None:
        if self.writer == "thread":
            if self._thread is not None:
                self._q.put(None)
                self._thread.join(30)
        elif self._child is not None:
            child = self._child
            try:
                if child.stdin is not None:
                    child.stdin.close()
                child.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                child.kill()
            self._inflight = None  # close flushed what it could; nothing is left to report
            self._reap(child)
            self._child = None
        self._thread = None
        if self.conn is not None:
            try:
                self.conn.close()
            except sqlite3.Error:
                pass
            self.conn = None
        self.unlock()

    # ---- the writer thread -----------------------------------------------
    def _run(self) -> None:
        conn = self.conn
        assert conn is not None
        while True:
            job = self._q.get()
            if job is None:
                return
            batch_id, ops = job
            t0 = time.perf_counter()
            err = run_batch(conn, ops)
            ms = (time.perf_counter() - t0) * 1000
            self.last_commit_ms = ms
            assert self._done is not None and self._loop is not None
            loop = self._loop
            if not loop.is_closed():
                loop.call_soon_threadsafe(self._done, batch_id, None if err is None else StoreWriteError(err), ms)

    # ---- backups (for the backup tooling) ----------------------------------
    def backup(self, dest_path: str) -> None:
        """A consistent online copy of the store into ``dest_path`` (sqlite3 backup API)."""
        src = sqlite3.connect(self.path)
        try:
            dst = sqlite3.connect(dest_path)
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()


def empty_store(path: str) -> str:
    return (f"the store {path} is an empty file (0 bytes), not a respqueue store; refusing to start on it. "
            f"If it should hold your data, restore it from a backup; {remedy(path)}; "
            f"or remove the file to start with an empty store")


def foreign_store(path: str) -> str:
    return (f"the store {path} is a SQLite database but not a respqueue store (it has no schema_version); "
            f"refusing to start on it. Point --dir at the right directory, {remedy(path)}, "
            f"or remove the file to start with an empty store")


def not_a_store(path: str) -> None:
    """StoreError when the existing file ``path`` is empty (SQLite would take it for a new database) or
    a SQLite database without respqueue's schema; read only, so the file is left as it is."""
    if os.path.getsize(path) == 0:
        raise StoreError(empty_store(path))
    conn = sqlite3.connect(path)  # reads only (no pragma that would convert the file)
    try:
        v = schema_version(conn)
    finally:
        conn.close()
    if v == 0:
        raise StoreError(foreign_store(path))


def create_store(path: str) -> None:
    """A new store at ``path``, created under a temporary name and renamed into place once its schema
    is committed: a crash while creating it never leaves an empty or schema-less file at ``path``
    (which the next start would refuse, see :func:`not_a_store`)."""
    tmp = path + ".new"
    for p in (tmp, tmp + "-journal", tmp + "-wal", tmp + "-shm"):
        if os.path.exists(p):
            os.unlink(p)
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=FULL")
        migrate(conn, tmp)
    finally:
        conn.close()
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def schema_version(conn: sqlite3.Connection) -> int:
    t = conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
    if t is None:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: sqlite3.Connection, path: str) -> None:
    v = schema_version(conn)
    if v > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema version {v}, newer than this respqueue supports ({SCHEMA_VERSION}); upgrade respqueue"
        )
    if v == SCHEMA_VERSION:
        _ensure_registered(conn)
        sync_shapes(conn, path)
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for target in range(v + 1, SCHEMA_VERSION + 1):
            for upgrade in UPGRADES.get(target, ()):
                upgrade(conn)
            for stmt in MIGRATIONS[target]:
                conn.execute(stmt)
        conn.execute(
            "INSERT OR REPLACE INTO meta(name, value) VALUES('schema_version', ?)", (str(SCHEMA_VERSION),)
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    _ensure_registered(conn)
    sync_shapes(conn, path)


def sync_shapes(conn: sqlite3.Connection, path: str) -> None:
    """The store's small-hash shapes (meta 'hash_shapes') and this process's (types/hash.py) agree: the
    store records the ones registered here that it lacks, and a store that records more (written with a
    plug-in not loaded here, e.g. by a tool) has them registered here, so its rows read back; shapes that
    differ under one number are a StoreError (the rows could not be read as written)."""
    row = conn.execute("SELECT value FROM meta WHERE name='hash_shapes'").fetchone()
    stored = [tuple(x) for x in msgpack.unpackb(row[0], raw=True)] if row is not None else []
    mine = hash_types.store_shapes()
    n = min(len(stored), len(mine))
    if stored[:n] != mine[:n]:
        raise StoreError(f"{path}: its small-hash shapes (meta 'hash_shapes') differ from this respqueue's; "
                         "it was written by an incompatible build")
    if len(stored) > len(mine):
        hash_types.register_store_shapes(stored)
    elif len(mine) > len(stored):
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT OR REPLACE INTO meta(name, value) VALUES('hash_shapes', ?)",
                         (msgpack.packb([list(x) for x in mine], use_bin_type=True),))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def check(directory: str) -> tuple[bool, str]:
    """``respqueue check``: integrity check and schema version; (ok, message)."""
    path = os.path.join(directory, DB_FILE)
    if not os.path.exists(path):
        return False, f"{path}: no store here"
    if os.path.getsize(path) == 0:
        return False, f"{path}: an empty file (0 bytes), not a respqueue store; restore it from a backup or remove it"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            res = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
            v = schema_version(conn)
            nkeys = conn.execute("SELECT count(*) FROM keys").fetchone()[0] if v else 0
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        return False, f"{path}: unreadable: {e}; run `respqueue repair --dir {directory}`"
    if res != ["ok"]:
        return False, f"{path}: integrity check failed: {'; '.join(res[:10])}; run `respqueue repair --dir {directory}`"
    if v > SCHEMA_VERSION:
        return False, f"{path}: schema version {v} is newer than supported ({SCHEMA_VERSION})"
    if v == 0:
        return False, f"{path}: a SQLite database but not a respqueue store (no schema_version)"
    return True, f"{path}: ok (schema version {v}, {nkeys} keys)"


def _count_rows(conn: sqlite3.Connection, tables: tuple[str, ...]) -> int | None:
    """Rows in ``tables`` (missing ones count 0), or None when a count cannot be read (damage)."""
    total = 0
    for table in tables:
        try:
            total += conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: S608 - fixed names
        except sqlite3.DatabaseError as e:
            if not str(e).startswith("no such table"):
                return None
    return total


def repair(directory: str, progress: Callable[..., Any] | None = None) -> tuple[bool, str]:
    """``respqueue repair``: copy every readable row into a fresh file; the old one is kept as .corrupt-<ts>.

    ``progress`` (see respqueue/progress.py) makes the display of the rows copied; default none."""
    from ..progress import silent

    progress = progress or silent
    path = os.path.join(directory, DB_FILE)
    if not os.path.exists(path):
        return False, f"{path}: no store here"
    tmp = path + ".repair"
    for p in (tmp, tmp + "-wal", tmp + "-shm"):
        if os.path.exists(p):
            os.unlink(p)
    new = sqlite3.connect(tmp, isolation_level=None)
    for v in range(1, SCHEMA_VERSION + 1):
        for stmt in MIGRATIONS[v]:
            new.execute(stmt)
    new.execute("INSERT OR REPLACE INTO meta(name, value) VALUES('schema_version', ?)", (str(SCHEMA_VERSION),))
    saved = 0
    lost: list[str] = []
    try:
        old = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.DatabaseError as e:
        new.close()
        return False, f"{path}: cannot be opened at all: {e}"
    pr = progress("repair: copying rows", _count_rows(old, ALL_TABLES + tuple(REGISTERED_TABLES)), "rows")
    new.execute("BEGIN")
    for table in ALL_TABLES:
        try:
            cur = old.execute(f"SELECT * FROM {table}")  # noqa: S608 - fixed table names
            while True:
                try:
                    rows = cur.fetchmany(1000)
                except sqlite3.DatabaseError as e:
                    lost.append(f"{table}: {e}")
                    break
                if not rows:
                    break
                ph = ",".join("?" * len(rows[0]))
                # by column name: a keys table before version 6 lacks its state, score, lock and lock_ms
                names = ",".join(d[0] for d in cur.description)
                new.executemany(f"INSERT OR REPLACE INTO {table}({names}) VALUES({ph})", rows)  # noqa: S608
                saved += len(rows)
                pr.update(len(rows))
        except sqlite3.DatabaseError as e:
            if table in _LATER_TABLES and str(e).startswith("no such table"):
                continue  # a store of an earlier schema version: it never had this table
            lost.append(f"{table}: {e}")
    core_lost = len(lost)
    # registered tables (job history): copied when the old file has them (columns by name: row ids kept)
    for table in REGISTERED_TABLES:
        try:
            src = table
            cols = [r[1] for r in old.execute(f"PRAGMA table_info({table})")]
            if not cols and table in FORMER_NAMES:  # a store of an earlier version: the table's former name
                src = FORMER_NAMES[table]
                cols = [r[1] for r in old.execute(f"PRAGMA table_info({src})")]
            if not cols:
                continue
            cur = old.execute(f"SELECT {','.join(cols)} FROM {src}")  # noqa: S608 - fixed table names
            ph = ",".join("?" * len(cols))
            while True:
                rows = cur.fetchmany(1000)
                if not rows:
                    break
                new.executemany(f"INSERT OR REPLACE INTO {table}({','.join(cols)}) VALUES({ph})", rows)  # noqa: S608
                pr.update(len(rows))
        except sqlite3.DatabaseError as e:
            lost.append(f"{table}: {e}")
    for upgrade in SCHEMA_UPGRADES.values():  # idempotent; may derive state from the rows just copied
        upgrade(new)
    new.execute("COMMIT")
    pr.close()
    old.close()
    new.close()
    if core_lost == len(ALL_TABLES):
        for p in (tmp, tmp + "-wal", tmp + "-shm"):
            if os.path.exists(p):
                os.unlink(p)
        return False, f"{path}: cannot read anything from it ({lost[0]}); the file is left as is"
    ts = time.strftime("%Y%m%d-%H%M%S")
    os.replace(path, f"{path}.corrupt-{ts}")
    for suffix in ("-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.replace(path + suffix, f"{path}.corrupt-{ts}{suffix}")
    os.replace(tmp, path)
    msg = f"{path}: recovered {saved} rows; the old file is {path}.corrupt-{ts}"
    if lost:
        msg += "; unreadable parts: " + "; ".join(lost)
    return True, msg

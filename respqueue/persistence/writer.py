"""The store's writer process: runs the journal's batches, one SQLite transaction each.

The server's event loop and the SQLite work must not share one interpreter lock: Python's
sqlite3 module takes the GIL back after every row it steps, so a writer *thread* crawls while
the loop is busy and the loop stalls while the writer binds rows. A child process has its own
interpreter, so commits run truly beside command processing.

Started by :class:`respqueue.persistence.store.Store` as ``python writer.py DB_PATH SYNCHRONOUS``
(run as a script, so it imports only the standard library and msgpack). It talks over its
stdin/stdout in frames: an 8-byte little-endian length, then msgpack.

* in: ``[batch_id, [[sql, params, many], ...]]``: run in one ``BEGIN IMMEDIATE`` ... ``COMMIT``
  (``many``: ``params`` is a list of rows for executemany);
* out: ``[batch_id, error or None, milliseconds]`` once the batch committed or rolled back.

It ends when its stdin closes (after the batch at hand), and it dies with the server: it asks
the kernel for SIGKILL when its parent exits, so no orphan can commit after the server that
owned it is gone. It holds ``respqueue.writer.lock`` while it lives; a starting server waits for
that lock before it loads the store (a dying writer of a killed server is gone by then).
"""

from __future__ import annotations

import fcntl
import gc
import os
import signal
import sqlite3
import struct
import sys
import time
from typing import Any, BinaryIO

import msgpack

HEADER = struct.Struct("<Q")
WRITER_LOCK = "respqueue.writer.lock"


def read_frame(f: BinaryIO) -> Any:
    """The next frame's object, or None at end of input."""
    h = f.read(HEADER.size)
    if len(h) < HEADER.size:
        return None
    (n,) = HEADER.unpack(h)
    data = f.read(n)
    if len(data) < n:
        return None
    return unpack(data)


def unpack(data: bytes) -> Any:
    """A frame's object from its payload (the bytes after the header); arrays come as tuples
    (a third cheaper to build than lists for a batch's rows)."""
    return msgpack.unpackb(data, raw=False, use_list=False, strict_map_key=False)


def frame(obj: Any) -> bytes:
    data = msgpack.packb(obj, use_bin_type=True)
    return HEADER.pack(len(data)) + data


def frame_parts(obj: Any) -> tuple[bytes, bytes]:
    """:func:`frame` as (header, payload), to be written one after the other (no copy of the payload)."""
    data = msgpack.packb(obj, use_bin_type=True)
    return HEADER.pack(len(data)), data


def _die_with_parent() -> None:
    """SIGKILL this process when the server exits (Linux prctl PR_SET_PDEATHSIG)."""
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the server died before the request took effect
        os._exit(0)


def open_connection(path: str, synchronous: str = "FULL") -> sqlite3.Connection:
    """A connection to the store (the server's, and the writer's): WAL, ``synchronous`` as the
    durability mode says."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=0.5)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    # a 64 MiB page cache and memory-mapped reads keep B-tree updates off the
    # disk as the store grows; WAL checkpoints stay automatic (every 1000 pages)
    conn.execute("PRAGMA cache_size=-65536")
    conn.execute("PRAGMA mmap_size=268435456")
    conn.execute("PRAGMA temp_store=MEMORY")
    return conn


def fast_binding() -> None:
    """Bind ``bytes`` and ``None`` parameters without the adaptation protocol's misses.

    Python's sqlite3 binds int, float, str and bytearray directly, but sends every other
    parameter, ``bytes`` and ``None`` included, through ``microprotocols_adapt``: a tuple key,
    a registry lookup, then ``__adapt__``/``__conform__`` lookups that find nothing. Keys and
    values are bytes and many columns are NULL, so that was ~0.35 µs a row. With an adapter
    registered the lookup hits at once: bytes become a bytearray (bound as the same BLOB) and
    None stays None (``{}.get`` returns it from C). Process-wide: only the writer process calls
    this."""
    sqlite3.register_adapter(bytes, bytearray)
    sqlite3.register_adapter(type(None), {}.get)


def run_batch(conn: sqlite3.Connection, ops: list[Any]) -> str | None:
    """Run ``ops`` in one transaction; the error text, or None when it committed."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        ex = conn.execute
        exm = conn.executemany
        i, n = 0, len(ops)
        while i < n:
            sql, params, many = ops[i]
            if many:
                exm(sql, params)
                i += 1
                continue
            # a run of single-row ops of one statement (e.g. the keys rows of many SETs)
            # goes to sqlite as one executemany
            j = i + 1
            while j < n and not ops[j][2] and ops[j][0] == sql:
                j += 1
            if j - i > 1:
                exm(sql, [ops[k][1] for k in range(i, j)])
            else:
                ex(sql, params)
            i = j
        conn.execute("COMMIT")
        return None
    except Exception as e:  # noqa: BLE001 - reported to the server
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        return str(e) or type(e).__name__


def main(argv: list[str]) -> int:
    path, synchronous = argv[1], argv[2]
    _die_with_parent()
    # the server decides when this ends (it closes our stdin); a Ctrl-C or a SIGTERM sent to the
    # whole process group must not cut a commit short under a server that is still shutting down
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    lock = os.open(os.path.join(os.path.dirname(path) or ".", WRITER_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)
    inp = sys.stdin.buffer
    out = sys.stdout.buffer
    fast_binding()
    # a batch unpacks into thousands of tuples, none in cycles: collect the young generation
    # every 50,000 allocations, not every 700 (as the server does, respqueue/server.py)
    gc.set_threshold(50_000, 10, 10)
    conn = open_connection(path, synchronous)
    # RESPQUEUE_WRITER_ROWS=FILE (measurement, interop/bench/history_rows.py): the rows of every statement
    # run, by statement, written to FILE as JSON when the writer ends
    tally: dict[str, int] | None = {} if os.environ.get("RESPQUEUE_WRITER_ROWS") else None
    try:
        while True:
            job = read_frame(inp)
            if job is None:
                return 0
            bid, ops = job
            t0 = time.perf_counter()
            err = run_batch(conn, ops)
            out.write(frame([bid, err, (time.perf_counter() - t0) * 1000]))
            out.flush()
            if tally is not None:
                for sql, params, many in ops:
                    tally[sql] = tally.get(sql, 0) + (len(params) if many else 1)
    finally:
        conn.close()
        if tally is not None:
            import json

            with open(os.environ["RESPQUEUE_WRITER_ROWS"], "w") as f:
                json.dump(tally, f)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

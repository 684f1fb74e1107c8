"""Durability on SQLite: the store (schema, writer thread), the journal (change
capture, group commit) and the loader. See docs/STORAGE.md."""

from __future__ import annotations

import logging
import time
from typing import Any

from .journal import Journal
from .loader import load
from .store import Store, StoreError, StoreLocked, check, repair

log = logging.getLogger("respqueue")

MODES = ("durable", "buffered", "memory")

__all__ = ["Journal", "Store", "StoreError", "StoreLocked", "check", "repair", "open_persistence", "load"]


def open_persistence(server: Any) -> Journal | None:
    """Open the store in ``config.dir``, load it into ``server.dbs`` and return the journal
    (None in memory mode). Raises StoreError when the store cannot be used."""
    cfg = server.config
    mode = (cfg.durability or "durable").lower()
    if mode not in MODES:
        raise StoreError(f"unknown durability mode '{mode}' (use durable, buffered or memory)")
    server.history = None
    if mode == "memory":
        return None
    from compat.history import open_history

    try:
        history_check(cfg)
    except ValueError as e:
        raise StoreError(str(e)) from None
    # a process: commits run beside the loop. A thread shares the interpreter lock with a busy
    # loop and gets it back once per row: durable replies wait on it, and under load buffered
    # commits fell to one every second or so, far outside the window (docs/STORAGE.md)
    writer = (cfg.writer or "auto").lower()
    if writer == "auto":
        writer = "process"
    store = Store(cfg.dir, "FULL" if mode == "durable" else "NORMAL", writer)
    store.open()
    journal = Journal(server, store, mode, cfg.buffer_ms, cfg.buffer_writes)
    t0 = time.perf_counter()
    try:
        assert store.conn is not None
        loaded, nexp, expired = load(store.conn, server.dbs, journal.stored)
        # BullMQ jobs as one row each (compat/engine/layout.py; RESPQUEUE_JOB_ROWS=off: generic rows)
        from compat.engine import layout as job_layout

        if job_layout.enabled() or job_layout.present(store.conn):  # a store with job rows needs it to load
            journal.layout = job_layout.JobLayout()
            loaded += journal.layout.load(store.conn, server.dbs, journal.dirty, journal.stored)
    except Exception as e:
        store.close()
        from .store import remedy

        raise StoreError(f"cannot load the store {store.path}: {e}; {remedy(store.path)}") from None
    for k in expired:
        journal.dirty[k] = None
    log.info(
        "loaded %d keys in %.3f s from %s (%d expired keys dropped; durability %s)",
        loaded, time.perf_counter() - t0, store.path, nexp, mode,
    )
    server.loaded_keys = loaded
    server.loaded_expired = nexp
    # job history (compat/history.py): XADD to a BullMQ events stream records the job's life
    server.history = open_history(server, journal)
    if server.history is not None:
        server.history.start()
    return journal


def history_check(cfg: Any) -> None:
    """Validate ``--history`` and ``--history-retention`` (ValueError with the message)."""
    from compat.history import DEFAULT_RETENTION, parse_retention, parse_switch

    parse_switch(getattr(cfg, "history", "on"))
    parse_retention(getattr(cfg, "history_retention", DEFAULT_RETENTION))

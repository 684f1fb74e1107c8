"""Durability on SQLite: the store (schema, writer thread), the journal (change
capture, group commit) and the loader. See docs/STORAGE.md."""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Any

from .journal import Journal
from .loader import load
from .store import Store, StoreError, StoreLocked, check, repair

log = logging.getLogger("respqueue")

MODES = ("durable", "buffered", "memory")

__all__ = ["Journal", "Store", "StoreError", "StoreLocked", "check", "repair", "open_persistence", "load"]

#: plug-ins that attach to the journal (compat/history.py: the job-history capture), registered at their
#: import with :func:`register_plugin`: name -> (check(config), raising ValueError for a bad setting,
#: attach(server, journal), run once the store is loaded)
PLUGINS: dict[str, tuple[Callable[[Any], None], Callable[[Any, Journal], None]]] = {}


#: fn(conn) -> a layout codec for this store, or None: the first that answers one stores keys of a known
#: shape its own way (compat/engine/layout.py registers BullMQ's job rows at import)
LAYOUTS: list[Callable[[Any], Any]] = []


def register_layout(make: Callable[[Any], Any]) -> None:
    """Have ``make(conn)`` offer a layout codec (``load``, and the journal's hooks) when a store opens."""
    LAYOUTS.append(make)


def register_plugin(name: str, check: Callable[[Any], None], attach: Callable[[Any, Journal], None]) -> None:
    """Have ``attach(server, journal)`` run when a store opens (after ``check(config)`` passed)."""
    PLUGINS[name] = (check, attach)


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
        # a layout codec registered by a plug-in (compat/engine/layout.py: BullMQ jobs as one row each): it
        # loads the one-row hashes of its rows (those with a state) in its own scan of them
        layout = None
        for make_layout in LAYOUTS:
            layout = make_layout(store.conn)
            if layout is not None:
                break
        # the cyclic GC stays off for the whole load (see loader.load; the layout builds a million objects too)
        gc_was = gc.isenabled()
        gc.disable()
        try:
            # the core's scan hands the layout the rows of its containers and locks (no scan of its own for them)
            types = getattr(layout, "scan_types", None)
            handoff: list[Any] | None = [] if types is not None else None
            loaded, nexp, expired = load(store.conn, server.dbs, journal.stored, skip_state=layout is not None,
                                         handoff=handoff, handoff_types=types or ())
            if layout is not None:
                journal.layout = layout
                # a replica keeps its master's rows as they are (generic ones are not rewritten as its own)
                convert = not getattr(cfg, "replicaof", None)
                loaded += layout.load(store.conn, server.dbs, journal.dirty, journal.stored, convert=convert,
                                      hashes=True, **({"rows": handoff} if handoff is not None else {}))
        finally:
            if gc_was:
                gc.enable()
        gc.freeze()
    except Exception as e:
        store.close()
        from .store import remedy

        raise StoreError(f"cannot load the store {store.path}: {e}; {remedy(store.path)}") from None
    for k in expired:
        journal.dirty[k] = None
    # the load read the whole file through the connection's memory map: those pages stay resident
    # (counted in the process's RSS, as much as the store's size) until unmapped; map it afresh
    store.conn.execute("PRAGMA mmap_size=0")
    store.conn.execute("PRAGMA mmap_size=268435456")
    log.info(
        "loaded %d keys in %.3f s from %s (%d expired keys dropped; durability %s)",
        loaded, time.perf_counter() - t0, store.path, nexp, mode,
    )
    server.loaded_keys = loaded
    server.loaded_expired = nexp
    # plug-ins (compat/history.py: XADD to a BullMQ events stream records the job's life)
    for _check, attach in PLUGINS.values():
        attach(server, journal)
    return journal


def history_check(cfg: Any) -> None:
    """Validate the plug-ins' settings (job history: ``--history``, ``--history-retention``); ValueError
    with the message."""
    for check_cfg, _attach in PLUGINS.values():
        check_cfg(cfg)

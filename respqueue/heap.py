"""Giving the memory Python freed back to the operating system (glibc's ``malloc_trim``).

CPython takes objects of up to 512 bytes from its own arenas (256 KiB each, mapped apart: an arena whose
objects are all freed goes back to the system at once) and everything bigger (long bytes, the tables of
dicts, sets and lists, sqlite3's row buffers) from the C library's ``malloc``. glibc keeps what is freed for
the next allocation and returns memory to the system only from the top of its heap, so after the store's load
or a burst of big temporaries the RSS stays well above what the keyspace holds (200,000 waiting BullMQ jobs:
~25 bytes per job after a restart, ~12 after the fill; docs/BENCHMARKS.md, "Session 25"). ``malloc_trim(0)``
gives the free pages inside the heap back (``madvise``), keeping the memory mapped.

The server calls :func:`trim` once its store is loaded, and :class:`IdleTrim` from its cron: once after the
server has run no command for ``--heap-trim-idle`` ms (default 2000; 0: never), and not again before the next
command. A busy server, which reuses what it frees at once, never pays for it (a page given back and used
again costs a page fault). Elsewhere than glibc (musl, macOS) there is no ``malloc_trim``: nothing happens.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

_trim_fn: Any = None  # glibc's malloc_trim, False where there is none
trims = 0  # calls that gave memory back (INFO memory, heap_trims)


def _load() -> Any:
    global _trim_fn
    if _trim_fn is None:
        try:
            fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
            fn.argtypes = [ctypes.c_size_t]
            fn.restype = ctypes.c_int
            _trim_fn = fn
        except (OSError, AttributeError):
            _trim_fn = False
    return _trim_fn


def trim() -> bool:
    """Give the C heap's free pages back to the system; True when some were (False also without glibc)."""
    global trims
    fn = _load()
    if not fn:
        return False
    released = bool(fn(0))
    if released:
        trims += 1
    return released


class IdleTrim:
    """Calls :func:`trim` once the server has been idle ``idle_ms`` (no command), then not until it was busy
    again. ``tick`` is called about once a second with the server's command count."""

    __slots__ = ("idle_s", "seen", "since", "done")

    def __init__(self, idle_ms: int) -> None:
        self.idle_s = idle_ms / 1000.0
        self.seen = -1
        self.since = 0.0
        self.done = True  # nothing to give back before the first command

    def tick(self, commands: int, now: float) -> bool:
        """True when it trimmed now."""
        if commands != self.seen:
            self.seen = commands
            self.since = now
            self.done = False
            return False
        if self.done or self.idle_s <= 0 or now - self.since < self.idle_s:
            return False
        self.done = True
        return trim()

"""The journal's change log on a container: how persistence (respqueue/persistence) follows its changes.

A container *attached* to a key (``attach``) logs each element change in ``_jlog`` (the types append
to it in place, a plain attribute access on their hot path); the journal takes the log once per batch
(``take_changes``) and its codec (respqueue/persistence/codec.py) turns it into element rows. A detached
container (``_jlog`` None) logs nothing: the journal writes it whole when it changes (a small hash or
list kept in one row, a container just created or renamed). Outside respqueue/types, code uses these
methods, never ``_jlog``/``_jkey`` themselves.
"""

from __future__ import annotations

from typing import Any


class Journaled:
    """Mixed into every container type; the type declares the ``_jlog`` and ``_jkey`` slots."""

    __slots__ = ()
    _jlog: list[Any] | None
    _jkey: tuple[int, bytes] | None

    def attach(self, key: tuple[int, bytes] | None) -> None:
        """Start (or restart) logging changes, for the rows of ``key`` = (db, key) the store now holds."""
        self._jlog = []
        self._jkey = key

    def detach(self, key: tuple[int, bytes] | None = None) -> None:
        """Stop logging changes: the store keeps this container whole (or not at all)."""
        self._jlog = None
        self._jkey = key

    @property
    def journal_key(self) -> tuple[int, bytes] | None:
        """The (db, key) whose stored rows the logged changes apply to (None: written whole next time).
        Set it to re-key an attached container (SWAPDB) or to have it written whole (None)."""
        return self._jkey

    @journal_key.setter
    def journal_key(self, key: tuple[int, bytes] | None) -> None:
        self._jkey = key

    @property
    def logs_changes(self) -> bool:
        """Whether changes are being logged (attached, to whatever key)."""
        return self._jlog is not None

    def attached(self, key: tuple[int, bytes]) -> bool:
        """Whether this container logs its changes for the rows of ``key``: then the change log, and
        nothing else, is what the store's rows of ``key`` lack."""
        return self._jlog is not None and self._jkey == key

    def take_changes(self) -> list[Any] | None:
        """The changes logged since the last take, in order (the log starts afresh); None when detached.
        Their shape is the type's: ``(element, value or None)`` pairs, a stream's deleted IDs."""
        jl = self._jlog
        if jl:
            self._jlog = []
        return jl

    def changes(self) -> list[Any] | None:
        """The changes logged since the last take, left in the log (None when detached)."""
        return self._jlog

    def pause_log(self) -> list[Any] | None:
        """Stop logging for changes the store has already (a replica applying its master's rows); returns
        the log to give back to :meth:`resume_log`."""
        jl = self._jlog
        self._jlog = None
        return jl

    def resume_log(self, jl: list[Any] | None) -> None:
        """Undo :meth:`pause_log`."""
        self._jlog = jl

"""Hooks that plug-ins subscribe to (as Redis modules subscribe to keyspace events, module.c).

The core announces what happened; it never knows who listens. ``compat/history.py`` subscribes to
``stream_added`` at start-up and keeps the entries of BullMQ's per-queue events streams; the core
itself has no idea what an events stream is.

Events (name: the subscriber's arguments):

* ``stream_added``: ``(client, key, id, argv, field_pos)`` after XADD appended an entry to the stream
  ``key`` in ``client.db`` (``id`` the packed 128-bit ID, ``ms << 64 | seq``; its fields are
  ``argv[field_pos:]``). It runs inside the command, before its reply, so what a subscriber adds to the
  journal's open batch commits with the write.

* ``hash_swapped``: ``(db, key, old, new)`` when the keyspace's value object at ``key`` in ``db`` (a
  ``Database``) was replaced by another holding the same hash: a small hash gone cold (a ``Hash`` -> its
  ``types.hash.ColdHash``, respqueue/coldhash.py) or a cold one used again (``Database.thaw``, back to a
  ``Hash``). Nothing changed for Redis; a subscriber that keeps a reference to the old object (the job
  history's cache of in-flight jobs) swaps it, so it sees later changes and the old object can go.
  Compaction replaces a hash only when nothing else holds it once the subscribers have run, and emits the
  event only when something besides the keyspace holds the old hash (a subscriber that holds no reference
  to it has nothing to swap): a hash only the keyspace holds goes cold without a call.

* ``key_deleted``: ``(db, key, value)`` when ``Database.delete`` removed ``key`` (DEL, UNLINK, native
  code's inline deletes), ``value`` what the keyspace held (a cold hash as its ``ColdHash``). The job history
  keeps a hash deleted in the open batch: BullMQ deletes a finished or removed job's hash before the script
  writes its event.

Cost: the emitting code tests the event's list (``if STREAM_ADDED:``), one global lookup, when nobody
subscribes. A subscriber runs on the hot path of every such command: it must be cheap, must not raise and
must not run commands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: subscribers of ``stream_added`` (emitted by commands/streams.py); mutated in place, never rebound
STREAM_ADDED: list[Callable[..., Any]] = []

#: subscribers of ``hash_swapped`` (emitted by keyspace.Database.thaw and coldhash.ColdHashes)
HASH_SWAPPED: list[Callable[..., Any]] = []

#: subscribers of ``key_deleted`` (emitted by keyspace.Database.delete)
KEY_DELETED: list[Callable[..., Any]] = []

_EVENTS: dict[str, list[Callable[..., Any]]] = {
    "stream_added": STREAM_ADDED, "hash_swapped": HASH_SWAPPED, "key_deleted": KEY_DELETED,
}


def subscribe(event: str, fn: Callable[..., Any]) -> None:
    """Call ``fn`` on every ``event`` (once per function: subscribing twice is a no-op)."""
    subs = _EVENTS.get(event)
    if subs is None:
        raise ValueError(f"unknown event {event!r} (known: {', '.join(sorted(_EVENTS))})")
    if fn not in subs:
        subs.append(fn)


def unsubscribe(event: str, fn: Callable[..., Any]) -> None:
    """Stop calling ``fn`` on ``event`` (nothing if it was not subscribed)."""
    subs = _EVENTS.get(event)
    if subs is not None and fn in subs:
        subs.remove(fn)


def subscribers(event: str) -> list[Callable[..., Any]]:
    """The functions subscribed to ``event`` (a copy)."""
    return list(_EVENTS.get(event, ()))

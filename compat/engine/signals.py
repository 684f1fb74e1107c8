"""BullMQ's marker as a wake-up signal (respqueue.persistence.signals).

``<prefix>:<queue>:marker`` is a sorted set a worker blocks on (BZPOPMIN) to learn that a job may be ready;
it then runs moveToActive, a script whose reply waits for its own commit. The marker carries no job data,
so the reply of a BZPOPMIN (or any sorted-set command) on it need not wait for its own commit, only for the
batches before it (respqueue/persistence/signals.py): a crash can only bring a popped marker back, one more
wake-up. Without that, in durable mode a worker woken by an add waited
for one more commit than the client that added (its pop is a write of the next batch), and another worker
started meanwhile could take the job first (BullMQ's `does not process a job that is being processed when
a new queue starts`). A key counts only when the queue shows one of the keys BullMQ writes for every queue.
"""

from __future__ import annotations

from typing import Any

from respqueue.persistence.signals import register_signal

_SUFFIX = b":marker"
_QUEUE_KEYS = (b"meta", b"events", b"id", b"stalled-check")


def is_marker(db: Any, key: bytes) -> bool:
    """Whether ``key`` is the marker of a BullMQ queue in ``db``."""
    if not key.endswith(_SUFFIX):
        return False
    prefix = key[: -len(_SUFFIX) + 1]  # "<prefix>:<queue>:"
    data = db.data
    for s in _QUEUE_KEYS:
        if prefix + s in data:
            return True
    return False


register_signal(is_marker)

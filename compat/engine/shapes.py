"""BullMQ's job hashes as store shapes of the core's small hashes (respqueue/types/hash.py).

A BullMQ job is a hash whose field names come in a few orders only: ``addStandardJob`` and its siblings write
``name data opts timestamp delay priority``, then ``parentKey parent`` (a child of a flow), ``rjk`` (made by a
repeat or a job scheduler) and ``deid`` (deduplicated) when they apply; taking the job adds ``processedOn``
(``pb``, the worker's name, when it has one) and ``ats``; finishing it adds ``atm returnvalue finishedOn`` or
``failedReason stacktrace atm finishedOn``. Registered as store shapes, such a hash is packed with its
shape's number instead of its ~40 bytes of names, in memory and in its store row alike, so a cold job keeps
its row's bytes as they are (docs/STORAGE.md, "Small hashes by shape").

The numbers are stored: this list is only ever appended to (tests/test_hash_shapes.py pins it).
"""

from __future__ import annotations

from respqueue.types.hash import register_store_shapes

_ADDED = (b"name", b"data", b"opts", b"timestamp", b"delay", b"priority")
_OPTIONAL = ((), (b"parentKey", b"parent"), (b"rjk",), (b"deid",), (b"parentKey", b"parent", b"rjk"),
             (b"parentKey", b"parent", b"deid"), (b"rjk", b"deid"), (b"parentKey", b"parent", b"rjk", b"deid"))
_TAKEN = ((b"processedOn", b"ats"), (b"processedOn", b"pb", b"ats"))
_FINISHED = ((), (b"atm", b"returnvalue", b"finishedOn"), (b"failedReason", b"stacktrace", b"atm", b"finishedOn"))


def job_shapes() -> list[tuple[bytes, ...]]:
    """BullMQ's job hash shapes, in their store numbers' order."""
    out: list[tuple[bytes, ...]] = []
    for opt in _OPTIONAL:
        added = _ADDED + opt
        out.append(added)
        for taken in _TAKEN:
            for fin in _FINISHED:
                out.append(added + taken + fin)
    return out


register_store_shapes(job_shapes())

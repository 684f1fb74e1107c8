"""BullMQ's queue engine: what respqueue knows about a queue's keys beyond their Redis types.

``layout.py`` stores a job as one row (its hash's ``keys`` row, stamped with the state container that
holds it and its score or list position), so a job's moves between BullMQ's state containers rewrite
that one row instead of list and zset member rows. See docs/STORAGE.md ("Job rows").
"""

"""respqueue: a Redis-protocol server for BullMQ job queues, durable on SQLite."""

from . import speedups

__version__ = "0.1.0"

speedups.install()  # before any compiled module is imported (respqueue/speedups.py)

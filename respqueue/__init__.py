"""respqueue: a Redis-protocol server for BullMQ job queues, durable on SQLite."""

__version__ = "0.1.0"

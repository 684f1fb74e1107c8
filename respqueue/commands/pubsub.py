"""pubsub commands (to be written)."""

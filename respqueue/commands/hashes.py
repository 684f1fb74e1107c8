"""hashes commands (to be written)."""

"""server commands (to be written)."""

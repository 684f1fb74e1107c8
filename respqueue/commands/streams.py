"""streams commands (to be written)."""

"""lists commands (to be written)."""

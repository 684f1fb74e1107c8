"""sets commands (to be written)."""

"""transactions commands (to be written)."""

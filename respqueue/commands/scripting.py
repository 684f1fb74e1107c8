"""scripting commands (to be written)."""

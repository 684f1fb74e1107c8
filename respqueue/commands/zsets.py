"""zsets commands (to be written)."""

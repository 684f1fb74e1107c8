"""BullMQ compatibility: the queue engine, native scripts, job history (plug-ins of respqueue)."""

# importing respqueue first decides which build of the compiled modules runs (respqueue/speedups.py), before
# compat.native finds any of them
import respqueue  # noqa: F401

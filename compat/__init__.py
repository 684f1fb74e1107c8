"""BullMQ compatibility: the queue engine, native scripts, job history (plug-ins of respqueue)."""

from respqueue import speedups

speedups.install()  # (a no-op once respqueue decided: compat.native imports compiled modules)

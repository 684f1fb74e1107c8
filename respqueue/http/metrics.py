"""``/metrics``: the Prometheus text exposition format (version 0.0.4).

:class:`Exposition` writes metric families (``# HELP``, ``# TYPE``, then the samples, each family once).
:func:`render` writes the server's own families, then calls every ``server.metrics_providers`` entry
(``fn(exposition)``) for more: compat/ adds BullMQ's per-queue families that way.
"""

from __future__ import annotations

import logging
import math
import resource
import time
from typing import Any

from .. import __version__
from ..stats import Histogram

log = logging.getLogger("respqueue")


def _fmt(v: float | int) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if math.isnan(v):
        return "NaN"
    return repr(float(v))


def _esc_label(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: dict[str, Any] | None) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_esc_label(str(v))}"' for k, v in labels.items()) + "}"


class Exposition:
    """The text of one scrape."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.names: set[str] = set()

    def family(self, name: str, kind: str, help_text: str) -> None:
        """Start the family ``name`` (``counter``, ``gauge``, ``histogram``, ``summary``, ``untyped``)."""
        if name in self.names:
            raise ValueError(f"metric family {name} written twice")
        self.names.add(name)
        self.out.append(f"# HELP {name} {help_text.replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + 'n')}")
        self.out.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, value: float | int, labels: dict[str, Any] | None = None) -> None:
        self.out.append(f"{name}{_labels(labels)} {_fmt(value)}")

    def metric(
        self, name: str, kind: str, help_text: str, value: float | int, labels: dict[str, Any] | None = None
    ) -> None:
        """A family of one sample."""
        self.family(name, kind, help_text)
        self.sample(name, value, labels)

    def histogram(self, name: str, h: Histogram, labels: dict[str, Any] | None = None) -> None:
        """The samples of one histogram (call :meth:`family` with ``histogram`` first)."""
        base = dict(labels or {})
        for le, n in h.cumulative():
            self.sample(name + "_bucket", n, {**base, "le": _fmt(float(le))})
        self.sample(name + "_sum", h.sum * h.scale, labels)
        self.sample(name + "_count", h.count, labels)

    def text(self) -> str:
        return "\n".join(self.out) + "\n"


def rss_bytes() -> int:
    from ..commands.info import _rss_bytes

    return _rss_bytes()


def server_metrics(server: Any, e: Exposition) -> None:
    """The server's own families."""
    from ..commands.connection import REDIS_VERSION
    from ..commands.introspection import _all_commands

    now = time.time()
    e.metric(
        "respqueue_build_info",
        "gauge",
        "Always 1; the version and the Redis version it answers as.",
        1,
        {"version": __version__, "redis_version": REDIS_VERSION},
    )
    e.metric("respqueue_start_time_seconds", "gauge", "When the server started (Unix time).", server.start_time)
    e.metric("respqueue_uptime_seconds", "gauge", "Seconds since the server started.", now - server.start_time)
    clients = server.clients
    blocked = sum(1 for c in clients.values() if getattr(c, "blocked", None) is not None)
    e.metric("respqueue_connected_clients", "gauge", "Client connections open now.", len(clients))
    e.metric("respqueue_blocked_clients", "gauge", "Clients waiting in a blocking command.", blocked)
    e.metric("respqueue_maxclients", "gauge", "The connection limit (maxclients).", server.config.maxclients)
    e.metric(
        "respqueue_connections_received_total", "counter", "Connections accepted.", server.stats_connections_received
    )
    e.metric(
        "respqueue_rejected_connections_total",
        "counter",
        "Connections refused (maxclients).",
        server.stats_rejected_connections,
    )
    e.metric("respqueue_commands_processed_total", "counter", "Commands received from clients.", server.stats_commands)
    cmds = [c for c in _all_commands() if c.calls or c.failed_calls or c.rejected_calls]
    e.family(
        "respqueue_command_calls_total",
        "counter",
        "Calls per command (from clients, MULTI/EXEC and scripts), as INFO commandstats.",
    )
    for c in cmds:
        e.sample("respqueue_command_calls_total", c.calls, {"cmd": c.fullname})
    e.family("respqueue_command_failed_calls_total", "counter", "Calls per command that replied with an error.")
    for c in cmds:
        e.sample("respqueue_command_failed_calls_total", c.failed_calls, {"cmd": c.fullname})
    e.family(
        "respqueue_command_rejected_calls_total",
        "counter",
        "Calls per command refused before running (arity, auth, MISCONF...).",
    )
    for c in cmds:
        e.sample("respqueue_command_rejected_calls_total", c.rejected_calls, {"cmd": c.fullname})
    e.family(
        "respqueue_command_duration_seconds",
        "summary",
        "Time spent running each command (measured for client calls; _count is every call).",
    )
    for c in cmds:
        e.sample("respqueue_command_duration_seconds_sum", c.usec / 1e6, {"cmd": c.fullname})
        e.sample("respqueue_command_duration_seconds_count", c.calls, {"cmd": c.fullname})
    errs = getattr(server, "errorstats", {}) or {}
    e.family("respqueue_error_replies_total", "counter", "Error replies by their first word (INFO errorstats).")
    for k, v in errs.items():
        e.sample("respqueue_error_replies_total", v, {"kind": k.decode("latin-1") if isinstance(k, bytes) else k})
    e.metric("respqueue_keyspace_hits_total", "counter", "Key lookups that found the key.", server.stats_keyspace_hits)
    e.metric(
        "respqueue_keyspace_misses_total",
        "counter",
        "Key lookups that did not find the key.",
        server.stats_keyspace_misses,
    )
    e.metric(
        "respqueue_expired_keys_total", "counter", "Keys deleted because their TTL passed.", server.stats_expired_keys
    )
    e.metric("respqueue_memory_rss_bytes", "gauge", "Resident memory of the server process.", rss_bytes())
    ru = resource.getrusage(resource.RUSAGE_SELF)
    e.family("respqueue_cpu_seconds_total", "counter", "CPU time of the server process (the store writer excluded).")
    e.sample("respqueue_cpu_seconds_total", ru.ru_utime, {"mode": "user"})
    e.sample("respqueue_cpu_seconds_total", ru.ru_stime, {"mode": "system"})
    e.family("respqueue_db_keys", "gauge", "Keys per database (databases holding keys).")
    dbs = [db for db in server.dbs if db.data]
    for db in dbs:
        e.sample("respqueue_db_keys", len(db.data), {"db": db.index})
    e.family("respqueue_db_keys_expiring", "gauge", "Keys with a TTL per database.")
    for db in dbs:
        e.sample("respqueue_db_keys_expiring", len(db.expires), {"db": db.index})
    e.metric("respqueue_pubsub_channels", "gauge", "Pub/sub channels with subscribers.", len(server.pubsub_channels))
    store_metrics(server, e)


def store_metrics(server: Any, e: Exposition) -> None:
    """The SQLite store: commits, their time and size, writer errors (absent in memory mode)."""
    j = server.journal
    durability = (server.config.durability or "durable").lower()
    e.metric("respqueue_store_info", "gauge", "Always 1; the durability mode.", 1, {"durability": durability})
    if j is None:
        return
    e.metric("respqueue_store_commits_total", "counter", "Batches committed to the SQLite store.", j.commits)
    e.metric(
        "respqueue_store_commit_errors_total", "counter", "Store commits that failed (writer errors).", j.commit_errors
    )
    e.metric(
        "respqueue_store_write_refused",
        "gauge",
        "1 while writes are refused (MISCONF) after a failed commit.",
        1 if server.write_refused is not None else 0,
    )
    e.metric(
        "respqueue_store_last_commit_timestamp_seconds",
        "gauge",
        "When the last commit finished (Unix time).",
        j.last_commit_time,
    )
    e.metric(
        "respqueue_store_uncommitted_changes",
        "gauge",
        "Changes not committed yet (open and in-flight batch).",
        j.uncommitted(),
    )
    e.family(
        "respqueue_store_commit_duration_seconds",
        "histogram",
        "Time the writer took to commit a batch (one SQLite transaction).",
    )
    e.histogram("respqueue_store_commit_duration_seconds", j.commit_seconds)
    e.family("respqueue_store_batch_changes", "histogram", "Keyspace changes per committed batch (group commit).")
    e.histogram("respqueue_store_batch_changes", j.batch_changes)


def render(server: Any) -> str:
    """The whole scrape."""
    e = Exposition()
    server_metrics(server, e)
    for fn in list(server.metrics_providers):
        try:
            fn(e)
        except Exception:  # a provider's bug must not take the scrape (or the server) down
            log.exception("metrics provider %r failed", fn)
    return e.text()

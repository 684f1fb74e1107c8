"""Command modules, one per family; importing this package fills the command table."""

from importlib import import_module

MODULES = (
    "connection",
    "keys",
    "strings",
    "hashes",
    "lists",
    "sets",
    "zsets",
    "streams",
    "transactions",
    "pubsub",
    "config",
    "info",
    "introspection",
    "slowlog",
    "server",
    "debug",
    "scripting",
    "acl",
    "cluster",
)

for _m in MODULES:
    import_module(f"{__name__}.{_m}")
import_module("respqueue.replication.commands")  # REPLICAOF, REPLCONF, PSYNC

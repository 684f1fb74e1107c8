"""Per-client state shared by network connections and script callers."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .keyspace import Database
    from .server import Server


class Client:
    """What a command procedure may read or change about its caller.

    Network connections (:class:`respqueue.protocol.ClientConnection`) and the
    Lua bridge's caller both are Clients, so commands never know who called.
    """

    # Flags a network connection overrides.
    is_script = False
    in_exec = False
    # cluster mode (respqueue/cluster/): ASKING covers the next command; READONLY
    asking = False
    cluster_readonly = False

    def __init__(self, server: Server) -> None:
        self.server = server
        self.id = server.next_client_id()
        self.db: Database = server.dbs[0]
        self.resp = 2
        self.name: bytes | None = None
        self.lib_name: bytes = b""
        self.lib_ver: bytes = b""
        self.authenticated = not server.config.requirepass
        self.multi: list[tuple[Any, list[bytes]]] | None = None
        self.multi_error = False
        self.watched_keys: list[tuple[Database, bytes, int]] = []
        self.dirty_cas = False
        self.channels: set[bytes] = set()
        self.patterns: set[bytes] = set()
        self.created = time.time()
        self.last_interaction = self.created
        self.last_cmd: Any = None
        self.no_evict = False
        self.reply_mode: bytes | None = None  # CLIENT REPLY: None (on), b"off" or b"skip"
        self.no_touch = False
        self.flags_text = b"N"

    @property
    def subscriptions(self) -> int:
        return len(self.channels) + len(self.patterns)

    @property
    def may_block(self) -> bool:
        return not self.is_script and not self.in_exec

    def select(self, index: int) -> None:
        self.db = self.server.dbs[index]

    def send_push(self, msg: Any) -> None:
        """Deliver an out-of-band message (pub/sub); network clients override."""

    def close_after_reply(self) -> None:
        """Close the connection once pending replies are written; network clients override."""

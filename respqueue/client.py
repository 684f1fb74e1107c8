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
    acl_unrestricted = True  # False while the client's ACL user is restricted (respqueue/acl.py)
    is_unix = False
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
        acl = getattr(server, "acl", None)
        if acl is not None:  # the default user (respqueue/acl.py); the fast path skips ACL checks
            d = acl.default
            self.user = d
            self.authenticated = "nopass" in d.flags and d.enabled
            self.acl_unrestricted = d.unrestricted and len(d.selectors) == 1
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

"""Replication: a master streams its committed batches to replicas (docs/REPLICATION.md).

``server.repl`` is a :class:`Replication`. On a master, every batch the journal hands to the writer
becomes a frame of the replication stream (the batch's row operations, msgpack, as one RESP bulk
string); once the batch has committed, the frame goes to the backlog and to every online replica.
A replica applies the frames it receives to its own store, in order, and reloads the keys they
touched (master.py, replica.py). Offsets count bytes of the stream, as Redis's do, and the
replication id and offset a store is at are committed with the batch that brought it there
(``meta`` rows ``repl_id``, ``repl_offset``), so a restarted replica resumes where it was.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

from ..resp import RedisError
from .backlog import Backlog

log = logging.getLogger("respqueue")

READONLY = RedisError("READONLY You can't write against a read only replica.")
META_SQL = "INSERT OR REPLACE INTO meta(name, value) VALUES(?,?)"
PING_FRAME = b"$1\r\n\xc0\r\n"  # msgpack nil: a heartbeat (advances the offset, as Redis's PING)

from .master import drop_slaves, feed, pack_frame, pinger, slave_gone, update_acked  # noqa: E402


class Replication:
    """The replication state of a server, master or replica."""

    def __init__(self, server: Any) -> None:
        self.server = server
        cfg = server.config
        self.replid = secrets.token_hex(20)
        self.replid2 = "0" * 40
        self.offset = 0  # master_repl_offset: the end of the stream this node holds
        self.second_offset = -1
        self.backlog: Backlog | None = None
        self.backlog_size = int(getattr(cfg, "repl_backlog_size", 1 << 20))
        self.ack_n = int(getattr(cfg, "replica_ack", 0) or 0)
        # master side
        self.slaves: dict[Any, Any] = {}  # ClientConnection -> master.SlaveState
        self.pending: tuple[int, bytes, int] | None = None  # (batch id, frame, end offset) being committed
        self.bid_offsets: dict[int, int] = {}  # batch id -> stream offset after it (replica-ack)
        self.acked_bid = 0  # the last batch acked by ack_n replicas
        self.waits: dict[Any, tuple[int, int]] = {}  # WAIT: client -> (offset, replicas)
        # replica side
        self.master_host: str | None = None
        self.master_port = 0
        self.link: Any = None  # replica.MasterLink while a replica
        self.link_down_since = time.time()
        self.pinger: Any = None  # master.pinger's task
        self._load_state()

    # ---- state ---------------------------------------------------------------
    @property
    def is_replica(self) -> bool:
        return self.master_host is not None

    def _load_state(self) -> None:
        j = self.server.journal
        conn = j.store.conn if j is not None else None
        if conn is None:
            return
        rows = dict(
            conn.execute(
                "SELECT name, value FROM meta WHERE name IN ('repl_id', 'repl_offset', 'repl_id2', 'repl_offset2')"
            )
        )
        if "repl_id" in rows and "repl_offset" in rows:
            self.replid = rows["repl_id"]
            self.offset = int(rows["repl_offset"])
        if "repl_id2" in rows and "repl_offset2" in rows:
            self.replid2 = rows["repl_id2"]
            self.second_offset = int(rows["repl_offset2"])

    def state_rows(self) -> list[tuple[str, str]]:
        return [
            ("repl_id", self.replid),
            ("repl_offset", str(self.offset)),
            ("repl_id2", self.replid2),
            ("repl_offset2", str(self.second_offset)),
        ]

    def persist_state(self) -> None:
        """Commit the replication id/offset with the journal's next batch."""
        j = self.server.journal
        if j is not None:
            for row in self.state_rows():
                j.append_op(META_SQL, row)

    def ensure_backlog(self) -> Backlog:
        if self.backlog is None:
            self.backlog = Backlog(self.backlog_size, self.offset)
        return self.backlog

    # ---- journal hooks (master) ----------------------------------------------
    def on_submit(self, bid: int, ops: list[Any]) -> None:
        """The journal hands batch ``bid`` to the writer: frame it, and commit the offset with it."""
        if self.backlog is None or self.is_replica:
            return
        body = [op for op in ops if op[0] != META_SQL]
        if not body:
            if self.ack_n:
                self.bid_offsets[bid] = self.offset
            return
        frame = pack_frame(body)
        end = self.offset + len(frame)
        ops.append((META_SQL, [("repl_id", self.replid), ("repl_offset", str(end))], True))
        self.pending = (bid, frame, end)
        if self.ack_n:
            self.bid_offsets[bid] = end

    def on_commit(self, bid: int) -> None:
        p = self.pending
        if p is None or p[0] != bid:
            return
        self.pending = None
        feed(self, p[1])

    def on_failed(self, bid: int) -> None:
        if self.pending is not None and self.pending[0] == bid:
            self.pending = None
        self.bid_offsets.pop(bid, None)

    def release_bid(self, committed: int) -> int:
        """--replica-ack: the last batch whose held replies may go (committed and acked)."""
        if self.bid_offsets:
            update_acked(self)  # a batch with nothing to stream is acked as soon as it commits
        return min(committed, self.acked_bid)

    def refusal(self) -> RedisError | None:
        """What write commands get when the store is fine: READONLY on a replica."""
        return READONLY if self.is_replica else None

    def client_gone(self, c: Any) -> None:
        if self.waits:
            self.waits.pop(c, None)
        if self.slaves and c in self.slaves:
            slave_gone(self, c)

    # ---- roles ---------------------------------------------------------------
    def replicaof(self, host: str, port: int) -> None:
        from .replica import MasterLink

        server = self.server
        if server.journal is None:
            raise RedisError("ERR replication needs a store: run with --durability durable or buffered")
        if self.link is not None:
            self.link.stop()
        drop_slaves(self)
        if not self.is_replica:
            # as Redis: a blocked command (BLPOP, BZPOPMIN, XREAD BLOCK, WAIT) would write or wait on a
            # master that this node no longer is
            unblocked = RedisError(
                "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"
            )
            for c in list(server.clients.values()):
                if getattr(c, "blocked", None) is not None:
                    server.unblock_client(c)
                    self.waits.pop(c, None)
                    c.unblocked_with(unblocked)
        self.bid_offsets.clear()
        self.pending = None
        self.master_host, self.master_port = host, port
        server.config.replicaof = f"{host} {port}"  # CONFIG GET replicaof
        server.write_refused = READONLY
        server.active_expire_enabled = False
        self.link_down_since = time.time()
        self.link = MasterLink(self, host, port)
        self.link.start()
        log.info("replica of %s:%d", host, port)

    def promote(self) -> None:
        """REPLICAOF NO ONE: a replica becomes a master, keeping its data (a new replication id)."""
        if not self.is_replica:
            return
        if self.link is not None:
            self.link.stop()
            self.link = None
        self.master_host = None
        self.master_port = 0
        self.server.config.replicaof = None
        self.replid2 = self.replid
        self.second_offset = self.offset + 1
        self.replid = secrets.token_hex(20)
        self.ensure_backlog()
        server = self.server
        # --replica-ack counts from here: what this node acked as a master before it was a replica
        # says nothing about its new batches
        self.bid_offsets.clear()
        self.pending = None
        self.acked_bid = server.journal.committed_id if server.journal is not None else 0
        if server.write_refused is READONLY:
            server.write_refused = None
        server.active_expire_enabled = True
        self.persist_state()
        log.info("promoted to master (replication id %s, offset %d)", self.replid, self.offset)


def open_replication(server: Any) -> Replication:
    repl = Replication(server)
    if server.journal is not None:
        repl.pinger = asyncio.get_running_loop().create_task(pinger(repl))
    cfg = server.config
    target = getattr(cfg, "replicaof", None)
    if target:
        parts = str(target).split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0].lower() != "no":
            repl.replicaof(parts[0], int(parts[1]))
        elif not (len(parts) == 2 and parts[0].lower() == "no" and parts[1].lower() == "one"):
            from ..persistence import StoreError

            raise StoreError(f"replicaof must be 'host port', not {target!r}")
    return repl

"""PUBLISH across the cluster: what Redis's cluster bus does for pub/sub, over ordinary connections.

A PUBLISH on one node reaches the subscribers of every node: the node hands the message to each other node
with ``CLUSTER PUBLISHFWD channel message`` (delivered there to local subscribers only, never forwarded
again). One connection per peer, opened on first use; while a peer is unreachable its messages are dropped,
as Redis drops bus messages to a node whose link is down.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("respqueue")

MAX_QUEUED = 10000  # messages waiting for one peer's connection; beyond this they are dropped


def _encode(args: list[bytes]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Peer:
    def __init__(self, host: str, port: int, password: str | None) -> None:
        self.host, self.port, self.password = host, port, password
        self.writer: asyncio.StreamWriter | None = None
        self.pending: list[bytes] = []
        self.connecting = False
        self.task: asyncio.Task[None] | None = None  # the connection's task (held: the loop keeps weak references)

    def send(self, frame: bytes) -> None:
        w = self.writer
        if w is not None and not w.is_closing():
            w.write(frame)
            return
        if len(self.pending) < MAX_QUEUED:
            self.pending.append(frame)
        if not self.connecting:
            self.connecting = True
            self.task = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), 5)
        except (OSError, TimeoutError) as e:
            log.debug("cluster bus: cannot reach %s:%d: %s", self.host, self.port, e)
            self.pending.clear()
            self.connecting = False
            return
        if self.password:
            writer.write(_encode([b"AUTH", self.password.encode()]))
        writer.write(b"".join(self.pending))
        self.pending.clear()
        self.writer = writer
        self.connecting = False
        try:
            while await reader.read(1 << 16):
                pass  # the replies (integers) are not needed
        except OSError:
            pass
        finally:
            self.writer = None
            writer.close()


class Bus:
    def __init__(self, cluster: Any, password: str | None) -> None:
        self.cluster = cluster
        self.password = password
        self.peers: dict[str, Peer] = {}

    def publish(self, channel: bytes, message: bytes) -> None:
        """Hand a PUBLISH to every other node."""
        me = self.cluster.myself
        frame = b""
        for n in self.cluster.nodes.values():
            if n is me:
                continue
            p = self.peers.get(n.id)
            if p is None or p.host != n.host or p.port != n.port:
                p = self.peers[n.id] = Peer(n.host, n.port, self.password)
            if not frame:
                frame = _encode([b"CLUSTER", b"PUBLISHFWD", channel, message])
            p.send(frame)

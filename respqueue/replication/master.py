"""The master's side: PSYNC (full or partial), feeding frames, acknowledgements, WAIT, --replica-ack."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from typing import Any

import msgpack

from ..resp import RedisError

log = logging.getLogger("respqueue")
_pack = msgpack.Packer(use_bin_type=True).pack
CHUNK = 1 << 20
# a replica that does not read its stream is dropped past this much unsent output (Redis's
# client-output-buffer-limit for replicas, 256 MB hard); it resumes or resyncs when it reconnects
OUTPUT_LIMIT = 256 << 20


def pack_frame(ops: list[Any]) -> bytes:
    """A batch's row operations as one frame of the replication stream (a RESP bulk string)."""
    payload = _pack(ops)
    return b"$%d\r\n%s\r\n" % (len(payload), payload)


class SlaveState:
    """A replica connected to this master (``conn.repl_slave``)."""

    __slots__ = ("conn", "ip", "port", "state", "ack", "ack_time", "buffer", "start")

    def __init__(self, conn: Any, port: int) -> None:
        self.conn = conn
        self.ip = conn.addr.rsplit(b":", 1)[0].decode()
        self.port = port
        self.state = "wait_bgsave"
        self.ack = 0
        self.ack_time = time.time()
        self.buffer: list[tuple[int, bytes]] = []  # frames fed while the snapshot is prepared
        self.start = 0


def feed(repl: Any, frame: bytes) -> None:
    """A committed batch's frame: to the backlog and to every replica."""
    bl = repl.ensure_backlog()
    start = bl.end
    repl.offset = bl.append(frame)
    slow = None
    for conn, st in repl.slaves.items():
        if st.state == "online":
            t = conn.transport
            if t is not None and not t.is_closing():
                t.write(frame)
                if t.get_write_buffer_size() > OUTPUT_LIMIT:
                    slow = [*(slow or ()), conn]
        else:
            st.buffer.append((start, frame))
    for conn in slow or ():
        log.warning("replica %s is %d bytes behind: dropping its link", conn.addr.decode(), OUTPUT_LIMIT)
        conn.close("replica output buffer limit reached")


def psync(repl: Any, conn: Any, replid: str, off: int) -> None:
    """Serve ``PSYNC replid off`` (``off``: the first byte the replica wants)."""
    server = repl.server
    if repl.is_replica:
        raise RedisError("ERR respqueue replicas do not serve replicas of their own (no chained replication)")
    if server.journal is None:
        raise RedisError("ERR replication needs a store: run the master with --durability durable or buffered")
    if getattr(conn, "repl_slave", None) is not None:
        raise RedisError("ERR this connection is already a replica")
    if repl.backlog is None:
        repl.ensure_backlog()
        # batches handed to the writer before the backlog existed carry no frame: the snapshot
        # must hold them
        repl.activated_bid = server.journal.open_id - 1
    bl = repl.backlog
    st = SlaveState(conn, getattr(conn, "repl_listening_port", 0))
    conn.repl_slave = st
    conn.flags_text = b"S"
    repl.slaves[conn] = st
    t = conn.transport
    r = off - 1
    if off >= 1 and (replid == repl.replid or (replid == repl.replid2 and off <= repl.second_offset)):
        frames = bl.since(r)
        if frames is not None:
            t.write(b"+CONTINUE %s\r\n" % repl.replid.encode())
            if frames:
                t.write(b"".join(frames))
            st.state = "online"
            st.ack = r
            log.info("replica %s:%d resumed at offset %d (%d bytes sent)", st.ip, st.port, r, sum(map(len, frames)))
            return
    st.start = repl.offset
    asyncio.get_running_loop().create_task(_full_sync(repl, conn, st))


async def _full_sync(repl: Any, conn: Any, st: SlaveState) -> None:
    server = repl.server
    j = server.journal
    tmp = os.path.join(server.config.dir, f"replsync-{conn.id}.db")
    try:
        while j.committed_id < getattr(repl, "activated_bid", 0) and j.failed_ops is None:
            await asyncio.sleep(0.005)
        from ..backup import snapshot

        t0 = time.perf_counter()
        await asyncio.to_thread(snapshot, server.config.dir, tmp)
        c2 = sqlite3.connect(tmp)
        try:
            rows = dict(c2.execute("SELECT name, value FROM meta WHERE name IN ('repl_id', 'repl_offset')"))
        finally:
            c2.close()
        if rows.get("repl_id") in (repl.replid, repl.replid2) and "repl_offset" in rows:
            at = max(int(rows["repl_offset"]), st.start)
        else:
            at = st.start
        if conn.closing or repl.slaves.get(conn) is not st:
            return
        size = os.path.getsize(tmp)
        t = conn.transport
        st.state = "send_bulk"
        t.write(b"+FULLRESYNC %s %d\r\n$%d\r\n" % (repl.replid.encode(), at, size))
        with open(tmp, "rb") as f:
            while True:
                data = f.read(CHUNK)
                if not data:
                    break
                t.write(data)
                while t.get_write_buffer_size() > 8 * CHUNK and not t.is_closing():
                    await asyncio.sleep(0.005)
                if t.is_closing():
                    return
        # the frames committed while the snapshot was taken and sent, from its offset on
        parts = [f for s, f in st.buffer if s >= at]
        st.buffer = []
        if parts:
            t.write(b"".join(parts))
        st.state = "online"
        st.ack = at
        st.ack_time = time.time()
        log.info(
            "replica %s:%d synchronised: %d-byte snapshot at offset %d in %.3f s",
            st.ip,
            st.port,
            size,
            at,
            time.perf_counter() - t0,
        )
    except Exception as e:  # noqa: BLE001 - the replica retries
        log.error("full synchronisation of replica %s:%d failed: %s", st.ip, st.port, e)
        conn.close("replica sync failed")
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def slave_gone(repl: Any, conn: Any) -> None:
    st = repl.slaves.pop(conn, None)
    if st is not None:
        log.info("replica %s:%d disconnected", st.ip, st.port)


def drop_slaves(repl: Any) -> None:
    for conn in list(repl.slaves):
        conn.close("instance became a replica")
    repl.slaves.clear()


def ack(repl: Any, conn: Any, offset: int) -> None:
    st = repl.slaves.get(conn)
    if st is None:
        return
    st.ack_time = time.time()
    if offset > st.ack:
        st.ack = offset
    if repl.ack_n and repl.bid_offsets:
        _advance_acked(repl)
    if repl.waits:
        _serve_waits(repl)


def acked_by(repl: Any, offset: int) -> int:
    """How many online replicas have acknowledged ``offset``."""
    return sum(1 for st in repl.slaves.values() if st.state == "online" and st.ack >= offset)


def update_acked(repl: Any) -> bool:
    """--replica-ack N: move ``acked_bid`` to the last batch N replicas have committed; True if it moved."""
    acks = sorted((st.ack for st in repl.slaves.values() if st.state == "online"), reverse=True)
    if len(acks) < repl.ack_n:
        return False
    upto = acks[repl.ack_n - 1]
    best = repl.acked_bid
    for bid, off in list(repl.bid_offsets.items()):
        if off <= upto:
            best = max(best, bid)
            del repl.bid_offsets[bid]
    if best > repl.acked_bid:
        repl.acked_bid = best
        return True
    return False


def _advance_acked(repl: Any) -> None:
    """--replica-ack N: release the held replies of the batches N replicas have committed."""
    if update_acked(repl):
        best = repl.acked_bid
        j = repl.server.journal
        if j is not None and j.waiters:
            j._release(min(best, j.committed_id), None)


def wait_target(repl: Any) -> int:
    """The stream offset a WAIT must see acknowledged: the end of what this client can have written
    (its write may still be in the journal's open or in-flight batch)."""
    j = repl.server.journal
    if j is None:
        return repl.offset
    if j.dirty or j.pending or j.row_ops or j.busy or j.scheduled:
        return -1  # not yet framed: resolved when the journal is idle
    return repl.offset


def _serve_waits(repl: Any) -> None:
    for c, (target, n) in list(repl.waits.items()):
        if target < 0:
            continue
        got = acked_by(repl, target)
        st = c.blocked
        if st is None:
            repl.waits.pop(c, None)
            continue
        st.timeout_reply = got
        if got >= n:
            repl.waits.pop(c, None)
            repl.server.unblock_by_id(c.id, False)


async def resolve_wait(repl: Any, c: Any) -> None:
    """A WAIT issued while the client's write was not yet framed: wait for the journal, then target."""
    j = repl.server.journal
    try:
        await j.flush()
    except RedisError:
        pass
    w = repl.waits.get(c)
    if w is not None and w[0] < 0:
        repl.waits[c] = (repl.offset, w[1])
        _serve_waits(repl)


async def pinger(repl: Any) -> None:
    """Heartbeat frames (Redis's PING every repl-ping-replica-period seconds)."""
    from . import META_SQL, PING_FRAME

    while True:
        await asyncio.sleep(max(1, int(getattr(repl.server.config, "repl_ping_replica_period", 10))))
        j = repl.server.journal
        if repl.slaves and not repl.is_replica and repl.pending is None and not j.busy:
            feed(repl, PING_FRAME)
            j.append_op(META_SQL, ("repl_offset", str(repl.offset)))  # the store keeps the offset

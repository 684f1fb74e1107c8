"""REPLICAOF/SLAVEOF, REPLCONF, PSYNC/SYNC, and what ROLE, INFO replication and WAIT report."""

from __future__ import annotations

import asyncio
import os
import re
import time
from typing import Any

from ..commands.registry import command
from ..commands.util import eq, str2int
from ..resp import NO_REPLY, OK, RedisError, Status
from . import master

_ALREADY = Status(b"OK Already connected to specified master")


def _repl(c: Any) -> Any:
    r = c.server.repl
    if r is None:
        raise RedisError("ERR replication is not available on this server")
    return r


@command("replicaof", 3, "admin noscript stale no_async_loading", group="server")
def replicaof(c: Any, argv: list[bytes]) -> Any:
    repl = _repl(c)
    if eq(argv[1], b"no") and eq(argv[2], b"one"):
        if repl.is_replica:
            repl.promote()
        return OK
    port = str2int(argv[2])
    if port is None or port < 0 or port > 65535:
        raise RedisError("ERR Invalid master port")
    host = argv[1].decode("utf-8", "replace")
    if repl.is_replica and repl.master_host == host and repl.master_port == port:
        return _ALREADY
    repl.replicaof(host, port)
    return OK


@command("slaveof", 3, "admin noscript stale no_async_loading", group="server")
def slaveof(c: Any, argv: list[bytes]) -> Any:
    return replicaof(c, argv)


@command("replconf", -1, "admin noscript loading stale allow_busy", group="server")
def replconf(c: Any, argv: list[bytes]) -> Any:
    if len(argv) % 2 == 0:
        raise RedisError("ERR syntax error")
    repl = _repl(c)
    for i in range(1, len(argv), 2):
        opt, val = argv[i].lower(), argv[i + 1]
        if opt == b"listening-port":
            port = str2int(val)
            if port is None:
                raise RedisError("ERR value is not an integer or out of range")
            c.repl_listening_port = port
            st = getattr(c, "repl_slave", None)
            if st is not None:
                st.port = port
        elif opt == b"ack":
            off = str2int(val)
            if off is not None:
                master.ack(repl, c, off)
            return NO_REPLY
        elif opt == b"getack":
            # only a master asks its replica for an ACK (our replicas ack every group they apply)
            return NO_REPLY
        elif opt in (b"capa", b"ip-address", b"rdb-only", b"rdb-filter-only"):
            pass
        else:
            raise RedisError(b"ERR Unrecognized REPLCONF option: " + argv[i])
    return OK


@command("psync", -3, "admin noscript no_async_loading no_multi", group="server")
def psync(c: Any, argv: list[bytes]) -> Any:
    off = str2int(argv[2])
    if off is None:
        raise RedisError("ERR value is not an integer or out of range")
    master.psync(_repl(c), c, argv[1].decode("utf-8", "replace"), off)
    return NO_REPLY


@command("sync", 1, "admin noscript no_async_loading no_multi", group="server")
def sync(c: Any, argv: list[bytes]) -> Any:
    raise RedisError("ERR respqueue replicas use PSYNC; SYNC (an RDB stream) is not supported")


# ---- ROLE, INFO replication, WAIT --------------------------------------------------
def role_reply(server: Any) -> list[Any]:
    repl = server.repl
    if repl.is_replica:
        link = repl.link
        state = link.state if link is not None else "connect"
        return [
            b"slave",
            repl.master_host.encode(),
            repl.master_port,
            state.encode(),
            repl.offset if link is not None and link.up else -1,
        ]
    slaves = [
        [st.ip.encode(), str(st.port).encode(), str(st.ack).encode()]
        for st in repl.slaves.values()
        if st.state == "online"
    ]
    return [b"master", repl.offset, slaves]


def info_lines(server: Any) -> list[str]:
    repl = server.repl
    now = time.time()
    out = []
    if repl.is_replica:
        link = repl.link
        up = link is not None and link.up
        out += [
            "role:slave",
            f"master_host:{repl.master_host}",
            f"master_port:{repl.master_port}",
            "master_link_status:" + ("up" if up else "down"),
            "master_last_io_seconds_ago:" + (str(int(now - link.last_io)) if up else "-1"),
            "master_sync_in_progress:" + ("1" if link is not None and link.sync_in_progress else "0"),
            f"slave_read_repl_offset:{link.read_offset if link is not None else repl.offset}",
            f"slave_repl_offset:{repl.offset}",
        ]
        if not up:
            out.append(f"master_link_down_since_seconds:{int(now - repl.link_down_since)}")
        out += [
            f"slave_priority:{server.config.replica_priority}",
            "slave_read_only:1",
            "replica_announced:1",
        ]
    else:
        out.append("role:master")
    online = [st for st in repl.slaves.values()]
    out.append(f"connected_slaves:{len(online)}")
    if not repl.is_replica:
        for i, st in enumerate(online):
            out.append(
                f"slave{i}:ip={st.ip},port={st.port},state={st.state},offset={st.ack},lag={int(now - st.ack_time)}"
            )
    bl = repl.backlog
    out += [
        "master_failover_state:no-failover",
        "master_replid:" + repl.replid,
        "master_replid2:" + repl.replid2,
        f"master_repl_offset:{repl.offset}",
        f"second_repl_offset:{repl.second_offset}",
        "repl_backlog_active:" + ("1" if bl is not None else "0"),
        f"repl_backlog_size:{repl.backlog_size}",
        f"repl_backlog_first_byte_offset:{bl.first_byte_offset if bl is not None else 0}",
        f"repl_backlog_histlen:{bl.histlen if bl is not None else 0}",
    ]
    return out


def wait_reply(c: Any, n: int, timeout_ms: int) -> Any:
    """WAIT numreplicas timeout: the replicas that acknowledged this client's writes."""
    from ..dispatch import Block

    repl = c.server.repl
    if repl is None or repl.is_replica:
        if repl is not None and repl.is_replica:
            raise RedisError(
                "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 "
                "if a replica is configured to be writable (which is not the default) writes to "
                "replicas are just local and are not propagated."
            )
        return 0
    target = master.wait_target(repl)
    got = master.acked_by(repl, target) if target >= 0 else 0
    if got >= n or not c.may_block:
        return got
    repl.waits[c] = (target, n)
    if target < 0:
        asyncio.get_running_loop().create_task(master.resolve_wait(repl, c))
    return Block([], timeout_ms / 1000.0, got)


_ROLE_LINE = re.compile(r"^\s*(replicaof|slaveof)\s*=")


def rewrite_config(server: Any, path: str) -> Any:
    """CONFIG REWRITE with a TOML config file: the ``replicaof`` line says the current role (a node
    Sentinel demoted comes back from a restart as a replica); the other lines stay as they are."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [ln for ln in f.read().splitlines() if not _ROLE_LINE.match(ln)]
        repl = server.repl
        if repl is not None and repl.is_replica:
            lines.append(f'replicaof = "{repl.master_host} {repl.master_port}"')
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        raise RedisError(f"ERR Rewriting config file: {e.strerror or e}") from None
    return OK

"""CLUSTER, READONLY, READWRITE and ASKING (Redis Cluster protocol; the node table is respqueue/cluster/)."""

from __future__ import annotations

import time
from typing import Any

from ..cluster.keyindex import index_of
from ..cluster.slots import SLOTS, key_slot
from ..numbers import str2int
from ..resp import OK, RedisError, Status
from .registry import command, container, subcommand

DISABLED = RedisError(b"ERR This instance has cluster support disabled")
INVALID_SLOT = RedisError(b"ERR Invalid slot")
NOT_INTEGER = RedisError(b"ERR value is not an integer or out of range")

container("cluster", -2, "", group="cluster")


def _cluster(c: Any) -> Any:
    cl = c.server.cluster
    if cl is None:
        raise DISABLED
    return cl


def _int(b: bytes) -> int:
    v = str2int(b)
    if v is None:
        raise NOT_INTEGER
    return v


def _node(cl: Any, nid: bytes, err: str = "ERR Unknown node %s") -> Any:
    n = cl.nodes.get(nid.decode("latin-1"))
    if n is None:
        raise RedisError((err % nid.decode("latin-1")).encode())
    return n


def _slot_arg(b: bytes) -> int:
    s = str2int(b)
    if s is None or not 0 <= s < SLOTS:
        raise RedisError(b"ERR Invalid or out of range slot")
    return s


# ---- what the cluster looks like -------------------------------------------------
@subcommand("cluster", "info", 2, "stale")
def cluster_info(c: Any, argv: list[bytes]) -> Any:
    cl = _cluster(c)
    assigned = sum(1 for n in cl.slots if n is not None)
    lines = [
        "cluster_state:" + ("ok" if cl.ok else "fail"),
        f"cluster_slots_assigned:{assigned}",
        f"cluster_slots_ok:{assigned}",
        "cluster_slots_pfail:0",
        "cluster_slots_fail:0",
        f"cluster_known_nodes:{len(cl.nodes)}",
        f"cluster_size:{cl.masters_with_slots()}",
        f"cluster_current_epoch:{cl.current_epoch}",
        f"cluster_my_epoch:{cl.myself.epoch}",
        # no cluster bus: the nodes share a static configuration, so no messages are counted
        "cluster_stats_messages_sent:0",
        "cluster_stats_messages_received:0",
        "total_cluster_links_buffer_limit_exceeded:0",
    ]
    return ("\r\n".join(lines) + "\r\n").encode()


def nodes_text(cl: Any) -> bytes:
    """CLUSTER NODES: one line per node, Redis's format."""
    now = int(time.time() * 1000)
    out = []
    for n in cl.nodes.values():
        me = n is cl.myself
        flags = "myself,master" if me else "master"
        pong = now // 1000 * 1000 if me else now
        parts = [f"{n.id} {n.host}:{n.port}@{n.cport} {flags} - 0 {pong} {n.epoch} connected"]
        for a, b in cl.node_ranges(n):
            parts.append(str(a) if a == b else f"{a}-{b}")
        if me:
            for s, to in sorted(cl.migrating.items()):
                parts.append(f"[{s}->-{to.id}]")
            for s, frm in sorted(cl.importing.items()):
                parts.append(f"[{s}-<-{frm.id}]")
        out.append(" ".join(parts) + "\n")
    return "".join(out).encode()


@subcommand("cluster", "nodes", 2, "stale")
def cluster_nodes(c: Any, argv: list[bytes]) -> Any:
    return nodes_text(_cluster(c))


@subcommand("cluster", "slots", 2, "stale")
def cluster_slots(c: Any, argv: list[bytes]) -> Any:
    cl = _cluster(c)
    return [[a, b, [n.host.encode(), n.port, n.id.encode(), {}]] for a, b, n in cl.slot_ranges()]


@subcommand("cluster", "shards", 2, "stale")
def cluster_shards(c: Any, argv: list[bytes]) -> Any:
    cl = _cluster(c)
    out = []
    for n in cl.nodes.values():
        flat: list[int] = []
        for a, b in cl.node_ranges(n):
            flat += [a, b]
        node = {
            b"id": n.id.encode(),
            b"port": n.port,
            b"ip": n.host.encode(),
            b"endpoint": n.host.encode(),
            b"role": b"master",
            b"replication-offset": 0,
            b"health": b"online",
        }
        out.append({b"slots": flat, b"nodes": [node]})
    return out


@subcommand("cluster", "myid", 2, "stale")
def cluster_myid(c: Any, argv: list[bytes]) -> Any:
    return _cluster(c).myself.id.encode()


@subcommand("cluster", "myshardid", 2, "loading stale")
def cluster_myshardid(c: Any, argv: list[bytes]) -> Any:
    """Redis 7.2's shard id; a shard here is one master (no replicas), so it follows from the node id."""
    import hashlib

    return hashlib.sha1(b"respqueue-shard " + _cluster(c).myself.id.encode()).hexdigest().encode()


@subcommand("cluster", "links", 2, "stale")
def cluster_links(c: Any, argv: list[bytes]) -> Any:
    _cluster(c)
    return []  # no cluster bus, so no links between the nodes


@subcommand("cluster", "keyslot", 3, "stale")
def cluster_keyslot(c: Any, argv: list[bytes]) -> Any:
    _cluster(c)
    return key_slot(argv[2])


@subcommand("cluster", "countkeysinslot", 3, "stale")
def cluster_countkeysinslot(c: Any, argv: list[bytes]) -> Any:
    _cluster(c)
    s = _int(argv[2])
    if not 0 <= s < SLOTS:
        raise INVALID_SLOT
    return index_of(c.server.dbs[0]).count_in(s)


@subcommand("cluster", "getkeysinslot", 4, "stale")
def cluster_getkeysinslot(c: Any, argv: list[bytes]) -> Any:
    _cluster(c)
    s = _int(argv[2])
    n = _int(argv[3])
    if not 0 <= s < SLOTS or n < 0:
        raise RedisError(b"ERR Invalid slot or number of keys")
    if n == 0:
        return []
    # Redis lists a slot's keys newest first; the per-slot index (cluster/keyindex.py) keeps them so
    return index_of(c.server.dbs[0]).keys_in(s, n)


@subcommand("cluster", "count-failure-reports", 3, "admin stale")
def cluster_count_failure_reports(c: Any, argv: list[bytes]) -> Any:
    _node(_cluster(c), argv[2])
    return 0


@subcommand("cluster", "replicas", 3, "admin stale")
def cluster_replicas(c: Any, argv: list[bytes]) -> Any:
    _node(_cluster(c), argv[2])
    return []


@subcommand("cluster", "slaves", 3, "admin stale")
def cluster_slaves(c: Any, argv: list[bytes]) -> Any:
    return cluster_replicas(c, argv)


@subcommand("cluster", "reset", -2, "admin noscript stale")
def cluster_reset(c: Any, argv: list[bytes]) -> Any:
    cl = _cluster(c)
    hard = False
    if len(argv) == 3:
        mode = argv[2].lower()
        if mode == b"hard":
            hard = True
        elif mode != b"soft":
            raise RedisError(b"ERR syntax error")
    elif len(argv) > 3:
        raise RedisError(b"ERR syntax error")
    if c.server.dbs[0].data:
        raise RedisError(b"ERR CLUSTER RESET can't be called with master nodes containing keys")
    cl.reset(hard)
    return OK


# ---- slot assignment and migration (this node's view; the cluster file is what a restart reads) -----
@subcommand("cluster", "setslot", -4, "admin stale no_async_loading")
def cluster_setslot(c: Any, argv: list[bytes]) -> Any:
    cl = _cluster(c)
    slot = _slot_arg(argv[2])
    action = argv[3].lower()
    bad = RedisError(b"ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP")
    if action == b"stable":
        if len(argv) != 4:
            raise bad
        cl.migrating.pop(slot, None)
        cl.importing.pop(slot, None)
        return OK
    if action not in (b"migrating", b"importing", b"node") or len(argv) != 5:
        raise bad
    if action == b"migrating":
        if cl.slots[slot] is not cl.myself:
            raise RedisError(b"ERR I'm not the owner of hash slot %d" % slot)
        n = _node(cl, argv[4], "ERR I don't know about node %s")
        cl.migrating[slot] = n
        return OK
    if action == b"importing":
        if cl.slots[slot] is cl.myself:
            raise RedisError(b"ERR I'm already the owner of hash slot %d" % slot)
        n = _node(cl, argv[4], "ERR I don't know about node %s")
        cl.importing[slot] = n
        return OK
    n = _node(cl, argv[4])
    if cl.slots[slot] is cl.myself and n is not cl.myself:
        db0 = c.server.dbs[0]
        if any(key_slot(k) == slot for k in db0.data):
            raise RedisError(
                b"ERR Can't assign hashslot %d to a different node while I still hold keys for this hash slot." % slot
            )
    if n is not cl.myself:
        cl.migrating.pop(slot, None)
    elif slot in cl.importing:
        # the import is done: this node owns the slot in a new epoch
        cl.importing.pop(slot, None)
        cl.current_epoch += 1
        cl.myself.epoch = cl.current_epoch
    cl.slots[slot] = n
    cl.slots_changed()
    return OK


def _slot_list(argv: list[bytes], ranges: bool) -> list[int]:
    args = argv[2:]
    if ranges and len(args) % 2:
        raise RedisError(("ERR wrong number of arguments for 'cluster|%s' command" % argv[1].decode().lower()).encode())
    out: list[int] = []
    seen: set[int] = set()
    if ranges:
        for i in range(0, len(args), 2):
            a, b = _slot_arg(args[i]), _slot_arg(args[i + 1])
            if a > b:
                raise RedisError(b"ERR start slot number %d is greater than end slot number %d" % (a, b))
            out += range(a, b + 1)
    else:
        out = [_slot_arg(x) for x in args]
    for s in out:
        if s in seen:
            raise RedisError(b"ERR Slot %d specified multiple times" % s)
        seen.add(s)
    return out


def _addslots(c: Any, argv: list[bytes], ranges: bool) -> Any:
    cl = _cluster(c)
    slots = _slot_list(argv, ranges)
    for s in slots:
        if cl.slots[s] is not None:
            raise RedisError(b"ERR Slot %d is already busy" % s)
    for s in slots:
        cl.slots[s] = cl.myself
        cl.importing.pop(s, None)
    cl.slots_changed()
    return OK


def _delslots(c: Any, argv: list[bytes], ranges: bool) -> Any:
    cl = _cluster(c)
    slots = _slot_list(argv, ranges)
    for s in slots:
        if cl.slots[s] is None:
            raise RedisError(b"ERR Slot %d is already unassigned" % s)
    for s in slots:
        cl.slots[s] = None
        cl.migrating.pop(s, None)
    cl.slots_changed()
    return OK


@subcommand("cluster", "addslots", -3, "admin stale no_async_loading")
def cluster_addslots(c: Any, argv: list[bytes]) -> Any:
    return _addslots(c, argv, False)


@subcommand("cluster", "addslotsrange", -4, "admin stale no_async_loading")
def cluster_addslotsrange(c: Any, argv: list[bytes]) -> Any:
    return _addslots(c, argv, True)


@subcommand("cluster", "delslots", -3, "admin stale no_async_loading")
def cluster_delslots(c: Any, argv: list[bytes]) -> Any:
    return _delslots(c, argv, False)


@subcommand("cluster", "delslotsrange", -4, "admin stale no_async_loading")
def cluster_delslotsrange(c: Any, argv: list[bytes]) -> Any:
    return _delslots(c, argv, True)


@subcommand("cluster", "flushslots", 2, "admin stale no_async_loading")
def cluster_flushslots(c: Any, argv: list[bytes]) -> Any:
    cl = _cluster(c)
    if c.server.dbs[0].data:
        raise RedisError(b"ERR DB must be empty to perform CLUSTER FLUSHSLOTS.")
    for s, n in enumerate(cl.slots):
        if n is cl.myself:
            cl.slots[s] = None
    cl.slots_changed()
    return OK


@subcommand("cluster", "saveconfig", 2, "admin stale no_async_loading")
def cluster_saveconfig(c: Any, argv: list[bytes]) -> Any:
    cl = _cluster(c)
    try:
        cl.save()
    except OSError as e:
        raise RedisError(f"ERR error saving the cluster node config: {e}".encode()) from None
    return OK


_HELP = [
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "MYID",
    "    Return the node id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
    "HELP",
    "    Prints this help.",
]


@subcommand("cluster", "publishfwd", 4, "loading stale")
def cluster_publishfwd(c: Any, argv: list[bytes]) -> Any:
    """A PUBLISH made on another node (respqueue/cluster/bus.py): for this node's subscribers only."""
    _cluster(c)
    from .pubsub import publish_message

    return publish_message(c, argv[2], argv[3])


@subcommand("cluster", "help", 2, "loading stale")
def cluster_help(c: Any, argv: list[bytes]) -> Any:
    _cluster(c)
    return [Status(x.encode()) for x in _HELP]


@command("migrate", -6, "write movablekeys", 3, 3, 1, group="keyspace")
def migrate(c: Any, argv: list[bytes]) -> Any:
    from ..cluster.migrate import migrate as run

    return run(c, argv)


# ---- per-connection flags ---------------------------------------------------------
@command("readonly", 1, "loading stale fast", group="connection")
def readonly(c: Any, argv: list[bytes]) -> Any:
    _cluster(c)
    c.cluster_readonly = True
    return OK


@command("readwrite", 1, "loading stale fast", group="connection")
def readwrite(c: Any, argv: list[bytes]) -> Any:
    _cluster(c)
    c.cluster_readonly = False
    return OK


@command("asking", 1, "fast", group="connection")
def asking(c: Any, argv: list[bytes]) -> Any:
    _cluster(c)
    c.asking = True
    return OK

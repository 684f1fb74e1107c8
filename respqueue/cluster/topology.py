"""The node table of a static cluster and the redirection rules (Redis's getNodeByQuery).

A cluster is described by a TOML file (``--cluster-config``)::

    [[node]]
    host = "10.0.0.1"
    port = 7000
    slots = "0-8191"          # or ["0-100", 200, "300-400"]
    # id = "<40 hex digits>"  # optional: by default the SHA1 of "host:port"

Every node reads the same file and finds itself in it by its port (and, when several nodes share a
port, by ``--host`` or ``cluster_announce_ip``). There is no cluster bus: the file is the configuration,
so the nodes agree as long as they read the same file. ``CLUSTER SETSLOT`` changes this node's view in
memory (slot migration); the file is what a restart comes back to.
"""

from __future__ import annotations

import hashlib
import time
import tomllib
from typing import Any

from ..numbers import str2int
from ..resp import RedisError
from .slots import SLOTS, key_slot, parse_ranges, ranges_of, script_slot

CROSSSLOT = RedisError(b"CROSSSLOT Keys in request don't hash to the same slot")
TRYAGAIN = RedisError(b"TRYAGAIN Multiple keys request during rehashing of slot")
DOWN = RedisError(b"CLUSTERDOWN The cluster is down")
UNBOUND = RedisError(b"CLUSTERDOWN Hash slot not served")
SCRIPT_NON_LOCAL = b"ERR Script attempted to access a non local key in a cluster node"
SCRIPT_DOWN = b"ERR Script attempted to execute a command while the cluster is down"


_KEEPS_ASKING = frozenset({"asking", "multi"})
_ENDS_MULTI = frozenset({"exec", "discard"})


class Node:
    __slots__ = ("id", "host", "port", "cport", "epoch", "addr")

    def __init__(self, node_id: str, host: str, port: int, epoch: int = 0) -> None:
        self.id = node_id
        self.host = host
        self.port = port
        self.cport = port + 10000
        self.epoch = epoch
        self.addr = f"{host}:{port}".encode()

    def __repr__(self) -> str:
        return f"<Node {self.id[:8]} {self.host}:{self.port}>"


def default_id(host: str, port: int) -> str:
    """A node's id when the file gives none: the same on every node that reads the file."""
    return hashlib.sha1(f"respqueue-node {host}:{port}".encode()).hexdigest()


#: command -> 0: no keys, 1: (first, last, step), 2: movable keys, 3: a script's (numkeys at argv[2], keys after)
_KIND: dict[Any, int] = {}
_movable: Any = None
_SCRIPT_CALLS = frozenset({"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"})


def _kind(cmd: Any) -> int:
    k = _KIND.get(cmd)
    if k is None:
        if cmd.name in _SCRIPT_CALLS:
            k = 3
        else:
            k = 2 if "movablekeys" in cmd.flags else (1 if cmd.first_key > 0 else 0)
        _KIND[cmd] = k
    return k


def _script_keys(argv: list[bytes]) -> range:
    """EVAL/EVALSHA/FCALL's key positions (numkeys at argv[2]); none when numkeys is bad (the command itself
    answers the error), as COMMAND GETKEYS's rule (commands/introspection.py) reads them."""
    n = str2int(argv[2]) if len(argv) > 2 else None
    if n is None or n < 0 or 3 + n > len(argv):
        return range(0)
    return range(3, 3 + n)


def key_indexes(cmd: Any, argv: list[bytes]) -> list[int] | range:
    """Where ``argv``'s keys are (COMMAND GETKEYS's answer, [] when it has none)."""
    global _movable
    k = _KIND.get(cmd)
    if k is None:
        k = _kind(cmd)
    if k == 1:
        first, last = cmd.first_key, cmd.last_key
        if first == last:
            return (first,) if first < len(argv) else ()  # type: ignore[return-value]
        return cmd.key_positions(argv)
    if k == 0:
        return ()  # type: ignore[return-value]
    if k == 3:
        return _script_keys(argv)
    if cmd.name == "migrate":
        from .migrate import migrate_key_indexes

        return migrate_key_indexes(argv)
    if _movable is None:
        from ..commands.introspection import _movable_keys

        _movable = _movable_keys
    try:
        return _movable(cmd.fullname, argv)  # type: ignore[no-any-return]
    except RedisError:
        return []  # bad arguments: no keys here; the command itself answers the error


class Cluster:
    """This node's view of the cluster: nodes, the owner of each slot, slots being migrated."""

    def __init__(self, nodes: list[Node], myself: Node, owners: dict[int, list[tuple[int, int]]] | None = None) -> None:
        self.nodes: dict[str, Node] = {n.id: n for n in nodes}
        self.myself = myself
        self.slots: list[Node | None] = [None] * SLOTS
        self.migrating: dict[int, Node] = {}
        self.importing: dict[int, Node] = {}
        self.current_epoch = max((n.epoch for n in nodes), default=0)
        self.asking_client: Any = None  # the client whose ASKING covers the command now running
        self.created_ms = int(time.time() * 1000)
        self.path: str | None = None  # the cluster file this view came from
        self.autosave = False  # slot changes are written back to it (a file respqueue generated)
        self._save_pending = False
        self.bus: Any = None  # respqueue.cluster.bus.Bus: PUBLISH to the other nodes (set by build)
        for nid, ranges in (owners or {}).items():
            node = nodes[nid]
            for a, b in ranges:
                for s in range(a, b + 1):
                    self.slots[s] = node
        self.ok = None not in self.slots  # every slot has an owner (cluster_state:ok); see slots_changed

    # ---- views --------------------------------------------------------------
    def slot_ranges(self) -> list[tuple[int, int, Node]]:
        """Runs of consecutive slots with the same owner, in slot order (CLUSTER SLOTS)."""
        out: list[tuple[int, int, Node]] = []
        start = -1
        owner: Node | None = None
        for s, n in enumerate(self.slots):
            if n is not owner:
                if owner is not None:
                    out.append((start, s - 1, owner))
                owner, start = n, s
        if owner is not None:
            out.append((start, SLOTS - 1, owner))
        return out

    def node_ranges(self, node: Node) -> list[tuple[int, int]]:
        return ranges_of([s for s, n in enumerate(self.slots) if n is node])

    def masters_with_slots(self) -> int:
        return len({id(n) for n in self.slots if n is not None})

    # ---- redirection ------------------------------------------------------------
    def route(self, client: Any, cmd: Any, argv: list[bytes]) -> RedisError | None:
        """None when this node serves ``argv``; else the error to answer (MOVED, ASK, CROSSSLOT...)."""
        asking = client.asking
        self.asking_client = client if asking else None
        if asking and cmd.name not in _KEEPS_ASKING and (client.multi is None or cmd.name in _ENDS_MULTI):
            client.asking = False  # ASKING covers the next command only (or the next transaction)
        if cmd.name == "exec":
            if client.multi is None:
                return None
            return self.locate(client.db, client.multi, asking)
        k = _KIND.get(cmd)
        if k is None:
            k = _kind(cmd)
        if not k:
            return None
        if self.ok and not self.migrating and not self.importing:
            # every slot served, none moving: the slot's owner answers, if all the keys share one slot
            if k == 1 and cmd.first_key == cmd.last_key:
                i = cmd.first_key
                if i >= len(argv):
                    return None
                return self._served(key_slot(argv[i]))
            if k == 3:
                # a script call (EVALSHA...): its keys' one slot, found in one compiled pass (CROSSSLOT before MOVED)
                slot = script_slot(argv)
                if slot < 0:
                    return None if slot == -2 else CROSSSLOT
                return self._served(slot)
        return self.locate(client.db, ((cmd, argv),), asking)

    def _served(self, slot: int) -> RedisError | None:
        """While every slot is served and none moves: None when this node owns ``slot``, else MOVED to its owner."""
        n = self.slots[slot]
        if n is self.myself:
            return None
        if n is None:
            return UNBOUND
        return RedisError(b"MOVED %d %s" % (slot, n.addr))

    def runs_ok(self, client: Any) -> bool:
        """Whether a connection may run a pipeline's requests as a run (``dispatch.run_allowed``): every slot
        served, none moving, no ASKING pending; each request of the run is still routed (protocol.py)."""
        return bool(self.ok) and not self.migrating and not self.importing and not client.asking

    def locate(self, db: Any, cmds: Any, asking: bool, script: bool = False) -> RedisError | None:
        myself = self.myself
        slot = -1
        n: Node | None = None
        migrating = importing = multiple = False
        missing = existing = 0
        first = b""
        is_migrate = False
        for cmd, argv in cmds:
            for i in key_indexes(cmd, argv):
                k = argv[i]
                s = key_slot(k)
                if slot == -1:
                    slot, first = s, k
                    n = self.slots[s]
                    if n is None:
                        return UNBOUND
                    if n is myself and s in self.migrating:
                        migrating = True
                    elif s in self.importing:
                        importing = True
                else:
                    if s != slot:
                        return CROSSSLOT
                    if k != first:
                        multiple = True
                if migrating or importing:
                    if db.lookup(k) is None:
                        missing += 1
                    else:
                        existing += 1
            if cmd.name == "migrate":
                is_migrate = True
        if n is None:
            return None
        if not self.ok:
            return DOWN
        if (migrating or importing) and is_migrate:
            return None
        if migrating and missing:
            if existing:
                return TRYAGAIN
            to = self.migrating[slot]
            return RedisError(b"ASK %d %s" % (slot, to.addr))
        if importing and asking:
            if multiple and missing:
                return TRYAGAIN
            return None
        if n is not myself:
            return RedisError(b"MOVED %d %s" % (slot, n.addr))
        return None

    def script_check(self, caller: Any, cmd: Any, argv: list[bytes]) -> bytes | None:
        """The error a script's redis.call of ``argv`` gets when it reaches beyond this node."""
        if not _kind(cmd):
            return None
        err = self.locate(caller.db, ((cmd, argv),), self.asking_client is caller)
        if err is None:
            return None
        if err is DOWN:
            return SCRIPT_DOWN
        return SCRIPT_NON_LOCAL

    # ---- changes ------------------------------------------------------------------
    def save(self) -> None:
        """Write this node's view (nodes, ids, slot owners) to the cluster file."""
        if self.path is None:
            raise OSError("no cluster file (started without --cluster-config)")
        nodes = list(self.nodes.values())
        write_file(self.path, [(n.host, n.port, self.node_ranges(n)) for n in nodes], [n.id for n in nodes])

    def slots_changed(self) -> None:
        """After a change of slot owners: kept in the file when respqueue generated it (``--shards``), so a
        restarted node comes back with the slots it had, as a Redis node reads its nodes.conf."""
        self.ok = None not in self.slots
        if not self.autosave or self._save_pending:
            return
        try:
            import asyncio

            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._save_now()
            return
        # a reshard changes slots one by one: write once they settle, not once a slot
        self._save_pending = True
        loop.call_later(0.1, self._save_now)

    def _save_now(self) -> None:
        self._save_pending = False
        try:
            self.save()
        except OSError as e:
            import logging

            logging.getLogger("respqueue").error("cannot save the cluster file %s: %s", self.path, e)

    def reset(self, hard: bool) -> None:
        """CLUSTER RESET: forget the other nodes and every slot (a hard reset also takes a new id)."""
        me = self.myself
        if hard:
            me.id = hashlib.sha1(f"{me.id} {time.time()}".encode()).hexdigest()
            me.epoch = 0
            self.current_epoch = 0
        self.nodes = {me.id: me}
        self.slots = [None] * SLOTS
        self.ok = False
        self.migrating.clear()
        self.importing.clear()


def load_file(path: str) -> list[tuple[Node, list[tuple[int, int]]]]:
    """The nodes and slot ranges a cluster file names (errors as ValueError, with the file's name)."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as e:
        raise ValueError(f"cannot read cluster file {path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path} is not valid TOML: {e}") from None
    raw = data.get("node")
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{path}: no [[node]] tables")
    out: list[tuple[Node, list[tuple[int, int]]]] = []
    seen_ids: set[str] = set()
    seen_addr: set[tuple[str, int]] = set()
    owner: dict[int, int] = {}
    for i, t in enumerate(raw):
        where = f"{path}: node {i + 1}"
        if not isinstance(t, dict):
            raise ValueError(f"{where} is not a table")
        unknown = set(t) - {"id", "host", "port", "slots"}
        if unknown:
            raise ValueError(f"{where}: unknown setting '{sorted(unknown)[0]}'")
        host = t.get("host", "127.0.0.1")
        port = t.get("port")
        if not isinstance(host, str) or not host:
            raise ValueError(f"{where}: host must be a string")
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise ValueError(f"{where}: port must be an integer from 1 to 65535")
        nid = t.get("id") or default_id(host, port)
        if not isinstance(nid, str) or len(nid) != 40 or any(c not in "0123456789abcdef" for c in nid):
            raise ValueError(f"{where}: id must be 40 lowercase hex digits")
        if nid in seen_ids:
            raise ValueError(f"{where}: id {nid} is used twice")
        if (host, port) in seen_addr:
            raise ValueError(f"{where}: {host}:{port} is named twice")
        seen_ids.add(nid)
        seen_addr.add((host, port))
        ranges = parse_ranges(t.get("slots", []), where)
        for a, b in ranges:
            for s in range(a, b + 1):
                if s in owner:
                    raise ValueError(f"{where}: slot {s} is already served by node {owner[s] + 1}")
                owner[s] = i
        out.append((Node(nid, host, port, epoch=i + 1), ranges))
    return out


GENERATED = "# respqueue cluster file, kept up to date by its nodes (README: Cluster mode)"


def write_file(path: str, nodes: list[tuple[str, int, list[tuple[int, int]]]], ids: list[str] | None = None) -> None:
    """Write a cluster file for ``(host, port, ranges)`` nodes (``respqueue serve --shards``, CLUSTER SAVECONFIG)."""
    import os

    lines = [GENERATED, ""]
    for i, (host, port, ranges) in enumerate(nodes):
        spec = " ".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges)
        lines += (
            ["[[node]]"]
            + ([f'id = "{ids[i]}"'] if ids else [])
            + [f'host = "{host}"', f"port = {port}", f'slots = "{spec}"', ""]
        )
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write("\n".join(lines))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def is_generated(path: str) -> bool:
    """Whether ``path`` is a file respqueue wrote (so its nodes save slot changes into it)."""
    try:
        with open(path) as fh:
            return fh.readline().rstrip("\n") == GENERATED
    except OSError:
        return False


def _is_local(host: str) -> bool:
    """Whether ``host`` is an address of this machine (it can be bound)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)
    except OSError:
        return False
    for fam, typ, proto, _, addr in infos:
        try:
            with socket.socket(fam, typ, proto) as s:
                s.bind((addr[0], 0))
            return True
        except OSError:
            continue
    return False


def build(config: Any, port: int) -> Cluster:
    """The cluster this server is a node of: from ``cluster_config``, or a one-node cluster serving every slot."""
    host = (config.host or "127.0.0.1").split()[0]
    if host in ("0.0.0.0", "::", "*"):
        host = "127.0.0.1"
    announce = getattr(config, "cluster_announce_ip", None)
    config.cluster_enabled = "yes"  # CONFIG GET cluster-enabled, as Redis (a cluster file implies it)
    if not config.cluster_config:
        me = Node(default_id(announce or host, port), announce or host, port, epoch=1)
        return Cluster([me], me, {0: [(0, SLOTS - 1)]})
    entries = load_file(config.cluster_config)
    nodes = [n for n, _ in entries]
    mine = [n for n in nodes if n.port == port]
    if len(mine) > 1:
        names = set(config.host.split()) if config.host else set()
        if announce:
            names = {announce}
        named = [n for n in mine if n.host in names]
        # listening on every address (0.0.0.0) and not told which host it is: the node whose host is one
        # of this machine's own addresses
        mine = named or [n for n in mine if _is_local(n.host)]
    if len(mine) != 1:
        raise ValueError(
            f"{config.cluster_config}: no single node with port {port}"
            + ("" if not mine else f" and host {announce or config.host}")
            + ": this server is not in the cluster file"
        )
    cl = Cluster(nodes, mine[0], {i: r for i, (_, r) in enumerate(entries)})
    from .bus import Bus

    cl.bus = Bus(cl, config.requirepass)
    cl.path = config.cluster_config
    cl.autosave = is_generated(config.cluster_config)
    return cl

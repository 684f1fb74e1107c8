"""``respqueue cluster info|check``: what every node of a cluster says, and whether they agree.

The nodes come from a cluster file (``--cluster-config``) or from the addresses given (each node's
CLUSTER NODES names the rest). Works on any Redis Cluster, respqueue's or Redis's.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import hiredis

from .slots import SLOTS


class NodeConn:
    """A small blocking RESP2 client."""

    def __init__(self, host: str, port: int, password: str | None = None, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.reader = hiredis.Reader()
        if password:
            self.call("AUTH", password)

    def call(self, *args: Any) -> Any:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(out))
        while True:
            r = self.reader.gets()
            if r is not False:
                if isinstance(r, hiredis.ReplyError):
                    raise RuntimeError(str(r))
                return r
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("connection closed")
            self.reader.feed(data)

    def close(self) -> None:
        self.sock.close()


class NodeView:
    """One node's answer: itself and the table it holds."""

    def __init__(self, addr: str, nodes_text: str, dbsize: int) -> None:
        self.addr = addr
        self.dbsize = dbsize
        self.table: dict[str, tuple[str, tuple[str, ...]]] = {}  # id -> (addr, slot fields)
        self.myid = ""
        self.open_slots: list[str] = []
        for line in nodes_text.splitlines():
            f = line.split()
            if len(f) < 8:
                continue
            a = f[1].split("@")[0].split(",")[0]
            slots = tuple(x for x in f[8:] if not x.startswith("["))
            self.table[f[0]] = (a, slots)
            if "myself" in f[2].split(","):
                self.myid = f[0]
                self.open_slots = [x for x in f[8:] if x.startswith("[")]

    def slots_of(self, nid: str) -> set[int]:
        out: set[int] = set()
        for s in self.table.get(nid, ("", ()))[1]:
            a, _, b = s.partition("-")
            out.update(range(int(a), int(b or a) + 1))
        return out


def _split_addr(a: str) -> tuple[str, int]:
    host, _, port = a.rpartition(":")
    return host or "127.0.0.1", int(port)


def gather(seeds: list[str], password: str | None) -> tuple[dict[str, NodeView], list[str]]:
    """Ask every node reachable from ``seeds`` (and the nodes they name); returns the views and the errors."""
    views: dict[str, NodeView] = {}
    errors: list[str] = []
    todo = list(seeds)
    seen: set[str] = set()
    while todo:
        a = todo.pop(0)
        if a in seen:
            continue
        seen.add(a)
        try:
            c = NodeConn(*_split_addr(a), password=password)
            try:
                text = c.call("CLUSTER", "NODES").decode()
                size = int(c.call("DBSIZE"))
            finally:
                c.close()
        except (OSError, RuntimeError, ValueError) as e:
            errors.append(f"cannot ask node {a}: {e}")
            continue
        v = NodeView(a, text, size)
        views[a] = v
        todo += [addr for addr, _ in v.table.values() if addr not in seen]
    return views, errors


def _ranges(slots: set[int]) -> str:
    out: list[str] = []
    run: list[int] = []
    for s in sorted(slots):
        if run and s == run[-1] + 1:
            run.append(s)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [s]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def report(seeds: list[str], password: str | None, check: bool, out: Any = None) -> int:
    """Print ``cluster info`` (or ``cluster check``); returns the exit code (1 when something is wrong)."""
    out = out or sys.stdout
    views, errors = gather(seeds, password)
    ok = not errors
    for e in errors:
        print(f"[ERR] {e}", file=out)
    if not views:
        print("[ERR] no node answered", file=out)
        return 1
    total = 0
    masters = 0
    for a, v in sorted(views.items()):
        n = len(v.slots_of(v.myid))
        masters += n > 0
        total += v.dbsize
        print(f"{a} ({v.myid[:8]}...) -> {v.dbsize} keys | {n} slots | 0 slaves.", file=out)
    print(f"[OK] {total} keys in {masters} masters.", file=out)
    print(f"{total / SLOTS:.2f} keys per slot on average.", file=out)
    if not check:
        return 0 if ok else 1
    first = next(iter(views.values()))
    print(f">>> Performing Cluster Check (using node {first.addr})", file=out)
    for a, v in sorted(views.items()):
        s = v.slots_of(v.myid)
        print(f"M: {v.myid} {a}\n   slots:[{_ranges(s)}] ({len(s)} slots) master", file=out)
    tables = {tuple(sorted(v.table.items())) for v in views.values()}
    if len(tables) == 1:
        print("[OK] All nodes agree about slots configuration.", file=out)
    else:
        ok = False
        print("[ERR] Nodes don't agree about configuration!", file=out)
    named = {addr for v in views.values() for addr, _ in v.table.values()}
    missing = sorted(named - set(views))
    for a in missing:
        if not any(a in e for e in errors):
            ok = False
            print(f"[ERR] node {a} did not answer", file=out)
    print(">>> Check for open slots...", file=out)
    for a, v in sorted(views.items()):
        if v.open_slots:
            ok = False
            print(f"[WARNING] Node {a} has slots in migrating or importing state: {' '.join(v.open_slots)}.", file=out)
    print(">>> Check slots coverage...", file=out)
    covered: set[int] = set()
    for v in views.values():
        for nid in v.table:
            covered |= v.slots_of(nid)
    if len(covered) == SLOTS:
        print(f"[OK] All {SLOTS} slots covered.", file=out)
    else:
        ok = False
        print(f"[ERR] Not all {SLOTS} slots are covered by nodes ({SLOTS - len(covered)} unassigned).", file=out)
    return 0 if ok else 1


def seeds_from_file(path: str) -> list[str]:
    from .topology import load_file

    return [f"{n.host}:{n.port}" for n, _ in load_file(path)]


def parse_slots(spec: str) -> list[int]:
    """``"5"``, ``"0-99"`` or ``"1,5,10-20"`` as a sorted list of slots (ValueError when out of range)."""
    out: set[int] = set()
    for part in spec.split(","):
        a, _, b = part.strip().partition("-")
        try:
            lo, hi = int(a), int(b or a)
        except ValueError:
            raise ValueError(f"bad slot range {part.strip()!r} (use 5, 0-99 or 1,5,10-20)") from None
        if not 0 <= lo <= hi < SLOTS:
            raise ValueError(f"bad slot range {part.strip()!r} (slots are 0-{SLOTS - 1})")
        out.update(range(lo, hi + 1))
    return sorted(out)


def move_slots(
    seeds: list[str],
    slots: list[int],
    to: str,
    password: str | None = None,
    timeout_ms: int = 10000,
    batch: int = 100,
    out: Any = None,
) -> int:
    """Move ``slots`` (with their keys) to the node at ``to``, live, as ``redis-cli --cluster reshard`` does:
    SETSLOT IMPORTING on the target, MIGRATING on the owner, GETKEYSINSLOT + MIGRATE until the slot is empty,
    then SETSLOT NODE on the target, the owner and every other node. Clients get -ASK/-TRYAGAIN meanwhile and
    -MOVED afterwards. Returns the exit code."""
    out = out or sys.stdout
    views, errors = gather(seeds + [to], password)
    for e in errors:
        print(f"[ERR] {e}", file=out)
    if errors or not views:
        return 1
    ids = {v.addr: v.myid for v in views.values()}
    addr_of = {v.myid: v.addr for v in views.values()}
    if to not in ids:
        print(f"[ERR] {to} is not a node of this cluster", file=out)
        return 1
    tid = ids[to]
    th, tp = _split_addr(to)
    conns: dict[str, NodeConn] = {}

    def conn(addr: str) -> NodeConn:
        if addr not in conns:
            conns[addr] = NodeConn(*_split_addr(addr), password=password, timeout=timeout_ms / 1000 + 5)
        return conns[addr]

    owner_of = {s: nid for nid, (_, rs) in views[to].table.items() for s in _slot_set(rs)}
    moved = 0
    try:
        for s in slots:
            owner = owner_of.get(s)
            if owner is None:
                print(f"[ERR] slot {s} is not served by any node", file=out)
                return 1
            if owner == tid:
                continue
            src = addr_of.get(owner)
            if src is None:
                print(f"[ERR] slot {s}'s owner {owner} did not answer", file=out)
                return 1
            conn(to).call("CLUSTER", "SETSLOT", s, "IMPORTING", owner)
            conn(src).call("CLUSTER", "SETSLOT", s, "MIGRATING", tid)
            keys = 0
            while True:
                found = conn(src).call("CLUSTER", "GETKEYSINSLOT", s, batch)
                if not found:
                    break
                conn(src).call(
                    "MIGRATE", th, tp, "", 0, timeout_ms, *(["AUTH", password] if password else []), "KEYS", *found
                )
                keys += len(found)
            # the new owner first (it stops answering -ASK... as Redis: importing closed), then the old one
            conn(to).call("CLUSTER", "SETSLOT", s, "NODE", tid)
            conn(src).call("CLUSTER", "SETSLOT", s, "NODE", tid)
            for a in views:
                if a not in (to, src):
                    conn(a).call("CLUSTER", "SETSLOT", s, "NODE", tid)
            moved += 1
            print(f"moved slot {s} ({keys} keys) from {src} to {to}", file=out)
    except (OSError, RuntimeError) as e:
        print(f"[ERR] {e}; check with `respqueue cluster check` (open slots are closed by moving them again)", file=out)
        return 1
    finally:
        for c in conns.values():
            c.close()
    print(f"[OK] {moved} slot(s) moved to {to}", file=out)
    return 0


def _slot_set(ranges: tuple[str, ...]) -> set[int]:
    out: set[int] = set()
    for r in ranges:
        a, _, b = r.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out

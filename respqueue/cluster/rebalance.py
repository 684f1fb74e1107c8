"""``respqueue cluster rebalance``: even the slots out over the masters, by weight, as
``redis-cli --cluster rebalance`` does, moving them (with their keys, live) through ``admin.move_slots``.

The plan is redis-cli's: each master should own ``int(16384 / total weight * weight)`` slots; nothing moves
unless some master is off by more than ``threshold`` percent; the rounding remainder is charged to the
masters that need slots; then the master that needs the most takes from the one with the most to spare,
lowest slots first, until every balance is settled.
"""

from __future__ import annotations

import sys
from typing import Any

from .admin import gather, move_slots
from .slots import SLOTS


def parse_weights(specs: list[str]) -> dict[str, float]:
    """``NODE=W`` (NODE: a node id, a prefix of one, or HOST:PORT) as a dict; ValueError when malformed."""
    out: dict[str, float] = {}
    for spec in specs:
        node, eq, w = spec.rpartition("=")
        try:
            weight = float(w)
        except ValueError:
            weight = -1.0
        if not eq or not node or weight < 0:
            raise ValueError(f"bad weight {spec!r} (use NODE=W, W a number >= 0)")
        out[node] = weight
    return out


def plan(
    owned: dict[str, list[int]], weights: dict[str, float], threshold: float
) -> tuple[list[tuple[str, str, list[int]]], bool]:
    """The moves ``(source, destination, slots)`` that even ``owned`` (master -> its slots) out by ``weights``,
    and whether any master was over ``threshold`` percent off (no moves when none was)."""
    total = sum(weights[n] for n in owned)
    if total <= 0:
        return [], False
    balance: dict[str, int] = {}
    over = False
    for n, slots in owned.items():
        expected = int(SLOTS / total * weights[n])
        balance[n] = len(slots) - expected
        if len(slots) == 0:
            over = over or expected > 0
        elif abs(100 - 100.0 * expected / len(slots)) > threshold:
            over = True
    if not over:
        return [], False
    # int() rounds every expectation down, so the balances add up to more than zero: those that need
    # slots take the remainder, one each, as redis-cli does
    left = sum(balance.values())
    while left > 0:
        for n in owned:
            if balance[n] <= 0 and left > 0:
                balance[n] -= 1
                left -= 1
    order = sorted(owned, key=lambda n: balance[n])
    pools = {n: sorted(owned[n]) for n in owned}
    moves: list[tuple[str, str, list[int]]] = []
    dst_i, src_i = 0, len(order) - 1
    while dst_i < src_i:
        dst, src = order[dst_i], order[src_i]
        k = min(-balance[dst], balance[src])
        if k > 0:
            moves.append((src, dst, pools[src][:k]))
            pools[src] = pools[src][k:]
            balance[dst] += k
            balance[src] -= k
        if balance[dst] >= 0:
            dst_i += 1
        if balance[src] <= 0:
            src_i -= 1
    return moves, True


def rebalance(
    seeds: list[str],
    weights: dict[str, float] | None = None,
    threshold: float = 2.0,
    simulate: bool = False,
    use_empty_masters: bool = False,
    password: str | None = None,
    out: Any = None,
) -> int:
    """Print the plan and (unless ``simulate``) carry it out; returns the exit code."""
    out = out or sys.stdout
    views, errors = gather(seeds, password)
    for e in errors:
        print(f"[ERR] {e}", file=out)
    if errors or not views:
        if not views:
            print("[ERR] no node answered", file=out)
        return 1
    owned: dict[str, list[int]] = {}
    for a, v in views.items():
        s = v.slots_of(v.myid)
        if s or use_empty_masters:
            owned[a] = sorted(s)
        if v.open_slots:
            print(f"[ERR] Node {a} has slots in migrating or importing state: {' '.join(v.open_slots)}.", file=out)
            print("*** Please fix your cluster problems before rebalancing (respqueue cluster check)", file=out)
            return 1
    w = {a: 1.0 for a in owned}
    for node, weight in (weights or {}).items():
        match = [a for a in views if a == node or views[a].myid.startswith(node)]
        if len(match) != 1:
            print(f"[ERR] No such node, or more than one: {node}", file=out)
            return 1
        if match[0] not in owned:
            owned[match[0]] = sorted(views[match[0]].slots_of(views[match[0]].myid))
        w[match[0]] = weight
    moves, needed = plan(owned, w, threshold)
    if not needed:
        print(f"*** No rebalancing needed! All nodes are within the {threshold:.2f}% threshold.", file=out)
        return 0
    print(f">>> Rebalancing across {len(owned)} nodes. Total weight = {sum(w.values()):.2f}", file=out)
    for src, dst, slots in moves:
        print(f"Moving {len(slots)} slots from {src} to {dst}", file=out)
    if simulate:
        return 0
    for src, dst, slots in moves:
        rc = move_slots([src], slots, dst, password, out=out)
        if rc:
            return rc
    return 0

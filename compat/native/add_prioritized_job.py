"""Native addPrioritizedJob: addStandardJob's path, the job going to the prioritized zset."""

from __future__ import annotations

from typing import Any

from ..scripts import Ctx, native
from .add_standard_job import _ADD_EVENTS, AddVariant, add_layout, add_standard_job
from .helpers import SCORE_BAND, _writes_events

#: addPrioritizedJob (6.x): KEYS marker meta id prioritized delayed completed active events pc
PRIO_V6 = AddVariant(-1, -1, 1, 2, 6, 7, 0, 9, 7, False, False, prio=3, pc=8)
_PRIO_KEY_ROLES = {"marker": "marker", "meta": "meta", "id": "id", "prioritized": "prioritized", "delayed": "delayed",
                   "completed": "completed", "active": "active", "events stream key": "events",
                   "pc priority counter": "pc"}


def _accept_prio(numkeys: int, lay: dict[str, Any]) -> Any:
    """addPrioritizedJob's native path (the addStandardJob implementation with a prioritized variant): the
    releases whose keys name the roles it uses, checking isQueuePausedOrMaxed (5.9+) or, without the active
    key, isQueuePaused (before)."""
    got = add_layout(numkeys, lay, _PRIO_KEY_ROLES, {"marker", "meta", "id", "prioritized", "events", "pc"})
    if got is None:
        return None
    pos, rjk, calls = got
    if not _writes_events(lay, _ADD_EVENTS) or "main>addJobWithPriority" not in calls:
        return None
    if "main>isQueuePausedOrMaxed" in calls and "active" in pos:
        active = pos["active"]
    elif "main>isQueuePaused" in calls and "active" not in pos:
        active = None  # before 5.9: HEXISTS meta paused, no concurrency limit (and no active key)
    else:
        return None
    v = AddVariant(-1, -1, pos["meta"], pos["id"], active, pos["events"], pos["marker"], numkeys, rjk,
                   False, False, prio=pos["prioritized"], pc=pos["pc"],
                   pc_band=SCORE_BAND in lay.get("prio_scores", ()))
    return True if v == PRIO_V6 else v


@native("addPrioritizedJob", _accept_prio)
def add_prioritized_job(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: AddVariant = PRIO_V6) -> Any:
    """KEYS (6.x): marker meta id prioritized delayed completed active events pc; ARGV: args, data, opts.
    addStandardJob's path, the job going to the prioritized zset (score from the priority counter)."""
    return add_standard_job(ctx, keys, argv, variant)

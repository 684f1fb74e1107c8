"""Native addDelayedJob: addStandardJob's path, the job going to the delayed zset."""

from __future__ import annotations

from typing import Any

from ..scripts import Ctx, native
from .add_standard_job import AddVariant, add_layout, add_standard_job
from .helpers import _writes_events

#: addDelayedJob (6.x): KEYS marker meta id delayed completed events
DELAYED_V6 = AddVariant(-1, -1, 1, 2, None, 5, 0, 6, 7, False, False, delayed=3)
_DELAYED_KEY_ROLES = {"marker": "marker", "meta": "meta", "id": "id", "delayed": "delayed", "completed": "completed",
                      "events stream key": "events"}


def _accept_delayed(numkeys: int, lay: dict[str, Any]) -> Any:
    """addDelayedJob's native path (addStandardJob's implementation with a delayed variant): the releases whose
    keys name the roles it uses and whose main code adds the job with addDelayedJob(getDelayedScore, ZADD,
    XADD delayed, addDelayMarkerIfNeeded)."""
    got = add_layout(numkeys, lay, _DELAYED_KEY_ROLES, {"marker", "meta", "id", "delayed", "events"},
                     "2 custom id use custom instead of one generated automatically")
    if got is None:
        return None
    pos, rjk, calls = got
    need = {"main>addDelayedJob", "addDelayedJob>getDelayedScore", "addDelayedJob>addDelayMarkerIfNeeded"}
    inline = {"main>storeJob", "main>getDelayedScore", "main>addDelayMarkerIfNeeded"}  # before 5.34: the same
    # calls, made by the main code itself
    old = {"main>storeJob", "main>isQueuePaused", "main>addDelayMarkerIfNeeded"}  # before 5.8: see AddVariant
    if need <= calls or inline <= calls and not calls & {"main>addDelayedJob"}:
        old_delay = False
    elif old <= calls and not calls & {"main>addDelayedJob", "main>getDelayedScore"}:
        old_delay = True
    else:
        return None
    if not _writes_events(lay, ("event|added|jobId|?|name|?", "event|delayed|jobId|?|delay|?")):
        return None
    zadds = lay.get("zadds", ())
    if 'markerKey|nextTimestamp|"1"' in zadds:
        member = b"1"
    elif 'markerKey|nextTimestamp|"0"' in zadds:
        member = b"0"  # 5.0.0
    else:
        return None
    v = AddVariant(-1, -1, pos["meta"], pos["id"], None, pos["events"], pos["marker"], numkeys, rjk, False,
                   False, delayed=pos["delayed"], old_delay=old_delay, delay_marker=member)
    return True if v == DELAYED_V6 else v


@native("addDelayedJob", _accept_delayed)
def add_delayed_job(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: AddVariant = DELAYED_V6) -> Any:
    """KEYS (6.x): marker meta id delayed completed events; ARGV: args, data, opts.
    addStandardJob's path, the job going to the delayed zset (score from getDelayedScore)."""
    return add_standard_job(ctx, keys, argv, variant)

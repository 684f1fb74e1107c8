"""Wake-up signal keys: changes whose reply need not wait for their own commit.

In durable mode the reply of a command that wrote waits for the commit of its batch (see Journal.hold).
A plug-in may name keys that are only wake-up signals for its clients (BullMQ's ``<prefix>:<queue>:marker``:
a worker blocks on it with BZPOPMIN, and whatever it then does is a script whose reply waits for its own
commit). A sorted-set command whose keys are all such signals, run while the open batch holds nothing
else, waits only for the batches already handed to the writer (what it read may come from them), not for
its own (Journal.hold_prior; at once when those have committed); its change joins the open batch and is
stored with it. What a crash can then undo is the signal's change only (a popped marker comes back: one
more wake-up, which BullMQ treats as a hint and re-checks with a script).

Only the sorted-set family qualifies: its commands write nothing but the keys they name (ZUNIONSTORE and
friends write their first key only), and none touches another database.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: fn(db, key) -> True when ``key`` of ``db`` is a wake-up signal (registered by plug-ins at import)
PREDICATES: list[Callable[[Any, bytes], bool]] = []

_GROUP = "sortedset"


def register_signal(pred: Callable[[Any, bytes], bool]) -> None:
    """Have ``pred(db, key)`` name the keys whose changes are wake-up signals (see the module's text)."""
    PREDICATES.append(pred)


def signal_only(db: Any, cmd: Any, argv: list[bytes]) -> bool:
    """Whether ``cmd`` (run with ``argv`` on ``db``) wrote signal keys only (then its reply does not wait for
    its own commit)."""
    if not PREDICATES or getattr(cmd, "group", None) != _GROUP or cmd.first_key <= 0:
        return False
    last = cmd.last_key if cmd.last_key >= 0 else len(argv) + cmd.last_key
    keys = argv[cmd.first_key : last + 1 : cmd.step or 1]
    if not keys:
        return False
    for k in keys:
        for pred in PREDICATES:
            if pred(db, k):
                break
        else:
            return False
    return True

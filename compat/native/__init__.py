"""Native implementations of BullMQ's hottest scripts (see compat/scripts.py), one module per script.

Each function mirrors the common path of one script: it issues the same
redis.call()s, in the same order, with the same arguments (Lua numbers
formatted as Redis formats them), through the same command procedures, and
returns the reply the Lua script would. Before its first write it checks
everything that could make a later call fail or make the script take another
branch (key types, counters, options it does not implement); on anything
unusual it raises :class:`Bail` and the Lua script runs instead.

Which releases' digests each serves is decided from the argument layout recorded in
compat/script_table.py (see each ``_accept_*``); the Lua path serves the rest.

Modules: ``helpers`` (shared), ``add_standard_job`` (also the path of ``add_prioritized_job`` and
``add_delayed_job``; ``add_parent_job`` shares its checks and first calls), ``move_to_active``,
``move_to_finished``, ``move_stalled_jobs_to_wait``. Importing this package registers them, and the router with the core's scripting commands.

Implemented:

* addStandardJob (npm 5.0-6.x, PyPI 2.x-3.x: 5.x's 7/8/9-key layouts, paused list
  and meta reads, 5.0.0's marker-before-push, as variants): plain jobs, custom ids that
  do not exist yet, LIFO/FIFO, repeat job key. Lua: parent/child jobs,
  deduplication, duplicated ids. A run of its EVALSHAs (addBulk: a pipeline, or MULTI/EXEC) goes
  through its run form, ``AddRun`` (one set of queue checks per run; see compat/scripts.NativeRun).
* addPrioritizedJob (npm 5.9+, 6.x; PyPI 2.13+, 3.x): addStandardJob's path with the job
  going to the prioritized zset (INCR pc, ZADD with priority * 2^32 + counter); integral
  priorities up to 2^21 and a counter below 2^32-1 (Lua otherwise).
* addDelayedJob (npm 5.34+, 6.x; PyPI 2.13+, 3.x): addStandardJob's path with the job
  going to the delayed zset (getDelayedScore's same-millisecond slot, the delayed event,
  the marker at the next delayed timestamp); integral timestamps and delays (Lua otherwise).
* addParentJob (npm 5.0-6.x, PyPI 2.x-3.x: all 30 digests; the waiting-children zset as a key (5.62+) or in
  the args array, as variants): a flow's parent job stored (addStandardJob's job_checks and store_job), ZADD
  waiting-children, the waiting-children event; a parent with a parent of its own too (-5 when that is gone;
  parentKey/parent fields, SADD to its dependencies). Lua: deduplication, an existing id.
* moveToActive (npm 5.0+, 6.x; PyPI 2.13+, 3.x; the older releases' differences as ``MtaVariant``s): wait ->
  active and prioritized -> active, paused/maxed queues, the next-delayed timestamp. Lua: rate limiting,
  delayed jobs due for promotion, legacy ``0:`` markers in wait.
* moveToFinished (npm 5.9+, 6.x; PyPI 2.13+, 3.x; ``MtfVariant``s): completed/failed, keepJobs count -1/0/absent, with or without
  fetching the next job (same cases as moveToActive), drained event, the -1/-2/-4/
  -6/-9 codes. Lua: jobs with a parent or deduplication id, removeOnComplete/Fail
  counts > 0 or ages, metrics, fields to update, a job missing from active (-3).
* moveStalledJobsToWait (npm 5.0-6.x, PyPI 2.x-3.x: all 28 digests; key positions, the ``{failed, stalled}``
  reply of releases with a failed zset, 5.0.0's trimEvents without a default, as variants): the check key
  present (the reply at once); no job truly stalled (check key set, events trimmed, stalled members that are
  locked, no longer active or legacy ``0:`` markers handled, the active ids copied to the stalled set in
  batches of 7000). Lua: a job without its lock still in active (moved back to wait, or failed past the
  stalled limit, with its events), bad arguments, wrong key types.
"""

from __future__ import annotations

from respqueue.commands.scripting import register_router

from ..scripts import FALLBACK, open_run, run
from . import (
    add_delayed_job,
    add_parent_job,
    add_prioritized_job,
    add_standard_job,
    move_stalled_jobs_to_wait,
    move_to_active,
    move_to_finished,
)

register_router(run, FALLBACK, open_run)  # EVAL/EVALSHA of a known BullMQ script digest runs here first

__all__ = ["add_delayed_job", "add_parent_job", "add_prioritized_job", "add_standard_job", "move_stalled_jobs_to_wait", "move_to_active",
           "move_to_finished"]

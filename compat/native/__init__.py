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
``move_to_finished``, ``extend_lock`` (extendLock and extendLocks), ``is_finished``, ``get_counts``,
``change_priority``, ``move_to_delayed``, ``retry_job``, ``promote``, ``move_stalled_jobs_to_wait``. Importing
this package registers them, and the router with the core's scripting commands.

Implemented:

* addStandardJob (npm 5.0-6.x, PyPI 2.x-3.x: 5.x's 7/8/9-key layouts, paused list
  and meta reads, 5.0.0's marker-before-push, as variants): plain jobs, custom ids that
  do not exist yet, LIFO/FIFO, repeat job key. Lua: parent/child jobs,
  deduplication, duplicated ids. A run of its EVALSHAs (addBulk: a pipeline, or MULTI/EXEC) goes
  through its run form, ``AddRun`` (one set of queue checks per run; see compat/scripts.NativeRun).
* addPrioritizedJob (npm 5.0+, 6.x; PyPI 2.13+, 3.x): addStandardJob's path with the job
  going to the prioritized zset (INCR pc, ZADD with priority * 2^32 + counter); integral
  priorities up to 2^21 and a counter below 2^32-1 (Lua otherwise).
* addDelayedJob (npm 5.0+, 6.x; PyPI 2.13+, 3.x): addStandardJob's path with the job
  going to the delayed zset (getDelayedScore's same-millisecond slot, the delayed event,
  the marker at the next delayed timestamp); integral timestamps and delays (Lua otherwise).
* addParentJob (npm 5.0-6.x, PyPI 2.x-3.x: all 30 digests; the waiting-children zset as a key (5.62+) or in
  the args array, as variants): a flow's parent job stored (addStandardJob's job_checks and store_job), ZADD
  waiting-children, the waiting-children event; a parent with a parent of its own too (-5 when that is gone;
  parentKey/parent fields, SADD to its dependencies). Lua: deduplication, an existing id.
* moveToActive (npm 5.0+, 6.x; PyPI 2.13+, 3.x; the older releases' differences as ``MtaVariant``s): wait ->
  active and prioritized -> active, paused/maxed queues, the next-delayed timestamp. Lua: rate limiting,
  delayed jobs due for promotion, legacy ``0:`` markers in wait.
* moveToFinished (npm 5.0+, 6.x; PyPI 2.13+, 3.x; ``MtfVariant``s): completed/failed, keepJobs count -1/0/absent, with or without
  fetching the next job (same cases as moveToActive), drained event, the -1/-2/-4/
  -6/-9 codes. Lua: jobs with a parent or deduplication id, removeOnComplete/Fail
  counts > 0 or ages, metrics, fields to update, a job missing from active (-3).
* extendLock (npm 5.0-6.x, PyPI 2.x-3.x) and extendLocks (npm 5.33+, 6.x; PyPI 2.13+, 3.x, both of its texts:
  5.33-5.64's compares a missing lock with the token, later ones test for it first, the same for string
  tokens): renewed, wrong token, missing lock, fewer tokens than ids. Lua: ids or tokens that are not
  strings (or not msgpack lists), a lock or stalled key of another type, a duration SET would refuse, too
  few arguments. Without a MONITOR client the renewals (SET PX, SREM) are made inline.
* isFinished (npm 5.0-6.x, PyPI 2.x-3.x, both texts): completed/failed/neither/missing, with or without the
  value. Lua: a job key read by HGET that is no hash, a completed/failed key of another type, no job id.
* getCounts (npm 5.0-6.x, PyPI 2.x-3.x; 6.7.0's optional delayed cutoff as a variant): every state. Lua: a
  legacy ``0:`` marker at the tail of wait/paused (popped), a state key of another type, a cutoff argument
  that Lua's tonumber might read otherwise than as a plain integer or as no number.
Without a MONITOR client the reads of isFinished and getCounts are answered by their type checks (counted
as the Lua path's calls).
* changePriority (every release: npm 5.0-6.x, PyPI 2.13+, 3.x: 5.x's paused list as the target of a paused
  queue, 5.60+'s 4-field meta read, the whole job key before 5.13, 5.0-5.8's 6 keys with ``HEXISTS meta
  paused`` and 5.0-5.7's re-add rules (no LIFO, bit.band's score) as variants): prioritized or waiting jobs to
  the prioritized zset (counted, or LIFO in front) or to the wait/paused list (LPUSH/RPUSH), markers unless
  paused or at the concurrency, active or missing jobs. Lua: priorities other than a plain integer 0..2^21,
  a job key that is no hash, a counter INCR would refuse or that reaches 2^32 - 1 (2^31 - 1 before 5.8),
  meta's concurrency not an integer, a key of another type, coinciding keys, too few arguments.
* moveToDelayed (every release: npm 5.0-6.x, PyPI 2.13+, 3.x; as variants: 5.73-6.2's 12 keys with the paused
  list, 5.33-5.72's 8 keys that fetch nothing (5.33-5.58 scoring the job before its LREM), 5.8-5.32's 6 ARGV
  without fields to update, 5.0-5.7's score given as ARGV[3] and delay marker only for an unpaused queue,
  5.0-5.4's 7 keys (the lock's GET and DEL inline, -2 for another token; 5.0.0: maxLenEvents read without a
  default written, the marker's member "0")): active -> delayed (removeLock, the fields to update, getDelayedScore's slot,
  attempts counted or skipped, the delayed event, the delay marker), with or without fetching the next job
  (moveToActive's cases), the -1/-2/-6 codes. Lua: a job missing from active (-3), a delay that makes the job
  due at once (or delayed jobs due) with a fetch, rate limits, fractional timestamps or delays, (5.0-5.7) a
  score that is no plain integer below 2^53.
* retryJob (every release: npm 5.0-6.x, PyPI 2.13+, 3.x: as variants 5.x's getTargetQueueList (2 or 4 meta
  fields, the paused list; ``HEXISTS meta paused`` before 5.9, read once, no second read), 5.41-5.57's "prev
  failed" event, no fields to update before 5.39, the promotion bound at the next ms and bit.band's priority
  score before 5.8, 5.0-5.6's ``LREM active 0`` without -3 and no marker for a plain push, 5.0-5.4's 10 keys
  (the lock's GET and DEL inline, -2 for another token), 5.0.0's maxLenEvents without a default written):
  active -> wait (LPUSH/RPUSH), the paused list (5.x, paused), or prioritized (INCR pc), the
  marker unless paused or maxed, atm + 1, the waiting event; the fields to update; the -1/-2/-3/-6 codes.
  Lua: delayed jobs due for promotion, fractional or out-of-range priorities, a priority counter at
  2**32 - 1 (2**31 - 1 before 5.8), fields that write atm or priority.
* promote (every release: npm 5.0-6.x, PyPI 2.13+, 3.x; as variants 5.x's getTargetQueueList, 5.0-5.8's 8
  keys with ``HEXISTS meta paused``, 5.0-5.7's bit.band priority score, 5.0.0's markers added inline): delayed
  -> wait (the paused list on a paused 5.x queue) or prioritized, the marker unless paused or maxed, the
  waiting event, delay 0; -3 for a job not delayed. Lua: a legacy ``0:`` marker at the head of the target
  list, fractional or out-of-range priorities, a priority counter at 2**32 - 1 (2**31 - 1 before 5.8).
* moveStalledJobsToWait (npm 5.0-6.x, PyPI 2.x-3.x: all 28 digests; key positions, the ``{failed, stalled}``
  reply of releases with a failed zset, 5.0.0's trimEvents without a default, as variants): the check key
  present (the reply at once); no job truly stalled (check key set, events trimmed, stalled members that are
  locked, no longer active or legacy ``0:`` markers handled, the active ids copied to the stalled set in
  batches of 7000); truly stalled jobs (no lock, still in active) for every release (all 28 digests: counted
  in the release's field (``stc``, ``stalledCounter`` before 5.49: the layout's ``hincrbys``), the release's
  repeat check, ``defa`` past the limit (5.53+), back to wait or a paused 5.x queue's paused list (6.x: wait,
  no marker; told by moveJobToWait's callee), the marker (not in 5.0.0), 'waiting' and 'stalled' events, the
  ``{failed, stalled}`` reply before 5.53; StallMode). Lua: a job past the limit on npm 5.0-5.52 / PyPI
  2.13-2.14 (failed in the script: failed zset, parents, removeOnFail, deduplication), opts cjson might read
  otherwise than Python, a non-integer max count or stall counter, bad arguments, wrong key types, a job key
  that is another key of the call.
"""

from __future__ import annotations

from respqueue.commands.scripting import register_router

from ..scripts import FALLBACK, open_run, run
from . import (
    add_delayed_job,
    add_parent_job,
    add_prioritized_job,
    add_standard_job,
    change_priority,
    extend_lock,
    get_counts,
    is_finished,
    move_stalled_jobs_to_wait,
    move_to_active,
    move_to_delayed,
    move_to_finished,
    promote,
    retry_job,
)

register_router(run, FALLBACK, open_run)  # EVAL/EVALSHA of a known BullMQ script digest runs here first

__all__ = ["add_delayed_job", "add_parent_job", "add_prioritized_job", "add_standard_job", "change_priority",
           "extend_lock", "get_counts", "is_finished", "move_stalled_jobs_to_wait", "move_to_active",
           "move_to_delayed", "move_to_finished", "promote", "retry_job"]

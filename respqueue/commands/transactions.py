"""Transactions (multi.c): MULTI, EXEC, DISCARD, WATCH, UNWATCH.

The dispatcher queues commands while ``c.multi`` is a list and flags
``c.multi_error`` when a command is rejected while queueing. WATCH registers
the client in ``db.watched[key]``; :meth:`Database.modified` sets
``c.dirty_cas`` on every watcher, and EXEC also aborts when a watched key
that was alive at WATCH time has logically expired since (Redis 7 semantics).
"""

from __future__ import annotations

from typing import Any

from ..keyspace import mstime
from ..resp import NULL_ARRAY, OK, RedisError
from .registry import command

EXEC_WITHOUT_MULTI = RedisError(b"ERR EXEC without MULTI")
DISCARD_WITHOUT_MULTI = RedisError(b"ERR DISCARD without MULTI")
MULTI_NESTED = RedisError(b"ERR MULTI calls can not be nested")
WATCH_IN_MULTI = RedisError(b"ERR WATCH inside MULTI is not allowed")
EXECABORT = RedisError(b"EXECABORT Transaction discarded because of previous errors.")


def unwatch_all(c: Any) -> None:
    """Forget every key ``c`` WATCHes and whether one changed (UNWATCH, EXEC, DISCARD, RESET)."""
    c.dirty_cas = False
    wk = c.watched_keys
    if not wk:
        return
    for entry in wk:
        db, key = entry[0], entry[1]
        s = db.watched.get(key)
        if s is not None:
            s.discard(c)
            if not s:
                del db.watched[key]
    c.watched_keys = []


def discard_transaction(c: Any) -> None:
    """Leave MULTI state: drop the queue, clear the error/CAS flags, unwatch."""
    c.multi = None
    c.multi_error = False
    c.dirty_cas = False
    unwatch_all(c)


def _watched_key_expired(c: Any) -> bool:
    """True if a key that was alive at WATCH time has logically expired since."""
    now = -1
    for db, key, alive in c.watched_keys:
        if not alive or not db.expires:
            continue
        when = db.expires.get(key)
        if when is None:
            continue
        if now < 0:
            now = mstime()
        if when <= now and key in db.data:
            return True
    return False


@command("multi", 1, "noscript loading stale fast allow_busy", group="transactions")
def multi(c: Any, argv: list[bytes]) -> Any:
    if c.multi is not None:
        raise MULTI_NESTED
    c.multi = []
    c.multi_error = False
    return OK


@command("discard", 1, "noscript loading stale fast allow_busy", group="transactions")
def discard(c: Any, argv: list[bytes]) -> Any:
    if c.multi is None:
        raise DISCARD_WITHOUT_MULTI
    discard_transaction(c)
    return OK


@command("exec", 1, "noscript loading stale skip_slowlog", group="transactions")
def exec_(c: Any, argv: list[bytes]) -> Any:
    from ..dispatch import Block, call  # here: dispatch imports the command table

    queued = c.multi
    if queued is None:
        raise EXEC_WITHOUT_MULTI
    if c.watched_keys and not c.dirty_cas and _watched_key_expired(c):
        c.dirty_cas = True
    if c.multi_error:
        discard_transaction(c)
        raise EXECABORT
    if c.dirty_cas:
        discard_transaction(c)
        return NULL_ARRAY
    # unwatch first (as Redis does): our own writes must not flag us
    unwatch_all(c)
    c.multi = None
    replies: list[Any] = []
    had = "in_exec" in c.__dict__
    prev = c.in_exec
    c.in_exec = True
    try:
        i = 0
        n = len(queued)
        while i < n:
            cmd, args = queued[i]
            if (
                cmd.run is not None
                and i + 1 < n
                and queued[i + 1][0] is cmd
                and len(args) > 2
                and queued[i + 1][1][1] == args[1]
                and c.acl_unrestricted
                and c.server.mem_guard is None
            ):
                i = _exec_run(c, cmd, queued, i, replies)
                continue
            i += 1
            if not c.acl_unrestricted:  # rules may have changed since queueing (respqueue/acl.py)
                from ..acl import check_exec

                err = check_exec(c, cmd, args)
                if err is not None:
                    replies.append(err)
                    continue
            r = call(c, cmd, args)
            if type(r) is Block:  # defensive: blocking commands must not block here
                r = r.timeout_reply
            replies.append(r)
    finally:
        if had:
            c.in_exec = prev
        else:
            del c.in_exec
        c.multi_error = False
        c.dirty_cas = False
    return replies


def _exec_run(c: Any, cmd: Any, queued: list[Any], i: int, replies: list[Any]) -> int:
    """EXEC's run (registry.register_run): the queued requests from ``i`` on that repeat ``cmd`` with the same
    first argument and as many arguments (a transaction of EVALSHAs of one script: addBulk of BullMQ's
    Python client) share one runner. Nothing else runs before the transaction ends (blocked clients are
    served after EXEC), so the runner stays open to the last of them. Returns the index after the run."""
    from ..dispatch import call

    args0 = queued[i][1]
    first, ln = args0[1], len(args0)
    runner = cmd.run(c, args0)
    proc = cmd.proc if runner is None else runner
    n = len(queued)
    try:
        while i < n:
            cmd_i, args = queued[i]
            if cmd_i is not cmd or len(args) != ln or args[1] != first:
                break
            replies.append(call(c, cmd, args, False, proc))
            i += 1
    finally:
        if runner is not None:
            runner.close()
    return i


@command("watch", -2, "noscript loading stale fast allow_busy", 1, -1, 1, group="transactions")
def watch(c: Any, argv: list[bytes]) -> Any:
    if c.multi is not None:
        raise WATCH_IN_MULTI
    db = c.db
    watched = db.watched
    wk = c.watched_keys
    for key in argv[1:]:
        s = watched.get(key)
        if s is not None and c in s:
            continue
        # a key already expired at WATCH time: expire it now, so its later
        # deletion is (as in Redis) not a change for this watcher
        alive = 1 if db.lookup(key) is not None else 0
        if s is None:
            s = watched[key] = set()
        s.add(c)
        wk.append((db, key, alive))
    return OK


@command("unwatch", 1, "noscript loading stale fast allow_busy", group="transactions")
def unwatch(c: Any, argv: list[bytes]) -> Any:
    unwatch_all(c)
    return OK

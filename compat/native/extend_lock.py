"""Native extendLock and extendLocks: a worker renewing the locks of the jobs it holds.

extendLock (KEYS lock, stalled; ARGV token, duration ms, job id): GET the lock; when it holds the token,
SET it again with PX and SREM the job from the stalled set; reply 1, else 0. extendLocks (KEYS stalled;
ARGV key prefix, msgpack tokens, msgpack job ids, duration ms; the lock manager's call): the same for each
job in turn, replying with the ids whose lock was not renewed. 5.33-5.64's extendLocks compares a missing
lock (false) with the token directly, later releases test for it first: the same for string tokens, which
is all the native path takes.

Everything that could make a call fail (a lock or stalled key of another type, a duration SET refuses,
arguments that are not strings) is checked before the first call: the Lua path then runs the whole script.
Without a MONITOR client the GETs (answered from the pre-check), SETs and SREMs are made inline, counted
as the Lua path's calls (``Ctx.done``); with one, each goes through ``Ctx.call``.
"""

from __future__ import annotations

import re
from heapq import heappush
from typing import Any

from respqueue.keyspace import mstime
from respqueue.types.set import Set

from ..scripts import Bail, Ctx, native
from .helpers import GET, SET, SREM, _check, _unpack

#: a PX duration SET takes (positive, no leading zero, far from overflowing with the time added)
_DURATION = re.compile(rb"[1-9][0-9]{0,14}\Z")

_LOCK_KEYS = ["lock", "stalled"]
_LOCK_ARGV = ["token", "lock duration in milliseconds", "jobid"]
_LOCKS_ARGV = ["basekey", "tokens", "jobids", "lockduration ms"]


def _accept_lock(numkeys: int, lay: dict[str, Any]) -> Any:
    """extendLock: every release with the lock and stalled keys and token, duration, job id (one behaviour)."""
    if numkeys != 2 or lay.get("keys") != _LOCK_KEYS or lay.get("argv") != _LOCK_ARGV:
        return None
    if lay.get("calls") or lay.get("events") or lay.get("hash_writes"):
        return None
    return True


def _accept_locks(numkeys: int, lay: dict[str, Any]) -> Any:
    """extendLocks: the releases with the stalled key, prefix, msgpack tokens and ids, duration (5.33+)."""
    if numkeys != 1 or lay.get("keys") not in (["stalledkey"], ["stalled key"]) or lay.get("argv") != _LOCKS_ARGV:
        return None
    if set(lay.get("unpacked", {})) != {"ARGV2", "ARGV3"}:
        return None
    if lay.get("calls") or lay.get("events") or lay.get("hash_writes"):
        return None
    return True


def _stalled(ctx: Ctx, key: bytes) -> Any:
    """The stalled set (or None); Bail if the key holds another type (SREM would fail)."""
    return _check(ctx.db, key, Set)


def _renew(ctx: Ctx, lock_key: bytes, token: bytes, ms: bytes, stalled_key: bytes, job_id: bytes) -> None:
    """The GET that found ``token`` at ``lock_key`` (a string), SET lock token PX ms, SREM stalled job_id."""
    if ctx.monitors:
        call = ctx.call
        call(GET, [b"GET", lock_key])
        call(SET, [b"SET", lock_key, token, b"PX", ms])
        call(SREM, [b"SREM", stalled_key, job_id])
        return
    # inline: what SET's PX path and SREM do, each counted as the call the Lua path makes
    db = ctx.db
    ctx.wrote = True
    db.data[lock_key] = token
    when = int(ms) + mstime()
    db.expires[lock_key] = when
    heappush(db.expire_heap, (when, lock_key))
    db.modified(lock_key)
    s = db.data.get(stalled_key)
    if s is not None and job_id in s:
        s.remove(job_id)
        if not len(s):
            db.delete(stalled_key)
        else:
            db.modified(stalled_key)
    ctx.done.extend((GET, SET, SREM))  # type: ignore[union-attr]  (None only with monitors)


def _miss(ctx: Ctx, lock_key: bytes) -> None:
    """The GET that did not find the token."""
    if ctx.monitors:
        ctx.call(GET, [b"GET", lock_key])
    else:
        ctx.done.append(GET)  # type: ignore[union-attr]


@native("extendLock", _accept_lock)
def extend_lock(ctx: Ctx, keys: list[bytes], argv: list[bytes]) -> Any:
    """KEYS: lock, stalled; ARGV: token, duration ms, job id. 1 when the lock held the token (renewed)."""
    if len(argv) < 3:
        raise Bail("args")
    lock_key, stalled_key = keys[0], keys[1]
    token, ms, job_id = argv[0], argv[1], argv[2]
    if lock_key == stalled_key:
        raise Bail("key clash")
    cur = _check(ctx.db, lock_key, bytes)
    if cur != token:
        _miss(ctx, lock_key)
        return 0
    if not _DURATION.match(ms):
        raise Bail("duration")
    _stalled(ctx, stalled_key)
    _renew(ctx, lock_key, token, ms, stalled_key, job_id)
    return 1


@native("extendLocks", _accept_locks)
def extend_locks(ctx: Ctx, keys: list[bytes], argv: list[bytes]) -> Any:
    """KEYS: stalled; ARGV: key prefix, msgpack tokens, msgpack job ids, duration ms. The ids whose lock did
    not hold the token given for it (in order)."""
    if len(argv) < 4:
        raise Bail("args")
    stalled_key = keys[0]
    base, ms = argv[0], argv[3]
    tokens = _unpack(argv[1])
    ids = _unpack(argv[2])
    if type(tokens) is not list or type(ids) is not list:
        raise Bail("tokens/ids")
    n = len(ids)
    ntok = len(tokens)
    db = ctx.db
    data, expires = db.data, db.expires
    now = mstime()
    # the pre-check: which locks hold their token (a renewal writes the same token: a repeated id sees it too)
    plan = []
    renew = False
    for i in range(n):
        job_id = ids[i]
        token = tokens[i] if i < ntok else None
        if type(job_id) is not bytes or (token is not None and type(token) is not bytes):
            raise Bail("not a string")
        lock_key = base + job_id + b":lock"
        if lock_key == stalled_key:
            raise Bail("key clash")
        cur = data.get(lock_key)
        if cur is not None:
            when = expires.get(lock_key)
            if type(cur) is not bytes or when is None or when <= now:
                cur = _check(db, lock_key, bytes)  # another type (Bail), no TTL, or expired: as lookup does
        ok = cur is not None and cur == token
        renew = renew or ok
        plan.append((lock_key, job_id, token if ok else None))
    if not renew:
        _misses(ctx, plan)
        return [job_id for _k, job_id, _t in plan]
    if not _DURATION.match(ms):
        raise Bail("duration")
    stalled = _stalled(ctx, stalled_key)
    if ctx.monitors:
        failed = []
        for lock_key, job_id, token in plan:
            if token is None:
                _miss(ctx, lock_key)
                failed.append(job_id)
            else:
                _renew(ctx, lock_key, token, ms, stalled_key, job_id)
        return failed
    # inline (no MONITOR client): _renew's work for each lock, the expiry time and the stalled set looked up once
    ctx.wrote = True
    when = int(ms) + now
    heap = db.expire_heap
    modified = db.modified
    done = ctx.done
    failed = []
    for lock_key, job_id, token in plan:
        if token is None:
            done.append(GET)  # type: ignore[union-attr]
            failed.append(job_id)
            continue
        data[lock_key] = token
        expires[lock_key] = when
        heappush(heap, (when, lock_key))
        modified(lock_key)
        if stalled is not None and job_id in stalled:
            stalled.remove(job_id)
            if not len(stalled):
                db.delete(stalled_key)
                stalled = None
            else:
                modified(stalled_key)
        done.extend((GET, SET, SREM))  # type: ignore[union-attr]
    return failed


def _misses(ctx: Ctx, plan: list[tuple[bytes, bytes, Any]]) -> None:
    """The GETs of a call that renews nothing."""
    if ctx.monitors:
        for lock_key, _j, _t in plan:
            ctx.call(GET, [b"GET", lock_key])
    else:
        ctx.done.extend([GET] * len(plan))  # type: ignore[union-attr]

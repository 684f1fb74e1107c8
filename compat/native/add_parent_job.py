"""Native addParentJob: a flow's parent job (FlowProducer), stored and put in waiting-children.

For a flow's top parent and for a parent that is itself a child (its parent's key checked, -5 when gone;
the parent fields stored, the job added to the parent's dependencies): addStandardJob's checks and first
calls (``job_checks``, ``store_job``: INCR id, getOrSetMaxEvents, the custom id's EXISTS, storeJob's HMSET
and added event), then ZADD waiting-children, the waiting-children event, SADD to the parent's dependencies.
Lua: deduplication, an existing id.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgpack

from respqueue.keyspace import mstime
from respqueue.types.set import Set
from respqueue.types.zset import ZSet

from ..scripts import Bail, Ctx, cmd, native
from .add_standard_job import AddVariant, _job_args, add_layout, job_checks, store_job
from .helpers import EXISTS, ZADD, _arg, _check, _opts_with_json, _truthy, _unpack, _writes_events, _xadd_star

_ROLES = {"meta": "meta", "id": "id", "delayed": "delayed", "waiting children": "wc", "completed": "completed",
          "events stream key": "events"}
_EVENTS = ("event|added|jobId|?|name|?", "event|waiting-children|jobId|?")
SADD = cmd("sadd")
_STORE = "HMSET|name|?|data|?|opts|?|timestamp|?|delay|?|priority|?|?"


class ParentVariant(NamedTuple):
    """One release's addParentJob: key positions and where its args array holds what."""

    meta: int
    id: int
    events: int
    wc_key: int | None  # the waiting-children zset: KEYS index (5.62+) ...
    wc_arg: int | None  # ... or args index (5.0-5.61)
    parent: tuple[int, ...]  # args indexes of parentKey, the parent dependencies key and parent {id, queueKey}
    add: AddVariant  # for the args' common parse (the repeat job key's index)


def _accept(numkeys: int, lay: dict[str, Any]) -> Any:
    """The releases whose documented keys and args array addStandardJob's parse knows (add_layout), that
    store the job with storeJob's HMSET (getOrSetMaxEvents first) and write the added and waiting-children
    events; the waiting-children zset is a key (5.62+) or in the args array (before)."""
    got = add_layout(numkeys, lay, _ROLES, {"meta", "id", "events"})
    if got is None:
        return None
    pos, rjk, calls = got
    if not {"main>storeJob", "main>getOrSetMaxEvents"} <= calls or _STORE not in lay.get("hash_writes", ()):
        return None
    if not _writes_events(lay, _EVENTS):
        return None
    fields = lay.get("argv_fields", {}).get("ARGV1", [])

    def field(suffix: str) -> int | None:
        got = [i for i, f in enumerate(fields) if f.endswith(suffix)]
        return got[0] if len(got) == 1 else None

    parent = (field("parentkey"), field("parent dependencies key"), field("parent id queuekey"))
    wc_arg = field("waitchildrenkey key")
    if None in parent or (wc_arg is None) == ("wc" not in pos) or max(parent) >= rjk:  # type: ignore[type-var]
        return None
    return ParentVariant(pos["meta"], pos["id"], pos["events"], pos.get("wc"), wc_arg, parent,  # type: ignore[arg-type]
                         AddVariant(-1, -1, pos["meta"], pos["id"], None, pos["events"], -1, numkeys, rjk, False,
                                    False))


@native("addParentJob", _accept)
def add_parent_job(ctx: Ctx, keys: list[bytes], argv: list[bytes], variant: ParentVariant) -> Any:
    """KEYS (6.x): meta id delayed waiting-children completed events; ARGV: args, data, opts."""
    v = variant
    if len(set(keys)) != len(keys):
        raise Bail("args")
    prefix, custom_id, name, timestamp, ts, rjk, opts, opts_json = _job_args(ctx, v.add, argv, ())
    parent_key, parent_deps, parent = _parent_args(argv[0], v.parent)
    if _truthy(opts.get(b"de")):
        raise Bail("deduplication")
    if type(timestamp) is bytes:
        raise Bail("timestamp")  # (the ZADD score)
    delay = opts.get(b"delay")
    delay = b"0" if not _truthy(delay) else _arg(delay)
    prio = opts.get(b"priority")
    priority = b"0" if not _truthy(prio) else _arg(prio)
    if v.wc_key is not None:
        wc_key = keys[v.wc_key]
    else:
        wc_key = _unpacked_arg(argv[0], v.wc_arg)  # type: ignore[arg-type]
        if wc_key in keys:
            raise Bail("key clash")
    meta_key, id_key, events_key = keys[v.meta], keys[v.id], keys[v.events]
    db = ctx.db
    if parent_key is not None and not _alive(db, parent_key):
        ctx.inline(EXISTS, [b"EXISTS", parent_key])
        db.peek(parent_key)  # (expires it, as EXISTS does)
        return -5  # the parent is gone
    # ---- checks: nothing below may fail or branch differently once writing starts
    job_id, job_key, max_events = job_checks(db, keys, id_key, meta_key, events_key, prefix, custom_id)
    if wc_key == job_key:
        raise Bail("key clash")
    _check(db, wc_key, ZSet)
    if parent_deps is not None:
        if parent_deps in keys or parent_deps in (job_key, wc_key):
            raise Bail("key clash")
        _check(db, parent_deps, Set)
    parent_json = None if parent is None else _opts_with_json(ctx, msgpack.packb(parent))[1]  # cjson.encode(parent)

    # ---- the script's calls
    hm = [b"HMSET", job_key, b"name", name, b"data", argv[1], b"opts", opts_json,
          b"timestamp", ts, b"delay", delay, b"priority", priority]
    if parent_key is not None:
        ctx.inline(EXISTS, [b"EXISTS", parent_key])  # (1: looked up above)
        hm += [b"parentKey", parent_key, b"parent", parent_json]  # type: ignore[list-item]
    if rjk is not None:
        hm += [b"rjk", rjk]
    max_events = store_job(ctx, id_key, meta_key, events_key, job_id, custom_id, max_events, hm)
    ctx.call(ZADD, [b"ZADD", wc_key, ts, job_id])
    _xadd_star(ctx, [b"XADD", events_key, b"MAXLEN", b"~", max_events, b"*", b"event", b"waiting-children",
                     b"jobId", job_id])
    if parent_deps is not None:
        ctx.call(SADD, [b"SADD", parent_deps, job_key])
    return job_id


def _alive(db: Any, key: bytes) -> bool:
    """Whether EXISTS ``key`` says 1 now (the script's frozen time), without expiring anything."""
    if key not in db.data:
        return False
    when = db.expires.get(key) if db.expires else None
    return when is None or when > mstime()


def _parent_args(raw: bytes, idx: tuple[int, ...]) -> tuple[bytes | None, bytes | None, Any]:
    """The args array's parentKey, parent dependencies key and parent {id, queueKey} (None, None, None for a
    flow's top parent); Bail for a shape the native path leaves to Lua."""
    a = _unpack(raw)
    got = [a[i] if len(a) > i else None for i in idx]  # (_job_args checked that it is a list)
    pk, pdk, parent = got
    if pk is None:
        if pdk is not None or parent is not None:
            raise Bail("parent fields")
        return None, None, None
    if type(pk) is not bytes or (pdk is not None and type(pdk) is not bytes) or type(parent) is not dict:
        raise Bail("parent fields")
    return pk, pdk, parent


def _unpacked_arg(raw: bytes, i: int) -> bytes:
    """Field ``i`` of the msgpacked args array (decoded once more: _job_args keeps only its own fields)."""
    a = _unpack(raw)
    v = a[i] if type(a) is list and len(a) > i else None
    if type(v) is not bytes:
        raise Bail("waiting-children key")
    return v

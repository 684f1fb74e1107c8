"""maxmemory as Redis: the used-memory figure, eviction policies and the OOM refusal.

What "used memory" is here. Redis counts the bytes its allocator handed out. respqueue cannot use the
process RSS for that: CPython keeps freed memory in its arenas, so RSS hardly drops after keys are
deleted or evicted and an RSS-driven eviction would empty the whole keyspace. So it keeps a tracked
estimate instead: the sum over keys of the figure MEMORY USAGE reports (``keys.memory_usage_of``,
sampled like Redis's for big containers), plus ``STARTUP_OVERHEAD`` for the server itself (Redis's
``used_memory_startup`` is ~0.9 MB; with it, a tiny ``maxmemory`` behaves as on Redis). The estimate
is maintained incrementally: ``Database.modified(key)`` marks the key, and the next check re-measures
the marked keys only. Nothing is tracked while ``maxmemory`` is 0 (``server.mem_guard`` is None, the
one attribute ``dispatch.process``, ``Database.modified`` and ``Database.flush`` test); setting it
measures the whole keyspace once. INFO memory then reports the estimate as ``used_memory`` (and the
RSS as ``used_memory_rss``).

Before each command (as Redis's ``performEvictions`` in ``processCommand``), while the estimate is over
the limit, a policy other than ``noeviction`` evicts keys: it samples ``maxmemory-samples`` keys per
database (all keys for ``allkeys-*``, keys with a TTL for ``volatile-*``) and deletes the best
candidate, until under the limit or out of candidates: ``*-random`` any sampled key, ``*-lru`` the one
accessed longest ago, ``*-lfu`` the least frequently used (Redis's logarithmic counter with
``lfu-log-factor`` 10 and ``lfu-decay-time`` 1 minute), ``volatile-ttl`` the one expiring soonest.
Accesses (the keys of every command, writes included) are recorded only under an LRU or LFU policy.
Still over the limit, commands flagged ``denyoom`` get Redis's
``-OOM command not allowed when used memory > 'maxmemory'.``; so does any command queued inside MULTI,
an EXEC whose transaction holds a denyoom command, and EVAL/EVALSHA of a script with a shebang but
neither ``no-writes`` nor ``allow-oom``. A script without a shebang runs, and its first denyoom call
(before any write) fails with that error (``server.oom_state``, tested by the Lua bridge and by the
native BullMQ paths, which then fall back to Lua).
"""

from __future__ import annotations

import logging
import math
import random
import time
from typing import Any

from .resp import RedisError

log = logging.getLogger("respqueue")

OOM_MSG = b"OOM command not allowed when used memory > 'maxmemory'."
STARTUP_OVERHEAD = 1024 * 1024
LFU_INIT_VAL = 5
LFU_LOG_FACTOR = 10
LFU_DECAY_MINUTES = 1
_MAX_EVICT_PER_CALL = 1000  # keys evicted before one command at most (Redis bounds its time too)
_OOM_FREE_IN_MULTI = frozenset({"exec", "discard", "quit", "reset"})
_SCRIPT_CMDS = frozenset({"eval", "evalsha", "eval_ro", "evalsha_ro"})


class _Index:
    """A set of keys with O(1) random choice (list + positions, swap-remove)."""

    __slots__ = ("items", "pos")

    def __init__(self) -> None:
        self.items: list[bytes] = []
        self.pos: dict[bytes, int] = {}

    def add(self, k: bytes) -> None:
        if k not in self.pos:
            self.pos[k] = len(self.items)
            self.items.append(k)

    def discard(self, k: bytes) -> None:
        i = self.pos.pop(k, None)
        if i is None:
            return
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.pos[last] = i

    def sample(self, n: int) -> list[bytes]:
        items = self.items
        if len(items) <= n:
            return list(items)
        r = random.randrange
        m = len(items)
        return [items[r(m)] for _ in range(n)]


class _DbState:
    __slots__ = ("sizes", "keys", "volatile", "access")

    def __init__(self) -> None:
        self.sizes: dict[bytes, int] = {}
        self.keys = _Index()
        self.volatile = _Index()
        # LRU: key -> last access (monotonic s); LFU: key -> [counter, last decrement minute]
        self.access: dict[bytes, Any] = {}


class MemoryGuard:
    """The tracked estimate and the enforcement of one server's ``maxmemory``."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.states: dict[int, _DbState] = {}  # by id(db.data): SWAPDB swaps the dicts, the state follows
        self.dirty: set[tuple[Any, bytes]] = set()
        self.dataset = 0
        self.evicted = 0
        self.configure()
        self.recount()

    # ---- configuration --------------------------------------------------
    def configure(self) -> None:
        cfg = self.server.config
        self.limit = int(cfg.maxmemory)
        self.policy = cfg.maxmemory_policy
        self.samples = int(cfg.maxmemory_samples)
        self.lru = self.policy.endswith("-lru")
        self.lfu = self.policy.endswith("-lfu")
        self.volatile_only = self.policy.startswith("volatile-")

    # ---- the estimate ---------------------------------------------------
    def _state(self, db: Any) -> _DbState:
        st = self.states.get(id(db.data))
        if st is None:
            st = self.states[id(db.data)] = _DbState()
        return st

    def recount(self) -> None:
        """Measure the whole keyspace (when maxmemory is set, and after a FLUSH)."""
        from .commands.keys import memory_usage_of

        self.states = {}
        self.dirty = set()
        total = 0
        now = self._now()
        for db in self.server.dbs:
            st = self._state(db)
            sizes, keys, vol = st.sizes, st.keys, st.volatile
            exp = db.expires
            for k, v in db.data.items():
                n = memory_usage_of(k, v)
                sizes[k] = n
                total += n
                keys.add(k)
                if k in exp:
                    vol.add(k)
                if self.lru or self.lfu:
                    st.access[k] = self._new_access(now)
        self.dataset = total

    def key_changed(self, db: Any, key: bytes) -> None:
        self.dirty.add((db, key))

    def db_flushed(self, db: Any) -> None:
        st = self.states.pop(id(db.data), None)
        if st is not None:
            self.dataset -= sum(st.sizes.values())
        self.dirty = {(d, k) for d, k in self.dirty if d is not db}

    def settle(self) -> None:
        """Re-measure the keys written since the last check."""
        from .commands.keys import memory_usage_of

        dirty = self.dirty
        self.dirty = set()
        track = self.lru or self.lfu
        now = self._now() if track else 0.0
        for db, key in dirty:
            st = self._state(db)
            old = st.sizes.get(key, 0)
            v = db.data.get(key)
            if v is None:
                if key in st.sizes:
                    del st.sizes[key]
                    st.keys.discard(key)
                    st.volatile.discard(key)
                    st.access.pop(key, None)
                self.dataset -= old
                continue
            n = memory_usage_of(key, v)
            st.sizes[key] = n
            self.dataset += n - old
            if not old:
                st.keys.add(key)
            if key in db.expires:
                st.volatile.add(key)
            else:
                st.volatile.discard(key)
            if track:
                self._touch(st, key, now)

    def used(self) -> int:
        if self.dirty:
            self.settle()
        return STARTUP_OVERHEAD + self.dataset

    # ---- access tracking (LRU/LFU) --------------------------------------
    def _now(self) -> float:
        return time.monotonic()

    def _new_access(self, now: float) -> Any:
        return [LFU_INIT_VAL, int(now // 60)] if self.lfu else now

    def _touch(self, st: _DbState, key: bytes, now: float) -> None:
        if self.lfu:
            a = st.access.get(key)
            if a is None:
                st.access[key] = [LFU_INIT_VAL, int(now // 60)]
                return
            self._lfu_decay(a, now)
            c = a[0]
            if c < 255:
                base = max(c - LFU_INIT_VAL, 0)
                if random.random() < 1.0 / (base * LFU_LOG_FACTOR + 1):
                    a[0] = c + 1
        else:
            st.access[key] = now

    @staticmethod
    def _lfu_decay(a: list[int], now: float) -> int:
        minute = int(now // 60)
        periods = (minute - a[1]) // LFU_DECAY_MINUTES
        if periods > 0:
            a[0] = max(a[0] - periods, 0)
            a[1] = minute
        return a[0]

    def record_access(self, client: Any, cmd: Any, argv: list[bytes]) -> None:
        db = client.db
        st = self.states.get(id(db.data))
        if st is None or cmd.first_key <= 0:
            return
        now = self._now()
        for i in cmd.key_positions(argv):
            k = argv[i]
            if k in st.sizes:
                self._touch(st, k, now)

    # ---- eviction -------------------------------------------------------
    def _score(self, st: _DbState, db: Any, key: bytes, now: float) -> float:
        """Higher is a better eviction candidate."""
        if self.lru:
            return now - st.access.get(key, now)
        if self.lfu:
            a = st.access.get(key)
            return 255.0 - (self._lfu_decay(a, now) if a is not None else LFU_INIT_VAL)
        if self.policy == "volatile-ttl":
            return -float(db.expires.get(key, math.inf))
        return random.random()

    def evict(self) -> bool:
        """Evict until under the limit; False when no candidate is left."""
        now = self._now()
        for _ in range(_MAX_EVICT_PER_CALL):
            if self.used() <= self.limit:
                return True
            best: tuple[float, Any, bytes] | None = None
            for db in self.server.dbs:
                if not db.data:
                    continue
                st = self._state(db)
                idx = st.volatile if self.volatile_only else st.keys
                for k in idx.sample(self.samples):
                    if k not in db.data:
                        continue
                    s = self._score(st, db, k, now)
                    if best is None or s > best[0]:
                        best = (s, db, k)
            if best is None:
                return False
            _, db, key = best
            db.delete(key)
            self.evicted += 1
            self.server.stats_evicted_keys = getattr(self.server, "stats_evicted_keys", 0) + 1
        return self.used() <= self.limit

    # ---- the check before a command -------------------------------------
    def check(self, client: Any, cmd: Any, argv: list[bytes]) -> RedisError | None:
        """Evict if needed; the OOM error when ``cmd`` must be refused, else None."""
        server = self.server
        if self.lru or self.lfu:
            self.record_access(client, cmd, argv)
        over = self.used() > self.limit
        if over and self.policy != "noeviction":
            over = not self.evict()
        server.oom_state = over
        if not over:
            return None
        deny = cmd.is_denyoom
        if not deny and client.multi is not None and cmd.name not in _OOM_FREE_IN_MULTI:
            deny = True  # queuing in MULTI uses memory: Redis refuses it
        if not deny and cmd.name == "exec" and client.multi:
            deny = any(c.is_denyoom for c, _ in client.multi)
        if not deny and cmd.name in _SCRIPT_CMDS and len(argv) > 1:
            flags = _shebang_flags(server, argv, cmd.name.startswith("evalsha"))
            if flags is not None:
                if b"allow-oom" in flags:
                    server.oom_state = False  # its writes are allowed (Redis: allow-oom)
                elif b"no-writes" not in flags:
                    deny = True
        return RedisError(OOM_MSG) if deny else None


def _shebang_flags(server: Any, argv: list[bytes], by_sha: bool) -> list[bytes] | None:
    """The shebang flags of the script EVAL/EVALSHA runs; None when it has no shebang."""
    body = argv[1]
    if by_sha:
        sc = server.scripting
        s = sc.lookup(argv[1].lower()) if sc is not None else None
        if s is None:
            return None
        body = s.body
    if not body.startswith(b"#!"):
        return None
    line = body[2 : body.find(b"\n")] if b"\n" in body else body[2:]
    flags: list[bytes] = []
    for p in line.split(b" "):
        if p.startswith(b"flags="):
            flags.extend(f for f in p[6:].split(b",") if f)
    return flags


def setup(server: Any) -> None:
    """Install (maxmemory > 0), reconfigure or remove the guard after a (re)configuration."""
    if isinstance(server.config.maxmemory, str):  # a Config built without Config.load
        from .config import parse_memory

        server.config.maxmemory = parse_memory(server.config.maxmemory)
    if server.config.maxmemory > 0:
        g = server.mem_guard
        if g is None:
            server.mem_guard = MemoryGuard(server)
        else:
            was = (g.lru, g.lfu)
            g.configure()
            if (g.lru, g.lfu) != was:
                now = g._now()
                for db in server.dbs:
                    st = g._state(db)
                    st.access = {k: g._new_access(now) for k in st.sizes} if (g.lru or g.lfu) else {}
    else:
        server.mem_guard = None
        server.oom_state = False

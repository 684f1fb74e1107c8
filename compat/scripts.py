"""BullMQ script recognition and the registry of native (Python) fast paths.

BullMQ sends its Lua scripts with EVAL/EVALSHA. A script is recognised by the
SHA1 of its body: :data:`SCRIPTS` maps the digests of the pinned releases'
bodies (computed from what the server receives at run time; no script text is
stored here) to ``(name, numkeys, releases)``. :func:`build_table` recomputes
the table from a directory of ``<name>-<numkeys>.lua`` files.

A native implementation is registered per script name with :func:`native`.
``respqueue.commands.scripting`` calls :func:`run` before the Lua path; it
returns :data:`FALLBACK` unless a native implementation ran. A native function
receives ``(ctx, keys, args)`` and either returns the script's reply, having
made the same keyspace writes through the same command procedures (so
``db.modified``, WATCH, blocked clients, persistence, MONITOR and command
statistics see the same thing), or raises :class:`Bail` *before its first
write*, in which case the Lua script runs instead. The Lua path stays the
oracle: ``tests/test_native_scripts.py`` runs both and compares.

Switch: ``--native-scripts on|off`` (env ``RESPQUEUE_NATIVE_SCRIPTS``), on by
default.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from respqueue import keyspace
from respqueue.commands.registry import Command, lookup
from respqueue.dispatch import internal_error
from respqueue.resp import RedisError

log = logging.getLogger("respqueue.native")

#: sha1 of the body -> (script name, numkeys, releases that send this body).
#: Releases: "node-6.7.0" = npm bullmq 6.7.0 (interop/package.json),
#: "py-3.4.4" = PyPI bullmq 3.4.4 (the Python port used by the interop tests).
_TABLE: dict[str, tuple[str, int, str, int]] = {  # sha1: (name, numkeys, releases, body size)
    "81698fd2d28e7db1787595b3c464b188fa78bdcf": ("addDelayedJob", 6, "node-6.7.0", 25582),
    "ef55a5770d2c32d68b8528f29ced32261188aa30": ("addDelayedJob", 6, "py-3.4.4", 24101),
    "373dd5ff5b300deb3d6cd7e867c4b68023871d82": ("addJobScheduler", 11, "node-6.7.0,py-3.4.4", 22324),
    "eecb06ad6c96fa5da4fa8bca0ea7a1bf1bf62f18": ("addLog", 2, "node-6.7.0,py-3.4.4", 496),
    "eaec2bf999eb280c6bd0e77a158faf01d265e926": ("addParentJob", 6, "node-6.7.0", 19897),
    "ec2e6289ba76f455c6e824ba4d6e92df2a5aaa97": ("addParentJob", 6, "py-3.4.4", 18972),
    "299880da0f75f0b376ee8e87d20eae62f964ac5e": ("addPrioritizedJob", 9, "node-6.7.0", 25992),
    "7fe9ddf6854813edeaaa9b83839ac94693b1de8f": ("addPrioritizedJob", 9, "py-3.4.4", 22894),
    "5ab432e88830d573e2fa33392ffbd4ad25a9b100": ("addStandardJob", 9, "node-6.7.0", 26076),
    "10f8d228e89ed4f765afc5b3bafb6defbb84e311": ("addStandardJob", 9, "py-3.4.4", 22978),
    "de220c4e0e17e976d762e5c2aa0b5015ea32cb50": ("changeDelay", 4, "node-6.7.0,py-3.4.4", 2969),
    "35fbc2569911c2b95dd1f91d11f517607623ca02": ("changePriority", 7, "node-6.7.0,py-3.4.4", 3751),
    "d4b4530a1de226c532b5256e3dafa5cdc1641a6a": ("cleanJobsInSet", 3, "node-6.7.0,py-3.4.4", 12766),
    "2e3d2277043ce9692d0dd5e509ddb1ce487a617f": ("drain", 5, "node-6.7.0,py-3.4.4", 8862),
    "dc9605328a4cc37f68acbf27cdd42e393f7b762e": ("extendLock", 2, "node-6.7.0,py-3.4.4", 502),
    "c35baf769e5dc3d9194b2bceca04ab59f7c510f7": ("extendLocks", 1, "node-6.7.0,py-3.4.4", 1196),
    "705dea099608a5bec7f0193936824b3ddfd33d79": ("getCounts", 1, "node-6.7.0", 1367),
    "a8034c631460c6803c87966ce881636246de2398": ("getCounts", 1, "py-3.4.4", 868),
    "15fe3b282563af623bbb8a7fc5388da7ac048941": ("getCountsPerPriority", 2, "node-6.7.0,py-3.4.4", 517),
    "eb499927f69f6cfb6bf1a04611a4af09c3f76df9": ("getDependencyCounts", 4, "node-6.7.0,py-3.4.4", 725),
    "6fa777040226443befc6851bf06ff4ad0137e11d": ("getJobScheduler", 1, "node-6.7.0,py-3.4.4", 312),
    "2c21b4165511c6c23dffe537928638b4262e5752": ("getJobs", 1, "node-6.7.0,py-3.4.4", 4478),
    "4a4a04e444061d5a3ae7f4d99f91dbee96f07b62": ("getMetrics", 2, "node-6.7.0,py-3.4.4", 437),
    "8ead3c08a7bde7653892f14e44385d448a0f291c": ("getRanges", 1, "node-6.7.0,py-3.4.4", 1806),
    "2fc89305bc3c4d9b63b20ebd5f1e702ffd3e2749": ("getRateLimitTtl", 2, "node-6.7.0,py-3.4.4", 818),
    "3e90cb3738218db992d1a8240931632ea9b50cfe": ("getState", 8, "node-6.7.0,py-3.4.4", 1387),
    "5e107aa7dd123c4a80fc40151f8d25596c39353a": ("getStateV2", 8, "node-6.7.0,py-3.4.4", 963),
    "33f7e6ddf1cc5ff38caa5f4335c04401215c0390": ("isFinished", 3, "node-6.7.0,py-3.4.4", 879),
    "0949ff9d2fb7c0195900673e3803be7c7b925d18": ("isJobInList", 1, "node-6.7.0,py-3.4.4", 424),
    "915456b98cefd4cfc19cf99a50d73bde41a27b6c": ("isMaxed", 2, "node-6.7.0,py-3.4.4", 562),
    "2f746a769bc3d182a0f73ace6bb7a4906faf5df9": ("moveJobFromActiveToWait", 9, "node-6.7.0,py-3.4.4", 3353),
    "bc8c0fb293881a6f07cd03407410bf7bcbc818e4": ("moveJobsToWait", 8, "node-6.7.0,py-3.4.4", 3969),
    "1e9bb7deb6219644a634d32c430ce15ed39a377e": ("moveStalledJobsToWait", 9, "node-6.7.0,py-3.4.4", 6510),
    "d96ca626f1ea141b44a856b312fc636d99aa9ea9": ("moveToActive", 11, "node-6.7.0,py-3.4.4", 8422),
    "9f83944d6edafd63c74121d73299dd3358ddfe0c": ("moveToDelayed", 11, "node-6.7.0,py-3.4.4", 13540),
    "69666e69dd5621df59067a03de685e55a486560d": ("moveToFinished", 14, "node-6.7.0,py-3.4.4", 39634),
    "bbb6163481b4e25994b9f80db2d210c99d15e12b": ("moveToWaitingChildren", 7, "node-6.7.0,py-3.4.4", 2736),
    "b5e55563e8084314227a6512b49bbe089f31c6a1": ("obliterate", 2, "node-6.7.0,py-3.4.4", 10849),
    "24e0a4e97b78f73b314c257b4fff96ebfc207f27": ("paginate", 1, "node-6.7.0,py-3.4.4", 3742),
    "8c25f7be363de2a28428dae13ddc20ffb3f6e7aa": ("pause", 7, "node-6.7.0,py-3.4.4", 2571),
    "1d740f19fe984343737df70206877be7cbab6913": ("promote", 9, "node-6.7.0,py-3.4.4", 3038),
    "abd7e936e55a858203fec357f77b9dd65c271f0f": ("relayAckInbox", 1, "node-6.7.0,py-3.4.4", 381),
    "9216bb728b7998a9573bff0bc3b1df12250b8b7c": ("relayDeleteRetained", 1, "node-6.7.0,py-3.4.4", 5142),
    "b76fe671e4c8e1b5228f54a0d35e92171445ba16": ("relayGet", 1, "node-6.7.0", 11344),
    "6666ae59f08cf39487e6f11142a42472f0cb1b9e": ("relayGet", 1, "py-3.4.4", 11347),
    "d4451239d13c466bc8d3e705096e4b91e40118d4": ("relayGetNamespaces", 1, "node-6.7.0", 979),
    "89ad271ed0da57c8c06b6b74dbd3792779e09088": ("relayGetNamespaces", 1, "py-3.4.4", 982),
    "4f2528c6590c53d78fa446f530a5bcbcb80df0cc": ("relayHeartbeat", 1, "node-6.7.0,py-3.4.4", 2697),
    "986fc3d43ee7ca0e483e119ed258f5aba056beff": ("relayPublish", 1, "node-6.7.0,py-3.4.4", 13073),
    "a3bdef6bddee0c87c4d729dcde261ffd5309d33e": ("relayReadInbox", 1, "node-6.7.0,py-3.4.4", 853),
    "d0648fa7d3210282adf66fb4e848369b620e320a": ("relayRegisterNode", 1, "node-6.7.0,py-3.4.4", 10019),
    "fe617ca9ea1bd7528759477a68bb8c056ec32c02": ("relayRemoveEndpoint", 1, "node-6.7.0,py-3.4.4", 6842),
    "ae5c4509ec126ac639649cdf28b6cca39e71b4f5": ("relaySubscribe", 1, "node-6.7.0,py-3.4.4", 4415),
    "1a53bb9107fc4472b08f13cf772095b2abd65eea": ("relaySweep", 1, "node-6.7.0,py-3.4.4", 9232),
    "945a3e6308cbe4c91615e223b3fe27b601f5917b": ("relayTouchNamespace", 1, "node-6.7.0,py-3.4.4", 1147),
    "d6609dd56f7e79f0c59e9297c2145eec758b3a0f": ("relayTrimInbox", 1, "node-6.7.0,py-3.4.4", 2363),
    "4bc90f6b2ea5951db819379563c2eefc7af85930": ("relayUnregisterNode", 1, "node-6.7.0,py-3.4.4", 8905),
    "8193548d62b0cd9223df46482777b662a185e8d6": ("releaseLock", 1, "node-6.7.0,py-3.4.4", 293),
    "83e68e2628933191fc09966810bd07490bf44ab4": ("releaseParentIfNoPendingDependencies", 2, "node-6.7.0", 5920),
    "d797627f66fc304dee2f224b483288e66f7d6e6a": ("removeChildDependency", 1, "node-6.7.0,py-3.4.4", 5435),
    "9ddd27ba08a7ec8a36289beb96191d7ce870198f": ("removeDeduplicationKey", 1, "node-6.7.0,py-3.4.4", 388),
    "574af105e7df948fdf7e5410f3190a87f037d7f3": ("removeJob", 2, "node-6.7.0,py-3.4.4", 12375),
    "b68502558f85f3bf9c5d6b25b1b44e2fcc5d4c92": ("removeJobScheduler", 3, "node-6.7.0,py-3.4.4", 1098),
    "cc9ac326ca56ab0c0d67615b0ed1230b49161753": ("removeOrphanedJobs", 1, "node-6.7.0,py-3.4.4", 2094),
    "6c2bf9284f8f23d9debfbeb5fa7cce8270679d6c": ("removeUnprocessedChildren", 2, "node-6.7.0,py-3.4.4", 12083),
    "1323ff649a78371c602a52252e61dc9f2fdfe36d": ("reprocessJob", 9, "node-6.7.0,py-3.4.4", 4362),
    "812d06de3eaf0fb70e333b3d0142eed8bf630a2d": ("retryJob", 11, "node-6.7.0,py-3.4.4", 5907),
    "ab2818154a3f405adad5e01b769e79c50fb9e615": ("saveStacktrace", 1, "node-6.7.0,py-3.4.4", 335),
    "12a42ffd90c486a7f398fbb17cdcdd484f4abaea": ("updateData", 1, "node-6.7.0,py-3.4.4", 280),
    "4da21b4a6efa92d4c0bdfc40e803ecc1e9ab4eb5": ("updateJobScheduler", 12, "node-6.7.0,py-3.4.4", 12457),
    "e992d1814b869c8def8e67ef117b3ed2cc95771f": ("updateProgress", 3, "node-6.7.0,py-3.4.4", 899),
}
SCRIPTS: dict[bytes, tuple[str, int, str]] = {k.encode(): v[:3] for k, v in _TABLE.items()}

FALLBACK: Any = object()


class Bail(Exception):
    """Raised by a native implementation, before any write, to run the Lua script instead."""


class NativeScriptError(Exception):
    """A command failed after the native path had written: cannot fall back any more."""

    def __init__(self, err: RedisError) -> None:
        super().__init__(err.msg)
        self.err = err


NativeFn = Callable[["Ctx", list[bytes], list[bytes]], Any]

#: script name -> native implementation
NATIVE: dict[str, NativeFn] = {}
#: sha -> (native implementation, numkeys as sent in argv[2], numkeys, script name)
_BY_SHA: dict[bytes, tuple[NativeFn, bytes, int, str]] = {}
#: body lengths of the scripts with a native implementation (cheap EVAL prefilter)
_LENGTHS: set[int] = set()
#: body length of each known script
SCRIPT_SIZES: dict[bytes, int] = {k.encode(): v[3] for k, v in _TABLE.items()}

#: per-script counters: name -> [native runs, fallbacks to Lua]
STATS: dict[str, list[int]] = {}


def native(name: str) -> Callable[[NativeFn], NativeFn]:
    """Decorator: register ``fn`` as the native implementation of BullMQ script ``name``."""

    def deco(fn: NativeFn) -> NativeFn:
        NATIVE[name] = fn
        _rebuild()
        return fn

    return deco


def unregister(name: str) -> None:
    NATIVE.pop(name, None)
    _rebuild()


def _rebuild() -> None:
    _BY_SHA.clear()
    _LENGTHS.clear()
    for sha, (name, numkeys, _rel) in SCRIPTS.items():
        fn = NATIVE.get(name)
        if fn is not None:
            _BY_SHA[sha] = (fn, str(numkeys).encode(), numkeys, name)
            n = SCRIPT_SIZES.get(sha)
            if n is not None:
                _LENGTHS.add(n)


def script_name(sha: bytes) -> str | None:
    e = SCRIPTS.get(sha.lower())
    return None if e is None else e[0]


def build_table(directory: str, release: str) -> dict[str, tuple[str, int, str, int]]:
    """sha1 -> (name, numkeys, release, size) for the ``<name>-<numkeys>.lua`` files in ``directory``."""
    out: dict[str, tuple[str, int, str, int]] = {}
    for f in sorted(os.listdir(directory)):
        if not f.endswith(".lua"):
            continue
        with open(os.path.join(directory, f), "rb") as fh:
            body = fh.read()
        name, nk = f[:-4].rsplit("-", 1)
        out[hashlib.sha1(body).hexdigest()] = (name, int(nk), release, len(body))
    return out


_ENABLED: list[Any] = [None, True]  # [last config value seen, whether it means on]


def enabled(server: Any) -> bool:
    v = getattr(server.config, "native_scripts", "on")
    e = _ENABLED
    if v is e[0] and type(v) is str:
        return e[1]  # type: ignore[no-any-return]
    on = str(v).lower() not in ("off", "no", "0", "false")
    e[0] = v
    e[1] = on
    return on


# ---- the context a native implementation runs with ---------------------------
class Ctx:
    """What a native implementation gets: the database, and ``call`` for commands.

    ``call`` runs a command procedure exactly as the Lua bridge's redis.call
    does (same client, statistics, MONITOR feed); an error reply raises
    :class:`Bail` while nothing has been written yet and
    :class:`NativeScriptError` afterwards.
    """

    __slots__ = ("sc", "db", "server", "wrote", "sha", "monitors")

    def __init__(self, sc: Any, db: Any, server: Any, sha: bytes) -> None:
        self.sc = sc
        self.db = db
        self.server = server
        self.wrote = False
        self.sha = sha
        self.monitors = bool(server.monitors)

    def call(self, cmd: Command, argv: list[bytes]) -> Any:
        if cmd.is_write:
            self.wrote = True
        if self.monitors:
            try:
                self.server.feed_monitors(self.sc, argv)
            except Exception:
                pass
        # respqueue.dispatch.call, inlined (this is the hot path of every native script)
        try:
            r = cmd.proc(self.sc, argv)  # type: ignore[misc]
        except RedisError as e:
            e.__traceback__ = None
            cmd.failed_calls += 1
            r = e
        except Exception:
            r = internal_error(cmd)
        cmd.calls += 1
        if isinstance(r, RedisError):
            if self.wrote:
                raise NativeScriptError(r)
            raise Bail(r.msg.decode("utf-8", "replace"))
        return r


    def feed(self, argv: list[bytes]) -> None:
        """Show ``argv`` to MONITOR clients as the bridge would (for a command the caller runs inline)."""
        try:
            self.server.feed_monitors(self.sc, argv)
        except Exception:
            pass


def cmd(name: str) -> Command:
    """The Command object for ``name`` (for native implementations)."""
    c = lookup(name.encode())
    if type(c) is not Command:
        raise RuntimeError(f"no command {name}")
    return c


# ---- the hook ------------------------------------------------------------------
def run(rt: Any, c: Any, argv: list[bytes], by_sha: bool) -> Any:
    """EVAL/EVALSHA through a native implementation, or FALLBACK for the Lua path."""
    if not _BY_SHA or not enabled(c.server) or c.server.oom_state or c.server.write_refused is not None:
        # over maxmemory: the Lua path fails the first write with Redis's OOM error;
        # writes refused (MISCONF): the Lua path runs the script as Redis does, its first write
        # getting the error before anything is applied
        return FALLBACK
    if len(argv) < 3:
        return FALLBACK
    if by_sha:
        sha = argv[1]
        ent = _BY_SHA.get(sha)
        if ent is None:
            sha = sha.lower()
            ent = _BY_SHA.get(sha)
            if ent is None:
                return FALLBACK
        if rt.lookup(sha) is None:
            return FALLBACK  # NOSCRIPT comes from the Lua path
    else:
        body = argv[1]
        if _LENGTHS and len(body) not in _LENGTHS:
            return FALLBACK
        sha = hashlib.sha1(body).hexdigest().encode()
        ent = _BY_SHA.get(sha)
        if ent is None:
            return FALLBACK
        rt.compile(body, sha)  # cached for later EVALSHA / SCRIPT EXISTS
    fn, numkeys, nk, name = ent
    if argv[2] != numkeys or rt.running:
        return FALLBACK
    if len(argv) < 3 + nk:
        return FALLBACK
    keys = argv[3 : 3 + nk]
    args = argv[3 + nk :]
    sc = rt.client
    sc.db = c.db
    sc.resp = 2
    ctx = Ctx(sc, c.db, c.server, sha)
    prev_frozen = keyspace._frozen_ms
    if prev_frozen is None:
        keyspace.freeze_time(int(time.time() * 1000))
    st = STATS.get(name)
    if st is None:
        st = STATS[name] = [0, 0]
    try:
        r = fn(ctx, keys, args)
    except Bail as e:
        if ctx.wrote:  # a bug in the native implementation
            log.error("native %s bailed out after writing (%s)", name, e)
            return RedisError(b"ERR native script " + name.encode() + b" failed after writing")
        st[1] += 1
        log.debug("native %s: Lua fallback (%s)", name, e)
        return FALLBACK
    except NativeScriptError as e:
        log.error("native %s: command error after writing: %r", name, e.err.msg)
        return RedisError(e.err.msg.rstrip(b"\r\n") + b" script: " + sha + b", on @user_script:0.")
    except Exception:
        if ctx.wrote:
            log.exception("native %s failed after writing", name)
            return RedisError(b"ERR native script " + name.encode() + b" failed after writing")
        log.exception("native %s failed; Lua fallback", name)
        st[1] += 1
        return FALLBACK
    finally:
        if prev_frozen is None:
            keyspace.freeze_time(None)
    if st[0] == 0:
        log.info("native fast path in use for BullMQ script %s", name)
    st[0] += 1
    if log.isEnabledFor(logging.DEBUG):
        log.debug("native %s: ran", name)
    return r

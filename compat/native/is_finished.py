"""Native isFinished (Job.isCompleted/isFailed's sibling, Job.waitUntilFinished's check): is a job in the
completed or failed set, with its return value or failed reason when asked.

KEYS: completed, failed, job; ARGV: job id, "1" to return the value. EXISTS job (missing: -1, or
``{-1, "Missing key for job <key>. isFinished"}``), ZSCORE completed id (1, or ``{1, HGET returnvalue}``),
ZSCORE failed id (2, or ``{2, HGET failedReason}``), else 0 (or ``{0}``). 5.0-5.40 tests ZSCORE's reply
with ``~= false``, later releases by its truth: the same. Only reads: the key types are checked first
(a completed/failed key that is no zset, a job key read by HGET that is no hash: the Lua path answers).
"""

from __future__ import annotations

from typing import Any

from respqueue.types.zset import ZSet

from ..scripts import Bail, Ctx, cmd, native
from .helpers import EXISTS, HGET, _check

ZSCORE = cmd("zscore")
_KEYS = ["completed key", "failed key", "job key"]
_ARGV = ["job id", "return value"]
_READS = {"HGET|failedReason", "HGET|returnvalue"}


def _accept(numkeys: int, lay: dict[str, Any]) -> Any:
    """Every release with the completed, failed and job keys, the job id and the return-value flag."""
    if numkeys != 3 or lay.get("keys") != _KEYS or lay.get("argv") != _ARGV:
        return None
    if set(lay.get("hash_reads", ())) != _READS or lay.get("hash_writes") or lay.get("events") or lay.get("calls"):
        return None
    return True


def _is_hash(v: Any) -> bool:
    return type(v) is not bytes and getattr(v, "rtype", None) == b"hash"


@native("isFinished", _accept)
def is_finished(ctx: Ctx, keys: list[bytes], argv: list[bytes]) -> Any:
    """KEYS: completed failed job; ARGV: job id, "1" for the value. 0 waiting/active, 1 completed, 2 failed,
    -1 missing (with the value, or the missing-key text, in an array when ARGV[2] is "1")."""
    if not argv:
        raise Bail("args")
    completed_key, failed_key, job_key = keys[0], keys[1], keys[2]
    job_id = argv[0]
    with_value = len(argv) > 1 and argv[1] == b"1"
    db = ctx.db
    # the checks: every call below then succeeds
    job = db.peek(job_key)
    where = 0  # 1 completed, 2 failed
    if job is not None:
        completed = _check(db, completed_key, ZSet)
        where = 1 if completed is not None and completed.score(job_id) is not None else 0
        if not where:
            failed = _check(db, failed_key, ZSet)
            if failed is not None and failed.score(job_id) is not None:
                where = 2
        if where and with_value and not _is_hash(job):
            raise Bail("job key not a hash")
    call = ctx.call
    if not ctx.monitors:
        # EXISTS and the ZSCOREs answered by the checks, counted as the Lua path's calls
        done = ctx.done
        if job is None:
            done.append(EXISTS)  # type: ignore[union-attr]
            return [-1, b"Missing key for job " + job_key + b". isFinished"] if with_value else -1
        done.extend((EXISTS, ZSCORE) if where == 1 else (EXISTS, ZSCORE, ZSCORE))  # type: ignore[union-attr]
        if not where:
            return [0] if with_value else 0
        if not with_value:
            return where
        return [where, call(HGET, [b"HGET", job_key, b"returnvalue" if where == 1 else b"failedReason"])]
    if call(EXISTS, [b"EXISTS", job_key]) != 1:
        return [-1, b"Missing key for job " + job_key + b". isFinished"] if with_value else -1
    if call(ZSCORE, [b"ZSCORE", completed_key, job_id]) is not None:
        if with_value:
            return [1, call(HGET, [b"HGET", job_key, b"returnvalue"])]
        return 1
    if call(ZSCORE, [b"ZSCORE", failed_key, job_id]) is not None:
        if with_value:
            return [2, call(HGET, [b"HGET", job_key, b"failedReason"])]
        return 2
    return [0] if with_value else 0

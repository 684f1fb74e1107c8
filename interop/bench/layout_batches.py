"""The job-row layout's per-batch work in-process (not a test): ``JobLayout.before`` + ``stamp`` on
BullMQ-shaped processing batches, for instruction counts that do not move with the VM's load.

    PYTHONHASHSEED=0 valgrind --tool=callgrind --toggle-collect=functools_reduce --callgrind-out-file=/dev/null \\
        python -m interop.bench.layout_batches --jobs 8000 --batch 25

Each batch is what a Worker at concurrency ``--batch`` leaves dirty in durable mode: per job, moveToFinished of
a job taken in the previous batch (LREM active, ZADD completed, HSET finishedOn, DEL its lock) and
moveToActive of the next one (RPOPLPUSH wait active, HSET processedOn, SET its lock), plus the queue's events
stream and meta hash. The containers are the real JobList / ZSet, the keyspace a real Database (no server).
Only ``before`` and ``stamp`` run inside ``functools.reduce`` (the rest of the driver does not call it), so
callgrind's ``--toggle-collect=functools_reduce`` counts exactly their instructions: "Collected" / jobs is the
layout's cost per processed job (``PYTHONHASHSEED=0``: the same count run after run). Without valgrind it
prints the process-CPU time of the same calls (noisy on a shared machine).
"""

from __future__ import annotations

import argparse
import time
from functools import reduce
from typing import Any


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=8000)
    ap.add_argument("--batch", type=int, default=25, help="jobs taken (and finished) per batch")
    a = ap.parse_args(argv)
    import respqueue.cli  # noqa: F401  (the core's modules in their import order)
    from compat.engine.layout import JobLayout
    from respqueue.keyspace import Database
    from respqueue.types.hash import Hash
    from respqueue.types.list import List
    from respqueue.types.zset import ZSet

    n, b = a.jobs, a.batch
    db = Database(0, None)  # type: ignore[arg-type]  (no server: nothing here reads it)
    data = db.data
    p = b"bull:q:"
    for i in range(n):
        data[p + str(i).encode()] = Hash([(b"name", b"j"), (b"data", b'{"i":1}'), (b"timestamp", b"1")])
    data[p + b"wait"] = List([str(i).encode() for i in range(n)][::-1])
    data[p + b"active"] = List()
    data[p + b"completed"] = ZSet()
    data[p + b"events"] = b"a stream"  # a key that is no job, dirty in every batch
    data[p + b"meta"] = Hash([(b"opts.maxLenEvents", b"10000")])
    lay = JobLayout()
    stored: dict[tuple[int, bytes], bytes] = {}
    dbs = [db]
    first: dict[tuple[int, bytes], Any] = {(0, p + b"wait"): True, (0, p + b"active"): True, (0, p + b"completed"): True}
    lay.before(first, dbs, stored, [].append)  # the containers become job rows
    wait, active, completed = data[p + b"wait"], data[p + b"active"], data[p + b"completed"]
    prev: list[bytes] = []
    spent = 0.0
    done = 0
    while len(wait) >= b:
        dirty: dict[tuple[int, bytes], Any] = {}
        cur = []
        for _ in range(b):
            if prev:  # moveToFinished
                jid = prev.pop()
                jk = p + jid
                active.remove(jid, -1)
                completed.add(jid, 1000.0)
                data[jk].set(b"finishedOn", b"2")
                data.pop(jk + b":lock", None)
                dirty[(0, p + b"active")] = False
                dirty[(0, p + b"completed")] = False
                dirty[(0, jk)] = False
                dirty[(0, jk + b":lock")] = False
            jid = wait.pop_one(False)  # moveToActive
            active.push_one(jid, True)
            jk = p + jid
            data[jk].set(b"processedOn", b"1")
            data[jk + b":lock"] = b"token"
            dirty[(0, p + b"wait")] = False
            dirty[(0, p + b"active")] = False
            dirty[(0, jk)] = False
            dirty.setdefault((0, jk + b":lock"), True)
            dirty[(0, p + b"events")] = False
            dirty[(0, p + b"meta")] = False
            cur.append(jid)
        prev = cur
        # the keys rows the journal would upsert for the batch's hashes
        kup = [(0, k[1], "hash", None, 1, b"blob") for k in dirty if isinstance(data.get(k[1]), Hash)]

        def work(_a: Any, _b: Any, dirty: Any = dirty, kup: Any = kup) -> Any:
            lay.before(dirty, dbs, stored, [].append)
            return lay.stamp(kup)

        t0 = time.process_time()
        _plain, jobs = reduce(work, [0, 0])
        spent += time.process_time() - t0
        done += b
        assert sum(len(rows) for _, rows in jobs) >= b
    print(f"{done} jobs in batches of {b}: JobLayout.before + stamp {spent / done * 1e6:.2f} us of CPU per job")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

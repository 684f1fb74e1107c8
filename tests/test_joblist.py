"""compat/engine/joblist.py: a job-row list's own index (member -> position) follows every List mutator, and
the members it lost are logged for the layout's next batch (no server: the container alone)."""

from __future__ import annotations

import random

from compat.engine.joblist import JobList
from respqueue.types.list import List


def _check(v: JobList) -> None:
    assert v._p is not None and v._ix is not None
    assert v._ix == dict(zip(v._d, v._p, strict=True))  # every member, at its position, and nothing else
    assert list(v._p) == sorted(v._p) and len(set(v._p)) == len(v._p)


def test_index_follows_every_mutator() -> None:
    rnd = random.Random(7)
    v = JobList.of(List([b"a", b"b", b"c"]))
    v.attach((0, b"bull:q:wait"))
    assert v._ix is None  # attached as generic rows: not indexed until the layout asks
    assert v.reindex()
    _check(v)
    n = 0
    for _ in range(3000):
        n += 1
        new = f"j{n}".encode()
        op = rnd.randrange(10)
        d = list(v._d)
        before = set(d)
        if op == 0:
            v.push_left([new, new + b"x"])
        elif op == 1:
            v.push_right([new])
        elif op == 2:
            v.push_one(new, rnd.random() < 0.5)
        elif op == 3 and d:
            v.pop_one(rnd.random() < 0.5)
        elif op == 4 and d:
            v.pop_many(rnd.randrange(1, 4), rnd.random() < 0.5)
        elif op == 5 and d:
            v.set(rnd.randrange(len(d)), new)
        elif op == 6 and d:
            v.insert(rnd.choice(d), new, rnd.random() < 0.5)
        elif op == 7 and d:
            v.remove(rnd.choice(d), rnd.choice([0, 1, -1]))
        elif op == 8 and len(d) > 4:
            v.trim(rnd.randrange(2), len(d) - 1 - rnd.randrange(2))
        else:
            v.push_right([new])
        if v.journal_key is None:  # LINSERT ran out of midpoints: the layout rewrites (and reindexes) it
            v.attach((0, b"bull:q:wait"))
            assert v.reindex()
        _check(v)
        # the members it lost since the last look, and only those
        gone = set(v._gone)
        assert gone >= before - set(v._d)
        assert not gone & set(v._d) - before
        v._gone = []
    assert not v._dup


def test_a_member_pushed_twice_is_flagged() -> None:
    v = JobList([b"a", b"b"])
    v.attach((0, b"bull:q:wait"))
    assert v.reindex()
    v.push_left([b"a"])
    assert v._dup and not v.reindex()  # cannot be kept as job rows
    v.remove(b"a", 1)
    assert v.reindex() and not v._dup  # the copy went again within the batch: it can
    _check(v)
    v.detach()
    assert v._ix is None and type(v.copy()) is List

"""compat/engine/joblist.py: a job-row list's own index (the set of its members) follows every List mutator,
``position`` finds any member's position, and the members it lost are logged for the layout's next batch (no
server: the container alone)."""

from __future__ import annotations

import random

import pytest

from compat.engine import joblist
from compat.engine.idindex import IdIndex
from compat.engine.joblist import JobList
from respqueue.types.list import List


def _check(v: JobList) -> None:
    assert v._p is not None and v._ix is not None
    assert set(v._ix) == set(v._d) and len(v._ix) == len(v._d)  # every member, and nothing else
    for m, pos in zip(v._d, v._p, strict=True):
        assert v.position(m) == pos
    assert list(v._p) == sorted(v._p) and len(set(v._p)) == len(v._p)


@pytest.mark.parametrize(
    ("bitmap_min", "ids"),
    [(10**9, False), (0, False), (0, True), (50, True)],
    ids=["set", "bitmap-names", "bitmap-ids", "set-then-bitmap"],
)
def test_index_follows_every_mutator(monkeypatch: pytest.MonkeyPatch, bitmap_min: int, ids: bool) -> None:
    """Every mutator keeps the index exact, whether it is a set, an IdIndex from the start, or a set that
    turns into an IdIndex as the list grows past ``BITMAP_MIN`` (job ids as decimals, or names)."""
    monkeypatch.setattr(joblist, "BITMAP_MIN", bitmap_min)
    rnd = random.Random(7)
    v = JobList.of(List([b"a", b"b", b"c"]))
    v.attach((0, b"bull:q:wait"))
    assert v._ix is None  # attached as generic rows: not indexed until the layout asks
    assert v.reindex()
    _check(v)
    n = 0
    for _ in range(3000):
        n += 1
        new = b"%d" % n if ids else f"j{n}".encode()
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
    assert (type(v._ix) is IdIndex) == (len(v._d) >= bitmap_min)


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


def test_position_anywhere_in_a_long_list() -> None:
    v = JobList([f"{i}".encode() for i in range(2000)])
    v.attach((0, b"bull:q:wait"), first=-500)
    assert v.reindex()
    v.pop_one(True)
    v.push_one(b"x", False)
    assert [v.position(m) for m in (b"x", b"1", b"1999", b"1000", b"1745", b"300")] == [1500.0, -499.0, 1499.0, 500.0,
                                                                                          1245.0, -200.0]
    try:
        v.position(b"0")
    except KeyError:
        pass
    else:
        raise AssertionError("a member popped has no position")


def test_index_costs_no_object_per_member() -> None:
    """The index holds the deque's own member bytes and no position object per member: tracemalloc sees
    ~58 B per member for the whole JobList (a set slot and the deque's pointer), where a member -> float
    dict cost ~90 B (its index alone ~76)."""
    import tracemalloc

    members = [f"job-{i}".encode() for i in range(100_000)]
    tracemalloc.start()
    try:
        t0 = tracemalloc.get_traced_memory()[0]
        v = JobList(members)
        v.attach((0, b"bull:q:wait"))
        assert v.reindex()
        for i in range(100_000, 120_000):
            v.push_one(f"job-{i}".encode(), True)
        per = (tracemalloc.get_traced_memory()[0] - t0 - 20_000 * 44) / 120_000
    finally:
        tracemalloc.stop()
    assert per < 72, per


def test_members_placed_by_consecutive_positions() -> None:
    """The load puts a list's members in place when their positions are a run (no pair per member, no sort),
    and leaves any other case to the sort."""
    from compat.engine.layout import _placed

    assert _placed([3.0, 1.0, 2.0], [b"c", b"a", b"b"]) == [b"a", b"b", b"c"]
    assert _placed([-7.0, -5.0, -6.0], [b"x", b"z", b"y"]) == [b"x", b"y", b"z"]
    assert _placed([0.5, 1.5], [b"a", b"b"]) is None  # not integers
    assert _placed([0.0, 0.5, 2.0], [b"a", b"b", b"c"]) is None  # spans 3 but not a run
    assert _placed([0.0, 2.0, 2.0], [b"a", b"b", b"c"]) is None  # a position taken twice
    assert _placed([0.0, 3.0], [b"a", b"b"]) is None  # a gap

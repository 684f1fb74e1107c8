"""IdIndex (compat/engine/idindex.py): a job-row list's member set as a bitmap of job ids, against a set."""

from __future__ import annotations

import random

import pytest

from compat.engine.idindex import IdIndex


def same(ix: IdIndex, ref: set[bytes]) -> None:
    assert len(ix) == len(ref)
    assert sorted(ix) == sorted(ref)
    for m in ref:
        assert m in ix


@pytest.mark.parametrize("base", [0, 7, 100_000, 10**12, 10**17 + 3])
def test_random_operations_match_a_set(base: int) -> None:
    rnd = random.Random(base)
    ix = IdIndex()
    ref: set[bytes] = set()
    for step in range(6000):
        r = rnd.random()
        if r < 0.55:
            c = rnd.random()
            if c < 0.8:
                m = b"%d" % (base + rnd.randint(0, 6000))
            elif c < 0.86:
                m = b"0%d" % rnd.randint(0, 99)  # leading zero: not an id's canonical form
            elif c < 0.92:
                m = b"job-%d" % rnd.randint(0, 99)
            elif c < 0.96:
                m = b"%d" % rnd.randint(0, 10**20)  # far outside the window, or past 18 digits
            else:
                m = rnd.choice([b"", b"0", b"-1", b"+1", b" 1", b"1.0", "\u0661".encode()])
            ix.add(m)
            ref.add(m)
        else:
            m = rnd.choice(sorted(ref)) if ref and rnd.random() < 0.8 else b"%d" % (base + rnd.randint(0, 6000))
            ix.discard(m)
            ref.discard(m)
        q = b"%d" % (base + rnd.randint(0, 6000))
        assert (q in ix) == (q in ref)
        if step % 500 == 0:
            same(ix, ref)
    same(ix, ref)
    assert ix.isdisjoint([b"nope", b"%d" % (base + 7000)])
    if ref:
        assert not ix.isdisjoint([b"nope", next(iter(ref))])


def test_built_from_members_counts_each_once() -> None:
    members = [b"%d" % i for i in range(5, 3005)] + [b"x", b"007"]
    ix = IdIndex(members + members[:10] + [b"x"])  # a member given twice is in it once
    same(ix, set(members))
    sparse = [b"%d" % (i * 10**9) for i in range(1, 100)]  # too sparse for the window: kept in the set
    ix = IdIndex(sparse)
    same(ix, set(sparse))
    assert len(ix.bits) <= 4096


def test_a_fifo_queue_keeps_a_small_window() -> None:
    """Ids pushed at one end and taken at the other (a queue's wait list): the window follows them."""
    ix = IdIndex()
    for i in range(1, 300_001):
        ix.add(b"%d" % i)
        if i > 5000:
            ix.discard(b"%d" % (i - 5000))
    assert len(ix) == 5000 and not ix.other
    assert len(ix.bits) < 5000  # about one bit per member, not one per id ever seen
    assert b"295001" in ix and b"295000" not in ix
    for i in range(295_001, 300_001):
        ix.discard(b"%d" % i)
    assert len(ix) == 0 and not list(ix) and len(ix.bits) == 0


def test_ids_below_the_window_and_far_above_it() -> None:
    ix = IdIndex([b"%d" % i for i in range(50_000, 60_000)])
    ix.add(b"49990")  # just below: the window grows down
    ix.add(b"%d" % 10**15)  # far above: the set takes it
    ix.add(b"%d" % 10**15)
    assert b"49990" in ix and b"%d" % 10**15 in ix and len(ix) == 10_002
    assert ix.other == {b"%d" % 10**15}
    ix.discard(b"%d" % 10**15)
    ix.discard(b"49990")
    assert len(ix) == 10_000 and b"49990" not in ix


def test_built_from_spread_ids_the_dense_run_takes_the_window() -> None:
    """Built from ids too spread for one window (a far id first): the widest run that fits is bits, the rest
    is in the set, whatever their order."""
    ids = [b"%d" % (10**15)] + [b"%d" % i for i in range(1, 100_001)] + [b"5", b"%d" % (10**16)]
    ix = IdIndex(ids)
    same(ix, set(ids))
    assert ix.other == {b"%d" % (10**15), b"%d" % (10**16)}
    assert ix.nbits == 100_000 and len(ix.bits) <= 100_000 // 8 + 2

"""Cheap in-memory statistics for ``/metrics`` (respqueue/http): a fixed-bucket histogram.

Observing a value is one ``bisect`` and two additions, so it can sit on a hot path (a commit, a job
finishing). Nothing here allocates per observation.
"""

from __future__ import annotations

from bisect import bisect_left


class Histogram:
    """Counts of observations per bucket (upper bounds ``bounds``, inclusive, plus +Inf), their sum and
    count: what a Prometheus histogram exposes. ``bounds`` are in the unit the caller observes in;
    ``scale`` converts that unit to the exposed one (e.g. 0.001 for ms observed, seconds exposed)."""

    __slots__ = ("bounds", "counts", "sum", "count", "scale")

    def __init__(self, bounds: tuple[float, ...], scale: float = 1.0) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0
        self.scale = scale

    def observe(self, v: float) -> None:
        self.counts[bisect_left(self.bounds, v)] += 1
        self.sum += v
        self.count += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound in the exposed unit, cumulative count)`` per bucket, +Inf last."""
        out = []
        acc = 0
        for b, n in zip(self.bounds, self.counts, strict=False):
            acc += n
            out.append((b * self.scale, acc))
        out.append((float("inf"), self.count))
        return out


#: Seconds, for latencies from a millisecond to a minute.
LATENCY_BOUNDS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0)
#: Sizes (rows, changes): powers of four.
SIZE_BOUNDS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)

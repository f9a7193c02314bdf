"""Mergeable moments (n, mean, M2) of z-values: what crosses from the normalising partitions to the ranking.

Window statistics need only each node's count, mean and sum of squared deviations over the window, and those
merge exactly (Chan, Golub and LeVeque's pairwise update). So a normalising partition sends, once per ranking
period, per node and per bucket of task finish time, the moments of the z-values it made, instead of every
sample; the ranking adds whole buckets into windows. The same update with a negative count withdraws values
(a provisional z-value replaced by its final one). ``Moments.of`` uses ``math.fsum``, so the moments of a set
of values do not depend on their order; merges are applied in a fixed order by the callers, so the results of
a run do not depend on how Kafka interleaved the partitions.

>>> a, b = Moments.of([1.0, 2.0]), Moments.of([4.0])
>>> both = a.merge(b)
>>> both.n, round(both.mean, 12), round(both.m2, 12)
(3, 2.333333333333, 4.666666666667)
>>> back = both.without(b)
>>> back.n, round(back.mean, 12), round(back.m2, 12)
(2, 1.5, 0.5)
>>> both.without(both)
Moments(n=0, mean=0.0, m2=0.0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Moments:
    """Count, mean and sum of squared deviations of some values (``m2 / n`` is the population variance)."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    @classmethod
    def of(cls, values: Sequence[float]) -> Moments:
        """The moments of ``values``, independent of their order (exactly rounded sums)."""
        if not values:
            return EMPTY
        return cls(*moments_of(values))

    def merge(self, other: Moments) -> Moments:
        """The moments of both sets of values; a negative ``other.n`` withdraws values (see ``without``)."""
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        n = self.n + other.n
        if n <= 0:
            return EMPTY
        delta = other.mean - self.mean
        mean = self.mean + delta * other.n / n
        m2 = self.m2 + other.m2 + delta * delta * self.n * other.n / n
        return Moments(n, mean, max(m2, 0.0))

    def without(self, other: Moments) -> Moments:
        """The moments of these values with those of ``other`` (a subset of them) taken out."""
        if other.n == 0:
            return self
        return self.merge(Moments(-other.n, other.mean, -other.m2))

    @property
    def std(self) -> float:
        """Population standard deviation (DSB divides by n); 0 for fewer than one value."""
        return math.sqrt(self.m2 / self.n) if self.n > 0 else 0.0


EMPTY = Moments()


def moments_of(values: Sequence[float]) -> tuple[int, float, float]:
    """``(n, mean, M2)`` of one or more values, as ``Moments.of`` (without building the object).

    >>> m = Moments.of([4.0, 1.0, 2.0])
    >>> moments_of([1.0, 2.0, 4.0]) == (m.n, m.mean, m.m2)
    True
    """
    n = len(values)
    if n <= 2:  # one or two values: the plain sums are the exactly rounded ones, bit for bit, and cheaper
        mean = sum(values) / n
        return n, mean, sum([(v - mean) ** 2 for v in values])
    mean = math.fsum(values) / n
    return n, mean, math.fsum([(v - mean) ** 2 for v in values])


def merge_all(parts: Iterable[Moments]) -> Moments:
    """Every part merged, in the order given."""
    total = EMPTY
    for part in parts:
        total = total.merge(part)
    return total


def bucket_width(window_size_us: int, step_us: int) -> int:
    """The widest bucket that windows of ``window_size_us`` ending on multiples of ``step_us`` add whole.

    >>> bucket_width(3_600_000_000, 300_000_000), bucket_width(600, 400)
    (300000000, 200)
    """
    return math.gcd(window_size_us, step_us)

"""Moments of one or two values, and combinations of one or two groups, take plain sums instead of ``math.fsum``
(the common case at a ranking boundary: a node with one task in a bucket). For one or two terms the plain IEEE sum
is the exactly rounded one, so the shortcut must give the same bits as the fsum path: the worker and the
in-process runner compare window statistics exactly, and snapshots written before the shortcut must restore to
the same numbers."""

from __future__ import annotations

import math
import random

import pytest

from streams.core.moments import Moments
from streams.core.windows import combine


def _fsum_of(values: list[float]) -> Moments:
    n = len(values)
    mean = math.fsum(values) / n
    return Moments(n, mean, math.fsum((v - mean) ** 2 for v in values))


def _fsum_combine(signed: list[tuple[int, float, float]]) -> Moments:
    n = sum(c for c, _, _ in signed)
    if n <= 0:
        return Moments()
    mean = math.fsum(c * m for c, m, _ in signed) / n
    return Moments(n, mean, max(math.fsum(q + c * (m - mean) ** 2 for c, m, q in signed), 0.0))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_or_two_values_give_the_fsum_bits_including_signed_zeros(seed: int) -> None:
    rng = random.Random(seed)
    special = [0.0, -0.0, 1e-300, -1e-300, 1e150, 0.1, 0.2, 0.3, 3.0]
    for _ in range(20_000):
        values = [rng.choice(special) if rng.random() < 0.3 else rng.gauss(0.0, rng.choice([1e-8, 1.0, 1e8]))
                  for _ in range(rng.choice([1, 2]))]
        assert repr(Moments.of(values)) == repr(_fsum_of(values))
        signed = [(rng.choice([1, 1, 2, 5, -1]), v, abs(rng.gauss(0.0, 1.0)) if rng.random() < 0.5 else 0.0)
                  for v in values]
        assert repr(combine(signed)) == repr(_fsum_combine(signed))


def test_three_values_still_take_exactly_rounded_sums() -> None:
    values = [1e16, 1.0, -1e16]  # a plain left-to-right sum loses the 1.0
    assert Moments.of(values).mean == pytest.approx(1.0 / 3.0)
    assert combine([(1, v, 0.0) for v in values]).mean == pytest.approx(1.0 / 3.0)

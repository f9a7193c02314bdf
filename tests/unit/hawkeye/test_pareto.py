"""Hawkeye's Pareto fit against closed forms and scipy's maximum-likelihood fit."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from streams.core.prediction.hawkeye.pareto import Pareto, fit_pareto


def test_fit_matches_closed_form_on_hand_example() -> None:
    # x = t_min * e^k: sum ln(x/t_min) = 0 + 1 + 2 = 3, so beta = 3 / 3 = 1
    fit = fit_pareto([2.0, 2.0 * math.e, 2.0 * math.e**2])
    assert fit is not None
    assert fit.t_min == 2.0
    assert fit.beta == pytest.approx(1.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("shape", [1.5, 3.0])
def test_fit_agrees_with_scipy_pareto_fit_with_location_fixed_at_zero(seed: int, shape: float) -> None:
    rng = random.Random(seed)
    samples = [5.0 * rng.paretovariate(shape) for _ in range(200)]
    b, loc, scale = stats.pareto.fit(samples, floc=0)
    fit = fit_pareto(samples)
    assert fit is not None
    assert loc == 0
    assert fit.t_min == pytest.approx(scale, rel=1e-9)
    assert fit.beta == pytest.approx(b, rel=1e-6)


def test_fit_recovers_the_law_of_a_large_sample() -> None:
    rng = random.Random(7)
    fit = fit_pareto([3.0 * rng.paretovariate(2.5) for _ in range(20_000)])
    assert fit is not None
    assert fit.t_min == pytest.approx(3.0, rel=1e-3)
    assert fit.beta == pytest.approx(2.5, rel=0.05)


def test_pof_is_the_pareto_cdf_at_the_deadline() -> None:
    law = Pareto(t_min=2.0, beta=3.0)
    for deadline in (2.5, 3.0, 6.0, 50.0):
        assert law.pof(deadline) == pytest.approx(stats.pareto.cdf(deadline, 3.0, scale=2.0))
    assert law.pof(1.0) == 0.0
    assert law.pof(6.0) == pytest.approx(1 - (1 / 3) ** 3)


def test_pof_falls_for_a_slower_host_at_the_same_deadline() -> None:
    fast, slow = Pareto(1.0, 3.0), Pareto(1.8, 3.0)
    assert slow.pof(2.25) < 0.5 < fast.pof(2.25)


def test_mean_is_the_papers_expected_time() -> None:
    rng = random.Random(3)
    law = Pareto(4.0, 3.0)
    draws = [4.0 * rng.paretovariate(3.0) for _ in range(50_000)]
    assert law.mean() == pytest.approx(math.fsum(draws) / len(draws), rel=0.03)


def test_degenerate_samples() -> None:
    assert fit_pareto([]) is None
    assert fit_pareto([1.0]) is None
    assert fit_pareto([0.0, 1.0]) is None
    equal = fit_pareto([2.0, 2.0, 2.0])
    assert equal is not None and math.isinf(equal.beta)
    assert equal.pof(2.1) == 1.0 and equal.pof(2.0) == 0.0
    assert fit_pareto([1.0, 2.0], min_samples=3) is None

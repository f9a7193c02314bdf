"""Hawkeye's Pareto model of task times (its section III.B): maximum-likelihood fit and PoF.

Task times on a host are taken to follow a Pareto law with minimum ``t_min`` and exponent ``beta``
(density ``beta * t_min**beta / t**(beta + 1)`` for ``t >= t_min``). The maximum-likelihood estimates
over samples x_1..x_n are closed-form: ``t_min = min(x)`` and ``beta = n / sum(ln(x_i / t_min))``
(the same as ``scipy.stats.pareto.fit(x, floc=0)``, which the tests check). A sample whose values are
all equal has no spread: ``beta`` is infinite, every task takes exactly ``t_min``.

PoF (the paper's eq. 3) is the probability that a task finishes before the deadline T:
``1 - (t_min / T) ** beta`` for ``T > t_min``, and 0 when the deadline is at or below the minimum
(the paper's formula would go negative there: no task can be that fast).

>>> fit = fit_pareto([1.0, 2.0, 4.0])
>>> fit.t_min, round(fit.beta, 6)
(1.0, 1.442695)
>>> round(fit.pof(2.0), 4)  # 1 - (1/2) ** 1.4427
0.6321
>>> fit.pof(0.5)
0.0
>>> fit_pareto([3.0]) is None  # one sample says nothing about the tail
True
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Pareto:
    """A fitted Pareto law: minimum ``t_min`` > 0, exponent ``beta`` > 0 (``inf``: no spread).

    >>> Pareto(2.0, 3.0).mean()  # the paper's eq. 5: t_min * beta / (beta - 1)
    3.0
    >>> Pareto(2.0, 1.0).mean()  # beta <= 1: the mean does not exist
    inf
    """

    t_min: float
    beta: float

    def pof(self, deadline: float) -> float:
        """P(a task finishes before ``deadline``), the paper's eq. 3 (0 at or below ``t_min``)."""
        if deadline <= self.t_min:
            return 0.0
        if math.isinf(self.beta):
            return 1.0
        return 1.0 - float((self.t_min / deadline) ** self.beta)

    def mean(self) -> float:
        """E[T] = t_min * beta / (beta - 1) for beta > 1 (the paper's eq. 5), else infinite."""
        if self.beta <= 1.0:
            return math.inf
        if math.isinf(self.beta):
            return self.t_min
        return self.t_min * self.beta / (self.beta - 1.0)


def fit_pareto(samples: Iterable[float], min_samples: int = 2) -> Pareto | None:
    """Maximum-likelihood Pareto over positive ``samples``; None with fewer than ``min_samples``
    (at least 2) or a non-positive value (a Pareto law has no mass at or below zero)."""
    values = list(samples)
    if len(values) < max(2, min_samples) or min(values) <= 0:
        return None
    t_min = min(values)
    return Pareto(t_min, _beta(len(values), math.fsum(math.log(v) for v in values), t_min))


def fit_from_sums(n: int, sum_log: float, t_min: float, min_samples: int = 2) -> Pareto | None:
    """The same fit from sufficient statistics: count, sum of ln x and the minimum (for running tallies).

    >>> fit_from_sums(3, math.log(1.0) + math.log(2.0) + math.log(4.0), 1.0) == fit_pareto([1.0, 2.0, 4.0])
    True
    """
    if n < max(2, min_samples) or t_min <= 0:
        return None
    return Pareto(t_min, _beta(n, sum_log, t_min))


def _beta(n: int, sum_log: float, t_min: float) -> float:
    spread = sum_log - n * math.log(t_min)
    return n / spread if spread > 1e-12 * n else math.inf

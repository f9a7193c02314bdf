"""Nurd's calibration (SPEC 4, paper Algorithm 1 lines 4-6 and 15-16), as small pure functions.

Which "standardisation" before the centroids: per-feature min-max scaling to [0, 1] over the vectors
present at the first prediction (finished and running together), as in the authors' code (which used
the job's final values; here only what is known at that moment). Not z-scores: centring at the pooled
mean makes n_fin·c_fin + n_run·c_run = 0, so rho = (n_run / n)² whatever the data (0.92 with 4 %
finished); rho carries information only when the origin stays put (zero usage) and the scale is common.

>>> rho([[0.0, 1.0]], [[1.0, 1.0]])
1.0
>>> calibration_delta(1.0, alpha=0.5)
0.0
>>> weight(0.3, delta=0.0, epsilon=0.05)
0.3
>>> weight(0.01, delta=0.0, epsilon=0.05)
0.05
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Vector = Sequence[float]


def minmax_scale(vectors: Sequence[Vector]) -> list[list[float]]:
    """Scale each column to [0, 1] by its min and max over ``vectors``; a constant column becomes 0."""
    if not vectors:
        return []
    columns = list(zip(*vectors, strict=True))
    lows = [min(c) for c in columns]
    spans = [max(c) - low for c, low in zip(columns, lows, strict=True)]
    return [
        [(v - low) / span if span > 0 else 0.0 for v, low, span in zip(row, lows, spans, strict=True)]
        for row in vectors
    ]


def centroid(vectors: Sequence[Vector]) -> list[float]:
    """The column means of ``vectors`` (at least one)."""
    n = len(vectors)
    return [sum(column) / n for column in zip(*vectors, strict=True)]


def rho(finished: Sequence[Vector], running: Sequence[Vector]) -> float:
    """rho = ||c_fin||² / ||c_run - c_fin||² of already-scaled vectors (inf when the centroids coincide)."""
    c_fin, c_run = centroid(finished), centroid(running)
    numerator = sum(v * v for v in c_fin)
    denominator = sum((r - f) ** 2 for r, f in zip(c_run, c_fin, strict=True))
    if denominator == 0:
        return math.inf
    return numerator / denominator


def calibration_delta(rho_value: float, alpha: float) -> float:
    """delta = 1 / (1 + rho) - alpha."""
    return 1.0 / (1.0 + rho_value) - alpha


def weight(z: float, delta: float, epsilon: float) -> float:
    """w = max(epsilon, min(z + delta, 1))."""
    return max(epsilon, min(z + delta, 1.0))


def delta_at_first_prediction(
    finished: Sequence[Mapping[str, float]], running: Sequence[Mapping[str, float]], alpha: float
) -> tuple[float, float]:
    """(rho, delta) from feature dicts of finished and running tasks, scaled together by min-max.

    With no vector on one side there is nothing to compare: rho = inf (delta = -alpha, the most
    suspicious setting), which only happens when tasks finish without any checkpoint.
    """
    if not finished or not running:
        return math.inf, calibration_delta(math.inf, alpha)
    names = sorted({name for x in (*finished, *running) for name in x})
    table = [[x.get(name, 0.0) for name in names] for x in (*finished, *running)]
    scaled = minmax_scale(table)
    value = rho(scaled[: len(finished)], scaled[len(finished) :])
    return value, calibration_delta(value, alpha)

"""ML-NA's automatic labelling (paper Algorithm 1): which k-means centre is the weak cluster.

[C1] the weak cluster's centre has the most positive cumulative daily means (a positive mean z says its nodes'
tasks ran slower than their siblings that day); [C2] among centres tied on C1, the one with the smallest
average daily std is weak (its slowness is steady, not noise). A tie on both keeps the lowest cluster index,
so the choice is deterministic.

>>> centres = [[0.5, 1.0, 1.0, 0.6, 1.0, 1.0],    # positive on both days, std 1.0
...            [0.9, 0.5, 1.0, 0.8, 0.5, 1.0],    # positive on both days, std 0.5: weak by C2
...            [-0.1, 1.0, 1.0, -0.2, 1.0, 1.0]]
>>> weak_cluster(centres, sub_periods=2)
1
"""

from __future__ import annotations

from collections.abc import Sequence

from streams.core.detection.mlna.features import FEATURES_PER_SUB_PERIOD


def positive_means(centre: Sequence[float], sub_periods: int) -> int:
    """C1: how many of the centre's daily (cumulative) means are positive."""
    return sum(centre[k * FEATURES_PER_SUB_PERIOD] > 0 for k in range(sub_periods))


def mean_std(centre: Sequence[float], sub_periods: int) -> float:
    """C2: the average of the centre's daily standard deviations."""
    return sum(centre[k * FEATURES_PER_SUB_PERIOD + 1] for k in range(sub_periods)) / sub_periods


def weak_cluster(centres: Sequence[Sequence[float]], sub_periods: int) -> int:
    """Index of the weak cluster: most positive daily means (C1), ties to the smallest mean std (C2)."""
    if not centres:
        raise ValueError("weak_cluster needs at least one centre")
    return min(range(len(centres)),
               key=lambda i: (-positive_means(centres[i], sub_periods), mean_std(centres[i], sub_periods), i))

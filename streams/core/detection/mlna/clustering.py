"""ML-NA's clustering (paper section III-B1, Table I): k-means for k in 2..10, k by Calinski-Harabasz.

For each k, scikit-learn's ``KMeans`` (seeded) clusters one period's feature vectors and
``calinski_harabasz_score`` scores the partition; the weak cluster is labelled by Algorithm 1
(``labelling.weak_cluster``). The k with the highest score wins, unless its weak cluster holds more than
``max_weak_fraction`` (25 %) of the nodes: then, as the paper does for its months 7-9, the best-scoring k
among the greater ones whose weak cluster is small enough. When no k meets the rule, the k whose weak
cluster is smallest is kept and ``rule_met`` says so.

>>> rows = [[-0.3 + 0.02 * i, 1.0, 1.0] for i in range(12)] + [[1.5, 1.2, 1.0], [1.7, 1.4, 1.0]]
>>> choice = choose_k(rows, sub_periods=1, k_values=range(2, 4))  # one day: (mean z, std z, count)
>>> choice.k, sorted(choice.sizes), [i for i in range(14) if choice.is_weak(i)], choice.rule_met
(2, [2, 12], [12, 13], True)
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import calinski_harabasz_score
from threadpoolctl import threadpool_limits

from streams.core.detection.mlna.labelling import weak_cluster

K_VALUES = range(2, 11)
MAX_WEAK_FRACTION = 0.25


@dataclass(frozen=True, slots=True)
class Partition:
    """One k's clustering: labels per row, centres, sizes, the weak cluster and the CH score."""

    k: int
    score: float
    labels: tuple[int, ...]
    centres: tuple[tuple[float, ...], ...]
    sizes: tuple[int, ...]
    weak: int

    @property
    def weak_fraction(self) -> float:
        return self.sizes[self.weak] / len(self.labels)


@dataclass(frozen=True, slots=True)
class KChoice:
    """The chosen partition, every k's score, and whether the 25 % rule could be met."""

    chosen: Partition
    scores: dict[int, float]
    weak_fractions: dict[int, float]
    rule_met: bool

    @property
    def k(self) -> int:
        return self.chosen.k

    @property
    def sizes(self) -> tuple[int, ...]:
        return self.chosen.sizes

    @property
    def weak(self) -> int:
        return self.chosen.weak

    def is_weak(self, row: int) -> bool:
        return self.chosen.labels[row] == self.chosen.weak


def cluster(rows: Sequence[Sequence[float]], k: int, sub_periods: int, seed: int = 0, n_init: int = 4) -> Partition:
    """k-means with ``k`` clusters on ``rows`` (needs more distinct rows than k), labelled by Algorithm 1."""
    data = np.asarray(rows, dtype=float)
    # One thread: the data are small, and OpenMP's threads fight over shared cores (40x slower under load).
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit(data)
    labels = tuple(int(v) for v in model.labels_)
    centres = tuple(tuple(float(v) for v in centre) for centre in model.cluster_centers_)
    sizes = tuple(labels.count(i) for i in range(k))
    score = float(calinski_harabasz_score(data, labels)) if len(set(labels)) > 1 else 0.0
    return Partition(k, score, labels, centres, sizes, weak_cluster(centres, sub_periods))


def choose_k(rows: Sequence[Sequence[float]], sub_periods: int, k_values: Iterable[int] = K_VALUES,
             max_weak_fraction: float = MAX_WEAK_FRACTION, seed: int = 0) -> KChoice | None:
    """The paper's choice of k; None when the rows cannot be split in two (fewer than 3 distinct rows)."""
    distinct = len({tuple(row) for row in rows})
    partitions = [cluster(rows, k, sub_periods, seed) for k in k_values if 2 <= k < distinct]
    partitions = [p for p in partitions if len(set(p.labels)) == p.k]
    if not partitions:
        return None
    scores = {p.k: p.score for p in partitions}
    fractions = {p.k: p.weak_fraction for p in partitions}
    best = max(partitions, key=lambda p: (p.score, -p.k))
    if best.weak_fraction <= max_weak_fraction:
        return KChoice(best, scores, fractions, True)
    greater = [p for p in partitions if p.k > best.k and p.weak_fraction <= max_weak_fraction]
    if greater:
        return KChoice(max(greater, key=lambda p: (p.score, -p.k)), scores, fractions, True)
    smallest = min(partitions, key=lambda p: (p.weak_fraction, -p.score))
    return KChoice(smallest, scores, fractions, False)

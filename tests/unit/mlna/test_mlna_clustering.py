"""The choice of k (Calinski-Harabasz under the 25 % rule) and Algorithm 1's labelling, on hand-made data."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.metrics import calinski_harabasz_score

from streams.core.detection.mlna.clustering import choose_k
from streams.core.detection.mlna.labelling import mean_std, positive_means, weak_cluster


def three_groups(seed: int = 3) -> list[list[float]]:
    """One sub-period (mean z, std z, count): 12 healthy nodes, 5 mildly slow noisy ones, 3 steadily slow."""
    r = random.Random(seed)
    healthy = [[-0.5 + r.gauss(0, 0.1), 1.0 + r.gauss(0, 0.1), 1.0] for _ in range(12)]
    noisy = [[0.7 + r.gauss(0, 0.1), 1.0 + r.gauss(0, 0.05), 1.0] for _ in range(5)]
    steady = [[0.9 + r.gauss(0, 0.05), 0.7 + r.gauss(0, 0.05), 1.0] for _ in range(3)]
    return healthy + noisy + steady


def test_the_best_score_wins_when_its_weak_cluster_is_small():
    rows = [[-0.3 + 0.02 * i, 1.0, 1.0] for i in range(12)] + [[1.5, 1.2, 1.0], [1.7, 1.4, 1.0]]
    choice = choose_k(rows, sub_periods=1, k_values=range(2, 4))
    assert choice is not None and choice.rule_met
    assert choice.k == max(choice.scores, key=choice.scores.get)
    assert {i for i in range(len(rows)) if choice.is_weak(i)} == {12, 13}


def test_a_weak_cluster_above_a_quarter_of_the_nodes_moves_to_a_greater_k():
    rows = three_groups()
    choice = choose_k(rows, sub_periods=1, k_values=range(2, 5))
    assert choice is not None
    # Scored independently with scikit-learn: k=2 scores best but lumps both slow groups together (8 of 20).
    data = np.asarray(rows)
    scores = {k: calinski_harabasz_score(data, KMeans(k, n_init=4, random_state=0).fit(data).labels_)
              for k in range(2, 5)}  # fmt: skip
    assert max(scores, key=scores.get) == 2
    assert choice.weak_fractions[2] == pytest.approx(0.4)
    # The rule picks the best-scoring greater k whose weak cluster is small enough: the steady slow nodes.
    allowed = [k for k in (3, 4) if choice.weak_fractions[k] <= 0.25]
    assert choice.k == max(allowed, key=scores.get) == 3
    assert choice.rule_met
    assert {i for i in range(20) if choice.is_weak(i)} == {17, 18, 19}


def test_when_no_k_meets_the_rule_the_smallest_weak_cluster_is_kept_and_said():
    r = random.Random(0)
    rows = [[side + r.gauss(0, 0.05), 1.0, 1.0] for side in (-1, 1) for _ in range(10)]
    choice = choose_k(rows, sub_periods=1, k_values=[2])
    assert choice is not None and not choice.rule_met
    assert choice.sizes == (10, 10)


def test_too_few_distinct_nodes_give_no_clustering():
    assert choose_k([[0.0, 1.0, 1.0]] * 5 + [[1.0, 1.0, 1.0]], sub_periods=1) is None


def test_c1_more_positive_days_is_weak_even_with_a_larger_std():
    centres = [[0.2, 0.5, 1.0, -0.1, 0.5, 1.0],   # positive on 1 of 2 days, steady
               [0.1, 2.0, 1.0, 0.3, 2.0, 1.0]]    # positive on 2 of 2 days, noisy
    assert [positive_means(c, 2) for c in centres] == [1, 2]
    assert weak_cluster(centres, sub_periods=2) == 1


def test_c2_a_tie_goes_to_the_smallest_mean_std():
    centres = [[0.5, 1.5, 1.0, 0.5, 0.5, 1.0],    # 2 positive days, mean std 1.0
               [-0.5, 0.1, 1.0, -0.5, 0.1, 1.0],  # 0 positive days
               [0.2, 0.8, 1.0, 0.3, 0.9, 1.0]]    # 2 positive days, mean std 0.85
    assert mean_std(centres[2], 2) == pytest.approx(0.85)
    assert weak_cluster(centres, sub_periods=2) == 2


def test_a_tie_on_both_rules_keeps_the_lowest_index():
    centres = [[-1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [2.0, 1.0, 1.0]]
    assert weak_cluster(centres, sub_periods=1) == 1

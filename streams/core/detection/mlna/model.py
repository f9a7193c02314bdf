"""ML-NA's period loop (paper section III-IV): cluster and label each closed period, learn, predict the next.

When period p closes: k-means with the Calinski-Harabasz choice of k labels its nodes (weak cluster = 1);
each classifier learns the pairs (features of p - 1, label in p) of the nodes seen in both periods; then
each predicts, from p's features, the probability that each node is weak in p + 1. Periods are closed in
order by the caller (the detector in event time, ``laggard classify`` over a trace).

>>> from streams.core.detection.mlna.features import PeriodBuilder
>>> model = MlnaModel(classifiers=("forest",), seed=1)
>>> def period(start, slow):
...     builder = PeriodBuilder(start, 10, 2)
...     for i in range(40):
...         for node in range(12):
...             builder.add(f"n{node}", start + i % 20, (1.5 if node in slow else -0.2) + (i % 5 - 2) / 10 + node / 100)
...     return builder.table()
>>> first = model.close(period(0, {0, 1}))
>>> sorted(first.weak), first.predictions["forest"]["n0"]  # nothing learned yet
(['n0', 'n1'], 0.0)
>>> second = model.close(period(20, {0, 1}))
>>> sorted(n for n, p in second.predictions["forest"].items() if p >= 0.5)
['n0', 'n1']
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from streams.core.detection.mlna.classifiers import CLASSIFIERS, PeriodClassifier
from streams.core.detection.mlna.clustering import K_VALUES, MAX_WEAK_FRACTION, KChoice, choose_k
from streams.core.detection.mlna.features import FeatureTable


@dataclass(frozen=True, slots=True)
class PeriodOutcome:
    """What closing one period gave: its clustering, its weak nodes and each classifier's next-period odds."""

    index: int
    table: FeatureTable
    choice: KChoice | None
    weak: frozenset[str]
    predictions: dict[str, dict[str, float]]  # classifier -> node -> P(weak next period)
    trained_periods: int  # (p - 1, p) pairs learned so far, this one included


class MlnaModel:
    """Clustering, labelling and the classifiers of ML-NA, one closed period at a time."""

    def __init__(self, classifiers: Sequence[str] = ("hgb",), seed: int = 0, k_values: Iterable[int] = K_VALUES,
                 max_weak_fraction: float = MAX_WEAK_FRACTION, history: int = 7, max_periods: int = 30) -> None:
        self.names = tuple(classifiers)
        self.seed = seed
        self.k_values = tuple(k_values)
        self.max_weak_fraction = max_weak_fraction
        self.classifiers: dict[str, PeriodClassifier] = {n: CLASSIFIERS.get(n)(seed) for n in self.names}
        self.history: deque[frozenset[str]] = deque(maxlen=history)  # weak sets of the last closed periods
        # The last pairs learned, in order: a restored model replays them (the batch classifiers fit on as many).
        self.pairs: deque[tuple[list[list[float]], list[int]]] = deque(maxlen=max_periods)
        self.learned_periods = 0
        self._previous: FeatureTable | None = None
        self._index = 0

    def close(self, table: FeatureTable) -> PeriodOutcome:
        """Close one period (the next in time order) and predict the one after it."""
        choice = choose_k(table.values, table.sub_periods, self.k_values, self.max_weak_fraction, self.seed)
        weak = frozenset(n for i, n in enumerate(table.nodes) if choice is not None and choice.is_weak(i))
        if self._previous is not None and choice is not None:
            self.learn_pair(self._previous, table, weak)
        predictions = {name: dict(zip(table.nodes, model.predict_proba(table.values), strict=True))
                       for name, model in self.classifiers.items()}  # fmt: skip
        self.history.append(weak)
        self._previous = table if table.nodes else None
        outcome = PeriodOutcome(self._index, table, choice, weak, predictions, self.learned_periods)
        self._index += 1
        return outcome

    def learn_pair(self, before: FeatureTable, after: FeatureTable, weak_after: frozenset[str]) -> None:
        """Every classifier learns (features in ``before`` -> label in ``after``) for nodes seen in both."""
        present = set(after.nodes)
        rows = [list(row) for node, row in zip(before.nodes, before.values, strict=True) if node in present]
        labels = [int(node in weak_after) for node in before.nodes if node in present]
        if not rows:
            return
        self.replay(rows, labels)

    def replay(self, rows: list[list[float]], labels: list[int]) -> None:
        """Learn one period's pairs (also how a restored detector rebuilds its classifiers)."""
        self.pairs.append((rows, labels))
        self.learned_periods += 1
        for model in self.classifiers.values():
            model.learn(rows, labels)

    def weak_count(self, node: str) -> int:
        """In how many of the remembered closed periods ``node`` was in the weak cluster."""
        return sum(node in weak for weak in self.history)

    @property
    def previous(self) -> FeatureTable | None:
        return self._previous

    def restore_previous(self, table: FeatureTable | None, index: int) -> None:
        self._previous, self._index = table, index

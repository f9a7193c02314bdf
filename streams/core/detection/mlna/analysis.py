"""ML-NA over a whole trace, period by period, scored as the paper's Table II and Fig. 6 (``laggard classify``).

The periods are closed in order by one ``MlnaModel`` running every classifier side by side. The prediction
made when period p closes is scored on period p + 1, over the nodes seen in both:

* against the automatic labels of p + 1 (the paper's protocol: the labels are the clustering's, so this
  measures how well the classifier anticipates the clustering);
* against the truth, when the trace has one (a generated cluster): a node is weak in p + 1 when it was weak
  for more than half of that period (``truth``).

Beside the classifiers, ``persistence`` predicts that the weak cluster of p stays weak in p + 1: the yardstick
any learned prediction must beat. The first period has no prediction (nothing learned); classifiers that have
not yet seen both labels answer their base rate.

>>> from streams.core.detection.mlna.features import PeriodBuilder
>>> def period(start):
...     builder = PeriodBuilder(start, 10, 2)
...     for i in range(40):
...         for node in range(12):
...             builder.add(f"n{node}", start + i % 20, (1.5 if node < 2 else -0.2) + (i % 5 - 2) / 10 + node / 100)
...     return builder.table()
>>> result = analyse([period(0), period(20), period(40)], ("forest",), seed=1)
>>> [p.k for p in result.periods], [sorted(p.outcome.weak) for p in result.periods][0]
([7, 7, 7], ['n0', 'n1'])
>>> result.total("forest").tp, result.total("forest").fn  # nothing learned when period 1 was predicted
(2, 2)
>>> result.total("persistence").recall
1.0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from streams.core.detection.mlna.features import FeatureTable
from streams.core.detection.mlna.model import MlnaModel, PeriodOutcome
from streams.core.detection.mlna.scoring import Score, score, total

PERSISTENCE = "persistence"
# truth(node, start_us, end_us) -> weak for most of [start_us, end_us)?
Truth = Callable[[str, int, int], bool]


@dataclass(frozen=True, slots=True)
class PeriodResult:
    """One closed period: its clustering and the scores of the predictions made for it at the last close."""

    outcome: PeriodOutcome
    predicted: dict[str, frozenset[str]]  # method -> nodes predicted weak in the NEXT period
    labels: dict[str, Score] = field(default_factory=dict)  # method -> score of the prediction for THIS period
    truth: dict[str, Score] = field(default_factory=dict)
    true_weak: frozenset[str] | None = None
    clustering: Score | None = None  # this period's weak cluster against this period's truth

    @property
    def k(self) -> int | None:
        return None if self.outcome.choice is None else self.outcome.choice.k

    @property
    def start_us(self) -> int:
        return self.outcome.table.start_us

    @property
    def end_us(self) -> int:
        return self.outcome.table.end_us


@dataclass(frozen=True, slots=True)
class Analysis:
    """Every period's result; totals pool the confusion counts of the scored periods."""

    methods: tuple[str, ...]
    periods: tuple[PeriodResult, ...]

    def total(self, method: str, against: str = "labels") -> Score:
        return total([(p.labels if against == "labels" else p.truth)[method] for p in self.periods
                      if method in (p.labels if against == "labels" else p.truth)])  # fmt: skip


def analyse(tables: Sequence[FeatureTable], classifiers: Sequence[str], seed: int = 0, threshold: float = 0.5,
            truth: Truth | None = None, history: int = 7) -> Analysis:
    """Close ``tables`` in order with every classifier and score each prediction on the following period."""
    model = MlnaModel(classifiers, seed=seed, history=history)
    methods = (*classifiers, PERSISTENCE)
    results: list[PeriodResult] = []
    previous: PeriodResult | None = None
    for table in tables:
        outcome = model.close(table)
        predicted = {name: frozenset(n for n, p in probs.items() if p >= threshold)
                     for name, probs in outcome.predictions.items()}  # fmt: skip
        predicted[PERSISTENCE] = outcome.weak
        current = PeriodResult(outcome, predicted)
        if truth is not None:
            own = frozenset(n for n in table.nodes if truth(n, table.start_us, table.end_us))
            current = PeriodResult(outcome, predicted, clustering=score(outcome.weak, own, table.nodes))
        if previous is not None and outcome.choice is not None:
            current = _scored(current, previous, truth)
        results.append(current)
        previous = current
    return Analysis(methods, tuple(results))


def _scored(current: PeriodResult, previous: PeriodResult, truth: Truth | None) -> PeriodResult:
    table = current.outcome.table
    universe = set(table.nodes) & set(previous.outcome.table.nodes)
    labels = {m: score(said, current.outcome.weak, universe) for m, said in previous.predicted.items()}
    if truth is None:
        return PeriodResult(current.outcome, current.predicted, labels)
    true_weak = frozenset(n for n in universe if truth(n, table.start_us, table.end_us))
    truths = {m: score(said, true_weak, universe) for m, said in previous.predicted.items()}
    return PeriodResult(current.outcome, current.predicted, labels, truths, true_weak, current.clustering)

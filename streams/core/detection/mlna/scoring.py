"""Scores of next-period weak-node predictions (paper Table II: precision, recall, accuracy).

>>> s = score(predicted={"a", "b"}, actual={"a", "c"}, universe={"a", "b", "c", "d"})
>>> (s.tp, s.fp, s.fn, s.tn), s.accuracy, s.precision, s.recall
((1, 1, 1, 1), 0.5, 0.5, 0.5)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Score:
    """Confusion counts of one prediction (weak = positive); rates are None when undefined."""

    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def accuracy(self) -> float | None:
        return (self.tp + self.tn) / self.n if self.n else None

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    def __add__(self, other: Score) -> Score:
        return Score(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn, self.tn + other.tn)


def score(predicted: Iterable[str], actual: Iterable[str], universe: Iterable[str]) -> Score:
    """Score ``predicted`` weak nodes against ``actual`` ones over the nodes of ``universe``."""
    nodes = set(universe)
    said, true = set(predicted) & nodes, set(actual) & nodes
    return Score(len(said & true), len(said - true), len(true - said), len(nodes - said - true))


def total(scores: Sequence[Score]) -> Score:
    """The pooled confusion counts of several periods."""
    result = Score(0, 0, 0, 0)
    for item in scores:
        result = result + item
    return result

"""One regression tree per task type, predicting a task's z within its job from its placement's features.

Two learners, side by side:

* ``CartTrees``: the paper's batch CART (scikit-learn ``DecisionTreeRegressor``, variance impurity), refit
  from scratch on the labelled placements each period. Its path is exact and short: the adviser's default.
* ``HoeffdingTrees``: River's online ``HoeffdingTreeRegressor`` (mean at the leaves, so a leaf is a number a
  reader can check), learning each placement once its job's z-values are known; the paper's future work.

``regression_metrics`` scores predictions as the paper does (relative absolute error, root relative squared
error, correlation), relative to the job-mean baseline: a job's mean duration is z = 0, so an error of 100 %
is no better than predicting every task takes its job's mean.

>>> trees = CartTrees(max_depth=2, min_samples_leaf=1)
>>> xs = [{"running": float(r)} for r in range(10)]
>>> trees.fit("map", xs, [0.0] * 8 + [2.0, 2.0])
>>> trees.predict_one("map", {"running": 9.0})
2.0
>>> [f"{s.feature} {s.op} {s.threshold}" for s in trees.path("map", {"running": 9.0})]
['running > 7.5']
>>> trees.predict_one("reduce", {"running": 9.0}) is None
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from river import tree as river_tree
from sklearn.tree import DecisionTreeRegressor, export_text

from streams.core.avoidance.features import FEATURES


@dataclass(frozen=True, slots=True)
class Split:
    """One test on a tree path: ``value op threshold`` held for the placement."""

    feature: str
    value: float
    op: str  # "<=" or ">"
    threshold: float


Matrix = np.ndarray[Any, np.dtype[np.float64]]


def _matrix(xs: Sequence[Mapping[str, float]], names: Sequence[str]) -> Matrix:
    return np.array([[x.get(name, 0.0) for name in names] for x in xs], dtype=np.float64).reshape(len(xs), len(names))


class CartTrees:
    """scikit-learn CART per task type, refit whole by ``fit``; ``path`` walks the fitted tree for one placement.

    Hyperparameters are stored under their own names (River's habit); the fitted trees live in ``trees``.
    """

    def __init__(self, max_depth: int = 4, min_samples_leaf: int = 50, features: Sequence[str] = FEATURES) -> None:
        self.max_depth, self.min_samples_leaf, self.features = max_depth, min_samples_leaf, tuple(features)
        self.trees: dict[str, DecisionTreeRegressor] = {}

    def fit(self, task_type: str, xs: Sequence[Mapping[str, float]], ys: Sequence[float]) -> None:
        """Refit the tree of ``task_type`` from scratch on these placements (seeded: ties split alike)."""
        self.fit_array(task_type, _matrix(xs, self.features), ys)

    def fit_array(self, task_type: str, matrix: Matrix, ys: Sequence[float] | Matrix) -> None:
        """``fit`` on a ready matrix whose columns are ``features``, in order."""
        model = DecisionTreeRegressor(max_depth=self.max_depth, min_samples_leaf=self.min_samples_leaf, random_state=0)
        model.fit(matrix, np.asarray(ys, dtype=np.float64))
        self.trees[task_type] = model

    def predict_array(self, task_type: str, matrix: Matrix) -> list[float] | None:
        model = self.trees.get(task_type)
        return None if model is None else [float(v) for v in model.predict(matrix)]

    def predict_one(self, task_type: str, x: Mapping[str, float]) -> float | None:
        """Expected z of a placement, or None when no tree of its type exists yet."""
        model = self.trees.get(task_type)
        return None if model is None else float(model.predict(_matrix([x], self.features))[0])

    def predict_many(self, task_type: str, xs: Sequence[Mapping[str, float]]) -> list[float] | None:
        model = self.trees.get(task_type)
        if model is None or not xs:
            return None if model is None else []
        return [float(v) for v in model.predict(_matrix(xs, self.features))]

    def path(self, task_type: str, x: Mapping[str, float]) -> list[Split]:
        """The tests from the root to the placement's leaf."""
        model = self.trees.get(task_type)
        if model is None:
            return []
        inner, node, splits = model.tree_, 0, []
        while inner.children_left[node] != -1:
            name = self.features[inner.feature[node]]
            value, threshold = float(x.get(name, 0.0)), float(inner.threshold[node])
            go_left = value <= threshold
            splits.append(Split(name, value, "<=" if go_left else ">", threshold))
            node = inner.children_left[node] if go_left else inner.children_right[node]
        return splits

    def text(self, task_type: str, decimals: int = 2) -> str:
        """The whole tree of ``task_type`` as scikit-learn prints it ("" when there is none)."""
        model = self.trees.get(task_type)
        return "" if model is None else str(export_text(model, feature_names=list(self.features), decimals=decimals))

    def types(self) -> list[str]:
        return sorted(self.trees)


class HoeffdingTrees:
    """River ``HoeffdingTreeRegressor`` per task type, learning one labelled placement at a time.

    >>> trees = HoeffdingTrees(grace_period=20)
    >>> for r in range(400):
    ...     trees.learn_one("map", {"running": float(r % 10)}, 2.0 if r % 10 > 7 else 0.0)
    >>> round(trees.predict_one("map", {"running": 9.0}), 1), trees.predict_one("reduce", {"running": 9.0})
    (2.0, None)
    """

    def __init__(self, grace_period: int = 200, max_depth: int = 6, delta: float = 1e-7) -> None:
        self.grace_period, self.max_depth, self.delta = grace_period, max_depth, delta
        self.trees: dict[str, river_tree.HoeffdingTreeRegressor] = {}

    def learn_one(self, task_type: str, x: Mapping[str, float], y: float) -> None:
        model = self.trees.get(task_type)
        if model is None:
            model = self.trees[task_type] = river_tree.HoeffdingTreeRegressor(
                grace_period=self.grace_period, max_depth=self.max_depth, delta=self.delta, leaf_prediction="mean"
            )
        model.learn_one(dict(x), y)  # type: ignore[no-untyped-call]

    def predict_one(self, task_type: str, x: Mapping[str, float]) -> float | None:
        model = self.trees.get(task_type)
        return None if model is None else float(model.predict_one(dict(x)))  # type: ignore[no-untyped-call]

    def path_text(self, task_type: str, x: Mapping[str, float]) -> list[str]:
        """River's own words for the path (``debug_one``), the leaf line left out."""
        model = self.trees.get(task_type)
        if model is None:
            return []
        lines = [line.strip() for line in str(model.debug_one(dict(x))).splitlines() if line.strip()]
        return [line for line in lines if not line.startswith("Mean")]

    def types(self) -> list[str]:
        return sorted(self.trees)


@dataclass(frozen=True, slots=True)
class Metrics:
    """The paper's scores of predicted z against true z, relative to the job-mean baseline (z = 0)."""

    n: int
    rae: float  # relative absolute error, %: sum |pred - z| / sum |z|
    rrse: float  # root relative squared error, %: sqrt(sum (pred - z)^2 / sum z^2)
    corr: float  # Pearson correlation of pred and z (nan when either is constant)
    mae: float
    mae_baseline: float


def regression_metrics(truth: Sequence[float], predicted: Sequence[float]) -> Metrics:
    """RAE, RRSE (both in %) and correlation of ``predicted`` z against ``truth``, relative to z = 0.

    >>> m = regression_metrics([-1.0, 0.0, 1.0, 2.0], [-0.5, 0.0, 0.5, 1.5])
    >>> round(m.rae, 1), round(m.rrse, 1), round(m.corr, 3)
    (37.5, 35.4, 0.983)
    """
    y, p = np.asarray(truth, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    if len(y) == 0:
        return Metrics(0, math.nan, math.nan, math.nan, math.nan, math.nan)
    base_abs, base_sq = float(np.abs(y).sum()), float((y**2).sum())
    err = p - y
    rae = 100.0 * float(np.abs(err).sum()) / base_abs if base_abs else math.nan
    rrse = 100.0 * math.sqrt(float((err**2).sum()) / base_sq) if base_sq else math.nan
    corr = float(np.corrcoef(p, y)[0, 1]) if len(y) > 1 and p.std() > 0 and y.std() > 0 else math.nan
    return Metrics(len(y), rae, rrse, corr, float(np.abs(err).mean()), float(np.abs(y).mean()))

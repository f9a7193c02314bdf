"""The adviser's thresholds, chosen on tuning clusters: one per task type, and the label the trees learn.

A threshold turns an expected value into a refusal. One threshold for every type refuses by one scale, but
the types do not straggle alike (a memory-bound type's z spreads differently from a compute-bound one's), so
``choose_per_type`` gives each type its own, under one budget: the share of placements refused must stay
within ``budget`` on EVERY tuning cluster (an operator's limit is per cluster), and among the choices that
keep it, the one that avoids most stragglers on the worst tuning cluster wins (then on their mean). The
search is coordinate ascent from the best single threshold, over each type's distinct predicted values.

``relabel`` swaps the trees' label: ``z`` (z within the job, the default), or ``ratio``, a task's duration
over its job's median -- the paper's own normalisation, since its straggler is a multiple of the median.

>>> run = TuningRun(predictions=[0.2, 1.5, 0.1, 0.9, None], task_types=["a", "a", "b", "b", "b"],
...                 stragglers=[False, True, False, True, False])
>>> refused_and_avoided(run, {"a": 1.0, "b": 1.0})
(0.2, 0.5)
>>> choose_per_type([run], budget=0.4, start=1.0)
{'a': 1.0, 'b': 0.1}
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from streams.core.avoidance.budget import Budget, BudgetFactory, refusals
from streams.core.avoidance.evaluation import Sample

TARGETS = ("z", "ratio")
BUDGET_SHIFTS = tuple(k / 20 for k in range(21))  # how far below the budget-free thresholds to start (0-1 z)
BUDGET_CANDIDATES = 40  # values tried per type behind a budget (each try replays every tuning run)
MAX_CANDIDATES = 120  # distinct values tried per type (quantiles of them when there are more)


@dataclass(frozen=True, slots=True)
class TuningRun:
    """The scored placements of one tuning cluster: expected value (None: no tree yet), type, straggler."""

    predictions: Sequence[float | None]
    task_types: Sequence[str]
    stragglers: Sequence[bool]
    starts: Sequence[int] = ()  # entry times (event time), for a refusal budget; () = in the given order


def refused_and_avoided(run: TuningRun, thresholds: Mapping[str, float],
                        budget: Budget | None = None) -> tuple[float, float]:  # fmt: skip
    """Share of placements refused and share of stragglers among them (nan without stragglers)."""
    starts = run.starts or range(len(run.predictions))
    refuse = refusals(run.predictions, run.task_types, starts, thresholds, budget)
    stragglers = sum(run.stragglers)
    avoided = sum(1 for r, s in zip(refuse, run.stragglers, strict=True) if r and s)
    refused = sum(refuse) / len(refuse) if refuse else 0.0
    return refused, avoided / stragglers if stragglers else math.nan


def objective(runs: Sequence[TuningRun], thresholds: Mapping[str, float], budget: float) -> tuple[float, float] | None:
    """(worst run's avoided share, mean avoided share), or None when a run refuses more than ``budget``."""
    found = [refused_and_avoided(run, thresholds) for run in runs]
    if any(refused > budget for refused, _ in found):
        return None
    avoided = [a for _, a in found if not math.isnan(a)]
    return (min(avoided), float(np.mean(avoided))) if avoided else (0.0, 0.0)


def choose_with_budget(runs: Sequence[TuningRun], make_budget: BudgetFactory, start: Mapping[str, float],
                       shifts: Sequence[float] = BUDGET_SHIFTS, passes: int = 2,
                       ) -> tuple[dict[str, float], tuple[float, float]] | None:  # fmt: skip
    """Thresholds for an adviser behind a running refusal budget, chosen on the tuning runs alone: lower than
    without one (the budget, not the threshold, keeps the refused share), found by lowering every type's
    ``start`` threshold by each of ``shifts``, then by coordinate ascent per type over its predicted values;
    what avoids most stragglers on the worst run (then the mean) wins, among thresholds that keep the budget's
    share on every run. Returns (thresholds, (worst, mean avoided)), or None when nothing keeps it.

    >>> from streams.core.avoidance.budget import RefusalBudget
    >>> run = TuningRun([0.1, 2.0, 0.2, 1.5, 0.3, 0.4], ["a"] * 6, [False, True, False, True, False, False])
    >>> choose_with_budget([run], lambda: RefusalBudget(0.5, window=6), {"a": 1.75}, shifts=(0.0, 1.0))
    ({'a': 0.75}, (1.0, 1.0))
    """

    def score(limits: Mapping[str, float]) -> tuple[float, float] | None:
        found = [refused_and_avoided(run, limits, make_budget()) for run in runs]
        if any(refused > make_budget().share + 1e-9 for refused, _ in found):
            return None
        avoided = [a for _, a in found if not math.isnan(a)]
        return (min(avoided), float(np.mean(avoided))) if avoided else (0.0, 0.0)

    best: tuple[tuple[float, float], dict[str, float]] | None = None
    for shift in shifts:
        limits = {kind: value - shift for kind, value in start.items()}
        found = score(limits)
        if found is not None and (best is None or found > best[0]):
            best = (found, limits)
    if best is None:
        return None
    for _ in range(passes):
        moved = False
        for kind in sorted(best[1]):
            for value in _candidates(runs, kind, BUDGET_CANDIDATES):
                trial = {**best[1], kind: value}
                found = score(trial)
                if found is not None and found > best[0]:
                    best, moved = (found, trial), True
        if not moved:
            break
    return best[1], best[0]


def _candidates(runs: Sequence[TuningRun], kind: str, most: int = MAX_CANDIDATES) -> list[float]:
    values = sorted({p for run in runs for p, k in zip(run.predictions, run.task_types, strict=True)
                     if k == kind and p is not None})  # fmt: skip
    if len(values) > most:
        values = sorted({float(v) for v in np.quantile(values, np.linspace(0.0, 1.0, most))})
    return [*values, math.inf]


def choose_per_type(runs: Sequence[TuningRun], budget: float, start: float, passes: int = 3) -> dict[str, float]:
    """A threshold per type: within ``budget`` on every run, most stragglers avoided on the worst run.

    ``start`` (a single threshold that keeps the budget, e.g. the largest of the runs' own) is where the
    search begins; it is returned for every type when nothing does better."""
    kinds = sorted({k for run in runs for k in run.task_types})
    best = {kind: start for kind in kinds}
    score = objective(runs, best, budget)
    for _ in range(passes):
        moved = False
        for kind in kinds:
            for candidate in _candidates(runs, kind):
                trial = {**best, kind: candidate}
                found = objective(runs, trial, budget)
                if found is not None and (score is None or found > score):
                    best, score, moved = trial, found, True
        if not moved:
            break
    return best


def relabel(samples: Sequence[Sample], target: str) -> list[Sample]:
    """The samples with the label the trees should learn: ``z`` as they are, or ``ratio`` to the job's median.

    >>> from streams.core.avoidance.evaluation import Sample
    >>> s = [Sample("j", str(i), "n", "t", 0, d, 9, 0.0, {}) for i, d in enumerate((10, 20, 40))]
    >>> [x.z for x in relabel(s, "ratio")]
    [0.5, 1.0, 2.0]
    """
    if target == "z":
        return list(samples)
    if target != "ratio":
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
    durations: dict[str, list[int]] = {}
    for sample in samples:
        durations.setdefault(sample.job_id, []).append(sample.duration_us)
    median = {job: float(np.median(values)) for job, values in durations.items()}
    return [dataclasses.replace(s, z=s.duration_us / median[s.job_id] if median[s.job_id] else 1.0) for s in samples]

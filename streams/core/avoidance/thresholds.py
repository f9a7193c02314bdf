"""The adviser's thresholds, chosen on tuning clusters: one per task type, and the label the trees learn.

A threshold turns an expected value into a refusal. One threshold for every type refuses by one scale, but
the types do not straggle alike (a memory-bound type's z spreads differently from a compute-bound one's), so
``choose_per_type`` gives each type its own, under one budget: the share of placements refused must stay
within ``budget`` on EVERY tuning cluster (an operator's limit is per cluster), and among the choices that
keep it, the one that avoids most stragglers on the worst tuning cluster wins (then on their mean). The
search is coordinate ascent from the best single threshold, over each type's distinct predicted values.

``relabel`` swaps the trees' label: ``z`` (z within the job), ``ratio``, a task's duration over its job's
median -- the paper's own normalisation, since its straggler is a multiple of the median -- or ``p``, 1 for a
straggler (at least ``ratio`` times its job's median) and 0 otherwise: a regression tree's leaf is then the
share of stragglers among the placements like this one, a probability that means the same at every load (a
z-value does not: how far a stretched task lies from its job's mean depends on how many of the job's tasks
were stretched too).

``choose_most_passing`` moves the per-type thresholds to meet issue 17's acceptance on as many tuning clusters
as it can (refused at most ``cap``, at least half the stragglers avoided on the same cluster), rather than
to lift the worst cluster's avoided share under a refusal limit every cluster must keep: one heavy tuning
cluster no longer sets the threshold of every light one.

>>> run = TuningRun(predictions=[0.2, 1.5, 0.1, 0.9, None], task_types=["a", "a", "b", "b", "b"],
...                 stragglers=[False, True, False, True, False])
>>> refused_and_avoided(run, {"a": 1.0, "b": 1.0})
(0.2, 0.5)
>>> choose_per_type([run], budget=0.4, start=1.0)
{'a': 1.0, 'b': 0.1}
>>> choose_most_passing([run], cap=0.4, start={"a": 1.0, "b": 1.0})
({'a': 1.0, 'b': 0.1}, (1, 1.0, 1.0))
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from streams.core.avoidance.budget import Budget, BudgetFactory, refusals
from streams.core.avoidance.evaluation import Sample

TARGETS = ("z", "ratio", "p")
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


Passing = tuple[int, float, float]  # clusters meeting the acceptance, worst cluster's standing, mean avoided


def choose_most_passing(runs: Sequence[TuningRun], cap: float, start: Mapping[str, float], least: float = 0.5,
                        passes: int = 3) -> tuple[dict[str, float], Passing]:  # fmt: skip
    """Per-type thresholds that meet the acceptance on the most tuning runs: refused at most ``cap`` and at
    least ``least`` of the stragglers avoided, on the same run. Ties go to the worst run's standing (its
    avoided share when it keeps ``cap``, else minus its refused share: over the cap is worse than any
    avoided share), then to the mean avoided share. Coordinate ascent from ``start`` over each type's
    predicted values (no budget: the thresholds alone refuse), vectorised, so 20 runs take a second."""
    kinds = sorted({k for run in runs for k in run.task_types})
    arrays = [(np.array([-math.inf if p is None else p for p in run.predictions], dtype=np.float64),
               np.array(run.task_types), np.array(run.stragglers, dtype=bool)) for run in runs]  # fmt: skip

    def score(limits: Mapping[str, float]) -> Passing:
        passed, worst, avoided_all = 0, math.inf, []
        for values, types, stragglers in arrays:
            bar = np.array([limits.get(kind, math.inf) for kind in kinds])[np.searchsorted(kinds, types)]
            refuse = values > bar
            refused = float(refuse.mean()) if len(refuse) else 0.0
            avoided = float((refuse & stragglers).sum() / stragglers.sum()) if stragglers.any() else 0.0
            passed += refused <= cap and avoided >= least
            worst = min(worst, avoided if refused <= cap else -refused)
            avoided_all.append(avoided)
        return passed, worst, float(np.mean(avoided_all)) if avoided_all else 0.0

    best = {kind: start.get(kind, math.inf) for kind in kinds}
    found = score(best)
    for _ in range(passes):
        moved = False
        for kind in kinds:
            for value in _candidates(runs, kind):
                trial = {**best, kind: value}
                tried = score(trial)
                if tried > found:
                    best, found, moved = trial, tried, True
        if not moved:
            break
    return best, found


def relabel(samples: Sequence[Sample], target: str, ratio: float = 1.5) -> list[Sample]:
    """The samples with the label the trees should learn: ``z`` as they are, ``ratio`` to the job's median, or
    ``p``: 1.0 for a straggler (at least ``ratio`` times the job's median), else 0.0.

    >>> from streams.core.avoidance.evaluation import Sample
    >>> s = [Sample("j", str(i), "n", "t", 0, d, 9, 0.0, {}) for i, d in enumerate((10, 20, 40))]
    >>> [x.z for x in relabel(s, "ratio")], [x.z for x in relabel(s, "p")]
    ([0.5, 1.0, 2.0], [0.0, 0.0, 1.0])
    """
    if target == "z":
        return list(samples)
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
    durations: dict[str, list[int]] = {}
    for sample in samples:
        durations.setdefault(sample.job_id, []).append(sample.duration_us)
    median = {job: float(np.median(values)) for job, values in durations.items()}
    if target == "p":
        return [dataclasses.replace(s, z=float(s.duration_us >= ratio * median[s.job_id])) for s in samples]
    return [dataclasses.replace(s, z=s.duration_us / median[s.job_id] if median[s.job_id] else 1.0) for s in samples]

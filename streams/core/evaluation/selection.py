"""Choosing a predictor and its hyperparameters on held-out jobs only: the library behind ``laggard eval --heldout``.

Every candidate configuration (a registered method and its ``params``, ``CANDIDATES``) runs once over every
trace (a method with cluster-level state learns across a trace's jobs causally, as it would live; traces
are replayed apart, since their nodes are not the same machines). Each job then has, per candidate, its
in-time F1, its F1 at 25/50/75 % of the duration, the paper's F1, and the job completion time change when
a scheduler relaunches the flagged tasks (``simulate``'s relaunch mode, unlimited machines, seeded draws).

``leave_one_out`` makes the choice honest: for each group of jobs held out (a job; or a whole trace, e.g. one
seed of the synthetic cluster), each *family* (a method and its hyperparameter grid) picks the candidate
with the best mean in-time F1 over the other groups' jobs, and is scored on the held-out group only. The
family ``any`` picks among every candidate of the non-yardstick families: its held-out score is what
"choose the default on this data" is worth on data it has not seen. A choice is never scored on the jobs
it was made on.

>>> cells = {"a": {"j1": 0.9, "j2": 0.1, "j3": 0.8}, "b": {"j1": 0.5, "j2": 0.5, "j3": 0.5}}
>>> table = {label: {job: Cell(v, {}, v, 0.0) for job, v in jobs.items()} for label, jobs in cells.items()}
>>> fam = {"a": "x", "b": "x"}
>>> rows = leave_one_out(table, fam, {"j1": "j1", "j2": "j2", "j3": "j3"})
>>> [(r.group, r.chosen, round(r.f1_in_time, 2)) for r in rows if r.family == "x"]  # j3: a tie, the first
[('j1', 'b', 0.5), ('j2', 'a', 0.1), ('j3', 'a', 0.8)]
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from streams.core.evaluation import shadow
from streams.core.evaluation.mitigation import Prepared, prepare_job
from streams.core.evaluation.prediction import score
from streams.core.evaluation.simulation import simulate
from streams.core.events import Event
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.registry import build_method
from streams.core.prediction.threshold import JobP90, Oracle, Threshold

ANY = "any"


@dataclass(frozen=True)
class Candidate:
    """One configuration: ``family`` (what is compared), the registered ``method`` and its ``params``."""

    family: str
    method: str
    params: Mapping[str, float] = field(default_factory=dict)
    yardstick: bool = False  # shown for reference, never chosen by ``any``

    @property
    def label(self) -> str:
        inside = ",".join(f"{k}={v:g}" for k, v in sorted(self.params.items()))
        return f"{self.method}[{inside}]" if inside else self.method


def _grid(family: str, method: str, **axes: Sequence[float]) -> list[Candidate]:
    configs: list[dict[str, float]] = [{}]
    for name, values in axes.items():
        configs = [{**config, name: value} for config in configs for value in values]
    return [Candidate(family, method, config) for config in configs]


# The candidates of the held-out protocol, by family (README and ``laggard eval --help`` list them).
CANDIDATES: tuple[Candidate, ...] = (
    *_grid("supervised", "supervised", h_window=(20, 50, 200), h_target_scaler=(1, 0)),
    *_grid("supervised-node", "supervised-node", h_window=(20, 50, 200), h_target_scaler=(1, 0)),
    *_grid("nurd", "nurd", g_lr=(0.01, 0.05), nurd_epsilon=(0.05, 0.3)),
    *_grid("hazard-no-node", "hazard", node_features=(0,), hazard_p=(0.3, 0.5, 0.7)),
    *_grid("hazard", "hazard", node_features=(1,), hazard_p=(0.3, 0.5, 0.7)),
    *_grid("hazard-local", "hazard", node_features=(2,), hazard_p=(0.3, 0.5, 0.7)),
    *_grid("select", "select", select_first=(0, 1, 2), select_z=(0, 1)),
    Candidate("spark-q0.75-m1.5", "spark-q0.75-m1.5"),
    Candidate("spark-node", "spark-node"),
    Candidate("node-slow", "node-slow"),
    Candidate("spark-q0.9-m3", "spark-q0.9-m3"),
    Candidate("hadoop", "hadoop"),
    Candidate("hawkeye", "hawkeye"),
    Candidate("elapsed-tau", "elapsed-tau", yardstick=True),
)


@dataclass(frozen=True, slots=True)
class Cell:
    """One candidate on one job: in-time F1, F1 at fractions of the duration, the paper's F1, JCT change."""

    f1_in_time: float
    f1_at: Mapping[float, float]
    f1: float
    jct_change: float  # 1 - JCT with relaunching / without: > 0 means the job ended sooner


Table = dict[str, dict[str, Cell]]  # candidate label -> job key -> cell
Progress = Callable[[str], None]


def score_candidates(
    traces: Mapping[str, Mapping[str, Sequence[Event]]],
    candidates: Sequence[Candidate],
    context: PredictionContext,
    online: bool = False,
    repeats: int = 3,
    seed: int = 0,
    progress: Progress | None = None,
) -> Table:
    """Every candidate over every trace (``traces``: name -> job -> events); job keys are ``trace/job``."""
    table: Table = {c.label: {} for c in candidates}
    for trace, jobs in traces.items():
        prepared = prepare_jobs(jobs, context.initial_fraction)
        scored = {j: jobs[j] for j in prepared}
        for candidate in candidates:
            if progress:
                progress(f"{candidate.label} on {trace} ({len(scored)} jobs)")
            built = build_method(candidate.method, _with(context, candidate.params))
            thresholds: dict[str, Threshold] = {
                j: JobP90() if online else Oracle(p[0].tau_s) for j, p in prepared.items()
            }
            flags = shadow.first_flags(built, scored, thresholds)
            table[candidate.label].update(cells(trace, prepared, flags, repeats, seed))
    return table


def prepare_jobs(jobs: Mapping[str, Sequence[Event]], initial_fraction: float) -> dict[str, Prepared]:
    """The jobs that can be scored and simulated, prepared (``prepare_job``)."""
    prepared = {j: prepare_job(e, initial_fraction) for j, e in jobs.items()}
    return {j: p for j, p in prepared.items() if not isinstance(p, str)}


def cells(
    trace: str, prepared: Mapping[str, Prepared], flags: shadow.FirstFlags, repeats: int = 3, seed: int = 0
) -> dict[str, Cell]:
    """Each prepared job's cell (key ``trace/job``) from a method's first flags on it."""
    result = {}
    for job_id, (truth, tasks, pool) in prepared.items():
        first = flags.get(job_id, {})
        elapsed = {task: at / 1e6 for task, (_, at) in first.items()}
        m = score(truth.durations_s, elapsed, truth.initial, truth.tau_s, truth.median_s)
        when = {task: ts / 1e6 for task, (ts, _) in first.items()}
        outcomes = [simulate(tasks, when, partial(random.Random(f"{seed}/{job_id}/{r}").choice, pool), None)
                    for r in range(repeats)]  # fmt: skip
        change = statistics.fmean(o.reduction for o in outcomes)
        result[f"{trace}/{job_id}"] = Cell(m.f1_in_time or 0.0, dict(m.f1_at), m.f1, change)
    return result


def _with(context: PredictionContext, params: Mapping[str, float]) -> PredictionContext:
    return PredictionContext(context.initial_fraction, {**context.params, **params}, context.cluster, context.seed)


@dataclass(frozen=True, slots=True)
class Heldout:
    """One family on one held-out group: the candidate chosen on the other groups, and its scores here."""

    group: str
    family: str
    chosen: str
    jobs: int
    f1_in_time: float
    f1_at_50: float
    f1: float
    jct_change: float
    train_f1_in_time: float


def _mean(table: Table, label: str, keys: Sequence[str], get: Callable[[Cell], float]) -> float:
    return statistics.fmean(get(table[label][k]) for k in keys) if keys else 0.0


def leave_one_out(
    table: Table, families: Mapping[str, str], groups: Mapping[str, str], yardsticks: frozenset[str] = frozenset()
) -> list[Heldout]:
    """For each group held out and each family (and ``any``): the candidate with the best mean in-time F1
    on the other groups' jobs (ties: the first), scored on the held-out group's jobs (module doc).
    ``families`` maps candidate labels to families; labels in ``yardsticks`` are never chosen by ``any``."""
    by_family: dict[str, list[str]] = {}
    for label, family in families.items():
        by_family.setdefault(family, []).append(label)
    by_family[ANY] = [label for label in families if label not in yardsticks]
    rows = []
    for group in dict.fromkeys(groups.values()):
        test = [k for k, g in groups.items() if g == group]
        train = [k for k, g in groups.items() if g != group]
        for family, labels in by_family.items():
            chosen = max(labels, key=lambda label: _mean(table, label, train, lambda c: c.f1_in_time))
            rows.append(Heldout(
                group, family, chosen, len(test), _mean(table, chosen, test, lambda c: c.f1_in_time),
                _mean(table, chosen, test, lambda c: c.f1_at.get(0.5, 0.0)), _mean(table, chosen, test, lambda c: c.f1),
                _mean(table, chosen, test, lambda c: c.jct_change),
                _mean(table, chosen, train, lambda c: c.f1_in_time),
            ))  # fmt: skip
    return rows


def summarise(rows: Sequence[Heldout]) -> dict[str, dict[str, float]]:
    """Per family: held-out means over groups (each group weighs the same) and how often each candidate won."""
    summary: dict[str, dict[str, float]] = {}
    for family in dict.fromkeys(r.family for r in rows):
        mine = [r for r in rows if r.family == family]
        summary[family] = {
            "f1_in_time": statistics.fmean(r.f1_in_time for r in mine),
            "f1_at_50": statistics.fmean(r.f1_at_50 for r in mine),
            "f1": statistics.fmean(r.f1 for r in mine),
            "jct_change": statistics.fmean(r.jct_change for r in mine),
            "groups": len(mine),
        }
    return summary

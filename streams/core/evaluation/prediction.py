"""Prediction metrics per job (SPEC 7), judged by what a flag leaves time for, and the loop that drives a job
predictor.

Each task counts once, by its first flag. Stragglers are tasks with duration >= tau, tau the job's true p90
(``oracle_tau``: the paper's "oracle threshold" protocol). FPR is over non-stragglers that were not in the
initial training set (the first finishers). A flag on a non-straggler raised before it finished is a false
positive in every column; the columns differ in which flags of stragglers count as true positives:

* ``f1_in_time`` (the primary score): a copy relaunched at the flag, taking the job's median duration
  (``relaunch``), would finish before the original, ``elapsed + relaunch < duration``; other flags of
  stragglers count as missed. It is what Nurd's Algorithm 2 (relaunch a predicted straggler at once) feels.
* ``f1_at[f]`` for f in ``FRACTIONS`` (0.25, 0.5, 0.75): flagged before that fraction of the task's duration,
  ``elapsed < f * duration``.
* ``f1`` (secondary, the paper's): flagged at any checkpoint strictly before the task finished
  (elapsed < duration), which rewards a flag raised a second before the end as much as one at the start.
  A flag on the checkpoint that coincides with the finish is late and counted apart.

F1 = 2TP / (2TP + FP + FN) with FN = stragglers - TP in each column.

>>> oracle_tau([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
10.0
>>> m = score({"a": 10, "b": 2, "c": 3, "d": 9}, {"a": 5, "b": 1}, initial={"c"}, tau=9)
>>> (m.tp, m.fp, m.fn, m.tn, m.tpr, m.fpr, m.f1)
(1, 1, 1, 0, 0.5, 1.0, 0.5)
>>> m.f1_at  # "a" was flagged at half its duration: not before 25 % or 50 % of it, before 75 %
{0.25: 0.0, 0.5: 0.0, 0.75: 0.5}
>>> late = score({"a": 10, "b": 2, "c": 3, "d": 9}, {"a": 5, "b": 1}, initial={"c"}, tau=9, relaunch=6)
>>> (late.in_time, late.f1_in_time)  # a copy started at 5 s needs 6 s: it ends at 11 s, after the original
(0, 0.0)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from streams.core.events import Event, StragglerPrediction, TaskCheckpoint, TaskFinish
from streams.core.prediction.base import JobPredictor, PredictionMethod, step
from streams.core.prediction.tasks import JobTasks


def oracle_tau(latencies: Sequence[float]) -> float:
    """The job's true p90 latency, ``sorted(latencies)[int(0.9 * n)]``."""
    ordered = sorted(latencies)
    return ordered[int(0.9 * len(ordered))]


@dataclass(frozen=True, slots=True)
class Metrics:
    """Counts and rates of one method on one job; ``flag_time`` is the mean elapsed/duration of TPs;
    ``in_time`` and ``f1_in_time`` are None when no relaunch time was given."""

    n_tasks: int
    n_stragglers: int
    n_initial: int
    tp: int
    fp: int
    fn: int
    tn: int
    late: int
    tpr: float
    fpr: float
    fnr: float
    f1: float
    flag_time: float | None
    in_time: int | None = None
    f1_in_time: float | None = None
    f1_at: Mapping[float, float] = field(default_factory=dict)

    @property
    def precision(self) -> float:
        """Flagged tasks that were stragglers, TP / (TP + FP): the straggler-identification precision Hawkeye
        reports (its Figures 8-15); 0 when nothing was flagged."""
        return _ratio(self.tp, self.tp + self.fp)


def _ratio(a: int, b: int) -> float:
    return a / b if b else 0.0


FRACTIONS = (0.25, 0.5, 0.75)  # F1 counting a straggler's flag only before this share of its duration


def _f1(tp: int, fp: int, stragglers: int) -> float:
    return _ratio(2 * tp, 2 * tp + fp + (stragglers - tp))


def score(
    durations: Mapping[str, float],
    first_flag_elapsed: Mapping[str, float],
    initial: set[str],
    tau: float,
    relaunch: float | None = None,
) -> Metrics:
    """Metrics from each task's duration and the elapsed time of its first flag (same unit); with
    ``relaunch`` (how long a relaunched copy takes) also the flags in time (module doc)."""
    tp = fp = fn = tn = late = in_time = 0
    before = dict.fromkeys(FRACTIONS, 0)
    fractions = []
    for task, duration in durations.items():
        straggler = duration >= tau
        elapsed = first_flag_elapsed.get(task)
        early = elapsed is not None and elapsed < duration
        late += elapsed is not None and not early
        if straggler and elapsed is not None and early:
            tp += 1
            in_time += relaunch is not None and elapsed + relaunch < duration
            for f in FRACTIONS:
                before[f] += elapsed < f * duration
            fractions.append(elapsed / duration if duration > 0 else 0.0)
        elif straggler:
            fn += 1
        elif task not in initial:
            fp += early
            tn += not early
    stragglers = tp + fn
    return Metrics(
        n_tasks=len(durations), n_stragglers=stragglers, n_initial=len(initial), tp=tp, fp=fp, fn=fn, tn=tn,
        late=late, tpr=_ratio(tp, stragglers), fpr=_ratio(fp, fp + tn), fnr=_ratio(fn, stragglers),
        f1=_f1(tp, fp, stragglers), flag_time=math.fsum(fractions) / len(fractions) if fractions else None,
        in_time=None if relaunch is None else in_time,
        f1_in_time=None if relaunch is None else _f1(in_time, fp, stragglers),
        f1_at={f: _f1(n, fp, stragglers) for f, n in before.items()},
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Truth:
    """What the evaluation knows after a job: durations (s), its initial training set, oracle tau and
    median latency (what a relaunched copy is taken to need)."""

    durations_s: dict[str, float]
    initial: set[str]
    tau_s: float
    median_s: float = math.inf


def job_truth(events: Iterable[Event], initial_fraction: float) -> Truth:
    """Durations of successful tasks, the first ``initial_fraction`` finishers, and the oracle tau."""
    tasks = JobTasks(initial_fraction=initial_fraction)
    durations: dict[str, float] = {}
    for event in events:
        tasks.update(event)
        if isinstance(event, TaskFinish) and event.succeeded:
            durations[event.task_id] = event.duration_us / 1e6
    tau = oracle_tau(list(durations.values())) if durations else math.inf
    median = statistics.median(durations.values()) if durations else math.inf
    return Truth(durations, set(tasks.first_finished), tau, median)


@dataclass(frozen=True, slots=True)
class Run:
    """One method's pass over one job: its flags, checkpoints seen and time spent (ns, from ``clock``)."""

    flags: list[StragglerPrediction]
    checkpoints: int
    elapsed_ns: int

    @property
    def us_per_checkpoint(self) -> float:
        return self.elapsed_ns / 1e3 / self.checkpoints if self.checkpoints else 0.0

    def first_flag_elapsed_s(self) -> dict[str, float]:
        first: dict[str, float] = {}
        for flag in self.flags:
            first.setdefault(flag.task_id, flag.elapsed_us / 1e6)
        return first


def drive(
    method: PredictionMethod, job: JobPredictor, events: Sequence[Event], clock: Callable[[], int] | None = None
) -> Run:
    """Move ``events`` of one job through ``job`` of ``method`` with ``step`` (predict before learn); time it
    with ``clock`` (ns) if given."""
    start = clock() if clock else 0
    flags: list[StragglerPrediction] = []
    for event in events:
        flag = step(method, job, event)
        if flag is not None:
            flags.append(flag)
    elapsed = (clock() - start) if clock else 0
    checkpoints = sum(isinstance(e, TaskCheckpoint) for e in events)
    return Run(flags, checkpoints, elapsed)

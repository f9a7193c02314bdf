"""Prediction metrics per job as in Nurd's released code (SPEC 7), and the loop that drives a job predictor.

Each task counts once: a task is predicted a straggler when the method flagged it at a checkpoint
strictly before it finished (elapsed < duration; a flag on the checkpoint that coincides with the
finish is late and counted apart). Stragglers are tasks with duration >= tau, tau the job's true p90
(``oracle_tau``: the paper's "oracle threshold" protocol). TPR is over true stragglers; FPR over
non-stragglers that were not in the initial training set (the first finishers); F1 = 2TP/(2TP+FP+FN).

That protocol rewards a flag raised a second before the task ends as much as one raised at its start.
What an operator can act on is a flag in time: a copy relaunched at the flag, taking the job's median
latency (``relaunch``), would finish before the original. ``in_time`` counts those true positives and
``f1_in_time`` is F1 with the others counted as missed (false positives unchanged); it is the measure
the Nurd paper's Algorithm 2 (relaunch a predicted straggler at once) would feel.

>>> oracle_tau([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
10.0
>>> m = score({"a": 10, "b": 2, "c": 3, "d": 9}, {"a": 5, "b": 1}, initial={"c"}, tau=9)
>>> (m.tp, m.fp, m.fn, m.tn, m.tpr, m.fpr, m.f1)
(1, 1, 1, 0, 0.5, 1.0, 0.5)
>>> late = score({"a": 10, "b": 2, "c": 3, "d": 9}, {"a": 5, "b": 1}, initial={"c"}, tau=9, relaunch=6)
>>> (late.in_time, late.f1_in_time)
(0, 0.0)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

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

    @property
    def precision(self) -> float:
        """Flagged tasks that were stragglers, TP / (TP + FP): the straggler-identification precision Hawkeye
        reports (its Figures 8-15); 0 when nothing was flagged."""
        return _ratio(self.tp, self.tp + self.fp)


def _ratio(a: int, b: int) -> float:
    return a / b if b else 0.0


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
    fractions = []
    for task, duration in durations.items():
        straggler = duration >= tau
        elapsed = first_flag_elapsed.get(task)
        early = elapsed is not None and elapsed < duration
        late += elapsed is not None and not early
        if straggler and early:
            tp += 1
            in_time += relaunch is not None and elapsed + relaunch < duration  # type: ignore[operator]
            fractions.append(elapsed / duration if duration > 0 else 0.0)  # type: ignore[operator]
        elif straggler:
            fn += 1
        elif task not in initial:
            fp += early
            tn += not early
    return Metrics(
        n_tasks=len(durations), n_stragglers=tp + fn, n_initial=len(initial), tp=tp, fp=fp, fn=fn, tn=tn,
        late=late, tpr=_ratio(tp, tp + fn), fpr=_ratio(fp, fp + tn), fnr=_ratio(fn, tp + fn),
        f1=_ratio(2 * tp, 2 * tp + fp + fn), flag_time=math.fsum(fractions) / len(fractions) if fractions else None,
        in_time=None if relaunch is None else in_time,
        f1_in_time=None if relaunch is None else _ratio(2 * in_time, 2 * in_time + fp + (tp + fn - in_time)),
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

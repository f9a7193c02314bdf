"""Replay jobs through any registered predictor and score it (SPEC 7): the library behind ``laggard eval``.

Every job's events go through one method built for the run, merged in event time, so a method with
cluster-level state learns across jobs as it would live; each job gets its own job predictor. Under the
oracle protocol a job's predictor decides against the job's true p90 (``Oracle``); with the online
threshold against what it has seen (``JobP90``). A fresh method is built for each run, so the oracle run
teaches the online one nothing. Pure: the caller passes a clock (ns) when it wants timings.

>>> from streams.core.events import JobStart, Status, TaskCheckpoint, TaskFinish
>>> S = 1_000_000
>>> events = [JobStart("j", 0, declared_tasks=20)]
>>> for i, seconds in enumerate([10] * 18 + [200, 300]):  # tau, the true p90, is 200 s
...     end = seconds * S
...     events += [TaskCheckpoint("j", f"t{i}", 0, "n", 9 * S, 9 * S, {}),
...                TaskCheckpoint("j", f"t{i}", 0, "n", end - S, end - S, {}),
...                TaskFinish("j", f"t{i}", 0, "n", end, end, Status.SUCCEEDED)]
>>> truths, skipped = job_truths({"j": events}, initial_fraction=0.1)
>>> scores = evaluate_method("elapsed-tau", {"j": events}, truths, PredictionContext(), online=True)
>>> s = scores["j"]  # the 300 s task passes tau at 299 s, the 200 s one never does
>>> (s.oracle.tp, s.oracle.fn, s.oracle.fp, s.online is not None, skipped)
(1, 1, 0, True, {})
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from streams.core.evaluation.prediction import Metrics, Run, Truth, job_truth, score
from streams.core.events import Event, StragglerPrediction, TaskCheckpoint
from streams.core.prediction.base import JobPredictor, PredictionContext, PredictionMethod, step
from streams.core.prediction.registry import build_method
from streams.core.prediction.threshold import JobP90, Oracle, Threshold

Clock = Callable[[], int]


def replay_jobs(
    method: PredictionMethod,
    jobs: Mapping[str, Sequence[Event]],
    thresholds: Mapping[str, Threshold],
    clock: Clock | None = None,
) -> dict[str, Run]:
    """Each job's flags when its events, merged in event time with the other jobs', go through ``method``
    (a job predictor per job, deciding against ``thresholds[job]``); time per job from ``clock`` (ns)."""
    predictors: dict[str, JobPredictor] = {}
    flags: dict[str, list[StragglerPrediction]] = {job_id: [] for job_id in jobs}
    spent = dict.fromkeys(jobs, 0)
    merged = heapq.merge(*jobs.values(), key=lambda e: e.ts_us)  # stable: a job's own order is kept
    for event in merged:
        job_id = event.job_id
        start = clock() if clock else 0
        job = predictors.get(job_id)
        if job is None:
            job = predictors[job_id] = method.job(job_id, thresholds[job_id])
        flag = step(method, job, event)
        if flag is not None:
            flags[job_id].append(flag)
        if clock:
            spent[job_id] += clock() - start
    return {
        job_id: Run(flags[job_id], sum(isinstance(e, TaskCheckpoint) for e in events), spent[job_id])
        for job_id, events in jobs.items()
    }


def job_truths(
    jobs: Mapping[str, Sequence[Event]], initial_fraction: float
) -> tuple[dict[str, Truth], dict[str, str]]:
    """The truth of each job that can be scored, and why each other job cannot."""
    truths: dict[str, Truth] = {}
    skipped: dict[str, str] = {}
    for job_id, events in jobs.items():
        truth = job_truth(events, initial_fraction)
        if len(truth.durations_s) < 2:
            skipped[job_id] = "fewer than 2 finished tasks"
        else:
            truths[job_id] = truth
    return truths, skipped


@dataclass(frozen=True, slots=True)
class MethodScore:
    """One method on one job: the oracle run and its metrics, and the online run beside it (tau-based only)."""

    job_id: str
    method: str
    uses_tau: bool
    truth: Truth
    oracle: Metrics
    run: Run
    online: Metrics | None = None
    online_run: Run | None = None


def _score(run: Run, truth: Truth) -> Metrics:
    return score(truth.durations_s, run.first_flag_elapsed_s(), truth.initial, truth.tau_s, truth.median_s)


def evaluate_method(
    name: str,
    jobs: Mapping[str, Sequence[Event]],
    truths: Mapping[str, Truth],
    context: PredictionContext,
    online: bool,
    clock: Clock | None = None,
) -> dict[str, MethodScore]:
    """Method ``name`` (a registered predictor) over the jobs that have a truth, oracle tau and, when it
    decides against tau and ``online``, the online threshold too; ValueError for an unknown name."""
    scored = {job_id: jobs[job_id] for job_id in truths}
    method = build_method(name, context)
    runs = replay_jobs(method, scored, {j: Oracle(t.tau_s) for j, t in truths.items()}, clock)
    second: dict[str, Run] = {}
    if online and method.uses_threshold:
        second = replay_jobs(build_method(name, context), scored, {j: JobP90() for j in truths}, clock)
    scores = {}
    for job_id, truth in truths.items():
        online_run = second.get(job_id)
        scores[job_id] = MethodScore(
            job_id, name, method.uses_threshold, truth, _score(runs[job_id], truth), runs[job_id],
            None if online_run is None else _score(online_run, truth), online_run,
        )  # fmt: skip
    return scores

"""Would acting on a predictor's flags shorten jobs? The loop behind ``laggard simulate`` (SPEC 7).

Every method runs over the jobs as in ``runner`` (oracle tau, or the online threshold); each job's first
flags then drive ``simulation.simulate`` (Nurd's Algorithms 2 and 3) for every spares setting, ``repeats``
times with seeded draws of a copy's duration from the job's non-straggler durations. ``perfect`` (every
true straggler flagged at its first checkpoint, nothing else) is added as a yardstick. Pure: the draws are
seeded by strings (hashed with SHA-512: the same on every run and machine, shared by the methods).

>>> from streams.core.events import JobStart, Status, TaskCheckpoint, TaskFinish
>>> S = 1_000_000
>>> events = [JobStart("j", 0, declared_tasks=20)]
>>> for i, seconds in enumerate([10] * 18 + [200, 300]):
...     events += [TaskCheckpoint("j", f"t{i}", 0, "n", 5 * S, 5 * S, {}),
...                TaskFinish("j", f"t{i}", 0, "n", seconds * S, seconds * S, Status.SUCCEEDED)]
>>> results = simulate_jobs({"j": events}, ["hadoop"], PredictionContext(), [None], repeats=2, seed=0)
>>> [(r["method"], r["spares"], round(r["reduction"], 2)) for r in results["j"]]
[('hadoop', 'unlimited', 0.0), ('perfect', 'unlimited', 0.95)]
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from streams.core.evaluation.prediction import Truth, job_truth
from streams.core.evaluation.runner import replay_jobs
from streams.core.evaluation.simulation import (
    Mode,
    Outcome,
    TaskTimeline,
    first_flags,
    perfect_flags,
    simulate,
    timelines,
)
from streams.core.events import Event
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.registry import build_method
from streams.core.prediction.threshold import JobP90, Oracle, Threshold

PERFECT = "perfect"
PERFECT_NOTE = (
    "'perfect' is a yardstick, not a method: every true straggler flagged at its first checkpoint, nothing else"
)


Prepared = tuple[Truth, dict[str, TaskTimeline], list[float]]


def prepare_job(events: Sequence[Event], initial_fraction: float) -> Prepared | str:
    """A job's truth, task timelines and the pool of copy durations, or why it cannot be simulated."""
    truth = job_truth(events, initial_fraction)
    tasks = timelines(events)
    pool = sorted(d for d in truth.durations_s.values() if d < truth.tau_s)
    if len(tasks) < 2:
        return "fewer than 2 finished tasks"
    if not pool:  # every task at or above the p90: all alike, nothing is a straggler
        return "every task at its job's p90 (no non-straggler to draw from)"
    return truth, tasks, pool


def simulate_jobs(
    jobs: Mapping[str, Sequence[Event]],
    names: Sequence[str],
    context: PredictionContext,
    spares_settings: Sequence[int | None],
    repeats: int,
    seed: int,
    online: bool = False,
    mode: Mode = "relaunch",
) -> dict[str, list[dict[str, Any]] | str]:
    """Per job (in ``jobs`` order): rows (one per method, ``perfect`` last, and spares setting), or why the
    job cannot be simulated. ``online`` picks the online threshold instead of the job's true p90."""
    prepared = {job_id: prepare_job(events, context.initial_fraction) for job_id, events in jobs.items()}
    ready = {job_id: p for job_id, p in prepared.items() if not isinstance(p, str)}
    flags: dict[str, dict[str, dict[str, float]]] = {job_id: {} for job_id in ready}
    for name in names:
        thresholds: dict[str, Threshold] = {j: JobP90() if online else Oracle(p[0].tau_s) for j, p in ready.items()}
        runs = replay_jobs(build_method(name, context), {j: jobs[j] for j in ready}, thresholds)
        for job_id, run in runs.items():
            flags[job_id][name] = first_flags(run.flags)
    results: dict[str, list[dict[str, Any]] | str] = {}
    for job_id, p in prepared.items():
        if isinstance(p, str):
            results[job_id] = p
            continue
        truth, tasks, pool = p
        flags[job_id][PERFECT] = perfect_flags(tasks, truth.durations_s, truth.tau_s)
        results[job_id] = simulate_job(job_id, tasks, pool, truth.tau_s, flags[job_id], spares_settings,
                                       repeats, seed, mode)  # fmt: skip
    return results


def simulate_job(
    job_id: str,
    tasks: Mapping[str, TaskTimeline],
    pool: Sequence[float],
    tau_s: float,
    flags: Mapping[str, Mapping[str, float]],
    spares_settings: Sequence[int | None],
    repeats: int,
    seed: int,
    mode: Mode = "relaunch",
) -> list[dict[str, Any]]:
    """Rows for one job: each method's first flags (``flags[method]``) under each spares setting."""
    rows = []
    for name, flagged in flags.items():
        for spares in spares_settings:
            # a string seed is hashed with SHA-512: the same draws on every run and machine, shared by the methods
            outcomes = [
                simulate(tasks, flagged, partial(random.Random(f"{seed}/{job_id}/{r}").choice, pool), spares, mode)
                for r in range(repeats)
            ]
            rows.append(_row(job_id, name, spares, outcomes, tasks, tau_s))
    return rows


def _row(
    job_id: str, name: str, spares: int | None, outcomes: list[Outcome], tasks: Mapping[str, TaskTimeline], tau: float
) -> dict[str, Any]:
    relaunches = sum(o.relaunches for o in outcomes)
    return {
        "job_id": job_id,
        "method": name,
        "spares": "unlimited" if spares is None else spares,
        "n_tasks": len(tasks),
        "tau_s": tau,
        "jct_base_s": outcomes[0].jct_base_s,
        "jct_s": statistics.fmean(o.jct_s for o in outcomes),
        "reduction": statistics.fmean(o.reduction for o in outcomes),
        "relaunches": relaunches / len(outcomes),
        "success_rate": sum(o.successes for o in outcomes) / relaunches if relaunches else None,
        "unserved": statistics.fmean(o.unserved for o in outcomes),
        "wasted_s": statistics.fmean(o.wasted_s for o in outcomes),
    }


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """method -> spares setting -> mean reduction over jobs, relaunches per job, overall success rate."""
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for row in rows:
        grouped.setdefault(row["method"], {}).setdefault(str(row["spares"]), []).append(row)
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for method, settings in grouped.items():
        summary[method] = {}
        for key, mine in settings.items():
            relaunches = sum(r["relaunches"] for r in mine)
            successes = sum(r["relaunches"] * (r["success_rate"] or 0.0) for r in mine)
            summary[method][key] = {
                "mean_reduction": statistics.fmean(r["reduction"] for r in mine),
                "relaunches_per_job": relaunches / len(mine),
                "success_rate": successes / relaunches if relaunches else None,
                "wasted_s_per_job": statistics.fmean(r["wasted_s"] for r in mine),
                "jobs": len(mine),
            }
    return summary

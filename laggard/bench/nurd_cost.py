"""Cost per checkpoint of online Nurd against the paper's batch refit, on the same jobs.

Both run under the evaluation protocol (``streams.core.evaluation.prediction``: oracle tau, the job's true p90) and are
timed by ``evaluation.runner.replay_jobs`` over every event of each job; the cost is wall time divided by the number of
checkpoints, so it includes the work done on starts and finishes (model updates), as a stream would pay it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from laggard.bench.common import say
from streams.core.evaluation.prediction import job_truth
from streams.core.evaluation.runner import replay_jobs
from streams.core.events import Event
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.registry import build_method
from streams.core.prediction.threshold import Oracle

METHODS = ("nurd", "nurd-batch")


def by_job(events: list[Event]) -> dict[str, list[Event]]:
    jobs: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        jobs[event.job_id].append(event)
    return jobs


def nurd_cost(events: list[Event], job_ids: tuple[str, ...], context: PredictionContext) -> dict[str, Any]:
    """Microseconds per checkpoint of each method over the jobs ``job_ids`` of ``events``."""
    jobs = by_job(events)
    missing = [job for job in job_ids if job not in jobs]
    if missing:
        raise ValueError(f"jobs {missing} are not in the usage series")
    elapsed_ns = dict.fromkeys(METHODS, 0)
    checkpoints = dict.fromkeys(METHODS, 0)
    rows = []
    for job in job_ids:
        truth = job_truth(jobs[job], context.initial_fraction)
        row: dict[str, Any] = {"job": job, "events": len(jobs[job])}
        for method in METHODS:
            say(f"nurd cost: {method} on job {job} ({len(jobs[job])} events)")
            runs = replay_jobs(build_method(method, context), {job: jobs[job]}, {job: Oracle(truth.tau_s)},
                               time.perf_counter_ns)  # fmt: skip
            run = runs[job]
            elapsed_ns[method] += run.elapsed_ns
            checkpoints[method] += run.checkpoints
            row[f"{method}_us_per_checkpoint"] = run.us_per_checkpoint
            row["checkpoints"] = run.checkpoints
        rows.append(row)
    nurd = elapsed_ns["nurd"] / 1e3 / checkpoints["nurd"]
    batch = elapsed_ns["nurd-batch"] / 1e3 / checkpoints["nurd-batch"]
    return {"jobs": rows, "checkpoints": checkpoints["nurd"], "nurd_us_per_checkpoint": nurd,
            "nurd_batch_us_per_checkpoint": batch, "batch_over_nurd": batch / nurd}  # fmt: skip

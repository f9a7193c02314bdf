"""The in-process paths: statistics + ranking over the Google task events, Nurd over the Google usage series.

Reading a trace is measured apart from processing it: the events are first read into a list (the reader's
rate), then the list is fed to the pipeline (the pipeline's rate). Decoding is part of neither, so the
pipeline's rate is compared with the decode floors of :mod:`laggard.bench.floors`.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from laggard.bench.common import rate
from producers.registry import open_trace
from streams.core.events import Event, TaskCheckpoint
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.fleet import PredictorFleet
from streams.core.prediction.stage import PredictStage
from streams.local import LocalPipeline
from streams.settings import Settings


def read_events(spec: str, limit: int | None = None) -> tuple[list[Event], dict[str, Any]]:
    """The trace's events as a list, and how fast the reader produced them."""
    trace = open_trace(spec)
    started = time.perf_counter()
    events = list(itertools.islice(trace, limit) if limit is not None else trace)
    seconds = time.perf_counter() - started
    return events, {"trace": spec, "events": len(events), "read_seconds": seconds,
                    "read_per_s": rate(len(events), seconds)}  # fmt: skip


def statistics_path(settings: Settings, events: list[Event]) -> dict[str, Any]:
    """Events per second of ``LocalPipeline`` (normalise, window statistics, ranking, policy) over ``events``."""
    pipeline = LocalPipeline(settings)
    started = time.perf_counter()
    deltas = sum(1 for _ in pipeline.run(events))
    seconds = time.perf_counter() - started
    counts = pipeline.counts
    return {"pipeline_seconds": seconds, "pipeline_per_s": rate(len(events), seconds), "samples": counts.samples,
            "rankings": counts.rankings, "deltas": deltas, "invalid": sum(counts.invalid.values())}  # fmt: skip


def nurd_options(settings: Settings) -> PredictionContext:
    """The predictors' context from the settings (Nurd's alpha and epsilon, the initial fraction)."""
    params = {"nurd_alpha": settings.nurd_alpha, "nurd_epsilon": settings.nurd_epsilon}
    return PredictionContext(initial_fraction=settings.nurd_initial_fraction, params=params, seed=settings.seed)


def nurd_path(settings: Settings, events: list[Event]) -> dict[str, Any]:
    """Events per second of live Nurd (online p90 threshold, one predictor per job) over ``events``, in the
    merged order a worker steps its predictors in (``PredictStage``)."""
    # no idle expiry: every job keeps its predictor to the end, as the bench always measured
    stage = PredictStage(PredictorFleet("nurd", nurd_options(settings), job_idle_timeout_us=2**62), time_ordered=True)
    jobs = {event.job_id for event in events}
    flags = 0
    started = time.perf_counter()
    for event in events:
        flags += len(stage.process(event))
    flags += len(stage.flush())
    seconds = time.perf_counter() - started
    checkpoints = sum(isinstance(event, TaskCheckpoint) for event in events)
    return {"pipeline_seconds": seconds, "pipeline_per_s": rate(len(events), seconds), "jobs": len(jobs),
            "checkpoints": checkpoints, "checkpoints_per_s": rate(checkpoints, seconds), "flags": flags}  # fmt: skip

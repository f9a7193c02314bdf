"""The worker's fleet: the same flags as the evaluation replay, and a restart that continues where it was."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from producers.readers.google_usage import read_usage
from streams.core.evaluation.runner import replay_jobs
from streams.core.events import Event, StragglerPrediction, TaskCheckpoint
from streams.core.prediction.base import JobPredictor, PredictionContext, PredictionMethod
from streams.core.prediction.fleet import PredictorFleet
from streams.core.prediction.registry import PREDICTORS, build_method
from streams.core.prediction.threshold import JobP90, Threshold

JOB = "6343048076"


@pytest.fixture(scope="module")
def events(traces_dir: Path) -> list[Event]:
    return list(read_usage(traces_dir / "google2011-nurd-timeseries" / "timeseriesspecsixtotal" / JOB))


def _flags(fleet: PredictorFleet, events: list[Event]) -> list[tuple[str, float]]:
    return [(f.task_id, f.adjusted_us) for e in events if (f := fleet.step(e)) is not None]


def test_the_fleet_flags_what_the_evaluation_replay_flags_online(events: list[Event]) -> None:
    context = PredictionContext(params={"nurd_alpha": 0.0})
    run = replay_jobs(build_method("supervised", context), {JOB: events}, {JOB: JobP90()})[JOB]
    assert _flags(PredictorFleet("supervised", context), events) == [(f.task_id, f.adjusted_us) for f in run.flags]
    assert run.flags


def test_a_restored_fleet_continues_exactly_where_it_was(events: list[Event]) -> None:
    half = len(events) // 2
    live = PredictorFleet("nurd")
    _flags(live, events[:half])
    saved = json.loads(json.dumps(live.snapshot()))  # what the agent's table holds
    copy = PredictorFleet("nurd")
    copy.restore(saved)
    assert copy.running_jobs == 1 and copy.cold_starts == 0
    assert _flags(copy, events[half:]) == _flags(live, events[half:])


def test_snapshots_this_build_cannot_read_start_cold(events: list[Event]) -> None:
    fleet = PredictorFleet("nurd")
    _flags(fleet, events[:200])
    saved = fleet.snapshot()
    with pytest.raises(ValueError, match="does not match"):
        PredictorFleet("supervised").restore(saved)  # another method: the caller starts the partition cold
    saved["jobs"][0][2]["river"] = "0.0.1"
    cold = PredictorFleet("nurd")
    cold.restore(saved)
    assert (cold.running_jobs, cold.cold_starts) == (0, 1)


def test_an_unknown_method_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown predictor 'nope'; one of: nurd, nurd-nc"):
        PredictorFleet("nope")


class Counting:
    """A method with cluster-level state: how many checkpoints it saw across jobs."""

    name, uses_threshold = "counting", False

    def __init__(self) -> None:
        self.seen = 0

    def job(self, job_id: str, threshold: Threshold) -> JobPredictor:
        return Silent()

    def learn(self, event: Event) -> None:
        self.seen += isinstance(event, TaskCheckpoint)

    def snapshot(self) -> object:
        return {"seen": self.seen}

    def restore(self, state: object) -> None:
        assert isinstance(state, dict)
        self.seen = state["seen"]


class Silent:
    method = "counting"

    def predict(self, event: TaskCheckpoint) -> StragglerPrediction | None:
        return None

    def learn(self, event: Event) -> None:
        return None


@pytest.fixture
def counting() -> Iterator[None]:
    def factory(context: PredictionContext) -> PredictionMethod:
        return Counting()

    PREDICTORS.register("counting", factory, "counts checkpoints across jobs")
    yield
    PREDICTORS.unregister("counting")


def test_cluster_level_state_survives_a_restart(counting: None, events: list[Event]) -> None:
    fleet = PredictorFleet("counting")
    _flags(fleet, events[:300])
    seen = fleet.predictor.seen  # type: ignore[attr-defined]
    assert seen > 0
    restarted = PredictorFleet("counting")
    restarted.restore(json.loads(json.dumps(fleet.snapshot())))
    assert restarted.predictor.seen == seen  # type: ignore[attr-defined]

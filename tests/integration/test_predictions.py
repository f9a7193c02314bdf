"""The predict_stragglers agent on a real broker flags the tasks the in-process predictor flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from producers.registry import open_trace
from streams.core.events import StragglerPrediction
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.fleet import PredictorFleet
from streams.settings import Settings
from tests.integration.support import decoded, fresh_broker, replay, running_worker, wait_for

JOB = "6343048076"  # 152 tasks, 819 usage windows


def test_predictions_on_kafka_match_the_in_process_predictor(
    tmp_path: Path, traces_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pinned to a per-job learner that this test has held for many runs. With the default ``hazard`` (it learns
    # across jobs) one full-tier run flagged more tasks on Kafka than in-process; the cause is not found yet (one
    # suspect: job-events and task-events are two topics, so when the JobStart is read relative to the task
    # events can differ). Left open in issue 20's note. This test pins what the agent must do: carry a
    # predictor's flags faithfully.
    monkeypatch.setenv("LAGGARD_PREDICTION_METHOD", "supervised")
    spec = f"google2011-usage:{traces_dir / 'google2011-nurd-timeseries' / 'timeseriesspecsixtotal' / JOB}"
    settings = Settings()
    context = PredictionContext(params={"nurd_alpha": settings.nurd_alpha, "nurd_epsilon": settings.nurd_epsilon})
    fleet = PredictorFleet(settings.prediction_method, context)
    expected = {p.task_id for event in open_trace(spec) if (p := fleet.step(event)) is not None}
    assert expected, "the predictor flags some tasks of this job in-process"

    log = tmp_path / "worker.log"
    with fresh_broker(tmp_path / "broker") as bootstrap, running_worker(bootstrap, tmp_path, log):
        replay(bootstrap, spec)
        predictions: list[StragglerPrediction] = wait_for(
            lambda: decoded(bootstrap, "straggler-predictions"), lambda ps: len(ps) >= len(expected), 180,
            "the predictions", log)

    flagged = [p.task_id for p in predictions]
    assert len(flagged) == len(set(flagged)), "each task is published once"
    assert set(flagged) == expected
    for p in predictions:
        assert p.job_id == JOB and p.method == settings.prediction_method
        assert settings.nurd_epsilon <= p.weight <= 1.0
        assert p.adjusted_us >= p.threshold_us > 0 and p.elapsed_us > 0

"""The predict_stragglers agent on a real broker, running the worker's default predictor, flags the tasks the
in-process predictor flags."""

from __future__ import annotations

from pathlib import Path

from producers.registry import open_trace
from streams.core.events import StragglerPrediction
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.fleet import PredictorFleet
from streams.core.prediction.stage import PredictStage
from streams.settings import Settings
from tests.integration.support import decoded, fresh_broker, replay, running_worker, wait_for

# 350 tasks, 1857 usage windows. Not 6343048076 (152 tasks), which this test replayed before: the default's
# first member, Spark's q0.9/m3 rule, flags nothing there, as it should (any flag there makes the job later).
JOB = "6308689702"


def test_predictions_on_kafka_match_the_in_process_predictor(tmp_path: Path, traces_dir: Path) -> None:
    # What a user runs: the default (select). On one job it follows its first member throughout (it moves only
    # on ended jobs), while its other members, hazard among them, learn in shadow. An earlier run of this test
    # with hazard as the default flagged more tasks on Kafka than in-process once (cause not found; one suspect:
    # job-events and task-events are two topics, so when the JobStart is read relative to the task events can
    # differ); it was pinned to the per-job ``supervised`` then.
    spec = f"google2011-usage:{traces_dir / 'google2011-nurd-timeseries' / 'timeseriesspecsixtotal' / JOB}"
    settings = Settings()
    assert settings.prediction_method == Settings.model_fields["prediction_method"].default
    context = PredictionContext(params={"nurd_alpha": settings.nurd_alpha, "nurd_epsilon": settings.nurd_epsilon})
    # in the merged order a worker steps its predictors in (PredictStage), as `laggard run` does
    stage = PredictStage(PredictorFleet(settings.prediction_method, context), time_ordered=True)
    expected = {p.task_id for event in open_trace(spec) for p in stage.process(event)} | {
        p.task_id for p in stage.flush()}
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
        assert p.weight > 0 and p.elapsed_us > 0 and p.ts_us > 0

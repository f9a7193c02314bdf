"""A new predictor is a few lines and one registration; from then on ``laggard eval`` runs it by name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from laggard.cli import cli
from streams.core.events import Event, StragglerPrediction, TaskCheckpoint, TaskFinish
from streams.core.prediction.base import PredictionContext, PredictionMethod
from streams.core.prediction.perjob import PerJobMethod
from streams.core.prediction.registry import PREDICTORS

JOB = "6343048076"


class TwiceTheFirst:
    """Flag a running task once its elapsed time passes twice the job's first finished duration."""

    method = "toy"

    def __init__(self) -> None:
        self.first_s: float | None = None
        self.flagged: set[str] = set()

    def predict(self, event: TaskCheckpoint) -> StragglerPrediction | None:
        if self.first_s is None or event.task_id in self.flagged or event.elapsed_us / 1e6 <= 2 * self.first_s:
            return None
        self.flagged.add(event.task_id)
        return StragglerPrediction(event.job_id, event.task_id, event.attempt, event.node_id, event.ts_us,
                                   event.elapsed_us, event.elapsed_us, event.elapsed_us, 2 * self.first_s * 1e6,
                                   1.0, self.method)  # fmt: skip

    def learn(self, event: Event) -> None:
        if isinstance(event, TaskFinish) and event.succeeded and self.first_s is None:
            self.first_s = event.duration_us / 1e6


def toy(context: PredictionContext) -> PredictionMethod:
    return PerJobMethod("toy", False, lambda threshold: TwiceTheFirst())


@pytest.fixture
def registered() -> Iterator[None]:
    PREDICTORS.register("toy", toy, "flag past twice the job's first finished duration")
    yield
    PREDICTORS.unregister("toy")


def test_a_registered_toy_runs_by_name_through_laggard_eval(registered: None, traces_dir: Path) -> None:
    spec = f"google2011-usage:{traces_dir / 'google2011-nurd-timeseries' / 'timeseriesspecsixtotal' / JOB}"
    result = CliRunner().invoke(cli, ["eval", "--trace", spec, "--methods", "toy,hadoop", "--json"])
    assert result.exit_code == 0, result.output
    document = orjson.loads(result.stdout)
    toy_row = next(r for r in document["jobs"] if r["method"] == "toy")
    assert toy_row["job_id"] == JOB and toy_row["n_tasks"] == 152
    assert toy_row["tp"] + toy_row["fp"] > 0  # it flagged tasks, and they were scored
    assert 0 < toy_row["f1"] <= 1 and toy_row["online"] is None  # no tau: no second run
    assert document["summary"]["toy"]["jobs"] == 1


def test_an_unregistered_name_is_refused_again(traces_dir: Path) -> None:
    spec = f"google2011-usage:{traces_dir / 'google2011-nurd-timeseries' / 'timeseriesspecsixtotal' / JOB}"
    result = CliRunner().invoke(cli, ["eval", "--trace", spec, "--methods", "toy"])
    assert result.exit_code == 2 and "unknown method 'toy'" in result.stderr

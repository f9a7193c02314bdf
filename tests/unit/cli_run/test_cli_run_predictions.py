"""`laggard run` runs the worker's predictor where it can flag something: the settings' method, one per
partition as the worker runs them, on traces with checkpoints; it says how many tasks it flagged."""

from __future__ import annotations

import json

from click.testing import CliRunner

from laggard.cli import cli
from producers.registry import open_trace
from streams.config import job_idle_timeout_us, partition_for, prediction_context
from streams.core.prediction.fleet import PredictorFleet
from streams.settings import Settings

WITH = "synthetic:nodes=40,slow=3,jobs=100,checkpoints=4,seed=5"


def predictions(*args: str, env: dict[str, str] | None = None) -> tuple[dict, str]:
    result = CliRunner().invoke(cli, ["run", *args], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["predictions"], result.stderr


def test_run_flags_what_the_workers_predictors_flag() -> None:
    method = "spark-q0.75-m1.5"  # reads no node view: the flags are those of the predictors alone
    found, err = predictions("--trace", WITH, "--partitions", "2", "--json",
                             env={"LAGGARD_PREDICTION_METHOD": method})
    settings = Settings(prediction_method=method)
    fleets = [PredictorFleet(method, prediction_context(settings), job_idle_timeout_us(settings)) for _ in range(2)]
    flagged = {(p.job_id, p.task_id) for e in open_trace(WITH)
               if (p := fleets[partition_for(e.job_id, 2)].step(e)) is not None}
    assert found["method"] == method and f"predictor {method}" in err
    assert found["flagged_tasks"] == len(flagged) > 0


def test_run_uses_the_default_predictor_with_the_live_node_view() -> None:
    found, _ = predictions("--trace", WITH, "--json")
    settings = Settings()
    fleet = PredictorFleet(settings.prediction_method, prediction_context(settings), job_idle_timeout_us(settings))
    blind = {(p.job_id, p.task_id) for e in open_trace(WITH) if (p := fleet.step(e)) is not None}
    assert found["method"] == "select" and found["flagged_tasks"] > 0
    # select's node-aware hazard, in shadow, reads the rankings' node evidence: which member select follows,
    # and so what it flags, moves with it (423 tasks without the view, 420 with it on this trace)
    assert found["flagged_tasks"] != len(blind)


def test_no_predictor_without_checkpoints_or_when_off() -> None:
    without, _ = predictions("--trace", "synthetic:nodes=40,slow=3,jobs=100,seed=5", "--json")
    off, _ = predictions("--trace", WITH, "--json", env={"LAGGARD_PREDICTION_METHOD": "off"})
    assert without == off == {"method": None, "flagged_tasks": 0, "jobs": 0}


def test_the_table_output_says_how_many_tasks_were_flagged() -> None:
    result = CliRunner().invoke(cli, ["run", "--trace", WITH])
    assert result.exit_code == 0, result.output
    assert "Predictions (select, in process, with an immediate node view): " in result.stdout

"""The worker's predictor is checked against the registry when settings load, not on its first event."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from laggard.cli import cli
from streams.core.prediction.registry import PREDICTORS
from streams.settings import Settings


@pytest.mark.parametrize("name", ["off", *PREDICTORS.names()])
def test_every_registered_predictor_and_off_are_accepted(name: str) -> None:
    assert Settings(prediction_method=name).prediction_method == name


def test_an_unknown_predictor_is_refused_at_load_with_the_names() -> None:
    with pytest.raises(ValidationError, match="unknown predictor 'nurdd'; one of: off, nurd, nurd-nc"):
        Settings(prediction_method="nurdd")


def test_the_cli_reports_it_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAGGARD_PREDICTION_METHOD", "nurdd")
    result = CliRunner().invoke(cli, ["eval", "--trace", "google2011-usage:/nowhere", "--methods", "hadoop"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if "unknown predictor 'nurdd'" in line]
    assert len(lines) == 1 and "LAGGARD_PREDICTION_METHOD" in lines[0]

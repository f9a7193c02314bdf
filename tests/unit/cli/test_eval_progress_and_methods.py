"""``laggard eval``: progress while a method runs, and an empty --methods."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

import laggard.commands.eval as eval_command
from laggard.cli import cli

TRACE = "synthetic:nodes=10,slow=1,jobs=4,tasks=12,checkpoints=3,seed=1"  # small, with checkpoints: fast


def test_a_running_method_reports_its_progress_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eval_command, "PROGRESS_EVERY_S", 0.0)  # a line at every event of this tiny trace
    result = CliRunner().invoke(cli, ["eval", "--trace", TRACE, "--methods", "elapsed-tau", "--json"])
    assert result.exit_code == 0, result.output
    lines = re.findall(r"^elapsed-tau: \d+ s, event [\d,]+ of ([\d,]+) \((oracle tau|online threshold) run\)$",
                       result.stderr, re.MULTILINE)  # fmt: skip
    assert {run for _, run in lines} == {"oracle tau", "online threshold"}  # elapsed-tau runs under both
    assert result.stdout.lstrip().startswith("{")  # the lines go to stderr: stdout stays one JSON document


def test_a_fast_method_prints_no_progress_line() -> None:
    result = CliRunner().invoke(cli, ["eval", "--trace", TRACE, "--methods", "elapsed-tau"])
    assert result.exit_code == 0, result.output
    assert " run)" not in result.stderr and "elapsed-tau: F1 in time" in result.stderr


@pytest.mark.parametrize("methods", ["", " , "])
@pytest.mark.parametrize("heldout", [[], ["--heldout"]])
def test_methods_naming_nothing_is_a_one_line_error(methods: str, heldout: list[str]) -> None:
    result = CliRunner().invoke(cli, ["eval", "--trace", TRACE, "--methods", methods, *heldout])
    assert result.exit_code == 2, result.output  # a usage error, as click's own
    assert result.stderr.strip().splitlines()[-1] == "Error: --methods names no method"
    assert "Traceback" not in result.stderr and result.stderr.count("Error") == 1
    assert result.stdout == ""

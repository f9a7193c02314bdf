"""``laggard eval`` on one small real job, as a user runs it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from laggard.cli import cli

JOB = "6343048076"


@pytest.fixture(scope="module")
def spec(traces_dir: Path) -> str:
    return f"google2011-usage:{traces_dir / 'google2011-nurd-timeseries' / 'timeseriesspecsixtotal' / JOB}"


def test_json_is_one_document_with_the_issue_fields(spec: str, tmp_path: Path) -> None:
    plot = tmp_path / "f1.png"
    result = CliRunner().invoke(
        cli, ["eval", "--trace", spec, "--methods", "nurd,supervised,spark", "--json", "--plot", str(plot)]
    )
    assert result.exit_code == 0, result.output
    document = orjson.loads(result.stdout)
    rows = document["jobs"]
    assert {r["method"] for r in rows} == {"nurd", "supervised", "spark-q0.75-m1.5", "spark-q0.9-m3"}
    for row in rows:
        for key in ("job_id", "method", "n_tasks", "n_stragglers", "tpr", "fpr", "fnr", "f1", "us_per_checkpoint"):
            assert key in row
        assert row["job_id"] == JOB and row["n_tasks"] == 152 and row["n_stragglers"] == 18
        assert 0 <= row["f1"] <= 1 and row["tpr"] + row["fnr"] == pytest.approx(1)
    nurd = next(r for r in rows if r["method"] == "nurd")
    assert nurd["online"] is not None  # the online threshold is reported beside the oracle
    for stats in document["summary"].values():
        assert {"mean_f1", "mean_tpr", "mean_fpr", "us_per_checkpoint"} <= set(stats)
    assert "oracle" in document["protocol"]
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert "read " in result.stderr  # progress goes to stderr


def test_text_output_says_which_threshold_protocol_is_used(spec: str) -> None:
    result = CliRunner().invoke(cli, ["eval", "--trace", spec, "--methods", "spark,hadoop"])
    assert result.exit_code == 0, result.output
    assert "oracle threshold" in result.stdout
    assert "mean over jobs" in result.stdout and "hadoop" in result.stdout
    # without an online run (--no-online, or only methods without tau) its column is '-' for every method; the
    # legend said that '-' meant "does not use tau", also of nurd
    assert "'online': not run" in result.stdout and "do not use tau" not in result.stdout
    for extra, online in (([], True), (["--no-online"], False)):
        both = CliRunner().invoke(cli, ["eval", "--trace", spec, "--methods", "nurd,hadoop", *extra])
        assert both.exit_code == 0 and ("'-' for methods that do not use tau" in both.stdout) == online, both.output
        assert ("'online': not run" in both.stdout) != online


@pytest.mark.parametrize(
    ("args", "message", "code"),  # 2: a usage error (click's convention); 1: the trace cannot be used
    [
        (["--methods", "nope"], "unknown method 'nope'", 2),
        (["--trace", "google2011-usage:/no/such/dir"], "No such file or directory", 1),
        (["--trace", "nosuchformat:/tmp"], "unknown trace format", 1),
        (["--trace", "synthetic:nodes=10,slow=1,jobs=5"], "has no task checkpoints", 1),
        (["--heldout", "--methods", "spark,foo"], "(not foo)", 2),  # ran spark alone, foo dropped without a word
        (["--trace", "google2011-events:/no/such/dir"], "has no task checkpoints", 1),  # said after reading it all
        (["--methods", "spark", "--plot", "plots/"], "--plot plots/ names a directory", 2),  # wrote a PNG named plots
        (["--methods", "spark", "--plot", "f1.txt"], "give a file ending .png, .svg or .pdf", 2),  # PNG bytes in it
    ],
)
def test_user_mistakes_are_one_line(spec: str, args: list[str], message: str, code: int) -> None:
    full = ["eval", "--trace", spec, *args] if args[0] != "--trace" else ["eval", *args]
    result = CliRunner().invoke(cli, full)
    assert result.exit_code == code
    assert message in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["eval", "simulate"])
def test_a_directory_without_jobs_is_named_as_such(command: str, tmp_path: Path) -> None:
    """simulate told a user of google2011-usage:DIR to use google2011-usage:DIR ("has no task checkpoints")."""
    (tmp_path / "42").write_bytes(b"\xca\xfe")  # a file named by a number, not a job's task series
    result = CliRunner().invoke(cli, [command, "--trace", f"google2011-usage:{tmp_path}"])
    assert result.exit_code == 1 and f"no job found in google2011-usage:{tmp_path}" in result.stderr, result.output
    assert "Traceback" not in result.output and "codec can't decode" not in result.output


def test_an_alpha_outside_0_1_is_a_usage_error(spec: str) -> None:
    result = CliRunner().invoke(cli, ["eval", "--trace", spec, "--alpha", "5"])
    assert result.exit_code == 2 and "is not in the range 0<=x<=1" in result.output
    # every task finished before the first prediction: nothing left to predict (nurd's F1 0, spark's unchanged)
    result = CliRunner().invoke(cli, ["eval", "--trace", spec, "--initial-fraction", "1"])
    assert result.exit_code == 2 and "is not in the range 0<x<1" in result.output


def test_json_rows_carry_the_lead_time_scores_beside_the_papers_f1(spec: str) -> None:
    result = CliRunner().invoke(cli, ["eval", "--trace", spec, "--methods", "supervised,spark,hazard", "--json"])
    assert result.exit_code == 0, result.output
    document = orjson.loads(result.stdout)
    for row in document["jobs"]:
        scores = [row[k] for k in ("f1_in_time", "f1_at_25", "f1_at_50", "f1_at_75", "f1")]
        assert all(0 <= s <= 1 for s in scores)
        assert row["f1_in_time"] <= row["f1"] and row["f1_at_25"] <= row["f1_at_50"] <= row["f1_at_75"] <= row["f1"]
    assert "late" in document["columns"]["f1_in_time"] and "secondary" in document["columns"]["f1"]
    assert {"mean_f1_in_time", "mean_f1_at_50", "mean_f1"} <= set(document["summary"]["hazard"])


def test_help_explains_each_column() -> None:
    result = CliRunner().invoke(cli, ["eval", "--help"])
    text = " ".join(result.output.split())  # click wraps the help
    for column in ("'F1 in time' (the primary score)", "'F1 <25%'", "'F1 ever (paper)'", "With --heldout"):
        assert column in text


def test_heldout_chooses_on_other_traces_and_says_which_candidates(tmp_path: Path) -> None:
    traces = [f"synthetic:nodes=10,slow=1,jobs=4,tasks=12,checkpoints=3,seed={seed}" for seed in (1, 2)]
    args = ["eval", "--heldout", "--no-online", "--methods", "spark-q0.75-m1.5,hazard", "--repeats", "1", "--json"]
    result = CliRunner().invoke(cli, [*args, "--trace", traces[0], "--trace", traces[1]])
    assert result.exit_code == 0, result.output
    document = orjson.loads(result.stdout)
    assert document["held_out"] == "trace" and document["threshold"] == "oracle"
    assert {c["family"] for c in document["candidates"]} == {"spark-q0.75-m1.5", "hazard"}
    assert {(r["group"], r["family"]) for r in document["rows"]} == {
        (t, f) for t in traces for f in ("spark-q0.75-m1.5", "hazard", "any")
    }
    assert set(document["summary"]) == {"spark-q0.75-m1.5", "hazard", "any"}


def test_several_traces_without_heldout_are_refused(spec: str) -> None:
    result = CliRunner().invoke(cli, ["eval", "--trace", spec, "--trace", spec, "--methods", "hadoop"])
    assert result.exit_code == 2 and "only with --heldout" in result.stderr


def test_plot_with_heldout_is_refused_not_silently_skipped(spec: str) -> None:
    result = CliRunner().invoke(cli, ["eval", "--trace", spec, "--heldout", "--methods", "spark", "--plot", "x.png"])
    assert result.exit_code == 2 and "does not apply with --heldout" in result.output


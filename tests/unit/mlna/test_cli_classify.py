"""``laggard classify`` end to end on a small drifting cluster: one JSON document, plots, one-line errors."""

from __future__ import annotations

import json

from click.testing import CliRunner

from laggard.cli import cli

SMALL = "drifting:nodes=40,days=4,load=60,persistent=0.1,episodic=0.1,intermittent=0"


def test_json_reports_periods_and_the_classifiers_side_by_side(tmp_path):
    result = CliRunner().invoke(cli, ["classify", "--trace", SMALL, "--seeds", "1-2", "--sub-period", "6h",
                                      "--period", "4", "--json", "--plot", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [t["trace"].endswith(f"seed={s}") for s, t in zip((1, 2), document["traces"], strict=True)] == [True] * 2
    trace = document["traces"][0]
    assert len(trace["periods"]) == 4
    first = trace["periods"][0]
    assert 2 <= first["k"] <= 10 and sum(first["sizes"]) == first["nodes"]
    assert first["sizes"][first["weak_cluster"]] <= 0.25 * first["nodes"] or not first["rule_met"]
    assert set(trace["table"]) == set(trace["table_truth"]) == {"hgb", "forest", "arf", "persistence"}
    # Four persistent slow nodes of 40 (truth: weak all the time) are predicted from the second period on.
    assert trace["table_truth"]["persistence"]["recall"] > 0.5
    assert document["mean"]["table_truth"]["forest"]["accuracy"] is not None
    assert sorted(p.split("/")[-1] for p in document["plots"]) == [
        "accuracy-1.png", "accuracy-2.png", "clusters-1.png", "clusters-2.png"]


def test_bad_input_is_one_line_and_exit_1():
    runner = CliRunner()
    for args in (["--trace", "nosuch:x"], ["--trace", SMALL, "--sub-period", "soon"],
                 ["--trace", SMALL, "--classifiers", "svm"], ["--trace", "csv:/no/such/file.csv"],
                 ["--trace", SMALL, "--seeds", "3-1"]):  # ran nothing, said nothing, exit 0
        result = runner.invoke(cli, ["classify", *args])
        assert result.exit_code != 0 and result.exit_code in (1, 2), args
        assert "Traceback" not in result.output
        assert len([line for line in result.stderr.splitlines() if line.startswith("Error")]) == 1, result.stderr


def test_a_format_of_job_events_only_is_named_as_such(tmp_path) -> None:
    """alibaba2017-tasks said "no finished task with a z-value (jobs need 2 successful tasks)" of 67 k Terminated
    tasks: the format names no node."""
    job_events = tmp_path / "batch_task.csv"
    job_events.write_text("".join(f"{i},{i + 60},j{i},t{i},1,Terminated,1,0.5\n" for i in range(20)))
    result = CliRunner().invoke(cli, ["classify", "--trace", f"alibaba2017-tasks:{job_events}"])
    assert result.exit_code == 1 and "ran on a node (a format with job events only" in result.output

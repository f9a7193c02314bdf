"""`laggard scenarios`: the table, one JSON document, mistakes as one line."""

from __future__ import annotations

import json

from click.testing import CliRunner

from laggard.cli import cli


def invoke(*args: str):
    return CliRunner().invoke(cli, ["scenarios", *args])


def test_json_rows_for_one_scenario_and_seed_in_open_loop() -> None:
    result = invoke("--only", "cpu-2x", "--seeds", "1", "--loop", "open", "--json")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("\n") == 1
    document = json.loads(result.stdout)
    (row,) = document["rows"]
    assert (row["scenario"], row["loop"], row["seeds"], row["faulty"]) == ("cpu-2x", "open", [1], 2)
    assert row["recall"] is not None and not row["cap_exceeded"]
    (run,) = document["runs"]
    assert run["stays"] and all(len(stay) == 3 for stay in run["stays"])


def test_list_and_mistakes() -> None:
    listed = invoke("--list")
    assert listed.exit_code == 0 and "sparse-4x" in listed.stdout and "over-cap-2x" in listed.stdout
    for args, words in ((["--only", "nope"], "unknown scenario"), (["--seeds", "x"], "--seeds")):
        result = invoke(*args)
        assert result.exit_code == 1 and words in result.stderr and "Traceback" not in result.output


def test_what_would_end_the_command_after_its_runs_is_refused_before_the_first(tmp_path) -> None:
    """A window shorter than the period raised a traceback from every run; a plot directory that cannot be made
    ended the command after the whole suite had run, its results lost. Both are one line now, before any run."""
    a_file = tmp_path / "afile"
    a_file.write_text("")
    for args, words in ((["--period", "100000"], "invalid settings: the window (3600 s) must be at least"),
                        (["--plot", str(a_file / "sub")], "cannot create the plot directory")):
        result = invoke("--only", "cpu-2x", "--seeds", "1", "--loop", "open", *args)
        assert result.exit_code == 1 and words in result.stderr, result.output
        assert "Traceback" not in result.output and "seed 1:" not in result.stderr  # refused before the run

"""``laggard classify`` and ``laggard advise`` as a new user meets them: an empty classifier list, bad CSV rows,
a trace shorter than one period, a missing blacklist file, an unseen node, and eval's mean and title."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from laggard.cli import cli
from tests.csv_cluster import cluster_rows

DRIFTING = "drifting:nodes=20,days=3"
SMALL = "synthetic:nodes=20,slow=0,jobs=60,shape=6,interarrival=45,load=2"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def one_error_line(result) -> str:
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def csv_with_bad_rows(path: Path) -> Path:
    """A small task table (40 nodes, 40 jobs) with two bad rows, at lines 6 and 10."""
    rows = cluster_rows(["n03"], jobs=40, seed=1)
    rows.insert(5, "j0,tx,n01,notanumber,5,SUCCEEDED")
    rows.insert(9, "j0,ty,n01")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("classifiers", ["", ",", " , "])
def test_classify_with_no_classifier_is_one_usage_error(classifiers: str) -> None:
    result = invoke("classify", "--trace", DRIFTING, "--sub-period", "1h", "--period", "24",
                    "--classifiers", classifiers)  # fmt: skip
    assert "--classifiers" in one_error_line(result)


def test_classify_reports_the_bad_rows_of_a_csv(tmp_path: Path) -> None:
    spec = f"csv:{csv_with_bad_rows(tmp_path / 't.csv')}"
    result = invoke("classify", "--trace", spec, "--sub-period", "1m", "--period", "5", "--classifiers", "forest")
    assert result.exit_code == 0, result.output
    assert "2 bad rows" in result.stderr
    assert "line 6: start_us is not an integer" in result.stderr and "line 10:" in result.stderr
    document = json.loads(invoke("classify", "--trace", spec, "--sub-period", "1m", "--period", "5",
                                 "--classifiers", "forest", "--json").stdout)  # fmt: skip
    trace = document["traces"][0]
    assert trace["bad_rows"] == 2 and [bad["line"] for bad in trace["bad_examples"]] == [6, 10]


def test_advise_tree_reports_the_bad_rows_of_a_csv(tmp_path: Path) -> None:
    result = invoke("advise", "tree", "--trace", f"csv:{csv_with_bad_rows(tmp_path / 't.csv')}")
    assert result.exit_code == 0, result.output
    assert "2 bad rows" in result.stderr and "line 10: expected 6 columns" in result.stderr


def test_classify_on_a_trace_shorter_than_a_period_says_which_options_to_use() -> None:
    result = invoke("classify", "--trace", "drifting:nodes=20,days=1", "--classifiers", "forest")
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if "less than one period" in line]
    assert len(notes) == 1 and "--sub-period 1h --period" in notes[0], result.stderr
    # the summary line, and no tables of dashes (empty period and prediction tables were printed)
    assert "0 periods" in result.stdout and "precision" not in result.stdout, result.stdout
    pooled = invoke("classify", "--trace", "drifting:nodes=20,days=1", "--seeds", "1,2", "--classifiers", "forest")
    assert pooled.exit_code == 0 and "mean over 2 traces" not in pooled.stdout, pooled.stdout  # a mean of nothing


def test_advise_query_refuses_a_missing_blacklist_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    result = invoke("advise", "query", "--trace", f"{SMALL},seed=3", "--node", "node-03", "--blacklist", str(missing))
    assert "nope.txt" in one_error_line(result)


def test_advise_query_says_when_the_node_was_never_seen() -> None:
    args = ["advise", "query", "--trace", f"{SMALL},seed=3", "--type", "compute"]
    unseen = invoke(*args, "--node", "nosuch")
    assert unseen.exit_code == 0, unseen.output
    assert unseen.stdout.startswith("allow nosuch") and "never seen in the trace" in unseen.stdout
    answer = json.loads(invoke(*args, "--node", "nosuch", "--json").stdout)
    assert answer["verdict"] == "allow" and "never seen in the trace" in answer["reason"]
    seen = invoke(*args, "--node", "node-03")
    assert seen.exit_code == 0 and "never seen" not in seen.stdout


def test_advise_eval_prints_the_mean_as_text_and_titles_the_seeds_it_ran() -> None:
    result = invoke("advise", "eval", "--trace", f"{SMALL},seed=4", "--seeds", "1", "--learn-hours", "0.5",
                    "--min-leaf", "20", "--repeats", "1")  # fmt: skip
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # rich wraps long titles
    assert "{'" not in text and "_share" not in text  # no raw dict of the summary
    mean = next(line for line in result.stdout.splitlines() if line.startswith("mean over"))
    assert "refused" in mean and "stragglers avoided" in mean and "%" in mean
    assert "seed=4" not in text and "seed 1" in text

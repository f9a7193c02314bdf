"""``laggard advise`` as a user runs it: one JSON document with --json, one clear line on bad input (exit 2 for a
usage error, as click's own; 1 for a trace or state that cannot be used)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from laggard.cli import cli

SMALL = "synthetic:nodes=20,slow=0,jobs=60,shape=6,interarrival=45,load=2"


def test_eval_on_synthetic_seeds_prints_one_json_document_with_every_seed() -> None:
    args = ["--seeds", "1-2", "--tune-seeds", "9", "--learn-hours", "0.5", "--min-leaf", "20", "--repeats", "1",
            "--targets", "z,p", "--refusal-budget", "off"]
    result = CliRunner().invoke(cli, ["advise", "eval", "--trace", SMALL, *args, "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [run["run"] for run in document["runs"]] == ["seed=1", "seed=2"]
    assert {"refused_share", "avoided_share", "jct_reduction", "null_jct_reduction"} <= set(document["runs"][0])
    fixed = [row["target"] for row in document["tuning"] if row["refusal_budget"] == "off"]
    assert document["target"] in ("z", "p") and fixed == ["z", "p"]
    if document["refusal_budget"] is not None:  # auto chose the running budget: it won on the tuning seed
        assert document["refusal_budget"]["share"] == 0.1
        assert all(run["refused_share"] <= 0.1 for run in document["runs"])
    assert set(document["threshold"]) == {"compute", "memory"}  # one threshold per task type
    checks = {"avoided_at_least_half", "refused_at_most_tenth", "jct_beats_null"}
    summary = document["summary"]
    assert set(summary["acceptance_every_run"]) == set(summary["acceptance_of_means"]) == checks
    assert summary["acceptance_of_means"]["avoided_at_least_half"] == (summary["avoided_share"] >= 0.5)
    for run in document["runs"]:  # the acceptance reads off each seed: avoided, refused, job time against the null
        assert run["acceptance"]["refused_at_most_tenth"] == (run["refused_share"] <= 0.1)
        assert run["acceptance"]["avoided_at_least_half"] == (run["avoided_share"] >= 0.5)
        if run["jct_reduction"] is not None:
            saved = run["jct_reduction"] - (run["null_jct_reduction"] or 0)
            assert abs(run["jct_saved_vs_null"] - saved) < 1e-12
            assert run["acceptance"]["jct_beats_null"] == (saved > 0)
    meeting = sum(all(run["acceptance"].values()) for run in document["runs"])
    assert document["summary"]["runs_meeting_all"] == meeting


def test_query_explains_its_verdict_and_tree_prints_a_tree() -> None:
    result = CliRunner().invoke(cli, ["advise", "query", "--trace", f"{SMALL},seed=3", "--node", "node-04",
                                      "--type", "compute", "--cpu", "0.2", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["verdict"] in ("allow", "avoid") and "expected z" in answer["reason"]
    strict = CliRunner().invoke(cli, ["advise", "query", "--trace", f"{SMALL},seed=3", "--node", "node-04",
                                      "--type", "compute", "--threshold", "0.5,compute=-99", "--json"])  # fmt: skip
    answer = json.loads(strict.stdout)
    assert answer["verdict"] == "avoid" and answer["threshold"] == -99  # the type's own threshold, not the default
    chance = CliRunner().invoke(cli, ["advise", "query", "--trace", f"{SMALL},seed=3", "--node", "node-04", "--type",
                                      "compute", "--target", "p", "--threshold", "compute=1.0", "--json"])  # fmt: skip
    answer = json.loads(chance.stdout)  # a chance of straggling is never above 1: nothing is avoided
    assert answer["verdict"] == "allow" and "straggling chance" in answer["reason"]
    assert 0.0 <= answer["expected_z"] <= 1.0
    tree = CliRunner().invoke(cli, ["advise", "tree", "--trace", f"{SMALL},seed=3", "--type", "memory"])
    assert tree.exit_code == 0 and "|---" in tree.stdout


def test_queries_sharing_a_budget_state_file_stop_refusing_once_it_is_spent(tmp_path: Path) -> None:
    state = tmp_path / "budget.json"
    args = ["advise", "query", "--trace", f"{SMALL},seed=3", "--node", "node-04", "--type", "compute",
            "--threshold", "compute=-99", "--budget-share", "0.1", "--budget-state", str(state), "--json"]
    answers = [json.loads(CliRunner().invoke(cli, args).stdout) for _ in range(2)]
    assert answers[0]["verdict"] == "avoid" and not answers[0]["budget_spent"]
    assert answers[1]["verdict"] == "allow" and answers[1]["budget_spent"]
    assert ("budget spent: 1 of the last 2 placements refused (at most 10.0 % of the last 3000 placements, or "
            "one)") in answers[1]["reason"]


def test_eval_with_the_online_calibration_tunes_nothing_and_reports_the_hindsight_ceilings() -> None:
    args = ["--seeds", "1-2", "--learn-hours", "0.5", "--min-leaf", "20", "--repeats", "1", "--json"]  # the default
    result = CliRunner().invoke(cli, ["advise", "eval", "--trace", SMALL, *args])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["tune_seeds"] == [] and document["refusal_budget"]["mode"] == "calibrated"
    for run in document["runs"]:
        assert run["refused_share"] > 0.0 and run["avoided_share"] > run["null_avoided_share"]
        assert run["trees_hindsight_avoided_share_at_10"] <= run["oracle_avoided_share_at_10"] <= 1.0


def test_queries_sharing_a_calibration_state_rank_each_chance_among_the_earlier_ones(tmp_path: Path) -> None:
    state = tmp_path / "calibration.json"
    answers = []
    for node in ("node-01", "node-02", "node-03"):
        args = ["advise", "query", "--trace", f"{SMALL},seed=3", "--node", node, "--type", "compute", "--target", "p",
                "--calibrated", "--budget-state", str(state), "--json"]  # fmt: skip
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        answers.append(json.loads(result.stdout))
    assert "no recent requests to rank it among yet" in answers[0]["reason"]
    assert "of the last 2 requests scored higher" in answers[2]["reason"]
    saved = json.loads(state.read_text())
    assert saved["format"] == "laggard-calibrated-budget/1" and saved["requests"] == 3 and len(saved["scores"]) == 3


def test_a_usage_error_is_one_line_and_exit_2_as_click_s_own() -> None:
    """Every one of these exited 1, where click's own usage errors (a missing --trace, --depth 0) exit 2: a script
    could not tell a mistyped option from a failed run."""
    for args in (["eval", "--trace", SMALL, "--seeds", "one"],
                 ["eval", "--trace", SMALL, "--tune-seeds", "x"],
                 ["eval", "--trace", SMALL, "--targets", "speed"],
                 ["eval", "--trace", SMALL, "--plot", "advice.txt"],
                 ["query", "--trace", SMALL, "--node", "n", "--threshold", "compute=high"],
                 ["query", "--trace", SMALL, "--node", "n", "--budget-window", "soon"],
                 ["serve", "--trace", SMALL, "--state", "status.json"],  # --state needs --kafka
                 ["eval", "--trace", SMALL, "--budget-window", "soon"],
                 ["tree", "--trace", f"{SMALL},seed=3", "--type", "nope"],
                 # a trace of several task types: the default "all" answered "no tree yet: allowed" to every query
                 ["query", "--trace", f"{SMALL},seed=3", "--node", "node-04"],
                 ["eval", "--trace", SMALL, "--seeds", "5-1"],  # ran nothing: "mean over 0 seeds", exit 0
                 # a chance of straggling under the z default 1.0: nothing could ever be avoided
                 ["query", "--trace", SMALL, "--node", "node-04", "--type", "compute", "--target", "p"],
                 ["serve", "--trace", SMALL, "--target", "p"],
                 ["query", "--trace", SMALL, "--node", "node-04", "--type", "compute", "--threshold", "gpu=0.1,1"],
                 # per-type chances only: pods of no type (the pooled tree) were left at 1, never avoided
                 ["serve", "--trace", SMALL, "--target", "p", "--threshold", "compute=0.3,memory=0.4"],
                 ["serve", "--trace", SMALL, "--target", "p", "--threshold", "all=0.3,compute=0.3"],  # memory at 1
                 # a chance below 0 avoided every node (all 40 refused); above 1, none
                 ["serve", "--trace", SMALL, "--target", "p", "--threshold", "-1"],
                 ["serve", "--trace", SMALL, "--bootstrap", "127.0.0.1:9092"],  # was silently ignored
                 ["query", "--trace", SMALL, "--node", "node-04", "--target", "p", "--threshold", "0.3,compute=1.5"]):
        result = CliRunner().invoke(cli, ["advise", *args])
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output and result.output.strip().splitlines()[-1].startswith("Error: ")
        assert result.output.count("Error") == 1, result.output
    assert CliRunner().invoke(cli, ["advise", "eval"]).exit_code == 2  # click's own: --trace is missing


def test_a_trace_that_cannot_be_read_is_one_line_and_exit_1() -> None:
    result = CliRunner().invoke(cli, ["advise", "query", "--trace", "csv:/no/such.csv", "--node", "n"])
    assert result.exit_code == 1 and result.output.strip() == "Error: No such file or directory: /no/such.csv"


def test_a_budget_state_of_the_other_kind_than_the_flags_is_one_line_not_a_silent_switch(tmp_path: Path) -> None:
    """A first-come state read under --calibrated used to apply the calibration's floor (0) as a z threshold."""
    state = tmp_path / "budget.json"
    base = ["advise", "query", "--trace", f"{SMALL},seed=3", "--node", "node-04", "--type", "compute",
            "--budget-state", str(state), "--json"]
    assert CliRunner().invoke(cli, base).exit_code == 0  # writes a first-come budget
    calibrated = CliRunner().invoke(cli, [*base, "--calibrated"])
    assert calibrated.exit_code == 1 and "holds a first-come budget; drop --calibrated" in calibrated.output
    assert "Traceback" not in calibrated.output
    state.unlink()
    assert CliRunner().invoke(cli, [*base, "--calibrated"]).exit_code == 0  # writes a calibration
    plain = CliRunner().invoke(cli, base)
    assert plain.exit_code == 1 and "holds a calibrated budget; add --calibrated" in plain.output
    alone = CliRunner().invoke(cli, [*base[:-3], "--json", "--calibrated"])  # no --budget-state: it could never refuse
    assert alone.exit_code == 2 and "give --budget-state FILE" in alone.output


def test_a_budget_state_that_cannot_be_written_is_one_line_naming_the_path(tmp_path: Path) -> None:
    """A missing directory said "Error: No such file or directory: PATH" only after the trees were trained (a minute
    on a large trace), naming no option; a file it may not write, "Permission denied: PATH" the same way."""
    base = ["advise", "query", "--trace", f"{SMALL},seed=3", "--node", "node-04", "--type", "compute", "--json"]
    (tmp_path / "a-file").write_text("")
    for parent, problem in ((tmp_path / "no-such-dir", "does not exist"), (tmp_path / "a-file", "not a directory")):
        refused = CliRunner().invoke(cli, [*base, "--budget-state", str(parent / "budget.json")])
        assert refused.exit_code == 2 and refused.stdout == "", refused.output  # a usage error, said at once:
        assert "reading synthetic" not in refused.stderr  # before the trace is read
        last = refused.stderr.strip().splitlines()[-1]
        assert last.startswith("Error: Invalid value for '--budget-state'") and f"{str(parent)!r}" in last
        assert problem in last and not (parent / "budget.json").exists()


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs Linux's sysfs: a directory no one may create in")
def test_a_budget_state_the_query_may_not_write_is_one_line_and_no_advice() -> None:
    """sysfs refuses a new file even to root: a real write that fails after the advice was computed."""
    args = ["advise", "query", "--trace", f"{SMALL},seed=3", "--node", "node-04", "--type", "compute", "--json",
            "--budget-state", "/sys/laggard-budget.json"]  # fmt: skip
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 1 and refused.stdout == "", refused.output  # no advice the budget did not keep
    last = refused.stderr.strip().splitlines()[-1]  # the OS's words between: "Permission denied", or a container's
    assert last.startswith("Error: cannot write --budget-state /sys/laggard-budget.json: ")  # "Read-only file system"
    assert last.endswith("; no advice given, as the budget could not keep it")


def test_query_without_a_type_takes_the_trace_s_one_type(tmp_path) -> None:
    """Before, the default type was "all": on a trace whose tasks all have a real type it answered "no tree for task
    type 'all' yet: allowed" whatever the node."""
    from tests.csv_cluster import cluster_rows

    rows = cluster_rows(("n03",), 120, 3)
    path = tmp_path / "typed.csv"
    path.write_text("\n".join([rows[0] + ",task_type"] + [row + ",compute" for row in rows[1:]]) + "\n")
    result = CliRunner().invoke(cli, ["advise", "query", "--trace", f"csv:{path}", "--node", "n03", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["task_type"] == "compute" and "no tree" not in document["reason"]


def test_a_trace_too_short_for_any_tree_is_refused_not_served_as_an_adviser_that_allows_everything(tmp_path) -> None:
    """`advise tree` printed nothing (exit 0), `query` "no tree ... yet: allowed", and `serve` started and allowed
    every node: the trace could not teach a tree (fewer than 2 x --min-leaf placements of any type)."""
    from tests.csv_cluster import cluster_rows

    path = tmp_path / "short.csv"
    path.write_text("\n".join(cluster_rows(("n03",), 2, 3)) + "\n")  # 79 tasks: a tree needs 100
    for args in (["tree"], ["query", "--node", "n03"]):
        result = CliRunner().invoke(cli, ["advise", *args, "--trace", f"csv:{path}"])
        assert result.exit_code == 1, (args, result.output)
        assert "no tree learned from" in result.output and "placements of one task type" in result.output
    import subprocess
    import sys

    served = subprocess.run([sys.executable, "-m", "laggard", "advise", "serve", "--port", "0", "--trace",
                             f"csv:{path}"], capture_output=True, text=True, timeout=120)  # a server: never in-process
    assert served.returncode == 1 and "no tree learned from" in served.stderr, served.stderr



def test_serve_says_its_port_is_taken_before_it_reads_the_trace(tmp_path) -> None:
    """A port in use (or a bad --host) was said only after the trees were trained: 60-100 s on Google 2011."""
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        served = subprocess.run([sys.executable, "-m", "laggard", "advise", "serve", "--port", str(port), "--trace",
                                 SMALL], capture_output=True, text=True, timeout=120)  # a server: never in-process
    assert served.returncode == 1, served.stderr
    assert served.stderr.strip().splitlines() == [f"Error: cannot serve on 127.0.0.1:{port}: Address already in use"]


@pytest.mark.parametrize(("args", "message"), [
    (["serve", "--target", "p", "--threshold", "-1"], "a chance of straggling, between 0 and 1, with --threshold: "
                                                      "not -1"),
    (["query", "--node", "node-04", "--target", "p", "--threshold", "0.3,compute=1.5"],
     "not 1.5 (in 0.3,compute=1.5)"),
    (["serve", "--bootstrap", "127.0.0.1:9092"], "--bootstrap needs --kafka"),
])
def test_the_new_refusals_say_what_is_wrong(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["advise", *args, "--trace", SMALL])
    assert result.exit_code == 2 and message in result.output, result.output


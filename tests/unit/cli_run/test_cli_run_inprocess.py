"""`laggard run`: the in-process pipeline on synthetic and CSV traces, its JSON document, its tables, mistakes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from laggard.cli import cli
from producers.registry import open_trace
from streams.local import LocalPipeline
from streams.settings import Settings
from tests.csv_cluster import cluster_rows

SPEC = "synthetic:nodes=40,slow=3,jobs=150,seed=1"


def invoke(*args: str):
    return CliRunner().invoke(cli, ["run", *args])


@pytest.fixture(scope="module")
def document() -> dict:
    result = invoke("--trace", SPEC, "--json")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("\n") == 1  # one document, one line, nothing else on stdout
    return json.loads(result.stdout)


def test_json_run_blacklists_exactly_the_injected_slow_nodes(document):
    slow = document["ground_truth"]["slow_nodes"]
    assert document["blacklist"] == slow
    added = sorted(entry["node_id"] for delta in document["deltas"] for entry in delta["added"])
    assert added == slow
    assert document["detection"]["precision"] == 1.0
    assert document["detection"]["recall"] == 1.0
    assert document["detection"]["false_positives"] == []
    assert set(document["detection"]["onset_to_blacklist_s"]) == set(slow)


def test_json_deltas_equal_the_in_process_runner_and_carry_their_statistics(document):
    expected = list(LocalPipeline(Settings()).run(open_trace(SPEC)))
    assert [d["version"] for d in document["deltas"]] == [d.version for d in expected]
    assert [sorted(e["node_id"] for e in d["added"]) for d in document["deltas"]] == [
        sorted(e.node_id for e in d.added) for d in expected
    ]
    for delta in document["deltas"]:
        for entry in delta["added"]:
            assert entry["n"] >= 5 and entry["ci_low"] > 0.25 and entry["reason"]


def test_json_ranking_and_counts_describe_the_run(document):
    ranking = document["ranking"]
    assert ranking["window_end_us"] > ranking["window_start_us"]
    listed = {row["node_id"] for row in ranking["nodes"] if row["blacklisted"]}
    assert listed == set(document["blacklist"])
    for row in ranking["nodes"]:
        if row["ci_low"] is not None:
            assert row["ci_low"] <= row["mean"] <= row["ci_high"]
    counts = document["counts"]
    trace = open_trace(SPEC)
    events = sum(1 for _ in trace)
    assert counts["events"] == events and counts["jobs"] == trace.jobs == 150
    assert counts["samples"] == counts["finished"]["SUCCEEDED"]
    assert counts["deltas"] == len(document["deltas"]) and counts["rankings"] > counts["deltas"]
    assert counts["bad_rows"] == 0 and counts["invalid"] == {}
    assert sum(counts["skip_reasons"].values()) == counts["skipped"]


def test_a_healthy_cluster_gets_no_blacklist_by_default_but_plain_dsb_lists_by_chance():
    healthy = "synthetic:nodes=40,slow=0,jobs=120,seed=2"
    guarded = json.loads(invoke("--trace", healthy, "--json").stdout)
    assert guarded["deltas"] == [] and guarded["blacklist"] == []
    assert guarded["detection"]["precision"] is None  # nothing blacklisted: precision undefined
    bare = json.loads(invoke("--trace", healthy, "--json", "--policy", "pcores", "--significance-floor", "none").stdout)
    assert bare["blacklist"], "plain DSB level 0 lists healthy nodes by chance"
    ever = sorted({entry["node_id"] for delta in bare["deltas"] for entry in delta["added"]})
    assert bare["detection"]["false_positives"] == ever and bare["detection"]["precision"] == 0.0
    # ... and the forward lift says that blacklist predicts nothing: its 95 % interval holds 1
    lift = bare["forward_lift"]
    assert lift["landed"] > 100 and lift["lift_low"] < 1.0 < lift["lift_high"]


def test_tasks_landing_on_the_blacklisted_slow_nodes_straggle_several_times_more(document):
    lift = document["forward_lift"]
    assert lift["nodes"] == len(document["ground_truth"]["slow_nodes"])
    assert lift["lift_low"] > 3.0, lift  # 1.8x slower nodes: ~47 % stragglers against ~11 % cluster-wide
    assert lift["other_rate"] < lift["cluster_rate"] < lift["landed_rate"]


def test_honouring_the_blacklist_would_shorten_the_jobs_on_slow_nodes_nearly_as_much_as_the_truth(document):
    found, truth = document["avoidance"]["blacklist"], document["avoidance"]["true_slow_nodes"]
    assert found["moved"] == document["forward_lift"]["landed"]  # the same tasks the lift counts
    # 1.8x slower nodes: a moved task takes about half as long elsewhere
    assert found["moved_mean_s_after"] < 0.7 * found["moved_mean_s_before"]
    assert found["over_jobs"] == truth["over_jobs"]  # compared on the same jobs
    assert found["mean_reduction"] > found["mean_baseline"] + 0.03  # far more than moving random tasks
    assert 0.5 * truth["mean_reduction"] < found["mean_reduction"] <= truth["mean_reduction"]
    assert truth["moved"] >= found["moved"]  # the truth lists the slow nodes from the onset, before detection


def test_a_blacklist_of_healthy_nodes_saves_no_more_than_moving_random_tasks():
    healthy = json.loads(invoke("--trace", "synthetic:nodes=40,slow=0,jobs=120,seed=2", "--json",
                                "--policy", "pcores", "--significance-floor", "none").stdout)  # fmt: skip
    found = healthy["avoidance"]["blacklist"]
    assert found["moved"] > 100  # plain DSB lists healthy nodes by chance, and tasks land on them
    assert found["mean_reduction"] < found["mean_baseline"] + 0.01
    assert healthy["avoidance"]["true_slow_nodes"] is None  # no slow node to compare with


def test_the_text_report_says_what_honouring_the_blacklist_would_have_saved():
    result = invoke("--trace", SPEC)
    assert result.exit_code == 0, result.output
    assert "Had schedulers honoured the blacklist" in result.stdout
    assert "with as many random tasks moved instead" in result.stdout
    assert "had exactly the injected slow nodes been listed from the fault onset" in result.stdout


def write_csv(path: Path, slow: tuple[str, ...], jobs: int = 150, seed: int = 3) -> Path:
    """40 nodes; tasks on ``slow`` nodes take 1.8x; one job every 30 s; a bad row at the end."""
    # then a task still running (start only: skipped with its reason) and a bad row (ends before it starts)
    lines = [*cluster_rows(slow, jobs, seed), "jy,t0,n01,100,,RUNNING", "jx,t0,n01,100,50,SUCCEEDED"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_csv_run_prints_ranking_deltas_and_counts(tmp_path):
    slow = ("n05", "n22")
    path = write_csv(tmp_path / "tasks.csv", slow)
    idle = ("--job-idle-timeout", "600")  # a CSV has no job ends: its jobs are final once idle
    result = invoke("--trace", f"csv:{path}", *idle)
    assert result.exit_code == 0, result.output
    out = result.stdout
    # the default policy (running) has no P-Cores levels, and the table neither counts nor shows any
    assert "Final ranking" in out and "Nodes by id" in out and "(no levels)" in out and "P-Cores" not in out
    blacklist = out.split("Blacklist", 1)[1].split("Deltas", 1)[0]
    assert all(node in blacklist for node in slow)
    # without levels a listed row says what found it (its mean z counts finished tasks only)
    listed = [line for line in out.splitlines() if "BLACKLISTED" in line]
    assert len(listed) == 2 and all("BLACKLISTED: clearly slow over" in line for line in listed), listed
    assert "v1 at trace time" in out and "+ n05" in out and "+ n22" in out
    assert "bad rows" in out and "line" in out  # the bad row is counted and shown
    assert "attempt did not finish in the trace (start only)" in out  # a skip says why
    pcores = invoke("--trace", f"csv:{path}", "--policy", "pcores", *idle).stdout
    assert "Nodes by level" in pcores and "P-Cores levels, policy pcores" in pcores
    document = json.loads(invoke("--trace", f"csv:{path}", "--json", *idle).stdout)
    assert document["blacklist"] == sorted(slow)
    assert document["counts"]["bad_rows"] == 1
    assert "ground_truth" not in document and "detection" not in document


def test_options_reach_the_pipeline():
    result = invoke("--trace", SPEC, "--json", "--window", "1800", "--period", "600", "--policy", "pcores-top-k")
    document = json.loads(result.stdout)
    ranking = document["ranking"]
    assert ranking["window_end_us"] - ranking["window_start_us"] <= 1800 * 10**6
    assert ranking["window_end_us"] % (600 * 10**6) == 0
    assert all(delta["policy"] == "pcores-top-k" for delta in document["deltas"])


def test_the_header_says_when_the_policy_does_not_read_the_significance_floor():
    """The default policy (running) lists on its own evidence: the floor it ignores is not shown as a guard."""
    default = invoke("--trace", SPEC, "--json").stderr
    assert "policy running," in default and "significance floor 0.25 (not read by running)" in default
    pcores = invoke("--trace", SPEC, "--json", "--policy", "pcores", "--significance-floor", "0.3").stderr
    assert "significance floor 0.3," in pcores and "not read" not in pcores


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("nosuch:/tmp/x", "unknown trace format"),
        ("csv:/no/such/file.csv", "/no/such/file.csv"),
        ("synthetic:bogus=1", "unknown key"),
        ("csv", "names no path"),
    ],
)
def test_a_bad_trace_is_one_error_line(spec, words):
    result = invoke("--trace", spec)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and words in lines[0], result.stderr
    assert result.stdout == ""


def test_bad_options_are_usage_errors():
    assert invoke().exit_code == 2  # --trace is required
    assert invoke("--trace", SPEC, "--partitions", "0").exit_code == 2
    assert invoke("--trace", SPEC, "--significance-floor", "high").exit_code == 2
    assert "FORMAT:PATH" in invoke("--help").stdout


def test_a_trace_without_job_ends_is_ranked_whatever_the_job_idle_timeout(tmp_path):
    """A CSV has no job ends: its jobs are final only after the idle timeout, but their provisional z-values count
    meanwhile (issue 18), so even a timeout as long as the window finds the slow nodes and loses nothing."""
    path = write_csv(tmp_path / "tasks.csv", ("n05", "n22"), jobs=300)
    result = invoke("--trace", f"csv:{path}", "--json")
    document = json.loads(result.stdout)
    assert "csv traces carry no job ends: a job is final after 600 s" in result.stderr
    assert document["counts"]["late_samples"] == 0
    assert {e["node_id"] for d in document["deltas"] for e in d["added"]} == {"n05", "n22"}
    chosen = json.loads(invoke("--trace", f"csv:{path}", "--json", "--job-idle-timeout", "3600").stdout)
    assert chosen["counts"]["late_samples"] == 0
    assert {e["node_id"] for d in chosen["deltas"] for e in d["added"]} == {"n05", "n22"}


def test_a_file_read_in_the_wrong_format_fails_and_says_so(tmp_path):
    """Every row bad is not a run with nothing to report: the user most likely named the wrong format."""
    path = tmp_path / "batch_task.csv"
    path.write_text("".join(f"{i},{i + 60},j{i},t{i},1,Terminated,1,0.5\n" for i in range(20)))
    for command in (["run"], ["rank"]):
        result = CliRunner().invoke(cli, [*command, "--trace", f"alibaba2017:{path}"])
        assert result.exit_code == 1, result.output
        assert "all 20 rows were bad" in result.stderr and "read that file with alibaba2017-tasks:" in result.stderr


def test_a_slice_whose_rows_were_all_skipped_says_why_and_does_not_blame_the_format(tmp_path):
    """1,000 valid Google rows at time 0 (before the trace began) and one bad line: "all 1 rows were bad" with the
    wrong-format hint, rc 1; without the bad line, rc 0 and "the trace held no event". Both now name the skips."""
    import gzip

    rows = "".join(f"0,,{i // 4},{i % 4},m{i % 5},1,u,2,9,0.1,0.1,0.0,0\n" for i in range(1000))
    for name, extra in (("clean", ""), ("one-bad", "oops\n")):
        (tmp_path / name / "task_events").mkdir(parents=True)
        with gzip.open(tmp_path / name / "task_events" / "part-00000-of-00001.csv.gz", "wt") as handle:
            handle.write(rows + extra)
        result = invoke("--trace", f"google2011-events:{tmp_path / name}")
        assert result.exit_code == 1, result.output
        assert "1,000 rows were skipped (event at time 0" in result.stderr
        assert ("1 bad" in result.stderr) == bool(extra) and "all 1 rows were bad" not in result.stderr
        assert "right format" not in result.stderr  # they parsed: the format is right


def test_a_trace_of_job_events_only_says_why_nothing_is_ranked(tmp_path):
    path = tmp_path / "batch_task.csv"
    path.write_text("".join(f"{i},{i + 60},j{i},t{i},1,Terminated,1,0.5\n" for i in range(20)))
    result = invoke("--trace", f"alibaba2017-tasks:{path}")
    assert result.exit_code == 0, result.output
    assert "no task of this trace finished successfully on a node" in result.stdout


def test_settings_the_ranking_refuses_are_one_line():
    result = invoke("--trace", SPEC, "--window", "60", "--period", "600")
    assert result.exit_code == 1
    assert "invalid settings: the window (60 s) must be at least the ranking period (600 s)" in result.stderr


def test_more_bad_rows_than_examples_end_with_how_many_more(tmp_path):
    """The summary shows the first bad rows; it said nothing of the rest (6 bad rows, 5 shown, no word of the 6th)."""
    lines = [*cluster_rows(("n05",), 60, 3)] + [f"jb{i},t0,n01,100,50,SUCCEEDED" for i in range(8)]
    path = tmp_path / "tasks.csv"
    path.write_text("\n".join(lines) + "\n")
    out = invoke("--trace", f"csv:{path}", "--job-idle-timeout", "600").stdout
    shown = out.count("  bad row, ")
    assert 0 < shown < 8 and f"... and {8 - shown} more bad rows" in out


def test_a_relative_path_that_is_not_there_says_where_it_was_looked_for(tmp_path, monkeypatch):
    """The README's examples name ../shared/traces/..., which holds only from the project's directory; elsewhere
    the error named the path alone."""
    monkeypatch.chdir(tmp_path)
    result = invoke("--trace", "google2011-usage:../shared/traces/google2011-nurd-timeseries/x")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"(relative to {tmp_path}" in result.stderr and "LAGGARD_TRACES_DIR" in result.stderr
    absolute = invoke("--trace", f"csv:{tmp_path / 'missing.csv'}")
    assert absolute.exit_code == 1 and "relative to" not in absolute.stderr


def test_a_damaged_gzip_names_its_file_whether_corrupt_or_cut_short(tmp_path):
    """gzip's errors name no file ("Error: Not a gzipped file (b'no')"), and a file cut short raised EOFError,
    which click prints as a bare "Aborted!"."""
    import gzip
    import subprocess
    import sys

    whole = gzip.compress(("\n".join(cluster_rows(("n05",), 150, 3)) + "\n").encode())
    damaged = {"not.csv.gz": b"no gzip\n", "cut.csv.gz": whole[: len(whole) // 2], "tiny.csv.gz": whole[:15]}
    for name, data in damaged.items():
        path = tmp_path / name
        path.write_bytes(data)
        for command in ("run", "rank"):  # through the console script's entry, as a user runs it
            result = subprocess.run([sys.executable, "-m", "laggard", command, "--trace", f"csv:{path}"],
                                    capture_output=True, text=True, timeout=120)
            assert result.returncode == 1 and "Aborted" not in result.stderr and "Traceback" not in result.stderr
            assert "damaged gzip file" in result.stderr and str(path) in result.stderr, result.stderr


def test_events_of_jobs_already_final_are_counted_and_warned_about_not_silently_dropped():
    """A second synthetic trace after the first (as replayed into one set of topics) reuses its job ids: half its
    events came for jobs already final and vanished from every count (7,977 samples instead of ~16,000)."""
    from rich.console import Console

    from laggard.report.terminal import print_counts

    first = list(open_trace("synthetic:nodes=40,slow=3,jobs=200,seed=3"))
    second = list(open_trace("synthetic:nodes=40,slow=3,jobs=200,seed=5"))
    alone = LocalPipeline(Settings())
    list(alone.run(first))
    assert alone.late_events == 0  # a JobFinish after the declared tasks all succeeded loses nothing
    both = LocalPipeline(Settings())
    list(both.run(first + second))
    assert both.late_events > 0.3 * len(second)
    console = Console(record=True, width=200)
    counts = {"events": both.counts.events, "tasks": 0, "jobs": 0, "skipped": 0, "bad_rows": 0, "finished": {},
              "invalid": {}, "samples": both.counts.samples, "late_samples": 0, "late_events": both.late_events,
              "rankings": both.counts.rankings, "deltas": 0, "seconds": 0.0, "bad_examples": []}
    print_counts(counts, console)
    text = console.export_text()
    assert f"{both.late_events:,} events came for jobs already final" in text and "job id used again" in text

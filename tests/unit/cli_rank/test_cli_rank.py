"""`laggard rank`: the JSON document, exactness against numpy/scipy, the table, and user mistakes."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import orjson
import pytest
from click.testing import CliRunner
from scipy import stats as scipy_stats

from laggard.cli import cli
from tests.csv_cluster import HEADER, cluster_rows

SLOW = ("n03", "n17", "n29")


def write_cluster(path: Path, slow=SLOW, seed: int = 0, jobs: int = 150, extra: str = "") -> Path:
    """A task table of 40 nodes; tasks on ``slow`` nodes take 1.8x; a few failed and killed attempts."""
    path.write_text("\n".join(cluster_rows(slow, jobs, seed, failures=True)) + "\n" + extra)
    return path


def run(*args: str):
    return CliRunner().invoke(cli, ["rank", *args])


def independent_ranking(path: Path) -> dict[str, dict]:
    """numpy z-values per job, numpy/scipy node statistics, and literal P-Cores peeling."""
    jobs: dict[str, dict[str, int]] = defaultdict(dict)
    for line in path.read_text().splitlines()[1:]:
        job, task, node, start, end, status = line.split(",")
        if status == "SUCCEEDED":
            jobs[job].setdefault(task, (node, int(end) - int(start)))
    values = defaultdict(list)
    for tasks in jobs.values():
        d = np.array([duration for _, duration in tasks.values()], dtype=float)
        if len(d) >= 2 and d.std() > 0:
            for (node, _), z in zip(tasks.values(), (d - d.mean()) / d.std(), strict=True):
                values[node].append(z)
    out = {}
    for node, zs in values.items():
        v = np.array(zs)
        half = scipy_stats.t.ppf(0.975, len(v) - 1) * v.std() / math.sqrt(len(v)) if len(v) > 1 else None
        out[node] = {"n": len(v), "mean": v.mean(), "std": v.std(),
                     "ci_low": None if half is None else v.mean() - half,
                     "ci_high": None if half is None else v.mean() + half}
    intervals = {n: (s["ci_low"], s["ci_high"]) for n, s in out.items() if s["ci_low"] is not None}
    remaining, level = set(intervals), 0
    while remaining:
        sinks = {a for a in remaining
                 if not any(intervals[a][1] <= intervals[b][0] for b in remaining if b != a)}
        for node in sinks:
            out[node]["level"] = level
        remaining, level = remaining - sinks, level + 1
    return out


def test_json_agrees_with_numpy_and_scipy_to_1e_9_and_levels_are_identical(tmp_path) -> None:
    path = write_cluster(tmp_path / "tasks.csv")
    result = run("--tasks", str(path), "--min-tasks", "2", "--significance-floor", "none",
                 "--max-fraction", "1.0", "--json")
    assert result.exit_code == 0, result.output
    document = orjson.loads(result.stdout)
    assert set(document) == {"policy", "nodes", "blacklist"}
    expected = independent_ranking(path)
    assert {node["node_id"] for node in document["nodes"]} == set(expected)
    for node in document["nodes"]:
        want = expected[node["node_id"]]
        assert set(node) == {"node_id", "n", "mean", "std", "ci_low", "ci_high", "level"}
        assert node["n"] == want["n"] and node["level"] == want.get("level")
        for key in ("mean", "std", "ci_low", "ci_high"):
            assert node[key] == pytest.approx(want[key], abs=1e-9)


def test_default_policy_blacklists_exactly_the_slow_nodes(tmp_path) -> None:
    result = run("--tasks", str(write_cluster(tmp_path / "tasks.csv")), "--json")
    assert result.exit_code == 0
    assert orjson.loads(result.stdout)["blacklist"] == list(SLOW)
    result = run("--tasks", str(write_cluster(tmp_path / "equal.csv", slow=())), "--json")
    assert orjson.loads(result.stdout)["blacklist"] == []


def test_rank_takes_p_cores_whatever_the_product_default_and_refuses_a_policy_that_needs_task_events(
        tmp_path, monkeypatch) -> None:
    """The file is one window of z-values: P-Cores' question, not the running policy's (the product default, which
    needs the task events over time); asked for that one by option or setting, rank says so in one line."""
    tasks = str(write_cluster(tmp_path / "tasks.csv"))
    assert "policy pcores," in run("--tasks", tasks).stdout
    for args, env in ((("--policy", "running"), None), ((), "running")):
        if env:
            monkeypatch.setenv("LAGGARD_POLICY", env)
        result = run("--tasks", tasks, *args)
        assert result.exit_code == 1 and result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "policy running judges task events over time" in lines[0]
    monkeypatch.setenv("LAGGARD_POLICY", "pcores-top-k")  # a policy set by setting is taken as given
    assert "policy pcores-top-k," in run("--tasks", tasks).stdout
    assert orjson.loads(run("--tasks", tasks, "--json").stdout)["policy"] == "pcores-top-k"
    monkeypatch.delenv("LAGGARD_POLICY")
    assert orjson.loads(run("--tasks", tasks, "--json").stdout)["policy"] == "pcores"


def test_nodes_with_one_sample_have_null_interval_and_level(tmp_path) -> None:
    path = tmp_path / "tiny.csv"
    path.write_text(f"{HEADER}\nj,a,n1,0,10,SUCCEEDED\nj,b,n1,0,30,SUCCEEDED\nj,c,n2,0,20,SUCCEEDED\n")
    nodes = {n["node_id"]: n for n in orjson.loads(run("--tasks", str(path), "--json").stdout)["nodes"]}
    assert nodes["n2"] == {"node_id": "n2", "n": 1, "mean": 0.0, "std": 0.0, "ci_low": None, "ci_high": None,
                           "level": None}
    assert nodes["n1"]["level"] == 0


def test_top_k_policy_respects_max_fraction_and_seed(tmp_path) -> None:
    path = write_cluster(tmp_path / "tasks.csv")
    args = ["--tasks", str(path), "--policy", "pcores-top-k", "--max-fraction", "0.05", "--json"]
    first = orjson.loads(run(*args, "--seed", "3").stdout)["blacklist"]
    assert len(first) == 2 and set(first) <= set(SLOW)  # 40 nodes x 0.05
    assert orjson.loads(run(*args, "--seed", "3").stdout)["blacklist"] == first


def test_table_shows_levels_and_the_blacklist_with_reasons(tmp_path) -> None:
    result = run("--tasks", str(write_cluster(tmp_path / "tasks.csv")))
    assert result.exit_code == 0
    assert "40 nodes ranked" in result.stdout and "Blacklist (3 node(s))" in result.stdout
    for node in SLOW:
        assert f"{node}: level 0" in result.stdout


def test_bad_rows_are_counted_and_shown_with_line_numbers_and_valid_rows_kept(tmp_path) -> None:
    extra = "j1,x,n1,notanumber,5,SUCCEEDED\nj1,y,n1,9,3,SUCCEEDED\nj1,z,n1,1,2,DONE\nshort,row\n"
    path = write_cluster(tmp_path / "tasks.csv", extra=extra)
    good = len(path.read_text().splitlines()) - 1 - 4
    result = run("--tasks", str(path), "--json")
    assert result.exit_code == 0
    assert f"{good} finished attempts" in result.stderr and "4 bad rows" in result.stderr
    assert f"line {good + 2}: start_us is not an integer: 'notanumber'" in result.stderr
    assert "end_us 3 < start_us 9" in result.stderr and "unknown status 'DONE'" in result.stderr
    assert orjson.loads(result.stdout)["blacklist"] == list(SLOW)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tasks", "/nonexistent/tasks.csv"], "No such file or directory: /nonexistent/tasks.csv"),
        ([], "give exactly one of --tasks FILE.csv or --trace FORMAT:PATH"),
        (["--significance-floor", "high"], "'high' is neither a number nor 'none'"),
        (["--max-fraction", "1.5"], "--max-fraction"),
        (["--policy", "fastest"], "--policy"),
    ],
)
def test_user_mistakes_give_one_line_and_no_traceback(tmp_path, args, message) -> None:
    if args[:1] not in (["--tasks"], []):
        args = ["--tasks", str(write_cluster(tmp_path / "t.csv", jobs=3)), *args]
    result = run(*args)
    assert result.exit_code != 0
    assert message in result.output and "Traceback" not in result.output


def test_a_missing_column_is_named(tmp_path) -> None:
    path = tmp_path / "tasks.csv"
    path.write_text("job_id,task_id,node_id,start_us,status\nj,a,n1,0,SUCCEEDED\n")
    result = run("--tasks", str(path))
    assert result.exit_code == 1
    assert "lacks column(s) end_us" in result.output


def test_help_names_every_option() -> None:
    result = run("--help")
    for option in ("--tasks", "--trace", "--policy", "--min-tasks", "--significance-floor", "--max-fraction",
                   "--seed", "--json"):
        assert option in result.output


def test_trace_option_ranks_any_replayer_format() -> None:
    from producers.registry import open_trace

    spec = "synthetic:nodes=40,slow=3,jobs=150,seed=2"
    result = run("--trace", spec, "--json")
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout)["blacklist"] == open_trace(spec).ground_truth["slow_nodes"]


@pytest.mark.parametrize("spec", ["nope:/x", "csv:/nonexistent/tasks.csv"])
def test_a_bad_trace_gives_one_line(spec) -> None:
    result = run("--trace", spec)
    assert result.exit_code == 1 and result.output.startswith("Error: ") and "Traceback" not in result.output


def test_a_large_cluster_shows_the_blacklisted_nodes_first_then_the_strongest_evidence() -> None:
    """Beyond 60 nodes the table cannot show them all: the rows that matter come first, not level 0's noise."""
    result = CliRunner().invoke(cli, ["rank", "--trace", "synthetic:nodes=80,slow=2,jobs=200,seed=5"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "blacklisted first, then by the lower end of their 95% interval" in out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    listed = [i for i, line in enumerate(rows) if "BLACKLISTED" in line]
    assert listed and listed == list(range(len(listed)))  # the blacklisted rows open the table
    lows = [float(line.split("[", 1)[1].split(",", 1)[0]) for line in rows[len(listed):] if "[" in line]
    assert lows == sorted(lows, reverse=True)  # then the highest lower bounds


def test_an_empty_ranking_says_why_for_a_header_only_file_job_events_only_and_tasks_still_running(tmp_path) -> None:
    """All three said "no job had 2 or more successful tasks with different durations": a file with no row holds no
    event (refused in one line, as by every command that reads a trace), alibaba2017-tasks (job events only) names no
    node, as ``laggard run`` says, and tasks that only started finished nowhere."""
    header_only = tmp_path / "header.csv"
    header_only.write_text(HEADER + "\n")
    empty = run("--tasks", str(header_only))
    assert empty.exit_code == 1 and f"no event in csv:{header_only}: it holds no rows" in empty.output
    job_events = tmp_path / "batch_task.csv"
    job_events.write_text("".join(f"{i},{i + 60},j{i},t{i},1,Terminated,1,0.5\n" for i in range(20)))
    job_events_only = run("--trace", f"alibaba2017-tasks:{job_events}")
    assert job_events_only.exit_code == 0, job_events_only.output
    assert "no task of this trace ran on a node" in job_events_only.stdout
    running = tmp_path / "running.csv"
    running.write_text(HEADER + "\nj1,t1,n1,10,,RUNNING\nj1,t2,n2,10,,RUNNING\n")
    assert run("--tasks", str(running)).stdout.strip() == "nothing to rank: 2 task(s) started on nodes, none finished"

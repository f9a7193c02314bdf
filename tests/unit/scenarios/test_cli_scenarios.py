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
    lines = listed.stdout.splitlines()
    assert len({len(line) - len(line[len(line.split()[0]):].lstrip()) for line in lines}) == 1, listed.stdout
    chosen = invoke("--list", "--only", "cpu-2x", "--only", "hetero-1.3x-10pct")  # --list lists what --only chose
    assert [line.split()[0] for line in chosen.stdout.splitlines()] == ["cpu-2x", "hetero-1.3x-10pct"]
    assert invoke("--list", "--only", "nope").exit_code == 1
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


def test_ctrl_c_stops_a_suite_on_two_workers_and_leaves_no_worker_running() -> None:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) ran every queued run first (52 s for one seed
    of the suite), then printed "Aborted!"; the workers of a parent killed outright ran on, orphaned."""
    import os
    import signal
    import subprocess
    import sys
    import uuid
    from pathlib import Path

    marker = f"laggard-test-{uuid.uuid4().hex}"
    process = subprocess.Popen(
        [sys.executable, "-m", "laggard", "scenarios", "--seeds", "1-5", "--workers", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "LAGGARD_TEST_MARKER": marker},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # a background job would ignore it
    assert process.stderr is not None
    while "[1/" not in process.stderr.readline():  # the suite runs, in both workers
        assert process.poll() is None, process.communicate()
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=60)  # a suite of 115 runs: minutes, had it gone on
    assert process.returncode == 130 and "interrupted: no table, no plots written" in err, err
    assert "Traceback" not in err

    def marked(pid: str) -> bool:
        try:
            return marker.encode() in Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            return False

    def alive(pid: str) -> bool:
        try:  # a zombie (this machine's init reaps none) has ended
            return not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")
        except OSError:
            return False

    import time

    time.sleep(1.0)
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and marked(pid) and alive(pid)]
    assert not left, f"workers still running: {left}"


def test_mlna_on_scenarios_shorter_than_its_period_says_it_lists_none() -> None:
    """`--policy mlna` gave recall 0 on every scenario, as noop does, with no word: its period is 30 days."""
    result = CliRunner().invoke(cli, ["scenarios", "--only", "cpu-2x", "--seeds", "1", "--loop", "open",
                                      "--policy", "mlna", "--json"])
    assert result.exit_code == 0, result.output
    assert "ML-NA lists nodes once a period of 30 x 86400 s has closed" in result.stderr
    assert "these scenarios last at most 4 h: it lists none" in result.stderr


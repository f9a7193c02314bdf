"""``laggard simulate`` on one small real Google 2011 job, as a user runs it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from laggard.cli import cli

JOB = "6343048076"  # 152 tasks, 18 stragglers, p90 327 s


@pytest.fixture(scope="module")
def spec(traces_dir: Path) -> str:
    return f"google2011-usage:{traces_dir / 'google2011-nurd-timeseries' / 'timeseriesspecsixtotal' / JOB}"


def run(*args: str):
    return CliRunner().invoke(cli, ["simulate", *args])


def test_json_reports_every_method_and_setting_with_the_yardstick(spec: str, tmp_path: Path) -> None:
    plot = tmp_path / "jct.png"
    result = run("--trace", spec, "--methods", "supervised,spark", "--spares", "unlimited,0", "--repeats", "3",
                 "--json", "--plot", str(plot))  # fmt: skip
    assert result.exit_code == 0, result.output
    document = orjson.loads(result.stdout)
    rows = document["jobs"]
    methods = {"supervised", "spark-q0.75-m1.5", "spark-q0.9-m3", "perfect"}
    assert {(r["method"], r["spares"]) for r in rows} == {(m, s) for m in methods for s in ("unlimited", 0)}
    for row in rows:
        assert row["job_id"] == JOB and row["n_tasks"] == 152
        assert row["jct_base_s"] == pytest.approx(361, abs=1)  # first start to last finish in the trace
        assert row["reduction"] == pytest.approx(1 - row["jct_s"] / row["jct_base_s"])
    perfect = next(r for r in rows if r["method"] == "perfect" and r["spares"] == "unlimited")
    assert perfect["relaunches"] == 18  # exactly the stragglers
    assert set(document["summary"]) == methods
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert "JCT" in result.stderr  # progress per job on stderr


def test_speculation_never_ends_this_job_later_with_unlimited_machines(spec: str) -> None:
    result = run("--trace", spec, "--methods", "nurd,hadoop", "--spares", "unlimited", "--mode", "speculate",
                 "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    for row in orjson.loads(result.stdout)["jobs"]:
        assert row["jct_s"] <= row["jct_base_s"]


def test_same_seed_same_numbers_other_seed_other_draws(spec: str) -> None:
    args = ("--trace", spec, "--methods", "hadoop", "--spares", "unlimited", "--repeats", "2", "--json")
    first, again = run(*args), run(*args)
    other = run(*args, "--seed", "7")
    rows = [orjson.loads(r.stdout)["jobs"] for r in (first, again, other)]
    assert rows[0] == rows[1]
    assert [r["jct_s"] for r in rows[0]] != [r["jct_s"] for r in rows[2]]


def test_text_output_states_the_model_and_the_flags_left_without_a_machine(spec: str) -> None:
    result = run("--trace", spec, "--methods", "hadoop,perfect", "--spares", "0", "--repeats", "1")
    assert result.exit_code == 0, result.output
    assert "Algorithm 2" in result.stdout and "mean over jobs" in result.stdout and "0 spare" in result.stdout
    document = orjson.loads(run("--trace", spec, "--methods", "hadoop", "--spares", "0", "--repeats", "1",
                                "--json").stdout)  # fmt: skip
    hadoop = next(r for r in document["jobs"] if r["method"] == "hadoop")
    assert hadoop["unserved"] > 0  # hadoop flags more tasks than machines come free
    asked = hadoop["relaunches"] + hadoop["unserved"]
    assert f"{hadoop['relaunches']:.0f} of {asked:.0f}" in result.stdout  # one draw: whole numbers


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--spares", "lots"], "--spares takes 'unlimited' or a count of machines, not 'lots'"),
        (["--spares", "²"], "not '²'"),
        (["--methods", "nope"], "unknown method 'nope'"),
        (["--plot", "/no/such/dir/x.png"], "its directory does not exist"),
    ],
)
def test_user_mistakes_are_one_line(spec: str, args: list[str], message: str) -> None:
    result = run("--trace", spec, *args)
    assert result.exit_code != 0
    assert message in result.output and "Traceback" not in result.output


def test_a_trace_without_checkpoints_is_refused_with_the_reason() -> None:
    result = run("--trace", "synthetic:nodes=10,slow=1,jobs=20")
    assert result.exit_code != 0
    assert "has no task checkpoints" in result.output and "laggard run" in result.output


def test_the_plot_suffix_chooses_its_format(tmp_path) -> None:
    """`--plot jct.svg` wrote PNG bytes into a file named .svg; now the suffix chooses, and one it cannot is refused."""
    from click.testing import CliRunner

    from laggard.cli import cli

    svg = tmp_path / "jct.svg"
    result = CliRunner().invoke(cli, ["simulate", "--trace", "synthetic:nodes=12,slow=1,jobs=6,checkpoints=4",
                                      "--methods", "spark", "--plot", str(svg)])
    assert result.exit_code == 0, result.output
    assert svg.read_bytes().lstrip().startswith(b"<?xml") and b"<svg" in svg.read_bytes()[:2000]
    refused = CliRunner().invoke(cli, ["simulate", "--trace", "synthetic:nodes=12,slow=1,jobs=6,checkpoints=4",
                                       "--plot", str(tmp_path / "jct.txt")])
    assert refused.exit_code == 2 and "give a file ending .png, .svg or .pdf" in refused.stderr

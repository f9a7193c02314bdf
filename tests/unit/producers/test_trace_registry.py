"""open_trace: specs, clear errors, counters, and the formats it lists."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from producers import registry
from producers.registry import FORMATS, open_trace
from streams.core.events import TaskCheckpoint


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ("parquet:/x", ValueError, "unknown trace format 'parquet'.*csv"),
        ("/just/a/path", ValueError, "unknown trace format"),
        ("/data/jobs.csv", ValueError, r"a CSV file\? write csv:/data/jobs.csv"),
        ("csv", ValueError, "names no path: expected csv:PATH"),
        ("csv:", ValueError, "names no path"),
        ("csv:/no/such/file.csv", FileNotFoundError, "No such file"),
        ("google2011-events:/no/such/dir", FileNotFoundError, "No such file"),
        ("synthetic:nodes=", ValueError, "bad value for nodes"),
    ],
)
def test_bad_specs_fail_at_open_with_a_clear_error(spec: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        open_trace(spec)


def test_a_file_given_where_a_directory_is_expected_fails_at_open(tmp_path: Path) -> None:
    file = tmp_path / "a.csv"
    file.write_text("x\n")
    with pytest.raises(NotADirectoryError):
        open_trace(f"google2011-events:{file}")
    with pytest.raises(IsADirectoryError):
        open_trace(f"alibaba2018:{tmp_path}")


def test_every_listed_format_has_one_line_of_help() -> None:
    assert set(FORMATS) == {
        "google2011-events", "google2011-usage", "alibaba2018", "alibaba2017", "alibaba2017-tasks", "csv",
        "synthetic", "scenario", "drifting",
    }  # fmt: skip
    assert all(text and "\n" not in text for text in FORMATS.values())


def test_counters_follow_the_iteration_and_reset_on_a_new_one(tmp_path: Path) -> None:
    path = tmp_path / "tasks.csv"
    path.write_text(
        "job_id,task_id,node_id,start_us,end_us,status\n"
        "j1,t1,n1,1,5,SUCCEEDED\nj2,t1,n1,2,9,KILLED\nj2,t2,n1,x,9,KILLED\nj2,t3,n2,3,,\n"
    )
    trace = open_trace(f"csv:{path}")
    assert trace.events == 0
    for _ in range(2):
        events = list(trace)
        assert trace.events == len(events) == 5
        assert (trace.tasks, trace.jobs, trace.skipped, trace.bad_rows) == (3, 2, 1, 1)
        assert trace.finished == {"SUCCEEDED": 1, "KILLED": 1}
        assert trace.bad_examples == [{"file": str(path), "line": 4, "reason": "start_us is not an integer: 'x'"}]
    summary = trace.summary()
    assert summary["events"] == 5 and "ground_truth" not in summary


def test_synthetic_traces_report_their_ground_truth() -> None:
    trace = open_trace("synthetic:nodes=12,slow=2,jobs=5,onset=30,seed=9")
    list(trace)
    truth = trace.summary()["ground_truth"]
    assert len(truth["slow_nodes"]) == 2 and truth["onset_us"] == 30_000_000
    assert trace.jobs == 5


def test_the_usage_series_format_reads_the_nurd_extract(traces_dir: Path) -> None:
    job = traces_dir / "google2011-nurd-timeseries" / "timeseriesspecsixtotal" / "6343048076"
    trace = open_trace(f"google2011-usage:{job}")
    events = list(trace)
    assert trace.tasks == 152 and trace.jobs == 1  # one file per task (PROVENANCE.md)
    assert any(isinstance(e, TaskCheckpoint) for e in events)


def test_a_missing_reader_module_is_reported_as_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = importlib.import_module

    def fake_import(name: str, package: str | None = None):
        if name == "producers.readers.google_usage":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, package)

    monkeypatch.setattr(registry.importlib, "import_module", fake_import)
    with pytest.raises(ValueError, match="not available"):
        open_trace("google2011-usage:/tmp")


@pytest.mark.parametrize("name", sorted(registry.SHARED_PATHS))
def test_a_public_trace_format_without_a_path_reads_the_shared_traces(name: str, traces_dir: Path) -> None:
    """`--trace google2011-events` alone: what a new user types first reads the traces folder's copy."""
    alone = open_trace(name, traces_dir)
    named = open_trace(f"{name}:{traces_dir / registry.SHARED_PATHS[name]}")
    first = [event for _, event in zip(range(50), alone, strict=False)]
    assert first and first == [event for _, event in zip(range(50), named, strict=False)]


def test_a_public_trace_format_without_a_path_and_no_shared_traces_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="LAGGARD_TRACES_DIR") as caught:
        open_trace("google2011-events", tmp_path)
    assert caught.value.filename == str(tmp_path / "google2011-task-events")
    with pytest.raises(ValueError, match="names no path"):
        open_trace("google2011-events")  # no traces folder given: nothing to fall back on
    with pytest.raises(ValueError, match="names no path"):
        open_trace("alibaba2018", tmp_path)  # not among the shared traces

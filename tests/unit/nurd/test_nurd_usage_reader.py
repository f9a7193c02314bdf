"""The google2011-usage reader: causal features, event-time order, bad rows counted and skipped."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from producers.readers.google_usage import read_usage
from streams.core.events import JobFinish, JobStart, TaskCheckpoint, TaskFinish, TaskStart

JOB = "6343048076"  # the smallest of the four jobs


@pytest.fixture(scope="module")
def job_dir(traces_dir: Path) -> Path:
    return traces_dir / "google2011-nurd-timeseries" / "timeseriesspecsixtotal" / JOB


def _row(start_s: int, end_s: int, cpu: float, ev: int = 0, task: int = 0) -> str:
    usage = [cpu] + [0.5] * 12  # 13 usage columns
    fields = [start_s * 10**6, end_s * 10**6, JOB, task, "m1", *usage[:12], 0, 0, usage[12], ev, 0]
    return ",".join(str(f) for f in fields)


def _checkpoints(directory: Path) -> dict[str, list[TaskCheckpoint]]:
    out: dict[str, list[TaskCheckpoint]] = {}
    for event in read_usage(directory):
        if isinstance(event, TaskCheckpoint):
            out.setdefault(event.task_id, []).append(event)
    return out


def test_features_at_a_checkpoint_do_not_depend_on_later_rows(job_dir: Path, tmp_path: Path) -> None:
    source = max(job_dir.iterdir(), key=lambda f: len(f.read_text().splitlines()))  # the longest task
    rows = source.read_text().splitlines()
    assert len(rows) >= 6
    full = tmp_path / "full" / JOB
    full.mkdir(parents=True)
    shutil.copy(source, full / source.name)
    for k in (1, 3, len(rows) - 1):
        cut = tmp_path / f"cut{k}" / JOB
        cut.mkdir(parents=True)
        (cut / source.name).write_text("\n".join(rows[:k]) + "\n")
        truncated = _checkpoints(cut)[source.name]
        complete = _checkpoints(full)[source.name][:k]
        assert [(c.ts_us, c.elapsed_us, dict(c.features)) for c in truncated] == [
            (c.ts_us, c.elapsed_us, dict(c.features)) for c in complete
        ]


def test_running_means_are_weighted_by_window_length_and_counts_accumulate(tmp_path: Path) -> None:
    job = tmp_path / JOB
    job.mkdir()
    (job / "0").write_text("\n".join([_row(0, 10, 1.0), _row(10, 40, 3.0, ev=1), _row(40, 50, 0.0, ev=1)]) + "\n")
    cps = _checkpoints(job)["0"]
    assert [c.features["MCU"] for c in cps[:2]] == pytest.approx([1.0, (10 * 1.0 + 30 * 3.0) / 40])
    assert [c.features["EV"] for c in cps] == [0.0, 1.0, 2.0]
    assert [c.elapsed_us for c in cps] == [10_000_000, 40_000_000, 50_000_000]


def test_an_all_zero_usage_row_is_a_missing_measurement(tmp_path: Path) -> None:
    job = tmp_path / JOB
    job.mkdir()
    zero = ",".join(["0", "5000000", JOB, "0", "m1"] + ["0"] * 17)
    (job / "0").write_text(zero + "\n" + _row(5, 10, 2.0) + "\n")
    first, second = _checkpoints(job)["0"]
    assert set(first.features) == {"EV", "FL"}  # nothing measured yet
    assert second.features["MCU"] == 2.0  # the missing window does not dilute the mean
    assert second.elapsed_us == 10_000_000  # but it counts as running time


def test_the_real_job_replays_in_event_time_with_one_start_and_finish_per_task(job_dir: Path) -> None:
    events = list(read_usage(job_dir))
    kinds = Counter(type(e).__name__ for e in events)
    files = len(list(job_dir.iterdir()))
    assert kinds["TaskStart"] == kinds["TaskFinish"] == files == 152
    assert kinds["TaskCheckpoint"] == 819
    assert isinstance(events[0], JobStart) and events[0].declared_tasks == files
    assert isinstance(events[-1], JobFinish)
    assert [e.ts_us for e in events] == sorted(e.ts_us for e in events)
    finish = next(e for e in events if isinstance(e, TaskFinish) and e.task_id == "0")
    rows = [line.split(",") for line in (job_dir / "0").read_text().splitlines()]
    assert finish.duration_us == sum(int(r[1]) - int(r[0]) for r in rows)


def test_a_directory_of_jobs_interleaves_their_events(job_dir: Path, tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        for task in ("0", "1"):
            shutil.copy(job_dir / task, tmp_path / name / task)
    events = list(read_usage(tmp_path))
    assert sum(isinstance(e, JobStart) for e in events) == 2
    assert {e.job_id for e in events} == {"a", "b"}
    assert [e.ts_us for e in events] == sorted(e.ts_us for e in events)


def test_bad_rows_are_counted_with_file_line_and_reason_and_skipped(tmp_path: Path) -> None:
    job = tmp_path / JOB
    job.mkdir()
    lines = [
        _row(0, 10, 1.0),
        "1,2,3",  # line 2: too few columns
        _row(10, 20, 1.0).replace("m1,1.0", "m1,lots"),  # line 3: not a number
        _row(30, 20, 1.0),  # line 4: ends before it starts
        _row(20, 30, 1.0).replace("m1,1.0", "m1,nan"),  # line 5: NaN
        "",  # a blank line is nothing, not a bad row
        _row(20, 30, 1.0),
    ]
    (job / "0").write_text("\n".join(lines) + "\n")
    events = read_usage(job)
    produced = list(events)
    assert [(b.line, b.reason.split(":")[0]) for b in events.bad_rows] == [
        (2, "expected 22 columns, got 3"),
        (3, "not a number"),
        (4, "window ends before it starts (ST=30000000, ET=20000000)"),
        (5, "NaN or infinite value"),
    ]
    assert all(b.file.endswith("/0") for b in events.bad_rows)
    assert sum(isinstance(e, TaskCheckpoint) for e in produced) == 2
    assert sum(isinstance(e, TaskStart) for e in produced) == 1


def test_a_file_where_a_directory_is_needed_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("")
    with pytest.raises(ValueError, match="needs a directory"):
        read_usage(tmp_path / "x")
    with pytest.raises(FileNotFoundError):
        read_usage(tmp_path / "missing")


def test_the_traces_top_folder_finds_its_jobs_one_level_down(job_dir: Path, tmp_path: Path) -> None:
    """The shared trace's layout: PROVENANCE.md beside one folder that holds the job directories."""
    top = tmp_path / "google2011-nurd-timeseries"
    (top / "series" / "j1").mkdir(parents=True)
    (top / "PROVENANCE.md").write_text("# not a task\n")
    shutil.copy(job_dir / "0", top / "series" / "j1" / "0")
    events = list(read_usage(top))
    assert {e.job_id for e in events} == {"j1"}
    assert sum(isinstance(e, TaskStart) for e in events) == 1


def test_a_directory_without_task_files_says_what_it_looked_for(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("hello\n")
    with pytest.raises(ValueError, match="no task file"):
        read_usage(tmp_path)


def test_a_binary_file_named_by_a_number_is_a_bad_row_not_the_end_of_the_read(tmp_path: Path) -> None:
    """`--trace google2011-usage:/tmp` met a JVM's perf-data file (named by its pid) and ended with a raw "'utf-8'
    codec can't decode byte 0xca"; the task files beside such a file are read, and it is reported as skipped."""
    job = tmp_path / JOB
    job.mkdir()
    (job / "0").write_text("\n".join([_row(0, 10, 1.0), _row(10, 40, 3.0)]) + "\n")
    (job / "1").write_bytes(b"\xca\xfe\xba\xbe" + bytes(range(256)))
    trace = read_usage(job)
    events = list(trace)
    assert sum(isinstance(e, TaskCheckpoint) for e in events) == 2
    assert {e.task_id for e in events if isinstance(e, TaskStart)} == {"0"}
    assert [(Path(b.file).name, b.reason) for b in trace.bad_rows] == [("1",
                                                                          "not a text file: the whole file is skipped")]

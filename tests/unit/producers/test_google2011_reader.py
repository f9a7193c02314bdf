"""The Google 2011 event reader against the real part files and against small hand-made ones."""

from __future__ import annotations

import csv
import gzip
from collections import Counter
from pathlib import Path

import pytest

from producers.readers.common import ReadStats
from producers.readers.google2011 import read_google_events
from streams.core.events import Event, JobFinish, JobStart, Status, TaskFinish, TaskStart, validate

END_STATUS = {"2": "EVICTED", "3": "FAILED", "4": "SUCCEEDED", "5": "KILLED", "6": "LOST"}


def _raw_rows(folder: Path) -> list[list[str]]:
    rows: list[list[str]] = []
    for part in sorted(folder.glob("part-*.csv.gz")):
        with gzip.open(part, "rt", newline="") as handle:
            rows.extend(csv.reader(handle))
    return rows


def _direct_counts(trace: Path) -> Counter[str]:
    """Count what the reader should yield, straight from the raw rows, in a different way: one pass over
    all task rows sorted by time, a set of tasks with an open in-trace SCHEDULE, no state ever dropped."""
    counts: Counter[str] = Counter()
    task_rows = sorted(_raw_rows(trace / "task_events"), key=lambda row: int(row[0]))
    open_tasks: set[tuple[str, str]] = set()
    for row in task_rows:
        time, key, kind = int(row[0]), (row[2], row[3]), row[5]
        if time == 0:
            continue
        if kind == "1":
            counts["TaskStart"] += 1
            open_tasks.add(key)
        elif kind in END_STATUS and key in open_tasks:
            counts["TaskFinish:" + END_STATUS[kind]] += 1
            open_tasks.discard(key)
    for row in _raw_rows(trace / "job_events"):
        if int(row[0]) > 0 and row[3] == "0":
            counts["JobStart"] += 1
        elif int(row[0]) > 0 and row[3] in END_STATUS:
            counts["JobFinish"] += 1
    return counts


def _kind(event: object) -> str:
    if isinstance(event, TaskFinish):
        return f"TaskFinish:{event.status.value}"
    return type(event).__name__


@pytest.fixture(scope="module")
def google_dir(traces_dir: Path) -> Path:
    return traces_dir / "google2011-task-events"


@pytest.fixture(scope="module")
def first_parts(google_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Parts 0-2 of both tables, linked (not copied) into a scratch directory, to keep the unit tier quick."""
    root = tmp_path_factory.mktemp("google3")
    for table in ("task_events", "job_events"):
        (root / table).mkdir()
        for part in sorted((google_dir / table).glob("part-*.csv.gz"))[:3]:
            (root / table / part.name).symlink_to(part)
    return root


@pytest.fixture(scope="module")
def first_parts_read(first_parts: Path) -> tuple[list[Event], ReadStats]:
    stats = ReadStats()
    return list(read_google_events(first_parts, stats)), stats


def test_counts_per_kind_and_status_equal_a_direct_count_of_the_raw_rows(
    first_parts: Path, first_parts_read: tuple[list[Event], ReadStats]
) -> None:
    events, stats = first_parts_read
    counts = Counter(_kind(event) for event in events)
    assert counts == _direct_counts(first_parts)
    assert counts["TaskStart"] > 100_000 and counts["TaskFinish:SUCCEEDED"] > 10_000
    assert stats.bad_rows == 0
    assert stats.skipped > 0  # the trace begins with tasks already running at time 0


def test_real_events_are_in_time_order_valid_and_finishes_match_their_starts(
    first_parts_read: tuple[list[Event], ReadStats],
) -> None:
    running: dict[tuple[str, str], TaskStart] = {}
    previous = 0
    for event in first_parts_read[0]:
        assert event.ts_us >= previous
        previous = event.ts_us
        assert validate(event) is None, event
        if isinstance(event, TaskStart):
            running[(event.job_id, event.task_id)] = event
        elif isinstance(event, TaskFinish):
            start = running.pop((event.job_id, event.task_id))
            assert (start.attempt, start.node_id) == (event.attempt, event.node_id)
            assert event.duration_us == event.ts_us - start.ts_us


def _write_parts(root: Path, task_rows: list[str], job_rows: list[str]) -> Path:
    for table, rows in (("task_events", task_rows), ("job_events", job_rows)):
        (root / table).mkdir(parents=True)
        with gzip.open(root / table / "part-00000-of-00001.csv.gz", "wt") as handle:
            handle.write("".join(row + "\n" for row in rows))
    return root


def _task(time: int, job: str, task: int, machine: str, kind: int) -> str:
    return f"{time},,{job},{task},{machine},{kind},user,2,9,0.1,0.1,0.0,0"


def test_attempts_durations_and_machines_follow_the_latest_schedule(tmp_path: Path) -> None:
    rows = [
        _task(10, "7", 0, "m1", 1),  # SCHEDULE on m1
        _task(25, "7", 0, "m1", 2),  # EVICT after 15 us
        _task(40, "7", 0, "m2", 1),  # SCHEDULE again on m2: attempt 1
        _task(100, "7", 0, "m2", 4),  # FINISH after 60 us
    ]
    jobs = ["5,,7,0,user,2,name,logical", "100,,7,4,user,2,name,logical"]
    events = list(read_google_events(_write_parts(tmp_path, rows, jobs), ReadStats()))
    request = {"cpu_request": 0.1, "memory_request": 0.1, "priority": 9, "scheduling_class": 2}  # from the rows
    assert events == [
        JobStart("7", 5),
        TaskStart("7", "0", 0, "m1", 10, **request),
        TaskFinish("7", "0", 0, "m1", 25, 15, Status.EVICTED),
        TaskStart("7", "0", 1, "m2", 40, **request),
        TaskFinish("7", "0", 1, "m2", 100, 60, Status.SUCCEEDED),
        JobFinish("7", 100),  # after the task's finish at the same instant
    ]


def test_events_before_the_trace_are_skipped_not_guessed(tmp_path: Path) -> None:
    rows = [
        _task(0, "8", 0, "m1", 1),  # scheduled before the trace began
        _task(50, "8", 0, "m1", 4),  # its FINISH: no start seen, no duration to give
        _task(0, "8", 1, "m1", 0),  # a SUBMIT: never an event, never skipped
    ]
    stats = ReadStats()
    events = list(read_google_events(_write_parts(tmp_path, rows, ["0,,8,0,u,2,n,l"]), stats))
    assert events == []
    assert stats.skipped == 3  # the time-0 SCHEDULE, the orphan FINISH, the time-0 job SUBMIT
    assert stats.bad_rows == 0


def test_bad_rows_are_counted_with_file_and_line_and_reading_goes_on(tmp_path: Path) -> None:
    rows = [
        _task(10, "9", 0, "m1", 1),
        "11,,9,1,m1,1",  # line 2: wrong column count
        _task(12, "9", 2, "m1", 1).replace("12,", "twelve,", 1),  # line 3: not a number
        _task(30, "9", 0, "m1", 4),
    ]
    stats = ReadStats()
    root = _write_parts(tmp_path, rows, ["1,,9,0,u,2,n,l", "oops"])
    events = list(read_google_events(root, stats))
    assert [type(e).__name__ for e in events] == ["JobStart", "TaskStart", "TaskFinish"]
    assert stats.bad_rows == 3
    where = {(Path(b.file).parent.name, b.line) for b in stats.bad_examples}
    assert where == {("task_events", 2), ("task_events", 3), ("job_events", 2)}
    assert any("expected 13 columns, got 6" in b.reason for b in stats.bad_examples)


def test_a_directory_without_task_parts_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_google_events(tmp_path, ReadStats())
    with pytest.raises(FileNotFoundError):
        read_google_events(tmp_path / "missing", ReadStats())


def test_a_task_killed_just_after_its_job_ended_still_finishes(tmp_path: Path) -> None:
    rows = [_task(10, "4", 0, "m1", 1), _task(51, "4", 0, "m1", 5)]
    jobs = ["2,,4,0,u,2,n,l", "50,,4,5,u,2,n,l"]  # the job is killed at 50, its task's KILL is logged at 51
    events = list(read_google_events(_write_parts(tmp_path, rows, jobs), ReadStats()))
    assert events[-2:] == [JobFinish("4", 50), TaskFinish("4", "0", 0, "m1", 51, 41, Status.KILLED)]


def test_a_schedule_carries_its_rows_class_priority_and_requests_and_an_empty_column_is_none(tmp_path: Path) -> None:
    rows = [
        "10,,7,0,m1,1,user,3,11,0.0625,0.25,0.0,0",
        "20,,7,1,m2,1,user,,,,,,",  # columns left empty, as the trace does for unknown values
    ]
    events = list(read_google_events(_write_parts(tmp_path, rows, []), ReadStats()))
    starts = [e for e in events if isinstance(e, TaskStart)]
    assert [(e.scheduling_class, e.priority, e.cpu_request, e.memory_request) for e in starts] == [
        (3, 11, 0.0625, 0.25),
        (None, None, None, None),
    ]


def test_a_copy_without_job_events_is_a_trace_without_job_ends_and_run_says_so(tmp_path: Path) -> None:
    """A new user's copy of task_events/ alone (or an empty job_events/) publishes no JobFinish: ``run`` must take
    it as a CSV trace (jobs final once idle, and a note) instead of waiting the window's hour for each job."""
    from click.testing import CliRunner

    from laggard.cli import cli
    from producers.registry import open_trace

    rows = [_task(1_000_000 * i + 1, str(i // 4), i % 4, f"m{i % 3}", kind)
            for i in range(40) for kind in (1, 4)]
    with_jobs = _write_parts(tmp_path / "with", sorted(rows, key=lambda r: int(r.split(",")[0])),
                             ["1,,0,0,u,2,n,l"])
    without = _write_parts(tmp_path / "without", sorted(rows, key=lambda r: int(r.split(",")[0])), [])
    assert open_trace(f"google2011-events:{with_jobs}").has_job_ends
    assert not open_trace(f"google2011-events:{without}").has_job_ends
    result = CliRunner().invoke(cli, ["run", "--trace", f"google2011-events:{without}"])
    assert result.exit_code == 0, result.output
    assert f"google2011-events:{without} has no job events (no job_events/ rows), so no job ends" in result.output

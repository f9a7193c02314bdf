"""The generic task-table reader and the external sort under it."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from producers.readers import external_sort
from producers.readers.common import ReadStats
from producers.readers.csv_tasks import ignored_columns, read_csv_tasks
from producers.readers.external_sort import sort_external
from streams.core.events import Status, TaskFinish, TaskStart

HEADER = "job_id,task_id,node_id,start_us,end_us,status"


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_rows_in_any_column_order_become_starts_and_finishes_in_time_order(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "tasks.csv",
        [
            "status,end_us,start_us,node_id,task_id,job_id,attempt,task_type,cpu_mean",
            "SUCCEEDED,90,40,n2,t2,j1,1,reduce,0.5",
            "failed,30,10,n1,t1,j1,0,map,0.7",
            ",,50,n3,t3,j1,0,map,0.1",  # still running: start only
        ],
    )
    stats = ReadStats()
    events = list(read_csv_tasks(path, stats))
    assert events == [
        TaskStart("j1", "t1", 0, "n1", 10, task_type="map"),
        TaskFinish("j1", "t1", 0, "n1", 30, 20, Status.FAILED),
        TaskStart("j1", "t2", 1, "n2", 40, task_type="reduce"),
        TaskStart("j1", "t3", 0, "n3", 50, task_type="map"),
        TaskFinish("j1", "t2", 1, "n2", 90, 50, Status.SUCCEEDED),
    ]
    assert stats.skipped == 1 and stats.bad_rows == 0
    assert ignored_columns(path) == ["cpu_mean"]


def test_bad_rows_are_reported_with_line_and_reason(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "tasks.csv",
        [
            HEADER,
            "j1,t1,n1,10,30,SUCCEEDED",
            "j1,t2,n1,10,30",  # line 3: wrong column count
            "j1,t3,n1,ten,30,SUCCEEDED",  # line 4: not a number
            "j1,t4,n1,50,30,SUCCEEDED",  # line 5: ends before it starts
            "j1,t5,n1,10,30,FINISHED",  # line 6: unknown status
            ",t6,n1,10,30,SUCCEEDED",  # line 7: no job
        ],
    )
    stats = ReadStats(max_examples=3)
    events = list(read_csv_tasks(path, stats))
    assert len(events) == 2
    assert stats.bad_rows == 5
    assert [(b.line, b.reason.split(" ")[0]) for b in stats.bad_examples] == [
        (3, "expected"),
        (4, "start_us"),
        (5, "ends"),
    ]  # only the first three kept


@pytest.mark.parametrize("chunk", [1, 500_000])  # sorted runs on disk (a JSON round trip), and in memory
def test_a_repeated_row_is_read_once_and_counted_but_rows_that_differ_are_all_kept(tmp_path: Path, chunk: int,
                                                                                  monkeypatch) -> None:
    rows = ["j1,t1,n1,10,30,SUCCEEDED", "j1,t2,n2,10,,", "j1,t3,n1,10,50,SUCCEEDED"]
    path = _write(tmp_path / "tasks.csv", [
        HEADER, *rows,
        "j1,t3,n1,10,60,SUCCEEDED",  # the same attempt ending later: not a repeat, a conflict the file holds (kept)
        *rows,  # the whole table exported twice: a finished row, a running one, far from their first lines
        "j1,t1,n1,10,30,SUCCEEDED",
    ])  # fmt: skip
    monkeypatch.setattr(external_sort, "DEFAULT_CHUNK_ROWS", chunk)
    stats = ReadStats()
    events = list(read_csv_tasks(path, stats))
    assert [(type(e).__name__, e.task_id, e.ts_us) for e in events] == [
        ("TaskStart", "t1", 10), ("TaskStart", "t2", 10), ("TaskStart", "t3", 10), ("TaskStart", "t3", 10),
        ("TaskFinish", "t1", 30), ("TaskFinish", "t3", 50), ("TaskFinish", "t3", 60)]  # fmt: skip
    assert stats.skip_reasons == {"attempt did not finish in the trace (start only)": 1,  # t2, once
                                  "duplicate rows dropped, each the same as an earlier line": 4}
    assert stats.skipped == 5 and stats.bad_rows == 0


def test_lines_that_differ_only_in_an_ignored_column_are_both_kept(tmp_path: Path) -> None:
    """Two instances of one task on one node in one second of a trace with an instance column: not a repeat (a
    reviewer's case: the reader compared only the columns it uses, and dropped the second)."""
    path = _write(tmp_path / "tasks.csv", ["job_id,task_id,node_id,start_us,end_us,status,instance,cpu",
                                           "j1,t1,n1,10,30,SUCCEEDED,i1,1.5", "j1,t1,n1,10,30,SUCCEEDED,i2,3.0",
                                           "j1,t1,n1,10,30,SUCCEEDED,i2,3.0 "])  # a repeat but for a space
    stats = ReadStats()
    assert len([e for e in read_csv_tasks(path, stats) if isinstance(e, TaskStart)]) == 2
    assert stats.skip_reasons == {"duplicate rows dropped, each the same as an earlier line": 1}


def test_a_header_without_the_required_columns_fails_before_reading(tmp_path: Path) -> None:
    path = _write(tmp_path / "tasks.csv", ["job_id,task_id,start_us,end_us", "j1,t1,1,2"])
    with pytest.raises(ValueError, match="node_id, status"):
        read_csv_tasks(path, ReadStats())


def test_an_empty_file_and_a_file_without_a_header_line_say_which(tmp_path: Path) -> None:
    """Both said "header lacks column(s) job_id, task_id, ..." as if the header were merely short."""
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match="the file is empty"):
        read_csv_tasks(empty, ReadStats())
    data_first = _write(tmp_path / "data.csv", ["j1,t1,n1,10,30,SUCCEEDED"])
    with pytest.raises(ValueError, match=r"names none of the columns .* \(it reads j1, t1, n1, 10, 30, SUCCEEDED\): "
                       r"no header line, or a file of another format\?"):
        read_csv_tasks(data_first, ReadStats())


rows_strategy = st.lists(
    st.tuples(st.integers(0, 10**12), st.integers(0, 10**9), st.sampled_from(list(Status)), st.integers(0, 3)),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(rows=rows_strategy, chunk=st.integers(1, 7))
def test_every_valid_row_comes_back_once_in_time_order(
    tmp_path_factory: pytest.TempPathFactory, rows: list, chunk: int
) -> None:
    path = tmp_path_factory.mktemp("csv") / "tasks.csv"
    lines = [HEADER + ",attempt"]
    lines += [f"j{i % 3},t{i},n{i % 5},{s},{s + d},{st_.value},{a}" for i, (s, d, st_, a) in enumerate(rows)]
    _write(path, lines)
    original = external_sort.DEFAULT_CHUNK_ROWS
    external_sort.DEFAULT_CHUNK_ROWS = chunk  # exercise runs on disk
    try:
        events = list(read_csv_tasks(path, ReadStats()))
    finally:
        external_sort.DEFAULT_CHUNK_ROWS = original
    assert all(a.ts_us <= b.ts_us for a, b in itertools.pairwise(events))
    finishes = {e.task_id: e for e in events if isinstance(e, TaskFinish)}
    assert len(finishes) == len(rows)
    for i, (start, duration, status, attempt) in enumerate(rows):
        finish = finishes[f"t{i}"]
        assert (finish.duration_us, finish.status, finish.attempt) == (duration, status, attempt)
        assert finish.ts_us == start + duration


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(-5, 5), st.text(max_size=3)), max_size=50), chunk=st.integers(1, 9))
def test_external_sort_equals_sorted(rows: list[tuple[int, str]], chunk: int) -> None:
    assert list(sort_external(rows, chunk_rows=chunk)) == sorted(rows)

"""Alibaba readers: hand-made instance tables that follow the official schema documents column by column,
and the real 2017 batch_task.csv."""

from __future__ import annotations

import csv
import itertools
from collections import Counter
from pathlib import Path

import pytest

from producers.readers import external_sort
from producers.readers.alibaba import read_alibaba2017, read_alibaba2017_tasks, read_alibaba2018
from producers.readers.common import ReadStats
from streams.core.events import JobFinish, JobStart, Status, TaskFinish, TaskStart, validate

# cluster-trace-v2018 schema.txt, batch_instance: instance_name, task_name, job_name, task_type, status,
# start_time, end_time, machine_id, seq_no, total_seq_no, cpu_avg, cpu_max, mem_avg, mem_max
ROWS_2018 = [
    "ins_2,M1,j_1,1,Terminated,200,260,m_9,1,1,95.0,120.0,0.5,0.6",
    "ins_1,M1,j_1,1,Terminated,100,150,m_8,1,1,80.0,100.0,0.4,0.5",
    "ins_3,R2_1,j_1,1,Failed,120,130,m_8,1,2,50.0,60.0,0.3,0.3",
    "ins_3,R2_1,j_1,1,Terminated,140,170,m_7,2,2,50.0,60.0,0.3,0.3",
    "ins_4,M1,j_2,12,Running,300,0,m_9,1,1,,,,",
    "ins_5,M1,j_2,12,Waiting,0,0,,1,1,,,,",
    "ins_6,M1,j_2,12,Interupted,310,320,m_1,1,1,10.0,20.0,0.1,0.1",
    "ins_7,M1,j_2,12,Cancelled,305,306,m_2,1,1,10.0,20.0,0.1,0.1",
    "ins_8,M1,j_2,12,Terminated,330,340,,1,1,10.0,20.0,0.1,0.1",  # no machine: refused downstream, skipped here
]
# cluster-trace-v2017 schema.csv, batch_instance: start_timestamp, end_timestamp, job id, task id, machine id,
# status, sequence number, total sequence number, max/avg real cpu, max/avg normalized memory
ROWS_2017 = [
    "5000,5060,12,3,401,Terminated,1,1,1.2,0.9,0.02,0.01",
    "4000,4090,12,3,402,Terminated,1,1,1.1,0.8,0.02,0.01",
    "4500,0,12,4,403,Failed,1,2,0.5,0.4,0.01,0.01",
    "4600,4700,12,4,404,Terminated,2,2,1.0,0.9,0.02,0.01",
    "0,0,13,1,,Waiting,1,1,,,,",
    "-20,40,13,2,405,Terminated,1,1,1.0,1.0,0.01,0.01",
]


def _write(path: Path, rows: list[str]) -> Path:
    path.write_text("".join(row + "\n" for row in rows))
    return path


def _times_in_order(events: list) -> bool:
    return all(a.ts_us <= b.ts_us for a, b in itertools.pairwise(events))


def test_2018_instances_become_tasks_of_their_alibaba_task_in_time_order(tmp_path: Path) -> None:
    stats = ReadStats()
    events = list(read_alibaba2018(_write(tmp_path / "batch_instance.csv", ROWS_2018), stats))
    assert _times_in_order(events)
    assert events[0] == TaskStart("j_1/M1", "ins_1", 0, "m_8", 100_000_000, task_type="1")
    assert TaskFinish("j_1/M1", "ins_1", 0, "m_8", 150_000_000, 50_000_000, Status.SUCCEEDED) in events
    retry = [e for e in events if e.task_id == "ins_3"]
    assert [(type(e).__name__, e.attempt, e.node_id) for e in retry] == [
        ("TaskStart", 0, "m_8"), ("TaskFinish", 0, "m_8"), ("TaskStart", 1, "m_7"), ("TaskFinish", 1, "m_7"),
    ]  # fmt: skip
    statuses = Counter(e.status for e in events if isinstance(e, TaskFinish))
    assert statuses == {Status.SUCCEEDED: 3, Status.FAILED: 1, Status.KILLED: 2}
    assert not any(isinstance(e, TaskFinish) and e.task_id == "ins_4" for e in events)  # still running
    assert stats.skipped == 3  # the Waiting instance never started; the Running one has no finish; ins_8 no machine
    assert stats.skip_reasons["instance placed on no machine (empty machine_id)"] == 1
    assert stats.bad_rows == 0
    assert all(validate(e) is None for e in events)


def test_2017_instances_without_ids_are_named_by_line_and_before_trace_rows_skipped(tmp_path: Path) -> None:
    stats = ReadStats()
    events = list(read_alibaba2017(_write(tmp_path / "batch_instance.csv", ROWS_2017), stats))
    assert _times_in_order(events)
    assert events[0] == TaskStart("12/3", "L2", 0, "402", 4_000_000_000)
    finishes = [e for e in events if isinstance(e, TaskFinish)]
    assert [(e.task_id, e.attempt, e.duration_us, e.status) for e in finishes] == [
        ("L2", 0, 90_000_000, Status.SUCCEEDED),
        ("L4", 1, 100_000_000, Status.SUCCEEDED),
        ("L1", 0, 60_000_000, Status.SUCCEEDED),
    ]
    # Failed with end 0 (start only), Waiting (never started), started before the trace (negative time).
    assert stats.skipped == 3
    assert stats.skip_reasons["instance never started, or started before the trace"] == 2


@pytest.mark.parametrize(
    ("reader", "good", "bad", "reason"),
    [
        (read_alibaba2018, ROWS_2018[0], "ins_9,M1,j_1,1,Terminated,200,260,m_9,1,1", "expected 14 columns"),
        (read_alibaba2018, ROWS_2018[0], ROWS_2018[0].replace(",200,", ",two hundred,"), "start_time is not a number"),
        (read_alibaba2018, ROWS_2018[0], ROWS_2018[0].replace(",260,", ",190,"), "ends before it starts"),
        (read_alibaba2018, ROWS_2018[0], ROWS_2018[0].replace("Terminated", "Exploded"), "unknown status"),
        (read_alibaba2017, ROWS_2017[0], "5000,5060,12,3,401,Terminated,1,1", "expected 12 columns"),
        (read_alibaba2017, ROWS_2017[0], ROWS_2017[0].replace("5060", "50x0"), "end_timestamp is not a number"),
        (read_alibaba2017, ROWS_2017[0], ROWS_2017[0].replace("5060", "4999"), "ends before it starts"),
    ],
)
def test_bad_instance_rows_are_counted_with_line_and_reason_and_never_fatal(
    tmp_path: Path, reader, good: str, bad: str, reason: str
) -> None:
    stats = ReadStats()
    events = list(reader(_write(tmp_path / "instances.csv", [good, bad, good]), stats))
    assert len(events) == 4  # both good rows, start and finish each
    assert stats.bad_rows == 1
    assert stats.bad_examples[0].line == 2
    assert reason in stats.bad_examples[0].reason
    assert stats.bad_examples[0].file.endswith("instances.csv")


def test_large_unsorted_tables_are_sorted_through_temporary_runs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(external_sort, "DEFAULT_CHUNK_ROWS", 3)  # force many runs on disk
    rows = [f"{t},{t + 7},1,{t % 5},{t % 3},Terminated,1,1,,,," for t in range(997, 1, -13)]
    events = list(read_alibaba2017(_write(tmp_path / "batch_instance.csv", rows), ReadStats()))
    assert len(events) == 2 * len(rows)
    assert _times_in_order(events)


def _direct_task_counts(path: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    for create, end, _job, _task, _n, status, _cpu, _mem in rows:
        if int(create) <= 0 or (int(end) > 0 and int(end) < int(create)):
            continue
        counts["JobStart"] += 1
        if status in ("Terminated", "Failed", "Cancelled") and int(end) > 0:
            counts["JobFinish"] += 1
    return counts


def test_real_2017_batch_task_table_gives_job_structure(traces_dir: Path) -> None:
    path = traces_dir / "alibaba2017-batch-task" / "batch_task.csv"
    stats = ReadStats()
    events = list(read_alibaba2017_tasks(path, stats))
    assert Counter(type(e).__name__ for e in events) == _direct_task_counts(path)
    assert _times_in_order(events)
    starts = {e.job_id: e for e in events if isinstance(e, JobStart)}
    assert starts["3/4"] == JobStart("3/4", 6459 * 1_000_000, declared_tasks=15740)  # the file's first row
    assert all(e.job_id in starts for e in events if isinstance(e, JobFinish))
    assert stats.bad_rows == 1  # one task of the real file ends a second before it was created
    assert "ends before it is created" in stats.bad_examples[0].reason

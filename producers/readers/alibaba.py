"""Readers for Alibaba's batch traces: ``alibaba2018:FILE``, ``alibaba2017:FILE``, ``alibaba2017-tasks:FILE``.

Alibaba's words map to laggard's like this: an *instance* is a task (one attempt on one machine), and an
Alibaba *task* (all instances running the same binary on different input) is a job, so
``job_id = "<job>/<task>"``. Times are seconds since the trace began and become microseconds.

``alibaba2018`` reads ``batch_instance.csv`` of cluster-trace-v2018 (14 columns, no header: instance_name,
task_name, job_name, task_type, status, start_time, end_time, machine_id, seq_no, total_seq_no, cpu_avg,
cpu_max, mem_avg, mem_max). ``task_id`` is the instance name, ``attempt`` is ``seq_no - 1`` (seq_no counts
tries from 1), ``task_type`` the task type column.

``alibaba2017`` reads ``batch_instance.csv`` of cluster-trace-v2017 (12 columns, no header: start_timestamp,
end_timestamp, job id, task id, machine id, status, seq_no, total_seq_no, and four usage columns). That table
has no instance id, so ``task_id`` is ``"L<line number>"``: stable for a given file, unique per row; the
retries of one instance cannot be linked and appear as separate tasks with ``attempt = seq_no - 1``.

Each instance row yields a ``TaskStart`` at its start and, when it ended, a ``TaskFinish`` at its end.
Status: Terminated -> SUCCEEDED, Failed -> FAILED, Cancelled / Interupted (the trace's spelling) ->
KILLED; Running, Waiting and Ready have not finished (start only, if started). Counted as skipped, not
guessed: an instance with no start (0, negative or empty: not started, or started before the trace), and
the missing finish of an instance with no end time or a not-finished status. Bad rows (wrong column count,
unparsable numbers, end before start, unknown status) are counted and the first few reported.

``alibaba2017-tasks`` reads the 2017 ``batch_task.csv`` (8 columns: create time, end time, job id, task id,
number of instances, status, cpus, memory; a header line, as some copies have, is recognised and skipped):
the job-level structure only. Each row yields a ``JobStart`` at its create time with the instance count as
declared tasks, and a ``JobFinish`` at its end time when its status is final (Terminated, Failed,
Cancelled).

The tables are not in time order, so events go through ``sort_external``: up to half a million events are
sorted in memory, larger files in sorted runs on temporary disk, merged lazily (bounded memory).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from producers.readers.common import RANK, ReadStats, csv_rows, require_file, seconds_to_us
from producers.readers.external_sort import Row, sort_external
from streams.core.events import Event, JobFinish, JobStart, Status, TaskFinish, TaskStart

FINAL_STATUS = {
    "terminated": Status.SUCCEEDED,
    "failed": Status.FAILED,
    "cancelled": Status.KILLED,
    "interupted": Status.KILLED,
    "interrupted": Status.KILLED,
}
NOT_FINISHED = frozenset({"running", "waiting", "ready"})
TASK_FINAL = frozenset({"terminated", "failed", "cancelled"})

_START, _FINISH = RANK[TaskStart], RANK[TaskFinish]
_JOB_START, _JOB_FINISH = RANK[JobStart], RANK[JobFinish]


@dataclass(frozen=True, slots=True)
class Instance:
    """One parsed instance row, before it becomes events."""

    job_id: str
    task_id: str
    attempt: int
    node_id: str
    task_type: str
    status: str  # lower-case Alibaba status
    start_us: int | None
    end_us: int | None


def _time_or_none(text: str, name: str) -> int | None:
    """Microseconds, or None for the trace's "no time": empty, 0 or negative (before the trace)."""
    text = text.strip()
    if not text:
        return None
    try:
        value = seconds_to_us(text)
    except ValueError:
        raise ValueError(f"{name} is not a number: {text!r}") from None
    return value if value > 0 else None


def _attempt(seq_no: str) -> int:
    text = seq_no.strip()
    if not text:
        return 0
    if not text.isdigit():
        raise ValueError(f"seq_no is not a whole number: {text!r}")
    return max(int(text) - 1, 0)


def parse_2018(fields: list[str], line: int) -> Instance:
    """A 2018 batch_instance row; raises ValueError with the reason when it is bad."""
    _expect(fields, 14)
    return Instance(
        job_id=f"{fields[2]}/{fields[1]}",
        task_id=fields[0],
        attempt=_attempt(fields[8]),
        node_id=fields[7],
        task_type=fields[3],
        status=_status(fields[4]),
        start_us=_time_or_none(fields[5], "start_time"),
        end_us=_time_or_none(fields[6], "end_time"),
    )


def parse_2017(fields: list[str], line: int) -> Instance:
    """A 2017 batch_instance row; raises ValueError with the reason when it is bad."""
    if len(fields) == 8:  # the easy mistake: the shared 2017 trace is batch_task.csv, 8 columns
        raise ValueError("expected 12 columns, got 8: a batch_task.csv row? read that file with alibaba2017-tasks:")
    _expect(fields, 12)
    for index, name in ((2, "job id"), (3, "task id")):
        if not fields[index].strip():
            raise ValueError(f"empty {name}")
    return Instance(
        job_id=f"{fields[2].strip()}/{fields[3].strip()}",
        task_id=f"L{line}",
        attempt=_attempt(fields[6]),
        node_id=fields[4].strip(),
        task_type="",
        status=_status(fields[5]),
        start_us=_time_or_none(fields[0], "start_timestamp"),
        end_us=_time_or_none(fields[1], "end_timestamp"),
    )


def _expect(fields: list[str], count: int) -> None:
    if len(fields) != count:
        raise ValueError(f"expected {count} columns, got {len(fields)}")


def _status(text: str) -> str:
    status = text.strip().lower()
    if status not in FINAL_STATUS and status not in NOT_FINISHED:
        raise ValueError(f"unknown status {text.strip()!r}")
    return status


def read_alibaba2018(path: str | Path, stats: ReadStats) -> Iterator[Event]:
    """Events of a 2018 ``batch_instance.csv`` in event-time order (see the module doc)."""
    file = require_file(Path(path))
    return _instance_events(file, parse_2018, stats)


def read_alibaba2017(path: str | Path, stats: ReadStats) -> Iterator[Event]:
    """Events of a 2017 ``batch_instance.csv`` in event-time order (see the module doc)."""
    file = require_file(Path(path))
    return _instance_events(file, parse_2017, stats)


def _instance_events(file: Path, parse: Callable[[list[str], int], Instance], stats: ReadStats) -> Iterator[Event]:
    for row in sort_external(_instance_rows(file, parse, stats)):
        yield _instance_event(row)


def _instance_rows(file: Path, parse: Callable[[list[str], int], Instance], stats: ReadStats) -> Iterator[Row]:
    """Sortable rows ``(ts, rank, line, job, task, attempt, node, type, duration, status)``."""
    for line, fields in csv_rows(file):
        try:
            inst = parse(fields, line)
        except ValueError as exc:
            stats.bad(file, line, str(exc))
            continue
        if inst.start_us is None:
            stats.skip("instance never started, or started before the trace")
            continue
        if not inst.node_id:  # an event on node "" is refused downstream (validate): say why here
            stats.skip("instance placed on no machine (empty machine_id)")
            continue
        if inst.end_us is not None and inst.end_us < inst.start_us:
            stats.bad(file, line, f"ends before it starts ({inst.end_us} < {inst.start_us} us)")
            continue
        ident = (inst.job_id, inst.task_id, inst.attempt, inst.node_id)
        yield (inst.start_us, _START, line, *ident, inst.task_type, 0, "")
        final = FINAL_STATUS.get(inst.status)
        if final is None or inst.end_us is None:
            stats.skip("instance did not finish in the trace (start only)")
            continue
        duration = inst.end_us - inst.start_us
        yield (inst.end_us, _FINISH, line, *ident, inst.task_type, duration, final.value)


def _instance_event(row: Row) -> Event:
    ts, rank, _line, job, task, attempt, node, task_type, duration, status = row
    if rank == _START:
        return TaskStart(job, task, attempt, node, ts, task_type=task_type)
    return TaskFinish(job, task, attempt, node, ts, duration, Status(status))


def read_alibaba2017_tasks(path: str | Path, stats: ReadStats) -> Iterator[Event]:
    """Job-level events of a 2017 ``batch_task.csv`` in event-time order (see the module doc)."""
    file = require_file(Path(path))
    for ts, rank, _line, job, declared in sort_external(_task_rows(file, stats)):
        yield JobStart(job, ts, declared) if rank == _JOB_START else JobFinish(job, ts)


def _task_rows(file: Path, stats: ReadStats) -> Iterator[Row]:
    for line, fields in csv_rows(file):
        if line == 1 and fields and not fields[0].strip().lstrip("-").isdigit():
            continue  # the header line a copier added
        try:
            _expect(fields, 8)
            create = _time_or_none(fields[0], "task create time")
            end = _time_or_none(fields[1], "task end time")
            if not fields[4].strip().isdigit():
                raise ValueError(f"number of instances is not a whole number: {fields[4].strip()!r}")
            declared = int(fields[4])
            status = fields[5].strip().lower()
            if status not in TASK_FINAL and status not in NOT_FINISHED:
                raise ValueError(f"unknown status {fields[5].strip()!r}")
        except ValueError as exc:
            stats.bad(file, line, str(exc))
            continue
        job = f"{fields[2].strip()}/{fields[3].strip()}"
        if create is None:
            stats.skip("task created before the trace")
            continue
        if end is not None and end < create:
            stats.bad(file, line, f"ends before it is created ({end} < {create} us)")
            continue
        yield (create, _JOB_START, line, job, declared)
        if status in TASK_FINAL and end is not None:
            yield (end, _JOB_FINISH, line, job, None)
        else:
            stats.skip("task did not end in the trace (start only)")

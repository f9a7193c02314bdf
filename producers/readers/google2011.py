"""Reader for the raw Google clusterdata-2011-2 event tables (format ``google2011-events:DIR``).

``DIR`` holds ``task_events/`` (13 columns) and ``job_events/`` (8 columns) part files, gzip-compressed as in
the official bucket (``part-NNNNN-of-00500.csv.gz``; plain ``.csv`` works too). Column order: the trace's
``schema.csv``; event types 0 SUBMIT, 1 SCHEDULE, 2 EVICT, 3 FAIL, 4 FINISH, 5 KILL, 6 LOST, 7/8 UPDATE.

Mapping to laggard's events:

* task SCHEDULE -> ``TaskStart`` on the machine (``node_id`` = machine ID, ``task_id`` = task index,
  ``attempt`` = how many SCHEDULEs of this (job, task) were seen before, in the trace), carrying the row's
  scheduling class, priority, CPU request and memory request (None when a column is empty).
* task EVICT / FAIL / FINISH / KILL / LOST -> ``TaskFinish`` with status EVICTED / FAILED / SUCCEEDED /
  KILLED / LOST, on the machine of the latest SCHEDULE, ``duration_us`` = time since that SCHEDULE.
  SUCCEEDED means exactly Google's FINISH ("completed normally") of the attempt that began at that
  SCHEDULE: its duration excludes queueing before the SCHEDULE and every earlier attempt. A task killed
  because its job ended is KILLED, not SUCCEEDED.
* job SUBMIT -> ``JobStart`` (the trace declares no task count); job EVICT / FAIL / FINISH / KILL / LOST ->
  ``JobFinish`` (a job that was killed is as final as one that finished).
* SUBMIT and UPDATE events of tasks carry no placement and yield nothing.

Not guessed, counted as skipped instead (``ReadStats.skip_reasons`` says which): anything at time 0 (it
happened before the trace began), an end with no SCHEDULE seen in the trace, and a SCHEDULE that replaces an
attempt whose end is missing.

Streaming with bounded memory: each part is read lazily, the parts of both tables are merged in time order
with ``heapq.merge`` (the files are time-sorted, as the trace promises), and per-task state is kept only while
it can still matter: it is dropped when the task FINISHes or is KILLed, and when its job ends (at once if
the task is not running, else at the task's own end). Memory therefore follows the number of live tasks,
not the size of the trace.
"""

from __future__ import annotations

import csv
import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from producers.readers.common import ReadStats, csv_rows, open_text, require_dir
from streams.core.events import Event, JobFinish, JobStart, Status, TaskFinish, TaskStart

TASK_COLUMNS = 13
JOB_COLUMNS = 8
SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST = range(7)
END_STATUS = {
    EVICT: Status.EVICTED,
    FAIL: Status.FAILED,
    FINISH: Status.SUCCEEDED,
    KILL: Status.KILLED,
    LOST: Status.LOST,
}
_TASK_KINDS = frozenset({SCHEDULE, *END_STATUS})
_IGNORED_KINDS = frozenset({str(SUBMIT), "7", "8"})  # SUBMIT, UPDATE_PENDING, UPDATE_RUNNING
# Merge ranks: at one instant a job starts before its tasks' events and ends after them.
_JOB_START, _TASK, _JOB_END = 0, 1, 2

# (ts_us, rank, part, line, job_id, task_index, machine, event_type, request): the first four fields are unique,
# so the merge never compares the rest. ``request`` is (scheduling class, priority, CPU, memory) of a SCHEDULE.
_Request = tuple[int | None, int | None, float | None, float | None]
_Row = tuple[int, int, int, int, str, int, str, int, _Request | None]


@dataclass(slots=True)
class _TaskState:
    scheduled: int = 0  # SCHEDULEs seen so far in the trace
    start_us: int | None = None  # time of the running attempt's SCHEDULE
    node: str = ""
    job_ended: bool = False  # its job ended while it ran: forget it at its own end, whatever the end


def read_google_events(directory: str | Path, stats: ReadStats) -> Iterator[Event]:
    """The events of ``directory`` in event-time order; fills ``stats`` while iterated."""
    root = require_dir(Path(directory))
    task_parts = _parts(root / "task_events")
    job_parts = _parts(root / "job_events")
    if not task_parts:
        raise FileNotFoundError(2, "No task_events/part-*.csv[.gz] files", str(root / "task_events"))
    streams: list[Iterator[_Row]] = []
    for index, part in enumerate(job_parts):
        streams.append(_job_rows(part, index, SUBMIT, stats))
        streams.append(_job_rows(part, index, None, stats))
    offset = len(job_parts)
    streams += [_task_rows(part, offset + i, stats) for i, part in enumerate(task_parts)]
    return _events(heapq.merge(*streams), stats)


def has_job_events(directory: str | Path) -> bool:
    """Whether ``directory`` has ``job_events/`` part files with a row: without, no job ends (a copy of
    ``task_events/`` alone), so its jobs are final only once idle, as a CSV trace's. Reads one line a part."""
    for part in _parts(Path(directory) / "job_events"):
        with open_text(part) as handle:
            if any(line.strip() for line in handle):
                return True
    return False


def _parts(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.startswith("part-") and ".csv" in p.name)


def _task_rows(path: Path, part: int, stats: ReadStats) -> Iterator[_Row]:
    for line, fields in _split_rows(path):
        if len(fields) != TASK_COLUMNS:
            if fields:
                stats.bad(path, line, f"expected {TASK_COLUMNS} columns, got {len(fields)}")
            continue
        if fields[5] in _IGNORED_KINDS:  # most rows: decide before parsing numbers
            continue
        try:
            ts, task, kind = int(fields[0]), int(fields[3]), int(fields[5])
        except ValueError as exc:
            stats.bad(path, line, f"not an integer: {exc}")
            continue
        if kind == SCHEDULE:
            yield ts, _TASK, part, line, fields[2], task, fields[4], kind, _request(fields)
        elif kind in _TASK_KINDS:
            yield ts, _TASK, part, line, fields[2], task, fields[4], kind, None
        else:
            stats.bad(path, line, f"unknown event type {kind}")


def _split_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """``(row number, fields)`` of every row, an empty row as ``[]``, as ``csv.reader`` numbers and splits them.

    The trace quotes nothing: a line without a quote is split on commas, which costs a third of the csv module's
    time on these rows; a line with one goes through the csv module (a quoted field spanning lines does not
    occur in the trace and would be reported as a bad row, not joined)."""
    with open_text(path) as handle:
        for line, text in enumerate(handle, start=1):
            text = text.rstrip("\r\n")
            if '"' in text:
                yield line, next(csv.reader([text]), [])
            else:
                yield line, text.split(",") if text else []


def _job_rows(path: Path, part: int, only: int | None, stats: ReadStats) -> Iterator[_Row]:
    """SUBMIT rows when ``only`` is SUBMIT, else job end rows (two passes keep each stream rank-sorted)."""
    for line, fields in csv_rows(path):
        if len(fields) != JOB_COLUMNS:
            if only is None:  # report each bad row once, not once per pass
                stats.bad(path, line, f"expected {JOB_COLUMNS} columns, got {len(fields)}")
            continue
        try:
            ts, kind = int(fields[0]), int(fields[3])
        except ValueError as exc:
            if only is None:
                stats.bad(path, line, f"not an integer: {exc}")
            continue
        if only == SUBMIT and kind == SUBMIT:
            yield ts, _JOB_START, part, line, fields[2], -1, "", kind, None
        elif only is None and kind in END_STATUS:
            yield ts, _JOB_END, part, line, fields[2], -1, "", kind, None


def _request(fields: list[str]) -> _Request:
    """Scheduling class, priority, CPU and memory request of a task row; an empty or bad column is None."""
    try:  # the common row: all four columns are numbers
        return int(fields[7]), int(fields[8]), float(fields[9]), float(fields[10])
    except ValueError:
        pass

    def number(text: str, kind: type[int] | type[float]) -> Any:
        try:
            return kind(text) if text else None
        except ValueError:
            return None

    return number(fields[7], int), number(fields[8], int), number(fields[9], float), number(fields[10], float)


def _events(rows: Iterator[_Row], stats: ReadStats) -> Iterator[Event]:
    tasks: dict[tuple[str, int], _TaskState] = {}
    by_job: dict[str, set[int]] = {}
    for ts, rank, _part, _line, job, task, machine, kind, request in rows:
        if ts <= 0:
            stats.skip("event at time 0 (before the trace began)")
            continue
        if rank == _JOB_START:
            yield JobStart(job, ts)
        elif rank == _JOB_END:
            _forget_job(tasks, by_job, job)
            yield JobFinish(job, ts)
        elif kind == SCHEDULE:
            event = _schedule(tasks, by_job, job, task, machine, ts, stats, request)
            if event is not None:
                yield event
        else:
            end = _end(tasks, by_job, job, task, kind, ts, stats)
            if end is not None:
                yield end


def _forget_job(tasks: dict[tuple[str, int], _TaskState], by_job: dict[str, set[int]], job: str) -> None:
    """Drop the attempt counters of a job that ended; attempts still running keep theirs until they end
    (Google logs the KILL of a job's tasks just after the job's own end)."""
    running = set()
    for index in by_job.pop(job, ()):
        state = tasks[(job, index)]
        if state.start_us is None:
            del tasks[(job, index)]
        else:
            state.job_ended = True
            running.add(index)
    if running:
        by_job[job] = running


def _schedule(
    tasks: dict[tuple[str, int], _TaskState],
    by_job: dict[str, set[int]],
    job: str,
    task: int,
    machine: str,
    ts: int,
    stats: ReadStats,
    request: _Request | None = None,
) -> TaskStart | None:
    if not machine:
        stats.skip("SCHEDULE with no machine ID")
        return None
    state = tasks.get((job, task))
    if state is None:
        state = tasks[(job, task)] = _TaskState()
        by_job.setdefault(job, set()).add(task)
    elif state.start_us is not None:
        stats.skip("attempt with no end event (rescheduled while running)")
    state.scheduled += 1
    state.start_us, state.node = ts, machine
    sclass, priority, cpu, memory = request or (None, None, None, None)
    return TaskStart(job, str(task), state.scheduled - 1, machine, ts, cpu_request=cpu, memory_request=memory,
                     priority=priority, scheduling_class=sclass)  # fmt: skip


def _end(
    tasks: dict[tuple[str, int], _TaskState],
    by_job: dict[str, set[int]],
    job: str,
    task: int,
    kind: int,
    ts: int,
    stats: ReadStats,
) -> TaskFinish | None:
    state = tasks.get((job, task))
    finish = None
    if state is None or state.start_us is None:
        stats.skip("task end with no SCHEDULE in the trace")
    else:
        duration = ts - state.start_us
        finish = TaskFinish(job, str(task), state.scheduled - 1, state.node, ts, duration, END_STATUS[kind])
        state.start_us = None
    if state is not None and (kind in (FINISH, KILL) or state.job_ended):
        # The task is done for good: its attempt count is no longer needed.
        del tasks[(job, task)]
        siblings = by_job.get(job)
        if siblings is not None:
            siblings.discard(task)
            if not siblings:
                del by_job[job]
    return finish

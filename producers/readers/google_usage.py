"""Reader for the Google 2011 per-task usage series used by Nurd (format ``google2011-usage:DIR``).

``DIR`` is one job's directory (one headerless 22-column CSV file per task, named by task index) or a
directory of such job directories (or the trace's top folder, which holds one such directory; files
not named by a task index are not tasks). Each row is one usage window of the task (columns in the trace's
PROVENANCE.md: ST, ET, JI, TI, MI, 13 usage columns, SP, AT, SCPU, EV, FL).

Placement on the clock (event time, microseconds of the trace):

* ``TaskStart`` at the first row's ST, on the first row's machine.
* One ``TaskCheckpoint`` per row at that row's ET (the moment its usage is known), on the row's machine;
  ``elapsed_us`` is the running sum of ET-ST of the rows so far. Gaps between rows (a task evicted and
  rescheduled) are not counted as running time, as in Nurd's code. A row whose ET is earlier than an
  earlier checkpoint's time (nested windows) is stamped at that earlier time, so a task's events never
  go back in time.
* ``TaskFinish`` (SUCCEEDED) at the last checkpoint's time, after it, with ``duration_us`` = the sum of
  all windows. The last checkpoint therefore carries the task's complete features at the instant it
  finishes: it is what the latency model learns from, and a flag raised on it is not "before it
  finished" (the evaluation counts it as late).
* ``JobStart`` (declared tasks = number of task files) at the earliest ST of the job, ``JobFinish`` at
  the latest event time. Events of all tasks of a job, and of all jobs, are merged in event-time order
  (``heapq.merge`` of lazy per-task generators; ties: job start, task start, checkpoint, finish, job
  finish, then task index).

Features of a checkpoint are causal: the duration-weighted running mean of each usage column over the
measured rows so far (a row with every usage column 0 is a missing measurement, see ``_Features``), and
the running counts of evictions (EV) and failures (FL). Nothing after the checkpoint's
row is read into it, and rows are never weighted by the task's final latency (Nurd's code does that,
which leaks the answer).

Bad rows (wrong column count, a non-number, NaN, ET < ST, negative usage) are counted in ``bad_rows``
with file, line and reason, and skipped; they never stop the reader.
"""

from __future__ import annotations

import csv
import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from streams.core.events import Event, JobFinish, JobStart, Status, TaskCheckpoint, TaskFinish, TaskStart

COLUMNS = ("ST", "ET", "JI", "TI", "MI", "MCU", "CMU", "AMU", "UPC", "TPC", "MAXMU", "MIO", "MDK",
           "MAXCPU", "MAXIO", "CPI", "MAI", "SP", "AT", "SCPU", "EV", "FL")  # fmt: skip
# The 13 usage features of Nurd's Table 1 (SP and AT are sampling metadata, not task behaviour).
USAGE = ("MCU", "CMU", "AMU", "UPC", "TPC", "MAXMU", "MIO", "MDK", "MAXCPU", "MAXIO", "CPI", "MAI", "SCPU")
COUNTS = ("EV", "FL")
FEATURES = USAGE + COUNTS
_INDEX = {name: i for i, name in enumerate(COLUMNS)}

# Order of simultaneous events.
_JOB_START, _TASK_START, _CHECKPOINT, _FINISH, _JOB_FINISH = range(5)
# (ts_us, kind, job order, task index, row number, event): the merge never compares two events.
_Keyed = tuple[int, int, int, int, int, Event]


@dataclass(frozen=True, slots=True)
class BadRow:
    """One skipped row: where it was and why."""

    file: str
    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class _Row:
    start_us: int
    end_us: int
    machine: str
    usage: tuple[float, ...]
    ev: float
    fl: float


def _parse(fields: list[str]) -> _Row | str:
    """A row, or the reason it is bad."""
    if len(fields) != len(COLUMNS):
        return f"expected {len(COLUMNS)} columns, got {len(fields)}"
    try:
        start, end = int(float(fields[0])), int(float(fields[1]))
        values = [float(fields[_INDEX[name]]) for name in FEATURES]
    except ValueError as exc:
        return f"not a number: {exc}"
    if not all(math.isfinite(v) for v in values):
        return "NaN or infinite value"
    if start < 0 or end < start:
        return f"window ends before it starts (ST={start}, ET={end})"
    if any(v < 0 for v in values):
        return "negative usage or count"
    return _Row(start, end, fields[_INDEX["MI"]].strip(), tuple(values[: len(USAGE)]), values[-2], values[-1])


class _Features:
    """Running, duration-weighted means of the usage columns and running counts of EV and FL.

    A row whose usage columns are all zero is a missing measurement (Nurd's scripts wrote missing values
    as 0): its window counts as running time but not in the means. Until a measured row arrives the
    features hold only the counts, and the prediction methods skip such incomplete vectors.
    """

    def __init__(self) -> None:
        self.weight = 0
        self.rows = 0
        self.sums = [0.0] * len(USAGE)
        self.plain = [0.0] * len(USAGE)  # unweighted sums, while every window so far has length 0
        self.ev = 0.0
        self.fl = 0.0

    def add(self, row: _Row) -> dict[str, float]:
        self.ev += row.ev
        self.fl += row.fl
        if any(row.usage):
            window = row.end_us - row.start_us
            self.weight += window
            self.rows += 1
            self.sums = [s + u * window for s, u in zip(self.sums, row.usage, strict=True)]
            self.plain = [s + u for s, u in zip(self.plain, row.usage, strict=True)]
        features: dict[str, float] = {}
        if self.rows:
            weighted = self.weight > 0
            means = [s / self.weight for s in self.sums] if weighted else [s / self.rows for s in self.plain]
            features.update(zip(USAGE, means, strict=True))
        features["EV"] = self.ev
        features["FL"] = self.fl
        return features


@dataclass
class UsageEvents:
    """The events of a usage-series directory, in event-time order; ``bad_rows`` fills while iterating.

    An iterator (``Iterator[Event]``) with a counter of skipped rows beside it.
    """

    path: Path
    bad_rows: list[BadRow] = field(default_factory=list)
    _events: Iterator[Event] | None = None

    def __post_init__(self) -> None:
        if not self.path.exists():
            raise FileNotFoundError(2, "No such file or directory", str(self.path))
        if not self.path.is_dir():
            raise ValueError(f"google2011-usage needs a directory (one job, or one per job), not a file: {self.path}")
        jobs = job_directories(self.path)
        if not jobs:
            raise ValueError(
                f"google2011-usage found no task file (files named by task index: 0, 1, ...) in {self.path} "
                "or the directories below it"
            )
        merged = heapq.merge(*(self._job(d, order) for order, d in enumerate(jobs)))
        self._events = (item[-1] for item in merged)

    def __iter__(self) -> UsageEvents:
        return self

    def __next__(self) -> Event:
        assert self._events is not None
        return next(self._events)

    def _task(self, job_id: str, file: Path, job_order: int) -> Iterator[_Keyed]:
        rows: list[_Row] = []
        line = 0
        try:
            with file.open(newline="", encoding="utf-8") as handle:
                for line, fields in enumerate(csv.reader(handle), start=1):
                    if not fields:  # a blank line holds nothing to lose
                        continue
                    parsed = _parse(fields)
                    if isinstance(parsed, str):
                        self.bad_rows.append(BadRow(str(file), line, parsed))
                    else:
                        rows.append(parsed)
        except UnicodeDecodeError:  # a binary file whose name is a number (a JVM's perf data under /tmp)
            self.bad_rows.append(BadRow(str(file), line + 1, "not a text file: the whole file is skipped"))
            return  # rows read before the bytes that are not text would make a truncated task
        if not rows:
            return
        task_id, rank = file.name, _task_rank(file.name)
        start = TaskStart(job_id, task_id, 0, rows[0].machine, rows[0].start_us)
        yield rows[0].start_us, _TASK_START, job_order, rank, 0, start
        features, elapsed, ts = _Features(), 0, rows[0].start_us
        for seq, row in enumerate(rows, start=1):
            elapsed += row.end_us - row.start_us
            ts = max(ts, row.end_us)
            event = TaskCheckpoint(job_id, task_id, 0, row.machine, ts, elapsed, features.add(row))
            yield ts, _CHECKPOINT, job_order, rank, seq, event
        finish = TaskFinish(job_id, task_id, 0, rows[-1].machine, ts, elapsed, Status.SUCCEEDED)
        yield ts, _FINISH, job_order, rank, 0, finish

    def _job(self, directory: Path, order: int) -> Iterator[_Keyed]:
        job_id = directory.name
        files = sorted(_task_files(directory), key=lambda f: (_task_rank(f.name), f.name))
        start = min((s for s in (_first_start(f) for f in files) if s is not None), default=None)
        if start is None:
            return
        yield start, _JOB_START, order, -1, 0, JobStart(job_id, start, declared_tasks=len(files))
        last = start
        for item in heapq.merge(*(self._task(job_id, f, order) for f in files)):
            last = item[0]
            yield item
        yield last, _JOB_FINISH, order, -1, 0, JobFinish(job_id, last)


def read_usage(path: str | Path) -> UsageEvents:
    """Events of ``path`` (a job directory or a directory of job directories); see the module doc."""
    return UsageEvents(Path(path))


def job_directories(path: Path) -> list[Path]:
    """The job directories under ``path``: itself when it holds task files, else its sub-directories
    that do, else theirs one level down (the trace's own top folder: PROVENANCE.md beside a folder of
    jobs). Empty when none holds a task file."""
    if _task_files(path):
        return [path]
    subdirs = _subdirectories(path)
    jobs = [d for d in subdirs if _task_files(d)]
    if jobs:
        return jobs
    return [job for d in subdirs for job in _subdirectories(d) if _task_files(job)]


def _subdirectories(path: Path) -> list[Path]:
    return sorted(c for c in path.iterdir() if c.is_dir() and not c.name.startswith("."))


def _task_files(directory: Path) -> list[Path]:
    """Files named by a task index; anything else (README, PROVENANCE.md) is not a task."""
    return [f for f in directory.iterdir() if f.is_file() and f.name.isdigit()]


def _task_rank(name: str) -> int:
    return int(name) if name.isdigit() else -1


def _first_start(file: Path) -> int | None:
    """ST of the first good row (only to stamp JobStart before the tasks are merged)."""
    try:
        with file.open(newline="", encoding="utf-8") as handle:
            for fields in csv.reader(handle):
                parsed = _parse(fields)
                if not isinstance(parsed, str):
                    return parsed.start_us
    except UnicodeDecodeError:  # not text (``_task`` reports it)
        return None
    return None

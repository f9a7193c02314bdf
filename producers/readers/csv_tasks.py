"""Reader for a generic task table (format ``csv:FILE``): one row per task attempt.

The first line is a header naming the columns, in any order. Required: ``job_id, task_id, node_id, start_us,
end_us, status``. Optional: ``attempt`` (default 0), ``task_type`` (default empty), ``speculative``
(true/false/1/0, default false). Times are integer microseconds of the trace's clock; the file may be
gzip-compressed (``.gz``).

Each row yields a ``TaskStart`` at ``start_us`` and, when the attempt ended, a ``TaskFinish`` at ``end_us``
with ``duration_us = end_us - start_us``. ``status`` is one of SUCCEEDED, FAILED, KILLED, EVICTED, LOST (any
case); an empty status or RUNNING with an empty ``end_us`` means the attempt was still running (start only).

Other columns are ignored, and the trace reports their names in ``ignored_columns``. A feature measured
over a whole attempt has no time of observation: sent as a checkpoint it would tell a predictor what it could
only know at the end (SPEC 4 requires causal features), and sent at the finish it adds nothing the finish
does not. Traces with progress reports should be converted to a format that stamps each report (such as
``google2011-usage``).

Rows need not be sorted: events go through ``sort_external`` (in memory up to half a million events, sorted
runs on temporary disk above that). Bad rows (wrong column count, a non-integer time, end before start, an
unknown status, an empty id) are counted and the first few reported; they never stop the reader. A line that repeats
an earlier one field for field, ignored columns included (an export that wrote some lines twice), is dropped and
counted as skipped (``REPEATED``): its task would otherwise start and finish twice.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "tasks.csv"
>>> _ = path.write_text("job_id,task_id,node_id,start_us,end_us,status\\nj1,t1,n1,10,30,SUCCEEDED\\n")
>>> [type(e).__name__ for e in read_csv_tasks(path, ReadStats())]
['TaskStart', 'TaskFinish']
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from producers.readers.common import RANK, ReadStats, open_text, require_file
from producers.readers.external_sort import Row, sort_external
from streams.core.events import Event, Status, TaskFinish, TaskStart

REQUIRED = ("job_id", "task_id", "node_id", "start_us", "end_us", "status")
OPTIONAL = ("attempt", "task_type", "speculative")
_RUNNING = frozenset({"", "RUNNING"})
_TRUE = frozenset({"1", "true", "yes", "y", "t"})
_FALSE = frozenset({"", "0", "false", "no", "n", "f"})
_START, _FINISH = RANK[TaskStart], RANK[TaskFinish]
REPEATED = "duplicate rows dropped, each the same as an earlier line"
UNFINISHED = "attempt did not finish in the trace (start only)"
_SEP = "\x1f"  # between a start row's finish and its line's fields (``_line_key``)


def header_of(path: str | Path) -> list[str]:
    """The column names of ``path``; raises ValueError when a required column is missing."""
    with open_text(require_file(Path(path))) as handle:
        first = handle.readline()
    if not first:
        raise ValueError(f"{path}: the file is empty: its first line must name the columns {', '.join(REQUIRED)}")
    names = [name.strip() for name in next(csv.reader([first]), [])]
    missing = [name for name in REQUIRED if name not in names]
    if len(missing) == len(REQUIRED):  # data where the header should be, a blank line, or another format's header
        shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        raise ValueError(f"{path}: the first line names none of the columns {', '.join(REQUIRED)} (it reads "
                         f"{shown or 'nothing'}): no header line, or a file of another format?")
    if missing:
        raise ValueError(f"{path}: header lacks column(s) {', '.join(missing)}; it needs {', '.join(REQUIRED)}")
    return names


def ignored_columns(path: str | Path) -> list[str]:
    """Columns of ``path`` that the reader does not use."""
    return [name for name in header_of(path) if name not in REQUIRED and name not in OPTIONAL]


def read_csv_tasks(path: str | Path, stats: ReadStats) -> Iterator[Event]:
    """Events of the task table ``path`` in event-time order (see the module doc)."""
    file = Path(path)
    names = header_of(file)  # fails now, not at the first event, when the header is wrong
    return (_event(row) for row in _without_repeats(sort_external(_rows(file, names, stats)), stats))


def _without_repeats(rows: Iterator[Row], stats: ReadStats) -> Iterator[Row]:
    """The sorted rows but those of a file line that repeats an earlier line (``REPEATED``); a kept line with no
    finish is counted (``UNFINISHED``) here, once. A start row carries its line's finish and fields (``_line_key``),
    so two starts equal but for the line number come from equal lines; equal lines start at the same time, so only
    one timestamp's starts are held, and a dropped start's finish is dropped by its line."""
    at: int | None = None
    starts: set[Row] = set()
    dropped: set[int] = set()
    for row in rows:
        if row[1] == _FINISH:
            if row[2] in dropped:
                dropped.discard(row[2])
            else:
                yield row
            continue
        if row[0] != at:
            at, starts = row[0], set()  # equal lines start together: earlier times can hold none of their repeats
        key, unfinished = row[3:], row[-1].startswith(_SEP)  # ``_line_key``: no finish before the separator
        if key in starts:
            stats.skip(REPEATED)
            if not unfinished:  # its finish is dropped too
                dropped.add(row[2])
            continue
        starts.add(key)
        if unfinished:
            stats.skip(UNFINISHED)
        yield row


def _rows(file: Path, names: list[str], stats: ReadStats) -> Iterator[Row]:
    index = {name: i for i, name in enumerate(names)}
    with open_text(file) as handle:
        reader = csv.reader(handle)
        next(reader, None)
        for line, fields in enumerate(reader, start=2):
            if not fields:
                continue
            try:
                yield from _parse(fields, index, line)
            except ValueError as exc:
                stats.bad(file, line, str(exc))


def _parse(fields: list[str], index: dict[str, int], line: int) -> list[Row]:
    """The start row and, when ended, the finish row of one attempt; ValueError with the reason if bad."""
    if len(fields) != len(index):
        raise ValueError(f"expected {len(index)} columns, got {len(fields)}")
    job, task, node = (_value(fields, index, name) for name in ("job_id", "task_id", "node_id"))
    if not job or not task or not node:  # a task on node "" would be ranked as a node of its own
        raise ValueError("empty job_id, task_id or node_id")
    start = _integer(fields, index, "start_us")
    attempt = _integer(fields, index, "attempt") if _value(fields, index, "attempt") else 0
    if start < 0 or attempt < 0:
        raise ValueError("negative start_us or attempt")
    speculative = _flag(_value(fields, index, "speculative"))
    ident = (job, task, attempt, node)
    started = (start, _START, line, *ident, _value(fields, index, "task_type"), speculative)
    status, end_text = _value(fields, index, "status").upper(), _value(fields, index, "end_us")
    if end_text == "" and status in _RUNNING:
        return [(*started, _line_key(fields, ""))]
    if status not in Status.__members__:
        raise ValueError(f"unknown status {status!r} (expected one of {', '.join(Status.__members__)})")
    end = _integer(fields, index, "end_us")
    if end < start:
        raise ValueError(f"ends before it starts (end_us {end} < start_us {start})")
    return [(*started, _line_key(fields, f"{end} {status}")), (end, _FINISH, line, *ident, "", end - start, status)]


def _line_key(fields: list[str], finish: str) -> str:
    """A start row's last field (``_event`` does not read it): its line's finish (empty when it has none), then every
    field of the line, ignored columns too, so ``_without_repeats`` drops a line only when it repeats another whole."""
    return finish + _SEP + _SEP.join(field.strip() for field in fields)


def _value(fields: list[str], index: dict[str, int], name: str) -> str:
    position = index.get(name)
    return fields[position].strip() if position is not None else ""


def _integer(fields: list[str], index: dict[str, int], name: str) -> int:
    text = _value(fields, index, name)
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} is not an integer: {text!r}") from None


def _flag(text: str) -> bool:
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"speculative is not true/false: {text!r}")


def _event(row: Row) -> Event:
    ts, rank, _line, job, task, attempt, node, task_type, extra, status = row
    if rank == _START:
        return TaskStart(job, task, attempt, node, ts, speculative=bool(extra), task_type=task_type)
    return TaskFinish(job, task, attempt, node, ts, extra, Status(status))

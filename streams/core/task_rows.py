"""Task events as a ranking that watches them takes them: one row of plain values per event, sent in columns.

Under a policy whose detector watches the task events (``watches_tasks``: the running-task detector) every valid
task event crosses to the one ranking. Sent as the events' own Avro bytes (``TaskEventBatch``) the ranking decoded
every event a second time into an object, then took six values from it: on Google 2011 that decoding was a fifth
of the ranking's serial time in a Kafka worker (issue 18). A ``TaskRows`` record carries those values in columns
(fastavro reads an array of longs or strings at C speed) for one run of events of one source partition:

* ``kinds``: ``START``; ``FINISHED`` (succeeded) or ``ENDED`` (failed, killed, evicted, lost: not a measure of its
  node's speed); ``CHECKPOINT`` (with a usable ``progress`` feature, in millionths in ``progress_ppm``); ``SEEN``
  (a checkpoint without one, or after ``MAX_ELAPSED_US``: it still dates the ranking's first boundary, as the event
  did);
* ``values``: the duration of a finish, the elapsed time of a ``CHECKPOINT``, -1 for a start and a ``SEEN``.

``task_row`` is the one projection from an event to its row; ``TaskLog.observe`` takes an event through it too, so
the ranking of a Kafka worker (rows) and of ``laggard run`` (events) take the same values.

>>> from streams.core.events import Status, TaskCheckpoint, TaskFinish, TaskStart
>>> task_row(TaskStart("j", "t", 0, "n1", 5))
(5, 0, 'j', 't', 'n1', -1, 0)
>>> task_row(TaskFinish("j", "t", 0, "n1", 50, 45, Status.KILLED))
(50, 2, 'j', 't', 'n1', 45, 0)
>>> task_row(TaskCheckpoint("j", "t", 0, "n1", 20, 15, {"progress": 0.25}))
(20, 3, 'j', 't', 'n1', 15, 250000)
>>> rows = rows_record("task-events:3", [(7, TaskStart("j", "t", 0, "n1", 5)),
...                                      (9, TaskCheckpoint("j", "t", 0, "n1", 9, 4, {"cpu": 1.0}))])
>>> rows.offsets, rows.kinds, row_problem(*rows.row(1))
((7, 9), (0, 4), None)
>>> row_problem(5, CHECKPOINT, "j", "t", "n1", 0, 250_000)
'checkpoint with elapsed_us 0 and progress 250000 ppm'
"""

from __future__ import annotations

from collections.abc import Iterable

from streams.core.events import Status, TaskEvent, TaskFinish, TaskRows, TaskStart

START, FINISHED, ENDED, CHECKPOINT, SEEN = range(5)
PPM = 1_000_000  # progress in millionths
# A checkpoint's elapsed time and progress are buffered as elapsed << 20 | ppm in a 64-bit checkpoint field: a task
# reporting after ~102 days (past this) projects nothing; its report only dates the ranking's start (SEEN).
MAX_ELAPSED_US = 1 << 43

# (ts_us, kind, job, task, node, value, progress_ppm)
Row = tuple[int, int, str, str, str, int, int]


def task_row(event: TaskEvent) -> Row:
    """The row of a valid task event (module text)."""
    if isinstance(event, TaskStart):
        return event.ts_us, START, event.job_id, event.task_id, event.node_id, -1, 0
    if isinstance(event, TaskFinish):
        kind = FINISHED if event.status is Status.SUCCEEDED else ENDED
        return event.ts_us, kind, event.job_id, event.task_id, event.node_id, event.duration_us, 0
    progress = event.features.get("progress")
    if progress is None or not 0 < progress <= 1 or not 0 < event.elapsed_us < MAX_ELAPSED_US:
        return event.ts_us, SEEN, event.job_id, event.task_id, event.node_id, -1, 0
    return event.ts_us, CHECKPOINT, event.job_id, event.task_id, event.node_id, event.elapsed_us, round(progress * PPM)


def row_problem(ts: int, kind: int, job: str, task: str, node: str, value: int, ppm: int) -> str | None:
    """Why a ranking must refuse this row, as ``validate`` would refuse the event it stands for; None if valid."""
    if ts < 0:
        return f"negative ts_us: {ts}"
    if not job or not task:
        return "empty job_id or task_id"
    if not node:
        return "empty node_id"
    if kind in (FINISHED, ENDED):
        if value < 0:
            return f"negative duration_us: {value}"
        if value > ts:
            return f"finish before start: duration_us {value} > ts_us {ts}"
    elif kind == CHECKPOINT:
        if not 0 < value < MAX_ELAPSED_US or not 0 <= ppm <= PPM:
            return f"checkpoint with elapsed_us {value} and progress {ppm} ppm"
    elif kind not in (START, SEEN):
        return f"unknown task row kind {kind}"
    return None


def rows_record(source: str, read: Iterable[tuple[int, TaskEvent]]) -> TaskRows:
    """The ``TaskRows`` of valid task events read at (offset, event) on ``source`` (``topic:partition``)."""
    pairs = list(read)
    rows = [task_row(event) for _, event in pairs]
    return TaskRows(source, tuple([offset for offset, _ in pairs]), tuple([row[0] for row in rows]),
                    tuple([row[1] for row in rows]), tuple([row[2] for row in rows]), tuple([row[3] for row in rows]),
                    tuple([row[4] for row in rows]), tuple([row[5] for row in rows]), tuple([row[6] for row in rows]))

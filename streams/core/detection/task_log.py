"""The running-task detector's log of task events (``streams.core.detection.running``): starts, finishes and progress
reports buffered as they arrive, applied to its ``TaskTable`` in event-time order at each boundary, and the durations
the reports project for tasks still running.

Events are applied in event-time order at the boundary, so the table at ``B`` holds the tasks started before ``B``
whatever the arrival order (as long as every event before ``B`` arrived). Events of one time go in an order that does
not depend on their arrival: a Kafka worker's ranking gets the partitions' events interleaved otherwise than a trace
gives them, and the table's row order decides the order of its float sums.

>>> from streams.core.events import Status, TaskCheckpoint, TaskFinish, TaskStart
>>> log = TaskLog()
>>> log.observe(TaskFinish("j", "a", 0, "n1", 50, 40, Status.SUCCEEDED))  # arrives before its start
>>> log.observe(TaskStart("j", "a", 0, "n1", 10))
>>> log.observe(TaskStart("j", "b", 0, "n2", 12))
>>> log.observe(TaskCheckpoint("j", "b", 0, "n2", 32, 20, {"progress": 0.25}))
>>> log.apply_before(60)
>>> [column.tolist() for column in log.table.arrays()], log.projected, log.first_us
([[0, 0], [0, 1], [10, 12], [40, -1]], {('j', 'b'): 80}, 10)
"""

from __future__ import annotations

import operator
from typing import Any

from streams.core.detection.task_table import TaskTable
from streams.core.events import Event, TaskCheckpoint, TaskFinish, TaskStart
from streams.core.task_rows import CHECKPOINT, FINISHED, SEEN, START, task_row

_PPM_BITS = 20  # a buffered checkpoint holds elapsed_us << 20 | progress in millionths
_TIE_ORDER = operator.itemgetter(0, 1, 3, 4, 2)  # a buffered event: time, kind, job, task, then arrival

# (ts, kind as its row's, seq, job, task, node, duration or checkpoint)
Buffered = tuple[int, int, int, str, str, str, int]


class TaskLog:
    """Task events buffered by event time and applied to ``table`` before each boundary; ``projected``: per running
    task, the duration its last progress report projects (reports from ``min_progress`` done on; with
    ``recent_rate`` the rest of the task at its rate since the previous report, see ``_checkpoint``)."""

    def __init__(self, min_progress: float = 0.1, recent_rate: bool = True) -> None:
        self.min_progress, self.recent_rate = min_progress, recent_rate
        self.table = TaskTable()
        self.projected: dict[tuple[str, str], int] = {}  # running task -> the duration its last report projects
        self.first_us: int | None = None  # the first event time seen
        self._reported: dict[tuple[str, str], tuple[int, float]] = {}  # running task -> its last (elapsed, progress)
        self._buffer: list[Buffered] = []
        self._seq = 0

    def observe(self, event: Event) -> None:
        """A task event (start, finish, or a checkpoint with a ``progress`` feature; job events are ignored),
        any order within a period: its row (``task_rows.task_row``), as a Kafka worker's ranking takes it."""
        if isinstance(event, TaskStart | TaskFinish | TaskCheckpoint):
            self.observe_row(*task_row(event))

    def observe_row(self, ts: int, kind: int, job: str, task: str, node: str, value: int, ppm: int) -> None:
        """A task event as its row (``streams.core.task_rows``); a checkpoint without a usable progress (``SEEN``)
        is ignored."""
        if kind == CHECKPOINT:
            value = value << _PPM_BITS | ppm
        elif kind == SEEN:
            return
        self._seq += 1
        self.first_us = ts if self.first_us is None else min(self.first_us, ts)
        self._buffer.append((ts, kind, self._seq, job, task, node, value))

    def apply_before(self, end: int) -> None:
        """Apply every buffered event before ``end`` to the table, in event-time order."""
        # An unordered list, split at the boundary, then sorted: the sort's order is total (arrival, seq, breaks the
        # last ties: unique, as ``observe`` numbers events and snapshots keep them), so it is the order a heap's
        # pushes and pops gave (session 27: they cost more than the sort).
        due = self._buffer
        if any(item[0] >= end for item in due):
            due, self._buffer = [item for item in due if item[0] < end], [item for item in due if item[0] >= end]
        else:
            self._buffer = []
        # Arrival (seq) decides only among one task's own events, from one partition.
        due.sort(key=_TIE_ORDER)
        for ts, kind, _, job, task, node, duration in due:
            if kind == START:
                self.table.put(job, task, node, ts, -1)
            elif kind == CHECKPOINT:
                self._checkpoint(self.table.key(job, task), duration >> _PPM_BITS,
                                 (duration & ((1 << _PPM_BITS) - 1)) / 1e6)
            else:
                self.projected.pop((job, task), None)
                self._reported.pop((job, task), None)
                if kind == FINISHED:
                    self.table.put(job, task, node, ts - duration, duration)
                else:
                    self.table.drop(job, task)  # failed or killed: not a measure of the node's speed

    def _checkpoint(self, key: tuple[str, str], elapsed: int, progress: float) -> None:
        """The duration a task's report projects: ``elapsed / progress``, or with ``recent_rate`` ``elapsed + (1 -
        progress) / rate`` at its rate since its previous report (a task that slows down when its node does shows it
        at its next report, not diluted by the healthy part of its run); reports below ``min_progress`` only set the
        starting point of the next one's rate."""
        before = self._reported.get(key)
        self._reported[key] = (elapsed, progress)
        if progress < self.min_progress:
            return
        projected = elapsed / progress
        if self.recent_rate and before is not None and progress > before[1] and elapsed > before[0]:
            rate = (progress - before[1]) / (elapsed - before[0])
            # a creeping report (a tiny step) must not project decades: no further than the mean rate's bound
            projected = min(elapsed + (1.0 - progress) / rate, elapsed / self.min_progress)
        self.projected[key] = round(projected)

    def compact(self, horizon: int, running_horizon: int) -> None:
        """Forget finished tasks started before ``horizon`` and running ones before ``running_horizon``
        (``TaskTable.compact``), with their projections."""
        if self.table.compact(horizon, running_horizon):
            self.projected = {key: d for key, d in self.projected.items() if self.table.has(*key)}
            self._reported = {key: r for key, r in self._reported.items() if self.table.has(*key)}

    def snapshot(self) -> dict[str, Any]:
        return {"buffer": [list(item) for item in sorted(self._buffer)], "seq": self._seq,
                "tasks": self.table.rows(), "first": self.first_us,
                "projected": [[job, task, d] for (job, task), d in self.projected.items()],
                "reported": [[job, task, e, p] for (job, task), (e, p) in self._reported.items()]}

    def restore(self, state: dict[str, Any], checkpoints: bool = True) -> None:
        """``checkpoints``: the snapshot's buffered progress reports are in this encoding (a version 1 detector
        snapshot's are not, and are left out)."""
        self._buffer = [(int(a), int(b), int(c), str(d), str(e), str(f), int(g)) for a, b, c, d, e, f, g
                        in state["buffer"] if checkpoints or b != CHECKPOINT]
        self._seq = int(state["seq"])
        self.table = TaskTable()
        for job, task, node, start, duration in state["tasks"]:
            self.table.put(str(job), str(task), str(node), int(start), int(duration))
        self.first_us = None if state["first"] is None else int(state["first"])
        self.projected = {(str(j), str(t)): int(d) for j, t, d in state.get("projected", [])}
        self._reported = {(str(j), str(t)): (int(e), float(p)) for j, t, e, p in state.get("reported", [])}

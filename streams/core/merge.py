"""A partition's two event streams in one order, whatever their interleaving on arrival.

A partition's events reach a worker through two topics, ``task-events`` and ``job-events``, and the consumer
interleaves them as it fetches (a catch-up can read thousands of one topic's records before the other's). What
a stage computes must not depend on that. So ``MergeBuffer`` holds events and releases them in a fixed order
(time, then JobStart before task events before JobFinish, then each stream's own order) once both streams have
passed their time: the watermark. ``NormalizeStage`` (statistics) and ``PredictStage`` (prediction) each keep
one and apply what it releases.

The watermark is the lower of the two streams' latest times, with three exceptions. A job stream that sent
nothing yet holds nothing back unless ``wait_for_job_events`` (a Kafka worker's job stream exists, its first
record may be in flight; a source without job events must not wait for it). A job stream its shell declared
idle (``mark_job_stream_idle``: silent while the task events went on, a wall-clock judgement the core cannot
make) holds nothing back until its next event. And a ``time_ordered`` source (a trace read in event-time
order in-process) has passed every time before its latest event, whichever stream that came from. The
watermark never goes back: an event behind it (after idleness) is released at once, and only then can the
order depend on arrival.

>>> from streams.core.events import JobFinish, JobStart, TaskStart
>>> merge = MergeBuffer(wait_for_job_events=True)
>>> for event in (TaskStart("j", "t0", 0, "n0", 20), JobFinish("j", 20), JobStart("j", 10)):
...     merge.receive(event)
>>> merge.advance(), [type(e).__name__ for e in merge.release()]  # the job stream has passed 20, not the tasks
(20, ['JobStart'])
>>> merge.receive(TaskStart("k", "t0", 0, "n1", 30)); merge.advance(), merge.job_stream_lag_us
(20, 10)
>>> merge.mark_job_stream_idle(); merge.advance(), [type(e).__name__ for e in merge.release()]
(30, ['TaskStart', 'JobFinish'])
"""

from __future__ import annotations

import dataclasses
import heapq
import operator
from collections.abc import Callable, Iterator
from typing import Any

from streams.core.events import Event, JobFinish, JobStart, Status, TaskCheckpoint, TaskFinish, TaskStart

# Events of one timestamp are applied in this order, then in their own stream's order: a total order that
# does not depend on how the two topics interleaved on arrival.
KIND_ORDER = {JobStart: 0, TaskStart: 1, TaskCheckpoint: 1, TaskFinish: 1, JobFinish: 2}
TASK_KIND = 1


class MergeBuffer:
    """Events of one partition in, the same events out in the merged order as the watermark passes them."""

    def __init__(self, wait_for_job_events: bool = False, time_ordered: bool = False) -> None:
        self.wait_for_job_events = wait_for_job_events
        self.time_ordered = time_ordered
        self._pending: list[tuple[int, int, int, Event]] = []  # heap of (ts, kind order, arrival, event)
        self._arrivals = 0
        self._job_events = 0  # received since made or restored: a shell tells a silent job stream by it
        self._task_watermark = -1
        self._job_watermark: int | None = None  # None until a job event is seen
        self._job_idle = False  # the job stream was declared idle and has sent nothing since
        self._applied = -1  # the highest watermark used so far: it never goes back

    @property
    def watermark(self) -> int:
        """Every event before this time can be released (-1: nothing yet)."""
        job = self._job_watermark
        if self.time_ordered:
            current = max(self._task_watermark, -1 if job is None else job)
        elif self._job_idle:
            current = self._task_watermark
        elif job is None:
            current = -1 if self.wait_for_job_events else self._task_watermark
        else:
            current = min(self._task_watermark, job)
        return max(current, self._applied)

    @property
    def applied(self) -> int:
        """The watermark of the last ``advance`` (-1: none yet)."""
        return self._applied

    @property
    def task_watermark(self) -> int:
        """The latest task event time seen (-1: none yet)."""
        return self._task_watermark

    @property
    def job_watermark(self) -> int | None:
        """The latest job event time seen (None: none yet)."""
        return self._job_watermark

    @property
    def job_stream_idle(self) -> bool:
        return self._job_idle

    @property
    def job_events(self) -> int:
        """How many job events were received since this buffer was made or restored (not saved)."""
        return self._job_events

    @property
    def job_stream_lag_us(self) -> int:
        """How far the task events have run ahead of what can be released (the job stream holds them back)."""
        return max(0, self._task_watermark - self.watermark) if self._task_watermark >= 0 else 0

    @property
    def end_us(self) -> int:
        """Just after the latest event seen of either stream (0: none yet)."""
        return max(self._task_watermark, self._job_watermark or -1) + 1

    def __len__(self) -> int:
        return len(self._pending)

    def receive(self, event: Event) -> None:
        """Hold ``event`` until the watermark passes it; a job event ends the job stream's idleness."""
        kind, ts = KIND_ORDER[type(event)], event.ts_us
        if kind != TASK_KIND:
            self._job_watermark = max(self._job_watermark if self._job_watermark is not None else -1, ts)
            self._job_idle = False
            self._job_events += 1
        elif ts > self._task_watermark:
            self._task_watermark = ts
        self._arrivals += 1
        heapq.heappush(self._pending, (ts, kind, self._arrivals, event))

    def mark_job_stream_idle(self) -> None:
        """The job stream is silent (the shell's judgement): stop waiting for it until its next event."""
        self._job_idle = True

    def advance(self) -> int:
        """Fix the watermark the next releases go up to, and return it."""
        self._applied = self.watermark
        return self._applied

    def advance_past_all(self) -> int:
        """End of a finite source: fix the watermark past every event seen (``end_us``), and return it. It does
        not go back: an event after this one is late and released at once, not held behind the ones released."""
        self._applied = max(self._applied, self.end_us)
        return self._applied

    def next_ts(self) -> int | None:
        """The time of the next event in the merged order (None: nothing held)."""
        return self._pending[0][0] if self._pending else None

    def pop(self) -> Event:
        """The next event in the merged order, whatever the watermark (the caller checked ``next_ts``)."""
        return heapq.heappop(self._pending)[3]

    def release(self, before: int | None = None) -> Iterator[Event]:
        """The held events before ``before`` (default: the last ``advance``'s watermark), in the merged order."""
        limit = self._applied if before is None else before
        while self._pending and self._pending[0][0] < limit:
            yield heapq.heappop(self._pending)[3]

    def snapshot(self) -> dict[str, Any]:
        """The held events and the watermarks (idleness is not saved: a restarted shell judges it again)."""
        # (ts, kind, arrival) is unique per item (arrival alone is), so plain tuple order never compares events
        pending = [[ts, kind, arrival, type(e).__name__, event_row(e)] for ts, kind, arrival, e in
                   sorted(self._pending)]
        return {"pending": pending, "arrivals": self._arrivals, "task_watermark": self._task_watermark,
                "job_watermark": self._job_watermark, "applied": self._applied}

    def restore(self, state: dict[str, Any]) -> None:
        self._pending = [(int(ts), int(kind), int(arrival), event_from_row(name, row))
                         for ts, kind, arrival, name, row in state["pending"]]
        heapq.heapify(self._pending)
        self._arrivals = int(state["arrivals"])
        self._task_watermark = int(state["task_watermark"])
        self._job_watermark = None if state["job_watermark"] is None else int(state["job_watermark"])
        self._applied = int(state["applied"])
        self._job_events = 0
        self._job_idle = False  # idleness is a wall-clock judgement: a restarted shell makes it again


_EVENT_TYPES: dict[str, type] = {t.__name__: t for t in (TaskStart, TaskCheckpoint, TaskFinish, JobStart, JobFinish)}
# Each type's fields in order, read in one call: a checkpoint writes every held event (a catch-up held ~50 k, and
# ``dataclasses.fields`` per event was 40 % of a statistics worker's time in session 10's profile).
_FIELDS: dict[type, Callable[[Any], tuple[Any, ...]]] = {
    t: operator.attrgetter(*(f.name for f in dataclasses.fields(t))) for t in _EVENT_TYPES.values()}


def event_row(event: Event) -> list[Any]:
    """``event`` as plain JSON-able values (``event_from_row`` makes it again)."""
    row = list(_FIELDS[type(event)](event))
    if isinstance(event, TaskFinish):
        row[-1] = event.status.value
    if isinstance(event, TaskCheckpoint):
        row[-1] = dict(event.features)
    return row


def event_from_row(name: str, row: list[Any]) -> Event:
    event_type = _EVENT_TYPES[name]
    if event_type is TaskFinish:
        row = [*row[:-1], Status(row[-1])]
    event: Event = event_type(*row)
    return event

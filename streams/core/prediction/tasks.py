"""What a job's prediction methods know at a moment: tasks started, running vectors, finished durations.

Every method of this package keeps one ``JobTasks`` and feeds it every event of the job; it holds only
what was observed so far (no look-ahead). A vector is complete when it has every feature name seen in
the job so far; readers leave a feature out when it was not measured yet, and methods skip such vectors.

>>> from streams.core.events import JobStart, TaskCheckpoint, TaskFinish, Status
>>> tasks = JobTasks(initial_fraction=0.5)
>>> tasks.update(JobStart("j", 0, declared_tasks=2))
>>> tasks.update(TaskCheckpoint("j", "a", 0, "n1", ts_us=10, elapsed_us=10, features={"cpu": 1.0}))
>>> tasks.ready
False
>>> tasks.update(TaskFinish("j", "a", 0, "n1", ts_us=20, duration_us=20, status=Status.SUCCEEDED))
>>> tasks.ready, tasks.durations_s
(True, [2e-05])
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from streams.core.events import Event, JobStart, TaskCheckpoint, TaskFinish, TaskStart

Features = Mapping[str, float]


@dataclass
class JobTasks:
    """The observed state of one job's tasks; ``initial_fraction`` of them must finish before predicting."""

    initial_fraction: float = 0.04
    declared: int | None = None
    started: set[str] = field(default_factory=set)
    running: dict[str, Features] = field(default_factory=dict)
    finished: dict[str, Features] = field(default_factory=dict)
    durations_s: list[float] = field(default_factory=list)
    first_finished: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)

    def update(self, event: Event) -> None:
        """Record ``event``; a finish of a task with no checkpoint has no vector but still counts."""
        if isinstance(event, JobStart):
            self.declared = event.declared_tasks
        elif isinstance(event, TaskStart):
            self.started.add(event.task_id)
        elif isinstance(event, TaskCheckpoint):
            self.started.add(event.task_id)
            self.running[event.task_id] = event.features
            self.names.update(event.features)
        elif isinstance(event, TaskFinish) and event.succeeded and event.task_id not in self.finished:
            self.started.add(event.task_id)
            self.finished[event.task_id] = self.running.pop(event.task_id, {})
            self.durations_s.append(event.duration_us / 1e6)
            if len(self.finished) <= self.initial_count:  # the finish that makes the job ready is one of them
                self.first_finished.add(event.task_id)
        elif isinstance(event, TaskFinish):
            self.running.pop(event.task_id, None)

    def complete(self, features: Features) -> bool:
        """Whether ``features`` has every feature seen in the job (a vector with gaps is not scored)."""
        return bool(features) and self.names.issubset(features)

    def complete_vectors(self) -> tuple[list[Features], list[Features]]:
        """Complete vectors of (finished, running) tasks: the sets g and the calibration compare."""
        finished = [x for x in self.finished.values() if self.complete(x)]
        return finished, [x for x in self.running.values() if self.complete(x)]

    @property
    def size(self) -> int:
        """The job's task count: declared, else the tasks seen so far."""
        return self.declared if self.declared is not None else len(self.started)

    @property
    def initial_count(self) -> int:
        """How many tasks must finish before predictions start (at least one)."""
        return max(1, math.ceil(self.initial_fraction * self.size))

    @property
    def ready(self) -> bool:
        return len(self.finished) >= self.initial_count

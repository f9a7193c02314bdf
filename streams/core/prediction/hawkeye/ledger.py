"""What Hawkeye knows of one running job: finished durations, each attempt's steps, and its hosts.

The method's cluster-level ``learn`` keeps one ``JobLedger`` per job and, when the job ends (JobFinish,
or every declared task finished), folds it into the ``HostBook`` in units of the job's mean finished
task time; the job's predictors read it (they never write it), so the shadow predictors of the adaptive
method share one.

>>> from streams.core.events import JobStart, Status, TaskCheckpoint, TaskFinish
>>> ledger = JobLedger()
>>> ledger.update(JobStart("j", 0, declared_tasks=2))
>>> ledger.update(TaskCheckpoint("j", "a", 0, "n1", 4_000_000, 4_000_000, {}))
>>> ledger.update(TaskFinish("j", "a", 0, "n1", 10_000_000, 10_000_000, Status.SUCCEEDED))
>>> ledger.mean_s, ledger.local_tasks["n1"], ledger.local_steps["n1"]
(10.0, [10.0], [4.0, 6.0])
>>> ledger.ready(0.5), ledger.ready(0.75)
(True, False)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from streams.core.events import Event, JobFinish, JobStart, TaskCheckpoint, TaskFinish, TaskStart


@dataclass
class AttemptSteps:
    """Checkpoints passed by one attempt and the elapsed time at the last of them (µs)."""

    done: int = 0
    last_elapsed_us: int = 0


@dataclass
class JobLedger:
    """One job's observed state (module doc)."""

    declared: int | None = None
    task_type: str = ""
    started: set[str] = field(default_factory=set)
    finished: set[str] = field(default_factory=set)
    total_s: float = 0.0
    attempts: dict[tuple[str, int], AttemptSteps] = field(default_factory=dict)
    local_tasks: dict[str, list[float]] = field(default_factory=dict)
    local_steps: dict[str, list[float]] = field(default_factory=dict)
    step_total_s: float = 0.0
    step_count: int = 0
    ended: bool = False

    def update(self, event: Event) -> None:
        if isinstance(event, JobStart):
            self.declared = event.declared_tasks
        elif isinstance(event, TaskStart):
            self.started.add(event.task_id)
            self.task_type = self.task_type or event.task_type
        elif isinstance(event, TaskCheckpoint):
            self.started.add(event.task_id)
            steps = self.attempts.setdefault((event.task_id, event.attempt), AttemptSteps())
            self._step(event.node_id, event.elapsed_us - steps.last_elapsed_us)
            steps.done += 1
            steps.last_elapsed_us = event.elapsed_us
        elif isinstance(event, TaskFinish):
            steps = self.attempts.pop((event.task_id, event.attempt), AttemptSteps())
            if event.succeeded and event.task_id not in self.finished:
                self._step(event.node_id, event.duration_us - steps.last_elapsed_us)
                self.finished.add(event.task_id)
                self.total_s += event.duration_us / 1e6
                self.local_tasks.setdefault(event.node_id, []).append(event.duration_us / 1e6)
        elif isinstance(event, JobFinish):
            self.ended = True
        if self.declared is not None and len(self.finished) >= self.declared:
            self.ended = True

    def _step(self, host: str, elapsed_us: int) -> None:
        if elapsed_us > 0:
            self.local_steps.setdefault(host, []).append(elapsed_us / 1e6)
            self.step_total_s += elapsed_us / 1e6
            self.step_count += 1

    @property
    def size(self) -> int:
        """The job's task count: declared, else the tasks seen so far."""
        return self.declared if self.declared is not None else len(self.started)

    def ready(self, quantile: float) -> bool:
        """Whether ``quantile`` of the job's tasks finished (Spark's spark.speculation.quantile)."""
        return len(self.finished) >= max(1, math.ceil(quantile * self.size))

    @property
    def mean_s(self) -> float | None:
        """AT: the mean finished task time so far (None before the first finish)."""
        return self.total_s / len(self.finished) if self.finished else None

    @property
    def mean_step_s(self) -> float | None:
        return self.step_total_s / self.step_count if self.step_count else None

    def steps_done(self, task_id: str, attempt: int) -> int:
        steps = self.attempts.get((task_id, attempt))
        return steps.done if steps else 0

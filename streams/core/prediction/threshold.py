"""The straggler threshold tau (SPEC 4): the oracle of the evaluation protocol, and online estimates.

The oracle is the job's true p90 latency, known only after the fact (the paper's protocol). An online
threshold uses only what a method has seen: ``JobP90`` is the p90 of the job's latency estimates
(true durations of finished tasks; max(elapsed, adjusted prediction) of running ones), so a task is
flagged when its adjusted prediction ranks in the job's top tenth, which is what "p90 straggler" means.

>>> tau = JobP90()
>>> for task, seconds in enumerate([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]):
...     tau.estimate(str(task), seconds)
>>> tau.value()
10.0
>>> Oracle(3.5).value()
3.5
"""

from __future__ import annotations

from typing import Protocol


class Threshold(Protocol):
    """tau in seconds; ``estimate`` tells it a task's current latency estimate."""

    name: str

    def estimate(self, task_id: str, seconds: float) -> None: ...

    def value(self) -> float | None: ...


class Oracle:
    """A fixed tau (the evaluation's true p90, or an operator's SLO)."""

    name = "oracle"

    def __init__(self, tau_s: float) -> None:
        self.tau_s = tau_s

    def estimate(self, task_id: str, seconds: float) -> None:
        return None

    def value(self) -> float | None:
        return self.tau_s


class JobP90:
    """tau = sorted(estimates)[int(quantile * n)] over the job's latest per-task latency estimates."""

    name = "online-p90"

    def __init__(self, quantile: float = 0.9) -> None:
        self.quantile = quantile
        self._estimates: dict[str, float] = {}

    def estimate(self, task_id: str, seconds: float) -> None:
        self._estimates[task_id] = seconds

    def value(self) -> float | None:
        if not self._estimates:
            return None
        ordered = sorted(self._estimates.values())
        return ordered[min(len(ordered) - 1, int(self.quantile * len(ordered)))]

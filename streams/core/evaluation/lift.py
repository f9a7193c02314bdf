"""Forward lift of a blacklist on a trace with no ground truth (SPEC 7).

A blacklist is worth something when the tasks that land on its nodes *after* it was issued straggle more
than the cluster's tasks do. Replaying a fixed trace, the blacklisted nodes keep receiving tasks (the
trace's scheduler did not know), which is what makes this measurable:

* a straggler is a successful task at or above its job's p90 latency (``oracle_tau``, the definition SPEC 4
  and 7 use for prediction), decided after the fact over the whole trace; a job with fewer than 2 successful
  tasks, or whose tasks all took the same time, has no stragglers to speak of (as SPEC 3 for z-values) and
  its tasks count nowhere;
* a task *lands on* a blacklisted node when it started (finish time minus duration) while its node was on
  the blacklist, i.e. after the delta that added it and before the one that removed it; the tasks that
  put the node there finished before that delta, so no task is both evidence and outcome;
* lift = straggler rate of the tasks that landed on blacklisted nodes / straggler rate of every task that
  started while the blacklist was live (from the first delta on). 1 means the blacklist predicts nothing.

Beside it: the rate on the other nodes, and a 95 % Wilson interval of the blacklisted tasks' rate divided
by the cluster rate (the cluster rate rests on far more tasks; its own noise is ignored).

>>> from streams.core.events import TaskFinish, Status, BlacklistDelta, BlacklistEntry
>>> lift = ForwardLift()
>>> for i in range(20):  # job j: 20 tasks of 10 s on n1..n4, two of them 30 s on n9 after t=100 s
...     slow = i in (18, 19)
...     lift.observe(TaskFinish("j", f"t{i}", 0, "n9" if slow else f"n{i % 4}", 200_000_000 + i,
...                             30_000_000 if slow else 10_000_000, Status.SUCCEEDED))
>>> lift.observe_delta(BlacklistDelta("c", 1, 100_000_000, "pcores", 0, 100_000_000,
...                                   (BlacklistEntry("n9", 0, 9, 1.0, 0.5, 0.6, 1.4, "slow"),), ()))
>>> r = lift.result()
>>> (r.landed, r.landed_stragglers, r.tasks, r.stragglers, r.lift)
(2, 2, 20, 2, 10.0)
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from streams.core.evaluation.avoidance import Placement, spans_in_seconds
from streams.core.evaluation.detection import DetectionScore
from streams.core.evaluation.prediction import oracle_tau
from streams.core.events import BlacklistDelta, Event, TaskFinish

Z_95 = 1.959963984540054


@dataclass(frozen=True, slots=True)
class LiftResult:
    """Counts and rates of one run; rates and lift are None when their denominator is 0."""

    tasks: int  # successful tasks of jobs with a straggler definition, started while the blacklist was live
    stragglers: int
    landed: int  # of them, started on a node that was on the blacklist at that moment
    landed_stragglers: int
    nodes: int  # distinct nodes ever blacklisted
    cluster_rate: float | None
    landed_rate: float | None
    other_rate: float | None
    lift: float | None
    lift_low: float | None  # 95 % Wilson bounds of landed_rate / cluster_rate
    lift_high: float | None


def wilson(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion.

    >>> [round(v, 4) for v in wilson(5, 10)]
    [0.2366, 0.7634]
    """
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def straggler_threshold(durations: list[int]) -> float | None:
    """The job's p90 latency, or None when the job defines no straggler: fewer than 2 successful tasks,
    or all of them equally long (std 0, as SPEC 3 for z-values).

    >>> straggler_threshold([10, 10, 30]), straggler_threshold([10]), straggler_threshold([10, 10])
    (30, None, None)
    """
    if len(durations) < 2 or min(durations) == max(durations):
        return None
    return oracle_tau(durations)


class ForwardLift:
    """Feed it every event of a run (``observe``) and every delta (``observe_delta``), in any order."""

    def __init__(self) -> None:
        self._spans = DetectionScore(())
        self._first_delta_us: int | None = None
        # job -> [(node, start_us, duration_us)] of successful tasks
        self._tasks: dict[str, list[tuple[str, int, int]]] = defaultdict(list)

    def observe(self, event: Event) -> None:
        if isinstance(event, TaskFinish) and event.succeeded:
            self._tasks[event.job_id].append((event.node_id, event.ts_us - event.duration_us, event.duration_us))

    def observe_delta(self, delta: BlacklistDelta) -> None:
        """Take one delta, in version order."""
        self._spans.update(delta)
        if self._first_delta_us is None:
            self._first_delta_us = delta.issued_at_us

    def placements(self) -> dict[str, list[Placement]]:
        """The successful tasks seen, by job, as the trace ran them (for ``simulation.avoidance``)."""
        return {
            job: [Placement(node, start / 1e6, duration / 1e6) for node, start, duration in rows]
            for job, rows in self._tasks.items()
        }

    def spans_s(self) -> dict[str, list[tuple[float, float]]]:
        """When each node was listed, in seconds (open stays end at infinity)."""
        return spans_in_seconds(self._spans.spans())

    def result(self) -> LiftResult:
        spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for span in self._spans.spans():
            spans[span.node_id].append((span.start_us, span.end_us if span.end_us is not None else 2**63))
        live_from = self._first_delta_us if self._first_delta_us is not None else 2**63
        tasks = stragglers = landed = landed_stragglers = 0
        for rows in self._tasks.values():
            tau = straggler_threshold([duration for _, _, duration in rows])
            if tau is None:
                continue
            for node, start, duration in rows:
                if start < live_from:
                    continue
                straggler = duration >= tau
                tasks += 1
                stragglers += straggler
                if any(begin <= start < end for begin, end in spans.get(node, ())):
                    landed += 1
                    landed_stragglers += straggler
        cluster = stragglers / tasks if tasks else None
        on = landed_stragglers / landed if landed else None
        other = (stragglers - landed_stragglers) / (tasks - landed) if tasks > landed else None
        lift = low = high = None
        if cluster and on is not None:
            lift = on / cluster
            lo, hi = wilson(landed_stragglers, landed)
            low, high = lo / cluster, hi / cluster
        return LiftResult(tasks, stragglers, landed, landed_stragglers, len(spans), cluster, on, other,
                          lift, low, high)  # fmt: skip

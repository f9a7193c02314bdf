"""``select`` replayed from its members' recorded flags: tuning its rule without re-running its members.

``select`` (``streams.core.prediction.selector``) runs its members in shadow; they never read what the
selector does, so each member's flags on a trace are the same whatever rule picks among them. Tuning the
rule (which member first, ``z``, ``min_jobs``) therefore needs each member run once per trace
(``first_flags``), then ``replay_select`` per configuration: it walks the trace's events in the order
``replay_jobs`` does, flags a task at a checkpoint when the member followed then had flagged it at that
checkpoint or earlier, and at each job's end hands every member's first flags to the real
``SelectorMethod.judge``. The result equals running ``select`` itself (a unit test holds it to that), at a
fraction of the cost. ``any_of`` is the same shortcut for ``AnyOfMethod`` (``spark-node``).

>>> from streams.core.events import JobFinish, Status, TaskCheckpoint, TaskFinish
>>> S = 1_000_000
>>> events = [TaskCheckpoint("j", "t", 0, "n", 5 * S, 5 * S, {}), TaskCheckpoint("j", "t", 0, "n", 9 * S, 9 * S, {}),
...           TaskFinish("j", "t", 0, "n", 20 * S, 20 * S, Status.SUCCEEDED), JobFinish("j", 21 * S)]
>>> early, late = {"j": {"t": (5 * S, 5 * S)}}, {"j": {"t": (9 * S, 9 * S)}}
>>> replay_select({"j": events}, [late, early], SelectorMethod([_Named("late"), _Named("early")]))
{'j': {'t': (9000000, 9000000)}}
>>> any_of(late, early)
{'j': {'t': (5000000, 5000000)}}
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from streams.core.evaluation.runner import replay_jobs
from streams.core.events import Event, JobFinish, TaskCheckpoint, TaskFinish
from streams.core.prediction.base import PredictionMethod
from streams.core.prediction.selector import SelectorMethod, judge
from streams.core.prediction.threshold import Threshold

FirstFlags = dict[str, dict[str, tuple[int, int]]]  # job -> task -> (trace time, elapsed) of its first flag, us


class _Named:
    """A stand-in member for ``SelectorMethod`` when only its decisions are replayed."""

    uses_threshold = True

    def __init__(self, name: str) -> None:
        self.name = name


def stand_ins(names: Sequence[str]) -> list[PredictionMethod]:
    """Members that only carry names, for a ``SelectorMethod`` driven by ``replay_select``."""
    return [_Named(name) for name in names]  # type: ignore[misc]


def first_flags(
    method: PredictionMethod, jobs: Mapping[str, Sequence[Event]], thresholds: Mapping[str, Threshold]
) -> FirstFlags:
    """Each job's first flag per task when ``method`` runs over ``jobs`` (``replay_jobs``)."""
    flags: FirstFlags = {}
    for job_id, run in replay_jobs(method, jobs, thresholds).items():
        first = flags[job_id] = {}
        for flag in run.flags:
            first.setdefault(flag.task_id, (flag.ts_us, flag.elapsed_us))
    return flags


def any_of(*members: FirstFlags) -> FirstFlags:
    """The flags of ``AnyOfMethod`` over these members: each task's earliest flag."""
    union: FirstFlags = {}
    for flags in members:
        for job_id, tasks in flags.items():
            mine = union.setdefault(job_id, {})
            for task_id, flag in tasks.items():
                if task_id not in mine or flag[0] < mine[task_id][0]:
                    mine[task_id] = flag
    return union


def replay_select(
    jobs: Mapping[str, Sequence[Event]], members: Sequence[FirstFlags], selector: SelectorMethod
) -> FirstFlags:
    """The flags ``selector`` (built on ``stand_ins`` in the members' order) raises over ``jobs`` (module doc)."""
    flagged: FirstFlags = {job_id: {} for job_id in jobs}
    durations: dict[str, dict[str, float]] = {job_id: {} for job_id in jobs}
    for event in heapq.merge(*jobs.values(), key=lambda e: e.ts_us):
        job_id = event.job_id
        if isinstance(event, TaskCheckpoint):
            mine = flagged[job_id]
            lead = members[selector.leader_index].get(job_id, {}).get(event.task_id)
            if event.task_id not in mine and lead is not None and lead[0] <= event.ts_us:
                mine[event.task_id] = (event.ts_us, event.elapsed_us)
        elif isinstance(event, TaskFinish) and event.succeeded:
            durations[job_id][event.task_id] = event.duration_us / 1e6
        elif isinstance(event, JobFinish) and durations[job_id]:
            outcomes = []
            for flags in members:
                elapsed = {task: at / 1e6 for task, (_, at) in flags.get(job_id, {}).items()}
                outcomes.append(judge(durations[job_id], elapsed))
            selector.judge(outcomes)
            durations[job_id] = {}
    return flagged

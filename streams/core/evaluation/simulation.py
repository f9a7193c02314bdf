"""Trace-driven simulation of straggler mitigation (SPEC 7): would acting on laggard's output shorten jobs?

Two schedulers in the loop: one acting on straggler flags (Nurd's Algorithms 2 and 3, ``simulate``;
``laggard simulate``) and one honouring the blacklist (DSB, ``avoid_blacklist`` below; ``laggard run``).

The trace's own schedule of a job is the baseline (no mitigation): every task starts and finishes when it
did. A method's flags (the first flag of each task, raised at one of its checkpoints) drive Nurd's two
schedulers:

* Algorithm 2 (``spares=None``: more machines than tasks): the flagged task is terminated and relaunched on
  a new machine at the flag.
* Algorithm 3 (``spares=k``: fewer machines than tasks): a relaunch needs a free machine: ``k`` spare
  machines at the job's start, and each machine a task of the job releases when it finishes (an original
  or a relaunched copy), unless a task the trace started later takes it first (the trace reused it; when
  none is released, the trace brought that machine itself: a later task never takes a spare). The machine of a
  relaunched task's original is never returned to the pool: it is the one suspected of being slow. A flagged
  task that finds no free machine keeps running and asks again at each of its later checkpoints, as Algorithm 3
  does; the one that has waited longest asks first.

A relaunched copy takes a duration drawn from the job's non-straggler durations (``draw``; SPEC 7). That
favours relaunching (a copy never straggles), so the gains below are upper bounds for the flags given. In
``relaunch`` mode (Nurd's algorithms) it replaces the original: when the draw is longer than what the
original still needed, the speculation failed and the task ends later than it would have. In ``speculate``
mode (what Hadoop, Spark and Hawkeye do) the original keeps running and the first of the two to finish
wins: a wrong flag then costs machine time, never job time (with unlimited machines).

Reported: the job completion time (JCT, first start to last
finish) with and without mitigation, the relaunches, how many finished before their original would have
(successes), flagged tasks that never got a machine, and the machine time thrown away with the terminated
originals (relaunch) or with the loser of each race (speculate).

>>> tasks = {"a": TaskTimeline(0.0, 10.0, (5.0, 10.0)), "b": TaskTimeline(0.0, 100.0, (5.0, 50.0, 100.0))}
>>> simulate(tasks, {"b": 5.0}, draw=lambda: 10.0, spares=None)
Outcome(jct_base_s=100.0, jct_s=15.0, relaunches=1, successes=1, unserved=0, wasted_s=5.0)
>>> simulate(tasks, {"b": 5.0}, draw=lambda: 10.0, spares=0)  # the first free machine comes at t=10
Outcome(jct_base_s=100.0, jct_s=60.0, relaunches=1, successes=1, unserved=0, wasted_s=50.0)
>>> simulate(tasks, {"b": 5.0}, draw=lambda: 200.0, spares=None).jct_s  # a wrong guess costs job time
205.0
>>> simulate(tasks, {"b": 5.0}, draw=lambda: 200.0, spares=None, mode="speculate").jct_s  # but not here
100.0
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from streams.core.events import Event, StragglerPrediction, TaskCheckpoint, TaskFinish, TaskStart


@dataclass(frozen=True, slots=True)
class TaskTimeline:
    """One successful task on the trace's clock (seconds): start, finish and its checkpoint times."""

    start_s: float
    finish_s: float
    checkpoints_s: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One simulated run of one job (see the module doc)."""

    jct_base_s: float
    jct_s: float
    relaunches: int
    successes: int
    unserved: int
    wasted_s: float

    @property
    def reduction(self) -> float:
        """1 - JCT / JCT without mitigation: 0.25 means the job ended a quarter sooner."""
        return 1.0 - self.jct_s / self.jct_base_s if self.jct_base_s > 0 else 0.0


def timelines(events: Iterable[Event]) -> dict[str, TaskTimeline]:
    """The successful tasks of one job's events: first start, successful finish and checkpoint times.

    A task without a start event starts at its finish minus its duration; failed tasks are left out
    (they do not decide when the job completes in the trace's schedule).
    """
    starts: dict[str, float] = {}
    checkpoints: dict[str, list[float]] = {}
    finished: dict[str, TaskFinish] = {}
    for event in events:
        if isinstance(event, TaskStart):
            starts.setdefault(event.task_id, event.ts_us / 1e6)
        elif isinstance(event, TaskCheckpoint):
            checkpoints.setdefault(event.task_id, []).append(event.ts_us / 1e6)
        elif isinstance(event, TaskFinish) and event.succeeded:
            finished[event.task_id] = event
    result = {}
    for task_id, finish in finished.items():
        end = finish.ts_us / 1e6
        start = starts.get(task_id, end - finish.duration_us / 1e6)
        result[task_id] = TaskTimeline(start, end, tuple(sorted(checkpoints.get(task_id, ()))))
    return result


def first_flags(flags: Iterable[StragglerPrediction]) -> dict[str, float]:
    """The trace time (s) of each task's first flag."""
    first: dict[str, float] = {}
    for flag in flags:
        first.setdefault(flag.task_id, flag.ts_us / 1e6)
    return first


def perfect_flags(
    tasks: Mapping[str, TaskTimeline], durations_s: Mapping[str, float], tau_s: float
) -> dict[str, float]:
    """A yardstick: a predictor perfect by F1 and as early as checkpoints allow, flagging every true
    straggler (duration >= tau) at its first checkpoint and nothing else."""
    return {
        task_id: t.checkpoints_s[0]
        for task_id, t in tasks.items()
        if t.checkpoints_s and durations_s.get(task_id, 0.0) >= tau_s
    }


Mode = Literal["relaunch", "speculate"]
# At equal times machines are released, then taken by the trace's own starts, then asked for by relaunches.
_FREE, _TAKE, _TRY = 0, 1, 2


def simulate(
    tasks: Mapping[str, TaskTimeline],
    flags: Mapping[str, float],
    draw: Callable[[], float],
    spares: int | None,
    mode: Mode = "relaunch",
) -> Outcome:
    """Run one job's schedule with the flagged tasks relaunched (module doc); ``draw()`` gives a copy's
    duration and is called once per relaunch, in time order (so a seeded draw is reproducible)."""
    if not tasks:
        return Outcome(0.0, 0.0, 0, 0, 0, 0.0)
    origin = min(t.start_s for t in tasks.values())
    base_end = max(t.finish_s for t in tasks.values())
    ends = {task_id: t.finish_s for task_id, t in tasks.items()}
    relaunched: dict[str, float] = {}  # task -> relaunch time

    def relaunch(task_id: str, at: float) -> float:
        relaunched[task_id] = at
        copy_end = at + draw()
        ends[task_id] = copy_end if mode == "relaunch" else min(copy_end, tasks[task_id].finish_s)
        return ends[task_id]

    # a flag counts while its task runs (flags come from checkpoints; one outside that span is ignored)
    flagged = sorted(
        (at, task_id)
        for task_id, at in flags.items()
        if task_id in tasks and tasks[task_id].start_s <= at < tasks[task_id].finish_s
    )
    if spares is None:
        for at, task_id in flagged:
            relaunch(task_id, at)
    else:
        _relaunch_when_free(tasks, flagged, spares, origin, relaunch, relaunched)
    successes = sum(ends[task_id] < tasks[task_id].finish_s for task_id in relaunched)
    if mode == "relaunch":  # the terminated originals
        wasted = sum(at - tasks[task_id].start_s for task_id, at in relaunched.items())
    else:  # each race's loser ran until the winner finished
        wasted = sum(
            ends[t] - (tasks[t].start_s if ends[t] < tasks[t].finish_s else at) for t, at in relaunched.items()
        )
    return Outcome(
        jct_base_s=base_end - origin,
        jct_s=max(ends.values()) - origin,
        relaunches=len(relaunched),
        successes=successes,
        unserved=len({task_id for _, task_id in flagged} - relaunched.keys()),
        wasted_s=wasted,
    )


def _relaunch_when_free(
    tasks: Mapping[str, TaskTimeline],
    flagged: list[tuple[float, str]],
    spares: int,
    origin: float,
    relaunch: Callable[[str, float], float],
    relaunched: Mapping[str, float],
) -> None:
    """Algorithm 3: a flagged task is relaunched only when a machine is free (module doc). ``spare``: the job's
    spare machines left; ``released``: machines its tasks released that no one uses. A task the trace started later
    takes only a released machine: a spare is one beyond the trace's machines (it took spares too, so 1 to 5
    spares gave what 0 gave on a job whose tasks start in waves)."""
    spare, released = spares, 0
    # (time, kind, first flag time: who waited longest asks first, task, whether it is a copy's event)
    queue: list[tuple[float, int, float, str, bool]] = [
        (t.finish_s, _FREE, 0.0, task_id, False) for task_id, t in tasks.items()
    ]
    # a task the trace started after the job began takes a released machine first (the trace reused it)
    queue.extend((t.start_s, _TAKE, 0.0, task_id, False) for task_id, t in tasks.items() if t.start_s > origin)
    for at, task_id in flagged:
        finish = tasks[task_id].finish_s
        asks = (at, *(c for c in tasks[task_id].checkpoints_s if at < c < finish))
        queue.extend((c, _TRY, at, task_id, False) for c in asks)
    heapq.heapify(queue)
    while queue:
        at, kind, _, task_id, copy = heapq.heappop(queue)
        if kind == _FREE:
            # a copy's machine returns when it ends; an original's only if it was never relaunched
            released += copy or task_id not in relaunched
        elif kind == _TAKE:
            released = max(0, released - 1)  # none released: the trace brought the machine itself
        elif task_id not in relaunched and spare + released > 0:
            if spare:
                spare -= 1
            else:
                released -= 1
            heapq.heappush(queue, (relaunch(task_id, at), _FREE, 0.0, task_id, True))

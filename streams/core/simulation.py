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
  none is free, the trace brought that machine itself). The machine of a relaunched task's original is
  never returned to the pool: it is the one suspected of being slow. A flagged task that finds no free
  machine keeps running and asks again at each of its later checkpoints, as Algorithm 3 does; the one
  that has waited longest asks first.

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
import math
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from streams.core.detection_metrics import Span
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
        free = spares
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
                free += copy or task_id not in relaunched
            elif kind == _TAKE:
                free = max(0, free - 1)  # none released: the trace brought the machine itself
            elif task_id not in relaunched and free > 0:
                free -= 1
                heapq.heappush(queue, (relaunch(task_id, at), _FREE, 0.0, task_id, True))
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


# --- DSB's blacklisting in the loop -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Placement:
    """One successful task as the trace ran it: its node, start and duration (seconds)."""

    node_id: str
    start_s: float
    duration_s: float


@dataclass(frozen=True, slots=True)
class AvoidOutcome:
    """One job replayed with a scheduler that honours the blacklist (``avoid_blacklist``)."""

    tasks: int
    moved: int  # landed on a listed node and were placed elsewhere
    unmovable: int  # landed on a listed node, but the job had no task on other nodes to draw a duration from
    jct_base_s: float
    jct_s: float
    moved_s_before: float  # summed durations of the moved tasks as the trace ran them
    moved_s_after: float  # and as drawn

    @property
    def reduction(self) -> float:
        return 1.0 - self.jct_s / self.jct_base_s if self.jct_base_s > 0 else 0.0


Spans = Mapping[str, Sequence[tuple[float, float]]]  # node -> [listed from, listed until) in seconds


def spans_in_seconds(spans: Iterable[Span]) -> dict[str, list[tuple[float, float]]]:
    """Blacklist stays (``DetectionScore.spans()``) as node -> [(from, until)] seconds; open stays never end."""
    result: dict[str, list[tuple[float, float]]] = {}
    for span in spans:
        end = math.inf if span.end_us is None else span.end_us / 1e6
        result.setdefault(span.node_id, []).append((span.start_us / 1e6, end))
    return result


def listed(spans: Spans, node_id: str, at_s: float) -> bool:
    """Whether ``node_id`` was on the blacklist at ``at_s``."""
    return any(begin <= at_s < end for begin, end in spans.get(node_id, ()))


def avoid_blacklist(
    placements: Sequence[Placement], spans: Spans, draw: Callable[[Sequence[float]], float]
) -> AvoidOutcome:
    """One job with DSB's blacklisting in the loop (SPEC 7): no new task on a blacklisted node.

    A task that started on a node while it was listed is placed elsewhere at the same moment and takes a
    duration drawn (``draw(pool)``) from the durations of the job's tasks that did not start on a listed
    node, stragglers included: a task placed on a healthy node can straggle too. (Drawing from the
    non-stragglers only, as SPEC 7 says for relaunched copies, credits any list, even a useless one: listing
    healthy nodes of a healthy cluster then "saved" 1.5 %.) Open loop: the blacklist is the one the trace
    produced, capacity elsewhere is assumed free, and the moved tasks' new durations do not feed back into
    the statistics. Draws are made in start order, so a seeded ``draw`` is reproducible.

    >>> job = [Placement("n1", 0.0, 10.0), Placement("n2", 0.0, 12.0), Placement("bad", 5.0, 50.0)]
    >>> avoid_blacklist(job, {"bad": [(1.0, math.inf)]}, draw=lambda pool: max(pool))
    AvoidOutcome(tasks=3, moved=1, unmovable=0, jct_base_s=55.0, jct_s=17.0, moved_s_before=50.0, moved_s_after=12.0)
    """
    return _redraw(placements, [listed(spans, p.node_id, p.start_s) for p in placements], draw)


def random_moves(placements: Sequence[Placement], count: int, rng: random.Random) -> AvoidOutcome:
    """The null baseline of ``avoid_blacklist``: ``count`` tasks of the job picked at random, redrawn alike.

    A redraw from the job's own other tasks can never exceed their longest, so it shortens a job's
    completion (a maximum) a little whatever was moved: a list is worth what it saves beyond this.
    """
    picked = set(rng.sample(range(len(placements)), min(count, len(placements))))
    return _redraw(placements, [i in picked for i in range(len(placements))], rng.choice)


def _redraw(
    placements: Sequence[Placement], landed: Sequence[bool], draw: Callable[[Sequence[float]], float]
) -> AvoidOutcome:
    if not placements:
        return AvoidOutcome(0, 0, 0, 0.0, 0.0, 0.0, 0.0)
    pool = sorted(p.duration_s for p, on in zip(placements, landed, strict=True) if not on)
    origin = min(p.start_s for p in placements)
    base_end = max(p.start_s + p.duration_s for p in placements)
    end = -math.inf
    moved = unmovable = 0
    before = after = 0.0
    for p, on in sorted(zip(placements, landed, strict=True), key=lambda item: (item[0].start_s, item[0].node_id)):
        duration = p.duration_s
        if on and pool:
            moved += 1
            before += duration
            duration = draw(pool)
            after += duration
        elif on:
            unmovable += 1
        end = max(end, p.start_s + duration)
    return AvoidOutcome(len(placements), moved, unmovable, base_end - origin, end - origin, before, after)


@dataclass(frozen=True, slots=True)
class AvoidJob:
    """One job through ``avoid_blacklist``, averaged over seeded draws."""

    moved: int
    unmovable: int
    moved_s_before: float
    moved_s_after: float  # mean over the draws
    reduction: float  # mean over the draws; 0 when nothing moved
    baseline: float  # the same for as many tasks of the job moved at random (``random_moves``)


@dataclass(frozen=True, slots=True)
class AvoidSummary:
    """``avoid_blacklist`` over the jobs of a run; ``mean_reduction`` is over ``over_jobs`` jobs (those any
    compared list touched, 0 for a job this one left alone), so two lists are compared on the same jobs."""

    jobs: int
    affected_jobs: int  # jobs with at least one task moved
    moved: int
    unmovable: int
    moved_mean_s_before: float | None
    moved_mean_s_after: float | None
    mean_reduction: float | None
    mean_baseline: float | None  # as many random tasks of the same jobs moved instead
    over_jobs: int
    repeats: int


def avoidance_by_job(
    jobs: Mapping[str, Sequence[Placement]], spans: Spans, repeats: int = 5, seed: int = 0
) -> dict[str, AvoidJob]:
    """Every job through ``avoid_blacklist`` ``repeats`` times with draws seeded by (seed, job, repeat); a job
    with no task on a listed node (most of them) is looked at once."""
    result = {}
    for job_id, placements in jobs.items():
        landed = [listed(spans, p.node_id, p.start_s) for p in placements]
        if not any(landed) or all(landed):  # nothing to move, or nowhere to draw from: no draw, one pass
            once = _redraw(placements, landed, random.Random(seed).choice)  # never called
            result[job_id] = AvoidJob(0, once.unmovable, 0.0, 0.0, once.reduction, 0.0)
            continue
        # a string seed is hashed with SHA-512: the same draws on every run and machine
        outcomes = [_redraw(placements, landed, random.Random(f"{seed}/{job_id}/{r}").choice) for r in range(repeats)]
        first = outcomes[0]
        baseline = [
            random_moves(placements, first.moved, random.Random(f"{seed}/{job_id}/{r}/random")).reduction
            for r in range(repeats)
        ]
        result[job_id] = AvoidJob(
            moved=first.moved, unmovable=first.unmovable, moved_s_before=first.moved_s_before,
            moved_s_after=sum(o.moved_s_after for o in outcomes) / repeats,
            reduction=sum(o.reduction for o in outcomes) / repeats, baseline=sum(baseline) / repeats,
        )  # fmt: skip
    return result


def summarise_avoidance(per_job: Mapping[str, AvoidJob], over: Collection[str], repeats: int) -> AvoidSummary:
    """Totals of ``per_job`` and its mean JCT cut over the jobs ``over``."""
    hit = [j for j in per_job.values() if j.moved]
    moved = sum(j.moved for j in hit)
    return AvoidSummary(
        jobs=len(per_job), affected_jobs=len(hit), moved=moved, unmovable=sum(j.unmovable for j in per_job.values()),
        moved_mean_s_before=sum(j.moved_s_before for j in hit) / moved if moved else None,
        moved_mean_s_after=sum(j.moved_s_after for j in hit) / moved if moved else None,
        mean_reduction=sum(per_job[j].reduction for j in over) / len(over) if over else None,
        mean_baseline=sum(per_job[j].baseline for j in over) / len(over) if over else None,
        over_jobs=len(over), repeats=repeats,
    )  # fmt: skip


def compare_avoidance(
    jobs: Mapping[str, Sequence[Placement]], lists: Mapping[str, Spans], repeats: int = 5, seed: int = 0
) -> dict[str, AvoidSummary]:
    """Each named blacklist (``lists``: name -> spans) through ``avoidance_by_job``, summarised over the same
    jobs: those at least one of the lists touched.

    >>> jobs = {"a": [Placement("n1", 0.0, 10.0), Placement("n2", 0.0, 10.0), Placement("bad", 5.0, 50.0)],
    ...         "b": [Placement("n1", 0.0, 10.0), Placement("n2", 0.0, 10.0), Placement("meh", 5.0, 20.0)]}
    >>> both = compare_avoidance(jobs, {"found": {"bad": [(1.0, math.inf)]},
    ...                                 "truth": {"bad": [(1.0, math.inf)], "meh": [(1.0, math.inf)]}})
    >>> [(name, s.affected_jobs, s.over_jobs, round(s.mean_reduction, 3)) for name, s in both.items()]
    [('found', 1, 2, 0.364), ('truth', 2, 2, 0.564)]
    """
    per_list = {name: avoidance_by_job(jobs, spans, repeats, seed) for name, spans in lists.items()}
    touched = sorted({job for per_job in per_list.values() for job, j in per_job.items() if j.moved})
    return {name: summarise_avoidance(per_job, touched, repeats) for name, per_job in per_list.items()}

"""DSB's blacklisting in the loop (SPEC 7): had the scheduler honoured the blacklist, would jobs end sooner?

Tasks that started on a node while it was listed are re-placed with a duration drawn from their job's
tasks on other nodes; compared against moving as many random tasks of the same jobs (the null baseline).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from streams.core.evaluation.detection import Span


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

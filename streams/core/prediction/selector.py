"""``select``: run several predictors in shadow and follow the one whose flags have paid off so far.

No single method wins everywhere: a classifier learned across jobs (``hazard``) is strong on a cluster of
many alike jobs whose tasks report their progress; Spark's rules need no learning and are the better bet on
a few unlike jobs or where tasks say nothing about themselves; ``node-slow`` wins where only the node's past
speaks. ``SelectorMethod`` runs its members side by side on every event: each checkpoint is predicted by
every member (in shadow), and the selector flags a task when the member it follows now has flagged it.
Which member it follows is decided causally, from ended jobs only: at a job's end (its ``JobFinish``) each
member's first flags on the job's tasks are judged as the evaluation judges them, tau the job's p90 duration
and a copy taking its median: in time (a straggler, and a copy started at the flag would have ended first),
a false positive (a flag on a non-straggler), late (a straggler flagged too late for a copy to win) or
missed (a straggler never flagged), and the member's F1 in time on that job, 2 in time / (2 in time + false
positives + late + missed), is recorded. Judging earlier would be biased: a job's stragglers finish last, so
a running job's tau is not known yet.

The selector starts with its first member and moves to another only when that member's lead is more than
chance: over the ended jobs both were judged on (the latest ``memory``), the mean per-job lead of the
challenger's F1 in time over the followed member's, less ``z`` standard errors, must exceed ``margin``, and
at least ``min_jobs`` jobs must have ended. A lead on one job's few stragglers (which moved the first
version of ``select`` to hazard after a single job on a cluster whose tasks report no progress, where hazard
is weak) does not move it. The comparison is paired by job, the way the evaluation averages. A source
without job-end events keeps the first member.

>>> from streams.core.events import JobFinish, JobStart, Status, TaskCheckpoint, TaskFinish
>>> from streams.core.prediction.base import step
>>> from streams.core.prediction.threshold import Oracle
>>> from streams.core.prediction.registry import build_method, PredictionContext
>>> members = [build_method(n, PredictionContext()) for n in ("spark-q0.9-m3", "elapsed-tau")]
>>> method = SelectorMethod(members, z=1.0, min_jobs=2)
>>> S = 1_000_000
>>> followed = []
>>> for j in range(3):  # 9 tasks of 10 s and one of 100 s, run 6th: only elapsed-tau flags it
...     job = method.job(f"j{j}", Oracle(50.0))
...     _ = step(method, job, JobStart(f"j{j}", 0, declared_tasks=10))
...     for i, seconds in enumerate([10] * 5 + [100] + [10] * 4):
...         for at in range(5, seconds, 5):
...             flag = step(method, job, TaskCheckpoint(f"j{j}", str(i), 0, "n", at * S, at * S, {}))
...         _ = step(method, job, TaskFinish(f"j{j}", str(i), 0, "n", seconds * S, seconds * S, Status.SUCCEEDED))
...     if j < 2:
...         _ = step(method, job, JobFinish(f"j{j}", 200 * S))
...         followed.append(method.leader)
>>> followed  # one job is not enough evidence (min_jobs); two jobs with the same lead are
['spark-q0.9-m3', 'elapsed-tau']
>>> method.board
{'spark-q0.9-m3': (0, 0, 0, 2), 'elapsed-tau': (2, 0, 0, 0)}
>>> step(method, job, TaskCheckpoint("j2", "5", 0, "n", 60 * S, 60 * S, {})) is None  # flagged once
True
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Sequence
from typing import Any

from streams.core.events import Event, JobFinish, StragglerPrediction, TaskCheckpoint, TaskFinish
from streams.core.prediction.base import JobPredictor, PredictionMethod
from streams.core.prediction.members import MemberMethods
from streams.core.prediction.threshold import Threshold

Counts = tuple[int, int, int, int]  # flags in time, false positives, late flags of stragglers, stragglers unflagged


def f1_in_time(counts: Counts) -> float:
    """2 in time / (2 in time + false positives + late + missed); 0 when nothing was counted."""
    tp, fp, late, missed = counts
    return 2 * tp / (2 * tp + fp + late + missed) if tp or fp or late or missed else 0.0


class SelectorJob:
    """One job's side of ``select``: a job predictor per member, each member's first flags per task."""

    def __init__(self, owner: SelectorMethod, job_id: str, threshold: Threshold) -> None:
        self.owner = owner
        self.threshold = threshold
        self.method = owner.name
        self.members: list[JobPredictor] = [m.job(job_id, threshold) for m in owner.members]
        self.first: list[dict[str, float]] = [{} for _ in owner.members]  # member -> task -> elapsed s at flag
        self.flagged: set[str] = set()
        self.durations: dict[str, float] = {}  # the job's finished tasks (s)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the method (its members and scoreboard are saved once, beside the jobs)."""
        return {k: v for k, v in self.__dict__.items() if k != "owner"}

    def predict(self, event: TaskCheckpoint) -> StragglerPrediction | None:
        """Every member predicts (shadow); flag the task when the member followed now has flagged it."""
        flags = [member.predict(event) for member in self.members]
        for first, flag in zip(self.first, flags, strict=True):
            if flag is not None:
                first.setdefault(flag.task_id, flag.elapsed_us / 1e6)
        leader = self.owner.leader_index
        if event.task_id in self.flagged or event.task_id not in self.first[leader]:
            return None
        self.flagged.add(event.task_id)
        flag = flags[leader]
        if flag is None:  # the leader flagged this task earlier, while another member was followed
            elapsed = float(event.elapsed_us)
            tau_us = (self.threshold.value() or 0.0) * 1e6
            return StragglerPrediction(
                event.job_id, event.task_id, event.attempt, event.node_id, event.ts_us, event.elapsed_us,
                predicted_us=elapsed, adjusted_us=elapsed, threshold_us=tau_us, weight=1.0, method=self.method,
            )  # fmt: skip
        return StragglerPrediction(
            flag.job_id, flag.task_id, flag.attempt, flag.node_id, flag.ts_us, flag.elapsed_us, flag.predicted_us,
            flag.adjusted_us, flag.threshold_us, flag.weight, self.method,
        )  # fmt: skip

    def learn(self, event: Event) -> None:
        """Members learn; at the job's end each member's first flags are judged (module doc)."""
        for member in self.members:
            member.learn(event)
        if isinstance(event, TaskFinish) and event.succeeded:
            self.durations[event.task_id] = event.duration_us / 1e6
        elif isinstance(event, JobFinish) and self.durations:
            self.owner.judge([judge(self.durations, first) for first in self.first])
            self.durations.clear()


def judge(durations: dict[str, float], first: dict[str, float]) -> Counts:
    """One member's counts on a finished job: tau its p90, a copy takes its median (the evaluation's rule)."""
    ordered = sorted(durations.values())
    tau, median = ordered[int(0.9 * len(ordered))], ordered[len(ordered) // 2]
    tp = fp = late = missed = 0
    for task, duration in durations.items():
        elapsed = first.get(task)
        early = elapsed is not None and elapsed < duration
        if duration < tau:
            fp += early
        elif elapsed is not None and elapsed + median < duration:
            tp += 1
        else:
            late += early
            missed += not early
    return tp, fp, late, missed


class SelectorMethod(MemberMethods):
    """``select``: ``members`` (built methods) in shadow; follow the first until another one's per-job F1 in
    time beats the followed one's with confidence (module doc).

    A challenger is followed when, over the last ``memory`` ended jobs judged (at least ``min_jobs``), the mean
    of its per-job F1 in time minus the followed member's, less ``z`` standard errors of that mean, exceeds
    ``margin``; among several, the one with the largest such bound.
    """

    def __init__(self, members: Sequence[PredictionMethod], margin: float = 0.0, name: str = "select",
                 z: float = 0.0, min_jobs: int = 1, memory: int = 200) -> None:  # fmt: skip
        if not members:
            raise ValueError("select needs at least one member")
        self.members = list(members)
        self.margin = margin
        self.z = z
        self.min_jobs = max(1, min_jobs)
        self.name = name
        self.uses_threshold = any(m.uses_threshold for m in members)
        self.leader_index = 0
        self._counts: list[list[int]] = [[0, 0, 0, 0] for _ in members]
        self._scores: list[deque[float]] = [deque(maxlen=memory) for _ in members]  # per ended job, F1 in time

    @property
    def board(self) -> dict[str, Counts]:
        """Each member's (flags in time, false positives, late flags, stragglers missed) so far."""
        return {m.name: (c[0], c[1], c[2], c[3]) for m, c in zip(self.members, self._counts, strict=True)}

    @property
    def leader(self) -> str:
        """The name of the member followed now."""
        return self.members[self.leader_index].name

    def bound(self, challenger: int) -> float | None:
        """Lower confidence bound of ``challenger``'s mean per-job lead over the followed member; None while
        fewer than ``min_jobs`` jobs were judged."""
        mine, theirs = self._scores[challenger], self._scores[self.leader_index]
        if len(mine) < self.min_jobs:
            return None
        leads = [a - b for a, b in zip(mine, theirs, strict=True)]
        # with z 0 (the default) the spread weighs nothing: no stdev (exact, in fractions: costly at every job end)
        spread = statistics.stdev(leads) if len(leads) > 1 and self.z else 0.0
        return statistics.fmean(leads) - self.z * spread / math.sqrt(len(leads))

    def judge(self, outcomes: Sequence[Counts]) -> None:
        """Add one ended job's counts per member; follow a member that leads with confidence (class doc)."""
        for counts, scores, outcome in zip(self._counts, self._scores, outcomes, strict=True):
            for position, count in enumerate(outcome):
                counts[position] += count
            scores.append(f1_in_time(outcome))
        bounds = {i: b for i in range(len(self.members)) if i != self.leader_index and (b := self.bound(i)) is not None}
        best = max(bounds, key=bounds.__getitem__, default=None)
        if best is not None and bounds[best] > self.margin:
            self.leader_index = best

    def job(self, job_id: str, threshold: Threshold) -> SelectorJob:
        return SelectorJob(self, job_id, threshold)

    def snapshot(self) -> object:
        """Cluster-level state for a restart (``StatefulMethod``): the members' own, the board, the leader."""
        members = self.members_snapshot()
        return {"members": members, "counts": [list(c) for c in self._counts], "leader": self.leader_index,
                "scores": [list(s) for s in self._scores]}  # fmt: skip

    def restore(self, state: object) -> None:
        if not isinstance(state, dict) or len(state.get("members", ())) != len(self.members):
            raise ValueError("not a snapshot of this selector")
        self.restore_members(state["members"])
        self._counts = [list(c) for c in state["counts"]]
        self.leader_index = int(state["leader"])
        for scores, saved_scores in zip(self._scores, state.get("scores", [[] for _ in self.members]), strict=True):
            scores.clear()
            scores.extend(saved_scores)

"""``spark-node``: Spark's q0.75/m1.5 rule, plus node evidence: flag a task when either says so.

Spark's rule reads only elapsed times, so it flags a straggler late, once most of its job finished; a task on a
node whose finished tasks (of every job so far) ran slow can be flagged at its first checkpoint (``node-slow``).
The two see different stragglers, so the union is earlier than the rule and finds more than the node alone.
``AnyOfMethod`` is the combinator: every member predicts at every checkpoint (each keeps its own state, as it
would alone) and the task is flagged, once, by the first member that flags it; the flag is that member's.
Where tasks report nothing about their own speed (no progress, no cpu) the node's past is the signal that
``hazard`` does not learn to use; there ``spark-node`` is the best single member of ``select``
(``scripts/prediction_default.py``).

>>> from streams.core.events import JobStart, Status, TaskCheckpoint, TaskFinish
>>> from streams.core.prediction.base import PredictionContext, step
>>> from streams.core.prediction.registry import build_method
>>> from streams.core.prediction.threshold import JobP90
>>> method = build_method("spark-node", PredictionContext())
>>> job = method.job("j", JobP90())
>>> S = 1_000_000
>>> _ = step(method, job, JobStart("j", 0, declared_tasks=8))
>>> for i, (node, seconds) in enumerate([("a", 10), ("b", 10), ("slow", 30), ("a", 10), ("slow", 30)]):
...     _ = step(method, job, TaskFinish("j", str(i), 0, node, seconds * S, seconds * S, Status.SUCCEEDED))
>>> flag = step(method, job, TaskCheckpoint("j", "5", 0, "slow", 2 * S, 2 * S, {}))  # too early for Spark
>>> flag.task_id, flag.method
('5', 'spark-node')
>>> step(method, job, TaskCheckpoint("j", "5", 0, "slow", 4 * S, 4 * S, {})) is None  # flagged once
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from streams.core.events import Event, StragglerPrediction, TaskCheckpoint
from streams.core.prediction.base import JobPredictor, PredictionMethod
from streams.core.prediction.members import MemberMethods
from streams.core.prediction.threshold import Threshold


class AnyOfJob:
    """One job's side of ``AnyOfMethod``: a job predictor per member, the tasks flagged so far."""

    def __init__(self, owner: AnyOfMethod, job_id: str, threshold: Threshold) -> None:
        self.owner = owner
        self.method = owner.name
        self.members: list[JobPredictor] = [m.job(job_id, threshold) for m in owner.members]
        self.flagged: set[str] = set()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the method (its members' state is saved once, beside the jobs)."""
        return {k: v for k, v in self.__dict__.items() if k != "owner"}

    def predict(self, event: TaskCheckpoint) -> StragglerPrediction | None:
        """Every member predicts; the first member's flag on a task not flagged yet is returned."""
        flags = [member.predict(event) for member in self.members]
        flag = next((f for f in flags if f is not None), None)
        if flag is None or flag.task_id in self.flagged:
            return None
        self.flagged.add(flag.task_id)
        return replace(flag, method=self.method)

    def learn(self, event: Event) -> None:
        for member in self.members:
            member.learn(event)


class AnyOfMethod(MemberMethods):
    """Flag a task when any of ``members`` (built methods) flags it (module doc)."""

    def __init__(self, members: Sequence[PredictionMethod], name: str) -> None:
        if not members:
            raise ValueError(f"{name} needs at least one member")
        self.members = list(members)
        self.name = name
        self.uses_threshold = any(m.uses_threshold for m in members)

    def job(self, job_id: str, threshold: Threshold) -> AnyOfJob:
        return AnyOfJob(self, job_id, threshold)

    def snapshot(self) -> object:
        """Cluster-level state for a restart (``StatefulMethod``): each member's own."""
        return self.members_snapshot()

    def restore(self, state: object) -> None:
        if not isinstance(state, list) or len(state) != len(self.members):
            raise ValueError(f"not a snapshot of {self.name}")
        self.restore_members(state)

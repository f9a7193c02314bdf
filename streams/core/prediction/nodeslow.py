"""``node-slow``: flag a running task at its checkpoint when its node has been slow (node evidence alone).

The plainest node-aware predictor, and a yardstick for what the node evidence is worth on its own: a task
is flagged at its first checkpoint (once ``initial_fraction`` of its job finished) when ``NodeEvidence``
says its node's finished tasks, of every job so far, ran more than e^``slowness`` times their job's median
on average (shrunk towards healthy by the evidence's prior). It looks at nothing the task itself reports:
where a task's telemetry reveals its own slowness (progress), it adds nothing to a model that reads it;
where it does not, it is what knowing the node is worth.

>>> from streams.core.events import JobStart, Status, TaskCheckpoint, TaskFinish
>>> from streams.core.prediction.base import step
>>> from streams.core.prediction.threshold import JobP90
>>> method = NodeSlowMethod(slowness=0.3)
>>> job = method.job("j", JobP90())
>>> _ = step(method, job, JobStart("j", 0, declared_tasks=8))
>>> S = 1_000_000
>>> for i, (node, seconds) in enumerate([("a", 10), ("b", 10), ("slow", 30), ("a", 10), ("slow", 30)]):
...     _ = step(method, job, TaskFinish("j", str(i), 0, node, seconds * S, seconds * S, Status.SUCCEEDED))
>>> step(method, job, TaskCheckpoint("j", "5", 0, "slow", 2 * S, 2 * S, {})).task_id
'5'
>>> step(method, job, TaskCheckpoint("j", "6", 0, "a", 2 * S, 2 * S, {})) is None
True
"""

from __future__ import annotations

from typing import Any

from streams.core.events import Event, StragglerPrediction, TaskCheckpoint
from streams.core.prediction.base import ClusterView
from streams.core.prediction.nodes import NodeEvidence
from streams.core.prediction.tasks import JobTasks
from streams.core.prediction.threshold import Threshold


class NodeSlowJob:
    """One job's side of ``node-slow``: which tasks are flagged; the evidence is the method's."""

    method = "node-slow"

    def __init__(self, owner: NodeSlowMethod) -> None:
        self.owner = owner
        self.tasks = JobTasks(initial_fraction=owner.initial_fraction)
        self.flagged: set[str] = set()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the method (its evidence is saved once, beside the jobs)."""
        return {k: v for k, v in self.__dict__.items() if k != "owner"}

    def predict(self, event: TaskCheckpoint) -> StragglerPrediction | None:
        """Flag the task once, when its node's slowness exceeds the method's ``slowness``."""
        self.tasks.update(event)
        if event.task_id in self.flagged or not self.tasks.ready:
            return None
        slowness = self.owner.evidence.slowness(event.node_id)
        if slowness <= self.owner.slowness:
            return None
        self.flagged.add(event.task_id)
        elapsed = float(event.elapsed_us)
        return StragglerPrediction(
            event.job_id, event.task_id, event.attempt, event.node_id, event.ts_us, event.elapsed_us,
            predicted_us=elapsed, adjusted_us=elapsed, threshold_us=0.0, weight=slowness, method=self.method,
        )  # fmt: skip

    def learn(self, event: Event) -> None:
        self.tasks.update(event)


class NodeSlowMethod:
    """``node-slow``: node evidence from every job, a ``NodeSlowJob`` per job (module doc)."""

    name = "node-slow"
    uses_threshold = False

    def __init__(
        self, slowness: float = 0.3, initial_fraction: float = 0.04, cluster: ClusterView | None = None
    ) -> None:
        self.slowness = slowness
        self.initial_fraction = initial_fraction
        self.evidence = NodeEvidence(cluster=cluster if cluster is not None else ClusterView())
        self.borrowed = False  # the evidence is another method's, which learns it (``borrow``)

    def can_borrow(self, evidence: NodeEvidence) -> bool:
        """Whether ``evidence`` is configured as this method's own and reads the same live view: only then does
        reading it instead of learning its own leave every flag the same."""
        mine = self.evidence
        return ((evidence.window, evidence.prior, evidence.horizon_s) == (mine.window, mine.prior, mine.horizon_s)
                and evidence.cluster is mine.cluster)

    def borrow(self, evidence: NodeEvidence) -> None:
        """Read ``evidence``, learned by another method driven with the same events (``select``'s hazard): one
        evidence learned and saved once instead of two alike. One this method ``can_borrow`` only, else a
        ValueError (the flags would change)."""
        if not self.can_borrow(evidence):
            raise ValueError("node-slow can only borrow an evidence configured as its own")
        self.evidence, self.borrowed = evidence, True

    def job(self, job_id: str, threshold: Threshold) -> NodeSlowJob:
        return NodeSlowJob(self)

    def learn(self, event: Event) -> None:
        if not self.borrowed:
            self.evidence.learn(event)

    def adopt(self, job: NodeSlowJob) -> None:
        """Bind a restored job predictor to this method's evidence."""
        job.owner = self

    def snapshot(self) -> object:
        """Cluster-level state for a restart (``StatefulMethod``): the node evidence."""
        return self.evidence.snapshot()

    def restore(self, state: object) -> None:
        self.evidence.restore(state)  # borrowed, the owner restores the same state again: alike either way

"""``supervised-node``: Nurd's latency model h with the task's node evidence among its features.

h (KNN over the latest finished tasks, ``nurd.py``) sees x plus ``NodeEvidence.features`` of the node the
task runs on: its slowness learned from finished tasks of every job so far, and the live window mean z and
listing when a ranking runs beside the worker. The evidence is the method's (it spans jobs); each job's
``NurdJob`` reads it when it builds a vector, so a finished task teaches h with the evidence its node had at
the task's last checkpoint, as predict saw it.

>>> from streams.core.prediction.threshold import Oracle
>>> method = NodeAwareMethod("supervised-node", lambda threshold, evidence: NodeAwareNurdJob(
...     evidence, threshold, weighting="none"))
>>> job = method.job("j", Oracle(10.0))
>>> from streams.core.events import TaskCheckpoint
>>> sorted(job._vectors(TaskCheckpoint("j", "t", 0, "n1", 5, 5, {"cpu": 1.0}))[0])
['cpu', 'node_listed', 'node_seen', 'node_slowness', 'node_z']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streams.core.events import Event, TaskCheckpoint
from streams.core.prediction.base import ClusterView, JobPredictor
from streams.core.prediction.nodes import NodeEvidence
from streams.core.prediction.nurd.nurd import NurdJob, Vector
from streams.core.prediction.threshold import Threshold


class NodeAwareNurdJob(NurdJob):
    """A ``NurdJob`` whose h also sees the task's node evidence (g sees the task's own features only)."""

    def __init__(self, evidence: NodeEvidence, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.evidence = evidence

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the evidence (the method's, saved once beside the jobs)."""
        return {k: v for k, v in self.__dict__.items() if k != "evidence"}

    def _vectors(self, event: TaskCheckpoint) -> tuple[Vector, Vector]:
        xh, xg = super()._vectors(event)
        xh = dict(xh)
        xh.update(self.evidence.features(event.node_id))
        return xh, xg


class NodeAwareMethod:
    """A method whose job predictors read one ``NodeEvidence`` that learns from every job's events."""

    uses_threshold = True

    def __init__(self, name: str, build: Callable[[Threshold, NodeEvidence], JobPredictor],
                 cluster: ClusterView | None = None) -> None:  # fmt: skip
        self.name = name
        self.build = build
        self.evidence = NodeEvidence(cluster=cluster if cluster is not None else ClusterView())

    def job(self, job_id: str, threshold: Threshold) -> JobPredictor:
        return self.build(threshold, self.evidence)

    def learn(self, event: Event) -> None:
        self.evidence.learn(event)

    def adopt(self, job: JobPredictor) -> None:
        """Bind a restored job predictor to this method's evidence."""
        if isinstance(job, NodeAwareNurdJob):
            job.evidence = self.evidence

    def snapshot(self) -> object:
        return self.evidence.snapshot()

    def restore(self, state: object) -> None:
        self.evidence.restore(state)

"""``hazard``: a classifier of "relaunch this task now", learned across jobs, node-aware.

Nurd asks "how long will this task take" and compares the answer with tau; what an operator can use is
narrower: is this running task a straggler *and* is there still time for a copy to win? ``HazardMethod``
learns that directly. At each checkpoint of a running task (once ``initial_fraction`` of its job finished)
a River logistic regression scores x, and the task is flagged once P >= ``p``. When the task finishes,
each of its checkpoints becomes a labelled example: positive when the task was a straggler (duration >=
tau) and a copy started at that checkpoint, taking the job's median finished duration at the time, would
have finished first (the evaluation's "in time" rule, seen from the past). Labels come late, as River's
progressive validation has them; the model is the method's, shared by all jobs, so a job is predicted with
what earlier jobs taught.

x is job-relative, so jobs of any scale share one model: log(elapsed / the job's median finished duration),
the share of the job finished, log(elapsed / progress / median) when the trace reports ``progress`` (LATE's
estimate), each usage feature z-scored against the job's checkpoints so far, and with ``nodes`` the
task's node evidence (``NodeEvidence``: the node's slowness from finished tasks of every job so far, and
the live window mean z and listing when a ranking runs beside it).

>>> from streams.core.events import JobStart, Status, TaskCheckpoint, TaskFinish
>>> from streams.core.prediction.base import step
>>> from streams.core.prediction.threshold import Oracle
>>> method = HazardMethod(p=0.5, initial_fraction=0.3)
>>> S = 1_000_000
>>> for j in range(6):  # jobs where tasks on node "slow" straggle
...     job = method.job(f"j{j}", Oracle(25.0))
...     _ = step(method, job, JobStart(f"j{j}", 0, declared_tasks=4))
...     for i, (node, seconds) in enumerate([("a", 10), ("b", 10), ("c", 10), ("slow", 40)]):
...         for at in range(1, seconds, 4):
...             flag = step(method, job, TaskCheckpoint(f"j{j}", str(i), 0, node, at * S, at * S, {}))
...         _ = step(method, job, TaskFinish(f"j{j}", str(i), 0, node, seconds * S, seconds * S, Status.SUCCEEDED))
>>> flag is None, method.evidence.slowness("slow") > method.evidence.slowness("a")
(True, True)
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Hashable
from typing import Any

from river import linear_model, optim, preprocessing, stats

from streams.core.events import Event, StragglerPrediction, TaskCheckpoint, TaskFinish
from streams.core.prediction.base import ClusterView
from streams.core.prediction.nodes import NodeEvidence
from streams.core.prediction.tasks import JobTasks
from streams.core.prediction.threshold import Threshold

Vector = dict[Hashable, Any]
_CLIP = 5.0


def default_classifier() -> Any:
    """Standardised features, logistic regression (SGD, lr 0.05)."""
    return preprocessing.StandardScaler() | linear_model.LogisticRegression(optimizer=optim.SGD(0.05))


class HazardJob:
    """One job's side of ``hazard``: job-relative features, labels at finish; the model is the method's."""

    def __init__(self, owner: HazardMethod, threshold: Threshold) -> None:
        self.owner = owner
        self.threshold = threshold
        self.method = owner.name
        self.tasks = JobTasks(initial_fraction=owner.initial_fraction)
        self.flagged: set[str] = set()
        self._usage: dict[str, stats.Var] = {}
        self._seen: dict[str, list[tuple[float, Vector]]] = {}  # running task -> (elapsed s, x) per checkpoint
        self._sorted: list[float] = []  # the job's finished durations (s), sorted

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the method (its model and evidence are saved once, beside the jobs)."""
        return {k: v for k, v in self.__dict__.items() if k != "owner"}

    def _median(self) -> float | None:
        durations = self._sorted
        return durations[len(durations) // 2] if durations else None

    def _vector(self, event: TaskCheckpoint, median: float) -> Vector:
        elapsed = max(event.elapsed_us / 1e6, 1e-3)
        median = max(median, 1e-3)
        x: Vector = {
            "log_elapsed_rel": math.log(elapsed / median),
            "finished_share": len(self.tasks.finished) / max(self.tasks.size, 1),
            # scale-free: the share of the job's finished tasks that took less than this one has run so far
            "elapsed_rank": bisect.bisect_left(self._sorted, elapsed) / len(self._sorted),
            "log_elapsed_over_max": max(-_CLIP, math.log(elapsed / max(self._sorted[-1], 1e-3))),
        }
        progress = event.features.get("progress")
        if progress is not None and progress > 0:
            x["log_projected_rel"] = max(-_CLIP, min(_CLIP, math.log(elapsed / progress / median)))
        for name, value in event.features.items():
            var = self._usage.get(name)
            if var is not None and var.n > 1:
                spread = math.sqrt(max(var.get(), 0.0)) or 1.0
                x[f"z_{name}"] = max(-_CLIP, min(_CLIP, (value - var.mean.get()) / spread))
        if self.owner.nodes:
            x.update(self.owner.evidence.features(event.node_id))
        if self.owner.nodes > 1:
            x.update(self.owner.evidence.local(event.node_id, event.job_id, event.ts_us / 1e6))
            early = max(0.0, 1.0 - x["elapsed_rank"])  # node evidence matters while a flag can still pay
            x["node_slowness_early"] = x["node_slowness"] * early
            x["node_window_z_early"] = x["node_window_z"] * early
        return x

    def predict(self, event: TaskCheckpoint) -> StragglerPrediction | None:
        """Flag the task once P(relaunch now pays) >= p, with the model as it is before this checkpoint."""
        self.tasks.update(event)
        median = self._median()
        if event.task_id in self.flagged or median is None or not self.tasks.ready:
            return None
        probability = float(self.owner.model.predict_proba_one(self._vector(event, median)).get(True, 0.0))
        if probability < self.owner.p:
            return None
        self.flagged.add(event.task_id)
        # hazard predicts no latency: the flag says "this task reaches tau", so predicted = adjusted = tau (or the
        # elapsed time when larger) and the weight field carries P
        tau_us = (self.threshold.value() or 0.0) * 1e6
        predicted = max(tau_us, float(event.elapsed_us))
        return StragglerPrediction(
            event.job_id, event.task_id, event.attempt, event.node_id, event.ts_us, event.elapsed_us,
            predicted_us=predicted, adjusted_us=predicted, threshold_us=tau_us, weight=probability, method=self.method,
        )  # fmt: skip

    def learn(self, event: Event) -> None:
        """Checkpoints are kept (their x as predict saw it); a finish labels them and trains the model."""
        self.tasks.update(event)
        if isinstance(event, TaskCheckpoint):
            self.threshold.estimate(event.task_id, event.elapsed_us / 1e6)
            median = self._median()
            if median is not None:
                self._seen.setdefault(event.task_id, []).append((event.elapsed_us / 1e6, self._vector(event, median)))
            for name, value in event.features.items():
                self._usage.setdefault(name, stats.Var()).update(value)
        elif isinstance(event, TaskFinish):
            seen = self._seen.pop(event.task_id, [])
            if event.succeeded:
                bisect.insort(self._sorted, event.duration_us / 1e6)
                self.threshold.estimate(event.task_id, event.duration_us / 1e6)
                self._label(event.duration_us / 1e6, seen)

    def _label(self, duration: float, seen: list[tuple[float, Vector]]) -> None:
        # A task with no example to label (no checkpoint taken as one) teaches nothing: skip tau, which sorts the
        # job's estimates at every finish (most of Google's tasks report no checkpoint).
        if not seen:
            return
        median = self._median() or duration
        tau = self.threshold.value()
        straggler = tau is not None and duration >= tau
        for elapsed, x in seen:
            self.owner.model.learn_one(x, straggler and elapsed + median < duration)


class HazardMethod:
    """``hazard``: a classifier shared by all jobs, node evidence from all jobs, a ``HazardJob`` per job.

    Hyperparameters: ``p`` (flag when P >= p), ``nodes`` (node evidence as features), ``initial_fraction``,
    ``classifier`` (a River classifier, cloned), ``cluster`` (the live node view, shared with the evidence).
    """

    uses_threshold = True  # labels are "straggler" against tau

    def __init__(self, p: float = 0.5, nodes: int = 1, initial_fraction: float = 0.04,
                 classifier: Any = None, cluster: ClusterView | None = None, name: str = "hazard") -> None:  # fmt: skip
        self.p = p
        self.nodes = nodes
        self.initial_fraction = initial_fraction
        self.name = name
        self.model = (classifier or default_classifier()).clone()
        self.evidence = NodeEvidence(cluster=cluster if cluster is not None else ClusterView())

    def job(self, job_id: str, threshold: Threshold) -> HazardJob:
        return HazardJob(self, threshold)

    def adopt(self, job: HazardJob) -> None:
        """Bind a restored job predictor to this method's model and evidence."""
        job.owner = self

    def learn(self, event: Event) -> None:
        self.evidence.learn(event)

    def snapshot(self) -> object:
        """Cluster-level state for a restart (``StatefulMethod``): the classifier and the node evidence."""
        return {"model": self.model, "evidence": self.evidence.snapshot()}

    def restore(self, state: object) -> None:
        if not isinstance(state, dict) or "model" not in state:
            raise ValueError("not a hazard snapshot")
        self.model = state["model"]
        self.evidence.restore(state["evidence"])

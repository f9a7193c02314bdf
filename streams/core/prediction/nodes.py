"""Node evidence for node-aware straggler prediction: how slow each node has been, learned causally.

None of the anchors (Nurd, Spark, Hadoop, Hawkeye's task-level rule) asks where a task runs when it predicts;
yet a task on a contended node straggles for a reason visible before it has run long. ``NodeEvidence`` is the
cluster-level state of a node-aware method: every successful finish of every job adds to the task's node
the log of its duration relative to the median of its job's finished tasks so far (the job's own scale, so
jobs of any size mix), in a sliding window per node. A node's ``slowness`` is the window's sum over its
length plus ``prior`` pseudo-tasks at 0 (a healthy node), so one slow task on an unknown node says little.

Strictly causal: a finish is learned when it happens, the job median is the median of durations finished
so far (including this one). Where a live ranking exists (the worker), ``ClusterView`` adds the node's
current window mean z and whether it is listed; in evaluation there is none and those features are 0.

>>> from streams.core.events import Status, TaskFinish
>>> evidence = NodeEvidence(prior=1.0)
>>> for task, (node, seconds) in enumerate([("a", 10), ("b", 10), ("slow", 30), ("a", 10)]):
...     evidence.learn(TaskFinish("j", str(task), 0, node, 0, seconds * 1_000_000, Status.SUCCEEDED))
>>> evidence.slowness("a") == 0.0, round(evidence.slowness("slow"), 2), evidence.slowness("unseen")
(True, 0.55, 0.0)
>>> sorted(evidence.features("slow"))
['node_listed', 'node_seen', 'node_slowness', 'node_z']
"""

from __future__ import annotations

import bisect
import copy
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from river import stats

from streams.core.events import Event, JobFinish, TaskFinish
from streams.core.prediction.base import ClusterView

_CLIP = 5.0


@dataclass
class NodeEvidence:
    """Per node, the log relative durations of its latest ``window`` finished tasks (module doc)."""

    window: int = 50
    prior: float = 2.0
    horizon_s: float = 900.0  # the recent window of ``node_window_z``
    cluster: ClusterView = field(default_factory=ClusterView)
    _nodes: dict[str, deque[float]] = field(default_factory=dict)
    _jobs: dict[str, list[float]] = field(default_factory=dict)  # each running job's finished durations, sorted
    _logs: dict[str, stats.Var] = field(default_factory=dict)  # each running job's log durations
    _recent: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)  # node -> (finish s, z)
    _same: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # job -> node -> log rel durations
    # what ``snapshot`` copied, until the next change (see ``snapshot``)
    _copied: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def learn(self, event: Event) -> None:
        """A successful finish adds to its node; a job's end forgets the job's durations."""
        if isinstance(event, JobFinish):
            self._copied = None
            for state in (self._jobs, self._logs, self._same):
                state.pop(event.job_id, None)
            return
        if not isinstance(event, TaskFinish) or not event.succeeded:
            return
        self._copied = None
        seconds = max(event.duration_us / 1e6, 1e-3)
        durations = self._jobs.setdefault(event.job_id, [])
        bisect.insort(durations, seconds)
        median = durations[len(durations) // 2]
        ratios = self._nodes.get(event.node_id)
        if ratios is None:
            ratios = self._nodes[event.node_id] = deque(maxlen=self.window)
        relative = math.log(seconds / median)
        ratios.append(relative)
        self._same.setdefault(event.job_id, {}).setdefault(event.node_id, []).append(relative)
        logs = self._logs.get(event.job_id)
        if logs is None:  # not setdefault, which would build a River Var at every finish
            logs = self._logs[event.job_id] = stats.Var()
        logs.update(math.log(seconds))
        if logs.n > 2:
            spread = math.sqrt(max(logs.get(), 0.0)) or 1.0
            z = max(-_CLIP, min(_CLIP, (math.log(seconds) - logs.mean.get()) / spread))
            recent = self._recent.setdefault(event.node_id, deque(maxlen=self.window))
            recent.append((event.ts_us / 1e6, z))

    def slowness(self, node_id: str) -> float:
        """Mean log relative duration on the node, shrunk to 0 by ``prior`` healthy pseudo-tasks."""
        ratios = self._nodes.get(node_id)
        return math.fsum(ratios) / (len(ratios) + self.prior) if ratios else 0.0

    def features(self, node_id: str) -> dict[str, float]:
        """The node's evidence as features: slowness, log(1 + tasks seen), live window mean z and listing."""
        ratios = self._nodes.get(node_id)
        return {
            "node_slowness": self.slowness(node_id),
            "node_seen": math.log1p(len(ratios) if ratios else 0),
            "node_z": self.cluster.node_mean_z.get(node_id, 0.0),
            "node_listed": float(node_id in self.cluster.listed),
        }

    def local(self, node_id: str, job_id: str, now_s: float) -> dict[str, float]:
        """Fresher, narrower evidence (``hazard``'s ``node_features=2``): the mean log relative duration of
        this job's own finished tasks on the node (the same machine, shrunk by one healthy pseudo-task), the
        node's window mean z (its finishes of the last ``horizon_s`` seconds, each z-scored against its job's
        log durations so far) and how many finishes that window holds."""
        same = self._same.get(job_id, {}).get(node_id, ())
        window = [z for at, z in self._recent.get(node_id, ()) if at >= now_s - self.horizon_s]
        return {
            "node_job_slowness": math.fsum(same) / (len(same) + 1.0),
            "node_window_z": math.fsum(window) / (len(window) + 1.0),
            "node_window_n": math.log1p(len(window)),
        }

    def snapshot(self) -> dict[str, object]:
        """Plain data for a restart.

        Methods that share one evidence (``select``'s hazard and node-slow, ``NodeSlowMethod.borrow``) each save
        it: the copies made once per change are handed to both, so one pickle of the two holds them once (its
        memo) and a reader unpickles the same lists twice, which ``restore`` copies anyway. Only the running
        jobs' ``stats.Var`` objects, which ``restore`` keeps, are copied for each call: two evidences restored
        from one pickle by a build that does not share must not update one Var twice. The result is read-only: its
        lists are this evidence's cache until the next change (callers pickle it at once)."""
        copied = self._copied
        if copied is None:
            copied = self._copied = {
                "nodes": {n: list(r) for n, r in self._nodes.items()},
                "jobs": {j: list(d) for j, d in self._jobs.items()},
                "recent": {n: list(r) for n, r in self._recent.items()},
                "same": {j: {n: list(r) for n, r in nodes.items()} for j, nodes in self._same.items()},
            }
        return {"nodes": copied["nodes"], "jobs": copied["jobs"],
                "logs": {j: copy.deepcopy(v) for j, v in self._logs.items()},
                "recent": copied["recent"], "same": copied["same"]}  # fmt: skip

    def restore(self, state: object) -> None:
        if not isinstance(state, dict) or not isinstance(state.get("nodes"), dict):
            raise ValueError("not a node evidence snapshot")
        self._nodes = {n: deque(r, maxlen=self.window) for n, r in state["nodes"].items()}
        self._jobs = {j: sorted(d) for j, d in state.get("jobs", {}).items()}
        self._logs = dict(state.get("logs", {}))
        self._recent = {n: deque(r, maxlen=self.window) for n, r in state.get("recent", {}).items()}
        self._same = {j: {n: list(r) for n, r in nodes.items()} for j, nodes in state.get("same", {}).items()}
        self._copied = None

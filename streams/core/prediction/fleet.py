"""The live predictors of one partition: one method (cluster-level state) and a predictor per running job.

This is what the ``predict_stragglers`` agent drives. Each job gets its own predictor (SPEC 4 is per job)
on its first event and loses it at its JobFinish, or when no event of it came for ``job_idle_timeout_us``
of event time, so memory follows the running jobs; the method sees every event of every job. In live
operation tau must come from data available at the time, so job predictors use the online threshold.

>>> from streams.core.events import JobFinish, TaskStart
>>> fleet = PredictorFleet("nurd", job_idle_timeout_us=10)
>>> fleet.step(TaskStart("j1", "t0", 0, "n1", 0)) is None
True
>>> _ = fleet.step(TaskStart("j2", "t0", 0, "n1", 5)); fleet.running_jobs
2
>>> _ = fleet.step(TaskStart("j2", "t1", 0, "n2", 20))  # j1 has been idle for 20 > 10
>>> fleet.running_jobs, fleet.step(JobFinish("j2", 30)), fleet.running_jobs
(1, None, 0)
"""

from __future__ import annotations

import base64
import heapq
from typing import Any

from streams.core.events import Event, JobFinish, StragglerPrediction
from streams.core.prediction.base import JobPredictor, PredictionContext, StatefulMethod, step
from streams.core.prediction.registry import build_method
from streams.core.prediction.snapshot import SnapshotMismatch, restore, snapshot
from streams.core.prediction.threshold import JobP90

SNAPSHOT_VERSION = 2  # 2: the method's cluster-level state beside the jobs


class PredictorFleet:
    """The method registered as ``method``, built for ``context``, and its job predictors as jobs come and go."""

    def __init__(self, method: str = "nurd", context: PredictionContext | None = None,
                 job_idle_timeout_us: int = 3_600_000_000) -> None:  # fmt: skip
        self.context = context if context is not None else PredictionContext()
        self.method = method
        self.predictor = build_method(method, self.context)  # ValueError naming the known methods
        self.job_idle_timeout_us = job_idle_timeout_us
        self._jobs: dict[str, JobPredictor] = {}
        self._last: dict[str, int] = {}
        # (an event time of the job, job), one entry per job at or before its last event: an entry found early is
        # queued again at the job's last event time (``_expire``)
        self._idle: list[tuple[int, str]] = []
        self.cold_starts = 0

    @property
    def running_jobs(self) -> int:
        return len(self._jobs)

    def step(self, event: Event) -> StragglerPrediction | None:
        """Feed one event of any job (predict before learn); the task it flags, if any."""
        job_id = event.job_id
        flag = None
        if isinstance(event, JobFinish):
            job = self._jobs.get(job_id)
            if job is not None:
                job.learn(event)
            self.predictor.learn(event)
            self._forget(job_id)
        else:
            job = self._jobs.get(job_id)
            if job is None:
                job = self._jobs[job_id] = self.predictor.job(job_id, JobP90())
            flag = step(self.predictor, job, event)
            if event.ts_us > self._last.get(job_id, -1):
                if job_id not in self._last:  # later events move ``_last`` only: ``_expire`` re-queues (lazily)
                    heapq.heappush(self._idle, (event.ts_us, job_id))
                self._last[job_id] = event.ts_us
        self._expire(event.ts_us)
        return flag

    def _forget(self, job_id: str) -> None:
        self._jobs.pop(job_id, None)
        self._last.pop(job_id, None)

    def _expire(self, now_us: int) -> None:
        """Forget the jobs idle for longer than the timeout. A job's entry holds the time of an event of it, its
        latest or an earlier one (one entry per job, not a heap push at every event, which cost much of the
        prediction's stepping); an entry found earlier than its job's latest event
        is put back at that time, so a job goes exactly when its latest event is older than the timeout."""
        while self._idle and self._idle[0][0] + self.job_idle_timeout_us < now_us:
            at, job_id = heapq.heappop(self._idle)
            last = self._last.get(job_id)
            if last == at:
                self._forget(job_id)
            elif last is not None and last > at:
                heapq.heappush(self._idle, (last, job_id))

    def snapshot(self) -> dict[str, Any]:
        """Plain JSON-able data; each job's and the method's learned state is a versioned, base64 envelope."""
        jobs = [[job_id, self._last[job_id], _encoded(snapshot(job))] for job_id, job in self._jobs.items()]
        cluster = None
        if isinstance(self.predictor, StatefulMethod):
            cluster = _encoded(snapshot(self.predictor.snapshot(), method=self.method))
        return {"version": SNAPSHOT_VERSION, "method": self.method, "cluster": cluster, "jobs": jobs}

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from ``snapshot()``; a job (or cluster state) this build cannot read starts cold.
        Another fleet version or method is a ValueError: the caller starts the whole partition cold."""
        if state.get("version") != SNAPSHOT_VERSION or state.get("method") != self.method:
            raise ValueError(f"predictor fleet snapshot {state.get('version')!r}/{state.get('method')!r} "
                             f"does not match {SNAPSHOT_VERSION}/{self.method}")  # fmt: skip
        self._jobs, self._last, self._idle = {}, {}, []
        if state.get("cluster") is not None and isinstance(self.predictor, StatefulMethod):
            try:
                self.predictor.restore(restore(_decoded(state["cluster"]), method=self.method))
            except SnapshotMismatch:
                self.cold_starts += 1
        for job_id, last, envelope in state["jobs"]:
            try:
                job = self._jobs[job_id] = restore(_decoded(envelope))
            except SnapshotMismatch:
                self.cold_starts += 1
                continue
            adopt = getattr(self.predictor, "adopt", None)
            if adopt is not None:  # a job that reads its method's state is pickled without it: bind it again
                adopt(job)
            self._last[job_id] = int(last)
            heapq.heappush(self._idle, (int(last), job_id))


def _encoded(envelope: dict[str, Any]) -> dict[str, Any]:
    return {**envelope, "state": base64.b64encode(envelope["state"]).decode("ascii")}


def _decoded(envelope: dict[str, Any]) -> dict[str, Any]:
    return {**envelope, "state": base64.b64decode(envelope["state"])}

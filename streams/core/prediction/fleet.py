"""The live predictors of every running job of one partition: what the ``predict_stragglers`` agent drives.

Each job gets its own predictor (SPEC 4 is per job) on its first event and loses it at its JobFinish, or when
no event of it came for ``job_idle_timeout_us`` of event time, so memory follows the running jobs. In live
operation tau must come from data available at the time, so predictors use the online threshold.

>>> from streams.core.events import JobFinish, TaskStart
>>> fleet = PredictorFleet("nurd", job_idle_timeout_us=10)
>>> fleet.observe(TaskStart("j1", "t0", 0, "n1", 0))
[]
>>> fleet.observe(TaskStart("j2", "t0", 0, "n1", 5)), fleet.running_jobs
([], 2)
>>> _ = fleet.observe(TaskStart("j2", "t1", 0, "n2", 20))  # j1 has been idle for 20 > 10
>>> fleet.running_jobs, fleet.observe(JobFinish("j2", 30)), fleet.running_jobs
(1, [], 0)
"""

from __future__ import annotations

import base64
import heapq
from typing import Any

from streams.core.events import Event, JobFinish, StragglerPrediction
from streams.core.prediction.methods import METHODS, Options, Predictor, make_method
from streams.core.prediction.snapshot import SnapshotMismatch, restore, snapshot

SNAPSHOT_VERSION = 1


class PredictorFleet:
    """Per-job predictors of one method, created and forgotten as jobs come and go."""

    def __init__(self, method: str = "nurd", options: Options | None = None,
                 job_idle_timeout_us: int = 3_600_000_000) -> None:
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; one of {', '.join(sorted(METHODS))}")
        self.method = method
        self.options = options if options is not None else Options()
        self.job_idle_timeout_us = job_idle_timeout_us
        self._jobs: dict[str, Predictor] = {}
        self._last: dict[str, int] = {}
        self._idle: list[tuple[int, str]] = []  # (last event time, job); stale entries are skipped
        self.cold_starts = 0

    @property
    def running_jobs(self) -> int:
        return len(self._jobs)

    def observe(self, event: Event) -> list[StragglerPrediction]:
        """Feed one event of any job; return the tasks it flagged."""
        job_id = event.job_id
        flagged: list[StragglerPrediction] = []
        if isinstance(event, JobFinish):
            self._forget(job_id)
        else:
            predictor = self._jobs.get(job_id)
            if predictor is None:
                predictor = self._jobs[job_id] = make_method(self.method, tau_s=None, options=self.options)
            flagged = predictor.observe(event)
            if event.ts_us > self._last.get(job_id, -1):
                self._last[job_id] = event.ts_us
                heapq.heappush(self._idle, (event.ts_us, job_id))
        self._expire(event.ts_us)
        return flagged

    def _forget(self, job_id: str) -> None:
        self._jobs.pop(job_id, None)
        self._last.pop(job_id, None)

    def _expire(self, now_us: int) -> None:
        while self._idle and self._idle[0][0] + self.job_idle_timeout_us < now_us:
            last, job_id = heapq.heappop(self._idle)
            if self._last.get(job_id) == last:
                self._forget(job_id)

    def snapshot(self) -> dict[str, Any]:
        """Plain JSON-able data; each job's learned state is a versioned, base64-encoded envelope."""
        jobs = []
        for job_id, predictor in self._jobs.items():
            envelope = snapshot(predictor)
            envelope["state"] = base64.b64encode(envelope["state"]).decode("ascii")
            jobs.append([job_id, self._last[job_id], envelope])
        return {"version": SNAPSHOT_VERSION, "method": self.method, "jobs": jobs}

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from ``snapshot()``; a job whose envelope this build cannot read starts cold."""
        if state.get("version") != SNAPSHOT_VERSION or state.get("method") != self.method:
            raise ValueError(f"predictor fleet snapshot {state.get('version')!r}/{state.get('method')!r} "
                             f"does not match {SNAPSHOT_VERSION}/{self.method}")
        self._jobs, self._last, self._idle = {}, {}, []
        for job_id, last, envelope in state["jobs"]:
            try:
                self._jobs[job_id] = restore({**envelope, "state": base64.b64decode(envelope["state"])})
            except SnapshotMismatch:
                self.cold_starts += 1
                continue
            self._last[job_id] = int(last)
            heapq.heappush(self._idle, (int(last), job_id))

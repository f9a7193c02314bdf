"""Per-job normalised execution values (DSB eq. 1, ML-NA eq. 1) with SPEC 3's finalisation rules.

A task's z-value is ``(D_i - mean_j) / std_j`` over the durations of its job's SUCCEEDED attempts,
``std_j`` the population standard deviation. A job's values are final when the job is final: a
``JobFinish``, all declared tasks succeeded, or no event for the job during ``job_idle_timeout_us``
of event time. Values emitted then equal the batch formula (computed with numpy) exactly.

With ``provisional=True``, ``rescore`` gives jobs still running provisional values: each success against
the mean and std of the job's successes so far, marked provisional, for every job whose successes changed
since the last call (the stages call it once per ranking boundary). A job's standing provisional values are
withdrawn (``take_withdrawn``) when new ones replace them and when the job becomes final, so downstream a
task counts once: provisionally while its job runs, finally once it ended. Scored against all successes of
the job so far, a job's provisional values have mean 0 like its final ones, with no bias towards the tasks
that finished first.

Only the first SUCCEEDED attempt of a task id counts (a re-run of a finished task would otherwise
weigh twice); failed, killed, evicted and lost attempts never count. Events of a job that is already
final are counted in ``late_events`` (a ``JobFinish`` never: it carries nothing to score) and otherwise ignored.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streams.core.events import Event, JobFinish, JobStart, NormalizedTask, TaskFinish

# 2: provisional values by rescoring at boundaries (issue 18) replaced the per-success running moments.
SNAPSHOT_VERSION = 2
MIN_SUCCESSES = 2  # fewer successes, or a std of 0, give no z-values (SPEC 3)
PROVISIONAL_MIN_SUCCESSES = 2  # a running job is scored provisionally from this many successes on


@dataclass(slots=True)
class _Success:
    task_id: str
    attempt: int
    node_id: str
    ts_us: int
    duration_us: int


@dataclass(slots=True)
class _Job:
    last_ts_us: int
    first_ts_us: int
    declared_tasks: int | None = None
    successes: dict[str, _Success] = field(default_factory=dict)
    changed: bool = False  # successes changed since the last provisional values
    sent: list[NormalizedTask] = field(default_factory=list)  # its standing provisional values


class JobNormalizer:
    """Turn task and job events into NormalizedTask samples, one job at a time.

    >>> from streams.core.events import Status
    >>> normalizer = JobNormalizer(job_idle_timeout_us=3_600_000_000)
    >>> events = [TaskFinish("j", f"t{i}", 0, f"n{i}", 10 + d, d, Status.SUCCEEDED) for i, d in
    ...           enumerate([10, 20, 30])]
    >>> [normalizer.update(e) for e in events]
    [[], [], []]
    >>> [round(s.z, 4) for s in normalizer.update(JobFinish("j", ts_us=100))]
    [-1.2247, 0.0, 1.2247]
    """

    def __init__(self, job_idle_timeout_us: int = 3_600_000_000, provisional: bool = False,
                 quiet_us: int = 0, age_us: int = 0) -> None:
        if job_idle_timeout_us <= 0:
            raise ValueError(f"job_idle_timeout_us must be positive, got {job_idle_timeout_us}")
        self.job_idle_timeout_us = job_idle_timeout_us
        self.provisional = provisional
        self.quiet_us = quiet_us  # a job is scored provisionally once it had no event for this long ...
        self.age_us = age_us  # ... or once it has run this long
        self._jobs: dict[str, _Job] = {}
        self._finished: dict[str, int] = {}  # job id -> event time it became final
        self._finished_order: list[tuple[int, str]] = []  # heap over _finished, to forget in time order
        self._idle: list[tuple[int, str]] = []  # (a past last_ts_us, job id), one per open job
        self._watermark = -1
        self._withdrawn: list[tuple[int, NormalizedTask]] = []  # (event time withdrawn, provisional value)
        self.late_events = 0

    @property
    def open_jobs(self) -> int:
        return len(self._jobs)

    def update(self, event: Event) -> list[NormalizedTask]:
        """Take one event; return the samples it made available (and those of jobs it made idle).

        Jobs whose idle deadline passed before this event's time are finalised first, so an event that
        comes after its job's deadline is late whether or not ``expire`` was called in between: the result
        depends on the sequence of events alone, never on when a caller chose to expire.
        """
        ts = event.ts_us
        out: list[NormalizedTask] = self.expire(ts - 1) if self.due(ts - 1) else []
        if ts > self._watermark:
            self._watermark = ts
        if event.job_id in self._finished:
            # a JobFinish carries nothing to score (one after the declared tasks all succeeded ends every synthetic
            # job); anything else came too late
            self.late_events += not isinstance(event, JobFinish)
        else:
            out.extend(self._apply(event))
        if self.due(self._watermark):
            out.extend(self.expire(self._watermark))
        return out

    def due(self, now_us: int) -> bool:
        """Whether ``expire(now_us)`` has anything to do: the cheap test before it, a few times per event."""
        idle, finished, timeout = self._idle, self._finished_order, self.job_idle_timeout_us
        return bool(idle and idle[0][0] + timeout <= now_us) or bool(finished and finished[0][0] < now_us - timeout)

    def expire(self, now_us: int) -> list[NormalizedTask]:
        """Finalise every job with no event in ``job_idle_timeout_us`` before ``now_us``."""
        out: list[NormalizedTask] = []
        timeout = self.job_idle_timeout_us
        # One heap entry per open job, refreshed lazily: an entry older than its job's last event is
        # pushed again with the newer time instead of finalising the job.
        while self._idle and self._idle[0][0] + timeout <= now_us:
            _, job_id = heapq.heappop(self._idle)
            job = self._jobs.get(job_id)
            if job is None:
                continue
            if job.last_ts_us + timeout <= now_us:
                out.extend(self._finalise(job_id, job.last_ts_us + timeout))
            else:
                heapq.heappush(self._idle, (job.last_ts_us, job_id))
        if self._finished_order and self._finished_order[0][0] < now_us - timeout:
            self._forget_finished(now_us)
        return out

    def flush(self) -> list[NormalizedTask]:
        """Finalise every open job (end of a finite trace)."""
        out: list[NormalizedTask] = []
        for job_id in sorted(self._jobs, key=lambda j: (self._jobs[j].last_ts_us, j)):
            out.extend(self._finalise(job_id, self._jobs[job_id].last_ts_us))
        self._idle.clear()
        return out

    # --- state life cycle ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Plain JSON-able state; ``restore`` of it continues exactly where this left off."""
        return {
            "version": SNAPSHOT_VERSION,
            "watermark": self._watermark,
            "late_events": self.late_events,
            "finished": sorted(self._finished.items()),
            "jobs": [
                [job_id, job.first_ts_us, job.last_ts_us, job.declared_tasks, job.changed,
                 [[s.task_id, s.attempt, s.node_id, s.ts_us, s.duration_us] for s in job.successes.values()],
                 [[p.task_id, p.attempt, p.node_id, p.ts_us, p.duration_us, p.z, p.emitted_us] for p in job.sent]]
                for job_id, job in self._jobs.items()
            ],
            "withdrawn": [[at, _row(p)] for at, p in self._withdrawn],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Replace the state by ``state`` from ``snapshot``; a different version raises ValueError."""
        if state.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown JobNormalizer snapshot version {state.get('version')!r}")
        self._watermark = int(state["watermark"])
        self.late_events = int(state["late_events"])
        self._finished = {str(job): int(ts) for job, ts in state["finished"]}
        self._finished_order = [(ts, job) for job, ts in self._finished.items()]
        heapq.heapify(self._finished_order)
        self._jobs = {}
        for job_id, first_ts, last_ts, declared, changed, successes, sent in state["jobs"]:
            job = _Job(int(last_ts), int(first_ts), declared, changed=bool(changed))
            for task_id, attempt, node_id, ts_us, duration_us in successes:
                job.successes[task_id] = _Success(
                    task_id, int(attempt), node_id, int(ts_us), int(duration_us)
                )
            job.sent = [_from_row([job_id, *row[:6], True, row[6]]) for row in sent]
            self._jobs[job_id] = job
        self._withdrawn = [(int(at), _from_row(row)) for at, row in state["withdrawn"]]
        self._idle = [(job.last_ts_us, job_id) for job_id, job in self._jobs.items()]
        heapq.heapify(self._idle)

    # --- internals -------------------------------------------------------------------------------

    def _apply(self, event: Event) -> list[NormalizedTask]:
        job = self._jobs.get(event.job_id)
        if job is None:
            job = self._jobs[event.job_id] = _Job(event.ts_us, event.ts_us)
            heapq.heappush(self._idle, (event.ts_us, event.job_id))
        elif event.ts_us > job.last_ts_us:
            job.last_ts_us = event.ts_us
        if isinstance(event, JobFinish):
            return self._finalise(event.job_id, event.ts_us)
        if isinstance(event, JobStart):
            job.declared_tasks = event.declared_tasks
            if job.declared_tasks is not None and job.successes and len(job.successes) >= job.declared_tasks:
                # The declaration arrived after its tasks (another topic): final as of the last success.
                return self._finalise(event.job_id, max(s.ts_us for s in job.successes.values()))
        elif isinstance(event, TaskFinish) and event.succeeded and event.task_id not in job.successes:
            job.successes[event.task_id] = _Success(
                event.task_id, event.attempt, event.node_id, event.ts_us, event.duration_us
            )
            job.changed = True
            if job.declared_tasks is not None and len(job.successes) >= job.declared_tasks:
                return self._finalise(event.job_id, event.ts_us)
        return []

    def rescore(self, emitted_us: int, horizon_us: int | None = None) -> list[NormalizedTask]:
        """Provisional values, as of ``emitted_us``, of every open job whose successes changed since the last
        call and that has been quiet for ``quiet_us`` or running for ``age_us`` (only the values of tasks that
        finished at or after ``horizon_us``: older ones are out of every window anyway); the values they
        replace are withdrawn. Nothing when ``provisional`` is off."""
        if not self.provisional:
            return []
        out: list[NormalizedTask] = []
        due = [j for j, job in self._jobs.items() if job.changed and (
            emitted_us - job.last_ts_us >= self.quiet_us or emitted_us - job.first_ts_us >= self.age_us)]
        for job_id in sorted(due):
            job = self._jobs[job_id]
            job.changed = False
            self._withdrawn.extend((emitted_us, p) for p in job.sent)
            scored = _scored(job_id, job, emitted_us, provisional=True) if len(
                job.successes) >= PROVISIONAL_MIN_SUCCESSES else []
            job.sent = [s for s in scored if horizon_us is None or s.ts_us >= horizon_us]
            out.extend(job.sent)
        return out

    @property
    def has_withdrawn(self) -> bool:
        """Whether provisional values were withdrawn since the last ``take_withdrawn``."""
        return bool(self._withdrawn)

    def take_withdrawn(self) -> list[tuple[int, NormalizedTask]]:
        """``(event time, value)`` of the provisional values withdrawn since the last call: replaced by newer
        ones, or their job became final (at that event time)."""
        withdrawn, self._withdrawn = self._withdrawn, []
        return withdrawn

    def _finalise(self, job_id: str, final_ts_us: int) -> list[NormalizedTask]:
        job = self._jobs.pop(job_id)
        self._finished[job_id] = final_ts_us
        heapq.heappush(self._finished_order, (final_ts_us, job_id))
        self._withdrawn.extend((final_ts_us, p) for p in job.sent)
        return _scored(job_id, job, final_ts_us, provisional=False)

    def _forget_finished(self, now_us: int) -> None:
        # A final job is remembered for one more timeout so that its stragglers count as late,
        # not as a new job of one task; then it is forgotten to bound memory.
        horizon = now_us - self.job_idle_timeout_us
        while self._finished_order and self._finished_order[0][0] < horizon:
            ts, job_id = heapq.heappop(self._finished_order)
            if self._finished.get(job_id) == ts:
                del self._finished[job_id]


def _scored(job_id: str, job: _Job, emitted_us: int, provisional: bool) -> list[NormalizedTask]:
    """Every success of ``job`` against the job's mean and population std (the batch formula)."""
    successes = sorted(job.successes.values(), key=lambda s: (s.ts_us, s.task_id))
    if len(successes) < MIN_SUCCESSES:
        return []
    durations = np.array([s.duration_us for s in successes], dtype=np.float64)
    mean = float(np.mean(durations))
    std = float(np.std(durations))
    if std == 0.0:
        return []
    return [_sample(job_id, s, (s.duration_us - mean) / std, emitted_us, provisional) for s in successes]


def _row(sample: NormalizedTask) -> list[Any]:
    return [sample.job_id, sample.task_id, sample.attempt, sample.node_id, sample.ts_us, sample.duration_us,
            sample.z, sample.provisional, sample.emitted_us]


def _from_row(row: list[Any]) -> NormalizedTask:
    job, task, attempt, node, ts, duration, z, provisional, emitted = row
    return NormalizedTask(str(job), str(task), int(attempt), str(node), int(ts), int(duration), float(z),
                          bool(provisional), None if emitted is None else int(emitted))


def _sample(job_id: str, success: _Success, z: float, emitted_us: int, provisional: bool = False) -> NormalizedTask:
    # emitted_us is the event time the value became final: a function of the trace alone, never of the order
    # in which two topics happened to arrive, so every run ranks it at the same boundary.
    return NormalizedTask(
        job_id, success.task_id, success.attempt, success.node_id, success.ts_us, success.duration_us,
        float(z), provisional, emitted_us,
    )

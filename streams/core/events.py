"""The records that flow through laggard, as frozen dataclasses (SPEC section 2).

These are the in-memory form of the Avro records in ``schemas/``; ``streams.serde`` maps one to the other.
Times are integer microseconds since the trace's epoch (``ts_us``).

>>> finish = TaskFinish("j1", "t1", 0, "n7", ts_us=5_000_000, duration_us=4_000_000, status=Status.SUCCEEDED)
>>> finish.succeeded
True
>>> validate(TaskFinish("j1", "t1", 0, "n7", ts_us=5, duration_us=-1, status=Status.SUCCEEDED))
'negative duration_us: -1'
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class Status(StrEnum):
    """How a task attempt ended."""

    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"
    EVICTED = "EVICTED"
    LOST = "LOST"


@dataclass(frozen=True, slots=True)
class TaskStart:
    """A task attempt was placed on a node and started."""

    job_id: str
    task_id: str
    attempt: int
    node_id: str
    ts_us: int
    speculative: bool = False
    task_type: str = ""
    # What the task asked for and how it was classed, when the source says (Google 2011 task_events do;
    # proactive avoidance reads them as node status at task entry). None: the source does not say.
    cpu_request: float | None = None
    memory_request: float | None = None
    priority: int | None = None
    scheduling_class: int | None = None


@dataclass(frozen=True, slots=True)
class TaskCheckpoint:
    """A running attempt reported progress; ``features`` are causal (observed up to ``ts_us``)."""

    job_id: str
    task_id: str
    attempt: int
    node_id: str
    ts_us: int
    elapsed_us: int
    features: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaskFinish:
    """A task attempt ended, successfully or not."""

    job_id: str
    task_id: str
    attempt: int
    node_id: str
    ts_us: int
    duration_us: int
    status: Status

    @property
    def succeeded(self) -> bool:
        return self.status is Status.SUCCEEDED


@dataclass(frozen=True, slots=True)
class JobStart:
    """A job was submitted; ``declared_tasks`` is its task count when the source knows it."""

    job_id: str
    ts_us: int
    declared_tasks: int | None = None


@dataclass(frozen=True, slots=True)
class JobFinish:
    """A job ended: its z-values are final."""

    job_id: str
    ts_us: int


TaskEvent = TaskStart | TaskCheckpoint | TaskFinish
JobEvent = JobStart | JobFinish
Event = TaskStart | TaskCheckpoint | TaskFinish | JobStart | JobFinish


@dataclass(frozen=True, slots=True)
class NormalizedTask:
    """One finished task's normalised execution value z on its node (SPEC 3)."""

    job_id: str
    task_id: str
    attempt: int
    node_id: str
    ts_us: int
    duration_us: int
    z: float
    provisional: bool = False
    emitted_us: int | None = None


@dataclass(frozen=True, slots=True)
class Progress:
    """Event time reached by one partition of the normalising stage; the ranking waits for all of them."""

    partition: int
    partitions: int
    ts_us: int


@dataclass(frozen=True, slots=True)
class NodeMoments:
    """Moments of one node's z-values whose tasks finished in one bucket of event time ``[bucket_us,
    bucket_us + width)``: count, mean and the sum of squared deviations (Welford's M2), mergeable exactly."""

    node_id: str
    bucket_us: int
    n: int
    mean: float
    m2: float


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """What one normalising partition sends the ranking for the boundary ``boundary_us``: per node and bucket,
    the moments of the z-values it added (final, or provisional for jobs still running) and of those it
    withdrew (provisional values now replaced). Applied at ``boundary_us``; ``(partition, boundary_us)`` is
    its identity, so a redelivered summary replaces itself."""

    partition: int
    partitions: int
    boundary_us: int
    bucket_width_us: int
    added: tuple[NodeMoments, ...]
    removed: tuple[NodeMoments, ...]


@dataclass(frozen=True, slots=True)
class TaskEventBatch:
    """Valid task events of one input partition (``source``: ``topic:partition``), forwarded to a ranking whose
    detector watches them in one feed record, in the order read, each with its offset there (issue 18: one record
    per event made the feed's produce, fetch and decode most of the ranking's cost per event)."""

    source: str
    offsets: tuple[int, ...]
    events: tuple[TaskEvent, ...]


@dataclass(frozen=True, slots=True)
class TaskRows:
    """Valid task events of one input partition (``source``: ``topic:partition``), forwarded to a ranking whose
    detector watches them, in the order read, as columns of the values it takes (``streams.core.task_rows``): one
    row per event, each with its offset there. Replaces ``TaskEventBatch``, whose events the ranking decoded again
    (issue 18)."""

    source: str
    offsets: tuple[int, ...]
    ts_us: tuple[int, ...]
    kinds: tuple[int, ...]
    job_ids: tuple[str, ...]
    task_ids: tuple[str, ...]
    node_ids: tuple[str, ...]
    values: tuple[int, ...]
    progress_ppm: tuple[int, ...]

    def row(self, i: int) -> tuple[int, int, str, str, str, int, int]:
        """Row ``i``: (ts_us, kind, job, task, node, value, progress_ppm)."""
        return (self.ts_us[i], self.kinds[i], self.job_ids[i], self.task_ids[i], self.node_ids[i], self.values[i],
                self.progress_ppm[i])


@dataclass(frozen=True, slots=True)
class NodeScore:
    """Window statistics of one node's z-values; the interval is absent for n < 2."""

    node_id: str
    window_start_us: int
    window_end_us: int
    n: int
    mean: float
    std: float
    ci_low: float | None
    ci_high: float | None
    normalized_count: float


@dataclass(frozen=True, slots=True)
class StragglerPrediction:
    """A running task was flagged as a straggler (published once per task)."""

    job_id: str
    task_id: str
    attempt: int
    node_id: str
    ts_us: int
    elapsed_us: int
    predicted_us: float
    adjusted_us: float
    threshold_us: float
    weight: float
    method: str


@dataclass(frozen=True, slots=True)
class NodeClass:
    """ML-NA's class of one node for one closed period and its predicted weakness in the next (SPEC 6)."""

    node_id: str
    period_start_us: int
    period_end_us: int
    k: int
    cluster: int
    weak_cluster: int
    weak: bool
    weak_probability: float
    predicted_weak: bool
    classifier: str
    tasks: int
    mean_z: float
    std_z: float
    weak_periods: int
    history_periods: int
    reason: str


@dataclass(frozen=True, slots=True)
class BlacklistEntry:
    """A node on the blacklist, with the statistics that put it there and a reason in words."""

    node_id: str
    level: int
    n: int
    mean: float
    std: float
    ci_low: float | None
    ci_high: float | None
    reason: str


@dataclass(frozen=True, slots=True)
class RemovedEntry:
    """A node released from the blacklist, and why."""

    node_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class BlacklistDelta:
    """One change to the blacklist; ``version`` grows by one per delta and is never reused."""

    cluster_id: str
    version: int
    issued_at_us: int
    policy: str
    window_start_us: int
    window_end_us: int
    added: tuple[BlacklistEntry, ...]
    removed: tuple[RemovedEntry, ...]
    nodes_seen: int = 0


@dataclass(frozen=True, slots=True)
class BlacklistSnapshot:
    """The whole blacklist after the delta of the same version."""

    cluster_id: str
    version: int
    issued_at_us: int
    policy: str
    window_start_us: int
    window_end_us: int
    nodes: tuple[BlacklistEntry, ...]
    nodes_seen: int = 0

    @property
    def node_ids(self) -> frozenset[str]:
        return frozenset(entry.node_id for entry in self.nodes)


def validate(event: Event | NodeSummary | TaskEventBatch | TaskRows) -> str | None:
    """Return why ``event`` is invalid (SPEC 2), or None when it is valid."""
    if isinstance(event, NodeSummary):
        return _summary_problem(event)
    if isinstance(event, TaskEventBatch):
        return _batch_problem(event)
    if isinstance(event, TaskRows):
        return _rows_problem(event)
    if event.ts_us < 0:
        return f"negative ts_us: {event.ts_us}"
    if isinstance(event, TaskFinish):
        if event.duration_us < 0:
            return f"negative duration_us: {event.duration_us}"
        if event.duration_us > event.ts_us:
            return f"finish before start: duration_us {event.duration_us} > ts_us {event.ts_us}"
        if not isinstance(event.status, Status):
            return f"unknown status: {event.status!r}"
    if isinstance(event, TaskCheckpoint):
        if event.elapsed_us < 0:
            return f"negative elapsed_us: {event.elapsed_us}"
        for name, value in event.features.items():
            if not math.isfinite(value):
                return f"feature {name!r} is not a finite number: {value}"
    if isinstance(event, TaskStart):
        for name, request in (("cpu_request", event.cpu_request), ("memory_request", event.memory_request)):
            if request is not None and not (math.isfinite(request) and request >= 0):
                return f"{name} is not a finite non-negative number: {request}"
    if isinstance(event, TaskStart | TaskCheckpoint | TaskFinish):
        if not event.job_id or not event.task_id:
            return "empty job_id or task_id"
        if not event.node_id:
            return "empty node_id"  # a ranking would score, and could list, a node named ""
        if event.attempt < 0:
            return f"negative attempt: {event.attempt}"
    if isinstance(event, JobStart) and event.declared_tasks is not None and event.declared_tasks < 0:
        return f"negative declared_tasks: {event.declared_tasks}"
    return None


def _batch_problem(batch: TaskEventBatch) -> str | None:
    """The batch's shape: an offset per event, increasing, and task events only. Each event is judged on its own
    (``RankStage.observe_batch``): one a ranking refuses must not take thousands of valid ones with it."""
    offsets = batch.offsets
    if len(offsets) != len(batch.events):
        return f"{len(offsets)} offsets for {len(batch.events)} forwarded task events"
    if (problem := _offsets_problem(offsets, "task events")) is not None:
        return problem
    for event in batch.events:
        if not isinstance(event, TaskStart | TaskCheckpoint | TaskFinish):
            return f"a {type(event).__name__} among forwarded task events"
    return None


def _rows_problem(rows: TaskRows) -> str | None:
    """The record's shape: one value per row in every column, offsets increasing from 0 or more. Each row is judged
    on its own (``task_rows.row_problem``, in ``RankStage.observe_rows``)."""
    count = len(rows.offsets)
    columns = (rows.ts_us, rows.kinds, rows.job_ids, rows.task_ids, rows.node_ids, rows.values, rows.progress_ppm)
    if any(len(column) != count for column in columns):
        return f"task rows with columns of {sorted({len(column) for column in columns})} values for {count} offsets"
    return _offsets_problem(rows.offsets, "task rows")


def _offsets_problem(offsets: tuple[int, ...], what: str) -> str | None:
    if any(later <= earlier for earlier, later in itertools.pairwise(offsets)) or min(offsets, default=0) < 0:
        return f"forwarded {what}' offsets do not increase from 0 or more: {offsets[:3]}..."
    return None


def _summary_problem(summary: NodeSummary) -> str | None:
    if summary.bucket_width_us <= 0 or summary.boundary_us < 0 or not 0 <= summary.partition < summary.partitions:
        return (f"summary of partition {summary.partition} of {summary.partitions}, boundary {summary.boundary_us}, "
                f"buckets of {summary.bucket_width_us} us")
    for m in summary.added + summary.removed:
        if m.n <= 0 or m.m2 < 0 or not (math.isfinite(m.mean) and math.isfinite(m.m2)):
            return f"moments of node {m.node_id!r} not a count, finite mean and m2 >= 0: {m.n}, {m.mean}, {m.m2}"
    return None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record that could not be decoded or was invalid; nothing is dropped silently."""

    source_topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    reason: str
    ts_us: int

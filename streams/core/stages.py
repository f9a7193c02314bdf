"""The two stages of the statistics pipeline, shared by the Faust agents and the in-process runner.

``NormalizeStage`` runs once per partition of ``task-events`` (keyed by job): events in, node samples out,
plus a ``Progress`` mark each time the partition's event time passes a ranking boundary. ``RankStage`` runs
once for the whole cluster: samples and progress marks in, rankings and blacklist deltas out.

Determinism is the point of this split. The ranking of the boundary ``B`` happens only when every partition
has reported progress past ``B``, and it applies exactly the samples emitted before ``B`` (each sample carries
its emission time). How the partitions interleave on the way to the ranking, or how fast a replay runs,
changes nothing: the same trace gives the same deltas in Kafka and in-process.

Waiting for every stream has one cost: a silent stream (a partition's job events when jobs rarely start or
end, a partition that no job hashes to) would hold the ranking back forever. So a shell may declare a
stream idle (``NormalizeStage.mark_job_stream_idle``, ``RankStage.mark_idle``), as Flink's source idleness
does, after a wall-clock time with nothing from it while the others advanced. An idle stream stops holding
the watermark back until its next record; records that then arrive behind the watermark still count (a
late event is applied at once, a late sample at the next boundary), and only then can the results depend on
arrival order. The core never decides idleness itself: it has no clock.

>>> from streams.core.events import JobFinish, JobStart, Status, TaskFinish, TaskStart
>>> normalize = NormalizeStage(partition=0, partitions=1, period_us=10, job_idle_timeout_us=100)
>>> rank = RankStage(RankingConfig(window_size_us=100, period_us=10, min_tasks=2, significance_floor=None,
...                                max_fraction=1.0), partitions=1)
>>> _ = normalize.process(JobStart("j", 100))
>>> for i, d in enumerate([10, 11, 12, 30]):
...     _ = normalize.process(TaskFinish("j", f"t{i}", 0, f"n{i}", 100 + d, d, Status.SUCCEEDED))
>>> normalize.process(JobFinish("j", 130))  # waits: more task events of time 130 may still come
([], Progress(partition=0, partitions=1, ts_us=130))
>>> _ = normalize.process(JobStart("k", 150))  # the job stream passed 130, the task stream not yet
>>> samples, progress = normalize.process(TaskStart("k", "t0", 0, "n0", 150))  # now both have
>>> [s.emitted_us for s in samples], progress
([130, 130, 130, 130], Progress(partition=0, partitions=1, ts_us=150))
>>> for sample in samples:
...     rank.add(sample)
>>> [(r.boundary_us, len(r.ranking.nodes)) for r in rank.progress(progress)]  # applied from 140 on
[(140, 4), (150, 4)]
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass
from typing import Any

from streams.core.events import (
    BlacklistDelta,
    BlacklistSnapshot,
    Event,
    JobFinish,
    JobStart,
    NormalizedTask,
    Progress,
    Status,
    TaskCheckpoint,
    TaskFinish,
    TaskStart,
)
from streams.core.ranker import NodeRanker
from streams.core.ranking import Ranking
from streams.core.ranking_config import RankingConfig
from streams.core.zscore import JobNormalizer

SNAPSHOT_VERSION = 1


def boundary_at_or_before(ts_us: int, period_us: int) -> int:
    """The ranking boundary (a multiple of the period) at or before ``ts_us``."""
    return (ts_us // period_us) * period_us


# Events of one timestamp are applied in this order, then in their own stream's order: a total order that
# does not depend on how the two topics interleaved on arrival.
_KIND_ORDER = {JobStart: 0, TaskStart: 1, TaskCheckpoint: 1, TaskFinish: 1, JobFinish: 2}


class NormalizeStage:
    """Per-partition z-values (SPEC 3) with progress marks at ranking boundaries.

    Task and job events reach a partition through two topics in any interleaving, and the results must not
    depend on it. So events wait in a merge buffer and are applied in a fixed order (time, then JobStart
    before task events before JobFinish, then each stream's own order) once both streams have passed their
    time; every sample carries the event time its job became final; and progress past a boundary is reported
    only when everything before it has been applied.

    ``wait_for_job_events`` says whether the job stream exists: a Kafka worker waits for it (a partition
    whose first job event is still in flight must not run ahead); events read in time order from a trace can
    instead count the job stream from its first event on, which gives the same deltas and also serves traces
    that have no job events at all.
    """

    def __init__(self, partition: int, partitions: int, period_us: int, job_idle_timeout_us: int,
                 wait_for_job_events: bool = False) -> None:
        self.partition = partition
        self.partitions = partitions
        self.period_us = period_us
        self.job_idle_timeout_us = job_idle_timeout_us
        self.wait_for_job_events = wait_for_job_events
        self._normalizer = JobNormalizer(job_idle_timeout_us)
        self._pending: list[tuple[int, int, int, Event]] = []  # heap of (ts, kind order, arrival, event)
        self._arrivals = 0
        self._task_watermark = -1
        self._job_watermark: int | None = None  # None until a job event is seen
        self._job_idle = False  # the job stream was declared idle and has sent nothing since
        self._applied = -1  # the highest watermark used so far: it never goes back
        self._reported = -1  # last boundary reported as progress

    @property
    def watermark(self) -> int:
        """Every event before this time has been applied (-1: nothing yet)."""
        if self._job_idle:
            current = self._task_watermark
        elif self._job_watermark is None:
            current = -1 if self.wait_for_job_events else self._task_watermark
        else:
            current = min(self._task_watermark, self._job_watermark)
        return max(current, self._applied)

    @property
    def task_watermark(self) -> int:
        """The latest task event time seen (-1: none yet)."""
        return self._task_watermark

    @property
    def holds_progress(self) -> bool:
        """Whether the task events have passed a ranking boundary that waits for the job stream."""
        if self._job_idle or self._task_watermark < 0:
            return False
        return boundary_at_or_before(self._task_watermark, self.period_us) > max(
            self._reported, boundary_at_or_before(self.watermark, self.period_us))

    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def job_stream_lag_us(self) -> int:
        """How far the task events have run ahead of what can be applied (the job stream holds them back)."""
        return max(0, self._task_watermark - self.watermark) if self._task_watermark >= 0 else 0

    def process(self, event: Event) -> tuple[list[NormalizedTask], Progress | None]:
        """Take one event; return the samples it completed and a progress mark when a boundary passed."""
        if isinstance(event, JobStart | JobFinish):
            self._job_watermark = max(self._job_watermark if self._job_watermark is not None else -1, event.ts_us)
            self._job_idle = False
        else:
            self._task_watermark = max(self._task_watermark, event.ts_us)
        self._arrivals += 1
        heapq.heappush(self._pending, (event.ts_us, _KIND_ORDER[type(event)], self._arrivals, event))
        return self._advance()

    @property
    def job_stream_idle(self) -> bool:
        return self._job_idle

    def mark_job_stream_idle(self) -> tuple[list[NormalizedTask], Progress | None]:
        """The job stream is silent (the shell's judgement): stop waiting for it until its next event."""
        self._job_idle = True
        return self._advance()

    def _advance(self) -> tuple[list[NormalizedTask], Progress | None]:
        watermark = self._applied = self.watermark
        out = self._apply_before(watermark)
        if watermark > 0:
            out.extend(self._normalizer.expire(watermark - 1))
        return out, self._progress(watermark)

    def flush(self) -> tuple[list[NormalizedTask], Progress | None]:
        """End of a finite trace: apply everything, finalise every job, report the last event time."""
        end = max(self._task_watermark, self._job_watermark or -1) + 1
        out = self._apply_before(end)
        out.extend(self._normalizer.flush())
        return out, Progress(self.partition, self.partitions, end)

    def _apply_before(self, watermark: int) -> list[NormalizedTask]:
        out: list[NormalizedTask] = []
        while self._pending and self._pending[0][0] < watermark:
            out.extend(self._normalizer.update(heapq.heappop(self._pending)[3]))
        return out

    def _progress(self, watermark: int) -> Progress | None:
        if watermark < 0:
            return None
        boundary = boundary_at_or_before(watermark, self.period_us)
        if boundary <= self._reported:
            return None
        self._reported = boundary
        return Progress(self.partition, self.partitions, watermark)

    def snapshot(self) -> dict[str, Any]:
        pending = [[ts, kind, arrival, type(e).__name__, _event_row(e)] for ts, kind, arrival, e in
                   sorted(self._pending, key=lambda item: item[:3])]
        return {"version": SNAPSHOT_VERSION, "normalizer": self._normalizer.snapshot(), "pending": pending,
                "arrivals": self._arrivals, "task_watermark": self._task_watermark,
                "job_watermark": self._job_watermark, "reported": self._reported, "applied": self._applied}

    def restore(self, state: dict[str, Any]) -> None:
        if state.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown NormalizeStage snapshot version {state.get('version')!r}")
        self._normalizer.restore(state["normalizer"])
        self._pending = [(int(ts), int(kind), int(arrival), _event_from_row(name, row))
                         for ts, kind, arrival, name, row in state["pending"]]
        heapq.heapify(self._pending)
        self._arrivals = int(state["arrivals"])
        self._task_watermark = int(state["task_watermark"])
        self._job_watermark = None if state["job_watermark"] is None else int(state["job_watermark"])
        self._reported = int(state["reported"])
        self._applied = int(state.get("applied", -1))  # absent before idleness existed
        self._job_idle = False  # idleness is a wall-clock judgement: a restarted shell makes it again


_EVENT_TYPES: dict[str, type] = {t.__name__: t for t in (TaskStart, TaskCheckpoint, TaskFinish, JobStart, JobFinish)}


def _event_row(event: Event) -> list[Any]:
    row = [getattr(event, f.name) for f in dataclasses.fields(event)]
    if isinstance(event, TaskFinish):
        row[-1] = event.status.value
    if isinstance(event, TaskCheckpoint):
        row[-1] = dict(event.features)
    return row


def _event_from_row(name: str, row: list[Any]) -> Event:
    event_type = _EVENT_TYPES[name]
    if event_type is TaskFinish:
        row = [*row[:-1], Status(row[-1])]
    event: Event = event_type(*row)
    return event


@dataclass(frozen=True)
class RankResult:
    """One ranking boundary: the ranking, and the delta and snapshot when the blacklist changed."""

    boundary_us: int
    ranking: Ranking
    delta: BlacklistDelta | None
    snapshot: BlacklistSnapshot


class RankStage:
    """The cluster-wide ranking, driven by samples and the progress of every normalising partition."""

    def __init__(self, config: RankingConfig, partitions: int) -> None:
        self.config = config
        self.partitions = partitions
        self.ranker = NodeRanker(config)
        self._pending: list[tuple[int, int, NormalizedTask]] = []  # (emitted_us, arrival, sample)
        self._arrivals = 0
        self._watermarks: dict[int, int] = {}
        self._idle: set[int] = set()
        self._next_boundary: int | None = None

    def add(self, sample: NormalizedTask) -> None:
        """A sample; it is applied at the first boundary after its emission time."""
        self._arrivals += 1
        emitted = sample.emitted_us if sample.emitted_us is not None else sample.ts_us
        heapq.heappush(self._pending, (emitted, self._arrivals, sample))  # arrival numbers are unique

    def progress(self, mark: Progress) -> list[RankResult]:
        """Record a partition's progress; rank every boundary that all partitions have now passed."""
        if mark.partitions != self.partitions:
            raise ValueError(f"progress from {mark.partitions} partitions, the ranking expects {self.partitions}")
        self._watermarks[mark.partition] = max(self._watermarks.get(mark.partition, -1), mark.ts_us)
        self._idle.discard(mark.partition)
        return self._rank_ready()

    @property
    def samples_seen(self) -> int:
        return self._arrivals

    @property
    def idle(self) -> frozenset[int]:
        return frozenset(self._idle)

    def holding_back(self) -> list[int]:
        """The active partitions that have not passed the latest boundary another partition has passed."""
        if not self._watermarks:
            return []
        period = self.config.period_us
        leader = boundary_at_or_before(max(self._watermarks.values()), period)
        return [p for p in range(self.partitions) if p not in self._idle
                and boundary_at_or_before(self._watermarks.get(p, -1), period) < leader]

    def mark_idle(self, partition: int) -> list[RankResult]:
        """Partition ``partition`` is silent (the shell's judgement): rank without it until it reports again."""
        if not 0 <= partition < self.partitions:
            raise ValueError(f"partition {partition} of {self.partitions}")
        self._idle.add(partition)
        return self._rank_ready()

    def _rank_ready(self) -> list[RankResult]:
        active = [p for p in range(self.partitions) if p not in self._idle]
        if not active or any(p not in self._watermarks for p in active):
            return []
        return self._rank_until(min(self._watermarks[p] for p in active))

    def finish(self, ts_us: int) -> list[RankResult]:
        """End of a finite trace: rank every boundary up to ``ts_us`` whatever the partitions reported."""
        return self._rank_until(ts_us)

    def _rank_until(self, watermark: int) -> list[RankResult]:
        period = self.config.period_us
        if self._next_boundary is None:
            first = min([watermark] + [emitted for emitted, _, _ in self._pending])
            self._next_boundary = boundary_at_or_before(first, period) + period
        results = []
        while self._next_boundary <= watermark:
            boundary = self._next_boundary
            while self._pending and self._pending[0][0] < boundary:
                self.ranker.update(heapq.heappop(self._pending)[2])
            ranking, delta = self.ranker.decide_ranking(boundary)
            results.append(RankResult(boundary, ranking, delta, self.ranker.blacklist))
            self._next_boundary = boundary + period
        return results

    def snapshot(self) -> dict[str, Any]:
        return {
            "version": SNAPSHOT_VERSION,
            "ranker": self.ranker.snapshot(),
            "pending": [[e, a, _sample_row(s)] for e, a, s in sorted(self._pending, key=lambda item: item[:2])],
            "arrivals": self._arrivals,
            "watermarks": sorted(self._watermarks.items()),
            "next_boundary": self._next_boundary,
        }

    def restore(self, state: dict[str, Any]) -> None:
        if state.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown RankStage snapshot version {state.get('version')!r}")
        self.ranker.restore(state["ranker"])
        self._pending = [(int(e), int(a), NormalizedTask(*row)) for e, a, row in state["pending"]]
        self._arrivals = int(state["arrivals"])
        self._watermarks = {int(p): int(ts) for p, ts in state["watermarks"]}
        self._next_boundary = state["next_boundary"]


def _sample_row(sample: NormalizedTask) -> list[Any]:
    return [getattr(sample, f.name) for f in dataclasses.fields(sample)]

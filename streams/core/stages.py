"""The two stages of the statistics pipeline, shared by the Faust agents and the in-process runner.

``NormalizeStage`` runs once per partition of ``task-events`` (keyed by job): events in; final z-values out
(for ``node-samples``), and once per ranking boundary a ``NodeSummary`` (per node and bucket of finish time,
the moments of the z-values made final or provisional, and of the provisional ones withdrawn) and a
``Progress`` mark. ``RankStage`` (``streams.core.rank_stage``) runs once for the whole cluster: summaries and
progress marks in, rankings and blacklist deltas out. What crosses to the ranking grows with the nodes active
per period, not with the task rate.

Determinism is the point of this split. The ranking of the boundary ``B`` happens only when every partition
has reported progress past ``B``, and it applies exactly the summaries of boundaries up to ``B``, each the
z-values that became final or provisional before its boundary. How the partitions interleave on the way to the
ranking, or how fast a replay runs, changes nothing: the same trace gives the same deltas in Kafka and
in-process.

Waiting for every stream has one cost: a silent stream (a partition's job events when jobs rarely start or
end, a partition that no job hashes to) would hold the ranking back forever. So a shell may declare a
stream idle (``NormalizeStage.mark_job_stream_idle``, ``RankStage.mark_idle``), as Flink's source idleness
does, after a wall-clock time with nothing from it while the others advanced. An idle stream stops holding
the watermark back until its next record; records that then arrive behind the watermark still count (a
late event is applied at once and its values go to the next summary), and only then can the results depend
on arrival order. The core never decides idleness itself: it has no clock.

>>> from streams.core.events import JobFinish, JobStart, Status, TaskFinish, TaskStart
>>> normalize = NormalizeStage(partition=0, partitions=1, period_us=10, job_idle_timeout_us=100, window_us=100)
>>> rank = RankStage(RankingConfig(window_size_us=100, period_us=10, min_tasks=2, significance_floor=None,
...                                max_fraction=1.0), partitions=1)
>>> _ = normalize.process(JobStart("j", 100))
>>> for i, d in enumerate([10, 11, 12, 30]):
...     _ = normalize.process(TaskFinish("j", f"t{i}", 0, f"n{i}", 100 + d, d, Status.SUCCEEDED))
>>> out = normalize.process(JobFinish("j", 130))  # waits: more task events of time 130 may still come
>>> out.samples, [(s.boundary_us, len(s.added)) for s in out.summaries], out.progress  # j quiet for a period:
([], [(130, 3)], Progress(partition=0, partitions=1, ts_us=130))
>>> _ = normalize.process(JobStart("k", 150))  # the job stream passed 130, the task stream not yet
>>> samples, summaries, progress = normalize.process(TaskStart("k", "t0", 0, "n0", 150))  # now both have
>>> [s.emitted_us for s in samples], [(s.boundary_us, len(s.added), len(s.removed)) for s in summaries]
([130, 130, 130, 130], [(140, 4, 3)])
>>> for summary in out.summaries + summaries:
...     rank.add(summary)
>>> [(r.boundary_us, len(r.ranking.nodes)) for r in rank.progress(progress)]  # provisional at 130, then final
[(130, 3), (140, 4), (150, 4)]
"""

from __future__ import annotations

from typing import Any, NamedTuple

from streams.core.events import Event, NodeSummary, NormalizedTask, Progress
from streams.core.merge import MergeBuffer
from streams.core.moments import bucket_width
from streams.core.rank_stage import RankResult, RankStage, boundary_at_or_before
from streams.core.ranking_config import RankingConfig  # noqa: F401  (used by the doctest)
from streams.core.windows import moments_rows
from streams.core.zscore import JobNormalizer

# 2: summaries to the ranking and provisional values (issue 18); an older snapshot means a cold start.
SNAPSHOT_VERSION = 2
_Values = dict[tuple[str, int], list[float]]  # (node, bucket) -> z-values
__all__ = ["Emitted", "NormalizeStage", "RankResult", "RankStage", "boundary_at_or_before"]


class Emitted(NamedTuple):
    """What a normalising partition sends on: final z-values (``node-samples``), summaries for the ranking, and
    a progress mark when a boundary passed (sent after the summaries of the boundaries it passes)."""

    samples: list[NormalizedTask]
    summaries: list[NodeSummary]
    progress: Progress | None


class NormalizeStage:
    """Per-partition z-values (SPEC 3) with summaries and progress marks at ranking boundaries.

    Task and job events reach a partition through two topics in any interleaving, and the results must not
    depend on it. So events wait in a merge buffer (``streams.core.merge``) and are applied in a fixed order
    (time, then JobStart before task events before JobFinish, then each stream's own order) once both streams
    have passed their time; every sample carries the event time its job became final; and progress past a
    boundary is reported only when everything before it has been applied.

    At each ranking boundary ``B`` (when everything before ``B`` has been applied, before anything at or after
    it) the stage finalises the jobs idle since before ``B``, scores the jobs still running provisionally
    (``JobNormalizer.rescore``), and closes the summary of ``B``: the moments, per node and bucket of finish
    time, of the z-values that became final or provisional before ``B``, and of the provisional ones withdrawn.
    Its content is a function of the trace alone, so ``(partition, B)`` identifies it.

    ``wait_for_job_events`` says whether the job stream exists: a Kafka worker waits for it (a partition
    whose first job event is still in flight must not run ahead); events read in time order from a trace can
    instead count the job stream from its first event on, which gives the same deltas and also serves traces
    that have no job events at all. ``window_us`` (the ranking window) sets the buckets and leaves out of the
    provisional values the tasks that left every window. With ``summaries`` off (a detector that learns from
    single samples) it sends no summaries and no provisional values: the shell sends the final samples to the
    ranking instead.
    """

    def __init__(self, partition: int, partitions: int, period_us: int, job_idle_timeout_us: int,
                 wait_for_job_events: bool = False, window_us: int | None = None, summaries: bool = True) -> None:
        self.partition = partition
        self.partitions = partitions
        self.period_us = period_us
        self.job_idle_timeout_us = job_idle_timeout_us
        self.window_us = window_us
        self.bucket_us = bucket_width(window_us, period_us) if window_us else period_us
        # Provisional values for the jobs that need them: those gone quiet for a period without ending (sources
        # without job ends) and those running for half a window (long and never-ending jobs). A job that ends
        # within a period or two, as most do where job ends are published, is ranked by its final values only.
        self.summaries = summaries
        self._normalizer = JobNormalizer(job_idle_timeout_us, provisional=summaries, quiet_us=period_us,
                                         age_us=(window_us or period_us) // 2)
        self._merge = MergeBuffer(wait_for_job_events)  # task and job events in one order
        self._reported = -1  # last boundary reported as progress
        self._closed: int | None = None  # last boundary whose summary is closed
        self._groups: dict[int, tuple[_Values, _Values]] = {}  # boundary -> (added, withdrawn) values

    @property
    def wait_for_job_events(self) -> bool:
        """The merge buffer's: read-only, as it decides the buffer's watermark from the first event on."""
        return self._merge.wait_for_job_events

    @property
    def watermark(self) -> int:
        """Every event before this time has been applied (-1: nothing yet)."""
        return self._merge.watermark

    @property
    def task_watermark(self) -> int:
        """The latest task event time seen (-1: none yet)."""
        return self._merge.task_watermark

    @property
    def holds_progress(self) -> bool:
        """Whether the task events have passed a ranking boundary that waits for the job stream."""
        if self._merge.job_stream_idle or self._merge.task_watermark < 0:
            return False
        return boundary_at_or_before(self._merge.task_watermark, self.period_us) > max(
            self._reported, boundary_at_or_before(self.watermark, self.period_us))

    @property
    def pending(self) -> int:
        return len(self._merge)

    @property
    def open_jobs(self) -> int:
        return self._normalizer.open_jobs

    @property
    def late_events(self) -> int:
        """Events of a job already final (after its JobFinish or idle timeout, or a job id used again): not scored."""
        return self._normalizer.late_events

    @property
    def job_stream_lag_us(self) -> int:
        """How far the task events have run ahead of what can be applied (the job stream holds them back)."""
        return self._merge.job_stream_lag_us

    def process(self, event: Event) -> Emitted:
        """Take one event; return the final z-values, the summaries and the progress mark it completed."""
        self._merge.receive(event)
        return self._advance()

    def process_batch(self, events: list[Event]) -> Emitted:
        """Take several events at once: the same results as one ``process`` after the other, merged."""
        for event in events:
            self._merge.receive(event)
        return self._advance()

    @property
    def job_stream_idle(self) -> bool:
        return self._merge.job_stream_idle

    def mark_job_stream_idle(self) -> Emitted:
        """The job stream is silent (the shell's judgement): stop waiting for it until its next event."""
        self._merge.mark_job_stream_idle()
        return self._advance()

    def _advance(self) -> Emitted:
        watermark = self._merge.advance()
        samples: list[NormalizedTask] = []
        summaries: list[NodeSummary] = []
        self._apply_before(watermark, watermark, samples, summaries)
        if watermark > 0 and self._normalizer.due(watermark - 1):
            self._collect(self._normalizer.expire(watermark - 1), samples)
        return Emitted(samples, summaries, self._progress(watermark))

    def flush(self) -> Emitted:
        """End of a finite trace: apply everything, finalise every job, report the last event time."""
        end = self._merge.end_us
        samples: list[NormalizedTask] = []
        summaries: list[NodeSummary] = []
        self._apply_before(end, end - 1, samples, summaries)
        self._collect(self._normalizer.flush(), samples)
        for boundary in sorted(self._groups):
            summaries.extend(self._summary(boundary))
        return Emitted(samples, summaries, Progress(self.partition, self.partitions, end))

    def _apply_before(self, watermark: int, close_until: int, samples: list[NormalizedTask],
                      summaries: list[NodeSummary]) -> None:
        """Apply the events before ``watermark`` in order, closing each boundary up to ``close_until`` once
        everything before it is applied."""
        merge, period = self._merge, self.period_us
        while True:
            ts = merge.next_ts()
            if self._closed is None and ts is not None and ts < watermark:
                self._closed = boundary_at_or_before(ts, period)
            following = None if self._closed is None else self._closed + period
            if ts is not None and ts < watermark and (following is None or ts < following):
                produced = self._normalizer.update(merge.pop())
                if produced or self._normalizer.has_withdrawn:
                    self._collect(produced, samples)
            elif following is not None and following <= close_until:
                summaries.extend(self._close(following, samples))
            else:
                return

    def _close(self, boundary: int, samples: list[NormalizedTask]) -> list[NodeSummary]:
        self._collect(self._normalizer.expire(boundary - 1), samples)
        horizon = None if self.window_us is None else boundary - self.window_us
        self._collect(self._normalizer.rescore(boundary - 1, horizon), None)
        self._closed = boundary
        return self._summary(boundary)

    def _collect(self, produced: list[NormalizedTask], samples: list[NormalizedTask] | None) -> None:
        """File z-values (and the values they withdrew) into the summary of the boundary they belong to."""
        if produced:
            if samples is not None:
                samples.extend(produced)
            if self.summaries:
                for value in produced:
                    self._file(value.emitted_us if value.emitted_us is not None else value.ts_us, value, 0)
        if self.summaries and self._normalizer.has_withdrawn:
            for at_us, withdrawn in self._normalizer.take_withdrawn():
                self._file(at_us, withdrawn, 1)

    def _file(self, at_us: int, value: NormalizedTask, side: int) -> None:
        boundary = boundary_at_or_before(at_us, self.period_us) + self.period_us
        if self._closed is not None and boundary <= self._closed:
            boundary = self._closed + self.period_us  # late (after idleness): the next summary takes it
        group = self._groups.get(boundary)
        if group is None:
            group = self._groups[boundary] = ({}, {})
        bucket = value.ts_us - value.ts_us % self.bucket_us
        group[side].setdefault((value.node_id, bucket), []).append(value.z)

    def _summary(self, boundary: int) -> list[NodeSummary]:
        added, removed = self._groups.pop(boundary, ({}, {}))
        if not added and not removed:
            return []
        return [NodeSummary(self.partition, self.partitions, boundary, self.bucket_us,
                            moments_rows(added), moments_rows(removed))]

    def _progress(self, watermark: int) -> Progress | None:
        if watermark < 0:
            return None
        boundary = boundary_at_or_before(watermark, self.period_us)
        if boundary <= self._reported:
            return None
        self._reported = boundary
        return Progress(self.partition, self.partitions, watermark)

    def snapshot(self) -> dict[str, Any]:
        merge = self._merge.snapshot()
        groups = [[boundary, [[node, bucket, values] for (node, bucket), values in side.items()] ]
                  for boundary, pair in sorted(self._groups.items()) for side in pair]
        return {"version": SNAPSHOT_VERSION, "normalizer": self._normalizer.snapshot(), "pending": merge["pending"],
                "arrivals": merge["arrivals"], "task_watermark": merge["task_watermark"],
                "job_watermark": merge["job_watermark"], "reported": self._reported, "applied": merge["applied"],
                "closed": self._closed, "groups": groups}

    def restore(self, state: dict[str, Any]) -> None:
        if state.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown NormalizeStage snapshot version {state.get('version')!r}")
        self._normalizer.restore(state["normalizer"])
        self._merge.restore(state)  # its held events and watermarks, under the same keys as before
        self._reported = int(state["reported"])
        self._closed = None if state["closed"] is None else int(state["closed"])
        self._groups = {}
        groups = state["groups"]
        for (boundary, added), (_, removed) in zip(groups[::2], groups[1::2], strict=True):
            self._groups[int(boundary)] = ({(str(n), int(b)): [float(v) for v in vs] for n, b, vs in added},
                                           {(str(n), int(b)): [float(v) for v in vs] for n, b, vs in removed})


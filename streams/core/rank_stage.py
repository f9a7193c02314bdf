"""``RankStage``: the cluster-wide ranking, driven by the summaries and progress of every normalising partition.

A summary (``NodeSummary``) of boundary ``B`` is applied at ``B``; a single sample (``NormalizedTask``, as
records written before summaries existed) at the first boundary after the time it became final. The ranking of
``B`` happens once every active partition has reported progress past ``B`` (see ``streams.core.stages``), from
the boundary after the earliest datum on (``_start``), so which boundaries are ranked depends on the data alone.
Under a policy whose detector watches the task events themselves (``watches_tasks``: the running-task detector),
the normalising side also forwards every valid task event before the progress marks it leads to; ``add`` hands it to
the detector (``observe``), which judges ``B`` by the events before ``B`` alone, whatever else it was given.
A deny-list needs no data: until the first ranking with data, it is published alone at the last boundary every
partition has passed (``NodeRanker.decide_guards``), so a scheduler avoids those nodes from the start even when
no task has finished yet.

>>> from streams.core.events import NodeMoments
>>> config = RankingConfig(window_size_us=100, period_us=10, min_tasks=2, significance_floor=None, max_fraction=1.0)
>>> rank = RankStage(config, partitions=1)
>>> moments = (NodeMoments("n1", 0, 3, 0.5, 0.02), NodeMoments("n2", 10, 2, 0.1, 0.0))
>>> rank.add(NodeSummary(0, 1, 20, 10, moments, ()))
>>> [(r.boundary_us, [(row.node_id, row.stats.n) for row in r.ranking.ranked if row.stats])
...  for r in rank.progress(Progress(0, 1, 25))]
[(20, [('n1', 3), ('n2', 2)])]
"""

from __future__ import annotations

import dataclasses
import heapq
import operator
from dataclasses import dataclass
from typing import Any

from streams.core.detection.base import observe_task, observes_tasks
from streams.core.events import (
    BlacklistDelta,
    BlacklistSnapshot,
    NodeMoments,
    NodeSummary,
    NormalizedTask,
    Progress,
    TaskEvent,
    TaskEventBatch,
    TaskRows,
    validate,
)
from streams.core.ranker import NodeRanker
from streams.core.ranking import Ranking
from streams.core.ranking_config import RankingConfig
from streams.core.task_rows import Row, row_problem

# 2: summaries beside single samples (issue 18); an older snapshot means a cold start.
SNAPSHOT_VERSION = 2
FeedRecord = NodeSummary | NormalizedTask
_moment_row = operator.attrgetter(*(f.name for f in dataclasses.fields(NodeMoments)))  # astuple's, not deep-copied
_sample_row = operator.attrgetter(*(f.name for f in dataclasses.fields(NormalizedTask)))


def boundary_at_or_before(ts_us: int, period_us: int) -> int:
    """The ranking boundary (a multiple of the period) at or before ``ts_us``."""
    return (ts_us // period_us) * period_us


@dataclass(frozen=True)
class RankResult:
    """One ranking boundary: the ranking, and the delta and snapshot when the blacklist changed."""

    boundary_us: int
    ranking: Ranking
    delta: BlacklistDelta | None
    snapshot: BlacklistSnapshot


class RankStage:
    """The cluster-wide ranking, driven by summaries (or samples) and the progress of every normalising partition."""

    def __init__(self, config: RankingConfig, partitions: int) -> None:
        self.config = config
        self.partitions = partitions
        self.ranker = NodeRanker(config)
        self._pending: list[tuple[int, int, FeedRecord]] = []  # (applied before this time, arrival, record)
        self._arrivals = 0
        self._values = 0
        self._watermarks: dict[int, int] = {}
        self._idle: set[int] = set()
        self._next_boundary: int | None = None  # None: the first boundary is not decided yet (see _start)
        self._first_observed: int | None = None  # the earliest forwarded task event's time, while undecided
        self._watches = observes_tasks(self.ranker.detector)
        if self._watches and getattr(self.ranker.detector, "observe_row", None) is None:
            raise TypeError(f"detector {self.ranker.detector.name!r} watches task events but takes no rows "
                            "(TaskObserver.observe_row): a Kafka worker's ranking is sent rows")
        self._sources: dict[str, int] = {}  # source partition -> offset of the last task event observed from it
        self.observed = 0  # forwarded task events taken by this process
        self._passed: tuple[int, int] | None = None  # first and last boundary the watermark passed in this process

    def add(self, record: FeedRecord | TaskEvent) -> None:
        """A summary (applied at its boundary) or a sample (at the first boundary after its emission time); a
        forwarded task event is refused (``observe`` takes it, with its source)."""
        if isinstance(record, TaskEvent):
            raise TypeError("a forwarded task event goes to observe(event, source): without its source a "
                            "repeat after a restart would be taken twice")
        self._arrivals += 1
        if isinstance(record, NodeSummary):
            due = record.boundary_us - 1
            self._values += sum(m.n for m in record.added)
        else:
            due = record.emitted_us if record.emitted_us is not None else record.ts_us
            self._values += 1
        heapq.heappush(self._pending, (due, self._arrivals, record))  # arrival numbers are unique

    def observe(self, event: TaskEvent, source: tuple[str, int] | None = None) -> bool:
        """A task event forwarded by the normalising side, to the detector at once (it keeps events until the
        boundary after them). ``source``: where it was read (``topic:partition``) and its offset. A normaliser restarted
        from its checkpoint forwards again what it forwarded since, in the same order: an event at or before the
        last one observed from its partition is such a repeat and is dropped (the detector is not idempotent: a
        repeated start reopens a finished task, a repeated checkpoint changes its projection). Whether it was
        taken.

        >>> rank = RankStage(RankingConfig(policy="running"), partitions=2)
        >>> from streams.core.events import TaskStart
        >>> [rank.observe(TaskStart("j", "t", 0, "n1", 5), ("task-events:1", offset)) for offset in (7, 8, 8, 3)]
        [True, True, False, False]
        """
        if source is not None:
            partition, offset = source
            if offset <= self._sources.get(partition, -1):
                return False
            self._sources[partition] = offset
        observe_task(self.ranker.detector, event)
        self.observed += 1
        # Data only for a detector that takes it (a ranking of another policy than its normalisers' does not).
        if self._watches and self._next_boundary is None and (self._first_observed is None
                                                               or event.ts_us < self._first_observed):
            self._first_observed = event.ts_us
        return True

    def observe_batch(self, batch: TaskEventBatch) -> tuple[int, list[tuple[int, TaskEvent, str]]]:
        """``observe`` for each valid event of a forwarded batch, with its source and offset: how many were
        repeats, and the (offset, event, reason) of those refused as invalid (``validate``; its normaliser validated
        them, but a ranking must not take what it would refuse), for the shell's dead letters.

        >>> from streams.core.events import TaskStart
        >>> rank = RankStage(RankingConfig(policy="running"), partitions=1)
        >>> starts = tuple(TaskStart("j", f"t{k}", 0, "n1", 5) for k in range(3))
        >>> rank.observe_batch(TaskEventBatch("task-events:0", (7, 8, 9), starts))
        (0, [])
        >>> bad = TaskStart("j", "t9", 0, "n1", -1)
        >>> repeats, refused = rank.observe_batch(TaskEventBatch("task-events:0", (8, 9, 10, 11), starts + (bad,)))
        >>> repeats, [(offset, reason) for offset, _, reason in refused], rank.observed
        (2, [(11, 'negative ts_us: -1')], 4)
        """
        observe, source, repeats, refused = self.observe, batch.source, 0, []
        for offset, event in zip(batch.offsets, batch.events, strict=True):
            problem = validate(event)
            if problem is not None:
                refused.append((offset, event, problem))
            elif not observe(event, (source, offset)):
                repeats += 1
        return repeats, refused

    def observe_rows(self, rows: TaskRows) -> tuple[int, list[tuple[int, Row, str]]]:
        """``observe_batch`` of task events forwarded as rows (``streams.core.task_rows``: what a Kafka worker's
        normaliser sends): each valid row to the detector (its ``observe_row``: a task observer must take rows),
        repeats dropped by offset as ``observe`` drops them. How many were repeats, and the (offset, row, reason) of
        those refused (``row_problem``).

        >>> from streams.core.events import TaskStart
        >>> from streams.core.task_rows import rows_record
        >>> rank = RankStage(RankingConfig(policy="running"), partitions=1)
        >>> starts = [(offset, TaskStart("j", f"t{offset}", 0, "n1", 5)) for offset in (7, 8, 9)]
        >>> rank.observe_rows(rows_record("task-events:0", starts))
        (0, [])
        >>> again = rows_record("task-events:0", starts[1:] + [(10, TaskStart("j", "t10", 0, "n1", 6))])
        >>> rank.observe_rows(again), rank.observed
        ((2, []), 4)
        """
        repeats, refused = 0, []
        observe_row = getattr(self.ranker.detector, "observe_row", None)  # None: a detector watching no task
        source, last = rows.source, self._sources.get(rows.source, -1)
        watch_first = self._watches and self._next_boundary is None
        for i, offset in enumerate(rows.offsets):
            if offset <= last:
                repeats += 1
                continue
            row = rows.row(i)
            problem = row_problem(*row)
            if problem is not None:
                refused.append((offset, row, problem))
                continue
            last = offset
            if observe_row is not None:
                observe_row(*row)
            self.observed += 1
            if watch_first and (self._first_observed is None or row[0] < self._first_observed):
                self._first_observed = row[0]
        if last >= 0:
            self._sources[source] = last
        return repeats, refused

    def progress(self, mark: Progress) -> list[RankResult]:
        """Record a partition's progress; rank every boundary that all partitions have now passed."""
        if mark.partitions != self.partitions:
            raise ValueError(f"progress from {mark.partitions} partitions, the ranking expects {self.partitions}")
        self._watermarks[mark.partition] = max(self._watermarks.get(mark.partition, -1), mark.ts_us)
        self._idle.discard(mark.partition)
        return self._rank_ready()

    @property
    def samples_seen(self) -> int:
        """z-values received (a provisional value sent again after its job changed counts again)."""
        return self._values

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

    def _start(self, watermark: int) -> int | None:
        """The first boundary to rank: the one after the earliest datum the ranking has (a summary's or sample's
        due time, a forwarded task event's time), decided once the watermark has passed that datum. Every record
        before the watermark has arrived by then (a partition's mark follows its records before it), so the
        earliest is the trace's, whatever the interleaving of the partitions or their number; a start taken from
        the watermark itself would instead depend on how far the other partitions' marks had come. None: no datum
        before the watermark yet, nothing to rank (boundaries before any data would rank nothing)."""
        dues = [self._pending[0][0]] if self._pending else []  # the heap's earliest
        if self._first_observed is not None:
            dues.append(self._first_observed)
        first = min(dues, default=None)
        if first is None or first >= watermark:
            return None
        self._first_observed = None  # decided: only _next_boundary counts from now on
        # after any boundary the deny-list was published at alone: that one was at or before the watermark, and
        # every datum that arrived since is at or after it
        return boundary_at_or_before(first, self.config.period_us) + self.config.period_us

    def _guards(self, watermark: int) -> list[RankResult]:
        """Before the first ranking with data: the deny-list published alone at the last boundary every partition
        has passed, when consumers do not have all of it yet (the book says: so once, and never again after a
        restart)."""
        deny = self.config.deny_list
        if not deny or deny <= self.ranker.blacklist.node_ids:
            return []
        boundary = boundary_at_or_before(watermark, self.config.period_us)
        ranking, delta = self.ranker.decide_guards(boundary)
        return [RankResult(boundary, ranking, delta, self.ranker.blacklist)]

    @property
    def periods_passed(self) -> int:
        """Periods of event time every partition has gone through in this process, ranked or not (a ranking fed
        marks alone ranks nothing, and its shell should still hear that something is missing)."""
        return 0 if self._passed is None else (self._passed[1] - self._passed[0]) // self.config.period_us

    def _rank_until(self, watermark: int) -> list[RankResult]:
        period = self.config.period_us
        passed = boundary_at_or_before(watermark, period)
        self._passed = (passed, passed) if self._passed is None else (self._passed[0], max(self._passed[1], passed))
        if self._next_boundary is None:
            self._next_boundary = self._start(watermark)
            if self._next_boundary is None:
                return self._guards(watermark)
        results = []
        while self._next_boundary <= watermark:
            boundary = self._next_boundary
            while self._pending and self._pending[0][0] < boundary:
                record = heapq.heappop(self._pending)[2]
                if isinstance(record, NodeSummary):
                    self.ranker.merge(record)
                else:
                    self.ranker.update(record)
            ranking, delta = self.ranker.decide_ranking(boundary)
            results.append(RankResult(boundary, ranking, delta, self.ranker.blacklist))
            self._next_boundary = boundary + period
        return results

    def snapshot(self) -> dict[str, Any]:
        return {
            "version": SNAPSHOT_VERSION,
            "ranker": self.ranker.snapshot(),
            "pending": [[due, arrival, *_record_row(r)] for due, arrival, r in
                        sorted(self._pending, key=lambda item: item[:2])],
            "arrivals": self._arrivals,
            "values": self._values,
            "watermarks": sorted(self._watermarks.items()),
            "next_boundary": self._next_boundary,
            "first_observed": self._first_observed,
            "sources": sorted(self._sources.items()),
        }

    def restore(self, state: dict[str, Any]) -> None:
        if state.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown RankStage snapshot version {state.get('version')!r}")
        self.ranker.restore(state["ranker"])
        self._pending = [(int(due), int(arrival), _record_from_row(kind, row))
                         for due, arrival, kind, row in state["pending"]]
        self._arrivals = int(state["arrivals"])
        self._values = int(state["values"])
        self._watermarks = {int(p): int(ts) for p, ts in state["watermarks"]}
        self._next_boundary = state["next_boundary"]
        first = state.get("first_observed")  # absent before h62: only a ranking that had not started misses it
        self._first_observed = None if first is None else int(first)
        self._sources = {str(p): int(offset) for p, offset in state.get("sources", [])}  # absent before issue 21


def _record_row(record: FeedRecord) -> tuple[str, list[Any]]:
    # Fields read directly: ``dataclasses.astuple`` deep-copies each value, and was most of the ranking's
    # checkpoint on two bench workers (py-spy, session 20); the rows are the same.
    if isinstance(record, NodeSummary):
        head = [record.partition, record.partitions, record.boundary_us, record.bucket_width_us]
        return "summary", [*head, [_moment_row(m) for m in record.added], [_moment_row(m) for m in record.removed]]
    return "sample", list(_sample_row(record))


def _record_from_row(kind: str, row: list[Any]) -> FeedRecord:
    if kind == "summary":
        partition, partitions, boundary, width, added, removed = row
        return NodeSummary(int(partition), int(partitions), int(boundary), int(width),
                           tuple(NodeMoments(*m) for m in added), tuple(NodeMoments(*m) for m in removed))
    return NormalizedTask(*row)

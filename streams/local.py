"""The in-process runner: the same stages as the Kafka workers, fed from any event iterator, no broker.

Events are routed to ``partitions`` normalising stages by job id exactly as Kafka's default partitioner would
route them on ``task-events``, so a run with the partition count of a Kafka deployment publishes the same
deltas as that deployment (tests/integration holds them against each other). With one partition (the
default) it is simply the whole trace in event-time order. A ``PredictorFleet`` given as ``predictor`` runs
beside them (what ``predict_stragglers`` does on a worker, in the same merged order of events: a
``PredictStage``; a list of one per partition steps each job's events through its partition's, as a worker's
per-partition predictors do) and sees each ranking's node evidence as it is published (its context's
``ClusterView``: each node's window mean z and the blacklist).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice

from streams.config import job_idle_timeout_us, partition_for, ranking_config
from streams.core.detection.base import observes_tasks
from streams.core.events import (
    BlacklistDelta,
    BlacklistSnapshot,
    Event,
    NodeClass,
    NormalizedTask,
    StragglerPrediction,
    TaskCheckpoint,
    TaskFinish,
    TaskStart,
    validate,
)
from streams.core.prediction.fleet import PredictorFleet
from streams.core.prediction.stage import PredictStage
from streams.core.publication import Publication, PublishedRanking
from streams.core.ranker import learns_from_samples
from streams.core.stages import Emitted, NormalizeStage, RankResult, RankStage, boundary_at_or_before
from streams.gc_tuning import GC_YOUNG_THRESHOLD as GC_YOUNG_THRESHOLD  # re-exported
from streams.gc_tuning import fewer_collections as fewer_collections  # re-exported
from streams.settings import Settings


@dataclass
class RunCounts:
    """What a run saw and did; ``invalid`` holds each reason with its count (the dead letters)."""

    events: int = 0
    samples: int = 0  # final z-values (what node-samples carries)
    summaries: int = 0  # per-partition, per-boundary summaries to the ranking
    rankings: int = 0
    deltas: int = 0
    invalid: Counter[str] = field(default_factory=Counter)
    last_ts_us: int = -1


# Events per ``feed_batch`` in ``run``: the per-event overhead of a stage's advance shared by a thousand events
# (results do not depend on it).
RUN_BATCH = 1000


class LocalPipeline:
    """Statistics, ranking and blacklist decisions in-process.

    >>> from producers.registry import open_trace
    >>> trace = open_trace("synthetic:nodes=40,slow=3,jobs=150,seed=1")
    >>> pipeline = LocalPipeline(Settings())
    >>> [(d.version, sorted(e.node_id for e in d.added)) for d in pipeline.run(trace)]
    [(1, ['node-04', 'node-08', 'node-36'])]
    >>> sorted(pipeline.blacklist.node_ids) == trace.ground_truth["slow_nodes"]
    True
    """

    def __init__(self, settings: Settings, partitions: int = 1,
                 on_ranking: Callable[[RankResult], None] | None = None,
                 on_samples: Callable[[list[NormalizedTask]], None] | None = None,
                 predictor: PredictorFleet | list[PredictorFleet] | None = None) -> None:  # fmt: skip
        self.config = ranking_config(settings)
        self.partitions = partitions
        period, idle = self.config.period_us, job_idle_timeout_us(settings)
        self.summaries = not learns_from_samples(self.config)  # else the detector needs every sample
        self._stages = [NormalizeStage(p, partitions, period, idle, window_us=self.config.window_size_us,
                                       summaries=self.summaries) for p in range(partitions)]
        self.ranking = PublishedRanking(RankStage(self.config, partitions), scores=False)
        self._watches = observes_tasks(self.rank_stage.ranker.detector)
        self.counts = RunCounts()
        self.on_ranking = on_ranking
        self.on_samples = on_samples  # the final z-values, as node-samples carries them
        self.last_ranking: RankResult | None = None
        self.node_classes: dict[str, NodeClass] = {}  # ML-NA: the latest class of each node, as node-classes keeps
        self.predictors = predictor if isinstance(predictor, list) else [] if predictor is None else [predictor]
        if len(self.predictors) not in (0, 1, partitions):
            raise ValueError(f"{len(self.predictors)} predictors for {partitions} partitions")
        self.predictor = self.predictors[0] if self.predictors else None
        # Each steps its fleet in the order a worker's does (streams.core.merge); the trace is in time order, so
        # only the events of the latest timestamp wait, and the node view is no later than the events' time.
        self._predicting = [PredictStage(fleet, p, time_ordered=True) for p, fleet in enumerate(self.predictors)]
        self._views = list({id(p.context.cluster): p.context.cluster for p in self.predictors}.values())
        self.flags: list[StragglerPrediction] = []  # the predictor's flags, in order

    @property
    def rank_stage(self) -> RankStage:
        return self.ranking.stage

    @property
    def blacklist(self) -> BlacklistSnapshot:
        return self.rank_stage.ranker.blacklist

    @property
    def late_events(self) -> int:
        """Events of jobs already final, over every partition (``NormalizeStage.late_events``)."""
        return sum(stage.late_events for stage in self._stages)

    def feed(self, event: Event) -> list[BlacklistDelta]:
        """One event in; the deltas it caused out (most events cause none)."""
        self.counts.events += 1
        reason = validate(event)
        if reason is not None:
            self.counts.invalid[reason.split(":")[0]] += 1
            return []
        self.counts.last_ts_us = max(self.counts.last_ts_us, event.ts_us)
        if self._watches and isinstance(event, TaskStart | TaskCheckpoint | TaskFinish):
            # Running-task evidence, through the stage as a worker's forwarded event goes: it also dates the
            # ranking's first boundary (RankStage._start), which must be the worker's.
            self.rank_stage.observe(event)
        partition = partition_for(event.job_id, self.partitions)
        if self._predicting:
            self.flags += self._predicting[partition if len(self._predicting) > 1 else 0].process(event)
        return self._forward(self._stages[partition].process(event))

    def finish(self) -> list[BlacklistDelta]:
        """End of the trace: finalise open jobs and rank up to the last event."""
        deltas: list[BlacklistDelta] = []
        for predicting in self._predicting:
            self.flags += predicting.flush()
        for stage in self._stages:
            emitted = stage.flush()
            deltas.extend(self._forward(emitted._replace(progress=None)))
        if self.counts.last_ts_us >= 0:
            # Samples flushed here were emitted at the last event time: rank through the boundary after it,
            # so the final ranking includes every job of the trace.
            end = boundary_at_or_before(self.counts.last_ts_us, self.config.period_us) + self.config.period_us
            deltas.extend(self._collect(self.ranking.finish(end)))
        return deltas

    def run(self, events: Iterable[Event], finish: bool = True, batch: int = RUN_BATCH) -> Iterator[BlacklistDelta]:
        """Every delta of the whole trace, in order.

        With ``finish=False`` the end of the trace is not treated as the end of time: open jobs stay open and
        only boundaries every partition has passed are ranked, exactly what a live Kafka worker publishes.
        Events are taken ``batch`` at a time, and a batch's deltas come once all of it is
        in: pass ``batch=1`` for a live or blocking source, so no delta waits for events still to come.
        """
        size = max(1, batch)
        with fewer_collections():
            if size == 1 or self.sees_each_event():
                for event in events:  # one at a time: as soon as it arrives, or each ranking seen before the next
                    yield from self.feed(event)
            else:
                events = iter(events)
                while chunk := list(islice(events, size)):
                    yield from self.feed_batch(chunk)
            if finish:
                yield from self.finish()

    def sees_each_event(self) -> bool:
        """Whether predictors or the detector's ``observe`` (running-task evidence) need each event by itself:
        they see each ranking before the next event, which only ``feed`` gives them."""
        return bool(self.predictors) or self._watches

    def feed_batch(self, events: list[Event]) -> list[BlacklistDelta]:
        """Several events in, each partition's share processed at once (``NormalizeStage.process_batch``): the
        same deltas and rankings as ``feed`` one event after the other, which the stages guarantee for any
        batching (as a Kafka worker takes them). Refused for a run with predictors or a detector that watches
        task events (``sees_each_event``)."""
        if self.sees_each_event():
            raise ValueError("feed_batch cannot serve predictors or a detector that observes running tasks: "
                             "feed them one event at a time with feed (or run)")
        counts, invalid, partitions = self.counts, self.counts.invalid, self.partitions
        shares: list[list[Event]] = [[] for _ in range(partitions)]
        last = counts.last_ts_us
        for event in events:
            reason = validate(event)
            if reason is not None:
                invalid[reason.split(":")[0]] += 1
                continue
            if event.ts_us > last:
                last = event.ts_us
            shares[partition_for(event.job_id, partitions)].append(event)
        counts.events += len(events)
        counts.last_ts_us = last
        deltas: list[BlacklistDelta] = []
        for stage, share in zip(self._stages, shares, strict=True):
            if share:
                deltas.extend(self._forward(stage.process_batch(share)))
        return deltas

    def _forward(self, emitted: Emitted) -> list[BlacklistDelta]:
        for record in emitted.summaries if self.summaries else emitted.samples:
            self.ranking.take(record)  # a summary (or sample) alone ranks nothing
        self.counts.samples += len(emitted.samples)
        self.counts.summaries += len(emitted.summaries)
        if self.on_samples is not None and emitted.samples:
            self.on_samples(emitted.samples)
        return [] if emitted.progress is None else self._collect(self.ranking.take(emitted.progress))

    def _collect(self, publications: list[Publication]) -> list[BlacklistDelta]:
        deltas = []
        for publication in publications:
            self.counts.rankings += 1
            self.last_ranking = publication.result
            self.node_classes.update((c.node_id, c) for c in publication.node_classes)
            for view in self._views:
                view.observe(publication.result.ranking)
            if self.on_ranking is not None:
                self.on_ranking(publication.result)
            if publication.delta is not None:
                self.counts.deltas += 1
                deltas.append(publication.delta)
        return deltas



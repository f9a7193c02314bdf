"""The direct engine's hosts of the core stages: what each Faust agent does with a batch (streams.agents.normalise,
predict, rank), on records kafka-python fetched, with the same outputs, keys, dead letters and checkpoint rules.

A host holds one ``Slot`` per source partition it was assigned (the ranking: partition 0 of ranking-feed); its
``take`` processes the records of one partition and says whether that partition's checkpoint is due.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Hashable
from itertools import groupby
from operator import itemgetter
from typing import Any, Generic, NamedTuple, TypeVar

from streams import kafka_clients, metrics
from streams.agents.envelope import Stateful, unpack
from streams.agents.idle_rules import (
    IdleClock,
    rank_without_idle,
    release_job_stream_if_idle,
    release_predictions_if_idle,
    warn_if_flags_may_never_come,
    warn_once_if_waiting,
)
from streams.agents.records import (
    RepeatsLog,
    dead_letter,
    forwarded,
    published,
    reason_to_refuse,
    take_forwarded,
)
from streams.config import job_idle_timeout_us, prediction_context, ranking_config
from streams.core.events import Event, StragglerPrediction, TaskEvent, TaskEventBatch, TaskRows
from streams.core.prediction.fleet import PredictorFleet
from streams.core.prediction.stage import PredictStage, predict_checkpoint_due_after
from streams.core.publication import Publication, PublishedRanking
from streams.core.ranker import learns_from_samples, watches_tasks
from streams.core.stages import Emitted, NormalizeStage, RankStage
from streams.engine.rejoin import while_broker_away
from streams.engine.store import Outbox, Slot
from streams.serde import codec, fast_decode
from streams.serde import topics as registry
from streams.settings import Settings

log = logging.getLogger(__name__)
S = TypeVar("S", bound=Stateful)
NORMALISE_CHECKPOINT_EVERY = 5000  # the agents' rules (streams.agents.normalise, predict, rank)
PREDICT_CHECKPOINT_EVERY = 2000  # records, at least: see predict_checkpoint_due_after
RANK_CHECKPOINT_EVERY = 20000
# A ranking that published is checkpointed at most every CHECKPOINT_MIN_S (DirectWorker's ``Spacing``, as the
# normalising and predicting states are). Its checkpoint writes the whole window state; taken after every
# publication it was ~8 % of a statistics worker's catch-up (dozens of rankings a second), while live a period
# (minutes; 3 s in the bench) passes between publications anyway. One due sooner is written once its time has
# passed, even if no record comes: the last rankings of a catch-up are saved seconds after it, not at the next
# period's publication. A crash redoes the rankings since the last one: the deltas already published are not
# published again (their version is read back from blacklist-snapshot), the node scores are, as after any restart.


class Decoded(NamedTuple):
    """A fetched record (kafka-python's ConsumerRecord) with its decoded value, or why it was refused (a named
    tuple: one is made per record, at a third of a frozen dataclass's cost)."""

    raw: Any
    record: Any
    reason: str | None


def decode(raw: Any, expected: tuple[type, ...]) -> Decoded:
    """Decode and validate once; the hosts share the result (the agents decoded once each). The codec's record or
    reason, compiled for the event types (``fast_decode``)."""
    try:
        record = fast_decode.decode(raw.value)
        reason = reason_to_refuse(record, expected, raw.topic)
    except codec.DecodeError as exc:
        record, reason = None, str(exc)
    return Decoded(raw, record if reason is None else None, reason)


class Host(Generic[S]):
    """Slots of the assigned partitions, made, restored from their checkpoints and forgotten together."""

    def __init__(self, outbox: Outbox, key: Callable[[int], str], make: Callable[[int], S]) -> None:
        self.outbox, self.key, self.make = outbox, key, make
        self.slots: dict[int, Slot[S]] = {}

    def load(self, partitions: set[int], saved: dict[str, bytes], reads_until: float = math.inf) -> None:
        """Make, and restore from ``saved``, the slots of ``partitions``; what ``loaded`` reads from the broker is
        read by ``reads_until`` (time.monotonic; the worker's rejoin deadline: rejoin.py)."""
        for partition in sorted(partitions):
            slot = Slot(self.key(partition), self.make(partition))
            state, offsets = unpack(saved.get(slot.key))
            restored = False
            if state is not None:
                try:
                    slot.state.restore(state)
                    slot.offsets, slot.saved, restored = dict(offsets), dict(offsets), True
                    log.info("%r resumes from its checkpoint at %s", slot.key, offsets)
                except ValueError as exc:
                    log.warning("%s: %s; cold start", slot.key, exc)
            self.loaded(slot, restored, reads_until)
            self.slots[partition] = slot

    def loaded(self, slot: Slot[S], restored: bool, reads_until: float) -> None:
        """Called once per slot after restoring it."""

    def keys(self, partitions: set[int]) -> set[str]:
        return {self.key(p) for p in partitions}

    def forget(self) -> None:
        """Drop every slot (a revocation or a lost membership)."""
        self.slots.clear()

    def fresh(self, slot: Slot[S], item: Decoded) -> bool:
        """Hold a record the slot's state does not include yet; False for one it does."""
        raw = item.raw
        if slot.covered(raw.topic, raw.partition, raw.offset):
            return False
        slot.hold(raw.topic, raw.partition, raw.offset)
        return True

    def dead_letter(self, item: Decoded) -> None:
        raw = item.raw
        letter = dead_letter(raw.topic, raw.partition, raw.offset, raw.key, raw.value, item.reason,
                             raw.timestamp / 1000 if raw.timestamp is not None else None)
        self.outbox.send_raw(registry.DEAD_LETTERS.name, raw.key, codec.encode(letter))


class NormaliseHost(Host[NormalizeStage]):
    """``normalise_tasks``: events of a partition in; final z-values, summaries and progress marks out."""

    def __init__(self, settings: Settings, partitions: int, outbox: Outbox,
                 behind: Callable[[Hashable], bool] | None = None,
                 caught_up: Callable[[Hashable], bool] | None = None) -> None:
        """``behind(p)``: partition ``p``'s events wait unread on the broker (its job stream is not idle then);
        ``caught_up(p)``: its job stream is known read to its end (idle after LAGGARD_CAUGHT_UP_GRACE_S)."""
        config = ranking_config(settings)
        self.summaries = not learns_from_samples(config)  # else the detector needs every sample
        self.forwards = watches_tasks(config)  # the detector watches the task events themselves (issue 21)
        self.forward_batches = settings.forward_format == "batches"  # for rankings before rows (rolling upgrade)
        self.cluster_id = settings.cluster_id
        self.feed_key = codec.encode_key(settings.cluster_id)
        self.idle = IdleClock(settings.idle_stream_timeout_s, behind=behind, caught_up=caught_up,
                              grace_s=settings.caught_up_grace_s)
        self.job_idle_timeout_us = job_idle_timeout_us(settings)
        self.waiting: set[int] = set()

        def make(p: int) -> NormalizeStage:
            return NormalizeStage(p, partitions, config.period_us, self.job_idle_timeout_us,
                                  wait_for_job_events=settings.wait_for_job_events,
                                  window_us=config.window_size_us, summaries=self.summaries)

        super().__init__(outbox, lambda p: f"normalise:{p}", make)

    def take(self, partition: int, batch: list[Decoded]) -> bool:
        slot = self.slots[partition]
        events: list[Event] = []
        forwarded: list[Any] = []
        for item in batch:
            if self.fresh(slot, item):
                if item.record is None:
                    self.dead_letter(item)
                else:
                    events.append(item.record)
                    if self.forwards and isinstance(item.record, TaskEvent):
                        forwarded.append(item)
        if not events:
            return False
        self.forward(forwarded)
        stage = slot.state
        emitted = stage.process_batch(events)
        released = release_job_stream_if_idle(self.idle, stage)
        metrics.late_events(partition, stage.late_events)
        warn_once_if_waiting(stage, self.job_idle_timeout_us, self.waiting)
        self.emit(Emitted(emitted.samples + released.samples, emitted.summaries + released.summaries,
                          released.progress or emitted.progress))
        due = (emitted.progress is not None or released.progress is not None
               or slot.held >= NORMALISE_CHECKPOINT_EVERY)
        # A checkpoint writes every event the merge buffer holds; a catch-up that read the task events far ahead
        # of the job events held ~50 k, and a checkpoint at every boundary and every 5,000 records was then 40 %
        # of a statistics worker's time (session 10). So one is taken no more often than every ``pending``
        # records: about one held event written per record read, whatever the buffer holds.
        return due and slot.held >= stage.pending

    def forward(self, items: list[Decoded]) -> None:
        """Valid task events to the ranking's detector, before the marks processing them leads to (so every event
        of a partition before a boundary is on the feed before the partition's mark past it): the values it takes,
        in ``TaskRows`` records that name where (``forwarded_rows``: the ranking drops what a restart forwards
        again)."""
        read = ((item.raw.topic, item.raw.partition, item.raw.offset, item.raw.value, item.record) for item in items)
        for value in forwarded(read, self.forward_batches):
            self.outbox.send_raw(registry.RANKING_FEED.name, self.feed_key, value)

    def emit(self, emitted: Emitted) -> None:
        # Final values once each to node-samples; the ranking gets the summaries, then the progress mark.
        send, feed = self.outbox.send, registry.RANKING_FEED.name
        for sample in emitted.samples:
            send(registry.NODE_SAMPLES.name, sample.node_id, sample)
            if not self.summaries:
                send(feed, self.cluster_id, sample)
        for summary in emitted.summaries:
            send(feed, self.cluster_id, summary)
        if emitted.progress is not None:
            send(feed, self.cluster_id, emitted.progress)

    def tick(self) -> None:
        """Release the job streams that held their partition back too long (the agent's idleness timer); a slot
        that released something is ``dirty`` (its checkpoint is due)."""
        for partition, slot in self.slots.items():
            released = release_job_stream_if_idle(self.idle, slot.state)
            metrics.late_events(partition, slot.state.late_events)
            if released.samples or released.summaries or released.progress is not None:
                slot.dirty = True
            self.emit(released)

    def forget(self) -> None:
        metrics.forget_late_events(self.slots)
        self.slots.clear()
        self.idle.clear()


class PredictHost(Host[PredictStage]):
    """``predict_stragglers``: events of a partition in, StragglerPrediction records out, in the partition's merged
    order (``PredictStage``), so a JobFinish read before its job's last task events does not flag them twice."""

    def __init__(self, settings: Settings, outbox: Outbox, behind: Callable[[Hashable], bool] | None = None,
                 caught_up: Callable[[Hashable], bool] | None = None) -> None:
        """``behind(p)``, ``caught_up(p)``: as ``NormaliseHost``'s."""
        context = prediction_context(settings)
        self.context = context  # its ``cluster``: the live node view every partition's predictor reads
        self.idle = IdleClock(settings.idle_stream_timeout_s, behind=behind, caught_up=caught_up,
                              grace_s=settings.caught_up_grace_s)
        self.job_idle_timeout_us = timeout_us = job_idle_timeout_us(settings)
        self.waiting: set[int] = set()
        warn_if_flags_may_never_come(settings.idle_stream_timeout_s, settings.wait_for_job_events)
        # Built once before consuming: the method's first build imports its libraries (River: seconds).
        PredictorFleet(settings.prediction_method, context, timeout_us)

        def make(p: int) -> PredictStage:
            return PredictStage(PredictorFleet(settings.prediction_method, context, timeout_us), p,
                                wait_for_job_events=settings.wait_for_job_events)

        super().__init__(outbox, lambda p: f"predict:{p}", make)

    def take(self, partition: int, batch: list[Decoded]) -> bool:
        slot = self.slots[partition]
        events = [item.record for item in batch
                  if self.fresh(slot, item) and item.record is not None]  # the normalising host dead-letters
        if not events:
            return False
        stage = slot.state
        flags = stage.process_batch(events)
        flags += release_predictions_if_idle(self.idle, stage)
        warn_once_if_waiting(stage, self.job_idle_timeout_us, self.waiting)
        self.send(flags)
        return slot.held >= predict_checkpoint_due_after(stage.pending, PREDICT_CHECKPOINT_EVERY)

    def send(self, flags: list[StragglerPrediction]) -> None:
        for prediction in flags:
            self.outbox.send(registry.STRAGGLER_PREDICTIONS.name, prediction.job_id, prediction)
            metrics.PREDICTOR_FLAGS.labels(prediction.method).inc()

    def tick(self) -> None:
        """Predict past the job streams that held their partition back too long (the agent's idleness timer); a
        slot whose fleet stepped held events is ``dirty``: unsaved, the next owner would flag them again."""
        for slot in self.slots.values():
            pending = slot.state.pending
            flags = release_predictions_if_idle(self.idle, slot.state)
            if slot.state.pending != pending:
                slot.dirty = True
            self.send(flags)

    def forget(self) -> None:
        self.slots.clear()
        self.idle.clear()


class RankHost(Host[PublishedRanking]):
    """``rank_nodes``: the ranking feed in; node scores, node classes, blacklist deltas and snapshots out."""

    def __init__(self, settings: Settings, partitions: int, outbox: Outbox,
                 behind: Callable[[Hashable], bool] | None = None) -> None:
        """``behind(p)``: normalising partition ``p``'s progress mark may wait unread (it is not idle then)."""
        config = ranking_config(settings)
        self.settings, self.cluster_id = settings, settings.cluster_id
        self.idle = IdleClock(settings.idle_stream_timeout_s, behind=behind)
        self.repeats = RepeatsLog()
        # whether the last ``take`` made its checkpoint due at once, past the worker's spacing (``take``)
        self.at_once = False
        super().__init__(outbox, lambda _: "rank:0", lambda _: PublishedRanking(RankStage(config, partitions)))

    def loaded(self, slot: Slot[PublishedRanking], restored: bool, reads_until: float) -> None:
        ranking = slot.state
        published = while_broker_away("the published blacklist", lambda left: kafka_clients.latest_snapshot(
            self.settings, timeout_s=left), reads_until)
        if ranking.resume(published, restored):
            log.warning("cold start: continuing from the published blacklist version %d", ranking.published_version)
        log.info("deltas up to version %d are already published", ranking.published_version)

    def take(self, batch: list[Decoded], noted: Callable[[], None]) -> bool:
        """Whether the checkpoint is due: a publication, or ``RANK_CHECKPOINT_EVERY`` records held (the worker
        spaces these), or a ranking made without an idle partition (``at_once``: written past the spacing).
        ``noted`` tells the health check the ranking works (called between publications of a catch-up)."""
        slot = self.slots[0]
        ranking, publications, admitted, repeats = slot.state, [], False, 0
        self.at_once = False
        started = time.perf_counter()
        for item in batch:
            if not self.fresh(slot, item):
                continue
            if item.record is None:
                self.dead_letter(item)
                continue
            admitted = True
            record = item.record
            if isinstance(record, TaskRows | TaskEventBatch):
                raw = item.raw
                again, letters = take_forwarded(ranking.stage, record, raw.timestamp / 1000 if raw.timestamp else None)
                repeats += again
                for letter in letters:
                    self.outbox.send_raw(registry.DEAD_LETTERS.name, letter.key, codec.encode(letter))
            elif isinstance(record, TaskEvent):  # forwarded one by one, by a worker before the batches
                repeats += not ranking.stage.observe(record, registry.source_of(item.raw.headers))
            else:
                publications += ranking.take(record)
        if not admitted:
            return False
        self.repeats.dropped(repeats)
        # A ranking made without an idle partition hangs on the wall clock: a restart would not make it again from
        # the log (the partition's marks are there by then), so it is checkpointed at once, as tick()'s are.
        without_idle = rank_without_idle(self.idle, ranking)
        publications += without_idle
        if publications:
            metrics.RANKING_DURATION.observe(time.perf_counter() - started)
        self.publish(ranking, publications, noted)
        self.at_once = bool(without_idle)
        return self.at_once or bool(publications) or slot.held >= RANK_CHECKPOINT_EVERY

    def publish(self, ranking: PublishedRanking, publications: list[Publication],
                noted: Callable[[], None] | None = None) -> None:
        for publication in publications:
            if noted is not None:
                noted()
            for topic, sends in groupby(published(publication, self.cluster_id), itemgetter(0)):
                self.outbox.send_many(topic, [(key, record) for _, key, record in sends])
        warning = ranking.late_warning()  # also without publications: a ranking fed marks alone
        if warning is not None:
            log.warning(warning)

    def tick(self) -> None:
        """Rank without the normalising partitions that held the ranking back too long (the agent's timer); a
        slot that published is ``dirty``."""
        for slot in self.slots.values():
            publications = rank_without_idle(self.idle, slot.state)
            if publications:
                slot.dirty = True
            self.publish(slot.state, publications)

    def forget(self) -> None:
        self.slots.clear()
        self.idle.clear()


# What each topic may carry (streams.wiring's, without importing Faust's types with it).
TASK_TYPES: tuple[type, ...] = registry.TASK_EVENTS.value_types + registry.JOB_EVENTS.value_types
FEED_TYPES: tuple[type, ...] = registry.RANKING_FEED.value_types

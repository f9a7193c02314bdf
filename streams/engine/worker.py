"""``DirectWorker``: laggard's topology on one kafka-python consumer and a batch producer (see streams.engine).

The loop: poll a batch, hand each partition's records to its hosts (decoded once), and when a host says a
checkpoint is due, queue it; on every turn the loop sends the queued checkpoints whose outputs the broker has
all acknowledged and commits the offsets of those it acknowledged (streams.engine.store.Checkpoints), without
waiting for either. One thing happens at a time: a rebalance (kafka-python runs it
inside ``poll``, calling the listener from its IO thread while ``poll`` waits) never meets a batch half done, and
records fetched before it are not processed after it: the consumer drops fetches for partitions it no longer holds or at
positions the assignment sought away from, and the loop skips whatever it holds no state for.

On assignment each state is restored from its checkpoint (the latest on the engine's compacted topic) and its
partitions are sought to the offsets the checkpoint covers (none: the first record); the committed offset
only tells monitoring how far the group is. On revocation every state checkpoints, and is forgotten; a lost
membership forgets without writing (another member may own the partitions already). SIGTERM ends the loop
with a last checkpoint and a clean leave from the group.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
from collections.abc import Hashable, Iterable
from typing import Any

from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.errors import CommitFailedError, KafkaError
from kafka.structs import OffsetAndMetadata, TopicPartition

from streams import kafka_clients, metrics
from streams.agents.envelope import pack
from streams.agents.idle_rules import Backlog, earliest_due
from streams.batch_producer import BatchProducer
from streams.engine import backlog as backlog_of
from streams.engine.assignment import RankingAwareAssignor, ranking_share
from streams.engine.hosts import FEED_TYPES, TASK_TYPES, Decoded, NormaliseHost, PredictHost, RankHost, decode
from streams.engine.rebalance import Rebalance
from streams.engine.rejoin import REJOIN_READ_S, while_broker_away
from streams.engine.store import CHECKPOINT_MAX_BYTES, Checkpoints, CheckpointStore, Outbox, Slot, as_kafka_errors
from streams.engine.view import NodeView
from streams.gc_tuning import fewer_collections
from streams.health import Health, ReadProgress
from streams.serde import topics as registry
from streams.settings import Settings

log = logging.getLogger(__name__)
TASK, JOB, FEED = registry.TASK_EVENTS.name, registry.JOB_EVENTS.name, registry.RANKING_FEED.name
INPUTS = (TASK, JOB, FEED)
BATCH_MAX = 5000  # records per poll at most
POLL_MS = 100  # a poll waits at most this long: the loop's tick (idleness, SIGTERM) comes as often
# The clients' tuning (direct_ab, 60 k Google events, 2 rounds): linger 50 ms, 1 MB batches, 4 MB / 64 KB fetches:
# +21 % events per wall s, +20 % per CPU s over linger 10 ms, 256 KB, the fetch defaults; gzip on the outputs cost
# 16 %: none. The fetch part is not kept: in a catch-up of 500 k events it left job-events[0] unread for 124 s.
# What a ranking waits for goes out without linger (streams.engine.store.Outbox): the progress marks and summaries
# on ranking-feed, and what the ranking publishes. A few records per period per partition, and a burst of node
# scores per period: batches still fill while the previous request is in flight.
PROMPT_TOPICS = frozenset({registry.RANKING_FEED.name, registry.NODE_SCORES.name, registry.NODE_CLASSES.name,
                           registry.BLACKLIST_DELTAS.name, registry.BLACKLIST_SNAPSHOT.name})
# The outputs' producer (streams.batch_producer, session 10 h45), PROMPT_TOPICS' batches closed at once. A partition
# unanswered 120 s (kafka-python's delivery_timeout_ms, the worker's wait before) ends the worker, restartable (exit
# 75): the replayer's 30 s would end it on a 30-60 s broker restart, which the worker used to ride out.
OUTPUT_OPTIONS: dict[str, Any] = {"linger_ms": 50, "batch_bytes": 1024 * 1024, "compression": None,
                                  "timeout_s": 120.0}
# kafka-python rejoins when its metadata changes, read every 5 min by default: a group joined before the metadata
# named an input topic had nothing assigned until then (a CI bench worker exited 75 after 120 s of that). The
# worker also waits for that metadata before it joins (kafka_clients.await_partitions): CI saw the rejoin not come.
CONSUMER_OPTIONS: dict[str, Any] = {"metadata_max_age_ms": 10_000}
READY = "Worker ready"  # the log line operators and tests wait for (Faust's own words)
PREDICT_GROUP = "{app_id}-predict"  # the prediction role's consumer group, app id and checkpoint topic prefix


def role_settings(settings: Settings) -> Settings:
    """The settings a worker of ``settings.worker_role`` runs with: the prediction role reads the inputs in a
    consumer group of its own (``<app_id>-predict``), so it gets every partition whatever the statistics
    workers hold, and checkpoints on a topic of its own (``<app_id>-predict-checkpoints``).

    >>> role_settings(Settings(worker_role="prediction", app_id="lg")).app_id
    'lg-predict'
    >>> role_settings(Settings(worker_role="statistics", app_id="lg")).app_id
    'lg'
    """
    if settings.worker_role == "prediction":
        return settings.model_copy(update={"app_id": PREDICT_GROUP.format(app_id=settings.app_id)})
    return settings


class DirectWorker:
    """The consumer, the producer, the hosts of its role and the checkpoint store of one worker process.

    Roles (``settings.worker_role``): ``all`` hosts normalise, rank and predict; ``statistics`` normalise and
    rank; ``prediction`` predict alone, in its own group (``role_settings``)."""

    def __init__(self, settings: Settings, partitions: int, health: Health | None = None) -> None:
        role = settings.worker_role
        if role == "prediction" and settings.prediction_method == "off":
            raise ValueError("the prediction role needs a predictor (LAGGARD_PREDICTION_METHOD is off)")
        self.settings = settings = role_settings(settings)
        statistics = role != "prediction"
        self.inputs = INPUTS if statistics else (TASK, JOB)
        self.health = health
        # the prediction role publishes nothing a ranking waits for
        self.producer = BatchProducer(settings, **OUTPUT_OPTIONS, prompt_topics=PROMPT_TOPICS if statistics else (),
                                      max_request_size=CHECKPOINT_MAX_BYTES, name="direct-outputs")
        try:
            self._set_up(settings, partitions, role, statistics)
        except BaseException:  # a failed start leaves no producer (its loop thread) behind
            self.producer.close()
            raise

    def _set_up(self, settings: Settings, partitions: int, role: str, statistics: bool) -> None:
        self.outbox = Outbox(self.producer)
        self.store = CheckpointStore(settings, self.outbox)
        self.store.ensure_topic()
        self.checkpoints = Checkpoints(self.outbox, self.store)
        self.backlog = Backlog()  # what waits unread on the broker: a catch-up is not idleness
        self.normalise = (NormaliseHost(settings, partitions, self.outbox, behind=self.job_stream_behind,
                                        caught_up=self.job_stream_caught_up) if statistics else None)
        predicting = role != "statistics" and settings.prediction_method != "off"
        self.predict = (PredictHost(settings, self.outbox, behind=self.job_stream_behind,
                                    caught_up=self.job_stream_caught_up) if predicting else None)
        # the predictor's live node view, from what the ranking publishes (streams.engine.view)
        # (opt-in: two Google catch-ups of an `all` worker with it stalled, and no in-time F1 gain is measured yet)
        view = bool(settings.prediction_node_view)
        self.view = NodeView(settings, self.predict.context.cluster) if self.predict is not None and view else None
        self.rank = RankHost(settings, partitions, self.outbox, behind=self.partition_behind) if statistics else None
        self.progress = ReadProgress(settings.stall_timeout_s or math.inf, settings.ranking_period_s)
        self.progress_lock = threading.Lock()  # the health check reads it from a thread of its own
        self.assigned: frozenset[TopicPartition] = frozenset()
        self.stopping = False
        self.ready = False
        self.in_listener = False  # a rebalance callback runs (kafka-python calls it from its IO thread)
        self._committed: dict[TopicPartition, int] = {}
        self._readers = self._reader_counters()
        self._idle_every_s = max(0.5, settings.idle_stream_timeout_s / 4)
        self._next_tick = time.monotonic() + self._idle_every_s
        self.consumer = kafka_clients.consumer(
            settings, group_id=settings.app_id, client_id=f"{settings.app_id}-direct",
            # task-events p and job-events p together; the ranking's owner with fewer (range: a group mid-upgrade)
            partition_assignment_strategy=(RankingAwareAssignor(FEED, ranking_share(settings.policy,
                                                                                    settings.ranking_share)),
                                           RangePartitionAssignor),
            session_timeout_ms=15000, heartbeat_interval_ms=3000, max_poll_records=BATCH_MAX, **CONSUMER_OPTIONS)
        self.consumer.subscribe(topics=list(self.inputs), listener=Rebalance(self))
        unknown = kafka_clients.await_partitions(self.consumer, self.inputs)  # before the join (in the first poll)
        if unknown:  # `laggard worker` creates them first: a broker this slow gets its old chance, the rejoin
            log.warning("the broker's metadata names no partition of %s after 30 s; joining anyway", unknown)

    def _reader_counters(self) -> dict[str, list[Any]]:
        readers = (["normalise_tasks"] if self.normalise is not None else []) + (
            ["predict_stragglers"] if self.predict is not None else [])
        counters = {topic: [metrics.EVENTS_IN.labels(topic, reader) for reader in readers] for topic in (TASK, JOB)}
        counters[FEED] = [metrics.EVENTS_IN.labels(FEED, "rank_nodes")]
        return counters

    def hosts(self) -> list[Any]:
        """The hosts this worker's role runs."""
        return [host for host in (self.normalise, self.predict, self.rank) if host is not None]

    # --- the loop ------------------------------------------------------------------------------------------

    def stop_on_signals(self) -> None:
        def stop(signum: int, _frame: object) -> None:
            log.info("signal %d: stopping after the current batch", signum)
            self.stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)

    def run(self) -> None:
        clean = False
        with as_kafka_errors():  # a refused output, a silent broker: one line, a restartable exit
            try:
                # As in-process (streams.gc_tuning): a third of the loop's samples on Google 0-9 were the collector
                with fewer_collections():
                    while not self.stopping:
                        polled = self.consumer.poll(timeout_ms=self.poll_ms(), max_records=BATCH_MAX)
                        if self.health is not None:
                            self.health.beat()  # the loop turns (a blocked one answers no probe truthfully)
                        if self.view is not None:
                            self.view.poll()
                        if polled:
                            self.process(polled)
                        self.tick()
                        if overdue := self.checkpoints.spacing.overdue(time.monotonic()):  # came due too soon before
                            self.checkpoint(overdue)
                        self.settle()
                clean = True
            finally:
                # After an error (a refused output, a batch half processed) the states hold work whose outputs
                # may be lost: no last checkpoint; the restart resumes from the previous one and redoes them.
                self.close(checkpoint=clean)

    def process(self, polled: dict[TopicPartition, list[Any]]) -> None:
        """One fetched batch through the hosts, then the checkpoints it made due."""
        by_partition: dict[int, list[Decoded]] = {}
        feed: list[Decoded] = []
        for tp, records in polled.items():
            if tp not in self.assigned or not records:
                continue  # fetched for an assignment that has ended
            self.note(tp, records)
            if tp.topic == FEED:
                feed += [decode(record, FEED_TYPES) for record in records]
            else:
                by_partition.setdefault(tp.partition, []).extend(decode(record, TASK_TYPES) for record in records)
        due: list[Slot[Any]] = []
        for partition, batch in by_partition.items():
            for host in (self.normalise, self.predict):
                if host is not None and partition in host.slots and host.take(partition, batch):
                    due.append(host.slots[partition])
        at_once: list[Slot[Any]] = []
        if feed and self.rank is not None and 0 in self.rank.slots and self.rank.take(feed, self.working):
            # spaced as the others, except a ranking made without an idle partition (RankHost.at_once)
            (at_once if self.rank.at_once else due).append(self.rank.slots[0])
        due = self.checkpoints.spacing.ready(due, time.monotonic()) + at_once
        if due:
            self.checkpoint(due)

    def note(self, tp: TopicPartition, records: list[Any]) -> None:
        for counter in self._readers[tp.topic]:
            counter.inc(len(records))
        last = records[-1]
        self.backlog.processed(tp, last.offset)  # the hosts process every record of the batch
        self.backlog.ended(tp, self.consumer.highwater(tp))
        with self.progress_lock:
            self.progress.read((tp.topic, tp.partition), last.offset,
                               last.timestamp / 1000 if last.timestamp else time.time(), time.monotonic())

    def job_stream_behind(self, partition: Hashable) -> bool:
        return backlog_of.job_stream_behind(self.backlog, partition)

    def job_stream_caught_up(self, partition: Hashable) -> bool:
        return backlog_of.job_stream_caught_up(self.backlog, self.consumer, partition)

    def partition_behind(self, partition: Hashable) -> bool:
        return backlog_of.partition_behind(self.backlog, partition)

    def refresh_backlog(self) -> None:
        backlog_of.refresh(self.backlog, self.consumer)

    def working(self) -> None:
        """The ranking publishes a long catch-up: tell the health check the feed is being processed."""
        slot = self.rank.slots.get(0) if self.rank is not None else None
        offset = None if slot is None else slot.offsets.get(f"{FEED}:0")
        if offset is not None:
            with self.progress_lock:
                self.progress.read((FEED, 0), offset, time.time(), time.monotonic())

    def grace_due(self) -> float:
        return earliest_due(*(host.idle for host in (self.normalise, self.predict) if host is not None))

    def poll_ms(self) -> int:
        """A poll returns by the end of the next grace at the latest, so the check that ends it is not late."""
        wait_s = self.grace_due() - time.monotonic()
        return POLL_MS if wait_s * 1000 >= POLL_MS else max(0, math.ceil(wait_s * 1000))

    def tick(self) -> None:
        """Source idleness, as often as the agents' timers run it (never when it is off), and when a grace ends."""
        now = time.monotonic()
        due = min(self._next_tick, self.grace_due())
        if self.settings.idle_stream_timeout_s <= 0 or now < due:
            return
        if now >= self._next_tick:
            self._next_tick = now + self._idle_every_s
            self.refresh_backlog()
        for host in (self.normalise, self.predict, self.rank):
            if host is not None:
                host.tick()
        # What a timer released is checkpointed as what a record released is: else a restart, a rebalance or a
        # stop before the next due checkpoint makes the next owner release, and publish, it again.
        self.checkpoint([slot for slot in self.slots() if slot.dirty])

    # --- checkpoints and offsets ---------------------------------------------------------------------------

    def slots(self) -> list[Slot[Any]]:
        return [slot for host in self.hosts() for slot in host.slots.values()]

    def checkpoint(self, due: Iterable[Slot[Any]]) -> None:
        """Queue the checkpoints of ``due``: sent once the broker acknowledged every output so far, their offsets
        committed once they are acknowledged themselves (``settle``); the loop goes on meanwhile."""
        self.queue(due)
        self.settle()

    def queue(self, due: Iterable[Slot[Any]]) -> None:
        due = list(due)
        for slot in due:
            self.checkpoints.queue(slot, pack(slot.state.snapshot(), slot.offsets))
        self.checkpoints.spacing.queued(due, time.monotonic())

    def settle(self) -> None:
        """Move the queued checkpoints on without waiting; commit the offsets of those acknowledged."""
        if self.checkpoints.advance():
            self.commit()

    def checkpoint_now(self, due: Iterable[Slot[Any]]) -> None:
        """``checkpoint``, waiting until every queued checkpoint is acknowledged and committing (a rebalance, a
        stop)."""
        self.queue(due)
        self.checkpoints.drain()
        self.commit()

    def covering(self, tp: TopicPartition) -> list[Slot[Any]]:
        """The states that read ``tp``."""
        if tp.topic == FEED:
            return [self.rank.slots[0]] if self.rank is not None and 0 in self.rank.slots else []
        hosts: list[Any] = [self.normalise, self.predict]
        return [host.slots[tp.partition] for host in hosts if host is not None and tp.partition in host.slots]

    def commit(self) -> None:
        """Commit, per partition, the first offset no acknowledged checkpoint of its states covers yet."""
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp in self.assigned:
            source = f"{tp.topic}:{tp.partition}"
            saved = [slot.saved.get(source) for slot in self.covering(tp)]
            if not saved or None in saved:
                continue
            position = min(offset for offset in saved if offset is not None) + 1
            if self._committed.get(tp) != position:
                offsets[tp] = OffsetAndMetadata(position, "", -1)
        if not offsets:
            return
        try:
            if self.in_listener:  # on kafka-python's IO thread, where a blocking commit is refused: queue it
                self.consumer.commit_async(offsets)
            else:
                self.consumer.commit(offsets)
            self._committed.update({tp: meta.offset for tp, meta in offsets.items()})
        except (CommitFailedError, KafkaError) as exc:  # the checkpoints stand; the next commit catches up
            log.warning("offset commit failed (%s); the checkpoints stand", exc)

    # --- rebalances ----------------------------------------------------------------------------------------

    def revoked(self) -> None:
        """Checkpoint every state that changed since its last checkpoint, commit, forget them."""
        self.checkpoint_now([slot for slot in self.slots() if slot.unsaved])
        self.forget()

    def forget(self) -> None:
        self.checkpoints.clear()
        for host in self.hosts():
            host.forget()
        self.assigned = frozenset()
        self.backlog.assign(())
        self._committed.clear()

    def assigned_now(self, assigned: set[TopicPartition]) -> None:
        """Restore the states of ``assigned`` from their checkpoints and seek each partition to them."""
        self.assigned = frozenset(assigned)
        self.backlog.assign(assigned)
        self._next_tick = 0.0  # the loop asks the broker where the new partitions start and end at once
        partitions = {tp.partition for tp in assigned if tp.topic in (TASK, JOB)}
        alone = sorted(p for p in partitions if not {TopicPartition(TASK, p), TopicPartition(JOB, p)} <= assigned)
        if alone:
            log.error("partitions %s of %s and %s are not assigned together (different partition counts?); their "
                      "events cannot be merged", alone, TASK, JOB)
        ranks = {0} if TopicPartition(FEED, 0) in assigned else set()
        hosts: list[Any] = [host for host in (self.normalise, self.predict) if host is not None]
        keys = set[str]().union(*(h.keys(partitions) for h in hosts))
        if self.rank is not None:
            keys |= self.rank.keys(ranks)
        deadline = time.monotonic() + REJOIN_READ_S  # both reads (rejoin.py)
        saved = while_broker_away("the checkpoints", lambda left: self.store.load(keys, left), deadline)
        for host in hosts:
            host.load(partitions, saved, deadline)
        if self.rank is not None:
            self.rank.load(ranks, saved, deadline)
        for tp in sorted(assigned):
            self.seek(tp)
        log.info("assigned %s", sorted((tp.topic, tp.partition) for tp in assigned))
        if not self.ready:
            self.ready = True
            log.info(READY)

    def seek(self, tp: TopicPartition) -> None:
        source = f"{tp.topic}:{tp.partition}"
        covering = self.covering(tp)
        position = min((slot.offsets.get(source, -1) + 1 for slot in covering), default=0)
        if position == 0:
            self.consumer.seek_to_beginning(tp)  # the log's start: the loop asks for it (refresh_backlog)
        else:
            self.consumer.seek(tp, position)
            self.backlog.start((tp.topic, tp.partition), position)

    def close(self, checkpoint: bool = True) -> None:
        """A last checkpoint (after a clean stop only), a clean leave from the group, the producer closed."""
        try:
            if checkpoint and self.assigned:
                self.checkpoint_now([slot for slot in self.slots() if slot.unsaved])
        except BaseException:  # outputs lost (a silent broker): the revocation must not try the checkpoint again
            checkpoint = False
            raise
        finally:
            if not checkpoint:
                self.forget()  # leaving the group revokes: no checkpoint of these states may be written now
            self.consumer.close(autocommit=False)
            if self.view is not None:
                self.view.close()
            self.outbox.close()
        log.info("stopped")

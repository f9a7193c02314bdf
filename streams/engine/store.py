"""The direct engine's three kinds of durable write: outputs (``Outbox``), checkpoints (``CheckpointStore``), and
the per-state bookkeeping between them (``Slot``).

The order is the agents' (streams.agents.checkpoint): outputs, then the checkpoint that covers them once the broker
acknowledged every one of them, then offsets once the checkpoint is acknowledged. A slot remembers the offsets
of its last acknowledged checkpoint apart from those it has processed since, so what is committed never passes
what a restart can restore.

The loop does not wait for any of it (``Checkpoints``): a due checkpoint is packed at once and queued with the
number of outputs sent before it; the loop's every turn sends those whose outputs the broker has all
acknowledged and marks those the broker acknowledged as saved. One checkpoint per state is queued at a time (a
newer one replaces it before it is sent), and a state's next one is sent only after its previous one was
acknowledged, so the compacted topic keeps the newest. Waiting for acknowledgements in the loop cost 15 % of
its time (``python -m laggard.bench.direct_profile``).

>>> slot = Slot("normalise:0", {"n": 0})
>>> slot.covered("task-events", 0, 5)
False
>>> slot.hold("task-events", 0, 5); slot.covered("task-events", 0, 5), slot.held, slot.saved
(True, 1, {})
>>> slot.saved_now(); slot.held, slot.saved
(0, {'task-events:0': 5})
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from aiokafka.errors import KafkaError as AIOKafkaError
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from streams import kafka_clients, metrics
from streams.agents.envelope import CHECKPOINT_MAX_BYTES as CHECKPOINT_MAX_BYTES  # one record per state
from streams.aiokafka_producer import BrokerStopped
from streams.serde import codec, fast_encode
from streams.settings import Settings

log = logging.getLogger(__name__)
S = TypeVar("S")


@dataclass
class Slot(Generic[S]):
    """One state (a stage of a partition, or the ranking) with its checkpoint key and source offsets."""

    key: str
    state: S
    offsets: dict[str, int] = field(default_factory=dict)  # "topic:partition" -> last offset processed
    saved: dict[str, int] = field(default_factory=dict)  # the same, as of the last acknowledged checkpoint
    held: int = 0  # records processed since that checkpoint
    # Changed since its last checkpoint without a record: a host's timer released what the state held (flags a
    # silent job stream held back). ``held`` does not count that, and a revocation or a stop that checkpointed
    # only held states let the next owner release, and publish, the same again.
    dirty: bool = False
    queued_at: float = -math.inf  # when its last checkpoint was queued (time.monotonic; DirectWorker's spacing)

    def covered(self, topic: str, partition: int, offset: int) -> bool:
        """True when this state already includes the record (read again after a restart or a rebalance)."""
        return offset <= self.offsets.get(f"{topic}:{partition}", -1)

    def hold(self, topic: str, partition: int, offset: int) -> None:
        self.offsets[f"{topic}:{partition}"] = offset
        self.held += 1

    def saved_now(self) -> None:
        """The checkpoint of the current offsets is acknowledged."""
        self.saved = dict(self.offsets)
        self.held, self.dirty = 0, False

    @property
    def unsaved(self) -> bool:
        """Whether the state changed since its last queued checkpoint (records processed, or a timer's release)."""
        return self.held > 0 or self.dirty


class OutputLost(KafkaError):  # type: ignore[misc]  # kafka-python is untyped
    """An output the batch producer's broker refused or did not acknowledge in time (an aiokafka error, or
    ``BrokerStopped``), as a kafka-python ``KafkaError``: ``laggard worker`` ends on one in one line and a
    restartable exit, as it did on kafka-python's producer's own errors."""

    def __str__(self) -> str:
        return str(self.args[0])


@contextlib.contextmanager
def as_kafka_errors() -> Iterator[None]:
    try:
        yield
    except (AIOKafkaError, BrokerStopped) as exc:
        raise OutputLost(str(exc)) from exc  # aiokafka's errors name their class already


class Outbox:
    """The producer of every output, and what the broker has acknowledged of it; ``confirm`` returns once the
    broker has all of it.

    The worker's producer is a ``streams.batch_producer.BatchProducer``: records appended to per-partition
    aiokafka batches, whole batches sent from a thread of its own (kafka-python's per-record ``send`` was ~20 us of
    the worker's ~34 us per output record, session 10). It lingers to fill batches for the bulk (node-samples,
    predictions, checkpoints) and closes a batch of ``PROMPT_TOPICS`` at once: each hop of a ranking (the progress
    mark to ranking-feed, then the node scores and delta) otherwise waits out the linger, two hops of 50 ms that
    were nearly all of the direct worker's close-to-output time in the live bench (session 10). Each send's handle
    is its batch's delivery (``is_done``, ``failed()``, ``exception``, as kafka-python's future), so a refused
    batch fails every record in it. A partition's batches go in the order they were closed, so the order of its
    records is the order sent.

    ``prompt`` (with ``prompt_topics``), when given, is a second producer for those topics (the kafka-python
    arrangement before; the unit tests' fakes)."""

    def __init__(self, producer: Any, prompt: Any | None = None,
                 prompt_topics: frozenset[str] = frozenset()) -> None:
        self.producer = producer
        self.prompt = prompt
        self.prompt_topics = prompt_topics if prompt is not None else frozenset()
        self._pending: deque[Any] = deque()  # handles of the sends not known to be acknowledged, in order
        self._counters: dict[str, Any] = {}
        self.failure: BaseException | None = None  # the first send the broker refused, if any
        self.sent = 0  # sends so far
        self.acked = 0  # of those, the longest prefix the broker acknowledged (as far as ``acknowledged`` saw)

    def send(self, topic: str, key: str, record: object) -> None:
        """``record`` in Avro on ``topic`` under ``key`` (the agents' ``send``): the codec's bytes, compiled
        (``fast_encode``: a node score 8.4 -> 4.1 us, and node scores are half the output records)."""
        self.send_raw(topic, codec.encode_key(key), fast_encode.encode(record))

    def send_many(self, topic: str, records: Iterable[tuple[str, object]]) -> None:
        """``send(topic, key, record)`` for each (key, record) in order, the per-send look-ups done once: a ranking
        publishes thousands of node scores at a time."""
        producer = self.prompt if self.prompt is not None and topic in self.prompt_topics else self.producer
        send, append, encode, encode_key = producer.send, self._pending.append, fast_encode.encode, codec.encode_key
        sent = 0
        try:
            for key, record in records:
                append(send(topic, key=encode_key(key), value=encode(record)))
                sent += 1
        finally:
            self.sent += sent
            if sent:
                counter = self._counters.get(topic)
                if counter is None:
                    counter = self._counters[topic] = metrics.EVENTS_OUT.labels(topic)
                counter.inc(sent)

    def send_raw(self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None = None
                 ) -> Any:
        """Send; the handle of its outcome (the producer's: a batch's delivery, or kafka-python's future)."""
        producer = self.prompt if self.prompt is not None and topic in self.prompt_topics else self.producer
        future = (producer.send(topic, key=key, value=value) if headers is None  # most records carry none
                  else producer.send(topic, key=key, value=value, headers=headers))
        self._pending.append(future)
        self.sent += 1
        counter = self._counters.get(topic)
        if counter is None:
            counter = self._counters[topic] = metrics.EVENTS_OUT.labels(topic)
        counter.inc()
        return future

    def acknowledged(self) -> int:
        """Without waiting: how many sends, counted from the first, the broker has acknowledged; a refused one
        raises (sticky, as in ``confirm``)."""
        if self.failure is not None:
            raise self.failure
        pending = self._pending
        while pending and pending[0].is_done:
            future = pending.popleft()
            if future.failed():
                self.failure = future.exception
                raise future.exception
            self.acked += 1
        return self.acked

    def confirm(self) -> int:
        """Wait until the broker acknowledged every send so far; a failed one raises (nothing may be
        checkpointed after it). How many were waited for."""
        if self.failure is not None:  # sticky: once an output is lost, no later checkpoint may cover it
            raise self.failure
        self.flush()  # before taking the pending list: a flush that raises must leave it to the next confirm
        pending, self._pending = self._pending, deque()
        for future in pending:
            if future.failed():
                self.failure = future.exception
                raise future.exception
        self.acked += len(pending)
        return len(pending)

    def flush(self) -> None:
        """Send whatever lingers and wait for the broker's answers (every producer)."""
        for producer in self.producers:
            producer.flush()

    def close(self) -> None:
        for producer in self.producers:
            producer.close()

    @property
    def producers(self) -> list[Any]:
        return [self.producer] + ([self.prompt] if self.prompt is not None else [])


class CheckpointStore:
    """Checkpoints on a compacted topic of the engine's own (``<app_id>-checkpoints``, one partition), keyed
    by state (``normalise:<p>``, ``predict:<p>``, ``rank:0``)."""

    def __init__(self, settings: Settings, outbox: Outbox) -> None:
        self.settings = settings
        self.outbox = outbox
        self.topic = f"{settings.app_id}-checkpoints"

    def ensure_topic(self) -> None:
        client = kafka_clients.admin(self.settings)
        try:
            if self.topic in set(client.list_topics()):
                return
            config = {"cleanup.policy": "compact", "max.message.bytes": str(CHECKPOINT_MAX_BYTES),
                      "segment.ms": "600000", "segment.bytes": str(2 * CHECKPOINT_MAX_BYTES),
                      "min.cleanable.dirty.ratio": "0.1"}
            with contextlib.suppress(TopicAlreadyExistsError):  # another worker won the race
                client.create_topics([NewTopic(self.topic, 1, self.settings.replication_factor,
                                               topic_configs=config)])
        finally:
            client.close()

    def load(self, keys: set[str], timeout_s: float | None = None) -> dict[str, bytes]:
        """The latest checkpoint of each of ``keys`` on the topic (read to its end, within ``timeout_s``: see
        ``read_to_end``); absent keys have none."""
        found: dict[str, bytes] = {}
        for record in kafka_clients.read_to_end(self.settings, self.topic, timeout_s=timeout_s):
            key = codec.decode_key(record.key)
            if key in keys:
                if record.value:
                    found[key] = record.value
                else:
                    found.pop(key, None)  # a tombstone
        return found

    def write(self, key: str, value: bytes) -> Any:
        """Send a checkpoint; ``outbox.confirm`` waits for it like any output. Its future."""
        return self.outbox.send_raw(self.topic, codec.encode_key(key), value)


@dataclass
class Flight:
    """One state's checkpoint on its way: sent once the first ``after`` outputs are acknowledged."""

    slot: Slot[Any]
    value: bytes
    offsets: dict[str, int]
    after: int
    future: Any = None  # its delivery, once sent


# A normalising or predicting state due for a checkpoint (a boundary passed, enough records held) is written at most
# this often by DirectWorker; one due sooner waits, and is written once its time has passed even if no record comes.
# In a catch-up the rules by records and boundaries wrote each partition's whole state several times a second:
# py-spy found a quarter of two bench workers' samples in ``checkpoint`` (session 20). Live, boundaries are minutes
# apart. (Kafka Streams commits every 30 s by default, Faust every 2.8 s.) A crash redoes at most this much more.
# What a timer released, and a ranking made without an idle partition, are still written at once.
CHECKPOINT_MIN_S = 5.0


class Spacing:
    """Checkpoints of states due no more often than every ``min_s`` (time.monotonic): one due sooner waits here until
    its time has passed, written then even if no record comes (``CHECKPOINT_MIN_S``; DirectWorker).

    >>> spacing, a = Spacing(5.0), Slot("a", None)
    >>> [s.key for s in spacing.ready([a], now=100.0)]  # never checkpointed: at once
    ['a']
    >>> spacing.queued([a], now=100.0)
    >>> spacing.ready([a], now=102.0), [s.key for s in spacing.overdue(now=104.9)]  # due again too soon: waits
    ([], [])
    >>> [s.key for s in spacing.overdue(now=105.0)]
    ['a']
    """

    def __init__(self, min_s: float) -> None:
        self.min_s = min_s
        self.waiting: dict[str, Slot[Any]] = {}

    def ready(self, due: list[Slot[Any]], now: float) -> list[Slot[Any]]:
        """Of the states due, those to checkpoint now; the others wait."""
        out = []
        for slot in due:
            if now - slot.queued_at >= self.min_s:
                out.append(slot)
            else:
                self.waiting[slot.key] = slot
        return out

    def overdue(self, now: float) -> list[Slot[Any]]:
        """The waiting states whose time has passed."""
        return [slot for slot in self.waiting.values() if now - slot.queued_at >= self.min_s] if self.waiting else []

    def queued(self, slots: Iterable[Slot[Any]], now: float) -> None:
        for slot in slots:
            slot.queued_at = now
            self.waiting.pop(slot.key, None)

    def clear(self) -> None:
        self.waiting.clear()


class Checkpoints:
    """Checkpoints that do not stop the loop: queued, sent once the outputs before them are acknowledged,
    saved once acknowledged themselves (see the module's docstring)."""

    def __init__(self, outbox: Outbox, store: CheckpointStore) -> None:
        self.outbox, self.store = outbox, store
        self.flights: dict[str, list[Flight]] = {}  # per state: the one sent (if any), then the one queued
        self.spacing = Spacing(CHECKPOINT_MIN_S)  # normalising and predicting states, in DirectWorker.process

    def queue(self, slot: Slot[Any], value: bytes) -> None:
        """``value`` (the slot's state and offsets now) is due; it covers every output sent so far."""
        flights = self.flights.setdefault(slot.key, [])
        flight = Flight(slot, value, dict(slot.offsets), self.outbox.sent)
        if flights and flights[-1].future is None:
            flights[-1] = flight  # the newer covers all the older did
        else:
            flights.append(flight)
        slot.held, slot.dirty = 0, False

    def advance(self) -> bool:
        """Send what may be sent, save what was acknowledged; True when some state's saved offsets moved."""
        if not self.flights:
            return False
        acked, moved = self.outbox.acknowledged(), False
        for key in list(self.flights):
            flights = self.flights[key]
            while flights:
                first = flights[0]
                if first.future is None:
                    if first.after > acked:
                        break
                    first.future = self.store.write(key, first.value)
                if not first.future.is_done:
                    break
                if first.future.failed():
                    self.outbox.failure = first.future.exception
                    raise first.future.exception
                first.slot.saved = first.offsets
                flights.pop(0)
                moved = True
            if not flights:
                del self.flights[key]
        return moved

    def drain(self) -> None:
        """Wait until every queued checkpoint is acknowledged (a rebalance, a stop)."""
        while self.flights:
            self.outbox.flush()
            self.advance()

    def clear(self) -> None:
        """Forget every checkpoint not sent (a lost membership: another member may hold the states now)."""
        self.flights.clear()
        self.spacing.clear()

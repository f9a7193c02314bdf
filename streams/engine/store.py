"""The direct engine's three kinds of durable write: outputs (``Outbox``), checkpoints (``CheckpointStore``), and
the per-state bookkeeping between them (``Slot``).

The order is the agents' (streams.agents.checkpoint): outputs, then the checkpoint that covers them once the broker
acknowledged every one of them, then offsets once the checkpoint is acknowledged. A slot remembers the offsets
of its last acknowledged checkpoint apart from those it has processed since, so what is committed never passes
what a restart can restore.

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
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kafka import KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from streams import kafka_clients, metrics
from streams.serde import codec
from streams.settings import Settings

log = logging.getLogger(__name__)
CHECKPOINT_MAX_BYTES = 32 * 1024 * 1024  # a checkpoint is one stage's whole state (as streams.app's tables)
S = TypeVar("S")


@dataclass
class Slot(Generic[S]):
    """One state (a stage of a partition, or the ranking) with its checkpoint key and source offsets."""

    key: str
    state: S
    offsets: dict[str, int] = field(default_factory=dict)  # "topic:partition" -> last offset processed
    saved: dict[str, int] = field(default_factory=dict)  # the same, as of the last acknowledged checkpoint
    held: int = 0  # records processed since that checkpoint

    def covered(self, topic: str, partition: int, offset: int) -> bool:
        """True when this state already includes the record (read again after a restart or a rebalance)."""
        return offset <= self.offsets.get(f"{topic}:{partition}", -1)

    def hold(self, topic: str, partition: int, offset: int) -> None:
        self.offsets[f"{topic}:{partition}"] = offset
        self.held += 1

    def saved_now(self) -> None:
        """The checkpoint of the current offsets is acknowledged."""
        self.saved = dict(self.offsets)
        self.held = 0


class Outbox:
    """One kafka-python producer for every output; ``confirm`` returns once the broker has all of them."""

    def __init__(self, producer: KafkaProducer) -> None:
        self.producer = producer
        self._pending: list[Any] = []
        self._counters: dict[str, Any] = {}
        self.failure: BaseException | None = None  # the first send the broker refused, if any

    def send(self, topic: str, key: str, record: object) -> None:
        """``record`` in Avro on ``topic`` under ``key`` (the agents' ``send``)."""
        self.send_raw(topic, codec.encode_key(key), codec.encode(record))

    def send_raw(self, topic: str, key: bytes | None, value: bytes) -> None:
        self._pending.append(self.producer.send(topic, key=key, value=value))
        counter = self._counters.get(topic)
        if counter is None:
            counter = self._counters[topic] = metrics.EVENTS_OUT.labels(topic)
        counter.inc()

    def confirm(self) -> int:
        """Wait until the broker acknowledged every send so far; a failed one raises (nothing may be
        checkpointed after it). How many were waited for."""
        if self.failure is not None:  # sticky: once an output is lost, no later checkpoint may cover it
            raise self.failure
        pending, self._pending = self._pending, []
        self.producer.flush()
        for future in pending:
            if future.failed():
                self.failure = future.exception
                raise future.exception
        return len(pending)


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

    def load(self, keys: set[str]) -> dict[str, bytes]:
        """The latest checkpoint of each of ``keys`` on the topic (read to its end); absent keys have none."""
        found: dict[str, bytes] = {}
        for record in kafka_clients.read_to_end(self.settings, self.topic):
            key = codec.decode_key(record.key)
            if key in keys:
                if record.value:
                    found[key] = record.value
                else:
                    found.pop(key, None)  # a tombstone
        return found

    def write(self, key: str, value: bytes) -> None:
        """Queue a checkpoint; ``outbox.confirm`` waits for it like any output."""
        self.outbox.send_raw(self.topic, codec.encode_key(key), value)

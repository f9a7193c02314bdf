"""End offsets and a group's committed offsets from kafka-python clients of their own: what the health check of
either worker engine compares with what the worker read (streams.agents.monitor, streams.engine.health)."""

from __future__ import annotations

import contextlib
from typing import Any

from kafka.errors import KafkaError
from kafka.structs import TopicPartition

from streams import kafka_clients
from streams.errors import BrokerUnavailable
from streams.health import Partition
from streams.settings import Settings

STALLED_EXIT = 75  # EX_TEMPFAIL: try again
CHECK_EVERY_S = 5.0


class Offsets:
    """End offsets of topics and a group's committed offsets, from clients of its own (blocking: run it in an
    executor). A failed call drops the clients; the next one makes new ones."""

    def __init__(self, settings: Settings, topics: tuple[str, ...]) -> None:
        self.settings, self.topics = settings, topics
        self._consumer: Any = None
        self._admin: Any = None

    def fetch(self) -> tuple[dict[Partition, int], dict[Partition, int]]:
        try:
            if self._consumer is None:
                self._consumer = kafka_clients.consumer(self.settings, request_timeout_ms=5000)
                self._admin = kafka_clients.admin(self.settings, request_timeout_ms=5000)
            tps = [TopicPartition(topic, p) for topic in self.topics
                   for p in sorted(self._consumer.partitions_for_topic(topic) or ())]
            ends = {(tp.topic, tp.partition): offset for tp, offset in self._consumer.end_offsets(tps).items()}
            committed = {(tp.topic, tp.partition): meta.offset
                         for tp, meta in self._group_offsets().items()
                         if tp.topic in self.topics and meta.offset >= 0}
            return ends, committed
        except (KafkaError, OSError, BrokerUnavailable):
            self.close()
            raise

    def _group_offsets(self) -> dict[Any, Any]:
        found = self._admin.list_group_offsets({self.settings.app_id: None})
        return dict(found.get(self.settings.app_id, {}))

    def close(self) -> None:
        for client in (self._consumer, self._admin):
            if client is not None:
                with contextlib.suppress(KafkaError, OSError):
                    client.close()
        self._consumer = self._admin = None

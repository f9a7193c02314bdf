"""End offsets and a group's committed offsets from kafka-python clients of their own: what the health check of
either worker engine compares with what the worker read (streams.agents.monitor, streams.engine.health)."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from typing import Any

from kafka.errors import KafkaError
from kafka.structs import TopicPartition

from streams import kafka_clients, metrics
from streams.errors import BrokerUnavailable
from streams.health import Health, Partition, Verdict
from streams.settings import Settings

log = logging.getLogger(__name__)
STALLED_EXIT = 75  # EX_TEMPFAIL: try again
CHECK_EVERY_S = 5.0


def act_on(verdict: Verdict, health: Health, stall_after_s: float) -> None:
    """A health check's verdict made visible (consumer lag, last progress, ``/livez`` and ``/readyz``); a worker
    that is not live ends itself with ``STALLED_EXIT``: its checkpoints are in Kafka, so a restart resumes."""
    metrics.CONSUMER_LAG.clear()
    for (topic, partition), lag in verdict.lag.items():
        metrics.CONSUMER_LAG.labels(topic, str(partition)).set(lag)
    if verdict.live is None and not any(verdict.lag.values()):
        metrics.LAST_PROGRESS.set(time.time())
    health.set(verdict.live, verdict.ready)
    if verdict.live is not None and math.isfinite(stall_after_s):
        log.error("no progress: %s; exiting (code %d) so that the worker restarts and resumes from its "
                  "checkpoints", verdict.live, STALLED_EXIT)
        logging.shutdown()
        os._exit(STALLED_EXIT)  # the client is wedged: a clean stop would wait on it


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

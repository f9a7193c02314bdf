"""The predictor's live node view on a worker: node-scores and blacklist-snapshot read from their start by a
consumer outside any group (every predicting worker needs every node, whichever partitions it holds), applied
to the predictor's ``ClusterView`` by ``streams.core.prediction.published.PublishedView``.

The loop polls it without waiting, at most every ``EVERY_S`` and ``POLL_MAX`` records at a time, so the view
costs the loop little in a catch-up (when the ranking publishes thousands of node scores per period in a
burst, and the view follows a little behind) and follows the ranking within ``EVERY_S`` in live operation.
It is not part of any checkpoint: after a restart it is read again from the topics (node-scores and
blacklist-snapshot are compacted: each node's latest score, the latest blacklist). Predictions made against it
depend on when its records arrived relative to the task events, so a node-aware predictor's flags on a worker
may differ from run to run (the statistics path does not read it).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kafka.errors import KafkaError
from kafka.structs import TopicPartition

from streams import kafka_clients
from streams.core.prediction.base import ClusterView
from streams.core.prediction.published import PublishedView
from streams.serde import codec
from streams.serde import topics as registry
from streams.settings import Settings

log = logging.getLogger(__name__)
TOPICS = (registry.NODE_SCORES.name, registry.BLACKLIST_SNAPSHOT.name)
POLL_MAX = 1000
EVERY_S = 0.25


class NodeView:
    """A group-less consumer of what the ranking publishes, feeding ``view`` (the predictor's)."""

    def __init__(self, settings: Settings, view: ClusterView) -> None:
        self.published = PublishedView(view, settings.cluster_id)
        self.view = view
        self.consumer: Any = kafka_clients.consumer(settings, group_id=None,
                                                    client_id=f"{settings.app_id}-node-view")
        self.assigned = False
        self.listed_version = 0
        self._next = 0.0  # monotonic time of the next poll

    def assign(self) -> bool:
        """Read every partition of the topics from its start (once they exist)."""
        parts = [TopicPartition(topic, p) for topic in TOPICS
                 for p in sorted(self.consumer.partitions_for_topic(topic) or ())]
        if {tp.topic for tp in parts} != set(TOPICS):
            return False
        self.consumer.assign(parts)
        self.consumer.seek_to_beginning(*parts)
        self.assigned = True
        return True

    def poll(self) -> int:
        """Apply what has arrived, without waiting (nothing before ``EVERY_S`` since the last poll); how many
        records."""
        now = time.monotonic()
        if now < self._next:
            return 0
        self._next = now + EVERY_S
        try:
            if not self.assigned and not self.assign():
                return 0
            polled = self.consumer.poll(timeout_ms=0, max_records=POLL_MAX)
        except KafkaError as exc:  # the view waits; the predictions go on with what it holds
            log.debug("node view: %s", exc)
            return 0
        count = 0
        for records in polled.values():
            for raw in records:
                try:
                    self.published.take(codec.decode(raw.value))
                except codec.DecodeError:
                    continue  # the ranking's own records: nothing else is expected here
                count += 1
        if self.published.version != self.listed_version:
            self.listed_version = self.published.version
            log.info("node view: blacklist v%d lists %s; %d nodes with samples in the window", self.listed_version,
                     sorted(self.view.listed), len(self.view.node_mean_z))
        return count

    def close(self) -> None:
        self.consumer.close(autocommit=False)

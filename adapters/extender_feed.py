"""The extender's live node status from Kafka: a thin kafka-python consumer of ``task-events`` (what starts and ends
where) and ``node-samples`` (the nodes' z-values) into a ``LiveStatus`` (``adapters.extender``), whose state file it
saves as it goes (``laggard advise serve --kafka --state``)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from adapters.base import ApplyError
from adapters.extender import ERRORS, LiveStatus

log = logging.getLogger("laggard.adapters")


class StatusFeed:
    """A thin kafka-python consumer keeping a ``LiveStatus`` current from ``task-events`` and ``node-samples``.

    ``start`` connects and assigns every partition of both topics (resuming from the saved offsets, else from
    the beginning, so the tasks running now are known), then a daemon thread polls until ``stop``; the state
    file, when given, is replaced every ``save_every_s`` while records come, and once more at the stop."""

    def __init__(self, settings: Any, live: LiveStatus, state_path: Path | None = None, save_every_s: float = 10.0,
                 health: Any = None) -> None:  # fmt: skip
        self.settings, self.live, self.state_path, self.save_every_s = settings, live, state_path, save_every_s
        self.health = health
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Any = None
        self._unsaved = False  # the last save failed (logged once until one works)

    def start(self) -> None:
        from kafka import TopicPartition

        from streams import kafka_clients
        from streams.errors import TopicMissing
        from streams.serde.topics import NODE_SAMPLES, TASK_EVENTS

        consumer = kafka_clients.consumer(self.settings, client_id="laggard-extender")
        partitions = []
        for topic in (TASK_EVENTS.name, NODE_SAMPLES.name):
            found = consumer.partitions_for_topic(topic)
            if not found:
                kafka_clients.close_quietly(consumer)  # the one line below, not kafka-python's cancelled refresh
                raise TopicMissing(f"topic {topic} does not exist at {self.settings.bootstrap_servers} "
                                   "(start the worker, or `laggard topics create`)")
            partitions += [TopicPartition(topic, p) for p in sorted(found)]
        consumer.assign(partitions)
        for tp in partitions:
            saved = self.live.offsets.get(f"{tp.topic}:{tp.partition}")
            if saved is not None:
                consumer.seek(tp, saved)
            else:
                consumer.seek_to_beginning(tp)
        self._consumer = consumer
        self._thread = threading.Thread(target=self._run, name="laggard-extender-feed", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import time

        from streams import kafka_clients, metrics
        from streams.serde import codec

        saved_at = time.monotonic()
        if self.health is not None:
            self.health.set(None, None)
        while not self._stop.is_set():
            for records in self._consumer.poll(timeout_ms=500).values():
                for record in records:
                    metrics.EVENTS_IN.labels(record.topic, "adapter-extender").inc()
                    try:
                        event = codec.decode(record.value)
                    except codec.DecodeError:
                        ERRORS.labels("undecodable").inc()
                        event = None
                    self.live.apply(event, f"{record.topic}:{record.partition}", record.offset + 1)
            if self.health is not None:
                self.health.beat()
            if self.state_path is not None and self.live.changed and time.monotonic() - saved_at >= self.save_every_s:
                self._save()
                saved_at = time.monotonic()
        kafka_clients.close_quietly(self._consumer)
        if self.state_path is not None:
            self._save()

    def _save(self) -> None:
        """Save the state; a save that fails (a full disk, a path made unwritable) is logged once until one works
        and counted, and the feed goes on: node status stays live, only a restart would start colder."""
        assert self.state_path is not None
        try:
            self.live.save(self.state_path)
        except (ApplyError, OSError) as exc:
            self.live.changed = True  # still to save: the next poll tries again, records or not
            ERRORS.labels("state-unsaved").inc()
            if not self._unsaved:
                log.warning("cannot save the extender's state to %s (%s); node status stays live, retrying at each "
                            "save", self.state_path, exc)
            self._unsaved = True
            return
        if self._unsaved:
            log.warning("the extender's state is saved to %s again", self.state_path)
        self._unsaved = False

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

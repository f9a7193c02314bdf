"""kafka-python clients configured from the one settings object, and topic creation.

Every part that talks to Kafka outside Faust (replayers, adapters, `laggard topics`, tests, the bench) builds its
clients here, so bootstrap and security settings are applied the same way everywhere.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

from kafka.admin import NewTopic
from kafka.errors import KafkaError, KafkaTimeoutError, TopicAlreadyExistsError

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from streams.errors import BrokerUnavailable
from streams.serde.topics import TOPICS, Topic
from streams.settings import Settings

log = logging.getLogger(__name__)


def probe(bootstrap: str, timeout_s: float = 3.0) -> None:
    """Fail fast (one line, not a 30 s client timeout) when no bootstrap address accepts a connection."""
    deadline = time.monotonic() + timeout_s
    while True:
        for address in bootstrap.split(","):
            host, _, port = address.strip().rpartition(":")
            try:
                with socket.create_connection((host or "127.0.0.1", int(port)), timeout=1.0):
                    return
            except (OSError, ValueError):
                continue
        if time.monotonic() >= deadline:
            raise BrokerUnavailable(bootstrap, "connection refused")
        time.sleep(0.3)


def _common(settings: Settings) -> dict[str, Any]:
    probe(settings.bootstrap_servers)
    return {"bootstrap_servers": settings.bootstrap_servers.split(","), **settings.kafka_security()}


def producer(settings: Settings, **overrides: Any) -> KafkaProducer:
    """A producer for laggard's byte keys and values; batched, acks=all, idempotent retries."""
    options = {"acks": "all", "linger_ms": 20, "batch_size": 256 * 1024, "retries": 5, **overrides}
    try:
        return KafkaProducer(**_common(settings), **options)
    except KafkaTimeoutError as exc:
        raise BrokerUnavailable(settings.bootstrap_servers) from exc


def consumer(settings: Settings, *topics: str, **overrides: Any) -> KafkaConsumer:
    """A consumer of raw bytes; without ``group_id`` it commits nothing."""
    options = {"auto_offset_reset": "earliest", "enable_auto_commit": False, **overrides}
    try:
        return KafkaConsumer(*topics, **_common(settings), **options)
    except KafkaTimeoutError as exc:
        raise BrokerUnavailable(settings.bootstrap_servers) from exc


def admin(settings: Settings, **overrides: Any) -> KafkaAdminClient:
    try:
        return KafkaAdminClient(**_common(settings), **overrides)
    except KafkaTimeoutError as exc:
        raise BrokerUnavailable(settings.bootstrap_servers) from exc


def wait_for_broker(settings: Settings, timeout_s: float = 30.0) -> None:
    """Block until the broker answers a metadata request, or raise BrokerUnavailable."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            client = admin(settings, request_timeout_ms=5000)
            try:
                client.list_topics()
                return
            finally:
                client.close()
        except (BrokerUnavailable, KafkaError, OSError) as exc:
            last = str(exc)
            time.sleep(0.5)
    raise BrokerUnavailable(settings.bootstrap_servers, last)


def create_topics(settings: Settings, topics: tuple[Topic, ...] = TOPICS) -> dict[str, str]:
    """Create laggard's topics; existing ones are left as they are. Returns name -> 'created' | 'exists'."""
    client = admin(settings)
    try:
        existing = set(client.list_topics())
        result = {topic.name: "exists" for topic in topics if topic.name in existing}
        wanted = [
            NewTopic(
                name=topic.name,
                num_partitions=topic.partitions or settings.topic_partitions,
                replication_factor=settings.replication_factor,
                topic_configs=topic.config(),
            )
            for topic in topics
            if topic.name not in existing
        ]
        for new in wanted:
            try:
                client.create_topics([new])
                result[new.name] = "created"
            except TopicAlreadyExistsError:  # another process won the race
                result[new.name] = "exists"
        return result
    finally:
        client.close()

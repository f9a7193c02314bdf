"""kafka-python clients configured from the one settings object, and topic creation.

Every part that talks to Kafka outside Faust (replayers, adapters, `laggard topics`, tests, the bench) builds its
clients here, so bootstrap and security settings are applied the same way everywhere.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError, KafkaTimeoutError, TopicAlreadyExistsError
from kafka.structs import TopicPartition

from streams.core.events import BlacklistSnapshot
from streams.errors import BrokerUnavailable, TopicMissing
from streams.serde import codec
from streams.serde.topics import BLACKLIST_SNAPSHOT, TOPICS, Topic
from streams.settings import Settings

log = logging.getLogger(__name__)
KafkaRecord = Any  # kafka-python's ConsumerRecord: a namedtuple the library does not type


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
    """Block until the broker answers a metadata request, or raise BrokerUnavailable.

    Nothing listening at all fails at once (``probe``); a broker that accepts connections gets ``timeout_s``.
    """
    probe(settings.bootstrap_servers)
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
        except (KafkaError, OSError) as exc:
            last = str(exc)
            time.sleep(0.5)
        except BrokerUnavailable as exc:
            raise exc from None
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


def read_to_end(settings: Settings, topic: str, *, missing_ok: bool = True, timeout_s: float | None = None,
                poll_timeout_s: float = 0.5) -> Iterator[KafkaRecord]:
    """Every record now on ``topic`` (all partitions, from the beginning), then stop.

    A topic that does not exist holds nothing (``missing_ok``) or raises TopicMissing. Not at the end within
    ``timeout_s`` (default: the setting ``snapshot_read_timeout_s``) raises BrokerUnavailable.
    """
    client = consumer(settings, consumer_timeout_ms=1000)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(client.partitions_for_topic(topic) or ())]
        if not partitions:
            if missing_ok:
                return
            raise TopicMissing(f"topic {topic} does not exist at {settings.bootstrap_servers} "
                               "(create it with `laggard topics create`)")
        client.assign(partitions)
        client.seek_to_beginning(*partitions)
        end = client.end_offsets(partitions)
        deadline = time.monotonic() + (settings.snapshot_read_timeout_s if timeout_s is None else timeout_s)
        while any(client.position(tp) < end[tp] for tp in partitions):
            if time.monotonic() > deadline:
                raise BrokerUnavailable(settings.bootstrap_servers, f"{topic} could not be read to its end")
            for records in client.poll(timeout_ms=int(poll_timeout_s * 1000)).values():
                yield from records
    finally:
        client.close()


def decode_snapshot(record: KafkaRecord) -> BlacklistSnapshot | None:
    """The BlacklistSnapshot in a record; None, silently, for anything else."""
    try:
        snapshot = codec.decode(record.value)
    except codec.DecodeError:
        return None
    return snapshot if isinstance(snapshot, BlacklistSnapshot) else None


def latest_snapshot(settings: Settings, cluster_id: str | None = None, *, missing_ok: bool = True,
                    decode: Callable[[KafkaRecord], BlacklistSnapshot | None] = decode_snapshot,
                    poll_timeout_s: float = 0.5) -> BlacklistSnapshot | None:
    """The newest BlacklistSnapshot of ``cluster_id`` (default: the settings') on ``blacklist-snapshot``: what
    the adapters resynchronise from and the ranking continues after. ``decode`` may count and report bad
    records; see ``read_to_end`` for the rest."""
    cluster = settings.cluster_id if cluster_id is None else cluster_id
    latest: BlacklistSnapshot | None = None
    for record in read_to_end(settings, BLACKLIST_SNAPSHOT.name, missing_ok=missing_ok,
                              poll_timeout_s=poll_timeout_s):
        snapshot = decode(record)
        if snapshot is not None and snapshot.cluster_id == cluster and (
            latest is None or snapshot.version >= latest.version
        ):
            latest = snapshot
    return latest


def topic_partitions(settings: Settings, topic: str) -> int | None:
    """Partition count of ``topic``, None when it does not exist."""
    client = consumer(settings)
    try:
        found = client.partitions_for_topic(topic)
        return len(found) if found else None
    finally:
        client.close()

"""kafka-python clients configured from the one settings object, and topic creation (TLS and SASL are checked
first by ``streams.kafka_security``).

Every part that talks to Kafka outside Faust (replayers, adapters, `laggard topics`, tests, the bench) builds its
clients here, so bootstrap and security settings are applied the same way everywhere.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError, KafkaTimeoutError, TopicAlreadyExistsError
from kafka.structs import TopicPartition

from streams.core.events import BlacklistSnapshot
from streams.errors import BrokerSilent, BrokerUnavailable, TopicMissing
from streams.kafka_security import check_security
from streams.serde import codec
from streams.serde.topics import BLACKLIST_SNAPSHOT, CO_PARTITIONED, TOPICS, Topic
from streams.settings import Settings, address_problem, host_port

log = logging.getLogger(__name__)
KafkaRecord = Any  # kafka-python's ConsumerRecord: a namedtuple the library does not type


_quiet = threading.Lock()
_quiet_closers = 0  # clients being closed quietly now, in any thread
_quiet_level = logging.NOTSET  # the kafka logger's level before the first of them


def close_quietly(client: Any) -> None:
    """Close a client on purpose without kafka-python's ERROR for the requests the close cancels ("Metadata refresh:
    failed Cancelled"): an operator reading a one-line error must not get a second, spurious one (seen in CI).

    The kafka logger is raised while any such close runs and restored when the last one ends: two threads closing at
    once (the adapter's and the extender's consumers) must not leave it silenced for good, as saving and restoring
    the level per call would when the closes overlap."""
    global _quiet_closers, _quiet_level
    logger = logging.getLogger("kafka")
    with _quiet:
        if _quiet_closers == 0:
            _quiet_level = logger.level
            logger.setLevel(logging.CRITICAL)
        _quiet_closers += 1
    try:
        client.close()
    finally:
        with _quiet:
            _quiet_closers -= 1
            if _quiet_closers == 0:
                logger.setLevel(_quiet_level)


def probe(bootstrap: str, timeout_s: float = 3.0) -> None:
    """Fail fast (one line, not a 30 s client timeout) when no bootstrap address accepts a connection."""
    problem = address_problem(bootstrap)  # LAGGARD_BOOTSTRAP_SERVERS=kafka:99999 read as "connection refused"
    if problem:
        raise BrokerUnavailable(bootstrap, problem)
    deadline = time.monotonic() + timeout_s
    while True:
        why: list[str] = []  # this pass's reason per address: a name that does not resolve is no refusal
        for address in bootstrap.split(","):
            host, port = host_port(address)
            try:
                with socket.create_connection((host, port), timeout=1.0):
                    return
            except socket.gaierror as exc:
                why.append(f"cannot resolve {host!r} ({exc.strerror})")
            except TimeoutError:
                why.append(f"{address.strip()}: connection timed out")
            except (OSError, ValueError):
                why.append("connection refused" if len(bootstrap.split(",")) == 1 else
                           f"{address.strip()}: connection refused")
        if time.monotonic() >= deadline:
            raise BrokerUnavailable(bootstrap, "; ".join(why))
        time.sleep(0.3)


def _common(settings: Settings) -> dict[str, Any]:
    probe(settings.bootstrap_servers)
    check_security(settings)
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


def await_partitions(client: KafkaConsumer, topics: tuple[str, ...], timeout_s: float = 30.0) -> list[str]:
    """Fetch the cluster's metadata until it names every partition of ``topics``; return those still unknown.

    Call it after ``subscribe`` and before the first ``poll``: kafka-python's group leader assigns from the
    partitions its metadata holds when the join completes, and rejoins when the metadata of the subscribed topics
    changes after that. Joined before its first metadata, the leader assigns nothing of those topics and counts on
    the rejoin; CI once saw that rejoin never come (stop 28: the bench's worker held nothing until its stall
    watchdog ended it after 120 s; dpkp/kafka-python#2377 reports the same). Fetched before ``subscribe``, the
    partitions are known but the coordinator's record of them is not, and the first metadata after the join
    triggers a second rebalance (CI: a prediction worker assigned twice). Fetched after ``subscribe``, both are
    in place before the join: one assignment, of every partition. ``topics`` fetches every topic's metadata,
    which creates none."""
    deadline = time.monotonic() + timeout_s
    while True:
        client.topics()  # a blocking fetch; the coordinator hears it as it hears every metadata update
        missing = [topic for topic in topics if not client.partitions_for_topic(topic)]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(0.5)


ADMIN_BOOTSTRAP_S = 10.0  # kafka-python's default, 30 s, is what a port held by another service took to fail


def admin(settings: Settings, **overrides: Any) -> KafkaAdminClient:
    options = {"bootstrap_timeout_ms": int(ADMIN_BOOTSTRAP_S * 1000), **overrides}
    try:
        return KafkaAdminClient(**_common(settings), **options)
    except KafkaTimeoutError as exc:  # the port accepted connections (``probe``): something answered, not Kafka
        # A TLS or SASL listener also stays silent to a plaintext client: say so when the client spoke plaintext
        listener = (", or a TLS/SASL listener: LAGGARD_SECURITY_PROTOCOL" if settings.security_protocol == "PLAINTEXT"
                    else "")
        raise BrokerSilent(settings.bootstrap_servers, f"it accepts connections but answered no Kafka request "
                           f"within {options['bootstrap_timeout_ms'] / 1000:.0f} s (another service on that "
                           f"port{listener}?)") from exc


def wait_for_broker(settings: Settings, timeout_s: float = 30.0) -> None:
    """Block until the broker answers a metadata request, or raise BrokerUnavailable.

    Nothing listening at all fails at once (``probe``); a broker that accepts connections gets ``timeout_s``.
    """
    probe(settings.bootstrap_servers)
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        left_ms = max(1000, int((deadline - time.monotonic()) * 1000))  # a broker still starting gets all of it
        try:
            client = admin(settings, request_timeout_ms=5000, bootstrap_timeout_ms=left_ms)
            try:
                client.list_topics()
                return
            finally:
                client.close()
        except (KafkaError, OSError) as exc:
            last = str(exc)
            time.sleep(0.5)
        except BrokerUnavailable as exc:  # refused, or silent for the whole wait (BrokerSilent: another service)
            raise exc from None
    raise BrokerUnavailable(settings.bootstrap_servers, last)


def create_topics(settings: Settings, topics: tuple[Topic, ...] = TOPICS) -> dict[str, str]:
    """Create laggard's topics; existing ones are left as they are. Returns name -> 'created' | 'exists'.

    A missing co-partitioned topic (``CO_PARTITIONED``) takes the partition count of one that exists, not
    ``topic_partitions``: a producer that wrote task-events first (auto-created with the broker's default) must not
    leave job-events with another count, or a job's two streams would never meet."""
    client = admin(settings)
    try:
        existing = set(client.list_topics())
        result = {topic.name: "exists" for topic in topics if topic.name in existing}
        counts = _partition_counts(client, [t.name for t in CO_PARTITIONED if t.name in existing])
        alike = max(counts.values(), default=settings.topic_partitions)
        wanted = [
            NewTopic(
                name=topic.name,
                num_partitions=topic.partitions or (alike if topic in CO_PARTITIONED else settings.topic_partitions),
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


def _partition_counts(client: KafkaAdminClient, names: list[str]) -> dict[str, int]:
    """Topic name -> its partition count, for the topics of ``names`` the broker describes."""
    if not names:
        return {}
    return {t["name"]: len(t["partitions"]) for t in client.describe_topics(names) if t.get("partitions")}


def copartitioning_problem(settings: Settings, known: dict[str, int] | None = None) -> str | None:
    """One line saying why the co-partitioned topics cannot be read together (their partition counts differ),
    or None when they can (or some do not exist yet). ``known``: counts the caller read already (any topics)."""
    names = [topic.name for topic in CO_PARTITIONED]
    counts = partition_counts(settings, names) if known is None else {n: known[n] for n in names if n in known}
    if len(set(counts.values())) <= 1:
        return None
    found = " and ".join(f"{name} has {count} partition{'s' * (count != 1)}" for name, count in counts.items())
    return (f"{found}: a job's task events and job events must be on the same partition number, so both topics "
            "need the same count (delete one of them, e.g. `laggard topics delete job-events`; laggard creates it "
            "again with the other's count)")


def partition_counts(settings: Settings, names: list[str]) -> dict[str, int]:
    """Topic name -> its partition count on the broker (topics that do not exist are left out)."""
    client = admin(settings)
    try:
        return _partition_counts(client, names)
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
                    poll_timeout_s: float = 0.5, timeout_s: float | None = None) -> BlacklistSnapshot | None:
    """The newest BlacklistSnapshot of ``cluster_id`` (default: the settings') on ``blacklist-snapshot``: what
    the adapters resynchronise from and the ranking continues after. ``decode`` may count and report bad
    records; see ``read_to_end`` for the rest."""
    cluster = settings.cluster_id if cluster_id is None else cluster_id
    latest: BlacklistSnapshot | None = None
    for record in read_to_end(settings, BLACKLIST_SNAPSHOT.name, missing_ok=missing_ok,
                              poll_timeout_s=poll_timeout_s, timeout_s=timeout_s):
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

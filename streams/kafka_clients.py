"""kafka-python clients configured from the one settings object, and topic creation.

Every part that talks to Kafka outside Faust (replayers, adapters, `laggard topics`, tests, the bench) builds its
clients here, so bootstrap and security settings are applied the same way everywhere.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError, KafkaTimeoutError, TopicAlreadyExistsError
from kafka.structs import TopicPartition

from streams.core.events import BlacklistSnapshot
from streams.errors import BrokerRefused, BrokerSilent, BrokerUnavailable, TopicMissing
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


# --- TLS and SASL: a refusal is one line at once, not a client retrying until its timeout ----------------------
SECURITY_CHECK_S = 8.0
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # with a username and password, in both libraries
_checked: set[tuple[Any, ...]] = set()


def tls_context(settings: Settings) -> ssl.SSLContext:
    """The TLS context of the settings (CA file, client certificate): the one Faust's clients use and the one
    ``check_security`` tries. A file that cannot be read names its setting."""
    try:
        context = ssl.create_default_context(cafile=settings.ssl_cafile)
    except (OSError, ssl.SSLError) as exc:
        raise BrokerRefused(settings.bootstrap_servers,
                            f"LAGGARD_SSL_CAFILE={settings.ssl_cafile}: {_reason(exc)}") from None
    if settings.ssl_certfile:
        try:
            context.load_cert_chain(settings.ssl_certfile, settings.ssl_keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise BrokerRefused(settings.bootstrap_servers, f"LAGGARD_SSL_CERTFILE={settings.ssl_certfile} / "
                                f"LAGGARD_SSL_KEYFILE={settings.ssl_keyfile}: {_reason(exc)}") from None
    return context


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "verify_message", None) or getattr(exc, "strerror", None) or
               getattr(exc, "reason", None) or exc)


def check_security(settings: Settings, timeout_s: float = SECURITY_CHECK_S) -> None:
    """With TLS or SASL: shake hands with the broker once per process and raise BrokerRefused, in one line, when
    it presents a certificate the settings do not trust or refuses the SASL user. kafka-python (like aiokafka)
    only logs these and retries until its bootstrap timeout, to end with "unable to bootstrap"."""
    protocol = settings.security_protocol
    key = (settings.bootstrap_servers, protocol, settings.sasl_mechanism, settings.sasl_username,
           settings.sasl_password, settings.ssl_cafile, settings.ssl_certfile, settings.ssl_keyfile)
    if protocol == "PLAINTEXT" or key in _checked:
        return
    if protocol.startswith("SASL"):
        missing = [f"LAGGARD_SASL_{name.upper()}" for name in ("mechanism", "username", "password")
                   if not getattr(settings, f"sasl_{name}")]
        if missing:
            raise BrokerRefused(settings.bootstrap_servers, f"{protocol} needs {', '.join(missing)}")
        if settings.sasl_mechanism not in SASL_MECHANISMS:
            raise BrokerRefused(settings.bootstrap_servers, f"LAGGARD_SASL_MECHANISM={settings.sasl_mechanism}: "
                                f"laggard speaks {', '.join(SASL_MECHANISMS)}")
    # Remembered only once the broker let us in: an unreachable broker is the clients' own wait to report.
    if (not protocol.endswith("SSL") or _check_tls(settings, timeout_s)) and (
            not protocol.startswith("SASL") or _check_sasl(settings, timeout_s)):
        _checked.add(key)


def _check_tls(settings: Settings, timeout_s: float) -> bool:
    """True once a bootstrap address completed a TLS handshake; raises when one refused it."""
    context = tls_context(settings)
    for address in settings.bootstrap_servers.split(","):
        host, port = host_port(address)
        try:
            with socket.create_connection((host, port), timeout=timeout_s) as raw:
                context.wrap_socket(raw, server_hostname=host).close()
                return True
        except ssl.SSLCertVerificationError as exc:
            raise BrokerRefused(settings.bootstrap_servers, f"the TLS certificate of {address} is not trusted "
                                f"({exc.verify_message}); set LAGGARD_SSL_CAFILE to the CA that signed it") from None
        except ssl.SSLError as exc:
            raise BrokerRefused(settings.bootstrap_servers, f"TLS handshake with {address} failed ({_reason(exc)}); "
                                "is it the broker's SSL or SASL_SSL listener?") from None
        except (OSError, ValueError):
            continue  # not reachable: the next address, and the client's own wait after that
    return False


def _check_sasl(settings: Settings, timeout_s: float) -> bool:
    """One SASL handshake with aiokafka (the library of Faust's clients), which raises the broker's refusal at
    once; run in a thread of its own, as this may be called from within the worker's event loop."""
    import asyncio
    import threading

    from aiokafka.conn import create_conn
    from aiokafka.errors import BrokerResponseError, SaslAuthenticationFailed
    from aiokafka.errors import KafkaError as AioKafkaError

    context = tls_context(settings) if settings.security_protocol == "SASL_SSL" else None
    outcome: list[BaseException | None] = []

    async def handshake(host: str, port: int) -> None:
        conn = await create_conn(host, port, request_timeout_ms=int(timeout_s * 1000), ssl_context=context,
                                 security_protocol=settings.security_protocol,
                                 sasl_mechanism=settings.sasl_mechanism, sasl_plain_username=settings.sasl_username,
                                 sasl_plain_password=settings.sasl_password)
        conn.close()

    def attempt() -> None:
        for address in settings.bootstrap_servers.split(","):
            host, port = host_port(address)
            try:
                asyncio.run(asyncio.wait_for(handshake(host, port), timeout_s))
                outcome.append(None)
                return
            except (AioKafkaError, OSError, ValueError, TimeoutError) as exc:
                outcome.append(exc)

    thread = threading.Thread(target=attempt, name="laggard-sasl-check", daemon=True)
    thread.start()
    thread.join(timeout_s * len(settings.bootstrap_servers.split(",")) + 1)
    refused = [exc for exc in outcome if isinstance(exc, BrokerResponseError)]
    if None in outcome or not refused:
        return None in outcome  # in; or not reachable at all, which the client's own wait says
    who = f"SASL user {settings.sasl_username!r} ({settings.sasl_mechanism})"
    why = str(refused[-1]).split(": ", 1)[-1]
    if isinstance(refused[-1], SaslAuthenticationFailed):
        raise BrokerRefused(settings.bootstrap_servers, f"{settings.bootstrap_servers} refused {who}: {why}; check "
                            "LAGGARD_SASL_USERNAME and LAGGARD_SASL_PASSWORD")
    raise BrokerRefused(settings.bootstrap_servers, f"the SASL handshake of {who} with {settings.bootstrap_servers} "
                        f"failed ({type(refused[-1]).__name__}): is it a {settings.security_protocol} listener that "
                        f"enables {settings.sasl_mechanism}?")


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
        raise BrokerSilent(settings.bootstrap_servers, f"it accepts connections but answered no Kafka request "
                           f"within {options['bootstrap_timeout_ms'] / 1000:.0f} s (another service on that "
                           "port?)") from exc


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
        except BrokerSilent as exc:
            raise exc from None  # silent for the whole wait: another service on the port
        except (KafkaError, OSError) as exc:
            last = str(exc)
            time.sleep(0.5)
        except BrokerUnavailable as exc:
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

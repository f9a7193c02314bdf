"""``make_app(settings)``: the only place that wires Faust. Nothing happens at import time.

Topology (SPEC 2-3):

    task-events + job-events --normalise_tasks--> node-samples (by node)
        (N partitions, by job)                 \\-> ranking-feed (1 partition: samples + progress)
                             --predict_stragglers--> straggler-predictions (by job)
    ranking-feed --rank_nodes--> node-scores, blacklist-deltas, blacklist-snapshot
    anything undecodable or invalid --> dead-letters

The normalising stage scales out with the partitions of ``task-events``; the ranking is one agent for the
whole cluster (it needs every node), fed through a single-partition topic. Both keep their state in Faust tables
backed by changelog topics (see ``streams.agents.checkpoint``). Values are raw bytes on the Faust side and
decoded by ``streams.serde``, so a bad record becomes a dead letter instead of a crashed agent.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import faust
from faust.types import TopicT
from faust.types.auth import CredentialsT

from streams import kafka_clients, kafka_security
from streams.agents.commit import CommitSafeApp
from streams.agents.envelope import CHECKPOINT_MAX_BYTES
from streams.config import ranking_config
from streams.health import Health, ReadProgress
from streams.serde import topics as registry
from streams.settings import Settings
from streams.wiring import CheckpointTable, Wiring

log = logging.getLogger(__name__)
PRODUCER_LINGER_S = 0.01
PRODUCER_BATCH_BYTES = 256 * 1024


def prepare_data_dir(settings: Settings) -> Path:
    """Create Faust's data directory with its parents (Faust makes only the last level), wherever the worker
    starts; return it."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return settings.data_dir


def broker_credentials(settings: Settings) -> CredentialsT | None:
    """Faust's credentials object for the security settings (None for PLAINTEXT)."""
    protocol = settings.security_protocol
    if protocol == "PLAINTEXT":
        return None
    context = kafka_security.tls_context(settings) if protocol in ("SSL", "SASL_SSL") else None
    if protocol.startswith("SASL"):
        return faust.SASLCredentials(username=settings.sasl_username, password=settings.sasl_password,
                                     mechanism=settings.sasl_mechanism or "PLAIN", ssl_context=context)
    return faust.SSLCredentials(context)


def _raw_topic(app: faust.App, topic: registry.Topic, partitions: int, *more: registry.Topic) -> TopicT:
    names = [topic.name, *(other.name for other in more)]
    return app.topic(*names, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw",
                     partitions=topic.partitions or partitions, internal=False)


def _raw_table(app: faust.App, name: str, partitions: int) -> CheckpointTable:
    # bytes as key and value types make Faust use the raw serializer both when writing and when it rebuilds the
    # table from its changelog after a restart (a schema alone covers only the writing side).
    # A checkpoint is one value holding a stage's whole state (the ranking's grows with the samples in its
    # window): allow values far above Kafka's 1 MB default on the changelog topic.
    return app.Table(name, default=None, key_type=bytes, value_type=bytes, partitions=partitions,
                     extra_topic_configs={"max.message.bytes": str(CHECKPOINT_MAX_BYTES)})


def make_app(settings: Settings, partitions: int, health: Health | None = None) -> faust.App:
    """The Faust application of laggard; ``partitions`` is the partition count of ``task-events``. With
    ``health``, a check every few seconds keeps it current (streams.agents.monitor): what ``/livez`` and
    ``/readyz`` answer."""
    # CommitSafeApp: offsets are committed only once the checkpoints before them are acknowledged, and a partition
    # with nothing committed starts again from its first record after a rebalance (streams.agents.commit).
    app = CommitSafeApp(
        settings.app_id,
        broker=[f"kafka://{address}" for address in settings.bootstrap_servers.split(",")],
        broker_credentials=broker_credentials(settings),
        store=settings.store,
        datadir=str(prepare_data_dir(settings)),
        topic_partitions=partitions,
        topic_replication_factor=settings.replication_factor,
        key_serializer="raw",
        value_serializer="raw",
        consumer_auto_offset_reset="earliest",
        web_enabled=settings.web_port > 0,
        web_port=settings.web_port or 6066,
        web_bind="127.0.0.1",
        producer_max_request_size=CHECKPOINT_MAX_BYTES,
        # The profile showed the worker CPU-bound in the producer: gzip in Python and one small socket write per
        # record. Records are small Avro (checkpoints are zlib-compressed already), so compression buys little;
        # a few ms of linger lets aiokafka fill batches and write each one at once. Durability (acks=all) is
        # unchanged: Faust still flushes the producer before committing offsets.
        producer_compression_type=None,
        producer_linger=PRODUCER_LINGER_S,
        producer_max_batch_size=PRODUCER_BATCH_BYTES,
        stream_wait_empty=False,
        # A worker that died is noticed after this long and its partitions move to the others (Faust's default
        # is 60 s; a heartbeat thread keeps a busy worker alive).
        broker_session_timeout=15.0,
    )
    wiring = wire(app, settings, partitions)
    from streams.agents import monitor, normalise, predict, rank

    if health is not None:
        wiring.progress = ReadProgress(settings.stall_timeout_s or math.inf, settings.ranking_period_s)
        topics = (registry.TASK_EVENTS.name, registry.JOB_EVENTS.name, registry.RANKING_FEED.name)
        monitor.register(app, settings, health, wiring.progress, topics)

    normalise.register(app, wiring)
    rank.register(app, wiring)
    if settings.prediction_method != "off":
        predict.register(app, wiring)
    return app


def wire(app: faust.App, settings: Settings, partitions: int) -> Wiring:
    """Declare every topic and table of laggard on ``app``, in one place."""
    return Wiring(
        settings=settings,
        partitions=partitions,
        ranking_config=ranking_config(settings),
        task_events=_raw_topic(app, registry.TASK_EVENTS, partitions, registry.JOB_EVENTS),
        node_samples=_raw_topic(app, registry.NODE_SAMPLES, partitions),
        ranking_feed=_raw_topic(app, registry.RANKING_FEED, partitions),
        node_scores=_raw_topic(app, registry.NODE_SCORES, partitions),
        node_classes=_raw_topic(app, registry.NODE_CLASSES, partitions),
        blacklist_deltas=_raw_topic(app, registry.BLACKLIST_DELTAS, partitions),
        blacklist_snapshot=_raw_topic(app, registry.BLACKLIST_SNAPSHOT, partitions),
        dead_letters=_raw_topic(app, registry.DEAD_LETTERS, partitions),
        normalise_checkpoints=_raw_table(app, "normalise-checkpoints", partitions),
        rank_checkpoints=_raw_table(app, "rank-checkpoints", 1),
        straggler_predictions=_raw_topic(app, registry.STRAGGLER_PREDICTIONS, partitions),
        predict_checkpoints=_raw_table(app, "predict-checkpoints", partitions),
        published_snapshot=lambda: kafka_clients.latest_snapshot(settings),
    )

"""A worker's consumer joins its group with every input partition named, on a broker whose topics are new.

kafka-python's group leader assigns from the metadata it holds when the join completes; a leader without the
topics' metadata yet assigns none of their partitions and waits for a metadata change to rejoin. CI once saw
that rejoin never come (a bench worker held nothing for 120 s), and, with the metadata fetched before
``subscribe``, a second rebalance right after the first (a prediction worker assigned twice).
``kafka_clients.await_partitions`` is what the direct worker calls between ``subscribe`` and its first poll.
"""

from __future__ import annotations

import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.structs import TopicPartition

from streams import kafka_clients


class Assignments(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.seen: list[set[TopicPartition]] = []
        self.revocations = 0

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.revocations += bool(revoked)

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.seen.append(set(assigned))


SETTLE_S = 8.0  # how long the member is watched after its first assignment (a rejoin came within 1 s in CI's case)


def assignments(bootstrap: str, wait: bool) -> tuple[set[TopicPartition], list[set[TopicPartition]], int]:
    """Every partition of three topics created just now, and what a fresh group's only member was assigned and how
    often it lost partitions in its first ``SETTLE_S`` seconds from its first assignment (before it closed)."""
    suffix = uuid.uuid4().hex[:8]
    topics = (f"join-a-{suffix}", f"join-b-{suffix}", f"join-c-{suffix}")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topics[0], 2, 1), NewTopic(topics[1], 2, 1), NewTopic(topics[2], 1, 1)])
    finally:
        admin.close()
    every = {TopicPartition(t, p) for t, n in zip(topics, (2, 2, 1), strict=True) for p in range(n)}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=f"join-{suffix}", enable_auto_commit=False,
                             partition_assignment_strategy=(RangePartitionAssignor,))
    listener = Assignments()
    try:
        consumer.subscribe(topics=list(topics), listener=listener)
        if wait:
            assert kafka_clients.await_partitions(consumer, topics) == []
        deadline = time.monotonic() + 60
        while not listener.seen and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assert listener.seen, "the consumer joined no group within 60 s"
        settled = time.monotonic() + SETTLE_S
        while time.monotonic() < settled:
            consumer.poll(timeout_ms=200)
        return every, listener.seen, listener.revocations
    finally:
        consumer.close()


def test_a_consumer_that_waits_for_the_metadata_is_assigned_every_partition_once(bootstrap: str) -> None:
    for _ in range(3):
        every, assigned, revocations = assignments(bootstrap, wait=True)
        assert assigned == [every]  # the first join assigns them all, and no rebalance follows
        assert revocations == 0


def test_await_partitions_names_a_topic_the_broker_does_not_have(bootstrap: str) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        # the whole-cluster metadata request it makes does not create topics
        assert kafka_clients.await_partitions(consumer, ("no-such-topic-join",), timeout_s=1.0) == [
            "no-such-topic-join"]
    finally:
        consumer.close()

"""A worker's consumer joins its group with every input partition named, on a broker whose topics are new.

kafka-python's group leader assigns from the metadata it holds when the join completes; a leader without the
topics' metadata yet assigns none of their partitions and waits for a metadata change to rejoin. CI once saw
that rejoin never come (a bench worker held nothing for 120 s). ``kafka_clients.await_partitions`` is what the
direct worker calls before it subscribes.
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

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.seen.append(set(assigned))


def first_assignment(bootstrap: str, wait: bool) -> tuple[set[TopicPartition], set[TopicPartition]]:
    """(every partition of three topics created just now, what a fresh group's only member was assigned first)."""
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
        if wait:
            assert kafka_clients.await_partitions(consumer, topics) == []
        consumer.subscribe(topics=list(topics), listener=listener)
        deadline = time.monotonic() + 60
        while not listener.seen and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assert listener.seen, "the consumer joined no group within 60 s"
        return every, listener.seen[0]
    finally:
        consumer.close()


def test_a_consumer_that_waits_for_the_metadata_is_assigned_every_partition_at_its_first_join(bootstrap: str) -> None:
    for _ in range(3):
        every, first = first_assignment(bootstrap, wait=True)
        assert first == every


def test_await_partitions_names_a_topic_the_broker_does_not_have(bootstrap: str) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        # the whole-cluster metadata request it makes does not create topics
        assert kafka_clients.await_partitions(consumer, ("no-such-topic-join",), timeout_s=1.0) == [
            "no-such-topic-join"]
    finally:
        consumer.close()

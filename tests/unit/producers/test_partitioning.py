"""Every client of laggard's puts a keyed record on the partition kafka-python's ``DefaultPartitioner`` chooses
(the node-scores topic is compacted by key, readers look a node up by its key's partition, and a replay's job
events must land where the workers expect them), and a record without a key on one of the topic's partitions.
One helper (streams.partitioning) behind the batch producer, the replayer's sink and the worker's kafka-python
partitioner, compared here with kafka-python's own partitioner."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.partitioner.default import DefaultPartitioner

from streams import batch_producer, partitioning
from streams.batch_producer import BatchProducer
from streams.engine.keys import RememberingPartitioner
from streams.partitioning import KeyPartitions, partition_of
from streams.settings import Settings

COUNTS = [1, 2, 3, 4, 7, 12]
KEYS: list[bytes | None] = [f"{6_000_000_000 + 7919 * i}".encode() for i in range(300)] + [
    b"", b"node-7", "ジョブ".encode(), b"\x00\xff" * 9, None]


class Cluster:
    """The cluster metadata kafka-python's partitioner asks: one topic of ``count`` partitions."""

    def __init__(self, count: int) -> None:
        self.partitions = set(range(count))

    def topics(self) -> set[str]:
        return {"t"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions


class FakeBrokerOfPartitionCount:
    """Fake ``AIOKafkaProducer`` that only tells the topic's partitions (``COUNT[0]`` of them); nothing is sent."""

    def __init__(self, **options: Any) -> None:
        self._message_accumulator = SimpleNamespace(fail_all=lambda error: None)

    async def start(self) -> None:
        pass

    async def partitions_for(self, topic: str) -> set[int]:
        return set(range(COUNT[0]))

    async def stop(self) -> None:
        pass


COUNT = [1]


@pytest.fixture
def producer_of(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setattr(batch_producer, "AIOKafkaProducer", FakeBrokerOfPartitionCount)
    made: list[BatchProducer] = []

    def make(count: int) -> BatchProducer:
        COUNT[0] = count
        made.append(BatchProducer(Settings(bootstrap_servers="127.0.0.1:9"), batch_bytes=1024, linger_ms=5))
        return made[-1]

    yield make
    for producer in made:
        producer.close()


def _default(key: bytes | None, count: int) -> int:
    return int(DefaultPartitioner().partition("t", None, key, None, None, Cluster(count)))


@pytest.mark.parametrize("count", COUNTS)
def test_every_keyed_record_lands_where_kafka_pythons_default_partitioner_puts_it(count: int, producer_of: Any) -> None:
    keyed = [key for key in KEYS if key is not None]
    expected = [_default(key, count) for key in keyed]
    remembering, keys, producer = RememberingPartitioner(), KeyPartitions(), producer_of(count)
    for _again in range(2):  # the second time from memory
        assert [partition_of(key, list(range(count))[::-1]) for key in keyed] == expected
        assert [keys.partition(key, list(range(count))) for key in keyed] == expected
        assert [producer.partition("t", key) for key in keyed] == expected
        assert [remembering.partition("t", None, key, None, None, Cluster(count)) for key in keyed] == expected
    assert len(set(expected)) == count  # spread over every partition, not one


@pytest.mark.parametrize("count", COUNTS)
def test_a_record_without_a_key_goes_to_any_of_the_topics_partitions(count: int, producer_of: Any) -> None:
    producer = producer_of(count)
    chosen = {partition_of(None, range(count)) for _ in range(200)} | {
        KeyPartitions().partition(None, list(range(count))) for _ in range(200)}
    chosen |= {producer.partition("t", None) for _ in range(200)}
    chosen |= {RememberingPartitioner().partition("t", None, None, None, None, Cluster(count)) for _ in range(200)}
    assert chosen == {_default(None, count) for _ in range(400)} == set(range(count))


def test_past_its_memory_it_starts_again_and_still_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partitioning, "REMEMBER_AT_MOST", 3)
    keys = KeyPartitions()
    for key in [f"node-{i}".encode() for i in range(10)]:
        assert keys.partition(key, [0, 1, 2, 3, 4]) == _default(key, 5)
    assert len(keys._hashes) <= 3

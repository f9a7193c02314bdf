"""kafka-python's default partitioner, with each key's hash remembered (``streams.partitioning``), as a
kafka-python producer's ``partitioner``: the direct worker's kafka-python producer used it, and the bench's
comparison with that producer (laggard.bench.worker_floor) still does.

>>> from kafka.partitioner.default import murmur2
>>> class Cluster:
...     def topics(self): return {"t"}
...     def partitions_for_topic(self, topic): return {0, 1, 2}
...     def available_partitions_for_topic(self, topic): return {0, 1, 2}
>>> chosen = RememberingPartitioner().partition("t", None, b"node-7", None, None, Cluster())
>>> chosen == (murmur2(b"node-7") & 0x7fffffff) % 3
True
"""

from __future__ import annotations

from typing import Any

from kafka.partitioner.default import DefaultPartitioner

from streams.partitioning import KeyPartitions


class RememberingPartitioner(DefaultPartitioner):  # type: ignore[misc]  # kafka-python is untyped
    """``DefaultPartitioner`` that hashes each distinct key once."""

    def __init__(self) -> None:
        self._keys = KeyPartitions()

    def partition(self, topic: str, key: Any, serialized_key: bytes | None, value: Any, serialized_value: Any,
                  cluster: Any) -> int:
        if serialized_key is None:  # no key: the default's random choice among available partitions
            return int(super().partition(topic, key, serialized_key, value, serialized_value, cluster))
        if topic not in cluster.topics():
            raise ValueError(f"Topic {topic} not found in ClusterMetadata")
        return self._keys.partition(serialized_key, sorted(cluster.partitions_for_topic(topic)))

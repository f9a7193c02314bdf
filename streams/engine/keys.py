"""kafka-python's default partitioner, with each key's hash remembered.

Every output of the direct worker is keyed (node ids, job ids, the cluster id) and the same few thousand keys come
again and again; kafka-python hashes each record's key with a pure-Python murmur2, which was about a quarter of
its ``send`` in session 10's profile of a statistics worker. The partition is the default partitioner's, bit for
bit (Java's murmur2 of the key bytes, positive, modulo the topic's partition count), so records land where they
always did and other clients keep agreeing on a key's partition.

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

from kafka.partitioner.default import DefaultPartitioner, murmur2

REMEMBER_AT_MOST = 200_000  # keys; past it the memory starts again (job ids keep coming, node ids do not)


class RememberingPartitioner(DefaultPartitioner):  # type: ignore[misc]  # kafka-python is untyped
    """``DefaultPartitioner`` that hashes each distinct key once."""

    def __init__(self) -> None:
        self._hashes: dict[bytes, int] = {}

    def partition(self, topic: str, key: Any, serialized_key: bytes | None, value: Any, serialized_value: Any,
                  cluster: Any) -> int:
        if serialized_key is None:  # no key: the default's random choice among available partitions
            return int(super().partition(topic, key, serialized_key, value, serialized_value, cluster))
        if topic not in cluster.topics():
            raise ValueError(f"Topic {topic} not found in ClusterMetadata")
        hashed = self._hashes.get(serialized_key)
        if hashed is None:
            if len(self._hashes) >= REMEMBER_AT_MOST:
                self._hashes.clear()
            hashed = self._hashes[serialized_key] = murmur2(serialized_key) & 0x7FFFFFFF
        partitions = sorted(cluster.partitions_for_topic(topic))
        return int(partitions[hashed % len(partitions)])

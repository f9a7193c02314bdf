"""kafka-python's ``DefaultPartitioner``, bit for bit, in one place: a key's partition is Java's murmur2 of the key
bytes, made positive, modulo the topic's partition count, over the sorted partitions (no key: a random one).

Records land where kafka-python's producer put them and other clients agree on a key's partition (the node-scores
topic is compacted by key; readers look a node up by its key's partition). The batch producer, the direct worker's
kafka-python partitioner (bench only) and the replayer's sink all choose through here. Each distinct key is hashed
once: the same few thousand keys (node ids, job ids, the cluster id) come again and again, and kafka-python's
pure-Python murmur2 was about a quarter of its ``send`` in session 10's profile of a statistics worker.

>>> from kafka.partitioner.default import murmur2
>>> partition_of(b"node-7", [0, 1, 2]) == (murmur2(b"node-7") & 0x7fffffff) % 3
True
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from kafka.partitioner.default import murmur2

REMEMBER_AT_MOST = 200_000  # keys whose hash is remembered; past it the memory starts again (job ids keep coming)


def key_hash(key: bytes) -> int:
    """The default partitioner's positive murmur2 of ``key``."""
    return int(murmur2(key)) & 0x7FFFFFFF


def partition_of(key: bytes | None, partitions: Sequence[int]) -> int:
    """The partition kafka-python's producer picks for ``key`` among ``partitions`` (any order)."""
    if key is None:
        return random.choice(list(partitions))
    ordered = sorted(partitions)
    return ordered[key_hash(key) % len(ordered)]


class KeyPartitions:
    """``partition_of`` with each key's hash remembered (at most ``REMEMBER_AT_MOST`` keys at a time)."""

    def __init__(self) -> None:
        self._hashes: dict[bytes, int] = {}

    def partition(self, key: bytes | None, partitions: Sequence[int]) -> int:
        """As ``partition_of``; ``partitions`` must be sorted already (callers keep them so, once per topic)."""
        if key is None:
            return random.choice(partitions)
        hashed = self._hashes.get(key)
        if hashed is None:
            if len(self._hashes) >= REMEMBER_AT_MOST:
                self._hashes.clear()
            hashed = self._hashes[key] = key_hash(key)
        return partitions[hashed % len(partitions)]

"""The direct worker's partitioner puts every keyed record where kafka-python's default partitioner does (the
node-scores topic is compacted by key, and readers look a node up by its key's partition)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import DefaultPartitioner

from streams.engine.keys import RememberingPartitioner


class Cluster:
    def __init__(self, partitions: set[int]) -> None:
        self.partitions = partitions

    def topics(self) -> set[str]:
        return {"node-samples"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=24), min_size=1, max_size=40),
       st.sets(st.integers(0, 63), min_size=1, max_size=16))
def test_every_key_lands_on_the_default_partitioners_partition_again_and_again(keyed: list[bytes],
                                                                               partitions: set[int]) -> None:
    cluster, ours, default = Cluster(partitions), RememberingPartitioner(), DefaultPartitioner()
    for key in keyed + keyed:  # the second time from memory
        assert ours.partition("node-samples", None, key, None, None, cluster) == default.partition(
            "node-samples", None, key, None, None, cluster)

"""What the direct worker's consumer tells its ``Backlog`` (streams.agents.idle_rules): whether a silent stream is
behind (records wait unread: a catch-up is not idleness), known caught up (read to the ends its broker reported:
idle after the grace), and where partitions never read start and end. Functions of the backlog and the
kafka-python consumer, so the worker's hosts ask them through one-line callbacks."""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Any, cast

from kafka.errors import KafkaError
from kafka.structs import TopicPartition

from streams.agents.idle_rules import Backlog
from streams.serde import topics as registry

log = logging.getLogger(__name__)
TASK, JOB, FEED = registry.TASK_EVENTS.name, registry.JOB_EVENTS.name, registry.RANKING_FEED.name


def job_stream_behind(backlog: Backlog, partition: Hashable) -> bool:
    """A silent job stream is not idle while events of its partition wait unread (task events ran 6,667 s of
    event time ahead of job events before kafka-python fetched a single job event)."""
    p = cast(int, partition)
    return backlog.behind((JOB, p), (TASK, p))


def job_stream_caught_up(backlog: Backlog, consumer: Any, partition: Hashable) -> bool:
    """A partition's two topics read to the ends their latest fetches saw (asked now: the worker learns an end
    only from a partition with records): its job stream's silence is the producer's, idle after a grace. The task
    events too: live the loop reads each fetch to its end, while a catch-up (task events unread) may be ahead of a
    job event the replayer's batches still hold (152 ms at most in five unpaced replays)."""
    tps = [(JOB, cast(int, partition)), (TASK, cast(int, partition))]
    for tp in tps:
        backlog.ended(tp, consumer.highwater(TopicPartition(*tp)))
    return backlog.caught_up(*tps)


def partition_behind(backlog: Backlog, partition: Hashable) -> bool:
    """A normalising partition holding the ranking back is not idle while its progress mark may wait unread: on
    the ranking feed, or in its own events when this worker normalises it."""
    p = cast(int, partition)
    return backlog.behind((FEED, 0), (TASK, p), (JOB, p))


def refresh(backlog: Backlog, consumer: Any) -> None:
    """Ask the broker what the fetches did not tell yet: where never-read partitions start, where they end
    (blocking calls: on the loop's thread, never in the rebalance callback)."""
    starts, ends = backlog.unknown()
    try:
        for tp in starts:
            position = consumer.position(TopicPartition(*tp), timeout_ms=5000)
            if position is not None:
                backlog.start(tp, position)
        if ends:
            found = consumer.end_offsets([TopicPartition(*tp) for tp in ends], timeout_ms=5000)
            for tp, end in found.items():
                backlog.ended((tp.topic, tp.partition), end)
    except KafkaError as exc:  # unknown stays behind, for the catch-up allowance at most
        log.debug("backlog refresh failed: %s", exc)

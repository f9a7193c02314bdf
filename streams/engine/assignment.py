"""Which direct worker reads which partitions: the ranking's owner gets fewer input partitions.

A statistics group's ranking runs in one worker, the owner of ``ranking-feed``'s one partition, on top of that
worker's share of the input partitions; with an even spread that worker is the group's slowest, and two workers
do not go twice as fast as one (issue 18). Kafka's range assignor spreads evenly; ``RankingAwareAssignor`` counts
the ranking as ``share`` of one worker's work and gives its owner that much less of the inputs, keeping what the
range assignor keeps: ``task-events`` p and ``job-events`` p go to one worker (a job's events stay together), each
worker's input partitions are one contiguous run, the feed goes to the first member, and the result depends on
the members, their subscriptions and the topics alone, whichever member leads.

Members that do not read the feed (the prediction role's own group) get an even spread. A member that does not
know this assignor (a worker of an earlier version, during a rolling upgrade) makes the group fall back to range:
``DirectWorker`` offers both, this one first.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

log = logging.getLogger(__name__)

# The share of one worker's work its ranking is counted as, by policy. `running` ranks every node from every task event
# at each boundary, about as much work as reading and normalising them: at 0.5 or more, the ranking's owner reads no
# input partition while the group has another member. Chosen with ``python -m laggard.bench.workers_ab 300000 2
# --partitions 4 --skip 500000`` (Google events after the bench's first 500 k; docs/scale.md, session 28): two
# workers ranked a median 17.8 k events/s with an even spread (share 0), 20.3 k at 0.35 (1 and 3 partitions), 23.9 k
# at 0.6 (0 and 4), five rounds each, one worker 17.4 k. Other policies rank a window's summaries, not every task
# event (not measured here): their small share takes about a twentieth of the inputs off the owner (2 workers and 4
# partitions: an even spread; 40 partitions: 19 and 21).
RANKING_SHARE = {"running": 0.6}
OTHER_POLICIES_SHARE = 0.05


def ranking_share(policy: str, configured: float | None) -> float:
    """The share a group's assignor counts the ranking as: the configured one, else the policy's measured one.

    >>> ranking_share("running", None), ranking_share("pcores", None), ranking_share("running", 0.0)
    (0.6, 0.05, 0.0)
    """
    return configured if configured is not None else RANKING_SHARE.get(policy, OTHER_POLICIES_SHARE)


def input_counts(members: int, partitions: int, share: float) -> list[int]:
    """How many input partitions each of ``members`` gets, the ranking's owner first: one at a time to the least
    loaded, where the owner starts loaded with the ranking, ``share / (1 - share)`` of all the inputs' work
    (counted in partitions), and ties go to the member with fewer partitions, then to the earlier one (with no
    ranking share, the range assignor's counts).

    >>> input_counts(2, 4, 0.0), input_counts(2, 4, 0.35), input_counts(3, 4, 0.35), input_counts(2, 2, 0.35)
    ([2, 2], [1, 3], [0, 2, 2], [0, 2])
    >>> input_counts(2, 4, 0.05), input_counts(1, 4, 0.35), input_counts(4, 2, 0.0)
    ([2, 2], [4], [1, 1, 0, 0])
    """
    if members < 1:
        return []
    share = min(max(share, 0.0), 0.95)
    loads = [share / (1.0 - share) * partitions] + [0.0] * (members - 1)
    counts = [0] * members
    for _ in range(partitions):
        chosen = min(range(members), key=lambda m: (loads[m], counts[m], m))
        loads[chosen] += 1.0
        counts[chosen] += 1
    return counts


def assign(members: Sequence[str], subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int],
           feed: str, share: float) -> dict[str, dict[str, list[int]]]:
    """``member -> topic -> partitions``: ``members`` in the group's order (its first reader of the feed takes the
    feed and ranks), what each reads, and each topic's partition count (a topic without one is left out). The input
    topics read by the same members share one plan by partition index, so partition p of each goes to one member
    even when their counts differ.

    >>> subscribed = frozenset({"task-events", "job-events", "ranking-feed"})
    >>> out = assign(["a", "b"], {"a": subscribed, "b": subscribed},
    ...              {"task-events": 4, "job-events": 4, "ranking-feed": 1}, "ranking-feed", 0.35)
    >>> out["a"], out["b"]
    ({'job-events': [0], 'ranking-feed': [0], 'task-events': [0]}, {'job-events': [1, 2, 3], 'task-events': [1, 2, 3]})
    """
    out: dict[str, dict[str, list[int]]] = {member: {} for member in members}
    # no feed partition known: nobody ranks, nobody is spared
    owner = feed_owner(members, subscriptions, feed) if partitions.get(feed) else None
    if owner is not None:
        out[owner][feed] = list(range(partitions[feed]))
    by_readers: dict[tuple[str, ...], list[str]] = {}
    for topic in sorted(topic for topic in partitions if topic != feed):
        group = [m for m in members if topic in subscriptions[m]]
        if owner in group:  # the ranking's owner first, its share counted
            group = [owner] + [m for m in group if m != owner]
        by_readers.setdefault(tuple(group), []).append(topic)
    for readers_of, topics in by_readers.items():
        indices = max(partitions[topic] for topic in topics)
        counts = input_counts(len(readers_of), indices, share if owner in readers_of else 0.0)
        start = 0
        for member, count in zip(readers_of, counts, strict=True):
            for topic in topics:
                run = list(range(start, min(start + count, partitions[topic])))
                if run:
                    out[member][topic] = run
            start += count
    return {member: dict(sorted(topics.items())) for member, topics in out.items()}


def feed_owner(members: Sequence[str], subscriptions: Mapping[str, frozenset[str]], feed: str) -> str | None:
    """The member that takes the feed and ranks: the first, in the group's order, that reads it."""
    return next((member for member in members if feed in subscriptions[member]), None)


class RankingAwareAssignor(AbstractPartitionAssignor):  # type: ignore[misc]  # kafka-python is untyped
    """``assign`` for a kafka-python consumer group. Each member sends its ``share`` (as in ``input_counts``) with its
    subscription, and the plan takes the ranking owner's, so it is the same whichever member leads."""

    name = "laggard-ranking-aware"
    version = 0

    def __init__(self, feed: str, share: float) -> None:
        self.feed, self.share = feed, share

    def assign(self, cluster: Any, members: Any) -> dict[str, ConsumerProtocolAssignment]:
        # The range assignor's member order: static members (a group.instance.id) first, each kind by its ids.
        ordered = sorted(members, key=lambda m: (m.group_instance_id is None, m.group_instance_id or "", m.member_id))
        subscriptions = {m.member_id: frozenset(m.metadata.topics) for m in ordered}
        counts = {}
        for topic in sorted(frozenset().union(*subscriptions.values())):
            found = cluster.partitions_for_topic(topic)
            if found:
                counts[topic] = max(found) + 1
            else:
                log.warning("no partition metadata for topic %s: none of its partitions assigned", topic)
        ids = [m.member_id for m in ordered]
        owner = feed_owner(ids, subscriptions, self.feed)
        share = self.share if owner is None else _share_of(ordered[ids.index(owner)].metadata.user_data, self.share)
        plan = assign(ids, subscriptions, counts, self.feed, share)
        return {member: ConsumerProtocolAssignment(self.version, sorted(topics.items()), b"")
                for member, topics in plan.items()}

    def metadata(self, topics: Any) -> ConsumerProtocolSubscription:
        return ConsumerProtocolSubscription(self.version, list(topics), f"{self.share:g}".encode())

    def on_assignment(self, assignment: Any, generation: Any = None) -> None:
        pass


def _share_of(user_data: bytes | None, default: float) -> float:
    """The share a member sent with its subscription; ``default`` when it sent none readable.

    >>> _share_of(b"0.6", 0.0), _share_of(b"", 0.35), _share_of(None, 0.35), _share_of(b"x", 0.35)
    (0.6, 0.35, 0.35, 0.35)
    """
    try:
        return float(user_data.decode()) if user_data else default
    except (UnicodeDecodeError, ValueError):
        return default

"""The direct workers' assignor in a real consumer group: the ranking's owner reads fewer input partitions, and a
group with a member that does not know the assignor (a worker of an earlier version, mid-upgrade) falls back to
range, as the broker's protocol choice makes it."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.coordinator.assignors.range import RangePartitionAssignor

from streams.engine.assignment import RankingAwareAssignor, ranking_share

SETTLED_S = 6.0  # no assignment change for this long: the group is stable


def plans(bootstrap: str, strategies_for: Callable[[str], list[tuple[object, ...]]]) -> list[dict[str, list[int]]]:
    """What each member of a fresh group holds once the group is stable, by topic role (task, job, feed); the
    members' strategies from the name of this group's feed (fresh topics: the tier shares its broker)."""
    suffix = uuid.uuid4().hex[:8]
    names = {"task": f"task-{suffix}", "job": f"job-{suffix}", "feed": f"feed-{suffix}"}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(names[role], count, 1) for role, count in (("task", 4), ("job", 4), ("feed", 1))])
    finally:
        admin.close()
    strategies = strategies_for(names["feed"])
    held: list[dict[str, list[int]]] = [{} for _ in strategies]
    changed = [time.monotonic()]
    stop = threading.Event()

    def member(index: int, strategy: tuple[object, ...]) -> None:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=f"assign-{suffix}", enable_auto_commit=False,
                                 partition_assignment_strategy=strategy)
        consumer.subscribe(topics=list(names.values()))
        try:
            while not stop.is_set():
                consumer.poll(timeout_ms=200)
                now = {role: sorted(tp.partition for tp in consumer.assignment() if tp.topic == topic)
                       for role, topic in names.items()}
                if now != held[index]:
                    held[index] = now
                    changed[0] = time.monotonic()
        finally:
            consumer.close()

    threads = [threading.Thread(target=member, args=(i, s), daemon=True) for i, s in enumerate(strategies)]
    for thread in threads:
        thread.start()
        time.sleep(1.0)  # join one after the other, as workers starting do
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        covered = sorted(p for h in held for p in h.get("task", []))  # every input partition held
        if covered == [0, 1, 2, 3] and time.monotonic() - changed[0] > SETTLED_S:
            break
        time.sleep(0.5)
    stop.set()
    for thread in threads:
        thread.join(30)
    return held


def test_the_rankings_owner_reads_no_input_partition_under_running(bootstrap: str) -> None:
    share = ranking_share("running", None)  # the default policy's, as a worker offers it
    held = plans(bootstrap, lambda feed: [(RankingAwareAssignor(feed, share), RangePartitionAssignor)] * 2)
    owner = next(h for h in held if h.get("feed") == [0])
    other = next(h for h in held if h is not owner)
    assert (owner["task"], owner["job"]) == ([], [])
    assert (other["task"], other["job"], other["feed"]) == ([0, 1, 2, 3], [0, 1, 2, 3], [])


def test_a_smaller_share_leaves_the_owner_one_partition_of_four(bootstrap: str) -> None:
    held = plans(bootstrap, lambda feed: [(RankingAwareAssignor(feed, 0.35),)] * 2)
    owner = next(h for h in held if h.get("feed") == [0])
    other = next(h for h in held if h is not owner)
    assert (owner["task"], owner["job"]) == ([0], [0])
    assert (other["task"], other["job"], other["feed"]) == ([1, 2, 3], [1, 2, 3], [])


def test_a_member_that_knows_only_range_makes_the_group_use_range(bootstrap: str) -> None:
    held = plans(bootstrap, lambda feed: [(RankingAwareAssignor(feed, 0.35), RangePartitionAssignor),
                                                (RangePartitionAssignor,)])
    assert sorted(len(h["task"]) for h in held) == [2, 2]
    assert all(h["task"] == h["job"] for h in held)

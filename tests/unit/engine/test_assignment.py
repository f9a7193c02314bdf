"""The direct workers' partition plan (streams.engine.assignment): every partition read once, a job's two topics by
one worker, the ranking's owner lighter by its share and never heavier than an even spread."""

from __future__ import annotations

import itertools

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from streams.engine.assignment import RankingAwareAssignor, assign, input_counts, ranking_share

FEED, TASK, JOB = "ranking-feed", "task-events", "job-events"
EVERY = frozenset({TASK, JOB, FEED})


@pytest.mark.parametrize(("members", "partitions", "share"),
                         list(itertools.product([1, 2, 3, 5], [1, 2, 4, 8, 12], [0.0, 0.05, 0.2, 0.35, 0.6, 0.95])))
def test_every_partition_once_and_a_jobs_topics_together(members: int, partitions: int, share: float) -> None:
    names = [f"m{i}" for i in range(members)]
    plan = assign(names, dict.fromkeys(names, EVERY), {TASK: partitions, JOB: partitions, FEED: 1}, FEED, share)
    for topic, count in ((TASK, partitions), (JOB, partitions), (FEED, 1)):
        held = sorted(p for topics in plan.values() for p in topics.get(topic, []))
        assert held == list(range(count)), f"{topic}: each partition to one member"
    assert all(topics.get(TASK) == topics.get(JOB) for topics in plan.values())
    assert plan["m0"][FEED] == [0]
    for topics in plan.values():  # one contiguous run each, as the range assignor gives
        run = topics.get(TASK, [])
        assert run == list(range(run[0], run[0] + len(run))) if run else True
    counts = [len(plan[m].get(TASK, [])) for m in names]
    assert max(counts[1:], default=0) - min(counts[1:], default=0) <= 1, "the others share the rest evenly"
    if share > 0:
        assert counts[0] <= min(counts[1:], default=partitions), "the ranking's owner is never the busiest"

def test_no_share_is_the_range_assignors_spread() -> None:
    for members, partitions in itertools.product(range(1, 6), range(1, 13)):
        per, extra = divmod(partitions, members)
        assert input_counts(members, partitions, 0.0) == [per + (i < extra) for i in range(members)]


def test_the_owner_gets_less_the_larger_its_share() -> None:
    assert [input_counts(2, 8, share)[0] for share in (0.0, 0.1, 0.2, 0.35, 0.5, 0.7, 0.95)] == [4, 4, 3, 2, 0, 0, 0]


@pytest.mark.parametrize("members", [2, 3, 4, 8])
@pytest.mark.parametrize("partitions", [1, 2, 4, 8, 32])
def test_under_running_the_owner_reads_no_input_while_the_group_has_another_member(members: int,
                                                                                      partitions: int) -> None:
    share = ranking_share("running", None)
    counts = input_counts(members, partitions, share)
    assert counts[0] == 0 and sum(counts) == partitions
    assert input_counts(1, partitions, share) == [partitions], "alone, it reads everything"


def test_a_jobs_two_topics_stay_together_when_their_counts_differ() -> None:
    """task-events with 4 partitions and job-events with 2 (the worker refuses to start on that, but a group must
    not split p of the two between members while it is so)."""
    names = ["a", "b", "c"]
    plan = assign(names, dict.fromkeys(names, EVERY), {TASK: 4, JOB: 2, FEED: 1}, FEED, 0.6)
    for topics in plan.values():
        assert set(topics.get(JOB, [])) <= set(topics.get(TASK, []))
    assert sorted(p for topics in plan.values() for p in topics.get(JOB, [])) == [0, 1]


def test_no_feed_partition_known_spares_nobody() -> None:
    """The feed's metadata missing when the group assigns: its partitions unassigned (range's behaviour), and no
    member left without inputs for a ranking it does not run."""
    plan = assign(["a", "b"], {"a": EVERY, "b": EVERY}, {TASK: 4, JOB: 4}, FEED, 0.6)
    assert plan == {"a": {JOB: [0, 1], TASK: [0, 1]}, "b": {JOB: [2, 3], TASK: [2, 3]}}


def test_members_without_the_feed_share_evenly() -> None:
    """The prediction role's own group reads task-events and job-events only: no ranking, an even spread."""
    two = frozenset({TASK, JOB})
    plan = assign(["a", "b"], {"a": two, "b": two}, {TASK: 4, JOB: 4}, FEED, 0.35)
    assert plan == {"a": {JOB: [0, 1], TASK: [0, 1]}, "b": {JOB: [2, 3], TASK: [2, 3]}}


def test_the_feeds_reader_is_the_owner_even_when_not_first() -> None:
    """A member that does not read the feed (none does in a deployment, but the plan must not fall over) gets its
    even part; the share lands on the feed's reader."""
    plan = assign(["a", "b", "c"], {"a": frozenset({TASK, JOB}), "b": EVERY, "c": EVERY},
                  {TASK: 6, JOB: 6, FEED: 1}, FEED, 0.35)
    assert plan["b"][FEED] == [0]
    held = {member: len(topics.get(TASK, [])) for member, topics in plan.items()}
    assert held == {"a": 3, "b": 0, "c": 3}


class StandInCluster:
    """A stand-in for kafka-python's ClusterMetadata, which only a broker fills: the assignor asks it nothing but
    ``partitions_for_topic``. The real one is used in tests/integration/test_ranking_aware_assignment.py."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return set(range(self.counts[topic])) if topic in self.counts else None


class StandInMember:
    """A stand-in for the JoinGroup response's member: its ids and its subscription, decoded from the bytes the
    member's own assignor wrote (kafka-python's real encoding)."""

    def __init__(self, member_id: str, assignor: RankingAwareAssignor, instance: str | None = None) -> None:
        self.member_id, self.group_instance_id = member_id, instance
        self.metadata = ConsumerProtocolSubscription.decode(assignor.metadata([TASK, JOB, FEED]).encode())


def test_the_plan_takes_the_owners_share_whichever_member_leads() -> None:
    """Mid-rollout a member may run another share: the plan follows the ranking owner's, and every leader computes
    the same one. Static members (a group.instance.id) come first, as in the range assignor."""
    cluster = StandInCluster({TASK: 4, JOB: 4, FEED: 1})
    members = [StandInMember("m-2", RankingAwareAssignor(FEED, 0.0)),
               StandInMember("m-1", RankingAwareAssignor(FEED, 0.6), instance="worker-0")]
    plans = [RankingAwareAssignor(FEED, share).assign(cluster, members) for share in (0.0, 0.6)]
    assert plans[0] == plans[1]
    held = {member: dict(assignment.assigned_partitions) for member, assignment in plans[0].items()}
    assert held == {"m-1": {FEED: [0]}, "m-2": {JOB: [0, 1, 2, 3], TASK: [0, 1, 2, 3]}}


def test_a_topic_without_metadata_is_left_out() -> None:
    cluster = StandInCluster({TASK: 2, JOB: 2})
    members = [StandInMember("a", RankingAwareAssignor(FEED, 0.6)), StandInMember("b", RankingAwareAssignor(FEED, 0.6))]
    plan = RankingAwareAssignor(FEED, 0.6).assign(cluster, members)
    assert {member: dict(a.assigned_partitions) for member, a in plan.items()} == {
        "a": {JOB: [0], TASK: [0]}, "b": {JOB: [1], TASK: [1]}}

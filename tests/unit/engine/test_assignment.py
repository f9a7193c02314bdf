"""The direct workers' partition plan (streams.engine.assignment): every partition read once, a job's two topics by
one worker, the ranking's owner lighter by its share and never heavier than an even spread."""

from __future__ import annotations

import itertools

import pytest

from streams.engine.assignment import assign, input_counts

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
    owner = [input_counts(2, 8, share)[0] for share in (0.0, 0.1, 0.2, 0.35, 0.5, 0.7, 0.95)]
    assert owner == sorted(owner, reverse=True)
    assert owner[0] == 4 and owner[-1] == 0


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

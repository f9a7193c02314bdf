"""The follower state machine driven by hand-made deltas: gaps, duplicates, restarts and the cap."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.follower import Change, Follower, FollowerState, Gap, Refusal, Skip
from streams.core.events import BlacklistDelta, BlacklistEntry, BlacklistSnapshot, RemovedEntry


def entry(node: str, reason: str = "slow: mean z 1.2") -> BlacklistEntry:
    return BlacklistEntry(node, 0, 12, 1.2, 0.4, 0.9, 1.5, reason)


def delta(version: int, added: tuple[str, ...] = (), removed: tuple[str, ...] = (), cluster: str = "c1"):
    return BlacklistDelta(
        cluster,
        version,
        version * 300_000_000,
        "pcores",
        0,
        3_600_000_000,
        tuple(entry(n) for n in added),
        tuple(RemovedEntry(n, "no recent evidence") for n in removed),
    )


def snapshot(version: int, nodes: tuple[str, ...], cluster: str = "c1") -> BlacklistSnapshot:
    return BlacklistSnapshot(cluster, version, 0, "pcores", 0, 1, tuple(entry(n) for n in nodes))


def feed(follower: Follower, *records) -> list:
    """Apply every record the way the consumer does: commit changes, keep the steps."""
    steps = []
    for record in records:
        step = follower.on_delta(record) if isinstance(record, BlacklistDelta) else follower.on_snapshot(record)
        if isinstance(step, Change):
            follower.commit(step)
        steps.append(step)
    return steps


def test_deltas_in_order_build_the_blacklist_and_carry_their_reasons() -> None:
    follower = Follower("c1", known_nodes=100)
    steps = feed(follower, delta(1, ("n1", "n2")), delta(2, ("n3",), ("n1",)))
    assert follower.state.version == 2
    assert follower.state.applied == {"n2", "n3"}
    assert [e.node_id for e in steps[1].added] == ["n3"]
    assert [(r.node_id, r.reason) for r in steps[1].removed] == [("n1", "no recent evidence")]
    assert steps[0].added[0].reason == "slow: mean z 1.2"


def test_a_duplicate_delta_changes_nothing() -> None:
    follower = Follower("c1", known_nodes=100)
    feed(follower, delta(1, ("n1",)), delta(2, ("n2",)))
    before = follower.state
    step = follower.on_delta(delta(1, ("n9",)))
    assert isinstance(step, Skip) and "duplicate" in step.reason
    assert follower.state == before


def test_a_version_gap_asks_for_a_resync_and_the_snapshot_closes_it() -> None:
    follower = Follower("c1", known_nodes=100)
    feed(follower, delta(1, ("n1", "n2")))
    gap = follower.on_delta(delta(4, ("n5",)))
    assert gap == Gap(expected=2, got=4)
    assert follower.state.version == 1
    step = feed(follower, snapshot(3, ("n2", "n4")))[0]
    assert isinstance(step, Change)
    assert [e.node_id for e in step.added] == ["n4"]
    assert [r.node_id for r in step.removed] == ["n1"]
    assert "snapshot version 3" in step.removed[0].reason
    feed(follower, delta(4, ("n5",)))
    assert follower.state == FollowerState(4, frozenset({"n2", "n4", "n5"}), frozenset({"n1", "n2", "n4", "n5"}))


def test_a_restart_with_saved_state_applies_nothing_twice() -> None:
    first = Follower("c1", known_nodes=100)
    feed(first, delta(1, ("n1",)), delta(2, ("n2",)))
    restarted = Follower("c1", known_nodes=100, state=first.state)
    steps = feed(restarted, snapshot(2, ("n1", "n2")), delta(1, ("n1",)), delta(2, ("n2",)), delta(3, (), ("n1",)))
    assert [type(s) for s in steps] == [Skip, Skip, Skip, Change]
    assert restarted.state.applied == {"n2"}


def test_a_snapshot_older_than_the_applied_version_is_ignored() -> None:
    follower = Follower("c1", known_nodes=100)
    feed(follower, delta(1, ("n1",)), delta(2, ("n2",)))
    step = follower.on_snapshot(snapshot(1, ("n1",)))
    assert isinstance(step, Skip) and "older" in step.reason
    assert follower.state.applied == {"n1", "n2"}


def test_a_delta_over_the_cap_is_refused_whole_and_the_state_is_unchanged() -> None:
    follower = Follower("c1", max_fraction=0.1, known_nodes=30)
    feed(follower, delta(1, ("n1", "n2")))
    before = follower.state
    step = follower.on_delta(delta(2, ("n3", "n4")))
    assert isinstance(step, Refusal)
    assert (step.size_after, step.known) == (4, 30)
    assert "4 of 30 known nodes" in step.reason and "3 nodes" in step.reason
    assert follower.state == before
    # Exactly at the cap is allowed.
    assert isinstance(follower.on_delta(delta(2, ("n3",))), Change)


def test_releasing_nodes_is_never_refused_even_over_the_cap() -> None:
    follower = Follower("c1", max_fraction=1.0, known_nodes=10)
    feed(follower, delta(1, ("a", "b", "c", "d")))
    follower.max_fraction = 0.1
    step = follower.on_delta(delta(2, ("e",), ("a", "b")))
    assert isinstance(step, Change)
    assert step.after == {"c", "d", "e"}


def test_a_snapshot_over_the_cap_is_refused_too() -> None:
    follower = Follower("c1", max_fraction=0.1, known_nodes=20)
    assert isinstance(follower.on_snapshot(snapshot(5, ("a", "b", "c"))), Refusal)
    assert follower.state == FollowerState()


def test_known_nodes_grow_with_nodes_seen_and_names_given() -> None:
    follower = Follower("c1", max_fraction=0.5, known_nodes=["a", "b", "c", "d"])
    assert follower.known_count() == 4
    feed(follower, delta(1, ("a", "x")))
    assert follower.known_count() == 5
    follower.set_known(3)
    assert follower.known_count() == 3  # the count given beats the two nodes seen (a, x)
    follower.set_known(None)
    assert follower.known_count() == 2


def test_records_of_another_cluster_are_skipped() -> None:
    follower = Follower("c1", known_nodes=100)
    assert isinstance(follower.on_delta(delta(1, ("n1",), cluster="c2")), Skip)
    assert isinstance(follower.on_snapshot(snapshot(1, ("n1",), cluster="c2")), Skip)
    assert follower.state == FollowerState()


def test_the_first_delta_without_any_snapshot_must_be_version_one() -> None:
    follower = Follower("c1", known_nodes=100)
    assert follower.on_delta(delta(3, ("n1",))) == Gap(1, 3)
    assert isinstance(follower.on_delta(delta(1, ("n1",))), Change)


def test_max_fraction_out_of_range_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_fraction"):
        Follower("c1", max_fraction=0)


node_names = st.sampled_from([f"n{i}" for i in range(12)])
changes = st.lists(
    st.tuples(st.frozensets(node_names, max_size=3), st.frozensets(node_names, max_size=3)),
    min_size=1,
    max_size=15,
)


def chain(
    raw: list[tuple[frozenset[str], frozenset[str]]],
) -> tuple[list[BlacklistDelta], list[frozenset[str]]]:
    """Consistent deltas (added not yet listed, removed listed) and the true set after each."""
    current: frozenset[str] = frozenset()
    deltas, truth = [], []
    for version, (add, remove) in enumerate(raw, start=1):
        added = tuple(sorted(add - current))
        removed = tuple(sorted((remove & current) - add))
        current = (current - set(removed)) | set(added)
        deltas.append(delta(version, added, removed))
        truth.append(current)
    return deltas, truth


@settings(max_examples=150, deadline=None)
@given(changes, st.data())
def test_redelivered_deltas_end_in_the_same_state_as_one_clean_pass(raw, data) -> None:
    deltas, truth = chain(raw)
    redelivered = []
    for index, record in enumerate(deltas):
        redelivered.append(record)
        if index and data.draw(st.booleans()):
            redelivered.extend(data.draw(st.lists(st.sampled_from(deltas[: index + 1]), max_size=3)))
    follower = Follower("c1", max_fraction=1.0)
    steps = feed(follower, *redelivered)
    assert follower.state.version == len(deltas)
    assert follower.state.applied == truth[-1]
    assert sum(isinstance(step, Change) for step in steps) == len(deltas)


@settings(max_examples=150, deadline=None)
@given(changes, st.data())
def test_after_any_gap_a_resync_reaches_the_true_set(raw, data) -> None:
    deltas, truth = chain(raw)
    kept = [record for record in deltas if data.draw(st.booleans())]
    follower = Follower("c1", max_fraction=1.0)
    for record in kept:
        step = follower.on_delta(record)
        if isinstance(step, Gap):
            # A gap is only possible after version 1, so the snapshot before this delta exists.
            feed(follower, snapshot(record.version - 1, tuple(truth[record.version - 2])))
            step = follower.on_delta(record)
        if isinstance(step, Change):
            follower.commit(step)
        assert follower.state.applied == truth[record.version - 1]

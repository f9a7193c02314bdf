"""Precision, recall and onset-to-blacklist delay of injected slow nodes (SPEC 7), on hand-made deltas."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.core.evaluation.detection import US_PER_S, DetectionScore, Span
from streams.core.events import BlacklistDelta, BlacklistEntry, RemovedEntry


def delta(version: int, at_s: int, added=(), removed=()) -> BlacklistDelta:
    entries = tuple(BlacklistEntry(n, 0, 9, 1.0, 0.5, 0.6, 1.4, "slow") for n in added)
    gone = tuple(RemovedEntry(n, "no recent evidence") for n in removed)
    return BlacklistDelta("c", version, at_s * US_PER_S, "pcores", 0, at_s * US_PER_S, entries, gone)


def scored(slow, onset_s, deltas) -> DetectionScore:
    score = DetectionScore(slow, onset_s * US_PER_S)
    for d in deltas:
        score.update(d)
    return score


def test_a_healthy_node_released_and_a_slow_node_caught_twice():
    score = scored(
        ["a", "b"],
        600,
        [
            delta(1, 300, ["h"]),  # a healthy node, listed before the fault even began
            delta(2, 900, ["a"], ["h"]),
            delta(3, 1500, [], ["a"]),  # a released ...
            delta(4, 2100, ["a", "b"]),  # ... and listed again: its delay counts from the first time
        ],
    )
    assert score.blacklisted == ["a", "b", "h"]
    assert (score.true_positives, score.false_positives, score.missed) == (["a", "b"], ["h"], [])
    assert score.precision == 2 / 3 and score.recall == 1.0
    assert score.onset_to_blacklist_s == {"a": 300.0, "b": 1500.0}
    assert score.spans() == [
        Span("a", 900 * US_PER_S, 1500 * US_PER_S),
        Span("a", 2100 * US_PER_S, None),
        Span("b", 2100 * US_PER_S, None),
        Span("h", 300 * US_PER_S, 900 * US_PER_S),
    ]


def test_a_slow_node_listed_before_its_onset_gets_a_negative_delay():
    score = scored(["a"], 1000, [delta(1, 400, ["a"])])
    assert score.onset_to_blacklist_s == {"a": -600.0}


def test_undefined_scores_are_none_not_zero():
    nothing = scored(["a"], 0, [])
    assert nothing.precision is None and nothing.recall == 0.0 and nothing.missed == ["a"]
    assert nothing.onset_to_blacklist_s == {"a": None}
    no_fault = scored([], 0, [delta(1, 10, ["h"])])
    assert no_fault.recall is None and no_fault.precision == 0.0


nodes = st.sampled_from([f"n{i}" for i in range(8)])


@given(slow=st.sets(nodes), steps=st.lists(st.tuples(st.sets(nodes), st.sets(nodes)), max_size=12))
def test_counts_add_up(slow, steps):
    listed: set[str] = set()
    deltas = []
    for version, (add, remove) in enumerate(steps, start=1):
        added, removed = sorted(add - listed), sorted((remove & listed) - add)
        listed = (listed | set(added)) - set(removed)
        deltas.append(delta(version, 60 * version, added, removed))
    score = scored(slow, 0, deltas)
    assert len(score.true_positives) + len(score.false_positives) == len(score.blacklisted)
    assert len(score.true_positives) + len(score.missed) == len(slow)
    for value in (score.precision, score.recall):
        assert value is None or 0.0 <= value <= 1.0
    still_open = {span.node_id for span in score.spans() if span.end_us is None}
    assert still_open == listed

"""The ranked refusal budget: refusals go to the worst recent placements, not the first ones."""

from __future__ import annotations

import json

import pytest

from streams.core.avoidance.budget import RefusalBudget, refusals
from streams.core.avoidance.ranked import EscalatingBudget, RankedBudget


def test_after_many_mild_placements_the_ranked_budget_still_refuses_a_bad_one() -> None:
    # 200 mild placements, all above the type's floor: a first-come budget spends itself on them
    mild = [0.3 + 0.001 * (i % 50) for i in range(200)]
    first_come = RefusalBudget(0.10, window=100)
    ranked = RankedBudget(0.10, safety=0.5, window=100, cap_window=100)  # ranks on the worst 5 %
    first_come_refused = [first_come.place(ts, v, True) for ts, v in enumerate(mild)]
    ranked_refused = [ranked.place(ts, v, True) for ts, v in enumerate(mild)]
    assert sum(first_come_refused) >= 10  # the first-come budget refused mild ones up to its cap
    # then a burst of bad placements: the first-come budget is spent, the ranked one pays for the worst
    bad = [2.5, 2.6, 2.7]
    assert sum(first_come.place(200 + k, v, True) for k, v in enumerate(bad)) <= 1
    assert [ranked.place(200 + k, v, True) for k, v in enumerate(bad)] == [True] * 3
    assert sum(ranked_refused) < sum(first_come_refused)


def test_the_ranked_budget_never_refuses_more_than_its_cap() -> None:
    values = [float(i) for i in range(300)]  # every placement worse than all before it
    budget = RankedBudget(0.10, safety=1.0, window=50, cap_window=100)
    refused = refusals(values, ["a"] * 300, list(range(300)), {"a": -1.0}, budget)
    assert sum(refused[-100:]) <= 10
    assert sum(refused) >= 25  # it does refuse, within the cap


def test_a_placement_below_its_floor_or_without_a_prediction_is_never_refused() -> None:
    budget = RankedBudget(0.5, safety=1.0, window=10, cap_window=10)
    assert refusals([5.0, None, 9.0], ["a", "a", "b"], [0, 1, 2], {"a": 6.0, "b": 1.0}, budget) == [
        False, False, True]  # fmt: skip


def test_a_restored_ranked_budget_decides_as_the_one_it_was_taken_of() -> None:
    budget = RankedBudget(0.2, safety=0.9, window=20, cap_window=40)
    for ts in range(60):
        budget.place(ts, (ts * 7) % 11 / 10, True)
    copy = RankedBudget.restore(json.loads(json.dumps(budget.snapshot())))
    later = [(60 + ts, (ts * 5) % 13 / 10) for ts in range(40)]
    assert [copy.place(ts, v, True) for ts, v in later] == [budget.place(ts, v, True) for ts, v in later]
    with pytest.raises(ValueError, match="ranked-budget"):
        RankedBudget.restore(budget.cap.snapshot())


def test_the_escalating_threshold_stays_at_the_floor_when_light_and_climbs_when_loaded() -> None:
    light, loaded = EscalatingBudget(0.10, slope=0.8, window=200), EscalatingBudget(0.10, slope=0.8, window=200)
    # light cluster: one placement in 20 above the floor, mildly -- every one of them is refused
    light_refused = [light.place(ts, 0.3 if ts % 20 == 0 else -0.5, ts % 20 == 0, floor=0.0) for ts in range(400)]
    assert sum(light_refused) == 20
    # loaded cluster: every placement above the floor, mildly: the threshold climbs and most are allowed
    refused = [loaded.place(ts, 0.3, True, floor=0.0) for ts in range(400)]
    assert 0.02 <= sum(refused[200:]) / 200 <= 0.10
    assert loaded.threshold_over_floor() > 0.1
    # a bad placement still clears the climbed threshold, and a restored budget decides alike
    copy = EscalatingBudget.restore(json.loads(json.dumps(loaded.snapshot())))
    assert copy.place(400, 3.0, True, floor=0.0) == loaded.place(400, 3.0, True, floor=0.0) is True

"""The running refusal budget: in the core adviser, across a restart, and in the scheduler extender's filter."""

from __future__ import annotations

import json
from pathlib import Path

from adapters.extender import Extender, LiveStatus
from streams.core.avoidance.adviser import Adviser
from streams.core.avoidance.budget import RefusalBudget
from streams.core.avoidance.status import NodeStatus, NodeStatusTracker
from streams.core.avoidance.trees import CartTrees

S = 1_000_000


def _trees() -> CartTrees:
    trees = CartTrees(max_depth=1, min_samples_leaf=1)
    trees.fit("map", [{"running": float(r)} for r in range(20)], [0.0] * 11 + [1.5] * 9)
    return trees


def _busy(ts_us: int) -> NodeStatus:
    return NodeStatus("node-busy", ts_us, running=16)


def test_the_budget_binds_a_loaded_cluster_to_its_share_and_says_so() -> None:
    unbounded = Adviser(_trees(), 1.0)
    assert all(not unbounded.place("node-busy", "map", _busy(i * S)).allowed for i in range(200))

    adviser = Adviser(_trees(), 1.0, budget=RefusalBudget(share=0.1, window=50))
    advice = [adviser.place("node-busy", "map", _busy(i * S)) for i in range(200)]
    refused = [not a.allowed for a in advice]
    assert 0 < sum(refused) <= 0.1 * 200
    for end in range(50, 201):  # every window of 50 placements refuses at most 10 % of them
        assert sum(refused[end - 50:end]) <= 5
    spent = [a for a in advice if a.allowed]
    assert all(a.budget_spent and a.expected_z is not None and a.expected_z > 1.0 for a in spent)
    first = advice.index(spent[0])  # what was refused out of what was placed, then what the budget allows
    assert spent[0].reason.endswith(f"but budget spent: {sum(refused[:first])} of the last {first + 1} placements "
                                    "refused (at most 10.0 % of the last 50 placements, or one)")


def test_calm_placements_do_not_spend_the_budget_and_make_room_for_refusals() -> None:
    adviser = Adviser(_trees(), 1.0, budget=RefusalBudget(share=0.1, window=50))
    assert not adviser.place("node-busy", "map", _busy(0)).allowed
    assert adviser.place("node-busy", "map", _busy(S)).budget_spent  # 2 of 2 would be refused
    for i in range(2, 20):
        assert adviser.place("node-calm", "map", NodeStatus("node-calm", i * S, running=2)).allowed
    assert not adviser.place("node-busy", "map", _busy(20 * S)).allowed  # 2 of 21: within 10 %


def test_an_event_time_window_forgets_refusals_older_than_it() -> None:
    adviser = Adviser(_trees(), 1.0, budget=RefusalBudget(share=0.1, window=None, window_us=60 * S))
    assert not adviser.place("node-busy", "map", _busy(0)).allowed
    assert adviser.place("node-busy", "map", _busy(30 * S)).budget_spent
    assert not adviser.place("node-busy", "map", _busy(61 * S)).allowed  # the first refusal left the window
    assert adviser.place("node-busy", "map", _busy(62 * S)).reason.endswith(
        "1 of the last 3 placements refused (at most 10.0 % of the last 1 min of placements, or one)")


def test_a_restored_budget_decides_as_the_one_it_was_taken_of() -> None:
    first = RefusalBudget(share=0.2, window=30)
    wanted = [i % 3 != 0 for i in range(100)]
    for i in range(60):
        first.decide(i, wanted[i])
    again = RefusalBudget.restore(json.loads(json.dumps(first.snapshot())))
    assert [first.decide(i, wanted[i]) for i in range(60, 100)] == [again.decide(i, wanted[i]) for i in range(60, 100)]


def _args(names: list[str]) -> bytes:
    pod = {"metadata": {"name": "wc-map-1", "annotations": {"laggard.io/task-type": "map"}}}
    return json.dumps({"Pod": pod, "NodeNames": names}).encode()


def test_the_extender_lets_an_avoided_node_pass_when_the_budget_is_spent_and_still_ranks_it() -> None:
    def status(node: str, kind: str) -> NodeStatus:
        return NodeStatus(node, 0, running=16 if node == "node-busy" else 2)

    adviser = Adviser(_trees(), 1.0, budget=RefusalBudget(share=0.1, window=100))
    extender = Extender(adviser, status, lambda: {"node-listed"})
    names = ["node-calm", "node-busy", "node-listed"]
    first = extender.filter(_args(names))
    assert first["NodeNames"] == ["node-calm"] and set(first["FailedNodes"]) == {"node-busy", "node-listed"}
    second = extender.filter(_args(names))  # the second refusal in two placements: over 10 %
    assert second["NodeNames"] == ["node-calm", "node-busy"]
    assert set(second["FailedNodes"]) == {"node-listed"}  # the blacklist is not the budget's to lift
    scores = {h["Host"]: h["Score"] for h in extender.prioritize(_args(names))}
    assert scores["node-calm"] > scores["node-busy"] and scores["node-listed"] == 0


def test_the_budget_is_saved_and_restored_with_the_trackers_state(tmp_path: Path) -> None:
    budget = RefusalBudget(share=0.1, window=100)
    budget.decide(5 * S, True)
    live = LiveStatus(NodeStatusTracker(), 5 * S, {"task-events:0": 3}, budget)
    path = tmp_path / "extender-state.json"
    live.save(path)
    again = LiveStatus.load(path)
    assert again is not None and again.budget is not None
    assert not again.budget.can_refuse(6 * S)  # the refusal before the restart still counts
    assert again.budget.snapshot() == budget.snapshot()

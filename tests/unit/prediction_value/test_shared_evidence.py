"""``select``'s node-slow reads hazard's node evidence instead of learning its own alike copy (session 16): the
same flags, the same state in every checkpoint, checkpoints that move either way between the two layouts, and
the evidence saved once."""

from __future__ import annotations

import base64
import json
import pickle
from typing import Any

import pytest

from producers.synthetic import SyntheticCluster, SyntheticConfig
from streams.core.events import Event, Status, TaskFinish
from streams.core.prediction import registry
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.fleet import PredictorFleet
from streams.core.prediction.nodes import NodeEvidence
from streams.core.prediction.nodeslow import NodeSlowMethod


@pytest.fixture(scope="module")
def events() -> list[Event]:
    # slow nodes, so node-slow (in spark-node) flags; enough ended jobs for select to move off its first member
    config = SyntheticConfig(nodes=20, slow=3, jobs=24, tasks=(15, 25), checkpoints=4, seed=107)
    return list(SyntheticCluster(config))


def fleet(shared: bool, monkeypatch: pytest.MonkeyPatch) -> PredictorFleet:
    with monkeypatch.context() as patch:
        if not shared:  # the layout before session 16: each member learns and saves its own evidence
            patch.setattr(registry, "share_node_evidence", lambda members: None)
        return PredictorFleet("select", PredictionContext())


def plain(x: Any) -> Any:
    """Learned state as comparable data: floats exact, objects by their attributes."""
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    if isinstance(x, float | int | str | bool) or x is None:
        return x
    if callable(x) and not hasattr(x, "__dict__"):  # a builtin in a reduction
        return repr(x)
    state = vars(x) if hasattr(x, "__dict__") else x.__reduce_ex__(4)[1:3]  # River's VectorDict: its reduction
    return [type(x).__name__, plain(state)]


def cluster(live: PredictorFleet) -> Any:
    envelope = live.snapshot()["cluster"]
    return pickle.loads(base64.b64decode(envelope["state"]))


def flags(live: PredictorFleet, events: list[Event]) -> list[Any]:
    return [flag for event in events if (flag := live.step(event)) is not None]


def test_select_flags_and_saves_what_it_did_with_an_evidence_per_member(events: list[Event],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    shared, own = fleet(True, monkeypatch), fleet(False, monkeypatch)
    node_slow = shared.predictor.members[2].members[1]  # type: ignore[attr-defined]
    assert isinstance(node_slow, NodeSlowMethod) and node_slow.evidence is shared.predictor.members[3].evidence  # type: ignore[attr-defined]
    every, raised = len(events) // 7, 0
    for start in range(0, len(events), every):
        part = events[start:start + every]
        mine = flags(shared, part)
        assert mine == flags(own, part)
        assert plain(cluster(shared)) == plain(cluster(own))  # a stale or doubled evidence differs here
        raised += len(mine)
    # not vacuous: flags were raised, and the evidence node-slow reads calls some nodes slow enough to flag on
    slowest = max(node_slow.evidence.slowness(f"node-{i:02d}") for i in range(20))
    assert raised > 20 and slowest > node_slow.slowness


@pytest.mark.parametrize("saved_by", ["shared", "own"])
def test_a_checkpoint_continues_alike_in_either_layout(saved_by: str, events: list[Event],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    half = len(events) // 2
    writer, reference = fleet(saved_by == "shared", monkeypatch), fleet(False, monkeypatch)
    flags(writer, events[:half])
    flags(reference, events[:half])
    reader = fleet(saved_by != "shared", monkeypatch)  # the other layout: an upgrade, or a roll-back
    reader.restore(json.loads(json.dumps(writer.snapshot())))
    assert reader.cold_starts == 0
    assert flags(reader, events[half:]) == flags(reference, events[half:])
    # two evidences restored from one pickle must not share the Var objects of the running jobs' log durations
    assert plain(cluster(reader)) == plain(cluster(reference))


def test_the_checkpoint_holds_the_evidence_once(events: list[Event], monkeypatch: pytest.MonkeyPatch) -> None:
    shared, own = fleet(True, monkeypatch), fleet(False, monkeypatch)
    flags(shared, events)
    flags(own, events)
    sizes = [len(live.snapshot()["cluster"]["state"]) for live in (shared, own)]
    assert sizes[0] < 0.6 * sizes[1]


def test_an_evidence_snapshot_follows_every_change() -> None:
    evidence, other = NodeEvidence(), NodeEvidence()
    before = evidence.snapshot()
    evidence.learn(TaskFinish("j", "t", 0, "n1", 5_000_000, 5_000_000, Status.SUCCEEDED))
    after = evidence.snapshot()
    assert before["nodes"] == {} and after["nodes"] == {"n1": [0.0]}
    other.learn(TaskFinish("k", "t", 0, "n2", 5_000_000, 5_000_000, Status.SUCCEEDED))
    evidence.restore(other.snapshot())
    assert evidence.snapshot()["nodes"] == {"n2": [0.0]}


def test_node_slow_borrows_only_an_evidence_configured_as_its_own() -> None:
    with pytest.raises(ValueError, match="configured"):
        NodeSlowMethod().borrow(NodeEvidence(window=10))


def test_members_whose_evidences_differ_keep_their_own_instead_of_failing_the_worker() -> None:
    """Review of h65: sharing is an optimisation; members built on two live views (or otherwise configured
    evidences) must each keep learning their own, not stop the worker with the borrow's ValueError."""
    from streams.core.prediction.base import ClusterView
    from streams.core.prediction.registry import share_node_evidence

    hazard = registry.build_method("hazard", PredictionContext(0.5, {}, ClusterView(), 1))
    spark_node = registry.build_method("spark-node", PredictionContext(0.5, {}, ClusterView(), 1))
    share_node_evidence([hazard, spark_node])
    slow = [m for m in getattr(spark_node, "members", ()) if isinstance(m, NodeSlowMethod)]
    assert slow and all(not m.borrowed and m.evidence is not hazard.evidence for m in slow)  # type: ignore[attr-defined]

"""Every registered detector keeps the NodeDetector contract, and every policy runs end to end."""

from __future__ import annotations

import json

import pytest

from streams.core.decision.registry import POLICIES
from streams.core.detection.base import WindowView
from streams.core.detection.registry import DETECTORS
from streams.core.events import NormalizedTask
from streams.core.ranker import NodeRanker
from streams.core.ranking_config import RankingConfig
from streams.core.windows import summarize


def samples() -> list[NormalizedTask]:
    return [NormalizedTask(f"j{i}", node, 0, node, 60_000_000 * i, 1, z + 0.01 * (i % 3))
            for i in range(20) for node, z in (("n0", 1.5), ("n1", -0.5), ("n2", -0.4), ("n3", -0.6))]


@pytest.mark.parametrize("name", DETECTORS.names())
def test_a_detector_speaks_only_of_window_nodes_by_their_own_id_and_survives_a_snapshot(name) -> None:
    detector = DETECTORS.get(name)(RankingConfig())
    for sample in samples():
        detector.learn(sample)
    values: dict[str, list[float]] = {}
    for s in samples():
        values.setdefault(s.node_id, []).append(s.z)
    view = WindowView(0, 1_500_000_000, {node: summarize(node, v) for node, v in values.items()})
    evidence = detector.detect(view)
    assert all(e.node_id == node and e.reason for node, e in evidence.items())
    state = json.loads(json.dumps(detector.snapshot()))
    again = DETECTORS.get(name)(RankingConfig())
    again.restore(state)
    assert again.detect(view) == evidence


@pytest.mark.parametrize("policy", POLICIES.names())
def test_every_policy_honours_the_deny_and_allow_lists(policy) -> None:
    ranker = NodeRanker(RankingConfig(policy=policy, max_fraction=0.5, deny_list=frozenset({"n1"}),
                                      allow_list=frozenset({"n0"})))
    for sample in samples():
        ranker.update(sample)
    ranking = ranker.rank(1_500_000_000)
    assert ranking.blacklist == {"n1"}
    assert ranking.by_node()["n0"].reason == "on the allow-list"

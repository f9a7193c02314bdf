"""A ranker without its own state continues from the blacklist consumers hold: no reused versions, and the
next delta is relative to what they applied."""

from __future__ import annotations

import pytest

from streams.core.events import BlacklistEntry, BlacklistSnapshot, NormalizedTask
from streams.core.ranker import NodeRanker
from streams.core.ranking_config import RankingConfig
from streams.core.stages import RankStage


def test_a_cold_ranker_continues_from_the_published_snapshot() -> None:
    ranker = NodeRanker(RankingConfig(max_fraction=0.5))
    old = BlacklistEntry("n-old", 0, 9, 1.4, 0.3, 1.1, 1.7, "slow in an earlier window")
    ranker.adopt(BlacklistSnapshot("default", 7, 0, "pcores", 0, 0, (old,), 4))
    for i in range(20):
        for node, z in (("n0", 1.5), ("n1", -0.5), ("n2", -0.4), ("n3", -0.6)):
            ranker.update(NormalizedTask(f"j{i}", node, 0, node, 60_000_000 * i, 1, z + 0.01 * (i % 3)))
    delta = ranker.decide(now_us=1_500_000_000)
    assert delta is not None and delta.version == 8
    assert [e.node_id for e in delta.added] == ["n0"]
    assert [e.node_id for e in delta.removed] == ["n-old"]
    assert ranker.blacklist.node_ids == frozenset({"n0"})


def feed(ranker: NodeRanker) -> None:
    for i in range(20):
        for node, z in (("n0", 1.5), ("n1", -0.5), ("n2", -0.4), ("n3", -0.6)):
            ranker.update(NormalizedTask(f"j{i}", node, 0, node, 60_000_000 * i, 1, z + 0.01 * (i % 3)))


def test_a_snapshot_from_before_detectors_is_refused_and_changes_nothing() -> None:
    """Version 1 had no detector state: the agents catch the ValueError and cold-start (streams/agents/rank.py)."""
    ranker = NodeRanker(RankingConfig(max_fraction=0.5))
    feed(ranker)
    old = ranker.snapshot()
    old["version"] = 1
    del old["detector"]
    fresh = NodeRanker(RankingConfig(max_fraction=0.5))
    with pytest.raises(ValueError, match="snapshot version 1"):
        fresh.restore(old)
    assert fresh.snapshot() == NodeRanker(RankingConfig(max_fraction=0.5)).snapshot()


def test_a_rank_stage_with_an_old_snapshot_cold_starts_and_still_ranks() -> None:
    config = RankingConfig(max_fraction=0.5)
    stage = RankStage(config, partitions=1)
    state = stage.snapshot()
    state["ranker"]["version"] = 1
    cold = RankStage(config, partitions=1)
    with pytest.raises(ValueError):
        cold.restore(state)
    feed(cold.ranker)
    assert cold.ranker.decide(1_500_000_000) is not None and cold.ranker.blacklist.node_ids == {"n0"}


def test_a_snapshot_of_another_detector_is_refused() -> None:
    pcores = NodeRanker(RankingConfig(max_fraction=0.5))
    feed(pcores)
    noop = NodeRanker(RankingConfig(policy="noop"))
    with pytest.raises(ValueError, match="detector 'pcores'"):
        noop.restore(pcores.snapshot())
    # the same detector under another selection rule reads it
    top_k = NodeRanker(RankingConfig(max_fraction=0.5, policy="pcores-top-k"))
    top_k.restore(pcores.snapshot())
    assert top_k.decide(1_500_000_000) is not None and top_k.blacklist.node_ids == {"n0"}

"""A ranker without its own state continues from the blacklist consumers hold: no reused versions, and the
next delta is relative to what they applied."""

from __future__ import annotations

from streams.core.events import BlacklistEntry, BlacklistSnapshot, NormalizedTask
from streams.core.ranker import NodeRanker
from streams.core.ranking_config import RankingConfig


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

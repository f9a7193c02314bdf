"""Dwell (SPEC 3): a listed node stays at least ``min_dwell_periods`` full periods after the one it was added in.

Before issue 14, ``min_dwell_periods=1`` behaved exactly like 0: the first chance to release a node is the
next boundary anyway, and a dwell of one period ended exactly there.
"""

from __future__ import annotations

import pytest

from streams.core.events import NormalizedTask
from streams.core.ranker import NodeRanker
from streams.core.ranking_config import RankingConfig

PERIOD = 300_000_000
HEALTHY = (("n1", -0.5), ("n2", -0.4), ("n3", -0.6))


def feed(ranker: NodeRanker, period: int, slow: bool) -> None:
    """Ten samples per node inside period ``period`` (``[period·P, (period+1)·P)``); n0 slow or not."""
    for i in range(10):
        ts = period * PERIOD + i * PERIOD // 10
        for node, z in (("n0", 1.5 if slow else -0.5), *HEALTHY):
            ranker.update(NormalizedTask(f"j{period}-{i}", node, 0, node, ts, 1, z + 0.01 * (i % 3)))


def boundaries_listed(dwell: int, periods: int = 6) -> list[bool]:
    """Whether n0 is listed after each boundary; slow in the first period only (window = one period)."""
    ranker = NodeRanker(RankingConfig(window_size_us=PERIOD, period_us=PERIOD, max_fraction=0.5,
                                      min_dwell_periods=dwell))
    listed = []
    for period in range(periods):
        feed(ranker, period, slow=period == 0)
        ranker.decide((period + 1) * PERIOD)
        listed.append("n0" in ranker.blacklist.node_ids)
    return listed


@pytest.mark.parametrize("dwell", [0, 1, 2, 3])
def test_a_node_stays_listed_for_min_dwell_full_periods_after_the_period_it_was_added_in(dwell) -> None:
    # Added at the first boundary; it stops qualifying at once, so only dwell keeps it.
    assert boundaries_listed(dwell) == [True] * (dwell + 1) + [False] * (5 - dwell)


def test_one_period_of_dwell_is_not_the_same_as_none() -> None:
    assert boundaries_listed(1) != boundaries_listed(0)


def test_a_held_node_says_why_it_is_held() -> None:
    ranker = NodeRanker(RankingConfig(window_size_us=PERIOD, period_us=PERIOD, max_fraction=0.5,
                                      min_dwell_periods=1))
    feed(ranker, 0, slow=True)
    ranker.decide(PERIOD)
    feed(ranker, 1, slow=False)
    row = ranker.rank(2 * PERIOD).by_node()["n0"]
    assert row.blacklisted and row.reason.startswith("held")

"""Release and stability (issue 21): a listed node still slow is not released because a slower node appeared,
and under the cap the listed nodes keep their places."""

from __future__ import annotations

from streams.core.decision.policy import BlacklistPolicy
from streams.core.detection.base import Evidence, WindowView
from streams.core.events import NormalizedTask
from streams.core.ranker import NodeRanker
from streams.core.ranking_config import RankingConfig
from streams.core.windows import summarize

MIN = 60_000_000
HOUR = 60 * MIN


def view(nodes: int = 20) -> WindowView:
    return WindowView(0, HOUR, {f"n{i}": summarize(f"n{i}", [0.0, 0.1, -0.1, 0.05, 0.0]) for i in range(nodes)})


def test_a_listed_node_still_slow_stays_and_says_why() -> None:
    evidence = {"n1": Evidence("n1", False, 0.6, "not level 0 (level 1 of 3)", still_slow=True)}
    verdicts = BlacklistPolicy(RankingConfig(max_fraction=0.5)).judge(view(), evidence, listed={"n1": 0})
    assert verdicts["n1"].blacklisted
    assert verdicts["n1"].reason.startswith("held: still slow") and "level 1 of 3" in verdicts["n1"].reason


def test_a_listed_node_no_longer_slow_is_released() -> None:
    evidence = {"n1": Evidence("n1", False, 0.1, "recovered: mean +0.02", still_slow=False)}
    verdicts = BlacklistPolicy(RankingConfig(max_fraction=0.5)).judge(view(), evidence, listed={"n1": 0})
    assert not verdicts["n1"].blacklisted and verdicts["n1"].reason == "no longer qualifies: recovered: mean +0.02"


def test_under_the_cap_listed_suspects_keep_their_places() -> None:
    evidence = {"n1": Evidence("n1", True, 0.5, "slow", still_slow=True),
                "n2": Evidence("n2", True, 0.9, "slower", still_slow=True)}
    policy = BlacklistPolicy(RankingConfig(max_fraction=0.05))  # 20 nodes: one place
    verdicts = policy.judge(view(), evidence, listed={"n1": 0})
    assert verdicts["n1"].blacklisted and not verdicts["n2"].blacklisted
    assert verdicts["n2"].reason.startswith("over the cap")
    fresh = policy.judge(view(), evidence, listed={})  # with nobody listed, the most clearly slow is chosen
    assert fresh["n2"].blacklisted and not fresh["n1"].blacklisted


def test_pcores_keeps_a_slow_node_a_slower_one_pushed_off_level_zero() -> None:
    ranker = NodeRanker(RankingConfig(max_fraction=0.5))
    healthy = [f"h{i}" for i in range(6)]
    for minute in range(60):
        for k, node in enumerate(healthy):
            z = (-0.2, 0.1, -0.1)[(minute + k) % 3]
            ranker.update(NormalizedTask(f"j{minute}", node, 0, node, minute * MIN, 1, z))
        ranker.update(NormalizedTask(f"j{minute}", "b", 0, "b", minute * MIN, 1, 0.9 + 0.1 * (minute % 2)))
        if minute >= 30:  # a much slower node appears half an hour later
            ranker.update(NormalizedTask(f"j{minute}", "a", 0, "a", minute * MIN, 1, 3.0 + 0.1 * (minute % 2)))
        if minute == 29:
            assert [e.node_id for e in ranker.decide((minute + 1) * MIN).added] == ["b"]
    ranking = ranker.rank(HOUR)
    assert ranking.by_node()["b"].level == 1 and ranking.by_node()["a"].level == 0
    assert ranking.blacklist == {"a", "b"}
    assert ranking.by_node()["b"].reason.startswith("held: still slow")

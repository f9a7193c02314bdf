"""Blacklist policies (P-Cores evidence through the decision layer): every guard of SPEC 3, the cap, the top-k
boundary, dwell and release reasons."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.decision.policy import BlacklistPolicy
from streams.core.decision.registry import POLICIES
from streams.core.decision.selection import top_k_by_std_and_mean
from streams.core.detection.base import WindowView
from streams.core.ranking_config import RankingConfig
from streams.core.windows import NodeStats, summarize

PERIOD = 300_000_000
WINDOW = (0, 3_600_000_000)


def judge(config: RankingConfig, stats: dict[str, NodeStats], listed: dict[str, int] | None = None,
          window: tuple[int, int] = WINDOW):
    policy = POLICIES.get(config.policy)
    view = WindowView(window[0], window[1], stats)
    evidence = policy.detector(config).detect(view)
    return BlacklistPolicy(config, policy.select).judge(view, evidence, listed or {})


def node(name: str, center: float, n: int = 20, spread: float = 0.2) -> NodeStats:
    values = [center + spread * ((i % 5) - 2) / 2 for i in range(n)]
    return summarize(name, values)


def healthy_cluster(count: int = 20) -> dict[str, NodeStats]:
    return {f"h{i:02d}": node(f"h{i:02d}", -0.1 + 0.01 * (i % 5)) for i in range(count)}


def blacklisted(verdicts) -> set[str]:
    return {name for name, v in verdicts.items() if v.blacklisted}


# --- invariants ---------------------------------------------------------------------------------

configs = st.builds(
    RankingConfig,
    policy=st.sampled_from(["pcores", "pcores-top-k"]),
    min_tasks=st.integers(1, 8),
    significance_floor=st.one_of(st.none(), st.floats(-1, 1)),
    max_fraction=st.floats(0.01, 1.0),
    seed=st.integers(0, 5),
)
node_values = st.dictionaries(
    st.sampled_from([f"n{i}" for i in range(25)]),
    st.lists(st.floats(-3, 3, allow_nan=False), min_size=1, max_size=12),
    min_size=1,
)


@settings(max_examples=200, deadline=None)
@given(configs, node_values, st.sets(st.sampled_from([f"n{i}" for i in range(25)]), max_size=3))
def test_blacklist_never_exceeds_the_cap_and_respects_every_guard(config, values, deny) -> None:
    allow = {f"n{i}" for i in range(20, 25)} - deny
    config = replace(config, allow_list=frozenset(allow), deny_list=frozenset(deny))
    stats = {name: summarize(name, v) for name, v in values.items()}
    verdicts = judge(config, stats)
    chosen = blacklisted(verdicts)
    assert len(chosen) <= max(config.cap(len(stats)), len(deny))
    assert deny <= chosen and not (allow & chosen)
    floor = config.significance_floor
    for name in chosen - deny:
        s = stats[name]
        assert verdicts[name].eligible and s.n >= config.min_tasks
        assert floor is None or (s.ci_low is not None and s.ci_low > floor)
    assert judge(config, stats) == verdicts  # the same input gives the same output


# --- guards -------------------------------------------------------------------------------------


def test_a_clearly_slow_node_is_blacklisted_with_its_statistics_in_the_reason() -> None:
    stats = {**healthy_cluster(), "slow": node("slow", 1.2)}
    verdicts = judge(RankingConfig(), stats)
    assert blacklisted(verdicts) == {"slow"}
    assert "+1.20" in verdicts["slow"].reason and "level 0" in verdicts["slow"].reason


def test_too_few_samples_keep_a_slow_node_off() -> None:
    stats = {**healthy_cluster(), "slow": node("slow", 1.2, n=4)}
    verdicts = judge(RankingConfig(min_tasks=5), stats)
    assert blacklisted(verdicts) == set()
    assert verdicts["slow"].reason == "too few samples: n=4 < min_tasks 5"
    assert blacklisted(judge(RankingConfig(min_tasks=4), stats)) == {"slow"}


def test_the_significance_floor_keeps_a_barely_slow_node_off_unless_disabled() -> None:
    stats = {**healthy_cluster(), "meh": node("meh", 0.25, n=40, spread=0.1)}
    verdicts = judge(RankingConfig(significance_floor=0.25), stats)
    assert verdicts["meh"].reason.startswith("not clearly slow: ci_low")
    assert blacklisted(verdicts) == set()
    assert blacklisted(judge(RankingConfig(significance_floor=None), stats)) == {"meh"}


def test_when_all_intervals_overlap_nothing_is_blacklisted() -> None:
    stats = {name: node(name, 0.5, spread=2.0) for name in ("a", "b", "c")}
    verdicts = judge(RankingConfig(max_fraction=1.0, significance_floor=None), stats)
    assert blacklisted(verdicts) == set()
    assert verdicts["a"].reason == "all intervals overlap: no node is clearly slower than another"


def test_allow_list_wins_and_deny_list_needs_no_evidence() -> None:
    stats = {**healthy_cluster(), "slow": node("slow", 1.2)}
    verdicts = judge(RankingConfig(allow_list=frozenset({"slow"}), deny_list=frozenset({"gone"})), stats)
    assert blacklisted(verdicts) == {"gone"}
    assert verdicts["slow"].reason == "on the allow-list"
    assert verdicts["gone"].reason == "on the deny-list"


def test_pcores_keeps_the_most_clearly_slow_when_over_the_cap() -> None:
    # Three overlapping slow intervals, all on level 0.
    stats = {**healthy_cluster(18), "s1": node("s1", 1.0), "s2": node("s2", 1.05), "s3": node("s3", 1.1)}
    verdicts = judge(RankingConfig(max_fraction=0.1), stats)  # 21 nodes -> cap 2
    assert blacklisted(verdicts) == {"s2", "s3"}
    assert verdicts["s1"].reason.startswith("over the cap")


# --- top-k (DSB section 4.2.4) ------------------------------------------------------------------


def dsb_example() -> list[NodeStats]:
    """Ten level-0 nodes: by std M1..M10; by mean M1..M5, M7, M6, M8..M10."""
    means = {f"M{i}": 20.0 - i for i in range(1, 11)}
    means["M6"], means["M7"] = means["M7"], means["M6"]
    return [NodeStats(name, 30, means[name], 20.0 - i, 2.0, 3.0) for i, name in
            enumerate(f"M{i}" for i in range(1, 11))]


def test_top_k_takes_the_intersection_and_draws_the_sixth_from_the_boundary() -> None:
    draws = set()
    for seed in range(30):
        chosen, drawn = top_k_by_std_and_mean(dsb_example(), 6, random.Random(seed))
        assert drawn and len(chosen) == 6
        assert {"M1", "M2", "M3", "M4", "M5"} < chosen
        draws |= chosen - {"M1", "M2", "M3", "M4", "M5"}
    assert draws == {"M6", "M7"}  # both boundary nodes can be drawn, nothing else


def test_top_k_draw_is_seeded_and_prefers_nodes_already_listed() -> None:
    first = top_k_by_std_and_mean(dsb_example(), 6, random.Random(7))
    assert top_k_by_std_and_mean(dsb_example(), 6, random.Random(7)) == first
    for seed in range(10):
        chosen, _ = top_k_by_std_and_mean(dsb_example(), 6, random.Random(seed), prefer={"M7"})
        assert "M7" in chosen and "M6" not in chosen


def test_top_k_policy_fills_exactly_the_cap() -> None:
    slow = {f"s{i}": node(f"s{i}", 1.0 + 0.01 * i, spread=0.2 + 0.01 * i) for i in range(6)}
    stats = {**healthy_cluster(34), **slow}  # 40 nodes -> cap 4
    verdicts = judge(RankingConfig(policy="pcores-top-k"), stats)
    assert len(blacklisted(verdicts)) == 4 and blacklisted(verdicts) <= set(slow)
    assert "by std and mean" in verdicts[min(blacklisted(verdicts))].reason


# --- dwell and release --------------------------------------------------------------------------


def test_a_listed_node_is_held_for_min_dwell_then_released_with_the_reason() -> None:
    stats = {**healthy_cluster(), "fast": node("fast", -1.0), "was-slow": node("was-slow", -0.1)}
    config = RankingConfig(min_dwell_periods=3, period_us=PERIOD)
    added = WINDOW[1]
    for periods in (1, 2, 3):  # the period it was added in, then three full periods
        held = judge(config, stats, {"was-slow": added}, (0, added + periods * PERIOD))
        assert held["was-slow"].blacklisted and held["was-slow"].reason.startswith("held")
    released = judge(config, stats, {"was-slow": added}, (0, added + 4 * PERIOD))
    assert not released["was-slow"].blacklisted
    assert released["was-slow"].reason.startswith("no longer qualifies: not clearly slow: ci_low")


def test_a_listed_node_without_samples_leaves_for_lack_of_recent_evidence() -> None:
    verdicts = judge(RankingConfig(), healthy_cluster(), {"quiet": 0}, (PERIOD, 2 * PERIOD))
    assert not verdicts["quiet"].blacklisted
    assert verdicts["quiet"].reason.startswith("no recent evidence")


def test_a_window_shorter_than_the_period_is_refused() -> None:
    """The window slides one period per ranking: a shorter one would never rank the tasks in between."""
    with pytest.raises(ValueError, match=r"window \(60 s\) must be at least the ranking period \(600 s\)"):
        RankingConfig(window_size_us=60_000_000, period_us=600_000_000)
    assert RankingConfig(window_size_us=600_000_000, period_us=600_000_000).period_us == 600_000_000

"""The synthetic cluster's optional host heterogeneity (hetero, tiers)."""

from __future__ import annotations

import statistics
from collections import defaultdict

import pytest

from producers.registry import open_trace
from producers.synthetic import SyntheticConfig, parse_config
from streams.core.events import TaskFinish


def test_default_cluster_has_equal_hosts_and_no_heterogeneity_in_its_truth() -> None:
    trace = open_trace("synthetic:nodes=6,slow=0,jobs=3,tasks=4,seed=1")
    assert "host_stretch" not in trace.ground_truth


def test_tiers_run_slower_by_the_stated_stretch() -> None:
    trace = open_trace("synthetic:nodes=9,slow=0,jobs=60,tasks=30,hetero=2,tiers=3,seed=4")
    stretch = trace.ground_truth["host_stretch"]
    assert sorted(stretch.values()) == pytest.approx([1.0] * 3 + [2**0.5] * 3 + [2.0] * 3)
    durations: dict[float, list[float]] = defaultdict(list)
    for event in trace:
        if isinstance(event, TaskFinish):
            durations[round(stretch[event.node_id], 3)].append(event.duration_us)
    means = {tier: statistics.fmean(d) for tier, d in durations.items()}
    assert means[2.0] / means[1.0] == pytest.approx(2.0, rel=0.15)


def test_bad_heterogeneity_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="hetero"):
        parse_config("hetero=0.5")
    with pytest.raises(ValueError, match="tiers"):
        SyntheticConfig(tiers=0)

"""The drifting cluster ML-NA is measured on: its truth must be what its durations show."""

from __future__ import annotations

import statistics

import pytest

from producers.drifting import DriftingCluster, parse_config, weak_fraction
from producers.registry import open_trace
from streams.core.events import TaskFinish


def test_weak_spans_slow_the_tasks_that_start_in_them():
    cluster = DriftingCluster(parse_config("nodes=30,days=3,load=150,persistent=0.1,episodic=0.1,intermittent=0,"
                                           "slowdown=1.5,hetero=0,noise=0.1,tasks=30,seed=2"))
    truth = cluster.ground_truth
    spans = truth["weak_spans"]
    weak, healthy = [], []
    for event in cluster:
        if isinstance(event, TaskFinish):
            start = event.ts_us - event.duration_us
            slowed = any(s <= start < e for s, e, *_ in spans.get(event.node_id, ()))
            (weak if slowed else healthy).append(event.duration_us)
    # Same job-size distribution on every node: the ratio of mean durations is the slowdown, give or take noise.
    assert statistics.mean(weak) / statistics.mean(healthy) == pytest.approx(1.5, rel=0.15)
    assert sorted(truth["kinds"].values()).count("persistent") == 3


def test_kinds_have_the_shapes_they_promise():
    cluster = DriftingCluster(parse_config("nodes=100,days=30,seed=5"))
    truth = cluster.ground_truth
    end, day = truth["end_us"], truth["day_us"]
    for node, kind in truth["kinds"].items():
        share = weak_fraction(truth["weak_spans"][node], 0, end)
        if kind == "persistent":
            assert share == 1.0
        elif kind == "episodic":
            assert 1.5 * day / end <= share <= 12 * day / end + 1e-9  # one or two episodes of 2-6 days
        else:
            assert len(truth["weak_spans"][node]) > 20  # bursts of hours, on and off all month
    assert all(1.3 <= spans[0][2] <= 2.0 for spans in truth["weak_spans"].values())


def test_the_trace_format_is_registered_and_refuses_bad_keys():
    trace = open_trace("drifting:nodes=10,days=1,load=50,seed=1")
    assert sum(1 for _ in trace) > 0 and trace.ground_truth["nodes"] == 10
    with pytest.raises(ValueError, match="unknown key 'speed'"):
        open_trace("drifting:speed=2")
    with pytest.raises(ValueError, match="slowdown"):
        open_trace("drifting:slowdown=0.5")

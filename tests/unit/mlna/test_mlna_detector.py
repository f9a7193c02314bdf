"""MlnaDetector: periods close in event time, evidence explains itself, the life cycle survives a restore."""

from __future__ import annotations

import random

import pytest

from streams.core.detection.base import WindowView
from streams.core.detection.mlna import MlnaDetector
from streams.core.events import NormalizedTask

SUB = 10  # us per sub-period; 2 sub-periods per period
SLOW = {"n00", "n01"}


def feed(detector: MlnaDetector, periods: range, seed: int = 0) -> None:
    r = random.Random(seed)
    for period in periods:
        for i in range(30):
            for node in range(14):
                name = f"n{node:02d}"
                z = r.gauss(1.2 if name in SLOW else -0.2, 0.3)
                detector.learn(NormalizedTask("j", str(i), 0, name, period * 2 * SUB + i % (2 * SUB), 1, z))


def make() -> MlnaDetector:
    return MlnaDetector(sub_period_us=SUB, sub_periods=2, classifier="forest", seed=1)


def test_nothing_is_said_before_a_period_has_closed():
    detector = make()
    feed(detector, range(1))
    assert detector.detect(WindowView(0, 2 * SUB - 1, {})) == {}
    assert detector.detect(WindowView(0, 2 * SUB, {})) != {}


def test_slow_nodes_are_predicted_weak_with_a_reason_in_words():
    detector = make()
    feed(detector, range(3))
    evidence = detector.detect(WindowView(0, 6 * SUB, {}))
    assert {node for node, e in evidence.items() if e.suspect} == SLOW
    reason = evidence["n00"].reason
    assert reason.startswith("weak cluster ") and "in 3 of the last 3 periods" in reason
    assert "predicted weak next period with p = " in reason
    assert evidence["n00"].score >= 0.5 > evidence["n05"].score
    assert "not predicted weak" in evidence["n05"].reason


def test_samples_of_a_closed_period_are_late_and_provisional_ones_are_ignored():
    detector = make()
    feed(detector, range(1))
    detector.detect(WindowView(0, 2 * SUB, {}))
    detector.learn(NormalizedTask("j", "x", 0, "n00", 5, 1, 9.0))
    detector.learn(NormalizedTask("j", "y", 0, "n00", 25, 1, 9.0, provisional=True))
    assert detector.late_samples == 1
    assert detector.snapshot()["open"] == {}


def test_a_restored_detector_says_the_same_and_continues_the_same():
    original = make()
    feed(original, range(3))
    window = WindowView(0, 6 * SUB, {})
    before = original.detect(window)
    feed(original, range(3, 4), seed=9)
    restored = make()
    restored.restore(original.snapshot())
    assert restored.detect(window) == before
    later = WindowView(0, 8 * SUB, {})
    assert restored.detect(later) == original.detect(later)


def test_an_unreadable_snapshot_is_a_value_error():
    detector = make()
    with pytest.raises(ValueError):
        detector.restore({"version": 99})
    with pytest.raises(ValueError):
        detector.restore({"version": 1, "next": 0})


def test_each_closed_period_yields_one_node_class_per_node_once():
    detector = make()
    feed(detector, range(2))
    detector.detect(WindowView(0, 4 * SUB, {}))
    classes = detector.take_node_classes()
    assert len(classes) == 2 * 14 and detector.take_node_classes() == []
    last = {c.node_id: c for c in classes if c.period_start_us == 2 * SUB}
    assert last["n00"].weak and last["n00"].predicted_weak and last["n00"].cluster == last["n00"].weak_cluster
    assert not last["n05"].weak and last["n05"].weak_probability < 0.4
    assert last["n00"].tasks == 30 and last["n00"].mean_z > 0.8 > last["n05"].mean_z
    assert last["n00"].reason.startswith("weak cluster")

"""Node status at entry, the trees and the adviser: what a scheduler asking for advice would notice."""

from __future__ import annotations

import math

import numpy as np
import pytest

from producers.synthetic import SyntheticCluster, parse_config
from streams.core.avoidance.adviser import Adviser
from streams.core.avoidance.evaluation import (
    assess,
    choose_threshold,
    collect_samples,
    prequential_cart,
    stragglers_by_median,
)
from streams.core.avoidance.features import FEATURES, features
from streams.core.avoidance.status import NodeStatusTracker
from streams.core.avoidance.trees import CartTrees, regression_metrics
from streams.core.events import Status, TaskFinish, TaskStart

MIN = 60_000_000


def test_running_tasks_and_request_sums_follow_starts_and_finishes_and_peaks_expire() -> None:
    tracker = NodeStatusTracker()
    for i in range(3):
        tracker.update(TaskStart("j", str(i), 0, "n1", MIN * (i + 1), cpu_request=0.2, memory_request=0.1))
    for i in range(3):
        tracker.update(TaskFinish("j", str(i), 0, "n1", MIN * 10, MIN * (9 - i), Status.SUCCEEDED))
    idle = tracker.status("n1", MIN * 11)
    assert (idle.running, idle.cpu_requested) == (0, 0.0)
    assert (idle.running_peak_5m, idle.cpu_peak_5m, idle.running_peak_15m) == (3, 0.6, 3)
    later = tracker.status("n1", MIN * 20)  # 10 minutes after the peak: out of 5 min, inside 15 min
    assert (later.running_peak_5m, later.running_peak_15m) == (0, 3)
    assert tracker.status("n1", MIN * 30).running_peak_15m == 0
    assert tracker.status("never-seen", MIN).running == 0


def test_a_reschedule_without_an_end_replaces_the_earlier_attempt() -> None:
    tracker = NodeStatusTracker()
    tracker.update(TaskStart("j", "0", 0, "n1", MIN, cpu_request=0.5))
    tracker.update(TaskStart("j", "0", 1, "n2", 2 * MIN, cpu_request=0.5))  # the end of attempt 0 never came
    assert tracker.status("n1", 3 * MIN).running == 0
    assert tracker.status("n2", 3 * MIN).cpu_requested == 0.5
    tracker.update(TaskFinish("j", "0", 0, "n1", 4 * MIN, 3 * MIN, Status.KILLED))  # late end of the old attempt
    assert tracker.status("n2", 5 * MIN).running == 1


def _busy_tree() -> CartTrees:
    rng = np.random.default_rng(0)
    xs, ys = [], []
    for _ in range(600):
        running, cpu = int(rng.integers(0, 20)), float(rng.uniform(0, 1))
        xs.append({"running": float(running), "cpu_requested": cpu})
        ys.append(1.5 if running > 11 and cpu > 0.6 else -0.2)
    trees = CartTrees(max_depth=3, min_samples_leaf=20)
    trees.fit("map", xs, ys)
    return trees


def test_the_adviser_avoids_a_busy_node_and_says_why_in_the_trees_words() -> None:
    from streams.core.avoidance.status import NodeStatus

    adviser = Adviser(_busy_tree(), threshold=1.0)
    busy = adviser.advise("n7", "map", NodeStatus("n7", 0, running=14, cpu_requested=0.71))
    assert busy.verdict == "avoid"
    assert "running tasks 14 >" in busy.reason and "CPU requested 0.71 >" in busy.reason
    assert busy.reason.endswith("> +1.00")
    calm = adviser.advise("n7", "map", NodeStatus("n7", 0, running=3, cpu_requested=0.71))
    assert calm.verdict == "allow" and adviser.priority(calm) > adviser.priority(busy)
    assert adviser.advise("n7", "reduce", NodeStatus("n7", 0, running=14)).verdict == "allow"  # no tree: allow
    listed = Adviser(_busy_tree(), 1.0, listed={"n7"}).advise("n7", "map", NodeStatus("n7", 0))
    assert listed.verdict == "avoid" and "blacklist" in listed.reason


def test_metrics_are_relative_to_the_job_mean_baseline() -> None:
    truth = [-1.0, 0.5, 2.0, -1.5]
    assert regression_metrics(truth, [0.0] * 4).rae == pytest.approx(100.0)  # the baseline itself
    assert regression_metrics(truth, truth).rae == 0.0
    assert math.isnan(regression_metrics(truth, [0.3] * 4).corr)


@pytest.fixture(scope="module")
def loaded_cluster() -> list:  # type: ignore[type-arg]
    spec = "nodes=30,slow=0,jobs=160,shape=6,interarrival=45,load=2,seed=11"
    return collect_samples(SyntheticCluster(parse_config(spec)))


def test_on_a_load_dependent_cluster_the_trees_beat_the_job_mean_and_the_adviser_beats_chance(loaded_cluster) -> None:  # type: ignore[no-untyped-def]
    samples = loaded_cluster
    assert {s.task_type for s in samples} == {"compute", "memory"}
    predictions = prequential_cart(samples, 600_000_000, CartTrees(4, 50))
    scored = [s.start_us >= 3_600_000_000 and p is not None for s, p in zip(samples, predictions, strict=True)]
    pairs = [(s.z, p) for s, p, on in zip(samples, predictions, scored, strict=True) if on]
    assert regression_metrics([z for z, _ in pairs], [p for _, p in pairs]).rae < 90.0
    threshold = choose_threshold([p for p, on in zip(predictions, scored, strict=True) if on], 0.1)
    score = assess(samples, predictions, threshold, scored, stragglers_by_median(samples))
    assert score.refused_share <= 0.1 + 1e-9
    assert score.avoided_share > 2 * score.null_avoided_share  # far better than refusing at random
    assert score.jct_reduction is not None and score.null_reduction is not None
    assert score.jct_reduction > score.null_reduction


def test_features_cover_every_named_feature() -> None:
    from streams.core.avoidance.status import NodeStatus

    assert list(features(NodeStatus("n", 0))) == list(FEATURES)


def test_the_load_model_is_off_by_default_and_puts_requests_on_starts_when_on() -> None:
    plain = [e for e in SyntheticCluster(parse_config("nodes=6,slow=1,jobs=3,seed=2")) if isinstance(e, TaskStart)]
    assert all(e.cpu_request is None and e.task_type == "" for e in plain)
    loaded = [e for e in SyntheticCluster(parse_config("nodes=6,slow=1,jobs=3,seed=2,load=1"))
              if isinstance(e, TaskStart)]  # fmt: skip
    assert all(e.cpu_request is not None and e.task_type in ("compute", "memory") for e in loaded)
    with pytest.raises(ValueError, match="load must not be negative"):
        parse_config("load=-1")


def test_a_restored_tracker_carries_on_exactly_where_the_saved_one_stopped() -> None:
    import json

    events = [e for e in SyntheticCluster(parse_config("nodes=6,slow=0,jobs=40,interarrival=20,load=2,seed=3"))
              if isinstance(e, TaskStart | TaskFinish)]  # fmt: skip
    half = len(events) // 2
    kept = NodeStatusTracker()
    for event in events[:half]:
        kept.update(event)
    assert any(kept.status(n, events[half].ts_us).running for n in kept.nodes())  # saved mid-run, not idle
    restored = NodeStatusTracker.restore(json.loads(json.dumps(kept.snapshot())))
    for event in events[half:]:
        kept.update(event)
        restored.update(event)
        if event.ts_us % 7 == 0:
            assert restored.status(event.node_id, event.ts_us, "compute") == kept.status(event.node_id, event.ts_us,
                                                                                         "compute")  # fmt: skip
    end = events[-1].ts_us
    assert [restored.status(n, end) for n in kept.nodes()] == [kept.status(n, end) for n in kept.nodes()]


def test_a_snapshot_of_something_else_is_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="not a node-status snapshot"):
        NodeStatusTracker.restore({"format": "laggard-adapter-state/1"})
    with pytest.raises(ValueError, match="not a node-status snapshot"):
        NodeStatusTracker.restore({"format": "laggard-node-status/1", "recent_us": 1, "peak_us": 2,
                                   "score_window_us": 3, "nodes": {"n": {"running": [["j"]]}}})  # fmt: skip


def test_thresholds_per_type_keep_the_budget_and_avoid_at_least_as_many_as_one_threshold(loaded_cluster) -> None:  # type: ignore[no-untyped-def]
    from streams.core.avoidance.thresholds import TuningRun, choose_per_type, objective, refused_and_avoided

    samples = loaded_cluster
    predictions = prequential_cart(samples, 600_000_000, CartTrees(4, 50))
    keep = [i for i, s in enumerate(samples) if s.start_us >= 3_600_000_000]
    stragglers = stragglers_by_median(samples)
    run = TuningRun([predictions[i] for i in keep], [samples[i].task_type for i in keep], [stragglers[i] for i in keep])
    single = choose_threshold(run.predictions, 0.08)
    per_type = choose_per_type([run], 0.08, single)
    assert set(per_type) == {"compute", "memory"}
    refused, avoided = refused_and_avoided(run, per_type)
    assert refused <= 0.08
    assert avoided >= refused_and_avoided(run, dict.fromkeys(per_type, single))[1]
    assert objective([run], dict.fromkeys(per_type, -1e9), 0.08) is None  # refusing everything breaks the budget


def test_the_adviser_uses_its_task_types_own_threshold() -> None:
    trees = CartTrees(max_depth=1, min_samples_leaf=1)
    trees.fit("map", [{"running": float(r)} for r in range(20)], [0.0] * 11 + [0.8] * 9)
    adviser = Adviser(trees, threshold=1.0, thresholds={"map": 0.5})
    from streams.core.avoidance.status import NodeStatus

    advice = adviser.advise("n1", "map", NodeStatus("n1", 0, running=14))
    assert advice.verdict == "avoid" and advice.reason.endswith("expected z +0.80 > +0.50")
    assert Adviser(trees, threshold=1.0).advise("n1", "map", NodeStatus("n1", 0, running=14)).allowed


def test_the_load_models_contention_is_visible_in_the_features_at_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stretch the synthetic cluster imposes is a function of what the tracker sees at entry: the committed
    request of the resource the job type is bound by. So the trees' misses are the Pareto tail, not blindness."""
    from producers.synthetic_load import NodeLoad

    imposed: dict[tuple[str, int], float] = {}
    stretch = NodeLoad.stretch

    def recording(self: NodeLoad, node: int, at_us: int, task_type: str, cpu: float, memory: float) -> float:
        value = stretch(self, node, at_us, task_type, cpu, memory)
        imposed[(f"node-{node:02d}", at_us)] = value
        return value

    monkeypatch.setattr(NodeLoad, "stretch", recording)
    samples = collect_samples(SyntheticCluster(parse_config("nodes=30,slow=0,jobs=160,shape=6,interarrival=45,load=2,"
                                                            "seed=11")))  # fmt: skip
    seen = [1 + 2 * max(0.0, s.x["cpu_committed" if s.task_type == "compute" else "memory_committed"] - 1)
            for s in samples]  # fmt: skip
    truth = [imposed[(s.node_id, s.start_us)] for s in samples]
    assert sum(t > 1 for t in truth) > 0.05 * len(truth)  # contention is common enough to matter
    matched = sum(abs(a - b) < 1e-6 for a, b in zip(seen, truth, strict=True))
    assert matched >= 0.97 * len(truth)  # missed: tasks of a later job that started earlier (module doc)


def test_a_chance_of_straggling_spans_the_whole_priority_scale() -> None:
    """On --target p the scores ran 0-5 only (a z of 0, the job's mean, was mapped to 5): a node with no chance of
    straggling scored what a node nobody knew scored. A chance of 0 is now 10, the threshold 0."""
    from dataclasses import replace

    from streams.core.avoidance.status import NodeStatus

    adviser = Adviser(_busy_tree(), threshold=0.3, label="p")
    base = adviser.advise("n7", "map", NodeStatus("n7", 0, running=3))
    scores = [adviser.priority(replace(base, expected_z=p, threshold=0.3)) for p in (0.0, 0.15, 0.3, 0.6)]
    assert scores == [10, 5, 0, 0]

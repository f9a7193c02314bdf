"""Node-aware prediction learns, causally, which nodes are slow (issue #20)."""

from __future__ import annotations

from producers.synthetic import SyntheticCluster, SyntheticConfig
from streams.core.evaluation.runner import replay_jobs
from streams.core.prediction.base import PredictionContext
from streams.core.prediction.registry import build_method
from streams.core.prediction.threshold import JobP90


def test_the_evidence_ranks_the_injected_slow_nodes_first() -> None:
    cluster = SyntheticCluster(SyntheticConfig(nodes=20, slow=2, jobs=25, tasks=(20, 30), checkpoints=2, seed=4))
    jobs: dict[str, list] = {}
    for event in cluster:
        jobs.setdefault(event.job_id, []).append(event)
    method = build_method("hazard", PredictionContext())
    replay_jobs(method, jobs, {job_id: JobP90() for job_id in jobs})
    evidence = method.evidence  # type: ignore[attr-defined]
    nodes = sorted({e.node_id for events in jobs.values() for e in events if hasattr(e, "node_id")})
    ranked = sorted(nodes, key=evidence.slowness, reverse=True)
    assert sorted(ranked[:2]) == cluster.ground_truth["slow_nodes"]


def test_node_features_reach_h_only_in_the_node_aware_variant() -> None:
    from streams.core.events import TaskCheckpoint

    event = TaskCheckpoint("j", "t", 0, "n1", 5, 5, {"cpu": 1.0})
    plain = build_method("supervised", PredictionContext()).job("j", JobP90())
    aware = build_method("supervised-node", PredictionContext()).job("j", JobP90())
    assert "node_slowness" not in plain._vectors(event)[0]  # type: ignore[attr-defined]
    assert "node_slowness" in aware._vectors(event)[0]  # type: ignore[attr-defined]

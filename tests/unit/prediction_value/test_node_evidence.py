"""Node-aware prediction learns, causally, which nodes are slow (issue #20)."""

from __future__ import annotations

from dataclasses import replace

from producers.synthetic import SyntheticCluster, SyntheticConfig
from streams.core.evaluation.runner import replay_jobs
from streams.core.events import TaskCheckpoint
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
    event = TaskCheckpoint("j", "t", 0, "n1", 5, 5, {"cpu": 1.0})
    plain = build_method("supervised", PredictionContext()).job("j", JobP90())
    aware = build_method("supervised-node", PredictionContext()).job("j", JobP90())
    assert "node_slowness" not in plain._vectors(event)[0]  # type: ignore[attr-defined]
    assert "node_slowness" in aware._vectors(event)[0]  # type: ignore[attr-defined]


def test_node_slow_flags_tasks_on_the_injected_slow_nodes_without_reading_their_telemetry() -> None:
    cluster = SyntheticCluster(SyntheticConfig(nodes=20, slow=2, jobs=40, tasks=(20, 30), checkpoints=2, seed=5))
    jobs: dict[str, list] = {}
    for event in cluster:
        # the tasks report nothing about themselves: only where they run
        event = replace(event, features={}) if isinstance(event, TaskCheckpoint) else event
        jobs.setdefault(event.job_id, []).append(event)
    runs = replay_jobs(build_method("node-slow", PredictionContext()), jobs, {job_id: JobP90() for job_id in jobs})
    flagged = [f.node_id for run in runs.values() for f in run.flags]
    slow = set(cluster.ground_truth["slow_nodes"])
    # the 2 slow nodes of 20 run about a tenth of the tasks: by chance a tenth of the flags would land there
    assert len(flagged) > 60 and sum(node in slow for node in flagged) / len(flagged) > 0.85


def test_local_evidence_is_the_jobs_own_tasks_on_the_machine_and_the_nodes_recent_window() -> None:
    from streams.core.events import Status, TaskFinish
    from streams.core.prediction.nodes import NodeEvidence

    evidence = NodeEvidence(horizon_s=100.0)
    S = 1_000_000
    for i, (job, node, seconds, at) in enumerate([("a", "n1", 10, 10), ("a", "n2", 10, 11), ("a", "n3", 10, 12),
                                                  ("a", "n1", 30, 40), ("b", "n2", 10, 50), ("b", "n3", 10, 51),
                                                  ("b", "n4", 10, 52), ("b", "n2", 40, 500)]):  # fmt: skip
        evidence.learn(TaskFinish(job, str(i), 0, node, at * S, seconds * S, Status.SUCCEEDED))
    # job a's own slow task on n1 is evidence for a's next task there, not for job b's
    assert evidence.local("n1", "a", 60.0)["node_job_slowness"] > 0.3
    assert evidence.local("n1", "b", 60.0)["node_job_slowness"] == 0.0
    # n2's slow finish at 500 s is in its recent window at 550 s; n1's at 40 s has left it by then
    assert evidence.local("n2", "b", 550.0)["node_window_z"] > 0.3
    assert evidence.local("n1", "b", 550.0) == {"node_job_slowness": 0.0, "node_window_z": 0.0, "node_window_n": 0.0}

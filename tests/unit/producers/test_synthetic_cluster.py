"""The synthetic cluster: deterministic, time-ordered, and its slow nodes are visibly slow after the onset."""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from producers.synthetic import SyntheticCluster, parse_config
from streams.core.events import Event, JobFinish, JobStart, Status, TaskCheckpoint, TaskFinish, TaskStart, validate


def _events(spec: str) -> tuple[list[Event], SyntheticCluster]:
    cluster = SyntheticCluster(parse_config(spec))
    return list(cluster), cluster


def _node_z(events: list[Event], started_from_us: int = 0, before_us: int | None = None) -> dict[str, list[float]]:
    """DSB's normalised values per node (population std per job), from successful attempts only."""
    by_job: dict[str, list[TaskFinish]] = defaultdict(list)
    for event in events:
        if isinstance(event, TaskFinish) and event.succeeded:
            by_job[event.job_id].append(event)
    per_node: dict[str, list[float]] = defaultdict(list)
    for finishes in by_job.values():
        durations = np.array([f.duration_us for f in finishes], dtype=float)
        if len(durations) < 2 or durations.std() == 0:
            continue
        z = (durations - durations.mean()) / durations.std()
        for finish, value in zip(finishes, z, strict=True):
            start = finish.ts_us - finish.duration_us
            if start >= started_from_us and (before_us is None or finish.ts_us < before_us):
                per_node[finish.node_id].append(float(value))
    return per_node


def _slowest(per_node: dict[str, list[float]], count: int) -> list[str]:
    return sorted(sorted(per_node, key=lambda n: -np.mean(per_node[n]))[:count])


@pytest.mark.parametrize("contention", ["cpu", "memory"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_three_slow_nodes_of_forty_have_the_highest_mean_z(seed: int, contention: str) -> None:
    events, cluster = _events(f"nodes=40,slow=3,jobs=200,seed={seed},contention={contention}")
    per_node = _node_z(events)
    assert _slowest(per_node, 3) == cluster.ground_truth["slow_nodes"]
    slow = [np.mean(per_node[n]) for n in cluster.ground_truth["slow_nodes"]]
    healthy = [np.mean(z) for n, z in per_node.items() if n not in cluster.ground_truth["slow_nodes"]]
    assert min(slow) > max(healthy) + 0.5  # clearly, not by a hair


def test_memory_contention_spreads_z_values_more_than_cpu_contention() -> None:
    spreads = {}
    for kind in ("cpu", "memory"):
        events, cluster = _events(f"nodes=40,slow=3,jobs=300,seed=5,contention={kind}")
        per_node = _node_z(events)
        spreads[kind] = np.mean([np.std(per_node[n]) for n in cluster.ground_truth["slow_nodes"]])
    assert spreads["memory"] > spreads["cpu"]


def test_slow_nodes_are_normal_before_the_onset() -> None:
    events, cluster = _events("nodes=20,slow=2,jobs=400,seed=7,interarrival=20,onset=4000")
    onset = cluster.ground_truth["onset_us"]
    slow = cluster.ground_truth["slow_nodes"]
    before = _node_z(events, before_us=onset)
    after = _node_z(events, started_from_us=onset)
    assert max(np.mean(before[n]) for n in slow) < 0.3
    assert min(np.mean(after[n]) for n in slow) > 0.5
    assert _slowest(after, 2) == slow


def test_the_same_seed_gives_the_same_events_and_another_seed_others() -> None:
    spec = "nodes=10,slow=1,jobs=30,tasks=5-9,seed=11,checkpoints=2,fail=0.1"
    assert _events(spec)[0] == _events(spec)[0]
    assert _events(spec)[0] != _events(spec.replace("seed=11", "seed=12"))[0]


@settings(max_examples=25, deadline=None)
@given(
    nodes=st.integers(1, 12),
    jobs=st.integers(1, 8),
    low=st.integers(1, 5),
    extra=st.integers(0, 5),
    checkpoints=st.integers(0, 3),
    fail=st.sampled_from([0.0, 0.3]),
    onset=st.sampled_from([0, 50, 5000]),
    seed=st.integers(0, 1000),
)
def test_any_cluster_is_time_ordered_valid_and_complete(
    nodes: int, jobs: int, low: int, extra: int, checkpoints: int, fail: float, onset: int, seed: int
) -> None:
    spec = (
        f"nodes={nodes},slow={nodes // 3},jobs={jobs},tasks={low}-{low + extra},seed={seed},"
        f"checkpoints={checkpoints},fail={fail},onset={onset},contention=memory"
    )
    events, _ = _events(spec)
    assert all(a.ts_us <= b.ts_us for a, b in itertools.pairwise(events))
    assert all(validate(e) is None for e in events)
    declared = {e.job_id: e.declared_tasks for e in events if isinstance(e, JobStart)}
    succeeded: dict[str, set[str]] = defaultdict(set)
    open_attempts: set[tuple[str, str, int]] = set()
    for event in events:
        key = (event.job_id, getattr(event, "task_id", ""), getattr(event, "attempt", 0))
        if isinstance(event, TaskStart):
            open_attempts.add(key)
        elif isinstance(event, TaskCheckpoint):
            assert key in open_attempts
        elif isinstance(event, TaskFinish):
            open_attempts.remove(key)
            if event.status is Status.SUCCEEDED:
                succeeded[event.job_id].add(event.task_id)
        elif isinstance(event, JobFinish):
            assert len(succeeded[event.job_id]) == declared[event.job_id]  # the job ends after its tasks
    assert not open_attempts
    assert len(declared) == jobs


def test_failed_attempts_are_retried_on_another_node() -> None:
    events, _ = _events("nodes=5,slow=0,jobs=20,tasks=10,seed=3,fail=0.5")
    failed = [e for e in events if isinstance(e, TaskFinish) and e.status is Status.FAILED]
    assert failed
    retries = {(e.job_id, e.task_id): e for e in events if isinstance(e, TaskStart) and e.attempt == 1}
    for failure in failed:
        retry = retries[(failure.job_id, failure.task_id)]
        assert retry.node_id != failure.node_id and retry.ts_us == failure.ts_us


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nodes=0", "nodes must be at least 1"),
        ("jobs=0", "jobs must be at least 1"),
        ("nodes=4,slow=5", r"slow \(5, the slow nodes; default 3\) must be between 0 and nodes \(4\)"),
        ("nodes=2", r"slow \(3, the slow nodes; default 3\) must be between 0 and nodes \(2\)"),  # slow not given
        ("tasks=9-3", "tasks must be"),
        ("contention=disk", "contention must be one of cpu, memory"),
        ("shape=1", "shape"),
        ("nodes=many", "bad value for nodes"),
        ("speed=3", "unknown key 'speed'"),
        ("onset=nan", "bad value for onset"),
    ],
)
def test_bad_keys_and_values_are_named(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_config(spec)

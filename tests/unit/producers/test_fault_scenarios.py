"""The fault-scenario simulator: deterministic, faults where and when the ground truth says, placement honoured."""

from __future__ import annotations

import math
import statistics

import pytest

from producers.registry import open_trace
from producers.scenario_suite import SCENARIOS
from producers.scenarios import ClusterSim, Fault, Scenario
from streams.core.events import JobStart, TaskCheckpoint, TaskFinish, TaskStart, validate

H = 3_600_000_000


def _small(name: str, **changes: object) -> Scenario:
    return SCENARIOS[name].scaled(**({"nodes": 20, "hours": 3.0} | changes))


def _durations(events: list, nodes: set[str], start_from: int, start_before: int) -> list[float]:
    return [e.duration_us for e in events if isinstance(e, TaskFinish) and e.node_id in nodes
            and start_from <= e.ts_us - e.duration_us and e.ts_us < start_before]


def test_same_seed_same_events_and_valid_time_ordered_events() -> None:
    scenario = _small("cpu-2x")
    events = list(ClusterSim(scenario, 3))
    assert events == list(ClusterSim(scenario, 3))
    assert events != list(ClusterSim(scenario, 4))
    assert all(validate(e) is None for e in events)
    assert [e.ts_us for e in events] == sorted(e.ts_us for e in events)
    starts = sum(isinstance(e, TaskStart) for e in events)
    assert starts == sum(isinstance(e, TaskFinish) for e in events) > 1000


def test_cpu_fault_doubles_durations_only_while_active() -> None:
    sim = ClusterSim(_small("cpu-2x", nodes=30, hours=4.0), 1)
    events = list(sim)
    faulty = set(sim.ground_truth["slow_nodes"])
    healthy = {f"node-{i:02d}" for i in range(30)} - faulty
    during = statistics.fmean(_durations(events, faulty, 1 * H, 3 * H)) / statistics.fmean(
        _durations(events, healthy, 1 * H, 3 * H))
    before = statistics.fmean(_durations(events, faulty, 0, 1 * H)) / statistics.fmean(
        _durations(events, healthy, 0, 1 * H))
    assert 1.6 < during < 2.5
    assert 0.7 < before < 1.3
    assert sim.ground_truth["slow_spans"] == {node: [(1 * H, 3 * H)] for node in faulty}


def test_intermittent_and_gradual_faults_have_their_shapes_in_the_truth() -> None:
    blinking = ClusterSim(_small("intermittent-2x"), 1).ground_truth["slow_spans"]
    spans = next(iter(blinking.values()))
    assert spans == [(1 * H, 3 * H // 2), (2 * H, 5 * H // 2), (3 * H, 7 * H // 2)]  # 30 min on, 30 off to 4 h
    ramp = Fault(1, 3.0, onset_h=1, ramp_h=2).stretches(5.0)
    assert ramp[0] == (1 * H, pytest.approx(1 + 2 / 12)) and ramp[-1][1] == 3.0
    gradual = ClusterSim(_small("gradual-3x"), 1).ground_truth["slow_spans"]
    assert len(gradual) == 3 and all(spans == [(1 * H, None)] for spans in gradual.values())


def test_healthy_hardware_generations_are_not_faults() -> None:
    sim = ClusterSim(_small("hetero-24h", hours=2.0), 1)
    truth = sim.ground_truth
    assert truth["slow_spans"] == {} and truth["slow_nodes"] == []
    assert sorted(set(truth["hardware"].values())) == [0.95, 1.05]


def test_a_node_the_scheduler_refuses_gets_no_task_while_refused() -> None:
    refused, until = "node-03", 2 * H
    scenario = _small("cpu-2x")
    closed = ClusterSim(scenario, 1, lambda nodes, now: [n for n in nodes if n != refused or now >= until])
    events = list(closed)
    assert not [e for e in events if isinstance(e, TaskStart) and e.node_id == refused and e.ts_us < until]
    assert [e for e in events if isinstance(e, TaskStart) and e.node_id == refused and e.ts_us >= until]
    # the same jobs arrive with the same tasks: only placement differs from the open loop
    opened = list(ClusterSim(scenario, 1))
    assert [e for e in events if isinstance(e, JobStart)] == [e for e in opened if isinstance(e, JobStart)]


def test_the_scenario_trace_format() -> None:
    trace = open_trace("scenario:cpu-2x,seed=2,nodes=12,hours=0.5")
    events = list(trace)
    assert trace.jobs > 0 and len(trace.ground_truth["slow_nodes"]) == 2
    assert events == list(open_trace("scenario:cpu-2x,seed=2,nodes=12,hours=0.5"))
    for bad in ("scenario:nope", "scenario:cpu-2x,nodes=1", "scenario:cpu-2x,colour=red", "scenario:"):
        with pytest.raises(ValueError, match="scenario"):
            open_trace(bad)


def _reports(noise: float) -> tuple[dict[tuple[str, str], list[tuple[int, float]]], ClusterSim]:
    scenario = Scenario("t", "", nodes=4, rate=60, hours=2, faults=(Fault(1, 2.0, onset_h=1),), checkpoints=8,
                        progress_noise=noise)
    sim = ClusterSim(scenario, 5)
    reports: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for e in sim:
        if isinstance(e, TaskCheckpoint):
            reports.setdefault((e.job_id, e.task_id, e.node_id), []).append((e.ts_us, e.features["progress"]))
    return reports, sim


def test_progress_of_a_task_running_at_the_onset_slows_at_the_onset_and_is_reported_with_noise() -> None:
    exact, sim = _reports(0.0)
    slow, onset = sim.ground_truth["slow_nodes"][0], 3_600_000_000
    ratios = []
    for (_, _, node), points in exact.items():
        before = [(t, p) for t, p in points if t <= onset]
        after = [(t, p) for t, p in points if t > onset]
        if node == slow and len(before) >= 2 and len(after) >= 2:
            rate = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in (before[-2:], after[:2])]
            ratios.append(rate[1] / rate[0])
    assert ratios and all(abs(r - 0.5) < 0.01 for r in ratios)  # exactly half the rate from the onset on
    noisy, _ = _reports(0.2)
    assert noisy.keys() == exact.keys()  # the same tasks report at the same times, only the values differ
    errors = [math.log(q / p) for key in exact for (_, p), (_, q) in zip(exact[key], noisy[key], strict=True)
              if 0.05 < p < 0.95]
    assert 0.05 < statistics.pstdev(errors) < 0.5

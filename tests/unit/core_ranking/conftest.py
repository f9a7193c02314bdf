"""A small generated cluster and an independent (numpy/scipy, brute force) reference for the ranking tests."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable

import numpy as np
import pytest
from scipy import stats as scipy_stats

from streams.core.events import Event, JobFinish, NormalizedTask, Status, TaskFinish
from streams.core.zscore import JobNormalizer


def generate_cluster(nodes: int = 40, slow: Iterable[str] = (), slowdown: float = 1.8, jobs: int = 200,
                     tasks: tuple[int, int] = (20, 60), seed: int = 0) -> list[Event]:
    """Jobs of Pareto-tailed tasks on uniformly drawn nodes; work on a ``slow`` node takes ``slowdown`` x."""
    rng = random.Random(seed)
    slow = set(slow)
    names = [f"n{i:02d}" for i in range(nodes)]
    events: list[Event] = []
    arrival = 1
    for job in range(jobs):
        arrival += int(rng.expovariate(1 / 30.0) * 1e6)
        size = 60.0 * math.exp(rng.gauss(0.0, 0.5))
        end = arrival
        for task in range(rng.randint(*tasks)):
            node = rng.choice(names)
            duration = int(size * rng.paretovariate(3.0) * (slowdown if node in slow else 1.0) * 1e6)
            start = arrival + int(rng.uniform(0, 2) * 1e6)
            finish = TaskFinish(f"j{job}", f"t{task}", 0, node, start + duration, duration, Status.SUCCEEDED)
            events.append(finish)
            end = max(end, start + duration)
        events.append(JobFinish(f"j{job}", end))
    events.sort(key=lambda e: (e.ts_us, isinstance(e, JobFinish)))
    return events


def normalize_all(events: Iterable[Event]) -> list[NormalizedTask]:
    normalizer = JobNormalizer(job_idle_timeout_us=2**62)
    samples = [sample for event in events for sample in normalizer.update(event)]
    return samples + normalizer.flush()


def reference_z(events: Iterable[Event]) -> dict[tuple[str, str], float]:
    """Batch z-values: numpy over each job's first successful attempt per task."""
    durations: dict[str, dict[str, int]] = defaultdict(dict)
    for e in events:
        if isinstance(e, TaskFinish) and e.status is Status.SUCCEEDED:
            durations[e.job_id].setdefault(e.task_id, e.duration_us)
    out: dict[tuple[str, str], float] = {}
    for job, by_task in durations.items():
        d = np.array(list(by_task.values()), dtype=float)
        if len(d) >= 2 and np.std(d) > 0:
            for task, z in zip(by_task, (d - d.mean()) / d.std(), strict=True):
                out[(job, task)] = float(z)
    return out


Stats = tuple[int, float, float, float | None, float | None]


def reference_node_stats(values_by_node: dict[str, list[float]]) -> dict[str, Stats]:
    """n, mean, population std and the Student-t 95 % interval with numpy and scipy."""
    out = {}
    for node, values in values_by_node.items():
        v = np.array(values)
        n, mean, std = len(v), float(v.mean()), float(v.std())
        if n < 2:
            out[node] = (n, mean, std, None, None)
        else:
            half = float(scipy_stats.t.ppf(0.975, n - 1)) * std / math.sqrt(n)
            out[node] = (n, mean, std, mean - half, mean + half)
    return out


def brute_force_levels(intervals: dict[str, tuple[float, float]]) -> dict[str, int]:
    """DSB Algorithm 3 literally: all edges, then peel the nodes without outgoing edge, level by level."""
    def edge(a: str, b: str) -> bool:
        (al, ah), (bl, bh) = intervals[a], intervals[b]
        return a != b and ah <= bl and not (al == ah == bl == bh)

    out = {a: {b for b in intervals if edge(a, b)} for a in intervals}
    remaining, levels, level = set(intervals), {}, 0
    while remaining:
        sinks = {a for a in remaining if not out[a] & remaining}
        assert sinks, "a cycle: Algorithm 3 would not terminate"
        levels.update(dict.fromkeys(sinks, level))
        remaining -= sinks
        level += 1
    return levels


class Reference:
    """The independent computations, handed to tests as one fixture."""

    generate_cluster = staticmethod(generate_cluster)
    normalize_all = staticmethod(normalize_all)
    z = staticmethod(reference_z)
    node_stats = staticmethod(reference_node_stats)
    levels = staticmethod(brute_force_levels)


@pytest.fixture(scope="session")
def ref() -> type[Reference]:
    return Reference

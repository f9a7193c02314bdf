"""A generated cluster whose nodes' performance drifts over many days (format ``drifting:key=value,...``).

``synthetic`` holds one fault for the whole trace; ML-NA (SPEC 6) learns how nodes change from one period
to the next, so this cluster has many "days" and nodes that are weak for a while:

* ``nodes`` machines ``node-000``..; healthy nodes differ a little (log-normal speed factor, sigma
  ``hetero``), as homogeneous hardware does in practice (the paper's OpenCloud nodes were identical yet not
  equally fast).
* Three kinds of weak nodes, drawn with the seed; a weak node's tasks run ``slowdown`` times slower, one
  factor per node drawn from the range ``slowdown`` (default 1.3-2.0):
  ``persistent`` (fraction of nodes) weak for the whole trace; ``episodic`` (fraction) weak for one or two
  episodes of ``episode`` days (a range) that start at any hour, then recover; ``intermittent`` (fraction)
  alternate weak and healthy bursts of a few hours (mean ``burst`` hours weak), weak for a share of the time
  drawn per node from 0.4-0.8, so some days they are weak most of the day and some days not.
* ``load`` tasks per node per day on average; jobs of ``tasks`` tasks (N or LO-HI) arrive as a Poisson
  stream; each task lands on a node drawn uniformly. Work is ``t_min * Pareto(shape)`` (``t_min`` a job's
  size, ``scale`` seconds times a log-normal job factor); each task is also stretched by log-normal noise
  (sigma ``noise``), so one slow task says little and a node's weakness shows only in many of its tasks.
* A task runs at the speed its node has when it starts.

``ground_truth`` holds every weak span ``[start_us, end_us, slowdown, kind]`` per node, the kinds, and the
length of a day in microseconds: the truth a classifier of "weak next period" is scored against.

>>> cluster = DriftingCluster(parse_config("nodes=20,days=2,load=10,seed=3"))
>>> events = list(cluster)
>>> events == list(DriftingCluster(parse_config("nodes=20,days=2,load=10,seed=3")))
True
>>> sorted(cluster.ground_truth["kinds"].items())[:2]
[('node-05', 'episodic'), ('node-12', 'persistent')]
>>> weak_fraction(cluster.ground_truth["weak_spans"]["node-12"], 0, cluster.ground_truth["day_us"] * 2)
1.0
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any

from producers.keyvalues import parse_key_values
from producers.readers.common import RANK, US_PER_S
from streams.core.events import Event, JobFinish, JobStart, Status, TaskFinish, TaskStart

_JOB_SIGMA = 0.5
_LAUNCH_DELAY_S = 2.0
_HOUR_S = 3600.0
KINDS = ("persistent", "episodic", "intermittent")


@dataclass(frozen=True)
class DriftingConfig:
    """The keys of ``drifting:key=value,...``; ``day`` in seconds, ``episode`` in days, ``burst`` in hours."""

    nodes: int = 200
    days: float = 30.0
    day: float = 86_400.0
    load: float = 80.0
    tasks: tuple[int, int] = (20, 60)
    seed: int = 0
    persistent: float = 0.03
    episodic: float = 0.08
    intermittent: float = 0.02
    slowdown: tuple[float, float] = (1.3, 2.0)
    episode: tuple[float, float] = (2.0, 6.0)
    burst: float = 6.0
    hetero: float = 0.05
    noise: float = 0.2
    shape: float = 3.0
    scale: float = 60.0

    def __post_init__(self) -> None:
        problems = [
            self.nodes < 2 and "nodes must be at least 2",
            self.days <= 0 and "days must be positive",
            self.day <= 0 and "day must be positive (seconds)",
            self.load <= 0 and "load must be positive (tasks per node per day)",
            not 1 <= self.tasks[0] <= self.tasks[1] and "tasks must be N or LO-HI with 1 <= LO <= HI",
            any(not 0 <= f <= 1 for f in (self.persistent, self.episodic, self.intermittent))
            and "persistent, episodic and intermittent are fractions of the nodes (0..1)",
            self.persistent + self.episodic + self.intermittent > 1 and "the weak fractions add up to more than 1",
            not 1 <= self.slowdown[0] <= self.slowdown[1] and "slowdown must be X or LO-HI with 1 <= LO <= HI",
            not 0 < self.episode[0] <= self.episode[1] and "episode must be X or LO-HI days with 0 < LO <= HI",
            self.burst <= 0 and "burst must be positive (hours)",
            (self.hetero < 0 or self.noise < 0) and "hetero and noise must not be negative",
            self.shape <= 1 and "shape (Pareto beta) must exceed 1",
            self.scale <= 0 and "scale must be positive",
        ]
        for problem in problems:
            if problem:
                raise ValueError(f"drifting: {problem}")


KEYS = tuple(f.name for f in fields(DriftingConfig))
_RANGES = {"tasks": int, "slowdown": float, "episode": float}


def parse_config(text: str) -> DriftingConfig:
    """``"nodes=200,days=30,slowdown=1.3-2"`` -> DriftingConfig; ValueError names the bad key or value."""
    return DriftingConfig(**parse_key_values(text, "drifting", KEYS, _convert))


def _convert(key: str, raw: str) -> Any:
    if key in _RANGES:
        low, _, high = raw.partition("-")
        return (_RANGES[key](low), _RANGES[key](high or low))
    return type(getattr(DriftingConfig, key))(raw)


def weak_fraction(spans: Sequence[Sequence[float]], start_us: int, end_us: int) -> float:
    """The share of ``[start_us, end_us)`` a node spent weak, from its ground-truth spans."""
    covered = sum(max(0.0, min(end_us, s[1]) - max(start_us, s[0])) for s in spans)
    return covered / (end_us - start_us) if end_us > start_us else 0.0


class DriftingCluster:
    """Iterable over the events of a drifting cluster; ``ground_truth`` holds every weak span."""

    def __init__(self, config: DriftingConfig) -> None:
        self.config = config
        self.node_names = [f"node-{i:0{len(str(config.nodes - 1))}d}" for i in range(config.nodes)]
        self.end_us = round(config.days * config.day * US_PER_S)
        rng = random.Random(f"{config.seed}/nodes")
        self.speed = [math.exp(rng.gauss(0.0, config.hetero)) for _ in range(config.nodes)]
        order = rng.sample(range(config.nodes), config.nodes)
        counts = [round(f * config.nodes) for f in (config.persistent, config.episodic, config.intermittent)]
        self.kinds: dict[int, str] = {}
        for kind, count in zip(KINDS, counts, strict=True):
            for node in order[:count]:
                self.kinds[node] = kind
            order = order[count:]
        self.spans: dict[int, list[tuple[int, int, float]]] = {
            node: self._spans(rng, kind) for node, kind in sorted(self.kinds.items())
        }

    def _spans(self, rng: random.Random, kind: str) -> list[tuple[int, int, float]]:
        config, day_us = self.config, config_day_us(self.config)
        factor = rng.uniform(*config.slowdown)
        if kind == "persistent":
            return [(0, self.end_us, factor)]
        if kind == "episodic":
            spans = []
            for _ in range(rng.choice((1, 1, 2))):
                start = rng.uniform(0, self.end_us)
                length = rng.uniform(*config.episode) * day_us
                spans.append((round(start), min(self.end_us, round(start + length)), factor))
            return _merge(spans)
        share = rng.uniform(0.4, 0.8)
        on_mean, off_mean = config.burst * _HOUR_S * US_PER_S, config.burst * _HOUR_S * US_PER_S * (1 - share) / share
        spans, t = [], rng.expovariate(1 / off_mean)
        while t < self.end_us:
            length = rng.expovariate(1 / on_mean)
            spans.append((round(t), min(self.end_us, round(t + length)), factor))
            t += length + rng.expovariate(1 / off_mean)
        return spans

    @property
    def ground_truth(self) -> dict[str, Any]:
        return {
            "nodes": self.config.nodes,
            "day_us": config_day_us(self.config),
            "end_us": self.end_us,
            "kinds": {self.node_names[n]: kind for n, kind in sorted(self.kinds.items())},
            "weak_spans": {
                self.node_names[n]: [[s, e, round(f, 3), self.kinds[n]] for s, e, f in spans]
                for n, spans in self.spans.items()
            },
            "slow_nodes": [self.node_names[n] for n in sorted(self.kinds)],
        }

    def stretch(self, node: int, at_us: int) -> float:
        """How much slower than nominal a task started on ``node`` at ``at_us`` runs (noise aside)."""
        for start, end, factor in self.spans.get(node, ()):
            if start <= at_us < end:
                return factor * self.speed[node]
        return self.speed[node]

    def __iter__(self) -> Iterator[Event]:
        config = self.config
        rng = random.Random(f"{config.seed}/events")
        mean_tasks = (config.tasks[0] + config.tasks[1]) / 2
        jobs_per_s = config.nodes * config.load / mean_tasks / config.day
        pending: list[tuple[int, int, int, int, Event]] = []
        arrival_s, job = rng.expovariate(jobs_per_s), 0
        while arrival_s * US_PER_S < self.end_us:
            arrival_us = round(arrival_s * US_PER_S) + 1
            while pending and pending[0][0] < arrival_us:
                yield heapq.heappop(pending)[-1]
            for item in self._job(rng, job, arrival_us):
                heapq.heappush(pending, item)
            arrival_s += rng.expovariate(jobs_per_s)
            job += 1
        while pending:
            yield heapq.heappop(pending)[-1]

    def _job(self, rng: random.Random, job: int, arrival_us: int) -> list[tuple[int, int, int, int, Event]]:
        config = self.config
        count = rng.randint(*config.tasks)
        job_id = f"job-{job:06d}"
        t_min = config.scale * math.exp(rng.gauss(0.0, _JOB_SIGMA))
        events: list[Event] = [JobStart(job_id, arrival_us, declared_tasks=count)]
        for task in range(count):
            node = rng.randrange(config.nodes)
            start = arrival_us + round(rng.uniform(0, _LAUNCH_DELAY_S) * US_PER_S)
            work = t_min * rng.paretovariate(config.shape) * math.exp(rng.gauss(0.0, config.noise))
            duration = max(1, round(work * self.stretch(node, start) * US_PER_S))
            name = self.node_names[node]
            events.append(TaskStart(job_id, str(task), 0, name, start))
            events.append(TaskFinish(job_id, str(task), 0, name, start + duration, duration, Status.SUCCEEDED))
        events.append(JobFinish(job_id, max(e.ts_us for e in events)))
        return [(e.ts_us, RANK[type(e)], job, i, e) for i, e in enumerate(events)]


def config_day_us(config: DriftingConfig) -> int:
    """One "day" of the cluster in microseconds."""
    return round(config.day * US_PER_S)


def _merge(spans: list[tuple[int, int, float]]) -> list[tuple[int, int, float]]:
    merged: list[tuple[int, int, float]] = []
    for start, end, factor in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]), factor)
        else:
            merged.append((start, end, factor))
    return merged

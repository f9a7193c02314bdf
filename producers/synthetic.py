"""A generated cluster with known slow nodes (format ``synthetic:key=value,...``): ground truth for ranking.

Model, kept simple on purpose so that a reader can predict what the detectors should find:

* ``nodes`` equal machines named ``node-00``..; ``slow`` of them, drawn with the seed, suffer contention
  from ``onset`` seconds on (DSB section 5 injected CPU- or memory-hogging programs into some VMs).
* ``jobs`` arrive one after another with exponential gaps (mean ``interarrival`` seconds). A job has
  ``tasks`` tasks (a number, or a range ``lo-hi`` drawn uniformly); they start together, each after a small
  launch delay, each on a node drawn uniformly at random.
* Durations are heavy-tailed as Hawkeye assumes (its section 3): a task's nominal work is
  ``t_min * Pareto(shape)`` seconds, ``t_min`` being the job's size: ``scale`` times a log-normal job factor
  (sigma 0.5), so jobs differ in size while tasks within a job differ by the Pareto tail alone.
* Contention stretches the part of a task's work done on a slow node after the onset:
  ``cpu`` -- the task gets ``1/slowdown`` of its core, a constant stretch by ``slowdown``;
  ``memory`` -- paging hits tasks unevenly: each task's stretch is ``1 + (slowdown - 1) * E`` with
  ``E ~ Exp(1)``, the same mean stretch but a wider spread, so a memory-starved node shows a higher mean
  *and* a higher standard deviation of z-values, as DSB's Figure 8 shows for its memory-fault nodes.
  Healthy nodes are exactly equal: any spread between them is chance.
* ``fail`` is the chance that an attempt fails part-way; the task is then retried at once on another node
  (attempt 1), so traces contain FAILED finishes as real ones do.
* ``checkpoints`` > 0 adds that many ``TaskCheckpoint`` events per attempt, evenly spaced in its run, with
  causal features: ``progress`` (fraction of the work done, as Hadoop reports it), ``progress_rate`` (per
  second), ``cpu_rate`` (share of a core the task received lately, noisy) and ``mem_pressure`` (noisy;
  high on a memory-contended node).
* ``load`` > 0 makes durations depend on a node's load at a task's entry: jobs get a type and per-task CPU
  and memory requests, and a task placed where requests exceed the node's capacity is stretched
  (``producers.synthetic_load``). Off by default; ``load=0`` generates exactly the events it always did.
* Host heterogeneity (``hetero`` > 1; Hawkeye's cluster has three node types): the nodes are split into
  ``tiers`` equal tiers by a seeded shuffle, and tier t (0 = fastest) runs all work ``hetero ** (t/(tiers-1))``
  times slower, always (healthy but slower hardware, not a fault; contention stretches on top). The
  default ``hetero=1`` leaves every node equal and the events exactly as before.

Events come in event-time order from a heap of the running jobs' events, so memory follows the number of
concurrent jobs, not ``jobs``. Everything is drawn from one ``random.Random(seed)``: equal keys, equal events.

>>> cluster = SyntheticCluster(SyntheticConfig(nodes=8, slow=2, jobs=3, tasks=(4, 4), seed=1))
>>> events = list(cluster)
>>> sum(type(e).__name__ == "TaskFinish" for e in events)
12
>>> events == list(SyntheticCluster(SyntheticConfig(nodes=8, slow=2, jobs=3, tasks=(4, 4), seed=1)))
True
>>> cluster.ground_truth["slow_nodes"]
['node-2', 'node-4']
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

from producers.keyvalues import parse_key_values
from producers.readers.common import RANK, US_PER_S
from producers.synthetic_load import NodeLoad
from streams.core.events import Event, JobFinish, JobStart, Status, TaskCheckpoint, TaskFinish, TaskStart

CONTENTION = ("cpu", "memory")
_JOB_SIGMA = 0.5  # spread of job sizes (log-normal)
_LAUNCH_DELAY_S = 2.0  # tasks of a job start within this many seconds of its arrival


@dataclass(frozen=True)
class SyntheticConfig:
    """The keys of ``synthetic:key=value,...``; times in seconds."""

    nodes: int = 40
    slow: int = 3
    jobs: int = 200
    tasks: tuple[int, int] = (20, 60)
    seed: int = 0
    slowdown: float = 1.8
    onset: float = 0.0
    shape: float = 3.0
    scale: float = 60.0
    contention: str = "cpu"
    interarrival: float = 30.0
    checkpoints: int = 0
    fail: float = 0.0
    load: float = 0.0  # stretch per unit of over-committed capacity at entry; 0 = no load model
    # host heterogeneity (module doc): a separate block, defaults leave the cluster homogeneous
    hetero: float = 1.0
    tiers: int = 3

    def __post_init__(self) -> None:
        problems = [
            self.nodes < 1 and "nodes must be at least 1",
            not 0 <= self.slow <= self.nodes and f"slow ({self.slow}, the slow nodes; default 3) must be between 0 "
                                                  f"and nodes ({self.nodes})",
            self.jobs < 1 and "jobs must be at least 1 (a cluster running no job has no event to rank)",
            not 1 <= self.tasks[0] <= self.tasks[1] and "tasks must be N or LO-HI with 1 <= LO <= HI",
            self.slowdown < 1 and "slowdown must be at least 1",
            self.onset < 0 and "onset must not be negative",
            self.shape <= 1 and "shape (Pareto beta) must exceed 1 so durations have a mean",
            self.scale <= 0 and "scale must be positive",
            self.contention not in CONTENTION and f"contention must be one of {', '.join(CONTENTION)}",
            self.interarrival < 0 and "interarrival must not be negative",
            self.checkpoints < 0 and "checkpoints must not be negative",
            not 0 <= self.fail < 1 and "fail must be in [0, 1)",
            self.load < 0 and "load must not be negative",
            self.hetero < 1 and "hetero must be at least 1 (the slowest tier's stretch)",
            self.tiers < 1 and "tiers must be at least 1",
        ]
        for problem in problems:
            if problem:
                raise ValueError(f"synthetic: {problem}")


KEYS = tuple(f.name for f in fields(SyntheticConfig))


def parse_config(text: str) -> SyntheticConfig:
    """``"nodes=40,slow=3,tasks=20-60"`` -> SyntheticConfig; ValueError names the bad key or value."""
    return SyntheticConfig(**parse_key_values(text, "synthetic", KEYS, _convert))


def _convert(key: str, raw: str) -> Any:
    if key == "tasks":
        low, _, high = raw.partition("-")
        return (int(low), int(high or low))
    if key == "contention":
        return raw.lower()
    default = getattr(SyntheticConfig, key)
    return type(default)(raw)


class SyntheticCluster:
    """Iterable over the events of a generated cluster; ``ground_truth`` says which nodes are slow."""

    def __init__(self, config: SyntheticConfig) -> None:
        self.config = config
        width = len(str(config.nodes - 1))
        self.node_names = [f"node-{i:0{width}d}" for i in range(config.nodes)]
        self.slow_nodes = frozenset(random.Random(config.seed).sample(range(config.nodes), config.slow))
        self.load_model: NodeLoad | None = None
        self.host_stretch = _host_stretch(config)

    @property
    def ground_truth(self) -> dict[str, Any]:
        return {
            "slow_nodes": [self.node_names[i] for i in sorted(self.slow_nodes)],
            "onset_us": round(self.config.onset * US_PER_S),
            "slowdown": self.config.slowdown,
            "contention": self.config.contention,
            "nodes": self.config.nodes,
        } | self._heterogeneity()

    def _heterogeneity(self) -> dict[str, Any]:
        if self.config.hetero == 1.0:
            return {}
        return {"host_stretch": {self.node_names[i]: s for i, s in enumerate(self.host_stretch)}}

    def __iter__(self) -> Iterator[Event]:
        rng = random.Random(f"{self.config.seed}/events")
        self.load_model = NodeLoad(self.config.load, self.config.seed) if self.config.load else None
        pending: list[tuple[int, int, int, int, int, Event]] = []
        arrival = 0.0
        for job in range(self.config.jobs):
            arrival += rng.expovariate(1 / self.config.interarrival) if self.config.interarrival else 0.0
            arrival_us = round(arrival * US_PER_S) + 1  # ts 0 means "before the trace" in real traces
            while pending and pending[0][0] < arrival_us:
                yield heapq.heappop(pending)[-1]
            for item in self._job(rng, job, arrival_us):
                heapq.heappush(pending, item)
        while pending:
            yield heapq.heappop(pending)[-1]

    def _job(self, rng: random.Random, job: int, arrival_us: int) -> list[tuple[int, int, int, int, int, Event]]:
        low, high = self.config.tasks
        count = rng.randint(low, high)
        job_id = f"job-{job:05d}"
        t_min = self.config.scale * math.exp(rng.gauss(0.0, _JOB_SIGMA))
        events: list[Event] = [JobStart(job_id, arrival_us, declared_tasks=count)]
        profile, starts = None, []
        if self.load_model is not None:  # the load model: tasks in start order, so each sees those before it
            self.load_model.forget_before(arrival_us)
            profile = self.load_model.job_profile()
            starts = sorted(arrival_us + round(rng.uniform(0, _LAUNCH_DELAY_S) * US_PER_S) for _ in range(count))
        for task in range(count):
            start = starts[task] if starts else arrival_us + round(rng.uniform(0, _LAUNCH_DELAY_S) * US_PER_S)
            work = t_min * rng.paretovariate(self.config.shape)
            events += _Task(self, rng, job_id, str(task), profile).run(start, work)
        end = max(e.ts_us for e in events)
        events.append(JobFinish(job_id, end))
        return [(e.ts_us, RANK[type(e)], job, i, 0, e) for i, e in enumerate(events)]

    def stretch(self, rng: random.Random, node: int) -> float:
        """How much slower work runs on ``node`` while contended (1.0 for a healthy node)."""
        if node not in self.slow_nodes:
            return 1.0
        if self.config.contention == "memory":
            return 1.0 + (self.config.slowdown - 1.0) * rng.expovariate(1.0)
        return self.config.slowdown


def _host_stretch(config: SyntheticConfig) -> list[float]:
    """Each node's healthy stretch: 1.0 everywhere unless ``hetero`` > 1 (then by tier, module doc)."""
    if config.hetero == 1.0:
        return [1.0] * config.nodes
    order = list(range(config.nodes))
    random.Random(f"{config.seed}/hosts").shuffle(order)
    stretch = [1.0] * config.nodes
    for rank, node in enumerate(order):
        tier = rank * config.tiers // config.nodes
        stretch[node] = config.hetero ** (tier / (config.tiers - 1)) if config.tiers > 1 else config.hetero
    return stretch


class _Task:
    """The attempts of one task: placement, contention, optional failure and retry, checkpoints."""

    def __init__(
        self,
        cluster: SyntheticCluster,
        rng: random.Random,
        job_id: str,
        task_id: str,
        profile: tuple[str, float, float] | None = None,
    ) -> None:
        self.cluster, self.rng, self.job_id, self.task_id = cluster, rng, job_id, task_id
        self.profile = profile  # (type, CPU request, memory request) under the load model
        self.onset_us = round(cluster.config.onset * US_PER_S)

    def run(self, start_us: int, work_s: float) -> list[Event]:
        config, rng = self.cluster.config, self.rng
        node = rng.randrange(config.nodes)
        events: list[Event] = []
        attempt = 0
        if config.fail and rng.random() < config.fail:
            fraction = rng.random()
            events += self._attempt(attempt, node, start_us, work_s * fraction, Status.FAILED)
            start_us = events[-1].ts_us
            node = (node + rng.randrange(1, config.nodes)) % config.nodes if config.nodes > 1 else node
            attempt = 1
        events += self._attempt(attempt, node, start_us, work_s, Status.SUCCEEDED)
        return events

    def _attempt(self, attempt: int, node: int, start_us: int, work_s: float, status: Status) -> list[Event]:
        name = self.cluster.node_names[node]
        stretch = self.cluster.stretch(self.rng, node)
        load, start = self.cluster.load_model, TaskStart(self.job_id, self.task_id, attempt, name, start_us)
        if load is not None and self.profile is not None:
            kind, cpu, memory = self.profile
            work_s *= load.stretch(node, start_us, kind, cpu, memory)
            start = TaskStart(self.job_id, self.task_id, attempt, name, start_us, task_type=kind, cpu_request=cpu,
                              memory_request=memory)  # fmt: skip
        work_s *= self.cluster.host_stretch[node]  # slower hardware: more wall time for the same work
        duration = self._duration_us(start_us, work_s * US_PER_S, stretch)
        if load is not None and self.profile is not None:
            load.add(node, start_us, start_us + duration, self.profile[1], self.profile[2])
        events: list[Event] = [start]
        for k in range(1, self.cluster.config.checkpoints + 1):
            elapsed = duration * k // (self.cluster.config.checkpoints + 1)
            features = self._features(start_us, elapsed, work_s * US_PER_S, stretch)
            events.append(TaskCheckpoint(self.job_id, self.task_id, attempt, name, start_us + elapsed,
                                         elapsed, features))  # fmt: skip
        events.append(TaskFinish(self.job_id, self.task_id, attempt, name, start_us + duration, duration, status))
        return events

    def _duration_us(self, start_us: int, work_us: float, stretch: float) -> int:
        """Wall time to do ``work_us`` of work from ``start_us`` when work after the onset is stretched."""
        if stretch == 1.0 or start_us >= self.onset_us:
            return max(1, round(work_us * stretch))
        before = self.onset_us - start_us
        if work_us <= before:
            return max(1, round(work_us))
        return round(before + (work_us - before) * stretch)

    def _work_done_us(self, start_us: int, elapsed_us: int, stretch: float) -> float:
        """Inverse of ``_duration_us``: work done after ``elapsed_us`` of wall time."""
        before = max(0, min(elapsed_us, self.onset_us - start_us)) if stretch != 1.0 else elapsed_us
        return before + (elapsed_us - before) / stretch

    def _features(self, start_us: int, elapsed_us: int, work_us: float, stretch: float) -> dict[str, float]:
        rng = self.rng
        done = self._work_done_us(start_us, elapsed_us, stretch)
        contended = stretch != 1.0 and start_us + elapsed_us > self.onset_us
        cpu_share = 1.0 / stretch if contended and self.cluster.config.contention == "cpu" else 1.0
        memory_hit = contended and self.cluster.config.contention == "memory"
        progress = min(1.0, done / work_us)
        return {
            "progress": progress,
            "progress_rate": progress / max(elapsed_us / US_PER_S, 1e-6),
            "cpu_rate": max(0.0, cpu_share * rng.gauss(1.0, 0.1)),
            "mem_pressure": max(0.0, rng.gauss(0.7 if memory_hit else 0.3, 0.1)),
        }

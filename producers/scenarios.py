"""Fault scenarios as a cluster simulator (format ``scenario:NAME,seed=N``, read by ``producers.scenario_spec``):
ground truth for detection (issue 21).

Written apart from ``producers.synthetic`` on purpose (its equal nodes and back-to-back jobs are what the
detectors were first tuned on), this models what an operator's cluster looks like:

* Jobs arrive as a Poisson process; a job has a log-normal number of tasks (median ``job_tasks``) and a
  log-normal size; its tasks' work is log-normal around the job's size (``task_sigma``), so durations are
  skewed but not Pareto. The arrival rate follows from ``rate`` (tasks per node per hour).
* Every node has ``slots`` task slots. A task waits in one FIFO queue until a slot is free *on a node the
  scheduler allows*: ``placement(candidates, now_us) -> allowed`` is asked at every placement round, so a
  blacklist can be honoured while the trace is generated (closed loop). Without it every node is allowed
  (open loop, the trace as recorded). If ``allowed`` is a mapping, its values cap how many tasks each node
  may take in that round (None: all its free slots); a probation offer is a cap of 1: the first task drawn
  for that node takes it, the round's other tasks go elsewhere. Queueing is what makes a blacklist cost
  something: capacity taken away from a healthy cluster makes its jobs wait.
* A node's speed is its hardware (``hardware``: the stretch of each healthy generation, nodes spread evenly
  over them) times its faults. A fault stretches the work done while it is active: ``cpu`` -- a constant
  stretch; ``memory`` -- ``1 + (slowdown - 1) * E`` per task with ``E ~ Exp(1)`` (paging hits tasks
  unevenly: same mean, wider spread). ``onset_h``, ``recovery_h`` (None: to the end), ``on_min``/``off_min``
  (intermittent: active ``on_min`` minutes, then idle ``off_min``, from the onset to the recovery) and
  ``ramp_h`` (gradual: the stretch grows linearly from 1 to ``slowdown`` over ``ramp_h`` hours, in steps).
* ``checkpoints`` (format key ``checkpoints=N``): a running task reports its progress (``TaskCheckpoint``,
  feature ``progress``: the share of its work done) every ``mean_task_s / N`` seconds, as Google's usage
  series or Hadoop's heartbeats do; 0 (the suite's default) emits none. The share is computed from the
  node's speed over the task's life, so a fault that begins mid-task bends its progress at the onset. It is
  reported with noise (``progress_noise``, log scale ``s``): each task's reports follow a curve ``p ** g``
  with ``g ~ exp(N(0, s))`` drawn per task (real progress scores are not linear in time: phases, skewed
  input), each report times ``exp(N(0, s / 4))``; 0 reports the exact share.
* ``ground_truth["slow_spans"]`` gives every faulty node's spans of active fault in event time
  (microseconds; the end None while it lasts to the end of the trace). Healthy hardware generations are
  not faults: a slower generation is "healthy" and must not be listed.

Randomness is split by purpose (arrivals, each job's work, fault nodes, placement) from the seed, so the
open- and closed-loop runs of one seed get the same jobs with the same work: the job time change between
them is the blacklist's doing alone.

>>> from producers.scenario_suite import SCENARIOS
>>> sim = ClusterSim(SCENARIOS["cpu-2x"].scaled(nodes=10, hours=0.5), seed=1)
>>> events = list(sim)
>>> sum(type(e).__name__ == "TaskFinish" for e in events) == sum(type(e).__name__ == "TaskStart" for e in events)
True
>>> events == list(ClusterSim(SCENARIOS["cpu-2x"].scaled(nodes=10, hours=0.5), seed=1))
True
>>> sorted(sim.ground_truth["slow_spans"]) == sorted(sim.faulty)
True
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from streams.core.events import Event, JobFinish, JobStart, Status, TaskCheckpoint, TaskFinish, TaskStart

US_PER_S = 1_000_000
US_PER_H = 3_600 * US_PER_S
KINDS = ("cpu", "memory")
_RAMP_STEPS = 12  # a gradual fault grows in this many equal steps
_JOB_SIGMA = 0.5  # spread of job sizes (log-normal)
_JOB_TASKS_SIGMA = 0.8  # spread of task counts per job (log-normal)

# The allowed nodes, or allowed node -> most tasks it may take in this round (None: its free slots).
Placement = Callable[[Sequence[str], int], Collection[str] | Mapping[str, int | None]]


@dataclass(frozen=True)
class Fault:
    """``count`` nodes slowed by ``slowdown`` from ``onset_h`` (see the module text for the shapes)."""

    count: int
    slowdown: float
    kind: str = "cpu"
    onset_h: float = 1.0
    recovery_h: float | None = None
    on_min: float | None = None
    off_min: float | None = None
    ramp_h: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS or self.slowdown < 1 or self.count < 0 or self.onset_h < 0:
            raise ValueError(f"bad fault {self}")
        if (self.on_min is None) != (self.off_min is None):
            raise ValueError("an intermittent fault needs both on_min and off_min")

    def stretches(self, end_h: float) -> list[tuple[int, float]]:
        """Change points ``(from_us, stretch)`` of this fault, the last one back to 1.0 when it recovers."""
        stop = min(end_h, self.recovery_h) if self.recovery_h is not None else end_h
        points: list[tuple[int, float]] = []
        if self.on_min is not None and self.off_min is not None:
            t, on = self.onset_h, True
            while t < stop:
                points.append((_us(t), self.slowdown if on else 1.0))
                t += (self.on_min if on else self.off_min) / 60
                on = not on
        elif self.ramp_h > 0:
            for k in range(_RAMP_STEPS):
                points.append((_us(self.onset_h + self.ramp_h * k / _RAMP_STEPS),
                               1.0 + (self.slowdown - 1.0) * (k + 1) / _RAMP_STEPS))
        else:
            points.append((_us(self.onset_h), self.slowdown))
        if self.recovery_h is not None:
            points.append((_us(self.recovery_h), 1.0))
        return points


@dataclass(frozen=True)
class Scenario:
    """One cluster and its faults; ``rate`` is tasks per node per hour, ``load`` the share of slots busy."""

    name: str
    about: str
    nodes: int = 100
    rate: float = 60.0
    hours: float = 4.0
    faults: tuple[Fault, ...] = ()
    hardware: tuple[float, ...] = (1.0,)
    slots: int = 4
    load: float = 0.5
    task_sigma: float = 0.5
    job_tasks: float = 20.0
    tags: tuple[str, ...] = field(default=())
    checkpoints: float = 0.0  # progress reports per mean task duration (0: none, as the suite's traces)
    progress_noise: float = 0.2  # log-scale noise of reported progress (see the module text)

    def __post_init__(self) -> None:
        problems = [
            self.nodes < 1 and "nodes must be at least 1",
            self.faulty_count > self.nodes and f"{self.faulty_count} faulty nodes need at least as many nodes",
            not self.rate > 0 and "rate must be positive",
            not self.hours > 0 and "hours must be positive",
            self.slots < 1 and "slots must be at least 1",
            not 0 < self.load <= 1 and "load must be in (0, 1]",
            self.checkpoints < 0 and "checkpoints must be at least 0",
            self.progress_noise < 0 and "progress_noise must be at least 0",
        ]
        for problem in problems:
            if problem:
                raise ValueError(problem)

    @property
    def mean_task_s(self) -> float:
        """Mean task duration on a healthy node that keeps ``load`` of the slots busy at ``rate``."""
        return self.load * self.slots * 3600.0 / self.rate

    @property
    def faulty_count(self) -> int:
        return sum(f.count for f in self.faults)

    def scaled(self, **changes: Any) -> Scenario:
        """A copy with some fields changed (smaller clusters for tests)."""
        return replace(self, **changes)


def _us(hours: float) -> int:
    return round(hours * US_PER_H)


class _Node:
    """One node: hardware stretch, fault change points, free slots."""

    __slots__ = ("free", "hardware", "memory", "name", "points")

    def __init__(self, name: str, hardware: float, slots: int) -> None:
        self.name, self.hardware, self.free = name, hardware, slots
        self.points: list[tuple[int, float]] = []
        self.memory = False

    def finish_us(self, start_us: int, work_s: float, spread: float) -> int:
        """When ``work_s`` seconds of nominal work started at ``start_us`` end on this node.

        ``spread`` scales the fault's excess stretch (1 for cpu, an Exp(1) draw per task for memory)."""
        t, left = float(start_us), work_s * US_PER_S * self.hardware
        stretch = 1.0
        for at, value in self.points:
            if at <= t:
                stretch = value
                continue
            effective = 1.0 + (stretch - 1.0) * spread
            if left * effective <= at - t:
                break
            left -= (at - t) / effective
            t, stretch = float(at), value
        return max(start_us + 1, round(t + left * (1.0 + (stretch - 1.0) * spread)))

    def progress(self, start_us: int, now_us: int, work_s: float, spread: float) -> float:
        """The share of ``work_s`` done between ``start_us`` and ``now_us`` (the inverse of ``finish_us``)."""
        t, done, stretch = float(start_us), 0.0, 1.0
        for at, value in self.points:
            if at <= t:
                stretch = value
                continue
            if at >= now_us:
                break
            done += (at - t) / (1.0 + (stretch - 1.0) * spread)
            t, stretch = float(at), value
        done += (now_us - t) / (1.0 + (stretch - 1.0) * spread)
        return min(1.0, done / (work_s * US_PER_S * self.hardware))


class ClusterSim:
    """Iterable over the events of one scenario run; ``placement`` (if given) is asked before tasks start.

    After iteration ``jobs`` holds each job's ``(arrival_us, end_us)`` for job completion times.
    """

    def __init__(self, scenario: Scenario, seed: int, placement: Placement | None = None) -> None:
        self.scenario, self.seed, self.placement = scenario, seed, placement
        width = len(str(scenario.nodes - 1))
        gens = scenario.hardware
        self.nodes = [_Node(f"node-{i:0{width}d}", gens[i * len(gens) // scenario.nodes], scenario.slots)
                      for i in range(scenario.nodes)]
        picked = random.Random(f"{scenario.name}/{seed}/faults").sample(range(scenario.nodes),
                                                                         scenario.faulty_count)
        self.faulty: dict[str, Fault] = {}
        for fault in scenario.faults:
            for index in picked[:fault.count]:
                node = self.nodes[index]
                node.points, node.memory = fault.stretches(scenario.hours + 24), fault.kind == "memory"
                self.faulty[node.name] = fault
            picked = picked[fault.count:]
        self.jobs: dict[str, tuple[int, int]] = {}

    @property
    def ground_truth(self) -> dict[str, Any]:
        """Faulty nodes' active spans, and what a scorer needs to know about the cluster."""
        spans: dict[str, list[tuple[int, int | None]]] = {}
        for node in self.nodes:
            if node.name in self.faulty:
                spans[node.name] = _active_spans(node.points)
        return {
            "scenario": self.scenario.name,
            "seed": self.seed,
            "nodes": self.scenario.nodes,
            "slow_spans": spans,
            "slow_nodes": sorted(spans),
            "hardware": {n.name: n.hardware for n in self.nodes if n.hardware != 1.0},
            "onset_us": min((s[0][0] for s in spans.values() if s), default=0),
        }

    def __iter__(self) -> Iterator[Event]:
        return _Run(self).events()


def _active_spans(points: Sequence[tuple[int, float]]) -> list[tuple[int, int | None]]:
    spans: list[tuple[int, int | None]] = []
    start: int | None = None
    for at, stretch in points:
        if stretch > 1.0 and start is None:
            start = at
        elif stretch <= 1.0 and start is not None:
            spans.append((start, at))
            start = None
    if start is not None:
        spans.append((start, None))
    return spans


class _Run:
    """One pass of the simulation: a heap of arrivals and finishes, one FIFO queue of waiting tasks."""

    def __init__(self, sim: ClusterSim) -> None:
        self.sim, sc = sim, sim.scenario
        for node in sim.nodes:
            node.free = sc.slots
        sim.jobs.clear()
        self.by_name = {node.name: node for node in sim.nodes}
        self.arrivals = random.Random(f"{sc.name}/{sim.seed}/arrivals")
        self.choose = random.Random(f"{sc.name}/{sim.seed}/place")
        mean_tasks = sc.job_tasks * math.exp(_JOB_TASKS_SIGMA**2 / 2)
        self.job_gap_s = 3600.0 * mean_tasks / (sc.rate * sc.nodes)
        self.scale_s = sc.mean_task_s / math.exp((_JOB_SIGMA**2 + sc.task_sigma**2) / 2)
        self.heap: list[tuple[int, int, int, Any]] = []  # (time, order, seq, payload)
        self.seq = 0
        self.queue: deque[tuple[str, str, float, float]] = deque()  # job, task, work, memory spread
        self.left: dict[str, int] = {}
        self.out: list[Event] = []
        self.every_us = round(sc.mean_task_s / sc.checkpoints * US_PER_S) if sc.checkpoints > 0 else 0
        # Progress noise has its own streams, so checkpoints change nothing else in a trace.
        self.reports = random.Random(f"{sc.name}/{sim.seed}/reports")
        self.curves: dict[tuple[str, str], float] = {}

    def push(self, at: int, order: int, payload: Any) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (at, order, self.seq, payload))

    def events(self) -> Iterator[Event]:
        horizon = _us(self.sim.scenario.hours)
        self.push(self._next_arrival(0), 1, 0)
        while self.heap:
            now, order, _, payload = heapq.heappop(self.heap)
            if order == 0:
                self._finish(now, payload)
            elif order == 2:
                self._checkpoint(now, payload)
            elif now < horizon:
                self._arrive(now, payload)
                self.push(self._next_arrival(now), 1, payload + 1)
            # What happened at ``now`` is out before the scheduler places anything: a closed loop's blacklist
            # has seen it (the same order either way, so the open loop's trace does not change).
            yield from self.out
            self.out.clear()
            self._place(now)
            yield from self.out
            self.out.clear()

    def _next_arrival(self, now: int) -> int:
        return now + max(1, round(self.arrivals.expovariate(1.0 / self.job_gap_s) * US_PER_S))

    def _arrive(self, now: int, index: int) -> None:
        sc = self.sim.scenario
        rng = random.Random(f"{sc.name}/{self.sim.seed}/job/{index}")
        count = max(2, min(500, round(sc.job_tasks * math.exp(rng.gauss(0.0, _JOB_TASKS_SIGMA)))))
        size = self.scale_s * math.exp(rng.gauss(0.0, _JOB_SIGMA))
        job_id = f"job-{index:06d}"
        self.out.append(JobStart(job_id, now, declared_tasks=count))
        self.sim.jobs[job_id] = (now, now)
        self.left[job_id] = count
        for task in range(count):
            work = size * math.exp(rng.gauss(0.0, sc.task_sigma))
            self.queue.append((job_id, str(task), work, rng.expovariate(1.0)))

    def _finish(self, now: int, payload: tuple[str, str, str, int]) -> None:
        job_id, task_id, node_name, start = payload
        self.by_name[node_name].free += 1
        self.out.append(TaskFinish(job_id, task_id, 0, node_name, now, now - start, Status.SUCCEEDED))
        self.curves.pop((job_id, task_id), None)
        self.left[job_id] -= 1
        if not self.left[job_id]:
            del self.left[job_id]
            self.sim.jobs[job_id] = (self.sim.jobs[job_id][0], now)
            self.out.append(JobFinish(job_id, now))

    def _checkpoint(self, now: int, payload: tuple[str, str, str, int, float, float]) -> None:
        job_id, task_id, node_name, start, work, spread = payload
        node = self.by_name[node_name]
        progress = self._reported(job_id, task_id, node.progress(start, now, work, spread if node.memory else 1.0))
        self.out.append(TaskCheckpoint(job_id, task_id, 0, node_name, now, now - start, {"progress": progress}))

    def _reported(self, job_id: str, task_id: str, share: float) -> float:
        """``share`` as reported: bent by the task's curve and scaled by this report's noise (module text)."""
        noise = self.sim.scenario.progress_noise
        if noise <= 0 or share <= 0:
            return share
        curve = self.curves.get((job_id, task_id))
        if curve is None:
            rng = random.Random(f"{self.sim.scenario.name}/{self.sim.seed}/progress/{job_id}/{task_id}")
            curve = self.curves[(job_id, task_id)] = math.exp(rng.gauss(0.0, noise))
        return min(1.0, share**curve * math.exp(self.reports.gauss(0.0, noise / 4)))

    def _place(self, now: int) -> None:
        if not self.queue:
            return
        free = [node for node in self.sim.nodes if node.free > 0]
        if not free:
            return
        room = self._room(free, now)
        free = [node for node in free if room[node.name] > 0]
        while self.queue and free:
            i = self.choose.randrange(len(free))
            node = free[i]
            job_id, task_id, work, spread = self.queue.popleft()
            end = node.finish_us(now, work, spread if node.memory else 1.0)
            self.out.append(TaskStart(job_id, task_id, 0, node.name, now))
            self.push(end, 0, (job_id, task_id, node.name, now))
            if self.every_us:
                for at in range(now + self.every_us, end, self.every_us):  # progress reports while it runs
                    self.push(at, 2, (job_id, task_id, node.name, now, work, spread))
            node.free -= 1
            room[node.name] -= 1
            if not room[node.name]:
                free[i] = free[-1]
                free.pop()

    def _room(self, free: Sequence[_Node], now: int) -> dict[str, int]:
        """How many tasks each free node may take in this round: its free slots, 0 if the placement refuses it,
        at most the placement's cap if it gives one. Uncapped, a node leaves the round exactly when its slots are
        full, so the same random draws place the same tasks as without a cap (the open loop's trace)."""
        if self.sim.placement is None:
            return {node.name: node.free for node in free}
        allowed = self.sim.placement([node.name for node in free], now)
        if isinstance(allowed, Mapping):
            caps: Mapping[str, int | None] = allowed
        else:
            caps = dict.fromkeys(allowed, None)
        room: dict[str, int] = {}
        for node in free:
            cap = caps.get(node.name, 0)
            room[node.name] = node.free if cap is None else min(node.free, cap)
        return room


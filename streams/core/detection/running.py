"""The running-task detector: evidence from every task a node started, finished or still running (issue 21).

Finished-task z-values come late: a node that turned 2x slow shows it only once its slow tasks end, and their
jobs end. This detector watches the task events themselves (``observe``: starts and finishes, in event time)
and, at every ranking boundary, scores each task against its own job's siblings with censored normal scores
(``streams.core.detection.censored``): a task still running long past its job's finished durations is
evidence at once, a task that has just started is none. Per node and per ``Scale`` (tasks started in the last
``window_us``), the sums give a standard-normal statistic ``z`` on a healthy node and an *effect*: how many
job standard deviations its tasks run behind (0 on a healthy node, about +0.5 at 1.3x, +1.4 at 2x for this
spread of task times).

A node is *clearly slow* over a scale when ``z >= z_list`` (a strict level: a 100-node cluster is looked at
tens of thousands of times a day) and its effect is at least ``min_effect`` (a robust effect size: slightly
slower healthy hardware is significant over hours but small), with at least ``min_tasks`` tasks. It is a
suspect after ``persistence`` periods in a row. Once a suspect, its effect is remembered and it stays *still
slow* until it has *recovered*: some scale shows an effect clearly (``z_release`` standard errors) below
``recovery_ratio`` times the one it was found with. A node that started no
task for ``quiet_us`` and runs none (the scheduler honours the list) is forgotten, its old tasks with it, and
left to the decision layer's "no recent evidence"; it gets new tasks and is judged afresh.

Events are buffered and applied in event-time order at the boundary, so the evidence at ``B`` is the tasks
started before ``B`` whatever the arrival order (as long as every event before ``B`` arrived).

>>> from streams.core.events import Status, TaskFinish, TaskStart
>>> MIN = 60_000_000
>>> det = RunningTaskDetector((Scale(15 * MIN), Scale(60 * MIN)), z_list=4.0)
>>> import random
>>> rng, found_at = random.Random(1), None
>>> for minute in range(120):  # 20 nodes, one 3-minute-ish task a minute each; n0 turns 3x slow at minute 60
...     for k in range(20):
...         node, job = f"n{k}", f"j{minute // 3}"
...         slow = 3.0 if node == "n0" and minute >= 60 else 1.0
...         start = minute * MIN + k
...         det.observe(TaskStart(job, f"{minute}-{k}", 0, node, start))
...         duration = round(rng.lognormvariate(0, 0.5) * 3 * MIN * slow)
...         det.observe(TaskFinish(job, f"{minute}-{k}", 0, node, start + duration, duration, Status.SUCCEEDED))
...     if (minute + 1) % 5 == 0:
...         evidence = det.detect(WindowView(0, (minute + 1) * MIN, {}))
...         if found_at is None and evidence["n0"].suspect:
...             found_at = minute + 1
>>> found_at, [node for node, e in evidence.items() if e.suspect]
(75, ['n0'])
>>> evidence["n0"].reason.split(" for ")[0]
'clearly slow over 15 min'
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streams.core.detection.base import Evidence, WindowView
from streams.core.detection.censored import task_scores
from streams.core.events import Event, NormalizedTask, Status, TaskFinish, TaskStart

SNAPSHOT_VERSION = 1
MINUTE_US = 60_000_000
_START, _FINISH, _DROP = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Scale:
    """Tasks started in the last ``window_us``."""

    window_us: int

    @property
    def label(self) -> str:
        return f"{self.window_us / MINUTE_US:g} min"


@dataclass(frozen=True, slots=True)
class Tally:
    """One node over one scale: tasks, of which still running and running past their job's median, the sum of
    contributions and of their null variances."""

    tasks: int
    running: int
    past_median: int
    total: float
    information: float

    @property
    def z(self) -> float:
        return self.total / math.sqrt(self.information) if self.information > 0 else 0.0

    @property
    def effect(self) -> float:
        return self.total / self.information if self.information > 0 else 0.0

    @property
    def stderr(self) -> float:
        return 1.0 / math.sqrt(self.information) if self.information > 0 else math.inf


class RunningTaskDetector:
    """Suspect nodes whose started tasks, finished or running, run clearly behind their jobs' siblings;
    hold them until they recovered (see the module text)."""

    name = "running"

    def __init__(self, scales: Sequence[Scale], z_list: float = 5.0, min_effect: float = 0.3,
                 min_tasks: int = 5, persistence: int = 1, recovery_ratio: float = 0.5, z_release: float = 1.5,
                 min_job_tasks: int = 4, quiet_us: int = 60 * MINUTE_US) -> None:
        if not scales:
            raise ValueError("the running-task detector needs at least one scale")
        self.scales = tuple(sorted(scales, key=lambda s: s.window_us))
        self.z_list, self.min_effect, self.min_tasks = z_list, min_effect, min_tasks
        self.persistence, self.recovery_ratio, self.z_release = persistence, recovery_ratio, z_release
        self.min_job_tasks, self.quiet_us = min_job_tasks, quiet_us
        self.memory_us = 2 * self.scales[-1].window_us  # jobs' older tasks still shape their survival curves
        self._buffer: list[tuple[int, int, int, str, str, str, int]] = []  # (ts, kind, seq, job, task, node, dur)
        self._seq = 0
        self._tasks: dict[tuple[str, str], list[Any]] = {}  # (job, task) -> [node, start, duration or -1]
        self._since: dict[str, int] = {}  # tasks of the node started before this are forgotten
        self._streak: dict[str, tuple[int, int]] = {}
        self._effect: dict[str, float] = {}  # suspects not yet recovered -> the effect they were found with

    def learn(self, sample: NormalizedTask) -> None:
        return None  # the task events (``observe``) carry everything this detector uses

    def observe(self, event: Event) -> None:
        """A task event (start or finish; checkpoints and job events are ignored), any order within a period."""
        if isinstance(event, TaskStart):
            kind, duration = _START, -1
        elif isinstance(event, TaskFinish):
            kind = _FINISH if event.status is Status.SUCCEEDED else _DROP
            duration = event.duration_us
        else:
            return
        self._seq += 1
        heapq.heappush(self._buffer, (event.ts_us, kind, self._seq, event.job_id, event.task_id, event.node_id,
                                      duration))

    def detect(self, window: WindowView) -> Mapping[str, Evidence]:
        end = window.end_us
        self._apply_before(end)
        self._forget(end)
        tallies = self._tally(end)
        evidence = {}
        for node in sorted(tallies):
            evidence[node] = self._judge(node, tallies[node], end)
        return evidence

    # --- state ------------------------------------------------------------------------------------------------

    def _apply_before(self, end: int) -> None:
        while self._buffer and self._buffer[0][0] < end:
            ts, kind, _, job, task, node, duration = heapq.heappop(self._buffer)
            key = (job, task)
            if kind == _START:
                self._tasks[key] = [node, ts, -1]
            elif kind == _FINISH:
                self._tasks[key] = [node, ts - duration, duration]
            else:
                self._tasks.pop(key, None)  # failed or killed: not a measure of the node's speed

    def _forget(self, end: int) -> None:
        horizon = end - self.memory_us
        last_start: dict[str, int] = {}
        running: set[str] = set()
        for key, (node, start, duration) in list(self._tasks.items()):
            if start < horizon and (duration >= 0 or start < end - 4 * self.memory_us):
                del self._tasks[key]
                continue
            last_start[node] = max(last_start.get(node, start), start)
            if duration < 0:
                running.add(node)
        for node in set(self._since) | set(self._effect) | set(self._streak):
            if node not in running and last_start.get(node, -math.inf) < end - self.quiet_us:
                self._since[node] = end  # quiet: forget it and its old tasks
                self._effect.pop(node, None)
                self._streak.pop(node, None)
        for node, since in list(self._since.items()):
            if since < horizon:
                del self._since[node]

    def _tally(self, end: int) -> dict[str, list[Tally]]:
        rows = [(job, node, start, duration) for (job, _), (node, start, duration) in self._tasks.items()
                if start < end]
        if not rows:
            return {}
        job_index: dict[str, int] = {}
        node_index: dict[str, int] = {}
        jobs = np.array([job_index.setdefault(r[0], len(job_index)) for r in rows], dtype=np.int64)
        nodes = np.array([node_index.setdefault(r[1], len(node_index)) for r in rows], dtype=np.int64)
        starts = np.array([r[2] for r in rows], dtype=np.int64)
        durations = np.array([r[3] for r in rows], dtype=np.int64)
        finished = (durations >= 0) & (starts + durations < end)
        times = np.where(finished, durations, end - starts)
        x, v, past = task_scores(jobs, starts, times, finished, end)
        since = np.array([self._since.get(node, -1) for node in node_index], dtype=np.int64)
        usable = (np.bincount(jobs)[jobs] >= self.min_job_tasks) & (starts >= since[nodes])
        out: dict[str, list[Tally]] = {node: [] for node in node_index}
        names = list(node_index)
        for scale in self.scales:
            mask = usable & (starts >= end - scale.window_us)
            m = len(node_index)
            counts = np.bincount(nodes[mask], minlength=m)
            run = np.bincount(nodes[mask & ~finished], minlength=m)
            late = np.bincount(nodes[mask & past], minlength=m)
            total = np.bincount(nodes[mask], weights=x[mask], minlength=m)
            info = np.bincount(nodes[mask], weights=v[mask], minlength=m)
            for i, node in enumerate(names):
                out[node].append(Tally(int(counts[i]), int(run[i]), int(late[i]), float(total[i]), float(info[i])))
        return {node: t for node, t in out.items() if any(s.tasks for s in t) or node in self._effect}

    # --- judgement --------------------------------------------------------------------------------------------

    def _clearly_slow(self, tally: Tally) -> bool:
        return tally.tasks >= self.min_tasks and tally.z >= self.z_list and tally.effect >= self.min_effect

    def _judge(self, node: str, tallies: list[Tally], end: int) -> Evidence:
        hits = [(scale, t) for scale, t in zip(self.scales, tallies, strict=True) if self._clearly_slow(t)]
        count, counted_at = self._streak.get(node, (0, -1))
        streak = count if counted_at == end else count + 1 if hits else 0
        self._streak[node] = (streak, end)
        score = max((t.effect - 2 * t.stderr for t in tallies if t.information > 0), default=-math.inf)
        effect = self._effect.get(node)
        if effect is not None:
            judged = self._recovery_scale(tallies, effect)
            if judged is not None:
                scale, t = judged
                self._since[node] = end - scale.window_us
                self._streak[node] = (0, end)
                del self._effect[node]
                return Evidence(node, False, score, f"recovered: {_tasks(t)} started in the last {scale.label} run "
                                f"{t.effect:+.2f} job std behind their jobs (censored scores, +-{t.stderr:.2f}), "
                                f"clearly below {self.recovery_ratio:g} x the {effect:+.2f} it was found with")
        if hits and streak >= self.persistence:
            scale, t = hits[0]
            if effect is None:
                self._effect[node] = t.effect
            return Evidence(node, True, score, _why(scale, t, streak, self.z_list), still_slow=True)
        if effect is not None:
            return Evidence(node, False, score, f"still slow: found {effect:+.2f} job std behind, no scale shows it "
                            f"clearly below {self.recovery_ratio * effect:+.2f} yet", still_slow=True)
        if hits:
            return Evidence(node, False, score, f"clearly slow over {hits[0][0].label} for {streak} of "
                            f"{self.persistence} periods needed")
        best = max(tallies, key=lambda t: t.z)
        return Evidence(node, False, score, f"not clearly slow: at most z {best.z:+.1f}, effect {best.effect:+.2f} "
                        f"over {best.tasks} tasks")

    def _recovery_scale(self, tallies: list[Tally], effect: float) -> tuple[Scale, Tally] | None:
        """The shortest scale whose effect is clearly (``z_release`` standard errors) below ``recovery_ratio``
        times the effect the node was found with."""
        for scale, t in zip(self.scales, tallies, strict=True):
            if t.tasks >= self.min_tasks and t.effect + self.z_release * t.stderr < self.recovery_ratio * effect:
                return scale, t
        return None

    # --- life cycle -------------------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {"version": SNAPSHOT_VERSION, "buffer": [list(item) for item in sorted(self._buffer)],
                "seq": self._seq,
                "tasks": [[job, task, *value] for (job, task), value in self._tasks.items()],  # order kept: sums alike
                "since": self._since, "streak": {n: list(v) for n, v in self._streak.items()},
                "effect": self._effect}

    def restore(self, state: dict[str, Any]) -> None:
        if state.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown running-task detector snapshot version {state.get('version')!r}")
        self._buffer = [(int(a), int(b), int(c), str(d), str(e), str(f), int(g)) for a, b, c, d, e, f, g
                        in state["buffer"]]
        heapq.heapify(self._buffer)
        self._seq = int(state["seq"])
        self._tasks = {(str(job), str(task)): [str(node), int(start), int(duration)]
                       for job, task, node, start, duration in state["tasks"]}
        self._since = {k: int(v) for k, v in state["since"].items()}
        self._streak = {k: (int(v[0]), int(v[1])) for k, v in state["streak"].items()}
        self._effect = {k: float(v) for k, v in state["effect"].items()}


def _tasks(t: Tally) -> str:
    return f"its {t.tasks} tasks ({t.running} still running)"


def _why(scale: Scale, t: Tally, streak: int, z_list: float) -> str:
    period = "period" if streak == 1 else "periods"
    return (f"clearly slow over {scale.label} for {streak} {period}: {_tasks(t)}, {t.past_median} of them "
            f"already past their job's median) run {t.effect:+.2f} job std behind their jobs' siblings "
            f"(censored normal scores, z {t.z:.1f} >= {z_list:g})")

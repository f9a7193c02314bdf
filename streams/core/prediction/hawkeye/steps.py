"""Hawkeye's per-host step times and the straggling ratio SR (its eq. 10 and Algorithm 1).

**What a step is here.** Spark runs a task in three steps (deserialise TS1, compute TS2, serialise TS3)
and Hawkeye keeps, per host, the average time of each. laggard's sources do not report Spark's phases;
they report checkpoints. A task's progress between two checkpoints (or from its start to its first
checkpoint, or from its last checkpoint to its finish) is one step here, and the steps of a task are
numbered by the checkpoints it has passed. That is the only unit every source has, and it keeps eq. 10
literal: SR = (elapsed + the host's average time of the steps still ahead) / ET_host. When a source
reports Spark's phases (a checkpoint feature ``phase`` of 1, 2 or 3, the step the task has entered),
``steps_done`` is ``phase - 1`` and the host's step time is that of the phases, exactly the paper's TS1..TS3;
when it reports ``progress`` (the fraction of the work done, as Hadoop and the synthetic cluster do), the
steps still ahead are ``1 - progress`` of the host's expected task time.

**Per host, across jobs.** Hawkeye compares a task with tasks of the same stage on the same host. Jobs
in a shared cluster rarely run more than one or two tasks per host (Google 2011: 1 to 6), so a host's
evidence is pooled over jobs in units of each job's mean finished task time (Hawkeye's AT): a host
whose tasks take 1.8 job means is 1.8x slow whatever the job's size. ``HostBook`` keeps, per host, the
last ``window`` relative task times and step times; estimates are shrunk toward the job's own average
with ``prior`` pseudo-samples, so a host seen once does not decide alone.

SR (eq. 10; the paper's Algorithm 1 adds the steps already done instead, which contradicts eq. 10 and
its text: the steps ahead are what a task still needs):

>>> straggling_ratio(elapsed_s=30.0, expected_s=20.0, step_s=5.0, steps_done=2)  # (30 + (20 - 2*5)) / 20
2.0
>>> straggling_ratio(elapsed_s=10.0, expected_s=20.0, progress=0.5)  # on schedule: (10 + 10) / 20
1.0
>>> straggling_ratio(elapsed_s=30.0, expected_s=20.0)  # neither steps nor progress: elapsed / expected
1.5
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from streams.core.prediction.hawkeye.pareto import Pareto, fit_pareto


def straggling_ratio(
    elapsed_s: float,
    expected_s: float,
    step_s: float | None = None,
    steps_done: int = 0,
    progress: float | None = None,
) -> float:
    """SR = (elapsed + expected time of the steps ahead on this host) / ET_host (module doc)."""
    if expected_s <= 0:
        return math.inf if elapsed_s > 0 else 1.0
    if progress is not None:
        remaining = (1.0 - min(max(progress, 0.0), 1.0)) * expected_s
    elif step_s is not None:
        # the host's expected number of steps is ET_host / step: those not yet done, at the host's step time
        remaining = max(0.0, expected_s - steps_done * step_s)
    else:
        remaining = max(0.0, expected_s - elapsed_s)
    return (elapsed_s + remaining) / expected_s


@dataclass
class HostEvidence:
    """One host's recent task and step times, relative to their job's mean finished task time."""

    tasks: deque[float]
    steps: deque[float]


@dataclass
class HostBook:
    """Per-host evidence pooled across jobs (module doc); ``window`` samples per host, ``prior`` weight.

    >>> book = HostBook()
    >>> book.add("n1", task_times=[1.8, 1.8, 1.8], step_times=[0.6] * 9)
    >>> round(book.expected_factor("n1"), 3)  # (3 * 1.8 + 2 * 1.0) / 5: shrunk toward the job mean
    1.48
    >>> book.expected_factor("unseen")
    1.0
    """

    window: int = 200
    prior: float = 2.0
    hosts: dict[str, HostEvidence] = field(default_factory=dict)

    def add(self, host: str, task_times: list[float], step_times: list[float]) -> None:
        """Record relative task and step times observed on ``host``."""
        evidence = self.hosts.get(host)
        if evidence is None:
            evidence = self.hosts[host] = HostEvidence(deque(maxlen=self.window), deque(maxlen=self.window))
        evidence.tasks.extend(t for t in task_times if t > 0)
        evidence.steps.extend(s for s in step_times if s > 0)

    def task_times(self, host: str) -> tuple[float, ...]:
        evidence = self.hosts.get(host)
        return tuple(evidence.tasks) if evidence else ()

    def step_times(self, host: str) -> tuple[float, ...]:
        evidence = self.hosts.get(host)
        return tuple(evidence.steps) if evidence else ()

    def expected_factor(self, host: str, local: tuple[float, ...] = ()) -> float:
        """ET_host in job means: the host's relative task times (book and ``local``) shrunk toward 1."""
        times = self.task_times(host) + local
        return (math.fsum(times) + self.prior) / (len(times) + self.prior)

    def step_factor(self, host: str, job_step: float, local: tuple[float, ...] = ()) -> float:
        """The host's mean step time in job means, shrunk toward ``job_step`` (the job's mean step)."""
        times = self.step_times(host) + local
        return (math.fsum(times) + self.prior * job_step) / (len(times) + self.prior)

    def pareto(self, host: str, local: tuple[float, ...] = (), min_samples: int = 3) -> Pareto | None:
        """The host's Pareto law of relative task times, by maximum likelihood (None: too few)."""
        return fit_pareto(self.task_times(host) + local, min_samples=min_samples)
